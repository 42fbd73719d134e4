"""What a chapter page shows: how the book reads a chapter, which outputs it keeps, its assets.

* :func:`reads_chapter` is the book's reader of ``notebooks/<chapter>.py`` (``_config.yml``,
  ``nb_custom_formats``): jupytext's percent reader, plus a ``hide-input`` tag on the
  parameters cell and on set-up cells (imports, ``show_versions()``, ``use_book_style()``),
  so their code is collapsed and only their output shows. The ``.py`` files are not edited.
* :func:`clean_outputs` is applied to the executed outputs the book shows (by
  :func:`tokenbook.book.prime_jupyter_cache`): no stray return values (``PosixPath(...)``,
  ``<Axes ...>``, ``Text(...)``), the build machine's paths made relative to the book's root,
  run ids replaced by ``<run id>``, progress bars in their final state (one line per loop,
  no timings, no loading bars: :func:`collapse_progress`), and a table's missing values
  (pandas' ``NaN``, ``<NA>``, ``None``) shown as ``—``: an interval of one item, a class a
  language does not have.
* :func:`setup` (called by the book's Sphinx extension) bundles MathJax 3 from the
  ``django-static-mathjax`` package into ``_static/mathjax`` (the offline book renders maths),
  adds ``tokenbook.css`` (wide tables scroll inside the page instead of being clipped) and
  offers each chapter's notebook as an ``.ipynb`` download: its runnable twin
  (``notebooks/<chapter>.ipynb``, with the setup cell) filled with the outputs the page shows.
"""

from __future__ import annotations

import ast
import json
import re
import shutil
from html import escape as html_escape
from pathlib import Path
from typing import Any, Iterable

HIDE_INPUT = "hide-input"
#: calls that make a cell a set-up cell when everything else in it is an import (the chapters'
#: cell after the parameters: imports, the runner's parameter checks, the book style)
SETUP_CALLS = frozenset({"show_versions", "use_book_style", "set_theme", "filterwarnings",
                         "simplefilter", "set_option", "check_parameters"})
#: a run id of :func:`tokenbook.runner.new_run_id`
RUN_ID = re.compile(r"\b\d{8}T\d{6}\.\d{6}Z-[0-9a-f]{4}\b")
#: a missing value in a pandas HTML table: shown as an em dash
MISSING_CELL = re.compile(r"<td>(?:NaN|nan|<NA>|&lt;NA&gt;|None|NaT)</td>")
#: an execute_result that is only a value's repr nobody meant to show
STRAY_RESULT = re.compile(
    r"^\s*(\[?<[\w.]+[^>]* at 0x[0-9a-f]+>(, <[\w.]+[^>]* at 0x[0-9a-f]+>)*\]?"
    r"|<(Figure|Axes|matplotlib\.\w+)[^>]*>|\[?Text\(.*\)\]?|\w*Path\(.*\)"
    r"|<seaborn\.[^>]*>|None)\s*$", re.S)
#: one tqdm progress line: "<description>: 100%|█████| 30/30 [00:01<00:00, 25.1it/s]" (the
#: timing part optional: a page shows bars without it)
TQDM_LINE = re.compile(r"^(?P<desc>.*?):?\s*\d{1,3}%\|.*\|\s*\S+/\S+\s*(\[.*\])?\s*$")
#: a bar's elapsed, remaining time and rate, which are the build machine's, not the reader's
BAR_TIMING = re.compile(r"\s*\[\d+(?::\d+)+(?:<[\d:?]+)?(?:,\s*[^\]]*)?\]\s*$")
#: bars of loading and saving, not of the chapter's work (Hugging Face's "Loading weights",
#: "Writing model shards", ...): a page leaves them out (book builds also switch them off:
#: HF_HUB_DISABLE_PROGRESS_BARS)
LOADING_BARS = re.compile(r"^\s*(Loading weights|Loading checkpoint shards|Writing model shards"
                          r"|Fetching \d+ files|Downloading)\b")

