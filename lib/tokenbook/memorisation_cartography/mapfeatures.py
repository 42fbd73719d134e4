"""Map agreement and features by region: the authors' remaining §4 analyses.

Dankers et al. also build the map from sentence-level BLEU of greedy hypotheses instead of the
likelihood (the "hyp" map, notes §1.2) and print the Spearman ρ between the two maps' TM, GS and
CM (``section4.py::compute_correlation_LL_BLEU``); :func:`map_agreement` does that with a
bootstrap interval. For the 28 surface features (notes §4.1) they show the Spearman ρ between
features (:func:`feature_feature_correlations`; the feature–metric ρ is
:func:`tokenbook.memorisation_cartography.predict.feature_correlations`) and density plots of the features
per map region. :func:`feature_by_region` gives the tidy table for those plots and
:func:`region_feature_summary` a per-feature test that the regions differ, with regions from
e.g. :func:`tokenbook.memorisation_cartography.estimator.map_regions`.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence

import numpy as np
import pandas as pd
from scipy.stats import kruskal

from tokenbook.memorisation_cartography.crosslingual import paired_spearman
from tokenbook.stats import benjamini_hochberg
from tokenbook.validation import check_table

__all__ = ["feature_feature_correlations", "map_agreement", "feature_by_region",
           "region_feature_summary"]


def _inputs(inputs, what: str = "inputs") -> list[str]:
    inputs = [inputs] if isinstance(inputs, str) else list(inputs)
    if not inputs:
        raise ValueError(f"{what} is empty; pass the feature column names, e.g. FEATURES")
    if len(set(inputs)) != len(inputs):
        raise ValueError(f"{what} names a column more than once: {inputs}; pass each once")
    return inputs


def feature_feature_correlations(data: pd.DataFrame, inputs: Sequence[str]) -> pd.DataFrame:
    """Square Spearman ρ matrix among the ``inputs`` columns of ``data`` (one row per pair).

    Returns a ``len(inputs) × len(inputs)`` DataFrame indexed and labelled by ``inputs``:
    symmetric, unit diagonal; a constant input has an all-NaN row and column (diagonal included).
    Missing values are dropped pairwise (pandas ``corr(method="spearman")``). The authors mask
    abs(ρ) < 0.5 in their heatmap; that is left to the plot.

    Raises ValueError when ``inputs`` is empty or a column is missing or not numeric.
    """
    inputs = _inputs(inputs)
    check_table(data, "data", numeric=inputs)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # constant columns
        rho = data[inputs].astype(float).corr(method="spearman")
    const = [c for c in inputs if data[c].nunique(dropna=True) < 2]
    rho.loc[const, :] = np.nan
    rho.loc[:, const] = np.nan
    return rho


def map_agreement(likelihood_map: pd.DataFrame, bleu_map: pd.DataFrame, *,
                  metrics=("tm", "gs", "cm"), n_boot: int = 1000, seed: int = 0) -> pd.DataFrame:
    """Spearman ρ between the likelihood-based and the BLEU-based map, per metric.

    Each map has one row per training pair: ``pair_id`` and the ``metrics`` columns (TM, GS, CM;
    likelihood maps in gmp units, BLEU maps in BLEU/100 or BLEU points: ρ is rank-based, so the
    scale does not matter). Rows are matched by ``pair_id`` in any order; a pair with a missing
    value of a metric in either map is left out of that metric.

    Returns one row per metric: ``metric, rho, ci_low, ci_high, n`` with ``n`` the pairs used and
    the 95 % percentile interval over ``n_boot`` resamples of those pairs with replacement
    (``numpy.random.default_rng(seed)``, the same stream for every metric; NaN with
    ``n_boot=0``). ρ is NaN with fewer than 3 pairs or a constant metric.

    Raises ValueError for a missing column, a repeated ``pair_id`` in a map, or maps that share
    no ``pair_id``.
    """
    metrics = _inputs(metrics, "metrics")
    if n_boot < 0:
        raise ValueError(f"n_boot must be ≥ 0, got {n_boot}; pass 0 to skip the interval")
    for name, m in (("likelihood_map", likelihood_map), ("bleu_map", bleu_map)):
        check_table(m, name, columns=["pair_id", *metrics], numeric=metrics)
        if m["pair_id"].duplicated().any():
            dup = m.loc[m["pair_id"].duplicated(), "pair_id"].iloc[0]
            raise ValueError(f"{name} has pair_id {dup!r} more than once; keep one row per pair "
                             "(e.g. drop_duplicates('pair_id'))")
    both = likelihood_map[["pair_id", *metrics]].merge(
        bleu_map[["pair_id", *metrics]], on="pair_id", suffixes=("_ll", "_bleu"))
    if both.empty:
        raise ValueError("likelihood_map and bleu_map share no pair_id; both maps must be "
                         "computed on the same training pairs with the same ids")
    rows = paired_spearman(both, metrics, ("_ll", "_bleu"), n_boot=n_boot, seed=seed)
    return pd.DataFrame(rows, columns=["metric", "rho", "ci_low", "ci_high", "n"])


def feature_by_region(data: pd.DataFrame, inputs: Sequence[str], *,
                      region_col: str = "region") -> pd.DataFrame:
    """Tidy long table of the ``inputs`` by map region, for one KDE plot per feature.

    ``data`` has one row per pair with a ``region_col`` column (e.g. from
    :func:`tokenbook.memorisation_cartography.estimator.map_regions`) and the numeric ``inputs``. Returns
    ``region, feature, value`` with one row per (pair, feature), in the units of each feature;
    rows with a missing region or value are dropped.

    Raises ValueError when ``inputs`` is empty or a column is missing or not numeric.
    """
    inputs = _inputs(inputs)
    check_table(data, "data", columns=[region_col], numeric=inputs)
    long = data[[region_col, *inputs]].melt(id_vars=region_col, value_vars=inputs,
                                            var_name="feature", value_name="value")
    long = long.rename(columns={region_col: "region"}).dropna(subset=["region", "value"])
    long["value"] = long["value"].astype(float)
    return long[["region", "feature", "value"]].reset_index(drop=True)


def region_feature_summary(data: pd.DataFrame, inputs: Sequence[str], *,
                           region_col: str = "region") -> pd.DataFrame:
    """Per feature and region: the median, and a Kruskal–Wallis test that the regions differ.

    Same input as :func:`feature_by_region`. Returns one row per (feature, region): ``feature,
    region, n, median, H, p, q``, where ``H`` and ``p`` are ``scipy.stats.kruskal`` across all
    regions of that feature (repeated on each of its rows) and ``q`` the Benjamini–Hochberg
    adjusted p over features (:func:`tokenbook.stats.benjamini_hochberg`, statsmodels'
    ``fdr_bh``). ``H``, ``p`` and ``q`` are NaN for a feature with fewer than 2 non-empty regions or identical values throughout.

    Raises ValueError as :func:`feature_by_region`, or when the data hold fewer than 2 regions.
    """
    long = feature_by_region(data, inputs, region_col=region_col)
    regions = list(dict.fromkeys(long["region"]))
    if len(regions) < 2:
        raise ValueError(f"need at least 2 regions to compare, got {regions}; check "
                         f"{region_col!r} (e.g. loosen the map_regions thresholds)")
    rows, tests = [], {}
    for feature in _inputs(inputs):
        sub = long[long["feature"] == feature]
        groups = [g["value"].to_numpy() for _, g in sub.groupby("region", sort=False)]
        H = p = float("nan")
        if len(groups) >= 2 and np.ptp(sub["value"].to_numpy()) > 0:
            res = kruskal(*groups)
            H, p = float(res.statistic), float(res.pvalue)
        tests[feature] = (H, p)
        for region in regions:
            v = sub.loc[sub["region"] == region, "value"]
            rows.append((feature, region, len(v), float(v.median()) if len(v) else float("nan"),
                         H, p))
    out = pd.DataFrame(rows, columns=["feature", "region", "n", "median", "H", "p"])
    feats = list(tests)
    pv = np.array([tests[f][1] for f in feats])
    q = benjamini_hochberg(pv)
    out["q"] = out["feature"].map(dict(zip(feats, q)))
    return out
