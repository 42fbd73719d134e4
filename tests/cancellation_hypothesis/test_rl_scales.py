"""Several policy sizes (issue #15, item 7): the per-size sweep of the cheap token-level claims,
its input checks, and the paper-scale evaluation-suite path on a verl-format fixture."""

from dataclasses import replace

import numpy as np
import pandas as pd
import pytest

from tokenbook.models.policy import char_tokenizer
from tokenbook.cancellation_hypothesis import dynamics as dyn
from tokenbook.cancellation_hypothesis import experiments as E
from tokenbook.cancellation_hypothesis import verdicts as V
from tokenbook.seeds import derive_seed

# a tiny world that trains in seconds; the reward is replaced (below) so that groups are mixed
SMALL = dict(n_train=64, n_eval=8, hidden_size=32, num_layers=1, sft_steps=5, sft_lr=3e-3,
             policy_seed=0, group_size=4, analysis_prompts=4, max_new_tokens=12,
             temperature=1.0, analysis_lr=0.05, probe_targets=1, probe_sets=1,
             probe_set_size=1, value_per_cell=1, value_continuations=1)


def _parity_reward(text, problem):
    return float(len(text) % 2)


@pytest.fixture()
def mixed_world(tmp_path, monkeypatch):
    """The tiny setup with a reward that mixes every group (completion length parity), in an
    empty cache."""
    monkeypatch.setenv("TOKENBOOK_CACHE", str(tmp_path / "cache"))
    real = E.setup

    def fake(**kw):
        return replace(real(**kw), reward_fn=_parity_reward)

    monkeypatch.setattr(E, "setup", fake)
    return fake


def test_policy_sizes_labels_and_errors():
    sizes = E.policy_sizes([[32, 2], (48, 2), [64, 3]])
    assert [s.label for s in sizes] == ["32×2", "48×2", "64×3"]
    assert (sizes[2].hidden_size, sizes[2].num_layers, sizes[2].model_id) == (64, 3, None)
    paper = E.policy_sizes(["Qwen/Qwen3-1.7B", "Qwen/Qwen3-4B", "/ckpt/my-model/"],
                           scale="paper")
    assert [s.label for s in paper] == ["Qwen3-1.7B", "Qwen3-4B", "my-model"]
    assert paper[0].model_id == "Qwen/Qwen3-1.7B"
    with pytest.raises(ValueError, match=r"list of \[hidden_size, num_layers\] pairs"):
        E.policy_sizes("64x2")
    with pytest.raises(ValueError, match="pairs"):
        E.policy_sizes([])
    with pytest.raises(ValueError, match=r"sizes\[1\].*pair"):
        E.policy_sizes([[32, 2], 64])
    with pytest.raises(ValueError, match=r"sizes\[0\].*pair"):
        E.policy_sizes([[32, 2, 1]])
    with pytest.raises(ValueError, match="multiple of the tiny policy's 4 attention heads"):
        E.policy_sizes([[30, 2]])
    with pytest.raises(ValueError, match="≥ 1"):
        E.policy_sizes([[32, 0]])
    with pytest.raises(TypeError, match="whole number"):
        E.policy_sizes([[32.5, 2]])
    with pytest.raises(ValueError, match=r"\['32×2'\] given more than once"):
        E.policy_sizes([[32, 2], [32, 2]])
    with pytest.raises(ValueError, match="model id"):
        E.policy_sizes([[32, 2]], scale="paper")
    with pytest.raises(ValueError, match="scale"):
        E.policy_sizes([[32, 2]], scale="huge")


def test_tiny_parameter_count_is_the_qwen2_formula():
    # untied embedding and head (2·V·h), final norm (h), per layer: q/k/v with bias
    # (3h² + 3h), o (h²), SwiGLU MLP with intermediate 4h (12h²), two norms (2h)
    V_ = len(char_tokenizer())
    for h, n in ((32, 1), (48, 2), (64, 2)):
        assert E.tiny_policy_params(h, n) == 2 * V_ * h + h + n * (16 * h * h + 5 * h)


