"""The groundedness chapter's claims (Haley et al. 2025) as library specs.

:func:`claim_specs` declares every tiny-scale claim once (:class:`tokenbook.claims.ClaimSpec`:
wording and source from :data:`tokenbook.groundedness_typology.experiments.CLAIMS`, statistic,
expectation (:func:`expectations`), the per-seed function that computes it
(:func:`tokenbook.groundedness_typology.experiments.seed_claims`), mechanism, manipulation check
and, for the norms claim, its reference answer); :func:`tiny_claims` judges them on the seed
table of :func:`tokenbook.groundedness_typology.experiments.run_seeds` with the paired on − off
rule of :mod:`tokenbook.verdicts`; the figures read the thresholds from the same expectations
(:func:`thresholds`). The paper-scale verdicts are
:func:`tokenbook.groundedness_typology.experiments.paper_claims`.
"""

from __future__ import annotations

import pandas as pd

from tokenbook.claims import Claim, ClaimSpec, judge_claims
from tokenbook.groundedness_typology.experiments import (AGREEMENT_CLAIM, CLAIMS, NORMS_CLAIM,
                                                         seed_claims)
from tokenbook.verdicts import Expect

__all__ = ["expectations", "thresholds", "MANIPULATION_MARGIN", "NORMS_MARGIN", "SHARED_MARGIN",
           "BALANCE_TOLERANCE", "NORMS_BALANCE_TOLERANCE", "claim_specs", "tiny_claims"]


def expectations(min_share: float = 0.8) -> dict:
    """What each claim predicts for one seed's statistic (:class:`tokenbook.verdicts.Expect`).
    "partly correlates": our reading, ρ in [0.1, 0.9] (clearly positive, clearly not total)."""
    return {"lexical-gt-functional": Expect.at_least(min_share),
            "functional-above-zero": Expect.at_least(min_share),
            "cline-noun-adj-verb": Expect.at_least(min_share),
            "rank-agreement": Expect.less(0.05),
            "partly-concreteness": Expect.between(0.1, 0.9)}


def thresholds(min_share: float = 0.8) -> dict[str, float]:
    """Each claim's (lower) threshold, for figures."""
    return {k: e.threshold for k, e in expectations(min_share).items()}


#: manipulation check: the image must lower the depicted classes' mean surprisal by more
#: than this with the mechanism on, and not off (nats)
MANIPULATION_MARGIN = 0.1
#: the norms claim's manipulation check: Spearman ρ of the norms with the depicted flag, on
#: above, off not
NORMS_MARGIN = 0.3
#: the rank-agreement claim's manipulation check: the share of the ranked word classes the
#: languages share (1 on; about 1/k for independent systems of k classes, off)
SHARED_MARGIN = 0.5
#: balance check (caption claims): the text-only surprisal of the scored words (mean s_U,
#: nats) must not move between on and off by more than this (the off world changes only the
#: image)
BALANCE_TOLERANCE = 0.05
#: balance check (norms claim): the mean concreteness rating over (language, concept) pairs
#: (1-5 scale) must not move between on and off by more than this (the off norms permute the
#: concepts' base values within each language)
NORMS_BALANCE_TOLERANCE = 0.05


