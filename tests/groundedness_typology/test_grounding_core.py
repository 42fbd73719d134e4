"""grounding.py on synthetic word tables with known class effects, and on hand-made rank vectors."""

import warnings

import numpy as np
import pandas as pd
import pytest

from tokenbook.groundedness_typology import measures as gr

EFFECTS = {"NOUN": 2.0, "ADJ": 1.2, "VERB": 0.6, "DET": 0.2, "ADP": 0.1, "PUNCT": 5.0}


def synthetic_words(effects=EFFECTS, langs=("en", "de"), n_per=60, seed=0):
    """Words with s_P = s_U − effect[upos] + noise: groundedness means are the effects."""
    rng = np.random.default_rng(seed)
    rows = []
    for lang in langs:
        for upos, eff in effects.items():
            for i in range(n_per):
                s_u = rng.uniform(2, 8)
                rows.append({"lang": lang, "dataset": "toy", "unit_kind": "caption",
                             "unit_id": f"{lang}-{i}", "word_idx": len(rows) % 7,
                             "word": f"{upos.lower()}{i % 4}", "upos": upos,
                             "concreteness": 5.0 if upos in ("NOUN", "ADJ") else 2.0,
                             "s_U": s_u, "s_P": s_u - eff - rng.normal(0, 0.3)})
    return pd.DataFrame(rows)


def test_groundedness_sign_and_missing_columns():
    w = synthetic_words()
    g = gr.add_groundedness(w)
    assert np.allclose(g["groundedness"], w["s_U"] - w["s_P"])
    with pytest.raises(ValueError, match="missing column.*s_P"):
        gr.add_groundedness(w.drop(columns="s_P"))


def test_nonfinite_rows_dropped():
    w = synthetic_words()
    w.loc[0, "s_P"] = np.nan
    assert len(gr.add_groundedness(w)) == len(w) - 1


def test_class_summary_recovers_effects_and_excludes_punct():
    s = gr.class_summary(gr.add_groundedness(synthetic_words()), n_boot=200, seed=1)
    assert "PUNCT" not in set(s["upos"])
    for _, r in s.iterrows():
        assert abs(r["mean"] - EFFECTS[r["upos"]]) < 0.15
        assert r["ci_low"] < r["mean"] < r["ci_high"]
    # seeded: identical output
    s2 = gr.class_summary(gr.add_groundedness(synthetic_words()), n_boot=200, seed=1)
    pd.testing.assert_frame_equal(s, s2)


def test_cline_and_lexical_functional():
    w = gr.add_groundedness(synthetic_words())
    s = gr.class_summary(w, n_boot=100)
    cl = gr.cline_holds(s)
    assert cl["holds"].all()
    # reverse the effects: the cline must fail
    rev = {"NOUN": 0.6, "ADJ": 1.2, "VERB": 2.0, "DET": 0.2, "ADP": 0.1}
    s_rev = gr.class_summary(gr.add_groundedness(synthetic_words(rev)), n_boot=100)
    assert not gr.cline_holds(s_rev)["holds"].any()
    lf = gr.lexical_vs_functional(w, n_boot=100)
    assert (lf["diff"] > 0).all() and (lf["q_diff"] < 0.05).all()
    assert (lf["functional_ci_low"] > 0).all() and (lf["q_functional_gt0"] < 0.05).all()
    # functional classes at zero: not significantly above zero
    zero = {"NOUN": 2.0, "DET": 0.0, "ADP": 0.0}
    lf0 = gr.lexical_vs_functional(gr.add_groundedness(synthetic_words(zero)), n_boot=100)
    assert (lf0["functional_ci_low"] < 0).all()


def test_pairwise_class_tests_bh():
    t = gr.pairwise_class_tests(gr.add_groundedness(synthetic_words()))
    en = t[t["lang"] == "en"]
    assert len(en) == 10  # 5 analysed classes → 10 pairs
    row = en[(en["a"] == "NOUN") & (en["b"] == "DET")].iloc[0]
    assert row["diff"] > 1.5 and row["p_bh"] < 1e-6
    assert (en["p_bh"] >= en["pvalue"] - 1e-15).all()