@pytest.mark.slow
def test_scale_sweep_known_values(mixed_world, monkeypatch):
    sizes = [[16, 1], [32, 1]]          # 32×1 is SMALL's own size: read from seed_tables
    table = E.scale_sweep(sizes, [0, 1], progress=False, **SMALL)
    assert list(table.columns) == ["size", "hidden_size", "num_layers", "model_id", "n_params",
                                   "seed", "mechanism", "claim_id", "value"]
    assert list(pd.unique(table["size"])) == ["16×1", "32×1"]
    ids = {*E.SCALE_CLAIMS, E.KNOWN_FLIP, "flip-both-signs", "describe:template-mean-p",
           "describe:template-entropy", "describe:flip-excess-output-layer",
           "describe:flip-sign-agreement", E.MANIPULATION_TEMPLATE, E.BALANCE_FLIP,
           E.BALANCE_TEMPLATE, E.KNOWN_TEMPLATE, E.MANIPULATION_FLIP}
    assert set(table["claim_id"]) == ids
    assert len(table) == 2 * 2 * 2 * len(ids)
    # parameter counts are the policies' own
    for label, h in (("16×1", 16), ("32×1", 32)):
        assert set(table.loc[table["size"] == label, "n_params"]) == \
            {E.tiny_policy_params(h, 1)}
    # the 16×1 values recomputed by hand from its policy and the seed's rollout stream
    S = mixed_world(scale="tiny", seed=0, n_train=64, n_eval=8, hidden_size=16, num_layers=1,
                    sft_steps=5, sft_lr=3e-3, progress=False)
    cfg = E.GRPOConfig(group_size=4, prompts_per_step=4, max_new_tokens=12, temperature=1.0)
    for seed in (0, 1):
        policy, roll = E.analysis_rollouts(S, cfg, n_prompts=4,
                                           seed=derive_seed(seed, "rollouts"))
        grpo = dyn.token_dynamics(policy, roll, lr=0.05)
        psr = dyn.token_dynamics(policy, dyn.with_estimator(roll, 4, "psr"), lr=0.05)
        iso = dyn.token_dynamics_isolated(policy, roll, lr=0.05)
        classes = V.permute_within(grpo["class"].to_numpy(), None,
                                   derive_seed(seed, "null", "template", 0))
        fo = dyn.first_order_prediction(policy, roll, lr=1e-3)
        ff = dyn.first_order_full(policy, roll, lr=0.05)
        ffp = dyn.first_order_full(policy, dyn.with_estimator(roll, 4, "psr"), lr=0.05)
        first = (grpo.assign(delta=ff["full"].to_numpy()),
                 psr.assign(delta=ffp["full"].to_numpy()))
        want = {("on", "flip-excess"): V.flip_excess(grpo, iso),
                ("off", "flip-excess"): 0.0,
                ("on", E.KNOWN_FLIP): V.first_order_flip_excess(ff),
                ("off", E.KNOWN_FLIP): 0.0,
                ("on", E.MANIPULATION_FLIP): V.coupling_dominance(ff),
                ("off", E.MANIPULATION_FLIP): 0.0,
                ("on", "describe:flip-excess-output-layer"): V.predicted_flip_excess(fo),
                ("on", "describe:flip-sign-agreement"): V.sign_agreement(grpo, ff, "full"),
                ("off", "describe:flip-sign-agreement"): V.sign_agreement(iso, ff, "alone"),
                ("on", E.BALANCE_FLIP): V.scored_tokens(grpo),
                ("off", E.BALANCE_FLIP): V.scored_tokens(iso),
                ("on", "flip-both-signs"): V.flip_balance(grpo),
                ("off", "flip-both-signs"): V.flip_balance(iso),
                ("on", "template-less-under-grpo"): V.template_share_gap(grpo, psr),
                ("off", "template-less-under-grpo"): V.template_share_gap(grpo, psr, classes),
                ("on", E.KNOWN_TEMPLATE): V.template_share_gap(*first),
                ("off", E.KNOWN_TEMPLATE): V.template_share_gap(*first, classes)}
        got = table[(table["size"] == "16×1") & (table["seed"] == seed)]
        for (mech, cid), v in want.items():
            row = got[(got["mechanism"] == mech) & (got["claim_id"] == cid)]["value"]
            assert row.item() == pytest.approx(v, abs=1e-6, nan_ok=True)
        assert np.isfinite(want[("on", "flip-both-signs")])
        assert np.isfinite(want[("on", "flip-excess")])
    # the chapter's own size equals the seed sweep's values for the same claims
    sweep = pd.DataFrame([dict(seed=s, mechanism=m, claim_id=k, value=v) for s in (0, 1)
                      for m in ("on", "off")
                      for k, v in E.seed_claims(s, m, **SMALL).items()])
    for cid in E.SCALE_CLAIMS:
        on, off = E.scale_values(table, "32×1", cid)
        ref = sweep[sweep["claim_id"] == cid].sort_values("seed")
        assert on == pytest.approx(ref[ref["mechanism"] == "on"]["value"].tolist(), nan_ok=True)
        assert off == pytest.approx(ref[ref["mechanism"] == "off"]["value"].tolist(),
                                    nan_ok=True)
    # cached: a second sweep, with n_workers=2, reads the same values; the jobs it hands to
    # the workers (run here: the fake reward is local) are one per (seed, size) but the
    # chapter's own size (read from seed_tables), and the probes' one per seed
    real, calls = E.map_ordered, []

    def recording(task, items, **kw):
        calls.append((list(items), kw["n_workers"]))
        return real(task, items, **{**kw, "n_workers": 0})

    monkeypatch.setattr(E, "map_ordered", recording)  # the name scale_sweep calls
    again = E.scale_sweep(sizes, [0, 1], progress=False, n_workers=2, **SMALL)
    pd.testing.assert_frame_equal(table, again)
    assert [(s, size.label) for s, size in calls[0][0]] == [(0, "16×1"), (1, "16×1")]
    assert calls[0][1] == 2
    probe = E.probe_tables([0, 1], n_workers=2, **SMALL)
    assert calls[1] == ([0, 1], 2)
    pd.testing.assert_frame_equal(probe, E.probe_tables([0, 1], **SMALL))


