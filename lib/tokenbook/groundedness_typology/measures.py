"""Groundedness of words and a typology of word classes (Haley, Goldwater & Ponti 2025).

Input is the word surprisal pivot table of the grounded chapters (one row per tagged word of a
caption; ``tokenbook.grounded.tables.caption_word_table`` or the authors' released table via
``tokenbook.data.released``) with at least ``lang, unit_id, word, upos, s_U, s_P`` — surprisals in
**nats** of the same word, in the same caption after the same prefix, under the text-only LM (U)
and the captioner that sees the image (P), beginning-of-word corrected.

* **Groundedness** of a word token: ``g = s_U − s_P`` (nats) = log p_P(w | ctx, image) −
  log p_U(w | ctx), an estimate of the pointwise mutual information between the word and the
  image given the context {cite}`haley2025grounded`. Positive = the image made the word more
  predictable. (The authors' column ``mutual_information`` = ``ft-pali_surprisal −
  paligemma_surprisal``, the same sign.)
* **Word classes** are UD UPOS tags. Analysed: :data:`POS_FOR_ANALYSIS` (the authors' 13; PUNCT,
  SYM, X, INTJ are excluded, and so are segments tagged with joined tags such as ``ADP+DET``:
  multi-word tokens, and words merged because a model token straddles them). Lexical vs functional follows UD's
  open-class / closed-class split: :data:`LEXICAL` = NOUN, PROPN, ADJ, VERB, ADV;
  :data:`FUNCTIONAL` = PRON, DET, ADP, AUX, CCONJ, SCONJ, PART, NUM (UD counts NUM as closed
  class; a reading we state, the paper's own split may differ).
* **Rank agreement** between languages is computed on rank vectors *indexed by UPOS*
  (:func:`rank_vectors`, :func:`rank_agreement`), not on label lists sorted by mean — the
  slip of the authors' exploratory script, kept as :func:`label_list_tau` to show the
  difference.
* **Readings we chose** where the paper is silent or its code has pitfalls: we keep words with
  exactly zero groundedness (the authors drop them because their skipped tokens have zero);
  words are identified by index, not by merging adjacent equal strings (their "repeated words"
  TODO); confidence intervals are percentile bootstraps that resample *captions* (the words of a
  caption share its image and its context, so they are not independent;
  :func:`tokenbook.stats.cluster_bootstrap_ci`, seeded); pairwise class tests are unpaired
  Welch t-tests (the code's "pairwise t-tests") with Cohen's d, BH-corrected over all
  comparisons of all languages (:func:`class_pair_tests`; :func:`pairwise_class_tests` keeps
  the within-language correction of the exercises).

This module holds the measures only; the figures that draw them are in
:mod:`tokenbook.groundedness_typology.figures`.
"""

from __future__ import annotations

import itertools
import warnings
from typing import Iterable, Mapping, Sequence

import numpy as np
import pandas as pd
from scipy import stats as _st

from tokenbook import stats as tstats
from tokenbook.data.norms import corpus_zipf, zipf_frequency
from tokenbook.validation import check_choice, check_positive_int, check_share, check_table

__all__ = ["POS_FOR_ANALYSIS", "LEXICAL", "FUNCTIONAL", "CLINE", "add_groundedness", "analysed",
           "class_summary", "lexical_vs_functional", "cline_holds", "pairwise_class_tests",
           "rank_vectors", "rank_agreement", "kendall_tau_b", "rank_agreement_test",
           "agreement_matrix", "label_list_tau", "type_table", "add_frequency", "merge_norms", "norms_analysis",
           "class_pair_tests", "class_pair_summary", "class_dominance_matrix"]

#: the authors' ``POS_FOR_ANALYSIS`` (PUNCT, SYM, X, INTJ excluded)
POS_FOR_ANALYSIS = ("NOUN", "PROPN", "ADJ", "VERB", "ADV", "NUM", "PRON", "DET", "ADP", "AUX",
                    "CCONJ", "SCONJ", "PART")
#: UD open classes among the analysed tags
LEXICAL = ("NOUN", "PROPN", "ADJ", "VERB", "ADV")
#: UD closed classes among the analysed tags
FUNCTIONAL = ("PRON", "DET", "ADP", "AUX", "CCONJ", "SCONJ", "PART", "NUM")
#: the cline of the paper's arXiv abstract
CLINE = ("NOUN", "ADJ", "VERB")

REQUIRED = ("lang", "unit_id", "word", "upos", "s_U", "s_P")


def _check_columns(frame: pd.DataFrame, columns: Iterable[str], where: str) -> None:
    check_table(frame, f"{where} (pass the word surprisal table: caption_word_table or the "
                       f"released table)", columns=columns, min_rows=0)


