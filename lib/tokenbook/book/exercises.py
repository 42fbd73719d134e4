"""Exercise pages: their structure, the student and instructor editions, the command line.

Every chapter ``notebooks/<chapter>.py`` has a companion page ``notebooks/exercises/<chapter>.py``
(jupytext percent) with 4–6 exercises. Each exercise is three cells:

1. a markdown cell headed ``## Exercise N — …`` (the task, its level and time);
2. a code cell tagged ``solution`` (and ``hide-cell``, so the book shows it behind a toggle)
   whose first line is ``# Hint: …``: the instructor's solution;
3. a code cell calling one ``check_*`` function of the chapter's ``tokenbook.<chapter>.exercises``
   (imported as ``ex``), which compares the answer with the library's reference implementation
   on seeded inputs and says what is right or what is off (:mod:`tokenbook.answers`).

The **student edition** is generated, never hand-edited: :func:`student_notebook` replaces every
``solution`` cell by a stub that keeps the functions' signatures and docstrings and raises
``NotImplementedError`` with the hint. Command line::

    python -m tokenbook.book.exercises student [CHAPTER ... | --all] --out DIR [--format ipynb|py]
    python -m tokenbook.book.exercises instructor [CHAPTER ... | --all] --out DIR

(``make student`` writes every student edition to ``_build/student``.) Each edition folder holds
``<chapter>.ipynb`` (the chapter itself, which has no solutions) and
``<chapter>_exercises.ipynb``.
"""

from __future__ import annotations

import argparse
import ast
import copy
import re
import sys
from pathlib import Path
from typing import Iterable, Sequence

from tokenbook.book.costs import render
from tokenbook.book.ipynb import SETUP_TAG, chapter_notebook, repository_url
from tokenbook.book.runner import find_root
from tokenbook.cache import atomic_path

__all__ = [
    "CHAPTERS", "SOLUTION_TAG", "STUB_TAG", "page_path", "read_page", "exercise_cells",
    "make_stub", "student_notebook", "student_twin", "plain_markdown", "friendly_errors",
    "missing_answer", "write_edition", "main",
]

#: chapters that have an exercise page, in book order
CHAPTERS = ("uid_grounding", "groundedness_typology", "memorisation_cartography",
            "cancellation_hypothesis")
SOLUTION_TAG = "solution"
STUB_TAG = "exercise"
HIDE_TAGS = ("hide-cell", "hide-input", "hide-output", "remove-cell", "remove-input")


def page_path(chapter: str, root: str | Path | None = None) -> Path:
    """``<root>/notebooks/exercises/<chapter>.py`` (root: the checkout, found from cwd)."""
    root = Path(root) if root is not None else find_root()
    path = root / "notebooks" / "exercises" / f"{chapter}.py"
    if not path.exists():
        known = sorted(p.stem for p in path.parent.glob("*.py"))
        raise FileNotFoundError(f"no exercise page for chapter {chapter!r} ({path}); pages "
                                f"exist for {known}")
    return path


def read_page(chapter_or_path: str | Path, root: str | Path | None = None):
    """The exercise page as an nbformat notebook (jupytext percent)."""
    import jupytext

    p = Path(chapter_or_path)
    path = p if p.suffix == ".py" else page_path(str(chapter_or_path), root)
    return jupytext.read(path, fmt="py:percent")


_EXERCISE_HEADING = re.compile(r"^##\s+(Exercise\s+\d+)", re.M)


def exercise_cells(nb, tag: str = SOLUTION_TAG) -> list[dict]:
    """One entry per cell tagged ``tag`` (``solution`` in the book's page, ``exercise`` in the
    student edition): ``{"label", "solution", "check"}`` (cell indices;
    ``label`` is the nearest preceding ``## Exercise N`` heading; ``check`` the next code
    cell, which must call a ``check_*`` function)."""
    out, label = [], None
    for i, cell in enumerate(nb.cells):
        if cell.cell_type == "markdown":
            m = _EXERCISE_HEADING.search(cell.source)
            if m:
                label = m.group(1)
        elif tag in cell.metadata.get("tags", []):
            if label is None:
                raise ValueError(f"solution cell {i} has no '## Exercise N' heading before it")
            check = next((j for j in range(i + 1, len(nb.cells))
                          if nb.cells[j].cell_type == "code"), None)
            if check is None or "check_" not in nb.cells[check].source:
                raise ValueError(f"{label}: the code cell after its solution must call a "
                                 f"check_* function of tokenbook.<chapter>.exercises")
            out.append({"label": label, "solution": i, "check": check})
    return out


