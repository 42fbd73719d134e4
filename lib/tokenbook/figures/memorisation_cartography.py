"""Figures of the memorisation chapter (seaborn; each returns the matplotlib Figure).

* :func:`plot_map` — the map as the authors draw it: x = TM, y = GS, the diagonal y = x, CM as
  colour, marginal distributions, and example pairs of each region annotated.
* :func:`plot_phenomena` — where the planted phenomena fall on the map (tiny world).
* :func:`plot_reliability` — split-half reliability of CM against the number of models, with
  the Spearman–Brown projection.
* :func:`plot_predictors` — held-out Pearson r of the MLP and the linear baseline, per input
  set, over split seeds.
* :func:`plot_feature_correlations` — Spearman ρ of every feature and signal with TM, GS and
  CM (the authors' appendix heatmap).
* :func:`plot_assignment` — duplicates' and regular pairs' mean CM under the book's grouped
  subsets and the authors' line-level split, with bootstrap 95% CIs.
* :func:`plot_seed_values` — every claim's per-seed statistic with the mechanism on and off,
  against the claim's threshold.
"""

from __future__ import annotations

from typing import Mapping

import numpy as np
import pandas as pd

__all__ = ["plot_map", "plot_phenomena", "plot_reliability", "plot_predictors",
           "plot_seed_values", "plot_feature_correlations", "plot_assignment"]


def _sns():
    import seaborn as sns

    return sns


def plot_map(cm: pd.DataFrame, *, examples: pd.DataFrame | None = None, title: str = ""):
    """x = TM, y = GS (both per-token geometric-mean probabilities), dashed diagonal, colour =
    CM clipped at 0 (the authors' colouring), with marginal KDEs. ``examples``: rows with
    ``tm, gs`` and a short ``label`` to annotate (e.g. one example pair per region)."""
    sns = _sns()
    from tokenbook.validation import check_table

    check_table(cm, "cm", columns=["tm", "gs", "cm"], numeric=["tm", "gs", "cm"])
    d = cm.dropna(subset=["tm", "gs", "cm"]).assign(cm_clipped=lambda t: t["cm"].clip(lower=0))
    g = sns.JointGrid(data=d, x="tm", y="gs", height=5.6, xlim=(0, 1), ylim=(0, 1))
    pts = g.ax_joint.scatter(d["tm"], d["gs"], c=d["cm_clipped"], cmap="viridis", s=9,
                             alpha=0.85, vmin=0, vmax=max(0.3, float(d["cm_clipped"].max())))
    g.ax_joint.plot([0, 1], [0, 1], ls="--", color="grey", lw=0.9)
    sns.kdeplot(x=d["tm"], ax=g.ax_marg_x, fill=True, color="grey", warn_singular=False)
    sns.kdeplot(y=d["gs"], ax=g.ax_marg_y, fill=True, color="grey", warn_singular=False)
    if examples is not None and len(examples):
        for _, r in examples.iterrows():
            g.ax_joint.annotate(str(r["label"]), (r["tm"], r["gs"]), xytext=(-12, 10),
                                textcoords="offset points", fontsize=9, ha="right",
                                arrowprops=dict(arrowstyle="-", color="black", lw=0.6))
    g.ax_joint.set_xlabel("TM: mean probability when trained on (per-token geometric mean)")
    g.ax_joint.set_ylabel("GS: mean probability when held out")
    # the colour bar sits in the empty top-right corner, above the GS marginal
    pos = g.ax_marg_y.get_position()
    top = g.ax_marg_x.get_position()
    cax = g.figure.add_axes([pos.x0, top.y0 + 0.55 * top.height, pos.width, 0.12 * top.height])
    g.figure.colorbar(pts, cax=cax, orientation="horizontal")
    cax.set_title("CM (≥ 0)", fontsize=9)
    cax.tick_params(labelsize=9)
    if title:
        g.figure.suptitle(title, y=1.02)
    return g.figure


