# ---
# jupyter:
#   jupytext:
#     formats: py:percent
#     text_representation:
#       extension: .py
#       format_name: percent
#       format_version: '1.3'
#       jupytext_version: 1.19.6
#   kernelspec:
#     name: python3
#     display_name: Python 3
#     language: python
# ---

# %% [markdown]
# # The cancellation hypothesis in critic-free RL
#
# Critic-free RL such as GRPO {cite}`shao2024deepseekmath` gives every token of a rollout the
# same sequence-level advantage. {cite}`cheng2026cancellation` observe that this does **not** mean
# every token of a correct rollout goes up and every token of a failed one goes down: after one
# update, correct and failed rollouts hold similar shares of *flipped* tokens. Their explanation,
# the **cancellation hypothesis**: a token's change also depends on *coupled* gradients from other
# tokens — mostly identical tokens that are predicted with low confidence — so that opposite
# signals cancel on tokens shared by good and bad rollouts (template and format) while tokens
# specific to successful rollouts are reinforced. Two interventions follow: keep a prompt's
# rollouts in the same optimizer mini-batch (*query-preserved* batching) and balance correct and
# failed rollouts in each update (*reward-balanced* batching).
#
# **The coupling identity.** For the output layer z = W h, the logit-space gradient of
# log π_j(a_j) is e_{a_j} − π_j, and two tokens' gradients have the inner product
# φ_jk = (e_{a_j} − π_j)·(e_{a_k} − π_k) = 1[a_j = a_k] − π_j(a_k) − π_k(a_j) + ⟨π_j, π_k⟩
# (the authors' `compute_phi`). One SGD step of size η on the token-mean loss
# −(1/N) Σ_k A_k log π_k moves the sampled token j by, to first order,
# Δ log π_j ≈ (η/N) [A_j φ_jj h_j·h_j + Σ_{k≠j} A_k φ_jk h_j·h_k] — a *self* term with the sign of
# the token's own advantage and a *coupling* term that can overrule it. For identical tokens
# φ ≈ (1 − p_j)(1 − p_k): large only when both are low-confidence.
#
# **What a tiny-scale verdict means.** Each claim's statistic is computed for 5 root seeds (each
# seed draws its own rollouts, value continuations and probe targets through named streams of
# `tokenbook.seeds.derive_seed`) twice: with the paper's mechanism *on* (the real GRPO update)
# and under a null control *off* that needs no retraining — every rollout updated alone (no
# coupling across rollouts), token classes permuted (template tokens indistinguishable),
# boosted/suppressed labels permuted, peer buckets permuted. *Detected* means the statistic
# holds in ≥ 4/5 seeds on and ≤ 1/5 off; *not specific* that it also holds off. The starting
# policy is trained once (`seed`) and shared by all seeds: its SFT is the chapter's costliest
# step, so the policy seed is **not** varied here (rollout and analysis seeds are).
#
# **Scales.** At the **tiny** scale (default) the task is arithmetic with a scratchpad
# (`<think>3+5=8;8-2=6</think>Answer: 6`), the policy a tiny Qwen2 trained here briefly on worked
# solutions, everything on a CPU in minutes. The **paper** scale
# (`-f params/cancellation_hypothesis/paper.yaml`) runs the same code on Qwen3-1.7B (4B and 8B
# in the size sweep) and DAPO-Math {cite}`yu2025dapo` (or GSM8K {cite}`cobbe2021gsm8k`) with
# `math-verify` answer checking, on one GPU; with `eval_files` (LUFFY's suite: MATH-500,
# OlympiadBench, Minerva, AIME24/25 and AMC ×32) the held-out problems are the authors'
# evaluation suite, and `suite_accuracy` scores one sampled response per row (avg@32 on the
# repeated benchmarks).
#
# **Our readings** (the paper's body was not available, see the research note): "boosted" and
# "suppressed" are Δ log π > 0 and < 0 on the same sampled tokens before vs after one update;
# the flip ratio is Pr(Δ < 0 | correct rollout) and Pr(Δ > 0 | failed rollout); the analysis
# update is one on-policy full-batch step (the authors' `_logprob` recipe), taken with plain SGD;
# "positive-only" is PSR (advantage 1 for correct, 0 for failed: positive-sample reinforcement
# as in Zhu et al. 2025, "The Surprising Effectiveness of Negative Reinforcement"); token value is the Monte-Carlo
# success rate of continuations sampled after the token.

# **Where our GRPO loop differs from TRL's `GRPOTrainer` defaults** (TRL 1.16; a test compares
# the loss with TRL's own `_compute_loss`): TRL's default `loss_type="dapo"` normalises by the
# active tokens of the whole generation batch, ours (`"token-mean"`) by those of each optimizer
# mini-batch (TRL's `"bnpo"`, verl's `token-mean`; equal with one mini-batch); TRL shuffles
# completions before splitting a generation batch into steps (our `order="random"`), ours keeps
# groups together by default; TRL's learning rate default (1e-6) suits billion-parameter models,
# the tiny policy uses 1e-4. Advantages ((r − mean)/(std + 1e-4) per group), ε = 0.2 and KL off
# (β = 0) are the same. Dr. GRPO {cite}`liu2025drgrpo` is `scale_rewards="none"` with
# `loss_agg="dr-grpo"`.