def make_stub(source: str, label: str, needed: Iterable[str] | None = None) -> str:
    """The student's version of a solution cell: imports and function signatures (with their
    docstrings) kept, every body replaced by ``raise NotImplementedError(<label>: <hint>)``;
    top-level answers (assignments; only those named in ``needed``, e.g. the names the check
    cell reads, when given) replaced by a note and a raise. The hint is the cell's
    ``# Hint: …`` comment (continued by the following ``#`` lines)."""
    lines = source.splitlines()
    hint_lines: list[str] = []
    for i, line in enumerate(lines):
        if line.startswith("# Hint:"):
            hint_lines.append(line[len("# Hint:"):].strip())
            for nxt in lines[i + 1:]:
                if nxt.startswith("# ") and not nxt.startswith("# Hint:"):
                    hint_lines.append(nxt[2:].strip())
                else:
                    break
            break
    if not hint_lines:
        raise ValueError(f"{label}: a solution cell must start with a '# Hint: …' comment")
    hint = " ".join(hint_lines)
    message = f"{label}: {hint}"
    tree = ast.parse(source)
    out = [f"# {label} — your turn. Hint: {hint_lines[0]}",
           *[f"# {h}" for h in hint_lines[1:]]]
    answers: list[str] = []
    for node in tree.body:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            out.append(ast.get_source_segment(source, node))
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            start = (node.decorator_list[0].lineno if node.decorator_list else node.lineno) - 1
            first = node.body[0]
            has_doc = (isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant)
                       and isinstance(first.value.value, str))
            end = first.end_lineno if has_doc else first.lineno - 1
            header = lines[start:end]
            indent = " " * (first.col_offset)
            out += ["", *header, f"{indent}raise NotImplementedError({message!r})"]
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for t in targets:
                answers += [n.id for n in ast.walk(t) if isinstance(n, ast.Name)]
    if needed is not None:
        needed = set(needed)
        answers = [a for a in answers if a in needed]
    if answers:
        out += ["", "# Your answer: " + ", ".join(f"{a} = ..." for a in dict.fromkeys(answers)),
                f"raise NotImplementedError({message!r})"]
    return "\n".join(out).strip() + "\n"


#: a MyST ``{doc}`` role: ``{doc}`target``` or ``{doc}`text <target>```
MYST_DOC = re.compile(r"\{doc\}`(?:([^`<]*?)\s*<([^>`]+)>|([^`]+))`")
#: other MyST roles a student's Jupyter would show raw: ``{cite}`key``` and the like
MYST_ROLE = re.compile(r"\{(?:cite(?::[pt])?|ref|numref|eq|term)\}`([^`]+)`")


def plain_markdown(text: str, *, chapter_link: str = "../{name}.ipynb",
                   repo_url: str | None = None) -> str:
    """``text`` (a page's MyST markdown) for a plain Jupyter, Colab or Binder: ``{doc}`` roles
    become Markdown links (a chapter, ``../<chapter>``, to ``chapter_link``; a book page,
    ``/book/<page>``, to its file in the repository at ``repo_url``), other roles their bare
    text."""
    def doc(m: re.Match) -> str:
        text, target = (m.group(1), m.group(2)) if m.group(2) else (None, m.group(3))
        target = target.strip()
        name = target.rstrip("/").split("/")[-1]
        if target.startswith("/book/") and repo_url:
            href = f"{repo_url}/blob/main{target}.md"
        elif target.startswith("/"):
            href = f"{repo_url}/blob/main{target}.py" if repo_url else target
        else:
            href = chapter_link.format(name=name)
        label = text or (f"`{name}`" if target.startswith("..") else name.replace("_", " "))
        return f"[{label}]({href})"

    text = MYST_DOC.sub(doc, text)
    return MYST_ROLE.sub(lambda m: m.group(1), text)


def friendly_errors() -> None:
    """In a student's notebook (IPython): a check cell run before its exercise's answer exists
    says so in one line instead of a ``NameError`` traceback (:func:`missing_answer`)."""
    try:
        from IPython import get_ipython
    except ImportError:  # pragma: no cover - no IPython
        return
    shell = get_ipython()
    if shell is not None:
        shell.set_custom_exc((NameError,), lambda shell, etype, value, tb, tb_offset=None:
                             print(missing_answer(value)))


def missing_answer(error: NameError) -> str:
    """The message for a ``NameError`` in a student's notebook."""
    m = re.search(r"name '(\w+)' is not defined", str(error))
    name = m.group(1) if m else str(error)
    return (f"❓ `{name}` is not defined yet. If it is your answer to an exercise, fill in the "
            f"exercise's cell above and run it, then run this cell again.")


