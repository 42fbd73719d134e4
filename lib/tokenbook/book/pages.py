"""What a chapter page shows: how the book reads a chapter, which outputs it keeps, its assets.

* :func:`reads_chapter` is the book's reader of ``notebooks/<chapter>.py`` (``_config.yml``,
  ``nb_custom_formats``): jupytext's percent reader, plus a ``hide-input`` tag on the
  parameters cell and on set-up cells (imports, ``show_versions()``, ``use_book_style()``),
  so their code is collapsed and only their output shows. The ``.py`` files are not edited.
* :func:`clean_outputs` is applied to the executed outputs the book shows (by
  :func:`tokenbook.book.build.prime_jupyter_cache`): no stray return values (``PosixPath(...)``,
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
import re
import shutil
from pathlib import Path
from typing import Any, Iterable

import yaml

from tokenbook.book.ipynb import repository_url

HIDE_INPUT = "hide-input"
#: calls that make a cell a set-up cell when everything else in it is an import (the chapters'
#: cell after the parameters: imports, the runner's parameter checks, the book style)
SETUP_CALLS = frozenset({"show_versions", "use_book_style", "set_theme", "filterwarnings",
                         "simplefilter", "set_option", "check_parameters"})
#: a run id of :func:`tokenbook.book.runner.new_run_id`
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
    merged and ``\\r``-collapsed already (:func:`tokenbook.book.build.clean_stream_text`)."""
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
    """Connect the page helpers to a Sphinx app (called by :func:`tokenbook.book.build.setup`)."""
    app.connect("builder-inited", lambda app_: write_citation(app_.srcdir))
    app.connect("config-inited", _on_config)
    app.connect("html-page-context", _on_page, priority=450)
    app.add_css_file("tokenbook.css")
