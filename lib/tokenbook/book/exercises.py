"""Exercises: answer checks, seeded toy data, and the student edition of the exercise pages.

Every chapter ``notebooks/<chapter>.py`` has a companion page ``notebooks/exercises/<chapter>.py``
(jupytext percent) with 4–6 exercises. Each exercise is three cells:

1. a markdown cell headed ``## Exercise N — …`` (the task, its level and time);
2. a code cell tagged ``solution`` (and ``hide-cell``, so the book shows it behind a toggle)
   whose first line is ``# Hint: …``: the instructor's solution;
3. a code cell calling one ``check_*`` function of this module, which compares the answer with
   the library's reference implementation on seeded inputs and says what is right or what is off.

A check returns a :class:`CheckResult` (shown as ``✅ …``) when the answer is right; when it is
wrong it raises :class:`WrongAnswer` (an ``AssertionError``) naming the input on which it failed,
the expected and the received value, and — where the answer matches a common slip (dividing by N
instead of N − 1, a flipped sign, …) — which slip. Pass ``raise_on_wrong=False`` to get the
failing :class:`CheckResult` back instead.

The **student edition** is generated, never hand-edited: :func:`student_notebook` replaces every
``solution`` cell by a stub that keeps the functions' signatures and docstrings and raises
``NotImplementedError`` with the hint. Command line::

    python -m tokenbook.book.exercises student [CHAPTER ... | --all] --out DIR [--format ipynb|py]
    python -m tokenbook.book.exercises instructor [CHAPTER ... | --all] --out DIR

(``make student`` writes every student edition to ``_build/student``.) Each edition folder holds
``<chapter>.ipynb`` (the chapter itself, which has no solutions) and
``<chapter>_exercises.ipynb``.

Units follow the library: surprisals and log-probabilities in nats, groundedness in nats,
geometric-mean probabilities in [0, 1].
"""

from __future__ import annotations

import argparse
import ast
import copy
import functools
import os
import re
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping, Sequence

import numpy as np
import pandas as pd

from tokenbook.book.costs import render
from tokenbook.book.ipynb import SETUP_TAG, chapter_notebook, repository_url
from tokenbook.book.runner import find_root
from tokenbook.cancellation_hypothesis.dynamics import flip_ratios, phi_matrix, phi_pairs
from tokenbook.cancellation_hypothesis.grpo import advantages, mixed_groups
from tokenbook.groundedness_typology.measures import (LEXICAL, analysed, class_summary,
                                                      cline_holds, label_list_tau,
                                                      lexical_vs_functional, pairwise_class_tests)
from tokenbook.memorisation_cartography.estimator import (counterfactual_memorisation,
                                                          geometric_mean_probability,
                                                          phenomenon_auroc, pivot_scores,
                                                          subset_masks)
from tokenbook.stats import (benjamini_hochberg, bootstrap_ci, kendall_tau, paired_wilcoxon,
                             spearman_rho)
from tokenbook.uid_grounding.measures import (onset_enrichment, positive_reductions,
                                              profile_measures)

__all__ = [
    "CheckResult", "WrongAnswer", "CHAPTERS",
    # uid_grounding
    "scaled_captions", "onset_world", "check_uid_measures", "check_scaling_verdicts",
    "check_benjamini_hochberg", "check_onset_enrichment", "check_onset_verdicts",
    # groundedness_typology
    "typology_world", "check_class_means", "check_lexical_minus_functional", "check_upos_tau",
    "check_typology_verdicts", "check_significant_pairs",
    # memorisation_cartography
    "memorisation_world", "check_cm_estimator", "check_cm_standard_error",
    "check_geometric_mean_probability", "check_auroc", "check_memorisation_verdicts",
    # cancellation_hypothesis
    "linear_head_batch", "linear_head_step", "check_grpo_advantages", "check_mixed_groups",
    "check_phi", "check_first_order_delta", "check_coupling_verdicts",
    # editions
    "page_path", "read_page", "exercise_cells", "make_stub", "student_notebook",
    "student_twin", "plain_markdown", "friendly_errors", "missing_answer",
    "write_edition", "main",
]

#: chapters that have an exercise page, in book order
CHAPTERS = ("uid_grounding", "groundedness_typology", "memorisation_cartography",
            "cancellation_hypothesis")
SOLUTION_TAG = "solution"
STUB_TAG = "exercise"
HIDE_TAGS = ("hide-cell", "hide-input", "hide-output", "remove-cell", "remove-input")


# =============================================================================== results
class WrongAnswer(AssertionError):
    """Raised by a ``check_*`` function when the answer is wrong (the message says why)."""


@dataclass
class CheckResult:
    """Outcome of one check: ``ok`` and a human-readable ``message``."""

    exercise: str
    ok: bool
    message: str

    def __bool__(self) -> bool:
        return self.ok

    def __str__(self) -> str:
        return f"{'✅' if self.ok else '❌'} {self.exercise}: {self.message}"

    def __repr__(self) -> str:  # a notebook or console shows the verdict, not the fields
        return str(self)


def _result(exercise: str, problem: str | None, ok_message: str,
            raise_on_wrong: bool) -> CheckResult:
    if problem is None:
        return CheckResult(exercise, True, ok_message)
    res = CheckResult(exercise, False, problem)
    if raise_on_wrong:
        raise WrongAnswer(str(res))
    return res


def _fmt(x: Any) -> str:
    if isinstance(x, (float, np.floating)):
        return f"{float(x):.6g}"
    if isinstance(x, np.ndarray):
        return np.array2string(x, precision=4, threshold=8, edgeitems=3)
    if isinstance(x, pd.Series):
        return _fmt(x.to_numpy()) if len(x) > 8 else str(x.round(4).to_dict())
    return repr(x)


def _as_array(x: Any, name: str) -> np.ndarray:
    if hasattr(x, "detach"):
        x = x.detach().cpu().numpy()
    try:
        return np.asarray(x, dtype=float)
    except (TypeError, ValueError) as exc:
        raise TypeError(f"{name} must be a number or an array of numbers, got "
                        f"{type(x).__name__}") from exc


def _close(a: Any, b: Any, rtol: float = 1e-6, atol: float = 1e-9) -> bool:
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    return a.shape == b.shape and bool(np.allclose(a, b, rtol=rtol, atol=atol, equal_nan=True))


def _call(fn: Callable, args: tuple, label: str) -> tuple[Any, str | None]:
    """Call the student's function; NotImplementedError propagates (the stub's message)."""
    if not callable(fn):
        return None, f"{label} must be a function, got {type(fn).__name__}"
    try:
        return fn(*args), None
    except NotImplementedError:
        raise
    except Exception as exc:  # the student's code failed: report it as the problem
        return None, f"{label} raised {type(exc).__name__}: {exc}"


def _compare_fn(fn: Callable, reference: Callable, cases: Sequence[tuple], label: str,
                slips: Mapping[str, Callable] | None = None, *, rtol: float = 1e-6,
                atol: float = 1e-9, describe: Callable[[tuple], str] | None = None
                ) -> str | None:
    """None if ``fn`` agrees with ``reference`` on every case, else a description of the first
    disagreement (with the matching slip, if any)."""
    for case in cases:
        got, err = _call(fn, case, label)
        if err:
            return err
        want = reference(*case)
        if got is None:
            return f"{label} returned None: did you forget the `return`?"
        try:
            got_a = _as_array(got, f"the value returned by {label}")
        except TypeError as exc:
            return str(exc)
        if _close(got_a, want, rtol, atol):
            continue
        where = describe(case) if describe else ", ".join(_fmt(np.asarray(c)) if not isinstance(
            c, (int, float)) else _fmt(c) for c in case)
        msg = f"{label}({where}) returned {_fmt(got_a)}, expected {_fmt(np.asarray(want))}"
        if got_a.shape != np.shape(want):
            msg += f" (shape {got_a.shape}, expected {np.shape(want)})"
        for name, slip in (slips or {}).items():
            try:
                slipped = slip(*case)
            except Exception:  # a slip that does not apply to this input
                continue
            if _close(got_a, slipped, rtol, atol):
                msg += f". This is what you get if you {name}"
                break
        return msg
    return None


