"""One source for costs: book/costs.yml feeds course.md, the exercise pages, the student
notebooks and (checked) the README; `python -m tokenbook.book.costs` writes it from the runs."""

from __future__ import annotations

import json
import re
from pathlib import Path

from tokenbook.book import costs

REPO = Path(__file__).resolve().parents[2]


def test_readme_table_states_the_measured_costs():
    data = costs.load(REPO)
    readme = (REPO / "README.md").read_text()
    table = dict(re.findall(r"^\| `(\w+)` \| ([\d,]+) s \|", readme, flags=re.M))
    assert set(table) == set(data["chapters"]), "README's cost table: one row per chapter"
    for chapter, entry in data["chapters"].items():
        assert float(table[chapter].replace(",", "")) == round(entry["wall_s"]), chapter
    assert "book/costs.yml" in readme


def test_pages_use_the_substitutions_and_nothing_else():
    subs = costs.substitutions(costs.load(REPO))
    course = (REPO / "book" / "course.md").read_text()
    pages = [p.read_text() for p in (REPO / "notebooks" / "exercises").glob("*.py")]
    for text in [course, *pages]:
        used = set(costs.SUBSTITUTION.findall(text))
        assert used and used <= set(subs), sorted(used - set(subs))
        assert not re.search(r"\b\d+(\.\d+)? s\b", costs.SUBSTITUTION.sub("", text).split(
            "## Exercise 1")[0]), "a typed-in time: use {{ cost_… }} (book/costs.yml)"
    uid = costs.load(REPO)["chapters"]["uid_grounding"]
    assert subs["cost_uid_grounding"] == (f"{uid['wall_s']:,.0f} s {uid['condition']}; "
                                          f"{uid['peak_rss_mb'] / 1000:.1f} GB peak memory")
    exercise = costs.load(REPO)["exercises"]["uid_grounding"]["wall_s"]
    assert costs.render("took {{ exercise_cost_uid_grounding }}.", root=REPO) == (
        f"took {exercise} s.")


def test_measure_reads_the_books_runs(tmp_path):
    run = tmp_path / "_build" / "runs" / "alpha" / "r1"
    run.mkdir(parents=True)
    (run / "run.json").write_text(json.dumps({"wall_s": 123.456, "peak_rss_mb": 1500.2,
                                              "git_commit": "abcdef0123"}))
    (tmp_path / "_build" / "book_runs.json").write_text(json.dumps(
        {"alpha": {"run_dir": str(run), "reused": False}}))
    got = costs.measure(tmp_path)
    assert got["chapters"] == {"alpha": {"wall_s": 123.5, "peak_rss_mb": 1500}}
    assert got["measured"]["commit"] == "abcdef0"
    costs.write(got, tmp_path)
    assert costs.substitutions(costs.load(tmp_path))["cost_alpha"] == "124 s; 1.5 GB peak memory"


def test_main_keeps_the_stated_condition_and_note_of_a_remeasured_chapter(tmp_path):
    run = tmp_path / "_build" / "runs" / "alpha" / "r1"
    run.mkdir(parents=True)
    (run / "run.json").write_text(json.dumps({"wall_s": 200.0, "git_commit": "abcdef0123"}))
    (tmp_path / "_build" / "book_runs.json").write_text(json.dumps(
        {"alpha": {"run_dir": str(run), "reused": False}}))
    costs.write({"chapters": {"alpha": {"wall_s": 100, "condition": "from an empty cache"},
                              "beta": {"wall_s": 50}},
                 "measured": {"machine": "old box", "note": "old note"}}, tmp_path)
    assert costs.main(["--root", str(tmp_path), "--note", "new note"]) == 0
    got = costs.load(tmp_path)
    assert got["chapters"]["alpha"] == {"wall_s": 200.0, "condition": "from an empty cache"}
    assert got["chapters"]["beta"] == {"wall_s": 50}  # not remeasured: kept
    assert got["measured"]["machine"] == "old box" and got["measured"]["note"] == "new note"
