"""The peer-masking probe with the authors' design: random peer sets plus the top-scored set
(known answers on hand-made inputs and on the tiny batch), the exact linear shortcut against
the refit, and the per-bucket summary and power analysis on synthetic tables."""

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch

from tokenbook.cancellation_hypothesis import verdicts as V
from tokenbook.cancellation_hypothesis.dynamics import (PROBE_BUCKETS, peer_masking_probe,
                                                        peer_score, top_scored)

LIB = Path(__file__).resolve().parents[2] / "lib"


@pytest.fixture(scope="module")
def tiny(tiny_batch):
    torch.manual_seed(0)
    model, _, roll = tiny_batch(num_layers=1)
    return model, roll


def test_peer_score_known_answer():
    ent = np.array([0.0, 1.0, 2.0, 3.0])
    adv = np.array([1.0, -1.0, 2.0, -2.0])           # abs: 1, 1, 2, 2
    same = np.array([True, False, False, True])
    z_ent = (ent - 1.5) / np.sqrt(1.25)
    z_adv = np.array([-1.0, -1.0, 1.0, 1.0])
    np.testing.assert_allclose(peer_score(ent, adv, same), z_ent + z_adv + same)
    # z-scores over a reference subset (the loss tokens): mean and sd of tokens 0 and 1 only
    ref = np.array([True, True, False, False])
    got = peer_score(ent, adv, same, reference=ref)
    np.testing.assert_allclose(got, (ent - 0.5) / 0.5 + 0.0 + same)   # abs(adv) constant there
    with pytest.raises(ValueError, match="1-D of one length"):
        peer_score(ent, adv[:3], same)
    with pytest.raises(ValueError, match="reference"):
        peer_score(ent, adv, same, reference=np.zeros(4, bool))


def test_top_scored_picks_the_largest_scores():
    score = np.array([5.0, 9.0, 1.0, 7.0, 3.0, 9.0, 8.0, 0.0])
    pool = np.array([0, 2, 3, 5, 6, 7])               # 1 has the top score but is no peer
    np.testing.assert_array_equal(top_scored(pool, score, 3), [3, 5, 6])
    np.testing.assert_array_equal(top_scored(pool, score, 1), [5])
    tie = np.array([2.0, 2.0, 2.0, 1.0])
    np.testing.assert_array_equal(top_scored(np.arange(4), tie, 2), [0, 1])   # lower index
    with pytest.raises(ValueError, match="fewer than set_size"):
        top_scored(pool, score, 7)


def _pools(roll, t, set_size):
    """The test's own reading of the peer buckets of target ``t`` (independent of the
    library's code): same prompt, loss token, non-zero advantage, not the target."""
    cm = roll.completion_mask.bool()
    rows, cols = torch.nonzero(cm, as_tuple=True)
    tok = roll.input_ids[:, roll.prompt_len:][rows, cols].numpy()
    ent = roll.entropy[rows, cols].numpy().astype(float)
    adv = roll.advantages[rows].numpy().astype(float)
    pid = roll.prompt_ids[rows].numpy()
    in_loss = roll.loss_mask.bool()[rows, cols].numpy()
    hi = ent > np.quantile(ent, 0.8)
    ok = (pid == pid[t]) & in_loss & (adv != 0)
    ok[t] = False
    score = ((ent - ent[in_loss].mean()) / ent[in_loss].std()
             + (np.abs(adv) - np.abs(adv[in_loss]).mean()) / np.abs(adv[in_loss]).std()
             + (tok == tok[t]))
    pools = {}
    for same, high, sign in PROBE_BUCKETS:
        pool = np.flatnonzero(ok & ((tok == tok[t]) == same) & (hi == high)
                              & (np.sign(adv) == sign))
        if pool.size >= set_size:
            pools[(same, high, "positive" if sign > 0 else "negative")] = pool
    return pools, score


def test_probe_has_random_sets_and_the_top_scored_set(tiny):
    model, roll = tiny
    n_sets, size = 3, 2
    probe = peer_masking_probe(model, roll, lr=0.05, n_targets=2, n_sets=n_sets,
                               set_size=size, seed=0, progress=False)
    assert probe["target"].nunique() == 2
    for t, g in probe.groupby("target"):
        pools, score = _pools(roll, t, size)
        filled = g.groupby(["same_token", "high_entropy", "peer_adv"])
        assert set(filled.groups) == set(pools)             # every filled bucket, no other
        for key, b in filled:
            assert len(b) == n_sets + 1
            assert sorted(b["set"]) == list(range(n_sets + 1))
            top = b[b["top_scored"]]
            assert len(top) == 1 and top["set"].iloc[0] == n_sets
            pool = pools[key]
            best = np.sort(pool[np.argsort(-score[pool], kind="stable")[:size]])
            np.testing.assert_array_equal(top["peers"].iloc[0], best)
            assert top["peer_score"].iloc[0] == pytest.approx(score[best].mean(), rel=1e-5)
            for peers in b["peers"]:
                assert len(set(peers)) == size and set(peers) <= set(pool.tolist())
            # no random set beats the top-scored one on the authors' score
            rand = b[~b["top_scored"]]
            assert (rand["peer_score"] <= top["peer_score"].iloc[0] + 1e-6).all()
    again = peer_masking_probe(model, roll, lr=0.05, n_targets=2, n_sets=n_sets,
                               set_size=size, seed=0, progress=False)
    pd.testing.assert_frame_equal(probe, again)             # seeded
    other = peer_masking_probe(model, roll, lr=0.05, n_targets=2, n_sets=n_sets,
                               set_size=size, seed=1, progress=False)
    assert not probe[["target", "peers"]].astype(str).equals(
        other[["target", "peers"]].astype(str))