def _compare_dict(answer: Any, expected: Mapping[str, Any], label: str) -> str | None:
    if not isinstance(answer, Mapping):
        return f"{label} must be a dict with keys {sorted(expected)}, got {type(answer).__name__}"
    missing = sorted(set(expected) - set(answer))
    if missing:
        return f"{label} lacks keys {missing} (expected keys {sorted(expected)})"
    wrong = []
    for key, want in expected.items():
        got = answer[key]
        if isinstance(want, (bool, np.bool_, str)):
            if got != want:
                wrong.append(f"{key}: you said {got!r}, the data say {want!r}")
        else:
            try:
                same = _close(_as_array(got, f"{label}[{key!r}]"), want, rtol=1e-6, atol=1e-9)
            except TypeError as exc:
                wrong.append(str(exc))
                continue
            if not same:
                wrong.append(f"{key}: you have {_fmt(got)}, the data give {_fmt(want)}")
    return "; ".join(wrong) if wrong else None


# =============================================================================== uid_grounding
def _profiles(seed: int = 0) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    out = [np.array([1.0, 2.0, 3.0]), np.array([4.0, 1.0]), np.array([2.5, 2.5, 2.5, 2.5])]
    out += [rng.gamma(2.0, 1.5, size=n) for n in (5, 9, 17, 30)]
    return out


def check_uid_measures(uid_v: Callable, uid_lv: Callable, *, seed: int = 0,
                       raise_on_wrong: bool = True) -> CheckResult:
    """Exercise (uid_grounding): ``uid_v(s)`` and ``uid_lv(s)`` of one surprisal profile ``s``
    (1-D, nats) against :func:`tokenbook.uid_grounding.measures.profile_measures` on seeded profiles."""
    cases = [(s,) for s in _profiles(seed)]
    problem = _compare_fn(
        uid_v, lambda s: profile_measures(s)["uid_v"], cases, "uid_v",
        {"use the sample variance (ddof=1) instead of dividing by N": lambda s: np.var(s, ddof=1),
         "return the standard deviation instead of the variance": lambda s: np.std(s)})
    if problem is None:
        problem = _compare_fn(
            uid_lv, lambda s: profile_measures(s)["uid_lv"], cases, "uid_lv",
            {"divide by N instead of N − 1 (Meister's notebook, not Gay et al.)":
                 lambda s: np.sum(np.diff(s) ** 2) / len(s),
             "take the variance of the differences instead of their mean square":
                 lambda s: np.var(np.diff(s)),
             "average absolute instead of squared differences":
                 lambda s: np.mean(np.abs(np.diff(s)))})
    return _result("UID_v and UID_lv", problem,
                   f"both agree with tokenbook.uid_grounding.measures.profile_measures on {len(cases)} profiles",
                   raise_on_wrong)


def scaled_captions(seed: int = 0, *, n_captions: int = 120, factor: float = 0.7,
                    flatten: float = 0.0) -> pd.DataFrame:
    """Toy word table: ``n_captions`` captions (5–14 words) with text-only surprisals ``s_U``
    (nats, gamma-distributed) and grounded ones ``s_P = factor · (s_U − flatten·(s_U − s̄_U))``:
    the image lowers every surprisal by ``factor`` and, if ``flatten`` > 0, also pulls each
    word towards its caption's mean. Columns ``unit_id, pos, s_U, s_P``."""
    if not 0 < factor <= 1:
        raise ValueError(f"factor must be in (0, 1], got {factor}")
    if not 0 <= flatten < 1:
        raise ValueError(f"flatten must be in [0, 1), got {flatten}")
    rng = np.random.default_rng(seed)
    rows = []
    for unit in range(n_captions):
        n = int(rng.integers(5, 15))
        s_u = rng.gamma(2.0, 2.0, size=n)
        s_p = factor * (s_u - flatten * (s_u - s_u.mean()))
        rows += [(unit, i, a, b) for i, (a, b) in enumerate(zip(s_u, s_p))]
    return pd.DataFrame(rows, columns=["unit_id", "pos", "s_U", "s_P"])


def _scaling_reference(table: pd.DataFrame, alpha: float = 0.05) -> dict[str, bool]:
    per = {c: [] for c in ("U", "P")}
    for _, g in table.groupby("unit_id", sort=True):
        per["U"].append(profile_measures(g["s_U"].to_numpy()))
        per["P"].append(profile_measures(g["s_P"].to_numpy()))
    out = {}
    for m in ("uid_v", "uid_lv", "cv_global", "cv_local"):
        p = np.array([d[m] for d in per["P"]])
        u = np.array([d[m] for d in per["U"]])
        w = paired_wilcoxon(p, u)
        out[m] = bool(w.pvalue < alpha and np.median(p - u) < 0)
    return out


def check_scaling_verdicts(answer: Mapping[str, bool], *, seed: int = 0, factor: float = 0.7,
                           flatten: float = 0.0, raise_on_wrong: bool = True) -> CheckResult:
    """Exercise (uid_grounding): for ``scaled_captions(seed, factor=…, flatten=…)``, is each of
    ``uid_v, uid_lv, cv_global, cv_local`` significantly lower under P (paired Wilcoxon over
    captions, p < 0.05, median P − U < 0)? ``answer``: dict measure → bool."""
    expected = _scaling_reference(scaled_captions(seed, factor=factor, flatten=flatten))
    problem = _compare_dict(answer, expected, "answer")
    return _result(f"Scaling verdicts (factor={factor}, flatten={flatten})", problem,
                   f"your verdicts match the data: {expected}", raise_on_wrong)


def check_benjamini_hochberg(fn: Callable, *, seed: int = 0,
                             raise_on_wrong: bool = True) -> CheckResult:
    """Exercise (uid_grounding): ``fn(pvals) -> q-values`` (same order as the input) against
    :func:`tokenbook.stats.benjamini_hochberg` on seeded p-value vectors."""
    rng = np.random.default_rng(seed)
    cases = [(np.array([0.01, 0.04, 0.03, 0.005]),), (np.array([0.5, 0.01, 0.02, 0.9, 0.04]),),
             (np.array([0.2, 0.2, 0.2]),), (rng.uniform(0, 1, 12) ** 2,),
             (np.concatenate([rng.uniform(0, 0.01, 5), rng.uniform(0, 1, 25)]),)]

    def unsorted(p):  # no step-up: m·p/rank without the running minimum
        p = np.asarray(p, float)
        order = np.argsort(p)
        q = np.empty_like(p)
        q[order] = np.minimum(p[order] * p.size / np.arange(1, p.size + 1), 1)
        return q

    problem = _compare_fn(fn, benjamini_hochberg, cases, "benjamini_hochberg", {
        "skip the step-up (the running minimum from the largest p downwards)": unsorted,
        "use Bonferroni (m·p) instead": lambda p: np.minimum(np.asarray(p) * len(p), 1),
        "return the q-values in sorted order instead of the input order":
            lambda p: np.sort(benjamini_hochberg(p)),
        "forget to cap q at 1": lambda p: _bh_uncapped(p)})
    return _result("Benjamini–Hochberg", problem,
                   f"agrees with tokenbook.stats.benjamini_hochberg on {len(cases)} p-value "
                   "vectors", raise_on_wrong)


def _bh_uncapped(p) -> np.ndarray:
    p = np.asarray(p, float)
    order = np.argsort(p, kind="mergesort")
    ranked = p[order] * p.size / np.arange(1, p.size + 1)
    q = np.empty_like(p)
    q[order] = np.minimum.accumulate(ranked[::-1])[::-1]
    return q