# %% [markdown]
# Every computation below is a call into the `tokenbook` library; the modules this chapter
# uses are documented in the {doc}`API reference <../book/api>`: {py:mod}`tokenbook.rl.experiments`, {py:mod}`tokenbook.rl.grpo`, {py:mod}`tokenbook.rl.dynamics`, {py:mod}`tokenbook.rl.gradients`, {py:mod}`tokenbook.rl.coupling`, {py:mod}`tokenbook.rl.verdicts`, {py:mod}`tokenbook.figures.cancellation_hypothesis`, {py:mod}`tokenbook.robustness`, {py:mod}`tokenbook.claims`.

# %%
import time

import pandas as pd
from IPython.display import display

from tokenbook.claims import Claim, report
from tokenbook.figures import cancellation_hypothesis as figs
from tokenbook.plotting import savefig, use_book_style
from tokenbook.provenance import show_versions
from tokenbook.rl import coupling
from tokenbook.rl import dynamics as dyn
from tokenbook.rl import gradients as grads
from tokenbook.rl import verdicts
from tokenbook.rl.experiments import (analysis_rollouts, batching_power, curve_summary,
                                      learning_curves, probe_tables, scale_sweep, scale_values,
                                      seed_sweep, seed_tables, setup, suite_results)
from tokenbook.rl.grpo import GRPOConfig, mixed_groups, with_overrides
from tokenbook.robustness import Expect, values_by_claim
from tokenbook.seeds import derive_seed

use_book_style()
show_versions()
chapter_start = time.perf_counter()

# %% tags=["parameters"]
scale: str = "tiny"  # "tiny": arithmetic world + tiny Qwen2 (CPU); "paper": Qwen + GSM8K (GPU)
seed: int = 0  # trains the starting policy (SFT; retrains it, ~1 min idle)
boot_seed: int = 0  # analysis only: permutations of the null controls and bootstraps (no retraining)
model_id: str = ""  # paper scale: a Qwen checkpoint id or folder
dataset: str = "gsm8k"  # paper scale: "gsm8k" or "dapo"
data_files: str | None = None  # paper scale: local parquet/json files in the hub schema
eval_files: str | None = None  # paper scale: LUFFY's evaluation suite (verl parquet); every learning-curve run's final policy is scored on it (None: no suite)
suite_max_new_tokens: int = 0  # paper scale: completion cap on the evaluation suite (0: max_new_tokens; the authors: 8192)
device: str = "cpu"  # torch device
n_train: int = 2000  # training prompts (tiny: also the SFT set; retrains the policy)
n_eval: int = 64  # held-out prompts for greedy accuracy (re-runs the learning curves)
hidden_size: int = 64  # tiny policy width (retrains the policy)
num_layers: int = 2  # tiny policy depth (retrains the policy)
sft_steps: int = 200  # brief SFT: format confident, reasoning not (retrains the policy)
sft_lr: float = 0.003  # SFT learning rate (retrains the policy)
group_size: int = 8  # G rollouts per prompt (re-runs everything after the SFT)
prompts_per_step: int = 8  # prompts per GRPO generation step (re-runs the learning curves)
n_minibatches: int = 4  # optimizer mini-batches per rollout batch (re-runs the learning curves)
learning_rate: float = 0.0001  # Adam, GRPO runs (re-runs the learning curves, ~1 min idle)
micro_batch_size: int = 0  # rows per forward/backward (0: whole mini-batch; paper: small)
max_new_tokens: int = 32  # completion length cap (re-runs everything after the SFT)
temperature: float = 1.0  # sampling temperature (re-runs everything after the SFT)
analysis_prompts: int = 8  # prompts in each seed's token-dynamics batch (~10 s a seed)
analysis_lr: float = 0.05  # SGD step of the one-update analyses
first_order_lr: float = 0.001  # SGD step of the output-layer-only first-order check
adamw_lr: float = 0.001  # AdamW step of the optimiser comparison (verl's actor: AdamW, lr 1e-6 on Qwen3)
coupling_pairs: int = 200000  # token pairs of the coupling buckets (tiny: all of them)
gradient_unit: str = "prompt_position_token"  # gradient dumps: what counts as the same token
gradient_max_units: int | None = None  # gradient dumps: shared units dumped one by one (None: all)
probe_targets: int = 136  # peer-masking probe targets per seed (~0.2 s each; from the probe power analysis)
probe_sets: int = 10  # random peer sets per (target, bucket), as the authors (+ their top-scored set)
probe_set_size: int = 3  # peers masked per set
value_per_cell: int = 16  # MC value: tokens per (rollout sign × boosted/suppressed) cell
value_continuations: int = 8  # MC value: continuations per token
rl_steps: int = 16  # learning curves: generation steps per run (~40 s idle for all runs)
eval_every: int = 8  # learning curves: steps between evaluations
seeds: list = [0, 1, 2, 3, 4]  # root seeds of the seed sweep and the learning curves
n_workers: int = 0  # tiny scale: Dask processes (1 thread each) for the seeds' tables, the size sweep and the GRPO runs; 0 = all here (on a 2-core machine two workers gain nothing: each runs ~1.75x slower beside the other)
scale_sizes: list = [[32, 2], [48, 2], [64, 2]]  # size sweep: tiny [hidden_size, num_layers] pairs, paper model ids (a new tiny size: its SFT, ~10-40 s idle, + ~5 s a seed)
buffer_size: int = 64  # reward-balanced buffer target size

