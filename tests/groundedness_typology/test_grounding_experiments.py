"""The typology chapter's tiny-scale statistics, the caption-clustered bootstrap and a detected
claim under the count models (fast), with the shuffled-image null not reporting it."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from tokenbook.grounded import tiny as gt
from tokenbook.groundedness_typology import measures as gr
from tokenbook.groundedness_typology import claims as typology_claims
from tokenbook.groundedness_typology import experiments as gx
from tokenbook.claims import Claim
from tokenbook.worlds.scenes import make_world

SMALL = dict(n_scenes=150, n_stories=3, n_languages=4)


def test_share_languages_known_answers():
    lf = pd.DataFrame({"lang": list("abc"), "diff": [0.5, 0.4, -0.1],
                       "q_diff": [0.01, 0.3, 0.01], "mean_functional": [0.1, 0.2, -0.1],
                       "q_functional_gt0": [0.01, 0.01, 0.9]})
    assert gx.share_languages(lf, "lexical-gt-functional") == pytest.approx(1 / 3)
    assert gx.share_languages(lf, "functional-above-zero") == pytest.approx(2 / 3)
    with pytest.raises(ValueError, match="check"):
        gx.share_languages(lf, "nouns")


def _lexical_functional_words(caption_effect: float, seed: int = 0) -> pd.DataFrame:
    """80 captions of 3 nouns and 3 determiners: groundedness = 1 (noun) or 0 (determiner)
    + a shared per-caption effect ~ N(0, caption_effect) + noise (nats)."""
    rng = np.random.default_rng(seed)
    clusters = np.repeat(np.arange(80), 6)
    lexical = np.tile([True, True, True, False, False, False], 80)
    g = (np.where(lexical, 1.0, 0.0) + rng.normal(0, caption_effect, 80)[clusters]
         + rng.normal(0, 0.3, lexical.size))
    return pd.DataFrame({"lang": "xx", "unit_id": clusters, "word": "w",
                         "upos": np.where(lexical, "NOUN", "DET"), "s_U": g, "s_P": 0.0})


def test_lexical_vs_functional_diff_ci_resamples_captions():
    words = _lexical_functional_words(0.0)
    row = gr.lexical_vs_functional(words, n_boot=400, seed=0).iloc[0]
    lex = words["upos"] == "NOUN"
    observed = words.loc[lex, "s_U"].mean() - words.loc[~lex, "s_U"].mean()
    assert row["diff"] == pytest.approx(observed)
    lo, hi = row["diff_ci_low"], row["diff_ci_high"]
    # sd of the difference ≈ 0.3·sqrt(2/240) ≈ 0.027 nats: a 95 % interval ≈ 0.11 wide
    assert lo < observed < hi and 0.07 < hi - lo < 0.15 and 0.8 < lo and hi < 1.2
    # a caption effect shared by both classes cancels in the paired-by-caption difference
    # but widens the functional mean's interval (its units are not independent)
    clustered = _lexical_functional_words(1.0)
    shared = gr.lexical_vs_functional(clustered, n_boot=400, seed=0).iloc[0]
    assert shared["diff_ci_high"] - shared["diff_ci_low"] < 0.15
    from tokenbook.stats import bootstrap_ci

    tlo, thi = bootstrap_ci(clustered.loc[clustered["upos"] == "DET", "s_U"], n_boot=400)
    assert shared["functional_ci_high"] - shared["functional_ci_low"] > 1.4 * (thi - tlo)
    again = gr.lexical_vs_functional(words, n_boot=400, seed=0).iloc[0]
    assert (again["diff_ci_low"], again["diff_ci_high"]) == (lo, hi)


def _lexfun_share(world, shuffle_seed):
    words = gr.add_groundedness(gt.count_model_words(world, ("test", "validation"),
                                                     shuffle_seed=shuffle_seed))
    return gx.share_languages(gr.lexical_vs_functional(words, n_boot=20), "lexical-gt-functional")


@pytest.mark.slow
def test_lexical_gt_functional_detected_on_and_not_under_the_null():
    on, off = [], []
    for s in range(5):
        world = make_world(s, **SMALL)
        on.append(_lexfun_share(world, None))
        off.append(_lexfun_share(world, 50 + s))
    c = Claim.over_seeds("lexical-gt-functional", "x", statistic="share",
                         expect=typology_claims.expectations()["lexical-gt-functional"], values_on=on,
                         values_off=off, mechanism="count models")
    assert c.verdict == "detected", (on, off)


def test_generator_ratings_are_not_hand_set():
    from tokenbook.worlds.languages import CONCEPTS, DEPICTED, generator_rating

    rng = np.random.default_rng(0)
    r = {c: np.mean([generator_rating(c, rng) for _ in range(200)]) for c in CONCEPTS}
    assert min(r[c] for c in DEPICTED) > 4.0 > 2.0 > max(r[c] for c in CONCEPTS
                                                        if c not in DEPICTED)
    with pytest.raises(KeyError, match="unknown concept"):
        generator_rating("dog", rng)


def test_determiners_carry_scene_uniqueness_only_with_the_mechanism_on():
    """On: an article is definite iff its noun's shape is unique in the scene; off: not."""
    agree = {}
    for mech in ("on", "off"):
        w = make_world(2, mechanism=mech, n_scenes=120, n_stories=3, n_languages=1)
        hits = []
        for r in w.captions.itertuples():
            shapes = [o.shape for o in w.scenes[r.scene_id].objects]
            cs = list(r.concepts)
            for i, c in enumerate(cs):
                if c in ("def", "indef"):
                    nouns = ("circle", "square", "triangle", "diamond", "cross", "top",
                             "bottom", "left", "right", "middle")
                    noun = next((x for x in cs[i + 1:] if x in nouns), None)
                    if noun is not None and noun in shapes:
                        hits.append((c == "def") == (shapes.count(noun) == 1))
        agree[mech] = np.mean(hits)
    assert agree["on"] == 1.0 and agree["off"] < 0.8