def onset_world(seed: int = 0, *, n_captions: int = 150, onset_effect: bool = True
                ) -> pd.DataFrame:
    """Toy word table where the image lowers surprisal. With ``onset_effect`` the reduction is
    large on the first words of a caption and fades with position; without it every word gets
    the same expected reduction. Columns ``unit_id, pos, position`` (normalised, in [0, 1)),
    ``s_U, s_P`` (nats)."""
    rng = np.random.default_rng(seed)
    rows = []
    for unit in range(n_captions):
        n = int(rng.integers(6, 16))
        position = np.arange(n) / n
        s_u = rng.gamma(2.0, 2.0, size=n)
        mean_red = 2.0 * np.exp(-position / 0.15) if onset_effect else np.full(n, 0.6)
        s_p = s_u - mean_red + rng.normal(0, 0.5, size=n)
        rows += [(unit, i, x, a, b) for i, (x, a, b) in enumerate(zip(position, s_u, s_p))]
    return pd.DataFrame(rows, columns=["unit_id", "pos", "position", "s_U", "s_P"])


def _onset_reference(position, s_u, s_p, onset: float = 0.2) -> float:
    t = positive_reductions(pd.DataFrame({"s_U": s_u, "s_P": s_p}), {"P": ("s_U", "s_P")})
    return onset_enrichment(np.asarray(position, float), t["delta_P"].to_numpy(), onset=onset)


def check_onset_enrichment(fn: Callable, *, seed: int = 0,
                           raise_on_wrong: bool = True) -> CheckResult:
    """Exercise (uid_grounding): ``fn(position, s_u, s_p, onset=0.2) -> E`` (the onset
    enrichment of the positive-part reductions δ = max(0, s_U − s_P)) against
    :func:`tokenbook.uid_grounding.measures.positive_reductions` + :func:`tokenbook.uid_grounding.measures.onset_enrichment`."""
    cases = []
    for k, effect in enumerate((True, False, True)):
        t = onset_world(seed + k, n_captions=20, onset_effect=effect)
        cases.append((t["position"].to_numpy(), t["s_U"].to_numpy(), t["s_P"].to_numpy(), 0.2))
    cases.append((np.array([0.0, 0.1, 0.5, 0.8]), np.array([3.0, 2.0, 1.0, 2.0]),
                  np.array([1.0, 2.5, 0.5, 2.0]), 0.2))

    def raw(position, s_u, s_p, onset):  # the unclipped difference
        d = np.asarray(s_u) - np.asarray(s_p)
        at = np.asarray(position) < onset
        return (d[at].sum() / d.sum()) / at.mean()

    def share(position, s_u, s_p, onset):  # the share of the mass, not divided by the word share
        d = np.clip(np.asarray(s_u) - np.asarray(s_p), 0, None)
        return d[np.asarray(position) < onset].sum() / d.sum()

    problem = _compare_fn(fn, _onset_reference, cases, "onset_enrichment", {
        "use the raw difference s_U − s_P instead of its positive part max(0, ·)": raw,
        "forget to divide by the share of words at the onset": share,
        "use s_P − s_U (the sign is flipped)":
            lambda pos, u, p, o: _onset_reference(pos, p, u, o)},
        describe=lambda c: f"<{len(c[0])} words>, onset={c[3]}")
    return _result("Onset enrichment", problem,
                   f"agrees with tokenbook.uid_grounding.measures.onset_enrichment on {len(cases)} word tables",
                   raise_on_wrong)


def _onset_claim(table: pd.DataFrame, onset: float = 0.2, n_boot: int = 300,
                 seed: int = 0) -> dict:
    rows = np.column_stack([table["position"], table["s_U"], table["s_P"]])
    e = _onset_reference(rows[:, 0], rows[:, 1], rows[:, 2], onset)

    def stat(r):  # the same E as _onset_reference, without a DataFrame per resample
        return onset_enrichment(r[:, 0], np.clip(r[:, 1] - r[:, 2], 0.0, None), onset=onset)

    lo, _ = bootstrap_ci(rows, stat, n_boot=n_boot, seed=seed)
    return {"E": e, "holds": bool(lo > 1.0)}


@functools.lru_cache(maxsize=8)
def _onset_verdicts(seed: int) -> dict[str, bool]:
    return {"with_onset": _onset_claim(onset_world(seed, onset_effect=True))["holds"],
            "without_onset": _onset_claim(onset_world(seed, onset_effect=False))["holds"]}


def check_onset_verdicts(answer: Mapping[str, bool], *, seed: int = 0,
                         raise_on_wrong: bool = True) -> CheckResult:
    """Exercise (uid_grounding): does the claim "reductions concentrate at the onset" (bootstrap
    95% CI of E above 1, words resampled, 300 draws, seed 0) hold in ``onset_world(seed)`` with
    and without the onset mechanism? ``answer``: ``{"with_onset": bool, "without_onset": bool}``."""
    expected = dict(_onset_verdicts(seed))
    problem = _compare_dict(answer, expected, "answer")
    return _result("Onset claim with and without the mechanism", problem,
                   f"your verdicts match the data: {expected}", raise_on_wrong)


# =============================================================================== groundedness
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
        return f"{label}: at {k} {value} is {_fmt(g.loc[k])}, expected {_fmt(w.loc[k])}"
    return None


def check_class_means(fn: Callable, *, seed: int = 0, raise_on_wrong: bool = True
                      ) -> CheckResult:
    """Exercise (groundedness_typology): ``fn(words) -> DataFrame[lang, upos, n, mean]`` —
    groundedness g = s_U − s_P averaged per (lang, UPOS) over the analysed classes — against
    :func:`tokenbook.groundedness_typology.measures.class_summary`."""
    words = typology_world(seed, n_captions=25)
    got, err = _call(fn, (words.copy(),), "class_means")
    problem = err or _frame_problem(got, _class_means_reference(words), ["lang", "upos"], "mean",
                                    "class_means")
    if problem and isinstance(got, pd.DataFrame) and "mean" in got:
        flipped = _class_means_reference(words.assign(s_U=words["s_P"], s_P=words["s_U"]))
        if _frame_problem(got, flipped, ["lang", "upos"], "mean", "") is None:
            problem += ". This is what you get with g = s_P − s_U (the sign is flipped)"
    if problem is None:
        problem = _frame_problem(got, _class_means_reference(words), ["lang", "upos"], "n",
                                 "class_means")
    return _result("Class means of groundedness", problem,
                   "agrees with tokenbook.groundedness_typology.measures.class_summary (means and counts)",
                   raise_on_wrong)


