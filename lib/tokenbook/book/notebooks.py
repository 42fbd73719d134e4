"""``make notebooks``: every generated notebook twin in sync with its ``.py``.

The chapters' ``notebooks/<chapter>.ipynb`` (:func:`tokenbook.book.ipynb.chapter_notebook`) and
the exercise pages' student editions ``notebooks/exercises/<chapter>.ipynb``
(:func:`tokenbook.book.exercises.student_twin`) are generated and committed; a test fails when
one is out of date. Usage: ``python -m tokenbook.book.notebooks [--check] [--root DIR]``.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import nbformat

from tokenbook.book.exercises import student_twin
from tokenbook.book.ipynb import (chapter_notebook, chapter_sources, exercise_sources,
                                  notebook_text, repository_url)
from tokenbook.book.runner import find_root

__all__ = ["sync", "main"]


def sync(root: str | Path, *, check: bool = False) -> list[Path]:
    """Write every chapter's ``.ipynb`` twin that differs from its ``.py``, and every exercise
    page's student edition ``notebooks/exercises/<chapter>.ipynb``
    (:func:`tokenbook.book.exercises.student_twin`), and remove a generated twin whose ``.py`` is
    gone. Returns the twins that were (``check``: would be) written or removed;
    ``check=True`` writes nothing."""
    root = Path(root)
    url = repository_url(root)
    changed = []
    sources = chapter_sources(root)
    pages = exercise_sources(root)
    wanted = [(src, lambda src=src: chapter_notebook(src, url)) for src in sources]
    wanted += [(src, lambda src=src: student_twin(src.stem, root)) for src in pages]
    for src, make in wanted:
        out = src.with_suffix(".ipynb")
        text = notebook_text(make())
        if not out.exists() or out.read_text() != text:
            changed.append(out)
            if not check:
                tmp = out.with_name(f".{out.name}.tmp")
                tmp.write_text(text)
                tmp.replace(out)
    stems = {s.with_suffix("") for s in sources + pages}
    twins = sorted((root / "notebooks").glob("*.ipynb"))
    twins += sorted((root / "notebooks" / "exercises").glob("*.ipynb"))
    for twin in twins:
        if twin.with_suffix("") in stems:
            continue
        try:
            generated = "tokenbook" in nbformat.read(twin, as_version=4).metadata
        except Exception:
            generated = False
        if generated:
            changed.append(twin)
            if not check:
                twin.unlink()
    return changed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m tokenbook.book.notebooks",
        description="Regenerate notebooks/<chapter>.ipynb and notebooks/exercises/<chapter>.ipynb "
                    "from their .py sources.")
    parser.add_argument("--root", default=None, help="the book's root (default: found from "
                        "the current folder)")
    parser.add_argument("--check", action="store_true",
                        help="write nothing; exit 1 if a twin differs from its .py")
    args = parser.parse_args(argv)

    root = Path(args.root).resolve() if args.root else find_root()
    changed = sync(root, check=args.check)
    for path in changed:
        rel = path.relative_to(root)
        print(f"{'out of date' if args.check else 'written'}: {rel}")
    if args.check and changed:
        print("run `make notebooks` to regenerate them", file=sys.stderr)
        return 1
    if not changed:
        print("notebooks/*.ipynb are up to date")
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
