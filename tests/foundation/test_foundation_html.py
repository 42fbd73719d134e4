"""The built pages, on a small book whose chapter does what the real ones do: figures with a
caption, a wide table, maths, 40 progress bars, printed run-folder paths, a bare savefig(...)
as a cell's last line. Built once (strictly, through tokenbook build) for all the checks."""

from __future__ import annotations

import hashlib
import re
import shutil
from pathlib import Path

import nbformat
import pytest

from tokenbook.book import pagecheck

from .conftest import DUMMY_CHAPTER, REPO, make_book

RICH = DUMMY_CHAPTER.replace('''# It checks one claim {cite}`gay2026uid` on a seeded random sample.
''', '''# It checks one claim {cite}`gay2026uid` on a seeded random sample: whether the mean
# $\\bar x = \\frac{1}{n}\\sum_i x_i$ is positive, where
#
# $$
# s^2 = \\frac{1}{n-1}\\sum_{i=1}^{n} (x_i - \\bar x)^2 .
# $$
''').replace('''seed = 0
n = 200
scale = "tiny"
shift = 0.5
fail = False
pause = 0.0''', '''seed: int = 0  # seeds the sample
n: int = 200  # sample size
scale: str = "tiny"  # "tiny" or "paper"
shift: float = 0.5  # mean of the sample (a.u.)
fail: bool = False  # raise in a cell
pause: float = 0.0  # seconds to sleep''').replace('''total = 0
for i in tqdm(range(300), desc="dummy loop", mininterval=0):
    total += i
''', '''total = 0
for epoch in range(40):
    for i in tqdm(range(20), desc=f"epoch {epoch + 1}/40", mininterval=0):
        total += i
print("outputs in", claims.run_dir())

# %%
import pandas as pd

wide = pd.DataFrame(np.arange(60).reshape(2, 30),
                    columns=[f"a rather long column name {i}" for i in range(30)])
wide.melt(var_name="column").head(6)  # a wide table is shown tidy: a page has no room for it
''').replace('''# %%
rng = np.random.default_rng(seed)''', '''# %% mystnb={"figure": {"name": "fig-dummy-hist", "caption": "Histogram of the seeded sample (a.u.)."}}
rng = np.random.default_rng(seed)''').replace('''plotting.savefig(fig, "histogram")
plt.show()''', '''plotting.savefig(fig, "histogram")''')


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """A book with the rich chapter and its .ipynb twin, built strictly; returns its root."""
    import tokenbook.book.build
    import tokenbook.book.runner
    from tokenbook.book.build import build
    from tokenbook.book.notebooks import sync

    assert RICH.count("mystnb=") == 1 and "plt.show()" not in RICH  # the edits applied
    root = make_book(tmp_path_factory.mktemp("html") / "book", RICH, name="rich")
    shutil.copy(REPO / "CITATION.cff", root / "CITATION.cff")
    sync(root)
    mp = pytest.MonkeyPatch()

    def fake(chapter):  # other engineers edit lib/ while this runs
        return hashlib.sha256(Path(chapter.path).read_bytes()).hexdigest()[:20]

    mp.setattr(tokenbook.book.runner, "source_hash", fake)
    mp.setattr(tokenbook.book.build, "source_hash", fake)
    try:
        assert build(root, quiet=True) == 0
    finally:
        mp.undo()
    return root


@pytest.mark.slow
@pytest.mark.book
def test_chapter_page_is_clean(built):
    html = built / "_build" / "html"
    page = (html / "notebooks" / "rich.html").read_text()
    text = pagecheck.page_text(html / "notebooks" / "rich.html")
    assert "Versions used for this run" in text
    assert "Path(" not in text and str(built) not in text  # no savefig return value, no paths
    assert "outputs in _build/runs/rich/<run id>" in text  # printed path made relative
    assert not pagecheck.RUN_ID.search(text)
    assert text.count("epoch 40/40: 100%") == 1 and "epoch 39/40" not in text  # final state
    assert "IProgress" not in text
    assert re.search(r'class="[^"]*tag_parameters[^"]*tag_hide-input', page)  # collapsed
    assert page.count("tag_hide-input") == 2  # parameters + the import/show_versions cell
    assert "Histogram of the seeded sample" in page and "<figcaption" in page
    assert pagecheck.text_problems(html, built) == []


@pytest.mark.slow
@pytest.mark.book
def test_front_page_says_how_to_cite_and_how_to_run_elsewhere(built):
    from tokenbook.book.ipynb import repository_url

    intro = pagecheck.page_text(built / "_build" / "html" / "book" / "intro.html")
    assert "How to cite" in intro and "@software{tokenbook," in intro
    assert repository_url(built) in intro
    assert "papermill --help-notebook" in intro and "Colab" in intro