CSS = """\
/* tokenbook: wide tables scroll inside the page instead of being clipped */
.bd-article .cell_output .output.text_html, .bd-article .cell_output .output_html,
.bd-article .pst-scrollable-table-container, .bd-article .table-wrapper {
  max-width: 100%; overflow-x: auto;
}
.bd-article .cell_output table { max-width: none; }
/* data frames: compact, so a tidy table of up to about ten short columns fits the column */
.bd-article .cell_output table.dataframe { font-size: 0.8em; }
.bd-article .cell_output table.dataframe th, .bd-article .cell_output table.dataframe td {
  padding: 0.2em 0.4em;
}
.bd-article table td { vertical-align: top; }
/* text tables (the scorecard) fit the column: long ids and names may break anywhere */
.bd-article table.table { width: 100%; }
.bd-article table.table code,
.bd-article table.table code span.pre { overflow-wrap: anywhere; white-space: normal; }
.bd-article table.table th, .bd-article table.table td { padding: 0.35em 0.5em; font-size: 0.92em; }
/* the API reference: long signatures and constants (a compiled regex) wrap inside the column */
.bd-article dl.py > dt, .bd-article dl.py > dt .pre {
  white-space: normal; overflow-wrap: anywhere;
}
/* figures never exceed the column; captions read as captions */
.bd-article figure img, .bd-article .cell_output img { max-width: 100%; height: auto; }
.bd-article figcaption { font-size: 0.92em; }
"""

MATHJAX_PARTS = ("tex-mml-chtml.js", "input", "output/chtml", "output/chtml.js", "ui", "a11y",
                 "sre", "adaptors")


# --------------------------------------------------------------------------------------------
# Reading a chapter
# --------------------------------------------------------------------------------------------
def is_setup_cell(source: str) -> bool:
    """Whether a code cell only imports and sets up (imports, ``show_versions()``,
    ``use_book_style()``, ``check_parameters(...)``, warning filters): at least one import and
    nothing else."""
    try:
        body = ast.parse(source).body
    except SyntaxError:
        return False
    imports = 0
    for node in body:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            imports += 1
            continue
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Call):
            func = node.value.func
            name = func.id if isinstance(func, ast.Name) else getattr(func, "attr", None)
            if name in SETUP_CALLS:
                continue
        return False
    return imports > 0


def tag_cells(nb) -> Any:
    """Add ``hide-input`` to the parameters cell and the set-up cells of ``nb`` (in place)."""
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        tags = list(cell.metadata.get("tags", []))
        if ("parameters" in tags or is_setup_cell(cell.source)) and HIDE_INPUT not in tags:
            cell.metadata["tags"] = tags + [HIDE_INPUT]
    return nb


def reads_chapter(text: str, **kwargs: Any):
    """The book's reader of a chapter ``.py`` (jupytext percent) with the page's cell tags."""
    import jupytext

    return tag_cells(jupytext.reads(text, fmt="py:percent"))


# --------------------------------------------------------------------------------------------
# Outputs
# --------------------------------------------------------------------------------------------
def clean_text(text: str, root: str | Path | None = None) -> str:
    """``text`` without the build machine's paths (``<root>/x`` → ``x``) and run ids."""
    if root is not None:
        for r in {str(Path(root)), str(Path(root).resolve())}:
            text = text.replace(r + "/", "").replace(r, ".")
    return RUN_ID.sub("<run id>", text)


def collapse_progress(text: str) -> str:
    """The progress bars of a stream output as a page shows them: one line per loop, in its
    final state, without the build machine's timings. Lines of the same bar (same description
    with digits ignored: ``epoch 1/40`` … ``epoch 40/40``, ``GRPO seed 0`` … ``GRPO seed 4``)
    keep only the last, in its place; loading bars (:data:`LOADING_BARS`) are dropped; the
    elapsed/remaining time and rate (``[27:38<00:00, 165.86s/it]``) are cut."""
    lines: list[str | None] = []
    last: dict[str, int] = {}
    for line in text.split("\n"):
        m = TQDM_LINE.match(line)
        if m is None:
            lines.append(line)
            continue
        if LOADING_BARS.match(line):
            continue
        key = re.sub(r"\d+", "#", m.group("desc")).strip()
        if key in last:
            lines[last[key]] = None
        last[key] = len(lines)
        lines.append(BAR_TIMING.sub("", line))
    return "\n".join(line for line in lines if line is not None)


def _join(value: Any) -> str:
    return "".join(value) if isinstance(value, list) else str(value)


