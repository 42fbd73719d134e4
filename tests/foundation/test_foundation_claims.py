"""Claims: verdicts are computed, claims.json has a schema, the scorecard gathers the runs."""

from __future__ import annotations

import html
import json
import re
from pathlib import Path

import nbformat
import numpy as np
import pytest

from tokenbook import claims as C
from tokenbook.book.build import gather_scorecard, scorecard_markdown, write_scorecard
from tokenbook.cache import write_json_atomic
from tokenbook.run_folder import RUN_DIR_ENV


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
    monkeypatch.setenv(RUN_DIR_ENV, str(tmp_path / "run"))
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
    assert "**1 does not hold**, **1 not testable**" in md
    summary = md.split("```{raw} html\n")[1].split("```")[0]
    rows = [[html.unescape(re.sub(r"<[^>]+>", "", c))
             for c in re.findall(r"<t[dh][^>]*>(.*?)</t[dh]>", r)]
            for r in re.findall(r"<tr[^>]*>(.*?)</tr>", summary)]
    assert rows == [
        ["Chapter", "Claims", "Holds", "Does not hold", "Not testable"],
        ["alpha", "1", "0", "1", "0"],
        ["What this chapter shows: 0 of 1 testable claim holds; 1 does not hold."],
        ["beta", "1", "0", "0", "1"],
        ["What this chapter shows: No claim is testable at this scale: each claim's note "
         "says why."]]
    assert '<a href="../notebooks/alpha.html"><code>alpha</code></a>' in summary  # linked
    assert "<code>beta</code></td>" in summary  # no run: no link
    table = md.split("```{raw} html\n")[2].split("```")[0]
    assert re.findall(r'data-claim-id="([^"]+)" data-verdict="([^"]+)"', table) == [
        ("new", "does not hold"), ("nt", "not testable")]
    assert "new | claim" in table and '<th colspan="5"' in table  # wording folded; chapter rows
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
    # the replication line counts the judged claims (not the not testable one)
    assert "Replication: 2 of 2 judged tiny claims" in md and "Below it" not in md
    assert "only the paper scale" in md.lower()
    table = md.split("```{raw} html\n")[2].split("```")[0]
    rows = re.findall(r"<tr data-claim-id.*?</tr>", table)
    cells = [[re.sub(r"<[^>]+>", "", c) for c in re.findall(r"<td[^>]*>(.*?)</td>", r)]
             for r in rows]
    # id (+ folded details), verdict, seeds holding on, off, on − off
    assert [c[1:] for c in cells] == [["detected", "5/5", "1/5", "-2.48"],
                                      ["not specific", "5/5", "5/5", "0"],
                                      ["not testable", "—", "—", "—"]]
    assert "Seeds holding: on 5/5 [" in table and "Mechanism: on/off" in table
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
    from tokenbook.book.build import clean_stream_text

    raw = ("/x/tqdm/auto.py:21: TqdmWarning: IProgress not found. Please update jupyter\n"
           "  from .autonotebook import tqdm as notebook_tqdm\n"
           "\rloop:   0%|   | 0/3\rloop:  33%|#  | 1/3\rloop: 100%|###| 3/3\n"
           "done\n")
    assert clean_stream_text(raw) == "loop: 100%|###| 3/3\ndone\n"


NEW_SCHEMA = {  # a tiny-scale row of the current claims.json schema
    "id": "uid-v-lower-with-image", "claim": "UID_v is lower with the image", "paper": "§5",
    "statistic": "median UID_v(P) − UID_v(U) (nats²)", "expected": "< 0",
    "verdict": "not specific", "note": "off holds too", "mechanism": "on: image; off: shuffled",
    "scale": "tiny", "on_value": -0.31, "on_ci": [-0.4, -0.2], "off_value": -0.12,
    "off_ci": [-0.2, -0.05], "paired_effect": -0.19, "paired_ci": [-0.25, -0.13],
    "share_on": 1.0, "share_off": 0.6, "n_root_seeds": 5,
    "known_answer": {"on": -0.5, "off": 0.0, "how": "oracle surprisals"},
    "manipulation": {"passed": True, "what": "image helps", "values": [0.2, 0.3]},
    "balance": {"passed": False, "what": "mean length (words)", "tolerance": 0.2,
                "max_abs_difference": 0.5, "failed_seeds": [3]},
    "replication": 0.87, "computed_by": "tokenbook.uid_grounding.measures:uid_claim"}


