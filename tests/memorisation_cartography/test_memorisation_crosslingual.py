"""Cross-language correlations and predictor transfer: known answers on planted maps."""

import numpy as np
import pandas as pd
import pytest

from tokenbook.memorisation_cartography.crosslingual import (cross_language_correlations,
                                                             cross_lingual_transfer)


def _map(rng, n=400, ids=None):
    ids = np.arange(n) if ids is None else np.asarray(ids)
    return pd.DataFrame({"pair_id": ids, "tm": rng.random(len(ids)), "gs": rng.random(len(ids)),
                         "cm": rng.random(len(ids))})


# -- cross_language_correlations -------------------------------------------------------------

def test_identical_reversed_and_independent_maps():
    rng = np.random.default_rng(0)
    de = _map(rng)
    same = de.sample(frac=1.0, random_state=1)          # same values, rows shuffled
    rev = de.assign(tm=1 - de.tm, gs=-de.gs, cm=5 - 2 * de.cm)
    ind = _map(np.random.default_rng(9))
    out = cross_language_correlations({"de": de, "nl": same, "fr": rev, "es": ind}, n_boot=300)
    assert list(out.columns) == ["lang_a", "lang_b", "metric", "rho", "ci_low", "ci_high", "n"]
    assert len(out) == 6 * 3                            # C(4, 2) language pairs × 3 metrics
    assert list(out.lang_a.drop_duplicates()) == ["de", "nl", "fr"]
    cell = out.set_index(["lang_a", "lang_b", "metric"])
    for m in ("tm", "gs", "cm"):
        assert cell.loc[("de", "nl", m), "rho"] == pytest.approx(1.0)
        assert cell.loc[("de", "nl", m), ["ci_low", "ci_high"]].tolist() == pytest.approx([1, 1])
        assert cell.loc[("de", "fr", m), "rho"] == pytest.approx(-1.0)
        assert cell.loc[("nl", "fr", m), "ci_high"] == pytest.approx(-1.0)
        lo, hi = cell.loc[("de", "es", m), ["ci_low", "ci_high"]]
        assert lo < 0 < hi and hi - lo < 0.3
    assert (out.n == 400).all()


@pytest.mark.slow
def test_planted_correlation_is_recovered_with_its_interval():
    """Bivariate normal with Pearson 0.6: Spearman ρ = (6/π) arcsin(0.3) ≈ 0.582."""
    rng = np.random.default_rng(3)
    z = rng.multivariate_normal([0, 0], [[1, 0.6], [0.6, 1]], size=3000)
    a = pd.DataFrame({"pair_id": np.arange(3000), "cm": z[:, 0]})
    b = pd.DataFrame({"pair_id": np.arange(3000), "cm": z[:, 1]})
    out = cross_language_correlations({"a": a, "b": b}, metrics=("cm",), n_boot=500, seed=2)
    truth = 6 / np.pi * np.arcsin(0.3)
    row = out.iloc[0]
    assert row.rho == pytest.approx(truth, abs=0.03)
    assert row.ci_low < truth < row.ci_high
    assert 0.02 < row.ci_high - row.ci_low < 0.1      # ≈ 4 × SE ≈ 4 × 0.012
    again = cross_language_correlations({"a": a, "b": b}, metrics="cm", n_boot=500, seed=2)
    pd.testing.assert_frame_equal(out, again)         # seeded
    other = cross_language_correlations({"a": a, "b": b}, metrics="cm", n_boot=500, seed=3)
    assert other.ci_low.iloc[0] != row.ci_low


def test_interval_is_the_stats_bootstrap_of_spearman_with_ties():
    """The vectorised ρ of the resamples is scipy's Spearman (ties: mid-ranks), resampled by
    tokenbook.stats.bootstrap_ci: same seed, same interval as the per-resample statistic."""
    from scipy.stats import spearmanr

    from tokenbook.stats import bootstrap_ci

    rng = np.random.default_rng(4)
    x = rng.integers(0, 6, 150).astype(float)           # many ties
    y = x + rng.integers(0, 4, 150)
    a = pd.DataFrame({"pair_id": np.arange(150), "tm": x})
    b = pd.DataFrame({"pair_id": np.arange(150), "tm": y})
    row = cross_language_correlations({"a": a, "b": b}, metrics="tm", n_boot=300,
                                      seed=7).iloc[0]
    lo, hi = bootstrap_ci(np.column_stack([x, y]),
                          lambda r: spearmanr(r[:, 0], r[:, 1]).statistic, n_boot=300, seed=7)
    assert (row.ci_low, row.ci_high) == pytest.approx((lo, hi))
    assert row.rho == pytest.approx(spearmanr(x, y).statistic)