def test_rank_agreement_on_hand_made_rank_vectors():
    # en: NOUN > ADJ > VERB > DET ; de: ADJ > NOUN > VERB > DET ; ja: exact reverse of en
    means = {"en": {"NOUN": 4, "ADJ": 3, "VERB": 2, "DET": 1},
             "de": {"NOUN": 3, "ADJ": 4, "VERB": 2, "DET": 1},
             "ja": {"NOUN": 1, "ADJ": 2, "VERB": 3, "DET": 4}}
    summary = pd.DataFrame([{"lang": l, "upos": u, "mean": m}
                            for l, d in means.items() for u, m in d.items()])
    ranks = gr.rank_vectors(summary)
    assert ranks.loc["NOUN", "en"] == 1 and ranks.loc["ADJ", "de"] == 1
    agr = gr.rank_agreement(ranks).set_index(["lang_a", "lang_b"])
    assert agr.loc[("de", "en"), "kendall_tau"] == pytest.approx(2 / 3)  # one swapped pair of 6
    assert agr.loc[("de", "en"), "spearman_rho"] == pytest.approx(0.8)
    assert agr.loc[("en", "ja"), "kendall_tau"] == pytest.approx(-1.0)
    m = gr.agreement_matrix(agr.reset_index())
    assert m.loc["en", "de"] == m.loc["de", "en"] == pytest.approx(2 / 3)
    # the slip: τ on sorted label lists is not the rank agreement (here 0 instead of 2/3)
    slip = gr.label_list_tau(means["en"], means["de"])
    assert slip != pytest.approx(2 / 3)


def test_rank_vectors_keep_only_shared_classes():
    summary = pd.DataFrame({"lang": ["en", "en", "en", "de", "de"],
                            "upos": ["NOUN", "VERB", "DET", "NOUN", "VERB"],
                            "mean": [3.0, 2.0, 1.0, 1.0, 2.0]})
    ranks = gr.rank_vectors(summary)
    assert list(ranks.index) == ["NOUN", "VERB"] or set(ranks.index) == {"NOUN", "VERB"}
    tau = gr.rank_agreement(ranks)["kendall_tau"].iloc[0]
    assert tau == pytest.approx(-1.0)


def test_type_table_and_norms_analysis():
    w = gr.add_groundedness(synthetic_words(n_per=40))
    types = gr.type_table(w, min_tokens=5)
    assert (types["n_tokens"] >= 5).all()
    assert set(types["upos"]) <= set(gr.POS_FOR_ANALYSIS)
    assert gr.type_table(w, min_tokens=11).empty  # each type has exactly 10 tokens
    types = gr.add_frequency(types, words=w)
    assert np.isfinite(types["zipf"]).all()
    summary, fitted = gr.norms_analysis(types)
    assert summary["n_types"] == len(types)
    assert summary["spearman_concreteness"] > 0.5
    assert 0 < summary["r2_norms"] < 1
    assert summary["r2_norms_freq"] >= summary["r2_norms"] - 1e-12  # nested model
    assert np.allclose(fitted["informativity"], fitted["groundedness"] - fitted["predicted"])
    assert abs(fitted["informativity"].mean()) < 1e-9  # OLS residuals with intercept


def test_merge_norms_by_word():
    types = pd.DataFrame({"lang": ["en", "en", "de"], "word": ["dog", "the", "hund"],
                          "upos": ["NOUN", "DET", "NOUN"], "groundedness": [2.0, 0.1, 1.0]})
    norms = pd.DataFrame({"word": ["dog", "cat"], "concreteness": [6.9, 6.8]})
    m = gr.merge_norms(types, norms, lang="en")
    assert list(m["word"]) == ["dog"] and m["concreteness"].iloc[0] == 6.9