# %%
S = setup(scale=scale, seed=seed, n_train=n_train, n_eval=n_eval, hidden_size=hidden_size,
          num_layers=num_layers, sft_steps=sft_steps, sft_lr=sft_lr, model_id=model_id,
          dataset=dataset, data_files=data_files, device=device, eval_files=eval_files)
cfg = GRPOConfig(group_size=group_size, prompts_per_step=prompts_per_step,
                 n_minibatches=n_minibatches, lr=learning_rate, max_new_tokens=max_new_tokens,
                 temperature=temperature, buffer_size=buffer_size,
                 micro_batch_size=micro_batch_size)
seed_params = dict(n_train=n_train, n_eval=n_eval, hidden_size=hidden_size,
                   num_layers=num_layers, sft_steps=sft_steps, sft_lr=sft_lr, policy_seed=seed,
                   group_size=group_size, analysis_prompts=analysis_prompts,
                   max_new_tokens=max_new_tokens, temperature=temperature,
                   analysis_lr=analysis_lr, probe_targets=probe_targets, probe_sets=probe_sets,
                   probe_set_size=probe_set_size, value_per_cell=value_per_cell,
                   value_continuations=value_continuations)
print(S.train_problems[0].prompt, "→", S.train_problems[0].answer)

# %% [markdown]
# ## The starting policy and one rollout batch
#
# The analyses start from the briefly fine-tuned policy. A useful starting point has groups with
# both correct and failed rollouts. The figures below show the first root seed; the claims use
# all of them.

# %%
policy, roll = analysis_rollouts(S, cfg, n_prompts=analysis_prompts,
                                 seed=derive_seed(seeds[0], "rollouts"))
tables = seed_tables(seeds[0], **seed_params)
table = tables["grpo"]
print(f"mean reward {roll.rewards.mean():.2f}; mixed groups "
      f"{mixed_groups(roll.rewards, group_size)}/{len(roll.rewards) // group_size}")
pd.DataFrame({"completion": roll.texts[:6], "reward": roll.rewards[:6].tolist()})

# %% [markdown]
# ## Token flipping
#
# One on-policy GRPO step on this batch; Δ log π of every sampled token (nats). Beside it the
# control: every rollout updated alone, so no token is coupled to tokens of other rollouts.

# %%
table["entropy_bucket"] = dyn.entropy_bucket(table["entropy"])
pd.concat({"full batch (GRPO)": dyn.flip_ratios(table),
           "each rollout alone (control)": dyn.flip_ratios(tables["isolated"])})

# %%
dyn.flip_ratios(table, by=["class", "entropy_bucket"])

# %% mystnb={"figure": {"name": "fig-cancel-delta", "caption": "Δ log π (nats) of every sampled token after one GRPO step, by rollout sign."}}
fig = figs.plot_delta_by_sign(table)
savefig(fig, "delta-logp-by-rollout-sign")
fig;

# %% [markdown]
# **The optimiser.** The analyses take one plain SGD step, so that Δ log π is (to first order)
# the gradient's doing. The authors train with AdamW (verl's actor), whose first step from
# fresh moments moves every parameter by about ±lr whatever its gradient's size (sign-like).
# The same batch, one step each (`analysis_lr` for SGD, `adamw_lr` for AdamW, weight decay
# 0.01, betas (0.9, 0.999)): do tokens still flip?

# %%
dyn.optimizer_comparison(policy, roll, sgd_lr=analysis_lr, adamw_lr=adamw_lr).pivot_table(
    index="rollout", columns="optimizer", values="flip_ratio").round(3)

# %% [markdown]
# **The dual update.** As the authors dump it: the same SGD step taken on the output layer
# (unembedding) alone and on every parameter, from the same start. Where Δ log π has the same
# sign under both, the softmax layer's coupling already fixes the direction of the full update.

# %%
dual = dyn.dual_update(policy, roll, lr=analysis_lr)
dyn.dual_update_agreement(dual).round(3)

# %% mystnb={"figure": {"name": "fig-cancel-dual-update", "caption": "Δ log π (nats) of every sampled token after an SGD step on the output layer only (x) and on all parameters (y), by rollout; the grey lines mark zero."}}
fig = figs.plot_dual_update(dual)
savefig(fig, "dual-update")
fig;

