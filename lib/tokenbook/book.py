"""Building the book: execute chapters through the runner, gather the scorecard, run Jupyter Book.

:func:`build` (``tokenbook build``, ``make book``):

1. for each chapter listed in ``_toc.yml``, reuse its latest ``ok`` run made at the defaults
   with the same source hash (notebook + library), else execute it through the runner at its
   defaults without injected parameters (so the executed code cells equal the ``.py``);
2. stop with a non-zero exit if any chapter failed (its partial run folder is kept);
3. write ``_build/book_runs.json`` (which run each page shows) and prime myst-nb's
   jupyter-cache (``_build/.jupyter_cache``) with those executed notebooks, so Jupyter Book
   executes nothing itself;
4. ``jupyter-book build --all -W -n --keep-going`` (warnings are errors: a failing cell fails).

The Sphinx extension in this module (``setup``; listed in ``_config.yml``) writes the
reproduction scorecard (``_build/scorecard.md``, included by the front page) at build time from
the runs' ``claims.json`` files: verdicts are read from the runs, never typed in.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Iterable

from .cache import write_json_atomic
from .claims import load_claims
from .runner import (RUNS_DIRNAME, Chapter, RunnerError, discover, find_root, latest_run,
                     run_chapter, source_hash)

MANIFEST = Path("_build") / "book_runs.json"
SCORECARD = Path("_build") / "scorecard.md"
JUPYTER_CACHE = Path("_build") / ".jupyter_cache"
VERDICT_MARK = {"holds": "✅ holds", "does not hold": "❌ does not hold",
                "not testable": "➖ not testable"}


# --------------------------------------------------------------------------------------------
# Table of contents
# --------------------------------------------------------------------------------------------
def _toc_files(node: Any) -> Iterable[str]:
    if isinstance(node, dict):
        for key in ("root", "file"):
            if isinstance(node.get(key), str):
                yield node[key]
        for value in node.values():
            if isinstance(value, (list, dict)):
                yield from _toc_files(value)
    elif isinstance(node, list):
        for item in node:
            yield from _toc_files(item)


def toc_chapters(root: str | Path) -> list[str]:
    """Chapter names (``notebooks/<name>``) listed in ``<root>/_toc.yml``, in toc order."""
    import yaml

    toc = Path(root) / "_toc.yml"
    if not toc.exists():
        return []
    names = []
    for f in _toc_files(yaml.safe_load(toc.read_text()) or {}):
        p = Path(f)
        if p.parts[:1] == ("notebooks",) and len(p.parts) == 2:
            name = p.name[:-3] if p.name.endswith(".py") else p.name
            if name not in names:
                names.append(name)
    return names


# --------------------------------------------------------------------------------------------
# Scorecard
# --------------------------------------------------------------------------------------------
def _fmt_value(value: Any) -> str:
    if value is None or (isinstance(value, float) and value != value):
        return "—"
    if isinstance(value, float):
        return f"{value:.4g}"
    if isinstance(value, (list, dict)):
        text = json.dumps(value, ensure_ascii=False)
        return text if len(text) <= 60 else text[:57] + "…"
    return str(value)


def _cell(text: Any) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ").strip()


def gather_scorecard(root: str | Path, chapters: Iterable[str] | None = None,
                     manifest: dict | None = None):
    """One row per claim of each chapter's run shown in the book (from ``manifest``), else of
    its latest ``ok`` run. Columns: chapter, run_id, id, claim, paper, statistic, measured
    (raw value), expected, verdict, note. Chapters without an ok run get no rows."""
    import pandas as pd

    root = Path(root)
    runs = root / RUNS_DIRNAME
    if chapters is None:
        chapters = sorted(p.name for p in runs.iterdir() if p.is_dir()) if runs.is_dir() else []
    rows = []
    for chapter in chapters:
        run_dir = None
        if manifest and chapter in manifest:
            run_dir = Path(manifest[chapter]["run_dir"])
        else:
            info = latest_run(chapter, runs)
            run_dir = Path(info["run_dir"]) if info else None
        if run_dir is None or not (run_dir / "claims.json").exists():
            continue
        for c in load_claims(run_dir / "claims.json"):
            rows.append({"chapter": chapter, "run_id": run_dir.name, "id": c["id"],
                         "claim": c["claim"], "paper": c.get("paper", ""),
                         "statistic": c["statistic"], "measured": c["value"],
                         "expected": c["expected"], "verdict": c["verdict"],
                         "note": c.get("note", "")})
    columns = ["chapter", "run_id", "id", "claim", "paper", "statistic", "measured", "expected",
               "verdict", "note"]
    return pd.DataFrame(rows, columns=columns)


def scorecard_markdown(frame, linked: Iterable[str] = ()) -> str:
    """The scorecard as a MyST markdown table; chapters in ``linked`` link to their page."""
    linked = set(linked)
    if frame.empty:
        return ("*No chapter has a successful run yet: run `make book` (or "
                "`tokenbook run <chapter>`) to fill the scorecard.*\n")
    counts = frame["verdict"].value_counts()
    n, k = len(frame), frame["chapter"].nunique()
    lines = [f"{n} claim{'s' * (n != 1)} from {k} chapter{'s' * (k != 1)}: "
             f"**{counts.get('holds', 0)} hold**, **{counts.get('does not hold', 0)} do not "
             f"hold**, **{counts.get('not testable', 0)} not testable** at the scale run.", "",
             "| Chapter | Claim | Measured | Expected | Verdict |",
             "|---|---|---|---|---|"]
    for row in frame.itertuples(index=False):
        chapter = (f"{{doc}}`{row.chapter} </notebooks/{row.chapter}>`" if row.chapter in linked
                   else f"`{row.chapter}`")
        claim = _cell(row.claim) + (f" ({_cell(row.paper)})" if row.paper else "")
        measured = f"{_cell(_fmt_value(row.measured))} — {_cell(row.statistic)}"
        lines.append(f"| {chapter} | {claim} | {measured} | {_cell(row.expected)} | "
                     f"{VERDICT_MARK.get(row.verdict, row.verdict)} |")
    runs = frame.groupby("chapter", sort=False)["run_id"].first()
    lines += ["", "Runs: " + "; ".join(f"`{c}` {r}" for c, r in runs.items()) + "."]
    return "\n".join(lines) + "\n"


def write_scorecard(root: str | Path) -> Path:
    """(Re)write ``<root>/_build/scorecard.md`` from the runs; untouched if unchanged."""
    root = Path(root)
    manifest_path = root / MANIFEST
    manifest = json.loads(manifest_path.read_text()) if manifest_path.exists() else None
    in_toc = toc_chapters(root)
    chapters = in_toc or None
    text = scorecard_markdown(gather_scorecard(root, chapters, manifest), linked=in_toc)
    out = root / SCORECARD
    out.parent.mkdir(parents=True, exist_ok=True)
    if not out.exists() or out.read_text() != text:
        out.write_text(text)
    return out


def setup(app):  # Sphinx extension entry point
    """Sphinx extension: write the scorecard before the documents are read."""

    def _on_init(app_):
        write_scorecard(Path(app_.srcdir))

    app.connect("builder-inited", _on_init)
    return {"parallel_read_safe": True, "parallel_write_safe": True, "version": "1"}


# --------------------------------------------------------------------------------------------
# jupyter-cache priming
# --------------------------------------------------------------------------------------------
_NOISE = ("TqdmWarning: IProgress not found", "from .autonotebook import tqdm as notebook_tqdm")


def clean_stream_text(text: str) -> str:
    """A stream output as a terminal would show it: each line keeps only what follows its last
    carriage return (progress bars collapse to their final state), and tqdm's "IProgress not
    found" warning (no ipywidgets in the kernel) is dropped."""
    lines = []
    for line in text.split("\n"):
        if "\r" in line:
            parts = [p for p in line.split("\r") if p]
            line = parts[-1] if parts else ""
        if any(n in line for n in _NOISE):
            continue
        lines.append(line)
    return "\n".join(lines)


