"""Run folders for chapters executed outside ``tokenbook run`` (plain papermill, Jupyter, Colab).

``tokenbook run`` gives each run its folder through ``TOKENBOOK_RUN_DIR``. A chapter executed
any other way calls :func:`start` (the first cell of the generated ``notebooks/<chapter>.ipynb``
does), which creates a fresh ``<root>/_build/runs/<chapter>/<run id>/`` with a minimal
``run.json`` (``status: "interactive"``, versions, commit) and points ``TOKENBOOK_RUN_DIR`` at
it, so ``claims.json`` and the figures of that execution (both found by
:func:`tokenbook.run_folder.run_dir`) land together, never in another run's folder. Each lookup
of that folder then records the chapter's parameter values, as the kernel holds them, in
``run.json`` (:func:`record_parameters`); :func:`run_dir` is the lookup that starts a folder
first if none is.

A folder :func:`start` created is finalised when the kernel exits (papermill shuts it down at
the end, after a failing cell too): ``run.json`` gets ``status`` ``ok`` or ``failed`` (the
error of the last cell executed), ``wall_s`` and ``finished``, and the notebook papermill is
writing (its output path, read from papermill's command line) is copied in as
``<chapter>.ipynb``. :func:`check_parameters` (each chapter's setup cell) checks the values
papermill injected with the runner's own checks before any work.

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

import atexit
import json
import os
import shutil
import socket
import sys
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from tokenbook import run_folder
from tokenbook.book.runner import (RUNS_DIRNAME, check_kernel_parameters, find_root,
                                   injected_names, new_run_id, read_parameters)
from tokenbook.cache import atomic_path, write_json_atomic
from tokenbook.provenance import git_commit, versions
from tokenbook.run_folder import RUN_DIR_ENV

#: environment variable naming the chapter of an interactive execution (set by the .ipynb)
CHAPTER_ENV = "TOKENBOOK_CHAPTER"

_started: Path | None = None  # the folder this process created


def start(chapter: str | None = None, *, root: str | Path | None = None) -> Path:
    """The run folder of this execution: ``$TOKENBOOK_RUN_DIR`` when set (``tokenbook run``,
    or an earlier call), else a new ``<root>/_build/runs/<chapter>/<run id>/`` holding a
    ``run.json``; sets ``TOKENBOOK_RUN_DIR`` to it for the rest of the process.

    ``chapter`` defaults to ``$TOKENBOOK_CHAPTER``, else ``"interactive"``; ``root`` to the
    book's root (:func:`tokenbook.book.runner.find_root`: the nearest folder with ``notebooks/`` and
    ``pyproject.toml``, else the checkout tokenbook is installed from). A folder it creates
    gets :func:`record_parameters` on every :func:`tokenbook.run_folder.run_dir`.
    """
    global _started
    given = run_folder.given_run_dir()
    if given is not None:
        given.mkdir(parents=True, exist_ok=True)
        return given

    chapter = chapter or os.environ.get(CHAPTER_ENV) or "interactive"
    if not chapter.replace("_", "").replace("-", "").isalnum():
        raise ValueError(f"chapter={chapter!r}: use the chapter's name, e.g. 'uid_grounding'")
    root = Path(root).resolve() if root is not None else find_root()
    run_id = new_run_id()
    path = root / RUNS_DIRNAME / chapter / run_id
    (path / "figures").mkdir(parents=True)

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
    run_folder.on_lookup(record_parameters)
    _finalise_at_exit(path)
    return path


def _finalise_at_exit(path: Path) -> None:
    """In an IPython kernel: track the last executed cell's error (``post_run_cell``) and
    finalise ``run.json`` when the kernel exits (:func:`finalise`)."""
    state: dict[str, Any] = {"error": None, "t0": time.perf_counter()}
    try:
        from IPython import get_ipython

        shell = get_ipython()
    except ImportError:
        shell = None
    if shell is None:  # not a kernel (a script, a test): nothing executes cells to track
        return

    def after_cell(result) -> None:
        exc = result.error_in_exec or result.error_before_exec
        state["error"] = None if exc is None else f"{type(exc).__name__}: {exc}"[:500]

    shell.events.register("post_run_cell", after_cell)
    atexit.register(lambda: finalise(path, error=state["error"],
                                     wall_s=time.perf_counter() - state["t0"]))


def papermill_output_path() -> Path | None:
    """The output notebook of the papermill process that started this kernel (its parent),
    read from its command line with papermill's own parser; None when not run by papermill."""
    try:
        import psutil
        from papermill.cli import papermill as papermill_command

        args = psutil.Process().parent().cmdline()
        where = next(i for i, a in enumerate(args)
                     if a == "papermill" or a.endswith(("/papermill", "papermill/__main__.py")))
        ctx = papermill_command.make_context("papermill", args[where + 1:],
                                             resilient_parsing=True)
        output, cwd = ctx.params.get("output_path"), psutil.Process().parent().cwd()
    except Exception:  # no papermill parent, or a command line it cannot read
        return None
    if not output or output == "-" or "://" in output:
        return None
    return Path(cwd) / output