def add_groundedness(words: pd.DataFrame) -> pd.DataFrame:
    """Copy of the word table with ``groundedness = s_U − s_P`` (nats).

    Rows whose surprisals are not finite are dropped (a word the scorer could not align).
    """
    _check_columns(words, REQUIRED, "add_groundedness")
    out = words.copy()
    s_u = pd.to_numeric(out["s_U"], errors="coerce").to_numpy(float)
    s_p = pd.to_numeric(out["s_P"], errors="coerce").to_numpy(float)
    out["groundedness"] = s_u - s_p
    out = out[np.isfinite(out["groundedness"].to_numpy(float))]
    out["upos"] = out["upos"].astype(str)
    return out.reset_index(drop=True)


def analysed(words: pd.DataFrame, classes: Sequence[str] = POS_FOR_ANALYSIS) -> pd.DataFrame:
    """Only rows whose UPOS is one of ``classes``, with a ``class_kind`` column (lexical/functional)."""
    if "groundedness" not in words:
        words = add_groundedness(words)
    out = words[words["upos"].isin(list(classes))].copy()
    out["class_kind"] = np.where(out["upos"].isin(LEXICAL), "lexical",
                                 np.where(out["upos"].isin(FUNCTIONAL), "functional", "other"))
    return out.reset_index(drop=True)


# -------------------------------------------------------------------------------------------
# Bootstrap clustered by caption (the resampling core: tokenbook.stats.cluster_bootstrap_ci)
# -------------------------------------------------------------------------------------------

def _group_mean_gap(units: np.ndarray, times: np.ndarray) -> np.ndarray:
    """mean(value | group) − mean(value | ~group) of pooled units, per resample: ``units``
    [n, 2] = (value, group as 0/1), ``times`` [b, n] how often each unit is pooled → [b]."""
    v, g = units[:, 0], units[:, 1]
    with np.errstate(invalid="ignore", divide="ignore"):
        return (times @ (v * g)) / (times @ g) - (times @ (v * (1 - g))) / (times @ (1 - g))


# -------------------------------------------------------------------------------------------
# Word classes
# -------------------------------------------------------------------------------------------

def class_summary(words: pd.DataFrame, *, classes: Sequence[str] = POS_FOR_ANALYSIS,
                  min_count: int = 1, n_boot: int = 1000, seed: int = 0,
                  level: float = 0.95) -> pd.DataFrame:
    """Mean groundedness per (lang, UPOS) with a seeded percentile-bootstrap CI resampling
    captions (``unit_id``; :func:`tokenbook.stats.cluster_bootstrap_ci`).

    Returns ``lang, upos, class_kind, n, mean, sd, ci_low, ci_high`` (nats), classes with fewer
    than ``min_count`` tokens left out; sorted by language then descending mean. ``n_boot=0``:
    the means alone (``ci_low``/``ci_high`` NaN), for statistics that read only the means.
    """
    data = analysed(words, classes)
    rows = []
    for (lang, upos), g in data.groupby(["lang", "upos"], sort=True):
        x = g["groundedness"].to_numpy(float)
        if x.size < max(min_count, 1):
            continue
        lo, hi = tstats.cluster_bootstrap_ci(x, g["unit_id"].to_numpy(), n_boot=n_boot,
                                             seed=seed, level=level) \
            if x.size >= 2 and n_boot else (np.nan, np.nan)
        rows.append({"lang": lang, "upos": upos, "class_kind": g["class_kind"].iloc[0],
                     "n": int(x.size), "mean": float(x.mean()),
                     "sd": float(x.std(ddof=1)) if x.size > 1 else np.nan,
                     "ci_low": lo, "ci_high": hi})
    out = pd.DataFrame(rows, columns=["lang", "upos", "class_kind", "n", "mean", "sd",
                                      "ci_low", "ci_high"])
    return out.sort_values(["lang", "mean"], ascending=[True, False]).reset_index(drop=True)


