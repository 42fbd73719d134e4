"""The real book: every chapter executed at tiny scale through the runner, then the strict build.

This is what `make test` ends with (it sets TOKENBOOK_TEST_BOOK=1); it takes as long as the
chapters do, so a plain `pytest` skips it. Output is streamed (not captured) so progress shows.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from tokenbook.book.build import toc_chapters

ENABLED = os.environ.get("TOKENBOOK_TEST_BOOK") == "1"


@pytest.mark.slow
@pytest.mark.book
@pytest.mark.chapter
@pytest.mark.skipif(not ENABLED, reason="executes every chapter; set TOKENBOOK_TEST_BOOK=1 "
                                        "(`make test` does)")
def test_real_book_executes_every_chapter_and_builds_strictly(repo_root, capfd):
    with capfd.disabled():
        print("\n[test] tokenbook build: every chapter at tiny scale + strict book build",
              flush=True)
        rc = subprocess.run([sys.executable, "-m", "tokenbook", "--root", str(repo_root),
                             "build"], cwd=repo_root).returncode
    assert rc == 0, "tokenbook build failed (see the output above)"
    html = repo_root / "_build" / "html"
    assert (html / "index.html").exists()
    intro = (html / "book" / "intro.html").read_text()
    assert "reproduction scorecard" in intro.lower(), "the front page lost its scorecard"
    manifest = json.loads((repo_root / "_build" / "book_runs.json").read_text())
    for chapter in toc_chapters(repo_root):
        assert manifest[chapter]["status"] == "ok"
        run = json.loads(open(os.path.join(manifest[chapter]["run_dir"], "run.json")).read())
        assert run["status"] == "ok" and run["parameters"] and run["versions"]
        assert (html / "notebooks" / f"{chapter}.html").exists(), chapter
        if run.get("n_claims"):
            assert chapter in intro, f"{chapter} missing from the scorecard"
