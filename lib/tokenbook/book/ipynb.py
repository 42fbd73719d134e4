"""The chapters' ``.ipynb`` twins, for papermill, Jupyter, Colab and Binder.

The source of a chapter is ``notebooks/<chapter>.py`` (jupytext percent format). Its twin
``notebooks/<chapter>.ipynb`` is generated from it (never edited by hand) and committed, so a
fresh clone can run ``papermill notebooks/<chapter>.ipynb out.ipynb -p seed 3`` and a launch
button can open it. The twin is the ``.py`` read by jupytext, without outputs, with

* a Python 3 kernelspec (papermill needs one),
* one first code cell tagged ``tokenbook-setup``: on Colab or any Python without tokenbook it
  clones the repository (:func:`repository_url`) and installs tokenbook from it; then it
  starts the execution's own run folder (:func:`tokenbook.book.interactive.start`), so a plain
  papermill run writes its ``claims.json``, figures and ``run.json`` to
  ``_build/runs/<chapter>/<run id>/``,
* a parameters cell that ``papermill --help-notebook`` reads completely: its parser drops a
  line with an annotation ``A | None`` or a second ``=`` (in the help comment), so the twin
  writes such an annotation as ``"Optional[A]"`` (``"Union[A, B]"``) and an ``=`` in a help
  comment as ``:`` (:func:`papermill_parameters`); the values are the ``.py``'s,
* deterministic cell ids, so regenerating an unchanged chapter changes no byte.

``make notebooks`` (``python -m tokenbook.book.notebooks``) regenerates every twin, and the student
edition of every exercise page, ``notebooks/exercises/<chapter>.ipynb`` (the exercise pages'
launch buttons open it: solutions stubbed; :func:`tokenbook.book.exercises.student_twin`);
``--check`` exits 1 naming the notebooks that differ from their ``.py`` (a test does the same).
"""

from __future__ import annotations

import ast
import io
import re
import tokenize
from pathlib import Path

import nbformat
import yaml


SETUP_TAG = "tokenbook-setup"
CONFIG = "_config.yml"

SETUP_SOURCE = '''\
# Setup (generated from notebooks/{chapter}.py by `make notebooks`; not part of the chapter).
# On Colab or any Python without tokenbook: clone the repository and install tokenbook
# (a few minutes), keeping a torch that is already installed (Colab's, built for its GPU):
# its other dependencies are installed, then tokenbook itself without dependencies. Then work
# from the book's root and give this execution its own run folder _build/runs/{chapter}/<run id>/.
import importlib.util, os, re, subprocess, sys

if importlib.util.find_spec("tokenbook") is None:
    _checkout = os.path.abspath("tokenbook")
    if not os.path.isdir(_checkout):
        subprocess.run(["git", "clone", "--depth", "1", "{repo_url}", _checkout], check=True)
    import tomllib

    with open(os.path.join(_checkout, "pyproject.toml"), "rb") as _f:
        _deps = tomllib.load(_f)["project"]["dependencies"]
    if importlib.util.find_spec("torch") is not None:  # keep this Python's torch
        _deps = [d for d in _deps if re.split(r"[^\\w.-]", d, maxsplit=1)[0] != "torch"]
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", *_deps], check=True)
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "-e", _checkout],
                   check=True)
    sys.path.insert(0, os.path.join(_checkout, "lib"))
    os.chdir(_checkout)
os.environ.setdefault("HF_HUB_OFFLINE", "1")  # tiny scale needs no hub (paper scale: unset it)
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

from tokenbook.book import interactive
from tokenbook.book.runner import find_root

os.chdir(find_root())  # the chapter runs from the book's root, as under `tokenbook run`
interactive.start("{chapter}")'''


def repository_url(root: str | Path) -> str:
    """The repository's address: ``repository.url`` of ``<root>/_config.yml``, the one place
    it is written (CITATION.cff, binder/ and the notebooks' setup cell are checked against
    it)."""
    path = Path(root) / CONFIG
    if not path.exists():
        raise FileNotFoundError(f"{path} is missing: the repository URL is read from its "
                                f"'repository: url:' entry")
    url = ((yaml.safe_load(path.read_text()) or {}).get("repository") or {}).get("url")
    if not url:
        raise ValueError(f"{path}: set 'repository: url:' to the repository's address")
    return str(url).rstrip("/")