# %% [markdown]
# ## Coupling: φ, the first-order prediction, and peer masking
#
# An SGD step on the output layer only, predicted token by token from φ and hidden-state
# similarity, against the actual change.

# %%
fo = dyn.first_order_prediction(policy, roll, lr=first_order_lr)
print(f"corr(predicted, actual) = {fo['predicted'].corr(fo['actual']):.5f}; coupling term "
      f"overrules the self term for "
      f"{(fo['self'].gt(0) != fo['predicted'].gt(0)).mean():.1%} of tokens")

# %% mystnb={"figure": {"name": "fig-cancel-coupling", "caption": "First-order prediction vs actual Δ log π (nats) of every sampled token for an output-layer SGD step; dashed: identity."}}
fig = figs.plot_first_order(fo)
savefig(fig, "coupling")
fig;

# %% [markdown]
# **Coupling and anti-coupling by pair bucket.** K = φ·(h_j·h_k) for every pair of sampled
# tokens of the same prompt, by same/different token and confidence (a token is low-confidence
# when its sampled-token probability is below 0.5), as a mean of the signed K, of |K| and as
# the share of pairs with K < 0, with 95% CIs that resample prompts (pairs of one prompt share
# tokens and hidden states, so resampling pairs would overstate the precision). The abstract's
# claim is about the top row. The row it leaves out is the shaded one: *different*
# low-confidence tokens anti-couple (φ = −π_j(a_k) − π_k(a_j) + ⟨π_j, π_k⟩ < 0 when each puts
# mass on the other's token — competing alternatives at the same step), so a step that raises
# one lowers the other. Its |K| is of the same order as the same-token coupling; averaging |K|
# or looking at identical tokens only hides it.

# %%
coup = dyn.coupling_table(policy, roll, max_pairs=coupling_pairs,
                          seed=derive_seed(seeds[0], "coupling"))
coup_cis = coupling.coupling_bucket_cis(coup, seed=derive_seed(boot_seed, "coupling-ci"))
coupling.coupling_bucket_table(coup_cis)[["n_pairs", "K", "K_lo", "K_hi", "abs_K", "anti",
                                          "phi"]].round(4)  # key columns: the page is narrow

# %% mystnb={"figure": {"name": "fig-cancel-anticoupling", "caption": "Output-layer coupling K per token-pair bucket: mean of the signed K and of abs(K) (symlog axis, squared hidden-state units), and the share of pairs with K < 0; bars are 95% CIs over prompts. Shaded: different low-confidence tokens, which anti-couple."}}
fig = figs.plot_coupling_buckets(coup_cis)
savefig(fig, "coupling-buckets")
fig;

# %% [markdown]
# **The causal probe**, with the authors' design: for each target token, peers from the same
# prompt's rollouts in 8 buckets — same or different token × high or low entropy (the top 20%
# of the batch's entropies) × positive or negative advantage; per bucket `probe_sets` random sets
# of `probe_set_size` peers and the authors' **top-scored** set (the peers with the largest
# z(entropy) + z(|A|) + 1[same token], their code's rule). Each set is masked out of the loss of
# the analysis step and τ = Δ_full − Δ_mask of the target read off (nats): τ > 0 means the
# masked peers had pushed the target up. The authors expect the strongest effect from
# same-token, high-entropy peers, with masking positive-advantage peers lowering the target
# (τ > 0) and negative ones raising it (τ < 0). The `probe_targets` targets of every seed are
# pooled here; the CIs resample targets. The claim's statistic uses the random sets only (the
# top-scored set is chosen by entropy and advantage, so it is no sample of its bucket); the
# top-scored set is shown beside them. (Each masked step is computed exactly from the
# full-batch gradient minus the masked tokens' own gradients, which an SGD step allows; a test
# checks it against redoing the step.)

# %%
probe = probe_tables(seeds, n_workers=n_workers, **seed_params)
probe_summary = verdicts.probe_bucket_summary(probe, seed=boot_seed)
probe_summary[["same_token", "high_entropy", "peer_adv", "mean_tau", "tau_lo", "tau_hi",
               "top_tau"]].round(5)  # key columns: the page is narrow

# %% mystnb={"figure": {"name": "fig-cancel-probe", "caption": "Peer masking: τ = Δ_full − Δ_mask of the target (nats, symlog axis) per peer bucket and peer advantage sign, for the random peer sets (filled) and the authors' top-scored set (open); means over the targets of all seeds with bootstrap 95% CIs over targets."}}
fig = figs.plot_probe(probe, seed=boot_seed)
savefig(fig, "peer-masking")
fig;

