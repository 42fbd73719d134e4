"""The cancellation chapter's per-seed statistics, their null controls, and a power analysis.

Each tiny-scale claim is a statistic computed from one seed's token tables (see
:func:`tokenbook.cancellation_hypothesis.experiments.seed_tables`), once with the paper's mechanism (*on*) and once
under a null control that needs no retraining (*off*):

* :func:`flip_excess` — on: the full-batch GRPO step's flip ratio minus the isolated
  control's (every rollout updated alone), the smaller over the two advantage signs; off: the
  isolated control against itself (0 by construction); known answer
  :func:`predicted_flip_excess` (the closed-form first-order output-layer step);
* :func:`flip_balance` — a description, not a claim: min/max of the two flip ratios (on: the
  full-batch step; off: each rollout alone, which shows the same balance);
* :func:`template_share_gap` — on: the world's token classes; off: class labels permuted over
  tokens (:func:`permute_within`);
* :func:`value_gap` — on: boosted / suppressed from the real Δ; off: direction permuted within
  each rollout sign;
* :func:`probe_gap` — on: the probe's peer buckets; off: bucket labels permuted within each
  target.

:func:`probe_bucket_summary` gives the probe's per-bucket τ with CIs over targets (random
peer sets, and the authors' top-scored set beside them); :func:`probe_power` the targets each
bucket needs. :func:`required_n` and :func:`power_table` turn a measured per-unit standard
deviation into the number of units (targets, seeds) a paired/one-sample t-test needs to detect
an effect.

Example
-------
>>> import numpy as np
>>> sorted(permute_within(np.array(["a", "b", "c", "d"]), np.array([0, 0, 1, 1]), 0)[:2].tolist())
['a', 'b']
>>> required_n(sd=1.0, effect=0.5) >= 30
True
"""

from __future__ import annotations

import math
import warnings
from typing import Sequence

import numpy as np
import pandas as pd
from scipy import stats as scipy_stats
from sklearn.metrics import cohen_kappa_score
from statsmodels.stats.power import TTestPower
from statsmodels.tools.sm_exceptions import ConvergenceWarning

from tokenbook.seeds import derive_seed
from tokenbook.stats import bootstrap_ci
from tokenbook.validation import check_table

__all__ = ["permute_within", "flip_balance", "flip_excess", "flip_excess_by_sign",
           "predicted_flip_excess",
           "first_order_flip_excess", "coupling_dominance", "label_agreement", "sign_agreement", "scored_tokens", "boosted_share",
           "template_confidence", "template_share_gap", "value_gap", "probe_gap",
           "seed_power", "coupling_summary", "random_sets", "probe_power",
           "probe_bucket_summary", "required_n", "min_detectable_effect", "power_table"]


def permute_within(labels: np.ndarray, groups: np.ndarray | None, seed: int) -> np.ndarray:
    """``labels`` permuted (seeded) within each value of ``groups`` (all together if None):
    the label-permutation null. Shapes: [N] and [N]."""
    labels = np.asarray(labels)
    rng = np.random.default_rng(seed)
    if groups is None:
        return labels[rng.permutation(len(labels))]
    groups = np.asarray(groups)
    if groups.shape != labels.shape:
        raise ValueError(f"groups must have the shape of labels {labels.shape}, "
                         f"got {groups.shape}")
    out = labels.copy()
    for g in pd.unique(groups):
        idx = np.flatnonzero(groups == g)
        out[idx] = labels[idx[rng.permutation(idx.size)]]
    return out


def flip_balance(table: pd.DataFrame) -> float:
    """min/max of the two flip ratios — Pr(Δ < 0 | correct) and Pr(Δ > 0 | failed) — of a token
    dynamics table (1 = equal shares, 0 = one sign never flips); NaN if a sign is missing."""
    check_table(table, "table", columns=["reward", "delta"], numeric=["reward", "delta"],
                finite=["delta"])
    correct = table["reward"] > 0
    if correct.all() or (~correct).all():
        return float("nan")
    fc = float((table.loc[correct, "delta"] < 0).mean())
    ff = float((table.loc[~correct, "delta"] > 0).mean())
    hi = max(fc, ff)
    return min(fc, ff) / hi if hi > 0 else float("nan")


