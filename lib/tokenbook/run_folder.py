"""The run folder: where the executing chapter writes ``claims.json`` and its figures.

One lookup for the whole library (:func:`tokenbook.claims.report` and
:func:`tokenbook.plotting.savefig` both use :func:`run_dir`): ``$TOKENBOOK_RUN_DIR``, which
``tokenbook run`` sets and :func:`tokenbook.book.interactive.start` sets for a chapter executed
by papermill, Jupyter or Colab; without it, ``_build/runs/_interactive`` under the current
directory. Whoever started the folder may ask to hear of each lookup (:func:`on_lookup`: the
book's interactive runs record the chapter's parameters in ``run.json`` that way).

Example
-------
>>> import os, tempfile
>>> old = os.environ.get(RUN_DIR_ENV)
>>> os.environ[RUN_DIR_ENV] = tempfile.mkdtemp()
>>> run_dir() == Path(os.environ[RUN_DIR_ENV])
True
>>> _ = os.environ.pop(RUN_DIR_ENV); _ = old and os.environ.update(TOKENBOOK_RUN_DIR=old)
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Callable

__all__ = ["RUN_DIR_ENV", "FALLBACK_RUN_DIR", "given_run_dir", "run_dir", "on_lookup"]

#: environment variable naming the run folder of the executing notebook
RUN_DIR_ENV = "TOKENBOOK_RUN_DIR"
#: the run folder (relative to the current directory) when no one named one
FALLBACK_RUN_DIR = Path("_build") / "runs" / "_interactive"

_hooks: list[Callable[[Path], None]] = []


def given_run_dir() -> Path | None:
    """The run folder named by ``$TOKENBOOK_RUN_DIR`` (not created), or None when unset."""
    value = os.environ.get(RUN_DIR_ENV)
    return Path(value) if value else None


def run_dir() -> Path:
    """The folder where the executing chapter writes ``claims.json`` and figures (created):
    ``$TOKENBOOK_RUN_DIR``, else ``_build/runs/_interactive`` under the current directory.
    Every function registered with :func:`on_lookup` is then called with it."""
    path = given_run_dir() or FALLBACK_RUN_DIR.absolute()
    path.mkdir(parents=True, exist_ok=True)
    for hook in list(_hooks):
        hook(path)
    return path


def on_lookup(hook: Callable[[Path], None]) -> None:
    """Call ``hook(folder)`` after every :func:`run_dir` of this process (once per hook, however
    often it is registered); a hook must not raise."""
    if hook not in _hooks:
        _hooks.append(hook)
