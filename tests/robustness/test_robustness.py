"""Tiny-scale verdicts over seeds: the verdict rule, the intervals, the cached fan-out."""

from __future__ import annotations

from functools import partial

import numpy as np
import pandas as pd
import pytest

from tokenbook.claims import Claim, TINY_VERDICTS, claims_frame, load_claims, save_claims
from tokenbook.robustness import (Expect, over_seeds, t_interval, values_by_claim,
                                  verdict_over_seeds, wilson_interval)

ON = [0.3, 0.4, 0.2, 0.5, 0.1]


@pytest.mark.parametrize("off, verdict", [
    ([-0.1, -0.2, -0.3, -0.2, -0.05], "detected"),
    ([-0.1, 0.02, -0.3, -0.2, -0.05], "detected"),       # 1 of 5 off: still detected
    ([0.1, 0.02, -0.3, -0.2, -0.05], "not specific"),    # 2 of 5 off: the test cannot tell
    (ON, "not specific"),
])
def test_verdict_follows_shares_on_and_off(off, verdict):
    assert verdict_over_seeds(Expect.greater(0.0), ON, off)["verdict"] == verdict


def test_not_detected_when_it_fails_with_the_mechanism_on():
    r = verdict_over_seeds(Expect.greater(0.0), [0.3, -0.1, 0.2, -0.5, 0.1], [-1] * 5)
    assert r["verdict"] == "not detected" and r["share_on"] == pytest.approx(0.6)


def test_undefined_seeds_count_as_not_holding_and_most_undefined_is_not_testable():
    r = verdict_over_seeds(Expect.greater(0.0), [0.3, np.nan, 0.2, 0.5, 0.1], [-1] * 5)
    assert r["verdict"] == "detected" and r["share_on"] == pytest.approx(0.8)
    r = verdict_over_seeds(Expect.greater(0.0), [np.nan, np.nan, np.nan, 0.5, 0.1], [-1] * 5)
    assert r["verdict"] == "not testable"


def test_fewer_than_five_seeds_is_not_a_verdict():
    r = verdict_over_seeds(Expect.greater(0.0), ON[:3], [-1] * 3)
    assert r["verdict"] == "not testable" and "5" in r["reason"]


def test_expectations():
    assert Expect.less(0).holds(-1) and not Expect.less(0).holds(0)
    assert Expect.at_least(0.5).holds(0.5) and not Expect.greater(0.5).holds(0.5)
    assert Expect.between(0, 1).holds(1) and not Expect.between(0, 1).holds(1.01)
    assert Expect.greater(0).holds(float("nan")) is None
    with pytest.raises(ValueError):
        Expect.between(1, 0)


def test_wilson_interval_matches_the_formula():
    lo, hi = wilson_interval(4, 5)
    z, p, n = 1.959964, 0.8, 5
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z / (1 + z * z / n) * np.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    assert (lo, hi) == pytest.approx((centre - half, centre + half), abs=1e-5)
    assert wilson_interval(0, 5)[0] == 0.0 and wilson_interval(5, 5)[1] == pytest.approx(1.0)


def test_t_interval_is_wider_than_normal_for_few_seeds():
    x = [1.0, 2.0, 3.0, 4.0, 5.0]
    lo, hi = t_interval(x)
    se = np.std(x, ddof=1) / np.sqrt(5)
    assert hi - 3.0 == pytest.approx(2.776445 * se, rel=1e-5)   # t_{0.975, 4}
    assert np.isnan(t_interval([1.0])[0])


def test_claim_over_seeds_records_the_columns_and_round_trips(tmp_path):
    c = Claim.over_seeds("x", "X rises", statistic="Δ (nats)", expect=Expect.greater(0),
                         values_on=ON, values_off=[-0.1] * 5, mechanism="on: planted; off: none",
                         paper="P §1")
    assert c.scale == "tiny" and c.verdict == "detected" and c.n_seeds == 5
    assert c.effect == pytest.approx(np.mean(ON)) and c.effect_ci[0] < c.effect < c.effect_ci[1]
    assert c.share_on == 1.0 and c.share_off == 0.0
    save_claims([c], tmp_path / "claims.json")
    row = load_claims(tmp_path / "claims.json")[0]
    assert row["verdict"] == "detected" and row["share_on_ci"][1] == pytest.approx(1.0)
    frame = claims_frame([c])
    assert {"on", "off", "effect"} <= set(frame.columns) and frame.loc[0, "on"].startswith("5/5")