def _signed_tokens(table: pd.DataFrame) -> np.ndarray:
    """Mask of the tokens whose own term has a sign: in the loss (when the table says) and
    advantage ≠ 0. Shape [len(table)]."""
    keep = table["advantage"].to_numpy() != 0
    if "in_loss" in table:
        keep &= table["in_loss"].to_numpy().astype(bool)
    return keep


def _signed_flip_ratios(table: pd.DataFrame, delta: str = "delta") -> dict[str, float]:
    """Pr(Δ < 0 | A > 0) and Pr(Δ > 0 | A < 0) over the tokens whose own term has a sign
    (in the loss, advantage ≠ 0): ``{"positive": …, "negative": …}``, NaN where a sign has
    no token."""
    keep = _signed_tokens(table)
    adv, d = table["advantage"].to_numpy()[keep], table[delta].to_numpy()[keep]
    pos, neg = adv > 0, adv < 0
    return {"positive": float((d[pos] < 0).mean()) if pos.any() else float("nan"),
            "negative": float((d[neg] > 0).mean()) if neg.any() else float("nan")}


def flip_excess_by_sign(full: pd.DataFrame, isolated: pd.DataFrame, *,
                        delta_full: str = "delta", delta_isolated: str = "delta"
                        ) -> dict[str, float]:
    """Per advantage sign, the flip ratio of the full-batch step − that of the isolated
    control (a difference of shares): ``{"positive": …, "negative": …}``, NaN where a sign has
    no token. :func:`flip_excess` is the smaller of the two; this says which sign sets it.

    >>> t = pd.DataFrame({"advantage": [1., 1., -1., -1.], "delta": [-1., 1., 1., 1.]})
    >>> flip_excess_by_sign(t, t.assign(delta=[1., 1., -1., 1.]))
    {'positive': 0.5, 'negative': 0.5}
    """
    for name, t, col in (("full", full, delta_full), ("isolated", isolated, delta_isolated)):
        check_table(t, name, columns=["advantage", col], numeric=["advantage", col],
                    finite=[col])
    if len(full) != len(isolated):
        raise ValueError(f"flip_excess: the full ({len(full)} tokens) and isolated "
                         f"({len(isolated)}) tables must hold the same tokens of one batch")
    f = _signed_flip_ratios(full, delta_full)
    i = _signed_flip_ratios(isolated, delta_isolated)
    return {k: f[k] - i[k] for k in ("positive", "negative")}


def flip_excess(full: pd.DataFrame, isolated: pd.DataFrame, *, delta_full: str = "delta",
                delta_isolated: str = "delta") -> float:
    """The flips cross-rollout coupling adds: min over the two advantage signs of (flip ratio
    of the full-batch step − flip ratio of the isolated control), a difference of shares.

    A token *flips* when its Δ log π has the sign opposite to its own advantage (Δ < 0 with
    A > 0, Δ > 0 with A < 0); only tokens in the loss with A ≠ 0 count (a token without an
    advantage has no sign to flip against). ``full`` and ``isolated`` are token dynamics tables
    of the same batch (:func:`tokenbook.cancellation_hypothesis.dynamics.token_dynamics` and
    :func:`~tokenbook.cancellation_hypothesis.dynamics.token_dynamics_isolated`) or one first-order table with two
    Δ columns (``delta_full``/``delta_isolated``). > 0: coupling across rollouts flips tokens
    of both signs that the rollout's own update would not flip. ``flip_excess(t, t)`` is 0.
    NaN when a sign has no token.

    >>> t = pd.DataFrame({"advantage": [1., 1., -1., -1.], "delta": [-1., 1., 1., -1.]})
    >>> i = t.assign(delta=[1., 1., -1., -1.])
    >>> flip_excess(t, i), flip_excess(i, i)
    (0.5, 0.0)
    """
    gaps = list(flip_excess_by_sign(full, isolated, delta_full=delta_full,
                                    delta_isolated=delta_isolated).values())
    return float("nan") if any(math.isnan(x) for x in gaps) else float(min(gaps))