def lexical_vs_functional(words: pd.DataFrame, *, n_boot: int = 1000, seed: int = 0,
                          level: float = 0.95) -> pd.DataFrame:
    """Per language: mean groundedness of lexical and functional tokens, and two tests.

    Columns: ``lang, n_lexical, n_functional, mean_lexical, mean_functional, diff`` (lexical −
    functional, nats), ``diff_ci_low/high`` (bootstrap resampling captions, both classes'
    words of a caption together; :func:`tokenbook.stats.cluster_bootstrap_ci`), ``p_diff``
    (Welch t-test), ``functional_ci_low/high`` (caption-clustered bootstrap CI of the
    functional mean), ``p_functional_gt0`` (one-sided one-sample t-test of functional > 0),
    and BH-adjusted ``q_diff``, ``q_functional_gt0`` over languages.
    """
    data = analysed(words)
    rows = []
    for lang, g in data.groupby("lang", sort=True):
        lex = g.loc[g["class_kind"] == "lexical", "groundedness"].to_numpy(float)
        fun = g.loc[g["class_kind"] == "functional", "groundedness"].to_numpy(float)
        row = {"lang": lang, "n_lexical": lex.size, "n_functional": fun.size,
               "mean_lexical": lex.mean() if lex.size else np.nan,
               "mean_functional": fun.mean() if fun.size else np.nan}
        row["diff"] = row["mean_lexical"] - row["mean_functional"]
        row.update(diff_ci_low=np.nan, diff_ci_high=np.nan, p_diff=np.nan,
                   functional_ci_low=np.nan, functional_ci_high=np.nan, p_functional_gt0=np.nan)
        if lex.size >= 2 and fun.size >= 2:
            units = np.column_stack([g["groundedness"].to_numpy(float),
                                     (g["class_kind"] == "lexical").to_numpy(float)])
            row["diff_ci_low"], row["diff_ci_high"] = tstats.cluster_bootstrap_ci(
                units, g["unit_id"].to_numpy(), _group_mean_gap, weighted=True,
                n_boot=n_boot, seed=seed, level=level)
            row["p_diff"] = float(_st.ttest_ind(lex, fun, equal_var=False).pvalue)
            fun_rows = g[g["class_kind"] == "functional"]
            row["functional_ci_low"], row["functional_ci_high"] = tstats.cluster_bootstrap_ci(
                fun, fun_rows["unit_id"].to_numpy(), n_boot=n_boot, seed=seed, level=level)
            row["p_functional_gt0"] = float(_st.ttest_1samp(fun, 0.0,
                                                            alternative="greater").pvalue)
        rows.append(row)
    out = pd.DataFrame(rows)
    if len(out):
        out["q_diff"] = tstats.benjamini_hochberg(out["p_diff"].to_numpy())
        out["q_functional_gt0"] = tstats.benjamini_hochberg(out["p_functional_gt0"].to_numpy())
    return out


def cline_holds(summary: pd.DataFrame, order: Sequence[str] = CLINE) -> pd.DataFrame:
    """Per language, whether the class means follow ``order`` strictly (default NOUN > ADJ > VERB).

    Returns ``lang``, one ``mean_<UPOS>`` column per class and ``holds`` (NaN-free bool; False
    when a class is missing in that language, with ``complete`` telling which).
    """
    _check_columns(summary, ("lang", "upos", "mean"), "cline_holds")
    wide = summary.pivot_table(index="lang", columns="upos", values="mean")
    rows = []
    for lang, r in wide.iterrows():
        vals = [r.get(u, np.nan) for u in order]
        complete = all(np.isfinite(v) for v in vals)
        holds = complete and all(a > b for a, b in zip(vals, vals[1:]))
        rows.append({"lang": lang, **{f"mean_{u}": v for u, v in zip(order, vals)},
                     "complete": complete, "holds": bool(holds)})
    return pd.DataFrame(rows)


def pairwise_class_tests(words: pd.DataFrame, *, classes: Sequence[str] = POS_FOR_ANALYSIS,
                         test: str = "welch", min_count: int = 2) -> pd.DataFrame:
    """All pairwise tests between UPOS classes within each language (``stats.pairwise_tests``).

    ``p_bh`` is Benjamini–Hochberg within a language (all class pairs of that language).
    Columns ``lang, a, b, n_a, n_b, mean_a, mean_b, diff, statistic, pvalue, p_bh``.
    """
    data = analysed(words, classes)
    parts = []
    for lang, g in data.groupby("lang", sort=True):
        counts = g["upos"].value_counts()
        present = [c for c in classes if counts.get(c, 0) >= min_count]
        if len(present) < 2:
            continue
        t = tstats.pairwise_tests(g, group="upos", value="groundedness", test=test,
                                  groups=present)
        t.insert(0, "lang", lang)
        parts.append(t)
    return pd.concat(parts, ignore_index=True) if parts else pd.DataFrame()


PAIR_COLUMNS = ("lang", "class_a", "class_b", "n_a", "n_b", "mean_a", "mean_b", "diff",
                "statistic", "p", "q", "effect")


