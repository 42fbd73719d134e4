"""Figures of the UID chapter (Gay et al. 2026), drawn with seaborn in the book's style.

Each ``plot_*`` takes a tidy table from :mod:`tokenbook.uid_grounding.measures` (which holds the measures only)
and returns a matplotlib Figure at most :data:`tokenbook.plotting.BASE_WIDTH_IN` wide, so its
text stays ≥ 9 pt on the page (:func:`tokenbook.plotting.savefig` checks it). Surprisals are
in nats, variances in nats².

* :func:`plot_language_scatter` — per-language mean U (x) against P (y), y = x line (Fig. 1).
* :func:`plot_measure_densities` — densities of unit-level measures per condition (Fig. 2).
* :func:`plot_pos_decomposition` — mean ΔC per language × UPOS heatmap (App. Figs. 6-7).
* :func:`plot_story_conditions` — per-language mean of a story measure per condition.
* :func:`plot_story_boxplots` — per-language boxplots of a unit-level measure (Fig. 3).
* :func:`plot_position_profile` — mean measure per unit index with its band (Fig. 4).
* :func:`plot_boundary_jumps` — boundary spikes Δ_w per condition and window (Tables 8-9).
* :func:`plot_reduction_densities` — δ-weighted densities over the normalised position
  (App. Figs. 8-20).
* :func:`plot_seed_statistics` — the tiny verdicts' per-seed statistics, mechanism on vs off.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np
import pandas as pd

from tokenbook.plotting import CONDITION_COLOURS, figsize
from tokenbook.seed_figures import plot_seed_statistics
from tokenbook.uid_grounding.measures import reduction_density
from tokenbook.validation import check_table

__all__ = ["plot_language_scatter", "plot_measure_densities", "plot_pos_decomposition",
           "plot_story_conditions", "plot_story_boxplots", "plot_position_profile", "plot_boundary_jumps",
           "plot_reduction_densities", "plot_seed_statistics"]

#: axis label (with unit) per measure column of :class:`tokenbook.uid_grounding.measures.UnitMeasures`
LABELS = {"uid_v": "UID$_v$ (nats²)", "uid_lv": "UID$_{lv}$ (nats²)", "cv_global": "CV$_g$",
          "cv_local": "CV$_l$", "mean": "mean surprisal (nats)", "max": "max surprisal (nats)",
          "local_abs": "mean |Δs| (nats)", "uid_v_lang": "UID$_v$ around μ$_{lang}$ (nats²)",
          "uid_cv": "CV = √UID$_v$ / |mean|"}
#: display name per condition code
CONDITION_NAMES = {"U": "U", "P": "P", "D": "D", "PD": "P+D"}
_ORDER = ("U", "P", "D", "PD")


def _plt():
    import matplotlib.pyplot as plt
    import seaborn as sns

    return plt, sns


def _label(metric: str) -> str:
    return LABELS.get(metric, metric)


def _palette(conditions: Sequence[str]) -> dict[str, str]:
    return {c: CONDITION_COLOURS.get(c, "#444444") for c in conditions}


def _present(values, order: Sequence[str] = _ORDER) -> list[str]:
    have = set(values)
    return [c for c in order if c in have] + sorted(have - set(order))


def plot_language_scatter(comparison: pd.DataFrame, metrics: Sequence[str] = ("uid_v", "uid_lv"),
                          *, a: str = "P", b: str = "U", by: str = "lang"):
    """Per-language mean of each metric under ``b`` (x) against ``a`` (y), nats², with the
    y = x line; filled points: q < .05. ``comparison``: :func:`tokenbook.uid_grounding.measures.compare_conditions`
    output. Log axes when the languages span more than a factor 20."""
    check_table(comparison, "comparison", columns=["metric", f"mean_{a}", f"mean_{b}", "q", by])
    plt, sns = _plt()
    fig, axes = plt.subplots(1, len(metrics), figsize=figsize(len(metrics), panel_height=3.6),
                             squeeze=False)
    for ax, m in zip(axes[0], metrics):
        c = comparison[comparison.metric == m].assign(
            test=lambda d: np.where(d["q"].to_numpy(float) < 0.05, "q < .05", "n.s."))
        x, y = c[f"mean_{b}"].to_numpy(float), c[f"mean_{a}"].to_numpy(float)
        sns.scatterplot(data=c, x=f"mean_{b}", y=f"mean_{a}", style="test",
                        markers={"q < .05": "o", "n.s.": "X"}, style_order=["q < .05", "n.s."],
                        color=CONDITION_COLOURS.get(a, "#444444"), s=50, zorder=3, ax=ax)
        for xi, yi, name in zip(x, y, c[by]):
            ax.annotate(str(name), (xi, yi), fontsize=9, xytext=(3, 3),
                        textcoords="offset points")
        if len(x):
            lo, hi = np.nanmin(np.r_[x, y]), np.nanmax(np.r_[x, y])
            if lo > 0 and hi / lo > 20:  # languages far apart: log axes keep all readable
                ax.set_xscale("log")
                ax.set_yscale("log")
                ends = [lo / 1.2, hi * 1.2]
            else:
                pad = 0.05 * (hi - lo + 1e-9)
                ends = [lo - pad, hi + pad]
            ax.plot(ends, ends, "k--", lw=1, label="y = x")
        label = _label(m)
        ax.set_xlabel(f"{label}, {b} (text only)")
        ax.set_ylabel(f"{label}, {a} (with image)")
        ax.set_title(f"below the line: lower with {a}", fontsize=11)
        ax.legend(title=None)
    fig.tight_layout()
    return fig


def plot_measure_densities(measures: pd.DataFrame, metrics: Sequence[str] = ("uid_v", "uid_lv"),
                           *, conditions: Sequence[str] = ("U", "P"), clip: float = 0.99):
    """Kernel densities (seaborn) of unit-level measures per condition, languages pooled,
    clipped at the ``clip`` quantile of all values as in Gay et al.'s Figure 2."""
    check_table(measures, "measures", columns=["condition", *metrics])
    plt, sns = _plt()
    fig, axes = plt.subplots(1, len(metrics), figsize=figsize(len(metrics), panel_height=3.4),
                             squeeze=False)
    for ax, m in zip(axes[0], metrics):
        vals = measures[m].dropna()
        top = float(vals.quantile(clip)) if len(vals) else 1.0
        sub = measures[measures.condition.isin(conditions)].dropna(subset=[m])
        sub = sub[sub[m] <= top]
        n = sub.groupby("condition").size()
        ok = [c for c in conditions if n.get(c, 0) > 2 and np.ptp(
            sub.loc[sub.condition == c, m].to_numpy(float)) > 0]
        sub = sub[sub.condition.isin(ok)].assign(
            cond=lambda d: d["condition"].map(lambda c: f"{c} (n={n[c]:,})"))
        if ok:
            sns.kdeplot(data=sub, x=m, hue="cond", common_norm=False, clip=(0.0, top), cut=0,
                        hue_order=[f"{c} (n={n[c]:,})" for c in ok],
                        palette=[CONDITION_COLOURS.get(c, "#444444") for c in ok], ax=ax)
            if ax.get_legend() is not None:
                ax.get_legend().set_title(None)
        ax.set_xlabel(_label(m))
        unit = _label(m).rpartition("(")[2].rstrip(")") if "(" in _label(m) else ""
        ax.set_ylabel(f"density (per {unit})" if unit else "density")
    fig.tight_layout()
    return fig