def predicted_flip_excess(first_order: pd.DataFrame) -> float:
    """The known answer of :func:`flip_excess`: the same statistic on the closed-form
    first-order prediction of an output-layer SGD step
    (:func:`tokenbook.cancellation_hypothesis.dynamics.first_order_prediction`), full batch (``self + within +
    across``) against every rollout alone (``self + within``). Uses no trained update: only
    the policy's logits and hidden states on the batch."""
    check_table(first_order, "first-order table",
                columns=["advantage", "self", "within_rollout", "across_rollouts"])
    t = first_order.assign(
        full=first_order["self"] + first_order["within_rollout"]
        + first_order["across_rollouts"],
        alone=first_order["self"] + first_order["within_rollout"])
    return flip_excess(t, t, delta_full="full", delta_isolated="alone")


def coupling_dominance(first_order: pd.DataFrame) -> float:
    """Share of the scored tokens (loss tokens with A ≠ 0) whose cross-rollout first-order term
    outweighs their own rollout's: the tokens the other rollouts can turn against their own
    update. The isolated control has no cross-rollout term, so its share is 0. NaN without
    scored tokens.

    ``first_order``: either the closed form of an output-layer step
    (:func:`tokenbook.cancellation_hypothesis.dynamics.first_order_prediction`: ``abs(across)
    > abs(self + within)``) or the exact first-order Δ of the full-model step
    (:func:`tokenbook.cancellation_hypothesis.dynamics.first_order_full`, columns ``full`` and
    ``alone``: ``abs(full − alone) > abs(alone)``).

    >>> t = pd.DataFrame({"advantage": [1., 1., -1.], "self": [1., 1., -1.],
    ...                   "within_rollout": [0., 0., 0.], "across_rollouts": [-2., 0.5, 3.]})
    >>> round(coupling_dominance(t), 3)
    0.667
    >>> f = pd.DataFrame({"advantage": [1., -1.], "full": [-1., -0.5], "alone": [1., -1.]})
    >>> coupling_dominance(f)
    0.5
    """
    if {"full", "alone"} <= set(first_order.columns):
        check_table(first_order, "first-order table", columns=["advantage", "full", "alone"],
                    numeric=["full", "alone"])
        own = first_order["alone"].to_numpy()
        across = first_order["full"].to_numpy() - own
    else:
        check_table(first_order, "first-order table",
                    columns=["advantage", "self", "within_rollout", "across_rollouts"],
                    numeric=["self", "within_rollout", "across_rollouts"])
        own = (first_order["self"] + first_order["within_rollout"]).to_numpy()
        across = first_order["across_rollouts"].to_numpy()
    keep = _signed_tokens(first_order)
    if not keep.any():
        return float("nan")
    return float((np.abs(across[keep]) > np.abs(own[keep])).mean())


def label_agreement(used: Sequence[str], own: Sequence[str]) -> float:
    """Cohen's κ of the labels a statistic reads (``used``) with the tokens' own (``own``):
    1 when they are the tokens' own, about 0 after a permutation — the manipulation check of
    the claims whose off control permutes labels (``boosted-higher-value``: directions within
    rollout sign; ``peer-masking-same-high-entropy``: buckets within target). NaN with fewer
    than two rows or a single label.

    >>> label_agreement(["a", "b", "a", "b"], ["a", "b", "a", "b"])
    1.0
    >>> label_agreement(["b", "a", "a", "b"], ["a", "b", "a", "b"])
    0.0
    """
    used, own = np.asarray(used).astype(str), np.asarray(own).astype(str)
    if used.shape != own.shape:
        raise ValueError(f"label_agreement: {len(used)} labels read, {len(own)} own; give one "
                         f"of each per row")
    if len(own) < 2 or len(set(own) | set(used)) < 2:
        return float("nan")
    return float(cohen_kappa_score(used, own))


