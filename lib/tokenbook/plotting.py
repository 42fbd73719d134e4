"""One figure style for the whole book, and saving figures into the run folder.

Call :func:`use_book_style` once at the top of a chapter; :func:`savefig` writes a figure as PNG
into ``<run folder>/figures/`` (the runner collects it) and returns the path. Never call
``matplotlib.use("Agg")`` in a notebook: the inline backend must stay.
"""

from __future__ import annotations

import re
from pathlib import Path

import matplotlib as mpl
import matplotlib.pyplot as plt

from .claims import run_dir

#: colour per condition, shared by the grounded chapters (U text-only, P image, D discourse)
CONDITION_COLOURS = {"U": "#7f7f7f", "P": "#1f77b4", "D": "#2ca02c", "PD": "#d62728",
                     "P+D": "#d62728"}


def use_book_style() -> None:
    """Readable defaults: labelled axes, no top/right spines, a colour-blind-safe cycle."""
    mpl.rcParams.update({
        "figure.figsize": (6.4, 4.0),
        "figure.dpi": 100,
        "savefig.dpi": 150,
        "savefig.bbox": "tight",
        "axes.spines.top": False,
        "axes.spines.right": False,
        "axes.grid": True,
        "grid.alpha": 0.3,
        "axes.titlesize": 11,
        "axes.labelsize": 10,
        "legend.frameon": False,
        "axes.prop_cycle": mpl.cycler(color=["#0072B2", "#E69F00", "#009E73", "#D55E00",
                                             "#CC79A7", "#56B4E9", "#F0E442", "#000000"]),
    })


def savefig(fig: "plt.Figure", name: str) -> Path:
    """Save ``fig`` as ``<run folder>/figures/<name>.png`` and return the path."""
    slug = re.sub(r"[^A-Za-z0-9_.-]+", "-", name).strip("-") or "figure"
    out = run_dir() / "figures" / f"{slug}.png"
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out)
    return out