def plot_pos_decomposition(decomposition: pd.DataFrame):
    """Heatmap (seaborn) of mean ΔC (nats², P − U) per language × UPOS in the captions where
    grounding increases variance; grey cells: too few words of that class.
    ``decomposition``: :func:`tokenbook.uid_grounding.measures.pos_decomposition` output."""
    check_table(decomposition, "decomposition", columns=["lang", "upos", "mean_dC"], min_rows=0)
    plt, sns = _plt()
    mat = decomposition.pivot_table(index="lang", columns="upos", values="mean_dC")
    fig, ax = plt.subplots(figsize=(figsize()[0], 0.35 * max(mat.shape[0], 3) + 2.2))
    ax.set_facecolor("#dddddd")  # NaN cells are masked and show the background
    if mat.size:
        lim = float(np.nanmax(np.abs(mat.to_numpy(float)))) or 1.0
        sns.heatmap(mat, cmap="RdBu_r", center=0.0, vmin=-lim, vmax=lim, ax=ax,
                    mask=mat.isna(), cbar_kws={"label": "mean ΔC per word,\nP − U (nats²)"})
        ax.tick_params(axis="x", rotation=45)
        for t in ax.get_xticklabels():
            t.set_ha("right")
        ax.tick_params(axis="y", rotation=0)
    ax.set_xlabel("UPOS")
    ax.set_ylabel("language")
    ax.set_title("Captions with UID$_v^P$ > UID$_v^U$ (grey: too few words)", fontsize=11)
    ax.grid(False)
    fig.tight_layout()
    return fig