def first_order_flip_excess(first_order_full: pd.DataFrame) -> float:
    """The known answer of :func:`flip_excess` for the step the chapter measures: the same
    statistic on the exact first-order Δ of that full-model SGD step on the same batch
    (:func:`tokenbook.cancellation_hypothesis.dynamics.first_order_full`: ``full`` the whole batch, ``alone``
    every rollout updated alone). Uses no trained update, only gradients of the policy."""
    check_table(first_order_full, "first-order table",
                columns=["advantage", "full", "alone"], numeric=["full", "alone"])
    return flip_excess(first_order_full, first_order_full, delta_full="full",
                       delta_isolated="alone")


def sign_agreement(table: pd.DataFrame, first_order_full: pd.DataFrame, column: str) -> float:
    """Share of loss tokens with A ≠ 0 whose measured Δ (``table``'s ``delta``) has the sign of
    their first-order Δ (``first_order_full[column]``, rows aligned): 1 when the step is in
    the first-order regime, where the known answer applies."""
    check_table(table, "table", columns=["advantage", "delta"], finite=["delta"])
    check_table(first_order_full, "first-order table", columns=[column])
    if len(table) != len(first_order_full):
        raise ValueError(f"sign_agreement: the table ({len(table)} tokens) and the first-order "
                         f"table ({len(first_order_full)}) must hold the same tokens")
    keep = _signed_tokens(table)
    a = np.sign(table["delta"].to_numpy()[keep])
    b = np.sign(first_order_full[column].to_numpy()[keep])
    return float((a == b).mean()) if keep.any() else float("nan")


def scored_tokens(table: pd.DataFrame) -> float:
    """How many tokens the flip ratios score: loss tokens with A ≠ 0 (the flip excess's
    balance: the full step and the isolated control must score the same tokens)."""
    check_table(table, "table", columns=["advantage"])
    keep = _signed_tokens(table)
    return float(keep.sum())


def boosted_share(values: pd.DataFrame, direction: np.ndarray | None = None) -> float:
    """Mean over rollout signs of the share of valued tokens labelled boosted (the value
    claim's balance: permuting directions within each sign keeps it); NaN without tokens."""
    check_table(values, "values", columns=["rollout", "direction"])
    d = values["direction"].to_numpy() if direction is None else np.asarray(direction)
    shares = [float((d[values["rollout"].to_numpy() == sign] == "boosted").mean())
              for sign in ("correct", "incorrect")
              if (values["rollout"].to_numpy() == sign).any()]
    return float(np.mean(shares)) if shares else float("nan")


def _template_share(delta: pd.Series, classes: np.ndarray) -> float:
    mass = delta.abs().to_numpy()
    total = mass.sum()
    return float(mass[classes == "template"].sum() / total) if total > 0 else float("nan")


def template_confidence(table: pd.DataFrame) -> dict[str, float]:
    """How movable the template tokens of a batch are before the update: ``mean_p`` (mean
    probability of the sampled template tokens, exp of ``logp_before``) and ``entropy`` (mean
    entropy of the policy at those positions, nats). A template the SFT has made certain
    (mean p near 1) leaves the update almost nothing to move."""
    check_table(table, "table", columns=["class", "logp_before", "entropy"])
    t = table[table["class"] == "template"]
    if t.empty:
        return {"mean_p": float("nan"), "entropy": float("nan")}
    return {"mean_p": float(np.exp(t["logp_before"]).mean()),
            "entropy": float(t["entropy"].mean())}


def template_share_gap(grpo: pd.DataFrame, psr: pd.DataFrame,
                       classes: np.ndarray | None = None) -> float:
    """Template share of the update mass Σ abs(Δ) under GRPO minus under positive-only (PSR), on
    the same sampled tokens (rows aligned). ``classes`` overrides the tables' ``class`` column
    (the permuted-label control). Negative = GRPO moves template tokens less."""
    for name, t in (("grpo", grpo), ("psr", psr)):
        check_table(t, name, columns=["class", "delta"], numeric=["delta"], finite=["delta"])
    if len(grpo) != len(psr):
        raise ValueError(f"grpo and psr must hold the same tokens, got {len(grpo)} and "
                         f"{len(psr)} rows: compute both tables from one rollout batch")
    cls = grpo["class"].to_numpy() if classes is None else np.asarray(classes)
    if len(cls) != len(grpo):
        raise ValueError(f"classes must have one label per row ({len(grpo)}), got {len(cls)}")
    return _template_share(grpo["delta"], cls) - _template_share(psr["delta"], cls)


