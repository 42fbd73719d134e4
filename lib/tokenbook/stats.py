"""Shared statistics for every chapter: paired tests, FDR, effect sizes, bootstrap, mixed models.

All functions take plain array-likes (or pandas objects where a key matters) and return plain
Python/numpy values or small tidy DataFrames. Conventions:

* ``x`` and ``y`` of a *paired* function are aligned 1-D samples of the same units (captions,
  sentences, ...) under two conditions; the paired difference is always ``d = x - y``.
  For the grounded chapters call ``f(P, U)`` so that negative means "lower with the image".
* Randomness (bootstrap) takes an explicit ``seed``: the same seed gives bit-identical output.
* One bootstrap for the whole library: :func:`bootstrap_ci` (rows resampled) and
  :func:`cluster_bootstrap_ci` (whole clusters resampled) draw their resamples from one core
  and give percentile intervals; :func:`paired_bootstrap_ci` is :func:`bootstrap_ci` of the
  paired differences. Chapters call these rather than resampling by hand.
* NaN policy of the bootstrap: a resample whose statistic is NaN (undefined, e.g. the AUROC of
  a resample holding one class) is left out of the percentiles, and the interval is NaN only
  when every resample's is. ``scipy.stats.bootstrap`` instead returns NaN as soon as one
  resample's statistic is NaN, which is why the resampling here is our own (numpy).

Example
-------
>>> import numpy as np
>>> u = np.array([2.0, 3.1, 2.5, 4.0, 3.3]); p = u - np.array([0.5, 0.2, 0.4, 0.9, 0.1])
>>> round(relative_change(p.mean(), u.mean()), 2)
-14.09
"""

from __future__ import annotations

import itertools
import warnings
from dataclasses import dataclass, field
from typing import Callable, Sequence

import numpy as np
import pandas as pd
from scipy import stats as _st
from statsmodels.stats.multitest import multipletests

from tokenbook.validation import check_choice, check_level, check_positive_int, check_table

__all__ = [
    "WilcoxonResult", "paired_wilcoxon", "benjamini_hochberg", "cohens_dz", "relative_change",
    "bootstrap_ci", "paired_bootstrap_ci", "cluster_bootstrap_ci", "resample_indices",
    "kendall_tau", "spearman_rho", "pairwise_tests", "MixedModelResult", "fit_mixedlm",
]


def _numbers(values, name: str) -> np.ndarray:
    """``values`` as a flat float array, or a TypeError naming the argument."""
    try:
        return np.asarray(values, dtype=float).ravel()
    except (TypeError, ValueError):
        raise TypeError(f"{name}: expected numbers (a list or array of floats), got "
                        f"{type(values).__name__}") from None


def _paired(x, y) -> tuple[np.ndarray, np.ndarray]:
    x = _numbers(x, "x")
    y = _numbers(y, "y")
    if x.shape != y.shape:
        raise ValueError(f"x and y: paired samples must have the same length, got {x.size} "
                         f"and {y.size}")
    ok = np.isfinite(x) & np.isfinite(y)
    return x[ok], y[ok]


# --------------------------------------------------------------------------- paired tests
@dataclass(frozen=True)
class WilcoxonResult:
    """Result of :func:`paired_wilcoxon` (``statistic`` is scipy's W, smaller rank sum)."""

    statistic: float
    pvalue: float
    n: int          # pairs with finite values
    n_zero: int     # pairs with x == y (dropped by zero_method="wilcox")


def paired_wilcoxon(x, y, *, zero_method: str = "wilcox",
                    alternative: str = "two-sided") -> WilcoxonResult:
    """Wilcoxon signed-rank test of the paired differences ``d = x - y`` (scipy defaults).

    ``scipy.stats.wilcoxon(x, y, zero_method="wilcox")``: pairs with ``d == 0`` are *dropped*
    before ranking (scipy's default, as in Gay et al.'s analysis code). Pairs where either value
    is NaN are dropped too. If no non-zero difference remains the test is undefined: the
    statistic is NaN and the p-value is 1.0 (no evidence of a difference). Fewer than one
    non-zero pair also returns p = 1.0.
    """
    check_choice(zero_method, "zero_method", ("wilcox", "pratt", "zsplit"))
    check_choice(alternative, "alternative", ("two-sided", "less", "greater"))
    x, y = _paired(x, y)
    d = x - y
    n_zero = int(np.sum(d == 0))
    if np.count_nonzero(d) == 0:
        return WilcoxonResult(float("nan"), 1.0, int(d.size), n_zero)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # small-sample normal-approx warnings
        res = _st.wilcoxon(x, y, zero_method=zero_method, alternative=alternative)
    return WilcoxonResult(float(res.statistic), float(res.pvalue), int(d.size), n_zero)