def clean_outputs(outputs: Iterable[dict], root: str | Path | None = None) -> list[dict]:
    """The outputs a page shows (see the module docstring); stream texts are expected to be
    merged and ``\\r``-collapsed already (:func:`tokenbook.book.clean_stream_text`)."""
    kept = []
    for out in outputs:
        kind = out.get("output_type")
        if kind == "stream":
            out["text"] = collapse_progress(clean_text(_join(out.get("text", "")), root))
            if not out["text"].strip():
                continue
        elif kind in ("execute_result", "display_data"):
            data = out.get("data", {})
            plain = _join(data.get("text/plain", ""))
            if (kind == "execute_result" and set(data) <= {"text/plain"}
                    and STRAY_RESULT.match(plain)):
                continue
            for mime in ("text/plain", "text/html", "text/markdown", "text/latex"):
                if mime in data:
                    data[mime] = clean_text(_join(data[mime]), root)
            if "text/html" in data:
                data["text/html"] = MISSING_CELL.sub("<td>—</td>", data["text/html"])
        elif kind == "error":
            out["traceback"] = [clean_text(t, root) for t in out.get("traceback", [])]
            out["evalue"] = clean_text(str(out.get("evalue", "")), root)
        kept.append(out)
    return kept


# --------------------------------------------------------------------------------------------
# Sphinx: static files and downloads
# --------------------------------------------------------------------------------------------
def mathjax_source() -> Path | None:
    """MathJax 3's ``es5`` folder shipped by ``django-static-mathjax`` (None if missing)."""
    try:
        import mathjax
    except ImportError:
        return None
    folder = Path(mathjax.__file__).parent / "static" / "mathjax" / "es5"
    return folder if (folder / "tex-mml-chtml.js").exists() else None


