# ---
# jupyter:
#   jupytext:
#     formats: py:percent
#     text_representation:
#       extension: .py
#       format_name: percent
#       format_version: '1.3'
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # Exercises: memorisation cartography
#
# Companion to the chapter {doc}`../memorisation_cartography`. In the book each exercise's
# solution sits behind a toggle; in the student edition (`make student`, see {doc}`/book/course`)
# it is a stub for you to fill in. Each exercise ends with a check from
# `tokenbook.memorisation_cartography.exercises` that compares your answer with the library on
# seeded inputs.
#
# **Learning objectives.** After these exercises you can
# 1. estimate training memorisation (TM), the generalisation score (GS) and counterfactual
#    memorisation CM = TM − GS from an ensemble's score matrix and inclusion mask;
# 2. give CM a standard error and say how many models a stable map needs;
# 3. compute the per-token geometric-mean probability the scores are made of;
# 4. compute an AUROC by hand (ties count ½) and use it to test whether a phenomenon is
#    memorised;
# 5. switch memorisation off and predict the verdict of the chapter's phenomenon claims.
#
# **Prerequisites.** NumPy broadcasting and boolean masks; log-probabilities; the idea of a
# held-out estimate; ROC curves. Read the chapter's introduction and its section on the
# estimator first.
#
# **Time.** The chapter at tiny scale: {{ cost_memorisation_cartography }}; this page:
# {{ exercise_cost_memorisation_cartography }} on a CPU (measured: {{ costs_measured }};
# `book/costs.yml`). The page uses a seeded toy ensemble instead of trained models. Working time:
# about 60–80 minutes (our estimate: 10–20 minutes an exercise).
#
# **Paper scale.** 40 Transformer-base models on random halves of the training data: ≈ 649
# GPU-hours at 10¹⁴ FLOP/s sustained, training only (the chapter prints the estimate), on a Dask
# cluster of GPU workers (`-f params/memorisation_cartography/paper.yaml`).

# %%
import numpy as np
import pandas as pd

from tokenbook.memorisation_cartography import estimator
from tokenbook.memorisation_cartography import exercises as ex

scores, pairs = ex.memorisation_world(seed=0)
models, pair_ids, S, mask = estimator.pivot_scores(scores)
print(f"S: {S.shape} (models × pairs); every pair is in the training half of "
      f"{sorted(set(mask.sum(0)))} models")
pairs["phenomenon"].value_counts()

# %% [markdown]
# `S[m, i]` is model $m$'s score on pair $i$ (its per-token geometric-mean probability of the
# reference translation, in [0, 1]); `mask[m, i]` is True when model $m$ trained on pair $i$.

# %% [markdown]
# ## Exercise 1 — the CM estimator *(introductory, ~10 min)*
#
# Implement `cm_estimator(S, mask)` returning `(tm, gs, cm)`, three arrays of length n_pairs:
# TM = mean score of the models that trained on the pair, GS = mean score of the models that did
# not, CM = TM − GS. No loops needed.

# %% tags=["solution", "hide-cell"]
# Hint: (S * mask).sum(0) / mask.sum(0) is the mean over the models that trained on each pair;
# ~mask selects the others.
def cm_estimator(S, mask):
    """(tm, gs, cm) per pair from S and mask [n_models, n_pairs]."""
    tm = (S * mask).sum(0) / mask.sum(0)
    gs = (S * ~mask).sum(0) / (~mask).sum(0)
    return tm, gs, tm - gs


# %%
ex.check_cm_estimator(cm_estimator)

# %% [markdown]
# ## Exercise 2 — how sure is each CM? *(intermediate, ~15 min)*
#
# The two means use disjoint sets of models, so they are independent. Implement
# `cm_standard_error(S, mask)`: the standard error of each mean (sample SD over its models,
# divided by √n) combined in quadrature. Then: how does the median standard error change if the
# ensemble had 4 times as many models?

# %% tags=["solution", "hide-cell"]
# Hint: for each selection sel in (mask, ~mask): n = sel.sum(0), the mean as in Exercise 1,
# ss = ((S - mean)**2 * sel).sum(0), se = sqrt(ss / (n - 1) / n); then np.hypot.
def cm_standard_error(S, mask):
    """Standard error of CM per pair (same unit as S)."""
    ses = []
    for sel in (mask, ~mask):
        n = sel.sum(0)
        mean = (S * sel).sum(0) / n
        ss = (((S - mean) ** 2) * sel).sum(0)
        ses.append(np.sqrt(ss / (n - 1) / n))
    return np.hypot(*ses)


