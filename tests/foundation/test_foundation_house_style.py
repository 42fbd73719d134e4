"""The book's house style: chapters stay thin (issue #18).

A chapter holds narrative, its parameters, calls into the library, figures drawn by the chapter's
figures module and the closing claims. Everything a verdict depends on lives in the library, where
it is tested. These tests read each chapter's code cells with :mod:`ast` (nothing executes) and
fail on the constructs that would put logic in the notebook: function or class definitions,
lambdas, ``try`` blocks, a Dask client, a hand-built cache key or code version, inline plotting;
in a chapter (not its exercise page) also ``for``/``while`` loops and building claims
(``Claim(...)``, ``Claim.over_seeds``/``Claim.greater``/…, ``ClaimSpec(...)``, ``Expect.…``):
a chapter's claims are declared in its package's ``claims`` module and its claims cell is one
call (issue #32). Comprehensions that shape a result for display are expressions, not loops.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import jupytext
import pytest

from tokenbook.book.runner import discover

REPO = Path(__file__).resolve().parents[2]
CHAPTERS = discover(REPO)
NOTEBOOKS = sorted([*(ch.path for ch in CHAPTERS.values()),
                    *(REPO / "notebooks" / "exercises").glob("*.py")])
PLOTTING_MODULES = ("matplotlib", "seaborn", "plotly")
PLOTTING_METHODS = {"plot", "scatter", "bar", "barh", "hist", "imshow", "fill_between", "errorbar",
                    "axhline", "axvline", "set_xlabel", "set_ylabel", "set_title", "subplots",
                    "legend", "annotate", "text", "heatmap", "boxplot", "violinplot"}
CACHE_KEY_NAMES = re.compile(r"(cache_?key|code_?version|^[A-Z_]*VERSION$)", re.I)
#: the names whose calls or attributes build a claim in a chapter
CLAIM_BUILDERS = {"Claim", "ClaimSpec", "Expect"}
#: chapter cells that still loop or build claims, by chapter: (the cell's first code line, why it
#: is left). Remove an entry when its cell is gone: the test fails on an entry that no longer
#: occurs. Only loops and claim building are excused, nothing else.
KNOWN_THICK: dict[str, tuple[str, str]] = {}


def _code(path: Path) -> list[tuple[int, ast.Module, str]]:
    nb = jupytext.read(path, fmt="py:percent")
    cells = []
    for index, cell in enumerate(nb.cells):
        if cell.cell_type != "code":
            continue
        source = "\n".join(line for line in cell.source.splitlines()
                           if not line.lstrip().startswith(("%", "!")))  # IPython magics
        first = next((line.strip() for line in source.splitlines()
                      if line.strip() and not line.lstrip().startswith("#")), "")
        cells.append((index, ast.parse(source), first))
    return cells


def _builds_claims(node: ast.AST) -> str:
    """The claim-building name ``node`` uses (``Claim``, ``Claim.over_seeds``, ``Expect.less``,
    ``claims.ClaimSpec``), or ''."""
    if isinstance(node, ast.Call):
        func = node.func
        name = func.id if isinstance(func, ast.Name) else \
            func.attr if isinstance(func, ast.Attribute) else ""
        if name in {"Claim", "ClaimSpec"}:
            return name
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) \
            and node.value.id in CLAIM_BUILDERS:
        return f"{node.value.id}.{node.attr}"
    return ""


def chapter_violations(path: Path, *, exercises: bool = False) -> list[tuple[str, str, str]]:
    """``(the cell's first code line, kind, "cell N, line M: problem")`` for each construct that
    makes ``path`` more than a thin chapter; kind is ``loop``, ``claim`` or ``logic``."""
    found = []
    for index, tree, first in _code(path):
        for node in ast.walk(tree):
            where = f"cell {index}, line {getattr(node, 'lineno', '?')}"
            builds = "" if exercises else _builds_claims(node)
            if builds:
                found.append((first, "claim", f"{where}: builds a claim ({builds}; declare it "
                              f"in the chapter package's claims module)"))
            if isinstance(node, (ast.For, ast.AsyncFor, ast.While)) and not exercises:
                loop = "while" if isinstance(node, ast.While) else "for"
                found.append((first, "loop", f"{where}: a {loop} loop (move it to a library "
                              f"function)"))
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) \
                    and not exercises:
                found.append((first, "logic",
                              f"{where}: defines {node.name} (move it to the library)"))
            elif isinstance(node, ast.Lambda) and not exercises:
                found.append((first, "logic", f"{where}: a lambda (move the logic to the "
                              f"library)"))
            elif isinstance(node, ast.Try):
                found.append((first, "logic", f"{where}: try/except (the library validates "
                              f"and raises clear errors)"))
            elif isinstance(node, (ast.Import, ast.ImportFrom)):
                names = [node.module or ""] if isinstance(node, ast.ImportFrom) else \
                    [alias.name for alias in node.names]
                for name in names:
                    if name.split(".")[0] in PLOTTING_MODULES:
                        found.append((first, "logic", f"{where}: imports {name} (draw "
                                      f"through the chapter package's figures module)"))
                    if name.split(".")[0] in {"dask", "distributed"}:
                        found.append((first, "logic", f"{where}: imports {name} (the "
                                      f"experiments module owns Dask)"))
            elif isinstance(node, ast.Call):
                func = node.func
                name = func.attr if isinstance(func, ast.Attribute) else \
                    func.id if isinstance(func, ast.Name) else ""
                if name in {"Client", "LocalCluster", "dask_client", "open_client"}:
                    found.append((first, "logic", f"{where}: opens a Dask client ({name})"))
                if isinstance(func, ast.Attribute) and name in PLOTTING_METHODS:
                    found.append((first, "logic", f"{where}: inline plotting (.{name}); use "
                                  f"a plot_* function"))
            elif isinstance(node, (ast.Name, ast.arg)):
                name = node.id if isinstance(node, ast.Name) else node.arg
                if CACHE_KEY_NAMES.search(name):
                    found.append((first, "logic", f"{where}: {name} (cache keys come from "
                                  f"the library's hash)"))
    return found


def violations(path: Path, *, exercises: bool = False) -> list[str]:
    """What makes ``path`` more than a thin chapter, as ``cell N: problem`` lines."""
    return [problem for _, _, problem in chapter_violations(path, exercises=exercises)]


@pytest.mark.parametrize("path", [p for p in NOTEBOOKS if p.parent.name == "notebooks"],
                         ids=lambda p: p.stem)
def test_chapter_is_thin(path):
    found = chapter_violations(path)
    excused_cell, _why = KNOWN_THICK.get(path.stem, (None, ""))
    excused = [p for first, kind, p in found if first == excused_cell and kind != "logic"]
    assert [p for _, _, p in found if p not in excused] == []
    if excused_cell is not None:
        assert excused, f"{path.stem}: no loop or claim left in the cell {excused_cell!r}; " \
                        f"drop it from KNOWN_THICK"


@pytest.mark.parametrize("path", [p for p in NOTEBOOKS if p.parent.name == "exercises"],
                         ids=lambda p: p.stem)
def test_exercise_page_has_no_hidden_machinery(path):
    # Exercise pages may define the reader's solution functions; nothing else.
    assert violations(path, exercises=True) == []


THICK = '''# %%
import matplotlib.pyplot as plt
from dask.distributed import Client

# %%
CODE_VERSION = "v1"
client = Client()
def helper(x):
    try:
        return x + 1
    except KeyError:
        return None
fig, ax = plt.subplots()
ax.plot([1, 2], [3, 4])
key = sorted([3, 1], key=lambda v: -v)

# %%
claims = []
for s in range(3):
    claims.append(Claim.over_seeds("a", "A", statistic="s", expect=Expect.greater(0.0)))
while not claims:
    claims = [Claim("b", "B"), ClaimSpec("c", "C", "p", "s", None)]
'''


def test_the_check_catches_every_thick_construct(tmp_path):
    path = tmp_path / "thick.py"
    path.write_text(THICK)
    found = "\n".join(violations(path))
    for expected in ("imports matplotlib", "imports dask", "CODE_VERSION", "opens a Dask client",
                     "defines helper", "try/except", "inline plotting (.plot)",
                     "inline plotting (.subplots)", "a lambda", "a for loop", "a while loop",
                     "builds a claim (Claim.over_seeds", "builds a claim (Expect.greater",
                     "builds a claim (Claim;", "builds a claim (ClaimSpec;"):
        assert expected in found, expected
    # an exercise page may loop (a reader's solution does); a comprehension is not a loop
    assert not any("loop" in v or "claim" in v for v in violations(path, exercises=True))
    path.write_text("# %%\nlabels = {c.id: c.statistic for c in claims}\n")
    assert violations(path) == []


def test_known_thick_cells_are_real_chapters():
    for chapter, (first, why) in KNOWN_THICK.items():
        assert chapter in CHAPTERS and first and why


def test_a_thin_cell_passes(tmp_path):
    path = tmp_path / "thin.py"
    path.write_text("# %%\nfrom tokenbook import claims\nresult = claims.report([])\n")
    assert violations(path) == []