def student_notebook(nb, *, chapter_link: str = "../{name}.ipynb",
                     repo_url: str | None = None):
    """A copy of the exercise page with every solution cell replaced by its stub (tag
    ``exercise``, shown), outputs cleared, markdown made plain (:func:`plain_markdown`,
    :func:`tokenbook.book.costs.render`) and a generated-file note at the top."""
    import nbformat

    nb = copy.deepcopy(nb)
    for cell in nb.cells:
        if cell.cell_type == "markdown":
            cell.source = render(plain_markdown(cell.source, chapter_link=chapter_link,
                                                repo_url=repo_url))
    for ex in exercise_cells(nb):
        cell = nb.cells[ex["solution"]]
        check = nb.cells[ex["check"]].source
        used = {n.id for n in ast.walk(ast.parse(check)) if isinstance(n, ast.Name)}
        cell.source = make_stub(cell.source, ex["label"], needed=used)
        tags = [t for t in cell.metadata.get("tags", []) if t != SOLUTION_TAG
                and t not in HIDE_TAGS]
        cell.metadata["tags"] = tags + [STUB_TAG]
    for cell in nb.cells:
        if cell.cell_type == "code":
            cell.outputs, cell.execution_count = [], None
    note = nbformat.v4.new_markdown_cell(
        "*Student edition, generated from the book's exercise page (`make notebooks`, "
        "`make student`): do not edit by hand. Each exercise cell raises "
        "`NotImplementedError` until you fill it in; the cell after it checks your answer.*")
    nb.cells.insert(0, note)
    return nb


def _write_atomic(text: str, path: Path) -> None:
    with atomic_path(path) as tmp:
        tmp.write_text(text, encoding="utf-8")


SETUP_SOURCE = '''\
# Setup (generated by `python -m tokenbook.book.exercises`; not part of the exercises).
# On Colab or any Python without tokenbook: clone the repository and install tokenbook without
# its dependencies (the exercises need only packages Colab has: NumPy, pandas, SciPy,
# statsmodels, PyTorch, PyYAML, nbformat). Where tokenbook is installed this cell does nothing.
import importlib.util, os, subprocess, sys

if importlib.util.find_spec("tokenbook") is None:
    _checkout = os.path.abspath("tokenbook")
    if not os.path.isdir(_checkout):
        subprocess.run(["git", "clone", "--depth", "1", "{repo_url}", _checkout], check=True)
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "-e", _checkout],
                   check=True)
    sys.path.insert(0, os.path.join(_checkout, "lib"))

from tokenbook.book.exercises import friendly_errors

friendly_errors()  # a check run before its answer exists says so, without a traceback'''


def _with_setup(page, repo_url: str):
    """``page`` with the setup cell (tag ``tokenbook-setup``) before its first code cell, as a
    standalone notebook (no jupytext pairing, a Python 3 kernel)."""
    import nbformat

    setup = nbformat.v4.new_code_cell(SETUP_SOURCE.format(repo_url=repo_url),
                                      metadata={"tags": [SETUP_TAG]})
    first = next((i for i, c in enumerate(page.cells) if c.cell_type == "code"),
                 len(page.cells))
    page.cells.insert(first, setup)
    page.metadata.pop("jupytext", None)  # a standalone notebook, not paired with the .py
    page.metadata["kernelspec"] = {"display_name": "Python 3", "language": "python",
                                   "name": "python3"}
    return page


def student_twin(chapter: str, root: str | Path):
    """``notebooks/exercises/<chapter>.ipynb``: the student edition of the exercise page
    (:func:`student_notebook`: solutions stubbed, plain Markdown, costs filled in) with the
    setup cell, deterministic cell ids and no outputs. Generated by ``make notebooks``
    (:func:`tokenbook.book.notebooks.sync`) and committed: the exercise pages' launch buttons open it
    (sphinx-book-theme launches the ``.ipynb`` beside a page's source)."""
    import nbformat

    root = Path(root)
    url = repository_url(root)
    nb = _with_setup(student_notebook(read_page(chapter, root), repo_url=url), url)
    nb.metadata["tokenbook"] = {"source": f"notebooks/exercises/{chapter}.py",
                                "edition": "student",
                                "generated_by": "make notebooks (python -m tokenbook.book.notebooks)"}
    for i, cell in enumerate(nb.cells):
        cell["id"] = f"cell-{i:03d}"
        cell.metadata.pop("lines_to_next_cell", None)
    nb.nbformat, nb.nbformat_minor = 4, 5
    nbformat.validate(nb)
    return nb


