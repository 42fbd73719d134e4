"""tokenbook.stats against scipy/statsmodels on fixed inputs, plus reproducibility."""

import warnings

import numpy as np
import pandas as pd
import pytest
from scipy import stats as st
from statsmodels.stats.multitest import multipletests

from tokenbook import stats


RNG = np.random.default_rng(12345)
U = RNG.gamma(2.0, 1.5, size=40)
P = U - RNG.normal(0.3, 0.5, size=40)


def test_paired_wilcoxon_matches_scipy_and_counts_zeros():
    x = P.copy()
    x[:3] = U[:3]  # three exact ties
    res = stats.paired_wilcoxon(x, U)
    ref = st.wilcoxon(x, U)
    assert res.statistic == pytest.approx(ref.statistic)
    assert res.pvalue == pytest.approx(ref.pvalue)
    assert res.n == 40 and res.n_zero == 3


def test_paired_wilcoxon_all_zero_and_nan():
    res = stats.paired_wilcoxon([1.0, 2.0, 3.0], [1.0, 2.0, 3.0])
    assert np.isnan(res.statistic) and res.pvalue == 1.0
    res = stats.paired_wilcoxon(np.r_[P, np.nan], np.r_[U, 1.0])
    assert res.n == 40
    assert res.pvalue == pytest.approx(st.wilcoxon(P, U).pvalue)
    with pytest.raises(ValueError, match="same length"):
        stats.paired_wilcoxon([1, 2], [1, 2, 3])


def test_benjamini_hochberg_matches_statsmodels():
    p = np.array([0.001, 0.04, 0.03, 0.5, 0.012, 0.2, 0.049, 0.9, 0.0001, 0.04])
    ref = multipletests(p, method="fdr_bh")[1]
    np.testing.assert_allclose(stats.benjamini_hochberg(p), ref)
    with_nan = np.r_[p[:4], np.nan, p[4:]]
    got = stats.benjamini_hochberg(with_nan)
    assert np.isnan(got[4])
    np.testing.assert_allclose(np.r_[got[:4], got[5:]], ref)
    with pytest.raises(ValueError):
        stats.benjamini_hochberg([0.5, 1.5])
    # by hand: m = 4, sorted 0.01, 0.02, 0.03, 0.2 -> 0.04, 0.04, 0.04, 0.2 (step-up minimum)
    np.testing.assert_allclose(stats.benjamini_hochberg([0.2, 0.03, 0.01, 0.02]),
                               [0.2, 0.04, 0.04, 0.04])


def test_cohens_dz_and_relative_change():
    d = P - U
    assert stats.cohens_dz(P, U) == pytest.approx(d.mean() / d.std(ddof=1))
    assert stats.cohens_dz(U, P) == pytest.approx(-stats.cohens_dz(P, U))
    assert np.isnan(stats.cohens_dz([1, 2, 3], [0, 1, 2]))  # sd(d) = 0
    assert stats.relative_change(8.0, 10.0) == pytest.approx(-20.0)
    assert np.isnan(stats.relative_change(1.0, 0.0))
    np.testing.assert_allclose(stats.relative_change([3, 6], [2, 4]), [50, 50])


def test_bootstrap_reproducible_and_covers_mean():
    a = stats.bootstrap_ci(U, np.mean, n_boot=500, seed=7)
    b = stats.bootstrap_ci(U, np.mean, n_boot=500, seed=7)
    c = stats.bootstrap_ci(U, np.mean, n_boot=500, seed=8)
    assert a == b and a != c
    assert a[0] < U.mean() < a[1]
    # a statistic with known sampling spread: CI width ≈ 2·1.96·sd/sqrt(n)
    width = a[1] - a[0]
    expected = 2 * 1.96 * U.std(ddof=1) / np.sqrt(U.size)
    assert 0.7 * expected < width < 1.3 * expected


def test_paired_bootstrap_equals_generic_on_differences():
    lo, hi = stats.paired_bootstrap_ci(P, U, n_boot=300, seed=3)
    lo2, hi2 = stats.bootstrap_ci(P - U, np.mean, n_boot=300, seed=3)
    assert (lo, hi) == pytest.approx((lo2, hi2))
    assert lo < (P - U).mean() < hi
    assert stats.paired_bootstrap_ci(P, U, n_boot=300, seed=3) == (lo, hi)


def test_rank_agreement_uses_keys_not_label_order():
    a = pd.Series({"NOUN": 3.0, "ADJ": 2.0, "VERB": 1.0, "DET": 0.5})
    b = pd.Series({"DET": 0.1, "VERB": 0.9, "NOUN": 2.5, "ADJ": 2.4})  # same order, shuffled keys
    tau, p, n = stats.kendall_tau(a, b)
    assert tau == pytest.approx(1.0) and n == 4
    rho, _, _ = stats.spearman_rho(a, b)
    assert rho == pytest.approx(1.0)
    rev = pd.Series({"NOUN": 0.0, "ADJ": 1.0, "VERB": 2.0, "DET": 3.0, "PRON": 9.0})
    assert stats.kendall_tau(a, rev)[0] == pytest.approx(-1.0)
    assert stats.kendall_tau(a, rev)[2] == 4  # PRON not shared
    ref = st.kendalltau([3.0, 2.0, 1.0, 0.5], [0.0, 1.0, 2.0, 3.0])
    assert stats.kendall_tau(a, rev)[1] == pytest.approx(ref.pvalue)
    with pytest.raises(TypeError, match="indexed"):
        stats.kendall_tau(["NOUN", "ADJ"], ["ADJ", "NOUN"])