def value_gap(values: pd.DataFrame, direction: np.ndarray | None = None) -> float:
    """min over rollout signs (correct, incorrect) of mean MC value of boosted tokens minus
    suppressed ones (success rate, in [−1, 1]); NaN if a cell is empty. ``direction``
    overrides the table's ``direction`` column (the permuted-direction control)."""
    check_table(values, "values", columns=["rollout", "direction", "value"], numeric=["value"])
    d = values["direction"].to_numpy() if direction is None else np.asarray(direction)
    gaps = []
    for sign in ("correct", "incorrect"):
        m = values["rollout"].to_numpy() == sign
        v = values["value"].to_numpy()
        b, s = v[m & (d == "boosted")], v[m & (d == "suppressed")]
        if b.size == 0 or s.size == 0:
            return float("nan")
        gaps.append(float(b.mean() - s.mean()))
    return min(gaps)


def probe_bucket_names(probe: pd.DataFrame) -> np.ndarray:
    """Each probe row's bucket: ``same``/``diff`` token × ``high``/``low`` entropy."""
    return (np.where(probe["same_token"], "same", "diff") + "/"
            + np.where(probe["high_entropy"], "high", "low"))


def random_sets(probe: pd.DataFrame) -> pd.DataFrame:
    """The probe's random peer sets: rows with ``top_scored`` False (all rows of a table
    without that column)."""
    if "top_scored" not in probe.columns:
        return probe
    return probe[~probe["top_scored"].astype(bool).to_numpy()]


def _units(probe: pd.DataFrame) -> pd.Series:
    """The probe's independent units: ``target`` (``seed:target`` when a ``seed`` column
    pools several seeds' probes)."""
    if "seed" in probe.columns:
        return probe["seed"].astype(str) + ":" + probe["target"].astype(str)
    return probe["target"].astype(str)


def probe_gap(probe: pd.DataFrame, buckets: np.ndarray | None = None) -> float:
    """Peer-masking gap (nats): mean over targets of [mean abs(τ) of same-token, high-entropy peer
    sets − the largest mean abs(τ) of the other three (token × entropy) buckets]; targets missing
    a bucket are skipped; NaN if none is left. Random peer sets only (:func:`random_sets`: the
    top-scored set is chosen by entropy and advantage, so it is no sample of its bucket).
    ``buckets`` (strings ``same/high`` …, one per row of ``probe``) overrides the probe's
    buckets (the permuted-bucket control)."""
    check_table(probe, "probe", columns=["target", "same_token", "high_entropy", "tau"],
                numeric=["tau"], finite=["tau"])
    b = probe_bucket_names(probe) if buckets is None else np.asarray(buckets)
    if len(b) != len(probe):
        raise ValueError(f"buckets must have one label per probe row ({len(probe)}), "
                         f"got {len(b)}")
    keep = (~probe["top_scored"].astype(bool).to_numpy() if "top_scored" in probe.columns
            else np.ones(len(probe), bool))
    t = pd.DataFrame({"target": _units(probe).to_numpy(), "bucket": b,
                      "abs_tau": probe["tau"].abs().to_numpy()})[keep]
    m = t.groupby(["target", "bucket"])["abs_tau"].mean().unstack()
    if "same/high" not in m.columns or m.shape[1] < 2:
        return float("nan")
    gap = (m["same/high"] - m.drop(columns="same/high").max(axis=1)).dropna()
    return float(gap.mean()) if len(gap) else float("nan")