def check_lexical_minus_functional(fn: Callable, *, seed: int = 0,
                                   raise_on_wrong: bool = True) -> CheckResult:
    """Exercise (groundedness_typology): ``fn(words) -> Series`` (index: lang) of mean lexical
    minus mean functional groundedness (tokens pooled within each kind) against
    :func:`tokenbook.groundedness_typology.measures.lexical_vs_functional` (``diff``)."""
    words = typology_world(seed, n_captions=25)
    want = lexical_vs_functional(words, n_boot=1).set_index("lang")["diff"]
    got, err = _call(fn, (words.copy(),), "lexical_minus_functional")
    problem = err
    if problem is None:
        if not isinstance(got, pd.Series):
            problem = f"lexical_minus_functional must return a pandas Series indexed by lang, " \
                      f"got {type(got).__name__}"
        elif sorted(map(str, got.index)) != sorted(want.index):
            problem = f"the Series' index is {list(got.index)}, expected the languages " \
                      f"{list(want.index)}"
        elif not _close(got.loc[want.index].to_numpy(float), want.to_numpy()):
            mine = got.loc[want.index].to_numpy(float)
            problem = f"you have {_fmt(got.loc[want.index])}, expected {_fmt(want)}"
            a = analysed(words)
            lex = a["upos"].isin(LEXICAL + ("NUM",))
            num_lexical = a[lex].groupby("lang")["groundedness"].mean() \
                - a[~lex].groupby("lang")["groundedness"].mean()
            class_avg = a.groupby(["lang", "class_kind", "upos"])["groundedness"].mean() \
                .groupby(["lang", "class_kind"]).mean().unstack()
            class_avg = class_avg["lexical"] - class_avg["functional"]
            if _close(mine, num_lexical.loc[want.index].to_numpy()):
                problem += ". This is what you get if you count NUM as lexical (UD counts it " \
                           "as a closed class)"
            elif _close(mine, class_avg.loc[want.index].to_numpy()):
                problem += ". This is what you get if you average the class means instead of " \
                           "pooling the tokens"
    return _result("Lexical minus functional", problem,
                   "agrees with tokenbook.groundedness_typology.measures.lexical_vs_functional", raise_on_wrong)


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

    problem = _compare_fn(fn, ref, cases, "upos_tau", {
        "correlate label lists sorted by mean (the exploratory script's slip) instead of rank "
        "vectors indexed by UPOS": label_list_tau,
        "compute Spearman's ρ instead of Kendall's τ":
            lambda a, b: spearman_rho(pd.Series(a), pd.Series(b))[0]},
        describe=lambda c: f"<{len(c[0])} classes>, <{len(c[1])} classes>")
    return _result("Rank agreement τ", problem,
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
    problem = _compare_dict(answer, expected, "answer")
    return _result(f"Typology verdicts (noun_grounding={noun_grounding})", problem,
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
        got, err = _call(fn, (words.copy(), lang, 0.05), "n_significant_pairs")
        if err:
            problem = err
            break
        if not isinstance(got, (int, np.integer)) or int(got) != want:
            problem = f"n_significant_pairs(words, {lang!r}) returned {got!r}, expected {want}"
            if got == int((t["pvalue"] < 0.05).sum()):
                problem += ". This is the count of *unadjusted* p-values: apply " \
                           "Benjamini–Hochberg over all class pairs of the language"
            break
    return _result("Significant class pairs", problem,
                   "agrees with tokenbook.groundedness_typology.measures.pairwise_class_tests in every language",
                   raise_on_wrong)


# =============================================================================== memorisation
def memorisation_world(seed: int = 0, *, n_models: int = 12, n_pairs: int = 200,
                       memorisation: bool = True, noisy_share: float = 0.2
                       ) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Toy ensemble: ``n_models`` (even) models, each pair in the training half of exactly
    ``n_models/2`` of them (:func:`tokenbook.memorisation_cartography.estimator.subset_masks`, balanced
    design). A pair has an ease (its score when held out); ``noisy`` pairs are hard and, if
    ``memorisation``, gain more when trained on (up to 0.3; regular pairs up to 0.12). Returns ``(scores, pairs)``:
    the long score matrix ``model, pair_id, score, in_train`` (score = per-token geometric-mean
    probability in [0, 1]) and ``pair_id, phenomenon`` (``noisy``/``regular``)."""
    rng = np.random.default_rng(seed)
    mask = subset_masks(n_pairs, n_models, design="balanced", seed=seed)
    noisy = rng.uniform(size=n_pairs) < noisy_share
    ease = np.where(noisy, rng.beta(2, 6, n_pairs), rng.beta(6, 3, n_pairs))
    boost = np.where(noisy, rng.uniform(0.0, 0.3, n_pairs), rng.uniform(0.0, 0.12, n_pairs))
    boost = boost if memorisation else np.zeros(n_pairs)
    score = ease[None, :] + boost[None, :] * mask + rng.normal(0, 0.08, (n_models, n_pairs))
    score = np.clip(score, 0.001, 0.999)
    m, p = np.meshgrid(np.arange(n_models), np.arange(n_pairs), indexing="ij")
    scores = pd.DataFrame({"model": m.ravel(), "pair_id": p.ravel(), "score": score.ravel(),
                           "in_train": mask.ravel()})
    pairs = pd.DataFrame({"pair_id": np.arange(n_pairs),
                          "phenomenon": np.where(noisy, "noisy", "regular")})
    return scores, pairs


def _cm_cases(seed: int):
    out = []
    for k, (m, n) in enumerate(((6, 10), (12, 40), (4, 7))):
        scores, _ = memorisation_world(seed + k, n_models=m, n_pairs=n)
        _, _, S, mask = pivot_scores(scores)
        out.append((scores, S, mask))
    return out


def check_cm_estimator(fn: Callable, *, seed: int = 0, raise_on_wrong: bool = True
                       ) -> CheckResult:
    """Exercise (memorisation_cartography): ``fn(S, mask) -> (tm, gs, cm)`` from the score
    matrix ``S`` and inclusion mask ``mask`` (both [n_models, n_pairs]) against
    :func:`tokenbook.memorisation_cartography.estimator.counterfactual_memorisation`."""
    problem = None
    for scores, S, mask in _cm_cases(seed):
        ref = counterfactual_memorisation(scores)
        got, err = _call(fn, (S.copy(), mask.copy()), "cm_estimator")
        if err:
            problem = err
            break
        if not isinstance(got, tuple) or len(got) != 3:
            problem = "cm_estimator must return a tuple (tm, gs, cm) of three arrays"
            break
        shape = f"S of shape {S.shape}"
        for name, g in zip(("tm", "gs", "cm"), got):
            g = _as_array(g, name)
            if not _close(g, ref[name].to_numpy(), 1e-6):
                problem = f"{name} for {shape} is {_fmt(g)}, expected {_fmt(ref[name].to_numpy())}"
                if name == "tm" and _close(g, ref["gs"].to_numpy()):
                    problem += ". You swapped trained-on and held-out models (mask is True " \
                               "where the model trained on the pair)"
                elif name == "tm" and _close(g, S.mean(0)):
                    problem += ". You averaged over all models, not only those trained on the pair"
                elif name == "cm" and _close(g, -ref["cm"].to_numpy()):
                    problem += ". The sign is flipped: CM = TM − GS"
                break
        if problem:
            break
    return _result("Counterfactual memorisation", problem,
                   "tm, gs and cm agree with counterfactual_memorisation on 3 ensembles",
                   raise_on_wrong)


def check_cm_standard_error(fn: Callable, *, seed: int = 0, raise_on_wrong: bool = True
                            ) -> CheckResult:
    """Exercise (memorisation_cartography): ``fn(S, mask) -> cm_se`` (standard error of CM per
    pair: SE of the in-mean and of the out-mean, each sample SD/√n, combined in quadrature)
    against :func:`~tokenbook.memorisation_cartography.estimator.counterfactual_memorisation`."""
    def se(S, mask, ddof):
        out = []
        for sel in (mask, ~mask):
            n = sel.sum(0)
            mean = (S * sel).sum(0) / n
            ss = (((S - mean) ** 2) * sel).sum(0)
            out.append(np.sqrt(ss / (n - ddof) / n))
        return out

    problem = None
    for scores, S, mask in _cm_cases(seed):
        want = counterfactual_memorisation(scores)["cm_se"].to_numpy()
        problem = _compare_fn(fn, lambda S_, m_: want, [(S, mask)], "cm_standard_error", {
            "use the population SD (ddof=0) instead of the sample SD":
                lambda S_, m_: np.hypot(*se(S_, m_, 0)),
            "add the two standard errors instead of combining them in quadrature":
                lambda S_, m_: np.add(*se(S_, m_, 1)),
            "forget to divide the SDs by √n": lambda S_, m_: np.hypot(
                *[s * np.sqrt(n) for s, n in zip(se(S_, m_, 1), (m_.sum(0), (~m_).sum(0)))])},
            describe=lambda c: f"S of shape {c[0].shape}, mask")
        if problem:
            break
    return _result("Standard error of CM", problem,
                   "agrees with counterfactual_memorisation's cm_se on 3 ensembles",
                   raise_on_wrong)


def check_geometric_mean_probability(fn: Callable, *, seed: int = 0,
                                     raise_on_wrong: bool = True) -> CheckResult:
    """Exercise (memorisation_cartography): ``fn(logprobs) -> gmp`` — the per-token
    geometric-mean probability exp(mean log p) of one target whose token log-probabilities
    (nats, end-of-sentence token last) are ``logprobs`` — against
    :func:`tokenbook.memorisation_cartography.estimator.geometric_mean_probability`."""
    rng = np.random.default_rng(seed)
    cases = [(np.log(np.array([0.5, 0.25, 0.9])),)] + \
        [(np.log(rng.uniform(0.02, 1.0, size=n)),) for n in (1, 4, 11, 25)]

    def ref(lp):
        t = pd.DataFrame({"seq_id": 0, "token_id": np.arange(len(lp)), "logprob": lp})
        return geometric_mean_probability(t)["gmp"].iloc[0]

    problem = _compare_fn(fn, ref, cases, "geometric_mean_probability", {
        "average the probabilities (arithmetic mean) instead of the log-probabilities":
            lambda lp: np.mean(np.exp(lp)),
        "multiply the probabilities (the sequence probability, not per token)":
            lambda lp: np.exp(np.sum(lp)),
        "drop the end-of-sentence token": lambda lp: np.exp(np.mean(lp[:-1])) if len(lp) > 1
            else np.nan},
        describe=lambda c: f"<{len(c[0])} log-probs>")
    return _result("Geometric-mean probability", problem,
                   f"agrees with geometric_mean_probability on {len(cases)} targets",
                   raise_on_wrong)


def check_auroc(fn: Callable, *, seed: int = 0, raise_on_wrong: bool = True) -> CheckResult:
    """Exercise (memorisation_cartography): ``fn(positive, negative) -> AUROC`` = P(a random
    positive value > a random negative one), ties counting ½, against
    :func:`tokenbook.memorisation_cartography.estimator.phenomenon_auroc` (scikit-learn's roc_auc_score)."""
    rng = np.random.default_rng(seed)
    cases = [(np.array([0.9, 0.5, 0.5]), np.array([0.5, 0.1, 0.2, 0.5]))]
    cases += [(rng.normal(0.3, 1, 30), rng.normal(0, 1, 50)),
              (np.round(rng.normal(0.5, 1, 20), 1), np.round(rng.normal(0, 1, 20), 1))]

    def ref(pos, neg):
        t = pd.DataFrame({"cm": np.r_[pos, neg],
                          "phenomenon": ["p"] * len(pos) + ["regular"] * len(neg)})
        return phenomenon_auroc(t, "p", n_boot=1)["auroc"]

    def strict(pos, neg):
        return np.mean(np.asarray(pos)[:, None] > np.asarray(neg)[None, :])

    problem = _compare_fn(fn, ref, cases, "auroc", {
        "count ties as 0 instead of ½": strict,
        "swap positives and negatives (you get 1 − AUROC)": lambda p, n: 1 - ref(p, n)},
        describe=lambda c: f"<{len(c[0])} positives>, <{len(c[1])} negatives>")
    return _result("AUROC", problem, f"agrees with phenomenon_auroc on {len(cases)} samples",
                   raise_on_wrong)


@functools.lru_cache(maxsize=8)
def _memorisation_reference(seed: int, memorisation: bool) -> bool:
    scores, pairs = memorisation_world(seed, memorisation=memorisation)
    cm = counterfactual_memorisation(scores).merge(pairs, on="pair_id")
    res = phenomenon_auroc(cm, "noisy", n_boot=100, seed=0)
    return bool(res["ci_low"] > 0.5)


def check_memorisation_verdicts(answer: Mapping[str, bool], *, seed: int = 0,
                                raise_on_wrong: bool = True) -> CheckResult:
    """Exercise (memorisation_cartography): does "noisy pairs have higher CM than regular ones"
    (AUROC of CM, bootstrap 95% CI above 0.5; 100 draws, seed 0) hold in
    ``memorisation_world(seed)`` with and without memorisation? ``answer``:
    ``{"with_memorisation": bool, "without_memorisation": bool}``."""
    expected = {"with_memorisation": _memorisation_reference(seed, True),
                "without_memorisation": _memorisation_reference(seed, False)}
    problem = _compare_dict(answer, expected, "answer")
    return _result("Memorisation switched off", problem,
                   f"your verdicts match the data: {expected}", raise_on_wrong)


# =============================================================================== cancellation
def check_grpo_advantages(fn: Callable, *, seed: int = 0, raise_on_wrong: bool = True
                          ) -> CheckResult:
    """Exercise (cancellation_hypothesis): ``fn(rewards, group_size) -> A`` (prompt-major
    rewards [B], B = n·G; A = (r − group mean) / (group sample SD + 1e-4)) against
    :func:`tokenbook.cancellation_hypothesis.grpo.advantages`."""
    import torch

    rng = np.random.default_rng(seed)
    cases = [(np.array([1.0, 0.0, 0.0, 1.0, 1.0, 1.0, 1.0, 1.0]), 4),
             (rng.integers(0, 2, 24).astype(float), 6), (rng.normal(0, 1, 12), 3)]

    def ref(r, g):
        return advantages(torch.as_tensor(r), g)[0].numpy()

    def pop(r, g):
        x = np.asarray(r, float).reshape(-1, g)
        return ((x - x.mean(1, keepdims=True)) / (x.std(1, keepdims=True) + 1e-4)).ravel()

    def batch(r, g):
        x = np.asarray(r, float)
        return (x - x.mean()) / (x.std(ddof=1) + 1e-4)

    problem = _compare_fn(fn, ref, cases, "grpo_advantages", {
        "use the population SD (ddof=0); GRPO/TRL use the sample SD (ddof=1)": pop,
        "normalise over the whole batch instead of within each group": batch,
        "skip the division by the SD (that is Dr. GRPO)":
            lambda r, g: advantages(torch.as_tensor(r), g, scale_rewards="none")[0].numpy()},
        rtol=1e-5, atol=1e-6)
    return _result("GRPO advantages", problem,
                   f"agrees with tokenbook.cancellation_hypothesis.grpo.advantages on {len(cases)} reward batches",
                   raise_on_wrong)


def check_mixed_groups(fn: Callable, *, seed: int = 0, raise_on_wrong: bool = True
                       ) -> CheckResult:
    """Exercise (cancellation_hypothesis): ``fn(rewards, group_size) -> int`` groups holding
    both a correct (1) and a failed (0) rollout, against :func:`tokenbook.cancellation_hypothesis.grpo.mixed_groups`."""
    import torch

    rng = np.random.default_rng(seed)
    cases = [(np.array([1, 1, 1, 1, 0, 0, 0, 0, 1, 0, 0, 0]), 4)]
    cases += [((rng.uniform(size=40) < q).astype(int), 8) for q in (0.1, 0.5, 0.9)]
    problem = _compare_fn(fn, lambda r, g: mixed_groups(torch.as_tensor(r), g), cases,
                          "mixed_groups", {
                              "count groups with at least one correct rollout":
                                  lambda r, g: int((np.reshape(r, (-1, g)).sum(1) > 0).sum()),
                              "count rollouts instead of groups":
                                  lambda r, g: g * mixed_groups(torch.as_tensor(r), g)})
    return _result("Mixed groups", problem, f"agrees with mixed_groups on {len(cases)} batches",
                   raise_on_wrong)


def _phi_ref(zj, zk, aj, ak) -> float:
    import torch

    logits = torch.as_tensor(np.stack([zj, zk]), dtype=torch.float32)
    return float(phi_pairs(logits, torch.tensor([aj, ak]), torch.tensor([[0, 1]]))[0])


def check_phi(fn: Callable, *, seed: int = 0, raise_on_wrong: bool = True) -> CheckResult:
    """Exercise (cancellation_hypothesis): ``fn(z_j, z_k, a_j, a_k) -> φ_jk`` from two logit
    rows (1-D, length V) and the two sampled token ids, against
    :func:`tokenbook.cancellation_hypothesis.dynamics.phi_pairs`."""
    rng = np.random.default_rng(seed)
    cases = [(np.zeros(4), np.zeros(4), 1, 1), (np.array([2.0, 0.0, -1.0]),
                                                 np.array([0.0, 1.0, 0.5]), 0, 2)]
    for same in (True, False, False):
        z = rng.normal(0, 2, size=(2, 12))
        a = int(rng.integers(12))
        cases.append((z[0], z[1], a, a if same else int((a + 5) % 12)))

    def softmax(z):
        e = np.exp(z - np.max(z))
        return e / e.sum()

    def no_dot(zj, zk, aj, ak):
        return float(aj == ak) - softmax(zj)[ak] - softmax(zk)[aj]

    problem = _compare_fn(fn, _phi_ref, cases, "phi", {
        "leave out the ⟨π_j, π_k⟩ term": no_dot,
        "flip the sign": lambda *c: -_phi_ref(*c)}, rtol=1e-4, atol=1e-6,
        describe=lambda c: f"<{len(c[0])} logits>, <{len(c[1])} logits>, a_j={c[2]}, a_k={c[3]}")
    return _result("φ from two logit rows", problem,
                   f"agrees with tokenbook.cancellation_hypothesis.dynamics.phi_pairs on {len(cases)} token pairs",
                   raise_on_wrong)


def linear_head_batch(seed: int = 0, *, n_tokens: int = 24, vocab: int = 10, dim: int = 6,
                      group_size: int = 4, orthogonal: bool = False) -> dict[str, np.ndarray]:
    """A toy batch for a linear output layer z = W h: ``H`` [N, d] hidden states (one token per
    rollout, N = n_tokens), ``W`` [V, d], sampled ``actions`` [N] (from the policy),
    binary ``rewards`` [N] and GRPO advantages ``A`` [N] over groups of ``group_size``. With
    ``orthogonal`` the hidden states are orthonormal (d = N): no two tokens share a direction."""
    import torch

    rng = np.random.default_rng(seed)
    if orthogonal:
        dim = n_tokens
        H = np.linalg.qr(rng.normal(size=(dim, dim)))[0][:n_tokens] * 2.0
    else:  # tokens share a common direction, as hidden states of one model do
        H = rng.normal(size=(n_tokens, dim)) + 1.5 * rng.normal(size=(1, dim))
    W = rng.normal(0, 0.5, size=(vocab, dim))
    z = H @ W.T
    p = np.exp(z - z.max(1, keepdims=True))
    p /= p.sum(1, keepdims=True)
    actions = np.array([rng.choice(vocab, p=row) for row in p])
    rewards = (rng.uniform(size=n_tokens) < 0.5).astype(float)
    rewards.reshape(-1, group_size)[:, 0] = 1.0  # every group mixed: non-zero advantages
    rewards.reshape(-1, group_size)[:, 1] = 0.0
    A = advantages(torch.as_tensor(rewards), group_size)[0].double().numpy()
    return {"H": H, "W": W, "actions": actions, "rewards": rewards, "A": A}


def linear_head_step(H, W, actions, A, lr: float) -> np.ndarray:
    """The exact change Δ log π_j(a_j) [N] of one SGD step of size ``lr`` on W for the loss
    −(1/N) Σ_k A_k log π_k(a_k) (GRPO at ratio 1, token-mean), computed with torch autograd."""
    import torch

    H_, A_ = torch.as_tensor(H, dtype=torch.float64), torch.as_tensor(A, dtype=torch.float64)
    a = torch.as_tensor(actions, dtype=torch.long)
    W_ = torch.as_tensor(W, dtype=torch.float64).clone().requires_grad_(True)

    def logp(w):
        return torch.log_softmax(H_ @ w.T, -1).gather(1, a[:, None]).squeeze(1)

    before = logp(W_)
    loss = -(A_ * before).mean()
    (g,) = torch.autograd.grad(loss, W_)
    with torch.no_grad():
        after = logp(W_ - lr * g)
    return (after - before).detach().numpy()


def _first_order_ref(H, W, actions, A, lr) -> np.ndarray:
    import torch

    phi = phi_matrix(torch.as_tensor(np.asarray(H) @ np.asarray(W).T),
                     torch.as_tensor(actions, dtype=torch.long)).double().numpy()
    K = np.asarray(H) @ np.asarray(H).T
    return lr / len(A) * (phi * K) @ np.asarray(A)


def check_first_order_delta(fn: Callable, *, seed: int = 0, raise_on_wrong: bool = True
                            ) -> CheckResult:
    """Exercise (cancellation_hypothesis): ``fn(H, W, actions, A, lr) -> Δ`` [N], the
    first-order prediction Δ log π_j ≈ (η/N) Σ_k A_k φ_jk (h_j·h_k) for one SGD step on the
    linear head, against the same formula with :func:`tokenbook.cancellation_hypothesis.dynamics.phi_matrix`; also
    reports how close it is to the exact step (:func:`linear_head_step`)."""
    cases = []
    for k, orth in enumerate((False, True, False)):
        b = linear_head_batch(seed + k, orthogonal=orth)
        cases.append((b["H"], b["W"], b["actions"], b["A"], 1e-2))

    def no_kernel(H, W, actions, A, lr):  # φ alone, as if every h_j·h_k were 1
        import torch

        phi = phi_matrix(torch.as_tensor(np.asarray(H) @ np.asarray(W).T),
                         torch.as_tensor(actions, dtype=torch.long)).double().numpy()
        return lr / len(A) * phi @ np.asarray(A)

    def diagonal(H, W, actions, A, lr):  # no coupling: only k = j
        import torch

        phi = phi_matrix(torch.as_tensor(np.asarray(H) @ np.asarray(W).T),
                         torch.as_tensor(actions, dtype=torch.long)).double().numpy()
        K = np.asarray(H) @ np.asarray(H).T
        return lr / len(A) * np.diag(phi) * np.diag(K) * np.asarray(A)

    problem = _compare_fn(fn, _first_order_ref, cases, "first_order_delta", {
        "leave out the hidden-state kernel h_j·h_k": no_kernel,
        "keep only the token's own term (k = j): that is the prediction without coupling":
            diagonal}, rtol=1e-4, atol=1e-9,
        describe=lambda c: f"H {c[0].shape}, W {c[1].shape}, <{len(c[2])} actions>, A, "
                           f"lr={c[4]}")
    if problem is None:
        H, W, actions, A, lr = cases[0]
        exact = linear_head_step(H, W, actions, A, lr)
        pred = _first_order_ref(H, W, actions, A, lr)
        rel = float(np.abs(pred - exact).max() / np.abs(exact).max())
        msg = (f"agrees with the φ·K formula on {len(cases)} batches; on the first one the "
               f"largest gap to the exact SGD step is {rel:.2%} of the largest change")
    else:
        msg = ""
    return _result("First-order prediction", problem, msg, raise_on_wrong)


@functools.lru_cache(maxsize=8)
def _coupling_reference(seed: int, lr: float = 1e-2) -> dict[str, float]:
    out = {}
    for name, orth in (("shared", False), ("orthogonal", True)):
        b = linear_head_batch(seed, orthogonal=orth)
        delta = linear_head_step(b["H"], b["W"], b["actions"], b["A"], lr)
        fr = flip_ratios(pd.DataFrame({"reward": b["rewards"], "delta": delta}))
        out[name] = float(fr.loc[fr["rollout"] == "correct", "flip_ratio"].iloc[0])
    return out


def check_coupling_verdicts(answer: Mapping[str, float], *, seed: int = 0,
                            raise_on_wrong: bool = True) -> CheckResult:
    """Exercise (cancellation_hypothesis): the flip ratio of correct rollouts (share of their
    tokens whose log-probability falls after the step, :func:`tokenbook.cancellation_hypothesis.dynamics.flip_ratios`)
    for ``linear_head_batch(seed)`` with shared and with orthogonal hidden states, lr = 1e-2.
    ``answer``: ``{"shared": float, "orthogonal": float}``."""
    expected = _coupling_reference(seed)
    problem = _compare_dict(answer, expected, "answer")
    return _result("Coupling switched off", problem,
                   f"your flip ratios match: {expected}", raise_on_wrong)


# =============================================================================== editions
def page_path(chapter: str, root: str | Path | None = None) -> Path:
    """``<root>/notebooks/exercises/<chapter>.py`` (root: the checkout, found from cwd)."""
    root = Path(root) if root is not None else find_root()
    path = root / "notebooks" / "exercises" / f"{chapter}.py"
    if not path.exists():
        known = sorted(p.stem for p in path.parent.glob("*.py"))
        raise FileNotFoundError(f"no exercise page for chapter {chapter!r} ({path}); pages "
                                f"exist for {known}")
    return path


def read_page(chapter_or_path: str | Path, root: str | Path | None = None):
    """The exercise page as an nbformat notebook (jupytext percent)."""
    import jupytext

    p = Path(chapter_or_path)
    path = p if p.suffix == ".py" else page_path(str(chapter_or_path), root)
    return jupytext.read(path, fmt="py:percent")


_EXERCISE_HEADING = re.compile(r"^##\s+(Exercise\s+\d+)", re.M)


def exercise_cells(nb, tag: str = SOLUTION_TAG) -> list[dict]:
    """One entry per cell tagged ``tag`` (``solution`` in the book's page, ``exercise`` in the
    student edition): ``{"label", "solution", "check"}`` (cell indices;
    ``label`` is the nearest preceding ``## Exercise N`` heading; ``check`` the next code
    cell, which must call a ``check_*`` function)."""
    out, label = [], None
    for i, cell in enumerate(nb.cells):
        if cell.cell_type == "markdown":
            m = _EXERCISE_HEADING.search(cell.source)
            if m:
                label = m.group(1)
        elif tag in cell.metadata.get("tags", []):
            if label is None:
                raise ValueError(f"solution cell {i} has no '## Exercise N' heading before it")
            check = next((j for j in range(i + 1, len(nb.cells))
                          if nb.cells[j].cell_type == "code"), None)
            if check is None or "check_" not in nb.cells[check].source:
                raise ValueError(f"{label}: the code cell after its solution must call a "
                                 f"tokenbook.book.exercises.check_* function")
            out.append({"label": label, "solution": i, "check": check})
    return out


def make_stub(source: str, label: str, needed: Iterable[str] | None = None) -> str:
    """The student's version of a solution cell: imports and function signatures (with their
    docstrings) kept, every body replaced by ``raise NotImplementedError(<label>: <hint>)``;
    top-level answers (assignments; only those named in ``needed``, e.g. the names the check
    cell reads, when given) replaced by a note and a raise. The hint is the cell's
    ``# Hint: …`` comment (continued by the following ``#`` lines)."""
    lines = source.splitlines()
    hint_lines: list[str] = []
    for i, line in enumerate(lines):
        if line.startswith("# Hint:"):
            hint_lines.append(line[len("# Hint:"):].strip())
            for nxt in lines[i + 1:]:
                if nxt.startswith("# ") and not nxt.startswith("# Hint:"):
                    hint_lines.append(nxt[2:].strip())
                else:
                    break
            break
    if not hint_lines:
        raise ValueError(f"{label}: a solution cell must start with a '# Hint: …' comment")
    hint = " ".join(hint_lines)
    message = f"{label}: {hint}"
    tree = ast.parse(source)
    out = [f"# {label} — your turn. Hint: {hint_lines[0]}",
           *[f"# {h}" for h in hint_lines[1:]]]
    answers: list[str] = []
    for node in tree.body:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            out.append(ast.get_source_segment(source, node))
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            start = (node.decorator_list[0].lineno if node.decorator_list else node.lineno) - 1
            first = node.body[0]
            has_doc = (isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant)
                       and isinstance(first.value.value, str))
            end = first.end_lineno if has_doc else first.lineno - 1
            header = lines[start:end]
            indent = " " * (first.col_offset)
            out += ["", *header, f"{indent}raise NotImplementedError({message!r})"]
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for t in targets:
                answers += [n.id for n in ast.walk(t) if isinstance(n, ast.Name)]
    if needed is not None:
        needed = set(needed)
        answers = [a for a in answers if a in needed]
    if answers:
        out += ["", "# Your answer: " + ", ".join(f"{a} = ..." for a in dict.fromkeys(answers)),
                f"raise NotImplementedError({message!r})"]
    return "\n".join(out).strip() + "\n"


#: a MyST ``{doc}`` role: ``{doc}`target``` or ``{doc}`text <target>```
MYST_DOC = re.compile(r"\{doc\}`(?:([^`<]*?)\s*<([^>`]+)>|([^`]+))`")
#: other MyST roles a student's Jupyter would show raw: ``{cite}`key``` and the like
MYST_ROLE = re.compile(r"\{(?:cite(?::[pt])?|ref|numref|eq|term)\}`([^`]+)`")


def plain_markdown(text: str, *, chapter_link: str = "../{name}.ipynb",
                   repo_url: str | None = None) -> str:
    """``text`` (a page's MyST markdown) for a plain Jupyter, Colab or Binder: ``{doc}`` roles
    become Markdown links (a chapter, ``../<chapter>``, to ``chapter_link``; a book page,
    ``/book/<page>``, to its file in the repository at ``repo_url``), other roles their bare
    text."""
    def doc(m: re.Match) -> str:
        text, target = (m.group(1), m.group(2)) if m.group(2) else (None, m.group(3))
        target = target.strip()
        name = target.rstrip("/").split("/")[-1]
        if target.startswith("/book/") and repo_url:
            href = f"{repo_url}/blob/main{target}.md"
        elif target.startswith("/"):
            href = f"{repo_url}/blob/main{target}.py" if repo_url else target
        else:
            href = chapter_link.format(name=name)
        label = text or (f"`{name}`" if target.startswith("..") else name.replace("_", " "))
        return f"[{label}]({href})"

    text = MYST_DOC.sub(doc, text)
    return MYST_ROLE.sub(lambda m: m.group(1), text)


def friendly_errors() -> None:
    """In a student's notebook (IPython): a check cell run before its exercise's answer exists
    says so in one line instead of a ``NameError`` traceback (:func:`missing_answer`)."""
    try:
        from IPython import get_ipython
    except ImportError:  # pragma: no cover - no IPython
        return
    shell = get_ipython()
    if shell is not None:
        shell.set_custom_exc((NameError,), lambda shell, etype, value, tb, tb_offset=None:
                             print(missing_answer(value)))


def missing_answer(error: NameError) -> str:
    """The message for a ``NameError`` in a student's notebook."""
    m = re.search(r"name '(\w+)' is not defined", str(error))
    name = m.group(1) if m else str(error)
    return (f"❓ `{name}` is not defined yet. If it is your answer to an exercise, fill in the "
            f"exercise's cell above and run it, then run this cell again.")


def student_notebook(nb, *, chapter_link: str = "../{name}.ipynb",
                     repo_url: str | None = None):
    """A copy of the exercise page with every solution cell replaced by its stub (tag
    ``exercise``, shown), outputs cleared, markdown made plain (:func:`plain_markdown`,
    :func:`tokenbook.book.costs.render`) and a generated-file note at the top."""
    import nbformat

    nb = copy.deepcopy(nb)
    for cell in nb.cells:
        if cell.cell_type == "markdown":
            cell.source = render(plain_markdown(cell.source, chapter_link=chapter_link,
                                                repo_url=repo_url))
    for ex in exercise_cells(nb):
        cell = nb.cells[ex["solution"]]
        check = nb.cells[ex["check"]].source
        used = {n.id for n in ast.walk(ast.parse(check)) if isinstance(n, ast.Name)}
        cell.source = make_stub(cell.source, ex["label"], needed=used)
        tags = [t for t in cell.metadata.get("tags", []) if t != SOLUTION_TAG
                and t not in HIDE_TAGS]
        cell.metadata["tags"] = tags + [STUB_TAG]
    for cell in nb.cells:
        if cell.cell_type == "code":
            cell.outputs, cell.execution_count = [], None
    note = nbformat.v4.new_markdown_cell(
        "*Student edition, generated from the book's exercise page (`make notebooks`, "
        "`make student`): do not edit by hand. Each exercise cell raises "
        "`NotImplementedError` until you fill it in; the cell after it checks your answer.*")
    nb.cells.insert(0, note)
    return nb


def _write_atomic(text: str, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        os.chmod(tmp, 0o644)  # mkstemp makes it private; editions are handed out
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


SETUP_SOURCE = '''\
# Setup (generated by `python -m tokenbook.book.exercises`; not part of the exercises).
# On Colab or any Python without tokenbook: clone the repository and install tokenbook without
# its dependencies (the exercises need only packages Colab has: NumPy, pandas, SciPy,
# statsmodels, PyTorch, PyYAML, nbformat). Where tokenbook is installed this cell does nothing.
import importlib.util, os, subprocess, sys

if importlib.util.find_spec("tokenbook") is None:
    _checkout = os.path.abspath("tokenbook")
    if not os.path.isdir(_checkout):
        subprocess.run(["git", "clone", "--depth", "1", "{repo_url}", _checkout], check=True)
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "-e", _checkout],
                   check=True)
    sys.path.insert(0, os.path.join(_checkout, "lib"))

from tokenbook.book.exercises import friendly_errors

friendly_errors()  # a check run before its answer exists says so, without a traceback'''


def _with_setup(page, repo_url: str):
    """``page`` with the setup cell (tag ``tokenbook-setup``) before its first code cell, as a
    standalone notebook (no jupytext pairing, a Python 3 kernel)."""
    import nbformat

    setup = nbformat.v4.new_code_cell(SETUP_SOURCE.format(repo_url=repo_url),
                                      metadata={"tags": [SETUP_TAG]})
    first = next((i for i, c in enumerate(page.cells) if c.cell_type == "code"),
                 len(page.cells))
    page.cells.insert(first, setup)
    page.metadata.pop("jupytext", None)  # a standalone notebook, not paired with the .py
    page.metadata["kernelspec"] = {"display_name": "Python 3", "language": "python",
                                   "name": "python3"}
    return page


def student_twin(chapter: str, root: str | Path):
    """``notebooks/exercises/<chapter>.ipynb``: the student edition of the exercise page
    (:func:`student_notebook`: solutions stubbed, plain Markdown, costs filled in) with the
    setup cell, deterministic cell ids and no outputs. Generated by ``make notebooks``
    (:func:`tokenbook.book.notebooks.sync`) and committed: the exercise pages' launch buttons open it
    (sphinx-book-theme launches the ``.ipynb`` beside a page's source)."""
    import nbformat

    root = Path(root)
    url = repository_url(root)
    nb = _with_setup(student_notebook(read_page(chapter, root), repo_url=url), url)
    nb.metadata["tokenbook"] = {"source": f"notebooks/exercises/{chapter}.py",
                                "edition": "student",
                                "generated_by": "make notebooks (python -m tokenbook.book.notebooks)"}
    for i, cell in enumerate(nb.cells):
        cell["id"] = f"cell-{i:03d}"
        cell.metadata.pop("lines_to_next_cell", None)
    nb.nbformat, nb.nbformat_minor = 4, 5
    nbformat.validate(nb)
    return nb


def _notebooks_for_ipynb(chapter: str, page, root: Path):
    """The chapter as its Colab-ready ``.ipynb`` twin (:mod:`tokenbook.book.ipynb`) and the page with
    a setup cell (tag ``tokenbook-setup``) before its first code cell."""
    url = repository_url(root)
    chapter_nb = chapter_notebook(root / "notebooks" / f"{chapter}.py", url)
    return chapter_nb, _with_setup(page, url)


def write_edition(chapter: str, out: str | Path, *, edition: str = "student",
                  fmt: str = "ipynb", root: str | Path | None = None) -> list[Path]:
    """Write ``<out>/<chapter>.<fmt>`` (the chapter) and ``<out>/<chapter>_exercises.<fmt>``
    (the exercise page: stubs for ``edition="student"``, solutions for ``"instructor"``).
    The ``.ipynb`` editions open on Colab: the chapter is its committed twin's twin
    (:func:`tokenbook.book.ipynb.chapter_notebook`) and the page gets a setup cell that installs
    tokenbook where it is missing."""
    import jupytext

    if edition not in ("student", "instructor"):
        raise ValueError(f"edition must be 'student' or 'instructor', got {edition!r}")
    if fmt not in ("ipynb", "py"):
        raise ValueError(f"fmt must be 'ipynb' or 'py', got {fmt!r}")
    root = Path(root) if root is not None else find_root()
    page = read_page(chapter, root)
    if edition == "student":
        page = student_notebook(page, chapter_link="{name}.ipynb",
                                repo_url=repository_url(root))
    if fmt == "ipynb":
        chapter_nb, page = _notebooks_for_ipynb(chapter, page, root)
    else:
        chapter_nb = jupytext.read(root / "notebooks" / f"{chapter}.py", fmt="py:percent")
    out = Path(out)
    written = []
    for nb, name in ((chapter_nb, chapter), (page, f"{chapter}_exercises")):
        path = out / f"{name}.{fmt}"
        text = jupytext.writes(nb, fmt="ipynb" if fmt == "ipynb" else "py:percent")
        _write_atomic(text, path)
        written.append(path)
    return written


def main(argv: Sequence[str] | None = None, prog: str = "python -m tokenbook.book.exercises") -> int:
    """``tokenbook exercises {student,instructor} [CHAPTER ...|--all] --out DIR``."""
    p = argparse.ArgumentParser(prog=prog,
                                description="Write the student or instructor edition of the "
                                            "book's exercise pages.")
    p.add_argument("edition", choices=["student", "instructor"])
    p.add_argument("chapters", nargs="*", help=f"chapters (of {', '.join(CHAPTERS)})")
    p.add_argument("--all", action="store_true", help="every chapter with an exercise page")
    p.add_argument("--out", type=Path, required=True, help="output folder")
    p.add_argument("--format", choices=["ipynb", "py"], default="ipynb")
    p.add_argument("--root", type=Path, default=None, help="book root (default: from cwd)")
    args = p.parse_args(argv)
    if not args.all and not args.chapters:
        p.error("name one or more chapters, or pass --all")

    def fail(message: str) -> int:
        print(f"{prog}: error: {message}", file=sys.stderr)
        return 2

    if args.all and args.chapters:
        return fail("give chapter names or --all, not both")
    root = args.root.expanduser().resolve() if args.root is not None else find_root()
    if not (root / "notebooks").is_dir():
        return fail(f"--root {args.root}: not a book root (no notebooks/ folder in it)")
    if args.out.exists() and not args.out.is_dir():
        return fail(f"--out {args.out}: is a file, not a folder")
    available = [c for c in CHAPTERS if (root / "notebooks" / "exercises" / f"{c}.py").exists()]
    unknown = [c for c in args.chapters if c not in available]
    if unknown:
        return fail(f"no exercise page for {unknown[0]!r}; chapters with one: "
                    f"{', '.join(available) or '(none under ' + str(root) + ')'}")
    chapters = available if args.all else args.chapters
    if not chapters:
        return fail(f"no exercise pages under {root / 'notebooks' / 'exercises'}")
    for chapter in chapters:
        try:
            paths = write_edition(chapter, args.out, edition=args.edition, fmt=args.format,
                                  root=root)
        except (OSError, ValueError) as exc:
            print(f"{prog}: error: {exc}", file=sys.stderr)
            return 2
        print(f"{chapter}: " + ", ".join(str(x) for x in paths))
    return 0


if __name__ == "__main__":
    sys.exit(main())
