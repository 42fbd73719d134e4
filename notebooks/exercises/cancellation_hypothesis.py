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
# # Exercises: the cancellation hypothesis
#
# Companion to the chapter {doc}`../cancellation_hypothesis`. In the book each exercise's solution
# sits behind a toggle; in the student edition (`make student`, see {doc}`/book/course`) it is a
# stub for you to fill in. Each exercise ends with a check from
# `tokenbook.cancellation_hypothesis.exercises` that compares your answer with the library on
# seeded inputs.
#
# **Learning objectives.** After these exercises you can
# 1. compute group-normalised GRPO advantages and say which groups give no gradient;
# 2. compute the coupling term $\varphi_{jk}$ between two sampled tokens from their logit rows;
# 3. predict, to first order, how one policy-gradient step moves every token's log-probability,
#    and check the prediction against the exact step;
# 4. switch the coupling between tokens off and predict what happens to the flip ratio — the
#    chapter's evidence that updates of different tokens cancel.
#
# **Prerequisites.** PyTorch or NumPy linear algebra; softmax and its gradient
# $\partial \log\pi(a)/\partial z = e_a - \pi$; the policy-gradient loss. Read the chapter's
# introduction and its section on token dynamics first.
#
# **Time.** The chapter at tiny scale: {{ cost_cancellation_hypothesis }}; this page:
# {{ exercise_cost_cancellation_hypothesis }} on a CPU (measured: {{ costs_measured }};
# `book/costs.yml`). A linear output layer stands in for the policy. Working time: about 60–80
# minutes (our estimate: 10–20 minutes an exercise).
#
# **Paper scale.** A small Qwen instruct model trained with GRPO on GSM8K needs one GPU and
# network access once for the model and data
# (`tokenbook run cancellation_hypothesis -f params/cancellation_hypothesis/paper.yaml`).

# %%
import numpy as np
import pandas as pd

from tokenbook.cancellation_hypothesis import dynamics
from tokenbook.cancellation_hypothesis import exercises as ex

# %% [markdown]
# ## Exercise 1 — group-normalised advantages *(introductory, ~10 min)*
#
# Rewards come prompt-major: `rewards[g*G:(g+1)*G]` are the $G$ rollouts of prompt $g$.
# Implement `grpo_advantages(rewards, G)`: $A_i = (r_i - \bar r_g)/(\mathrm{sd}_g + 10^{-4})$ with
# the group's mean and **sample** standard deviation (ddof = 1, as TRL). What are the advantages
# of a group whose rollouts are all correct?

# %% tags=["solution", "hide-cell"]
# Hint: reshape to (n_groups, G), subtract the row means, divide by the row SDs (ddof=1)
# plus 1e-4, flatten.
def grpo_advantages(rewards, G):
    """GRPO advantages [B] for prompt-major rewards [B] in groups of G."""
    r = np.asarray(rewards, dtype=float).reshape(-1, G)
    a = (r - r.mean(1, keepdims=True)) / (r.std(1, ddof=1, keepdims=True) + 1e-4)
    return a.ravel()


# %%
ex.check_grpo_advantages(grpo_advantages)

# %% [markdown]
# ## Exercise 2 — groups that teach nothing *(introductory, ~10 min)*
#
# Implement `mixed_groups(rewards, G)`: the number of groups (binary rewards) holding both a
# correct and a failed rollout. Only these groups have non-zero advantages, so only they move
# the policy. For a batch of 8 prompts × 8 rollouts where each rollout is correct with
# probability 0.95, how many groups do you expect to be mixed? (Compute $8\,(1-0.95^8-0.05^8)$.)

# %% tags=["solution", "hide-cell"]
# Hint: the number of correct rollouts per group is strictly between 0 and G.
def mixed_groups(rewards, G):
    """Number of groups with at least one correct and one failed rollout."""
    correct = np.asarray(rewards).reshape(-1, G).sum(1)
    return int(((correct > 0) & (correct < G)).sum())


# %%
ex.check_mixed_groups(mixed_groups)

# %% [markdown]
# ## Exercise 3 — the coupling φ from two logit rows *(intermediate, ~15 min)*
#
# Token $j$ was sampled as $a_j$ from $\pi_j = \mathrm{softmax}(z_j)$ and token $k$ as $a_k$ from
# $\pi_k$. The gradients of $\log\pi_j(a_j)$ and $\log\pi_k(a_k)$ with respect to the logits are
# $e_{a_j}-\pi_j$ and $e_{a_k}-\pi_k$; their inner product is
#
# $$ \varphi_{jk} = \mathbb 1[a_j=a_k] - \pi_j(a_k) - \pi_k(a_j) + \langle\pi_j,\pi_k\rangle . $$
#
# Implement `phi(z_j, z_k, a_j, a_k)` (logit rows of length V, two token ids). When is φ
# negative, i.e. when does raising one token lower the other?

