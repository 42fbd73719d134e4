"""Checks of the built HTML book, as a reader's browser shows it.

:func:`text_problems` reads every page's text (no browser): no absolute path of the build
machine, no local run id, no Python traceback, no stray ``PosixPath(...)``, no MathJax from a
CDN; every launch (Colab, Binder) and ``.ipynb`` download link opens a notebook the
repository holds (:func:`link_problems`); and each cell's stream output (:func:`stream_problems`): no half-finished progress bar, no
bar showing the build machine's timings, no figure legibility warning, at most
:data:`MAX_STREAM_LINES` lines. :func:`browser_problems` renders every page in headless Chromium
at 1280 px (Debian's ``chromium``; found by :func:`find_chromium`) and checks, after MathJax
has run: every figure in the article has a non-empty caption, no table is wider than the
article column (a scrolling container does not excuse it: the right-hand columns would be off
the page), the page does not scroll sideways, and every maths element was typeset (MathJax
loaded from the book itself, offline).

``python -m tokenbook.book.pagecheck _build/html [--root ROOT] [--no-browser]`` prints the problems
and exits 1 if there are any (the publishing workflow runs it before deploying).
"""

from __future__ import annotations

import argparse
import html as html_lib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from html.parser import HTMLParser
from pathlib import Path
from typing import Iterable

from tokenbook.book.ipynb import repository_url

#: absolute paths that only exist on a build machine
ABSOLUTE_PATH = re.compile(r"(?<![\w.:/])/(?:home|tmp|work|root|Users|private|var/folders)"
                           r"/[\w.\-/]+")
RUN_ID = re.compile(r"\b\d{8}T\d{6}\.\d{6}Z-[0-9a-f]{4}\b")
TRACEBACK = re.compile(r"Traceback \(most recent call last\)|\w+Path\('/")
MATHJAX_CDN = re.compile(r"<script[^>]+src=\"https?://[^\"]*mathjax", re.I)
#: a tqdm line: "desc: 40%|####      | 2/5 …"; group n, total
BAR = re.compile(r"\d{1,3}%\|[^|\n]*\|\s*(?P<n>\d+)/(?P<total>\d+)")
#: a bar's elapsed/remaining time and rate: "[27:38<00:00, 165.86s/it]"
BAR_TIMING = re.compile(r"\[\d+(?::\d+)+<[\d:?]+(?:,\s*[^\]]*)?\]")
#: the warning of tokenbook.plotting.savefig (a figure whose text is too small on the page)
LEGIBILITY = re.compile(r"smallest text appears at [\d.]+ pt")
#: most lines of stream output (stdout and stderr together) one cell may show
MAX_STREAM_LINES = 8
SKIP = ("_static", "_sources", "_images", "genindex.html", "search.html")
RESULT_ID = "tokenbook-pagecheck"

CHECK_JS = """
<script>
(function () {
  function run() {
    var article = document.querySelector('.bd-article') || document.body;
    var box = article.getBoundingClientRect();
    var res = {uncaptioned: [], overflowing: [], raw_math: [], typeset: 0,
               mathjax: !!(window.MathJax && window.MathJax.startup)};
    article.querySelectorAll('img').forEach(function (img) {
      if (!img.closest('.cell_output') && !img.closest('figure')) return;
      var fig = img.closest('figure');
      var cap = fig && fig.querySelector('figcaption');
      if (!cap || !cap.textContent.trim()) {
        res.uncaptioned.push((img.getAttribute('alt') || '') + ' ' +
                             (img.getAttribute('src') || '').slice(-48));
      }
    });
    // a table wider than the content column fails, even inside a scrolling container: its
    // right-hand columns (the verdicts) would be off the page
    article.querySelectorAll('table').forEach(function (t, i) {
      var r = t.getBoundingClientRect();
      if (r.width <= box.width + 1 && r.right <= box.right + 1) return;
      res.overflowing.push('table ' + i + ' (' + Math.round(r.width) + ' px in a ' +
                           Math.round(box.width) + ' px column): ' +
                           (t.textContent || '').trim().replace(/\\s+/g, ' ').slice(0, 60));
    });
    res.page_width = document.documentElement.scrollWidth;
    res.window_width = window.innerWidth;
    article.querySelectorAll('.math').forEach(function (m) {
      if (m.querySelector('mjx-container')) res.typeset++;
      else res.raw_math.push((m.textContent || '').trim().slice(0, 60));
    });
    var pre = document.createElement('pre');
    pre.id = '%s';
    pre.textContent = JSON.stringify(res);
    document.body.appendChild(pre);
  }
  window.addEventListener('load', function () {
    var mj = window.MathJax;
    if (mj && mj.startup && mj.startup.promise) mj.startup.promise.then(run, run);
    else run();
  });
})();
</script>
""" % RESULT_ID


