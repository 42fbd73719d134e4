"""A shared seaborn figure of the grounded chapters: per-seed statistics, mechanism on vs off."""

from __future__ import annotations

from typing import Mapping

import pandas as pd

__all__ = ["plot_seed_statistics"]


def plot_seed_statistics(table: pd.DataFrame, thresholds: Mapping[str, float] | None = None, *,
                         title: str = "Per-seed statistics, mechanism on vs off"):
    """One panel per claim: each seed's statistic with the mechanism on and off (strip plot,
    seaborn), the claim's threshold as a dashed line. ``table``: ``over_seeds``'s tidy table
    (``seed, mechanism, claim_id, value``). Returns the Figure."""
    import matplotlib.pyplot as plt
    import seaborn as sns

    from ..validation import check_table

    check_table(table, "seed table", columns=["seed", "mechanism", "claim_id", "value"])
    from ..plotting import figsize

    ids = list(dict.fromkeys(table["claim_id"]))
    ncol = min(3, len(ids))
    nrow = -(-len(ids) // ncol)
    fig, axes = plt.subplots(nrow, ncol, figsize=figsize(ncol, nrow, panel_height=2.6),
                             squeeze=False)
    for ax, cid in zip(axes.flat, ids):
        sub = table[table["claim_id"] == cid]
        sns.stripplot(data=sub, x="mechanism", y="value", hue="mechanism", order=["on", "off"],
                      hue_order=["on", "off"], palette={"on": "#0072B2", "off": "#999999"},
                      size=6, jitter=0.15, legend=False, ax=ax)
        if thresholds and cid in thresholds:
            ax.axhline(thresholds[cid], ls="--", lw=1, color="#D55E00")
        ax.set_title(cid if len(cid) <= 22 else cid[:21] + "…", fontsize=10)
        ax.set_xlabel("mechanism")
        ax.set_ylabel("statistic per seed")
    for ax in list(axes.flat)[len(ids):]:
        ax.set_visible(False)
    fig.suptitle(title)
    fig.tight_layout()
    return fig
