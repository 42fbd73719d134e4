"""The UID chapter's claims (Gay et al. 2026) as library specs.

:func:`claim_specs` declares every tiny-scale claim once (:class:`tokenbook.claims.ClaimSpec`:
wording and source from :data:`tokenbook.uid_grounding.experiments.CLAIMS`, statistic,
expectation (:func:`expectations`), the per-seed function that computes it
(:func:`tokenbook.uid_grounding.experiments.seed_claims`), mechanism, manipulation, balance and
known-answer checks); :func:`tiny_claims` judges them on the seed table of
:func:`tokenbook.uid_grounding.experiments.run_seeds` with the paired on − off rule of
:mod:`tokenbook.verdicts`; the figures read the thresholds from the same expectations
(:func:`thresholds`). The paper-scale verdicts are
:func:`tokenbook.uid_grounding.experiments.paper_claims`.
"""

from __future__ import annotations

import pandas as pd

from tokenbook.claims import Claim, ClaimSpec, judge_claims
from tokenbook.grounded.tiny import MARGINAL_STORIES, TinyParams
from tokenbook.uid_grounding.experiments import (CAPTION_CLAIMS, CLAIMS, ONSET_CLAIM,
                                                 POOLED_TWINS, language_entries, seed_claims)
from tokenbook.verdicts import Expect

__all__ = ["expectations", "thresholds", "SHARE_CLAIMS", "BALANCE_TOLERANCE",
           "MANIPULATION_MARGIN", "claim_specs", "tiny_claims", "languages_per_seed"]

#: the claims whose statistic is a share of a world's languages (the rest: a mean Δ% over
#: languages, the pooled twins, or the onset enrichment)
SHARE_CLAIMS = ("uid-v-lower-with-image", "uid-lv-lower-with-image", "uid-lower-significant",
                "cv-agree-in-direction", "discourse-smooths",
                "image-plus-discourse-smooths-further")


def expectations(min_share: float = 0.9, n_languages: int | None = None) -> dict:
    """What each claim predicts for one seed's statistic (:class:`tokenbook.verdicts.Expect`):
    shares of languages ≥ ``min_share`` (our reading of "consistently … across languages"),
    the pooled twins' mean Δ% over languages < 0, "most languages" significant (> 0.5), onset
    enrichment > 1. With ``n_languages`` (per root seed) the share claims are declared shares
    of that many languages (:meth:`~tokenbook.verdicts.Expect.share_of`): the verdict rule
    first asks whether their (root seed, language) pairs could establish the share at all."""
    expects = {"uid-v-lower-with-image": Expect.at_least(min_share),
               "uid-lv-lower-with-image": Expect.at_least(min_share),
               "uid-lower-significant": Expect.greater(0.5),
               "cv-agree-in-direction": Expect.at_least(min_share),
               "uid-v-lower-pooled": Expect.less(0.0),
               "uid-lv-lower-pooled": Expect.less(0.0),
               "discourse-smooths": Expect.at_least(min_share),
               "image-plus-discourse-smooths-further": Expect.at_least(min_share),
               # off, both contexts are other stories' pages: Δ% sits on 0 by construction
               "discourse-smooths-pooled": Expect.less(0.0).at_null(),
               "image-plus-discourse-smooths-further-pooled": Expect.less(0.0).at_null(),
               "reductions-at-onsets": Expect.greater(1.0)}
    if n_languages is not None:
        for cid in SHARE_CLAIMS:
            expects[cid] = expects[cid].share_of(n_languages, "language")
    return expects


def thresholds(min_share: float = 0.9) -> dict[str, float]:
    """Each claim's threshold (for figures)."""
    return {k: e.threshold for k, e in expectations(min_share).items()}


#: balance checks: the text-only surprisal of the scored words (mean s_U, nats) must not move
#: between on and off by more than this (the off world changes only the image / discourse)
BALANCE_TOLERANCE = 0.05
#: manipulation checks: the image (captions) or discourse (stories) must lower the depicted
#: classes' mean surprisal by more than this with the mechanism on, and not off (nats)
MANIPULATION_MARGIN = 0.1