def test_report_shows_a_summary_box_and_the_compact_table(tmp_path, monkeypatch):
    from tokenbook.book import nbcheck
    from tokenbook.scorecard import claims_table_html, summary_html, takeaway

    monkeypatch.setenv(RUN_DIR_ENV, str(tmp_path / "run"))
    shown = C.report([C.Claim.greater("a", "x", statistic="s", value=1.0),
                      C.Claim.greater("b", "y", statistic="s", value=-1.0)])
    html = shown._repr_html_()
    assert "At a glance: 2 claims" in html and "1 of 2 testable claims hold" in html
    assert html.index("At a glance") < html.index("<table")  # the box first, then the table
    assert list(shown.frame.columns[:2]) == ["id", "verdict"]  # the verdict second
    assert "a  " in repr(shown) and "does not hold" in repr(shown)
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(
        "report(claims)", outputs=[nbformat.v4.new_output(
            "execute_result", data={"text/html": html, "text/plain": repr(shown)})])])
    assert nbcheck.claim_verdicts(nb) == {"a": "holds", "b": "does not hold"}
    # the current schema: every field in the folded details, the shares and effect in columns
    table = claims_table_html([NEW_SCHEMA])
    cells = [re.sub(r"<[^>]+>", "", c) for c in re.findall(r"<td[^>]*>(.*?)</td>", table)]
    assert cells[1:] == ["not specific", "5/5", "3/5", "-0.19"]
    for text in ("On: -0.31 [-0.4, -0.2]; off: -0.12 [-0.2, -0.05]; on − off: -0.19 [-0.25, "
                 "-0.13]", "Known answer: on -0.5, off 0 (oracle surprisals)",
                 "Manipulation check: passed: image helps", "Replication: 87%",
                 "Balance check: failed: mean length (words) moves by at most 0.5 between on "
                 "and off (tolerance 0.2)",
                 "tokenbook.uid_grounding.measures:uid_claim", 'title="UID_v is lower with the image"'):
        assert text in table, text
    needing = claims_table_html([dict(NEW_SCHEMA, seeds_needed=19)])
    assert "Replication: 87% chance of the same verdict on a new set of root seeds (simulated); " \
           "two sets agree 90% from 19 root seeds" in needing
    assert "two sets agree" not in table                    # a run from before the field
    # a known answer without off values says what its on values alone say
    alone = dict(NEW_SCHEMA, known_answer={"on": 1.1, "off": None, "verdict": "not testable",
                                           "on_alone": {"mean": 1.1, "ci": [1.03, 1.17],
                                                        "meets": True}})
    assert ("judged by the same rule: not testable; its on values alone meet the expectation "
            "(1.1 [1.03, 1.17])") in claims_table_html([alone])
    assert "on values alone" not in table
    assert "2 not testable" not in summary_html([NEW_SCHEMA])
    assert takeaway({"detected": 3, "not detected": 0, "not specific": 0,
                     "not testable": 1}).startswith("The pipeline detects all 3 testable")
    assert takeaway({"detected": 1, "not detected": 1, "not specific": 2,
                     "not testable": 0}) == ("1 of 4 testable claims detected; 2 also show "
                                             "with the mechanism off (not specific); 1 not "
                                             "detected.")


def test_replication_text_names_the_claims_below_the_target():
    from tokenbook.scorecard import REPLICATION_TARGET, replication_text

    def row(cid, rep, scale="tiny", needed=None):
        return {"id": cid, "replication": rep, "scale": scale, "seeds_needed": needed}

    rows = [row("a", 1.0), row("b", 0.5, needed=300), row("c", 0.89, needed=14), row("d", None),
            row("e", 0.1, "paper")]
    text = replication_text(rows)
    assert REPLICATION_TARGET == 0.9
    assert text.startswith("Replication: 1 of 3 judged tiny claims")
    assert ("`b` (50%; not 90% even at 256 root seeds), `c` (89%; 90% from 14 root seeds)."
            in text)                                          # lowest first
    assert "`c` (89%)" in replication_text([row("c", 0.89)])  # a run from before the field
    assert replication_text([row("d", None)]) == ""
    assert "2 of 3" in replication_text(rows, target=0.6)
