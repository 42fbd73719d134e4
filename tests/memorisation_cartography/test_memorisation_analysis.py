"""Training signals, surface features, the MLP predictor and the removal selection."""

import numpy as np
import pandas as pd
import pytest

from tokenbook.memorisation_cartography.estimator import phenomenon_auroc
from tokenbook.memorisation_cartography.features import FEATURES, surface_features
from tokenbook.memorisation_cartography.predict import feature_correlations, fit_map_predictor
from tokenbook.memorisation_cartography.removal import (compare_to_control, hallucination_rate,
                                                        perturb_sources, region_centres,
                                                        select_random, select_region)
from tokenbook.memorisation_cartography.signals import compute_signals


def test_signals_on_hand_computed_curves():
    curves = {0: [0.1, 0.5, 0.3, 0.9], 1: [0.2, 0.2, 0.2, 0.2]}
    dyn = pd.DataFrame([(e + 1, pid, p) for pid, c in curves.items() for e, p in enumerate(c)],
                       columns=["epoch", "pair_id", "score"])
    dyn = pd.concat([dyn, pd.DataFrame({"epoch": [-1, -1], "pair_id": [0, 1],
                                        "score": [0.7, 0.1]})])
    s = compute_signals(dyn).set_index("pair_id")
    assert s.loc[0, "confidence"] == pytest.approx(0.45)
    assert s.loc[0, "variability"] == pytest.approx(np.std([0.1, 0.5, 0.3, 0.9]))
    assert s.loc[0, "forgetting"] == pytest.approx(0.2)
    assert s.loc[0, "forgetting_events"] == 1
    assert s.loc[0, "final_minus_mean"] == pytest.approx(0.45)
    assert s.loc[0, "ll_final"] == pytest.approx(0.9)
    assert s.loc[0, "ll_mid"] == pytest.approx(0.5)  # epoch 2 of 4
    assert s.loc[0, "hyp_ll_final"] == pytest.approx(0.7)
    assert s.loc[1, "variability"] == 0 and s.loc[1, "forgetting"] == 0


def test_surface_features_properties():
    src = ["ka mu lo", "ka mu lo", "pi ta", "zz yy xx ww"]
    tgt = ["il un", "il un", "pi ta", "qo"]
    f = surface_features(src, tgt)
    assert list(f.columns) == FEATURES
    assert f.loc[2, "overlap"] == 1.0 and f.loc[2, "char_similarity"] == 1.0  # a copy
    assert f.loc[0, "overlap"] == 0.0
    assert f.loc[0, "pair_repeats"] == 2 and f.loc[2, "pair_repeats"] == 1
    assert f.loc[3, "length_difference"] == -3 and f.loc[3, "length_ratio"] == 0.25
    assert f.loc[3, "src_rare_words"] == 4 and f.loc[0, "src_min_log_freq"] == pytest.approx(
        np.log10(2))
    with pytest.raises(ValueError, match="empty side"):
        surface_features(["a", " "], ["b", "c"])


def test_predictor_finds_the_informative_feature():
    rng = np.random.default_rng(0)
    n = 600
    d = pd.DataFrame({"pair_id": np.arange(n), "x_signal": rng.uniform(0, 1, n),
                      "x_noise": rng.uniform(0, 1, n)})
    d["tm"] = 0.3 + 0.5 * d.x_signal + rng.normal(0, 0.02, n)
    d["gs"] = 0.3 + rng.normal(0, 0.02, n)
    d["cm"] = d.tm - d.gs
    p = fit_map_predictor(d, ["x_signal", "x_noise"], seed=0)
    m = p.metrics.set_index("target")
    assert m.loc["cm", "pearson_r"] > 0.9 and m.loc["tm", "pearson_r"] > 0.9
    assert abs(m.loc["gs", "pearson_r"]) < 0.5  # nothing predicts GS here
    assert m.loc["cm", "mae"] < 0.05 and m.loc["cm", "n_test"] == 180
    imp = p.importance.set_index("feature")["importance_mean"]
    assert imp["x_signal"] > 10 * max(imp["x_noise"], 1e-4)
    corr = feature_correlations(d, ["x_signal", "x_noise"])
    assert corr.loc["x_signal", "cm"] > 0.9


def test_auroc_with_bootstrap():
    t = pd.DataFrame({"phenomenon": ["idiom"] * 20 + ["regular"] * 80,
                      "cm": np.r_[np.linspace(0.5, 0.9, 20), np.linspace(0, 0.4, 80)]})
    a = phenomenon_auroc(t, "idiom", n_boot=200)
    assert a["auroc"] == 1.0 and a["ci_low"] > 0.9 and a["n_pos"] == 20
    t["cm"] = -t["cm"]
    assert phenomenon_auroc(t, "idiom", n_boot=50)["auroc"] == 0.0
    assert np.isnan(phenomenon_auroc(t, "noisy_copy", n_boot=10)["auroc"])