def test_only_shared_and_complete_pairs_are_used():
    rng = np.random.default_rng(1)
    de = _map(rng, ids=range(0, 300))
    nl = de[de.pair_id >= 100].copy()                 # shares pairs 100..299
    nl.loc[nl.index[0], "gs"] = np.nan
    nl = pd.concat([nl, _map(rng, ids=range(300, 350))])   # and some of its own
    out = cross_language_correlations({"de": de, "nl": nl}, n_boot=0).set_index("metric")
    assert out.loc["tm", "n"] == 200 and out.loc["gs", "n"] == 199
    assert out.loc["tm", "rho"] == pytest.approx(1.0)
    assert out[["ci_low", "ci_high"]].isna().all().all()     # n_boot=0: no interval
    const = de.assign(cm=0.5)
    out = cross_language_correlations({"de": de, "c": const}, n_boot=50).set_index("metric")
    assert np.isnan(out.loc["cm", "rho"]) and np.isnan(out.loc["cm", "ci_low"])


def test_correlation_errors():
    rng = np.random.default_rng(0)
    de = _map(rng, ids=range(0, 50))
    with pytest.raises(ValueError, match="share no pair_id"):
        cross_language_correlations({"de": de, "nl": _map(rng, ids=range(50, 100))})
    with pytest.raises(ValueError, match=r"maps\['nl'\] lacks column\(s\) \['cm'\]"):
        cross_language_correlations({"de": de, "nl": de.drop(columns="cm")})
    with pytest.raises(ValueError, match="at least 2"):
        cross_language_correlations({"de": de})
    with pytest.raises(ValueError, match="more than once"):
        cross_language_correlations({"de": de, "nl": pd.concat([de, de.head(1)])})
    with pytest.raises(ValueError, match="n_boot"):
        cross_language_correlations({"de": de, "nl": de}, n_boot=-1)


# -- cross_lingual_transfer ------------------------------------------------------------------

INPUTS = ["x1", "x2", "x3"]


def _lang(seed, fn, n=300):
    rng = np.random.default_rng(seed)
    X = rng.uniform(-1, 1, size=(n, 3))
    d = pd.DataFrame(X, columns=INPUTS)
    d["cm"] = fn(X)
    return d


def _smooth(X):
    return 0.5 + 0.3 * np.tanh(2 * X[:, 0]) + 0.2 * X[:, 1]


def test_transfer_same_function_everywhere_and_one_language_different():
    data = {"de": _lang(0, _smooth, 600), "nl": _lang(1, _smooth, 600),
            "fr": _lang(2, lambda X: 1 - _smooth(X), 600)}     # fr: the function reversed
    out = cross_lingual_transfer(data, INPUTS, seed=0)
    assert list(out.columns) == ["train", "test", "target", "pearson_r", "mae", "n"]
    assert len(out) == 9 and (out.target == "cm").all()
    cell = out.set_index(["train", "test"])
    for lang in data:                                     # held-out 30 %: fitted well
        assert cell.loc[(lang, lang), "pearson_r"] > 0.9
        assert cell.loc[(lang, lang), "n"] == 180
    assert cell.loc[("de", "nl"), "pearson_r"] > 0.9     # same function: transfers
    assert cell.loc[("nl", "de"), "pearson_r"] > 0.9
    assert cell.loc[("de", "nl"), "n"] == 600
    for a in ("de", "nl"):                                # the odd language's cells drop
        assert cell.loc[(a, "fr"), "pearson_r"] < 0
        assert cell.loc[("fr", a), "pearson_r"] < 0
        assert cell.loc[(a, "fr"), "mae"] > 3 * cell.loc[(a, "nl" if a == "de" else "de"), "mae"]


def test_linear_baseline_on_a_linear_truth_is_near_perfect():
    def lin(X):
        return 0.2 + 0.1 * X[:, 0] - 0.05 * X[:, 1] + 0.02 * X[:, 2]

    data = {"de": _lang(0, lin, 100), "nl": _lang(1, lin, 80)}
    data["nl"]["tm"] = 1 - data["nl"]["cm"]
    data["de"]["tm"] = 1 - data["de"]["cm"]
    data["nl"].loc[0, "x1"] = np.nan                   # incomplete rows are dropped
    out = cross_lingual_transfer(data, INPUTS, target=("tm", "cm"), estimator="linear")
    assert len(out) == 2 * 2 * 2 and list(out.target[:2]) == ["tm", "cm"]
    assert (out.pearson_r > 0.9999).all() and (out.mae < 1e-9).all()
    assert out.set_index(["train", "test"]).loc[("de", "nl"), "n"].tolist() == [79, 79]
    again = cross_lingual_transfer(data, INPUTS, target=("tm", "cm"), estimator="linear")
    pd.testing.assert_frame_equal(out, again)


def test_transfer_errors():
    data = {"de": _lang(0, _smooth, 40), "nl": _lang(1, _smooth, 40)}
    with pytest.raises(ValueError, match="estimator"):
        cross_lingual_transfer(data, INPUTS, estimator="forest")
    with pytest.raises(ValueError, match=r"data\['nl'\] lacks column\(s\) \['x3'\]"):
        cross_lingual_transfer({**data, "nl": data["nl"].drop(columns="x3")}, INPUTS)
    with pytest.raises(ValueError, match="lacks"):
        cross_lingual_transfer(data, INPUTS, target="gs")
    with pytest.raises(ValueError, match="at least 2"):
        cross_lingual_transfer({"de": data["de"]}, INPUTS)
    with pytest.raises(ValueError, match="test_size"):
        cross_lingual_transfer(data, INPUTS, test_size=1.0)
