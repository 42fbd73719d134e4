"""nbval on every chapter page of the real book (after the book build; `make test`).

The references are tests/nbval/<chapter>.ipynb, recorded by `make nbval-refs` from a build and
committed; see tokenbook.book.nbcheck for what is compared exactly (the claims tables) and what is
sanitised.
"""

from __future__ import annotations

import os

import pytest

from tokenbook.book import nbcheck
from tokenbook.book.build import MANIFEST, toc_chapters

ENABLED = os.environ.get("TOKENBOOK_TEST_BOOK") == "1"


@pytest.mark.slow
@pytest.mark.book
@pytest.mark.skipif(not ENABLED, reason="compares the built book's pages; set "
                                        "TOKENBOOK_TEST_BOOK=1 (`make test` does)")
def test_every_chapter_page_matches_its_nbval_reference(repo_root):
    assert (repo_root / MANIFEST).exists(), "the book build (the previous test) did not run"
    chapters = toc_chapters(repo_root)
    assert chapters
    problems = nbcheck.check(repo_root, chapters)
    assert problems == [], "\n\n".join(problems)
