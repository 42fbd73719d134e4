"""Both editions of every exercise page execute as intended (in-process, no model training).

* instructor edition (the book's page): every cell runs and every check returns ok;
* student edition (generated): the cells before the first exercise run, and every exercise's
  stub (with its check cell) raises NotImplementedError carrying the exercise's label and hint.
"""

from __future__ import annotations

import re

import pytest

from tokenbook.answers import CheckResult
from tokenbook.book import exercises as ex

from .conftest import CHECK_MODULES, PAGES, REPO, run_cell


def test_every_chapter_has_an_exercise_page():
    chapters = sorted(p.stem for p in (REPO / "notebooks").glob("*.py") if not p.name.startswith("_"))
    assert PAGES, "no exercise pages found"
    assert set(chapters) <= set(PAGES), f"chapters without exercises: {set(chapters) - set(PAGES)}"
    assert set(PAGES) <= set(ex.CHAPTERS) == set(CHECK_MODULES)


@pytest.mark.parametrize("name", PAGES)
def test_page_structure(name, pages):
    nb = pages[name]
    assert nb.metadata["kernelspec"]["name"] == "python3"
    md = "\n".join(c.source for c in nb.cells if c.cell_type == "markdown")
    assert len(re.findall(r"^# \S", md, flags=re.M)) == 1, "exactly one '# Title'"
    for section in ("Learning objectives", "Prerequisites", "Time.", "Paper scale"):
        assert section in md, f"{name}: the page needs a '{section}' paragraph"
    exercises = ex.exercise_cells(nb)
    assert 4 <= len(exercises) <= 6, f"{name}: {len(exercises)} exercises (want 4–6)"
    labels = [e["label"] for e in exercises]
    assert labels == [f"Exercise {i}" for i in range(1, len(labels) + 1)], labels
    first = min(e["solution"] for e in exercises)
    roles = {i for e in exercises for i in (e["solution"], e["check"])}
    for i, cell in enumerate(nb.cells):
        if cell.cell_type == "code" and i > first:
            assert i in roles, f"{name}: code cell {i} after the first exercise is neither a " \
                               "solution nor a check (keep pages as setup + exercises)"
    for e in exercises:
        tags = nb.cells[e["solution"]].metadata["tags"]
        assert "solution" in tags and "hide-cell" in tags, f"{name} {e['label']}: {tags}"
        assert nb.cells[e["solution"]].source.startswith("# Hint:")
        check = nb.cells[e["check"]].source.strip()
        assert re.fullmatch(r"ex\.check_\w+\(.*\)", check, flags=re.S), check
        assert check.split("(")[0][3:] in CHECK_MODULES[name].__all__
    setup = "\n".join(c.source for c in nb.cells[:first] if c.cell_type == "code")
    assert f"from tokenbook.{name} import exercises as ex" in setup, \
        f"{name}: import the chapter's checks as `ex` (tokenbook.{name}.exercises)"


@pytest.mark.parametrize("name", PAGES)
def test_instructor_edition_executes_and_every_check_passes(name, pages):
    nb = pages[name]
    checks = {e["check"] for e in ex.exercise_cells(nb)}
    ns: dict = {"__name__": "__main__"}
    results = []
    for i, cell in enumerate(nb.cells):
        if cell.cell_type != "code":
            continue
        value = run_cell(cell.source, ns, f"{name}[{i}]")
        if i in checks:
            assert isinstance(value, CheckResult), f"{name}[{i}] did not return a CheckResult"
            results.append(value)
    assert results and all(r.ok for r in results), [str(r) for r in results]
    assert all(repr(r).startswith("✅") for r in results)


@pytest.mark.parametrize("name", PAGES)
def test_student_edition_runs_to_the_first_exercise_and_every_stub_raises(name, pages):
    student = ex.student_notebook(pages[name])
    stubs = ex.exercise_cells(student, tag=ex.STUB_TAG)
    assert len(stubs) == len(ex.exercise_cells(pages[name]))
    assert not ex.exercise_cells(student), "no solution cell may survive in the student edition"
    ns: dict = {"__name__": "__main__"}
    first = stubs[0]["solution"]
    for i, cell in enumerate(student.cells[:first]):
        if cell.cell_type == "code":
            run_cell(cell.source, ns, f"{name}[{i}]")  # setup must run cleanly
    for stub in stubs:
        source = student.cells[stub["solution"]].source
        assert "return" not in source, f"{name} {stub['label']}: the stub leaks a solution"
        assert "hide-cell" not in student.cells[stub["solution"]].metadata["tags"]
        with pytest.raises(NotImplementedError, match=rf"^{stub['label']}: \S"):
            run_cell(source, ns, f"{name} stub")
            run_cell(student.cells[stub["check"]].source, ns, f"{name} check")
