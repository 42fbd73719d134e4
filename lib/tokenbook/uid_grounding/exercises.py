"""Exercise checks and toy worlds of the UID chapter (``notebooks/exercises/uid_grounding.py``).

Each ``check_*`` compares a reader's answer with :mod:`tokenbook.uid_grounding.measures` or
:mod:`tokenbook.stats` on seeded inputs (:mod:`tokenbook.answers`: ``✅`` when right,
:class:`~tokenbook.answers.WrongAnswer` naming the slip when not). Surprisals in nats.
"""

from __future__ import annotations

import functools
from typing import Callable, Mapping

import numpy as np
import pandas as pd

from tokenbook.answers import CheckResult, compare_dict, compare_fn, outcome
from tokenbook.seeds import derive_seed
from tokenbook.stats import benjamini_hochberg, bootstrap_ci, paired_wilcoxon
from tokenbook.uid_grounding.measures import (onset_enrichment, positive_reductions,
                                              profile_measures)

__all__ = ["scaled_captions", "onset_world", "check_uid_measures", "check_scaling_verdicts",
           "check_benjamini_hochberg", "check_onset_enrichment", "check_onset_verdicts"]


def _profiles(seed: int = 0) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    out = [np.array([1.0, 2.0, 3.0]), np.array([4.0, 1.0]), np.array([2.5, 2.5, 2.5, 2.5])]
    out += [rng.gamma(2.0, 1.5, size=n) for n in (5, 9, 17, 30)]
    return out


def check_uid_measures(uid_v: Callable, uid_lv: Callable, *, seed: int = 0,
                       raise_on_wrong: bool = True) -> CheckResult:
    """Exercise (uid_grounding): ``uid_v(s)`` and ``uid_lv(s)`` of one surprisal profile ``s``
    (1-D, nats) against :func:`tokenbook.uid_grounding.measures.profile_measures` on seeded
    profiles."""
    cases = [(s,) for s in _profiles(seed)]
    problem = compare_fn(
        uid_v, lambda s: profile_measures(s)["uid_v"], cases, "uid_v",
        {"use the sample variance (ddof=1) instead of dividing by N": lambda s: np.var(s, ddof=1),
         "return the standard deviation instead of the variance": lambda s: np.std(s)})
    if problem is None:
        problem = compare_fn(
            uid_lv, lambda s: profile_measures(s)["uid_lv"], cases, "uid_lv",
            {"divide by N instead of N − 1 (Meister's notebook, not Gay et al.)":
                 lambda s: np.sum(np.diff(s) ** 2) / len(s),
             "take the variance of the differences instead of their mean square":
                 lambda s: np.var(np.diff(s)),
             "average absolute instead of squared differences":
                 lambda s: np.mean(np.abs(np.diff(s)))})
    return outcome("UID_v and UID_lv", problem,
                   f"both agree with tokenbook.uid_grounding.measures.profile_measures on "
                   f"{len(cases)} profiles",
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
    problem = compare_dict(answer, expected, "answer")
    return outcome(f"Scaling verdicts (factor={factor}, flatten={flatten})", problem,
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

    problem = compare_fn(fn, benjamini_hochberg, cases, "benjamini_hochberg", {
        "skip the step-up (the running minimum from the largest p downwards)": unsorted,
        "use Bonferroni (m·p) instead": lambda p: np.minimum(np.asarray(p) * len(p), 1),
        "return the q-values in sorted order instead of the input order":
            lambda p: np.sort(benjamini_hochberg(p)),
        "forget to cap q at 1": lambda p: _bh_uncapped(p)})
    return outcome("Benjamini–Hochberg", problem,
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
    :func:`tokenbook.uid_grounding.measures.positive_reductions` +
    :func:`tokenbook.uid_grounding.measures.onset_enrichment`."""
    cases = []
    for k, effect in enumerate((True, False, True)):
        t = onset_world(derive_seed(seed, "case", k), n_captions=20, onset_effect=effect)
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

    problem = compare_fn(fn, _onset_reference, cases, "onset_enrichment", {
        "use the raw difference s_U − s_P instead of its positive part max(0, ·)": raw,
        "forget to divide by the share of words at the onset": share,
        "use s_P − s_U (the sign is flipped)":
            lambda pos, u, p, o: _onset_reference(pos, p, u, o)},
        describe=lambda c: f"<{len(c[0])} words>, onset={c[3]}")
    return outcome("Onset enrichment", problem,
                   f"agrees with tokenbook.uid_grounding.measures.onset_enrichment on "
                   f"{len(cases)} word tables",
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
    problem = compare_dict(answer, expected, "answer")
    return outcome("Onset claim with and without the mechanism", problem,
                   f"your verdicts match the data: {expected}", raise_on_wrong)