# %% [markdown]
# **How many targets the probe needs.** For each bucket, the spread of the per-target mean τ
# between targets gives the number of targets a one-sample t-test (80% power, α = 0.05) needs
# for the bucket's CI to exclude zero if its true mean is the one measured here; the last row
# does the same for the claim's per-target contrast (same-token, high-entropy |τ| minus the
# largest other bucket). The paper's effect sizes are not available (research note, §6), so the
# effects are the ones measured here. `n_now`: targets pooled over the seeds that have peers in
# the bucket (`n_per_seed` per seed); `updates_needed`: the masked SGD updates `n_needed`
# targets cost (8 buckets × (random sets + 1)). Where `n_needed` exceeds `n_now` the bucket is
# not resolved at this budget. The default of 136 targets per seed came from this analysis on
# a pilot (5 seeds × 128 targets, ~0.17 s a target on 2 CPU cores): the same-token,
# high-entropy buckets needed about 100 targets per seed and the different-token ones about
# 130, all within a budget of about two extra minutes for the chapter; the same-token,
# low-entropy, negative-advantage bucket (a mean τ of a few 10⁻⁵ nats) and the claim's
# contrast needed several hundred targets per seed, beyond it. The seeds the claim needs are
# in the seed power table further down.

# %%
probe_power = verdicts.probe_power(probe)
gap_power = probe_power.set_index("name").reindex(["same/high gap"]).iloc[0]
print(f"{int((probe_power['n_needed'] <= probe_power['n_now']).sum())} of {len(probe_power)} "
      f"probe statistics resolved with {probe['seed'].nunique()} seeds × {probe_targets} targets")
probe_power[["name", "n_now", "effect", "n_needed", "mde_now"]].round(5)

# %% [markdown]
# ## Gradient dumps: where the positive and negative gradients cancel
#
# The authors dump, for the analysis step, the gradient of the positive-advantage rollouts and
# of the negative-advantage rollouts separately, for the output layer and the last transformer
# block. Here every loss token k contributes d_k = −(A_k/N) ∇θ log π_k to the step's gradient
# (token-mean loss, nats per loss token), and g+ and g− are the sums over positive- and
# negative-advantage tokens (g+ + g− is the step's gradient). A token is *shared* when it
# occurs in both a correct and a failed rollout of its prompt (`gradient_unit`: by default the
# same token at the same position of the scratchpad); the rest are *group-specific*. For two
# gradients a, b: cos(a, b), and the *cancelled share* −2⟨a, b⟩/(‖a‖² + ‖b‖²), which is 1 for
# exact opposites, 0 for orthogonal gradients and negative when they add up
# (‖a + b‖² = (‖a‖² + ‖b‖²)(1 − cancelled)); *kept* is ‖a + b‖/(‖a‖ + ‖b‖). Rows: each shared
# token's positive vs negative part (by class); per prompt, the shared tokens' parts summed vs
# the positive-only tokens against the negative-only ones; the whole batch. CIs resample
# prompts (output layer and last block together; both separately in the figure and the batch
# table).

# %%
dump = grads.gradient_dump(policy, roll, key=gradient_unit, max_units=gradient_max_units)
grad_summary = grads.gradient_summary(dump, seed=derive_seed(boot_seed, "gradients"))
grad_summary.drop(columns=["cancelled_lo", "cancelled_hi"]).round(3)

# %%
dump.pooled.set_index(["tokens", "params"])[["n_units", "norm_pos", "norm_neg", "cos",
                                              "cancelled", "kept"]].round(3)

# %% mystnb={"figure": {"name": "fig-cancel-gradients", "caption": "Left: cos(g+, g−) of each shared token's positive- and negative-advantage gradient parts (output layer and last block), by token class; diamonds: means with 95% CIs over prompts. Right: cancelled share −2⟨a, b⟩/(‖a‖² + ‖b‖²) per prompt, for the shared tokens' parts and for the positive-only against the negative-only tokens, per parameter set."}}
fig = figs.plot_gradient_cancellation(dump, grad_summary)
savefig(fig, "gradient-cancellation")
fig;

# %% [markdown]
# What to read off (the batch of the first seed; the tables above give this run's numbers):
# a shared token's positive and negative parts point in nearly opposite directions, so most
# of their norm cancels, for template and reasoning tokens alike; summed per prompt, the
# shared tokens still cancel much of their gradient. The group-specific tokens do the
# opposite: the parts of the tokens only correct rollouts hold and of those only failed ones
# hold point the *same* way (cos > 0, cancelled share < 0). Raising the right step and
# lowering the wrong alternative at that step are one move in parameter space — the
# anti-coupling of different low-confidence tokens seen in the coupling buckets above. So the
# two groups' gradients do not simply oppose each other: what survives the cancellation on
# shared tokens is the group-specific signal, which both groups push in the same direction.
# The reading of "shared" matters: with `gradient_unit="prompt_token"` (the same token
# anywhere in the prompt's rollouts) each token's two parts still oppose (reasoning tokens
# less than template ones), but their per-prompt sums no longer cancel, since the same
# character in different steps is a different context.

# %% [markdown]
# ## Template vs reasoning: GRPO vs positive-only
#
# The same rollouts updated once with GRPO advantages and once with PSR (1 for correct, 0 for
# failed): the share of the update mass Σ|Δ| on each token class.