def claim_specs(min_share: float = 0.9, null: str = "shuffle", world_style: str = "uid",
                n_languages: int | None = None,
                onset_world: TinyParams | None = None) -> list[ClaimSpec]:
    """The chapter's claims as specs (:class:`tokenbook.claims.ClaimSpec`), in the book's order.

    Mechanism on: the image fixes each caption clause's referent and the earlier pages of a
    story predict its next page's content words (``world_style="uid"``,
    :class:`tokenbook.worlds.scenes.UidStyle`); off: the shuffle null (another scene's image and
    another story's sentences, same models) or the mechanism-off world (``null="world"``).
    Manipulation checks: the mean surprisal reduction on nouns, adjectives and counts by the
    image (caption claims) or by the discourse (story claims) must exceed
    :data:`MANIPULATION_MARGIN` on and not off (the discourse by the story's own pages beyond
    another story's, the contrast the tiny discourse statistics use). Balance checks: the text-only surprisal of the
    scored words moves by at most :data:`BALANCE_TOLERANCE` between on and off. Known answers
    of the caption claims: the statistics on the generator's exact surprisals
    (:func:`tokenbook.grounded.tiny.exact_caption_words`; with ``world_style="typology"`` the
    count models' reference instead); of ``discourse-smooths`` (uid world): the statistic on
    the generator's story surprisals (:func:`tokenbook.grounded.tiny.exact_story_words`),
    and likewise of ``image-plus-discourse-smooths-further`` (with the page's picture, read by
    its objects), ``reductions-at-onsets`` and the pooled twins. ``onset_world``: the world
    the onset claim is judged in when it is not the chapter's
    (:func:`tokenbook.uid_grounding.experiments.onset_world`); its mechanism says so.
    """
    off = ("captions scored against another held-out scene's image and story sentences after "
           "another story's sentences (same models; no retraining; the discourse claims compare "
           "them with a third story's, D_other and P+D_other, as on)" if null == "shuffle" else
           "the world regenerated without the mechanism and the models retrained on it")
    if world_style == "uid":
        mech = ("on: each caption clause describes the next object of the image in reading "
                "order (the image fixes the referent; optional adjectives, noun synonyms and the "
                "verb stay uncertain), and a story's later pages re-mention its protagonist "
                "(as often as the world's story process says, its register's: "
                "grounded.tiny.REGISTERS; its size word, colour word and plain noun each kept "
                "with probability 1/2: worlds.stories.StoryProcess; "
                "make_world(world_style='uid')), in the noun form "
                "the story's narrator prefers, with the chapter's narrator_p "
                f"(worlds.stories.narrator_plain_noun_p); off: {off}")
        reference = ("the same statistic on the generator's exact surprisals "
                     "(grounded.tiny.exact_caption_words: −log p(w_t | w_<t) under the uid "
                     "caption distribution with the scene unseen and given the scene; off: the "
                     "image is independent of the words, so s_P = s_U)")
    else:
        mech = ("on: the world's hard-to-predict words (nouns, adjectives, relations, counts) are "
                "determined by the image and the rest is predictable from the text "
                f"(make_world(mechanism='on')); off: {off}")
        reference = ("the same statistic on the count models' word table (a bigram per "
                     "language; the image re-weights the depicted values it shows by e^3): "
                     "computed from the world without tokenizer or neural model — a reference, "
                     "not exact")
    story_reference = {}
    if world_style == "uid":
        story_reference["discourse-smooths"] = (
            "the same statistic on the generator's surprisals of the later story sentences "
            "(grounded.tiny.exact_story_words: −log p(w_t | w_<t) under the exact distribution "
            "of the next sentence given the story so far for D, and for D_other — another "
            "story's pages, which tell the generator nothing about this one — under its mean "
            f"over {MARGINAL_STORIES} fresh stories' states; off: the story's own pages are "
            "replaced by another story's too, so s_D = s_D_other)")
        picture = ("the page's picture read by its objects' shapes, colours and sizes, not "
                   "their cells (worlds.stories.sentence_given_picture alone, "
                   "next_sentence_given_picture after the story so far)")
        story_reference["image-plus-discourse-smooths-further"] = (
            "the same statistic on the generator's surprisals of the later story sentences "
            f"(grounded.tiny.exact_story_words) given {picture}, after the story's own pages "
            "(P+D) and after another story's, which tell the generator nothing (P+D_other = "
            "P); off: another scene's picture and another story's pages, so s_PD = "
            "s_PD_other)")
        story_reference["reductions-at-onsets"] = (
            "the same statistic on the generator's surprisals of the later story sentences "
            f"(grounded.tiny.exact_story_words: s_U, s_P given {picture}, s_D, s_PD; its s_U "
            "is the marginal of a story's later sentences, so δ_D holds what the own pages "
            "say, not where in a story the sentence stands); off: no context tells anything, "
            "nothing is reduced and E is undefined, so the rule, which pairs on with off, "
            "cannot judge the known answer: its on values are what it says")
    margin = Expect.greater(MANIPULATION_MARGIN)
    image_check = ("mean s_U − s_P on nouns, adjectives and counts (nats): the image lowers "
                   f"the words it determines by > {MANIPULATION_MARGIN} on, not off")
    discourse_check = ("mean s_D_other − s_D on nouns, adjectives and counts (nats): the "
                       "story's own pages lower them beyond another story's pages by > "
                       f"{MANIPULATION_MARGIN} on, not off")
    with_image_check = ("mean s_PD_other − s_PD on nouns, adjectives and counts (nats): with "
                        "the image, the story's own pages lower them beyond another story's "
                        f"pages by > {MANIPULATION_MARGIN} on, not off")
    checks = {"discourse-smooths": discourse_check,
              "image-plus-discourse-smooths-further": with_image_check,
              "reductions-at-onsets": "the smallest of the mean reductions s_U − s_P, "
              "s_D_other − s_D and s_D − s_PD on nouns, adjectives and counts (nats; "
              "experiments.onset_manipulation): each context of the statistic lowers the words "
              f"it determines by > {MANIPULATION_MARGIN} on, not off"}
    for twin, share in POOLED_TWINS.items():   # a pooled twin is checked as its share claim
        for table in (checks, story_reference):
            if share in table:
                table[twin] = table[share]
    balance = {True: "mean text-only surprisal s_U of the scored caption words (nats)",
               False: "mean text-only surprisal s_U of the scored story words (nats)"}
    mechanisms = {}
    if onset_world is not None:
        mechanisms[ONSET_CLAIM] = (
            f"{mech}. This claim is judged in a world of its own "
            "(uid_grounding.experiments.onset_world), trained and scored per root seed like "
            f"the chapter's: the same sizes told in the register {onset_world.register!r} "
            "(grounded.tiny.REGISTERS: its word order and story process), with "
            f"{onset_world.n_stories} stories and {onset_world.train_steps} fine-tuning steps")
    expects = expectations(min_share, n_languages)
    specs = []
    for cid, (text, statistic, paper) in CLAIMS.items():
        caption = cid in CAPTION_CLAIMS
        specs.append(ClaimSpec(
            cid, text, paper, statistic, expects[cid], computed_by=seed_claims,
            mechanism=mechanisms.get(cid, mech),
            manipulation=margin if (caption or cid in checks) else None,
            manipulation_what=image_check if caption else checks.get(cid, ""),
            known_answer_how=reference if caption else story_reference.get(cid, ""),
            balance_what=balance[caption], balance_tolerance=BALANCE_TOLERANCE))
    return specs


