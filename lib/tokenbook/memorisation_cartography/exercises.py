"""Exercise checks and the toy ensemble of the memorisation chapter
(``notebooks/exercises/memorisation_cartography.py``).

Each ``check_*`` compares a reader's answer with
:mod:`tokenbook.memorisation_cartography.estimator` on seeded ensembles (:mod:`tokenbook.answers`:
``✅`` when right, :class:`~tokenbook.answers.WrongAnswer` naming the slip when not). Scores are
per-token geometric-mean probabilities in [0, 1].
"""

from __future__ import annotations

import functools
from typing import Callable, Mapping

import numpy as np
import pandas as pd

from tokenbook.answers import (CheckResult, as_array, call_answer, close, compare_dict,
                               compare_fn, outcome, show_value)
from tokenbook.memorisation_cartography.estimator import (counterfactual_memorisation,
                                                          geometric_mean_probability,
                                                          phenomenon_auroc, pivot_scores,
                                                          subset_masks)
from tokenbook.seeds import derive_seed

__all__ = ["memorisation_world", "check_cm_estimator", "check_cm_standard_error",
           "check_geometric_mean_probability", "check_auroc", "check_memorisation_verdicts"]


def memorisation_world(seed: int = 0, *, n_models: int = 12, n_pairs: int = 200,
                       memorisation: bool = True, noisy_share: float = 0.2
                       ) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Toy ensemble: ``n_models`` (even) models, each pair in the training half of exactly
    ``n_models/2`` of them (:func:`tokenbook.memorisation_cartography.estimator.subset_masks`,
    balanced design). A pair has an ease (its score when held out); ``noisy`` pairs are hard
    and, if ``memorisation``, gain more when trained on (up to 0.3; regular pairs up to 0.12).
    Returns ``(scores, pairs)``:
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
        scores, _ = memorisation_world(derive_seed(seed, "case", k), n_models=m, n_pairs=n)
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
        got, err = call_answer(fn, (S.copy(), mask.copy()), "cm_estimator")
        if err:
            problem = err
            break
        if not isinstance(got, tuple) or len(got) != 3:
            problem = "cm_estimator must return a tuple (tm, gs, cm) of three arrays"
            break
        shape = f"S of shape {S.shape}"
        for name, g in zip(("tm", "gs", "cm"), got):
            g = as_array(g, name)
            if not close(g, ref[name].to_numpy(), 1e-6):
                problem = f"{name} for {shape} is {show_value(g)}, expected " \
                          f"{show_value(ref[name].to_numpy())}"
                if name == "tm" and close(g, ref["gs"].to_numpy()):
                    problem += ". You swapped trained-on and held-out models (mask is True " \
                               "where the model trained on the pair)"
                elif name == "tm" and close(g, S.mean(0)):
                    problem += ". You averaged over all models, not only those trained on the pair"
                elif name == "cm" and close(g, -ref["cm"].to_numpy()):
                    problem += ". The sign is flipped: CM = TM − GS"
                break
        if problem:
            break
    return outcome("Counterfactual memorisation", problem,
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
        problem = compare_fn(fn, lambda S_, m_: want, [(S, mask)], "cm_standard_error", {
            "use the population SD (ddof=0) instead of the sample SD":
                lambda S_, m_: np.hypot(*se(S_, m_, 0)),
            "add the two standard errors instead of combining them in quadrature":
                lambda S_, m_: np.add(*se(S_, m_, 1)),
            "forget to divide the SDs by √n": lambda S_, m_: np.hypot(
                *[s * np.sqrt(n) for s, n in zip(se(S_, m_, 1), (m_.sum(0), (~m_).sum(0)))])},
            describe=lambda c: f"S of shape {c[0].shape}, mask")
        if problem:
            break
    return outcome("Standard error of CM", problem,
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

    problem = compare_fn(fn, ref, cases, "geometric_mean_probability", {
        "average the probabilities (arithmetic mean) instead of the log-probabilities":
            lambda lp: np.mean(np.exp(lp)),
        "multiply the probabilities (the sequence probability, not per token)":
            lambda lp: np.exp(np.sum(lp)),
        "drop the end-of-sentence token": lambda lp: np.exp(np.mean(lp[:-1])) if len(lp) > 1
            else np.nan},
        describe=lambda c: f"<{len(c[0])} log-probs>")
    return outcome("Geometric-mean probability", problem,
                   f"agrees with geometric_mean_probability on {len(cases)} targets",
                   raise_on_wrong)


def check_auroc(fn: Callable, *, seed: int = 0, raise_on_wrong: bool = True) -> CheckResult:
    """Exercise (memorisation_cartography): ``fn(positive, negative) -> AUROC`` = P(a random
    positive value > a random negative one), ties counting ½, against
    :func:`tokenbook.memorisation_cartography.estimator.phenomenon_auroc` (scikit-learn's
    roc_auc_score)."""
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

    problem = compare_fn(fn, ref, cases, "auroc", {
        "count ties as 0 instead of ½": strict,
        "swap positives and negatives (you get 1 − AUROC)": lambda p, n: 1 - ref(p, n)},
        describe=lambda c: f"<{len(c[0])} positives>, <{len(c[1])} negatives>")
    return outcome("AUROC", problem, f"agrees with phenomenon_auroc on {len(cases)} samples",
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
    problem = compare_dict(answer, expected, "answer")
    return outcome("Memorisation switched off", problem,
                   f"your verdicts match the data: {expected}", raise_on_wrong)
