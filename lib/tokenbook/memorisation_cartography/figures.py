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
* :func:`plot_removal_grid` — the §6.1 heatmaps: per metric, each grid cell's seed-paired
  difference to random removal (cells whose 95% CI excludes zero starred).
* :func:`plot_specialised` — the §6.2 corpora: per metric, each corpus' difference to the random
  corpus with its 95% CI.
* :func:`plot_crosslingual` — the cross-language Spearman ρ of TM, GS and CM per language pair,
  with bootstrap 95% CIs.
* :func:`plot_transfer` — the train-on-one, test-on-each heatmap of the map predictor, one
  panel per estimator.
* :func:`plot_feature_feature` — the feature–feature Spearman heatmap (lower triangle).
* :func:`plot_feature_kde` — per-feature density of the pairs of each map region.
"""

from __future__ import annotations

from typing import Mapping

import numpy as np
import pandas as pd

from tokenbook.seed_figures import plot_seed_statistics
from tokenbook.validation import check_table

__all__ = ["plot_map", "plot_phenomena", "plot_reliability", "plot_predictors",
           "plot_seed_values", "plot_feature_correlations", "plot_assignment",
           "plot_removal_grid", "plot_specialised", "plot_crosslingual", "plot_transfer",
           "plot_feature_feature", "plot_feature_kde"]

#: per metric of the region experiments: (label of a difference with its unit, unit, format)
_DIFF_LABELS = {
    "test_logprob": ("Δ test log-probability (nats/token)", "nats/token", "+.2g"),
    "test_logprob_regular": ("Δ test log-probability, regular sentences (nats/token)",
                             "nats/token", "+.2g"),
    "bleu": ("Δ BLEU (points)", "BLEU points", "+.2g"),
    "bleu_regular": ("Δ BLEU, regular sentences (points)", "BLEU points", "+.2g"),
    "bleu_greedy": ("Δ greedy BLEU (points)", "BLEU points", "+.2g"),
    "hallucination_rate": ("Δ hallucination rate (share)", "share", "+.2g"),
}


def _diff_label(metric: str) -> tuple[str, str, str]:
    return _DIFF_LABELS.get(metric, (f"Δ {metric}", metric, "+.3g"))


def _diff_text(value: float, metric: str, excludes_zero: bool) -> str:
    """A cell's annotation: the difference in the metric's format, starred when its CI
    excludes zero."""
    return format(float(value), _diff_label(metric)[2]) + ("*" if excludes_zero else "")


def _check_metrics(table: pd.DataFrame, name: str, metrics) -> list[str]:
    metrics = list(metrics)
    if not metrics:
        raise ValueError(f"{name}: pass at least one metric")
    have = list(dict.fromkeys(table["metric"]))
    missing = [m for m in metrics if m not in have]
    if missing:
        raise ValueError(f"{name} has no rows for metric(s) {missing}; it has {have} "
                         "(pass metrics= a subset of these)")
    return metrics


def _sns():
    import seaborn as sns

    return sns


def plot_map(cm: pd.DataFrame, *, examples: pd.DataFrame | None = None, title: str = ""):
    """x = TM, y = GS (both per-token geometric-mean probabilities), dashed diagonal, colour =
    CM clipped at 0 (the authors' colouring), with marginal KDEs. ``examples``: rows with
    ``tm, gs`` and a short ``label`` to annotate (e.g. one example pair per region)."""
    sns = _sns()

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
    """``curve`` from :func:`tokenbook.memorisation_cartography.experiments.reliability_curve`: Spearman ρ
    between the CMs of two disjoint halves of ``half_size`` models each (points: mean and SD
    over splits) and the Spearman–Brown projection to the whole ensemble."""
    sns = _sns()
    import matplotlib.pyplot as plt

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
    :func:`tokenbook.memorisation_cartography.experiments.cm_by_assignment`)."""
    sns = _sns()
    import matplotlib.pyplot as plt

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


#: y-axis labels (the claims' statistics, with units) of the per-seed figures
SEED_AXES = {
    "idiom-high-cm": "AUROC of CM, idioms vs regular (lower 95% bound)",
    "rare-high-cm": "AUROC of CM, rare-word vs regular (lower 95% bound)",
    "noisy-unlearnt": "AUROC of −TM, noisy vs regular (lower 95% bound)",
    "cm-stable": "split-half Spearman ρ of CM (projected)",
    "features-predict-cm": "held-out Pearson r for CM",
    "signals-predict-cm": "held-out Pearson r for CM",
    "signals-add": "Δ held-out Pearson r for CM",
    "removal-memorised-logprob": "Δ log-probability per token (nats)",
    "removal-memorised-bleu": "Δ corpus BLEU (points)",
    "crosslingual-tm": "Spearman ρ of TM across languages (lower 95% bound)",
    "crosslingual-gs": "Spearman ρ of GS across languages (lower 95% bound)",
    "crosslingual-cm": "Spearman ρ of CM across languages (lower 95% bound)",
    "crosslingual-transfer-cm": "held-out Pearson r for CM, train ≠ test language",
}


def plot_seed_values(table: pd.DataFrame, thresholds: Mapping[str, float] | None = None):
    """One panel per claim: the per-seed statistic with the mechanism on and off (``table``
    from :func:`tokenbook.robustness.over_seeds`), the claim's threshold dashed, its
    statistic (:data:`SEED_AXES`) on the y axis: the book's per-seed figure
    (:func:`tokenbook.uid_grounding.figures.plot_seed_statistics`)."""
    check_table(table, "table", columns=["claim_id", "mechanism", "value"])
    if "seed" not in table.columns:
        table = table.assign(seed=table.groupby(["claim_id", "mechanism"]).cumcount())
    return plot_seed_statistics(table, thresholds, labels=SEED_AXES,
                                title="Each claim per root seed, mechanism on vs off")


def plot_feature_correlations(corr: pd.DataFrame):
    """Heatmap of Spearman ρ (rows: features and signals; columns: TM, GS, CM), as from
    :func:`tokenbook.memorisation_cartography.predict.feature_correlations`; colour range −1 … 1."""
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


def plot_removal_grid(grid_diff: pd.DataFrame,
                      metrics=("test_logprob", "bleu", "hallucination_rate")):
    """The §6.1 removal grid as the paper draws it: one heatmap per metric, x = the cell's
    centre TM, y = its centre GS (the triangle on and below the diagonal; cells above it
    blank), colour = the seed-paired difference of the cell's retrained models to random
    removal of the same token budget (``diff`` of
    :func:`tokenbook.memorisation_cartography.regions.paired_differences`, merged with the cells' ``i, j,
    tm, gs`` as in :func:`tokenbook.memorisation_cartography.experiments.region_experiments`), on a
    diverging scale centred on 0. Each cell is annotated with its difference; a star (and bold)
    marks a 95% CI over seeds that excludes zero. Panels are stacked so a 10 × 10 grid stays
    legible at page width."""
    sns = _sns()
    import matplotlib.pyplot as plt

    check_table(grid_diff, "grid_diff",
                columns=["condition", "metric", "diff", "excludes_zero", "i", "j", "tm", "gs"],
                numeric=["diff", "i", "j", "tm", "gs"])
    metrics = _check_metrics(grid_diff, "grid_diff", metrics)
    d = grid_diff.dropna(subset=["i", "j", "tm"])
    if d.empty:
        raise ValueError("grid_diff has no grid cells (i, j, tm, gs are all NaN); merge "
                         "paired_differences(...) with grid_centres(size) on the cell name")
    if d.duplicated(["metric", "i", "j"]).any():
        raise ValueError("grid_diff must have one row per (metric, grid cell)")
    d = d.assign(i=d["i"].astype(int), j=d["j"].astype(int))
    if ((d["j"] < 1) | (d["j"] > d["i"])).any():
        raise ValueError("grid_diff cells must lie on or below the diagonal (1 ≤ j ≤ i)")
    n = int(round(float((d["i"] / d["tm"]).median())))
    if n < int(d["i"].max()):
        raise ValueError(f"grid_diff: cell centres tm = i/n give n = {n} < max(i) = "
                         f"{int(d['i'].max())}; pass the merged table of region_experiments")
    ticks = [f"{k / n:.2f}" for k in range(1, n + 1)]
    panel_h = 0.32 * n + 1.4
    fig, axes = plt.subplots(len(metrics), 1, figsize=(7.0, panel_h * len(metrics)),
                             squeeze=False)
    for ax, m in zip(axes[:, 0], metrics):
        label, unit, _ = _diff_label(m)
        rows = d[d["metric"] == m]
        values = np.full((n, n), np.nan)           # row j − 1 (GS), column i − 1 (TM)
        annot = np.full((n, n), "", dtype=object)
        for r in rows.itertuples(index=False):
            values[r.j - 1, r.i - 1] = r.diff
            if np.isfinite(r.diff):
                annot[r.j - 1, r.i - 1] = _diff_text(r.diff, m, bool(r.excludes_zero))
        jj, ii = np.meshgrid(np.arange(1, n + 1), np.arange(1, n + 1), indexing="ij")
        mask = (jj > ii) | ~np.isfinite(values)    # above the diagonal, or no estimate
        finite = np.abs(values[np.isfinite(values)])
        vmax = float(finite.max()) if finite.size and finite.max() > 0 else 1.0
        sns.heatmap(values, mask=mask, vmin=-vmax, vmax=vmax, center=0, cmap="vlag",
                    annot=annot, fmt="", annot_kws={"size": 9}, linewidths=0.5,
                    linecolor="white", xticklabels=ticks, yticklabels=ticks, ax=ax,
                    cbar_kws={"label": unit})
        for t in ax.texts:
            if t.get_text().endswith("*"):
                t.set_fontweight("bold")
        ax.invert_yaxis()                          # GS grows upwards, as on the map
        ax.grid(False)                             # no theme grid through the blank cells
        ax.set_title(f"{label} vs random removal", fontsize=11)
        ax.set_xlabel("cell centre TM (probability)")
        ax.set_ylabel("cell centre GS (probability)")
        ax.tick_params(axis="y", rotation=0)
    fig.tight_layout()
    return fig


def plot_specialised(spec_diff: pd.DataFrame,
                     metrics=("test_logprob", "bleu", "hallucination_rate")):
    """The §6.2 specialised corpora: per metric (one panel each, stacked) every corpus'
    seed-paired difference to the random corpus of the same token budget (``diff`` of
    :func:`tokenbook.memorisation_cartography.regions.paired_differences`) as a point with its 95% CI over
    seeds (``ci_low`` … ``ci_high``; none with fewer than two seeds), and the zero line."""
    sns = _sns()
    import matplotlib.pyplot as plt

    check_table(spec_diff, "spec_diff",
                columns=["condition", "metric", "diff", "ci_low", "ci_high"],
                numeric=["diff", "ci_low", "ci_high"])
    metrics = _check_metrics(spec_diff, "spec_diff", metrics)
    if spec_diff.duplicated(["condition", "metric"]).any():
        raise ValueError("spec_diff must have one row per (condition, metric)")
    corpora = list(dict.fromkeys(spec_diff["condition"]))
    colours = dict(zip(corpora, sns.color_palette("colorblind", len(corpora))))
    panel_h = 0.45 * len(corpora) + 1.3
    fig, axes = plt.subplots(len(metrics), 1, figsize=(7.0, panel_h * len(metrics)),
                             squeeze=False)
    y = np.arange(len(corpora))
    for ax, m in zip(axes[:, 0], metrics):
        rows = spec_diff[spec_diff["metric"] == m].set_index("condition").reindex(corpora)
        for k, c in enumerate(corpora):
            r = rows.loc[c]
            err = np.array([[r["diff"] - r["ci_low"]], [r["ci_high"] - r["diff"]]], dtype=float)
            ax.errorbar([r["diff"]], [y[k]], xerr=np.nan_to_num(err), fmt="o", capsize=4,
                        color=colours[c])
        ax.axvline(0, color="grey", lw=0.8)
        ax.set_yticks(y, corpora)
        ax.set_ylim(len(corpora) - 0.5, -0.5)      # first corpus on top
        ax.set_xlabel(f"{_diff_label(m)[0]} vs random corpus")
        ax.set_ylabel("corpus")
    fig.tight_layout()
    return fig


# --------------------------------------------------------------------------- cross-lingual
_METRIC_NAMES = {"tm": "TM", "gs": "GS", "cm": "CM"}


def plot_crosslingual(corr: pd.DataFrame):
    """One panel per metric (TM, GS, CM): the Spearman ρ between two languages' maps over the
    same sources, one point per language pair with its bootstrap 95% CI (``corr`` from
    :func:`tokenbook.memorisation_cartography.crosslingual.cross_language_correlations`; extra rows of
    other root seeds are drawn as grey dots behind when a ``seed`` column is present)."""
    sns = _sns()
    import matplotlib.pyplot as plt

    check_table(corr, "corr", columns=["lang_a", "lang_b", "metric", "rho", "ci_low",
                                       "ci_high"], numeric=["rho"])
    if corr.empty:
        raise ValueError("corr is empty; pass cross_language_correlations(...)")
    corr = corr.assign(pair=corr["lang_a"].str.upper() + "–" + corr["lang_b"].str.upper())
    metrics = list(dict.fromkeys(corr["metric"]))
    order = list(dict.fromkeys(corr["pair"]))
    fig, axes = plt.subplots(1, len(metrics), figsize=(2.3 * len(metrics) + 0.4, 2.8),
                             sharey=True, squeeze=False)
    main = corr
    if "seed" in corr.columns:
        first = corr["seed"].iloc[0]
        main = corr[corr["seed"] == first]
    for ax, m in zip(axes[0], metrics):
        if main is not corr:
            sns.stripplot(data=corr[corr["metric"] == m], x="pair", y="rho", order=order, ax=ax,
                          color="0.7", size=4, jitter=0.1)
        d = main[main["metric"] == m].set_index("pair").reindex(order)
        x = np.arange(len(order))
        ax.errorbar(x, d["rho"], yerr=[d["rho"] - d["ci_low"], d["ci_high"] - d["rho"]],
                    fmt="o", color="C0", capsize=3)
        ax.axhline(0, color="black", lw=0.8)
        ax.set_xticks(x, order, rotation=45)
        ax.set_title(_METRIC_NAMES.get(m, m))
        ax.set_xlabel("language pair")
        ax.set_ylabel("Spearman ρ across languages" if ax is axes[0, 0] else "")
        ax.set_ylim(-1, 1)
    fig.tight_layout()
    return fig


def plot_transfer(transfer: pd.DataFrame, *, target: str = "cm", value: str = "pearson_r"):
    """Heatmaps of the train-on-one, test-on-each transfer (rows: train language, columns:
    test language; the diagonal is the held-out split), one panel per ``estimator``, for one
    ``target``; ``value`` is ``pearson_r`` (−1 … 1) or ``mae`` (the target's units). ``transfer``
    from :func:`tokenbook.memorisation_cartography.experiments.crosslingual_transfer_table`."""
    sns = _sns()
    import matplotlib.pyplot as plt

    check_table(transfer, "transfer", columns=["estimator", "train", "test", "target", value],
                numeric=[value])
    d = transfer[transfer["target"] == target]
    if d.empty:
        raise ValueError(f"transfer has no rows for target {target!r}; it has "
                         f"{sorted(transfer['target'].unique())}")
    ests = list(dict.fromkeys(d["estimator"]))
    langs = list(dict.fromkeys(d["train"]))
    fig, axes = plt.subplots(1, len(ests), figsize=(3.0 * len(ests) + 0.6, 2.9), squeeze=False)
    label = (f"Pearson r, {_METRIC_NAMES.get(target, target)}" if value == "pearson_r"
             else f"mean absolute error, {_METRIC_NAMES.get(target, target)} (probability)")
    kw = dict(vmin=-1, vmax=1, center=0, cmap="vlag") if value == "pearson_r" else \
        dict(cmap="rocket_r")
    for ax, est in zip(axes[0], ests):
        grid = (d[d["estimator"] == est].pivot_table(index="train", columns="test",
                                                     values=value).reindex(index=langs,
                                                                           columns=langs))
        grid.index = [x.upper() for x in grid.index]
        grid.columns = [x.upper() for x in grid.columns]
        sns.heatmap(grid, annot=True, fmt=".2f", ax=ax, square=True, cbar_kws={"label": label},
                    **kw)
        ax.set_title(est)
        ax.set_xlabel("test language")
        ax.set_ylabel("train language")
    fig.tight_layout()
    return fig


def plot_feature_feature(rho: pd.DataFrame, *, mask_below: float = 0.0):
    """Lower-triangle heatmap of the feature–feature Spearman ρ (``rho`` square, from
    :func:`tokenbook.memorisation_cartography.mapfeatures.feature_feature_correlations`); cells with
    abs(ρ) < ``mask_below`` are left blank (the authors use 0.5)."""
    sns = _sns()
    import matplotlib.pyplot as plt

    if not isinstance(rho, pd.DataFrame) or rho.empty or list(rho.index) != list(rho.columns):
        raise ValueError("rho must be a non-empty square DataFrame with the same index and "
                         "columns; pass feature_feature_correlations(...)")
    mask = np.triu(np.ones(rho.shape, dtype=bool)) | (rho.abs() < mask_below).to_numpy()
    n = len(rho)
    # at most the page's width (7 in): text drawn at 9 pt stays 9 pt on the page
    fig, ax = plt.subplots(figsize=(min(7.0, 0.42 * n + 2.4), min(7.0, 0.38 * n + 1.8)))
    # one decimal without the leading zero ("−.5"): the number fits its cell at 9 pt
    labels = rho.apply(lambda col: col.map(lambda v: f"{v:.1f}".replace("0.", ".")))
    sns.heatmap(rho, mask=mask, vmin=-1, vmax=1, center=0, cmap="vlag",
                annot=labels.to_numpy() if n <= 16 else False, fmt="", annot_kws={"size": 9},
                ax=ax, cbar_kws={"label": "Spearman ρ"}, square=True)
    ax.tick_params(labelsize=9)
    fig.tight_layout()
    return fig


def plot_feature_kde(long: pd.DataFrame, features=None, *, col_wrap: int = 3):
    """One panel per feature: the density (KDE, each region normalised on its own) of the
    feature's values for the pairs of each map region (``long``: ``region, feature, value``
    from :func:`tokenbook.memorisation_cartography.mapfeatures.feature_by_region`; ``features`` picks and
    orders the panels). A region with fewer than 2 distinct values in a panel is drawn as a
    rug only."""
    sns = _sns()
    import matplotlib.pyplot as plt

    check_table(long, "long", columns=["region", "feature", "value"], numeric=["value"])
    feats = list(dict.fromkeys(long["feature"])) if features is None else list(features)
    missing = [f for f in feats if f not in set(long["feature"])]
    if not feats or missing:
        raise ValueError(f"no rows for feature(s) {missing or feats}; pass features present in "
                         "long['feature']")
    regions = list(dict.fromkeys(long["region"]))
    palette = dict(zip(regions, sns.color_palette(n_colors=len(regions))))
    cols = min(col_wrap, len(feats))
    rows = int(np.ceil(len(feats) / cols))
    fig, axes = plt.subplots(rows, cols, figsize=(2.2 * cols, 1.9 * rows + 0.5), squeeze=False)
    for ax, f in zip(axes.flat, feats):
        d = long[long["feature"] == f]
        for r in regions:
            v = d.loc[d["region"] == r, "value"]
            if v.nunique() >= 2:
                sns.kdeplot(x=v, ax=ax, color=palette[r], label=r, warn_singular=False)
            elif len(v):
                sns.rugplot(x=v, ax=ax, color=palette[r], label=r, height=0.1)
        ax.set_title(f, fontsize=9)
        ax.set_xlabel("value (feature units)")
        ax.set_ylabel("density" if ax in axes[:, 0] else "")
    for ax in axes.flat[len(feats):]:
        ax.axis("off")
    handles = [plt.Line2D([], [], color=palette[r], label=r) for r in regions]
    fig.legend(handles=handles, loc="lower center", ncol=len(regions), frameon=False,
               title="map region")
    fig.tight_layout(rect=(0, 0.2 if rows == 1 else 0.13, 1, 1))
    return fig