def plot_phenomena(cm: pd.DataFrame, *, order: list[str] | None = None):
    """The map with each planted phenomenon highlighted against the regular pairs (grey)."""
    sns = _sns()
    import matplotlib.pyplot as plt

    from tokenbook.validation import check_table

    check_table(cm, "cm", columns=["tm", "gs", "phenomenon"])
    kinds = order or [p for p in cm["phenomenon"].unique() if p != "regular"]
    n = len(kinds)
    cols = min(3, max(1, n))
    rows = int(np.ceil(n / cols)) or 1
    fig, axes = plt.subplots(rows, cols, figsize=(2.33 * cols, 2.2 * rows), sharex=True,
                             sharey=True, squeeze=False)
    reg = cm[cm["phenomenon"] == "regular"]
    palette = sns.color_palette("colorblind", n)
    for ax, kind, col in zip(axes.flat, kinds, palette):
        ax.scatter(reg["tm"], reg["gs"], s=4, c="lightgrey")
        d = cm[cm["phenomenon"] == kind]
        ax.scatter(d["tm"], d["gs"], s=12, color=col)
        ax.plot([0, 1], [0, 1], ls="--", color="grey", lw=0.8)
        ax.set_title(f"{kind} ({len(d)})", fontsize=9)
        ax.set_xlim(0, 1)
        ax.set_ylim(0, 1)
    for ax in axes.flat[n:]:
        ax.axis("off")
    for ax in axes[-1]:
        ax.set_xlabel("TM (probability)")
    for ax in axes[:, 0]:
        ax.set_ylabel("GS (probability)")
    fig.tight_layout()
    return fig


def plot_reliability(curve: pd.DataFrame):
    """``curve`` from :func:`tokenbook.memorisation.experiments.reliability_curve`: Spearman ρ
    between the CMs of two disjoint halves of ``half_size`` models each (points: mean and SD
    over splits) and the Spearman–Brown projection to the whole ensemble."""
    sns = _sns()
    import matplotlib.pyplot as plt

    from tokenbook.validation import check_table

    check_table(curve, "curve", columns=["half_size", "rho", "projected"])
    fig, ax = plt.subplots(figsize=(5.6, 3.8))
    sns.pointplot(data=curve, x="half_size", y="rho", errorbar="sd", ax=ax, color="C0",
                  label="split-half ρ (two disjoint sets of k models)")
    sns.pointplot(data=curve, x="half_size", y="projected", errorbar="sd", ax=ax, color="C1",
                  linestyles="--", label="Spearman–Brown projection to all models")
    ax.set_xlabel("models per half (k)")
    ax.set_ylabel("Spearman ρ between CM estimates")
    ax.set_ylim(-0.1, 1)
    ax.legend(fontsize=9)
    fig.tight_layout()
    return fig


def plot_predictors(scores: pd.DataFrame, target: str = "cm"):
    """Held-out Pearson r (one point per split seed; bar = mean) of the MLP and the linear
    baseline, per input set (column ``inputs``)."""
    sns = _sns()
    import matplotlib.pyplot as plt

    from tokenbook.validation import check_table

    check_table(scores, "scores", columns=["inputs", "estimator", "target", "pearson_r"])
    d = scores[scores["target"] == target]
    fig, ax = plt.subplots(figsize=(5.6, 3.8))
    sns.barplot(data=d, x="inputs", y="pearson_r", hue="estimator", errorbar=None, ax=ax,
                alpha=0.5)
    sns.stripplot(data=d, x="inputs", y="pearson_r", hue="estimator", dodge=True, ax=ax,
                  legend=False, size=5)
    ax.axhline(0.5, ls=":", color="grey")
    ax.set_xlabel("inputs")
    ax.set_ylabel(f"held-out Pearson r for {target.upper()}")
    ax.set_ylim(min(0.0, float(d["pearson_r"].min()) - 0.05), 1)
    fig.tight_layout()
    return fig


