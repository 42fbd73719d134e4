"""The book's house style: chapters stay thin (issue #18).

A chapter holds narrative, its parameters, calls into the library, figures drawn by the chapter's
figures module and the closing claims. Everything a verdict depends on lives in the library, where
it is tested. These tests read each chapter's code cells with :mod:`ast` (nothing executes) and
fail on the constructs that would put logic in the notebook: function or class definitions,
lambdas, ``try`` blocks, a Dask client, a hand-built cache key or code version, inline plotting.
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


def _code(path: Path) -> list[tuple[int, ast.Module]]:
    nb = jupytext.read(path, fmt="py:percent")
    cells = []
    for index, cell in enumerate(nb.cells):
        if cell.cell_type != "code":
            continue
        source = "\n".join(line for line in cell.source.splitlines()
                           if not line.lstrip().startswith(("%", "!")))  # IPython magics
        cells.append((index, ast.parse(source)))
    return cells


def violations(path: Path, *, exercises: bool = False) -> list[str]:
    """What makes ``path`` more than a thin chapter, as ``cell N: problem`` lines."""
    found = []
    for index, tree in _code(path):
        for node in ast.walk(tree):
            where = f"cell {index}, line {getattr(node, 'lineno', '?')}"
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) \
                    and not exercises:
                found.append(f"{where}: defines {node.name} (move it to the library)")
            elif isinstance(node, ast.Lambda) and not exercises:
                found.append(f"{where}: a lambda (move the logic to the library)")
            elif isinstance(node, ast.Try):
                found.append(f"{where}: try/except (the library validates and raises clear errors)")
            elif isinstance(node, (ast.Import, ast.ImportFrom)):
                names = [node.module or ""] if isinstance(node, ast.ImportFrom) else \
                    [alias.name for alias in node.names]
                for name in names:
                    if name.split(".")[0] in PLOTTING_MODULES:
                        found.append(f"{where}: imports {name} (draw through the chapter package's figures module)")
                    if name.split(".")[0] in {"dask", "distributed"}:
                        found.append(f"{where}: imports {name} (the experiments module owns Dask)")
            elif isinstance(node, ast.Call):
                func = node.func
                name = func.attr if isinstance(func, ast.Attribute) else \
                    func.id if isinstance(func, ast.Name) else ""
                if name in {"Client", "LocalCluster", "dask_client", "open_client"}:
                    found.append(f"{where}: opens a Dask client ({name})")
                if isinstance(func, ast.Attribute) and name in PLOTTING_METHODS:
                    found.append(f"{where}: inline plotting (.{name}); use a plot_* function")
            elif isinstance(node, (ast.Name, ast.arg)):
                name = node.id if isinstance(node, ast.Name) else node.arg
                if CACHE_KEY_NAMES.search(name):
                    found.append(f"{where}: {name} (cache keys come from the library's hash)")
    return found


@pytest.mark.parametrize("path", [p for p in NOTEBOOKS if p.parent.name == "notebooks"],
                         ids=lambda p: p.stem)
def test_chapter_is_thin(path):
    assert violations(path) == []


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
'''


def test_the_check_catches_every_thick_construct(tmp_path):
    path = tmp_path / "thick.py"
    path.write_text(THICK)
    found = "\n".join(violations(path))
    for expected in ("imports matplotlib", "imports dask", "CODE_VERSION", "opens a Dask client",
                     "defines helper", "try/except", "inline plotting (.plot)",
                     "inline plotting (.subplots)", "a lambda"):
        assert expected in found, expected


def test_a_thin_cell_passes(tmp_path):
    path = tmp_path / "thin.py"
    path.write_text("# %%\nfrom tokenbook import claims\nresult = claims.report([])\n")
    assert violations(path) == []
