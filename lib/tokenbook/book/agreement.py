"""Held-out agreement: every tiny claim re-judged on root seeds the book never uses.

A tiny verdict should not depend on which root seeds were drawn. :func:`heldout_agreement`
executes each chapter at its defaults except for the root seeds (a disjoint block, by default
100, 101, …), through the runner into a separate run folder, and compares each claim's
verdict with the verdict of the book's own run (its latest successful default run). The
result is one row per claim with both verdicts; :func:`agreement_summary` gives the share of
claims whose verdict is the same.

Command line (the book's runs must exist, e.g. after ``make book``)::

    python -m tokenbook.book.agreement                       # every chapter, root seeds 100…
    python -m tokenbook.book.agreement uid_grounding --start 200
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any, Iterable, Mapping

import pandas as pd

from tokenbook.claims import load_claims
from tokenbook.book.runner import discover, find_root, latest_run, run_chapter, runs_root

__all__ = ["heldout_overrides", "compare_verdicts", "heldout_agreement", "agreement_summary",
           "HELDOUT_START", "main"]

#: the first held-out root seed: far from the book's seeds (0, 1, …)
HELDOUT_START = 100


def heldout_overrides(parameters: Mapping[str, Any], start: int) -> dict[str, Any]:
    """The parameter overrides that move a chapter's root seeds to ``start, start + 1, …``,
    keeping their number: every chapter's root seeds are ``seed, seed + 1, …, seed + n_seeds − 1``,
    so only ``seed`` (the first root seed) moves.

    >>> heldout_overrides({"seed": 0, "n_seeds": 8}, 100)
    {'seed': 100}
    """
    if isinstance(start, bool) or not isinstance(start, int) or start < 0:
        raise ValueError(f"start must be a root seed ≥ 0, got {start!r}")
    if "seed" not in parameters:
        raise ValueError("the chapter has no 'seed' parameter: it cannot be re-seeded")
    return {"seed": start}


def compare_verdicts(book: Iterable[Mapping[str, Any]], heldout: Iterable[Mapping[str, Any]],
                     chapter: str) -> pd.DataFrame:
    """One row per tiny claim of either run: ``chapter, id, book, heldout, same``."""
    a = {c["id"]: c["verdict"] for c in book if c.get("scale") == "tiny"}
    b = {c["id"]: c["verdict"] for c in heldout if c.get("scale") == "tiny"}
    ids = list(a) + [i for i in b if i not in a]
    return pd.DataFrame({"chapter": chapter, "id": ids,
                         "book": [a.get(i) for i in ids], "heldout": [b.get(i) for i in ids],
                         "same": [a.get(i) is not None and a.get(i) == b.get(i) for i in ids]})


def heldout_agreement(chapters: Iterable[str] | None = None, *, start: int = HELDOUT_START,
                      root: str | Path | None = None, out: str | Path | None = None,
                      quiet: bool = True) -> pd.DataFrame:
    """Re-judge each chapter's tiny claims on held-out root seeds and compare with the book.

    ``out``: where the held-out runs go (default ``_build/heldout``). Raises when a chapter has
    no successful default run to compare with (run ``make book`` first) or its held-out run
    fails (the run folder is named).
    """
    root = Path(root).resolve() if root is not None else find_root()
    out = Path(out) if out is not None else root / "_build" / "heldout"
    available = discover(root)
    names = list(chapters) if chapters else list(available)
    unknown = [n for n in names if n not in available]
    if unknown:
        raise ValueError(f"unknown chapter(s) {unknown}; chapters: {sorted(available)}")
    frames = []
    for name in names:
        book_run = latest_run(name, runs_root(root), defaults_only=True)
        if book_run is None:
            raise RuntimeError(f"{name}: no successful default run to compare with; run "
                               f"`make book` (or `tokenbook run {name}`) first")
        chapter = available[name]
        result = run_chapter(chapter, heldout_overrides(chapter.parameters, start), root=root,
                             out=out, quiet=quiet)
        if not result.ok:
            raise RuntimeError(f"{name}: the held-out run failed; see {result.run_dir}")
        frames.append(compare_verdicts(load_claims(Path(book_run["run_dir"]) / "claims.json"),
                                       load_claims(Path(result.run_dir) / "claims.json"),
                                       name))
    return pd.concat(frames, ignore_index=True)


def agreement_summary(table: pd.DataFrame) -> dict[str, Any]:
    """``n_claims``, ``n_same`` and ``agreement`` (share), overall and per chapter; ``flips``
    lists the claims whose verdict changed."""
    per = table.groupby("chapter", sort=False)["same"].agg(["size", "sum"])
    return {"n_claims": int(len(table)), "n_same": int(table["same"].sum()),
            "agreement": float(table["same"].mean()) if len(table) else float("nan"),
            "per_chapter": {c: {"n_claims": int(r["size"]), "n_same": int(r["sum"])}
                            for c, r in per.iterrows()},
            "flips": table.loc[~table["same"], ["chapter", "id", "book", "heldout"]]
            .to_dict("records")}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tokenbook.book.agreement",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("chapters", nargs="*", help="chapters (default: all)")
    parser.add_argument("--start", type=int, default=HELDOUT_START,
                        help=f"first held-out root seed (default {HELDOUT_START})")
    parser.add_argument("--json", type=Path, default=None,
                        help="also write the table and summary to this JSON file")
    args = parser.parse_args(argv)
    if args.start < 0:
        parser.error(f"--start must be a root seed ≥ 0, got {args.start}")
    try:
        table = heldout_agreement(args.chapters or None, start=args.start)
    except (ValueError, RuntimeError) as exc:
        print(f"tokenbook.book.agreement: {exc}", file=sys.stderr)
        return 2
    summary = agreement_summary(table)
    with pd.option_context("display.width", 120, "display.max_rows", 200):
        print(table.to_string(index=False))
    print(f"\nagreement on held-out root seeds from {args.start}: {summary['n_same']}/"
          f"{summary['n_claims']} claims ({summary['agreement']:.0%})")
    if args.json:
        tmp = args.json.with_suffix(args.json.suffix + ".tmp")
        tmp.write_text(json.dumps({"start": args.start, "summary": summary,
                                   "claims": table.to_dict("records")}, indent=2))
        tmp.replace(args.json)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
