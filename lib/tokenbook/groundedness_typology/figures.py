"""Figures of the groundedness chapter (Haley et al. 2025), drawn with seaborn in the book's style.

Each ``plot_*`` takes a table from :mod:`tokenbook.groundedness_typology.measures` (which holds the measures only)
and returns a matplotlib Figure at most :data:`tokenbook.plotting.BASE_WIDTH_IN` wide, so its
text stays ≥ 9 pt on the page (:func:`tokenbook.plotting.savefig` checks it). Groundedness
G = s_U − s_P and surprisals are in nats.

* :func:`plot_class_violins` — token groundedness per UPOS class, one facet per language
  (three per row, every language: a figure grows by rows, never wider than the page).
* :func:`plot_class_means` — mean groundedness per class and language with bootstrap CIs.
* :func:`plot_class_pair_matrix` — share of languages in which a class is significantly more
  grounded than another (pairwise tests of :func:`tokenbook.groundedness_typology.measures.class_pair_tests`).
* :func:`plot_agreement` — language × language rank agreement (Kendall's τ) heatmap.
* :func:`plot_types_vs_norm` — type groundedness against a norm, with the OLS line.
* :func:`plot_seed_statistics` — the tiny verdicts' per-seed statistics, mechanism on vs off.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np
import pandas as pd

from tokenbook.groundedness_typology.measures import (FUNCTIONAL, LEXICAL, POS_FOR_ANALYSIS,
                                                      analysed)
from tokenbook.plotting import figsize
from tokenbook.validation import check_positive_int, check_table
from tokenbook.seed_figures import plot_seed_statistics

__all__ = ["plot_class_violins", "plot_class_means", "plot_class_pair_matrix", "plot_agreement",
           "plot_types_vs_norm", "plot_seed_statistics", "KIND_COLOURS", "G_LABEL"]

#: colour per class kind (Okabe–Ito blue and orange, as the colour-blind palette)
KIND_COLOURS = {"lexical": "#0072B2", "functional": "#E69F00"}
#: axis label of token groundedness
G_LABEL = "groundedness G = s_U − s_P (nats)"


def _plt():
    import matplotlib.pyplot as plt
    import seaborn as sns

    return plt, sns


def _kind(upos) -> np.ndarray:
    u = np.asarray(upos, dtype=object)
    return np.where(np.isin(u, LEXICAL), "lexical",
                    np.where(np.isin(u, FUNCTIONAL), "functional", "other"))


def _kind_legend(fig) -> None:
    from matplotlib.patches import Patch

    fig.legend(handles=[Patch(facecolor=c, alpha=0.6, label=k) for k, c in KIND_COLOURS.items()],
               loc="outside upper center", ncol=2, title="word class")


def plot_class_violins(words: pd.DataFrame, *, langs: Sequence[str] | None = None,
                       classes: Sequence[str] = POS_FOR_ANALYSIS, min_count: int = 5,
                       ncols: int = 3, panel_height: float = 2.6):
    """Violins of token groundedness G = s_U − s_P (nats) per UPOS class, one facet per language.

    ``words``: the word table (``add_groundedness``'s, or one with ``lang, unit_id, word,
    upos, s_U, s_P``). Every language in ``langs`` (default: all, sorted) gets a panel,
    ``ncols`` per row, so 30 languages make 10 rows of a page-wide figure. Classes with fewer
    than ``min_count`` tokens in a language are left out of its panel. The class order (x) is
    the same in every panel — descending mean over the languages' class means — so a class
    sits at the same place throughout; blue = lexical, orange = functional; y shared; the line
    in each violin marks the class mean.
    """
    check_positive_int(min_count, "plot_class_violins: min_count")
    check_positive_int(ncols, "plot_class_violins: ncols")
    plt, sns = _plt()
    data = analysed(words, classes)
    langs = list(langs) if langs is not None else sorted(data["lang"].unique())
    if not langs:
        raise ValueError("plot_class_violins: no language to draw (empty word table?)")
    counts = data.groupby(["lang", "upos"]).size()
    keep = counts[counts >= min_count].index
    data = data[data.set_index(["lang", "upos"]).index.isin(keep) & data["lang"].isin(langs)]
    order = (data.groupby(["lang", "upos"])["groundedness"].mean().groupby("upos").mean()
             .sort_values(ascending=False).index.tolist())
    ncol = min(ncols, len(langs))
    nrow = -(-len(langs) // ncol)
    fig, axes = plt.subplots(nrow, ncol, figsize=figsize(ncol, nrow, panel_height=panel_height),
                             squeeze=False, layout="constrained")
    palette = {u: KIND_COLOURS.get(k, "#999999") for u, k in zip(order, _kind(order))}
    for i, (ax, lang) in enumerate(zip(axes.flat, langs)):
        g = data[data["lang"] == lang]
        if len(g):
            sns.violinplot(g, x="upos", y="groundedness", hue="upos", order=order,
                           hue_order=order, palette=palette, legend=False, inner=None,
                           cut=0, density_norm="width", linewidth=0.6, alpha=0.6, ax=ax)
            means = g.groupby("upos")["groundedness"].mean().reindex(order)
            ax.scatter(np.arange(len(order)), means.to_numpy(float), s=120, color="k",
                       linewidths=1.5, zorder=3, marker="_")
        ax.axhline(0, color="k", lw=0.6)
        ax.set_xticks(range(len(order)), order, rotation=90)
        ax.set_xlim(-0.6, len(order) - 0.4)
        ax.set_title(str(lang))
        ax.set_xlabel("UPOS" if i + ncol >= len(langs) else "")  # no panel below
        ax.set_ylabel("G (nats)" if i % ncol == 0 else "")
    # one y range for all panels, set once (sharey would rescale all 30 axes at every draw)
    lo, hi = (np.nanmin(data["groundedness"]), np.nanmax(data["groundedness"])) if len(data) \
        else (-1.0, 1.0)
    pad = 0.05 * max(hi - lo, 1e-9)
    for i, ax in enumerate(axes.flat):
        ax.set_ylim(min(lo, 0) - pad, max(hi, 0) + pad)
        if i % ncol:
            ax.tick_params(labelleft=False)
    for ax in list(axes.flat)[len(langs):]:
        ax.set_visible(False)
    _kind_legend(fig)
    return fig


def plot_class_means(summary: pd.DataFrame, *, classes: Sequence[str] = POS_FOR_ANALYSIS,
                     max_hue: int = 8):
    """Mean groundedness (nats) per UPOS class (x) for each language, with the class summary's
    bootstrap CIs (the level of ``class_summary``), and the mean over languages (black
    diamond).

    ``summary``: :func:`tokenbook.groundedness_typology.measures.class_summary`'s table (``lang, upos, mean,
    ci_low, ci_high``). Classes are sorted by their mean over languages. Up to ``max_hue``
    languages get a colour and a legend entry each, dodged; with more (30 at paper scale) every
    language is a grey point with its CI and the black diamonds carry the comparison.
    """
    check_table(summary, "plot_class_means: summary (class_summary's table)",
                columns=("lang", "upos", "mean", "ci_low", "ci_high"),
                numeric=("mean", "ci_low", "ci_high"))
    plt, sns = _plt()
    present = [c for c in classes if c in set(summary["upos"])]
    order = (summary[summary["upos"].isin(present)].groupby("upos")["mean"].mean()
             .sort_values(ascending=False).index.tolist())
    langs = sorted(summary["lang"].unique())
    many = len(langs) > max_hue
    colours = dict(zip(langs, sns.color_palette("colorblind", len(langs)) if not many
                       else ["#9a9a9a"] * len(langs)))
    fig, ax = plt.subplots(figsize=figsize(panel_height=4.0))
    width = 0.0 if many else 0.7 / max(len(langs), 1)
    for i, lang in enumerate(langs):
        s = summary[summary["lang"] == lang].set_index("upos").reindex(order)
        x = np.arange(len(order)) + (0 if many else -0.35 + width * (i + 0.5))
        x = x + (np.random.default_rng(i).uniform(-0.2, 0.2, len(order)) if many else 0)
        yerr = np.vstack([s["mean"] - s["ci_low"], s["ci_high"] - s["mean"]])
        ax.errorbar(x, s["mean"], yerr=yerr, fmt="o", ms=3.5 if many else 4.5, capsize=0 if many
                    else 2, lw=0.8, color=colours[lang], alpha=0.6 if many else 1.0,
                    label=None if many else lang)
    overall = (summary[summary["upos"].isin(order)].groupby("upos")["mean"].mean()
               .reindex(order).reset_index())
    sns.scatterplot(overall, x=np.arange(len(order)), y="mean", marker="D", s=45, color="k",
                    zorder=4, ax=ax, label="mean over languages")
    ax.axhline(0, color="k", lw=0.6)
    ax.set_xticks(range(len(order)), order, rotation=45)
    ax.set_xlabel("UPOS (sorted by mean over languages)")
    ax.set_ylabel("mean groundedness (nats) and CI")
    ax.legend(title=None if many else "language", ncol=1 if many else 2, loc="best")
    fig.tight_layout()
    return fig


def plot_class_pair_matrix(matrix: pd.DataFrame, *, alpha: float = 0.05,
                           annotate_up_to: int = 13):
    """Heatmap (seaborn) of :func:`tokenbook.groundedness_typology.measures.class_dominance_matrix`: cell (row,
    column) = share of the languages testing the pair in which the row class is significantly
    more grounded than the column class (BH q < ``alpha``), in %. A cell and its mirror add up
    to the share of languages where the pair differs at all; grey = no language tests the pair.
    Rows/columns keep the matrix's order (by net dominance: a shared cline fills the upper
    triangle). Cells annotated with whole percentages up to ``annotate_up_to`` classes."""
    if not isinstance(matrix, pd.DataFrame) or matrix.shape[0] != matrix.shape[1] \
            or list(matrix.index) != list(matrix.columns):
        raise ValueError("plot_class_pair_matrix: pass the square class × class DataFrame of "
                         "tokenbook.groundedness_typology.measures.class_dominance_matrix")
    plt, sns = _plt()
    n = len(matrix)
    side = min(6.0, 1.6 + 0.42 * n)
    fig, ax = plt.subplots(figsize=(min(7.0, side + 1.4), side))
    pct = 100 * matrix.astype(float)
    ax.set_facecolor("#e6e6e6")  # untested pairs and the diagonal
    sns.heatmap(pct, vmin=0, vmax=100, cmap="Blues", square=True, annot=n <= annotate_up_to,
                fmt=".0f", annot_kws={"fontsize": 9}, linewidths=0.5, linecolor="white",
                cbar_kws={"label": f"languages with row > column, q < {alpha:g} (%)"}, ax=ax)
    ax.set_xlabel("less grounded class (column)")
    ax.set_ylabel("more grounded class (row)")
    ax.tick_params(axis="x", rotation=90)
    ax.tick_params(axis="y", rotation=0)
    ax.grid(False)
    fig.tight_layout()
    return fig


def plot_agreement(matrix: pd.DataFrame, *, title: str = "Kendall's τ of UPOS rankings",
                   label: str = "rank correlation", annotate_up_to: int = 12):
    """Heatmap (seaborn) of a language × language agreement matrix
    (:func:`tokenbook.groundedness_typology.measures.agreement_matrix`), values in [−1, 1]; cells annotated with
    two decimals up to ``annotate_up_to`` languages. Fits the page width for 30 languages."""
    if not isinstance(matrix, pd.DataFrame) or matrix.shape[0] != matrix.shape[1]:
        raise ValueError("plot_agreement: pass the square language × language DataFrame of "
                         "tokenbook.groundedness_typology.measures.agreement_matrix")
    plt, sns = _plt()
    n = len(matrix)
    side = min(6.0, 1.5 + 0.5 * n)
    fig, ax = plt.subplots(figsize=(min(7.0, side + 1.3), side))
    sns.heatmap(matrix.astype(float), vmin=-1, vmax=1, center=0, cmap="RdBu_r", square=True,
                annot=n <= annotate_up_to, fmt=".2f", annot_kws={"fontsize": 9},
                linewidths=0.5, cbar_kws={"label": label}, ax=ax)
    ax.set_xlabel("language")
    ax.set_ylabel("language")
    ax.tick_params(axis="x", rotation=90)
    ax.tick_params(axis="y", rotation=0)
    ax.grid(False)
    ax.set_title(title)
    fig.tight_layout()
    return fig


def plot_types_vs_norm(types: pd.DataFrame, x: str = "concreteness", *,
                       label: str | None = None):
    """Type-level groundedness (nats) against a norm column ``x`` (e.g. a concreteness
    rating), one colour per class kind (lexical/functional), with the OLS line of
    groundedness on ``x`` over all types and its 95% band (``seaborn.regplot``)."""
    check_table(types, "plot_types_vs_norm: types (type_table's, with the norm attached)",
                columns=("upos", "groundedness", x), numeric=("groundedness", x))
    plt, sns = _plt()
    d = types.dropna(subset=["groundedness", x]).assign(kind=lambda t: _kind(t["upos"]))
    d = d[d["kind"] != "other"]
    fig, ax = plt.subplots(figsize=figsize(panel_height=4.0))
    sns.scatterplot(d, x=x, y="groundedness", hue="kind", hue_order=list(KIND_COLOURS),
                    palette=KIND_COLOURS, s=22, alpha=0.7, linewidth=0, ax=ax)
    if len(d) >= 3 and d[x].nunique() > 1:
        sns.regplot(d, x=x, y="groundedness", scatter=False, ci=95, seed=0, color="k",
                    label="OLS fit (95% band)", line_kws={"lw": 1.2}, ax=ax)
    ax.axhline(0, color="k", lw=0.6)
    ax.set_xlabel(label or x)
    ax.set_ylabel("type groundedness (nats)")
    ax.legend(title="word class")
    fig.tight_layout()
    return fig
