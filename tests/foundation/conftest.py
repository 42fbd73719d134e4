"""Fixtures for the foundation tests: a tiny book with one fast dummy chapter.

The dummy book copies the real ``_config.yml``, ``book/intro.md``, ``book/bibliography.md`` and
``book/references.bib`` so the real book configuration is what gets tested, with a chapter that
takes about a second instead of the real (slow) chapters.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

DUMMY_CHAPTER = '''# ---
# jupyter:
#   jupytext:
#     text_representation:
#       extension: .py
#       format_name: percent
#       format_version: '1.3'
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # A dummy chapter
#
# It checks one claim {cite}`gay2026uid` on a seeded random sample.

# %% tags=["parameters"]
seed = 0
n = 200
scale = "tiny"
shift = 0.5
fail = False
pause = 0.0

# %%
import time

import numpy as np
import matplotlib.pyplot as plt
from tokenbook import claims, plotting
from tokenbook.provenance import show_versions

show_versions()

# %%
from tqdm.auto import tqdm

total = 0
for i in tqdm(range(300), desc="dummy loop", mininterval=0):
    total += i

# %%
rng = np.random.default_rng(seed)
x = rng.normal(loc=shift, scale=1.0, size=n)
plotting.use_book_style()
fig, ax = plt.subplots()
ax.hist(x, bins=20)
ax.set_xlabel("value (a.u.)")
ax.set_ylabel("count")
plotting.savefig(fig, "histogram")
plt.show()

# %%
time.sleep(pause)
if fail:
    raise RuntimeError("dummy chapter asked to fail")

# %%
claims.report([
    claims.Claim.greater("mean-positive", "The mean is positive", statistic="sample mean",
                         value=float(x.mean()), threshold=0.0, paper="Dummy 2026, §1"),
    claims.Claim.not_testable("untestable", "Something we cannot check",
                              statistic="n/a", note="needs the paper scale"),
])
'''

TOC = """format: jb-book
root: book/intro
chapters:
  - file: notebooks/dummy
  - file: book/bibliography
"""


def make_book(root: Path, chapter_text: str = DUMMY_CHAPTER, name: str = "dummy") -> Path:
    """A book root at ``root`` with the real config and one chapter ``name``."""
    (root / "notebooks").mkdir(parents=True, exist_ok=True)
    (root / "book").mkdir(exist_ok=True)
    (root / "params" / name).mkdir(parents=True, exist_ok=True)
    (root / "pyproject.toml").write_text("[project]\nname = 'dummy-book'\n")
    shutil.copy(REPO / "_config.yml", root / "_config.yml")
    for f in ("intro.md", "bibliography.md", "references.bib"):
        shutil.copy(REPO / "book" / f, root / "book" / f)
    (root / "_toc.yml").write_text(TOC.replace("notebooks/dummy", f"notebooks/{name}"))
    (root / "notebooks" / f"{name}.py").write_text(chapter_text)
    (root / "params" / name / "tiny.yaml").write_text("seed: 0\nn: 200\n")
    return root


@pytest.fixture
def dummy_book(tmp_path) -> Path:
    """A fresh tiny book (real config, one dummy chapter) in a temporary folder."""
    return make_book(tmp_path / "book")


def tokenbook_cli(root: Path, *args: str, timeout: float = 300):
    """Run ``python -m tokenbook --root ROOT ARGS`` and return the CompletedProcess."""
    import subprocess
    import sys

    return subprocess.run([sys.executable, "-m", "tokenbook", "--root", str(root), *args],
                          cwd=root, capture_output=True, text=True, timeout=timeout)


@pytest.fixture
def cli():
    return tokenbook_cli


@pytest.fixture
def failing_book(tmp_path) -> Path:
    """A tiny book whose only chapter raises in a cell at its defaults."""
    return make_book(tmp_path / "failing", DUMMY_CHAPTER.replace("fail = False", "fail = True"))
