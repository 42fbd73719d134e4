"""One figure style for the whole book, and saving figures into the run folder.

Call :func:`use_book_style` once at the top of a chapter (it calls ``seaborn.set_theme``);
:func:`savefig` writes a figure as PNG into ``<run folder>/figures/``
(:func:`tokenbook.run_folder.run_dir`, where ``claims.json`` goes too; the runner collects it)
and returns the path, which displays as nothing when it is a cell's last expression (a page
must not show the build machine's paths). Never call ``matplotlib.use("Agg")`` in a notebook:
the inline backend must stay.

Readability: the book's page shows a figure at most :data:`PAGE_WIDTH_PX` CSS pixels wide, so a
figure wider than that is shrunk and its text with it. :func:`rendered_font_pt` says how large
the smallest text of a figure appears on the page; :func:`savefig` warns below
:data:`MIN_FONT_PT` (9 pt). :func:`figsize` gives a size at which the theme's fonts stay
readable.
"""

from __future__ import annotations

import re
import warnings
from pathlib import Path

import matplotlib.pyplot as plt

from tokenbook.run_folder import run_dir

#: colour per condition, shared by the grounded chapters (U text-only, P image, D discourse)
CONDITION_COLOURS = {"U": "#7f7f7f", "P": "#1f77b4", "D": "#2ca02c", "PD": "#d62728",
                     "P+D": "#d62728"}

#: width of the book's content column (CSS px) a figure is scaled down to (sphinx-book-theme)
PAGE_WIDTH_PX = 760.0
#: smallest font size (pt, as rendered on the page) a figure may use
MIN_FONT_PT = 9.0
#: the default figure width (inches): at it, text of N pt renders at about N pt on the page
BASE_WIDTH_IN = 7.0

#: font sizes (pt) of the book theme at BASE_WIDTH_IN
FONT_SIZES = {"font.size": 11, "axes.labelsize": 11, "axes.titlesize": 12,
              "xtick.labelsize": 10, "ytick.labelsize": 10, "legend.fontsize": 10,
              "legend.title_fontsize": 10, "figure.titlesize": 12}


def use_book_style() -> None:
    """The book's theme: ``seaborn.set_theme`` (white grid, colour-blind palette) with font
    sizes that stay ≥ 9 pt on the page for figures up to :data:`BASE_WIDTH_IN` wide."""
    import seaborn as sns

    sns.set_theme(context="notebook", style="whitegrid", palette="colorblind", rc={
        **FONT_SIZES,
        "figure.figsize": (BASE_WIDTH_IN, 4.2),
        "figure.dpi": 100,
        "savefig.dpi": 150,
        "savefig.bbox": "tight",
        "axes.spines.top": False,
        "axes.spines.right": False,
        "grid.alpha": 0.35,
        "legend.frameon": False,
    })


def figsize(ncols: int = 1, nrows: int = 1, *, panel_height: float = 3.2) -> tuple[float, float]:
    """A figure size (inches) for ``nrows`` × ``ncols`` panels that fits the page without
    shrinking the theme's fonts below 9 pt: the width stays :data:`BASE_WIDTH_IN`, so add
    rows rather than columns beyond about three panels."""
    if ncols < 1 or nrows < 1:
        raise ValueError(f"figsize: ncols and nrows must be >= 1, got ncols={ncols}, "
                         f"nrows={nrows}")
    return (BASE_WIDTH_IN, panel_height * nrows)


def _texts(fig: "plt.Figure"):
    from matplotlib.text import Text

    for t in fig.findobj(Text):
        if t.get_visible() and t.get_text().strip():
            yield t


def rendered_font_pt(fig: "plt.Figure", page_width_px: float = PAGE_WIDTH_PX) -> float:
    """Size (pt) at which the smallest visible text of ``fig`` appears on the book's page:
    its font size times the shrink factor ``min(1, page width / figure width)`` (1 CSS px =
    0.75 pt; a figure narrower than the page is not enlarged). ``inf`` for a figure without
    text."""
    fig.draw_without_rendering()  # tick labels get their text when the figure is drawn
    sizes = [t.get_fontsize() for t in _texts(fig)]
    if not sizes:
        return float("inf")
    width_px = fig.get_figwidth() * 96.0  # CSS px per inch
    return min(sizes) * min(1.0, page_width_px / width_px)


class FigurePath(type(Path())):  # type: ignore[misc]
    """A path that a notebook does not display (``savefig(...)`` as a cell's last line)."""

    def _ipython_display_(self) -> None:
        return None


def savefig(fig: "plt.Figure", name: str) -> Path:
    """Save ``fig`` as ``<run folder>/figures/<name>.png`` and return the path (a
    :class:`FigurePath`, which a notebook does not print). Warns when the figure's smallest
    text would appear below :data:`MIN_FONT_PT` on the page."""
    slug = re.sub(r"[^A-Za-z0-9_.-]+", "-", name).strip("-") or "figure"
    small = rendered_font_pt(fig)
    if small < MIN_FONT_PT:
        # warn_explicit names the check, not the caller's file: a chapter page would otherwise
        # show the kernel's temporary path (/tmp/ipykernel_…) to the reader
        warnings.warn_explicit(f"figure {slug!r}: its smallest text appears at {small:.1f} pt "
                               f"on the page (< {MIN_FONT_PT:g} pt): make the figure narrower "
                               f"(plotting.figsize) or its fonts larger", UserWarning,
                               filename="tokenbook.plotting.savefig", lineno=0,
                               module="tokenbook.plotting")
    out = run_dir() / "figures" / f"{slug}.png"
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out)
    return FigurePath(out)
