"""Coupling by pair bucket with uncertainty, anti-coupling included (issue #15, item 5).

For two sampled tokens j, k of the same prompt's rollouts the output-layer kernel
K_jk = φ_jk (h_j·h_k) is the inner product of their output-layer gradients of log π
(:func:`tokenbook.cancellation_hypothesis.dynamics.coupling_table`; φ dimensionless, h·h in squared hidden-state
units). K > 0 *couples* (a step that raises one raises the other), K < 0 *anti-couples* (it
lowers the other). The abstract's claim concerns identical low-confidence tokens; φ of
*different* tokens, −π_j(a_k) − π_k(a_j) + ⟨π_j, π_k⟩, is negative when each position puts mass
on the other's token — low-confidence alternatives compete — and a mean of abs(K) or a
same-token-only view hides it. So every statistic is given signed and absolute, and the
different-token, both-low-confidence bucket is a row of its own.

* :func:`pair_buckets` — same/different token × confidence (both low, one low, both high:
  sampled-token probability below ``confidence`` = low).
* :func:`cluster_bootstrap_mean` — mean with a percentile bootstrap CI that resamples clusters
  (pairs of one prompt share tokens and hidden states, so pairs are not independent;
  :func:`tokenbook.stats.cluster_bootstrap_ci`).
* :func:`coupling_bucket_cis` — per bucket: mean K (signed), mean abs(K), the share of pairs with
  K < 0 and mean φ, each with a prompt-clustered bootstrap CI (tidy, one row per statistic);
  :func:`coupling_bucket_table` — the same, one row per bucket.

Example
-------
>>> import numpy as np
>>> m, lo, hi = cluster_bootstrap_mean(np.array([-1.0, -1.2, -0.8, -1.1]), n_boot=200)
>>> hi < 0
True
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from tokenbook import stats as tstats
from tokenbook.seeds import derive_seed
from tokenbook.validation import check_array, check_share, check_table

__all__ = ["CONFIDENCE_LEVELS", "ANTI_COUPLING_BUCKET", "pair_buckets", "cluster_bootstrap_mean",
           "coupling_bucket_cis", "coupling_bucket_table"]

#: confidence of a pair: how many of its two sampled tokens have probability below the threshold
CONFIDENCE_LEVELS = ("both low", "one low", "both high")
#: the bucket where different low-confidence tokens anti-couple
ANTI_COUPLING_BUCKET = "different token, both low"
BUCKET_ORDER = tuple(f"{t} token, {c}" for t in ("same", "different") for c in CONFIDENCE_LEVELS)
STATISTICS = {"K": "mean K (signed)", "abs_K": "mean |K|", "anti": "share of pairs with K < 0",
              "phi": "mean φ (signed)"}


def pair_buckets(same_token, p_j, p_k, *, confidence: float = 0.5) -> np.ndarray:
    """Bucket label of each pair, ``"<same|different> token, <both low|one low|both high>"``;
    ``same_token`` [P] bool, ``p_j``, ``p_k`` [P] sampled-token probabilities in [0, 1]."""
    same = check_array(same_token, "same_token", ndim=1)
    pj = check_array(p_j, "p_j", shape=(same.size,))
    pk = check_array(p_k, "p_k", shape=(same.size,))
    confidence = check_share(confidence, "confidence", open_low=True)
    if ((pj < 0) | (pj > 1) | (pk < 0) | (pk > 1)).any():
        raise ValueError("p_j and p_k must be probabilities in [0, 1] (exp of log-probs)")
    n_low = (pj < confidence).astype(int) + (pk < confidence).astype(int)
    level = np.array(["both high", "one low", "both low"])[n_low]
    token = np.where(same.astype(bool), "same token", "different token")
    return np.char.add(np.char.add(token.astype(str), ", "), level.astype(str))


def cluster_bootstrap_mean(x, clusters=None, *, n_boot: int = 2000, seed: int = 0,
                           level: float = 0.95) -> tuple[float, float, float]:
    """(mean, lo, hi) of ``x`` [n] with the percentile bootstrap CI at ``level`` of
    :func:`tokenbook.stats.cluster_bootstrap_ci`: whole ``clusters`` [n] (labels) resampled,
    each draw's statistic the mean over the pairs of the drawn clusters (a ratio estimator);
    without ``clusters`` the values themselves. Seeded; the CI is NaN with fewer than two
    clusters (values)."""
    x = check_array(x, "x", ndim=1).astype(float)
    labels = np.arange(x.size) if clusters is None else clusters
    lo, hi = tstats.cluster_bootstrap_ci(x, labels, n_boot=n_boot, seed=seed, level=level)
    return float(x.mean()), lo, hi


def coupling_bucket_cis(coupling: pd.DataFrame, *, confidence: float = 0.5,
                        cluster: str | None = "prompt_id", n_boot: int = 2000, seed: int = 0,
                        level: float = 0.95) -> pd.DataFrame:
    """Per pair bucket of a :func:`tokenbook.cancellation_hypothesis.dynamics.coupling_table` (every bucket of
    :func:`pair_buckets`, empty ones included with n = 0): one row per statistic —
    ``K`` (mean signed K), ``abs_K`` (mean abs(K)), ``anti`` (share of pairs with K < 0),
    ``phi`` (mean signed φ) — with a bootstrap CI at ``level`` that resamples ``cluster``
    (prompts; None: pairs), seeded.

    Columns ``bucket, token, confidence, statistic, label, mean, lo, hi, n_pairs,
    n_clusters, excludes_null`` (the CI lies strictly on one side of the null: 0 for the means,
    0.5 for ``anti``) and ``anti_coupling`` (True on :data:`ANTI_COUPLING_BUCKET`). Units: K in
    squared hidden-state units (φ dimensionless × h·h), shares in [0, 1]. Each (bucket,
    statistic) draws from its own stream ``derive_seed(seed, "coupling-ci", bucket,
    statistic)``."""
    need = ["same_token", "p_j", "p_k", "phi", "K"] + ([cluster] if cluster else [])
    check_table(coupling, "coupling", columns=need, numeric=["p_j", "p_k", "phi", "K"],
                finite=["p_j", "p_k", "phi", "K"])
    buckets = pair_buckets(coupling["same_token"].to_numpy(), coupling["p_j"].to_numpy(),
                           coupling["p_k"].to_numpy(), confidence=confidence)
    K = coupling["K"].to_numpy(dtype=float)
    values = {"K": K, "abs_K": np.abs(K), "anti": (K < 0).astype(float),
              "phi": coupling["phi"].to_numpy(dtype=float)}
    cl = coupling[cluster].to_numpy() if cluster else np.arange(len(coupling))
    rows = []
    for b in BUCKET_ORDER:
        m = buckets == b
        token, conf = b.split(", ")
        for stat, label in STATISTICS.items():
            row = {"bucket": b, "token": token, "confidence": conf, "statistic": stat,
                   "label": label, "n_pairs": int(m.sum()),
                   "n_clusters": int(pd.unique(cl[m]).size)}
            if m.any():
                mean, lo, hi = cluster_bootstrap_mean(values[stat][m], cl[m], n_boot=n_boot,
                                                      seed=derive_seed(seed, "coupling-ci", b,
                                                                       stat), level=level)
            else:
                mean = lo = hi = float("nan")
            ref = 0.5 if stat == "anti" else 0.0
            row.update(mean=mean, lo=lo, hi=hi,
                       excludes_null=bool(np.isfinite(lo) and (lo > ref or hi < ref)),
                       anti_coupling=b == ANTI_COUPLING_BUCKET)
            rows.append(row)
    return pd.DataFrame(rows)


def coupling_bucket_table(cis: pd.DataFrame) -> pd.DataFrame:
    """:func:`coupling_bucket_cis` with one row per bucket (index ``bucket``, in
    :data:`BUCKET_ORDER`): ``n_pairs, n_prompts`` and for each statistic ``<stat>``,
    ``<stat>_lo``, ``<stat>_hi``."""
    check_table(cis, "cis", columns=["bucket", "statistic", "mean", "lo", "hi", "n_pairs",
                                     "n_clusters"])
    wide = cis.pivot(index="bucket", columns="statistic", values=["mean", "lo", "hi"])
    out = pd.DataFrame(index=pd.Index([b for b in BUCKET_ORDER if b in wide.index],
                                      name="bucket"))
    first = cis.drop_duplicates("bucket").set_index("bucket")
    out["n_pairs"] = first["n_pairs"]
    out["n_prompts"] = first["n_clusters"]
    for stat in STATISTICS:
        if ("mean", stat) in wide.columns:
            out[stat] = wide[("mean", stat)]
            out[f"{stat}_lo"] = wide[("lo", stat)]
            out[f"{stat}_hi"] = wide[("hi", stat)]
    return out