def test_pairwise_tests_match_scipy_and_bh():
    df = pd.DataFrame({"g": np.repeat(["a", "b", "c"], 20),
                       "v": np.r_[RNG.normal(0, 1, 20), RNG.normal(1, 1, 20), RNG.normal(0.2, 1, 20)]})
    out = stats.pairwise_tests(df, group="g", value="v")
    assert list(zip(out.a, out.b)) == [("a", "b"), ("a", "c"), ("b", "c")]
    ref = st.ttest_ind(df.v[df.g == "a"], df.v[df.g == "b"], equal_var=False)
    assert out.pvalue[0] == pytest.approx(ref.pvalue)
    np.testing.assert_allclose(out.p_bh, multipletests(out.pvalue, method="fdr_bh")[1])
    mw = stats.pairwise_tests(df, group="g", value="v", test="mannwhitney")
    assert mw.pvalue[1] == pytest.approx(st.mannwhitneyu(df.v[df.g == "a"], df.v[df.g == "c"]).pvalue)


def test_mixedlm_recovers_slope_and_matches_statsmodels():
    import statsmodels.formula.api as smf

    rng = np.random.default_rng(0)
    rows = []
    for story in range(25):
        b0, b1 = rng.normal(0, 0.5), rng.normal(0, 0.2)
        for cond, eff in (("U", 0.0), ("P", -1.0)):
            for k in range(8):
                pos = k / 7
                y = 3 + b0 + eff + (0.5 + b1 + (-0.8 if cond == "P" else 0)) * pos + rng.normal(0, 0.3)
                rows.append((f"s{story}", cond, pos, y))
    df = pd.DataFrame(rows, columns=["story_id", "cond", "rel_pos", "y"])
    formula = "y ~ rel_pos * C(cond, Treatment('U'))"
    res = stats.fit_mixedlm(formula, df, groups="story_id", re_formula="~rel_pos")
    ref = smf.mixedlm(formula, df, groups=df["story_id"], re_formula="~rel_pos").fit(
        reml=True, method=res.method, maxiter=200)
    np.testing.assert_allclose(res.coefs.estimate.to_numpy(), ref.fe_params.to_numpy(), rtol=1e-6)
    slope = res.coefs.set_index("term").estimate
    inter = [t for t in slope.index if t.startswith("rel_pos:")][0]
    assert slope[inter] == pytest.approx(-0.8, abs=0.25)
    assert res.n_groups == 25 and res.n_obs == len(df)
    assert isinstance(res.warnings, list)


def test_bootstrap_leaves_out_resamples_whose_statistic_is_undefined():
    # the statistic is undefined on resamples holding a single class (as an AUROC is)
    rows = np.array([[0, 0.1], [0, 0.2], [1, 0.8], [1, 0.9], [0, 0.3], [1, 0.7]])

    def gap(r):
        pos, neg = r[r[:, 0] == 1, 1], r[r[:, 0] == 0, 1]
        return pos.mean() - neg.mean() if len(pos) and len(neg) else np.nan

    lo, hi = stats.bootstrap_ci(rows, gap, n_boot=400, seed=1)
    assert np.isfinite(lo) and np.isfinite(hi) and 0 < lo <= hi


def test_bootstrap_vectorized_equals_per_resample_and_all_nan_gives_nan():
    rows = np.column_stack([U, P])
    loop = stats.bootstrap_ci(rows, lambda r: r[:, 0].mean() - r[:, 1].mean(), n_boot=300,
                              seed=4)
    vec = stats.bootstrap_ci(rows, lambda b: b[:, :, 0].mean(axis=1) - b[:, :, 1].mean(axis=1),
                             n_boot=300, seed=4, vectorized=True)
    assert vec == pytest.approx(loop)
    with warnings.catch_warnings():
        warnings.simplefilter("error")                   # no All-NaN warning either
        lo, hi = stats.bootstrap_ci(U, lambda r: np.nan, n_boot=50)
    assert np.isnan(lo) and np.isnan(hi)


def test_cluster_bootstrap_with_one_unit_per_cluster_is_the_plain_bootstrap():
    labels = np.arange(U.size)[::-1] * 10                # any labels, one per unit
    plain = stats.bootstrap_ci(U, np.median, n_boot=400, seed=9)
    assert stats.cluster_bootstrap_ci(U, labels, np.median, n_boot=400, seed=9) == plain
    # the default (the mean, from per-cluster sums) draws the same resamples
    assert stats.cluster_bootstrap_ci(U, labels, n_boot=400, seed=9) == \
        pytest.approx(stats.bootstrap_ci(U, np.mean, n_boot=400, seed=9))