print(f"median SE of CM with {S.shape[0]} models: {np.median(cm_standard_error(S, mask)):.4f}")

# %%
ex.check_cm_standard_error(cm_standard_error)

# %% [markdown]
# ## Exercise 3 — the score of one pair *(introductory, ~10 min)*
#
# A model's score on a pair is the per-token geometric-mean probability of the reference
# target, end-of-sentence token included: $\mathrm{gmp} = \exp\big(\frac1T\sum_t \log
# p(y_t\mid y_{<t}, x)\big)$. Implement `geometric_mean_probability(logprobs)` for one target
# whose token log-probabilities (nats, EOS last) are given. Why per token rather than the
# probability of the whole sequence?

# %% tags=["solution", "hide-cell"]
# Hint: the mean of the log-probabilities, exponentiated.
def geometric_mean_probability(logprobs):
    """exp(mean log p) over all target tokens including EOS, in [0, 1]."""
    return float(np.exp(np.mean(np.asarray(logprobs, dtype=float))))


# %%
ex.check_geometric_mean_probability(geometric_mean_probability)

# %% [markdown]
# ## Exercise 4 — AUROC by hand *(intermediate, ~15 min)*
#
# The chapter asks whether CM separates a phenomenon's pairs (here the `noisy` ones) from
# regular pairs with the AUROC: the probability that a random positive has a higher value than
# a random negative, ties counting ½. Implement `auroc(positive, negative)` with broadcasting
# (no scikit-learn) and compute it for CM of noisy vs regular pairs.

# %% tags=["solution", "hide-cell"]
# Hint: compare every positive with every negative: pos[:, None] > neg[None, :] (and ==).
def auroc(positive, negative):
    """P(positive > negative) + ½ P(tie) over all pairs (dimensionless)."""
    pos = np.asarray(positive, dtype=float)[:, None]
    neg = np.asarray(negative, dtype=float)[None, :]
    return float(np.mean(pos > neg) + 0.5 * np.mean(pos == neg))


cm = pd.DataFrame({"pair_id": pair_ids, "cm": cm_estimator(S, mask)[2]}).merge(pairs)
print("AUROC of CM, noisy vs regular:",
      round(auroc(cm.loc[cm.phenomenon == "noisy", "cm"], cm.loc[cm.phenomenon == "regular", "cm"]), 3))

# %%
ex.check_auroc(auroc)

# %% [markdown]
# ## Exercise 5 — switch memorisation off *(advanced, ~20 min)*
#
# `ex.memorisation_world(seed=0, memorisation=False)` keeps everything — the same models,
# subsets, pair difficulty and noise — but training on a pair no longer helps a model on it.
# **Predict first**: does the claim "noisy pairs have higher CM than regular pairs" hold — tested
# as the lower end of the 95% bootstrap CI of the AUROC being above 0.5
# (`estimator.phenomenon_auroc(table, "noisy", n_boot=100, seed=0)` on a table with columns
# `cm` and `phenomenon`) — with memorisation, and without it? Would the claim "noisy pairs are
# hard" (low GS) still hold without it? Store
# `answer_5 = {"with_memorisation": …, "without_memorisation": …}`.

# %% tags=["solution", "hide-cell"]
# Hint: counterfactual_memorisation(scores) gives a cm column per pair_id; merge it with pairs
# and pass the result to phenomenon_auroc; compare ci_low with 0.5.
def noisy_claim_holds(memorisation):
    """True if the AUROC of CM (noisy vs regular) has its 95% CI above 0.5."""
    sc, pr = ex.memorisation_world(seed=0, memorisation=memorisation)
    table = estimator.counterfactual_memorisation(sc).merge(pr, on="pair_id")
    res = estimator.phenomenon_auroc(table, "noisy", n_boot=100, seed=0)
    return bool(res["ci_low"] > 0.5)


answer_5 = {"with_memorisation": noisy_claim_holds(True),
            "without_memorisation": noisy_claim_holds(False)}
answer_5

# %%
ex.check_memorisation_verdicts(answer_5)

# %% [markdown]
# *Discussion.* Without memorisation CM is noise around 0 for every pair, so the AUROC falls to
# chance while GS still marks the noisy pairs as hard: the map's *vertical* axis (CM) needs the
# mechanism, its *horizontal* one (GS) does not. Which of the chapter's claims rely on CM, and
# which on TM or GS alone?
