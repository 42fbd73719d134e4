"""Chapter analyses of tokenbook.uid_grounding.measures on synthetic word-surprisal tables with known effects."""

import numpy as np
import pandas as pd
import pytest
from scipy import stats as st
from statsmodels.stats.multitest import multipletests

from tokenbook.uid_grounding import measures as uid


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


def test_drop_unscorable_removes_whole_units():
    t = synthetic_captions(n_langs=1, n_caps=5)
    t.loc[t.index[1], "s_P"] = np.nan
    bad_unit = t.loc[t.index[1], "unit_id"]
    kept, n = uid.drop_unscorable(t)
    assert n == 1 and bad_unit not in set(kept.unit_id)
    assert len(kept) == len(t) - (t.unit_id == bad_unit).sum()
    same, n0 = uid.drop_unscorable(kept)
    assert n0 == 0 and len(same) == len(kept)


@pytest.mark.slow
def test_story_helpers_and_figures():
    import matplotlib

    matplotlib.use("Agg")
    rng = np.random.default_rng(5)
    rows = []
    for lang in ("a", "b"):
        for story in range(6):
            for k in range(4):
                n = int(rng.integers(3, 7))
                su = rng.gamma(2, 2, n)
                for i in range(n):
                    onset = 2.0 if i == 0 else 0.2
                    rows.append(dict(lang=lang, story_id=f"s{story}", sent_idx=k, n_sents=4,
                                     unit_id=f"{lang}{story}-{k}", word_idx=i, upos="NOUN",
                                     s_U=su[i], s_P=su[i] - 0.5 * onset,
                                     s_D=np.nan if k == 0 else su[i] - onset,
                                     s_PD=np.nan if k == 0 else su[i] - 1.5 * onset))
    t = pd.DataFrame(rows)
    sm = uid.story_unit_measures(t)
    assert set(sm.table.condition) == {"U", "P", "D", "PD"}
    assert sm.table.rel_pos.between(0, 1).all()
    assert (sm.table.condition == "D").sum() == 2 * 6 * 3
    jumps = uid.story_boundary_summary(t)
    assert set(jumps.condition) == {"U", "P", "D", "PD"} and (jumps.n_pairs > 0).all()
    red, enrich = uid.story_reductions(t)
    assert enrich["D"] > 1.5 and enrich["P"] > 1.5 and enrich["DP"] > 1.5
    cmp_ = uid.compare_conditions(sm.table, a="D", b="U", unit=["lang", "story_id", "sent_idx"],
                                  metrics=["uid_v"], n_boot=50)
    assert (cmp_.n == 18).all()
    from tokenbook.uid_grounding import figures as fg
    from tokenbook.plotting import MIN_FONT_PT, rendered_font_pt, use_book_style

    use_book_style()
    figs = [fg.plot_story_conditions(sm.table), fg.plot_boundary_jumps(jumps),
            fg.plot_reduction_densities(red),
            fg.plot_position_profile(uid.position_profile(sm.table, "uid_v"))]
    caps = synthetic_captions()
    m = uid.unit_measures(caps)
    c = uid.compare_conditions(m.table, n_boot=50)
    figs += [fg.plot_language_scatter(c), fg.plot_measure_densities(m.table),
             fg.plot_pos_decomposition(uid.pos_decomposition(caps, m.table, min_count=5))]
    for fig in figs:
        for ax in fig.axes:
            if ax.get_label() != "<colorbar>":
                assert ax.get_xlabel() and ax.get_ylabel()
        assert rendered_font_pt(fig) >= MIN_FONT_PT  # legible at the book's page width
    profile_ax = figs[3].axes[0]      # unit indices are whole numbers: no 0.5 ticks
    profile_ax.figure.canvas.draw()
    assert all(float(t).is_integer() for t in profile_ax.get_xticks())
    for fig in figs:
        matplotlib.pyplot.close(fig)