def _pair_test(xa: np.ndarray, xb: np.ndarray, test: str) -> tuple[float, float, float]:
    """(statistic, p, effect) of one unpaired two-sample comparison; NaN when undefined."""
    na, nb = xa.size, xb.size
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # constant samples: NaN, said below
        if test == "mannwhitney":
            r = _st.mannwhitneyu(xa, xb, alternative="two-sided")
            # rank-biserial correlation P(a > b) − P(a < b) = 2U_a / (n_a n_b) − 1
            return float(r.statistic), float(r.pvalue), float(2 * r.statistic / (na * nb) - 1)
        r = _st.ttest_ind(xa, xb, equal_var=False)
    pooled = np.sqrt(((na - 1) * xa.var(ddof=1) + (nb - 1) * xb.var(ddof=1)) / (na + nb - 2))
    effect = float((xa.mean() - xb.mean()) / pooled) if pooled > 0 else np.nan
    stat, p = float(r.statistic), float(r.pvalue)
    if not np.isfinite(p):  # both classes constant: no test (kept as NaN, outside the FDR)
        stat = p = np.nan
    return stat, p, effect


def class_pair_tests(words: pd.DataFrame, *, classes: Sequence[str] = POS_FOR_ANALYSIS,
                     min_count: int = 2, test: str = "welch", fdr: str = "all"
                     ) -> pd.DataFrame:
    """Pairwise two-sample tests of groundedness between word classes within every language.

    For each language, every pair of ``classes`` with at least ``min_count`` tokens each is
    compared on the groundedness of its word tokens (nats). The comparison is **unpaired**:
    the two classes are different word tokens, with no unit to pair them by.

    * ``test="welch"`` (default; the authors' "pairwise t-tests", with unequal variances):
      ``scipy.stats.ttest_ind(equal_var=False)``; ``effect`` = Cohen's d,
      (mean_a − mean_b) / pooled sd (ddof 1; NaN when both classes are constant).
    * ``test="mannwhitney"``: two-sided ``scipy.stats.mannwhitneyu``; ``effect`` = the
      rank-biserial correlation 2U_a/(n_a n_b) − 1 = P(a > b) − P(a < b), in [−1, 1].

    ``q``: Benjamini–Hochberg adjusted p over **all** comparisons in the table (every pair of
    every language; ``fdr="all"``), or over the pairs of each language (``fdr="language"``,
    as :func:`pairwise_class_tests`). Pairs without a p-value (constant classes) stay NaN
    and do not count.

    ``class_a`` precedes ``class_b`` in ``classes`` (a pair has one orientation in every
    language); positive ``diff``/``effect`` = ``class_a`` more grounded. Tokens are treated as
    independent (as the authors' t-tests do); the words of one caption share its image, so
    p-values are optimistic — the bootstrap CIs of :func:`class_summary` resample captions.

    Returns ``lang, class_a, class_b, n_a, n_b, mean_a, mean_b, diff`` (nats), ``statistic``
    (t or U), ``p, q, effect``; one row per tested pair, languages sorted.

    >>> w = pd.DataFrame({"lang": "xx", "upos": ["NOUN"] * 4 + ["DET"] * 4,
    ...                   "groundedness": [2.0, 2.2, 1.8, 2.1, 0.0, 0.1, -0.1, 0.05]})
    >>> t = class_pair_tests(w)
    >>> t[["class_a", "class_b", "n_a", "n_b"]].values.tolist()
    [['NOUN', 'DET', 4, 4]]
    >>> bool(t["q"].iloc[0] < 0.001 and t["effect"].iloc[0] > 5)
    True
    """
    check_choice(test, "class_pair_tests: test", ("welch", "mannwhitney"))
    check_choice(fdr, "class_pair_tests: fdr", ("all", "language"))
    check_positive_int(min_count, "class_pair_tests: min_count", minimum=2)
    if isinstance(classes, str) or len(set(classes)) < 2:
        raise ValueError(f"class_pair_tests: classes must name at least two UPOS tags, got "
                         f"{classes!r}")
    if isinstance(words, pd.DataFrame) and "groundedness" in words.columns:
        check_table(words, "class_pair_tests: words", columns=("lang", "upos", "groundedness"),
                    numeric=("groundedness",), min_rows=0)
        data = words[np.isfinite(words["groundedness"].to_numpy(float))]
        data = data.assign(upos=data["upos"].astype(str))
    else:
        data = add_groundedness(words)
    classes = list(dict.fromkeys(classes))
    data = data[data["upos"].isin(classes)]
    rows = []
    for lang, g in data.groupby("lang", sort=True):
        vals = {u: x["groundedness"].to_numpy(float) for u, x in g.groupby("upos")}
        present = [c for c in classes if c in vals and vals[c].size >= min_count]
        for a, b in itertools.combinations(present, 2):
            xa, xb = vals[a], vals[b]
            stat, p, effect = _pair_test(xa, xb, test)
            rows.append({"lang": lang, "class_a": a, "class_b": b, "n_a": int(xa.size),
                         "n_b": int(xb.size), "mean_a": float(xa.mean()),
                         "mean_b": float(xb.mean()), "diff": float(xa.mean() - xb.mean()),
                         "statistic": stat, "p": p, "effect": effect})
    out = pd.DataFrame(rows, columns=[c for c in PAIR_COLUMNS if c != "q"])
    if out.empty:  # typed columns: no class has min_count tokens (e.g. a tiny released table)
        out = out.astype({c: float for c in ("mean_a", "mean_b", "diff", "statistic", "p",
                                             "effect")} | {"n_a": "int64", "n_b": "int64"})
    out.insert(out.columns.get_loc("p") + 1, "q", np.nan)
    if len(out):
        if fdr == "all":
            out["q"] = tstats.benjamini_hochberg(out["p"].to_numpy(float))
        else:
            for _, idx in out.groupby("lang").groups.items():
                out.loc[idx, "q"] = tstats.benjamini_hochberg(out.loc[idx, "p"].to_numpy(float))
    return out


