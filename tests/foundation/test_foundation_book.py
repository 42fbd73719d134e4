"""The book build: strict, executed through the runner, cached, with the scorecard."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tokenbook.book.build import JUPYTER_CACHE, build, prime_jupyter_cache, toc_chapters
from tokenbook.book.pages import reads_chapter
from tokenbook.book.runner import RunnerError, run_chapter


def _runs(root: Path, chapter: str = "dummy") -> list[str]:
    folder = root / "_build" / "runs" / chapter
    return sorted(p.name for p in folder.iterdir()) if folder.exists() else []


def test_toc_chapters(dummy_book):
    assert toc_chapters(dummy_book) == ["dummy"]


@pytest.mark.slow
def test_primed_cache_matches_the_py_chapter(dummy_book):
    run = run_chapter("dummy", {}, root=dummy_book, inject=False, quiet=True)
    assert run.ok
    src = dummy_book / "notebooks" / "dummy.py"
    key = prime_jupyter_cache(src, run.run_dir / "dummy.ipynb", dummy_book / JUPYTER_CACHE)
    from jupyter_cache import get_cache

    cache = get_cache(str(dummy_book / JUPYTER_CACHE))
    # exactly how myst-nb reads the chapter (_config.yml nb_custom_formats: reads_chapter)
    nb = reads_chapter(src.read_text())
    assert cache.match_cache_notebook(nb).hashkey == key
    _, merged = cache.merge_match_into_notebook(nb)
    outputs = [o for c in merged.cells if c.cell_type == "code" for o in c.get("outputs", [])]
    assert any("image/png" in o.get("data", {}) for o in outputs)  # the figure is there
    # a run with injected parameters is not the page's code: refused
    other = run_chapter("dummy", {"seed": 5}, root=dummy_book, quiet=True)
    with pytest.raises(RunnerError, match="does not match"):
        prime_jupyter_cache(src, other.run_dir / "dummy.ipynb", dummy_book / JUPYTER_CACHE)


@pytest.fixture
def notebook_only_hash(monkeypatch):
    """Source hash of the notebook alone: other engineers edit lib/ while these tests run, and
    a library change (correctly) re-executes every chapter."""
    import hashlib

    import tokenbook.book.build
    import tokenbook.book.runner

    def fake(chapter):
        return hashlib.sha256(Path(chapter.path).read_bytes()).hexdigest()[:20]

    monkeypatch.setattr(tokenbook.book.runner, "source_hash", fake)
    monkeypatch.setattr(tokenbook.book.build, "source_hash", fake)


@pytest.mark.slow
@pytest.mark.book
def test_strict_build_of_a_tiny_book_then_fast_rebuild(dummy_book, notebook_only_hash, capfd):
    rc = build(dummy_book)
    out, err = capfd.readouterr()
    assert rc == 0, out[-3000:] + err[-3000:]
    html = dummy_book / "_build" / "html"
    assert (html / "index.html").exists()
    intro = (html / "book" / "intro.html").read_text()
    assert "At a glance: the reproduction scorecard" in intro
    assert "The mean is positive" in intro and "holds" in intro and "not testable" in intro
    assert 'href="../notebooks/dummy.html"' in intro  # the scorecard links the chapter
    page = (html / "notebooks" / "dummy.html").read_text()
    assert "Versions used for this run" in page  # show_versions() output
    assert "<img" in page  # the figure rendered from the cached outputs
    assert page.count("dummy loop: 100%") == 1 and "IProgress" not in page
    assert "dummy loop:  50%" not in page  # the progress bar collapsed to its final state
    assert "Gay" in (html / "book" / "bibliography.html").read_text()
    first_runs = _runs(dummy_book)
    assert len(first_runs) == 1  # executed once, through the runner
    manifest = json.loads((dummy_book / "_build" / "book_runs.json").read_text())
    assert manifest["dummy"]["status"] == "ok" and not manifest["dummy"]["reused"]

    t0 = time.perf_counter()
    rc = build(dummy_book)
    elapsed = time.perf_counter() - t0
    out, err = capfd.readouterr()
    assert rc == 0, err[-3000:]
    assert _runs(dummy_book) == first_runs  # nothing re-executed
    assert "reusing run" in err
    assert "Executing notebook" not in out + err  # Jupyter Book executed nothing either
    assert elapsed < 60, f"a rebuild with nothing changed took {elapsed:.0f} s"

    # changing the chapter makes the build execute it again
    nb = dummy_book / "notebooks" / "dummy.py"
    nb.write_text(nb.read_text().replace("n = 200", "n = 100"))
    assert build(dummy_book, run_book=False) == 0
    assert len(_runs(dummy_book)) == 2


@pytest.mark.slow
@pytest.mark.book
def test_a_raising_cell_fails_the_build(failing_book, cli):
    root = failing_book
    res = cli(root, "build", timeout=600)
    assert res.returncode != 0
    assert "dummy failed" in res.stderr and "partial outputs" in res.stderr
    assert not (root / "_build" / "html").exists()
    runs = _runs(root)
    assert len(runs) == 1
    assert json.loads((root / "_build/runs/dummy" / runs[0] / "run.json").read_text()
                      )["status"] == "failed"


@pytest.mark.slow
@pytest.mark.book
def test_jupyter_book_strict_mode_fails_on_an_unprimed_raising_chapter(failing_book):
    """Even bypassing the runner, the book's own config makes a raising cell fatal."""
    root = failing_book
    jb = Path(sys.executable).parent / "jupyter-book"
    res = subprocess.run([str(jb), "build", str(root), "--all", "-W", "-n", "--keep-going"],
                         cwd=root, capture_output=True, text=True, timeout=600)
    assert res.returncode != 0, res.stdout[-2000:]
    assert "Executing notebook failed" in res.stdout + res.stderr


def test_build_executes_only_the_toc_chapters(dummy_book):
    from tokenbook.book.build import execute_chapters

    (dummy_book / "_toc.yml").write_text("format: jb-book\nroot: book/intro\nchapters:\n"
                                         "  - file: book/bibliography\n")
    assert execute_chapters(dummy_book) == {}  # dummy.py exists but is not in the book
    assert not (dummy_book / "_build" / "runs").exists()