# %%
pd.DataFrame({"GRPO": dyn.update_mass_share(tables["grpo"]),
              "positive-only (PSR)": dyn.update_mass_share(tables["psr"])})

# %% [markdown]
# ## Value of boosted vs suppressed tokens
#
# For a seeded sample of boosted and suppressed tokens in each rollout sign, the success rate of
# continuations sampled after the token (Monte-Carlo value).

# %%
tables["values"].groupby(["rollout", "direction"])["value"].agg(["mean", "size"]).unstack()

# %% [markdown]
# ## The claims over seeds, mechanism on and off
#
# Each claim's statistic per root seed with the mechanism on and under its control; the paired
# differences give the power analysis: how many seeds each comparison needs to detect the
# difference measured here (80% power, α = 0.05).

# %%
sweep = seed_sweep(seeds, boot_seed=boot_seed, **seed_params)
power = verdicts.seed_power(sweep)
power

# %% mystnb={"figure": {"name": "fig-cancel-seeds", "caption": "Each claim's statistic per seed, with the mechanism on and under its null control (off); dashed: the claim's threshold."}}
fig = figs.plot_seed_values(sweep)
savefig(fig, "seed-values")
fig;

# %% [markdown]
# ## Across policy sizes
#
# The abstract says the interventions "improve RLVR training across multiple model scales".
# Their gains cannot be resolved here even at one size (the batching power table below), so we
# take the reading this scale can test: do the token-level findings that the cancellation
# explanation rests on hold at every policy size, not only at the chapter's own? Per size, only
# the two claims one update's token tables decide are recomputed — token flipping (the flip
# balance) and the template shift (template share of Σ abs(Δ), GRPO − PSR) — with the same root
# seeds, streams and null controls as above; the probe and the MC values are too costly to
# repeat per size. Each tiny size is the Qwen2 policy at `hidden × layers` (4 heads, MLP width
# 4 × hidden) fine-tuned like the chapter's own (same data, steps, learning rate and `seed`);
# the chapter's size is read from the seed sweep, so its values are the ones above. At the
# paper scale the sizes are the Qwen3 models the authors' code points to (1.7B, 4B and 8B).

# %%
sizes_start = time.perf_counter()
sizes = scale_sweep(scale_sizes, seeds, scale=scale, boot_seed=boot_seed, dataset=dataset,
                    data_files=data_files, device=device, n_workers=n_workers,
                    **seed_params)
print(f"size sweep {time.perf_counter() - sizes_start:.0f} s")
sizes.pivot_table(index=["claim_id", "size", "n_params"], columns="mechanism", values="value",
                  aggfunc=["mean", "min", "max"], sort=False).round(3)

# %% mystnb={"figure": {"name": "fig-cancel-sizes", "caption": "The two cheap claims per policy size (hidden × layers, parameters): each seed's statistic with the mechanism on and under its control (points) and their means (black); shaded: what the claim expects. Left: flip balance (ratio); right: template share of Σ abs(Δ), GRPO − PSR (difference of shares)."}}
fig = figs.plot_scale_sweep(sizes, expect={"flip-both-signs": (0.5, 1.0),
                                           "template-less-under-grpo": (None, 0.0)})
savefig(fig, "policy-sizes")
fig;

# %% [markdown]
# What to read off (the table gives this run's numbers): at every size the flip balance lies in
# the expected band in most seeds with the mechanism on — and about as often with every rollout
# updated alone, so at none of these sizes does token flipping need cross-rollout coupling
# (*not specific*, as at the chapter's own size); the template share gap is not reliably
# negative at any size. Neither finding changes over this four-fold range of parameters;
# whether they change between the Qwen3 sizes is a question for the paper-scale run.

# %% [markdown]
# ## Interventions: mini-batch order and reward-balanced batching
#
# Every run starts from the same fine-tuned policy and does `rl_steps` generation steps, each
# updating in `n_minibatches` Adam steps. Conditions: **verl's default** order, the baseline
# (the batch split into sequence-length-balanced partitions over 2 simulated data-parallel
# ranks, each cut into mini-batches: `order="seqlen"`, verl's `_balance_batch`); prompt-major
# mini-batches (**query-preserved**); round-robin (each group spread over every mini-batch);
# random (TRL's shuffle); query-preserved with the **reward-balanced** buffer as the authors
# configure it (positives 3/8–5/8 of the update, an update forced after at most 10 buffered
# generation steps); and the authors' fork's per-query **balance-posneg** (each prompt keeps as
# many positive as negative rollouts). Greedy accuracy on held-out prompts. The power table says
# how many seeds a paired comparison of these curves needs to detect a 2-point accuracy gain
# (the paper's gains were not readable in the sources) and what the seeds here can detect.

# %%
conditions = {"verl default (seqlen)": with_overrides(cfg, order="seqlen"),
              "query-preserved": with_overrides(cfg, order="prompt"),
              "round-robin": with_overrides(cfg, order="round_robin"),
              "random": with_overrides(cfg, order="random"),
              "reward-balanced": with_overrides(cfg, order="prompt", reward_balanced=True,
                                                max_buffer_steps=10),
              "balance-posneg": with_overrides(cfg, order="prompt", balance_posneg=True)}
