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
# # Exercises: a grounded typology of word classes
#
# Companion to the chapter {doc}`../groundedness_typology`. In the book each exercise's solution
# sits behind a toggle; in the student edition (`make student`, see {doc}`/book/course`) it is a
# stub for you to fill in. Each exercise ends with a check from
# `tokenbook.groundedness_typology.exercises` that compares your answer with the library on
# seeded inputs.
#
# **Learning objectives.** After these exercises you can
# 1. compute a word's groundedness $g = s_U - s_P$ (nats) and aggregate it by word class and
#    language;
# 2. compare lexical and functional classes the way the chapter does (tokens pooled);
# 3. measure cross-language agreement with Kendall's τ on rank vectors indexed by UPOS — and
#    see why correlating sorted label lists is a different, wrong statistic;
# 4. switch the image's help for nouns off and predict which of the paper's claims moves;
# 5. count significant class differences with Welch tests and Benjamini–Hochberg.
#
# **Prerequisites.** pandas `groupby`; surprisal (nats); UD part-of-speech tags (UPOS);
# Kendall's τ; the uid_grounding exercises 3 (Benjamini–Hochberg) helps. Read the chapter's
# introduction first.
#
# **Time.** The chapter at tiny scale: {{ cost_groundedness_typology }}; this page:
# {{ exercise_cost_groundedness_typology }} on a CPU (measured: {{ costs_measured }};
# `book/costs.yml`). The page uses seeded toy tables; on its own the chapter first trains the UID
# chapter's models (a few minutes). Working time: about 60–75 minutes (our estimate: 10–20 minutes
# an exercise).
#
# **Paper scale.** Crossmodal-3600 scored by the UID chapter's model pair and tagged with
# Stanza needs one GPU, the gated checkpoints and the `paper` extra
# (`tokenbook run groundedness_typology -f params/groundedness_typology/paper.yaml`).

# %%
import numpy as np
import pandas as pd
from scipy import stats as st

from tokenbook.groundedness_typology import exercises as ex
from tokenbook.groundedness_typology import measures as grounding

words = ex.typology_world(seed=0)
words.head()

# %% [markdown]
# `words` has one row per word of a caption: `lang, unit_id, word, upos, s_U, s_P` (surprisals in
# nats without and with the image). The analysed classes are `grounding.POS_FOR_ANALYSIS`
# (PUNCT, SYM, X and INTJ are left out); `grounding.LEXICAL` and `grounding.FUNCTIONAL` split
# them into UD's open and closed classes.

# %% [markdown]
# ## Exercise 1 — groundedness by class *(introductory, ~10 min)*
#
# Implement `class_means(words)` returning a DataFrame with columns `lang, upos, n, mean`: the
# number of tokens and the mean groundedness $g = s_U - s_P$ of every analysed class in every
# language. Positive $g$: the image made the word more predictable.

# %% tags=["solution", "hide-cell"]
# Hint: add a column g = s_U - s_P, keep the rows whose upos is in grounding.POS_FOR_ANALYSIS,
# then groupby(["lang", "upos"])["g"].agg(n="size", mean="mean").
def class_means(words):
    """Per (lang, upos): n tokens and mean groundedness (nats)."""
    w = words.assign(g=words["s_U"] - words["s_P"])
    w = w[w["upos"].isin(grounding.POS_FOR_ANALYSIS)]
    return w.groupby(["lang", "upos"])["g"].agg(n="size", mean="mean").reset_index()


# %%
ex.check_class_means(class_means)

# %% [markdown]
# ## Exercise 2 — lexical versus functional *(introductory, ~10 min)*
#
# The paper's first claim: lexical words are more grounded than functional ones. Implement
# `lexical_minus_functional(words)` returning a Series indexed by language: the mean $g$ of all
# lexical tokens minus the mean $g$ of all functional tokens (tokens pooled, not class means
# averaged). Which kind does NUM belong to here, and why might another reading put it
# elsewhere?

# %% tags=["solution", "hide-cell"]
# Hint: label each analysed token lexical or functional with grounding.LEXICAL, pool the
# tokens of each kind per language and subtract the means.
def lexical_minus_functional(words):
    """Series lang -> mean g(lexical) - mean g(functional) (nats)."""
    w = words.assign(g=words["s_U"] - words["s_P"])
    w = w[w["upos"].isin(grounding.POS_FOR_ANALYSIS)]
    lexical = w["upos"].isin(grounding.LEXICAL)
    return (w[lexical].groupby("lang")["g"].mean()
            - w[~lexical].groupby("lang")["g"].mean())


# %%
ex.check_lexical_minus_functional(lexical_minus_functional)

