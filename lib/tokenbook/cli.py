"""The ``tokenbook`` command: ``list``, ``run``, ``sweep``, ``build``.

Exit codes: 0 success, 1 a chapter or the book build failed, 2 a bad request (unknown
chapter or parameter, wrong type) — detected before anything runs.
"""

from __future__ import annotations

import argparse
import json
import signal
import sys
from pathlib import Path

from .runner import (RunnerError, collect_overrides, discover, find_root, get_chapter,
                     parse_sweep_values, run_chapter, sweep, validate)


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="tokenbook", description=__doc__.splitlines()[0])
    p.add_argument("--root", type=Path, default=None,
                   help="book root holding notebooks/, params/, _build/ (default: found from cwd)")
    sub = p.add_subparsers(dest="command", required=True)

    sub.add_parser("list", help="chapters, their parameters (defaults, types), parameter files")

    r = sub.add_parser("run", help="execute one chapter into _build/runs/CHAPTER/RUN_ID/")
    r.add_argument("chapter")
    r.add_argument("-p", "--parameter", nargs=2, action="append", default=[],
                   metavar=("NAME", "VALUE"), help="override a parameter (value read as YAML)")
    r.add_argument("-f", "--file", action="append", default=[], type=Path,
                   help="YAML file of parameter values (e.g. params/CHAPTER/paper.yaml)")
    r.add_argument("--out", type=Path, default=None,
                   help="folder receiving the run (DIR/CHAPTER/RUN_ID; default _build/runs)")
    r.add_argument("-q", "--quiet", action="store_true", help="no progress output")

    s = sub.add_parser("sweep", help="one run per combination of -p NAME V1,V2,... via Dask")
    s.add_argument("chapter")
    s.add_argument("-p", "--parameter", nargs=2, action="append", default=[],
                   metavar=("NAME", "VALUES"), help="comma-separated values (or a YAML list)")
    s.add_argument("-f", "--file", action="append", default=[], type=Path,
                   help="YAML file of fixed parameter values")
    s.add_argument("--scheduler", default=None,
                   help="address of an existing Dask scheduler (default: a LocalCluster)")
    s.add_argument("--workers", type=int, default=None, help="LocalCluster worker processes")
    s.add_argument("--out", type=Path, default=None, help="as for run")
    s.add_argument("--rerun", action="store_true",
                   help="recompute every combination (default: reuse finished runs with the "
                        "same source and parameters)")

    b = sub.add_parser("build", help="execute every chapter (reusing up-to-date runs), "
                                     "then build the HTML book into _build/html")
    b.add_argument("--rerun", action="store_true", help="execute every chapter again")
    b.add_argument("--no-book", action="store_true",
                   help="only execute the chapters and prime the cache")
    b.add_argument("--not-strict", action="store_true",
                   help="do not treat Sphinx warnings as errors")
    b.add_argument("chapters", nargs="*", help="only these chapters (default: those in _toc.yml)")
    return p


def _cmd_list(root: Path) -> int:
    chapters = discover(root)
    if not chapters:
        print(f"no chapters in {root / 'notebooks'}")
        return 0
    for ch in chapters.values():
        print(f"{ch.name}  ({ch.path.relative_to(root)})")
        if ch.error:
            print(f"    ERROR: {ch.error}")
        for name, default in ch.parameters.items():
            print(f"    {name:<24} {ch.types()[name]:<6} default {default!r}")
        for f in ch.param_files:
            print(f"    parameter file: {f.relative_to(root)}")
    return 0


def _cmd_run(args, root: Path) -> int:
    chapter = get_chapter(args.chapter, root)
    overrides = collect_overrides(chapter, args.file, args.parameter)
    result = run_chapter(chapter, overrides, root=root, out=args.out, quiet=args.quiet)
    print(result.run_dir)
    return 0 if result.ok else 1


def _cmd_sweep(args, root: Path) -> int:
    chapter = get_chapter(args.chapter, root)
    fixed = collect_overrides(chapter, args.file, [])
    grid = {name: parse_sweep_values(text) for name, text in args.parameter}
    if not grid:
        raise RunnerError("sweep needs at least one -p NAME V1,V2,...")
    validate(chapter, {n: v[0] for n, v in grid.items() if v})  # names first, clear message
    results = sweep(chapter, grid, fixed=fixed, root=root, out=args.out,
                    scheduler=args.scheduler, n_workers=args.workers, rerun=args.rerun)
    for r in results:
        status = "reused" if r.get("reused") else r["status"]
        print(f"{status:<7} {json.dumps(r['overrides'])}  {r['run_dir']}"
              + (f"  ({r['error']})" if r["error"] else ""))
    return 0 if all(r["status"] == "ok" for r in results) else 1


def _terminate(signum, frame):  # SIGTERM: unwind so a running run records "failed"
    raise SystemExit(128 + signum)


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        signal.signal(signal.SIGTERM, _terminate)
    except ValueError:  # not the main thread (e.g. called from a Dask worker)
        pass
    root = (args.root.resolve() if args.root else find_root())
    try:
        if args.command == "list":
            return _cmd_list(root)
        if args.command == "run":
            return _cmd_run(args, root)
        if args.command == "sweep":
            return _cmd_sweep(args, root)
        if args.command == "build":
            from .book import build

            return build(root, chapters=args.chapters or None, rerun=args.rerun,
                         strict=not args.not_strict, run_book=not args.no_book)
    except RunnerError as exc:
        print(f"tokenbook: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("tokenbook: interrupted", file=sys.stderr)
        return 130
    return 2


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