# %% tags=["solution", "hide-cell"]
# Hint: compute both softmaxes (subtract the max first for stability), then the four terms.
def phi(z_j, z_k, a_j, a_k):
    """Coupling φ_jk of two sampled tokens (dimensionless)."""
    def softmax(z):
        e = np.exp(np.asarray(z, dtype=float) - np.max(z))
        return e / e.sum()

    p_j, p_k = softmax(z_j), softmax(z_k)
    return float((a_j == a_k) - p_j[a_k] - p_k[a_j] + p_j @ p_k)


# %%
ex.check_phi(phi)

# %% [markdown]
# ## Exercise 4 — predict one update to first order *(advanced, ~20 min)*
#
# Take a linear output layer $z_j = W h_j$ and one SGD step of size $\eta$ on
# $L = -\frac1N\sum_k A_k \log\pi_k(a_k)$ (GRPO at ratio 1 with token-mean aggregation). To first
# order in $\eta$,
#
# $$ \Delta\log\pi_j(a_j) \approx \frac{\eta}{N}\sum_k A_k\,\varphi_{jk}\,(h_j\cdot h_k). $$
#
# Implement `first_order_delta(H, W, actions, A, lr)` (H: [N, d], W: [V, d]). You may use
# your `phi` or `dynamics.phi_matrix` (torch). The check also compares the prediction with the
# exact step (`ex.linear_head_step`). The sum over $k\neq j$ is where other tokens' updates
# can cancel token $j$'s own.

# %% tags=["solution", "hide-cell"]
# Hint: Z = H @ W.T gives the logit rows; build the N×N matrix of φ_jk, multiply it elementwise
# by the kernel H @ H.T, then by A, and scale by lr / N.
def first_order_delta(H, W, actions, A, lr):
    """First-order prediction of Δ log π_j(a_j) for every token j [N] (nats)."""
    Z = np.asarray(H) @ np.asarray(W).T
    N = len(actions)
    Phi = np.array([[phi(Z[j], Z[k], actions[j], actions[k]) for k in range(N)]
                    for j in range(N)])
    K = np.asarray(H) @ np.asarray(H).T
    return lr / N * (Phi * K) @ np.asarray(A)


# %%
ex.check_first_order_delta(first_order_delta)

# %% [markdown]
# ## Exercise 5 — switch the coupling off *(advanced, ~20 min)*
#
# The chapter measures *flip ratios*: the share of tokens of correct rollouts whose
# log-probability **falls** after an update that rewards them. If tokens did not interact, each
# token would move with its own advantage: $\Delta_j \approx \frac{\eta}{N}A_j\varphi_{jj}
# \lVert h_j\rVert^2$ and $\varphi_{jj} = \lVert e_{a_j}-\pi_j\rVert^2 \ge 0$. **Predict first**: what is
# the flip ratio of correct rollouts when the hidden states are orthogonal
# (`ex.linear_head_batch(seed=0, orthogonal=True)`), and is it 0 when they share a direction
# (`orthogonal=False`)? Then compute both with the exact step
# (`ex.linear_head_step(H, W, actions, A, lr=1e-2)`) and `dynamics.flip_ratios` on a table
# with columns `reward, delta`, and store `answer_5 = {"shared": …, "orthogonal": …}`.

# %% tags=["solution", "hide-cell"]
# Hint: flip_ratios(table) has one row per rollout kind; take flip_ratio where
# rollout == "correct".
def correct_flip_ratio(orthogonal):
    """Flip ratio of correct rollouts after one exact SGD step (lr = 1e-2)."""
    b = ex.linear_head_batch(seed=0, orthogonal=orthogonal)
    delta = ex.linear_head_step(b["H"], b["W"], b["actions"], b["A"], lr=1e-2)
    fr = dynamics.flip_ratios(pd.DataFrame({"reward": b["rewards"], "delta": delta}))
    return float(fr.loc[fr["rollout"] == "correct", "flip_ratio"].iloc[0])


answer_5 = {"shared": correct_flip_ratio(False), "orthogonal": correct_flip_ratio(True)}
answer_5

# %%
ex.check_coupling_verdicts(answer_5)

# %% [markdown]
# *Discussion.* With orthogonal hidden states every rewarded token rises: flips need the
# off-diagonal terms $A_k\varphi_{jk}(h_j\cdot h_k)$, i.e. tokens that share representation and
# receive opposite advantages. What does this predict for the chapter's comparison of
# high- and low-entropy tokens, whose $\varphi_{jj}$ differ?
