"""Coupling buckets with uncertainty (issue #15 item 5): bucket labels, the prompt-clustered
bootstrap on planted data (a negative bucket's CI lies below zero; clustering widens a CI that
pairs alone would call significant) and the anti-coupling row (a real coupling table:
tests/cancellation_hypothesis/test_rl_dynamics.py)."""

import numpy as np
import pandas as pd
import pytest

from tokenbook import stats
from tokenbook.cancellation_hypothesis.coupling import (ANTI_COUPLING_BUCKET, BUCKET_ORDER,
                                                        cluster_bootstrap_mean,
                                                        coupling_bucket_cis,
                                                        coupling_bucket_table, pair_buckets)


def test_pair_buckets_labels():
    got = pair_buckets([True, False, False, True], [0.1, 0.9, 0.9, 0.6], [0.2, 0.2, 0.95, 0.4],
                       confidence=0.5)
    assert got.tolist() == ["same token, both low", "different token, one low",
                            "different token, both high", "same token, one low"]
    with pytest.raises(ValueError, match="probabilities"):
        pair_buckets([True], [1.5], [0.2])
    with pytest.raises(ValueError, match="shape"):
        pair_buckets([True, False], [0.1], [0.2])


def test_cluster_bootstrap_planted():
    rng = np.random.default_rng(0)
    # a planted negative effect over 12 clusters: the CI lies below zero
    x = -1.0 + 0.3 * rng.standard_normal(12 * 30)
    mean, lo, hi = cluster_bootstrap_mean(x, np.repeat(np.arange(12), 30), n_boot=500, seed=1)
    assert mean == pytest.approx(x.mean()) and lo < mean < hi < 0
    # cluster effects ± around a small mean: pairs alone look significant, clusters do not
    means = np.array([1.5, -1.0, 0.8, -0.6, 1.2, -0.9, 0.4, -0.2])
    x = np.repeat(means, 200) + 0.01 * rng.standard_normal(1600)
    cl = np.repeat(np.arange(8), 200)
    _, lo_p, hi_p = cluster_bootstrap_mean(x, None, n_boot=500, seed=1)
    _, lo_c, hi_c = cluster_bootstrap_mean(x, cl, n_boot=500, seed=1)
    assert lo_p > 0                               # naive: excludes zero
    assert lo_c < 0 < hi_c                        # clustered: does not
    # the ratio estimator: unequal cluster sizes weigh pairs, not clusters
    m, _, _ = cluster_bootstrap_mean(np.array([1.0, 1.0, 1.0, 4.0]), np.array([0, 0, 0, 1]))
    assert m == pytest.approx(1.75)
    assert cluster_bootstrap_mean(x, cl, seed=5) == cluster_bootstrap_mean(x, cl, seed=5)
    # a thin wrapper of the library's one cluster bootstrap
    assert cluster_bootstrap_mean(x, cl, n_boot=300, seed=5)[1:] == \
        stats.cluster_bootstrap_ci(x, cl, n_boot=300, seed=5)
    assert np.isnan(cluster_bootstrap_mean(x, np.zeros(1600))[1])   # one cluster: no CI
    with pytest.raises(ValueError, match="one label per value"):
        cluster_bootstrap_mean(x, cl[:10])


def _planted(n_prompts=10, per=40, seed=0):
    rng = np.random.default_rng(seed)
    rows = []
    for p in range(n_prompts):
        for _ in range(per):   # identical low-confidence tokens: K > 0
            rows.append(dict(prompt_id=p, same_token=True, p_j=0.2, p_k=0.3,
                             phi=0.5, K=5 + rng.normal()))
        for _ in range(per):   # different low-confidence tokens: planted K < 0
            rows.append(dict(prompt_id=p, same_token=False, p_j=0.1, p_k=0.4,
                             phi=-0.1, K=-3 + 0.5 * rng.normal()))
        for _ in range(per):   # confident different tokens: K = ±0.01 by prompt, mean 0
            rows.append(dict(prompt_id=p, same_token=False, p_j=0.9, p_k=0.95,
                             phi=0.0, K=0.01 * (-1) ** p))
    return pd.DataFrame(rows)


def test_bucket_cis_show_the_planted_anti_coupling():
    cis = coupling_bucket_cis(_planted(), n_boot=500, seed=0)
    assert set(cis["bucket"]) == set(BUCKET_ORDER) and len(cis) == 4 * len(BUCKET_ORDER)
    anti = cis[cis["bucket"] == ANTI_COUPLING_BUCKET].set_index("statistic")
    assert cis.loc[cis["anti_coupling"], "bucket"].unique().tolist() == [ANTI_COUPLING_BUCKET]
    assert anti.loc["K", "hi"] < 0 and anti.loc["K", "excludes_null"]
    assert anti.loc["abs_K", "mean"] == pytest.approx(3.0, abs=0.1)   # absolute hides the sign
    assert anti.loc["anti", "mean"] == pytest.approx(1.0) and anti.loc["anti", "excludes_null"]
    assert anti.loc["K", "n_pairs"] == 400 and anti.loc["K", "n_clusters"] == 10
    same = cis[cis["bucket"] == "same token, both low"].set_index("statistic")
    assert same.loc["K", "lo"] > 0 and same.loc["anti", "mean"] == 0
    conf = cis[cis["bucket"] == "different token, both high"].set_index("statistic")
    assert conf.loc["K", "lo"] < 0 < conf.loc["K", "hi"] and not conf.loc["K", "excludes_null"]
    empty = cis[cis["bucket"] == "same token, one low"]
    assert (empty["n_pairs"] == 0).all() and empty["mean"].isna().all()
    wide = coupling_bucket_table(cis)
    assert list(wide.index) == list(BUCKET_ORDER)
    assert wide.loc[ANTI_COUPLING_BUCKET, "K_hi"] < 0
    assert cis.equals(coupling_bucket_cis(_planted(), n_boot=500, seed=0))      # seeded
    with pytest.raises(ValueError, match="prompt_id"):
        coupling_bucket_cis(_planted().drop(columns="prompt_id"))
