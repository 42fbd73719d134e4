"""Parameter discovery and validation: bad requests stop before any work."""

from __future__ import annotations

import pytest

from tokenbook.book.runner import (Chapter, ParameterError, RunnerError, collect_overrides,
                                   discover, get_chapter, parse_sweep_values, parse_value,
                                   read_parameters, sweep_grid, validate)


def test_parameters_are_read_with_types(dummy_book):
    params = read_parameters(dummy_book / "notebooks" / "dummy.py")
    assert params == {"seed": 0, "n": 200, "scale": "tiny", "shift": 0.5, "fail": False,
                      "pause": 0.0}
    ch = discover(dummy_book)["dummy"]
    assert ch.types() == {"seed": "int", "n": "int", "scale": "str", "shift": "float",
                          "fail": "bool", "pause": "float"}
    assert [f.name for f in ch.param_files] == ["tiny.yaml"]


def test_non_literal_default_and_missing_cell_are_rejected(tmp_path):
    nb = tmp_path / "x.py"
    nb.write_text('# %% tags=["parameters"]\nseed = 1 + 1\n')
    with pytest.raises(RunnerError, match="literal"):
        read_parameters(nb)
    nb.write_text("# %%\nseed = 1\n")
    with pytest.raises(RunnerError, match="parameters"):
        read_parameters(nb)


@pytest.fixture
def chapter():
    return Chapter("c", None, {"seed": 0, "lr": 0.1, "scale": "tiny", "flag": False,
                               "langs": ["en"], "extra": None})


def test_unknown_parameter_names_valid_ones_and_suggests(chapter):
    with pytest.raises(ParameterError) as err:
        validate(chapter, {"sede": 3})
    msg = str(err.value)
    assert "'sede'" in msg and "did you mean 'seed'" in msg
    for name in chapter.parameters:
        assert name in msg


@pytest.mark.parametrize("name,value", [("seed", 1.5), ("seed", "3x"), ("seed", True),
                                        ("flag", 1), ("scale", 3), ("lr", "fast"),
                                        ("langs", "en")])
def test_wrong_types_are_rejected(chapter, name, value):
    with pytest.raises(ParameterError, match=f"'{name}' expects"):
        validate(chapter, {name: value})


def test_accepted_conversions(chapter):
    out = validate(chapter, {"lr": 1, "seed": 7, "flag": True, "langs": ("de", "fr"),
                             "extra": {"a": 1}})
    assert out == {"lr": 1.0, "seed": 7, "flag": True, "langs": ["de", "fr"],
                   "extra": {"a": 1}}
    assert isinstance(out["lr"], float)
    # YAML reads "1e-3" as a string: a float parameter still accepts it
    assert validate(chapter, {"lr": parse_value("1e-3")}) == {"lr": 1e-3}


def test_cli_values_are_yaml():
    assert parse_value("3") == 3 and parse_value("0.5") == 0.5
    assert parse_value("true") is True and parse_value("[1, 2]") == [1, 2]
    assert parse_value("tiny") == "tiny"
    assert parse_sweep_values("0,1,2") == [0, 1, 2]
    assert parse_sweep_values("[a, b]") == ["a", "b"]
    assert parse_sweep_values("0.1, 0.2") == [0.1, 0.2]


def test_files_then_pairs(dummy_book, tmp_path):
    ch = get_chapter("dummy", dummy_book)
    f = tmp_path / "p.yaml"
    f.write_text("seed: 4\nn: 10\n")
    assert collect_overrides(ch, [f], [("n", "20")]) == {"seed": 4, "n": 20}
    f.write_text("- not a mapping\n")
    with pytest.raises(RunnerError, match="mapping"):
        collect_overrides(ch, [f])
    f.write_text("sead: 1\n")
    with pytest.raises(ParameterError, match="did you mean 'seed'"):
        collect_overrides(ch, [f])


def test_sweep_grid_validates_every_combination(dummy_book):
    ch = get_chapter("dummy", dummy_book)
    combos = sweep_grid(ch, {"seed": [0, 1], "shift": [0, 1.5]}, {"n": 5})
    assert len(combos) == 4 and all(c["n"] == 5 for c in combos)
    assert {(c["seed"], c["shift"]) for c in combos} == {(0, 0.0), (0, 1.5), (1, 0.0), (1, 1.5)}
    with pytest.raises(ParameterError):
        sweep_grid(ch, {"seed": [0, "x"]})


def test_unknown_chapter(dummy_book):
    with pytest.raises(RunnerError, match="did you mean 'dummy'"):
        get_chapter("dumy", dummy_book)


def test_cli_rejects_bad_parameters_before_any_work(dummy_book, cli):
    res = cli(dummy_book, "run", "dummy", "-p", "no_such_param", "1")
    assert res.returncode == 2
    assert "no_such_param" in res.stderr
    for name in ("seed", "n", "scale", "shift", "fail"):
        assert name in res.stderr
    res = cli(dummy_book, "run", "dummy", "-p", "n", "many")
    assert res.returncode == 2 and "'n' expects int" in res.stderr
    res = cli(dummy_book, "sweep", "dummy", "-p", "sed", "1,2")
    assert res.returncode == 2 and "did you mean 'seed'" in res.stderr
    assert not (dummy_book / "_build" / "runs").exists(), "nothing may run on a bad request"


def test_cli_list(dummy_book, cli):
    res = cli(dummy_book, "list")
    assert res.returncode == 0
    assert "dummy" in res.stdout and "shift" in res.stdout and "float" in res.stdout
    assert "params/dummy/tiny.yaml" in res.stdout


def test_a_broken_notebook_does_not_block_the_others(dummy_book, cli):
    (dummy_book / "notebooks" / "broken.py").write_text("# %%\nx = 1\n")
    chapters = discover(dummy_book)
    assert chapters["broken"].error and not chapters["dummy"].error
    with pytest.raises(RunnerError, match="parameters"):
        get_chapter("broken", dummy_book)
    assert get_chapter("dummy", dummy_book).parameters["seed"] == 0
    res = cli(dummy_book, "list")
    assert res.returncode == 0 and "ERROR" in res.stdout and "shift" in res.stdout


def test_kernel_env(tmp_path, monkeypatch):
    from tokenbook.book.runner import kernel_env

    for var in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "HF_DATASETS_OFFLINE"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("MPLBACKEND", "Agg")
    env = kernel_env(tmp_path, tmp_path)
    assert env["TOKENBOOK_RUN_DIR"] == str(tmp_path) and env["HF_HUB_OFFLINE"] == "1"
    assert env["MPLBACKEND"].endswith("backend_inline")  # figures must show in the notebook
    assert "HF_HUB_OFFLINE" not in kernel_env(tmp_path, tmp_path, offline=False)
    monkeypatch.setenv("HF_HUB_OFFLINE", "0")
    assert kernel_env(tmp_path, tmp_path)["HF_HUB_OFFLINE"] == "0"  # the user's choice wins