class _Text(HTMLParser):
    """The visible text of a page (scripts and styles left out)."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.parts: list[str] = []
        self._skip = 0

    def handle_starttag(self, tag, attrs):
        if tag in ("script", "style"):
            self._skip += 1

    def handle_endtag(self, tag):
        if tag in ("script", "style") and self._skip:
            self._skip -= 1

    def handle_data(self, data):
        if not self._skip:
            self.parts.append(data)


def pages(html_dir: str | Path) -> list[Path]:
    """The book's content pages under ``html_dir``."""
    html_dir = Path(html_dir)
    return sorted(p for p in html_dir.rglob("*.html")
                  if not any(part in SKIP for part in p.relative_to(html_dir).parts))


def page_text(path: str | Path) -> str:
    parser = _Text()
    parser.feed(Path(path).read_text(errors="replace"))
    return html_lib.unescape("".join(parser.parts))


# The API reference (autodoc, book/api.md and its pages book/api/*.md): its examples are
# documentation, not a chapter's outputs.
def _is_reference(rel: str) -> bool:
    return rel == "book/api.html" or rel.startswith("book/api/")


def text_problems(html_dir: str | Path, root: str | Path | None = None) -> list[str]:
    """Problems found in the pages' text: build paths, run ids, tracebacks, CDN MathJax."""
    html_dir = Path(html_dir)
    roots = {str(Path(root)), str(Path(root).resolve())} if root is not None else set()
    problems = []
    for page in pages(html_dir):
        rel = page.relative_to(html_dir)
        text = page_text(page)
        for r in roots:
            if r in text:
                problems.append(f"{rel}: shows the build folder {r!r}")
        checks = [(ABSOLUTE_PATH, "an absolute path"), (RUN_ID, "a run id"),
                  (TRACEBACK, "a traceback or a path object")]
        if _is_reference(rel.as_posix()):  # docstrings show a run id's format and
            checks = checks[:1]                # doctests the exceptions a bad input raises
        for pattern, what in checks:
            m = pattern.search(text)
            if m:
                context = text[max(0, m.start() - 40):m.end() + 20].replace("\n", " ")
                problems.append(f"{rel}: shows {what}: …{context}…")
        raw = page.read_text(errors="replace")
        if not _is_reference(rel.as_posix()):
            for i, stream in enumerate(stream_outputs(raw)):
                problems += [f"{rel}: output {i + 1} shows {p}" for p in stream_problems(stream)]
        if MATHJAX_CDN.search(raw):
            problems.append(f"{rel}: loads MathJax from the web (the offline book shows raw TeX)")
    return problems


_CELL = re.compile(r'<div class="cell(?: [^"]*)? docutils container')
_STREAM = re.compile(r'<div class="output (?:stream|stderr)[^"]*"[^>]*>\s*<div class="highlight">'
                     r'\s*<pre>(.*?)</pre>', re.S)


def stream_outputs(page_html: str) -> list[str]:
    """The stream outputs (stdout and stderr together) of each code cell of a page's HTML, as
    text: one string per cell that has any."""
    out = []
    for cell in _CELL.split(page_html)[1:]:
        texts = [html_lib.unescape(re.sub(r"<[^>]+>", "", m)) for m in _STREAM.findall(cell)]
        if texts:
            out.append("\n".join(t.strip("\n") for t in texts))
    return out


