"""The CM estimator on planted score matrices where TM, GS and CM are known."""

import numpy as np
import pandas as pd
import pytest

from sklearn.metrics import roc_auc_score

from tokenbook.memorisation_cartography.estimator import (binary_auroc, cm_stability,
                                                          counterfactual_memorisation,
                                                          geometric_mean_probability, map_regions,
                                                          subset_masks)


def _planted(n_models=16, n_pairs=400, noise=0.01, seed=0, design="random"):
    rng = np.random.default_rng(seed)
    mask = subset_masks(n_pairs, n_models, design=design, seed=seed)
    gs_true = rng.uniform(0.1, 0.6, n_pairs)
    cm_true = rng.uniform(0.0, 0.35, n_pairs)
    S = gs_true + cm_true * mask + rng.normal(0, noise, (n_models, n_pairs))
    m, p = np.meshgrid(np.arange(n_models), np.arange(n_pairs), indexing="ij")
    scores = pd.DataFrame({"model": m.ravel(), "pair_id": p.ravel(), "score": S.ravel(),
                           "in_train": mask.ravel()})
    return scores, gs_true, cm_true, mask


def test_cm_recovers_planted_values():
    scores, gs_true, cm_true, _ = _planted()
    cm = counterfactual_memorisation(scores)
    assert np.allclose(cm["cm"], cm_true, atol=0.03)
    assert np.allclose(cm["gs"], gs_true, atol=0.03)
    assert np.allclose(cm["tm"], gs_true + cm_true, atol=0.03)
    # standard errors match the planted noise: SE ≈ 0.01 / sqrt(n)
    expected = 0.01 * np.sqrt(1 / cm["n_in"] + 1 / cm["n_out"])
    assert np.median(cm["cm_se"] / expected) == pytest.approx(1.0, abs=0.15)
    # CM is TM − GS exactly, and the sign is kept (not clipped)
    assert np.allclose(cm["cm"], cm["tm"] - cm["gs"])


def test_cm_ranks_and_sign_with_negative_cm():
    scores, _, _, mask = _planted(noise=0.0)
    scores.loc[scores.pair_id == 3, "score"] = np.where(scores.loc[scores.pair_id == 3, "in_train"],
                                                        0.2, 0.5)
    cm = counterfactual_memorisation(scores).set_index("pair_id")
    assert cm.loc[3, "cm"] == pytest.approx(-0.3)
    assert cm.loc[3, "cm_se"] == pytest.approx(0.0)


def test_subset_masks_designs_and_groups():
    m = subset_masks(101, 10, design="balanced", seed=1)
    assert (m.sum(0) == 5).all()
    r = subset_masks(100, 10, design="random", seed=1)
    assert (r.sum(1) == 50).all()
    assert not (r == subset_masks(100, 10, design="random", seed=2)).all()
    groups = np.repeat(np.arange(50), 2)
    g = subset_masks(100, 8, groups=groups, seed=0)
    assert (g[:, 0::2] == g[:, 1::2]).all()  # duplicates in or out together
    with pytest.raises(ValueError, match="even"):
        subset_masks(10, 5, design="balanced")


def test_stability_high_for_signal_low_for_noise():
    scores, *_ = _planted(noise=0.01)
    st = cm_stability(scores, repeats=3)
    assert st.groupby("fraction")["spearman"].mean().loc["0.75"] > 0.95
    noise, *_ = _planted(noise=0.2)
    noise["score"] = np.random.default_rng(5).normal(size=len(noise))  # CM is pure noise
    st2 = cm_stability(noise, repeats=3)
    sh = st2[st2.fraction == "split-half"]["spearman"].mean()
    assert abs(sh) < 0.2
    # more models → closer to the full-ensemble estimate
    means = st2[st2.fraction != "split-half"].groupby("fraction")["spearman"].mean()
    assert means.loc["0.25"] < means.loc["0.75"]


def test_geometric_mean_probability_eos_handling():
    tt = pd.DataFrame({"seq_id": [0, 0, 0, 1, 1], "token_id": [5, 6, 1, 7, 1],
                       "logprob": np.log([0.5, 0.25, 1.0, 0.1, 0.9])})
    g = geometric_mean_probability(tt, 3)
    assert g.loc[0, "gmp"] == pytest.approx((0.5 * 0.25 * 1.0) ** (1 / 3))
    assert g.loc[0, "n_tokens"] == 3 and np.isnan(g.loc[2, "gmp"])
    g2 = geometric_mean_probability(tt, 2, include_eos=False, eos_token_id=1)
    assert g2.loc[0, "gmp"] == pytest.approx((0.5 * 0.25) ** 0.5)
    assert g2.loc[1, "gmp"] == pytest.approx(0.1)


def test_bad_score_matrix_rejected():
    scores, *_ = _planted(n_models=4, n_pairs=10)
    with pytest.raises(ValueError, match="lacks columns"):
        counterfactual_memorisation(scores.drop(columns="in_train"))
    with pytest.raises(ValueError, match="incomplete"):
        counterfactual_memorisation(scores.iloc[1:])


def test_map_regions():
    t = pd.DataFrame({"tm": [0.9, 0.9, 0.1, 0.5], "gs": [0.2, 0.85, 0.05, 0.45]})
    t["cm"] = t.tm - t.gs
    assert map_regions(t).tolist() == ["memorised", "generalised", "unlearnt", "in-between"]


@pytest.mark.parametrize("scores", ["continuous", "few levels", "rounded normal", "near ties"])
def test_binary_auroc_equals_scikit_learn_bit_for_bit(scores):
    """The lean AUROC of the bootstraps is scikit-learn's, to the last bit, on scores with many
    ties (a wrong tie rule, a missed collinear point or another summation order would differ)."""
    rng = np.random.default_rng(len(scores))
    compared = 0
    for _ in range(400):
        n = int(rng.integers(2, 300))
        y = rng.random(n) < rng.uniform(0.05, 0.95)
        if y.all() or not y.any():
            continue
        s = {"continuous": lambda: rng.random(n),
             "few levels": lambda: rng.integers(0, int(rng.integers(1, 12)), n).astype(float),
             "rounded normal": lambda: np.round(rng.normal(size=n) + y, 1),
             "near ties": lambda: 1e-12 * rng.integers(0, 3, n) + y * rng.random()}[scores]()
        assert binary_auroc(y, s) == roc_auc_score(y.astype(float), s)
        compared += 1
    assert compared > 300


def test_binary_auroc_extremes_and_an_empty_class():
    y = np.array([1, 1, 0, 0, 0], bool)
    assert binary_auroc(y, np.array([5, 4, 3, 2, 1.0])) == 1.0
    assert binary_auroc(y, np.array([1, 2, 3, 4, 5.0])) == 0.0
    assert binary_auroc(y, np.ones(5)) == 0.5                     # one tie: one half
    # positives 2 and 1 against negatives 1, 0, 1: 4 of the 6 pairs won, 2 tied
    assert binary_auroc(y, np.array([2, 1, 1, 0, 1.0])) == pytest.approx(5 / 6)
    assert np.isnan(binary_auroc(np.ones(3, bool), np.arange(3.0)))
    assert np.isnan(binary_auroc(np.zeros(3), np.arange(3.0)))