def _notebooks_for_ipynb(chapter: str, page, root: Path):
    """The chapter as its Colab-ready ``.ipynb`` twin (:mod:`tokenbook.book.ipynb`) and the page with
    a setup cell (tag ``tokenbook-setup``) before its first code cell."""
    url = repository_url(root)
    chapter_nb = chapter_notebook(root / "notebooks" / f"{chapter}.py", url)
    return chapter_nb, _with_setup(page, url)


def write_edition(chapter: str, out: str | Path, *, edition: str = "student",
                  fmt: str = "ipynb", root: str | Path | None = None) -> list[Path]:
    """Write ``<out>/<chapter>.<fmt>`` (the chapter) and ``<out>/<chapter>_exercises.<fmt>``
    (the exercise page: stubs for ``edition="student"``, solutions for ``"instructor"``).
    The ``.ipynb`` editions open on Colab: the chapter is its committed twin's twin
    (:func:`tokenbook.book.ipynb.chapter_notebook`) and the page gets a setup cell that installs
    tokenbook where it is missing."""
    import jupytext

    if edition not in ("student", "instructor"):
        raise ValueError(f"edition must be 'student' or 'instructor', got {edition!r}")
    if fmt not in ("ipynb", "py"):
        raise ValueError(f"fmt must be 'ipynb' or 'py', got {fmt!r}")
    root = Path(root) if root is not None else find_root()
    page = read_page(chapter, root)
    if edition == "student":
        page = student_notebook(page, chapter_link="{name}.ipynb",
                                repo_url=repository_url(root))
    if fmt == "ipynb":
        chapter_nb, page = _notebooks_for_ipynb(chapter, page, root)
    else:
        chapter_nb = jupytext.read(root / "notebooks" / f"{chapter}.py", fmt="py:percent")
    out = Path(out)
    written = []
    for nb, name in ((chapter_nb, chapter), (page, f"{chapter}_exercises")):
        path = out / f"{name}.{fmt}"
        text = jupytext.writes(nb, fmt="ipynb" if fmt == "ipynb" else "py:percent")
        _write_atomic(text, path)
        written.append(path)
    return written


def main(argv: Sequence[str] | None = None, prog: str = "python -m tokenbook.book.exercises") -> int:
    """``tokenbook exercises {student,instructor} [CHAPTER ...|--all] --out DIR``."""
    p = argparse.ArgumentParser(prog=prog,
                                description="Write the student or instructor edition of the "
                                            "book's exercise pages.")
    p.add_argument("edition", choices=["student", "instructor"])
    p.add_argument("chapters", nargs="*", help=f"chapters (of {', '.join(CHAPTERS)})")
    p.add_argument("--all", action="store_true", help="every chapter with an exercise page")
    p.add_argument("--out", type=Path, required=True, help="output folder")
    p.add_argument("--format", choices=["ipynb", "py"], default="ipynb")
    p.add_argument("--root", type=Path, default=None, help="book root (default: from cwd)")
    args = p.parse_args(argv)
    if not args.all and not args.chapters:
        p.error("name one or more chapters, or pass --all")

    def fail(message: str) -> int:
        print(f"{prog}: error: {message}", file=sys.stderr)
        return 2

    if args.all and args.chapters:
        return fail("give chapter names or --all, not both")
    root = args.root.expanduser().resolve() if args.root is not None else find_root()
    if not (root / "notebooks").is_dir():
        return fail(f"--root {args.root}: not a book root (no notebooks/ folder in it)")
    if args.out.exists() and not args.out.is_dir():
        return fail(f"--out {args.out}: is a file, not a folder")
    available = [c for c in CHAPTERS if (root / "notebooks" / "exercises" / f"{c}.py").exists()]
    unknown = [c for c in args.chapters if c not in available]
    if unknown:
        return fail(f"no exercise page for {unknown[0]!r}; chapters with one: "
                    f"{', '.join(available) or '(none under ' + str(root) + ')'}")
    chapters = available if args.all else args.chapters
    if not chapters:
        return fail(f"no exercise pages under {root / 'notebooks' / 'exercises'}")
    for chapter in chapters:
        try:
            paths = write_edition(chapter, args.out, edition=args.edition, fmt=args.format,
                                  root=root)
        except (OSError, ValueError) as exc:
            print(f"{prog}: error: {exc}", file=sys.stderr)
            return 2
        print(f"{chapter}: " + ", ".join(str(x) for x in paths))
    return 0


if __name__ == "__main__":
    sys.exit(main())