def stream_problems(text: str) -> list[str]:
    """What is wrong with one cell's stream output on a page: a half-finished progress bar, a
    bar showing the build machine's timings, a figure legibility warning, or more than
    :data:`MAX_STREAM_LINES` lines."""
    problems = []
    for m in BAR.finditer(text):
        if int(m["n"]) < int(m["total"]):
            line = text[text.rfind("\n", 0, m.start()) + 1:m.end()]
            problems.append(f"a half-finished progress bar: {line.strip()[:80]}")
    m = BAR_TIMING.search(text)
    if m:
        problems.append(f"a progress bar with the build machine's timings: {m.group(0)}")
    m = LEGIBILITY.search(text)
    if m:
        problems.append(f"a figure legibility warning: …{m.group(0)}…")
    lines = [ln for ln in text.split("\n") if ln.strip()]
    if len(lines) > MAX_STREAM_LINES:
        problems.append(f"{len(lines)} lines of stream output in one cell (at most "
                        f"{MAX_STREAM_LINES}): {lines[0][:60]!r} …")
    return problems


_HREF = re.compile(r'href="([^"]+)"')
_COLAB = re.compile(r"colab\.research\.google\.com/github/([^/]+)/([^/]+)/blob/([^/]+)/([^\"?#]+)")
_BINDER = re.compile(r"/v2/gh/([^/]+)/([^/]+)/([^?\"]+)\?urlpath=(?:lab/tree|tree)/([^\"&#]+)")


def launch_links(html_dir: str | Path) -> list[tuple[str, str, str]]:
    """Every launch (Colab, Binder) and ``.ipynb`` download link of the book's pages:
    ``(page, kind, target)``: for launch links ``target`` is ``org/repo@branch:path``, for
    downloads the file's path relative to ``html_dir``."""
    html_dir = Path(html_dir)
    out = []
    for page in pages(html_dir):
        rel = page.relative_to(html_dir)
        for href in map(html_lib.unescape, _HREF.findall(page.read_text(errors="replace"))):
            m = _COLAB.search(href)
            if m:
                out.append((str(rel), "colab", f"{m[1]}/{m[2]}@{m[3]}:{m[4]}"))
                continue
            m = _BINDER.search(href)
            if m:
                out.append((str(rel), "binder", f"{m[1]}/{m[2]}@{m[3]}:{m[4]}"))
                continue
            if href.endswith(".ipynb") and "_sources/" in href and "://" not in href:
                out.append((str(rel), "download",
                            (page.parent / href).resolve().relative_to(html_dir.resolve())
                            .as_posix()))
    return out


def link_problems(html_dir: str | Path, root: str | Path) -> list[str]:
    """Launch and download links that lead nowhere: a Colab or Binder link must name the
    repository of ``_config.yml`` and a notebook (``.ipynb``) the repository holds (a file
    under ``root`` that git does not ignore); a download must exist in the built book."""
    html_dir, root = Path(html_dir), Path(root)
    url = repository_url(root)
    owner_repo = "/".join(url.rstrip("/").split("/")[-2:])
    problems = []
    for page, kind, target in launch_links(html_dir):
        if kind == "download":
            if not (html_dir / target).exists():
                problems.append(f"{page}: download link to a missing file {target}")
            continue
        repo, path = target.split("@", 1)[0], target.split(":", 1)[1]
        if repo != owner_repo:
            problems.append(f"{page}: {kind} link to {repo}, not {owner_repo} (_config.yml)")
        if not path.endswith(".ipynb"):
            problems.append(f"{page}: {kind} opens {path}, not a notebook")
        elif not (root / path).exists() or _ignored(root, path):
            problems.append(f"{page}: {kind} opens {path}, which the repository does not hold")
    return problems


