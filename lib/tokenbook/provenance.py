"""Provenance: which versions and which commit produced a result.

Every chapter calls :func:`show_versions` near its top so the rendered page states the tested
versions; the runner stores :func:`versions` in each run's ``run.json``.

Example
-------
>>> v = versions()
>>> sorted(k for k in ("python", "tokenbook", "git_commit") if k in v)
['git_commit', 'python', 'tokenbook']
"""

from __future__ import annotations

import platform
import subprocess
from importlib import metadata
from pathlib import Path

import pandas as pd

from tokenbook import __version__

#: distributions reported, in display order (missing ones are shown as "not installed")
PACKAGES = ("torch", "transformers", "tokenizers", "numpy", "pandas", "scipy", "statsmodels",
            "scikit-learn", "matplotlib", "seaborn", "pyarrow", "datasets", "dask", "distributed",
            "jupytext", "papermill", "cupy-cuda12x")

_REPO = Path(__file__).resolve().parents[2]



def cpu_model() -> str:
    """The CPU's model name (``/proc/cpuinfo``), else :func:`platform.processor` ("" if unknown)."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or ""

def git_commit(repo: str | Path | None = None, *, short: bool = False) -> str | None:
    """The checked-out commit of ``repo`` (default: the checkout tokenbook lives in).

    Returns ``None`` outside a git checkout. A ``+dirty`` suffix marks uncommitted changes to
    tracked files, so a result is never attributed to a commit that did not produce it.
    """
    repo = Path(repo) if repo is not None else _REPO
    try:
        out = subprocess.run(["git", "rev-parse", "HEAD"], cwd=repo, capture_output=True,
                             text=True, timeout=10)
        if out.returncode != 0:
            return None
        sha = out.stdout.strip()
        if short:
            sha = sha[:12]
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"],
                               cwd=repo, capture_output=True, text=True, timeout=10)
        if dirty.returncode == 0 and dirty.stdout.strip():
            sha += "+dirty"
        return sha
    except (OSError, subprocess.SubprocessError):
        return None


def _version(dist: str) -> str | None:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return None


def versions() -> dict:
    """Versions of Python, the key packages, tokenbook, and the git commit.

    Returns a flat dict ``{name: version string or None}``; ``None`` means not installed
    (or, for ``git_commit``, not a git checkout). Also records ``platform`` and the torch
    device situation (``cuda``: whether torch sees a GPU).
    """
    out: dict = {"python": platform.python_version(), "platform": platform.platform(),
                 "tokenbook": __version__}
    for dist in PACKAGES:
        out[dist] = _version(dist)
    try:
        import torch

        out["cuda"] = bool(torch.cuda.is_available())
        out["torch_threads"] = int(torch.get_num_threads())
    except Exception:  # torch missing or broken: report, don't fail
        out["cuda"] = None
    out["git_commit"] = git_commit()
    return out


def versions_frame():
    """:func:`versions` as a two-column DataFrame (package, version)."""
    v = versions()
    return pd.DataFrame({"package": list(v), "version": ["not installed" if x is None else str(x)
                                                          for x in v.values()]})


def show_versions() -> None:
    """Display the tested versions as a small table, wherever the call stands in its cell.

    In a notebook the table is shown through IPython's ``display`` (so it need not be the
    cell's last expression, and returns nothing, so it is never shown twice); outside one it
    is printed.
    """
    frame = versions_frame()
    try:
        from IPython import get_ipython
        from IPython.display import display
    except ImportError:  # plain Python without IPython
        get_ipython = None  # type: ignore[assignment]
    if get_ipython is None or get_ipython() is None:
        print("Versions used for this run")
        print(frame.to_string(index=False))
        return None
    display(versions_table(frame))
    return None


def versions_table(frame=None):
    """:func:`versions_frame` styled for a page: no index, captioned "Versions used for this
    run" (the plain frame where jinja2 is missing)."""
    frame = versions_frame() if frame is None else frame
    try:
        return frame.style.hide(axis="index").set_caption("Versions used for this run")
    except Exception:  # jinja2 missing
        return frame