def _boot_mean_ci(x: np.ndarray, seed: int, n_boot: int) -> tuple[float, float]:
    """Percentile bootstrap 95% CI of the mean of ``x`` (:func:`tokenbook.stats.bootstrap_ci`);
    NaN for fewer than 2 values."""
    if x.size < 2:
        return float("nan"), float("nan")
    return bootstrap_ci(x, n_boot=n_boot, seed=seed)


PROBE_KEYS = ["same_token", "high_entropy", "peer_adv"]


def probe_bucket_summary(probe: pd.DataFrame, *, n_boot: int = 2000, seed: int = 0
                         ) -> pd.DataFrame:
    """Per peer bucket (same token × entropy × peer advantage sign), over targets (each
    target's mean over its sets first; percentile bootstrap 95% CIs resample targets, or
    ``seed:target`` units when a ``seed`` column pools seeds):

    * random sets: ``mean_tau`` [``tau_lo``, ``tau_hi``] and ``mean_abs_tau``
      [``abs_tau_lo``, ``abs_tau_hi``] (nats), ``n_targets``, ``n_sets`` (rows);
    * the authors' top-scored set, beside them (when the probe has a ``top_scored`` column):
      ``top_tau`` [``top_tau_lo``, ``top_tau_hi``] and ``top_abs_tau`` (nats);
    * ``excludes_zero``: whether the random sets' CI of the mean τ excludes 0.
    """
    check_table(probe, "probe", columns=["target", "same_token", "high_entropy", "peer_adv",
                                         "tau"], numeric=["tau"], finite=["tau"])
    d = probe.assign(unit=_units(probe).to_numpy(), abs_tau=probe["tau"].abs().to_numpy())
    rand = random_sets(d)
    top = d[d["top_scored"].astype(bool).to_numpy()] if "top_scored" in d.columns else None
    rows = []
    for key, g in rand.groupby(PROBE_KEYS):
        per = g.groupby("unit")[["tau", "abs_tau"]].mean()
        row = dict(zip(PROBE_KEYS, key), n_targets=len(per), n_sets=len(g))
        for col in ("tau", "abs_tau"):
            x = per[col].to_numpy()
            row[f"mean_{col}"] = float(x.mean())
            row[f"{col}_lo"], row[f"{col}_hi"] = _boot_mean_ci(
                x, derive_seed(seed, "probe-bucket", *map(str, key), col), n_boot)
        row["excludes_zero"] = bool(row["tau_lo"] > 0 or row["tau_hi"] < 0)
        if top is not None:
            sel = np.ones(len(top), bool)
            for k, v in zip(PROBE_KEYS, key):
                sel &= (top[k] == v).to_numpy()
            per_top = top[sel].groupby("unit")[["tau", "abs_tau"]].mean()
            x = per_top["tau"].to_numpy()
            row["top_tau"] = float(x.mean()) if x.size else float("nan")
            row["top_tau_lo"], row["top_tau_hi"] = _boot_mean_ci(
                x, derive_seed(seed, "probe-bucket", *map(str, key), "top"), n_boot)
            row["top_abs_tau"] = (float(per_top["abs_tau"].mean()) if x.size
                                  else float("nan"))
        rows.append(row)
    return pd.DataFrame(rows)


