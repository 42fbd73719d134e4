"""Exercise checks and the toy world of the typology chapter
(``notebooks/exercises/groundedness_typology.py``).

Each ``check_*`` compares a reader's answer with
:mod:`tokenbook.groundedness_typology.measures` or :mod:`tokenbook.stats` on seeded word tables
(:mod:`tokenbook.answers`: ``✅`` when right, :class:`~tokenbook.answers.WrongAnswer` naming
the slip when not). Groundedness g = s_U − s_P in nats.
"""

from __future__ import annotations

from typing import Any, Callable, Mapping, Sequence

import numpy as np
import pandas as pd

from tokenbook.answers import (CheckResult, call_answer, close, compare_dict, compare_fn,
                               outcome, show_value)
from tokenbook.groundedness_typology.measures import (LEXICAL, analysed, class_summary,
                                                      cline_holds, label_list_tau,
                                                      lexical_vs_functional, pairwise_class_tests)
from tokenbook.stats import kendall_tau, spearman_rho

__all__ = ["TYPOLOGY_MEANS", "typology_world", "check_class_means",
           "check_lexical_minus_functional", "check_upos_tau", "check_typology_verdicts",
           "check_significant_pairs"]


#: mean groundedness (nats) of each class in :func:`typology_world`
TYPOLOGY_MEANS = {"NOUN": 1.6, "PROPN": 1.3, "ADJ": 1.1, "VERB": 0.7, "ADV": 0.35, "NUM": 0.6,
                  "PRON": 0.15, "DET": 0.05, "ADP": 0.1, "AUX": 0.0, "CCONJ": 0.0, "SCONJ": 0.0,
                  "PART": 0.0, "PUNCT": 0.8}


def typology_world(seed: int = 0, *, langs: Sequence[str] = ("en", "de", "ja"),
                   n_captions: int = 60, noun_grounding: float | None = None) -> pd.DataFrame:
    """Toy caption word table (the grounded chapters' format): ``lang, unit_id, word, upos,
    s_U, s_P`` (nats). Each class has the mean groundedness of :data:`TYPOLOGY_MEANS` plus a
    per-language shift and word-level noise; ``noun_grounding`` overrides NOUN's mean (switch
    the image's help for nouns off with a small value). PUNCT is present but not analysed."""
    rng = np.random.default_rng(seed)
    means = dict(TYPOLOGY_MEANS)
    if noun_grounding is not None:
        means["NOUN"] = float(noun_grounding)
    classes = list(means)
    weights = np.array([6, 1, 3, 3, 1, 1, 1, 4, 3, 1, 1, 0.5, 0.5, 2], float)
    weights /= weights.sum()
    rows = []
    for lang in langs:
        shift = {c: rng.normal(0, 0.08) for c in classes}
        for unit in range(n_captions):
            n = int(rng.integers(6, 14))
            upos = rng.choice(classes, size=n, p=weights)
            s_u = rng.gamma(3.0, 1.5, size=n)
            g = np.array([means[c] + shift[c] for c in upos]) + rng.normal(0, 0.6, size=n)
            for i in range(n):
                rows.append((lang, f"{lang}-{unit}", f"w{i}", upos[i], s_u[i], s_u[i] - g[i]))
    return pd.DataFrame(rows, columns=["lang", "unit_id", "word", "upos", "s_U", "s_P"])


def _class_means_reference(words: pd.DataFrame) -> pd.DataFrame:
    s = class_summary(words, n_boot=1)
    return s[["lang", "upos", "n", "mean"]]


def _frame_problem(got: Any, want: pd.DataFrame, keys: list[str], value: str,
                   label: str) -> str | None:
    if not isinstance(got, pd.DataFrame):
        return f"{label} must return a DataFrame, got {type(got).__name__}"
    missing = [c for c in keys + [value] if c not in got.columns]
    if missing:
        return f"{label}'s DataFrame lacks columns {missing} (has {list(got.columns)})"
    g = got.set_index(keys)[value]
    w = want.set_index(keys)[value]
    extra = sorted(map(str, set(g.index) - set(w.index)))
    lacking = sorted(map(str, set(w.index) - set(g.index)))
    if extra:
        return f"{label} has rows that should not be there: {extra[:5]}" + \
            (" (PUNCT, SYM, X and INTJ are not analysed)" if "PUNCT" in str(extra) else "")
    if lacking:
        return f"{label} lacks rows {lacking[:5]}"
    diff = (g.loc[w.index].astype(float) - w.astype(float)).abs()
    if (diff > 1e-6 * (1 + w.abs())).any():
        k = diff.idxmax()
        return f"{label}: at {k} {value} is {show_value(g.loc[k])}, expected {show_value(w.loc[k])}"
    return None