def benjamini_hochberg(pvals) -> np.ndarray:
    """Benjamini–Hochberg (1995) adjusted p-values (q-values): statsmodels' ``fdr_bh``.

    For sorted p-values p_(1) ≤ … ≤ p_(m): q_(i) = min_{j ≥ i} min(1, m·p_(j)/j), returned in the
    input order. NaN entries are left NaN and do not count towards m (statsmodels refuses NaN).
    """
    p = _numbers(pvals, "pvals")
    out = np.full(p.shape, np.nan)
    ok = np.isfinite(p)
    if np.any((p[ok] < 0) | (p[ok] > 1)):
        raise ValueError("pvals: p-values must lie in [0, 1]")
    if ok.any():
        out[ok] = multipletests(p[ok], method="fdr_bh")[1]
    return out


def cohens_dz(x, y) -> float:
    """Paired Cohen's d_z = mean(d) / sd(d, ddof=1) with d = x − y (NaN pairs dropped).

    NaN when fewer than 2 pairs or when sd(d) = 0.
    """
    x, y = _paired(x, y)
    d = x - y
    if d.size < 2:
        return float("nan")
    sd = d.std(ddof=1)
    return float(d.mean() / sd) if sd > 0 else float("nan")


def relative_change(p, u) -> float | np.ndarray:
    """Relative change in percent, Δ% = 100 · (P − U) / U (NaN where U = 0)."""
    try:
        p = np.asarray(p, dtype=float)
        u = np.asarray(u, dtype=float)
    except (TypeError, ValueError):
        raise TypeError("p, u: expected numbers (floats or arrays of floats)") from None
    with np.errstate(divide="ignore", invalid="ignore"):
        out = np.where(u != 0, 100.0 * (p - u) / u, np.nan)
    return float(out) if out.ndim == 0 else out


# --------------------------------------------------------------------------- bootstrap
#: resampled values held in memory at once: the resamples are drawn in blocks of this size
_BLOCK = 2_000_000


