"""nbval on the chapter pages (tokenbook.book.nbcheck), on a dummy chapter executed twice."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import nbformat
import pytest

from tokenbook.book import nbcheck
from tokenbook.book.runner import run_chapter

REPO = Path(__file__).resolve().parents[2]


def _show(root: Path, run_dir: Path) -> None:
    """Point the book's manifest at ``run_dir`` (what `tokenbook build` does)."""
    (root / "_build").mkdir(exist_ok=True)
    (root / "_build" / "book_runs.json").write_text(json.dumps(
        {"dummy": {"run_dir": str(run_dir), "status": "ok"}}))


@pytest.fixture(scope="module")
def two_runs(tmp_path_factory):
    """A dummy book executed twice at the same seed, references recorded from the first."""
    from .conftest import make_book

    root = make_book(tmp_path_factory.mktemp("nbval") / "book")
    first = run_chapter("dummy", {}, root=root, inject=False, quiet=True)
    second = run_chapter("dummy", {}, root=root, inject=False, quiet=True)
    assert first.ok and second.ok
    refs = root / "refs"
    refs.mkdir()
    for name in (nbcheck.SANITIZE, nbcheck.SANITIZE_NUMBERS):
        shutil.copy(REPO / "tests" / "nbval" / name, refs / name)
    _show(root, first.run_dir)
    nbcheck.write_references(root, ["dummy"], refs)
    _show(root, second.run_dir)
    return root, refs


def _edit_reference(refs: Path, marker: str, edit) -> Path:
    """A copy of the references with the outputs of the replay cell holding ``marker``
    changed by ``edit(outputs)``."""
    out = refs.parent / f"refs-{abs(hash(marker)) % 10**6}"
    shutil.copytree(refs, out, dirs_exist_ok=True)
    path = out / "dummy.ipynb"
    nb = nbformat.read(path, as_version=4)
    cell = next(c for c in nb.cells if marker in c.source)
    edit(cell.outputs)
    nbformat.write(nb, path)
    return out


@pytest.mark.slow
def test_a_second_build_at_the_same_seed_shows_no_drift(two_runs):
    root, refs = two_runs
    ref = nbformat.read(refs / "dummy.ipynb", as_version=4)
    claims = [c for c in ref.cells if nbcheck.CHECK in c.source]
    assert len(claims) == 1 and "report(" in claims[0].source  # the claims cell: exact
    assert sum(nbcheck.IGNORE in c.source for c in ref.cells) == 1  # the versions cell
    assert not any("image/png" in o.get("data", {}) for c in ref.cells for o in c.outputs)
    assert nbcheck.check(root, ["dummy"], refs) == []  # times, run ids, versions sanitised


@pytest.mark.slow
def test_a_changed_claims_table_fails_naming_the_cell(two_runs):
    root, refs = two_runs

    def change(outputs):  # the measured mean, one digit further along
        for out in outputs:
            for mime, text in out.get("data", {}).items():
                if isinstance(text, str):
                    out["data"][mime] = re.sub(r"0\.(\d)", lambda m: f"0.{(int(m.group(1)) + 1) % 10}",
                                               text, count=1)

    problems = nbcheck.check(root, ["dummy"], _edit_reference(refs, "report(", change))
    assert len(problems) == 1 and "nbval (exact)" in problems[0]
    assert "Cell" in problems[0] and "report(" in problems[0]  # names the chapter cell


@pytest.mark.slow
def test_values_may_move_elsewhere_but_new_text_fails(two_runs):
    root, refs = two_runs

    def numbers(outputs):
        for out in outputs:
            for mime, text in out.get("data", {}).items():
                if isinstance(text, str):
                    out["data"][mime] = re.sub(r"\d+", "7", text)

    assert nbcheck.check(root, ["dummy"], _edit_reference(refs, "rng =", numbers)) == []

    def message(outputs):
        outputs.append(nbformat.v4.new_output("stream", name="stdout",
                                              text="a message the chapter no longer prints\n"))

    problems = nbcheck.check(root, ["dummy"], _edit_reference(refs, "tqdm", message))
    assert len(problems) == 1 and "nbval (shape)" in problems[0]


