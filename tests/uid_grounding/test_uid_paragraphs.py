"""Bloom-VIST design at paragraph level (Gay et al. Figs. 3-4, 8-20, Tables 5-9): known answers
on small hand-made tables."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from tokenbook.uid_grounding import measures as uid


def _story(lang, story, paras):
    """Word rows of one story: ``paras`` = list of paragraphs, each a list of sentences, each a
    list of (s_U, s_P) surprisals."""
    rows, sent = [], 0
    for p, sentences in enumerate(paras):
        for words in sentences:
            for i, (su, sp) in enumerate(words):
                rows.append(dict(lang=lang, story_id=story, para_idx=p, sent_idx=sent,
                                 word_idx=i, s_U=su, s_P=sp))
            sent += 1
    return rows


def test_filter_stories_needs_enough_full_paragraphs_without_gaps():
    ok = _story("x", "ok", [[[(1, 1)] * 2]] * 3)            # 3 paragraphs of 2 words
    short = _story("x", "short", [[[(1, 1)] * 2]] * 2)      # only 2 paragraphs
    thin = _story("x", "thin", [[[(1, 1)] * 2]] * 2 + [[[(1, 1)]]])  # last has 1 word
    gap = pd.DataFrame(_story("x", "gap", [[[(1, 1)] * 2]] * 3))
    gap["para_idx"] = gap["para_idx"].map({0: 0, 1: 2, 2: 3})   # paragraph 1 is missing
    t = pd.concat([pd.DataFrame(ok + short + thin), gap], ignore_index=True)
    kept = uid.filter_stories(t, min_paragraphs=3, min_words=2)
    assert sorted(kept.story_id.unique()) == ["ok"]
    assert kept.attrs == {"n_stories": 4, "n_kept": 1}
    assert len(kept) == 6
    with pytest.raises(ValueError, match="para_idx"):
        uid.filter_stories(t.drop(columns="para_idx"))
    with pytest.raises(ValueError, match="min_paragraphs"):
        uid.filter_stories(t, min_paragraphs=0)


def test_stories_of_length_and_bootstrap_band_stays_positive():
    m = pd.DataFrame({"n_units_in_story": [3, 3, 5], "condition": "U", "para_idx": [0, 1, 0],
                      "uid_v": [1.0, 2.0, 3.0]})
    assert uid.stories_of_length(m, 3).uid_v.tolist() == [1.0, 2.0]
    with pytest.raises(ValueError, match="positive integer"):
        uid.stories_of_length(m, 0)
    skewed = pd.DataFrame({"condition": "U", "para_idx": 0, "uid_v": [0.0] * 9 + [20.0]})
    sem = uid.position_profile(skewed, position="para_idx")
    boot = uid.position_profile(skewed, position="para_idx", band="bootstrap", n_boot=500)
    assert sem["low"].iloc[0] < 0 <= boot["low"].iloc[0]    # the paper's band dips below 0
    assert boot["mean"].iloc[0] == pytest.approx(2.0) and boot["high"].iloc[0] <= 20.0
    const = pd.DataFrame({"condition": "U", "para_idx": 0, "uid_v": [1.5, 1.5, 1.5]})
    b = uid.position_profile(const, position="para_idx", band="bootstrap", n_boot=50)
    assert b[["low", "high"]].iloc[0].tolist() == [1.5, 1.5]
    with pytest.raises(ValueError, match="band"):
        uid.position_profile(const, position="para_idx", band="log")


def test_paragraph_cv_is_sqrt_variance_over_absolute_mean():
    t = pd.DataFrame(_story("x", "a", [[[(1.0, 2.0), (3.0, 2.0)]], [[(2.0, 1.0), (2.0, 5.0)]]]))
    pm = uid.story_unit_measures(t, level="paragraph", min_words=1).table
    cv = uid.uid_cv_table(pm)
    # U: paragraph 0 → √1/2 = 0.5, paragraph 1 → 0; P: 0 and √4/3 = 2/3
    assert cv.loc["x", "U"] == pytest.approx(0.25)
    assert cv.loc["x", "P"] == pytest.approx(1 / 3)
    assert list(cv.columns) == ["U", "P"]


def test_boundary_spikes_at_sentences_and_paragraphs():
    # paragraph 0: sentences [1, 2] and [3, 4]; paragraph 1: sentence [9, 5, 5]
    t = pd.DataFrame(_story("x", "a", [[[(1, 0), (2, 0)], [(3, 0), (4, 0)]],
                                       [[(9, 0), (5, 0), (5, 0)]]]))
    sent = uid.story_boundary_summary(t, conditions={"U": "s_U"}, level="sentence")
    para = uid.story_boundary_summary(t, conditions={"U": "s_U"}, level="paragraph")
    s1 = sent[sent.w == 1].delta.item()      # mean of (2 − 3) and (4 − 9)
    assert s1 == pytest.approx(-3.0)
    p = para.set_index("w").delta
    assert p[1] == pytest.approx(4 - 9) and p[2] == pytest.approx(3.5 - 7.0)
    assert p[3] == pytest.approx(3.0 - 19 / 3)   # last 3 words of paragraph 0 cross sentences
    assert set(para.level) == {"paragraph"} and (para.n_pairs == 1).all()


def test_boundary_pairs_skip_a_missing_unit():
    t = pd.DataFrame(_story("x", "a", [[[(1, 0), (1, 0)]], [[(5, 0), (5, 0)]],
                                       [[(2, 0), (2, 0)]]]))
    t.loc[t.para_idx == 1, "s_U"] = np.nan   # unscorable middle paragraph
    out = uid.story_boundary_summary(t, conditions={"U": "s_U"}, level="paragraph")
    assert out.empty                          # 0 and 2 are not neighbours
    jumps = uid.boundary_jumps(t.dropna(subset=["s_U"]), "s_U", unit_order=("para_idx",))
    assert len(jumps) == 2                    # without adjacency they are paired (w = 1, 2)


def _trend_data(seed=0, slopes=None):
    slopes = slopes or {"U": 1.0, "P": 3.0}
    rng = np.random.default_rng(seed)
    rows = []
    for s in range(12):
        a, b = rng.normal(0, 0.5), rng.normal(0, 0.2)
        for k in range(6):
            for cond, slope in slopes.items():
                rows.append(dict(lang="x", story_id=f"s{s}", condition=cond, rel_pos=k / 5,
                                 sent_idx=k, para_idx=k // 2, n_words=int(rng.integers(4, 9)),
                                 uid_v=2.0 + a + (slope + b) * k / 5 + rng.normal(0, 0.1),
                                 mean=3.0 - 0.5 * k / 5 + rng.normal(0, 0.1)))
    return pd.DataFrame(rows)


def test_trend_table_reports_condition_slopes_not_interactions():
    m = _trend_data()
    out = uid.story_trend_table({"sentence": m}, min_sentences=1)
    v = out[out.outcome == "uid_v"].set_index("condition")
    assert v.loc["U", "slope"] == pytest.approx(1.0, abs=0.2)
    assert v.loc["P", "slope"] == pytest.approx(3.0, abs=0.2)   # base + interaction, not 2
    assert v.loc["P", "p"] < 1e-3                                 # differs from U
    mean = out[out.outcome == "mean"].set_index("condition")
    assert mean.loc["U", "slope"] == pytest.approx(-0.5, abs=0.2)
    assert (out.n_stories == 12).all() and (out.n_obs == 144).all()
    wide = uid.trend_layout(out, "uid_v")
    assert wide.loc[("x", "sentence"), "P"].endswith("***") and list(wide.columns) == ["U", "P"]
    # paragraphs of 2 sentences: min_sentences=3 removes every sentence, so nothing is fitted
    assert uid.story_trend_table({"sentence": m}, min_sentences=3).empty
    assert len(uid.story_trend_table({"sentence": m}, min_sentences=2)) == 4
    with pytest.raises(ValueError, match="para_idx"):
        uid.story_trend_table({"sentence": m.drop(columns="para_idx")}, min_sentences=2)
    with pytest.raises(ValueError, match="rel_pos"):
        uid.story_trend_table({"paragraph": m.drop(columns="rel_pos")})


def test_reductions_get_paragraph_positions_and_onsets():
    t = pd.DataFrame(_story("x", "a", [[[(5, 1), (1, 1)], [(5, 1), (1, 1)]]]))
    red, enrich = uid.story_reductions(t)
    assert red.pos.tolist() == [0.0, 0.5, 0.0, 0.5]
    assert red.para_pos.tolist() == [0.0, 0.25, 0.5, 0.75]
    on = uid.reduction_onsets(red, onset=0.3).set_index("level").E
    assert on["sentence"] == pytest.approx(1.0 / 0.5)    # all δ at sentence onsets, half of words
    assert on["paragraph"] == pytest.approx(0.5 / 0.5)   # half the δ on half the words