@pytest.mark.slow
def test_every_root_seed_trains_its_own_policy(mixed_world, monkeypatch):
    """policy_seed=None (the default): each root seed's tables and size sweep start from the
    policy SFT'd with policy_seed_for(root), and that policy is shared by the seed's tables."""
    seen = []

    def recording(**kw):
        seen.append(kw["seed"])
        return mixed_world(**kw)

    monkeypatch.setattr(E, "setup", recording)
    params = {**SMALL, "policy_seed": None}
    E.seed_tables(0, **params)
    E.seed_tables(1, **params)
    E.scale_tables(0, E.policy_sizes([[16, 1]])[0], **{k: v for k, v in params.items()
                                                         if k in ("n_train", "n_eval",
                                                                  "sft_steps", "sft_lr",
                                                                  "policy_seed")})
    assert seen == [E.policy_seed_for(0), E.policy_seed_for(1), E.policy_seed_for(0)]
    assert E.policy_seed_for(0) != E.policy_seed_for(1) == derive_seed(1, "policy")
    # the root seed's setup is that policy's; at the paper scale the data seed is kept
    assert E.root_setup(1, n_train=64, n_eval=8, hidden_size=32, num_layers=1, sft_steps=5,
                        progress=False).key["seed"] == E.policy_seed_for(1)


def test_scale_sweep_input_errors(tmp_path, monkeypatch):
    monkeypatch.setenv("TOKENBOOK_CACHE", str(tmp_path / "cache"))
    with pytest.raises(TypeError, match=r"unknown parameter\(s\) \['hidden'\]"):
        E.scale_sweep([[32, 1]], [0], hidden=32)
    with pytest.raises(ValueError, match="pairs"):
        E.scale_sweep("32x1", [0])
    with pytest.raises(ValueError, match="seeds"):
        E.scale_sweep([[32, 1]], [])
    table = pd.DataFrame({"size": ["a"], "seed": [0], "mechanism": ["on"], "claim_id": ["c"],
                          "value": [1.0]})
    with pytest.raises(ValueError, match=r"no size 'b'.*\['a'\]"):
        E.scale_values(table, "b", "c")
    with pytest.raises(ValueError, match="no values for claim 'd'"):
        E.scale_values(table, "a", "d")