def check_class_means(fn: Callable, *, seed: int = 0, raise_on_wrong: bool = True
                      ) -> CheckResult:
    """Exercise (groundedness_typology): ``fn(words) -> DataFrame[lang, upos, n, mean]`` —
    groundedness g = s_U − s_P averaged per (lang, UPOS) over the analysed classes — against
    :func:`tokenbook.groundedness_typology.measures.class_summary`."""
    words = typology_world(seed, n_captions=25)
    got, err = call_answer(fn, (words.copy(),), "class_means")
    problem = err or _frame_problem(got, _class_means_reference(words), ["lang", "upos"], "mean",
                                    "class_means")
    if problem and isinstance(got, pd.DataFrame) and "mean" in got:
        flipped = _class_means_reference(words.assign(s_U=words["s_P"], s_P=words["s_U"]))
        if _frame_problem(got, flipped, ["lang", "upos"], "mean", "") is None:
            problem += ". This is what you get with g = s_P − s_U (the sign is flipped)"
    if problem is None:
        problem = _frame_problem(got, _class_means_reference(words), ["lang", "upos"], "n",
                                 "class_means")
    return outcome("Class means of groundedness", problem,
                   "agrees with tokenbook.groundedness_typology.measures.class_summary "
                   "(means and counts)",
                   raise_on_wrong)


def check_lexical_minus_functional(fn: Callable, *, seed: int = 0,
                                   raise_on_wrong: bool = True) -> CheckResult:
    """Exercise (groundedness_typology): ``fn(words) -> Series`` (index: lang) of mean lexical
    minus mean functional groundedness (tokens pooled within each kind) against
    :func:`tokenbook.groundedness_typology.measures.lexical_vs_functional` (``diff``)."""
    words = typology_world(seed, n_captions=25)
    want = lexical_vs_functional(words, n_boot=1).set_index("lang")["diff"]
    got, err = call_answer(fn, (words.copy(),), "lexical_minus_functional")
    problem = err
    if problem is None:
        if not isinstance(got, pd.Series):
            problem = f"lexical_minus_functional must return a pandas Series indexed by lang, " \
                      f"got {type(got).__name__}"
        elif sorted(map(str, got.index)) != sorted(want.index):
            problem = f"the Series' index is {list(got.index)}, expected the languages " \
                      f"{list(want.index)}"
        elif not close(got.loc[want.index].to_numpy(float), want.to_numpy()):
            mine = got.loc[want.index].to_numpy(float)
            problem = f"you have {show_value(got.loc[want.index])}, expected {show_value(want)}"
            a = analysed(words)
            lex = a["upos"].isin(LEXICAL + ("NUM",))
            num_lexical = a[lex].groupby("lang")["groundedness"].mean() \
                - a[~lex].groupby("lang")["groundedness"].mean()
            class_avg = a.groupby(["lang", "class_kind", "upos"])["groundedness"].mean() \
                .groupby(["lang", "class_kind"]).mean().unstack()
            class_avg = class_avg["lexical"] - class_avg["functional"]
            if close(mine, num_lexical.loc[want.index].to_numpy()):
                problem += ". This is what you get if you count NUM as lexical (UD counts it " \
                           "as a closed class)"
            elif close(mine, class_avg.loc[want.index].to_numpy()):
                problem += ". This is what you get if you average the class means instead of " \
                           "pooling the tokens"
    return outcome("Lexical minus functional", problem,
                   "agrees with tokenbook.groundedness_typology.measures.lexical_vs_functional",
                   raise_on_wrong)