def plot_assignment(table: pd.DataFrame):
    """Mean CM (probability difference) per phenomenon under each subset assignment, with the
    bootstrap 95% CI as error bars (``table`` from
    :func:`tokenbook.memorisation.experiments.cm_by_assignment`)."""
    sns = _sns()
    import matplotlib.pyplot as plt

    from tokenbook.validation import check_table

    check_table(table, "assignment table",
                columns=["assignment", "phenomenon", "mean_cm", "ci_low", "ci_high"])
    fig, ax = plt.subplots(figsize=(5.0, 3.6))
    phenomena = list(dict.fromkeys(table["phenomenon"]))
    assignments = list(dict.fromkeys(table["assignment"]))
    colours = dict(zip(assignments, sns.color_palette("colorblind", len(assignments))))
    width = 0.8 / max(1, len(assignments))
    for j, a in enumerate(assignments):
        rows = table[table["assignment"] == a].set_index("phenomenon").reindex(phenomena)
        x = np.arange(len(phenomena)) - 0.4 + width * (j + 0.5)
        err = np.vstack([rows["mean_cm"] - rows["ci_low"], rows["ci_high"] - rows["mean_cm"]])
        ax.errorbar(x, rows["mean_cm"], yerr=np.nan_to_num(err), fmt="o", capsize=4,
                    color=colours[a], label=a)
    ax.axhline(0, color="grey", lw=0.8)
    ax.set_xticks(np.arange(len(phenomena)), phenomena)
    ax.set_xlabel("pairs")
    ax.set_ylabel("mean CM (probability difference)")
    ax.legend(title="subset assignment", frameon=False)
    fig.tight_layout()
    return fig


def plot_seed_values(table: pd.DataFrame, thresholds: Mapping[str, float] | None = None):
    """One panel per claim: the per-seed statistic with the mechanism on and off (``table``
    from :func:`tokenbook.robustness.over_seeds`), with the claim's threshold dotted."""
    sns = _sns()
    import matplotlib.pyplot as plt

    from tokenbook.validation import check_table

    check_table(table, "table", columns=["claim_id", "mechanism", "value"])
    ids = list(dict.fromkeys(table["claim_id"]))
    cols = 3
    rows = int(np.ceil(len(ids) / cols))
    fig, axes = plt.subplots(rows, cols, figsize=(2.33 * cols, 2.2 * rows), squeeze=False)
    for ax, cid in zip(axes.flat, ids):
        d = table[table["claim_id"] == cid]
        sns.stripplot(data=d, x="mechanism", y="value", order=["on", "off"], ax=ax, size=6,
                      hue="mechanism", hue_order=["on", "off"], legend=False, jitter=0.15)
        if thresholds and cid in thresholds:
            ax.axhline(thresholds[cid], ls=":", color="black")
        ax.set_title(cid, fontsize=9)
        ax.set_xlabel("")
        ax.set_ylabel("per seed" if ax in axes[:, 0] else "")
    for ax in axes.flat[len(ids):]:
        ax.axis("off")
    fig.tight_layout()
    return fig


def plot_feature_correlations(corr: pd.DataFrame):
    """Heatmap of Spearman ρ (rows: features and signals; columns: TM, GS, CM), as from
    :func:`tokenbook.memorisation.predict.feature_correlations`; colour range −1 … 1."""
    sns = _sns()
    import matplotlib.pyplot as plt

    if not isinstance(corr, pd.DataFrame) or corr.empty:
        raise ValueError("corr must be a non-empty DataFrame of correlations (features × "
                         "targets); pass feature_correlations(...)")
    fig, ax = plt.subplots(figsize=(4.6, 0.3 * len(corr) + 1.2))
    sns.heatmap(corr.rename(columns=str.upper), vmin=-1, vmax=1, center=0, cmap="vlag",
                annot=True, fmt=".2f", annot_kws={"size": 9}, ax=ax,
                cbar_kws={"label": "Spearman ρ"})
    ax.set_xlabel("")
    ax.set_ylabel("")
    fig.tight_layout()
    return fig
