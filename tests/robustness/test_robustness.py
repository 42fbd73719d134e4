"""Tiny-scale verdicts over seeds: the verdict rule, the intervals, the cached fan-out."""

from __future__ import annotations

from functools import partial

import numpy as np
import pandas as pd
import pytest

from tokenbook.claims import Claim, TINY_VERDICTS, load_claims, save_claims
from tokenbook.scorecard import claims_frame
from tokenbook.robustness import over_seeds, values_by_claim
from tokenbook.verdicts import Expect

ON = [0.3, 0.4, 0.2, 0.5, 0.1, 0.35, 0.25, 0.45]


def test_claim_over_seeds_records_the_columns_and_round_trips(tmp_path):
    off = [-0.1, -0.05, -0.2, 0.0, -0.1, -0.02, -0.15, 0.05]
    c = Claim.over_seeds("x", "X rises", statistic="Δ (nats)", expect=Expect.greater(0),
                         values_on=ON, values_off=off, mechanism="on: planted; off: none",
                         paper="P §1", computed_by=values_by_claim)
    assert c.scale == "tiny" and c.verdict == "detected" and c.n_root_seeds == 8
    assert c.on_value == pytest.approx(np.mean(ON)) and c.on_ci[0] < c.on_value < c.on_ci[1]
    assert c.paired_effect == pytest.approx(np.mean(np.subtract(ON, off)))
    assert c.share_on == 1.0 and c.share_off == pytest.approx(1 / 8)
    assert c.computed_by == "tokenbook.robustness:values_by_claim"
    assert 0.0 <= c.replication <= 1.0
    save_claims([c], tmp_path / "claims.json")
    row = load_claims(tmp_path / "claims.json")[0]
    assert row["verdict"] == "detected" and row["paired_ci"][0] > 0
    assert {"on_value", "off_value", "paired_effect", "n_root_seeds", "known_answer",
            "manipulation", "computed_by", "replication"} <= set(row)
    frame = claims_frame([c])
    assert {"on", "off"} <= set(frame.columns) and frame.loc[0, "on"].startswith("8/8")


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