def test_region_removal_respects_budget_groups_and_distance():
    n = 200
    rng = np.random.default_rng(1)
    cm = pd.DataFrame({"pair_id": np.arange(n), "tm": rng.uniform(0, 1, n),
                       "gs": rng.uniform(0, 1, n)})
    sources = [" ".join(["w"] * (1 + i % 5)) for i in range(n)]
    groups = np.arange(n)
    groups[1] = groups[0]  # pairs 0 and 1 are copies
    cm.loc[0, ["tm", "gs"]] = [0.95, 0.05]  # the pair nearest the target point
    removed = select_region(cm, sources, coordinate=(0.95, 0.05), token_budget=40, groups=groups)
    assert 0 in removed and 1 in removed  # the copy goes with it
    tokens = sum(len(sources[i].split()) for i in removed)
    assert 40 <= tokens < 40 + 10
    dist = np.hypot(cm.tm - 0.95, cm.gs - 0.05)
    assert dist[removed].mean() < dist.mean() / 3
    rnd = select_random(n, sources, token_budget=40, groups=groups, seed=0)
    assert 40 <= sum(len(sources[i].split()) for i in rnd) < 50
    assert dist[rnd].mean() > dist[removed].mean()
    with pytest.raises(ValueError, match="not below"):
        select_random(n, sources, token_budget=10**6)


def test_hallucination_probe_and_control_comparison():
    refs = ["a b c d e", "f g h i j", "k l m n o"]
    clean = ["a b c d e", "f g h i j", "x y z"]           # third is not adequate: ignored
    pert = ["a b c d e", "q r s t u", "k l m n o"]        # second changed completely
    rate, n = hallucination_rate(refs, clean, pert)
    assert n == 2 and rate == 0.5
    assert perturb_sources(["a b"], seed=0, vocabulary=["z"]) == ["z a b"]
    res = pd.DataFrame({"condition": ["random", "random", "memorised", "memorised"],
                        "seed": [0, 1, 0, 1], "bleu": [50, 52, 45, 49],
                        "test_logprob": [-1, -1, -1.2, -1.1], "hallucination_rate": [0, 0, .1, .1]})
    c = compare_to_control(res).set_index(["condition", "metric"])
    assert c.loc[("memorised", "bleu"), "diff_vs_control"] == pytest.approx(-4)
    assert c.loc[("random", "bleu"), "diff_vs_control"] == 0
    # diffs -5 and -3: mean -4, SD sqrt(2), two standard errors above the mean = -4 + 2
    assert c.loc[("memorised", "bleu"), "diff_upper"] == pytest.approx(-2)
    one_seed = compare_to_control(res[res["seed"] == 0]).set_index(["condition", "metric"])
    assert np.isnan(one_seed.loc[("memorised", "bleu"), "diff_upper"])


def test_region_centres_average_the_extreme_pairs():
    rng = np.random.default_rng(0)
    tm, gs = rng.uniform(size=200), rng.uniform(size=200)
    cm = pd.DataFrame(dict(pair_id=np.arange(200), tm=tm, gs=gs, cm=tm - gs))
    cm.loc[7, "gs"] = np.nan                       # ignored, not propagated
    c = region_centres(cm, share=0.05)
    valid = cm.dropna()
    top = valid.nlargest(9, "cm")                   # 5% of 199 -> 9 pairs
    assert c["memorised"] == pytest.approx((top.tm.mean(), top.gs.mean()))
    assert c["memorised"][0] > 0.8 and c["memorised"][1] < 0.2      # high TM, low GS
    assert c["generalised"][1] > 0.9 and c["unlearnt"][0] < 0.1
    assert all(np.isfinite(v).all() for v in c.values())
    with pytest.raises(ValueError, match="lacks column"):
        region_centres(cm.drop(columns="cm"))
    with pytest.raises(ValueError, match="share"):
        region_centres(cm, share=0)


def test_surface_features_rarity_from_the_reference_frequency_list():
    """With a language, rarity and frequency come from wordfreq (as the authors), not from the
    corpus: a word repeated in the corpus is still rare if the language rarely uses it, and a
    common word seen once is not rare."""
    from wordfreq import zipf_frequency

    src = ["the house is red"] + ["the serendipitous axolotl"] * 3
    tgt = ["het huis is rood"] + ["de kabouter"] * 3
    ref = surface_features(src, tgt, src_lang="en", tgt_lang="nl")
    own = surface_features(src, tgt)  # the corpus-internal fallback
    assert zipf_frequency("axolotl", "en") < 3.0 and zipf_frequency("house", "en") > 3.0
    assert ref.loc[1, "src_rare_words"] == 2  # serendipitous, axolotl: rare in English
    assert own.loc[1, "src_rare_words"] == 0  # but each occurs 3 times in this corpus
    assert ref.loc[0, "src_rare_words"] == 0 and own.loc[0, "src_rare_words"] == 3
    assert ref.loc[0, "src_min_log_freq"] == pytest.approx(
        min(zipf_frequency(w, "en") for w in ["the", "house", "is", "red"]))
    assert ref.loc[0, "trg_mean_log_freq"] == pytest.approx(
        np.mean([zipf_frequency(w, "nl") for w in ["het", "huis", "is", "rood"]]))
    strict = surface_features(src, tgt, src_lang="en", tgt_lang="nl", rare_zipf=6.0)
    assert strict.loc[0, "src_rare_words"] == 2  # house (Zipf 5.7) and red (5.3) below 6
    with pytest.raises(ValueError, match="wordfreq has no frequency list for language 'xx'"):
        surface_features(src, tgt, src_lang="xx")
