"""Minimum sizes before a paper-scale or released verdict: below them a claim is not testable
with the counts in its note; at or above them the verdict is computed as before."""

import pandas as pd

from tokenbook.groundedness_typology import experiments as gx
from tokenbook.uid_grounding import experiments as ux
from tokenbook.minsizes import counts_note, shortfall, units_per_group


def test_shortfall_and_counts():
    assert shortfall([("language(s)", 1, 30), ("x", 5, 5)]) == \
        "too small for a verdict: 1 language(s) (needs ≥ 30)"
    assert shortfall([("language(s)", 30, 30)]) == ""
    assert counts_note([("language(s)", 31, 30)]) == "31 language(s) (≥ 30)"
    t = pd.DataFrame({"lang": ["a", "a", "a", "b"], "story_id": [1, 1, 2, 9]})
    assert units_per_group(t, "story_id") == {"a": 2, "b": 1}
    assert units_per_group(None, "story_id") == {}


def _comparison(langs, n):
    return pd.DataFrame([{"lang": lg, "metric": m, "n": n, "delta_pct": -10.0, "q": 0.001}
                         for lg in langs for m in ("uid_v", "uid_lv", "cv_global")])


def test_uid_claims_need_the_paper_sizes():
    small = {c.id: c for c in ux.paper_claims(_comparison(["de"], 3))}
    c = small["uid-v-lower-with-image"]
    assert c.verdict == "not testable"
    assert "1 language(s) (needs ≥ 30)" in c.note and "3 captions" in c.note
    big = {c.id: c for c in ux.paper_claims(_comparison([f"l{i}" for i in range(30)], 3600))}
    assert big["uid-v-lower-with-image"].verdict == "holds"
    assert "30 language(s) (≥ 30)" in big["uid-v-lower-with-image"].note
    lowered = {c.id: c for c in ux.paper_claims(_comparison(["de"], 3), min_languages=1,
                                                min_captions=3)}
    assert lowered["uid-v-lower-with-image"].verdict == "holds"


def test_uid_story_claims_count_stories():
    stories = pd.DataFrame([{"lang": "eng", "metric": "uid_v", "contrast": k, "n": 40,
                             "delta_pct": -5.0, "q": 0.01} for k in ("D vs U", "PD vs P")])
    comp = _comparison([f"l{i}" for i in range(30)], 3600)
    claims = {c.id: c for c in ux.paper_claims(comp, stories, {"P": 2, "D": 2, "DP": 2},
                                               story_counts={"eng": 4})}
    assert claims["discourse-smooths"].verdict == "not testable"
    assert "4 stories in the smallest language (needs ≥ 5)" in claims["discourse-smooths"].note
    claims = {c.id: c for c in ux.paper_claims(comp, stories, {"P": 2, "D": 2, "DP": 2},
                                               story_counts={"eng": 5}, min_story_languages=1)}
    assert claims["discourse-smooths"].verdict == "holds"
    assert claims["reductions-at-onsets"].verdict == "holds"
    # the pooled twins: the mean Δ% over the story languages (-5 %), below 0
    for cid in ("discourse-smooths-pooled", "image-plus-discourse-smooths-further-pooled"):
        assert claims[cid].verdict == "holds" and claims[cid].value == -5.0
    worse = stories.assign(delta_pct=[-5.0, 3.0])   # P+D raises UID_v over P
    claims = {c.id: c for c in ux.paper_claims(comp, worse, {"P": 2, "D": 2, "DP": 2},
                                               story_counts={"eng": 5}, min_story_languages=1)}
    assert claims["image-plus-discourse-smooths-further-pooled"].verdict == "does not hold"


def test_typology_one_language_is_not_testable_with_counts():
    rows = []
    for c in range(3):
        for upos, g in (("NOUN", 2.0), ("ADJ", 1.0), ("VERB", 0.5), ("DET", 0.2)):
            rows.append({"lang": "de", "unit_id": f"u{c}", "upos": upos, "word": upos.lower(),
                         "s_U": 3.0 + g,
                         "s_P": 3.0})
    an = gx.class_analyses(pd.DataFrame(rows), min_class_tokens=1, n_boot=20, n_perm=20)
    assert set(an["agreement_test"]) >= {"mean_tau", "mean_rho", "p_perm", "n_languages",
                                         "n_classes", "n_perm"}
    assert an["agreement_test"]["n_languages"] == 1
    claims = {c.id: c for c in gx.paper_claims(an)}
    for cid in ("lexical-gt-functional", "cline-noun-adj-verb", "rank-agreement"):
        assert claims[cid].verdict == "not testable"
        assert "1 language(s) (needs ≥ 30); 3 captions in the smallest language" in \
            claims[cid].note
    claims = {c.id: c for c in gx.paper_claims(an, min_languages=1, min_captions=3)}
    assert claims["cline-noun-adj-verb"].verdict == "holds"
    assert claims["rank-agreement"].verdict == "not testable"  # one language has no agreement
