"""Run folders: what a run leaves behind, failed and killed runs, sweeps through Dask."""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tokenbook.claims import load_claims
from tokenbook.book.runner import (RUN_JSON_KEYS, discover, hashed_sources, latest_run,
                                   list_runs, new_run_id, run_chapter, sweep)


def _digest(folder: Path) -> dict[str, str]:
    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file()}


def test_a_run_depends_on_the_whole_library_and_the_kernels():
    """A change anywhere in the library (the science, a chapter package) or a CUDA kernel
    makes every chapter's run out of date, not only a change to the book machinery."""
    repo = Path(__file__).resolve().parents[2]
    chapter = discover(repo)["uid_grounding"]
    files = {p.resolve().relative_to(repo).as_posix() for p in hashed_sources(chapter)}
    assert {"notebooks/uid_grounding.py", "lib/tokenbook/seeds.py",
            "lib/tokenbook/models/paligemma.py", "lib/tokenbook/book/runner.py",
            "lib/tokenbook/memorisation_cartography/ensemble.py",
            "kernels/row_state.cu"} <= files
    assert not any("__pycache__" in f for f in files)


def test_run_ids_sort_by_time_and_are_unique():
    ids = [new_run_id() for _ in range(50)]
    assert ids == sorted(ids) and len(set(ids)) == 50


@pytest.mark.slow
def test_ok_run_then_failed_run(dummy_book):
    ok = run_chapter("dummy", {"seed": 3}, root=dummy_book, quiet=True)
    assert ok.ok, ok.error
    run = json.loads((ok.run_dir / "run.json").read_text())
    for key in RUN_JSON_KEYS:
        assert key in run, key
    assert run["status"] == "ok" and run["seed"] == 3 and run["chapter"] == "dummy"
    assert run["parameters"]["seed"] == 3 and run["parameters"]["n"] == 200
    assert run["overrides"] == {"seed": 3} and run["injected"] is True
    assert run["wall_s"] > 0 and run["peak_rss_mb"] > 10
    assert run["versions"]["python"] and run["versions"]["tokenbook"]
    assert ok.run_dir.parent == dummy_book / "_build" / "runs" / "dummy"
    assert (ok.run_dir / "figures" / "histogram.png").stat().st_size > 1000
    assert (ok.run_dir / "dummy.ipynb").exists()
    assert (ok.run_dir / "dummy.py").read_text() == (dummy_book / "notebooks/dummy.py").read_text()
    claims = load_claims(ok.run_dir / "claims.json")
    assert {c["id"] for c in claims} == {"mean-positive", "untestable"}
    # the seed was really injected: the measured mean is that of seed 3
    import numpy as np

    expected = float(np.random.default_rng(3).normal(0.5, 1.0, 200).mean())
    assert claims[0]["value"] == pytest.approx(expected)
    before = _digest(ok.run_dir)

    bad = run_chapter("dummy", {"fail": True}, root=dummy_book, quiet=True)
    assert not bad.ok and "dummy chapter asked to fail" in bad.error
    info = json.loads((bad.run_dir / "run.json").read_text())
    assert info["status"] == "failed" and info["error"]
    # partial outputs kept: the figure made before the failing cell, and the notebook
    assert (bad.run_dir / "figures" / "histogram.png").exists()
    assert (bad.run_dir / "dummy.ipynb").exists()
    assert not (bad.run_dir / "claims.json").exists()
    assert bad.run_dir != ok.run_dir and _digest(ok.run_dir) == before
    runs = dummy_book / "_build" / "runs"
    assert latest_run("dummy", runs)["run_id"] == ok.run_dir.name
    assert [r["status"] for r in list_runs("dummy", runs)] == ["ok", "failed"]


@pytest.mark.slow
def test_cli_failed_run_exits_nonzero_and_says_where(dummy_book, cli):
    res = cli(dummy_book, "run", "dummy", "-p", "fail", "true", "-q")
    assert res.returncode == 1
    assert "partial outputs kept in" in res.stderr
    assert str(dummy_book / "_build" / "runs" / "dummy") in res.stderr


@pytest.mark.slow
def test_killed_run_leaves_earlier_runs_intact(dummy_book):
    ok = run_chapter("dummy", {}, root=dummy_book, quiet=True)
    assert ok.ok
    before = _digest(ok.run_dir)
    proc = subprocess.Popen([sys.executable, "-m", "tokenbook", "--root", str(dummy_book), "run",
                             "dummy", "-p", "pause", "60", "-q"], cwd=dummy_book,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)
    runs = dummy_book / "_build" / "runs" / "dummy"
    deadline = time.time() + 60
    try:
        while time.time() < deadline:
            new = [p for p in runs.iterdir() if p != ok.run_dir and (p / "figures").exists()]
            if new and list(new[0].glob("figures/*.png")):  # well into the notebook
                break
            time.sleep(0.2)
        else:
            pytest.fail("the second run never started")
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    assert _digest(ok.run_dir) == before
    killed = json.loads((new[0] / "run.json").read_text())
    assert killed["status"] in ("running", "died")  # never claims success
    assert latest_run("dummy", runs.parent)["run_id"] == ok.run_dir.name
    # the runner is gone: the run is reported as died, not running for ever
    statuses = {r["run_id"]: r["status"] for r in list_runs("dummy", runs.parent)}
    assert statuses[new[0].name] == "died"


@pytest.mark.slow
def test_sweep_two_values_two_run_folders(dummy_book):
    results = sweep("dummy", {"seed": [1, 2]}, fixed={"n": 50}, root=dummy_book, n_workers=2)
    assert sorted(r["overrides"]["seed"] for r in results) == [1, 2]
    assert all(r["status"] == "ok" for r in results), results
    folders = {Path(r["run_dir"]) for r in results}
    assert len(folders) == 2
    for folder in folders:
        run = json.loads((folder / "run.json").read_text())
        assert run["status"] == "ok" and run["parameters"]["n"] == 50
        assert (folder / "claims.json").exists()
    seeds = sorted(json.loads((f / "run.json").read_text())["seed"] for f in folders)
    assert seeds == [1, 2]


@pytest.mark.slow
def test_sweep_on_an_existing_scheduler(dummy_book):
    from distributed import LocalCluster

    with LocalCluster(n_workers=1, threads_per_worker=1, processes=False,
                      dashboard_address=":0") as cluster:
        results = sweep("dummy", {"seed": [7]}, fixed={"n": 20}, root=dummy_book,
                        scheduler=cluster.scheduler_address)
        assert cluster.scheduler is not None  # the sweep did not shut the user's cluster down
    assert [r["status"] for r in results] == ["ok"]
    assert json.loads((Path(results[0]["run_dir"]) / "run.json").read_text())["seed"] == 7


@pytest.mark.slow
def test_terminated_run_is_recorded_as_failed(dummy_book):
    proc = subprocess.Popen([sys.executable, "-m", "tokenbook", "--root", str(dummy_book), "run",
                             "dummy", "-p", "pause", "60", "-q"], cwd=dummy_book,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    runs = dummy_book / "_build" / "runs" / "dummy"
    deadline = time.time() + 60
    while time.time() < deadline and not list(runs.glob("*/figures/*.png")):
        time.sleep(0.2)
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=60) != 0
    (run,) = runs.iterdir()
    info = json.loads((run / "run.json").read_text())
    assert info["status"] == "failed" and "interrupted" in info["error"]