def _check_pair_tests(tests: pd.DataFrame, where: str) -> None:
    check_table(tests, f"{where}: tests (pass class_pair_tests' table)",
                columns=("lang", "class_a", "class_b", "q", "effect"), numeric=("q", "effect"),
                min_rows=0)


def class_pair_summary(tests: pd.DataFrame, *, alpha: float = 0.05) -> pd.DataFrame:
    """How often each class pair differs across languages, and in which direction.

    ``tests``: :func:`class_pair_tests`' table. Per pair (``class_a, class_b``):
    ``n_languages`` that test it (finite q), ``n_a_gt_b`` / ``n_b_gt_a`` languages where the
    difference is significant (q < ``alpha``) with ``class_a`` / ``class_b`` more grounded
    (sign of ``effect``), ``share_significant`` = (n_a_gt_b + n_b_gt_a) / n_languages,
    ``share_a_gt_b``, ``share_b_gt_a``, and ``median_effect`` over the languages (Cohen's d
    or rank-biserial r, as the tests). Sorted by descending ``share_significant``.

    >>> t = pd.DataFrame({"lang": ["x", "y", "z"], "class_a": "NOUN", "class_b": "DET",
    ...                   "q": [0.001, 0.01, 0.2], "effect": [1.5, 0.9, -0.1]})
    >>> s = class_pair_summary(t).iloc[0]
    >>> int(s["n_languages"]), int(s["n_a_gt_b"]), int(s["n_b_gt_a"]), round(float(s["share_a_gt_b"]), 3)
    (3, 2, 0, 0.667)
    """
    _check_pair_tests(tests, "class_pair_summary")
    check_share(alpha, "class_pair_summary: alpha", open_low=True)
    cols = ["class_a", "class_b", "n_languages", "n_a_gt_b", "n_b_gt_a", "share_significant",
            "share_a_gt_b", "share_b_gt_a", "median_effect"]
    t = tests[np.isfinite(tests["q"].to_numpy(float))]
    if not len(t):
        return pd.DataFrame(columns=cols)
    sig = t["q"].to_numpy(float) < alpha
    eff = t["effect"].to_numpy(float)
    t = t.assign(_a=sig & (eff > 0), _b=sig & (eff < 0))
    out = (t.groupby(["class_a", "class_b"], sort=False)
           .agg(n_languages=("lang", "size"), n_a_gt_b=("_a", "sum"), n_b_gt_a=("_b", "sum"),
                median_effect=("effect", "median"))
           .reset_index())
    n = out["n_languages"].to_numpy(float)
    out["share_a_gt_b"] = out["n_a_gt_b"] / n
    out["share_b_gt_a"] = out["n_b_gt_a"] / n
    out["share_significant"] = out["share_a_gt_b"] + out["share_b_gt_a"]
    out = out[cols].astype({"n_languages": int, "n_a_gt_b": int, "n_b_gt_a": int})
    out["_size"] = out["median_effect"].abs()
    return (out.sort_values(["share_significant", "_size"], ascending=False, kind="mergesort")
            .drop(columns="_size").reset_index(drop=True))


