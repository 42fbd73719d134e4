"""Chapter analyses of tokenbook.uid on synthetic word-surprisal tables with known effects."""

import numpy as np
import pandas as pd
import pytest
from scipy import stats as st
from statsmodels.stats.multitest import multipletests

from tokenbook import uid


def synthetic_captions(n_langs=3, n_caps=40, seed=0, shrink=0.5):
    """P = mean + shrink·(U − mean) − 0.3: grounding lowers and flattens the profile."""
    rng = np.random.default_rng(seed)
    rows = []
    upos = ["DET", "NOUN", "VERB", "ADJ"]
    for li in range(n_langs):
        for c in range(n_caps):
            n = int(rng.integers(2, 9))
            su = rng.gamma(2, 2, n)
            sp = su.mean() + shrink * (su - su.mean()) - 0.3 + rng.normal(0, 0.05, n)
            for i in range(n):
                rows.append(dict(lang=f"l{li}", dataset="syn", unit_kind="caption",
                                 unit_id=f"l{li}-{c}", word_idx=i, word=f"w{i}",
                                 upos=upos[i % 4], s_U=su[i], s_P=sp[i]))
    return pd.DataFrame(rows)


def test_compare_conditions_matches_scipy_and_finds_the_effect():
    t = synthetic_captions()
    m = uid.unit_measures(t)
    cmp_ = uid.compare_conditions(m.table, n_boot=200, seed=1)
    assert set(cmp_.metric) == {"uid_v", "uid_lv", "cv_global", "cv_local"}
    v = cmp_[cmp_.metric == "uid_v"].set_index("lang")
    assert (v.delta_pct < -50).all() and (v.d_z < 0).all() and (v.ci_high < 0).all()
    wide = m.table.pivot_table(index=["lang", "unit_id"], columns="condition", values="uid_v")
    l0 = wide.loc["l0"]
    assert v.loc["l0", "n"] == len(l0)
    assert v.loc["l0", "p"] == pytest.approx(st.wilcoxon(l0.P, l0.U).pvalue)
    assert v.loc["l0", "delta_pct"] == pytest.approx(100 * (l0.P.mean() - l0.U.mean()) / l0.U.mean())
    np.testing.assert_allclose(v.q, multipletests(v.p, method="fdr_bh")[1])
    again = uid.compare_conditions(m.table, n_boot=200, seed=1)
    pd.testing.assert_frame_equal(cmp_, again)
    assert (v.stars == "***").all()


def test_compare_conditions_no_effect_is_not_significant():
    t = synthetic_captions(shrink=1.0)
    t["s_P"] = t["s_U"] + np.random.default_rng(3).normal(0, 0.01, len(t))
    cmp_ = uid.compare_conditions(uid.unit_measures(t).table, metrics=("uid_v",), n_boot=100)
    assert (cmp_.delta_pct.abs() < 5).all()
    assert (cmp_.ci_low < 0).all() and (cmp_.ci_high > 0).all()


def test_pos_decomposition_finds_the_word_class_that_adds_variance():
    t = synthetic_captions(n_langs=1, n_caps=200)
    # in P, nouns become much more surprising than the rest: those captions' variance rises
    noun = t.upos == "NOUN"
    t.loc[noun, "s_P"] = t.loc[noun, "s_U"] + 6.0
    m = uid.unit_measures(t)
    dec = uid.pos_decomposition(t, m.table, min_count=10).set_index("upos")
    assert dec.mean_dC.idxmax() == "NOUN" and dec.loc["NOUN", "mean_dC"] > 0
    assert dec.loc["NOUN", "share_up"] == 1.0 and dec.loc["DET", "share_up"] < 0.9
    assert 0 < dec.attrs["share_units"] <= 1


def test_normalised_position():
    t = pd.DataFrame({"lang": "x", "unit_id": [0, 0, 0, 0, 1, 1], "word_idx": [3, 0, 1, 2, 0, 1]})
    np.testing.assert_allclose(uid.normalised_position(t), [0.75, 0, 0.25, 0.5, 0, 0.5])


def test_story_models_recover_condition_slope_and_drop_missing():
    rng = np.random.default_rng(0)
    rows = []
    for story in range(12):
        n_s = 6
        for k in range(n_s):
            base = rng.gamma(2, 2, 6)
            scale = 1.0 - 0.8 * k / (n_s - 1)  # discourse flattens later sentences
            s_d = base.mean() + scale * (base - base.mean())
            for i in range(6):
                rows.append(dict(lang="x", story_id=f"s{story}", sent_idx=k, n_sents=n_s,
                                 unit_id=f"s{story}-{k}", word_idx=i, s_U=base[i],
                                 s_D=np.nan if k == 0 else s_d[i]))
    table = pd.DataFrame(rows)
    with pytest.raises(ValueError, match="missing='drop'"):
        uid.unit_measures(table, {"U": "s_U", "D": "s_D"})
    unit = ("lang", "unit_id", "story_id", "sent_idx", "n_sents")
    res = uid.unit_measures(table, {"U": "s_U", "D": "s_D"}, unit=unit, missing="drop")
    m = res.table
    assert (m.condition == "U").sum() == 72 and (m.condition == "D").sum() == 60
    m["rel_pos"] = m.sent_idx / (m.n_sents - 1)
    fits = uid.story_position_models(m, outcome="uid_v")
    slope = fits.set_index("term").estimate
    inter = [t for t in slope.index if t.startswith("rel_pos:")][0]
    assert slope[inter] < 0
    assert fits.converged.dtype == bool and "warnings" in fits
