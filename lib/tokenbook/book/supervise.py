"""A process supervisor: runs a command and leaves no process of its tree behind.

:func:`tokenbook.book.runner.run_chapter` starts papermill through ``python -m tokenbook.book.supervise``.
The supervisor runs in its own session and is a Linux *child subreaper*, so every process its
command starts (papermill, the kernel — which jupyter_client puts in a session of its own — and
any training subprocess of the kernel) stays its descendant even when orphaned. It stops the
whole tree (SIGTERM, then SIGKILL after ``grace`` seconds) when

* the command exits (its leftover children are stopped),
* it receives SIGTERM or SIGINT (the runner was interrupted),
* the process it watches (the runner) disappears — e.g. SIGKILLed: the run's ``run.json``,
  still ``running``, is then marked ``died``.

It also removes the ``--cleanup`` folders (the run's temporary input notebook) and the
connection files (the ``tmp*.json`` named by the kernel's ``-f`` option, in the system's
temporary folder, holding the kernel's HMAC key) of the kernels it had
to stop, which jupyter_client removes only when a kernel shuts down normally. Exit status: the
command's, or ``128 + signal`` when stopped.

Usage: ``python -m tokenbook.book.supervise --watch PID [--run-json PATH] [--cleanup DIR] -- CMD...``
"""

from __future__ import annotations

import argparse
import ctypes
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

from tokenbook.cache import write_json_atomic

PR_SET_CHILD_SUBREAPER = 36


def _become_subreaper() -> bool:
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0
    except (OSError, AttributeError):  # not Linux: orphans go to init, best effort only
        return False


def stop_tree(grace: float = 5.0) -> int:
    """Stop every descendant of this process: SIGTERM, then SIGKILL after ``grace`` s. Returns
    how many there were."""
    import psutil

    me = psutil.Process()
    seen = 0
    connection_files: set[Path] = set()
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            procs = me.children(recursive=True)
        except psutil.Error:
            break
        if not procs:
            break
        seen = max(seen, len(procs))
        connection_files.update(f for p in procs for f in kernel_connection_files(p))
        for p in procs:
            try:
                p.send_signal(sig)
            except psutil.Error:
                pass
        psutil.wait_procs(procs, timeout=grace if sig == signal.SIGTERM else 2.0)
    _reap()
    for path in connection_files:
        try:
            path.unlink(missing_ok=True)
        except OSError:
            pass
    return seen


def kernel_connection_files(proc) -> list[Path]:
    """The connection file of a kernel process (the ``-f tmpXXXX.json`` argument, in the system's
    temporary folder), [] for any other process."""
    import psutil

    try:
        args = proc.cmdline()
    except psutil.Error:
        return []
    scratch = Path(tempfile.gettempdir()).resolve()
    found = []
    for flag, value in zip(args, args[1:]):
        if flag in ("-f", "--f") and value.endswith(".json"):
            path = Path(value)
            if path.parent.resolve() == scratch or "jupyter" in path.parent.parts:
                found.append(path)
    return found


def _reap() -> None:
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def mark_died(run_json: Path, watched: int) -> None:
    """Mark a run whose runner vanished: ``running`` → ``died`` (other statuses are kept)."""
    try:
        info = json.loads(run_json.read_text())
    except (OSError, json.JSONDecodeError):
        return
    if info.get("status") != "running":
        return
    info.update(status="died", error=f"the runner process (pid {watched}) died; the supervisor "
                                     f"stopped the notebook and its subprocesses",
                finished=datetime.now(timezone.utc).isoformat(timespec="seconds"))
    write_json_atomic(info, run_json)


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if "--" not in argv:
        print("usage: python -m tokenbook.book.supervise --watch PID [--run-json P] [--cleanup D] "
              "-- CMD...", file=sys.stderr)
        return 2
    cut = argv.index("--")
    p = argparse.ArgumentParser(prog="tokenbook.book.supervise")
    p.add_argument("--watch", type=int, required=True)
    p.add_argument("--run-json", type=Path, default=None)
    p.add_argument("--cleanup", type=Path, action="append", default=[])
    p.add_argument("--grace", type=float, default=5.0)
    args = p.parse_args(argv[:cut])
    cmd = argv[cut + 1:]
    _become_subreaper()
    stop = {"signal": 0}

    def _on_signal(signum, frame):
        stop["signal"] = signum

    signal.signal(signal.SIGTERM, _on_signal)
    signal.signal(signal.SIGINT, _on_signal)
    child = subprocess.Popen(cmd)
    rc: int | None = None
    orphaned = False
    while True:
        rc = child.poll()
        if rc is not None:
            break
        if stop["signal"]:
            break
        if os.getppid() != args.watch:
            orphaned = True
            break
        time.sleep(0.2)
    stop_tree(args.grace)
    if rc is None:
        rc = child.poll()
        if stop["signal"]:
            rc = 128 + stop["signal"]
        elif orphaned:
            rc = 128 + signal.SIGKILL
    if orphaned and args.run_json is not None:
        mark_died(args.run_json, args.watch)
    for folder in args.cleanup:
        shutil.rmtree(folder, ignore_errors=True)
    if rc is None:
        return 1
    return 128 - rc if rc < 0 else rc


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