def _annotation(node) -> str:
    """``A | B | None`` as ``Optional[Union[A, B]]``-style text papermill's parser accepts."""
    parts: list = []

    def flat(n):
        if isinstance(n, ast.BinOp) and isinstance(n.op, ast.BitOr):
            flat(n.left)
            flat(n.right)
        else:
            parts.append(n)

    flat(node)
    if len(parts) == 1:
        return ast.unparse(node)
    names = [ast.unparse(p) for p in parts]
    rest = [n for n in names if n != "None"]
    inner = rest[0] if len(rest) == 1 else f"Union[{', '.join(rest)}]"
    return f'"Optional[{inner}]"' if "None" in names else f'"{inner}"'


def papermill_parameters(source: str) -> str:
    """The parameters cell ``source`` with every one-line ``name: A | B = value  # help``
    rewritten so papermill's ``--help-notebook`` parser reads it (see the module docstring);
    other lines are kept as they are."""

    try:
        tree = ast.parse(source)
        comments = {tok.start[0]: tok for tok in tokenize.generate_tokens(
            io.StringIO(source).readline) if tok.type == tokenize.COMMENT}
    except (SyntaxError, tokenize.TokenError):
        return source
    lines = source.split("\n")
    for node in tree.body:
        if node.lineno != node.end_lineno or not isinstance(node, (ast.Assign, ast.AnnAssign)):
            continue
        i = node.lineno - 1
        line = lines[i]
        comment = comments.get(node.lineno)
        code, help_ = (line[:comment.start[1]].rstrip(), comment.string[1:].strip()) \
            if comment else (line.rstrip(), "")
        if isinstance(node, ast.AnnAssign) and node.value is not None:
            code = (f"{ast.unparse(node.target)}: {_annotation(node.annotation)} = "
                    f"{ast.get_source_segment(source, node.value)}")
        help_ = re.sub(r"\s*=+\s*", ": ", help_)
        lines[i] = f"{code}  # {help_}" if help_ else code
    return "\n".join(lines)


def chapter_notebook(source: str | Path, repo_url: str) -> nbformat.NotebookNode:
    """The ``.ipynb`` twin of the chapter ``source`` (a jupytext percent ``.py``)."""
    import jupytext

    source = Path(source)
    chapter = source.stem
    nb = jupytext.read(source, fmt="py:percent")
    for cell in nb.cells:
        if cell.cell_type == "code" and "parameters" in cell.metadata.get("tags", []):
            cell.source = papermill_parameters(cell.source)
    nb.metadata.pop("jupytext", None)  # not a paired notebook: generated from the .py
    nb.metadata["kernelspec"] = {"display_name": "Python 3", "language": "python",
                                 "name": "python3"}
    nb.metadata["language_info"] = {"name": "python"}
    nb.metadata["tokenbook"] = {"source": f"notebooks/{source.name}",
                                "generated_by": "make notebooks (python -m tokenbook.book.notebooks)"}
    setup = nbformat.v4.new_code_cell(
        SETUP_SOURCE.format(chapter=chapter, repo_url=repo_url),
        metadata={"tags": [SETUP_TAG]})
    first_code = next((i for i, c in enumerate(nb.cells) if c.cell_type == "code"),
                      len(nb.cells))
    nb.cells.insert(first_code, setup)
    for i, cell in enumerate(nb.cells):
        cell["id"] = f"cell-{i:03d}"
        if cell.cell_type == "code":
            cell["outputs"], cell["execution_count"] = [], None
    nb.nbformat, nb.nbformat_minor = 4, 5
    nbformat.validate(nb)
    return nb


def chapter_sources(root: str | Path) -> list[Path]:
    """The chapters' sources: ``<root>/notebooks/*.py`` not starting with ``_``."""
    return sorted(p for p in (Path(root) / "notebooks").glob("*.py")
                  if not p.name.startswith("_"))


def notebook_text(nb: nbformat.NotebookNode) -> str:
    return nbformat.writes(nb) + "\n"


def exercise_sources(root: str | Path) -> list[Path]:
    """The exercise pages' sources: ``<root>/notebooks/exercises/*.py``."""
    return sorted(p for p in (Path(root) / "notebooks" / "exercises").glob("*.py")
                  if not p.name.startswith("_"))
