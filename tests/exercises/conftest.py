"""Helpers for the exercise-page tests: pages are executed in-process, cell by cell."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from tokenbook.book import exercises as ex
from tokenbook.cancellation_hypothesis import exercises as rl_ex
from tokenbook.groundedness_typology import exercises as typology_ex
from tokenbook.memorisation_cartography import exercises as memorisation_ex
from tokenbook.uid_grounding import exercises as uid_ex

REPO = Path(__file__).resolve().parents[2]
PAGES = sorted(p.stem for p in (REPO / "notebooks" / "exercises").glob("*.py"))
#: chapter -> its module of exercise checks (tokenbook.<chapter>.exercises)
CHECK_MODULES = {"uid_grounding": uid_ex, "groundedness_typology": typology_ex,
                 "memorisation_cartography": memorisation_ex, "cancellation_hypothesis": rl_ex}


def run_cell(source: str, ns: dict, name: str = "<cell>"):
    """Execute one code cell in ``ns``; return the value of a final expression (as Jupyter)."""
    tree = ast.parse(source)
    last = tree.body[-1] if tree.body and isinstance(tree.body[-1], ast.Expr) else None
    if last is not None:
        tree.body = tree.body[:-1]
    exec(compile(tree, name, "exec"), ns)
    if last is not None:
        return eval(compile(ast.Expression(last.value), name, "eval"), ns)
    return None


@pytest.fixture(scope="session")
def pages():
    return {name: ex.read_page(name, REPO) for name in PAGES}