def test_cluster_bootstrap_of_perfectly_correlated_clusters_is_wider():
    # every unit of a cluster carries its cluster's value: resampling clusters is resampling
    # the 40 cluster values, and treating the 400 units as independent understates the spread
    units, labels = np.repeat(U, 10), np.repeat(np.arange(U.size), 10)
    lo, hi = stats.cluster_bootstrap_ci(units, labels, n_boot=500, seed=2)
    assert (lo, hi) == pytest.approx(stats.bootstrap_ci(U, np.mean, n_boot=500, seed=2))
    tlo, thi = stats.bootstrap_ci(units, np.mean, n_boot=500, seed=2)
    assert hi - lo > 2.5 * (thi - tlo)                  # ≈ sqrt(10) wider
    assert lo < units.mean() < hi


def test_cluster_bootstrap_pools_units_seeded_and_weighted_form_agrees():
    # the ratio estimator: drawing clusters {0, 1} pools 4 units, mean (1+1+1+4)/4 = 1.75 (a
    # mean of cluster means would give 2.5); {0,0} → 1, {1,1} → 4; the middle 50 % is 1.75
    vals, cl = np.array([1.0, 1.0, 1.0, 4.0]), np.array(["a", "a", "a", "b"])
    assert stats.cluster_bootstrap_ci(vals, cl, n_boot=2000, level=0.2) == (1.75, 1.75)
    assert stats.cluster_bootstrap_ci(vals, cl, np.mean, n_boot=2000, level=0.2) == (1.75, 1.75)
    rng = np.random.default_rng(0)
    x = np.repeat(rng.normal(size=30), 4) + rng.normal(0, 0.2, 120)
    labels = np.repeat(np.arange(30), 4)
    a = stats.cluster_bootstrap_ci(x, labels, n_boot=300, seed=5)
    assert a == stats.cluster_bootstrap_ci(x, labels, n_boot=300, seed=5)
    assert a != stats.cluster_bootstrap_ci(x, labels, n_boot=300, seed=6)
    rows = np.column_stack([x, np.arange(120) % 2])
    gap = stats.cluster_bootstrap_ci(rows, labels, lambda r: r[r[:, 1] == 1, 0].mean()
                                     - r[r[:, 1] == 0, 0].mean(), n_boot=300, seed=5)
    weighted = stats.cluster_bootstrap_ci(
        rows, labels, lambda d, w: (w @ (d[:, 0] * d[:, 1])) / (w @ d[:, 1])
        - (w @ (d[:, 0] * (1 - d[:, 1]))) / (w @ (1 - d[:, 1])), weighted=True, n_boot=300,
        seed=5)
    assert weighted == pytest.approx(gap)


def test_cluster_bootstrap_nan_policy_and_errors():
    # a statistic undefined on some resamples (one class only): those are left out
    rows = np.array([[0, 0.1], [0, 0.2], [1, 0.8], [1, 0.9]])
    labels = np.array([0, 0, 1, 1])                      # each cluster holds one class

    def gap(r):
        pos, neg = r[r[:, 0] == 1, 1], r[r[:, 0] == 0, 1]
        return pos.mean() - neg.mean() if len(pos) and len(neg) else np.nan

    assert stats.cluster_bootstrap_ci(rows, labels, gap, n_boot=200) == pytest.approx((0.7, 0.7))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert np.isnan(stats.cluster_bootstrap_ci(rows, np.zeros(4), gap)[0])  # one cluster
        assert np.isnan(stats.cluster_bootstrap_ci(np.array([np.nan, 1.0]), [0, 1])[1])
    with pytest.raises(ValueError, match="clusters"):
        stats.cluster_bootstrap_ci(U, np.arange(U.size - 1))
    with pytest.raises(ValueError, match="1-D"):
        stats.cluster_bootstrap_ci(rows, labels)         # the default mean needs 1-D data
    with pytest.raises(ValueError, match="n_boot"):
        stats.cluster_bootstrap_ci(U, np.arange(U.size), n_boot=0)
def test_cluster_bootstrap_is_wider_than_token_bootstrap_for_clustered_data():
    rng = np.random.default_rng(0)
    caption_effect = rng.normal(0, 1, 50)
    values = np.repeat(caption_effect, 10) + rng.normal(0, 0.1, 500)
    clusters = np.repeat(np.arange(50), 10)
    lo, hi = stats.cluster_bootstrap_ci(values, clusters, n_boot=500, seed=1)
    tlo, thi = stats.bootstrap_ci(values, np.mean, n_boot=500, seed=1)
    assert lo < values.mean() < hi
    assert (hi - lo) > 2 * (thi - tlo)      # ignoring the clusters understates the spread
    assert stats.cluster_bootstrap_ci(values, clusters, n_boot=200, seed=2) == \
        stats.cluster_bootstrap_ci(values, clusters, n_boot=200, seed=2)
    with pytest.raises(ValueError, match="clusters"):
        stats.cluster_bootstrap_ci(values, clusters[:-1])