def prime_jupyter_cache(source: str | Path, executed: str | Path, cache_path: str | Path,
                        execution_seconds: float | None = None) -> str:
    """Store the outputs of ``executed`` (an .ipynb) in myst-nb's jupyter-cache under the hash
    of ``source`` (the chapter's .py as the book reads it), so the book build reuses them.

    The cached notebook is the source notebook (its cells and metadata, which the hash covers)
    with the executed outputs and execution counts copied in; the code cells must match.
    Stream outputs are shown as a terminal would (:func:`clean_stream_text`); the run folder
    keeps the raw executed notebook.
    Returns the cache key. Raises ``RunnerError`` if the notebooks' code differs.
    """
    import jupytext
    import nbformat
    from jupyter_cache import get_cache
    from jupyter_cache.base import CacheBundleIn

    src = jupytext.read(source, fmt="py:percent")
    done = nbformat.read(executed, as_version=4)
    src_code = [c for c in src.cells if c.cell_type == "code"]
    done_code = [c for c in done.cells if c.cell_type == "code"]  # injected cells count
    if [c.source for c in src_code] != [c.source for c in done_code]:
        raise RunnerError(f"executed notebook {executed} does not match {source}: the run "
                          f"used injected parameters, or the chapter changed after it ran "
                          f"(run `tokenbook build` again)")
    for s, d in zip(src_code, done_code):
        merged: list = []  # consecutive stream outputs of one stream joined, as Jupyter shows
        for out in d.get("outputs", []):
            if (out.get("output_type") == "stream" and merged
                    and merged[-1].get("output_type") == "stream"
                    and merged[-1].get("name") == out.get("name")):
                merged[-1]["text"] += out.get("text", "")
            else:
                merged.append(out)
        outputs = []
        for out in merged:
            if out.get("output_type") == "stream":
                out["text"] = clean_stream_text(out.get("text", ""))
                if not out["text"].strip():
                    continue
            outputs.append(out)
        s.outputs = outputs
        s.execution_count = d.get("execution_count")
    cache = get_cache(str(cache_path))
    record = cache.cache_notebook_bundle(
        CacheBundleIn(src, str(Path(source).resolve()),
                      data={"execution_seconds": execution_seconds}),
        check_validity=False, overwrite=True)
    if cache.match_cache_notebook(src).hashkey != record.hashkey:  # pragma: no cover
        raise RunnerError(f"jupyter-cache does not match {source} after priming")
    return record.hashkey


