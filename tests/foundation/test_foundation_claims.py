"""Claims: verdicts are computed, claims.json has a schema, the scorecard gathers the runs."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest

from tokenbook import claims as C
from tokenbook.book import gather_scorecard, scorecard_markdown, write_scorecard
from tokenbook.cache import write_json_atomic


@pytest.mark.parametrize("make,value,verdict", [
    (lambda v: C.Claim.greater("a", "x", statistic="s", value=v), 0.1, "holds"),
    (lambda v: C.Claim.greater("a", "x", statistic="s", value=v), 0.0, "does not hold"),
    (lambda v: C.Claim.greater("a", "x", statistic="s", value=v, threshold=1), 0.5,
     "does not hold"),
    (lambda v: C.Claim.less("a", "x", statistic="s", value=v), -1e-9, "holds"),
    (lambda v: C.Claim.less("a", "x", statistic="s", value=v), 0.0, "does not hold"),
    (lambda v: C.Claim.at_least("a", "x", statistic="s", value=v, threshold=0.8), 0.8, "holds"),
    (lambda v: C.Claim.at_least("a", "x", statistic="s", value=v, threshold=0.8), 0.79,
     "does not hold"),
    (lambda v: C.Claim.between("a", "x", statistic="s", value=v, low=0, high=1), 1.0, "holds"),
    (lambda v: C.Claim.between("a", "x", statistic="s", value=v, low=0, high=1), 1.01,
     "does not hold"),
    (lambda v: C.Claim.greater("a", "x", statistic="s", value=v), float("nan"), "not testable"),
    (lambda v: C.Claim.greater("a", "x", statistic="s", value=v), None, "not testable"),
    (lambda v: C.Claim.less("a", "x", statistic="s", value=v), np.float32(-2), "holds"),
])
def test_verdicts_are_computed(make, value, verdict):
    assert make(value).verdict == verdict


def test_all_of_and_not_testable():
    c = C.Claim.all_of("a", "x", statistic="share", values={"en": True, "de": False},
                       min_share=0.5)
    assert c.verdict == "holds" and c.value == 0.5 and c.extra["items"] == {"en": True,
                                                                              "de": False}
    assert C.Claim.all_of("a", "x", statistic="s", values={"en": True, "de": False}
                          ).verdict == "does not hold"
    assert C.Claim.all_of("a", "x", statistic="s", values={}).verdict == "not testable"
    nt = C.Claim.not_testable("a", "x", statistic="s", note="needs GPU")
    assert nt.verdict == "not testable" and nt.note == "needs GPU"
    with pytest.raises(ValueError, match="verdict"):
        C.Claim("a", "x", "s", 1.0, "> 0", "probably")


def test_claims_json_schema_round_trip(tmp_path, monkeypatch):
    monkeypatch.setenv(C.RUN_DIR_ENV, str(tmp_path / "run"))
    cs = [C.Claim.greater("a", "x", statistic="s", value=np.float64(2.0), paper="§1"),
          C.Claim.between("b", "y", statistic="t", value=float("nan"), low=0, high=1)]
    table = C.report(cs)
    assert table is not None
    data = json.loads((tmp_path / "run" / "claims.json").read_text())
    assert isinstance(data, list) and len(data) == 2
    for row in data:
        assert {"id", "claim", "statistic", "value", "expected", "verdict"} <= set(row)
        assert row["verdict"] in C.VERDICTS
    assert data[0]["value"] == 2.0 and data[1]["value"] is None  # NaN -> null, valid JSON
    assert C.load_claims(tmp_path / "run" / "claims.json")[0]["id"] == "a"


def test_bad_claims_are_rejected(tmp_path):
    with pytest.raises(ValueError, match="unique"):
        C.save_claims([C.Claim.greater("a", "x", statistic="s", value=1)] * 2, tmp_path / "c.json")
    (tmp_path / "bad.json").write_text(json.dumps([{"id": "a", "claim": "x"}]))
    with pytest.raises(ValueError, match="lacks keys"):
        C.load_claims(tmp_path / "bad.json")
    row = {"id": "a", "claim": "x", "statistic": "s", "value": 1, "expected": ">0",
           "verdict": "yes"}
    (tmp_path / "bad.json").write_text(json.dumps([row]))
    with pytest.raises(ValueError, match="verdict"):
        C.load_claims(tmp_path / "bad.json")


def _fake_run(runs: Path, chapter: str, run_id: str, status: str, cs: list) -> Path:
    d = runs / chapter / run_id
    d.mkdir(parents=True)
    write_json_atomic({"chapter": chapter, "run_id": run_id, "status": status}, d / "run.json")
    if cs:
        C.save_claims(cs, d / "claims.json")
    return d


def test_scorecard_gathers_latest_ok_run_per_chapter(tmp_path):
    runs = tmp_path / "_build" / "runs"
    _fake_run(runs, "alpha", "20260101T000000.000000Z-0001", "ok",
              [C.Claim.greater("old", "old claim", statistic="s", value=1)])
    _fake_run(runs, "alpha", "20260102T000000.000000Z-0001", "ok",
              [C.Claim.greater("new", "new | claim", statistic="s", value=-1.0, paper="§2")])
    _fake_run(runs, "alpha", "20260103T000000.000000Z-0001", "failed", [])
    _fake_run(runs, "beta", "20260101T000000.000000Z-0001", "ok",
              [C.Claim.not_testable("nt", "needs GPU", statistic="s")])
    frame = gather_scorecard(tmp_path, ["alpha", "beta", "gamma"])
    assert list(frame["id"]) == ["new", "nt"]
    assert list(frame["verdict"]) == ["does not hold", "not testable"]
    md = scorecard_markdown(frame, linked=["alpha"])
    assert "{doc}`alpha </notebooks/alpha>`" in md and "`beta`" in md
    assert "new \\| claim" in md  # pipes escaped, table intact
    assert "**1 does not hold**, **1 not testable**" in md
    body = [ln for ln in md.splitlines() if ln.startswith("| ")]
    assert len(body) == 3  # header + 2 claims
    assert all(len(re.findall(r"(?<!\\)\|", ln)) == 7 for ln in body)  # 6 columns each
    assert "2026010" not in md  # no run ids on the page
    # a manifest (what the book shows) wins over "latest"
    old = runs / "alpha" / "20260101T000000.000000Z-0001"
    frame = gather_scorecard(tmp_path, ["alpha"], manifest={"alpha": {"run_dir": str(old)}})
    assert list(frame["id"]) == ["old"]


def test_scorecard_shows_tiny_verdicts_with_shares_and_effects(tmp_path):
    from tokenbook.verdicts import Expect

    runs = tmp_path / "_build" / "runs"
    _fake_run(runs, "alpha", "20260101T000000.000000Z-0001", "ok", [
        C.Claim.over_seeds("det", "detected one", statistic="Δ (nats)", expect=Expect.less(0),
                           values_on=[-1, -2, -1, -3, -1], values_off=[1, 2, 0.5, -0.1, 1],
                           mechanism="on/off"),
        C.Claim.over_seeds("ns", "unspecific one", statistic="Δ (nats)", expect=Expect.less(0),
                           values_on=[-1] * 5, values_off=[-1] * 5, mechanism="on/off"),
        C.Claim.not_testable_tiny("nt", "fixed by the world", statistic="s", why="built in")])
    frame = gather_scorecard(tmp_path, ["alpha"])
    assert list(frame["verdict"]) == ["detected", "not specific", "not testable"]
    md = scorecard_markdown(frame)
    assert "**1 detected**, **1 not specific**, **1 not testable**" in md
    assert "only the paper scale" in md.lower()
    rows = [ln for ln in md.splitlines() if ln.startswith("| `alpha`")]
    assert "| 5/5 [" in rows[0] and "| 1/5 [" in rows[0] and "-2.48 [" in rows[0]
    assert "| 5/5 [" in rows[1] and rows[1].count("5/5") == 2
    assert "20260101" not in md


def test_scorecard_file_for_a_book_without_runs(tmp_path):
    (tmp_path / "_toc.yml").write_text("format: jb-book\nroot: intro\nchapters:\n"
                                       "  - file: notebooks/alpha\n")
    out = write_scorecard(tmp_path)
    assert "No chapter has a successful run yet" in out.read_text()
    mtime = out.stat().st_mtime_ns
    write_scorecard(tmp_path)
    assert out.stat().st_mtime_ns == mtime  # unchanged content: not rewritten (no rebuild)


def test_progress_bars_collapse_for_the_book():
    from tokenbook.book import clean_stream_text

    raw = ("/x/tqdm/auto.py:21: TqdmWarning: IProgress not found. Please update jupyter\n"
           "  from .autonotebook import tqdm as notebook_tqdm\n"
           "\rloop:   0%|   | 0/3\rloop:  33%|#  | 1/3\rloop: 100%|###| 3/3\n"
           "done\n")
    assert clean_stream_text(raw) == "loop: 100%|###| 3/3\ndone\n"