def class_dominance_matrix(tests: pd.DataFrame, *, alpha: float = 0.05,
                           classes: Sequence[str] | None = None) -> pd.DataFrame:
    """Class × class share of languages in which the **row** class is significantly more
    grounded than the **column** class (q < ``alpha``), from :func:`class_pair_tests`.

    Entry (r, c) + entry (c, r) = the share of the languages testing the pair where it
    differs; NaN where no language tests the pair, and on the diagonal. Rows and columns are
    ``classes`` if given, else the tested classes ordered by net dominance (mean share of
    wins minus losses), so a cline shared by the languages shows as a filled upper triangle.

    >>> t = pd.DataFrame({"lang": ["x", "y"], "class_a": "NOUN", "class_b": "DET",
    ...                   "q": [0.001, 0.5], "effect": [1.5, 0.2]})
    >>> m = class_dominance_matrix(t)
    >>> float(m.loc["NOUN", "DET"]), float(m.loc["DET", "NOUN"])
    (0.5, 0.0)
    """
    s = class_pair_summary(tests, alpha=alpha)
    tested = list(dict.fromkeys([*s["class_a"], *s["class_b"]]))
    keys = list(classes) if classes is not None else tested
    m = pd.DataFrame(np.nan, index=pd.Index(keys, name="more grounded"),
                     columns=pd.Index(keys, name="less grounded"))
    for r in s.itertuples(index=False):
        if r.class_a in m.index and r.class_b in m.index:
            m.loc[r.class_a, r.class_b] = float(r.share_a_gt_b)
            m.loc[r.class_b, r.class_a] = float(r.share_b_gt_a)
    if classes is None and len(keys):
        net = m.mean(axis=1, skipna=True).fillna(0) - m.mean(axis=0, skipna=True).fillna(0)
        order = net.sort_values(ascending=False, kind="mergesort").index
        m = m.loc[order, order]
    return m


# -------------------------------------------------------------------------------------------
# Cross-language agreement of class orderings
# -------------------------------------------------------------------------------------------

def rank_vectors(summary: pd.DataFrame, *, classes: Sequence[str] | None = None) -> pd.DataFrame:
    """Rank of each UPOS within each language (1 = most grounded): index UPOS, columns languages.

    Only classes present in every language are ranked (so all vectors share one key set); pass
    ``classes`` to fix the set. Ties get average ranks.
    """
    _check_columns(summary, ("lang", "upos", "mean"), "rank_vectors")
    wide = summary.pivot_table(index="upos", columns="lang", values="mean")
    if classes is not None:
        wide = wide.reindex(list(classes))
    wide = wide.dropna(how="any")
    return wide.rank(ascending=False, method="average")


def rank_agreement(ranks: pd.DataFrame) -> pd.DataFrame:
    """Kendall's τ_b and Spearman's ρ for every pair of languages, on UPOS-indexed rank vectors.

    ``ranks`` is :func:`rank_vectors` output (index UPOS, one column per language). Returns
    ``lang_a, lang_b, n_classes, kendall_tau, kendall_p, spearman_rho, spearman_p``.
    """
    if not isinstance(ranks, pd.DataFrame):
        raise TypeError("rank_agreement takes the UPOS × language DataFrame of rank_vectors")
    rows = []
    for a, b in itertools.combinations(ranks.columns, 2):
        tau, tp, n = tstats.kendall_tau(ranks[a], ranks[b])
        rho, rp, _ = tstats.spearman_rho(ranks[a], ranks[b])
        rows.append({"lang_a": a, "lang_b": b, "n_classes": n, "kendall_tau": tau,
                     "kendall_p": tp, "spearman_rho": rho, "spearman_p": rp})
    return pd.DataFrame(rows, columns=["lang_a", "lang_b", "n_classes", "kendall_tau",
                                       "kendall_p", "spearman_rho", "spearman_p"])


