"""Figures of the cancellation chapter (seaborn, the book's style). Each ``plot_*`` takes the
library's tidy tables and returns a matplotlib Figure.

* :func:`plot_delta_by_sign` — Δ log π of sampled tokens after one update, by rollout sign.
* :func:`plot_coupling` — first-order prediction vs actual Δ (output layer step) and the mean
  coupling K per pair bucket with bootstrap 95% CIs.
* :func:`plot_first_order` — the first-order prediction vs the actual Δ alone.
* :func:`plot_dual_update` — Δ log π after the output-layer-only step against the full step.
* :func:`plot_coupling_buckets` — mean K per pair bucket, signed and absolute, and the share of
  anti-coupled pairs, with prompt-clustered CIs; the anti-coupling bucket highlighted.
* :func:`plot_gradient_cancellation` — cos(g+, g−) of each shared token's positive and
  negative gradient parts, and the cancelled share per prompt, shared vs group-specific.
* :func:`plot_probe` — τ of the peer-masking probe per peer bucket: random sets and the
  authors' top-scored set, means over targets with CIs.
* :func:`plot_learning_curves` — greedy accuracy per condition over GRPO steps, seed bands.
* :func:`plot_seed_values` — each claim's per-seed statistic, mechanism on vs off.
* :func:`plot_scale_sweep` — the per-size claims: each seed's statistic per policy size,
  mechanism on vs off, with the means.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from tokenbook.cancellation_hypothesis.verdicts import probe_bucket_summary
from tokenbook.plotting import figsize
from tokenbook.seed_figures import plot_seed_statistics
from tokenbook.validation import check_table

__all__ = ["plot_delta_by_sign", "plot_coupling", "plot_first_order", "plot_dual_update",
           "plot_coupling_buckets",
           "plot_gradient_cancellation", "plot_probe", "plot_learning_curves", "plot_seed_values",
           "plot_scale_sweep"]


def _plt():
    import matplotlib.pyplot as plt
    import seaborn as sns

    return plt, sns


def plot_delta_by_sign(table: pd.DataFrame):
    """Histogram (KDE-free, shared bins) of Δ log π (nats) for tokens of correct vs failed
    rollouts; ``table``: a token dynamics table."""
    check_table(table, "table", columns=["reward", "delta"], numeric=["reward", "delta"])
    plt, sns = _plt()
    d = table.assign(rollout=np.where(table["reward"] > 0, "correct", "failed"))
    fig, ax = plt.subplots(figsize=figsize())
    sns.histplot(d, x="delta", hue="rollout", bins=40, element="step", stat="count",
                 common_bins=True, ax=ax)
    ax.axvline(0, color="k", lw=0.8)
    ax.set_xlabel("Δ log π after one update (nats)")
    ax.set_ylabel("sampled tokens")
    return fig


def plot_coupling(first_order: pd.DataFrame, coupling: pd.DataFrame):
    """Left: first-order prediction vs actual Δ log π (nats) of an output-layer SGD step.
    Right: mean K = φ·(h_j·h_k) per pair bucket with bootstrap 95% CIs (seaborn)."""
    check_table(first_order, "first_order", columns=["predicted", "actual"],
                numeric=["predicted", "actual"])
    check_table(coupling, "coupling", columns=["bucket", "K"], numeric=["K"])
    plt, sns = _plt()
    fig, axes = plt.subplots(1, 2, figsize=figsize(2))
    sns.scatterplot(first_order, x="predicted", y="actual", s=8, linewidth=0, ax=axes[0])
    lim = float(np.abs(first_order[["predicted", "actual"]].to_numpy()).max())
    axes[0].plot([-lim, lim], [-lim, lim], "k--", lw=0.8)
    axes[0].set_xlabel("first-order prediction of Δ log π (nats)")
    axes[0].set_ylabel("actual Δ log π, output layer (nats)")
    sns.pointplot(coupling, x="K", y="bucket", errorbar=("ci", 95), seed=0, linestyle="none",
                  ax=axes[1])
    axes[1].axvline(0, color="k", lw=0.8)
    axes[1].set_xlabel("mean coupling K = φ·(h_j·h_k)")
    axes[1].set_ylabel("")
    fig.tight_layout()
    return fig


def _first_order_panel(ax, first_order: pd.DataFrame, sns) -> None:
    sns.scatterplot(first_order, x="predicted", y="actual", s=8, linewidth=0, ax=ax)
    lim = float(np.abs(first_order[["predicted", "actual"]].to_numpy()).max())
    ax.plot([-lim, lim], [-lim, lim], "k--", lw=0.8)
    ax.set_xlabel("first-order prediction of Δ log π (nats)")
    ax.set_ylabel("actual Δ log π, output layer (nats)")


def plot_first_order(first_order: pd.DataFrame):
    """First-order prediction vs actual Δ log π (nats) of an output-layer SGD step, one point
    per sampled token, with the identity line."""
    check_table(first_order, "first_order", columns=["predicted", "actual"],
                numeric=["predicted", "actual"])
    plt, sns = _plt()
    fig, ax = plt.subplots(figsize=figsize())
    _first_order_panel(ax, first_order, sns)
    return fig


def plot_dual_update(dual: pd.DataFrame):
    """The authors' dual update: Δ log π (nats) of every sampled token after an SGD step on the
    output layer only (x) and after the full update (y), coloured by rollout (correct/incorrect),
    with the zero lines; ``dual``: :func:`tokenbook.cancellation_hypothesis.dynamics.dual_update`."""
    check_table(dual, "dual", columns=["delta_head", "delta_full", "reward"],
                numeric=["delta_head", "delta_full"])
    plt, sns = _plt()
    d = dual.assign(rollout=np.where(dual["reward"] > 0, "correct", "incorrect"))
    fig, ax = plt.subplots(figsize=figsize())
    sns.scatterplot(d, x="delta_head", y="delta_full", hue="rollout",
                    hue_order=["correct", "incorrect"], s=8, linewidth=0, alpha=0.6, ax=ax)
    ax.axhline(0, color="grey", lw=0.8)
    ax.axvline(0, color="grey", lw=0.8)
    ax.set_xlabel("Δ log π, output layer only (nats)")
    ax.set_ylabel("Δ log π, full update (nats)")
    return fig


def plot_coupling_buckets(cis: pd.DataFrame):
    """Left: mean output-layer coupling K per pair bucket, signed and absolute (symlog axis,
    squared hidden-state units). Right: the share of pairs that anti-couple (K < 0). Points are
    means, bars prompt-clustered bootstrap CIs; the different-token, both-low-confidence bucket
    (anti-coupling) is shaded. ``cis``: :func:`tokenbook.cancellation_hypothesis.coupling.coupling_bucket_cis`."""
    check_table(cis, "cis", columns=["bucket", "statistic", "mean", "lo", "hi",
                                     "anti_coupling"], numeric=["mean", "lo", "hi"])
    plt, sns = _plt()
    order = list(pd.unique(cis["bucket"]))
    y = {b: i for i, b in enumerate(order)}
    colours = sns.color_palette("colorblind", 3)
    fig, axes = plt.subplots(1, 2, figsize=figsize(2), sharey=True,
                             gridspec_kw={"width_ratios": [1.8, 1]})
    panels = [(axes[0], [("K", "signed", colours[0], -0.15), ("abs_K", "absolute", colours[1],
                                                                0.15)]),
              (axes[1], [("anti", "K < 0", colours[2], 0.0)])]
    for ax, series in panels:
        for stat, label, colour, dy in series:
            d = cis[cis["statistic"] == stat].dropna(subset=["mean"])
            if d.empty:
                continue
            yy = d["bucket"].map(y).to_numpy() + dy
            m = d["mean"].to_numpy()
            err = np.vstack([m - d["lo"].fillna(d["mean"]).to_numpy(),
                             d["hi"].fillna(d["mean"]).to_numpy() - m]).clip(min=0)
            ax.errorbar(m, yy, xerr=err, fmt="o", color=colour, capsize=3, label=label)
        for b in cis.loc[cis["anti_coupling"].astype(bool), "bucket"].unique():
            ax.axhspan(y[b] - 0.45, y[b] + 0.45, color="0.85", zorder=0)
    axes[0].set_xscale("symlog", linthresh=0.1, linscale=0.5)
    vals = cis.loc[cis["statistic"].isin(["K", "abs_K"]), ["lo", "hi", "mean"]].to_numpy(float)

    def decade(x: float) -> float:
        return 10.0 ** max(0, math.ceil(math.log10(x))) if x > 0 else 1.0

    hi_v, lo_v = float(np.nanmax(vals)), float(np.nanmin(vals))
    right, left = decade(hi_v), decade(-lo_v)
    ticks = [t for t in (-1000, -100, -10, -1, 0, 1, 10, 100, 1000)
             if min(lo_v, -1) <= t <= max(hi_v, 1)]
    axes[0].set_xlim(-left * 1.5, right * 1.5)
    axes[0].set_xticks(ticks, [f"{t:g}".replace("-", "−") for t in ticks])
    axes[0].axvline(0, color="k", lw=0.8)
    axes[0].set_xlabel("mean K = φ·(h_j·h_k), symlog")
    axes[0].legend(title="mean of K:", loc="lower center", bbox_to_anchor=(0.5, 1.0), ncol=3,
                   frameon=False)
    axes[1].axvline(0.5, color="k", lw=0.8, ls="--")
    axes[1].set_xlim(0, 1)
    axes[1].set_xlabel("share of pairs, K < 0")
    axes[0].set_yticks(range(len(order)), order)
    axes[0].set_ylabel("token pair")
    axes[0].invert_yaxis()
    fig.tight_layout()
    return fig


def plot_gradient_cancellation(dump, summary: pd.DataFrame, *, params: str = "authors' set"):
    """Left: cos(g+, g−) between the positive- and negative-advantage gradient parts of each
    shared token (points; the summary's means with prompt-clustered 95% CIs as bars), by token
    class. Right: the cancelled share −2⟨a, b⟩/(‖a‖² + ‖b‖²) per prompt, for shared vs
    group-specific tokens, per parameter set. ``dump``:
    :func:`tokenbook.cancellation_hypothesis.gradients.gradient_dump`; ``summary``:
    :func:`tokenbook.cancellation_hypothesis.gradients.gradient_summary` of ``params``."""
    check_table(summary, "summary", columns=["tokens", "level", "class", "cos", "cos_lo",
                                             "cos_hi"], numeric=["cos"])
    units, prompts = dump.units, dump.prompts
    check_table(units, "dump.units", columns=["params", "class", "cos"], numeric=["cos"])
    check_table(prompts, "dump.prompts", columns=["params", "tokens", "cancelled",
                                                  "norm_pos", "norm_neg"],
                numeric=["cancelled"])
    plt, sns = _plt()
    fig, axes = plt.subplots(1, 2, figsize=figsize(2))
    u = units[units["params"] == params]
    classes = sorted(u["class"].unique())
    sns.stripplot(u, x="cos", y="class", order=classes, size=4, alpha=0.5, jitter=0.25,
                  color="0.5", ax=axes[0])
    s = summary[(summary["level"] == "per token") & summary["class"].isin(classes)]
    s = s.set_index("class").reindex(classes)
    err = np.vstack([s["cos"] - s["cos_lo"].fillna(s["cos"]),
                     s["cos_hi"].fillna(s["cos"]) - s["cos"]]).clip(min=0)
    axes[0].errorbar(s["cos"], np.arange(len(classes)), xerr=err, fmt="D", color="k",
                     capsize=4, label="mean (95% CI)")
    axes[0].axvline(0, color="k", lw=0.8)
    axes[0].set_xlim(-1.05, 1.05)
    axes[0].set_xlabel("cos(g+, g−) per shared token")
    axes[0].set_ylabel("token class")
    axes[0].legend(loc="upper right")
    p = prompts[(prompts["norm_pos"] > 0) & (prompts["norm_neg"] > 0)]
    sns.stripplot(p, x="cancelled", y="tokens", hue="params", order=["shared", "group-specific"],
                  dodge=True, size=5, ax=axes[1])
    axes[1].axvline(0, color="k", lw=0.8)
    axes[1].set_xlim(-1.05, 1.05)
    axes[1].set_xlabel("cancelled share per prompt")
    axes[1].set_ylabel("")
    axes[1].legend(title="parameters:", loc="lower center", bbox_to_anchor=(0.4, 1.0), ncol=2,
                   frameon=False)
    fig.tight_layout()
    return fig


def plot_probe(probe: pd.DataFrame, *, n_boot: int = 2000, seed: int = 0):
    """τ = Δ_full − Δ_mask (nats) per peer bucket (same/different token × entropy), split by
    the peers' advantage sign: the mean over targets of the random peer sets (circles) and of
    the authors' top-scored set (diamonds, when ``probe`` has a ``top_scored`` column), with
    percentile bootstrap 95% CIs over targets
    (:func:`tokenbook.cancellation_hypothesis.verdicts.probe_bucket_summary`; a table without a ``target`` column
    counts each row as one target). Symlog x axis: the low-entropy buckets move the target
    10–100× less."""
    check_table(probe, "probe", columns=["same_token", "high_entropy", "peer_adv", "tau"],
                numeric=["tau"])
    plt, _ = _plt()
    d = probe if "target" in probe.columns else probe.assign(target=np.arange(len(probe)))
    summ = probe_bucket_summary(d, n_boot=n_boot, seed=seed)
    summ["bucket"] = (np.where(summ["same_token"], "same token", "different token") + ", "
                      + np.where(summ["high_entropy"], "high entropy", "low entropy"))
    order = [f"{a}, {b}" for a in ("same token", "different token")
             for b in ("high entropy", "low entropy")]
    y_of = {b: i for i, b in enumerate(order)}
    sets = [("random sets", "mean_tau", "tau_lo", "tau_hi", "o")]
    if "top_tau" in summ.columns:
        sets.append(("top-scored set", "top_tau", "top_tau_lo", "top_tau_hi", "D"))
    colors = {"positive": "C0", "negative": "C3"}
    fig, ax = plt.subplots(figsize=figsize())
    k = 0
    for adv in ("positive", "negative"):
        for label, mean, lo, hi, marker in sets:
            sub = summ[summ["peer_adv"] == adv]
            y = sub["bucket"].map(y_of).to_numpy() + (k - (2 * len(sets) - 1) / 2) * 0.16
            m = sub[mean].to_numpy()
            err = np.vstack([m - sub[lo].to_numpy(), sub[hi].to_numpy() - m])
            ax.errorbar(m, y, xerr=np.nan_to_num(err), fmt=marker, color=colors[adv],
                        mfc=colors[adv] if marker == "o" else "white", capsize=2, lw=1,
                        label=f"{adv} advantage, {label}")
            k += 1
    vals = np.abs(summ[[c for c in ("mean_tau", "top_tau") if c in summ]].to_numpy())
    vals = vals[np.isfinite(vals) & (vals > 0)]
    ax.set_xscale("symlog", linthresh=float(vals.min()) if vals.size else 1e-6)
    ax.axvline(0, color="k", lw=0.8)
    ax.set_yticks(range(len(order)), order)
    ax.invert_yaxis()
    ax.set_xlabel("τ = Δ_full − Δ_mask of the target (nats, symlog)")
    ax.set_ylabel("masked peers")
    # the legend under the axis label, in the figure's own margin (not over the axis)
    handles, labels = ax.get_legend_handles_labels()
    fig.legend(handles, labels, fontsize=9, loc="lower center", ncol=2, frameon=False)
    fig.tight_layout(rect=(0, 0.06 * len(sets) + 0.08, 1, 1))
    return fig


def plot_learning_curves(curves: pd.DataFrame):
    """Greedy held-out accuracy per GRPO generation step, one line per condition, with a 95%
    bootstrap band over seeds."""
    check_table(curves, "curves", columns=["condition", "seed", "step", "accuracy"],
                numeric=["step", "accuracy"])
    plt, sns = _plt()
    fig, ax = plt.subplots(figsize=figsize())
    sns.lineplot(curves, x="step", y="accuracy", hue="condition", marker="o",
                 errorbar=("ci", 95), seed=0, ax=ax)
    ax.set_xlabel("GRPO generation step")
    ax.set_ylabel("greedy accuracy on held-out prompts")
    return fig


#: the per-seed claims' statistics (y axis, with units) and thresholds (what one seed's value
#: must pass for the claim to hold there: the claims' expectations in the chapter)
SEED_AXES = {"flip-both-signs": "flip balance: min/max of the two flip ratios (ratio)",
             "peer-masking-same-high-entropy": "mean |τ|, same token & high entropy − max "
                                               "other bucket (nats)",
             "template-less-under-grpo": "template share of Σ|Δ|, GRPO − PSR (share)",
             "boosted-higher-value": "MC value, boosted − suppressed (success rate)"}
SEED_THRESHOLDS = {"flip-both-signs": 0.5, "peer-masking-same-high-entropy": 0.0,
                   "template-less-under-grpo": 0.0, "boosted-higher-value": 0.0}


def plot_seed_values(table: pd.DataFrame):
    """Each claim's per-seed statistic with the mechanism on and off, one panel per claim
    (the units differ: :data:`SEED_AXES`), the claim's threshold (:data:`SEED_THRESHOLDS`)
    dashed; ``table``: :func:`tokenbook.robustness.over_seeds`'s. The book's per-seed figure
    (:func:`tokenbook.uid_grounding.figures.plot_seed_statistics`)."""
    check_table(table, "table", columns=["seed", "mechanism", "claim_id", "value"])
    return plot_seed_statistics(table, SEED_THRESHOLDS, labels=SEED_AXES,
                                title="Each claim per root seed, mechanism on vs off")


#: y-axis labels (with units) of the claims :func:`plot_scale_sweep` draws
SCALE_AXES = {"flip-both-signs": "flip balance (ratio)",
              "flip-excess": "flip excess over the isolated control (share)",
              "template-less-under-grpo": "template share, GRPO − PSR (share)"}


def plot_scale_sweep(table: pd.DataFrame, *, expect: dict | None = None):
    """One panel per claim: each seed's statistic (points) at every policy size (x, labelled
    with its parameter count), mechanism on vs off side by side, and their means (bars of
    width zero: a short line). ``expect``: optional ``{claim_id: (low, high)}`` band the claim
    expects, shaded. ``table``: :func:`tokenbook.cancellation_hypothesis.experiments.scale_sweep`'s."""
    check_table(table, "table", columns=["size", "n_params", "seed", "mechanism", "claim_id",
                                         "value"], numeric=["n_params"])
    plt, sns = _plt()
    sizes = (table.drop_duplicates("size").sort_values("n_params", kind="stable"))
    order = sizes["size"].tolist()
    ticks = [f"{s}\n{_count(n)}" for s, n in zip(sizes["size"], sizes["n_params"])]
    tiny = "hidden_size" in table.columns and table["hidden_size"].notna().all()
    xlabel = ("policy size: hidden × layers (parameters)" if tiny
              else "policy (parameters)")
    claims = list(pd.unique(table["claim_id"]))
    fig, axes = plt.subplots(1, len(claims), figsize=figsize(len(claims)), squeeze=False)
    for ax, cid in zip(axes[0], claims):
        sub = table[table["claim_id"] == cid]
        sns.stripplot(sub, x="size", y="value", hue="mechanism", hue_order=["on", "off"],
                      order=order, dodge=True, size=5, jitter=0.15, ax=ax)
        sns.pointplot(sub, x="size", y="value", hue="mechanism", hue_order=["on", "off"],
                      order=order, dodge=0.4, errorbar=None, markers="_", markersize=14,
                      linestyle="none", palette=["k", "k"], legend=False, ax=ax)
        band = (expect or {}).get(cid)
        if band is not None:
            lo, hi = band
            ax.axhspan(lo if lo is not None else ax.get_ylim()[0],
                       hi if hi is not None else ax.get_ylim()[1], color="0.9", zorder=0)
        ax.axhline(0, color="k", lw=0.6)
        ax.set_xticks(range(len(order)), ticks)
        ax.set_title(cid, fontsize=9)
        ax.set_xlabel(xlabel)
        ax.set_ylabel(SCALE_AXES.get(cid, "per-seed statistic"))
        if ax is not axes[0][0] and ax.get_legend() is not None:
            ax.get_legend().remove()
    fig.tight_layout()
    return fig


def _count(n: float) -> str:
    n = float(n)
    for div, unit in ((1e9, "B"), (1e6, "M"), (1e3, "k")):
        if n >= div:
            return f"{n / div:.3g}{unit}"
    return f"{n:.0f}"
