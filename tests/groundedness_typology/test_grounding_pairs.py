"""Pairwise class tests in every language (issue #13 item 8): known answers on hand-made tables."""

import numpy as np
import pandas as pd
import pytest
from scipy import stats
from statsmodels.stats.multitest import multipletests

from tokenbook.groundedness_typology import measures as gr

COLUMNS = ["lang", "class_a", "class_b", "n_a", "n_b", "mean_a", "mean_b", "diff", "statistic",
           "p", "q", "effect"]


def close(a, b) -> bool:
    """Equal to 1e-9 relative (q-values of 1e-30 must not pass as 'close to' 1e-20)."""
    return np.allclose(np.asarray(a, float), np.asarray(b, float), rtol=1e-9, atol=0.0)


def table(values: dict) -> pd.DataFrame:
    """``{(lang, upos): groundedness values}`` as a word table with a groundedness column."""
    return pd.DataFrame([{"lang": lang, "upos": upos, "groundedness": float(v)}
                         for (lang, upos), vals in values.items() for v in vals])


def planted(langs=("xx", "yy", "zz"), n=30, seed=0) -> pd.DataFrame:
    """NOUN ≫ ADJ > DET planted; DET and ADP hold the very same values (an identical pair)."""
    rng = np.random.default_rng(seed)
    vals = {}
    for lang in langs:
        det = rng.normal(0.0, 0.3, n)
        vals.update({(lang, "NOUN"): rng.normal(2.0, 0.3, n), (lang, "ADJ"): rng.normal(1.0, 0.3, n),
                     (lang, "DET"): det, (lang, "ADP"): det.copy(),
                     (lang, "PUNCT"): rng.normal(5.0, 0.3, n)})
    return table(vals)


def test_columns_orientation_and_classes():
    t = gr.class_pair_tests(planted())
    assert list(t.columns) == COLUMNS
    # PUNCT is not analysed; 4 classes → 6 pairs per language; pairs oriented as in `classes`
    assert len(t) == 18 and "PUNCT" not in set(t["class_a"]) | set(t["class_b"])
    assert set(zip(t["class_a"], t["class_b"])) == {
        ("NOUN", "ADJ"), ("NOUN", "DET"), ("NOUN", "ADP"), ("ADJ", "DET"), ("ADJ", "ADP"),
        ("DET", "ADP")}
    # a pair whose second class is more grounded keeps its orientation, with a negative sign
    r = gr.class_pair_tests(planted(), classes=("DET", "NOUN")).iloc[0]
    assert (r["class_a"], r["class_b"]) == ("DET", "NOUN") and r["diff"] < -1.5
    assert r["effect"] < 0 and r["statistic"] < 0


def test_planted_pair_differs_identical_pair_does_not():
    t = gr.class_pair_tests(planted()).set_index(["lang", "class_a", "class_b"])
    for lang in ("xx", "yy", "zz"):
        noun_det = t.loc[(lang, "NOUN", "DET")]
        assert noun_det["q"] < 1e-10 and noun_det["effect"] > 3
        assert noun_det["diff"] == pytest.approx(noun_det["mean_a"] - noun_det["mean_b"])
        same = t.loc[(lang, "DET", "ADP")]
        assert same["p"] == pytest.approx(1.0) and same["q"] == pytest.approx(1.0)
        assert same["effect"] == 0 and same["statistic"] == 0


def test_welch_statistic_and_cohens_d_by_hand():
    a, b = [1.0, 2.0, 3.0], [4.0, 5.0, 6.0, 9.0]
    r = gr.class_pair_tests(table({("xx", "NOUN"): a, ("xx", "DET"): b})).iloc[0]
    ref = stats.ttest_ind(a, b, equal_var=False)
    assert r["statistic"] == pytest.approx(ref.statistic) and r["p"] == pytest.approx(ref.pvalue)
    pooled = np.sqrt((2 * np.var(a, ddof=1) + 3 * np.var(b, ddof=1)) / 5)
    assert r["effect"] == pytest.approx((np.mean(a) - np.mean(b)) / pooled)
    assert (r["n_a"], r["n_b"]) == (3, 4)
    # Student's t (pooled variance) would give another p: the test is Welch's
    assert r["p"] != pytest.approx(stats.ttest_ind(a, b).pvalue, rel=1e-3)