def finalise(path: Path, *, error: str | None, wall_s: float) -> None:
    """Best effort: ``run.json`` of ``path`` → ``ok`` (or ``failed`` with ``error``),
    ``wall_s``, ``finished``; the papermill output notebook copied in. Never raises."""
    try:
        run_json = path / "run.json"
        info = json.loads(run_json.read_text())
        if info.get("status") != "interactive":
            return
        notebook = papermill_output_path()
        if notebook is not None and notebook.is_file():
            copy = path / f"{info.get('chapter', 'notebook')}.ipynb"
            with atomic_path(copy) as tmp:
                shutil.copyfile(notebook, tmp)
            info["notebook"] = copy.name
        info.update(status="ok" if error is None else "failed", error=error,
                    wall_s=round(wall_s, 2),
                    finished=datetime.now(timezone.utc).isoformat(timespec="seconds"))
        write_json_atomic(info, run_json)
    except Exception as exc:  # at exit: say so, never raise
        print(f"[tokenbook] could not finalise {path / 'run.json'}: {exc}", file=sys.stderr)


def check_parameters(chapter: str, namespace: dict[str, Any]) -> dict[str, Any]:
    """The chapter's setup cell: check the parameter values the kernel holds (papermill's
    injected ones included) with the runner's checks, convert text values (``'[0, 1]'`` →
    ``[0, 1]``) in ``namespace``, reject unknown injected names, and record the values in a
    run folder this process started. Raises :class:`tokenbook.book.runner.ParameterError`, whose
    one line names the parameter and what to do, before any work."""
    params = check_kernel_parameters(chapter, namespace, root=find_root())
    if _started is not None:
        run_json = _started / "run.json"
        injected = injected_names(namespace.get("In") or [])
        try:
            info = json.loads(run_json.read_text())
            info.update(parameters=json.loads(json.dumps(params, default=repr)),
                        seed=params.get("seed"), injected=bool(injected),
                        overrides=json.loads(json.dumps({k: params[k] for k in injected},
                                                        default=repr)))
            write_json_atomic(info, run_json)
        except (OSError, ValueError):
            pass
    return params


def _kernel_parameters(chapter: str, root: Path) -> dict[str, Any] | None:
    """The chapter's parameters as the executing kernel holds them (``__main__`` globals)."""
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


def record_parameters(path: Path) -> None:
    """In the folder this process started (else nothing): ``run.json`` gets the chapter's
    current parameter values and their ``seed``. Never raises."""
    if _started is None or path != _started:
        return
    run_json = path / "run.json"
    try:
        info = json.loads(run_json.read_text())
        params = _kernel_parameters(info["chapter"], path.parents[3])
        if params is not None and params != info.get("parameters"):
            info.update(parameters=params, seed=params.get("seed"))
            write_json_atomic(info, run_json)
    except (OSError, ValueError, KeyError, IndexError):
        return


def run_dir() -> Path:
    """The run folder, started first if none is (:func:`start`), as
    :func:`tokenbook.run_folder.run_dir` finds it (recording the parameters)."""
    start()
    return run_folder.run_dir()
