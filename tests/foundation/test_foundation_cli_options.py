"""Every CLI option is checked before anything runs, in one line (issue #30 item 2), and
``tokenbook runs`` lists runs with their status (item 3)."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import psutil
import pytest

from tokenbook.book import cli


def _cli(capsys, *args):
    with pytest.raises(SystemExit) as info:
        cli.main(list(args))
    return info.value.code, capsys.readouterr()


@pytest.fixture
def no_runs(monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError("a run was started")

    monkeypatch.setattr(cli, "run_chapter", refuse)
    monkeypatch.setattr(cli, "sweep", refuse)


@pytest.mark.parametrize("args, says", [
    (["sweep", "dummy", "-p", "seed", "0,1", "--scheduler-timeout", "nan"], "--scheduler-timeout"),
    (["sweep", "dummy", "-p", "seed", "0,1", "--scheduler-timeout", "-1"], "--scheduler-timeout"),
    (["sweep", "dummy", "-p", "seed", "0,1", "--scheduler-timeout", "inf"], "--scheduler-timeout"),
    (["sweep", "dummy", "-p", "seed", "0,1", "--workers", "0"], "--workers"),
    (["run", "dummy", "--timeout-s", "0"], "--timeout-s"),
    (["run", "dummy", "--timeout-s", "abc"], "--timeout-s"),
])
def test_bad_option_values_are_one_line_exit_2(dummy_book, capsys, no_runs, args, says):
    code, out = _cli(capsys, "--root", str(dummy_book), *args)
    assert code == 2 and says in out.err and len(out.err.strip().splitlines()) == 1, out.err


@pytest.mark.parametrize("command", [["list"], ["run", "dummy"], ["runs"],
                                     ["sweep", "dummy", "-p", "seed", "0,1"]])
def test_root_is_checked_in_every_subcommand_and_position(capsys, no_runs, command, tmp_path):
    for args in (["--root", str(tmp_path / "nope"), *command],
                 [*command, "--root", str(tmp_path / "nope")]):
        assert cli.main(args) == 2
        assert "no such folder" in capsys.readouterr().err


def test_out_that_is_a_file_is_one_line(dummy_book, capsys, no_runs):
    afile = dummy_book / "pyproject.toml"
    for command in (["run", "dummy"], ["sweep", "dummy", "-p", "seed", "0,1"], ["runs"]):
        assert cli.main(["--root", str(dummy_book), *command, "--out", str(afile)]) == 2
        assert "is a file, not a folder" in capsys.readouterr().err


def test_timeout_reaches_the_runner(dummy_book, capsys, monkeypatch):
    seen = {}

    class Done:
        ok, run_dir = True, Path("x")

    def fake_run(chapter, overrides, **kwargs):
        seen.update(kwargs)
        return Done()

    monkeypatch.setattr(cli, "run_chapter", fake_run)
    assert cli.main(["--root", str(dummy_book), "run", "dummy", "--timeout-s", "2.5"]) == 0
    assert seen["timeout_s"] == 2.5


def test_runs_lists_runs_with_status_and_dead_runners_as_died(dummy_book, capsys):
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    folder = dummy_book / "_build" / "runs" / "dummy"
    rows = {"20260101T000000.000000Z-aaaa": {"status": "running", "pid": dead.pid},
            "20260101T000001.000000Z-bbbb": {"status": "ok", "wall_s": 12.3},
            "20260101T000002.000000Z-cccc": {"status": "running", "pid": os.getpid(),
                                             "pid_started": psutil.Process().create_time()}}
    for run_id, info in rows.items():
        (folder / run_id).mkdir(parents=True)
        (folder / run_id / "run.json").write_text(json.dumps(
            {"run_id": run_id, "host": socket.gethostname(), **info}))
    for args in (["runs"], ["runs", "dummy"]):
        assert cli.main(["--root", str(dummy_book), *args]) == 0
        lines = capsys.readouterr().out.strip().splitlines()
        assert [line.split()[2] for line in lines] == ["died", "ok", "running"]
        assert "12 s" in lines[1]
    assert cli.main(["--root", str(dummy_book), "runs", "dumy"]) == 2
    assert "did you mean 'dummy'" in capsys.readouterr().err


@pytest.mark.parametrize("args, says", [
    (["student", "--all", "--out", "OUT", "--root", "/nonexistent"], "not a book root"),
    (["student", "uid_grounding", "--all", "--out", "OUT"], "not both"),
    (["student", "--all", "--out", "FILE"], "is a file"),
    (["student", "uid_grouding", "--out", "OUT"], "no exercise page for 'uid_grouding'"),
])
def test_exercises_bad_requests_are_exit_2_with_a_reason(capsys, tmp_path, args, says):
    (tmp_path / "file").write_text("x")
    args = [a.replace("OUT", str(tmp_path / "out")).replace("FILE", str(tmp_path / "file"))
            for a in args]
    assert cli.main(["exercises", *args]) == 2
    err = capsys.readouterr().err
    assert says in err and len(err.strip().splitlines()) == 1, err
    assert not (tmp_path / "out").exists()


def test_exercises_after_a_global_root(capsys, tmp_path):
    assert cli.main(["--root", str(tmp_path), "exercises", "student", "--all", "--out",
                     str(tmp_path / "out")]) == 2
    assert "not a book root" in capsys.readouterr().err


def test_every_test_named_in_the_readme_fault_table_exists():
    """The fault table says only what tests show: each test it names is defined in tests/."""
    import re

    repo = Path(__file__).resolve().parents[2]
    text = (repo / "README.md").read_text()
    table = text[text.index("## Faults"):text.index("Not covered:")]
    named = set(re.findall(r"`(?:[\w/]+\.py::)?(test_\w+)", table))
    files = {p: p.read_text() for p in (repo / "tests").rglob("test_*.py")}
    assert len(named) > 20
    missing = [n for n in sorted(named)
               if not any(f"def {n}(" in src for src in files.values())]
    assert not missing, missing
    for path in re.findall(r"`((?:foundation|data|scoring)/test_\w+\.py)", table):
        assert (repo / "tests" / path).exists(), path


@pytest.mark.parametrize("kwargs", [{"scheduler_timeout_s": float("nan")},
                                    {"scheduler_timeout_s": -1}, {"n_workers": 0}])
def test_the_python_sweep_checks_its_options_too(dummy_book, kwargs):
    from tokenbook.book.runner import RunnerError, sweep

    with pytest.raises(RunnerError, match=next(iter(kwargs))):
        sweep("dummy", {"seed": [0, 1]}, root=dummy_book, **kwargs)


@pytest.mark.parametrize("timeout_s", [0, -5, float("inf"), float("nan")])
def test_run_chapter_checks_timeout_s(dummy_book, timeout_s):
    from tokenbook.book.runner import RunnerError, run_chapter

    with pytest.raises(RunnerError, match="timeout_s"):
        run_chapter("dummy", {}, root=dummy_book, timeout_s=timeout_s)
    assert not (dummy_book / "_build" / "runs").exists()