def kendall_tau_b(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Kendall's τ_b of ``x`` against ``y`` along the last axis, batched over the others.

    The statistic of :func:`scipy.stats.kendalltau` (``variant="b"``) with its arithmetic —
    the same integer counts of concordant minus discordant pairs and of ties, then
    ``(C − D) / √(n₀ − n₁) / √(n₀ − n₂)`` clipped to [−1, 1] — so equal to it bit for bit
    (``tests/groundedness_typology``); NaN where an input holds NaN or either vector is
    constant, as scipy gives. Without scipy's per-call overhead and p-value, which a
    permutation test over thousands of short rank vectors does not need (about 40× faster).
    ``x``, ``y``: arrays of one shape ``(..., n)``; returns ``(...)``.
    """
    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    if x.shape != y.shape or x.ndim < 1:
        raise ValueError(f"kendall_tau_b needs two arrays of one shape (..., n), got "
                         f"{x.shape} and {y.shape}")
    n = x.shape[-1]
    if n < 2:
        return np.full(x.shape[:-1], np.nan)
    i, j = np.triu_indices(n, 1)
    undefined = np.isnan(x).any(-1) | np.isnan(y).any(-1)
    x, y = np.nan_to_num(x), np.nan_to_num(y)          # (their rows' answers are NaN)
    sx = np.sign(x[..., j] - x[..., i]).astype(np.int64)    # every pair i < j
    sy = np.sign(y[..., j] - y[..., i]).astype(np.int64)
    con_minus_dis = (sx * sy).sum(-1)
    tot = n * (n - 1) // 2
    xtie, ytie = (sx == 0).sum(-1), (sy == 0).sum(-1)
    undefined |= (xtie == tot) | (ytie == tot)
    with np.errstate(divide="ignore", invalid="ignore"):
        tau = con_minus_dis / np.sqrt(tot - xtie) / np.sqrt(tot - ytie)
    return np.where(undefined, np.nan, np.minimum(1.0, np.maximum(-1.0, tau)))


def rank_agreement_test(ranks: pd.DataFrame, *, n_perm: int = 1000, seed: int = 0) -> dict:
    """Mean pairwise Kendall τ across languages and its permutation p-value.

    Null hypothesis: languages share no ordering of the classes. Each resample permutes every
    language's rank vector independently (seeded) and recomputes the mean pairwise τ_b;
    ``p = (1 + #{null ≥ observed}) / (n_perm + 1)`` (one-sided). Returns ``mean_tau,
    mean_rho, p_perm, n_languages, n_classes, n_perm``.
    """
    if not isinstance(ranks, pd.DataFrame):
        raise TypeError("rank_agreement_test takes the UPOS × language DataFrame of rank_vectors")
    vals = ranks.to_numpy(float)
    n_cls, n_lang = vals.shape
    out = {"mean_tau": np.nan, "mean_rho": np.nan, "p_perm": np.nan, "n_languages": n_lang,
           "n_classes": n_cls, "n_perm": n_perm}
    if n_lang < 2 or n_cls < 3:
        return out
    pairs = list(itertools.combinations(range(n_lang), 2))
    first, second = [a for a, _ in pairs], [b for _, b in pairs]

    def mean_taus(v: np.ndarray) -> np.ndarray:   # v: (..., n_classes, n_languages)
        taus = kendall_tau_b(np.swapaxes(v[..., first], -1, -2),
                             np.swapaxes(v[..., second], -1, -2))   # (..., n_pairs)
        # np.mean of each row alone: the summation order of a mean over a Python list
        return np.array([np.mean(row) for row in taus.reshape(-1, len(pairs))])

    obs = float(mean_taus(vals)[0])
    rng = np.random.default_rng(seed)
    shuffled = [np.column_stack([rng.permutation(vals[:, j]) for j in range(n_lang)])
                for _ in range(n_perm)]
    null = mean_taus(np.stack(shuffled)) if shuffled else np.zeros(0)
    out.update(mean_tau=obs, p_perm=float((1 + np.sum(null >= obs - 1e-12)) / (n_perm + 1)),
               mean_rho=float(np.mean([_st.spearmanr(vals[:, a], vals[:, b]).statistic
                                       for a, b in pairs])))
    return out


def agreement_matrix(agreement: pd.DataFrame, value: str = "kendall_tau") -> pd.DataFrame:
    """Square language × language matrix of ``value`` (diagonal 1) for a heatmap."""
    langs = sorted(set(agreement["lang_a"]) | set(agreement["lang_b"]))
    m = pd.DataFrame(np.eye(len(langs)), index=langs, columns=langs)
    for _, r in agreement.iterrows():
        m.loc[r["lang_a"], r["lang_b"]] = m.loc[r["lang_b"], r["lang_a"]] = r[value]
    return m


def label_list_tau(means_a: Mapping[str, float], means_b: Mapping[str, float]) -> float:
    """The exploratory script's slip, kept for comparison: τ between *label lists* sorted by mean.

    ``kendalltau(order_a, order_b)`` on lists of labels ranks the label *strings* alphabetically
    and correlates them position by position, so the result depends on the tags' spelling, not
    on whether the two languages rank the classes alike. Do not use it for inference.
    """
    keys = sorted(set(means_a) & set(means_b))
    order_a = sorted(keys, key=lambda k: -means_a[k])
    order_b = sorted(keys, key=lambda k: -means_b[k])
    # scipy ranks the label strings alphabetically: the result depends on the tag names
    return float(_st.kendalltau(np.array(order_a), np.array(order_b)).statistic)


# -------------------------------------------------------------------------------------------
# Types and norms
# -------------------------------------------------------------------------------------------

def type_table(words: pd.DataFrame, *, min_tokens: int = 5, lowercase: bool = True,
               classes: Sequence[str] = POS_FOR_ANALYSIS) -> pd.DataFrame:
    """Type-level groundedness: mean over tokens of each (lang, word, UPOS) with ≥ ``min_tokens``.

    Columns ``lang, word, upos, n_tokens, groundedness, s_U, s_P`` (nats) and ``concreteness``
    when the word table has it (its per-type mean).
    """
    if min_tokens < 1:
        raise ValueError(f"min_tokens must be ≥ 1, got {min_tokens}")
    data = analysed(words, classes)
    data["word"] = data["word"].astype(str)
    if lowercase:
        data["word"] = data["word"].str.lower()
    agg = {"n_tokens": ("groundedness", "size"), "groundedness": ("groundedness", "mean"),
           "s_U": ("s_U", "mean"), "s_P": ("s_P", "mean")}
    if "concreteness" in data:
        data["concreteness"] = pd.to_numeric(data["concreteness"], errors="coerce")
        agg["concreteness"] = ("concreteness", "mean")
    out = data.groupby(["lang", "word", "upos"], as_index=False).agg(**agg)
    return out[out["n_tokens"] >= min_tokens].reset_index(drop=True)


def add_frequency(types: pd.DataFrame, *, words: pd.DataFrame | None = None,
                  source: str = "corpus", langs: Sequence[str] | None = None) -> pd.DataFrame:
    """Add ``zipf`` word frequency (log10 per billion words) to a type table.

    ``source="corpus"``: from the word table's own counts per language (tiny world; pass
    ``words``). ``source="wordfreq"``: ``wordfreq.zipf_frequency`` per language (paper scale),
    only for ``langs`` if given (others stay NaN).
    """
    out = types.copy()
    if source == "corpus":
        if words is None:
            raise ValueError("add_frequency(source='corpus') needs the word table `words`")
        out["zipf"] = np.nan
        for lang, g in words.groupby("lang"):
            freq = corpus_zipf(g["word"].astype(str).str.lower())
            mask = out["lang"] == lang
            out.loc[mask, "zipf"] = out.loc[mask, "word"].map(freq).to_numpy(float)
    elif source == "wordfreq":
        out["zipf"] = np.nan
        for lang, idx in out.groupby("lang").groups.items():
            if langs is not None and lang not in langs:
                continue
            out.loc[idx, "zipf"] = zipf_frequency(out.loc[idx, "word"], str(lang))
    else:
        raise ValueError(f"source must be 'corpus' or 'wordfreq', got {source!r}")
    return out


def merge_norms(types: pd.DataFrame, norms: pd.DataFrame, *, lang: str = "en") -> pd.DataFrame:
    """Attach norms (``word, concreteness[, imageability]``) to the ``lang`` types by word."""
    _check_columns(norms, ("word", "concreteness"), "merge_norms")
    sub = types[types["lang"] == lang].drop(columns=[c for c in ("concreteness", "imageability")
                                                     if c in types.columns])
    return sub.merge(norms, on="word", how="inner")


def norms_analysis(types: pd.DataFrame, *, norms: Sequence[str] = ("concreteness",),
                   frequency: str | None = "zipf") -> tuple[dict, pd.DataFrame]:
    """How much of type-level groundedness the norms (and frequency) explain.

    Fits OLS ``groundedness ~ norms`` (R², ``r2_norms``) and ``groundedness ~ norms + frequency``
    (``r2_norms_freq``); Pearson r and Spearman ρ of groundedness with each predictor. The
    residual of the norms model is returned per type as ``informativity``: the part of
    groundedness the norms do not account for (the paper's reading of the gap).

    Returns ``(summary dict, types with 'predicted' and 'informativity' columns)``.
    """
    cols = list(norms) + ([frequency] if frequency else [])
    _check_columns(types, ["groundedness", *cols], "norms_analysis")
    data = types.dropna(subset=["groundedness", *cols]).copy()
    n = len(data)
    summary: dict = {"n_types": n}
    y = data["groundedness"].to_numpy(float)
    for c in cols:
        x = data[c].to_numpy(float)
        ok = n >= 3 and np.std(x) > 0 and np.std(y) > 0
        summary[f"pearson_{c}"] = float(_st.pearsonr(x, y).statistic) if ok else np.nan
        summary[f"spearman_{c}"] = float(_st.spearmanr(x, y).statistic) if ok else np.nan
        summary[f"spearman_{c}_p"] = float(_st.spearmanr(x, y).pvalue) if ok else np.nan

    def _ols(columns):
        X = np.column_stack([np.ones(n)] + [data[c].to_numpy(float) for c in columns])
        if n <= X.shape[1]:
            return np.full(n, np.nan), np.nan
        beta, *_ = np.linalg.lstsq(X, y, rcond=None)
        pred = X @ beta
        ss_tot = float(((y - y.mean()) ** 2).sum())
        return pred, (1.0 - float(((y - pred) ** 2).sum()) / ss_tot) if ss_tot > 0 else np.nan

    pred, summary["r2_norms"] = _ols(list(norms))
    summary["r2_norms_freq"] = _ols(cols)[1] if frequency else np.nan
    data["predicted"] = pred
    data["informativity"] = y - pred
    return summary, data.reset_index(drop=True)
