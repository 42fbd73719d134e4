"""The chapter's experiments: controls remove their mechanism, statistics have known answers,
a claim is detected on planted data and not on its control, and boot_seed trains nothing."""

import numpy as np
import pandas as pd
import pytest

from tokenbook.memorisation_cartography import experiments as E
from tokenbook.memorisation_cartography.estimator import (counterfactual_memorisation,
                                                          phenomenon_auroc)
from tokenbook.verdicts import Expect, judge


def _scores(seed: int, *, n_pairs=200, n_models=8, boost=None, noise=0.05):
    """A synthetic score matrix: base probability per pair, + ``boost[i]`` when trained on."""
    rng = np.random.default_rng(seed)
    base = rng.uniform(0.2, 0.8, n_pairs)
    boost = np.zeros(n_pairs) if boost is None else np.asarray(boost)
    masks = np.zeros((n_models, n_pairs), bool)
    for i in range(n_pairs):
        masks[rng.permutation(n_models)[: n_models // 2], i] = True
    rows = []
    for m in range(n_models):
        s = np.clip(base + boost * masks[m] + rng.normal(0, noise, n_pairs), 0.001, 0.999)
        rows.append(pd.DataFrame({"model": m, "pair_id": np.arange(n_pairs), "score": s,
                                  "in_train": masks[m]}))
    return pd.concat(rows, ignore_index=True)


def test_spearman_brown_known_answer():
    assert E.spearman_brown(0.5, 2) == pytest.approx(2 / 3)
    assert E.spearman_brown(0.33, 2) == pytest.approx(0.4962, abs=1e-3)
    assert E.spearman_brown(0.0, 4) == 0.0


def test_split_half_reliability_separates_signal_from_noise():
    rng = np.random.default_rng(0)
    strong = _scores(0, boost=rng.uniform(0, 0.5, 200))
    flat = _scores(1)
    hi, lo = E.split_half_reliability(strong), E.split_half_reliability(flat)
    assert hi["reliability"] > 0.8 and hi["reliability"] > hi["rho_half"]
    assert abs(lo["reliability"]) < 0.3
    with pytest.raises(ValueError, match="at least 4 models"):
        E.split_half_reliability(_scores(0, n_models=2))


def test_split_half_loops_are_one():
    """split_half_reliability, cm_stability's split-half rows and reliability_curve's largest
    half use the same split (estimator.split_half_spearman), so they agree."""
    from scipy.stats import spearmanr

    from tokenbook.memorisation_cartography.estimator import cm_stability, pivot_scores, tm_gs

    sc = _scores(3, n_models=9, boost=np.random.default_rng(1).uniform(0, 0.3, 200))
    halves = cm_stability(sc, fractions=(), repeats=6, seed=4)
    assert list(halves["fraction"]) == ["split-half"] * 6 and (halves["n_models"] == 4).all()
    got = E.split_half_reliability(sc, repeats=6, seed=4)
    assert got["rho_half"] == pytest.approx(halves["spearman"].mean())
    assert got["n_models"] == 9
    # by hand: the first repeat's two halves are the seeded permutation's first 4 and next 4
    _, _, S, mask = pivot_scores(sc)
    perm = np.random.default_rng(4).permutation(9)
    cms = [np.subtract(*tm_gs(S[h], mask[h])[:2]) for h in (perm[:4], perm[4:8])]
    ok = np.isfinite(cms[0]) & np.isfinite(cms[1])
    assert halves["spearman"].iloc[0] == pytest.approx(spearmanr(cms[0][ok], cms[1][ok])[0])
    curve = E.reliability_curve(sc, repeats=2, seed=4)
    assert curve.loc[curve["half_size"] == 2, "rho"].iloc[0] == pytest.approx(
        spearmanr(*(np.subtract(*tm_gs(S[h], mask[h])[:2]) for h in (perm[:2], perm[2:4])),
                  nan_policy="omit")[0])


def test_random_masks_control_removes_memorisation():
    """Fails if the null kept the models' real membership: CM would stay high."""
    rng = np.random.default_rng(0)
    sc = _scores(2, boost=rng.uniform(0.1, 0.5, 200))
    real = counterfactual_memorisation(sc)["cm"].mean()
    null = E.random_masks_null(sc, seed=3)
    assert (null.groupby("model")["in_train"].sum().to_numpy()
            == sc.groupby("model")["in_train"].sum().to_numpy()).all()   # same subset sizes
    cm_null = counterfactual_memorisation(null)["cm"]
    assert real > 0.2 and abs(cm_null.mean()) < 0.05
    assert E.split_half_reliability(null, seed=1)["reliability"] < 0.3


def test_permuted_label_null_is_centred_on_chance():
    """Fails if the null kept the planted rows as positives (AUROC would stay near 1)."""
    rng = np.random.default_rng(0)
    t = pd.DataFrame({"phenomenon": ["idiom"] * 20 + ["regular"] * 200,
                      "cm": np.r_[rng.uniform(0.5, 1, 20), rng.uniform(0, 0.5, 200)]})
    assert phenomenon_auroc(t, "idiom", n_boot=50)["auroc"] == 1.0
    aucs = []
    for s in range(20):
        n = E.permuted_label_null(t, "idiom", seed=s)
        assert "idiom" not in set(n["phenomenon"]) and (n["phenomenon"] == "_null_positive").sum() == 20
        aucs.append(phenomenon_auroc(n, "_null_positive", n_boot=10)["auroc"])
    assert abs(np.mean(aucs) - 0.5) < 0.06
    with pytest.raises(ValueError, match="positive rows"):
        E.permuted_label_null(t, "noisy_copy")


def test_permute_columns_breaks_the_association():
    rng = np.random.default_rng(0)
    x = rng.normal(size=500)
    f = pd.DataFrame({"x": x, "cm": x + rng.normal(0, 0.1, 500), "tm": x})
    p = E.permute_columns(f, ["cm", "tm"], seed=1)
    assert sorted(p["cm"]) == sorted(f["cm"]) and (p["x"] == f["x"]).all()
    assert np.allclose(p["cm"] - p["tm"], (f["cm"] - f["tm"]).to_numpy()[
        np.random.default_rng(1).permutation(500)])      # the columns move together
    assert abs(np.corrcoef(p["x"], p["cm"])[0, 1]) < 0.15 < np.corrcoef(f["x"], f["cm"])[0, 1]


def test_predictors_linear_baseline_and_best_estimator():
    rng = np.random.default_rng(0)
    n = 300
    X = rng.normal(size=(n, 3))
    d = pd.DataFrame(X, columns=["a", "b", "c"]).assign(pair_id=np.arange(n))
    d["tm"], d["gs"] = X[:, 0] + 0.1 * rng.normal(size=n), X[:, 1]
    d["cm"] = 2 * X[:, 0] - X[:, 2] + 0.1 * rng.normal(size=n)     # linear: OLS is near perfect
    sc = E.predictor_scores(d, ["a", "b", "c"], seeds=[0, 1])
    assert set(sc["estimator"]) == {"mlp", "linear"} and len(sc) == 2 * 2 * 3
    lin = sc[(sc.estimator == "linear") & (sc.target == "cm")]["pearson_r"]
    assert (lin > 0.98).all()
    est, r = E.best_estimator(sc)
    assert r == pytest.approx(sc[sc.target == "cm"].groupby("estimator")["pearson_r"].mean().max())
    null = E.predictor_scores(E.permute_columns(d, ["tm", "gs", "cm"], seed=0), ["a", "b", "c"],
                              seeds=[0, 1])
    assert E.best_estimator(null)[1] < 0.3


def test_removal_control_reads_the_regular_test_part():
    rm = pd.DataFrame({"condition": ["memorised", "random"], "test_logprob": [-2.0, -1.5],
                       "bleu": [20.0, 30.0], "test_logprob_regular": [-1.4, -1.5],
                       "bleu_regular": [31.0, 30.0]})
    on = E.removal_effects(rm, on=True, has_idioms=True)
    off = E.removal_effects(rm, on=False, has_idioms=True)
    assert on == {"removal-memorised-logprob": -0.5, "removal-memorised-bleu": -10.0}
    assert off["removal-memorised-logprob"] == pytest.approx(0.1)
    assert off["removal-memorised-bleu"] == pytest.approx(1.0)
    with pytest.raises(ValueError, match="conditions"):
        E.removal_effects(rm.iloc[:1], on=True, has_idioms=True)


@pytest.mark.slow
def test_idiom_claim_detected_on_planted_and_not_on_the_control():
    """The idiom claim's statistic over 5 seeds: planted idioms gain when trained on, the
    literal-idiom control does not; the verdict is 'detected', and on the control it fails."""
    on, off = [], []
    for s in range(5):
        kinds = np.array(["regular"] * 160 + ["idiom"] * 20 + ["idiom_literal"] * 20)
        boost = np.where(kinds == "idiom", 0.4, 0.05)
        cm = counterfactual_memorisation(_scores(s, boost=boost)).assign(phenomenon=kinds)
        on.append(phenomenon_auroc(cm, "idiom", n_boot=200, seed=s)["ci_low"])
        off.append(phenomenon_auroc(cm, "idiom_literal", n_boot=200, seed=s)["ci_low"])
    r = judge(Expect.greater(0.5), on, off)
    assert r["verdict"] == "detected" and r["share_off"] == 0.0


def test_region_examples_and_reliability_curve():
    sc = _scores(0, boost=np.random.default_rng(0).uniform(0, 0.4, 200))
    curve = E.reliability_curve(sc, repeats=3, seed=0)
    assert set(curve["half_size"]) == {2, 3, 4}
    assert (curve["projected"].dropna() >= curve["rho"].dropna() - 1e-12).all()
    cm = counterfactual_memorisation(sc).assign(source="a b c d", target="x y",
                                                region=lambda t: np.where(t.cm > 0.2, "memorised",
                                                                          "in-between"))
    ex = E.region_examples(cm, per_region=2)
    assert len(ex) == 4
    mem = ex[ex.region == "memorised"]
    assert mem["cm"].min() >= cm[cm.region == "memorised"]["cm"].nlargest(2).min()


SMALL_WORLD = dict(n_pairs=80, n_test=20)
SMALL_DESIGN = dict(n_models=4, epochs=1, dynamics_epochs=2, removal_epochs=1, vocab_size=150,
                    batch_size=32)


@pytest.mark.slow
def test_boot_seed_trains_nothing(tmp_path, monkeypatch):
    import tokenbook.memorisation_cartography.ensemble as ensemble
    import tokenbook.memorisation_cartography.removal as removal
    import tokenbook.memorisation_cartography.signals as signals
    import tokenbook.models.marian as marian

    monkeypatch.setenv("TOKENBOOK_CACHE", str(tmp_path))
    calls = []
    real = marian.train_marian
    for user in (ensemble, signals, removal):   # every module that trains a Marian model
        monkeypatch.setattr(user, "train_marian",
                            lambda *a, **k: (calls.append(1), real(*a, **k))[1])

    def statistics(out):                    # the claims' values, not their checks' rows
        return {k for k in out if ":" not in k}

    a = E.seed_claims(0, "on", design=SMALL_DESIGN, world=SMALL_WORLD, boot_seed=0, n_splits=2)
    assert len(calls) == 4 + 1 + 2          # ensemble, dynamics run, two removal retrainings
    assert statistics(a) == set(E.CLAIM_IDS)
    assert {"manipulation:idiom-high-cm", "known:rare-high-cm", "balance:cm-stable"} <= set(a)
    calls.clear()
    b = E.seed_claims(0, "off", design=SMALL_DESIGN, world=SMALL_WORLD, boot_seed=1, n_splits=2,
                      rare_null="shuffle")
    assert calls == []                       # another analysis seed and the controls: no training
    assert statistics(b) == set(E.CLAIM_IDS)
    # the rare-but-derivable off world has its own ensemble (trained once), nothing else
    c = E.seed_claims(0, "off", design=SMALL_DESIGN, world=SMALL_WORLD, boot_seed=1, n_splits=2,
                      rare_null="world")
    assert len(calls) == 4
    calls.clear()
    E.seed_claims(0, "off", design=SMALL_DESIGN, world=SMALL_WORLD, boot_seed=2, n_splits=2)
    assert calls == []
    assert statistics(c) == set(E.CLAIM_IDS)
    assert c["manipulation:rare-high-cm"] < a["manipulation:rare-high-cm"]


# ---------------------------------------------------------------- subset assignment (#14 item 3)
def test_duplicate_leakage_known_answer():
    # pairs 0 and 1 are copies (group 7); pair 2 has none. Four models.
    masks = np.array([[1, 0, 1],     # holds out 1 while its twin 0 trains: leaky for 1
                      [0, 1, 0],     # holds out 0 while 1 trains: leaky for 0
                      [0, 0, 1],     # holds out both copies: clean
                      [1, 1, 0]], dtype=bool)
    leak = E.duplicate_leakage(masks, [7, 7, 3])
    np.testing.assert_allclose(leak, [1 / 2, 1 / 2, 0.0])
    grouped = E.subset_masks(40, 8, design="balanced", groups=np.repeat(np.arange(20), 2), seed=0)
    assert np.all(E.duplicate_leakage(grouped, np.repeat(np.arange(20), 2)) == 0)
    line = E.subset_masks(40, 8, design="balanced", seed=0)
    assert np.nanmean(E.duplicate_leakage(line, np.repeat(np.arange(20), 2))) > 0.2
    with pytest.raises(ValueError, match="n_pairs"):
        E.duplicate_leakage(masks, [1, 2])


def test_cm_by_assignment_means_and_intervals():
    rng = np.random.default_rng(0)
    grouped = pd.DataFrame({"cm": np.r_[rng.normal(0.5, 0.05, 20), rng.normal(0.1, 0.05, 50)],
                            "phenomenon": ["duplicate"] * 20 + ["regular"] * 50})
    line = grouped.assign(cm=np.r_[rng.normal(0.0, 0.05, 20), rng.normal(0.1, 0.05, 50)],
                          leakage=np.r_[np.full(20, 0.5), np.zeros(50)])
    t = E.cm_by_assignment({"grouped": grouped, "line": line}, n_boot=500, seed=1)
    assert list(t.columns) == ["assignment", "phenomenon", "n", "mean_cm", "ci_low", "ci_high",
                               "leakage"]
    dup = t[t.phenomenon == "duplicate"].set_index("assignment")
    assert dup.loc["grouped", "ci_low"] > dup.loc["line", "ci_high"]   # the planted reversal
    assert (t.ci_low <= t.mean_cm).all() and (t.mean_cm <= t.ci_high).all()
    assert dup.loc["line", "leakage"] == 0.5 and np.isnan(dup.loc["grouped", "leakage"])
    again = E.cm_by_assignment({"grouped": grouped, "line": line}, n_boot=500, seed=1)
    pd.testing.assert_frame_equal(t, again)                                # seeded
    with pytest.raises(ValueError, match="phenomenon"):
        E.cm_by_assignment({"x": grouped.drop(columns="phenomenon")})


def test_design_assignment_is_validated_and_keeps_old_workspaces():
    with pytest.raises(ValueError, match="assignment"):
        E.Design(assignment="lines")
    corpus = E.make_corpus(0, world=dict(n_pairs=60, n_test=10))
    grouped, _ = E.prepare(0, corpus, E.Design(n_models=2))
    line, _ = E.prepare(0, corpus, E.Design(n_models=2, assignment="line"))
    assert grouped.ws.root != line.ws.root
    import json
    manifest = json.loads((grouped.ws.root / "manifest.json").read_text())
    assert "assignment" not in manifest["design"]          # the key of workspaces made before
    assert json.loads((line.ws.root / "manifest.json").read_text())["design"]["assignment"] == "line"
    dup = corpus.pairs["group_id"].duplicated(keep=False).to_numpy()
    assert dup.any()
    assert (E.duplicate_leakage(grouped.ws.masks(), corpus.pairs["group_id"])[dup] == 0).all()