def check_upos_tau(fn: Callable, *, seed: int = 0, raise_on_wrong: bool = True) -> CheckResult:
    """Exercise (groundedness_typology): ``fn(means_a, means_b) -> τ`` — Kendall's τ_b between
    two languages' class means given as dicts UPOS → mean, aligned on the shared classes —
    against :func:`tokenbook.stats.kendall_tau`."""
    rng = np.random.default_rng(seed)
    tags = list(TYPOLOGY_MEANS)[:13]
    cases = [({"NOUN": 3.0, "ADJ": 2.0, "VERB": 1.0, "DET": 0.0},
              {"NOUN": 2.5, "VERB": 2.0, "ADJ": 1.0, "DET": 0.1})]
    for _ in range(4):
        a = {t: float(rng.normal()) for t in tags}
        b = {t: float(a[t] + rng.normal(0, 0.7)) for t in tags if rng.uniform() < 0.85}
        cases.append((a, b))

    def ref(a, b):
        return kendall_tau(pd.Series(a), pd.Series(b))[0]

    problem = compare_fn(fn, ref, cases, "upos_tau", {
        "correlate label lists sorted by mean (the exploratory script's slip) instead of rank "
        "vectors indexed by UPOS": label_list_tau,
        "compute Spearman's ρ instead of Kendall's τ":
            lambda a, b: spearman_rho(pd.Series(a), pd.Series(b))[0]},
        describe=lambda c: f"<{len(c[0])} classes>, <{len(c[1])} classes>")
    return outcome("Rank agreement τ", problem,
                   f"agrees with tokenbook.stats.kendall_tau on {len(cases)} pairs of languages",
                   raise_on_wrong)


def _typology_reference(words: pd.DataFrame, alpha: float = 0.05) -> dict[str, bool]:
    cline = cline_holds(class_summary(words, n_boot=1))
    lvf = lexical_vs_functional(words, n_boot=200)
    return {"cline": bool(cline["holds"].all()),
            "lexical_gt_functional": bool(((lvf["diff"] > 0) & (lvf["q_diff"] < alpha)).all())}


def check_typology_verdicts(answer: Mapping[str, bool], *, seed: int = 0,
                            noun_grounding: float | None = 0.3,
                            raise_on_wrong: bool = True) -> CheckResult:
    """Exercise (groundedness_typology): in ``typology_world(seed, noun_grounding=…)``, does
    the cline NOUN > ADJ > VERB hold in every language, and is lexical > functional
    significant (BH q < 0.05) in every language? ``answer``: ``{"cline": bool,
    "lexical_gt_functional": bool}``."""
    expected = _typology_reference(typology_world(seed, noun_grounding=noun_grounding))
    problem = compare_dict(answer, expected, "answer")
    return outcome(f"Typology verdicts (noun_grounding={noun_grounding})", problem,
                   f"your verdicts match the data: {expected}", raise_on_wrong)


def check_significant_pairs(fn: Callable, *, seed: int = 0, raise_on_wrong: bool = True
                            ) -> CheckResult:
    """Exercise (groundedness_typology): ``fn(words, lang, alpha=0.05) -> int`` — how many
    pairs of analysed classes differ (Welch t-test, BH-adjusted within the language, q <
    alpha) — against :func:`tokenbook.groundedness_typology.measures.pairwise_class_tests`."""
    words = typology_world(seed, n_captions=40)
    tests = pairwise_class_tests(words)
    problem = None
    for lang in sorted(words["lang"].unique()):
        t = tests[tests["lang"] == lang]
        want = int((t["p_bh"] < 0.05).sum())
        got, err = call_answer(fn, (words.copy(), lang, 0.05), "n_significant_pairs")
        if err:
            problem = err
            break
        if not isinstance(got, (int, np.integer)) or int(got) != want:
            problem = f"n_significant_pairs(words, {lang!r}) returned {got!r}, expected {want}"
            if got == int((t["pvalue"] < 0.05).sum()):
                problem += ". This is the count of *unadjusted* p-values: apply " \
                           "Benjamini–Hochberg over all class pairs of the language"
            break
    return outcome("Significant class pairs", problem,
                   "agrees with tokenbook.groundedness_typology.measures.pairwise_class_tests "
                   "in every language",
                   raise_on_wrong)