def test_linear_shortcut_equals_redoing_the_masked_step(tiny):
    model, roll = tiny
    kw = dict(lr=0.05, n_targets=2, n_sets=1, set_size=3, seed=3, progress=False)
    lin = peer_masking_probe(model, roll, method="linear", **kw)
    refit = peer_masking_probe(model, roll, method="refit", **kw)
    assert len(lin) == len(refit) > 0
    assert lin["tau"].abs().max() > 1e-4                     # the probe moves the target
    np.testing.assert_allclose(lin["tau"], refit["tau"], atol=2e-6)
    np.testing.assert_allclose(lin["delta_mask"], refit["delta_mask"], atol=2e-6)
    assert "tau_first_order" not in refit.columns        # the refit holds no gradients
    with pytest.raises(ValueError, match="method"):
        peer_masking_probe(model, roll, method="exact", **kw)
    with pytest.raises(ValueError, match="n_sets"):
        peer_masking_probe(model, roll, **{**kw, "n_sets": -1})


@pytest.mark.slow
def test_two_processes_give_the_same_probe(tiny, monkeypatch):
    """The later half of the sets in a second process (cut inside a prompt's sets): the
    same table, bit for bit, in the same order; and the same again when the second process
    cannot start."""
    from tokenbook.cancellation_hypothesis import dynamics

    model, roll = tiny
    kw = dict(lr=0.05, n_targets=40, n_sets=1, set_size=2, seed=0, progress=False)
    one = peer_masking_probe(model, roll, **kw)
    assert one["prompt_id"].nunique() >= 2                  # something to split
    two = peer_masking_probe(model, roll, processes=2, **kw)
    pd.testing.assert_frame_equal(one, two)

    def no_pool():
        raise OSError("no second process here")

    monkeypatch.setattr(dynamics, "_probe_pool", no_pool)
    pd.testing.assert_frame_equal(one, peer_masking_probe(model, roll, processes=2, **kw))
    with pytest.raises(ValueError, match="processes must be 1 or 2"):
        peer_masking_probe(model, roll, processes=3, **kw)


@pytest.mark.slow
def test_an_interrupt_ends_the_second_process_without_a_traceback(tmp_path):
    """A kernel's shutdown interrupts its whole process group: the idle second process ends at
    once (exit 128 + SIGINT) and prints nothing, nor does the interpreter's exit."""
    script = tmp_path / "interrupt.py"
    script.write_text(textwrap.dedent("""
        import os, signal, time
        from tokenbook.cancellation_hypothesis import dynamics
        if __name__ == "__main__":
            pool = dynamics._probe_pool()
            assert pool.submit(os.getpid).result() != os.getpid()
            (pid, process), = pool._processes.items()
            os.kill(pid, signal.SIGINT)
            process.join(timeout=30)
            # the executor's own thread may reap the process first: its exit code then
            # reaches the shared process object a moment later
            deadline = time.monotonic() + 30
            while process.exitcode is None and time.monotonic() < deadline:
                time.sleep(0.05)
            print("exit", process.exitcode)
    """))
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                          timeout=120, env={**os.environ, "PYTHONPATH": str(LIB)})
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["exit", str(128 + signal.SIGINT)]
    assert done.stderr == ""


def _synthetic(n_targets=30, planted=0.5, seed=0, n_sets=4):
    """A probe table whose same/high/positive bucket has mean τ ``planted`` (sd 0.2 between
    targets) and every other bucket per-target means exactly symmetric around 0; the
    top-scored set carries τ = 1 in every bucket."""
    rng = np.random.default_rng(seed)
    rows = []
    for t in range(n_targets):
        for same, high, sign in PROBE_BUCKETS:
            adv = "positive" if sign > 0 else "negative"
            if (same, high, adv) == (True, True, "positive"):
                base = planted + rng.normal(0, 0.2)
            else:
                base = 0.3 * (1 if t % 2 else -1)         # ±0.3: mean exactly 0
            for s in range(n_sets):
                rows.append({"target": t, "same_token": same, "high_entropy": high,
                             "peer_adv": adv, "set": s, "top_scored": False, "tau": base})
            rows.append({"target": t, "same_token": same, "high_entropy": high,
                         "peer_adv": adv, "set": n_sets, "top_scored": True, "tau": 1.0})
    return pd.DataFrame(rows)


