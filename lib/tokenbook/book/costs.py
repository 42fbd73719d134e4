"""What each chapter and exercise page costs to run: one measured file, ``book/costs.yml``.

The file holds, per chapter, the wall time of its default (tiny-scale) run from an empty
cache and its peak memory (``run.json``'s ``wall_s`` and ``peak_rss_mb``), and per exercise
page the time the book's execution of it took (the jupyter-cache's ``execution_seconds``), with
where and when they were measured. It is written by

    python -m tokenbook.book.costs [--root ROOT] [--machine TEXT] [--note TEXT]

from the runs the book shows (``_build/book_runs.json``) and the book's jupyter-cache; review
the diff and commit it. Everything that states a cost reads it: ``book/course.md`` and the
exercise pages through MyST substitutions (:func:`substitutions`, set by the book's Sphinx
extension), the student notebooks through :func:`render`, and the README is checked against it
by a test (``tests/foundation/test_foundation_costs.py``).
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from datetime import date
from pathlib import Path
from typing import Any

import yaml

from tokenbook.book.runner import find_root

COSTS = Path("book") / "costs.yml"
#: ``{{ cost_<chapter> }}`` (the chapter's run), ``{{ exercise_cost_<chapter> }}`` (its page),
#: ``{{ costs_measured }}`` (where and when), ``{{ costs_peak_memory }}`` (the chapters' range)
SUBSTITUTION = re.compile(r"\{\{\s*((?:exercise_)?cost_\w+|costs_\w+)\s*\}\}")


def costs_path(root: str | Path | None = None) -> Path:
    if root is None:
        root = find_root()
    return Path(root) / COSTS


def load(root: str | Path | None = None) -> dict:
    """``book/costs.yml`` as a dict (``chapters``, ``exercises``, ``measured``)."""
    path = costs_path(root)
    data = yaml.safe_load(path.read_text()) if path.exists() else None
    return data or {"chapters": {}, "exercises": {}, "measured": {}}


def _seconds(x: Any) -> str:
    x = float(x)
    return f"{x:,.0f} s" if x >= 100 else f"{x:.0f} s" if x >= 20 else f"{x:.1f} s"


def _memory(mb: Any) -> str:
    return f"{float(mb) / 1000:.1f} GB" if float(mb) >= 1000 else f"{float(mb):.0f} MB"


def chapter_text(entry: dict) -> str:
    """``"256 s from an empty cache; 1.4 GB peak memory"`` from one chapter's entry."""
    parts = [" ".join(filter(None, (_seconds(entry["wall_s"]), entry.get("condition"))))]
    if entry.get("peak_rss_mb"):
        parts.append(f"{_memory(entry['peak_rss_mb'])} peak memory")
    return "; ".join(parts)


def substitutions(costs: dict) -> dict[str, str]:
    """The MyST substitutions the pages use: ``cost_<chapter>``, ``exercise_cost_<chapter>``
    and ``costs_measured``."""
    out = {f"cost_{c}": chapter_text(e) for c, e in (costs.get("chapters") or {}).items()}
    out.update({f"exercise_cost_{c}": _seconds(e["wall_s"])
                for c, e in (costs.get("exercises") or {}).items()})
    peaks = [e["peak_rss_mb"] for e in (costs.get("chapters") or {}).values()
             if e.get("peak_rss_mb")]
    out["costs_peak_memory"] = (f"{_memory(min(peaks))}–{_memory(max(peaks))}" if peaks
                                else "(not measured)")
    m = costs.get("measured") or {}
    out["costs_measured"] = ", ".join(str(m[k]) for k in ("machine", "date", "commit")
                                      if m.get(k)) or "not measured yet"
    return out


def render(text: str, costs: dict | None = None, root: str | Path | None = None) -> str:
    """``text`` with its ``{{ cost_… }}`` substitutions filled in (for the student notebooks,
    which no MyST renders)."""
    if not SUBSTITUTION.search(text):
        return text
    subs = substitutions(costs if costs is not None else load(root))
    return SUBSTITUTION.sub(lambda m: subs.get(m.group(1), m.group(0)), text)


def measure(root: str | Path) -> dict:
    """The costs of the book's runs (``_build/book_runs.json``: ``run.json``'s ``wall_s`` and
    ``peak_rss_mb``) and of its executed exercise pages (jupyter-cache records'
    ``execution_seconds``)."""
    root = Path(root)
    manifest = root / "_build" / "book_runs.json"
    if not manifest.exists():
        raise FileNotFoundError(f"{manifest} is missing: build the book first (make book)")
    chapters = {}
    commit = None
    for chapter, info in json.loads(manifest.read_text()).items():
        run = json.loads((Path(info["run_dir"]) / "run.json").read_text())
        entry = {"wall_s": round(float(run["wall_s"]), 1)}
        if run.get("peak_rss_mb"):
            entry["peak_rss_mb"] = round(float(run["peak_rss_mb"]))
        chapters[chapter] = entry
        commit = commit or run.get("git_commit")
    exercises = {}
    cache = root / "_build" / ".jupyter_cache"
    if cache.exists():
        from jupyter_cache import get_cache

        for record in get_cache(str(cache)).list_cache_records():
            uri = Path(record.uri)
            seconds = (record.data or {}).get("execution_seconds")
            if uri.parent.name == "exercises" and seconds:
                exercises[uri.stem] = {"wall_s": round(float(seconds), 1)}
    return {"chapters": chapters, "exercises": exercises,
            "measured": {"date": date.today().isoformat(),
                         "commit": (commit or "")[:7] or None}}


def write(costs: dict, root: str | Path | None = None) -> Path:
    path = costs_path(root)
    path.parent.mkdir(parents=True, exist_ok=True)
    header = ("# What each chapter and exercise page costs at tiny scale: the one source of the\n"
              "# README's, course.md's and the exercise pages' times. Written by\n"
              "# `python -m tokenbook.book.costs` from the book's runs (run.json wall_s, peak_rss_mb)\n"
              "# and executed exercise pages (jupyter-cache execution_seconds); review, commit.\n")
    path.write_text(header + yaml.safe_dump(costs, sort_keys=False, allow_unicode=True))
    return path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tokenbook.book.costs",
                                     description="Update book/costs.yml from the book's runs.")
    parser.add_argument("--root", default=None)
    parser.add_argument("--machine", default=None,
                        help="the machine measured on, e.g. '2-core CPU, idle'")
    parser.add_argument("--note", default=None,
                        help="how the runs were made, e.g. 'clean-clone bash .ci/run, empty cache'")
    args = parser.parse_args(argv)

    root = Path(args.root).resolve() if args.root else find_root()
    old = load(root)
    new = measure(root)
    for kind in ("chapters", "exercises"):  # keep what this build did not measure
        merged = {**(old.get(kind) or {}), **new[kind]}
        for name, entry in new[kind].items():  # and the stated condition of a remeasured one
            condition = ((old.get(kind) or {}).get(name) or {}).get("condition")
            if condition and "condition" not in entry:
                merged[name] = {**entry, "condition": condition}
        new[kind] = merged
    old_measured = old.get("measured") or {}
    for field, given in (("machine", args.machine), ("note", args.note)):
        if given or old_measured.get(field):
            new["measured"][field] = given or old_measured[field]
    print(f"written: {write(new, root)}")
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