def test_mann_whitney_and_rank_biserial():
    a, b = [5.0, 6.0, 7.0, 8.0], [1.0, 2.0, 3.0]
    r = gr.class_pair_tests(table({("xx", "NOUN"): a, ("xx", "DET"): b}),
                            test="mannwhitney").iloc[0]
    assert r["statistic"] == 12  # U_a = n_a n_b: every NOUN above every DET
    assert r["effect"] == pytest.approx(1.0)
    assert r["p"] == pytest.approx(stats.mannwhitneyu(a, b).pvalue)
    r = gr.class_pair_tests(table({("xx", "NOUN"): b, ("xx", "DET"): a}),
                            test="mannwhitney").iloc[0]
    assert r["effect"] == pytest.approx(-1.0)


def test_bh_over_all_comparisons():
    t = gr.class_pair_tests(planted())
    # q is BH over every pair of every language, as statsmodels' fdr_bh on the whole table
    assert close(t["q"], multipletests(t["p"], method="fdr_bh")[1])
    assert (t["q"] >= t["p"] - 1e-15).all()
    by_p = t.sort_values("p")
    assert np.all(np.diff(by_p["q"].to_numpy()) >= -1e-15)  # monotone in p
    # within a language instead (the exercises' correction): a different, per-language BH
    per = gr.class_pair_tests(planted(), fdr="language")
    for lang, g in per.groupby("lang"):
        assert close(g["q"], multipletests(g["p"], method="fdr_bh")[1])
    assert not close(per["q"], t["q"])


def test_min_count_constant_classes_and_nan_outside_fdr():
    vals = {("xx", "NOUN"): [2.0, 2.1, 1.9, 2.2], ("xx", "ADJ"): [1.0, 1.0],
            ("xx", "DET"): [0.5], ("xx", "ADP"): [1.0, 1.0, 1.0]}
    t = gr.class_pair_tests(table(vals))
    assert "DET" not in set(t["class_a"]) | set(t["class_b"])  # 1 token < min_count 2
    const = t[(t["class_a"] == "ADJ") & (t["class_b"] == "ADP")].iloc[0]
    assert np.isnan(const["p"]) and np.isnan(const["q"]) and np.isnan(const["effect"])
    ok = t.dropna(subset=["p"])
    assert close(ok["q"], multipletests(ok["p"], method="fdr_bh")[1])  # m excludes NaN
    assert gr.class_pair_tests(table(vals), min_count=3)["class_b"].tolist() == ["ADP"]


def test_word_table_without_groundedness_and_input_errors():
    words = pd.DataFrame({"lang": "xx", "unit_id": [0, 0, 1, 1, 2, 2],
                          "word": list("abcdef"), "upos": ["NOUN", "DET"] * 3,
                          "s_U": [5.0, 3.0, 6.0, 3.1, 5.5, 2.9],
                          "s_P": [3.0, 3.0, 4.1, 3.0, 3.4, 3.0]})
    r = gr.class_pair_tests(words).iloc[0]  # groundedness = s_U − s_P added on the way
    assert r["mean_a"] == pytest.approx(np.mean([2.0, 1.9, 2.1]))
    with pytest.raises(ValueError, match="missing column"):
        gr.class_pair_tests(words.drop(columns="s_P"))
    with pytest.raises(ValueError, match="missing column"):
        gr.class_pair_tests(pd.DataFrame({"lang": ["x"], "groundedness": [1.0]}))
    with pytest.raises(ValueError, match="test"):
        gr.class_pair_tests(words, test="ttest")
    with pytest.raises(ValueError, match="fdr"):
        gr.class_pair_tests(words, fdr="pairs")
    with pytest.raises(ValueError, match="min_count"):
        gr.class_pair_tests(words, min_count=1)
    with pytest.raises(ValueError, match="two UPOS"):
        gr.class_pair_tests(words, classes=("NOUN",))
    with pytest.raises(TypeError):
        gr.class_pair_tests(words.to_dict())
    empty = gr.class_pair_tests(words.iloc[:0])
    assert list(empty.columns) == COLUMNS and len(empty) == 0