def probe_power(probe: pd.DataFrame, *, updates_per_target: int | None = None
                ) -> pd.DataFrame:
    """How many targets the peer-masking probe needs (80% power, α = 0.05, two-sided
    one-sample t-test over targets, :func:`power_table`), from the per-target spread measured
    in ``probe`` (random sets only):

    * one row per peer bucket (``same/high/positive`` …): the per-target mean τ (nats), so that
      its CI excludes 0 when the measured mean is the true one;
    * ``same/high gap``: the per-target contrast of :func:`probe_gap` (nats), the claim's
      statistic.

    The effect is the one measured here (``effect_source``), as no published effect size is
    available. Columns: those of :func:`power_table` (``n_now`` = targets in ``probe``), plus
    ``n_per_seed`` (targets per seed when a ``seed`` column pools seeds) and
    ``updates_needed`` (masked SGD updates ``n_needed`` targets cost: ``updates_per_target``,
    default 8 buckets × (random sets + 1 top-scored) as found in ``probe``).
    """
    check_table(probe, "probe", columns=["target", "same_token", "high_entropy", "peer_adv",
                                         "set", "tau"], numeric=["tau"], finite=["tau"])
    d = probe.assign(unit=_units(probe).to_numpy())
    rand = random_sets(d)
    n_seeds = int(d["seed"].nunique()) if "seed" in d.columns else 1
    if updates_per_target is None:
        n_random = int(rand["set"].max()) + 1 if len(rand) else 0
        updates_per_target = 8 * (n_random + ("top_scored" in d.columns))
    rows = []

    def add(name: str, x: np.ndarray, what: str) -> None:
        rows.append({"name": name, "unit": "targets", "n_now": int(x.size),
                     "sd": float(x.std(ddof=1)) if x.size > 1 else float("nan"),
                     "effect": float(x.mean()) if x.size else float("nan"),
                     "effect_source": what})

    for key, g in rand.groupby(PROBE_KEYS):
        same, high, sign = key
        name = (f"{'same' if same else 'diff'}/{'high' if high else 'low'}/{sign}")
        add(name, g.groupby("unit")["tau"].mean().to_numpy(), "measured mean τ (random sets)")
    b = probe_bucket_names(rand)
    m = (pd.DataFrame({"unit": rand["unit"].to_numpy(), "bucket": b,
                       "abs_tau": rand["tau"].abs().to_numpy()})
         .groupby(["unit", "bucket"])["abs_tau"].mean().unstack())
    if "same/high" in m.columns and m.shape[1] > 1:
        gap = (m["same/high"] - m.drop(columns="same/high").max(axis=1)).dropna().to_numpy()
        add("same/high gap", gap, "measured mean gap (the claim's statistic)")
    out = power_table(rows)
    out["n_per_seed"] = out["n_now"] / n_seeds
    out["updates_needed"] = out["n_needed"] * updates_per_target
    return out


# ----------------------------------------------------------------------------- power
def required_n(sd: float, effect: float, *, alpha: float = 0.05, power: float = 0.8,
               alternative: str = "two-sided") -> int:
    """Units (seeds, targets) a one-sample / paired t-test needs to detect a mean ``effect``
    when one unit's statistic has standard deviation ``sd`` (statsmodels ``TTestPower``);
    ≥ 2: the smallest whole number whose power reaches ``power``. Zero sd gives 2; a zero or
    non-finite effect gives a ValueError."""
    if not (math.isfinite(sd) and sd >= 0):
        raise ValueError(f"sd must be a finite number ≥ 0, got {sd}")
    if not math.isfinite(effect) or effect == 0:
        raise ValueError(f"effect must be a finite non-zero number, got {effect}")
    if sd == 0:
        return 2
    d = abs(effect) / sd
    test = TTestPower()

    def enough(n: int) -> bool:
        with np.errstate(all="ignore"):
            p = test.power(effect_size=d, nobs=n, alpha=alpha, alternative=alternative)
        if math.isnan(p):   # statsmodels' lower tail is NaN for huge effects: the upper alone
            tails = 2 if alternative == "two-sided" else 1
            p = float(scipy_stats.nct.sf(scipy_stats.t.isf(alpha / tails, n - 1), n - 1,
                                         d * math.sqrt(n)))
        return p >= power

    with warnings.catch_warnings():     # huge effects: the root finder gives NaN near n = 2
        warnings.simplefilter("ignore", ConvergenceWarning)
        try:
            n_est = float(np.ravel(test.solve_power(effect_size=d, alpha=alpha, power=power,
                                                    alternative=alternative))[0])
        except (ValueError, RuntimeError, OverflowError):
            n_est = math.nan
    if math.isnan(n_est) and d >= 1:   # a huge effect: a few units; walk up from 2
        n_est = 2.0
    if not n_est <= 10 ** 9:           # NaN or beyond 1e9
        raise ValueError(f"no sample size below 1e9 detects effect {effect} (sd {sd})")
    n = max(2, math.ceil(n_est - 1e-9))       # the smallest whole n with enough power
    while n > 2 and enough(n - 1):
        n -= 1
    while not enough(n):
        n += 1
    return n


