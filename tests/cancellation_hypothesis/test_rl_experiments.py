"""The chapter's experiment helpers: the paper-scale path on a local checkpoint folder and a
GSM8K fixture in the hub schema, and the curve summary statistics."""

import numpy as np
import pandas as pd
import pytest

from tokenbook.models.policy import build_policy, char_tokenizer
from tokenbook.cancellation_hypothesis.experiments import curve_summary, learning_curves, setup
from tokenbook.cancellation_hypothesis.grpo import GRPOConfig


def test_paper_path_runs_on_local_fixtures(tmp_path, monkeypatch):
    monkeypatch.setenv("TOKENBOOK_CACHE", str(tmp_path / "cache"))
    tok = char_tokenizer(alphabet="0123456789+-=;: Answer?abcdefghijklmnopqrstuvwxyz$.\\{}")
    model = build_policy(tok, hidden_size=32, num_layers=1, num_heads=2, max_positions=512)
    model.save_pretrained(tmp_path / "ckpt")
    tok.save_pretrained(tmp_path / "ckpt")
    pd.DataFrame({"question": [f"what is {i}+{i}?" for i in range(6)],
                  "answer": [f"{i}+{i} = {2 * i}\n#### {2 * i}" for i in range(6)]}
                 ).to_parquet(tmp_path / "train-00000-of-00001.parquet")
    S = setup(scale="paper", model_id=str(tmp_path / "ckpt"), dataset="gsm8k",
              data_files=tmp_path / "train-00000-of-00001.parquet", n_train=4, n_eval=2)
    assert len(S.train_problems) == 4 and len(S.eval_problems) == 2
    cfg = GRPOConfig(group_size=2, prompts_per_step=2, n_minibatches=2, max_new_tokens=4,
                     micro_batch_size=1)
    curves = learning_curves(S, {"query-preserved": cfg}, [0], steps=1, eval_every=1,
                             progress=False)
    assert curves["accuracy"].between(0, 1).all() and len(curves) == 2
    with pytest.raises(ValueError, match="seeds"):
        learning_curves(S, {"q": cfg}, "[0, 1]", steps=1)
    with pytest.raises(ValueError, match="model_id"):
        setup(scale="paper")


def test_curve_summary_pairs_seeds():
    rows = []
    for cond, bump in (("a", 0.1), ("b", 0.0)):
        for seed in range(3):
            for step, acc in ((0, 0.5), (4, 0.5 + bump + 0.01 * seed), (8, 0.6 + bump)):
                rows.append({"condition": cond, "seed": seed, "step": step, "accuracy": acc})
    summ = curve_summary(pd.DataFrame(rows), reference="b").set_index("condition")
    assert summ.loc["a", "auc_diff"] == pytest.approx(0.1)
    assert summ.loc["a", "diff_lo"] == pytest.approx(0.1)     # identical paired differences
    assert summ.loc["b", "auc_diff"] == 0.0
    assert summ.loc["a", "final"] == pytest.approx(0.7)


@pytest.mark.slow
def test_learning_curves_on_two_workers_equal_the_runs_in_this_process(tmp_path, monkeypatch):
    from tokenbook.cancellation_hypothesis.grpo import with_overrides

    cfg = GRPOConfig(group_size=2, prompts_per_step=2, n_minibatches=1, max_new_tokens=6)
    conds = {"a": cfg, "b": with_overrides(cfg, order="round_robin")}
    tables = []
    for n_workers in (0, 2):
        monkeypatch.setenv("TOKENBOOK_CACHE", str(tmp_path / f"cache{n_workers}"))
        S = setup(scale="tiny", seed=0, n_train=16, n_eval=4, hidden_size=16, num_layers=1,
                  sft_steps=3, progress=False)
        tables.append(learning_curves(S, conds, [0, 1], steps=2, eval_every=1, progress=False,
                                      n_workers=n_workers))
    assert len(tables[0]) == 2 * 2 * 3           # conditions × seeds × evaluations
    pd.testing.assert_frame_equal(tables[0], tables[1], rtol=1e-4)


def test_learning_curves_start_from_each_root_seeds_own_policy(tmp_path, monkeypatch):
    """seed_setup: every run starts from its root seed's setup (root_setup: the policy SFT'd
    with policy_seed_for(seed)), and the curve's cache key is that setup's."""
    from functools import partial

    import tokenbook.cancellation_hypothesis.experiments as E

    monkeypatch.setenv("TOKENBOOK_CACHE", str(tmp_path))
    used = []
    real = E._train_run

    def recording(s, cfg, seed, steps, eval_every, progress):
        used.append((seed, s.key["seed"]))
        return real(s, cfg, seed, steps, eval_every, progress)

    monkeypatch.setattr(E, "_train_run", recording)
    cfg = GRPOConfig(group_size=2, prompts_per_step=2, n_minibatches=1, max_new_tokens=4)
    small = dict(n_train=16, n_eval=4, hidden_size=16, num_layers=1, sft_steps=2,
                 progress=False)
    S = E.root_setup(0, **small)
    curves = learning_curves(S, {"a": cfg}, [0, 1], steps=1, eval_every=1, progress=False,
                             seed_setup=partial(E.root_setup, **small))
    assert used == [(0, E.policy_seed_for(0)), (1, E.policy_seed_for(1))]
    assert sorted(curves["seed"].unique()) == [0, 1]


def test_flip_excess_by_seed_reads_each_seeds_tables_per_sign(monkeypatch):
    """Per root seed and sign, the measured and first-order excess; the claim's statistic is
    the smaller sign's (here the correct rollouts' in seed 1, the failed ones' in seed 2)."""
    from tokenbook.cancellation_hypothesis import experiments as ex
    from tokenbook.cancellation_hypothesis.verdicts import first_order_flip_excess, flip_excess

    def tables(seed, **params):
        assert params == {"group_size": 8}
        adv = np.array([1., 1., -1., -1.])
        alone = np.array([1., 1., -1., -1.])                 # no flips alone
        full = (np.array([-1., 1., 1., -1.]) if seed == 1    # one of each sign flips
                else np.array([1., 1., 1., 1.]))              # only failed tokens flip
        grpo = pd.DataFrame({"advantage": adv, "delta": full})
        return {"grpo": grpo, "isolated": grpo.assign(delta=alone),
                "first_order_full": pd.DataFrame({"advantage": adv, "full": full,
                                                  "alone": alone})}

    monkeypatch.setattr(ex, "seed_tables", tables)
    by_seed = ex.flip_excess_by_seed([1, 2], group_size=8)
    assert list(by_seed.columns) == ["seed", "sign", "measured", "known"]
    got = by_seed.set_index(["seed", "sign"])
    assert got.loc[(1, "positive"), "measured"] == 0.5 and got.loc[(1, "negative"), "known"] == 0.5
    assert got.loc[(2, "positive"), "known"] == 0.0 and got.loc[(2, "negative"), "known"] == 1.0
    for seed in (1, 2):
        t = tables(seed, group_size=8)
        assert got.loc[seed, "measured"].min() == flip_excess(t["grpo"], t["isolated"])
        assert got.loc[seed, "known"].min() == first_order_flip_excess(t["first_order_full"])
