"""The import graph of lib/tokenbook: three kinds of rooms, no circle, no upward import.

Every ``import`` of a tokenbook module is read from the source (module level and inside
functions; ``if TYPE_CHECKING:`` blocks excluded) — what the package docstring of
:mod:`tokenbook` promises about who may import whom is checked here.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

LIB = Path(__file__).resolve().parents[2] / "lib"
CHAPTERS = ("uid_grounding", "groundedness_typology", "memorisation_cartography",
            "cancellation_hypothesis")

#: imports that still break the rules, each with the reason it is left (remove an entry when
#: its import is gone; the test fails on an entry that no longer occurs)
KNOWN_UPWARD: set[tuple[str, str]] = set()
KNOWN_CIRCLES: set[frozenset] = set()


def _modules() -> dict[str, Path]:
    out = {}
    for path in (LIB / "tokenbook").rglob("*.py"):
        parts = list(path.relative_to(LIB).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = path
    return out


MODULES = _modules()


def _resolve(name: str) -> str:
    """The tokenbook module a dotted import name points into ('' if none)."""
    while name and name not in MODULES:
        name = name.rpartition(".")[0]
    return name


def _type_checking_block(node: ast.AST) -> bool:
    test = getattr(node, "test", None)
    return isinstance(node, ast.If) and (
        (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING")
        or (isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"))


def import_statements(module: str) -> list[tuple[ast.stmt, bool]]:
    """Every import statement of ``module`` outside ``if TYPE_CHECKING:`` blocks, with whether
    it sits inside a function."""
    found: list[tuple[ast.stmt, bool]] = []

    def visit(node: ast.AST, in_def: bool) -> None:
        for child in ast.iter_child_nodes(node):
            if _type_checking_block(child):
                continue
            if isinstance(child, (ast.Import, ast.ImportFrom)):
                found.append((child, in_def))
            visit(child, in_def or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)))

    visit(ast.parse(MODULES[module].read_text()), False)
    return found


def imported_names(node: ast.stmt) -> list[str]:
    """The dotted names an absolute import statement imports (``[]`` for a relative one)."""
    if isinstance(node, ast.Import):
        return [a.name for a in node.names]
    if node.level:
        return []
    return [f"{node.module or ''}.{a.name}" for a in node.names]


def imports_of(module: str) -> set[str]:
    """The tokenbook modules ``module`` imports (any depth, TYPE_CHECKING blocks excluded)."""
    found = {_resolve(name) for node, _ in import_statements(module)
             for name in imported_names(node)}
    return {m for m in found if m and m != module}


GRAPH = {m: imports_of(m) for m in MODULES}


def room(module: str) -> str:
    """``book`` (the machinery, ``tokenbook.__main__`` included), a chapter's name, or
    ``science``."""
    parts = module.split(".")
    if module == "tokenbook.__main__" or parts[1:2] == ["book"]:
        return "book"
    if parts[1:2] and parts[1] in CHAPTERS:
        return parts[1]
    return "science"


def in_function_imports(module: str) -> list[str]:
    """``module:line`` of every tokenbook import inside a function of ``module``."""
    return [f"{module}:{node.lineno}" for node, in_def in import_statements(module)
            if in_def and any(n.startswith("tokenbook") for n in imported_names(node))]


def test_tokenbook_imports_are_at_the_top_of_each_module():
    """A module's head says what it uses: no tokenbook import inside a function (only heavy
    optional third-party packages are imported lazily)."""
    inside = [where for m in sorted(MODULES) for where in in_function_imports(m)]
    assert not inside, f"move these imports to the top of their module: {inside}"


#: the third-party packages a module may import inside a function, each with its reason;
#: everything else (the standard library, numpy, pandas, scipy, yaml …) is imported at the
#: top, so a module's head says what it uses
LAZY_PACKAGES = {
    "tqdm": "tqdm.auto warns 'IProgress not found' when imported in a kernel without "
            "ipywidgets (the exercise pages' kernel): imported where a bar is drawn",
    "torch": "the exercise checks and the book machinery import without it (seconds)",
    "transformers": "seconds to import; only model-building and scoring paths need it",
    "tokenizers": "loaded with transformers, by the model builders only",
    "datasets": "paper-scale data readers only (hub or local files)",
    "pyarrow": "paper-scale parquet readers only",
    "math_verify": "paper-scale answer checking only (optional)",
    "stanza": "paper-scale tagging only (downloads its models)",
    "wordfreq": "frequency features only (loads its word lists)",
    "sacrebleu": "BLEU only where a chapter decodes",
    "sklearn": "the map predictors only (seconds to import)",
    "statsmodels": "the mixed models and power solver only (seconds to import)",
    "matplotlib": "figure functions only: the library computes without a display",
    "seaborn": "figure functions only (imports matplotlib)",
    "PIL": "image rendering and loading only",
    "cupy": "GPU only: absent on CPU machines",
    "distributed": "the Dask cluster only (starts a scheduler)",
    "dask": "the Dask cluster only",
    "psutil": "process bookkeeping of the runner only",
    "IPython": "inside a running kernel only",
    "papermill": "executing notebooks only",
    "nbformat": "the book machinery's notebook writers only",
    "jupytext": "the book machinery's notebook readers only",
    "jupyter_cache": "the book build's cache only",
    "docutils": "the book build's reST checks only",
    "mathjax": "optional: the offline MathJax copy for built pages",
}


def lazy_imports(module: str) -> list[str]:
    """``module:line package`` of every import inside a function of ``module`` that is not of
    a :data:`LAZY_PACKAGES` package."""
    out = []
    for node, in_def in import_statements(module):
        if not in_def:
            continue
        for name in imported_names(node):
            if name.split(".")[0] not in LAZY_PACKAGES:
                out.append(f"{module}:{node.lineno} {name}")
    return out


def test_only_heavy_optional_packages_are_imported_inside_functions():
    inside = [hit for m in sorted(MODULES) for hit in lazy_imports(m)]
    assert not inside, f"import these at the top of their module: {inside}"


def test_the_lazy_import_check_finds_a_light_import_in_a_function(tmp_path, monkeypatch):
    planted = tmp_path / "planted.py"
    planted.write_text("import json\n\ndef f():\n    import time\n    import torch\n"
                       "    from scipy.stats import spearmanr\n")
    monkeypatch.setitem(MODULES, "tokenbook.planted", planted)
    assert lazy_imports("tokenbook.planted") == ["tokenbook.planted:4 time",
                                                  "tokenbook.planted:6 scipy.stats.spearmanr"]


def private_uses(module: str) -> list[str]:
    """Another module's private names that ``module`` imports or reads (``from m import _x``,
    ``m._x`` with ``m`` an imported tokenbook module)."""
    tree = ast.parse(MODULES[module].read_text())
    found, aliases = [], set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("tokenbook"):
            for a in node.names:
                if a.name.startswith("_") and not a.name.startswith("__"):
                    found.append(f"{module}:{node.lineno} imports {node.module}.{a.name}")
                if f"{node.module}.{a.name}" in MODULES:
                    aliases.add(a.asname or a.name)
        elif isinstance(node, ast.Import):
            aliases.update(a.asname or a.name.split(".")[0] for a in node.names
                           if a.name.startswith("tokenbook"))
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) \
                and node.value.id in aliases and node.attr.startswith("_") \
                and not node.attr.startswith("__"):
            found.append(f"{module}:{node.lineno} reads {node.value.id}.{node.attr}")
    return found


def test_no_module_uses_another_modules_private_names():
    used = [where for m in sorted(MODULES) for where in private_uses(m)]
    assert not used, f"make these public (or keep them in their module): {used}"


def test_no_relative_imports():
    relative = [f"{m}:{n.lineno}" for m, p in MODULES.items()
                for n in ast.walk(ast.parse(p.read_text()))
                if isinstance(n, ast.ImportFrom) and n.level]
    assert not relative, f"relative imports (write tokenbook.<module>): {relative}"


def upward_imports(graph: dict[str, set[str]]) -> set[tuple[str, str]]:
    """The science imports no chapter and no book machinery; a chapter imports the science
    only (never another chapter or the book); the book may import anything."""
    return {(module, target) for module, targets in graph.items() for target in targets
            if room(module) != "book" and room(target) != "science"
            and room(module) != room(target)}


def test_no_upward_import():
    upward = upward_imports(GRAPH)
    assert upward - KNOWN_UPWARD == set(), sorted(upward - KNOWN_UPWARD)
    assert KNOWN_UPWARD <= upward, f"no longer upward, drop from KNOWN_UPWARD: " \
                                   f"{sorted(KNOWN_UPWARD - upward)}"


def cycles(graph: dict[str, set[str]]) -> set[frozenset]:
    """The strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: set[frozenset] = set()

    def strong(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                strong(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = set()
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.add(w)
                if w == v:
                    break
            if len(component) > 1:
                out.add(frozenset(component))

    for v in sorted(graph):
        if v not in index:
            strong(v)
    return out


def test_no_import_circle():
    found = cycles(GRAPH)
    assert found - KNOWN_CIRCLES == set(), [sorted(c) for c in found - KNOWN_CIRCLES]


def test_the_checks_catch_a_circle_and_an_upward_import():
    """The rules fail on a graph that breaks them (they are not vacuous)."""
    fake = dict(GRAPH)
    fake["tokenbook.stats"] = GRAPH["tokenbook.stats"] | {"tokenbook.uid_grounding.measures"}
    fake["tokenbook.uid_grounding.measures"] = (GRAPH["tokenbook.uid_grounding.measures"]
                                                | {"tokenbook.stats"})
    assert ("tokenbook.stats", "tokenbook.uid_grounding.measures") in upward_imports(fake)
    assert frozenset({"tokenbook.stats", "tokenbook.uid_grounding.measures"}) in cycles(fake)


@pytest.mark.parametrize("chapter", CHAPTERS)
def test_every_chapter_has_its_package(chapter):
    """The chapter's notebook name leads to its package (measures/experiments, figures)."""
    package = LIB / "tokenbook" / chapter
    assert (package / "__init__.py").exists()
    assert (package / "figures.py").exists()
    notebook = LIB.parent / "notebooks" / f"{chapter}.py"
    assert notebook.exists()
    assert f"tokenbook.{chapter}" in notebook.read_text()


@pytest.mark.parametrize("chapter", CHAPTERS)
def test_every_chapter_runs_its_seeds_under_one_name(chapter):
    """One name for the seed-sweep step (issue #32): each chapter's ``experiments.run_seeds``
    runs the root seeds and its notebook calls it."""
    tree = ast.parse((LIB / "tokenbook" / chapter / "experiments.py").read_text())
    defined = {n.name for n in tree.body if isinstance(n, ast.FunctionDef)}
    assert "run_seeds" in defined
    assert not {"run", "seed_sweep"} & defined
    assert "run_seeds(" in (LIB.parent / "notebooks" / f"{chapter}.py").read_text()