def _resample_blocks(n: int, n_boot: int, seed: int, width: int):
    """The one resampling core: ``n_boot`` resamples of ``n`` items with replacement, as index
    blocks [b, n] (b ≤ n_boot) drawn in turn from ``numpy.random.default_rng(seed)``, at most
    about :data:`_BLOCK` / ``width`` resamples per block (``width``: values per resample)."""
    rng = np.random.default_rng(seed)
    per_block = max(1, _BLOCK // max(int(width), 1))
    for start in range(0, n_boot, per_block):
        yield rng.integers(0, n, size=(min(per_block, n_boot - start), n))


def resample_indices(n: int, n_boot: int, seed: int) -> np.ndarray:
    """The bootstrap's draws as one array: ``n_boot`` resamples of ``n`` items with
    replacement, indices [n_boot, n], from the same core (and so the same stream) as
    :func:`bootstrap_ci` — for callers that judge each resample themselves (e.g.
    :func:`tokenbook.verdicts.replication_chance`)."""
    n = check_positive_int(n, "n")
    n_boot = check_positive_int(n_boot, "n_boot")
    seed = check_positive_int(seed, "seed", minimum=0)
    return np.concatenate(list(_resample_blocks(n, n_boot, seed, width=n)))


def _percentile_interval(boot: np.ndarray, level: float) -> tuple[float, float]:
    """The (α/2, 1 − α/2) percentiles of the resamples' statistics, α = 1 − level, NaN ones
    left out (the module's NaN policy); (NaN, NaN) when every one is NaN."""
    boot = np.asarray(boot, dtype=float).ravel()
    boot = boot[~np.isnan(boot)]
    if boot.size == 0:
        return float("nan"), float("nan")
    alpha = 1.0 - level
    lo, hi = np.percentile(boot, [100 * alpha / 2, 100 * (1 - alpha / 2)])
    return float(lo), float(hi)


def _boot_args(n_boot, level, seed) -> tuple[int, float, int]:
    return (check_positive_int(n_boot, "n_boot"), check_level(level, "level"),
            check_positive_int(seed, "seed", minimum=0))


def bootstrap_ci(data, statistic: Callable[[np.ndarray], float] = np.mean, *, n_boot: int = 2000,
                 seed: int = 0, level: float = 0.95,
                 vectorized: bool = False) -> tuple[float, float]:
    """Percentile bootstrap confidence interval of ``statistic(data)``.

    ``data``: [n] or [n, k] (rows resampled together, e.g. paired columns). ``n_boot``
    resamples of n rows with replacement from ``numpy.random.default_rng(seed)``; returns the
    (α/2, 1 − α/2) percentiles of the statistic, α = 1 − level (NaN policy: see the module).
    ``statistic`` maps resampled rows [n, ...] to a number; with ``vectorized=True`` it maps a
    block of resamples [b, n, ...] to [b] (faster). The same ``seed`` gives the same interval.
    """
    if not callable(statistic):
        raise TypeError(f"statistic: expected a function of the resampled rows (e.g. np.mean), "
                        f"got {type(statistic).__name__}")
    n_boot, level, seed = _boot_args(n_boot, level, seed)
    try:
        arr = np.asarray(data, dtype=float)
    except (TypeError, ValueError):
        raise TypeError("bootstrap_ci: data must be numbers (1-D or 2-D)") from None
    if arr.ndim == 0 or arr.shape[0] == 0:
        raise ValueError("bootstrap_ci needs at least one observation")
    n = arr.shape[0]
    boot = []
    for idx in _resample_blocks(n, n_boot, seed, width=arr.size):
        if vectorized:
            boot.append(np.asarray(statistic(arr[idx]), dtype=float).reshape(len(idx)))
        else:
            boot.append(np.array([statistic(arr[i]) for i in idx], dtype=float))
    return _percentile_interval(np.concatenate(boot), level)


def _mean_of_resamples(block: np.ndarray) -> np.ndarray:
    return block.mean(axis=1)


def paired_bootstrap_ci(x, y, *, n_boot: int = 2000, seed: int = 0,
                        level: float = 0.95) -> tuple[float, float]:
    """Percentile bootstrap CI of the mean paired difference mean(x − y): :func:`bootstrap_ci`
    of d = x − y [n] (pairs resampled; pairs with a NaN dropped first; NaN when none is left)."""
    n_boot, level, seed = _boot_args(n_boot, level, seed)
    x, y = _paired(x, y)
    d = x - y
    if d.size == 0:
        return float("nan"), float("nan")
    return bootstrap_ci(d, _mean_of_resamples, n_boot=n_boot, seed=seed, level=level,
                        vectorized=True)


def cluster_bootstrap_ci(data, clusters, statistic: Callable | None = None, *,
                         weighted: bool = False, n_boot: int = 2000, seed: int = 0,
                         level: float = 0.95) -> tuple[float, float]:
    """Percentile bootstrap CI that resamples whole clusters (units of a cluster are not
    independent: the words of one caption, the token pairs of one prompt).

    ``data``: [n] or [n, k] units; ``clusters``: [n] labels, one per unit. Each of the
    ``n_boot`` resamples draws as many clusters as there are, with replacement (the same draws
    as :func:`bootstrap_ci` with one unit per cluster), and pools their units; the statistic
    of the pooled units gives the (α/2, 1 − α/2) percentiles, α = 1 − level (NaN policy: see
    the module). ``statistic``: pooled rows [m, ...] → number; None: the mean of the pooled
    units (a ratio estimator: clusters weigh by their size; ``data`` 1-D). With
    ``weighted=True`` it is called as ``statistic(data, w)`` with ``w`` [b, n] the times each
    unit is pooled in each of b resamples and must return [b] (the same statistic, vectorised).
    Seeded; (NaN, NaN) with fewer than 2 clusters.
    """
    n_boot, level, seed = _boot_args(n_boot, level, seed)
    try:
        arr = np.asarray(data, dtype=float)
    except (TypeError, ValueError):
        raise TypeError("cluster_bootstrap_ci: data must be numbers (1-D or 2-D)") from None
    if arr.ndim not in (1, 2):
        raise ValueError(f"data: expected 1 or 2 dimensions (units first), got shape {arr.shape}")
    labels = np.asarray(clusters)
    if labels.shape != arr.shape[:1]:
        raise ValueError(f"clusters: needs one label per value ({arr.shape[0]}), got shape "
                         f"{labels.shape}")
    mean = statistic is None
    if mean and arr.ndim != 1:
        raise ValueError("data: the default statistic (the mean) needs 1-D data; pass a "
                         "statistic for 2-D data")
    if not mean and not callable(statistic):
        raise TypeError(f"statistic: expected a function of the pooled units or None (the "
                        f"mean), got {type(statistic).__name__}")
    codes = pd.factorize(labels, use_na_sentinel=False)[0]   # in order of first appearance
    n_c = int(codes.max()) + 1 if codes.size else 0
    if n_c < 2:
        return float("nan"), float("nan")
    order = np.argsort(codes, kind="stable")                  # units grouped by cluster
    sizes = np.bincount(codes, minlength=n_c)
    starts = np.concatenate([[0], np.cumsum(sizes)[:-1]])
    sums = np.bincount(codes, weights=arr, minlength=n_c) if mean else None
    boot = []
    for idx in _resample_blocks(n_c, n_boot, seed, width=arr.size if weighted else n_c):
        if mean or weighted:
            b = len(idx)
            times = np.bincount((idx + n_c * np.arange(b)[:, None]).ravel(),
                                minlength=b * n_c).reshape(b, n_c).astype(float)
            if mean:                       # pooled sum / pooled count, from per-cluster sums
                boot.append((times @ sums) / (times @ sizes))
            else:
                boot.append(np.asarray(statistic(arr, times[:, codes]), dtype=float).reshape(b))
            continue
        pooled = []
        for draw in idx:                   # the units of the drawn clusters, cluster by cluster
            size = sizes[draw]
            offset = np.repeat(starts[draw] - np.concatenate([[0], np.cumsum(size)[:-1]]), size)
            pooled.append(statistic(arr[order[offset + np.arange(size.sum())]]))
        boot.append(np.array(pooled, dtype=float))
    return _percentile_interval(np.concatenate(boot), level)


# --------------------------------------------------------------------------- rank agreement
def _aligned(a: pd.Series, b: pd.Series) -> tuple[np.ndarray, np.ndarray]:
    if not isinstance(a, pd.Series) or not isinstance(b, pd.Series):
        raise TypeError("kendall_tau/spearman_rho take pandas Series indexed by a shared key "
                        "(e.g. UPOS → mean groundedness), not sorted label lists")
    if a.index.has_duplicates or b.index.has_duplicates:
        raise ValueError("rank vectors must have unique keys")
    keys = a.index.intersection(b.index)
    aa = _numbers(a.loc[keys], "a")
    bb = _numbers(b.loc[keys], "b")
    ok = np.isfinite(aa) & np.isfinite(bb)
    return aa[ok], bb[ok]


def kendall_tau(a: pd.Series, b: pd.Series) -> tuple[float, float, int]:
    """Kendall's τ_b between two score/rank vectors indexed by a shared key.

    ``a`` and ``b`` are Series keyed by item (e.g. UPOS tag) holding a score or rank; they are
    aligned on their common keys before ``scipy.stats.kendalltau`` (τ_b, ties handled). This is
    the correct form of the cross-language agreement: correlating *lists of labels sorted by
    score* (as an exploratory script of Haley et al. did) compares label identities, not ranks.
    Returns (τ, p-value, number of shared keys); τ is NaN with fewer than 2 shared keys.
    """
    aa, bb = _aligned(a, b)
    if aa.size < 2:
        return float("nan"), float("nan"), int(aa.size)
    res = _st.kendalltau(aa, bb)
    return float(res.statistic), float(res.pvalue), int(aa.size)


def spearman_rho(a: pd.Series, b: pd.Series) -> tuple[float, float, int]:
    """Spearman's ρ between two score/rank vectors indexed by a shared key (see kendall_tau)."""
    aa, bb = _aligned(a, b)
    if aa.size < 2:
        return float("nan"), float("nan"), int(aa.size)
    res = _st.spearmanr(aa, bb)
    return float(res.statistic), float(res.pvalue), int(aa.size)


# --------------------------------------------------------------------------- pairwise tests
def pairwise_tests(data: pd.DataFrame, *, group: str, value: str, test: str = "welch",
                   groups: Sequence | None = None) -> pd.DataFrame:
    """All pairwise two-sample tests between the groups of ``data[group]``, BH-corrected.

    ``test``: ``"welch"`` (``scipy.stats.ttest_ind(equal_var=False)``), ``"student"``
    (equal variances) or ``"mannwhitney"`` (two-sided U test). Returns one row per pair with
    ``a, b, n_a, n_b, mean_a, mean_b, diff (= mean_a − mean_b), statistic, pvalue, p_bh``;
    ``p_bh`` is Benjamini–Hochberg over all pairs in the table.
    """
    check_table(data, "data", columns=[group], numeric=[value], min_rows=0)
    if test not in ("welch", "student", "mannwhitney"):
        raise ValueError(f"test must be 'welch', 'student' or 'mannwhitney', got {test!r}")
    vals = {k: g[value].dropna().to_numpy(float) for k, g in data.groupby(group, sort=True)}
    keys = list(groups) if groups is not None else list(vals)
    rows = []
    for a, b in itertools.combinations(keys, 2):
        xa, xb = vals.get(a, np.array([])), vals.get(b, np.array([]))
        stat = pv = float("nan")
        if xa.size >= 2 and xb.size >= 2:
            if test == "mannwhitney":
                r = _st.mannwhitneyu(xa, xb, alternative="two-sided")
            else:
                r = _st.ttest_ind(xa, xb, equal_var=(test == "student"))
            stat, pv = float(r.statistic), float(r.pvalue)
        rows.append({"a": a, "b": b, "n_a": xa.size, "n_b": xb.size,
                     "mean_a": xa.mean() if xa.size else np.nan,
                     "mean_b": xb.mean() if xb.size else np.nan,
                     "statistic": stat, "pvalue": pv})
    out = pd.DataFrame(rows, columns=["a", "b", "n_a", "n_b", "mean_a", "mean_b",
                                      "statistic", "pvalue"])
    out.insert(6, "diff", out["mean_a"] - out["mean_b"])
    out["p_bh"] = benjamini_hochberg(out["pvalue"].to_numpy()) if len(out) else []
    return out


# --------------------------------------------------------------------------- mixed models
@dataclass
class MixedModelResult:
    """A fitted linear mixed model in tidy form.

    ``coefs``: DataFrame with ``term, estimate, se, z, pvalue, ci_low, ci_high`` (fixed effects).
    ``converged``: statsmodels' flag; ``warnings``: messages raised while fitting (convergence,
    boundary/singular covariance) — shown to the reader, never silenced. ``method``: the
    optimiser that produced the fit (a fallback is tried when the first does not converge).
    """

    coefs: pd.DataFrame
    converged: bool
    warnings: list[str] = field(default_factory=list)
    method: str = ""
    n_obs: int = 0
    n_groups: int = 0
    result: object = None


def fit_mixedlm(formula: str, data: pd.DataFrame, *, groups: str, re_formula: str | None = None,
                reml: bool = True, methods: Sequence[str] = ("lbfgs", "powell", "nm"),
                maxiter: int = 200) -> MixedModelResult:
    """Fit ``statsmodels.formula.api.mixedlm(formula, data, groups=data[groups], re_formula)``.

    Gay et al. fit ``y ~ rel_pos * C(cond) + log1p(n_tokens)`` with a random intercept and a
    random position slope per story (``re_formula="~rel_pos"``), REML, L-BFGS, 200 iterations.
    Here the optimisers in ``methods`` are tried in order until one reports convergence; every
    warning raised on the way is recorded in the result (not hidden). If none converges the
    last fit is returned with ``converged=False``. Rows with NaN in used columns are dropped.
    """
    import statsmodels.formula.api as smf

    check_table(data, "data", columns=[groups], min_rows=0)
    if data[groups].nunique() < 2:
        raise ValueError("a mixed model needs at least 2 groups")
    msgs: list[str] = []
    fit = None
    used = ""
    for method in methods:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            try:
                model = smf.mixedlm(formula, data, groups=data[groups], re_formula=re_formula)
                fit = model.fit(reml=reml, method=method, maxiter=maxiter)
            except (np.linalg.LinAlgError, ValueError) as err:
                msgs.append(f"{method}: {type(err).__name__}: {err}")
                continue
        msgs.extend(f"{method}: {w.category.__name__}: {w.message}" for w in caught)
        used = method
        if fit.converged:
            break
    if fit is None:
        raise RuntimeError("mixed model could not be fitted with any optimiser: "
                           + "; ".join(msgs))
    fe = fit.fe_params.index
    ci = fit.conf_int().loc[fe]
    coefs = pd.DataFrame({"term": fe, "estimate": fit.fe_params.to_numpy(),
                          "se": fit.bse_fe.to_numpy(), "z": fit.tvalues.loc[fe].to_numpy(),
                          "pvalue": fit.pvalues.loc[fe].to_numpy(),
                          "ci_low": ci.iloc[:, 0].to_numpy(), "ci_high": ci.iloc[:, 1].to_numpy()})
    return MixedModelResult(coefs=coefs, converged=bool(fit.converged), warnings=msgs,
                            method=used, n_obs=int(fit.nobs), n_groups=len(fit.random_effects),
                            result=fit)