def test_paragraph_level_pools_sentences_of_a_page():
    rows = []
    for k, (para, words) in enumerate([(0, [1.0, 2.0]), (0, [3.0, 4.0]), (1, [5.0, 5.0, 5.0])]):
        for i, v in enumerate(words):
            rows.append(dict(lang="x", story_id="s", sent_idx=k, para_idx=para, n_sents=3,
                             word_idx=i, s_U=v))
    t = pd.DataFrame(rows)
    p = uid.story_unit_measures(t, level="paragraph", conditions={"U": "s_U"}).table
    assert p.para_idx.tolist() == [0, 1] and p.rel_pos.tolist() == [0.0, 1.0]
    assert p.uid_v.iloc[0] == pytest.approx(np.var([1.0, 2.0, 3.0, 4.0]))
    assert p.uid_lv.iloc[0] == pytest.approx(1.0) and p.uid_v.iloc[1] == 0
    s = uid.story_unit_measures(t, conditions={"U": "s_U"})
    assert s.n_excluded == 2 and s.table.rel_pos.tolist() == [1.0]
    with pytest.raises(ValueError, match="para_idx"):
        uid.story_unit_measures(t.drop(columns="para_idx"), level="paragraph")


def test_complete_units_keeps_units_with_every_condition():
    m = pd.DataFrame({"lang": "x", "story_id": "s", "sent_idx": [0, 0, 1, 1, 1, 1],
                      "condition": ["U", "P", "U", "P", "D", "PD"], "uid_v": 1.0})
    c = uid.complete_units(m)
    assert c.sent_idx.tolist() == [1, 1, 1, 1]
    assert len(uid.complete_units(m, ("U", "P"))) == 4  # both sentences, U and P rows only


def test_dataset_summary_and_position_profile():
    t = synthetic_captions(n_langs=2, n_caps=10)
    s = uid.dataset_summary(t).set_index("lang")
    lens = t.groupby(["lang", "unit_id"]).size()
    assert s.loc["l0", "units"] == 10 and s.loc["l0", "words"] == lens["l0"].sum()
    assert s.loc["l1", "max_len"] == lens["l1"].max()
    m = pd.DataFrame({"condition": ["U"] * 4 + ["P"] * 4, "sent_idx": [0, 0, 1, 1] * 2,
                      "uid_v": [1.0, 3.0, 2.0, 2.0, 0.0, 2.0, 1.0, 1.0]})
    p = uid.position_profile(m).set_index(["condition", "sent_idx"])
    assert p.loc[("U", 0), "mean"] == 2.0 and p.loc[("U", 1), "sem"] == 0.0
    assert p.loc[("U", 0), "high"] == pytest.approx(2.0 + 1.96 * np.std([1, 3], ddof=1) / np.sqrt(2))


def test_pos_decomposition_keeps_the_papers_classes_only():
    t = synthetic_captions(n_langs=1, n_caps=200)
    t.loc[t.upos == "NOUN", "s_P"] += 6.0  # these captions get less uniform with P
    t.loc[t.upos == "ADJ", "upos"] = "ADJ+NOUN"
    m = uid.unit_measures(t)
    assert "ADJ+NOUN" not in set(uid.pos_decomposition(t, m.table, min_count=5).upos)
    assert "ADJ+NOUN" in set(uid.pos_decomposition(t, m.table, min_count=5, classes=None).upos)


def test_pos_decomposition_summary_handles_no_worse_captions():
    t = synthetic_captions(n_langs=1, n_caps=30)  # P flattens every caption
    m = uid.unit_measures(t)
    dec = uid.pos_decomposition(t, m.table, min_count=1)
    assert dec.empty
    summ = uid.pos_decomposition_summary(dec)
    assert summ.empty and list(summ.columns) == ["mean_dC", "share_up", "share_down"]
    import matplotlib

    matplotlib.use("Agg")
    from tokenbook.uid_grounding.figures import plot_pos_decomposition

    matplotlib.pyplot.close(plot_pos_decomposition(dec))
