"""The student/instructor editions are generated from the one source: stubs keep signatures
and hints and nothing of the solutions; the command writes both notebooks per chapter."""

from __future__ import annotations

import ast
import inspect
import json
import re

import pytest

from tokenbook.book import exercises as ex

from .conftest import PAGES, REPO

SOLUTION = '''# Hint: sort first;
# then take the running minimum.
import numpy as np


def f(p, *, m=None):
    """Doc of f."""
    q = np.sort(p)
    return q


answer = f([3, 1])
helper = 2
'''


def test_make_stub_keeps_signatures_docstrings_and_hint_and_drops_the_code():
    stub = ex.make_stub(SOLUTION, "Exercise 7", needed={"answer"})
    assert "np.sort" not in stub and "return" not in stub and "helper" not in stub
    assert "import numpy as np" in stub and '"""Doc of f."""' in stub
    assert "# Your answer: answer = ..." in stub
    ns: dict = {}
    with pytest.raises(NotImplementedError,
                       match=r"^Exercise 7: sort first; then take the running minimum\.$"):
        exec(stub, ns)
    assert str(inspect.signature(ns["f"])) == "(p, *, m=None)"
    with pytest.raises(NotImplementedError, match="Exercise 7"):
        ns["f"]([1])


def test_make_stub_needs_a_hint():
    with pytest.raises(ValueError, match="Hint"):
        ex.make_stub("def f():\n    return 1\n", "Exercise 1")


@pytest.mark.parametrize("name", PAGES)
def test_student_stubs_keep_every_solution_signature(name, pages):
    nb = pages[name]
    student = ex.student_notebook(nb)
    for sol, stub in zip(ex.exercise_cells(nb), ex.exercise_cells(student, tag=ex.STUB_TAG)):
        a = {n.name: ast.unparse(n.args) for n in ast.parse(nb.cells[sol["solution"]].source).body
             if isinstance(n, ast.FunctionDef)}
        b = {n.name: ast.unparse(n.args) for n in
             ast.parse(student.cells[stub["solution"]].source).body
             if isinstance(n, ast.FunctionDef)}
        assert a == b, (name, sol["label"])
    assert "Student edition" in student.cells[0].source


def test_command_writes_both_editions(tmp_path, capsys):
    out = tmp_path / "student"
    assert ex.main(["student", "--all", "--out", str(out), "--root", str(REPO)]) == 0
    for name in PAGES:
        chapter = json.loads((out / f"{name}.ipynb").read_text())
        assert chapter["cells"], name
        page = json.loads((out / f"{name}_exercises.ipynb").read_text())
        tags = [t for c in page["cells"] for t in c.get("metadata", {}).get("tags", [])]
        assert "solution" not in tags and tags.count("exercise") >= 4
        assert all(not c.get("outputs") for c in page["cells"] if c["cell_type"] == "code")
        setup = next(c for c in page["cells"] if c["cell_type"] == "code")
        assert "tokenbook-setup" in setup["metadata"]["tags"] and '"clone"' in "".join(
            setup["source"])
        assert "jupytext" not in page["metadata"]  # a standalone notebook, not a paired one
        exec("".join(setup["source"]), {})  # tokenbook is installed here: the cell does nothing
    inst = tmp_path / "instructor"
    assert ex.main(["instructor", PAGES[0], "--out", str(inst), "--format", "py",
                    "--root", str(REPO)]) == 0
    text = (inst / f"{PAGES[0]}_exercises.py").read_text()
    assert '"solution"' in text and "NotImplementedError" not in text


def test_command_rejects_bad_requests(tmp_path, capsys):
    assert ex.main(["student", "no_such_chapter", "--out", str(tmp_path), "--root",
                    str(REPO)]) == 2
    assert "no exercise page" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        ex.main(["student", "--out", str(tmp_path)])  # neither chapters nor --all
    with pytest.raises(ValueError, match="edition"):
        ex.write_edition(PAGES[0], tmp_path, edition="teacher", root=REPO)


def test_tokenbook_cli_writes_the_student_edition(tmp_path, capsys):
    from tokenbook.book.cli import main as tokenbook_main

    out = tmp_path / "student"
    assert tokenbook_main(["exercises", "student", PAGES[0], "--out", str(out),
                           "--root", str(REPO)]) == 0
    page = json.loads((out / f"{PAGES[0]}_exercises.ipynb").read_text())
    assert "NotImplementedError" in "".join("".join(c["source"]) for c in page["cells"])
    with pytest.raises(SystemExit):
        tokenbook_main(["exercises", "-h"])
    assert "tokenbook exercises" in capsys.readouterr().out


@pytest.mark.parametrize("name", PAGES)
def test_student_twin_is_committed_in_sync_and_plain(name):
    """``notebooks/exercises/<chapter>.ipynb`` (what the page's launch buttons open) is the
    generated student edition: in sync with the page, no MyST role, no cost placeholder."""
    import nbformat

    from tokenbook.book.notebooks import sync

    twin = REPO / "notebooks" / "exercises" / f"{name}.ipynb"
    assert twin.exists(), "run `make notebooks` and commit notebooks/exercises/*.ipynb"
    assert twin not in sync(REPO, check=True), "out of date: run `make notebooks`"
    nb = nbformat.read(twin, as_version=4)
    md = "\n".join(c.source for c in nb.cells if c.cell_type == "markdown")
    assert "{doc}" not in md and "{{" not in md and "{cite" not in md
    assert f"[`{name}`](../{name}.ipynb)" in md  # the chapter, beside it
    assert re.search(r"this page:\s+[\d.]+ s on a CPU", md)  # the measured cost, filled in
    assert not ex.exercise_cells(nb) and ex.exercise_cells(nb, tag=ex.STUB_TAG)


def test_plain_markdown_and_a_friendly_missing_answer():
    text = ("See {doc}`../uid_grounding`, {doc}`the course </book/course>` and "
            "{cite:p}`gay2026uid`.")
    assert ex.plain_markdown(text, repo_url="https://example.org/r") == (
        "See [`uid_grounding`](../uid_grounding.ipynb), [the course]"
        "(https://example.org/r/blob/main/book/course.md) and gay2026uid.")
    try:
        answer_2  # noqa: F821 - the student has not run the exercise cell
    except NameError as err:
        message = ex.missing_answer(err)
    assert message.startswith("❓ `answer_2` is not defined yet") and "exercise" in message


def test_friendly_errors_registers_a_one_line_name_error_handler(monkeypatch, capsys):
    import IPython

    class Shell:
        def set_custom_exc(self, types, handler):
            self.types, self.handler = types, handler

    shell = Shell()
    monkeypatch.setattr(IPython, "get_ipython", lambda: shell)
    ex.friendly_errors()
    assert shell.types == (NameError,)
    shell.handler(shell, NameError, NameError("name 'uid_v' is not defined"), None)
    assert capsys.readouterr().out.startswith("❓ `uid_v` is not defined yet.")