# %% [markdown]
# ## Exercise 3 — agreement between languages *(intermediate, ~15 min)*
#
# Two languages agree on the typology if they *rank* the classes alike. Implement
# `upos_tau(means_a, means_b)`: given two dicts UPOS → mean groundedness, Kendall's τ_b over the
# classes both languages have (`scipy.stats.kendalltau` on the aligned values). An exploratory
# script of the authors instead sorted each language's labels by mean and correlated the two
# label lists; `grounding.label_list_tau` keeps that slip. Compare both on
# `{"NOUN": 3, "ADJ": 2, "VERB": 1, "DET": 0}` and `{"NOUN": 2.5, "VERB": 2, "ADJ": 1, "DET": 0.1}`.

# %% tags=["solution", "hide-cell"]
# Hint: shared = sorted(set(a) & set(b)); correlate [a[k] for k in shared] with
# [b[k] for k in shared].
def upos_tau(means_a, means_b):
    """Kendall's tau_b between two class-mean dicts, aligned on shared UPOS tags."""
    shared = sorted(set(means_a) & set(means_b))
    return float(st.kendalltau([means_a[k] for k in shared],
                               [means_b[k] for k in shared]).statistic)


a = {"NOUN": 3, "ADJ": 2, "VERB": 1, "DET": 0}
b = {"NOUN": 2.5, "VERB": 2, "ADJ": 1, "DET": 0.1}
print(f"rank vectors: τ = {upos_tau(a, b):.3f}; label lists: τ = {grounding.label_list_tau(a, b):.3f}")

# %%
ex.check_upos_tau(upos_tau)

# %% [markdown]
# ## Exercise 4 — switch the nouns' grounding off *(intermediate, ~15 min)*
#
# In `ex.typology_world(seed=0, noun_grounding=0.3)` the image helps nouns about as little as
# adverbs (default: 1.6 nats, the most of any class). **Predict first**: does the cline
# NOUN > ADJ > VERB still hold in every language? Is "lexical > functional" still significant
# (Welch test, BH q < 0.05) in every language? Then compute both with the library
# (`grounding.class_summary`, `grounding.cline_holds`, `grounding.lexical_vs_functional` with
# `n_boot=200`) and store `answer_4 = {"cline": …, "lexical_gt_functional": …}`.

# %% tags=["solution", "hide-cell"]
# Hint: cline_holds(class_summary(w)) has a bool column "holds" per language;
# lexical_vs_functional(w) has "diff" and the BH-adjusted "q_diff" per language.
w0 = ex.typology_world(seed=0, noun_grounding=0.3)
cline = grounding.cline_holds(grounding.class_summary(w0, n_boot=1))
lvf = grounding.lexical_vs_functional(w0, n_boot=200)
answer_4 = {"cline": bool(cline["holds"].all()),
            "lexical_gt_functional": bool(((lvf["diff"] > 0) & (lvf["q_diff"] < 0.05)).all())}
answer_4

# %%
ex.check_typology_verdicts(answer_4, noun_grounding=0.3)

# %% [markdown]
# *Discussion.* One mechanism (the image identifying objects) carries the cline; the
# lexical–functional contrast survives because adjectives, verbs and proper nouns are still
# grounded. Which claim of the chapter would a world need to break to make the *agreement*
# between languages fall?

# %% [markdown]
# ## Exercise 5 — which classes differ? *(advanced, ~20 min)*
#
# Implement `n_significant_pairs(words, lang, alpha=0.05)`: for one language, a Welch t-test
# (`scipy.stats.ttest_ind(..., equal_var=False)`) of $g$ between every pair of analysed classes
# with at least 2 tokens, Benjamini–Hochberg over all those pairs, and the number of pairs with
# $q <$ `alpha`. How many pairs would you call different without the correction?

# %% tags=["solution", "hide-cell"]
# Hint: itertools.combinations over the classes present (in POS_FOR_ANALYSIS order), collect
# the p-values, adjust them with tokenbook.stats.benjamini_hochberg and count q < alpha.
import itertools

from tokenbook.stats import benjamini_hochberg


def n_significant_pairs(words, lang, alpha=0.05):
    """Number of class pairs of one language whose mean groundedness differs (BH q < alpha)."""
    w = words[words["lang"] == lang]
    w = w.assign(g=w["s_U"] - w["s_P"])
    groups = {c: w.loc[w["upos"] == c, "g"].to_numpy() for c in grounding.POS_FOR_ANALYSIS}
    present = [c for c in grounding.POS_FOR_ANALYSIS if groups[c].size >= 2]
    pvals = [st.ttest_ind(groups[x], groups[y], equal_var=False).pvalue
             for x, y in itertools.combinations(present, 2)]
    return int((benjamini_hochberg(pvals) < alpha).sum())


# %%
ex.check_significant_pairs(n_significant_pairs)
