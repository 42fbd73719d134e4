"""The book's one per-seed figure: each claim's statistic per root seed, mechanism on vs off.

Every chapter draws its claims over seeds with :func:`plot_seed_statistics` (the grounded
chapters directly, the memorisation and cancellation chapters through their figures modules,
which add their claims' axis labels and thresholds).
"""

from __future__ import annotations

import re
import textwrap
from typing import Mapping

import pandas as pd

from tokenbook.plotting import BASE_WIDTH_IN
from tokenbook.validation import check_table

__all__ = ["plot_seed_statistics", "panel_title", "axis_label"]

#: colours of the two mechanisms (Okabe–Ito blue, grey) and of the threshold line
ON_OFF = {"on": "#0072B2", "off": "#999999"}
THRESHOLD_COLOUR = "#D55E00"
#: characters per line of a panel's title (a claim id) and of its y-axis label
TITLE_WIDTH = 30
LABEL_WIDTH = 34


def panel_title(claim_id: str, width: int = TITLE_WIDTH) -> str:
    """A claim id wrapped at its hyphens (never cut) to lines of at most ``width``
    characters."""
    parts = re.split(r"(?<=[-@_])", claim_id)
    lines, line = [], ""
    for part in parts:
        if line and len(line) + len(part) > width:
            lines.append(line)
            line = ""
        line += part
    return "\n".join(lines + [line])


def axis_label(text: str, width: int = LABEL_WIDTH, max_lines: int = 3) -> str:
    """A y-axis label (a claim's statistic with its unit) wrapped to ``max_lines`` lines."""
    lines = textwrap.wrap(text, width) or [""]
    if len(lines) > max_lines:
        lines = lines[:max_lines]
        lines[-1] = lines[-1][:width - 1] + "…"
    return "\n".join(lines)


def plot_seed_statistics(table: pd.DataFrame, thresholds: Mapping[str, float] | None = None, *,
                         labels: Mapping[str, str] | None = None,
                         title: str = "Per-seed statistics, mechanism on vs off"):
    """One panel per claim (two per row): each root seed's statistic with the mechanism on and
    off (strip plot, seaborn), the claim's threshold as a dashed line (where ``thresholds``
    gives one), the claim id as the panel's title (wrapped, never cut) and ``labels[claim id]``
    (its statistic with its unit) as the y axis. ``table``: ``over_seeds``'s tidy table
    (``seed, mechanism, claim_id, value``); rows of manipulation checks and known answers
    (``manipulation:<id>``, ``known:<id>``) are left out. Returns the Figure."""
    import matplotlib.pyplot as plt
    import seaborn as sns
    from matplotlib.lines import Line2D

    check_table(table, "seed table", columns=["seed", "mechanism", "claim_id", "value"])
    # the claims only: not their manipulation checks and known answers ("<kind>:<claim id>")
    table = table[~table["claim_id"].astype(str).str.contains(":", regex=False)]
    ids = list(dict.fromkeys(table["claim_id"]))
    ncol = min(2, len(ids))
    nrow = -(-len(ids) // ncol)
    fig, axes = plt.subplots(nrow, ncol, figsize=(BASE_WIDTH_IN, 2.9 * nrow + 0.6),
                             squeeze=False)
    for ax, cid in zip(axes.flat, ids):
        sub = table[table["claim_id"] == cid]
        sns.stripplot(data=sub, x="mechanism", y="value", hue="mechanism", order=["on", "off"],
                      hue_order=["on", "off"], palette=ON_OFF, size=6, jitter=0.15,
                      legend=False, ax=ax)
        if thresholds and cid in thresholds and thresholds[cid] is not None:
            ax.axhline(thresholds[cid], ls="--", lw=1.2, color=THRESHOLD_COLOUR)
        ax.set_title(panel_title(cid), fontsize=10)
        ax.set_xlabel("")
        ax.set_ylabel(axis_label((labels or {}).get(cid, "statistic (see the claim)")),
                      fontsize=9)
        ax.tick_params(labelsize=9)
    for ax in list(axes.flat)[len(ids):]:
        ax.set_visible(False)
    handles = [Line2D([], [], ls="", marker="o", color=ON_OFF["on"], label="mechanism on"),
               Line2D([], [], ls="", marker="o", color=ON_OFF["off"], label="mechanism off"),
               Line2D([], [], ls="--", color=THRESHOLD_COLOUR, label="the claim's threshold")]
    fig.legend(handles=handles, loc="lower center", ncol=3, fontsize=9,
               bbox_to_anchor=(0.5, 0.0))
    fig.suptitle(title)
    fig.tight_layout(rect=(0, 0.05, 1, 1))
    return fig
