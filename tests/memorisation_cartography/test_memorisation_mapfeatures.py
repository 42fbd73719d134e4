"""Map agreement, feature–feature ρ and features by region: known answers on planted data."""

import numpy as np
import pandas as pd
import pytest
from scipy.stats import spearmanr

from tokenbook.memorisation_cartography.mapfeatures import (feature_by_region,
                                                            feature_feature_correlations,
                                                            map_agreement, region_feature_summary)


def _map(n=200, seed=0):
    rng = np.random.default_rng(seed)
    tm, gs = rng.uniform(size=n), rng.uniform(size=n)
    return pd.DataFrame({"pair_id": np.arange(n), "tm": tm, "gs": gs, "cm": tm - gs})


def test_identical_maps_give_rho_one():
    m = _map()
    out = map_agreement(m, m.copy(), n_boot=200).set_index("metric")
    assert list(out.index) == ["tm", "gs", "cm"]
    np.testing.assert_allclose(out["rho"], 1.0)
    np.testing.assert_allclose(out[["ci_low", "ci_high"]].to_numpy(), 1.0)
    assert (out["n"] == 200).all()


def test_reversed_cm_gives_minus_one_and_shuffle_is_matched_by_pair_id():
    m = _map()
    b = m.copy()
    b["cm"] = -b["cm"]
    b = b.sample(frac=1.0, random_state=3).reset_index(drop=True)
    out = map_agreement(m, b, n_boot=100).set_index("metric")
    assert out.loc["cm", "rho"] == pytest.approx(-1.0)
    assert out.loc["tm", "rho"] == pytest.approx(1.0)
    assert out.loc["gs", "rho"] == pytest.approx(1.0)


def test_agreement_uses_shared_pairs_is_seeded_and_matches_scipy():
    a, b = _map(seed=1), _map(seed=2)
    b["tm"] = a["tm"] + np.random.default_rng(5).normal(0, 0.3, len(a))
    b = b.iloc[50:]
    out = map_agreement(a, b, metrics=["tm"], n_boot=300, seed=4)
    again = map_agreement(a, b, metrics=["tm"], n_boot=300, seed=4)
    pd.testing.assert_frame_equal(out, again)
    assert out.loc[0, "n"] == 150
    want = spearmanr(a["tm"].iloc[50:], b["tm"]).statistic
    assert out.loc[0, "rho"] == pytest.approx(want)
    assert out.loc[0, "ci_low"] < want < out.loc[0, "ci_high"]
    assert np.isnan(map_agreement(a, b, n_boot=0)["ci_low"]).all()


def test_agreement_errors():
    m = _map()
    with pytest.raises(ValueError, match="missing column"):
        map_agreement(m.drop(columns="gs"), m)
    with pytest.raises(ValueError, match="more than once"):
        map_agreement(m, pd.concat([m, m.iloc[:1]]))
    other = m.assign(pair_id=m["pair_id"] + 10_000)
    with pytest.raises(ValueError, match="share no pair_id"):
        map_agreement(m, other)
    with pytest.raises(ValueError, match="n_boot"):
        map_agreement(m, m, n_boot=-1)


def test_feature_feature_matrix():
    rng = np.random.default_rng(0)
    d = pd.DataFrame({"a": rng.normal(size=100), "c": np.ones(100)})
    d["b"] = d["a"] ** 3 + rng.normal(0, 0.5, 100)
    rho = feature_feature_correlations(d, ["a", "b", "c"])
    assert list(rho.index) == list(rho.columns) == ["a", "b", "c"]
    sub = rho.loc[["a", "b"], ["a", "b"]].to_numpy()
    np.testing.assert_allclose(sub, sub.T)
    np.testing.assert_allclose(np.diag(sub), 1.0)
    assert rho.loc["a", "b"] == pytest.approx(spearmanr(d["a"], d["b"]).statistic)
    assert rho.loc["c"].isna().all() and rho["c"].isna().all()
    with pytest.raises(ValueError, match="missing column"):
        feature_feature_correlations(d, ["a", "zzz"])
    with pytest.raises(ValueError, match="empty"):
        feature_feature_correlations(d, [])


def test_features_by_region_planted_and_null():
    rng = np.random.default_rng(0)
    regions = np.repeat(["memorised", "generalised", "unlearnt"], 100)
    shift = pd.Series(regions).map({"memorised": 3.0, "generalised": 0.0, "unlearnt": -3.0})
    d = pd.DataFrame({"region": regions,
                      "planted": shift.to_numpy() + rng.normal(size=300),
                      "null": rng.normal(size=300),
                      "const": np.zeros(300)})
    long = feature_by_region(d, ["planted", "null"])
    assert list(long.columns) == ["region", "feature", "value"]
    assert len(long) == 600
    summ = region_feature_summary(d, ["planted", "null", "const"])
    assert len(summ) == 9
    planted = summ[summ["feature"] == "planted"].set_index("region")
    assert planted["q"].iloc[0] < 1e-10
    assert planted.loc["memorised", "median"] > planted.loc["unlearnt", "median"]
    null = summ[summ["feature"] == "null"]
    assert null["p"].iloc[0] > 0.01 and null["q"].iloc[0] >= null["p"].iloc[0]
    assert summ.loc[summ["feature"] == "const", ["H", "p", "q"]].isna().all().all()
    with pytest.raises(ValueError, match="at least 2 regions"):
        region_feature_summary(d.assign(region="x"), ["planted"])
    with pytest.raises(ValueError, match="missing column"):
        feature_by_region(d, ["planted"], region_col="area")