def claim_specs(min_share: float = 0.8, null: str = "shuffle") -> list[ClaimSpec]:
    """The chapter's claims as specs (:class:`tokenbook.claims.ClaimSpec`), in the book's order.

    Manipulation check (the image claims): the mean s_U − s_P on nouns, adjectives and counts
    must exceed :data:`MANIPULATION_MARGIN` nats on and not off; the rank-agreement and norms
    claims have mechanisms (and checks) of their own. Reference answers (every claim):
    the same statistic on the count models' word table (a bigram per language; the image
    re-weights the depicted values it shows), computed from the world without tokenizer or
    neural model — a reference, not exact.
    """
    off = ("captions scored against another held-out scene's image (same models; no "
           "retraining)" if null == "shuffle" else
           "the world regenerated without the mechanism and the models retrained on it")
    mech = ("on: nouns, adjectives and relations are determined by the image and articles "
            f"mark uniqueness in the scene (make_world(mechanism='on')); off: {off}")
    what = ("mean s_U − s_P on nouns, adjectives and counts (nats): the image lowers the words "
            f"it determines by > {MANIPULATION_MARGIN} on, not off")
    expects = expectations(min_share)
    reference = ("the same statistic on the count models' word table of the same held-out "
                 "captions and null (grounded.tiny.reference_caption_words: a bigram per "
                 "language, the image re-weighting the depicted values it shows by e^3): "
                 "computed from the world without tokenizer or neural model — a reference, "
                 "not exact")
    specs = [ClaimSpec(cid, text, paper, statistic, expects[cid], computed_by=seed_claims,
                       mechanism=mech, manipulation=Expect.greater(MANIPULATION_MARGIN),
                       manipulation_what=what, known_answer_how=reference,
                       balance_what="mean text-only surprisal s_U of the scored caption words "
                       "(nats)", balance_tolerance=BALANCE_TOLERANCE)
             for cid, (text, statistic, paper) in CLAIMS.items()
             if cid not in (NORMS_CLAIM, AGREEMENT_CLAIM)]
    text, statistic, paper = CLAIMS[AGREEMENT_CLAIM]
    specs.insert(list(CLAIMS).index(AGREEMENT_CLAIM), ClaimSpec(
        AGREEMENT_CLAIM, text, paper, statistic, expects[AGREEMENT_CLAIM],
        computed_by=seed_claims,
        mechanism="on: the languages share their word classes (the world's UPOS); off: each "
        "language groups the same words into classes its own way (a random permutation of the "
        "ranked classes per language, experiments.independent_pos_systems); both with the "
        "true images and the same models (tags never enter training). The claim is exactly "
        "that there is a relation (between the languages' class orders), and the off world "
        "removes only that relation",
        manipulation=Expect.greater(SHARED_MARGIN),
        manipulation_what="the share of the ranked classes each language keeps as the shared "
        f"system has them, mean over languages: > {SHARED_MARGIN} on, not off",
        known_answer_how="the same statistic on the count models' word table of the same "
        "held-out captions with the same class systems (grounded.tiny."
        "reference_caption_words): computed from the world without tokenizer or neural model "
        "— a reference, not exact",
        balance_what="mean text-only surprisal s_U of the scored caption words (nats)",
        balance_tolerance=BALANCE_TOLERANCE))
    text, statistic, paper = CLAIMS[NORMS_CLAIM]
    specs.append(ClaimSpec(
        NORMS_CLAIM, text, paper, statistic, expects[NORMS_CLAIM], computed_by=seed_claims,
        mechanism="on: concreteness norms that follow each concept's own concreteness (a "
        "property of the concept, correlated with what the picture shows only partly; "
        "grounded.tiny.tiny_norms); off: the same ratings permuted across each language's "
        "concepts; both with the true images and the same models",
        manipulation=Expect.greater(NORMS_MARGIN),
        manipulation_what="Spearman ρ of the norms with the generator's depicted flag over "
        f"the words: > {NORMS_MARGIN} on, not off",
        known_answer_how="the same statistic with the count models' groundedness "
        "(grounded.tiny.reference_caption_words) in place of the trained pair: a reference "
        "computed without tokenizer or neural model, not exact",
        balance_what="mean concreteness rating (1-5) over the (language, concept) pairs of "
        "the norms (grounded.tiny.concept_rating_mean)",
        balance_tolerance=NORMS_BALANCE_TOLERANCE,
        note="“partly”: our reading, ρ in [0.1, 0.9]"))
    return specs


def tiny_claims(table: pd.DataFrame, *, min_share: float = 0.8, null: str = "shuffle"
                ) -> list[Claim]:
    """The tiny-scale claims from the seed table of
    :func:`tokenbook.groundedness_typology.experiments.run_seeds` (the paired on − off rule of
    :mod:`tokenbook.verdicts` over root seeds)."""
    return judge_claims(claim_specs(min_share, null), table)
