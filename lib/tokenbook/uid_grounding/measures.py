"""Uniform Information Density (UID) measures over word-surprisal profiles.

A *unit* (caption, story sentence, paragraph) has word surprisals s_1 … s_N (nats unless the
input is in bits: every measure below keeps the unit of its input — squared measures are in
nats², CVs are unitless). With s̄ = (1/N) Σ s_n:

===================  ====================================================  ==================
name                 formula                                                unit
===================  ====================================================  ==================
``mean``             s̄                                                     nats
``uid_v``            (1/N) Σ_n (s_n − s̄)²   (population variance, ddof 0)   nats²
``uid_lv``           (1/(N−1)) Σ_{n≥2} (s_n − s_{n−1})²                     nats²
``cv_global``        sd(s; ddof 1) / s̄                                      —
``cv_local``         √UID_lv / s̄                                            —
``uid_v_lang``       (1/N) Σ_n (s_n − μ_lang)²   (Meister et al. 2021)      nats²
``local_abs``        (1/(N−1)) Σ_{n≥2} abs(s_n − s_{n−1})                   nats
``power_k``          (1/N) Σ_n max(s_n, 0)^k   (super-linear cost, k > 1)    nats^k
``max``              max_n s_n                                              nats
``knorm_k``          (Σ_n max(s_n, 0)^k)^{1/k}   (Clark et al. 2023)         nats
===================  ====================================================  ==================

Readings chosen where the sources differ (see the chapter's notes):

* ``uid_v``/``uid_lv`` follow Gay et al.'s ``uid_sentence`` exactly (``np.var``, and
  ``np.mean(np.diff(s)**2)``, i.e. divide by N − 1; Meister's notebook divides by N).
* ``cv_global`` uses ddof = 1 and ``cv_local`` the RMSSD, as Gay et al.'s
  ``XM3600_CoefficientOfVariation.py``; both are NaN when s̄ ≤ 1e-9 or N < 2.
* μ_lang is the mean word surprisal of all words of that language under the same condition
  (including words of units later excluded as too short), computed from the table: Meister et
  al.'s "regression towards a language-level mean".
* ``power_k`` is Meister et al.'s notebook ``nanmean(s**k)``; the per-word constant c·N of the
  effort formula cancels in paired comparisons and is dropped. Negative word surprisals (possible
  after the beginning-of-word correction only through numerical noise) are clipped at 0 for the
  power measures so fractional k stays defined.
* Units with fewer than ``min_words`` (default 3) words are excluded *and counted*.

The second half of the module holds the chapter's analyses (paired per-language comparison,
POS decomposition, story mixed models, boundary jumps, reduction densities). The figures that
draw them are in :mod:`tokenbook.uid_grounding.figures` (measures apart from their displays).

Example
-------
>>> import numpy as np
>>> profile_measures(np.array([1.0, 2.0, 3.0]))["uid_v"]
0.6666666666666666
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping, Sequence

import numpy as np
import pandas as pd
from scipy.ndimage import gaussian_filter1d

from tokenbook import stats
from tokenbook.grounded.tables import drop_unscorable  # noqa: F401  (the chapter's uid.drop_unscorable)
from tokenbook.seeds import derive_seed
from tokenbook.validation import check_choice, check_table

__all__ = [
    # measures
    "MEASURES", "DEFAULT_POWER_KS", "DEFAULT_KNORM_KS", "profile_measures", "UnitMeasures",
    "unit_measures", "variance_contributions", "boundary_jumps", "positive_reductions",
    "reduction_density", "onset_enrichment",
    # analyses
    "drop_unscorable", "normalised_position", "compare_conditions", "pos_decomposition",
    "DECOMPOSITION_UPOS", "pos_decomposition_summary", "dataset_summary", "position_profile",
    "story_position_models", "story_unit_measures", "complete_units", "story_boundary_summary",
    "story_reductions",
    # Bloom-VIST design (paragraphs, Tables 5-9, the paper's story filter)
    "filter_stories", "stories_of_length", "uid_cv_table", "story_trend_table", "trend_layout",
    "reduction_onsets",
]

#: the core measures (always computed); power/k-norm columns are added per k
MEASURES = ("mean", "uid_v", "uid_lv", "cv_global", "cv_local", "uid_v_lang", "local_abs", "max")
#: Meister et al.'s grid of exponents for the power cost (their notebook: 0, 0.25, …, 2.75)
DEFAULT_POWER_KS = (0.5, 1.0, 1.25, 1.5, 2.0, 2.5)
#: Clark et al.'s k-norm exponents
DEFAULT_KNORM_KS = (1.1, 1.25)
_EPS = 1e-9


def _kname(prefix: str, k: float) -> str:
    return f"{prefix}_{k:g}".replace(".", "p")


def profile_measures(s, *, mu_lang: float | None = None,
                     power_ks: Sequence[float] = DEFAULT_POWER_KS,
                     knorm_ks: Sequence[float] = DEFAULT_KNORM_KS) -> dict[str, float]:
    """All measures of one surprisal profile ``s`` (1-D, word order), as a dict.

    The reference implementation: :func:`unit_measures` computes the same numbers vectorised
    over a whole table (the tests check that they agree). ``mu_lang`` defaults to s̄ (then
    ``uid_v_lang == uid_v``).
    """
    s = np.asarray(s, dtype=float).ravel()
    if s.size == 0 or not np.all(np.isfinite(s)):
        raise ValueError("a surprisal profile needs ≥ 1 finite value")
    n = s.size
    mean = s.mean()
    d = np.diff(s)
    lv = float(np.mean(d ** 2)) if n > 1 else float("nan")
    ok = n >= 2 and mean > _EPS
    out = {
        "n_words": n,
        "mean": float(mean),
        "uid_v": float(np.mean((s - mean) ** 2)),
        "uid_lv": lv,
        "cv_global": float(s.std(ddof=1) / mean) if ok else float("nan"),
        "cv_local": float(np.sqrt(lv) / mean) if ok else float("nan"),
        "uid_v_lang": float(np.mean((s - (mean if mu_lang is None else mu_lang)) ** 2)),
        "local_abs": float(np.mean(np.abs(d))) if n > 1 else float("nan"),
        "max": float(s.max()),
    }
    sp = np.clip(s, 0.0, None)
    for k in power_ks:
        out[_kname("power", k)] = float(np.mean(sp ** k))
    for k in knorm_ks:
        out[_kname("knorm", k)] = float(np.sum(sp ** k) ** (1.0 / k))
    return out


@dataclass
class UnitMeasures:
    """Output of :func:`unit_measures`.

    ``table``: long DataFrame, one row per (unit, condition): the unit key columns,
    ``condition``, ``n_words`` and one column per measure. ``n_excluded``: units dropped for
    having fewer than ``min_words`` words (per condition, the same units for every condition).
    ``n_units``: units kept.
    """

    table: pd.DataFrame
    n_excluded: int
    n_units: int
    min_words: int


def _check_table(table: pd.DataFrame, cols: Sequence[str]) -> None:
    check_table(table, "word surprisal table (see tokenbook.grounded.tables for the schema)",
                columns=cols, min_rows=0)


def unit_measures(table: pd.DataFrame, conditions: Mapping[str, str] | None = None, *,
                  unit: Sequence[str] = ("lang", "unit_id"), order: str = "word_idx",
                  lang: str | None = "lang", min_words: int = 3, missing: str = "raise",
                  power_ks: Sequence[float] = DEFAULT_POWER_KS,
                  knorm_ks: Sequence[float] = DEFAULT_KNORM_KS) -> UnitMeasures:
    """Every UID measure for every unit and condition of a word-surprisal table (vectorised).

    Parameters
    ----------
    table : word surprisal pivot table (one row per word; see ``tokenbook.grounded.tables``).
    conditions : condition name → surprisal column, default ``{"U": "s_U", "P": "s_P"}``
        (only columns present are used when the default is taken).
    unit : columns identifying a unit (a caption; for story sentences add ``story_id`` etc.).
    order : column giving word order inside a unit.
    lang : column over which μ_lang (for ``uid_v_lang``) is computed; None → one global mean.
    min_words : units with fewer words are excluded and counted (Gay et al.: 3).
    missing : ``"raise"`` on non-finite surprisals, or ``"drop"``: a unit with any missing
        surprisal in a condition is left out *for that condition only* (e.g. the discourse
        conditions of a story's first sentence, which has no preceding discourse).

    Returns
    -------
    UnitMeasures with the long table (rows = units × conditions).
    """
    if conditions is None:
        conditions = {c: f"s_{c}" for c in ("U", "P", "D", "PD") if f"s_{c}" in table}
        if not conditions:
            raise ValueError("no surprisal columns s_U/s_P/s_D/s_PD in the table")
    unit = list(unit)
    _check_table(table, unit + [order] + list(conditions.values()))
    if isinstance(min_words, bool) or not isinstance(min_words, (int, np.integer)):
        raise TypeError(f"min_words: expected a whole number, got {min_words!r}")
    if min_words < 1:
        raise ValueError(f"min_words must be ≥ 1, got {min_words}")
    if table.empty:
        raise ValueError("table: the word surprisal table is empty (0 rows); check the filters "
                         "or the scoring that produced it")
    df = table.sort_values(unit + [order], kind="mergesort").reset_index(drop=True)
    mus = {}
    for col in conditions.values():  # μ_lang over *all* words of the language (before exclusion)
        if lang is not None and lang in df:
            mus[col] = df.groupby(lang, observed=True)[col].transform("mean").to_numpy(float)
        else:
            mus[col] = np.full(len(df), np.nanmean(df[col].to_numpy(float)))
        mus[col] = np.nan_to_num(mus[col])
    key = df.groupby(unit, sort=False, observed=True).ngroup().to_numpy()
    n_per = np.bincount(key)
    keep_units = n_per >= min_words
    n_excluded = int((~keep_units).sum())
    if not keep_units.any():
        raise ValueError(f"table: no unit has at least min_words={min_words} words ({n_per.size} "
                         f"unit(s), the longest has {int(n_per.max())}); lower min_words or "
                         f"check the table")
    keep_rows = keep_units[key]
    df = df.loc[keep_rows].reset_index(drop=True)
    mus = {c: m[keep_rows] for c, m in mus.items()}
    key = df.groupby(unit, sort=False, observed=True).ngroup().to_numpy()
    first = np.r_[True, key[1:] != key[:-1]]
    heads = df.loc[first, unit].reset_index(drop=True)
    n = np.bincount(key).astype(float)
    frames = []
    for cond, col in conditions.items():
        s = df[col].to_numpy(dtype=float)
        finite = np.isfinite(s)
        unit_ok = np.ones(n.size, dtype=bool)
        if not finite.all():
            if missing != "drop":
                raise ValueError(f"column {col!r} has {int((~finite).sum())} non-finite "
                                 "surprisals in kept units; drop or fill those words first, or "
                                 "pass missing='drop'")
            unit_ok = np.bincount(key, weights=~finite, minlength=n.size) == 0
            s = np.where(finite, s, 0.0)

        def gsum(v):
            return np.bincount(key, weights=v, minlength=n.size)

        mean = gsum(s) / n
        dev = s - mean[key]
        var0 = gsum(dev ** 2) / n
        d = np.where(first, np.nan, np.r_[np.nan, np.diff(s)])
        dd = np.nan_to_num(d)
        with np.errstate(invalid="ignore", divide="ignore"):
            lv = np.where(n > 1, gsum(dd ** 2) / (n - 1), np.nan)
            lad = np.where(n > 1, gsum(np.abs(dd)) / (n - 1), np.nan)
            ok = (n >= 2) & (mean > _EPS)
            sd1 = np.sqrt(gsum(dev ** 2) / (n - 1))
            cvg = np.where(ok, sd1 / mean, np.nan)
            cvl = np.where(ok, np.sqrt(lv) / mean, np.nan)
        mu = np.where(finite, mus[col], 0.0)
        vlang = gsum((s - mu) ** 2) / n
        mx = pd.Series(s).groupby(key).max().to_numpy()
        out = heads.copy()
        out["condition"] = cond
        out["n_words"] = n.astype(int)
        out["mean"], out["uid_v"], out["uid_lv"] = mean, var0, lv
        out["cv_global"], out["cv_local"] = cvg, cvl
        out["uid_v_lang"], out["local_abs"], out["max"] = vlang, lad, mx
        sp = np.clip(s, 0.0, None)
        for k in power_ks:
            out[_kname("power", k)] = gsum(sp ** k) / n
        for k in knorm_ks:
            out[_kname("knorm", k)] = gsum(sp ** k) ** (1.0 / k)
        frames.append(out.loc[unit_ok])
    long = pd.concat(frames, ignore_index=True)
    return UnitMeasures(long, n_excluded, int(n.size), min_words)


def variance_contributions(table: pd.DataFrame, col: str, *,
                           unit: Sequence[str] = ("lang", "unit_id")) -> np.ndarray:
    """Each word's contribution to its unit's UID_v: C_t = (s_t − s̄)² / N, so Σ_t C_t = UID_v.

    Returned aligned with ``table``'s rows (nats²). Gay et al.'s appendix decomposes the
    captions where grounding increases variance by ΔC_t = C_t^P − C_t^U per UPOS.
    """
    unit = list(unit)
    _check_table(table, unit + [col])
    g = table.groupby(unit, sort=False, observed=True)[col]
    mean = g.transform("mean").to_numpy(float)
    n = g.transform("size").to_numpy(float)
    return (table[col].to_numpy(float) - mean) ** 2 / n


def boundary_jumps(table: pd.DataFrame, col: str, *, sequence: Sequence[str] = ("story_id",),
                   unit_order: Sequence[str] = ("sent_idx",), order: str = "word_idx",
                   windows: Sequence[int] = (1, 2, 3), adjacent: bool = False) -> pd.DataFrame:
    """Surprisal jumps at unit boundaries, Δ_w = s̄(last w words of unit k) − s̄(first w of k+1).

    Units are ordered by ``unit_order`` inside each ``sequence`` (a story); every consecutive
    pair (k, k+1) gives one Δ_w per window w. Negative Δ_w means surprisal *spikes* at the onset
    of the next unit (Gay et al., Tables 8–9; the code's order of subtraction). A pair is skipped
    for window w when either unit has fewer than w words. With ``adjacent=True`` (one integer
    ``unit_order`` column) a pair is only formed when the two indices differ by exactly 1, so a
    unit missing from the table (dropped as unscorable) does not join its neighbours. Returns a
    long DataFrame with the sequence columns, ``unit_k`` (position of unit k among the
    sequence's units), ``w`` and ``delta`` (units of ``col``).
    """
    sequence, unit_order = list(sequence), list(unit_order)
    _check_table(table, sequence + unit_order + [order, col])
    if adjacent and len(unit_order) != 1:
        raise ValueError(f"adjacent=True needs one integer unit_order column, got {unit_order}")
    df = table.sort_values(sequence + unit_order + [order], kind="mergesort")
    rows = []
    for seq_key, story in df.groupby(sequence, sort=False, observed=True):
        groups = list(story.groupby(unit_order, sort=True, observed=True))
        units = [u[col].to_numpy(float) for _, u in groups]
        index = [k[0] if isinstance(k, tuple) else k for k, _ in groups]
        seq_key = seq_key if isinstance(seq_key, tuple) else (seq_key,)
        for k in range(len(units) - 1):
            if adjacent and index[k + 1] - index[k] != 1:
                continue
            a, b = units[k], units[k + 1]
            for w in windows:
                if a.size >= w and b.size >= w:
                    rows.append((*seq_key, k, w, float(a[-w:].mean() - b[:w].mean())))
    return pd.DataFrame(rows, columns=sequence + ["unit_k", "w", "delta"])


def positive_reductions(table: pd.DataFrame, pairs: Mapping[str, tuple[str, str]] | None = None,
                        ) -> pd.DataFrame:
    """Per-word positive-part surprisal reductions δ = max(0, s_a − s_b) (Gay et al. §5).

    Default pairs: ``δ_P = (s_U, s_P)``, ``δ_D = (s_U, s_D)``, ``δ_DP = (s_D, s_PD)`` — δ_DP is
    the image's added value *given* discourse. Returns a copy of ``table`` with a column
    ``delta_<name>`` per pair whose columns exist (nats).
    """
    if pairs is None:
        pairs = {"P": ("s_U", "s_P"), "D": ("s_U", "s_D"), "DP": ("s_D", "s_PD")}
    out = table.copy()
    for name, (a, b) in pairs.items():
        if a in table and b in table:
            out[f"delta_{name}"] = np.clip(table[a].to_numpy(float) - table[b].to_numpy(float),
                                           0.0, None)
    return out


def reduction_density(position, delta, *, min_bins: int = 10,
                      smooth: float = 0.05) -> tuple[np.ndarray, np.ndarray]:
    """δ-weighted density of reductions over normalised position in [0, 1].

    Gay et al.'s recipe: histogram of ``position`` weighted by ``delta`` with Freedman–Diaconis
    bins (at least ``min_bins``) on [0, 1], Gaussian smoothing with σ = ``smooth`` · n_bins bins,
    renormalised to integrate to 1. Returns (bin centres, density).
    """
    pos = np.asarray(position, dtype=float)
    w = np.asarray(delta, dtype=float)
    if pos.shape != w.shape:
        raise ValueError("position and delta must have the same shape")
    ok = np.isfinite(pos) & np.isfinite(w)
    pos, w = pos[ok], w[ok]
    if pos.size == 0 or w.sum() <= 0:
        raise ValueError("no positive reductions to build a density from")
    try:
        edges = np.histogram_bin_edges(pos, bins="fd", range=(0.0, 1.0))
        n_bins = max(min_bins, edges.size - 1)
    except (ValueError, MemoryError):
        n_bins = min_bins
    n_bins = min(n_bins, 200)
    hist, edges = np.histogram(pos, bins=n_bins, range=(0.0, 1.0), weights=w)
    hist = gaussian_filter1d(hist.astype(float), sigma=smooth * n_bins, mode="nearest")
    width = edges[1] - edges[0]
    dens = hist / (hist.sum() * width)
    return (edges[:-1] + edges[1:]) / 2, dens


def onset_enrichment(position, delta, *, onset: float = 0.2) -> float:
    """How much of the reduction mass sits at unit onsets, relative to the words there.

    E = (Σ δ over words with position < onset / Σ δ) / (share of words with position < onset).
    E > 1 means reductions concentrate at the onset beyond what word counts alone give;
    E = 1 means reductions are spread like the words. NaN when there are no reductions.
    """
    pos = np.asarray(position, dtype=float)
    w = np.asarray(delta, dtype=float)
    at = pos < onset
    if w.sum() <= 0 or not at.any():
        return float("nan")
    return float((w[at].sum() / w.sum()) / at.mean())


# =========================================================================== analyses
def normalised_position(table: pd.DataFrame, *, unit: Sequence[str] = ("lang", "unit_id"),
                        order: str = "word_idx") -> np.ndarray:
    """Word position within its unit, normalised: word rank / unit length ∈ [0, 1)."""
    unit = list(unit)
    _check_table(table, unit + [order])
    g = table.groupby(unit, sort=False, observed=True)[order]
    rank = g.rank(method="first").to_numpy(float) - 1.0
    return rank / g.transform("size").to_numpy(float)


def compare_conditions(measures: pd.DataFrame, *, a: str = "P", b: str = "U",
                       metrics: Sequence[str] = ("uid_v", "uid_lv", "cv_global", "cv_local"),
                       unit: Sequence[str] = ("lang", "unit_id"), by: str = "lang",
                       n_boot: int = 2000, seed: int = 0, level: float = 0.95) -> pd.DataFrame:
    """Per group (language) and metric: paired comparison of condition ``a`` against ``b``.

    ``measures`` is :attr:`UnitMeasures.table`. For each metric and group the units present
    under both conditions are paired and the output row holds ``n`` (pairs), ``mean_<b>``,
    ``mean_<a>``, ``delta_pct`` = 100·(mean_a − mean_b)/mean_b, the Wilcoxon signed-rank
    ``W``/``p`` of a − b (zero differences dropped, scipy default), ``q``: Benjamini–Hochberg
    across groups *within each metric* (as Gay et al., Table 3), paired Cohen's ``d_z`` of
    a − b, and a percentile bootstrap CI (``ci_low, ci_high``) of the mean paired difference
    a − b with ``n_boot`` resamples (each group its own stream, ``derive_seed(seed, "group", i)``).
    """

    unit = list(unit)
    _check_table(measures, unit + ["condition", *metrics])
    wide = measures[measures.condition.isin([a, b])].pivot_table(
        index=unit, columns="condition", values=list(metrics), aggfunc="first", observed=True)
    rows = []
    groups = wide.index.get_level_values(by) if by in unit else None
    if groups is None:
        raise ValueError(f"group column {by!r} must be one of the unit columns {unit}")
    for i, g in enumerate(sorted(pd.unique(groups))):
        sub = wide[groups == g]
        for m in metrics:
            if (m, a) not in sub or (m, b) not in sub:
                continue
            pair = sub[[(m, a), (m, b)]].dropna()
            xa, xb = pair[(m, a)].to_numpy(float), pair[(m, b)].to_numpy(float)
            if xa.size == 0:
                continue
            w = stats.paired_wilcoxon(xa, xb)
            lo, hi = stats.paired_bootstrap_ci(xa, xb, n_boot=n_boot,
                                            seed=derive_seed(seed, "group", i), level=level)
            rows.append({by: g, "metric": m, "n": xa.size, f"mean_{b}": xb.mean(),
                         f"mean_{a}": xa.mean(),
                         "delta_pct": stats.relative_change(xa.mean(), xb.mean()),
                         "W": w.statistic, "p": w.pvalue, "d_z": stats.cohens_dz(xa, xb),
                         "ci_low": lo, "ci_high": hi})
    out = pd.DataFrame(rows)
    if out.empty:
        raise ValueError(f"no units have both conditions {a!r} and {b!r}")
    out["q"] = np.nan
    for m, idx in out.groupby("metric").groups.items():
        out.loc[idx, "q"] = stats.benjamini_hochberg(out.loc[idx, "p"].to_numpy())
    out["stars"] = [("***" if q < 0.001 else "**" if q < 0.01 else "*" if q < 0.05 else "")
                    if np.isfinite(q) else "" for q in out["q"]]
    return out


#: the UPOS classes of Gay et al.'s decomposition (App. Figs. 6-7)
DECOMPOSITION_UPOS = ("NOUN", "VERB", "ADJ", "ADV", "PROPN", "PRON", "NUM", "ADP", "DET", "AUX")


def dataset_summary(table: pd.DataFrame, *, unit: Sequence[str] = ("lang", "unit_id"),
                    by: str = "lang") -> pd.DataFrame:
    """Per language: units, words, and the mean / sd / min / max unit length in words."""
    unit = list(unit)
    _check_table(table, unit)
    lengths = table.groupby(unit, observed=True).size().rename("n_words").reset_index()
    out = lengths.groupby(by, observed=True)["n_words"].agg(
        units="size", words="sum", mean_len="mean", sd_len="std", min_len="min",
        max_len="max").reset_index()
    return out


def position_profile(measures: pd.DataFrame, metric: str = "uid_v", *,
                     position: str = "sent_idx", band: str = "sem", n_boot: int = 2000,
                     seed: int = 0, level: float = 0.95) -> pd.DataFrame:
    """Mean of ``metric`` per condition and unit position, with a band (Gay et al. Fig. 4).

    Columns ``condition, <position>, n, mean, sem, low, high`` (units of ``metric``; one row
    per condition × position). ``band="sem"``: low/high = mean ∓ 1.96·SEM, the paper's band,
    which goes below zero for a variance when the values are skewed. ``band="bootstrap"``: a
    percentile bootstrap CI of the mean at ``level`` (``n_boot`` resamples of the units at that
    position, seeded by ``seed`` + row), which stays inside the range of the data — never below
    zero for UID_v. A position with one unit gets low = high = its value.

    >>> m = pd.DataFrame({"condition": ["U"] * 4, "sent_idx": [0] * 4,
    ...                   "uid_v": [0.0, 0.0, 0.0, 8.0]})
    >>> p = position_profile(m, band="bootstrap", n_boot=200)
    >>> float(p["mean"].iloc[0]), bool(p["low"].iloc[0] >= 0)
    (2.0, True)
    """
    check_choice(band, "band", ("sem", "bootstrap"))
    _check_table(measures, ["condition", position, metric])
    if band == "bootstrap" and (n_boot < 1 or not 0 < level < 1):
        raise ValueError(f"need n_boot ≥ 1 and 0 < level < 1, got {n_boot}, {level}")
    data = measures.dropna(subset=[metric])
    g = data.groupby(["condition", position], observed=True)[metric]
    out = g.agg(n="size", mean="mean", sd="std").reset_index()
    out["sem"] = (out["sd"] / np.sqrt(out["n"])).fillna(0.0)
    if band == "sem":
        out["low"], out["high"] = out["mean"] - 1.96 * out["sem"], out["mean"] + 1.96 * out["sem"]
        return out.drop(columns="sd")
    bands = [stats.bootstrap_ci(v.to_numpy(float), n_boot=n_boot,
                                seed=derive_seed(seed, "position", i), level=level)
             for i, (_, v) in enumerate(g)]
    out["low"], out["high"] = [b[0] for b in bands], [b[1] for b in bands]
    return out.drop(columns="sd")


def pos_decomposition(table: pd.DataFrame, measures: pd.DataFrame, *,
                      unit: Sequence[str] = ("lang", "unit_id"), a: str = "P", b: str = "U",
                      min_count: int = 50,
                      classes: Sequence[str] | None = DECOMPOSITION_UPOS) -> pd.DataFrame:
    """Which words drive the captions where grounding *increases* variance (Gay et al. App.)?

    Keeps the units with UID_v(a) > UID_v(b); for each word ΔC_t = C_t^a − C_t^b with
    C_t = (s_t − s̄)²/N (:func:`variance_contributions`). Per (lang, upos) with more than
    ``min_count`` words: ``n``, ``mean_dC`` (nats², Gay et al.'s ``avg_prevention_score``),
    ``share_up`` (words with s_a > s_b) and ``share_down`` (s_a < s_b), for the UPOS tags in
    ``classes`` (None: every tag, merged ones such as ``ADP+DET`` included). Signs here are computed
    on surprisals directly (Gay et al.'s script negated columns that already held surprisals,
    which swaps their up/down labels; ΔC is unaffected).
    """
    unit = list(unit)
    ca, cb = f"s_{a}", f"s_{b}"
    _check_table(table, unit + ["upos", ca, cb])
    wide = measures.pivot_table(index=unit, columns="condition", values="uid_v",
                                aggfunc="first", observed=True)
    worse = wide.index[(wide[a] > wide[b]).to_numpy()]
    keyed = table.set_index(unit)
    sub = keyed[keyed.index.isin(worse)].reset_index()
    if sub.empty:
        return pd.DataFrame(columns=["lang", "upos", "n", "mean_dC", "share_up", "share_down"])
    sub["dC"] = (variance_contributions(sub, ca, unit=unit)
                 - variance_contributions(sub, cb, unit=unit))
    sub["up"] = sub[ca] > sub[cb]
    sub["down"] = sub[ca] < sub[cb]
    out = (sub.groupby(["lang", "upos"], observed=True)
           .agg(n=("dC", "size"), mean_dC=("dC", "mean"), share_up=("up", "mean"),
                share_down=("down", "mean")).reset_index())
    if classes is not None:
        out = out[out["upos"].isin(classes)]
    out = out[out.n > min_count].reset_index(drop=True)
    out.attrs["n_units"] = len(worse)
    out.attrs["share_units"] = len(worse) / max(len(wide), 1)
    return out


def pos_decomposition_summary(decomposition: pd.DataFrame) -> pd.DataFrame:
    """Across languages: mean ΔC, share up and share down per UPOS, largest ΔC first (empty
    frame with those columns when no caption got less uniform)."""
    cols = ["mean_dC", "share_up", "share_down"]
    if decomposition.empty:
        return pd.DataFrame(columns=cols, index=pd.Index([], name="upos"))
    return (decomposition.groupby("upos")[cols].mean()
            .sort_values("mean_dC", ascending=False))


def story_position_models(measures: pd.DataFrame, *, outcome: str = "uid_v",
                          position: str = "rel_pos", group: str = "story_id",
                          by: str | None = "lang", reference: str = "U", min_groups: int = 5,
                          min_rows: int = 30) -> pd.DataFrame:
    """Gay et al.'s position trends: ``y ~ rel_pos * C(condition) + log1p(n_words)``.

    Linear mixed model (REML; see :func:`tokenbook.stats.fit_mixedlm`) with a random intercept
    and a random ``rel_pos`` slope per story, fitted per ``by`` group (language; None → one
    pooled model with a language fixed effect when a ``lang`` column exists). Groups with
    fewer than ``min_groups`` stories or ``min_rows`` rows are skipped (as in the authors'
    script). Returns one row per fitted term with ``estimate, se, z, pvalue, ci_low, ci_high``
    plus ``converged`` and the fit's warnings joined into ``warnings``.
    """
    need = [outcome, position, group, "condition", "n_words"]
    _check_table(measures, need)
    data = measures.dropna(subset=need).copy()
    data["log_len"] = np.log1p(data["n_words"].astype(float))
    cond = f"C(condition, Treatment({reference!r}))"
    parts = [(None, data)] if by is None else list(data.groupby(by, sort=True))
    rows = []
    for key, sub in parts:
        formula = f"{outcome} ~ {position} * {cond}"
        if sub["log_len"].nunique() > 1:  # a constant length is collinear with the intercept
            formula += " + log_len"
        grp = group
        if key is None and "lang" in sub and sub["lang"].nunique() > 1:
            formula += " + C(lang)"
            sub = sub.assign(_story=sub["lang"].astype(str) + ":" + sub[group].astype(str))
            grp = "_story"
        if sub[grp].nunique() < min_groups or len(sub) < min_rows:
            continue
        fit = stats.fit_mixedlm(formula, sub, groups=grp, re_formula=f"~{position}")
        tab = fit.coefs.copy()
        tab.insert(0, "group", "pooled" if key is None else key)
        tab["converged"] = fit.converged
        tab["method"] = fit.method
        tab["n_obs"], tab["n_stories"] = fit.n_obs, fit.n_groups
        tab["warnings"] = " | ".join(dict.fromkeys(fit.warnings))
        rows.append(tab)
    if not rows:
        return pd.DataFrame(columns=["group", "term", "estimate", "se", "z", "pvalue", "ci_low",
                                     "ci_high", "converged", "method", "n_obs", "n_stories",
                                     "warnings"])
    return pd.concat(rows, ignore_index=True)


def story_unit_measures(table: pd.DataFrame, *, level: str = "sentence", min_words: int = 3,
                        conditions: Mapping[str, str] | None = None) -> UnitMeasures:
    """Sentence- or paragraph-level measures of a story table, with a relative position.

    ``table``: the story word table, one row per word with ``lang, story_id, sent_idx,
    word_idx`` and the surprisal columns ``s_U, s_P, s_D, s_PD`` (those present; the measures
    are in the table's unit: nats for the book's tables and the converted Bloom-VIST release).
    ``level="sentence"``: units (lang, story_id, sent_idx), ``rel_pos`` = sent_idx /
    (n_sents − 1); needs an ``n_sents`` column (the story's number of sentences, as
    :func:`tokenbook.grounded.tables.story_word_table` and
    :func:`tokenbook.data.bloom_vist.load_bloom_surprisals` write it). ``level="paragraph"``:
    units (lang, story_id, para_idx) with the words of all the paragraph's sentences in order,
    ``rel_pos`` = para_idx / (n_paras − 1) (``n_paras`` is computed here); needs a
    ``para_idx`` column (Bloom-VIST pages). ``rel_pos`` is 0 for one-unit stories. Discourse
    conditions are missing where no preceding text exists, and those units are left out for
    those conditions only. The table gets ``unit_level`` and ``n_units_in_story`` columns;
    sentence rows keep their ``para_idx`` when the table has one.
    """
    conditions = conditions or {c: f"s_{c}" for c in ("U", "P", "D", "PD") if f"s_{c}" in table}
    keys: tuple = ()
    if level == "sentence":
        idx, total, data = "sent_idx", "n_sents", table
        if "n_sents" not in table:
            raise ValueError("sentence-level measures need an 'n_sents' column (the story's "
                             "number of sentences): add it with table.groupby(['lang', "
                             "'story_id']).sent_idx.transform('nunique')")
        keys = ("para_idx",) if "para_idx" in table else ()
    elif level == "paragraph":
        if "para_idx" not in table:
            raise ValueError("paragraph-level measures need a 'para_idx' column (the page of each "
                             "sentence): build the table from units that have one "
                             "(tokenbook.grounded.tiny.story_words, tokenbook.grounded.tables."
                             "bloom_units)")
        idx, total = "para_idx", "n_paras"
        data = table.copy()
        data["_order"] = data.groupby(["lang", "story_id"], sort=False).cumcount() \
            if "sent_idx" not in data else data["sent_idx"] * 10_000 + data["word_idx"]
        data[total] = data.groupby(["lang", "story_id"])[idx].transform("nunique")
    else:
        raise ValueError(f"level must be 'sentence' or 'paragraph', got {level!r}")
    order = "word_idx" if level == "sentence" else "_order"
    res = unit_measures(data, conditions, unit=("lang", "story_id", idx, total, *keys),
                        order=order, missing="drop", min_words=min_words)
    t = res.table
    t["rel_pos"] = t[idx] / (t[total] - 1).clip(lower=1)
    t["unit_level"] = level
    t["n_units_in_story"] = t[total]
    return res


def complete_units(measures: pd.DataFrame, conditions: Sequence[str] = ("U", "P", "D", "PD"), *,
                   unit: Sequence[str] = ("lang", "story_id", "sent_idx")) -> pd.DataFrame:
    """Rows of the units measured under *every* condition in ``conditions`` (for comparisons
    of condition means over the same units: e.g. a story's first sentence has no D score)."""
    unit = list(unit)
    _check_table(measures, unit + ["condition"])
    sub = measures[measures["condition"].isin(conditions)]
    n = sub.groupby(unit, observed=True)["condition"].transform("nunique")
    return sub[n.to_numpy() == len(set(conditions))]


def _paragraph_order(table: pd.DataFrame) -> pd.DataFrame:
    """``table`` with ``_order``: word order inside a paragraph (sentence, then word)."""
    data = table.copy()
    data["_order"] = data["sent_idx"].to_numpy(np.int64) * 100_000 + data["word_idx"].to_numpy(
        np.int64)
    return data


def story_boundary_summary(table: pd.DataFrame, *,
                           conditions: Mapping[str, str] | None = None,
                           windows: Sequence[int] = (1, 2, 3),
                           level: str = "sentence") -> pd.DataFrame:
    """Mean boundary jump Δ_w per (lang, condition, w) over consecutive units (Tables 8-9).

    ``level="sentence"`` pairs consecutive sentences of a story, ``"paragraph"`` consecutive
    paragraphs (``para_idx``; words ordered by sentence, then word). A unit with a missing
    surprisal under a condition (the discourse conditions of the story's first sentence or
    paragraph) is left out for that condition, and so is every pair it would be part of: only
    units whose indices differ by 1 are paired. Columns ``lang, condition, w, n_pairs, delta,
    level``; ``delta`` in the unit of the surprisal columns (nats for the book's tables and the
    converted Bloom-VIST release; bits if given bits), negative = the next unit starts with a
    surprisal spike.
    """
    check_choice(level, "level", ("sentence", "paragraph"))
    conditions = conditions or {c: f"s_{c}" for c in ("U", "P", "D", "PD") if f"s_{c}" in table}
    idx = "sent_idx" if level == "sentence" else "para_idx"
    _check_table(table, ["lang", "story_id", "sent_idx", "word_idx", idx,
                         *conditions.values()])
    data = _paragraph_order(table) if level == "paragraph" else table
    order = "_order" if level == "paragraph" else "word_idx"
    unit = ["lang", "story_id", idx]
    rows = []
    for cond, col in conditions.items():
        bad = ~np.isfinite(data[col].to_numpy(float))
        if bad.any():
            bad_units = pd.MultiIndex.from_frame(data.loc[bad, unit]).unique()
            sub = data[~pd.MultiIndex.from_frame(data[unit]).isin(bad_units)]
        else:
            sub = data
        j = boundary_jumps(sub, col, sequence=("lang", "story_id"), unit_order=(idx,),
                           order=order, windows=windows, adjacent=True)
        if j.empty:
            continue
        s = j.groupby(["lang", "w"]).delta.agg(["size", "mean"]).reset_index()
        s.insert(1, "condition", cond)
        rows.append(s.rename(columns={"size": "n_pairs", "mean": "delta"}))
    out = pd.concat(rows, ignore_index=True) if rows else pd.DataFrame(
        columns=["lang", "condition", "w", "n_pairs", "delta"])
    out["level"] = level
    return out


def story_reductions(table: pd.DataFrame, pairs: Mapping[str, tuple[str, str]] | None = None,
                     ) -> tuple[pd.DataFrame, dict[str, float]]:
    """Positive reductions δ_P, δ_D, δ_DP per word with normalised position, and onset enrichment.

    ``pairs``: other reductions instead (``{name: (surprisal without, with)}``, as
    :func:`positive_reductions`).

    Returns (word table with ``pos`` (position in the sentence), ``para_pos`` (position in the
    paragraph, when the table has ``para_idx``) and ``delta_*`` columns (nats), {name: onset
    enrichment E}), where E (:func:`onset_enrichment`, onset = first 20% of the sentence) > 1
    means the reductions are concentrated at sentence onsets beyond the share of words there.
    E is the book's statistic, not the paper's (:func:`reduction_onsets` gives it per language
    and level).
    """
    out = positive_reductions(table, pairs)
    out["pos"] = normalised_position(out, unit=("lang", "story_id", "sent_idx"))
    if "para_idx" in out:
        ordered = _paragraph_order(out)
        out["para_pos"] = normalised_position(ordered, unit=("lang", "story_id", "para_idx"),
                                              order="_order")
    enrich = {}
    for name in pairs or ("P", "D", "DP"):
        col = f"delta_{name}"
        if col in out:
            ok = out[col].notna()
            enrich[name] = onset_enrichment(out.loc[ok, "pos"], out.loc[ok, col])
    return out, enrich


# =========================================================================== Bloom-VIST design
def filter_stories(table: pd.DataFrame, *, min_paragraphs: int = 5,
                   min_words: int = 10) -> pd.DataFrame:
    """The stories Gay et al. keep for their reduction densities (App. Figs. 8-20).

    A story (``lang, story_id``) is kept when its paragraphs are numbered 0 … n − 1 without a
    gap, n ≥ ``min_paragraphs``, and *every* paragraph has ≥ ``min_words`` words (word rows of
    ``table``, whatever their surprisals). Returns the word rows of the kept stories (a copy),
    with ``attrs["n_stories"]`` (before) and ``attrs["n_kept"]``.

    >>> t = pd.DataFrame({"lang": "x", "story_id": ["a"] * 4 + ["b"] * 3,
    ...                   "para_idx": [0, 0, 1, 1, 0, 1, 1]})
    >>> filter_stories(t, min_paragraphs=2, min_words=2).story_id.unique().tolist()
    ['a']
    """
    _check_table(table, ["lang", "story_id", "para_idx"])
    if min_paragraphs < 1 or min_words < 1:
        raise ValueError(f"min_paragraphs and min_words must be ≥ 1, got {min_paragraphs}, "
                         f"{min_words}")
    story = ["lang", "story_id"]
    per_para = table.groupby(story + ["para_idx"], observed=True).size().rename("n").reset_index()
    g = per_para.groupby(story, observed=True)
    summary = pd.DataFrame({"n_paras": g.size(), "max_idx": g["para_idx"].max(),
                            "min_idx": g["para_idx"].min(), "min_len": g["n"].min()})
    ok = ((summary.min_idx == 0) & (summary.max_idx == summary.n_paras - 1)
          & (summary.n_paras >= min_paragraphs) & (summary.min_len >= min_words))
    keep = summary.index[ok.to_numpy()]
    rows = pd.MultiIndex.from_frame(table[story]).isin(keep)
    out = table.loc[rows].copy()
    out.attrs["n_stories"], out.attrs["n_kept"] = int(len(summary)), int(ok.sum())
    return out


def stories_of_length(measures: pd.DataFrame, n_units: int, *,
                      length: str = "n_units_in_story") -> pd.DataFrame:
    """Unit rows of the stories with exactly ``n_units`` units (Gay et al. Fig. 4: stories of
    20 paragraphs). ``measures``: :func:`story_unit_measures`'s table, whose ``length`` column
    counts the story's units before any exclusion."""
    _check_table(measures, [length])
    if int(n_units) != n_units or n_units < 1:
        raise ValueError(f"n_units must be a positive integer, got {n_units!r}")
    return measures[measures[length].to_numpy() == n_units].copy()


def uid_cv_table(measures: pd.DataFrame, *, by: str = "lang",
                 conditions: Sequence[str] = ("U", "P", "D", "PD")) -> pd.DataFrame:
    """Gay et al.'s Table 5: mean over units of CV = √UID_v / abs(mean surprisal) (unitless).

    Computed per unit row of ``measures`` (paragraphs in the paper) — unlike ``cv_global``
    (sd with ddof 1 over s̄) — and averaged per ``by`` × condition; a unit with mean 0 gives
    NaN and is skipped. Returns a wide table (rows ``by``, columns the conditions present, in
    ``conditions`` order).

    >>> m = pd.DataFrame({"lang": ["x", "x"], "condition": ["U", "P"],
    ...                   "uid_v": [1.0, 4.0], "mean": [2.0, -8.0]})
    >>> uid_cv_table(m).loc["x"].tolist()
    [0.5, 0.25]
    """
    _check_table(measures, [by, "condition", "uid_v", "mean"])
    mean = measures["mean"].to_numpy(float)
    with np.errstate(divide="ignore", invalid="ignore"):
        cv = np.where(mean != 0, np.sqrt(measures["uid_v"].to_numpy(float)) / np.abs(mean),
                      np.nan)
    data = measures[[by, "condition"]].assign(uid_cv=cv)
    wide = data.pivot_table(index=by, columns="condition", values="uid_cv", aggfunc="mean",
                            observed=True)
    cols = [c for c in conditions if c in wide.columns]
    out = wide[cols]
    out.columns.name = "condition"
    return out


def story_trend_table(measures: Mapping[str, pd.DataFrame], *,
                      outcomes: Sequence[str] = ("uid_v", "mean"), min_sentences: int = 3,
                      reference: str = "U", min_groups: int = 5,
                      min_rows: int = 30) -> pd.DataFrame:
    """Gay et al.'s Tables 6-7: per language, unit level and outcome, the slope of each
    condition over the relative position in the story, from :func:`story_position_models`.

    ``measures``: {level name: :func:`story_unit_measures` table}, e.g. ``{"sentence": …,
    "paragraph": …}``. At the ``"sentence"`` level only paragraphs with ≥ ``min_sentences``
    measured sentences are kept, as in the authors' script (needs ``para_idx``; 1 keeps all).
    For each (lang, level, outcome) the model ``y ~ rel_pos * C(condition) + log1p(n_words)``
    (random intercept and slope by story, REML) gives the ``reference`` slope (its ``rel_pos``
    coefficient, ``p`` its test against 0) and each other condition's slope = reference slope +
    interaction (``p`` tests the *difference* from the reference, as in the paper). Slopes are
    in units of the outcome (nats² for ``uid_v``, nats for ``mean``) per story length
    (rel_pos 0 → 1). Columns ``lang, level, outcome, condition, slope, p, converged, n_obs,
    n_stories``; language/level pairs with too little data are absent.
    """
    if min_sentences < 1:
        raise ValueError(f"min_sentences must be ≥ 1, got {min_sentences}")
    rows = []
    done: dict = {}  # identical model inputs are fitted once (tiny: paragraphs = sentences)
    for level, table in measures.items():
        _check_table(table, ["lang", "story_id", "condition", "rel_pos", "n_words", *outcomes])
        data = table
        if level == "sentence" and min_sentences > 1:
            if "para_idx" not in table:
                raise ValueError("min_sentences > 1 needs the paragraph of each sentence "
                                 "(para_idx) in the sentence measures")
            n = table.groupby(["lang", "story_id", "para_idx"], observed=True)[
                "sent_idx"].transform("nunique")
            data = table[n.to_numpy() >= min_sentences]
        for outcome in outcomes:
            used = data[["lang", "story_id", "condition", "rel_pos", "n_words", outcome]]
            key = (outcome, len(used),
                   int(pd.util.hash_pandas_object(used, index=False).sum()))
            if key not in done:
                done[key] = story_position_models(data, outcome=outcome, by="lang",
                                                  reference=reference, min_groups=min_groups,
                                                  min_rows=min_rows)
            fits = done[key]
            for lang, f in fits.groupby("group", sort=True):
                est = dict(zip(f["term"], f["estimate"]))
                pv = dict(zip(f["term"], f["pvalue"]))
                base = est.get("rel_pos", np.nan)
                info = dict(lang=lang, level=level, outcome=outcome,
                            converged=bool(f["converged"].all()), n_obs=int(f["n_obs"].iloc[0]),
                            n_stories=int(f["n_stories"].iloc[0]))
                rows.append(dict(info, condition=reference, slope=base,
                                 p=pv.get("rel_pos", np.nan)))
                for term in f["term"]:
                    if term.startswith("rel_pos:") and "[T." in term:
                        cond = term.rsplit("[T.", 1)[1].rstrip("]")
                        rows.append(dict(info, condition=cond, slope=base + est[term],
                                         p=pv[term]))
    cols = ["lang", "level", "outcome", "condition", "slope", "p", "converged", "n_obs",
            "n_stories"]
    return pd.DataFrame(rows, columns=cols)


def trend_layout(trends: pd.DataFrame, outcome: str = "uid_v", *,
                 conditions: Sequence[str] = ("U", "P", "D", "PD")) -> pd.DataFrame:
    """:func:`story_trend_table` laid out as the paper's Table 6 (``uid_v``) or 7 (``mean``):
    rows (lang, level), one column per condition, cells "slope stars" (``***`` p < .001,
    ``**`` < .01, ``*`` < .05, ``n.s.``; slopes to 3 decimals)."""
    _check_table(trends, ["lang", "level", "outcome", "condition", "slope", "p"])
    sub = trends[trends["outcome"] == outcome]
    p = sub["p"].to_numpy(float)
    stars = np.select([p < 0.001, p < 0.01, p < 0.05], ["***", "**", "*"], "n.s.")
    cells = sub.assign(cell=[f"{v:.3f} {st}" for v, st in zip(sub["slope"], stars)])
    wide = cells.pivot_table(index=["lang", "level"], columns="condition", values="cell",
                             aggfunc="first")
    return wide[[c for c in conditions if c in wide.columns]]


def reduction_onsets(reductions: pd.DataFrame, *, onset: float = 0.2,
                     names: Sequence[str] = ("P", "D", "DP"), by: str = "lang") -> pd.DataFrame:
    """The book's onset statistic (not the paper's): onset enrichment E of each reduction δ
    (:func:`onset_enrichment`) per ``by`` group and level — sentence (``pos``) and, when the
    table has it, paragraph (``para_pos``). ``reductions``: :func:`story_reductions`'s word
    table. Columns ``<by>, level, reduction, E`` (E > 1: reductions front-loaded in the unit).
    """
    _check_table(reductions, [by, "pos"])
    levels = {"sentence": "pos"}
    if "para_pos" in reductions:
        levels["paragraph"] = "para_pos"
    rows = []
    for key, g in reductions.groupby(by, sort=True, observed=True):
        for level, col in levels.items():
            for name in names:
                d = f"delta_{name}"
                if d not in g:
                    continue
                ok = g[d].notna()
                rows.append({by: key, "level": level, "reduction": f"δ_{name}",
                             "E": onset_enrichment(g.loc[ok, col], g.loc[ok, d], onset=onset)})
    return pd.DataFrame(rows, columns=[by, "level", "reduction", "E"])
