"""The real book's pages as a reader sees them (after the book build; `make test`): no build
paths, run ids or tracebacks in the text; in headless Chromium every figure captioned, no table
clipped, every formula typeset by the bundled MathJax."""

from __future__ import annotations

import os

import pytest

from tokenbook.book import pagecheck

ENABLED = os.environ.get("TOKENBOOK_TEST_BOOK") == "1"
pytestmark = [pytest.mark.slow, pytest.mark.book,
              pytest.mark.skipif(not ENABLED, reason="checks the built book; set "
                                                     "TOKENBOOK_TEST_BOOK=1 (`make test` does)")]


def _html(repo_root):
    html = repo_root / "_build" / "html"
    assert (html / "index.html").exists(), "the book build (the previous test) did not run"
    return html


def test_pages_show_no_build_paths_run_ids_or_tracebacks(repo_root):
    assert pagecheck.text_problems(_html(repo_root), repo_root) == []


def test_pages_in_a_headless_browser(repo_root):
    chromium = pagecheck.find_chromium()
    if chromium is None:
        pytest.skip("no Chromium: `apt-get install -y chromium` (.ci/run installs it)")
    problems, results = pagecheck.browser_problems(_html(repo_root), chromium)
    assert problems == [], "\n".join(problems)
    assert any(r.get("typeset") for r in results.values()), "no page has typeset maths"