def _ignored(root: Path, path: str) -> bool:
    try:
        res = subprocess.run(["git", "-C", str(root), "check-ignore", "-q", path],
                             capture_output=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return res.returncode == 0


def find_chromium() -> str | None:
    """A headless-capable Chromium: ``$CHROMIUM``, else ``chromium``/``chromium-browser``/
    ``google-chrome`` on the PATH."""
    if os.environ.get("CHROMIUM"):
        return os.environ["CHROMIUM"]
    for name in ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable"):
        found = shutil.which(name)
        if found:
            return found
    return None


def render(page: Path, chromium: str, *, width: int = 1280, timeout_s: float = 90) -> dict:
    """Render ``page`` (a copy already holding :data:`CHECK_JS`) and return the check's
    result (``{"error": ...}`` when the browser produced none)."""
    with tempfile.TemporaryDirectory(prefix="tokenbook-chromium-") as profile:
        cmd = [chromium, "--headless", "--no-sandbox", "--disable-gpu",
               "--disable-dev-shm-usage", "--no-first-run", "--allow-file-access-from-files",
               f"--user-data-dir={profile}", f"--window-size={width},1000",
               "--virtual-time-budget=10000", "--dump-dom", page.as_uri()]
        try:
            res = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s)
        except subprocess.TimeoutExpired:
            return {"error": f"chromium took more than {timeout_s:.0f} s"}
    m = re.search(rf"<pre id=\"{RESULT_ID}\"[^>]*>(.*?)</pre>", res.stdout, re.S)
    if not m:
        return {"error": f"no result (exit {res.returncode}): {res.stderr.strip()[-300:]}"}
    return json.loads(html_lib.unescape(m.group(1)))


def browser_problems(html_dir: str | Path, chromium: str | None = None, *,
                     only: Iterable[str] | None = None) -> tuple[list[str], dict]:
    """Render every page (or the pages whose relative path is in ``only``) in headless
    Chromium; returns (problems, {page: result}). The pages are checked in a temporary copy
    of the book; the book itself is not touched."""
    chromium = chromium or find_chromium()
    if chromium is None:
        raise FileNotFoundError("no Chromium found: install Debian's `chromium` (apt-get "
                                "install -y chromium) or set $CHROMIUM")
    html_dir = Path(html_dir)
    problems: list[str] = []
    results: dict = {}
    with tempfile.TemporaryDirectory(prefix="tokenbook-pagecheck-") as tmp:
        copy = Path(tmp) / "html"
        shutil.copytree(html_dir, copy)
        for page in pages(copy):
            rel = str(page.relative_to(copy))
            if only is not None and rel not in set(only):
                continue
            text = page.read_text(errors="replace")
            page.write_text(text.replace("</body>", CHECK_JS + "</body>", 1))
            res = results[rel] = render(page, chromium)
            if "error" in res:
                problems.append(f"{rel}: {res['error']}")
                continue
            problems += [f"{rel}: figure without a caption: {x}" for x in res["uncaptioned"]]
            problems += [f"{rel}: table overflows the page: {x}" for x in res["overflowing"]]
            if res.get("page_width", 0) > res.get("window_width", 1e9) + 1:
                problems.append(f"{rel}: the page scrolls sideways at {res['window_width']} px "
                                f"({res['page_width']} px wide)")
            problems += [f"{rel}: maths not rendered: {x}" for x in res["raw_math"]]
            if (res["raw_math"] or res["typeset"]) and not res["mathjax"]:
                problems.append(f"{rel}: has maths but MathJax did not load")
    return problems, results


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tokenbook.book.pagecheck",
                                     description="Check the built HTML book.")
    parser.add_argument("html_dir", nargs="?", default="_build/html")
    parser.add_argument("--root", default=None,
                        help="the book's root, whose path must not appear (default: cwd)")
    parser.add_argument("--no-browser", action="store_true",
                        help="only the text checks (no Chromium)")
    args = parser.parse_args(argv)
    html_dir = Path(args.html_dir)
    if not (html_dir / "index.html").exists():
        print(f"{html_dir}/index.html is missing: build the book first (make book)",
              file=sys.stderr)
        return 2
    problems = text_problems(html_dir, args.root or Path.cwd())
    problems += link_problems(html_dir, args.root or Path.cwd())
    if not args.no_browser:
        found, _ = browser_problems(html_dir)
        problems += found
    for p in problems:
        print(p)
    print(f"{len(pages(html_dir))} pages checked, {len(problems)} problems")
    return 1 if problems else 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
