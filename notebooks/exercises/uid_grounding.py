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
# # Exercises: uniform information density under grounding
#
# Companion to the chapter {doc}`../uid_grounding`. In the book each exercise's solution sits
# behind a toggle; in the student edition (`make student`, see {doc}`/book/course`) it is a stub
# for you to fill in. Every exercise ends with a check from `tokenbook.uid_grounding.exercises`
# that compares your answer with the library on seeded inputs and says what is off.
#
# **Learning objectives.** After these exercises you can
# 1. compute the global and local UID measures of a surprisal profile and say why the paper
#    divides the local one by $N-1$;
# 2. explain why a proportional drop of all surprisals lowers $\mathrm{UID}_v$ but not the
#    coefficients of variation, and test it with a paired Wilcoxon test;
# 3. implement Benjamini–Hochberg and read q-values;
# 4. compute the onset enrichment of surprisal reductions and predict how it behaves when the
#    onset mechanism is switched off.
#
# **Prerequisites.** NumPy and pandas; surprisal $-\log p$ (nats); the paired Wilcoxon test and
# the idea of a false discovery rate. Read the chapter's introduction and its "UID measures"
# section first.
#
# **Time.** The chapter at tiny scale: {{ cost_uid_grounding }}; this page:
# {{ exercise_cost_uid_grounding }} on a CPU (measured: {{ costs_measured }}; `book/costs.yml`).
# The page needs no model: every exercise builds its own seeded data. Working time: about 60–80
# minutes (our estimate: 10–20 minutes an exercise).
#
# **Paper scale.** The same measures applied to Crossmodal-3600 (30 languages) scored with
# PaliGemma-3B and the authors' text-only LM need one GPU and the gated checkpoints
# (`tokenbook run uid_grounding -f params/uid_grounding/paper.yaml`); the exercises below do not.

# %%
import numpy as np
import pandas as pd

from tokenbook import stats
from tokenbook.uid_grounding import exercises as ex
from tokenbook.uid_grounding import measures as uid

# %% [markdown]
# ## Exercise 1 — the two UID measures *(introductory, ~10 min)*
#
# For word surprisals $s_1,\dots,s_N$ with mean $\bar s$, implement
# $\mathrm{UID}_v = \frac1N\sum_n (s_n-\bar s)^2$ and
# $\mathrm{UID}_{lv} = \frac1{N-1}\sum_{n\ge2}(s_n-s_{n-1})^2$ as `uid_v(s)` and `uid_lv(s)`
# (nats²). Then think: for a caption of two words, how do the two measures relate?

# %% tags=["solution", "hide-cell"]
# Hint: np.var divides by N; the local measure is the mean of the squared
# first differences (np.diff), of which there are N - 1.
def uid_v(s):
    """Global variance of a surprisal profile s (1-D, nats) -> nats²."""
    s = np.asarray(s, dtype=float)
    return float(np.mean((s - s.mean()) ** 2))


def uid_lv(s):
    """Local variance: mean squared difference of consecutive surprisals (nats²)."""
    s = np.asarray(s, dtype=float)
    return float(np.mean(np.diff(s) ** 2))


# %%
ex.check_uid_measures(uid_v, uid_lv)

# %% [markdown]
# ## Exercise 2 — the trivial explanation *(intermediate, ~15 min)*
#
# Suppose the image does nothing but lower every word's surprisal by the same factor,
# $s_P = 0.7\,s_U$. **Predict first**: which of `uid_v`, `uid_lv`, `cv_global`, `cv_local` come
# out significantly lower under P (paired Wilcoxon over captions, $p<0.05$, median difference
# below 0)? Then check your prediction on `ex.scaled_captions(seed=0, factor=0.7)` (columns
# `unit_id, pos, s_U, s_P`), using `uid.profile_measures` per caption and
# `stats.paired_wilcoxon(P, U)`. Store the verdicts in `answer_2` (measure → bool).
# Which claim of the chapter would such a world support, and which not?

# %% tags=["solution", "hide-cell"]
# Hint: group the table by unit_id, compute uid.profile_measures(g["s_U"]) and of g["s_P"],
# then for each measure test P against U with stats.paired_wilcoxon.
captions = ex.scaled_captions(seed=0, factor=0.7)
per_caption = {"U": [], "P": []}
for _, g in captions.groupby("unit_id"):
    per_caption["U"].append(uid.profile_measures(g["s_U"].to_numpy()))
    per_caption["P"].append(uid.profile_measures(g["s_P"].to_numpy()))
answer_2 = {}
for m in ("uid_v", "uid_lv", "cv_global", "cv_local"):
    p = np.array([d[m] for d in per_caption["P"]])
    u = np.array([d[m] for d in per_caption["U"]])
    answer_2[m] = bool(stats.paired_wilcoxon(p, u).pvalue < 0.05 and np.median(p - u) < 0)
answer_2

# %%
ex.check_scaling_verdicts(answer_2, factor=0.7)

