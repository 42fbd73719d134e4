"""The cancellation chapter's per-seed statistics, their null controls, and a power analysis.

Each tiny-scale claim is a statistic computed from one seed's token tables (see
:func:`tokenbook.rl.experiments.seed_tables`), once with the paper's mechanism (*on*) and once
under a null control that needs no retraining (*off*):

* :func:`flip_balance` — on: one full-batch GRPO step; off: each rollout updated alone (no
  cross-rollout coupling);
* :func:`template_share_gap` — on: the world's token classes; off: class labels permuted over
  tokens (:func:`permute_within`);
* :func:`value_gap` — on: boosted / suppressed from the real Δ; off: direction permuted within
  each rollout sign;
* :func:`probe_gap` — on: the probe's peer buckets; off: bucket labels permuted within each
  target.

:func:`required_n` and :func:`power_table` turn a measured per-unit standard deviation into the
number of units (targets, seeds) a paired/one-sample t-test needs to detect an effect.

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
from typing import Sequence

import numpy as np
import pandas as pd

from ..validation import check_table

__all__ = ["permute_within", "flip_balance", "template_share_gap", "value_gap", "probe_gap",
           "seed_power", "coupling_summary",
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


def _template_share(delta: pd.Series, classes: np.ndarray) -> float:
    mass = delta.abs().to_numpy()
    total = mass.sum()
    return float(mass[classes == "template"].sum() / total) if total > 0 else float("nan")


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


def _bucket_names(probe: pd.DataFrame) -> np.ndarray:
    return (np.where(probe["same_token"], "same", "diff") + "/"
            + np.where(probe["high_entropy"], "high", "low"))


def probe_gap(probe: pd.DataFrame, buckets: np.ndarray | None = None) -> float:
    """Peer-masking gap (nats): mean over targets of [mean abs(τ) of same-token, high-entropy peer
    sets − the largest mean abs(τ) of the other three (token × entropy) buckets]; targets missing
    a bucket are skipped; NaN if none is left. ``buckets`` (strings ``same/high`` …) overrides
    the probe's buckets (the permuted-bucket control)."""
    check_table(probe, "probe", columns=["target", "same_token", "high_entropy", "tau"],
                numeric=["tau"], finite=["tau"])
    b = _bucket_names(probe) if buckets is None else np.asarray(buckets)
    t = pd.DataFrame({"target": probe["target"].to_numpy(), "bucket": b,
                      "abs_tau": probe["tau"].abs().to_numpy()})
    m = t.groupby(["target", "bucket"])["abs_tau"].mean().unstack()
    if "same/high" not in m.columns or m.shape[1] < 2:
        return float("nan")
    gap = (m["same/high"] - m.drop(columns="same/high").max(axis=1)).dropna()
    return float(gap.mean()) if len(gap) else float("nan")


def probe_bucket_summary(probe: pd.DataFrame, *, n_boot: int = 2000, seed: int = 0
                         ) -> pd.DataFrame:
    """Per peer bucket (same token × entropy × peer advantage sign): mean τ and mean abs(τ)
    (nats) with percentile bootstrap 95% CIs over targets (clustered: targets resampled),
    and the number of targets and sets."""
    check_table(probe, "probe", columns=["target", "same_token", "high_entropy", "peer_adv",
                                         "tau"], numeric=["tau"], finite=["tau"])
    rng = np.random.default_rng(seed)
    rows = []
    keys = ["same_token", "high_entropy", "peer_adv"]
    for key, g in probe.groupby(keys):
        per = g.assign(abs_tau=g["tau"].abs()).groupby("target")[["tau", "abs_tau"]].mean()
        row = dict(zip(keys, key), n_targets=len(per), n_sets=len(g))
        for col in ("tau", "abs_tau"):
            x = per[col].to_numpy()
            row[f"mean_{col}"] = float(x.mean())
            if x.size > 1:
                boots = x[rng.integers(0, x.size, (n_boot, x.size))].mean(1)
                row[f"{col}_lo"], row[f"{col}_hi"] = np.quantile(boots, [0.025, 0.975])
            else:
                row[f"{col}_lo"] = row[f"{col}_hi"] = float("nan")
        rows.append(row)
    return pd.DataFrame(rows)