suite_args = dict(suite_seed=boot_seed, suite_max_new_tokens=suite_max_new_tokens or None,
                  suite_temperature=temperature)
curves = learning_curves(S, conditions, seeds, steps=rl_steps, eval_every=eval_every,
                         suite=bool(S.suite), n_workers=n_workers, **suite_args)
baseline = "verl default (seqlen)"
summary = curve_summary(curves, reference=baseline, seed=boot_seed).set_index("condition")
summary_rb = curve_summary(curves, reference="query-preserved",
                           seed=boot_seed).set_index("condition")
power_qp = batching_power(curves, reference=baseline).set_index("condition")
power_rb = batching_power(curves, reference="query-preserved").set_index("condition")
pd.concat({"vs verl's default": power_qp, "vs query-preserved": power_rb}).drop(
    columns=["reference", "sd"])

# %% mystnb={"figure": {"name": "fig-cancel-curves", "caption": "Greedy held-out accuracy over GRPO steps per batching condition; bands are bootstrap 95% CIs over seeds."}}
fig = figs.plot_learning_curves(curves)
savefig(fig, "learning-curves")
fig;

# %% [markdown]
# ### The authors' evaluation suite (paper scale)
#
# With `eval_files` (LUFFY's test file: MATH-500, OlympiadBench, Minerva, and AIME24, AIME25
# and AMC with every problem repeated 32 times), each run's *final* policy answers every row
# once, sampled at `temperature`, so the repeated benchmarks give avg@32 as the authors report
# them; `macro` is the unweighted mean over benchmarks (LUFFY's "avg acc"). Mean and standard
# deviation over seeds per condition. The tiny world has no such suite: its held-out problems
# are the learning curves above.

# %%
if S.suite:
    suite = suite_results(S, conditions, seeds, steps=rl_steps, eval_every=eval_every,
                          **suite_args)
    display(suite.groupby(["benchmark", "condition"], sort=False)["accuracy"]
            .agg(["mean", "std"]).unstack("condition").round(3))
else:
    print("tiny scale: no evaluation suite (set eval_files at paper scale)")

# %% [markdown]
# ## Claims
#
# Tiny-scale verdicts over the seeds above (see the top of the chapter for what they mean).
# Coupling between identical low-confidence tokens is not testable here: for identical tokens
# φ = (1 − p_j)(1 − p_k) + (overlap of the remaining mass) by the algebra of the softmax, so the
# bucket ordering of φ is settled before anything is measured. The batching claims are bounded,
# not tested: the seeds here cannot resolve a gain of the size a benchmark would care about.
# The claims marked `@hidden×layers` repeat the flipping and template claims at each policy
# size (the chapter's own size gives the same values as the unmarked claims).