# %% [markdown]
# *Discussion.* Scaling by $c$ multiplies the variances by $c^2$ but leaves $\mathrm{sd}/\bar s$
# unchanged: only a flattening *beyond* the proportional drop moves the CVs. Try
# `ex.scaled_captions(seed=0, factor=0.7, flatten=0.3)` and
# `ex.check_scaling_verdicts(your_answer, factor=0.7, flatten=0.3)`.

# %% [markdown]
# ## Exercise 3 — Benjamini–Hochberg *(intermediate, ~15 min)*
#
# The chapter tests every language separately and corrects the p-values with
# Benjamini–Hochberg. Implement `benjamini_hochberg(pvals)`: sort the $m$ p-values, form
# $m\,p_{(i)}/i$, take the running minimum from the largest downwards, cap at 1, and return the
# q-values **in the input order**.

# %% tags=["solution", "hide-cell"]
# Hint: np.argsort gives the order; np.minimum.accumulate on the reversed array gives the
# running minimum; put the q-values back with q[order] = ...
def benjamini_hochberg(pvals):
    """BH-adjusted p-values (q-values), same order as pvals."""
    p = np.asarray(pvals, dtype=float)
    m = p.size
    order = np.argsort(p, kind="mergesort")
    ranked = p[order] * m / np.arange(1, m + 1)
    q_sorted = np.minimum(np.minimum.accumulate(ranked[::-1])[::-1], 1.0)
    q = np.empty(m)
    q[order] = q_sorted
    return q


# %%
ex.check_benjamini_hochberg(benjamini_hochberg)

# %% [markdown]
# ## Exercise 4 — onset enrichment *(intermediate, ~15 min)*
#
# The chapter asks whether the image's help arrives where new information enters: at the onset
# of a unit. With positive-part reductions $\delta_n = \max(0, s_{U,n}-s_{P,n})$ and normalised
# positions $x_n\in[0,1)$, the onset enrichment is
#
# $$ E = \frac{\sum_{x_n<0.2}\delta_n \,/\, \sum_n \delta_n}{\text{share of words with } x_n<0.2}. $$
#
# Implement `onset_enrichment(position, s_u, s_p, onset=0.2)`. $E>1$: reductions concentrate at
# the onset beyond what the number of words there gives.

# %% tags=["solution", "hide-cell"]
# Hint: delta = np.clip(s_u - s_p, 0, None); the numerator is the share of delta's mass at
# position < onset, the denominator the share of words there.
def onset_enrichment(position, s_u, s_p, onset=0.2):
    """Onset enrichment E of the positive-part reductions (dimensionless)."""
    position = np.asarray(position, dtype=float)
    delta = np.clip(np.asarray(s_u, dtype=float) - np.asarray(s_p, dtype=float), 0.0, None)
    at = position < onset
    return float((delta[at].sum() / delta.sum()) / at.mean())


# %%
ex.check_onset_enrichment(onset_enrichment)

# %% [markdown]
# ## Exercise 5 — switch the onset mechanism off *(advanced, ~20 min)*
#
# `ex.onset_world(seed=0, onset_effect=True)` builds captions whose image helps most on the
# first words; with `onset_effect=False` every word gets the same expected reduction (the
# average word still gains). **Predict** for both worlds whether the claim "reductions
# concentrate at unit onsets" holds when it is tested as the lower end of a 95% bootstrap CI
# of $E$ being above 1 (words resampled, `stats.bootstrap_ci(..., n_boot=300, seed=0)` on the
# rows `position, s_U, s_P`). Then compute it and store `answer_5 = {"with_onset": …,
# "without_onset": …}`. Why is $E$ not exactly 1 without the mechanism?

# %% tags=["solution", "hide-cell"]
# Hint: bootstrap_ci resamples the rows of a 2-D array; give it np.column_stack of the three
# columns and a statistic that calls your onset_enrichment on the resampled rows.
def onset_claim_holds(table):
    """True if the bootstrap 95% CI of E lies above 1."""
    rows = np.column_stack([table["position"], table["s_U"], table["s_P"]])
    low, _ = stats.bootstrap_ci(rows, lambda r: onset_enrichment(r[:, 0], r[:, 1], r[:, 2]),
                                n_boot=300, seed=0)
    return bool(low > 1.0)


answer_5 = {"with_onset": onset_claim_holds(ex.onset_world(seed=0, onset_effect=True)),
            "without_onset": onset_claim_holds(ex.onset_world(seed=0, onset_effect=False))}
answer_5

# %%
ex.check_onset_verdicts(answer_5)

# %% [markdown]
# *Discussion.* Without the mechanism $E$ is 1 only in expectation: the measured value drifts
# from 1 with the sample, which is why a claim needs a confidence interval, not a point
# estimate. In the chapter, which of the paper's reductions
# ($\delta_P$, $\delta_D$, $\delta_{DP}$) would you expect to lose its onset concentration
# first if the story discourse carried no new information?