# ----------------------------------------------------------------------------- power
def required_n(sd: float, effect: float, *, alpha: float = 0.05, power: float = 0.8,
               alternative: str = "two-sided") -> int:
    """Units (seeds, targets) a one-sample / paired t-test needs to detect a mean ``effect``
    when one unit's statistic has standard deviation ``sd`` (statsmodels ``TTestPower``);
    ≥ 2. Infinite effects or zero sd give 2; a zero effect gives a ValueError."""
    from statsmodels.stats.power import TTestPower

    if not (math.isfinite(sd) and sd >= 0):
        raise ValueError(f"sd must be a finite number ≥ 0, got {sd}")
    if not math.isfinite(effect) or effect == 0:
        raise ValueError(f"effect must be a finite non-zero number, got {effect}")
    if sd == 0:
        return 2
    d = abs(effect) / sd
    def pw(n: int) -> float:
        p = TTestPower().power(effect_size=d, nobs=n, alpha=alpha, alternative=alternative)
        return float(np.ravel(p)[0])

    hi = 2                                   # integer search: power grows with n
    while pw(hi) < power:
        if hi > 10 ** 9:
            raise ValueError(f"no sample size below 1e9 detects effect {effect} (sd {sd})")
        hi *= 2
    lo = max(2, hi // 2)
    if pw(lo) >= power:
        return lo
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if pw(mid) >= power else (mid, hi)
    return hi


def min_detectable_effect(sd: float, n: int, *, alpha: float = 0.05, power: float = 0.8) -> float:
    """The smallest mean effect (units of ``sd``'s statistic) that ``n`` units detect with the
    given power (two-sided one-sample t-test)."""
    from statsmodels.stats.power import TTestPower

    if n < 2:
        raise ValueError(f"n must be ≥ 2 units, got {n}")
    d = TTestPower().solve_power(nobs=n, alpha=alpha, power=power, alternative="two-sided")
    return float(d * sd)


def power_table(rows: Sequence[dict]) -> pd.DataFrame:
    """One row per probe/comparison: ``name, unit, n_now, sd, effect, effect_source`` in, plus
    ``n_needed`` (for 80% power at α = 0.05) and ``mde_now`` (the effect ``n_now`` units detect)."""
    out = []
    for r in rows:
        sd, eff, n = float(r["sd"]), float(r["effect"]), int(r["n_now"])
        ok = math.isfinite(sd) and math.isfinite(eff) and eff != 0
        out.append({**r, "n_needed": required_n(sd, eff) if ok else np.nan,
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
    """Per pair bucket of :func:`tokenbook.rl.dynamics.coupling_table`: mean φ, mean K
    (signed) and mean abs(K), each with a percentile bootstrap 95% CI over pairs, and n pairs.
    The signed mean shows anti-coupling (K < 0) that abs(K) hides."""
    check_table(coupling, "coupling", columns=["bucket", "phi", "K"], numeric=["phi", "K"],
                finite=["phi", "K"])
    rng = np.random.default_rng(seed)
    rows = []
    for b, g in coupling.groupby("bucket"):
        row = {"bucket": b, "n": len(g)}
        for name, x in (("phi", g["phi"].to_numpy()), ("K", g["K"].to_numpy()),
                        ("abs_K", np.abs(g["K"].to_numpy()))):
            row[name] = float(x.mean())
            if x.size > 1:
                boots = x[rng.integers(0, x.size, (n_boot, x.size))].mean(1)
                row[f"{name}_lo"], row[f"{name}_hi"] = np.quantile(boots, [0.025, 0.975])
            else:
                row[f"{name}_lo"] = row[f"{name}_hi"] = float("nan")
        rows.append(row)
    return pd.DataFrame(rows).set_index("bucket")
