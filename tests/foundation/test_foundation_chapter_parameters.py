"""Every chapter parameter is annotated, checked before anything runs, and read the same by the
runner, ``tokenbook list`` and papermill (issues #30 item 1-2, #31 item 4, #33 item 4)."""

from __future__ import annotations

import ast
import logging
import math
from pathlib import Path

import jupytext
import nbformat
import papermill
import pytest

from tokenbook.book import cli
from tokenbook.book.runner import (ParameterError, check_requirements, collect_overrides,
                                   discover, get_chapter, parse_sweep_values, parse_value,
                                   validate)

ROOT = Path(__file__).resolve().parents[2]
CHAPTERS = sorted(discover(ROOT))


def _chapter(name):
    return get_chapter(name, ROOT)


@pytest.mark.parametrize("name", CHAPTERS)
def test_every_parameter_is_annotated_with_bounds_that_stop_harmful_values(name):
    ch = _chapter(name)
    assert ch.parameters, name
    problems = []
    for pname, default in ch.parameters.items():
        spec = ch.specs.get(pname)
        if spec is None or not spec.types:
            problems.append(f"{pname}: no readable annotation")
            continue
        numeric = {"int", "float"} & set(spec.types)
        if numeric and spec.choices is None and not spec.bounds:
            problems.append(f"{pname}: a number without bounds ({ch.annotations[pname]})")
        if "list" in spec.types and spec.items is None:
            problems.append(f"{pname}: a list without an element type")
        if isinstance(default, str) and pname in ("scale", "null", "merged", "design",
                                                  "dataset", "source", "model_preset",
                                                  "gradient_unit") and spec.choices is None:
            problems.append(f"{pname}: a choice without Literal[...]")
    assert not problems, f"{name}: " + "; ".join(problems)


@pytest.mark.parametrize("name", CHAPTERS)
def test_the_defaults_pass_their_own_checks(name):
    ch = _chapter(name)
    assert validate(ch, ch.parameters) == ch.parameters


def _bad_cases(ch):
    """(parameter, text) pairs every annotated chapter must reject."""
    cases = [("scale", "papr"), ("scale", "Paper"), ("seed", "-1"), ("boot_seed", "1.5")]
    for pname, default in ch.parameters.items():
        spec = ch.spec(pname)
        if spec.choices is not None or "bool" in spec.types:
            continue
        if "int" in spec.types:
            cases += [(pname, "-5"), (pname, "nan"), (pname, "abc")]
        elif "float" in spec.types:
            cases += [(pname, "nan"), (pname, "inf"), (pname, "-inf"), (pname, "-1")]
        elif "list" in spec.types and spec.min_len:
            cases += [(pname, "[]")]
    return cases


@pytest.mark.parametrize("name", CHAPTERS)
def test_bad_values_are_rejected_naming_the_parameter(name):
    ch = _chapter(name)
    for pname, text in _bad_cases(ch):
        with pytest.raises(ParameterError, match=rf"parameter '{pname}'"):
            collect_overrides(ch, [], [(pname, text)])


@pytest.mark.parametrize("name, pname, text, expect", [
    ("uid_grounding", "n_boot", "0", ">= 1"),
    ("uid_grounding", "min_share", "7", r"in \[0, 1\]"),
    ("uid_grounding", "min_share", "nan", "finite"),
    ("groundedness_typology", "ci_level", "inf", "finite"),
    ("groundedness_typology", "ci_level", "1", r"in \(0, 1\)"),
    ("memorisation_cartography", "crosslingual_languages", "[]", "at least 1"),
    ("memorisation_cartography", "crosslingual_languages", "[de, 1]", "element 1"),
    ("cancellation_hypothesis", "n_seeds", "0", ">= 1"),
    ("cancellation_hypothesis", "group_size", "1", ">= 2"),
    ("cancellation_hypothesis", "temperature", "-1", "> 0"),
    ("memorisation_cartography", "n_workers", "0", ">= 1"),
    ("memorisation_cartography", "crosslingual_languages", "[de, 1]", "element 1"),
    ("memorisation_cartography", "scale", "papr", "did you mean 'paper'"),
])
def test_the_issue_cases_stop_at_the_cli_in_one_line(name, pname, text, expect, capsys,
                                                     monkeypatch):
    _no_runs(monkeypatch)
    code = cli.main(["--root", str(ROOT), "run", name, "-p", pname, text, "--out",
                     "/nonexistent-never-created"])
    err = capsys.readouterr().err.strip()
    assert code == 2
    assert len(err.splitlines()) == 1 and f"'{pname}'" in err
    assert __import__("re").search(expect, err), err


def test_language_codes_stay_strings_yaml_1_2():
    assert parse_value("[no, en, on, yes, off, y]") == ["no", "en", "on", "yes", "off", "y"]
    assert parse_value("true") is True and parse_value("False") is False
    assert parse_value("017") == 17 and parse_value("0o17") == 15 and parse_value("1e-3") == 0.001
    assert parse_value("1:30") == "1:30" and math.isnan(parse_value(".nan"))
    ch = _chapter("uid_grounding")
    assert collect_overrides(ch, [], [("xm_langs", "[no, en]")]) == {"xm_langs": ["no", "en"]}


