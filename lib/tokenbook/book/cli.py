"""The ``tokenbook`` command: ``list``, ``run``, ``sweep``, ``runs``, ``build``, ``exercises``.

Exit codes: 0 success, 1 a chapter or the book build failed, 2 a bad request (unknown
chapter or parameter, wrong type) — detected before anything runs.
"""

from __future__ import annotations

import argparse
import difflib
import json
import math
import os
import signal
import sys
from pathlib import Path

from tokenbook.book.build import build
from tokenbook.book.exercises import main as exercises_main
from tokenbook.book.runner import (RunnerError, collect_overrides, discover, find_root,
                                   get_chapter, list_runs, parse_sweep_values, run_chapter,
                                   runs_root, sweep, validate)


def _seconds(text: str) -> float:
    """An option value in seconds: a finite number > 0."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expects seconds (a number > 0), got {text!r}") \
            from None
    if not math.isfinite(value) or value <= 0:
        raise argparse.ArgumentTypeError(f"expects seconds (a finite number > 0), got {text!r}")
    return value


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expects a whole number >= 1, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expects a whole number >= 1, got {text!r}")
    return value


class _OneLineParser(argparse.ArgumentParser):
    """argparse whose errors are one line, ``tokenbook: error: …`` (exit 2)."""

    def error(self, message: str):  # type: ignore[override]
        self.exit(2, f"tokenbook: error: {self.prog.split()[-1]}: {message} "
                     f"(see {self.prog} -h)\n")


def _parser() -> argparse.ArgumentParser:
    p = _OneLineParser(prog="tokenbook", description=__doc__.splitlines()[0])
    root_help = "book root holding notebooks/, params/, _build/ (default: found from cwd)"
    p.add_argument("--root", type=Path, default=None, help=root_help)
    sub = p.add_subparsers(dest="command", required=True, parser_class=_OneLineParser)

    ls = sub.add_parser("list", help="chapters, their parameters (type, default, help, cost), "
                                     "parameter files")
    ls.add_argument("chapter", nargs="?", default=None,
                    help="show this chapter's parameters in full (default: every chapter)")

    r = sub.add_parser("run", help="execute one chapter into _build/runs/CHAPTER/RUN_ID/")
    r.add_argument("chapter")
    r.add_argument("-p", "--parameter", nargs=2, action="append", default=[],
                   metavar=("NAME", "VALUE"), help="override a parameter (value read as YAML)")
    r.add_argument("-f", "--file", action="append", default=[], type=Path,
                   help="YAML file of parameter values (e.g. params/CHAPTER/paper.yaml)")
    r.add_argument("--out", type=Path, default=None,
                   help="folder receiving the run (DIR/CHAPTER/RUN_ID; default _build/runs)")
    r.add_argument("-q", "--quiet", action="store_true", help="no progress output")
    r.add_argument("--timeout-s", type=_seconds, default=None, metavar="SECONDS",
                   help="stop the run (status failed, 'timed out') after this many seconds")

    s = sub.add_parser("sweep", help="one run per combination of -p NAME V1,V2,... via Dask")
    s.add_argument("chapter")
    s.add_argument("-p", "--parameter", nargs=2, action="append", default=[],
                   metavar=("NAME", "VALUES"), help="comma-separated values (or a YAML list)")
    s.add_argument("-f", "--file", action="append", default=[], type=Path,
                   help="YAML file of fixed parameter values")
    s.add_argument("--scheduler", default=None,
                   help="address of an existing Dask scheduler (default: a LocalCluster)")
    s.add_argument("--scheduler-timeout", type=_seconds, default=5.0, metavar="SECONDS",
                   help="give up reaching --scheduler after this long (default 5)")
    s.add_argument("--workers", type=_positive_int, default=None,
                   help="LocalCluster worker processes")
    s.add_argument("--out", type=Path, default=None, help="as for run")
    s.add_argument("--rerun", action="store_true",
                   help="recompute every combination (default: reuse finished runs with the "
                        "same source and parameters)")

    rs = sub.add_parser("runs", help="runs with their status (a running run whose runner is "
                                      "gone: died)")
    rs.add_argument("chapter", nargs="?", default=None, help="only this chapter's runs")
    rs.add_argument("--out", type=Path, default=None, help="as for run")

    b = sub.add_parser("build", help="execute every chapter (reusing up-to-date runs), "
                                     "then build the HTML book into _build/html")
    b.add_argument("--rerun", action="store_true", help="execute every chapter again")
    b.add_argument("--no-book", action="store_true",
                   help="only execute the chapters and prime the cache")
    b.add_argument("--not-strict", action="store_true",
                   help="do not treat Sphinx warnings as errors")
    b.add_argument("chapters", nargs="*", help="only these chapters (default: those in _toc.yml)")

    e = sub.add_parser("exercises", add_help=False,
                       help="write the student (solutions stubbed) or instructor edition of the "
                            "exercise pages: tokenbook exercises {student,instructor} "
                            "[CHAPTER ...|--all] --out DIR (see tokenbook exercises -h)")
    e.add_argument("arguments", nargs=argparse.REMAINDER)
    for command in (ls, r, s, rs, b):  # --root also after the subcommand
        command.add_argument("--root", type=Path, default=argparse.SUPPRESS, help=root_help)
    return p


def _cmd_list(root: Path, name: str | None = None) -> int:
    chapters = discover(root)
    if name is not None:
        return _list_one(get_chapter(name, root), root)
    if not chapters:
        raise RunnerError(f"no chapters in {root / 'notebooks'} (is --root the book's root?)")
    for ch in chapters.values():
        print(f"{ch.name}  ({_rel(ch.path, root)})")
        if ch.error:
            print(f"    ERROR: {ch.error}")
        types = ch.types()
        for pname, default in ch.parameters.items():
            line = f"    {pname:<22} {types[pname]:<10} {default!r:<14}"
            extra = ch.help.get(pname, "")
            if ch.cost.get(pname):
                extra += f" [{ch.cost[pname]}]"
            print((line + " " + extra).rstrip()[:160])
        for f in ch.param_files:
            print(f"    parameter file: {_rel(f, root)}")
    print("\n(tokenbook list CHAPTER shows one chapter's parameters in full)")
    return 0


def _rel(path: Path, root: Path) -> str:
    return str(path.relative_to(root)) if path.is_relative_to(root) else str(path)


def _list_one(ch, root: Path) -> int:
    print(f"{ch.name}  ({_rel(ch.path, root)})")
    types = ch.types()
    for pname, default in ch.parameters.items():
        spec = ch.spec(pname)
        print(f"\n  {pname}: {types[pname]} = {default!r}")
        if ch.help.get(pname):
            print(f"      {ch.help[pname]}")
        print(f"      allowed: {spec.describe()}")
        if ch.cost.get(pname):
            print(f"      cost: {ch.cost[pname]}")
    if ch.param_files:
        print("\nparameter files (-f):")
        for f in ch.param_files:
            print(f"  {_rel(f, root)}")
    print(f"\nrun: tokenbook run {ch.name} -p NAME VALUE [-f FILE]")
    return 0


def _out(given: Path | None) -> Path | None:
    """``--out``, checked: a folder (or one that can be made), not a file."""
    if given is None:
        return None
    out = given.expanduser()
    if out.exists() and not out.is_dir():
        raise RunnerError(f"--out {given}: is a file, not a folder; give a folder for the runs")
    return out


def _cmd_run(args, root: Path) -> int:
    chapter = get_chapter(args.chapter, root)
    overrides = collect_overrides(chapter, args.file, args.parameter)
    result = run_chapter(chapter, overrides, root=root, out=_out(args.out), quiet=args.quiet,
                         timeout_s=args.timeout_s)
    print(result.run_dir)
    return 0 if result.ok else 1


def _cmd_sweep(args, root: Path) -> int:
    chapter = get_chapter(args.chapter, root)
    fixed = collect_overrides(chapter, args.file, [], complete=False)  # grid checked later
    grid: dict = {}
    for name, text in args.parameter:
        if name in grid:
            raise RunnerError(f"parameter {name!r} is given twice; give a grid as one -p with "
                              f"comma-separated values: -p {name} V1,V2,...")
        spec = chapter.spec(name) if name in chapter.parameters else None
        grid[name] = parse_sweep_values(text, spec)
    if not grid:
        raise RunnerError("sweep needs at least one -p NAME V1,V2,...")
    validate(chapter, {n: v[0] for n, v in grid.items() if v})  # names first, clear message
    results = sweep(chapter, grid, fixed=fixed, root=root, out=_out(args.out),
                    scheduler=args.scheduler, n_workers=args.workers, rerun=args.rerun,
                    scheduler_timeout_s=args.scheduler_timeout)
    for r in results:
        status = "reused" if r.get("reused") else r["status"]
        print(f"{status:<7} {json.dumps(r['overrides'])}  {r['run_dir']}"
              + (f"  ({r['error']})" if r["error"] else ""))
    return 0 if all(r["status"] == "ok" for r in results) else 1


def _cmd_runs(args, root: Path) -> int:
    """Every run (of one chapter) with its status, oldest first."""
    runs = runs_root(root, _out(args.out))
    if args.chapter is not None:
        known = discover(root)
        if args.chapter not in known and not (runs / args.chapter).is_dir():
            _unknown(args.chapter, known)
        chapters = [args.chapter]
    else:
        chapters = sorted(p.name for p in runs.iterdir() if p.is_dir()) if runs.is_dir() else []
    n = 0
    for chapter in chapters:
        for info in list_runs(chapter, runs):
            n += 1
            wall = info.get("wall_s")
            print(f"{chapter:<26} {info.get('run_id', '?'):<30} {info.get('status', '?'):<11} "
                  f"{'' if wall is None else f'{wall:.0f} s':>8}  "
                  f"{(info.get('error') or '')[:80]}".rstrip())
    if n == 0:
        print(f"no runs under {runs}")
    return 0


def _root(given: Path | None) -> Path:
    """The book root: ``--root`` (checked) or the one found from the working directory."""
    if given is None:
        return find_root()
    root = given.expanduser().resolve()
    if not root.is_dir():
        raise RunnerError(f"--root {given}: no such folder; give the book's root (the folder "
                          f"holding notebooks/ and params/)")
    if not (root / "notebooks").is_dir():
        raise RunnerError(f"--root {given}: not a book root (no notebooks/ folder in it)")
    return root


def _unknown(name: str, known: dict) -> None:
    hint = difflib.get_close_matches(name, list(known), n=1)
    raise RunnerError(f"unknown chapter {name!r}" + (f" (did you mean {hint[0]!r}?)" if hint
                                                      else "")
                      + f"; chapters: {', '.join(known) or '(none found)'}")


def _terminate(signum, frame):  # SIGTERM: unwind so a running run records "failed"
    raise SystemExit(128 + signum)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    if "exercises" in argv:  # its own parser (python -m tokenbook.book.exercises)
        i = argv.index("exercises")
        before = argv[:i]
        if before[:1] == ["--root"] and len(before) == 2:  # tokenbook --root R exercises …
            argv = [*argv[i:], "--root", before[1]]
        elif before:
            argv = argv  # not the subcommand: let the parser say what is wrong
        if argv[:1] == ["exercises"]:
            return exercises_main(argv[1:], prog="tokenbook exercises")
    args = _parser().parse_args(argv)
    try:
        signal.signal(signal.SIGTERM, _terminate)
    except ValueError:  # not the main thread (e.g. called from a Dask worker)
        pass
    try:
        root = _root(args.root)
        if args.command == "list":
            return _cmd_list(root, args.chapter)
        if args.command == "run":
            return _cmd_run(args, root)
        if args.command == "sweep":
            return _cmd_sweep(args, root)
        if args.command == "runs":
            return _cmd_runs(args, root)
        if args.command == "build":
            known = discover(root)
            for name in args.chapters:
                get_chapter(name, root) if name in known else _unknown(name, known)
            return build(root, chapters=args.chapters or None, rerun=args.rerun,
                         strict=not args.not_strict, run_book=not args.no_book)
    except RunnerError as exc:
        print(f"tokenbook: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("tokenbook: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # e.g. `tokenbook list | head`

        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    return 2


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