@pytest.mark.slow
@pytest.mark.book
def test_offline_mathjax_table_css_and_downloads(built):
    html = built / "_build" / "html"
    page = (html / "notebooks" / "rich.html").read_text()
    assert "_static/mathjax/tex-mml-chtml.js" in page and "cdn.jsdelivr" not in page
    assert (html / "_static" / "mathjax" / "tex-mml-chtml.js").exists()
    assert "_static/tokenbook.css" in page and (html / "_static" / "tokenbook.css").exists()
    # launch buttons open the .ipynb twin; the download menu offers the .ipynb
    assert "colab.research.google.com/github/tokenbook/tokenbook/blob/main/notebooks/rich.ipynb" \
        in page
    assert "_sources/notebooks/rich.ipynb" in page
    nb = nbformat.read(html / "_sources" / "notebooks" / "rich.ipynb", as_version=4)
    code = [c for c in nb.cells if c.cell_type == "code"]
    assert "tokenbook-setup" in code[0].metadata["tags"]  # runnable where tokenbook is missing
    assert any("image/png" in o.get("data", {}) for c in code for o in c.outputs)


@pytest.mark.slow
@pytest.mark.book
def test_pages_in_a_headless_browser(built):
    chromium = pagecheck.find_chromium()
    if chromium is None:
        pytest.skip("no Chromium: `apt-get install -y chromium` (.ci/run installs it)")
    problems, results = pagecheck.browser_problems(built / "_build" / "html", chromium)
    assert problems == [], problems
    rich = results["notebooks/rich.html"]
    assert rich["mathjax"] and rich["typeset"] >= 2 and not rich["raw_math"]  # both formulas
    assert not rich["uncaptioned"] and not rich["overflowing"]
    assert rich["page_width"] <= rich["window_width"]  # no sideways scrolling at 1280 px
    # the chapter opens with its summary box, linking to its claims table; the front page
    # opens with the per-chapter summary and the compact scorecard
    page = (built / "_build" / "html" / "notebooks" / "rich.html").read_text()
    assert page.index("At a glance: 2 claims") < page.index("<figure")
    intro = (built / "_build" / "html" / "book" / "intro.html").read_text()
    intro = intro[intro.index('<article'):]  # the page's text, not its side bars
    assert intro.index("What this chapter shows") < intro.index("How to cite")
    assert 'data-claim-id="' in intro and "<details" in intro


@pytest.mark.slow
def test_browser_check_finds_what_it_looks_for(built, tmp_path):
    """The checks can fail: a figure without a caption, a clipped table, maths left raw."""
    chromium = pagecheck.find_chromium()
    if chromium is None:
        pytest.skip("no Chromium: `apt-get install -y chromium` (.ci/run installs it)")
    import shutil

    html = tmp_path / "html"
    shutil.copytree(built / "_build" / "html", html)
    page = html / "notebooks" / "rich.html"
    text = page.read_text()
    text = text.replace("<figcaption", "<div").replace("</figcaption>", "</div>")
    text = text.replace("tex-mml-chtml.js", "missing.js")
    text = text.replace("</article>", '<table style="width:3000px"><tr><td>wide</td></tr>'
                        '</table><div style="overflow-x:auto"><table style="width:2000px"><tr>'
                        "<td>scrolls</td></tr></table></div></article>", 1)
    page.write_text(text.replace("</p>", " /home/someone/book/_build/x.png</p>", 1))
    # the compact claims table with the book's longest ids and every field fits the column
    from tokenbook.scorecard import claims_table_html, summary_html

    ids = ["image-plus-discourse-smooths-further", "template-less-under-grpo@hidden48x2",
           "peer-masking-same-high-entropy", "crosslingual-transfer-cm"]
    rows = [{"id": i, "claim": "a claim in words " * 8, "statistic": "a statistic (nats)",
             "expected": "> 0", "verdict": v, "scale": "tiny", "share_on": 0.8,
             "share_off": 0.2, "n_root_seeds": 5, "paired_effect": -0.123456,
             "paired_ci": [-0.2, -0.1], "note": "a note " * 30, "chapter": "a_chapter"}
            for i, v in zip(ids, ["detected", "not detected", "not specific", "not testable"])]
    compact = summary_html(rows) + claims_table_html(rows, by_chapter=True)
    compact = compact.replace("<details ", "<details open ")  # unfolded too
    other = html / "book" / "intro.html"
    other.write_text(other.read_text().replace("</article>", compact + "</article>", 1))
    problems, results = pagecheck.browser_problems(html, chromium,
                                                   only=["notebooks/rich.html", "book/intro.html"])
    assert not results["book/intro.html"]["overflowing"], problems
    joined = "\n".join(problems)
    assert "figure without a caption" in joined
    assert "table overflows the page" in joined
    assert "px column): scrolls" in joined  # a scrolling container does not excuse it
    assert "maths not rendered" in joined
    assert any("absolute path" in p for p in pagecheck.text_problems(html))
