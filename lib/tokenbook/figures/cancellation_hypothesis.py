"""Figures of the cancellation chapter (seaborn, the book's style). Each ``plot_*`` takes the
library's tidy tables and returns a matplotlib Figure.

* :func:`plot_delta_by_sign` — Δ log π of sampled tokens after one update, by rollout sign.
* :func:`plot_coupling` — first-order prediction vs actual Δ (output layer step) and the mean
  coupling K per pair bucket with bootstrap 95% CIs.
* :func:`plot_probe` — τ of the peer-masking probe per peer bucket (point plot with CIs).
* :func:`plot_learning_curves` — greedy accuracy per condition over GRPO steps, seed bands.
* :func:`plot_seed_values` — each claim's per-seed statistic, mechanism on vs off.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..plotting import figsize
from ..validation import check_table

__all__ = ["plot_delta_by_sign", "plot_coupling", "plot_probe", "plot_learning_curves",
           "plot_seed_values"]


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


def plot_probe(probe: pd.DataFrame):
    """τ = Δ_full − Δ_mask (nats) per peer bucket (same/different token × entropy), split by
    the peers' advantage sign; points are means over peer sets with bootstrap 95% CIs."""
    check_table(probe, "probe", columns=["same_token", "high_entropy", "peer_adv", "tau"],
                numeric=["tau"])
    plt, sns = _plt()
    d = probe.assign(bucket=np.where(probe["same_token"], "same token", "different token")
                     + ", " + np.where(probe["high_entropy"], "high entropy", "low entropy"))
    fig, ax = plt.subplots(figsize=figsize())
    sns.pointplot(d, x="tau", y="bucket", hue="peer_adv", errorbar=("ci", 95), seed=0,
                  dodge=0.4, linestyle="none", ax=ax)
    ax.axvline(0, color="k", lw=0.8)
    ax.set_xlabel("τ = Δ_full − Δ_mask of the target (nats)")
    ax.set_ylabel("masked peers")
    ax.legend(title="peer advantage")
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


def plot_seed_values(table: pd.DataFrame):
    """Each claim's per-seed statistic with the mechanism on and off (strip plot), one panel
    per claim (the units differ); ``table``: :func:`tokenbook.robustness.over_seeds`'s."""
    check_table(table, "table", columns=["seed", "mechanism", "claim_id", "value"])
    plt, sns = _plt()
    claims = list(pd.unique(table["claim_id"]))
    fig, axes = plt.subplots(1, len(claims), figsize=figsize(len(claims)), squeeze=False)
    for ax, cid in zip(axes[0], claims):
        sub = table[table["claim_id"] == cid]
        sns.stripplot(sub, x="mechanism", y="value", order=["on", "off"], size=6, ax=ax)
        ax.axhline(0, color="k", lw=0.6)
        ax.set_title(cid, fontsize=9)
        ax.set_xlabel("mechanism")
        ax.set_ylabel("per-seed statistic")
    fig.tight_layout()
    return fig