def stage_static(folder: str | Path) -> Path:
    """Write the book's own static files into ``folder`` (``tokenbook.css`` and, when the
    package is installed, ``mathjax/``); returns ``folder``."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    css = folder / "tokenbook.css"
    if not css.exists() or css.read_text() != CSS:
        css.write_text(CSS)
    src = mathjax_source()
    if src is not None:
        dest = folder / "mathjax"
        stamp = dest / ".source"
        if not stamp.exists() or stamp.read_text() != str(src):
            shutil.rmtree(dest, ignore_errors=True)
            for part in MATHJAX_PARTS:
                s, d = src / part, dest / part
                d.parent.mkdir(parents=True, exist_ok=True)
                if s.is_dir():
                    shutil.copytree(s, d)
                elif s.exists():
                    shutil.copy2(s, d)
            licence = src.parent / "LICENSE"
            if licence.exists():
                shutil.copy2(licence, dest / "LICENSE")
            stamp.write_text(str(src))
    return folder


def chapter_download(twin: Path | None, executed: Path) -> dict:
    """The ``.ipynb`` a chapter page offers: the runnable twin (setup cell included) with the
    page's outputs copied into its code cells in order; the executed notebook alone when the
    twin is missing or out of step with it."""
    import nbformat

    done = nbformat.read(executed, as_version=4)
    if twin is None or not twin.exists():
        return done
    nb = nbformat.read(twin, as_version=4)
    code = [c for c in nb.cells if c.cell_type == "code"
            and "tokenbook-setup" not in c.metadata.get("tags", [])]
    done_code = [c for c in done.cells if c.cell_type == "code"]
    if len(code) != len(done_code):
        return done
    for cell, src in zip(code, done_code):
        cell.outputs = src.get("outputs", [])
        cell.execution_count = src.get("execution_count")
    return nb


def _static_dir(app) -> Path:
    return Path(app.outdir).parent / ".tokenbook_static"


def _on_config(app, config) -> None:
    folder = stage_static(_static_dir(app))
    config.html_static_path = [*config.html_static_path, str(folder)]
    if (folder / "mathjax" / "tex-mml-chtml.js").exists():
        config.mathjax_path = "mathjax/tex-mml-chtml.js"  # relative to _static: offline


def executed_page(app, pagename: str):
    """The chapter ``pagename`` as its page shows it (read by :func:`reads_chapter`, outputs
    from the book's jupyter-cache), or None when it is not a cached ``.py`` chapter."""
    source = Path(app.srcdir) / f"{pagename}.py"
    cache_path = getattr(app.config, "nb_execution_cache_path", "") or ""
    if not source.exists() or not cache_path:
        return None
    cache_path = Path(cache_path)
    if not cache_path.is_absolute():
        cache_path = Path(app.srcdir) / cache_path
    if not cache_path.exists():
        return None
    from jupyter_cache import get_cache

    try:
        _, merged = get_cache(str(cache_path)).merge_match_into_notebook(
            reads_chapter(source.read_text()))
    except KeyError:  # not in the cache
        return None
    return merged


def _on_page(app, pagename, templatename, context, doctree) -> None:
    """Offer ``_sources/<page>.ipynb`` on chapter pages (sphinx-book-theme's download menu
    shows it when ``ipynb_source`` is set; it does so itself only for .md notebooks): the
    runnable twin with the page's outputs; on an exercise page its student edition (what its
    launch buttons open)."""
    if not pagename.startswith("notebooks/") or context.get("ipynb_source"):
        return
    import nbformat

    if pagename.startswith("notebooks/exercises/"):  # the student edition, as launched
        student = Path(app.srcdir) / f"{pagename}.ipynb"
        if student.exists():
            out = Path(app.outdir) / "_sources" / f"{pagename}.ipynb"
            out.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(student, out)
            context["ipynb_source"] = f"{pagename}.ipynb"
        return
    executed = executed_page(app, pagename)
    if executed is None:
        return
    out = Path(app.outdir) / "_sources" / f"{pagename}.ipynb"
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(f".{out.name}.executed")
    tmp.write_text(nbformat.writes(executed))
    try:
        nb = chapter_download(Path(app.srcdir) / f"{pagename}.ipynb", tmp)
    finally:
        tmp.unlink()
    for cell in nb.cells:  # the page's tags stay with the page
        tags = [t for t in cell.metadata.get("tags", []) if t != HIDE_INPUT]
        if tags:
            cell.metadata["tags"] = tags
        else:
            cell.metadata.pop("tags", None)
    out.write_text(nbformat.writes(nb) + "\n")
    context["ipynb_source"] = f"{pagename}.ipynb"


CITATION_MD = Path("_build") / "citation.md"


def citation_markdown(root: str | Path) -> str:
    """The front page's "how to cite" text from ``<root>/CITATION.cff``: a sentence and a
    BibTeX entry (the repository address is ``_config.yml``'s, which the .cff must equal)."""
    import yaml

    from .ipynb import repository_url

    root = Path(root)
    cff = root / "CITATION.cff"
    if not cff.exists():
        return "*This book has no `CITATION.cff` yet.*\n"
    data = yaml.safe_load(cff.read_text()) or {}
    url = repository_url(root)
    authors = " and ".join(a.get("name") or " ".join(filter(None, (a.get("given-names"),
                                                                   a.get("family-names"))))
                           for a in data.get("authors", []))
    year = str(data.get("date-released", ""))[:4]
    title, version = data.get("title", ""), data.get("version", "")
    bib_author = "{" + authors + "}" if " " in authors and "," not in authors else authors
    return "\n".join([
        f"{authors} ({year}). *{title}* (version {version}). <{url}>", "",
        "```bibtex",
        "@software{tokenbook,",
        f"  author  = {{{bib_author}}},",
        f"  title   = {{{title}}},",
        f"  year    = {{{year}}},",
        f"  version = {{{version}}},",
        f"  url     = {{{url}}}",
        "}",
        "```", "",
        f"The same in `CITATION.cff` at the root of the [repository]({url}). Please also cite "
        f"the papers whose analyses a chapter reproduces (see the "
        f"{{doc}}`bibliography </book/bibliography>`).", ""])


def write_citation(root: str | Path) -> Path:
    """(Re)write ``<root>/_build/citation.md`` (included by the front page)."""
    out = Path(root) / CITATION_MD
    text = citation_markdown(root)
    out.parent.mkdir(parents=True, exist_ok=True)
    if not out.exists() or out.read_text() != text:
        out.write_text(text)
    return out


def setup(app) -> None:
    """Connect the page helpers to a Sphinx app (called by :func:`tokenbook.book.setup`)."""
    app.connect("builder-inited", lambda app_: write_citation(app_.srcdir))
    app.connect("config-inited", _on_config)
    app.connect("html-page-context", _on_page, priority=450)
    app.add_css_file("tokenbook.css")


# --------------------------------------------------------------------------------------------
# Claims at a glance: the summary box, the compact claims table (chapters and scorecard)
# --------------------------------------------------------------------------------------------
#: verdicts in the order a summary counts them
TINY_ORDER = ("detected", "not detected", "not specific", "not testable")
PAPER_ORDER = ("holds", "does not hold", "not testable")
#: badge colours (background, text): the verdict is written out, so no emoji font is needed
VERDICT_STYLE = {"detected": ("#d9f2d9", "#14532d"), "holds": ("#d9f2d9", "#14532d"),
                 "not detected": ("#f8d7da", "#7f1d1d"), "does not hold": ("#f8d7da", "#7f1d1d"),
                 "not specific": ("#fff3cd", "#713f12"), "not testable": ("#e5e7eb", "#374151")}
#: the compact table's layout: fixed columns that fit the page's content column at 1280 px
TABLE_STYLE = ("width:100%;max-width:100%;table-layout:fixed;border-collapse:collapse;"
               "font-size:0.9em")
CELL_STYLE = "padding:0.3em 0.45em;vertical-align:top;text-align:left;overflow-wrap:anywhere"


def _num(x: Any) -> float | None:
    try:
        v = float(x)
    except (TypeError, ValueError):
        return None
    return v if v == v and v not in (float("inf"), float("-inf")) else None


def _g(x: Any, digits: int = 3) -> str:
    v = _num(x)
    return "—" if v is None else f"{v:.{digits}g}"


def _ci(ci: Any) -> str:
    if not isinstance(ci, (list, tuple)) or len(ci) != 2:
        return ""
    lo, hi = _num(ci[0]), _num(ci[1])
    return "" if lo is None or hi is None else f" [{lo:.3g}, {hi:.3g}]"


def claim_row(claim: Any) -> dict:
    """One claim (a :class:`tokenbook.claims.Claim` or a ``claims.json`` row) as a flat dict
    of what the pages show, tolerant of both schemas: the current one (``on_value``,
    ``paired_effect``, ``n_root_seeds``, ``known_answer``, ``manipulation``, ``balance``,
    ``replication``,
    ``computed_by``) and the earlier one (``effect``, ``effect_ci``, ``effect_off``,
    ``n_seeds``); a missing key reads as None."""
    d = claim.to_dict() if hasattr(claim, "to_dict") else dict(claim)
    d = {k: None if isinstance(v, float) and v != v else v for k, v in d.items()}  # NaN: none
    get = d.get
    tiny = get("scale") == "tiny" or get("verdict") in ("detected", "not detected",
                                                        "not specific")
    n = get("n_root_seeds", get("n_seeds", get("n")))  # get("n"): an already flat row
    on = get("on_value", get("effect"))
    off = get("off_value", get("effect_off"))
    paired = get("paired_effect")
    if paired is None and _num(on) is not None and _num(off) is not None:
        paired = float(on) - float(off)  # earlier runs: the mean of the same seeds' differences
    return {
        "id": str(get("id", "")), "claim": str(get("claim", "") or ""),
        "paper": str(get("paper", "") or ""), "statistic": str(get("statistic", "") or ""),
        "expected": str(get("expected", "") or ""), "verdict": str(get("verdict", "") or ""),
        "note": str(get("note", "") or ""), "mechanism": str(get("mechanism", "") or ""),
        "scale": "tiny" if tiny else (get("scale") or "paper"),
        "n": int(n) if _num(n) is not None else None,
        "share_on": _num(get("share_on")), "share_off": _num(get("share_off")),
        "share_on_ci": get("share_on_ci"), "share_off_ci": get("share_off_ci"),
        "on_value": on, "on_ci": get("on_ci", get("effect_ci")),
        "off_value": off, "off_ci": get("off_ci"),
        "paired_effect": paired, "paired_ci": get("paired_ci"),
        "known_answer": get("known_answer"), "manipulation": get("manipulation"),
        "balance": get("balance"),
        "replication": _num(get("replication")), "computed_by": str(get("computed_by") or ""),
        "value": get("value"), "published": get("published"),
        "chapter": str(get("chapter", "") or ""),
    }


def verdict_counts(rows: Iterable[dict]) -> dict[str, int]:
    """``{verdict: count}`` over ``rows`` (:func:`claim_row` dicts), every verdict of the
    scales present listed (0 where none)."""
    rows = list(rows)
    counts: dict[str, int] = {}
    if any(r["scale"] == "tiny" for r in rows):
        counts.update({v: 0 for v in TINY_ORDER})
    if any(r["scale"] != "tiny" for r in rows):
        counts.update({v: 0 for v in PAPER_ORDER})
    for r in rows:
        counts[r["verdict"]] = counts.get(r["verdict"], 0) + 1
    return counts


def takeaway(counts: dict[str, int]) -> str:
    """One line on what a chapter shows, from its verdict counts."""
    total = sum(counts.values())
    untestable = counts.get("not testable", 0)
    testable = total - untestable
    if total == 0:
        return "No claims were checked."
    if testable == 0:
        return "No claim is testable at this scale: each claim's note says why."
    found = counts.get("detected", 0) + counts.get("holds", 0)
    tiny = any(v in counts for v in TINY_ORDER[:3])
    word = "detected" if tiny else "hold"
    if found == testable and testable == 1:
        text = ("The pipeline detects the one testable effect where it is planted, and not "
                "where it is switched off." if tiny else "The one testable claim holds.")
    elif found == testable:
        text = (f"The pipeline detects all {testable} testable effects where they are planted, "
                f"and not where they are switched off." if tiny else
                f"All {testable} testable claims hold.")
    else:
        parts = [f"{found} of {testable} testable claim{'s' * (testable != 1)} "
                 f"{word if testable != 1 or tiny else 'holds'}"]
        if counts.get("not specific"):
            parts.append(f"{counts['not specific']} also show with the mechanism off "
                         f"(not specific)")
        missed = counts.get("not detected", 0) + counts.get("does not hold", 0)
        if missed:
            parts.append(f"{missed} " + ("not detected" if tiny else "does not hold"
                                         if missed == 1 else "do not hold"))
        text = "; ".join(parts) + "."
    if untestable:
        text += (f" {untestable} {'is' if untestable == 1 else 'are'} not testable at this "
                 f"scale.")
    return text


def _esc(x: Any) -> str:
    return html_escape(str(x), quote=True)


def verdict_badge(verdict: str) -> str:
    """The verdict as a coloured badge (text, not an icon)."""
    bg, fg = VERDICT_STYLE.get(verdict, ("#e5e7eb", "#374151"))
    return (f'<span class="tb-verdict" style="background:{bg};color:{fg};padding:0.05em 0.4em;'
            f'border-radius:0.3em;white-space:nowrap">{_esc(verdict)}</span>')


def _seeds(share: float | None, n: int | None) -> str:
    if share is None or not n:
        return "—"
    return f"{round(share * n)}/{n}"


def _json_short(x: Any, limit: int = 120) -> str:
    text = x if isinstance(x, str) else json.dumps(x, ensure_ascii=False, default=str)
    return text if len(text) <= limit else text[:limit - 1] + "…"


def _details(r: dict) -> str:
    """The long fields of a claim, folded under its id."""
    lines = [f"<strong>{_esc(r['claim'])}</strong>"
             + (f" <em>({_esc(r['paper'])})</em>" if r["paper"] else "")]
    if r["statistic"]:
        lines.append(f"Statistic: {_esc(r['statistic'])}; expected {_esc(r['expected'])}")
    if r["scale"] == "tiny":
        if r["on_value"] is not None or r["off_value"] is not None:
            text = (f"On: {_g(r['on_value'])}{_ci(r['on_ci'])}; "
                    f"off: {_g(r['off_value'])}{_ci(r['off_ci'])}")
            if r["paired_effect"] is not None:
                text += f"; on − off: {_g(r['paired_effect'])}{_ci(r['paired_ci'])}"
            lines.append(_esc(text) + (" (mean over root seeds, 95% CI)" if r["n"] else ""))
        if r["share_on"] is not None:
            lines.append(_esc(f"Seeds holding: on {_seeds(r['share_on'], r['n'])}"
                              f"{_ci(r['share_on_ci'])}, off {_seeds(r['share_off'], r['n'])}"
                              f"{_ci(r['share_off_ci'])} (Wilson 95% CI)"))
        ka = r["known_answer"]
        if isinstance(ka, dict):
            lines.append(_esc(f"Known answer: on {_g(ka.get('on'))}, off {_g(ka.get('off'))}"
                              + (f" ({ka['how']})" if ka.get("how") else "")))
        mc = r["manipulation"]
        if isinstance(mc, dict):
            passed = mc.get("passed")
            text = ("Manipulation check: " + ("passed" if passed else "failed" if passed
                                              is not None else "—"))
            if mc.get("what"):
                text += f": {mc['what']}"
            if mc.get("values") is not None:
                text += f" ({_json_short(mc['values'])})"
            lines.append(_esc(text))
        bc = r["balance"]
        if isinstance(bc, dict):
            text = "Balance check: " + ("passed" if bc.get("passed") else "failed")
            text += f": {bc.get('what', '')} moves by at most {_g(bc.get('max_abs_difference'))}"
            text += f" between on and off (tolerance {_g(bc.get('tolerance'))})"
            lines.append(_esc(text))
        if r["replication"] is not None:
            lines.append(_esc(f"Replication: {r['replication']:.0%} chance of the same verdict "
                              f"on a new set of root seeds (simulated)"))
        if r["mechanism"]:
            lines.append("Mechanism: " + _esc(r["mechanism"]))
    elif r["published"] is not None:
        lines.append(_esc(f"Published: {_json_short(r['published'])}"))
    if r["note"]:
        lines.append("Note: " + _esc(r["note"]))
    if r["computed_by"]:
        lines.append(f"Computed by <code>{_esc(r['computed_by'])}</code>")
    return "".join(f'<div style="margin:0.2em 0">{ln}</div>' for ln in lines)


def _claim_cell(r: dict) -> str:
    return (f'<details class="tb-claim"><summary title="{_esc(r["claim"])}">'
            f'<code>{_esc(r["id"])}</code></summary>{_details(r)}</details>')


def _th(text: str, width: str) -> str:
    return f'<th style="{CELL_STYLE};width:{width}">{text}</th>'


def _td(text: str) -> str:
    return f'<td style="{CELL_STYLE}">{text}</td>'


def claims_table_html(claims: Iterable[Any], *, by_chapter: bool = False) -> str:
    """The compact claims table (HTML): one row per claim with its id (click it for the
    wording, statistic, values with intervals, known answer, checks and note), its verdict and,
    at tiny scale, the root seeds in which it holds with the mechanism on and off and the
    on − off effect; at paper scale the measured and the published value. Narrow enough for
    the page's content column at 1280 px (fixed layout, long ids wrap). Rows carry
    ``data-claim-id`` and ``data-verdict`` (read back by :func:`tokenbook.nbcheck`);
    ``by_chapter`` adds a heading row per chapter (rows need a ``chapter``)."""
    rows = [claim_row(c) for c in claims]
    out = []
    for scale in ("tiny", "paper"):
        part = [r for r in rows if (r["scale"] == "tiny") == (scale == "tiny")]
        if not part:
            continue
        if scale == "tiny":
            head = (_th("Claim", "44%") + _th("Verdict", "21%") + _th("Seeds, on", "11%")
                    + _th("Seeds, off", "11%") + _th("On − off", "13%"))
        else:
            head = (_th("Claim", "44%") + _th("Verdict", "21%") + _th("Measured", "17%")
                    + _th("Published", "18%"))
        body, chapter = [], None
        for r in part:
            if by_chapter and r["chapter"] != chapter:
                chapter = r["chapter"]
                body.append(f'<tr class="tb-chapter"><th colspan="5" style="{CELL_STYLE};'
                            f'border-bottom:1px solid #ccc">{_esc(chapter)}</th></tr>')
            cells = _td(_claim_cell(r)) + _td(verdict_badge(r["verdict"]))
            if scale == "tiny":
                cells += (_td(_seeds(r["share_on"], r["n"])) + _td(_seeds(r["share_off"], r["n"]))
                          + _td(_esc(_g(r["paired_effect"]))))
            else:
                measured = r["value"] if isinstance(r["value"], str) else _g(r["value"], 4)
                cells += _td(_esc(_json_short(measured, 40))) + _td(
                    _esc(_json_short(r["published"], 40)) if r["published"] is not None
                    else "—")
            body.append(f'<tr data-claim-id="{_esc(r["id"])}" data-verdict="{_esc(r["verdict"])}"'
                        f'>{cells}</tr>')
        out.append(f'<table class="tb-claims" style="{TABLE_STYLE}"><thead><tr>{head}</tr>'
                   f'</thead><tbody>{"".join(body)}</tbody></table>')
    return "".join(out)


def summary_table_html(summaries: Iterable[dict], links: dict[str, str] | None = None) -> str:
    """The per-chapter summary (HTML, fixed layout: it fits the column at 1280 px): chapter
    (linked where ``links`` has an ``href``), claims and the count of each verdict, with a
    row below saying what the chapter shows. ``summaries``:
    :func:`tokenbook.book.chapter_summaries`'s dicts."""
    summaries = list(summaries)
    verdicts = list(dict.fromkeys(v for s in summaries for v in s["counts"]))
    width = 60 // max(len(verdicts), 1)

    def th(text: str, pct: int) -> str:  # words wrap between, never inside
        return (f'<th style="{CELL_STYLE.replace("overflow-wrap:anywhere", "overflow-wrap:normal")}'
                f';width:{pct}%">{text}</th>')

    head = (th("Chapter", 28) + th("Claims", 100 - 28 - width * len(verdicts))
            + "".join(th(_esc(v.capitalize()), width) for v in verdicts))
    body = []
    for s in summaries:
        name = f"<code>{_esc(s['chapter'])}</code>"
        href = (links or {}).get(s["chapter"])
        cells = _td(f'<a href="{_esc(href)}">{name}</a>' if href else name) + _td(str(s["claims"]))
        cells += "".join(_td(str(s["counts"].get(v, 0))) for v in verdicts)
        body.append(f"<tr>{cells}</tr>")
        body.append(f'<tr class="tb-shows"><td colspan="{2 + len(verdicts)}" style="{CELL_STYLE};'
                    f'padding-top:0;border-bottom:1px solid #ddd"><em>What this chapter shows:'
                    f'</em> {_esc(s["shows"])}</td></tr>')
    return (f'<table class="tb-summary-table" style="{TABLE_STYLE}"><thead><tr>{head}</tr>'
            f'</thead><tbody>{"".join(body)}</tbody></table>')


def counts_text(counts: dict[str, int]) -> str:
    """``"3 detected, 1 not specific, 0 not detected, 2 not testable"``-style counts."""
    return ", ".join(f"{k} {v}" for v, k in counts.items())


def summary_html(claims: Iterable[Any], *, link: str | None = None) -> str:
    """A chapter's summary box: its claims counted by verdict and the one-line takeaway
    (:func:`takeaway`); ``link`` (an ``href``) points at the full claims table."""
    rows = [claim_row(c) for c in claims]
    counts = verdict_counts(rows)
    badges = " ".join(f"{verdict_badge(v)}&nbsp;{k}" for v, k in counts.items())
    more = f' <a href="{_esc(link)}">The claims table</a>.' if link else ""
    return ('<div class="tb-summary" style="border:1px solid #cbd5e1;border-left:4px solid '
            '#2563eb;border-radius:0.3em;padding:0.5em 0.8em;margin:0.8em 0">'
            f'<strong>At a glance: {len(rows)} claim{"s" * (len(rows) != 1)}</strong> '
            f'&nbsp;{badges}<div style="margin-top:0.3em">{_esc(takeaway(counts))}{more}</div>'
            '</div>')


class ClaimsTable:
    """What :func:`tokenbook.claims.report` shows: the summary box and the compact claims
    table as HTML (Jupyter, the book), a plain-text table elsewhere; ``frame`` is
    :func:`tokenbook.claims.claims_frame` of the same claims."""

    def __init__(self, claims: Iterable[Any]) -> None:
        self.rows = [claim_row(c) for c in claims]

    @property
    def frame(self):
        from .claims import claims_frame

        return claims_frame(self.rows)

    def _repr_html_(self) -> str:
        return summary_html(self.rows) + claims_table_html(self.rows)

    def __repr__(self) -> str:
        counts = verdict_counts(self.rows)
        width = max([len(r["id"]) for r in self.rows] + [5])
        lines = [f"{len(self.rows)} claims: {counts_text(counts)}. {takeaway(counts)}"]
        for r in self.rows:
            extra = (f"on {_seeds(r['share_on'], r['n'])}, off {_seeds(r['share_off'], r['n'])}"
                     if r["scale"] == "tiny" else f"measured {_g(r['value'], 4)}")
            lines.append(f"{r['id']:<{width}}  {r['verdict']:<13}  {extra}")
        return "\n".join(lines)