# --------------------------------------------------------------------------------------------
# Build
# --------------------------------------------------------------------------------------------
def _jupyter_book() -> list[str]:
    exe = Path(sys.executable).parent / "jupyter-book"
    if exe.exists():
        return [str(exe)]
    return [sys.executable, "-c", "import sys; from jupyter_book.cli.main import main; "
            "sys.argv[0] = 'jupyter-book'; sys.exit(main())"]


def execute_chapters(root: str | Path, chapters: Iterable[str] | None = None, *,
                     rerun: bool = False, quiet: bool = False) -> dict[str, dict]:
    """Make sure every chapter has an up-to-date ok run at its defaults; returns
    ``{chapter: {"run_dir", "status", "reused", "wall_s"}}``."""
    root = Path(root).resolve()
    found = discover(root)
    if chapters is not None:
        names = list(chapters)
    elif (root / "_toc.yml").exists():
        names = toc_chapters(root)  # the book's chapters, possibly none yet
    else:
        names = list(found)
    missing = [n for n in names if n not in found]
    if missing:
        raise RunnerError(f"_toc.yml lists chapters without a notebook: {missing}")
    runs = root / RUNS_DIRNAME
    results: dict[str, dict] = {}
    for name in names:
        chapter: Chapter = found[name]
        if chapter.error:
            raise RunnerError(f"{name}: {chapter.error}")
        current = source_hash(chapter, root)
        info = None if rerun else latest_run(name, runs, source=current, defaults_only=True)
        if info is not None and Path(info["run_dir"], f"{name}.ipynb").exists():
            print(f"[tokenbook] {name}: up to date, reusing run {info['run_id']}",
                  file=sys.stderr)
            results[name] = {"run_dir": info["run_dir"], "status": "ok", "reused": True,
                             "wall_s": info.get("wall_s")}
            continue
        print(f"[tokenbook] {name}: executing at its defaults", file=sys.stderr)
        res = run_chapter(chapter, {}, root=root, inject=False, quiet=quiet)
        results[name] = {"run_dir": str(res.run_dir), "status": res.status, "reused": False,
                         "wall_s": round(res.wall_s, 2), "error": res.error}
    return results


def build(root: str | Path | None = None, *, chapters: Iterable[str] | None = None,
          rerun: bool = False, strict: bool = True, run_book: bool = True,
          quiet: bool = False) -> int:
    """Execute the chapters through the runner and build the HTML book; returns an exit code."""
    root = Path(root).resolve() if root is not None else find_root()
    t0 = time.perf_counter()
    results = execute_chapters(root, chapters, rerun=rerun, quiet=quiet)
    failed = {n: r for n, r in results.items() if r["status"] != "ok"}
    if failed:
        for n, r in failed.items():
            print(f"[tokenbook] build stopped: {n} failed ({r.get('error')}); partial outputs "
                  f"in {r['run_dir']}", file=sys.stderr)
        return 1
    for attempt in range(3):
        # a chapter edited while the build ran is executed again (its pages show the new code)
        changed = [n for n, r in results.items()
                   if Path(r["run_dir"], f"{n}.py").exists()
                   and Path(r["run_dir"], f"{n}.py").read_text()
                   != (root / "notebooks" / f"{n}.py").read_text()]
        if not changed or attempt == 2:
            break
        print(f"[tokenbook] changed during the build, executing again: {changed}",
              file=sys.stderr)
        results.update(execute_chapters(root, changed, quiet=quiet))
        failed = {n: r for n, r in results.items() if r["status"] != "ok"}
        if failed:
            print(f"[tokenbook] build stopped: {sorted(failed)} failed", file=sys.stderr)
            return 1
    write_json_atomic(results, root / MANIFEST)
    for name, r in results.items():
        prime_jupyter_cache(root / "notebooks" / f"{name}.py",
                            Path(r["run_dir"]) / f"{name}.ipynb", root / JUPYTER_CACHE,
                            r.get("wall_s"))
    write_scorecard(root)
    if not run_book:
        return 0
    cmd = [*_jupyter_book(), "build", str(root), "--all"]
    if strict:
        cmd += ["-W", "-n", "--keep-going"]
    env = dict(os.environ, HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1")
    rc = subprocess.run(cmd, cwd=root, env=env).returncode
    html = root / "_build" / "html" / "index.html"
    if rc == 0 and not html.exists():
        print(f"[tokenbook] jupyter-book exited 0 but {html} is missing", file=sys.stderr)
        rc = 1
    print(f"[tokenbook] book {'built' if rc == 0 else 'FAILED'} in "
          f"{time.perf_counter() - t0:.1f} s -> {html}", file=sys.stderr)
    return rc