def test_plots_have_labels():
    import matplotlib
    matplotlib.use("Agg")
    from tokenbook.groundedness_typology import figures as figs

    w = gr.add_groundedness(synthetic_words())
    s = gr.class_summary(w, n_boot=50)
    fig = figs.plot_class_violins(w)
    assert "nats" in fig.axes[0].get_ylabel()
    fig2 = figs.plot_class_means(s)
    assert "nats" in fig2.axes[0].get_ylabel()
    m = gr.agreement_matrix(gr.rank_agreement(gr.rank_vectors(s)))
    assert figs.plot_agreement(m).axes[0].get_xlabel() == "language"
    # the measures module holds no figures
    assert not [name for name in dir(gr) if name.startswith("plot_")]


def test_released_table_feeds_the_analyses(tmp_path):
    from tokenbook.data.released import load_released_table

    w = synthetic_words(langs=("en",), n_per=30)
    w["sentence_idx"] = np.arange(len(w)) % 6
    # the released file holds surprisals under the names log_lm (U) and log_cap (P)
    csv = tmp_path / "groundedness.csv"
    (w.assign(dataset="xm").rename(columns={"s_U": "log_lm", "s_P": "log_cap", "upos": "pos"})
     [["lang", "dataset", "word", "sentence_idx", "log_lm", "log_cap", "pos"]]
     .to_csv(csv, index=False))
    table = gr.add_groundedness(load_released_table(csv, dataset="xm", cache=False))
    s = gr.class_summary(table, n_boot=50).set_index("upos")
    assert s.loc["NOUN", "mean"] == pytest.approx(EFFECTS["NOUN"], abs=0.2)
    assert s.loc["NOUN", "mean"] > s.loc["DET", "mean"]


@pytest.mark.slow
def test_rank_agreement_permutation_test():
    classes = ["NOUN", "ADJ", "VERB", "ADV", "DET", "ADP", "PRON"]
    shared = pd.DataFrame({l: np.arange(1, 8, dtype=float) for l in ("a", "b", "c", "d")},
                          index=classes)
    res = gr.rank_agreement_test(shared, n_perm=300, seed=0)
    assert res["mean_tau"] == pytest.approx(1.0) and res["p_perm"] < 0.01
    rng = np.random.default_rng(3)
    unrelated = pd.DataFrame({l: rng.permutation(7).astype(float) + 1 for l in "abcd"},
                             index=classes)
    res2 = gr.rank_agreement_test(unrelated, n_perm=300, seed=0)
    assert res2["p_perm"] > 0.05
    assert gr.rank_agreement_test(unrelated, n_perm=300, seed=0) == res2  # seeded


def test_kendall_tau_b_is_scipys_statistic_bit_for_bit():
    """The batched τ_b equals scipy.stats.kendalltau's statistic exactly: ties, NaN and
    constant vectors included; batched rows equal the rows alone."""
    from scipy import stats

    rng = np.random.default_rng(5)
    xs, ys = [], []
    for _ in range(600):
        n = 9
        x = rng.integers(0, int(rng.integers(1, 6)), n).astype(float)
        y = rng.permutation(n) + rng.random() if rng.random() < 0.5 else \
            rng.integers(0, 4, n).astype(float)
        if rng.random() < 0.05:
            x[rng.integers(n)] = np.nan
        xs.append(x)
        ys.append(np.asarray(y, dtype=float))
    batched = gr.kendall_tau_b(np.stack(xs), np.stack(ys))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")          # scipy warns on constant input
        expected = np.array([stats.kendalltau(x, y).statistic for x, y in zip(xs, ys)])
    np.testing.assert_array_equal(batched, expected)      # NaN where scipy gives NaN
    assert np.isnan(expected).any() and (np.abs(expected[~np.isnan(expected)]) < 1).any()
    assert gr.kendall_tau_b(xs[0], ys[0]) == pytest.approx(expected[0], nan_ok=True)
    with pytest.raises(ValueError, match="one shape"):
        gr.kendall_tau_b(np.zeros(3), np.zeros(4))