def test_a_chapter_whose_code_changed_asks_for_new_references(tmp_path):
    page = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("print(1)", outputs=[
        nbformat.v4.new_output("stream", name="stdout", text="1\n")])])
    ref = nbcheck.replay_notebook(page, "c")
    page.cells[0].source = "print(2)"
    _, changed = nbcheck.with_reference(nbcheck.replay_notebook(page, "c"), ref)
    assert changed == ["code cell 0"]
    with pytest.raises(ValueError, match="mode="):
        nbcheck.run_nbval([], tmp_path, mode="loose")


def _elsewhere(refs: Path) -> None:
    """Mark the reference as recorded on another kind of machine."""
    nb = nbformat.read(refs / "dummy.ipynb", as_version=4)
    nb.metadata["tokenbook"]["machine"] = "riscv64 | another CPU | 64 cores | torch 0"
    nbformat.write(nb, refs / "dummy.ipynb")


def _edit_text(pattern: str, repl, count: int = 0):
    def edit(outputs):
        for out in outputs:
            for mime, text in out.get("data", {}).items():
                if isinstance(text, str):
                    out["data"][mime] = re.sub(pattern, repl, text, count=count)
    return edit


@pytest.mark.slow
def test_a_reference_from_another_machine_compares_structure_and_claim_ids(two_runs, capsys):
    root, refs = two_runs
    # numbers and verdicts may differ on another CPU generation: passes, and says so
    moved = _edit_reference(refs, "report(", _edit_text(
        r"0\.(\d)", lambda m: f"0.{(int(m.group(1)) + 1) % 10}", count=1))
    _elsewhere(moved)
    assert nbcheck.check(root, ["dummy"], moved) == []
    assert "structure mode" in capsys.readouterr().err
    ref = nbformat.read(refs / "dummy.ipynb", as_version=4)
    verdicts = nbcheck.claim_verdicts(ref)
    assert verdicts and all(verdicts.values())        # the dummy's claims table was parsed
    cid, verdict = next(iter(verdicts.items()))
    other = "not specific" if verdict != "not specific" else "detected"
    flipped = _edit_reference(refs, "report(", _edit_text(rf">{re.escape(verdict)}<", f">{other}<"))
    _elsewhere(flipped)
    assert nbcheck.check(root, ["dummy"], flipped) == []
    assert f"{cid}: {other} on the reference's machine, {verdict} here" in capsys.readouterr().err
    # a claim renamed (a claim lost or added) fails, as does a cell with another output
    renamed = _edit_reference(refs, "report(", _edit_text(rf">{re.escape(cid)}<", ">renamed<"))
    _elsewhere(renamed)
    problems = nbcheck.check(root, ["dummy"], renamed)
    assert len(problems) == 1 and "missing: ['renamed']" in problems[0]

    def message(outputs):
        outputs.append(nbformat.v4.new_output("stream", name="stdout", text="extra\n"))

    longer = _edit_reference(refs, "tqdm", message)
    _elsewhere(longer)
    problems = nbcheck.check(root, ["dummy"], longer)
    assert len(problems) == 1 and "nbval (structure)" in problems[0]


def test_cpu_generation_tells_cpus_with_one_model_name_apart():
    block = ("processor\t: {n}\nvendor_id\t: AuthenticAMD\ncpu family\t: {fam}\nmodel\t\t: 1\n"
             "model name\t: AMD EPYC\nstepping\t: 1\nflags\t\t: fpu avx2 fma {extra}\n\n")
    zen3 = nbcheck.cpu_generation(block.format(n=0, fam=25, extra="") + block.format(
        n=1, fam=25, extra=""))
    zen5 = nbcheck.cpu_generation(block.format(n=0, fam=26, extra="avx512f avx512_bf16"))
    assert zen3 == "AuthenticAMD 25/1/1 avx2 fma"
    assert zen5 == "AuthenticAMD 26/1/1 avx2 avx512_bf16 avx512f fma"
    assert nbcheck.cpu_generation("") == ""
    assert nbcheck.cpu_generation() in nbcheck.machine_fingerprint()