def test_summary_counts_languages_and_signs():
    t = pd.DataFrame({"lang": ["x", "y", "z", "w", "x", "y"],
                      "class_a": ["NOUN"] * 4 + ["ADJ"] * 2, "class_b": ["DET"] * 4 + ["VERB"] * 2,
                      "q": [0.001, 0.01, 0.04, np.nan, 0.3, 0.02],
                      "effect": [1.5, 0.9, -0.4, 0.2, 0.1, -0.6]})
    s = gr.class_pair_summary(t).set_index(["class_a", "class_b"])
    nd = s.loc[("NOUN", "DET")]
    assert nd["n_languages"] == 3  # the NaN-q language did not test it
    assert (nd["n_a_gt_b"], nd["n_b_gt_a"]) == (2, 1)
    assert nd["share_significant"] == pytest.approx(1.0)
    assert nd["share_a_gt_b"] == pytest.approx(2 / 3) and nd["median_effect"] == pytest.approx(0.9)
    av = s.loc[("ADJ", "VERB")]
    assert (av["n_a_gt_b"], av["n_b_gt_a"], av["share_significant"]) == (0, 1, 0.5)
    assert list(s.index)[0] == ("NOUN", "DET")  # sorted by share of languages
    # a stricter alpha counts fewer languages
    assert gr.class_pair_summary(t, alpha=0.005).set_index("class_a").loc["NOUN", "n_a_gt_b"] == 1
    with pytest.raises(ValueError, match="alpha"):
        gr.class_pair_summary(t, alpha=5)
    with pytest.raises(ValueError, match="missing column"):
        gr.class_pair_summary(t.drop(columns="q"))


def test_dominance_matrix_shows_the_planted_cline():
    t = gr.class_pair_tests(planted())
    m = gr.class_dominance_matrix(t)
    # ordered by net dominance: NOUN, ADJ first; DET and ADP (identical) after
    assert list(m.index[:2]) == ["NOUN", "ADJ"] and list(m.index) == list(m.columns)
    assert m.loc["NOUN", "ADJ"] == 1.0 and m.loc["ADJ", "NOUN"] == 0.0
    assert m.loc["ADJ", "DET"] == 1.0 and m.loc["DET", "ADP"] == 0.0 == m.loc["ADP", "DET"]
    assert np.isnan(np.diag(m.to_numpy())).all()
    s = gr.class_pair_summary(t)
    for r in s.itertuples():
        assert m.loc[r.class_a, r.class_b] + m.loc[r.class_b, r.class_a] == \
            pytest.approx(r.share_significant)
    fixed = gr.class_dominance_matrix(t, classes=["DET", "NOUN", "VERB"])
    assert list(fixed.index) == ["DET", "NOUN", "VERB"] and fixed.loc["NOUN", "DET"] == 1.0
    assert fixed["VERB"].isna().all()  # no language tests VERB


def test_pair_matrix_figure_reads_at_page_width():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from tokenbook import plotting
    from tokenbook.groundedness_typology import figures as figs

    with matplotlib.rc_context():
        plotting.use_book_style()
        m = gr.class_dominance_matrix(gr.class_pair_tests(planted()))
        fig = figs.plot_class_pair_matrix(m)
        ax = fig.axes[0]
        assert ax.get_ylabel().startswith("more grounded") and "%" in fig.axes[1].get_ylabel()
        assert fig.get_figwidth() <= plotting.BASE_WIDTH_IN
        assert plotting.rendered_font_pt(fig) >= plotting.MIN_FONT_PT
        assert "100" in [t.get_text() for t in ax.texts]  # NOUN > DET in every language
        with pytest.raises(ValueError, match="square"):
            figs.plot_class_pair_matrix(m.iloc[:2])
        plt.close("all")
