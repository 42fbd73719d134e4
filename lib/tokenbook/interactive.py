"""Run folders for chapters executed outside ``tokenbook run`` (plain papermill, Jupyter, Colab).

``tokenbook run`` gives each run its folder through ``TOKENBOOK_RUN_DIR``. A chapter executed
any other way calls :func:`start` (the first cell of the generated ``notebooks/<chapter>.ipynb``
does), which creates a fresh ``<root>/_build/runs/<chapter>/<run id>/`` with a minimal
``run.json`` (``status: "interactive"``, versions, commit) and points ``TOKENBOOK_RUN_DIR`` at
it, so ``claims.json`` and the figures of that execution land together, never in another run's
folder. :func:`run_dir` returns that folder (starting one if needed) and records the chapter's
parameter values, as the kernel holds them, in ``run.json``.

Example
-------
>>> import os, tempfile
>>> old = os.environ.pop("TOKENBOOK_RUN_DIR", None)
>>> folder = start("demo", root=tempfile.mkdtemp())
>>> (folder / "run.json").exists() and folder.parent.name == "demo"
True
>>> _ = os.environ.pop("TOKENBOOK_RUN_DIR"); _ = old and os.environ.update(TOKENBOOK_RUN_DIR=old)
"""

from __future__ import annotations

import json
import os
import socket
import sys
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from .cache import write_json_atomic

#: environment variable naming the chapter of an interactive execution (set by the .ipynb)
CHAPTER_ENV = "TOKENBOOK_CHAPTER"
RUN_DIR_ENV = "TOKENBOOK_RUN_DIR"  # the same name as tokenbook.claims.RUN_DIR_ENV

_started: Path | None = None  # the folder this process created


def start(chapter: str | None = None, *, root: str | Path | None = None) -> Path:
    """The run folder of this execution: ``$TOKENBOOK_RUN_DIR`` when set (``tokenbook run``,
    or an earlier call), else a new ``<root>/_build/runs/<chapter>/<run id>/`` holding a
    ``run.json``; sets ``TOKENBOOK_RUN_DIR`` to it for the rest of the process.

    ``chapter`` defaults to ``$TOKENBOOK_CHAPTER``, else ``"interactive"``; ``root`` to the
    book's root (:func:`tokenbook.runner.find_root`: the nearest folder with ``notebooks/`` and
    ``pyproject.toml``, else the checkout tokenbook is installed from).
    """
    global _started
    if os.environ.get(RUN_DIR_ENV):
        path = Path(os.environ[RUN_DIR_ENV])
        path.mkdir(parents=True, exist_ok=True)
        return path
    from .runner import RUNS_DIRNAME, find_root, new_run_id

    chapter = chapter or os.environ.get(CHAPTER_ENV) or "interactive"
    if not chapter.replace("_", "").replace("-", "").isalnum():
        raise ValueError(f"chapter={chapter!r}: use the chapter's name, e.g. 'uid_grounding'")
    root = Path(root).resolve() if root is not None else find_root()
    run_id = new_run_id()
    path = root / RUNS_DIRNAME / chapter / run_id
    (path / "figures").mkdir(parents=True)
    from .provenance import git_commit, versions

    info = {"chapter": chapter, "run_id": run_id, "status": "interactive",
            "runner": "outside tokenbook run (papermill, Jupyter or Colab)",
            "parameters": None, "overrides": None, "injected": None, "seed": None,
            "git_commit": git_commit(root), "versions": versions(),
            "started": datetime.now(timezone.utc).isoformat(timespec="seconds"),
            "pid": os.getpid(), "host": socket.gethostname(),
            "wall_s": None, "peak_rss_mb": None, "error": None, "source_hash": None}
    write_json_atomic(info, path / "run.json")
    os.environ[RUN_DIR_ENV] = str(path)
    _started = path
    return path


def _kernel_parameters(chapter: str, root: Path) -> dict[str, Any] | None:
    """The chapter's parameters as the executing kernel holds them (``__main__`` globals)."""
    from .runner import read_parameters

    source = root / "notebooks" / f"{chapter}.py"
    main = sys.modules.get("__main__")
    if main is None or not source.exists():
        return None
    try:
        names = read_parameters(source)
    except Exception:  # a broken source must not break the chapter's outputs
        return None
    found = {k: getattr(main, k) for k in names if hasattr(main, k)}
    return json.loads(json.dumps(found, default=repr)) if found else None


def run_dir() -> Path:
    """The run folder (see :func:`start`); in a folder this process started, ``run.json``
    also gets the chapter's current parameter values and their ``seed``."""
    path = start()
    if _started is not None and path == _started:
        run_json = path / "run.json"
        try:
            info = json.loads(run_json.read_text())
            params = _kernel_parameters(info["chapter"], path.parents[3])
        except (OSError, ValueError, KeyError, IndexError):
            return path
        if params is not None and params != info.get("parameters"):
            info.update(parameters=params, seed=params.get("seed"))
            write_json_atomic(info, run_json)
    return path
