"""Runs and sweeps under faults: killed runners, orphaned kernels, resumed sweeps."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from tokenbook.book.runner import (RunnerError, find_reusable, get_chapter, list_runs,
                                   run_chapter, source_hash, sweep)

from .conftest import DUMMY_CHAPTER, make_book

# seeds >= 2 wait $DUMMY_PAUSE seconds: the same parameters can run fast or hang
GATED = DUMMY_CHAPTER.replace(
    "time.sleep(pause)",
    "import os\ntime.sleep(pause + float(os.environ.get('DUMMY_PAUSE', '0')) * (seed >= 2))")


def _run_processes(runs: Path) -> list[psutil.Process]:
    """Live processes (kernels, papermill) executing a run under ``runs``."""
    found = []
    for p in psutil.process_iter():
        try:
            if p.environ().get("TOKENBOOK_RUN_DIR", "").startswith(str(runs)):
                found.append(p)
        except psutil.Error:
            pass
    return found


def _wait_for(predicate, timeout: float, what: str):
    deadline = time.time() + timeout
    while time.time() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.2)
    pytest.fail(f"timed out waiting for {what}")


def test_a_running_run_whose_runner_is_gone_is_reported_died(tmp_path):
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    folder = tmp_path / "runs" / "dummy"
    for run_id, pid in (("20260101T000000.000000Z-aaaa", dead.pid),
                        ("20260101T000001.000000Z-bbbb", os.getpid())):
        (folder / run_id).mkdir(parents=True)
        (folder / run_id / "run.json").write_text(json.dumps(
            {"run_id": run_id, "status": "running", "pid": pid, "host": socket.gethostname(),
             "pid_started": psutil.Process(pid).create_time() if pid == os.getpid() else 0.0}))
    (folder / ".20260101T000002.000000Z-cccc.tmp-x").mkdir()  # a staging folder: not a run
    statuses = [r["status"] for r in list_runs("dummy", tmp_path / "runs")]
    assert statuses == ["died", "running"]


def test_reuse_needs_the_same_source_and_parameters(tmp_path):
    folder = tmp_path / "runs" / "dummy" / "r1"
    folder.mkdir(parents=True)
    (folder / "run.json").write_text(json.dumps(
        {"run_id": "r1", "status": "ok", "source_hash": "abc",
         "parameters": {"seed": 1, "n": 50, "xs": [1, 2]}}))
    runs = tmp_path / "runs"
    assert find_reusable("dummy", runs, {"n": 50, "seed": 1, "xs": (1, 2)}, "abc")["run_id"] == "r1"
    assert find_reusable("dummy", runs, {"n": 50, "seed": 2, "xs": [1, 2]}, "abc") is None
    assert find_reusable("dummy", runs, {"n": 50, "seed": 1, "xs": [1, 2]}, "other") is None


@pytest.mark.slow
def test_killed_sweep_leaves_no_orphans_and_the_rerun_recomputes_only_unfinished(tmp_path):
    root = make_book(tmp_path / "book", GATED)
    runs = root / "_build" / "runs"
    tmpdir = tmp_path / "tmp"
    tmpdir.mkdir()
    env = {**os.environ, "DUMMY_PAUSE": "300", "TMPDIR": str(tmpdir)}
    cmd = [sys.executable, "-m", "tokenbook", "--root", str(root), "sweep", "dummy",
           "-p", "seed", "1,2,3", "-p", "n", "50", "--workers", "1"]
    proc = subprocess.Popen(cmd, cwd=root, env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    try:
        def midway():
            infos = list_runs("dummy", runs)
            done = [r for r in infos if r["status"] == "ok"]
            busy = [r for r in infos if r["status"] == "running"
                    and list(Path(r["run_dir"]).glob("figures/*.png"))]
            return (done, busy) if done and busy else None

        done, busy = _wait_for(midway, 240, "one finished run and one in the notebook")
    finally:
        proc.send_signal(signal.SIGKILL)  # the sweep process only: its children must follow
        proc.wait()
    assert [r["parameters"]["seed"] for r in done] == [1]
    assert _wait_for(lambda: not _run_processes(runs), 60, "the orphans to be stopped")
    infos = {r["run_id"]: r for r in list_runs("dummy", runs)}
    # the killed run says so on disk (the supervisor marked it), and every folder has run.json
    killed = json.loads((Path(busy[0]["run_dir"]) / "run.json").read_text())
    assert killed["status"] == "died" and "died" in killed["error"]
    assert all((p / "run.json").exists() for p in (runs / "dummy").iterdir())
    assert not list(tmpdir.glob("tokenbook-*"))  # no temporary notebook folder left

    res = subprocess.run(cmd, cwd=root, env={**env, "DUMMY_PAUSE": "0"}, capture_output=True,
                         text=True, timeout=400)
    assert res.returncode == 0, res.stderr[-3000:]
    hashes = {r["source_hash"] for r in list_runs("dummy", runs) if r["status"] == "ok"}
    if len(hashes) > 1:  # (a shared working tree whose library was edited meanwhile)
        pytest.skip("the library source changed during the test: nothing could be reused")
    assert "1 of 3 runs reused" in res.stderr
    lines = [ln.split() for ln in res.stdout.splitlines()]
    by_status = {}
    for ln in lines:
        by_status.setdefault(ln[0], []).append(ln[-1])
    assert by_status["reused"] == [done[0]["run_dir"]]
    assert len(by_status["ok"]) == 2 and done[0]["run_dir"] not in by_status["ok"]
    statuses = sorted(r["status"] for r in list_runs("dummy", runs))
    assert statuses == ["died", "ok", "ok", "ok"] and len(infos) == 2


@pytest.mark.slow
def test_sweep_reuses_finished_runs_and_rerun_forces(dummy_book, capsys):
    first = sweep("dummy", {"seed": [1]}, fixed={"n": 20}, root=dummy_book, n_workers=1)
    assert [r["reused"] for r in first] == [False]
    capsys.readouterr()
    again = sweep("dummy", {"seed": [1]}, fixed={"n": 20}, root=dummy_book, n_workers=1)
    recorded = json.loads((Path(first[0]["run_dir"]) / "run.json").read_text())["source_hash"]
    if recorded != source_hash(get_chapter("dummy", dummy_book)):
        pytest.skip("the library source changed during the test (a shared working tree)")
    assert again[0]["reused"] and again[0]["run_dir"] == first[0]["run_dir"]
    assert "1 of 1 runs reused" in capsys.readouterr().err
    forced = sweep("dummy", {"seed": [1]}, fixed={"n": 20}, root=dummy_book, n_workers=1,
                   rerun=True)
    assert not forced[0]["reused"] and forced[0]["run_dir"] != first[0]["run_dir"]
    # an edited chapter (new source hash) is not reused
    path = dummy_book / "notebooks" / "dummy.py"
    path.write_text(path.read_text() + "\n# %%\nx = 1\n")
    edited = sweep("dummy", {"seed": [1]}, fixed={"n": 20}, root=dummy_book, n_workers=1)
    assert not edited[0]["reused"] and edited[0]["status"] == "ok"


@pytest.mark.slow
def test_sigkilled_run_is_marked_died_and_its_kernel_stopped(dummy_book):
    runs = dummy_book / "_build" / "runs"
    # the child gets the default SIGINT handling: a shell that starts the tests in the
    # background (`bash .ci/run &`) ignores SIGINT, and a child inherits that
    proc = subprocess.Popen([sys.executable, "-m", "tokenbook", "--root", str(dummy_book), "run",
                             "dummy", "-p", "pause", "300", "-q"], cwd=dummy_book,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    _wait_for(lambda: list(runs.glob("dummy/*/figures/*.png")), 120, "the run to be midway")
    assert _run_processes(runs)  # papermill and the kernel are running
    proc.kill()
    proc.wait()
    assert _wait_for(lambda: not _run_processes(runs), 60, "the kernel to be stopped")
    (run,) = list_runs("dummy", runs)
    assert run["status"] == "died"
    assert json.loads((Path(run["run_dir"]) / "run.json").read_text())["status"] == "died"


@pytest.mark.slow
def test_sigterm_of_a_run_stops_its_kernel(dummy_book):
    runs = dummy_book / "_build" / "runs"
    # the child gets the default SIGINT handling: a shell that starts the tests in the
    # background (`bash .ci/run &`) ignores SIGINT, and a child inherits that
    proc = subprocess.Popen([sys.executable, "-m", "tokenbook", "--root", str(dummy_book), "run",
                             "dummy", "-p", "pause", "300", "-q"], cwd=dummy_book,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    _wait_for(lambda: list(runs.glob("dummy/*/figures/*.png")), 120, "the run to be midway")
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=60) != 0
    assert _wait_for(lambda: not _run_processes(runs), 30, "the kernel to be stopped")
    (run,) = list_runs("dummy", runs)
    assert run["status"] == "failed" and "interrupted" in run["error"]


def test_run_folder_is_never_without_run_json(dummy_book, monkeypatch, tmp_path):
    """A run that fails before papermill starts still leaves a folder with its run.json, and
    removes its own and dead runners' temporary input folders."""
    import tempfile

    import tokenbook.book.runner as runner
    from tokenbook import cache

    scratch = tmp_path / "scratch"
    scratch.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(scratch))
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    stale = scratch / f"tokenbook-dummy.tmp-{cache._HOST}-{dead.pid}-abc123-xyz"
    stale.mkdir()

    def boom(*a, **k):
        raise OSError("disk full (simulated)")

    monkeypatch.setattr(runner.subprocess, "Popen", boom)
    with pytest.raises(RunnerError, match="disk full"):
        run_chapter("dummy", {}, root=dummy_book, quiet=True)
    (folder,) = (dummy_book / "_build" / "runs" / "dummy").iterdir()
    info = json.loads((folder / "run.json").read_text())
    assert info["status"] == "failed" and "disk full" in info["error"]
    assert list(scratch.iterdir()) == []


