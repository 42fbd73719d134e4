"""The chapters' contract with the book (fast: reads the notebooks, executes nothing).

Every ``notebooks/<chapter>.py`` must be a jupytext percent notebook with the python3
kernelspec, one ``# Title``, a ``parameters`` cell of literal defaults, a ``tiny.yaml`` that
repeats those defaults, a ``paper.yaml`` that validates, citation keys present in
``book/references.bib``, ``show_versions()`` near the top and ``claims.report`` in its last cell.
"""

from __future__ import annotations

import re
from pathlib import Path

import jupytext
import pytest
import yaml

from tokenbook.book.build import toc_chapters
from tokenbook.book.pages import is_setup_cell
from tokenbook.book.runner import discover, load_param_file, validate
from tokenbook.verdicts import DEFAULT_ROOT_SEEDS

REPO = Path(__file__).resolve().parents[2]
CHAPTERS = discover(REPO)
KNOWN = {"uid_grounding", "groundedness_typology", "memorisation_cartography",
         "cancellation_hypothesis"}
BIB_KEYS = set(re.findall(r"@\w+\{([^,\s]+),", (REPO / "book" / "references.bib").read_text()))

pytestmark = pytest.mark.skipif(not CHAPTERS, reason="no chapter notebooks yet")


def test_chapter_names_are_the_books():
    assert set(CHAPTERS) <= KNOWN, f"unexpected chapters: {set(CHAPTERS) - KNOWN}"


def test_toc_lists_only_existing_chapters():
    for name in toc_chapters(REPO):
        assert name in CHAPTERS, f"_toc.yml lists {name} but notebooks/{name}.py is missing"


@pytest.mark.parametrize("name", sorted(CHAPTERS))
def test_chapter_notebook_contract(name):
    ch = CHAPTERS[name]
    assert ch.error is None, ch.error
    nb = jupytext.read(ch.path, fmt="py:percent")
    ks = nb.metadata.get("kernelspec", {})
    assert ks.get("name") == "python3" and ks.get("language") == "python", ks
    md = "\n".join(c.source for c in nb.cells if c.cell_type == "markdown")
    titles = re.findall(r"^# \S", md, flags=re.M)
    assert len(titles) == 1, f"{name}: needs exactly one '# Title' heading, found {len(titles)}"
    level = 0  # Sphinx warns (an error under -W) when a heading skips a level
    prose = re.sub(r"^(```|~~~).*?^\1", "", md, flags=re.M | re.S)  # no fenced code
    for heading in re.findall(r"^(#+) ", prose, flags=re.M):
        assert len(heading) <= level + 1, f"{name}: heading level jumps to {len(heading)}"
        level = len(heading)
    cited = set()
    for group in re.findall(r"\{cite(?::\w+)?\}`([^`]+)`", md):
        cited |= {k.strip() for k in group.split(",")}
    assert cited <= BIB_KEYS, f"{name}: citation keys missing from references.bib: " \
                              f"{sorted(cited - BIB_KEYS)}"
    code_cells = [c for c in nb.cells if c.cell_type == "code"]
    code = [c.source for c in code_cells]
    assert any("show_versions()" in src for src in code), f"{name}: call show_versions()"
    # one order in every chapter: the parameters cell first, then the set-up cell (the
    # imports, the runner's parameter checks, the book style) that the page hides
    first, second = code_cells[:2]
    assert "parameters" in first.metadata.get("tags", []), f"{name}: parameters cell first"
    assert is_setup_cell(second.source), f"{name}: the imports cell follows the parameters"
    assert f'check_parameters("{name}", globals())' in second.source, \
        f"{name}: the set-up cell checks the parameters"
    assert "report(" in code[-1], f"{name}: the last cell must end with claims.report([...])"


@pytest.mark.parametrize("name", sorted(CHAPTERS))
def test_parameter_files_validate(name):
    ch = CHAPTERS[name]
    assert ch.error is None, ch.error
    folder = REPO / "params" / name
    tiny, paper = folder / "tiny.yaml", folder / "paper.yaml"
    assert tiny.exists() and paper.exists(), f"{name}: needs params/{name}/tiny.yaml, paper.yaml"
    tiny_values = validate(ch, load_param_file(tiny))
    for key, value in tiny_values.items():
        assert value == ch.parameters[key], \
            f"{name}: tiny.yaml sets {key}={value!r} but the notebook's default is " \
            f"{ch.parameters[key]!r} (tiny.yaml repeats the defaults)"
    validate(ch, load_param_file(paper))  # raises with the valid names on a typo
    assert yaml.safe_load(paper.read_text()), f"{name}: paper.yaml is empty"
    for other in sorted(set(folder.glob("*.yaml")) - {tiny, paper}):   # e.g. released.yaml
        assert yaml.safe_load(other.read_text()), f"{name}: {other.name} is empty"
        validate(ch, load_param_file(other))


@pytest.mark.parametrize("name", sorted(CHAPTERS))
def test_tiny_verdicts_use_the_rules_number_of_root_seeds(name):
    """The ``n_seeds`` literal (papermill needs a literal) is the verdict rule's
    ``DEFAULT_ROOT_SEEDS``, whose agreement the rule's simulation test states."""
    n_seeds = CHAPTERS[name].parameters.get("n_seeds")
    assert n_seeds == DEFAULT_ROOT_SEEDS, (
        f"{name}: n_seeds defaults to {n_seeds!r} but tokenbook.verdicts.DEFAULT_ROOT_SEEDS is "
        f"{DEFAULT_ROOT_SEEDS}: change both (and params/{name}/tiny.yaml) together")