# %%
mech_flip = "on: one full-batch GRPO step; off: every rollout updated alone (no cross-rollout coupling)"
mech_template = "on: the world's token classes; off: class labels permuted over tokens (template indistinguishable)"
mech_value = "on: boosted/suppressed from the real Δ; off: direction labels permuted within each rollout sign"
mech_probe = "on: the probe's peer buckets; off: bucket labels permuted within each target"
claims = [
    Claim.over_seeds("flip-both-signs", "Positive and negative rollouts exhibit remarkably "
                     "similar proportions of tokens whose probabilities are boosted or suppressed",
                     statistic="min/max of the flip ratios Pr(Δ<0 | correct), Pr(Δ>0 | failed)",
                     expect=Expect.between(0.5, 1.0),
                     values_on=values_by_claim(sweep, "flip-both-signs")[0],
                     values_off=values_by_claim(sweep, "flip-both-signs")[1],
                     mechanism=mech_flip, paper="Cheng et al. 2026, abstract; §3",
                     note="our reading of 'flipped'"),
    Claim.not_testable_tiny("coupling-identical-low-conf", "Coupling effects occur primarily "
                            "between identical tokens that are both predicted with low "
                            "confidence", statistic="mean K by pair bucket",
                            why="for identical tokens φ ≈ (1 − p_j)(1 − p_k) by the algebra of "
                                "the softmax gradient, so the bucket ordering is fixed by "
                                "construction; the causal test is the peer-masking probe",
                            paper="Cheng et al. 2026, abstract; §4"),
    Claim.over_seeds("peer-masking-same-high-entropy", "Masking same-token, high-entropy peers "
                     "changes a target's update most (the authors' probe hypothesis)",
                     statistic="mean over targets of mean |τ| (same token, high entropy) − max "
                               "over the other token × entropy buckets (nats)",
                     expect=Expect.greater(0.0),
                     values_on=values_by_claim(sweep, "peer-masking-same-high-entropy")[0],
                     values_off=values_by_claim(sweep, "peer-masking-same-high-entropy")[1],
                     mechanism=mech_probe, paper="authors' causal probe (code, §2.3 of the notes)",
                     note=f"random sets only: {probe_targets} targets × 8 buckets × "
                          f"{probe_sets} sets per seed (+ the top-scored set, shown apart); "
                          f"the pooled per-target contrast needs "
                          f"{gap_power['n_needed']:.0f} targets for 80% power, "
                          f"{gap_power['n_now']:.0f} here (probe power table)"),
    Claim.over_seeds("template-less-under-grpo", "Compared with training on only positive "
                     "rollouts, critic-free RL shifts updates from template and formatting "
                     "tokens toward reasoning tokens",
                     statistic="template share of Σ|Δ|: GRPO − positive-only (PSR)",
                     expect=Expect.less(0.0),
                     values_on=values_by_claim(sweep, "template-less-under-grpo")[0],
                     values_off=values_by_claim(sweep, "template-less-under-grpo")[1],
                     mechanism=mech_template, paper="Cheng et al. 2026, abstract (evidence 1)"),
    Claim.over_seeds("boosted-higher-value", "Tokens boosted by critic-free RL consistently "
                     "demonstrate higher value than suppressed tokens, regardless of whether "
                     "they originate from positive or negative rollouts",
                     statistic="min over rollout signs of mean MC value boosted − suppressed",
                     expect=Expect.greater(0.0),
                     values_on=values_by_claim(sweep, "boosted-higher-value")[0],
                     values_off=values_by_claim(sweep, "boosted-higher-value")[1],
                     mechanism=mech_value, paper="Cheng et al. 2026, abstract (evidence 2)",
                     note="our reading: value = MC success rate of continuations"),
    Claim.not_testable_tiny("query-preserved-helps", "Query-preserved mini-batching improves "
                            "RLVR training", statistic="paired AUC difference, query-preserved "
                            "− verl's default seqlen-balanced order (accuracy)",
                            why=f"mean difference {summary.loc['query-preserved', 'auc_diff']:+.3f} "
                                f"(95% CI {summary.loc['query-preserved', 'diff_lo']:+.3f} to "
                                f"{summary.loc['query-preserved', 'diff_hi']:+.3f}) over "
                                f"{len(seeds)} seeds × {rl_steps} steps; these seeds detect only "
                                f"|Δ| ≥ {power_qp.loc['query-preserved', 'mde_now']:.3f}, a "
                                f"2-point gain needs {power_qp.loc['query-preserved', 'seeds_needed']:.0f} seeds",
                            paper="Cheng et al. 2026, abstract (intervention 1)"),
    Claim.not_testable_tiny("reward-balanced-helps", "Reward-balanced batching improves RLVR "
                            "training", statistic="paired AUC difference, reward-balanced − "
                            "query-preserved (accuracy)",
                            why=f"mean difference {summary_rb.loc['reward-balanced', 'auc_diff']:+.3f} "
                                f"(95% CI {summary_rb.loc['reward-balanced', 'diff_lo']:+.3f} to "
                                f"{summary_rb.loc['reward-balanced', 'diff_hi']:+.3f}) over "
                                f"{len(seeds)} seeds × {rl_steps} steps; these seeds detect only "
                                f"|Δ| ≥ {power_rb.loc['reward-balanced', 'mde_now']:.3f}, a "
                                f"2-point gain needs {power_rb.loc['reward-balanced', 'seeds_needed']:.0f} seeds",
                            paper="Cheng et al. 2026, abstract (intervention 2)"),
]
n_params = sizes.groupby("size", sort=False)["n_params"].first()
claims += [Claim.over_seeds(f"flip-both-signs@{size}", "Positive and negative rollouts "
                            "exhibit similar proportions of flipped tokens at every policy "
                            "size (our reading of 'across multiple model scales')",
                            statistic="min/max of the flip ratios Pr(Δ<0 | correct), "
                                      "Pr(Δ>0 | failed)",
                            expect=Expect.between(0.5, 1.0),
                            values_on=scale_values(sizes, size, "flip-both-signs")[0],
                            values_off=scale_values(sizes, size, "flip-both-signs")[1],
                            mechanism=mech_flip, paper="Cheng et al. 2026, abstract; §3",
                            note=f"policy {size}, {n:,} parameters")
           for size, n in n_params.items()]
claims += [Claim.over_seeds(f"template-less-under-grpo@{size}", "Critic-free RL shifts "
                            "updates from template tokens toward reasoning tokens, compared "
                            "with positive-only training, at every policy size (our reading)",
                            statistic="template share of Σ|Δ|: GRPO − positive-only (PSR)",
                            expect=Expect.less(0.0),
                            values_on=scale_values(sizes, size, "template-less-under-grpo")[0],
                            values_off=scale_values(sizes, size, "template-less-under-grpo")[1],
                            mechanism=mech_template,
                            paper="Cheng et al. 2026, abstract (evidence 1)",
                            note=f"policy {size}, {n:,} parameters")
           for size, n in n_params.items()]
print(f"chapter time {time.perf_counter() - chapter_start:.0f} s")
report(claims)