def test_bucket_summary_ci_excludes_zero_only_where_planted():
    s = V.probe_bucket_summary(_synthetic(), seed=0).set_index(V.PROBE_KEYS)
    assert len(s) == 8 and (s["n_targets"] == 30).all() and (s["n_sets"] == 120).all()
    planted = s.loc[(True, True, "positive")]
    assert planted["excludes_zero"] and planted["tau_lo"] > 0.3
    assert planted["mean_tau"] == pytest.approx(0.5, abs=0.1)
    rest = s.drop(index=(True, True, "positive"))
    assert not rest["excludes_zero"].any()
    np.testing.assert_allclose(rest["mean_tau"], 0.0, atol=1e-12)   # top rows not mixed in
    np.testing.assert_allclose(s["top_tau"], 1.0)
    none = V.probe_bucket_summary(_synthetic(planted=0.0), seed=0)
    assert none["excludes_zero"].sum() <= 1        # planted 0: only chance (sd 0.2, n 30)
    # pooled seeds: units are seed:target, so two seeds double the targets
    two = pd.concat([_synthetic().assign(seed=0), _synthetic(seed=1).assign(seed=1)])
    assert (V.probe_bucket_summary(two)["n_targets"] == 60).all()


def test_probe_gap_uses_random_sets_only():
    p = _synthetic(planted=2.0)
    g = V.probe_gap(p)
    assert g == pytest.approx((2.0 + 0.3) / 2 - 0.3, abs=0.1)   # same/high mean abs τ − 0.3
    huge = p.copy()
    other = ~huge["same_token"] & huge["top_scored"]
    huge.loc[other, "tau"] = 100.0                   # top-scored rows must not enter the gap
    assert V.probe_gap(huge) == pytest.approx(g)
    with pytest.raises(ValueError, match="one label per probe row"):
        V.probe_gap(p, np.array(["same/high"]))


def test_probe_power_known_answer():
    p = _synthetic(n_targets=30)
    pw = V.probe_power(p).set_index("name")
    assert len(pw) == 9 and (pw["unit"] == "targets").all()
    per = (p[~p["top_scored"] & p["same_token"] & p["high_entropy"]
             & (p["peer_adv"] == "positive")].groupby("target")["tau"].mean())
    row = pw.loc["same/high/positive"]
    assert row["sd"] == pytest.approx(per.std(ddof=1))
    assert row["effect"] == pytest.approx(per.mean())
    assert row["n_needed"] == V.required_n(per.std(ddof=1), per.mean())
    assert row["n_now"] == 30 and row["n_per_seed"] == 30
    assert row["updates_needed"] == row["n_needed"] * 8 * (4 + 1)
    no_effect = pw.loc["diff/low/negative"]                      # mean 0: no count suffices
    assert abs(no_effect["effect"]) < 1e-12
    assert np.isnan(no_effect["n_needed"]) or no_effect["n_needed"] == np.inf
    two = pd.concat([p.assign(seed=0), p.assign(seed=1)])
    assert (V.probe_power(two)["n_per_seed"] == 30).all()


def test_probe_figure_shows_the_top_scored_set():
    from tokenbook.cancellation_hypothesis import figures as figs

    fig = figs.plot_probe(_synthetic(n_targets=6))
    ax = fig.axes[0]
    assert "nats" in ax.get_xlabel()
    # the legend sits in the figure's bottom margin, not over the axis
    assert ax.get_legend() is None and len(fig.legends) == 1
    labels = [t.get_text() for t in fig.legends[0].get_texts()]
    assert sum("top-scored" in x for x in labels) == 2 and len(labels) == 4


def test_first_order_tau_is_the_small_step_limit_of_the_probe(tiny):
    """The peer-masking claim's known answer: each set's τ to first order in the step is what
    the probe measures as the step shrinks (the gap falls like η², relative to τ like η), and
    it is not the same number for every set (it reads the peers' gradients)."""
    model, roll = tiny
    kw = dict(n_targets=2, n_sets=2, set_size=3, seed=3, progress=False)
    errors = []
    for lr in (0.03, 0.01):
        probe = peer_masking_probe(model, roll, lr=lr, **kw)
        fo, tau = probe["tau_first_order"].to_numpy(), probe["tau"].to_numpy()
        assert np.unique(np.round(fo / lr, 8)).size > 2
        assert np.corrcoef(fo, tau)[0, 1] > 0.99
        errors.append(np.abs(tau - fo).max() / np.abs(fo).max())
    assert errors[0] < 0.08 and errors[1] < errors[0] / 2