@pytest.mark.slow
def test_ctrl_c_of_a_sweep_stops_its_runs(tmp_path):
    root = make_book(tmp_path / "book", GATED)
    runs = root / "_build" / "runs"
    env = {**os.environ, "DUMMY_PAUSE": "300"}
    proc = subprocess.Popen([sys.executable, "-m", "tokenbook", "--root", str(root), "sweep",
                             "dummy", "-p", "seed", "2", "-p", "n", "30", "--workers", "1"],
                            cwd=root, env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True,
                            # a shell's background job ignores SIGINT, and an ignored signal is
                            # inherited: give the sweep the default, as an interactive Ctrl-C has
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    try:
        _wait_for(lambda: list(runs.glob("dummy/*/figures/*.png")), 240, "the run to be midway")
        proc.send_signal(signal.SIGINT)  # Ctrl-C
        # bounded: the Dask cluster closes with 10 s + 30 s timeouts; the rest is slack for a
        # loaded 2-core machine (it took > 120 s once with 7 busy processes)
        _, err = proc.communicate(timeout=240)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130 and "interrupted" in err
    assert _wait_for(lambda: not _run_processes(runs), 60, "the run's processes to stop")
    (run,) = list_runs("dummy", runs)
    assert run["status"] in ("died", "failed")  # never "running" for ever


@pytest.mark.slow
def test_timeout_stops_a_silent_kernel(tmp_path, monkeypatch):
    # seed 2 sleeps $DUMMY_PAUSE seconds without printing anything: the timeout must still fire
    root = make_book(tmp_path / "book", GATED)
    monkeypatch.setenv("DUMMY_PAUSE", "300")
    t0 = time.time()
    res = run_chapter("dummy", {"seed": 2}, root=root, quiet=True, timeout_s=15)
    assert time.time() - t0 < 120, "the silent kernel ran on past its timeout"
    assert res.status == "failed" and "timed out after 15 s" in (res.error or "")
    assert _wait_for(lambda: not _run_processes(root / "_build" / "runs"), 60,
                     "the run's processes to stop")
    (run,) = list_runs("dummy", root / "_build" / "runs")
    assert run["status"] == "failed" and "timed out" in run["error"]


def test_disk_full_after_the_run_folder_exists_is_one_line_and_failed(dummy_book, monkeypatch,
                                                                      capsys):
    """#30: an OS error after the folder exists: one line, exit 2, run.json failed with it."""
    import errno

    import jupytext

    from tokenbook.book import cli

    def full(*args, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(jupytext, "write", full)
    assert cli.main(["--root", str(dummy_book), "run", "dummy", "-q"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "No space left on device" in err, err
    (run,) = list_runs("dummy", dummy_book / "_build" / "runs")
    assert run["status"] == "failed" and "No space left on device" in run["error"]


def test_run_json_is_rewritten_in_place_when_no_temporary_fits(tmp_path, monkeypatch):
    import tokenbook.book.runner as runner

    run_json = tmp_path / "run.json"
    run_json.write_text(json.dumps({"status": "running", "versions": {"x": "1" * 500}}))

    def full(*args, **kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(runner, "write_json_atomic", full)
    assert runner._record_status({"status": "failed", "error": "disk full"}, run_json)
    assert json.loads(run_json.read_text())["status"] == "failed"


@pytest.mark.slow
def test_double_ctrl_c_ends_interrupted_and_removes_the_kernel_connection_file(dummy_book):
    runs = dummy_book / "_build" / "runs"
    # the child gets the default SIGINT handling: a shell that starts the tests in the
    # background (`bash .ci/run &`) ignores SIGINT, and a child inherits that
    proc = subprocess.Popen([sys.executable, "-m", "tokenbook", "--root", str(dummy_book), "run",
                             "dummy", "-p", "pause", "300", "-q"], cwd=dummy_book,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    _wait_for(lambda: list(runs.glob("dummy/*/figures/*.png")), 120, "the run to be midway")
    from tokenbook.book.supervise import kernel_connection_files

    files = [f for p in _run_processes(runs) for f in kernel_connection_files(p)]
    assert files and all(f.exists() for f in files)
    proc.send_signal(signal.SIGINT)
    time.sleep(0.3)
    proc.send_signal(signal.SIGINT)
    assert proc.wait(timeout=60) != 0
    assert _wait_for(lambda: not _run_processes(runs), 30, "the kernel to be stopped")
    (run,) = list_runs("dummy", runs)
    assert run["status"] == "failed" and "interrupted" in run["error"]
    assert not any(f.exists() for f in files)


def _flaky_python3_kernel(folder: Path, deaths: int, monkeypatch) -> Path:
    """A ``python3`` kernel spec (put first on ``JUPYTER_PATH``) whose first ``deaths`` starts
    exit before the kernel binds its ports, as a kernel does when a port it was given is taken;
    later starts run ipykernel. Returns the file that counts the starts."""
    spec = folder / "kernels" / "python3"
    spec.mkdir(parents=True)
    starts = folder / "starts"
    launcher = folder / "launch.py"
    launcher.write_text(
        "import pathlib, sys\n"
        f"starts = pathlib.Path({str(starts)!r})\n"
        "n = len(starts.read_text()) if starts.exists() else 0\n"
        "starts.write_text('x' * (n + 1))\n"
        f"if n < {deaths}:\n"
        "    sys.exit('zmq.error.ZMQError: Address already in use (a simulated port race)')\n"
        "from ipykernel import kernelapp\n"
        "kernelapp.launch_new_instance(argv=sys.argv[1:])\n")
    spec.joinpath("kernel.json").write_text(json.dumps(
        {"argv": [sys.executable, str(launcher), "-f", "{connection_file}"],
         "display_name": "flaky python3", "language": "python"}))
    monkeypatch.setenv("JUPYTER_PATH", str(folder))
    return starts


@pytest.mark.slow
def test_a_kernel_that_dies_before_starting_is_started_again(dummy_book, tmp_path, monkeypatch):
    starts = _flaky_python3_kernel(tmp_path / "jupyter", deaths=1, monkeypatch=monkeypatch)
    res = run_chapter("dummy", {"seed": 1}, root=dummy_book, quiet=True)
    assert res.ok, res.error
    info = json.loads((res.run_dir / "run.json").read_text())
    assert info["kernel_start_attempts"] == 2 and len(starts.read_text()) == 2
    assert (res.run_dir / "claims.json").exists()
    # the failed start's output is kept: the kernel's own message says why it died
    assert "Address already in use" in (res.run_dir / "papermill.log").read_text()


@pytest.mark.slow
def test_a_kernel_that_never_starts_fails_the_run_after_three_attempts(dummy_book, tmp_path,
                                                                       monkeypatch):
    starts = _flaky_python3_kernel(tmp_path / "jupyter", deaths=99, monkeypatch=monkeypatch)
    res = run_chapter("dummy", root=dummy_book, quiet=True)
    assert not res.ok and "Kernel died before replying to kernel_info" in res.error
    info = json.loads((res.run_dir / "run.json").read_text())
    assert info["status"] == "failed" and info["kernel_start_attempts"] == 3
    assert len(starts.read_text()) == 3


@pytest.mark.slow
def test_a_failing_cell_is_not_run_again(failing_book, tmp_path, monkeypatch):
    starts = _flaky_python3_kernel(tmp_path / "jupyter", deaths=0, monkeypatch=monkeypatch)
    res = run_chapter("dummy", root=failing_book, quiet=True)
    assert not res.ok and "dummy chapter asked to fail" in res.error
    assert len(starts.read_text()) == 1
    assert json.loads((res.run_dir / "run.json").read_text())["kernel_start_attempts"] == 1