def plot_story_conditions(measures: pd.DataFrame, metrics: Sequence[str] = ("uid_v", "cv_global"),
                          *, conditions: Sequence[str] = _ORDER):
    """Per-language mean of unit-level story measures under each condition (seaborn bars with
    bootstrap 95% CIs over units), one row of panels per metric."""
    check_table(measures, "measures", columns=["lang", "condition", *metrics])
    plt, sns = _plt()
    conds = [c for c in conditions if c in set(measures.condition)]
    langs = sorted(measures["lang"].unique())
    fig, axes = plt.subplots(len(metrics), 1, figsize=figsize(1, len(metrics), panel_height=3.0),
                             squeeze=False)
    for ax, m in zip(axes[:, 0], metrics):
        sns.barplot(data=measures, x="lang", y=m, hue="condition", order=langs, hue_order=conds,
                    palette=_palette(conds), errorbar=("ci", 95), n_boot=500, seed=0, ax=ax)
        ax.set_xlabel("language")
        ax.set_ylabel(f"mean {_label(m)}")
        if len(langs) > 8:
            ax.tick_params(axis="x", rotation=45)
        ax.legend(title=None, ncol=len(conds))
    fig.tight_layout()
    return fig


def plot_story_boxplots(measures: pd.DataFrame, metric: str = "uid_v", *,
                        conditions: Sequence[str] = _ORDER, unit: str = "paragraph"):
    """Gay et al.'s Figure 3: boxplots (seaborn, whiskers 1.5 IQR, outliers not drawn) of a
    unit-level measure per language and condition, with the pooled mean of each condition as
    a dashed line. ``measures``: :func:`tokenbook.uid_grounding.measures.story_unit_measures`'s table."""
    check_table(measures, "measures", columns=["lang", "condition", metric])
    plt, sns = _plt()
    conds = [c for c in conditions if c in set(measures.condition)]
    langs = sorted(measures["lang"].unique())
    fig, ax = plt.subplots(figsize=figsize(panel_height=3.8))
    sns.boxplot(data=measures, x="lang", y=metric, hue="condition", order=langs,
                hue_order=conds, palette=_palette(conds), showfliers=False, width=0.8, ax=ax)
    means = measures.groupby("condition")[metric].mean()
    for c in conds:
        ax.axhline(means[c], ls="--", lw=1.2, color=CONDITION_COLOURS.get(c, "#444444"),
                   alpha=0.8)
    ax.set_xlabel("language")
    ax.set_ylabel(f"{unit} {_label(metric)}")
    if len(langs) > 8:
        ax.tick_params(axis="x", rotation=45)
    ax.legend(title="condition (dashed: pooled mean)", ncol=len(conds))
    fig.tight_layout()
    return fig


def plot_position_profile(profile: pd.DataFrame, *, metric: str = "uid_v",
                          position: str = "sent_idx", band: str = "± 1.96·SEM"):
    """Mean measure per unit index and condition with its band (columns ``low``/``high`` of
    :func:`tokenbook.uid_grounding.measures.position_profile`); ``band`` names it on the y axis."""
    check_table(profile, "profile", columns=["condition", position, "mean", "low", "high"])
    plt, sns = _plt()
    conds = _present(profile["condition"])
    fig, ax = plt.subplots(figsize=figsize(panel_height=3.6))
    sns.lineplot(data=profile, x=position, y="mean", hue="condition", hue_order=conds,
                 palette=_palette(conds), marker="o", errorbar=None, ax=ax)
    for cond in conds:
        p = profile[profile["condition"] == cond].sort_values(position)
        ax.fill_between(p[position], p["low"], p["high"], color=CONDITION_COLOURS.get(cond),
                        alpha=0.15, lw=0)
    unit = "paragraph" if position.startswith("para") else "sentence"
    ax.set_xlabel(f"{unit} index in the story (0 = first)")
    ax.xaxis.set_major_locator(plt.MaxNLocator(integer=True))   # indices are whole numbers
    ax.set_ylabel(f"mean {_label(metric)}\n{band}")
    ax.legend(title="condition", ncol=len(conds))
    fig.tight_layout()
    return fig