def tiny_claims(table: pd.DataFrame, *, min_share: float = 0.9, null: str = "shuffle",
                world_style: str = "uid", onset_world: TinyParams | None = None) -> list[Claim]:
    """The tiny-scale claims from the seed table of
    :func:`tokenbook.uid_grounding.experiments.run_seeds` (the paired on − off rule of
    :mod:`tokenbook.verdicts` over root seeds); the share claims count the languages each
    root seed's table holds (:func:`languages_per_seed`). With ``onset_world`` the table's
    onset entries come from that world
    (:func:`tokenbook.uid_grounding.experiments.with_onset_world`), and the onset claim's
    mechanism names it."""
    return judge_claims(claim_specs(min_share, null, world_style, languages_per_seed(table),
                                    onset_world=onset_world), table)


def languages_per_seed(table: pd.DataFrame) -> int | None:
    """How many languages a root seed's share claims count: the most languages any root seed
    of the seed table has per-language entries for (``language:<claim>:<language>``, mechanism
    on; :func:`tokenbook.uid_grounding.experiments.language_entries`); None without such entries.

    >>> t = pd.DataFrame({"seed": [0, 0, 1], "mechanism": "on", "value": [-1.0, 2.0, -3.0],
    ...                   "claim_id": ["language:c:aru", "language:c:bek", "language:c:aru"]})
    >>> languages_per_seed(t)
    2
    """
    rows = language_entries(table)
    return None if rows.empty else int(rows.groupby("seed")["lang"].nunique().max())
