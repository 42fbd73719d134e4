"""Test-wide settings for tokenbook.

* Offline Hugging Face everywhere (a hub lookup would otherwise hang ~25 s before failing).
* Matplotlib's Agg backend for the test process (no display).
* The cache: unit tests get a fresh per-session ``TOKENBOOK_CACHE`` so they never read stale
  entries from, or write junk into, the book's cache. If ``TOKENBOOK_CACHE`` is already set
  (CI, or a user pointing tests at a cache on purpose) it is respected. Tests marked
  ``@pytest.mark.chapter`` execute real chapters: they use the *book's* cache (``_build/cache``,
  or the pre-set ``TOKENBOOK_CACHE``) so that `make test` and `make book` share trained models.
* ``@pytest.mark.gpu`` tests are skipped, with the reason, when CuPy sees no CUDA device.
* Every test's pyplot figures are closed after it (a suite of figure tests otherwise keeps
  them all open: memory, and matplotlib's more-than-20-figures warning).
"""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]

os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["TRANSFORMERS_OFFLINE"] = "1"
os.environ["HF_DATASETS_OFFLINE"] = "1"
os.environ["MPLBACKEND"] = "Agg"

#: the cache chapter tests (and the book) use: set before the session, or the repo's _build/cache
BOOK_CACHE = Path(os.environ.get("TOKENBOOK_CACHE") or REPO / "_build" / "cache")
_PRESET_CACHE = "TOKENBOOK_CACHE" in os.environ
if not _PRESET_CACHE:
    _SESSION_CACHE = tempfile.mkdtemp(prefix="tokenbook-test-cache-")
    os.environ["TOKENBOOK_CACHE"] = _SESSION_CACHE


def _gpu_available() -> tuple[bool, str]:
    try:
        import cupy
    except Exception as exc:  # cupy not installed or broken
        return False, f"cupy is not importable ({type(exc).__name__})"
    try:
        if cupy.cuda.is_available():
            return True, ""
    except Exception as exc:
        return False, f"cupy cannot query CUDA ({type(exc).__name__})"
    return False, "no CUDA device (cupy.cuda.is_available() is False)"


def pytest_collection_modifyitems(config, items):
    # the real book build (make test) runs last, after every unit test
    last = [item for item in items if "test_foundation_book_build_real" in item.nodeid]
    if last:
        items[:] = [item for item in items if item not in last] + last
    gpu_items = [item for item in items if "gpu" in item.keywords]
    if not gpu_items:
        return
    ok, reason = _gpu_available()
    if not ok:
        skip = pytest.mark.skip(reason=f"GPU test skipped: {reason}")
        for item in gpu_items:
            item.add_marker(skip)


@pytest.fixture(autouse=True)
def _chapter_tests_use_book_cache(request, monkeypatch):
    """Tests marked ``chapter`` see the book's cache, all others the per-session one."""
    if request.node.get_closest_marker("chapter") is not None:
        monkeypatch.setenv("TOKENBOOK_CACHE", str(BOOK_CACHE))
    yield


@pytest.fixture(autouse=True)
def _close_figures():
    """Close the test's pyplot figures when it ends (Figure objects stay usable)."""
    yield
    pyplot = sys.modules.get("matplotlib.pyplot")
    if pyplot is not None:
        pyplot.close("all")


@pytest.fixture
def repo_root() -> Path:
    """The repository root (where pyproject.toml lives)."""
    return REPO


@pytest.fixture(scope="session")
def chapter_grounded_models():
    """``(world, models)`` of root seed 0 exactly as the grounded chapters train them
    (:func:`tokenbook.grounded.tiny.tiny_world` / :func:`~tokenbook.grounded.tiny.tiny_models`
    at the chapters' defaults), in the book's cache: `make test` trains them once here and the
    book build reuses them (and a built book makes these tests fast)."""
    from tokenbook.grounded import tiny as gt

    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("TOKENBOOK_CACHE", str(BOOK_CACHE))
        params = gt.TinyParams()
        world = gt.tiny_world(0, params, "on")
        return world, gt.tiny_models(world, 0, params)
