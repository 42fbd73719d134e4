"""Bad parameter files, values and command lines: one line naming the problem, exit 2."""

from __future__ import annotations

import socket
import time

import pytest

from tokenbook.book.cli import main
from tokenbook.book.runner import (ParameterError, RunnerError, collect_overrides, get_chapter,
                                   load_param_file, read_parameter_cell, validate)

from .conftest import DUMMY_CHAPTER, make_book


def _cli(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.parametrize("content, expect", [
    (b"seed: [1, 2\nn: 3\n", [":2:", "not valid YAML"]),              # unclosed list
    (b"seed: 1\n\tn: 3\n", [":2:", "tabs"]),                            # tab indentation
    (b"seed: 1\n  n: 3\n", [":2:", "not valid YAML"]),                  # bad indentation
    (b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR", ["binary"]),                # an image
    (b"seed: 1\nscale: \xe9t\xe9\n", [":2:", "UTF-8"]),                  # Latin-1 text
    (b"- 1\n- 2\n", ["mapping"]),                                       # a list
    (b"seed: 1\nseed: 2\n", [":2:", "twice"]),                          # duplicate name
    (b"seed:\n", [":1:", "empty"]),                                     # empty value
    (b"n: many\n", [":1:", "'n' expects int"]),                         # wrong type
    (b"sede: 1\n", [":1:", "did you mean 'seed'"]),                     # unknown name
])
def test_bad_parameter_file_is_one_line_naming_file_and_line(dummy_book, tmp_path, capsys,
                                                             content, expect):
    bad = tmp_path / "bad.yaml"
    bad.write_bytes(content)
    code, out, err = _cli(capsys, "--root", str(dummy_book), "run", "dummy", "-f", str(bad))
    assert code == 2
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in err, err
    assert str(bad) in lines[0]
    for part in expect:
        assert part in lines[0], (part, lines[0])
    assert not (dummy_book / "_build" / "runs").exists()  # nothing ran


def test_folder_or_missing_parameter_file(dummy_book, capsys):
    folder = dummy_book / "params" / "dummy"
    code, _, err = _cli(capsys, "--root", str(dummy_book), "run", "dummy", "-f", str(folder))
    assert code == 2 and "is a folder" in err and "tiny.yaml" in err
    code, _, err = _cli(capsys, "--root", str(dummy_book), "run", "dummy", "-f",
                        str(folder / "nope.yaml"))
    assert code == 2 and "does not exist" in err


def test_empty_file_means_no_overrides(tmp_path):
    empty = tmp_path / "empty.yaml"
    empty.write_text("# nothing set here\n")
    assert load_param_file(empty) == {}


@pytest.mark.parametrize("text", ["", "null", "~"])
def test_empty_values_are_rejected_when_the_default_is_not_none(dummy_book, text):
    chapter = get_chapter("dummy", dummy_book)
    with pytest.raises(ParameterError, match="'seed' needs a value.*empty"):
        collect_overrides(chapter, [], [("seed", text)])


ANNOTATED = DUMMY_CHAPTER.replace('''seed = 0
n = 200
scale = "tiny"
''', '''from typing import Annotated, Literal  # needed at run time for the annotations
reps: Annotated[int, ">= 1"] = 5  # resamples
share: Annotated[float, "0..1"] = 0.9  # a share of languages
seed: int = 0  # root seed of the sample (cost: redraws everything)
# sample size: how many values are drawn
n: int = 200
scale: Literal["tiny", "paper"] = "tiny"  # tiny or paper scale (paper downloads ~3 GB)
limit: int | None = None  # optional cap
label: "str" = "x"
''')


def test_annotated_parameter_cell(tmp_path):
    root = make_book(tmp_path / "book", ANNOTATED)
    ch = read_parameter_cell(root / "notebooks" / "dummy.py")
    assert ch.parameters["seed"] == 0 and ch.parameters["scale"] == "tiny"
    assert ch.types()["seed"] == "int" and ch.types()["limit"] == "int | None"
    assert ch.types()["shift"] == "float"  # no annotation: the default's type
    assert ch.help["seed"] == "root seed of the sample" and ch.cost["seed"] == "redraws everything"
    assert ch.help["n"] == "sample size: how many values are drawn"  # comment above
    assert ch.help["scale"] == "tiny or paper scale" and ch.cost["scale"] == "paper downloads ~3 GB"
    assert ch.help["shift"] == "" and "shift" not in ch.cost
    assert validate(ch, {"limit": None, "scale": "paper"}) == {"limit": None, "scale": "paper"}
    assert validate(ch, {"limit": 3}) == {"limit": 3}
    with pytest.raises(ParameterError, match=r"one of 'tiny' \| 'paper'.*did you mean 'paper'"):
        validate(ch, {"scale": "papr"})
    with pytest.raises(ParameterError, match="'limit' expects int | None"):
        validate(ch, {"limit": "all"})
    with pytest.raises(ParameterError, match="needs a value"):
        validate(ch, {"n": None})
    assert validate(ch, {"label": "y"}) == {"label": "y"}  # a string annotation is read
    # ranges from Annotated[...]: -p n_boot 0 or a share of 7 stop before anything runs
    assert validate(ch, {"reps": 1, "share": 1}) == {"reps": 1, "share": 1.0}
    with pytest.raises(ParameterError, match="'reps' must be >= 1, got 0"):
        validate(ch, {"reps": 0})
    with pytest.raises(ParameterError, match=r"'share' must be in \[0, 1\], got 7"):
        validate(ch, {"share": 7})
    with pytest.raises(ParameterError, match="expects int"):
        validate(ch, {"reps": 1.5})


def test_non_parameter_statement_in_the_cell_is_rejected(tmp_path):
    root = make_book(tmp_path / "book", ANNOTATED.replace("label: ", "print(1)\nlabel: "))
    with pytest.raises(RunnerError, match="only 'name = literal'"):
        read_parameter_cell(root / "notebooks" / "dummy.py")


def test_list_chapter_shows_help_type_default_and_cost(tmp_path, capsys):
    root = make_book(tmp_path / "book", ANNOTATED)
    code, out, _ = _cli(capsys, "--root", str(root), "list", "dummy")
    assert code == 0
    assert "seed: int = 0" in out and "root seed of the sample" in out
    assert "cost: redraws everything" in out
    assert "scale: Literal['tiny', 'paper'] = 'tiny'" in out and "allowed: 'tiny' | 'paper'" in out
    assert "sample size: how many values are drawn" in out
    assert "allowed: float 0..1" in out and "allowed: int >= 1" in out
    assert "params/dummy/tiny.yaml" in out
    code, out, _ = _cli(capsys, "--root", str(root), "list")
    assert code == 0 and "root seed of the sample [redraws everything]" in out
    code, _, err = _cli(capsys, "--root", str(root), "list", "dumy")
    assert code == 2 and "did you mean 'dummy'" in err


def test_list_works_for_the_old_plain_form(dummy_book, capsys):
    code, out, _ = _cli(capsys, "--root", str(dummy_book), "list", "dummy")
    assert code == 0 and "seed: int = 0" in out and "shift: float = 0.5" in out


def test_bad_root(tmp_path, capsys):
    code, _, err = _cli(capsys, "--root", str(tmp_path / "nonexistent"), "list")
    assert code == 2 and "no such folder" in err
    (tmp_path / "empty").mkdir()
    code, _, err = _cli(capsys, "--root", str(tmp_path / "empty"), "list")
    assert code == 2 and "no notebooks/ folder" in err


def test_build_typo_names_the_chapter(dummy_book, capsys):
    code, _, err = _cli(capsys, "--root", str(dummy_book), "build", "dumy", "--no-book")
    assert code == 2
    assert "unknown chapter 'dumy'" in err and "did you mean 'dummy'" in err
    assert "_toc.yml" not in err
    assert not (dummy_book / "_build" / "runs").exists()


@pytest.mark.slow
def test_unreachable_scheduler_fails_fast_in_one_line(dummy_book, capsys):
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    t0 = time.perf_counter()
    code, _, err = _cli(capsys, "--root", str(dummy_book), "sweep", "dummy", "-p", "seed", "1,2",
                        "--scheduler", f"tcp://127.0.0.1:{port}", "--scheduler-timeout", "2")
    assert time.perf_counter() - t0 < 30
    assert code == 2
    errors = [ln for ln in err.splitlines() if ln.startswith("tokenbook: error")]
    assert len(errors) == 1 and "cannot reach the Dask scheduler" in errors[0]
    assert "Traceback" not in err


def test_yaml_words_as_parameter_names_stay_names(tmp_path):
    f = tmp_path / "p.yaml"
    f.write_text("null: shuffle\non: 3\nseed: 1\nx: null\n")
    assert load_param_file(f) == {"null": "shuffle", "on": 3, "seed": 1, "x": None}


@pytest.mark.slow
def test_an_annotated_chapter_runs_with_overrides(tmp_path):
    from tokenbook.book.runner import run_chapter

    root = make_book(tmp_path / "book", ANNOTATED)
    res = run_chapter("dummy", {"seed": 3, "limit": None, "n": 20}, root=root, quiet=True)
    assert res.ok, res.error


def test_unwritable_output_folder_is_one_line(dummy_book, tmp_path, capsys):
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("a file where the output folder should be")
    code, _, err = _cli(capsys, "--root", str(dummy_book), "run", "dummy", "--out",
                        str(blocker / "runs"), "-q")
    assert code == 2 and "cannot create a run folder" in err and "--out" in err
    assert len(err.strip().splitlines()) == 1


hypothesis = pytest.importorskip("hypothesis")
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

YAMLISH = st.lists(st.one_of(
    st.sampled_from(["seed: 1", "n: 20", "shift: 0.5", "fail: false", "scale: tiny", "seed:",
                     "\tn: 3", "  - 1", "n: [1, 2", "{", "}", "'", '"', "&a x", "*a", "!!python/x",
                     "n: 1e-3", "seed: 1\nseed: 2", "? n", ": 3", "null: 1", "---", "...", "#"]),
    st.text(max_size=12)), max_size=6).map("\n".join)


@settings(max_examples=150, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(text=YAMLISH, encoding=st.sampled_from(["utf-8", "utf-8", "utf-16", "latin-1"]))
def test_fuzz_parameter_files(dummy_book, tmp_path_factory, text, encoding):
    """Any file gives either validated overrides or one RunnerError naming the file."""
    path = tmp_path_factory.mktemp("pf") / "p.yaml"
    try:
        path.write_bytes(text.encode(encoding))
    except UnicodeEncodeError:
        path.write_bytes(text.encode("utf-8"))
    chapter = get_chapter("dummy", dummy_book)
    try:
        values = collect_overrides(chapter, [path], [])
    except RunnerError as exc:
        msg = str(exc)
        assert str(path) in msg and "\n" not in msg, msg
    else:
        assert set(values) <= set(chapter.parameters)