def test_tiny_and_paper_verdicts_are_kept_apart():
    with pytest.raises(ValueError):
        Claim("x", "X", "s", 1.0, "> 0", "holds", scale="tiny")
    with pytest.raises(ValueError):
        Claim("x", "X", "s", 1.0, "> 0", "detected", scale="paper")
    assert set(TINY_VERDICTS) >= {"detected", "not specific"}
    c = Claim.not_testable_tiny("x", "X", statistic="s", why="the world fixes it")
    assert c.verdict == "not testable" and "world" in c.note


def test_paper_claims_carry_the_published_value():
    c = Claim.greater("x", "X", statistic="s", value=0.4, threshold=0.0, published=0.5)
    assert c.verdict == "holds" and c.published == 0.5 and "published" not in c.extra


# ---------------------------------------------------------------- the cached fan-out
CALLS: list = []


def _task(seed: int, mechanism: str, shift: float) -> dict:
    CALLS.append((seed, mechanism))
    rng = np.random.default_rng(seed)
    effect = shift if mechanism == "on" else 0.0
    return {"a": effect + rng.normal(0, 0.01), "b": float("nan")}


def test_over_seeds_caches_each_seed_and_resumes(tmp_path, monkeypatch):
    monkeypatch.setenv("TOKENBOOK_CACHE", str(tmp_path))
    CALLS.clear()
    task = partial(_task, shift=1.0)
    table = over_seeds(task, [0, 1, 2], kind="t-seed", params={"shift": 1.0}, progress=False)
    assert list(table.columns) == ["seed", "mechanism", "claim_id", "value"]
    assert len(CALLS) == 6
    on, off = values_by_claim(table, "a")
    assert len(on) == len(off) == 3 and min(on) > 0.9 and max(np.abs(off)) < 0.1
    again = over_seeds(task, [0, 1, 2, 3], kind="t-seed", params={"shift": 1.0}, progress=False)
    assert len(CALLS) == 8 and sorted(CALLS[6:]) == [(3, "off"), (3, "on")]  # only seed 3 new
    pd.testing.assert_frame_equal(again[again["seed"] < 3].reset_index(drop=True),
                                  table.reset_index(drop=True))


def test_over_seeds_rejects_bad_input(tmp_path, monkeypatch):
    monkeypatch.setenv("TOKENBOOK_CACHE", str(tmp_path))
    with pytest.raises(ValueError, match="empty"):
        over_seeds(partial(_task, shift=1.0), [], kind="t", params={}, progress=False)
    with pytest.raises(ValueError, match="mechanisms"):
        over_seeds(partial(_task, shift=1.0), [0], kind="t", params={}, mechanisms=("maybe",))
    with pytest.raises(TypeError, match="dict"):
        over_seeds(lambda seed, mechanism: 3.0, [0], kind="t2", params={}, progress=False)
    table = over_seeds(partial(_task, shift=1.0), [0], kind="t3", params={}, progress=False)
    with pytest.raises(ValueError, match="no values for claim 'zz'"):
        values_by_claim(table, "zz")


def test_over_seeds_on_a_client_matches_the_serial_table_and_groups_by_seed(tmp_path,
                                                                             monkeypatch):
    distributed = pytest.importorskip("distributed")
    monkeypatch.setenv("TOKENBOOK_CACHE", str(tmp_path / "serial"))
    serial = over_seeds(partial(_task, shift=1.0), [0, 1, 2], kind="t-grp", params={},
                        progress=False)
    monkeypatch.setenv("TOKENBOOK_CACHE", str(tmp_path / "dask"))
    with distributed.Client(processes=False, n_workers=1, threads_per_worker=2,
                            dashboard_address=":0") as client:
        submitted = []
        real_submit = client.submit

        def counting_submit(fn, *args, **kwargs):
            submitted.append(args[1])          # the (seed, mechanism) jobs of this task
            return real_submit(fn, *args, **kwargs)

        monkeypatch.setattr(client, "submit", counting_submit)
        grouped = over_seeds(partial(_task, shift=1.0), [0, 1, 2], kind="t-grp", params={},
                             client=client, progress=False, seed_per_task=True)
        assert submitted == [[(s, "on"), (s, "off")] for s in (0, 1, 2)]
        submitted.clear()
        monkeypatch.setenv("TOKENBOOK_CACHE", str(tmp_path / "dask-per-job"))
        per_job = over_seeds(partial(_task, shift=1.0), [0, 1, 2], kind="t-grp", params={},
                             client=client, progress=False)
        assert len(submitted) == 6 and all(len(group) == 1 for group in submitted)
    pd.testing.assert_frame_equal(grouped, serial)
    pd.testing.assert_frame_equal(per_job, serial)