def min_detectable_effect(sd: float, n: int, *, alpha: float = 0.05, power: float = 0.8) -> float:
    """The smallest mean effect (units of ``sd``'s statistic) that ``n`` units detect with the
    given power (two-sided one-sample t-test)."""
    if n < 2:
        raise ValueError(f"n must be ≥ 2 units, got {n}")
    d = TTestPower().solve_power(nobs=n, alpha=alpha, power=power, alternative="two-sided")
    return float(np.ravel(d)[0] * sd)     # statsmodels may return a 1-element array


def power_table(rows: Sequence[dict]) -> pd.DataFrame:
    """One row per probe/comparison: ``name, unit, n_now, sd, effect, effect_source`` in, plus
    ``n_needed`` (for 80% power at α = 0.05; NaN without an effect, inf beyond 1e9 units) and
    ``mde_now`` (the effect ``n_now`` units detect)."""
    def needed(sd: float, eff: float) -> float:
        if not (math.isfinite(sd) and math.isfinite(eff) and eff != 0):
            return np.nan
        try:
            return required_n(sd, eff)
        except ValueError:            # no sample size below 1e9 detects it
            return np.inf

    out = []
    for r in rows:
        sd, eff, n = float(r["sd"]), float(r["effect"]), int(r["n_now"])
        out.append({**r, "n_needed": needed(sd, eff),
                    "mde_now": min_detectable_effect(sd, n) if math.isfinite(sd) and n >= 2
                    else np.nan})
    return pd.DataFrame(out)


def seed_power(table: pd.DataFrame) -> pd.DataFrame:
    """Per claim of an :func:`tokenbook.robustness.over_seeds` table: the per-seed paired
    difference on − off (same seed), its mean and sd, the seeds needed to detect that mean
    (80% power, α = 0.05) and the effect the seeds at hand detect."""
    check_table(table, "table", columns=["seed", "mechanism", "claim_id", "value"],
                numeric=["value"])
    rows = []
    for cid, g in table.groupby("claim_id", sort=False):
        if ":" in str(cid):        # known answers and manipulation checks: not claims
            continue
        w = g.pivot_table(index="seed", columns="mechanism", values="value")
        if not {"on", "off"} <= set(w.columns):
            continue
        d = (w["on"] - w["off"]).dropna().to_numpy()
        sd = float(d.std(ddof=1)) if d.size > 1 else float("nan")
        rows.append({"name": cid, "unit": "seeds", "n_now": int(d.size), "sd": sd,
                     "effect": float(d.mean()) if d.size else float("nan"),
                     "effect_source": "measured on − off"})
    return power_table(rows)


def coupling_summary(coupling: pd.DataFrame, *, n_boot: int = 1000, seed: int = 0
                     ) -> pd.DataFrame:
    """Per pair bucket of :func:`tokenbook.cancellation_hypothesis.dynamics.coupling_table`: mean φ, mean K
    (signed) and mean abs(K), each with a percentile bootstrap 95% CI over pairs, and n pairs.
    The signed mean shows anti-coupling (K < 0) that abs(K) hides."""
    check_table(coupling, "coupling", columns=["bucket", "phi", "K"], numeric=["phi", "K"],
                finite=["phi", "K"])
    rows = []
    for b, g in coupling.groupby("bucket"):
        row = {"bucket": b, "n": len(g)}
        for name, x in (("phi", g["phi"].to_numpy()), ("K", g["K"].to_numpy()),
                        ("abs_K", np.abs(g["K"].to_numpy()))):
            row[name] = float(x.mean())
            row[f"{name}_lo"], row[f"{name}_hi"] = _boot_mean_ci(
                x, derive_seed(seed, "coupling-bucket", str(b), name), n_boot)
        rows.append(row)
    return pd.DataFrame(rows).set_index("bucket")