def test_language_codes_stay_strings_in_parameter_files(tmp_path):
    f = tmp_path / "p.yaml"
    f.write_text("crosslingual_languages: [de, no, on]\n")
    ch = _chapter("memorisation_cartography")
    assert collect_overrides(ch, [f]) == {"crosslingual_languages": ["de", "no", "on"]}


def _no_runs(monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError("a run was started")

    monkeypatch.setattr(cli, "run_chapter", refuse)
    monkeypatch.setattr(cli, "sweep", refuse)


def test_a_name_given_twice_is_an_error(capsys, monkeypatch):
    _no_runs(monkeypatch)
    ch = _chapter("memorisation_cartography")
    with pytest.raises(ParameterError, match="given twice"):
        collect_overrides(ch, [], [("n_workers", "1"), ("n_workers", "-1")])
    code = cli.main(["--root", str(ROOT), "sweep", "memorisation_cartography", "-p",
                     "boot_seed", "7", "-p", "boot_seed", "0,1"])
    err = capsys.readouterr().err
    assert code == 2 and "given twice" in err and "-p boot_seed V1,V2" in err


def test_a_list_parameter_in_a_sweep_is_one_value_unless_a_list_of_lists():
    spec = _chapter("memorisation_cartography").spec("crosslingual_languages")
    assert parse_sweep_values("[de, nl]", spec) == [["de", "nl"]]
    assert parse_sweep_values("[[de, nl], [fr]]", spec) == [["de", "nl"], ["fr"]]
    assert parse_sweep_values("0,1", _chapter("cancellation_hypothesis").spec("seed")) == [0, 1]


@pytest.mark.slow
@pytest.mark.parametrize("name, params, needs", [
    ("memorisation_cartography", {"scale": "paper"}, "corpus"),
    ("uid_grounding", {"scale": "paper"}, "crossmodal_dir"),
    ("groundedness_typology", {"source": "released"}, "released_path"),
    ("groundedness_typology", {"scale": "paper"}, "xm3600_dir"),
    ("groundedness_typology", {"scale": "paper", "dataset": "multi30k"}, "multi30k_dir"),
    ("cancellation_hypothesis", {"scale": "paper"}, "model_id"),
])
def test_paper_scale_without_its_data_stops_saying_what_to_pass(name, params, needs, capsys,
                                                                monkeypatch):
    ch = _chapter(name)
    with pytest.raises(ParameterError, match=rf"needs '{needs}'.*; pass -p"):
        check_requirements(ch, {**ch.parameters, **params})
    _no_runs(monkeypatch)
    args = [x for k, v in params.items() for x in ("-p", k, v)]
    assert cli.main(["--root", str(ROOT), "run", name, *args, "--out",
                     "/nonexistent-never-created"]) == 2
    assert f"needs '{needs}'" in capsys.readouterr().err
    check_requirements(ch, ch.parameters)  # the defaults need nothing


@pytest.mark.slow
@pytest.mark.parametrize("name", CHAPTERS)
def test_list_prints_every_parameters_allowed_values(name, capsys):
    assert cli.main(["--root", str(ROOT), "list", name]) == 0
    out = capsys.readouterr().out
    blocks = out.split("\n\n  ")[1:]
    ch = _chapter(name)
    assert len(blocks) >= len(ch.parameters)
    for pname in ch.parameters:
        block = next(b for b in blocks if b.startswith(f"{pname}:"))
        assert "allowed:" in block, block


def _papermill_parameters(nb, caplog) -> dict[str, str]:
    """papermill's own inference, failing on any line it cannot parse."""
    from papermill.translators import PythonTranslator

    cell = next(c for c in nb.cells if "parameters" in c.metadata.get("tags", []))
    with caplog.at_level(logging.WARNING):
        caplog.clear()
        found = PythonTranslator.inspect(cell)
    unparsed = [r.getMessage() for r in caplog.records if "Unable to parse" in r.getMessage()]
    assert not unparsed, unparsed
    return {p.name: p.default for p in found}


@pytest.mark.parametrize("name", CHAPTERS)
def test_papermill_reads_the_same_parameters_from_the_py_and_the_ipynb(name, caplog, tmp_path):
    ch = _chapter(name)
    py_nb = jupytext.read(ch.path, fmt="py:percent")  # what tokenbook run executes
    twin = nbformat.read(ch.path.with_suffix(".ipynb"), as_version=4)
    for nb in (py_nb, twin):
        found = _papermill_parameters(nb, caplog)
        assert list(found) == list(ch.parameters)
        assert {k: ast.literal_eval(v) for k, v in found.items()} == ch.parameters
    path = tmp_path / "twin.ipynb"
    nbformat.write(twin, path)
    assert list(papermill.inspect_notebook(str(path))) == list(ch.parameters)