def plot_boundary_jumps(summary: pd.DataFrame):
    """Mean Δ_w = s̄(last w words of unit k) − s̄(first w of unit k+1) (nats) across languages,
    per condition and window; one panel per unit level when ``summary`` has a ``level``
    column. Negative = the next unit starts with a surprisal spike."""
    check_table(summary, "summary", columns=["condition", "w", "delta"])
    plt, sns = _plt()
    levels = list(pd.unique(summary["level"])) if "level" in summary else [None]
    conds = _present(summary["condition"])
    fig, axes = plt.subplots(1, len(levels), figsize=figsize(len(levels), panel_height=3.4),
                             squeeze=False, sharey=True)
    for ax, level in zip(axes[0], levels):
        sub = summary if level is None else summary[summary["level"] == level]
        sns.barplot(data=sub, x="w", y="delta", hue="condition", hue_order=conds,
                    palette=_palette(conds), errorbar=None, ax=ax)
        ax.axhline(0, color="k", lw=0.8)
        ax.set_xlabel("window w (words)")
        ax.set_ylabel("Δ$_w$ (nats)")
        if level is not None:
            ax.set_title(f"{level} boundaries", fontsize=11)
        ax.legend(title=None, ncol=2)
    fig.tight_layout()
    return fig


_DELTA_LABEL = {"P": "δ$_P$ = max(0, s$_U$ − s$_P$)", "D": "δ$_D$ = max(0, s$_U$ − s$_D$)",
                "DP": "δ$_{DP}$ = max(0, s$_D$ − s$_{P+D}$)"}
_DELTA_COLOUR = {"P": CONDITION_COLOURS["P"], "D": CONDITION_COLOURS["D"],
                 "DP": CONDITION_COLOURS["PD"]}


def plot_reduction_densities(reductions: pd.DataFrame, names: Sequence[str] = ("P", "D", "DP"),
                             *, by: str | None = None):
    """δ-weighted densities of the positive surprisal reductions over the normalised position
    in the sentence and, when the table has ``para_pos``, in the paragraph (one column of
    panels per level), with the density of word positions (unweighted, dotted) for reference;
    one row of panels per ``by`` group (e.g. ``"lang"``: Gay et al.'s App. Figs. 8-20) or one
    row for all words. ``reductions``: :func:`tokenbook.uid_grounding.measures.story_reductions`'s word table
    (``pos``, ``delta_*`` in nats)."""
    check_table(reductions, "reductions", columns=["pos"] + ([by] if by else []))
    plt, sns = _plt()
    levels = [("pos", "sentence")] + ([("para_pos", "paragraph")] if "para_pos" in reductions
                                      else [])
    groups = [(None, reductions)] if by is None else list(reductions.groupby(by, sort=True))
    groups = groups or [(None, reductions)]  # no words: one empty row of panels
    fig, axes = plt.subplots(len(groups), len(levels), squeeze=False, sharex=True,
                             figsize=figsize(len(levels), len(groups),
                                             panel_height=3.6 if len(groups) == 1 else 2.4))
    for r, (key, sub) in enumerate(groups):
        for c, (col, level) in enumerate(levels):
            ax = axes[r, c]
            _density_lines(ax, sub, col, names, reduction_density)
            ax.set_xlabel(f"normalised position in the {level}" if r == len(groups) - 1 else "")
            ax.set_ylabel("density" + (f" ({key})" if key is not None else "")
                          + "\n(per unit position)")
            if r == 0 and len(levels) > 1:
                ax.set_title(f"{level} level", fontsize=11)
            legend = ax.get_legend()
            if legend is not None:
                legend.remove()
    handles, labels = axes[0, 0].get_legend_handles_labels()
    if len(levels) == 1 and len(groups) == 1:
        axes[0, 0].legend(handles, labels, title=None)
        fig.tight_layout()
    else:
        fig.legend(handles, labels, loc="lower center", ncol=2, frameon=False)
        fig.tight_layout(rect=(0, min(0.3, 0.75 / fig.get_figheight()), 1, 1))
    return fig


def _density_lines(ax, table: pd.DataFrame, pos: str, names: Sequence[str], density) -> None:
    """The δ-weighted density of each reduction (precomputed curves, drawn as lines) and the
    unweighted density of word positions (dotted) on ``ax``."""
    for name in names:
        col = f"delta_{name}"
        if col not in table:
            continue
        ok = table[col].notna() & table[pos].notna()
        try:
            x, d = density(table.loc[ok, pos], table.loc[ok, col])
        except ValueError:  # no positive reduction for this contrast
            continue
        ax.plot(x, d, color=_DELTA_COLOUR.get(name, "#444444"), lw=1.8,
                label=_DELTA_LABEL.get(name, name))
    ok = table[pos].notna()
    if ok.any():
        x, d = density(table.loc[ok, pos], np.ones(int(ok.sum())))
        ax.plot(x, d, color="k", ls=":", label="words (unweighted)")
    ax.set_xlim(0, 1)
    ax.set_ylim(bottom=0)