# ----------------------------------------------------------------------------- paper: the suite
def test_paper_scale_takes_the_first_order_rollout_by_rollout(paper_files, monkeypatch):
    """At paper scale the full batch's steps and first-order Δ are taken one rollout at a time
    (at once the Δ did not fit a 139 GiB GPU at Qwen3-1.7B's size); tiny scale keeps its one
    pass."""
    seen = []

    def spy(name):
        real = getattr(dyn, name)

        def call(*a, **kw):
            seen.append((name, kw.get("rows_per_pass")))
            return real(*a, **kw)
        return call

    for name in ("first_order_full", "token_dynamics"):
        monkeypatch.setattr(dyn, name, spy(name))
    size = E.policy_sizes([str(paper_files / "ckpt")], scale="paper")[0]
    E.scale_tables(0, size, scale="paper", n_train=4, n_eval=1, group_size=2, analysis_prompts=2,
                   max_new_tokens=3, dataset="dapo", data_files=paper_files / "dapo.parquet")
    calls = [("token_dynamics", 2), ("first_order_full", 2)]   # GRPO and PSR each
    assert sorted(seen) == sorted((n, 1) for n, k in calls for _ in range(k))
    seen.clear()
    E.scale_tables(0, E.policy_sizes([[32, 1]])[0], n_train=16, n_eval=2, sft_steps=2,
                   group_size=2, analysis_prompts=2, max_new_tokens=3)
    assert sorted(seen) == sorted((n, None) for n, k in calls for _ in range(k))


def test_setup_reads_the_suite_and_dapo(paper_files):
    S = E.setup(scale="paper", model_id=str(paper_files / "ckpt"), dataset="dapo",
                data_files=paper_files / "dapo.parquet", n_train=5, n_eval=1,
                eval_files=paper_files / "valid.all.parquet")
    # the curves keep a held-out split of the training data; the suite is read apart
    assert len(S.train_problems) == 5 and len(S.eval_problems) == 1
    assert [p.source for p in S.suite] == ["aime"] * 4 + ["math"] * 3
    assert S.suite[0].answer == "4" and S.key["eval_files"] == \
        [str(paper_files / "valid.all.parquet")]
    held = E.setup(scale="paper", model_id=str(paper_files / "ckpt"), dataset="dapo",
                   data_files=paper_files / "dapo.parquet", n_train=4, n_eval=2)
    assert len(held.train_problems) == 4 and len(held.eval_problems) == 2
    assert "eval_files" not in held.key and held.suite == []
    with pytest.raises(ValueError, match="paper-scale option"):
        E.setup(scale="tiny", eval_files=paper_files / "valid.all.parquet")
    with pytest.raises(ValueError, match="evaluation suite"):
        E.suite_accuracy(held)


def test_suite_accuracy_samples_one_response_per_row(paper_files, monkeypatch):
    S = E.setup(scale="paper", model_id=str(paper_files / "ckpt"), dataset="dapo",
                data_files=paper_files / "dapo.parquet", n_train=2, n_eval=1,
                eval_files=paper_files / "valid.all.parquet")
    # the real tiny policy: runs on CPU, one row per benchmark, deterministic in the seed
    table = E.suite_accuracy(S, max_new_tokens=4, seed=3, batch_size=3)
    assert list(table["benchmark"]) == ["aime", "math", "all", "macro"]
    assert table.set_index("benchmark").loc["aime", ["n_rows", "n_problems", "k"]].tolist() \
        == [4, 1, 4]
    assert table["accuracy"].between(0, 1).all()
    pd.testing.assert_frame_equal(table, E.suite_accuracy(S, max_new_tokens=4, seed=3,
                                                          batch_size=3))
    # known answer: a sampler whose responses are fixed gives avg@4 = 2/4 on aime, 2/3 on math

    calls = []
    answers = iter(["\\boxed{4}", "\\boxed{5}", "\\boxed{4}", "no", "\\boxed{1}",
                    "\\boxed{2}", "\\boxed{9}"])

    class Out:
        def __init__(self, texts):
            self.texts = texts

    def fake_sample(model, tok, prompts, *, n, temperature, max_new_tokens, seed,
                    greedy=False):
        calls.append(dict(n=n, temperature=temperature, greedy=greedy, seed=seed,
                          rows=len(prompts), max_new_tokens=max_new_tokens))
        return Out([next(answers) for _ in prompts])

    monkeypatch.setattr(E, "sample", fake_sample)  # the name suite_accuracy calls
    t = E.suite_accuracy(S, model=object(), max_new_tokens=7, temperature=0.6, seed=1,
                         batch_size=3).set_index("benchmark")
    assert t.loc["aime", "accuracy"] == pytest.approx(2 / 4)
    assert t.loc["math", "accuracy"] == pytest.approx(2 / 3)   # golds 1, 2, 3: 9 is wrong
    assert t.loc["macro", "accuracy"] == pytest.approx((2 / 4 + 2 / 3) / 2)
    assert [c["rows"] for c in calls] == [3, 3, 1]            # every row once, in order
    assert all(c["n"] == 1 and c["temperature"] == 0.6 and not c["greedy"]
               and c["max_new_tokens"] == 7 for c in calls)
    assert [c["seed"] for c in calls] == [derive_seed(1, "suite", b) for b in range(3)]
    with pytest.raises(ValueError, match="temperature"):
        E.suite_accuracy(S, model=object(), temperature=0.0)


def test_learning_curves_score_each_final_policy_on_the_suite(paper_files, monkeypatch):
    """suite=True: every run's *trained* policy is scored once on the suite (cached with the
    curve); suite_results reads the same tables without training again."""
    from tokenbook.cancellation_hypothesis.grpo import GRPOConfig

    S = E.setup(scale="paper", model_id=str(paper_files / "ckpt"), dataset="dapo",
                data_files=paper_files / "dapo.parquet", n_train=4, n_eval=2,
                eval_files=paper_files / "valid.all.parquet")
    S = replace(S, reward_fn=_parity_reward)    # mixed groups: every run updates
    cfg = GRPOConfig(group_size=4, prompts_per_step=2, max_new_tokens=4, lr=0.5)
    scored = []
    real = E.suite_accuracy

    def spy(s, *, model, **kw):
        scored.append(sum(float(p.detach().abs().sum()) for p in model.parameters()))
        return real(s, model=model, **kw)

    monkeypatch.setattr(E, "suite_accuracy", spy)
    conds = {"a": cfg, "b": replace(cfg, order="round_robin")}
    curves = E.learning_curves(S, conds, [0, 1], steps=1, eval_every=1, progress=False,
                               suite=True)
    assert set(map(tuple, curves[["condition", "seed"]].drop_duplicates().values)) == \
        {("a", 0), ("a", 1), ("b", 0), ("b", 1)}
    assert len(scored) == 4
    start = sum(float(p.abs().sum()) for p in S.load()[0].parameters())
    assert all(abs(w - start) > 0 for w in scored)          # trained, not the starting policy
    table = E.suite_results(S, conds, [0, 1], steps=1, eval_every=1, progress=False)
    assert len(scored) == 4                                  # read from the cache
    assert set(table["benchmark"]) == {"aime", "math", "all", "macro"}
    assert len(table) == 4 * 4 and table["accuracy"].between(0, 1).all()
    # the curves alone are cached apart and do not need the suite
    plain = E.learning_curves(S, {"a": cfg}, [0], steps=1, eval_every=1, progress=False)
    assert list(plain["step"]) == [0, 1]
    held = E.setup(scale="paper", model_id=str(paper_files / "ckpt"), dataset="dapo",
                   data_files=paper_files / "dapo.parquet", n_train=4, n_eval=2)
    with pytest.raises(ValueError, match="evaluation suite"):
        E.learning_curves(held, {"a": cfg}, [0], steps=1, suite=True)

