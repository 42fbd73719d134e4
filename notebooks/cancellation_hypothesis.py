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
# **What a tiny-scale verdict means.** Each claim's statistic is computed for `n_seeds` root seeds (each
# seed draws its own rollouts, value continuations and probe targets through named streams of
# `tokenbook.seeds.derive_seed`) twice: with the paper's mechanism *on* (the real GRPO update)
# and under a null control *off* that needs no retraining — every rollout updated alone (no
# coupling across rollouts), token classes permuted (template tokens indistinguishable),
# boosted/suppressed labels permuted, peer buckets permuted. *Detected* means the mean over
# seeds on meets the expectation with its whole 95% interval, the paired on − off difference
# excludes 0 in the claimed direction and the off mean does not meet it
# ({py:mod}`tokenbook.verdicts`); *not specific* that it holds on but off too, or with no
# paired effect. Every root seed is an independent replicate, **the starting policy
# included**: at the tiny scale root seed r draws its own arithmetic problems and SFTs its own
# policy from `derive_seed(r, "policy")` (cached per root seed and shared by that seed's
# claims, learning curves and size sweep), so `-p seed 10` trains new policies. The
# claims are declared once in the library ({py:mod}`tokenbook.cancellation_hypothesis.claims`), each with the
# function that computes it and, where one exists, its known answer.
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
# the flip ratio is Pr(Δ < 0 | correct rollout) and Pr(Δ > 0 | failed rollout); the claim
# about flips is read as one about *coupling*: the flips a full-batch step adds over every
# rollout updated alone (the *flip excess*), since a balance of the two flip ratios is what
# isolated updates show too; the analysis
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

# %% tags=["parameters"]
from tokenbook.book.paramtypes import (ArithmeticFormats, Count, CountOrZero, GradientUnit,
                                       GroupCount, MathDataset, OptionalCount, OptionalText,
                                       Positive, Scale, Seed, SizeSweep)

scale: Scale = "tiny"  # "tiny": arithmetic world + tiny Qwen2 (CPU); "paper": Qwen + GSM8K (GPU)
seed: Seed = 0  # first root seed (tiny: each root seed draws its own world and SFTs its own starting policy, cached; paper: seeds the data split)
boot_seed: Seed = 0  # analysis only: permutations of the null controls and bootstraps (no retraining)
model_id: str = ""  # paper scale: a Qwen checkpoint id or folder
dataset: MathDataset = "gsm8k"  # paper scale: "gsm8k" or "dapo"
data_files: OptionalText = None  # paper scale: local parquet/json files in the hub schema
eval_files: OptionalText = None  # paper scale: LUFFY's evaluation suite (verl parquet); every learning-curve run's final policy is scored on it (None: no suite)
suite_max_new_tokens: CountOrZero = 0  # paper scale: completion cap on the evaluation suite (0: max_new_tokens; the authors: 8192)
device: str = "cpu"  # torch device
n_train: Count = 2000  # training prompts (tiny: also the SFT set; retrains the policy)
n_eval: Count = 64  # held-out prompts for greedy accuracy (re-runs the learning curves)
hidden_size: Count = 64  # tiny policy width (retrains the policy)
num_layers: Count = 2  # tiny policy depth (retrains the policy)
sft_steps: Count = 200  # brief SFT: format confident, reasoning not (retrains the policy)
sft_lr: Positive = 0.003  # SFT learning rate (retrains the policy)
group_size: GroupCount = 8  # G rollouts per prompt (re-runs everything after the SFT)
prompts_per_step: Count = 8  # prompts per GRPO generation step (re-runs the learning curves)
n_minibatches: Count = 4  # optimizer mini-batches per rollout batch (re-runs the learning curves)
learning_rate: Positive = 0.0001  # Adam, GRPO runs (re-runs the learning curves, ~1 min idle)
micro_batch_size: CountOrZero = 0  # rows per forward/backward (0: whole mini-batch; paper: small)
max_new_tokens: Count = 32  # completion length cap (re-runs everything after the SFT)
temperature: Positive = 1.0  # sampling temperature (re-runs everything after the SFT)
analysis_prompts: Count = 8  # prompts in each seed's token-dynamics batch (~10 s a seed)
analysis_lr: Positive = 0.05  # SGD step of the one-update analyses
first_order_lr: Positive = 0.001  # SGD step of the output-layer-only first-order check
adamw_lr: Positive = 0.001  # AdamW step of the optimiser comparison (verl's actor: AdamW, lr 1e-6 on Qwen3)
coupling_pairs: Count = 200000  # token pairs of the coupling buckets (tiny: all of them)
gradient_unit: GradientUnit = "prompt_position_token"  # gradient dumps: what counts as the same token
gradient_max_units: OptionalCount = None  # gradient dumps: shared units dumped one by one (None: all)
probe_targets: Count = 136  # peer-masking probe targets per seed (~0.2 s each; from the probe power analysis)
probe_sets: Count = 10  # random peer sets per (target, bucket), as the authors (+ their top-scored set)
probe_set_size: Count = 3  # peers masked per set
value_per_cell: Count = 120  # MC value: tokens per (rollout sign × boosted/suppressed) cell (≥ 120: a 0.1 gap needs ~124 at the measured spread)
value_continuations: Count = 4  # MC value: continuations per token
rl_steps: Count = 16  # learning curves: generation steps per run (~40 s idle for all runs)
eval_every: Count = 8  # learning curves: steps between evaluations
n_seeds: Count = 6  # root seeds seed, seed + 1, … of the seed sweep and the learning curves (each trains its own policy, ~15 s)
n_workers: CountOrZero = 0  # tiny scale: Dask processes (1 thread each) for the seeds' tables, the size sweep and the GRPO runs; 0: in this kernel on its torch threads (the peer-masking probe split over two processes on a machine with two cores; the learning curves: curve_workers)
curve_workers: CountOrZero = 2  # learning curves: Dask processes (1 thread each) for the GRPO runs not yet cached, when n_workers is 0 (they feed only the batching claims, not testable here; the same curves bit for bit; on a 2-core machine two processes took 126 s against this kernel's 145 s); 0: in this kernel
scale_sizes: SizeSweep = [[32, 2], [48, 2], [64, 2]]  # size sweep: tiny [hidden_size, num_layers] pairs, paper model ids (a new tiny size: its SFT, ~10-40 s idle, + ~5 s a seed)
buffer_size: Count = 64  # reward-balanced buffer target size
formats: ArithmeticFormats = "variants"  # tiny world: "variants" (equivalent separators, equals signs and answer prefixes drawn per step, so template tokens stay movable after SFT: the template claim's manipulation check) or "fixed" (one template, near-certain after SFT; retrains the policies)

# %% [markdown]
# Every computation below is a call into the `tokenbook` library; the modules this chapter
# uses are documented in the {doc}`API reference <../book/api>`: {py:mod}`tokenbook.cancellation_hypothesis.experiments`, {py:mod}`tokenbook.cancellation_hypothesis.grpo`, {py:mod}`tokenbook.cancellation_hypothesis.dynamics`, {py:mod}`tokenbook.cancellation_hypothesis.gradients`, {py:mod}`tokenbook.cancellation_hypothesis.coupling`, {py:mod}`tokenbook.cancellation_hypothesis.value`, {py:mod}`tokenbook.cancellation_hypothesis.verdicts`, {py:mod}`tokenbook.cancellation_hypothesis.figures`, {py:mod}`tokenbook.robustness`, {py:mod}`tokenbook.claims`.

# %%
import time
from functools import partial

import pandas as pd
from IPython.display import display

from tokenbook.claims import report
from tokenbook.cancellation_hypothesis import figures as figs
from tokenbook.book.interactive import check_parameters
from tokenbook.plotting import savefig, use_book_style
from tokenbook.provenance import show_versions
from tokenbook.cancellation_hypothesis import coupling
from tokenbook.cancellation_hypothesis import dynamics as dyn
from tokenbook.cancellation_hypothesis import gradients as grads
from tokenbook.cancellation_hypothesis import verdicts
from tokenbook.cancellation_hypothesis.claims import tiny_claims
from tokenbook.cancellation_hypothesis.experiments import (analysis_rollouts, batching_power,
                                                           curve_summary, flip_excess_by_seed,
                                                           learning_curves,
                                                           probe_tables, root_setup, scale_sweep,
                                                           run_seeds, seed_tables, suite_results)
from tokenbook.cancellation_hypothesis.grpo import GRPOConfig, mixed_groups, with_overrides
from tokenbook.cancellation_hypothesis.value import path_breakdown
from tokenbook.seeds import derive_seed, seed_list

check_parameters("cancellation_hypothesis", globals())  # the runner's checks (plain papermill too)

use_book_style()
show_versions()

# %%
chapter_start = time.perf_counter()
seeds = seed_list(n_seeds, seed)   # the root seeds: each its own world, policy and analysis
setup_args = dict(scale=scale, seed=seed, n_train=n_train, n_eval=n_eval,
                  hidden_size=hidden_size, num_layers=num_layers, sft_steps=sft_steps,
                  sft_lr=sft_lr, model_id=model_id, dataset=dataset, data_files=data_files,
                  device=device, eval_files=eval_files, formats=formats)
sft_start = time.perf_counter()
S = root_setup(seeds[0], **setup_args)   # tiny: the first root seed's own world and policy
print(f"starting policy of root seed {seeds[0]}: {time.perf_counter() - sft_start:.0f} s "
      f"(SFT, or its cache)")
cfg = GRPOConfig(group_size=group_size, prompts_per_step=prompts_per_step,
                 n_minibatches=n_minibatches, lr=learning_rate, max_new_tokens=max_new_tokens,
                 temperature=temperature, buffer_size=buffer_size,
                 micro_batch_size=micro_batch_size)
seed_params = dict(n_train=n_train, n_eval=n_eval, hidden_size=hidden_size,
                   num_layers=num_layers, sft_steps=sft_steps, sft_lr=sft_lr, policy_seed=None,
                   group_size=group_size, analysis_prompts=analysis_prompts,
                   max_new_tokens=max_new_tokens, temperature=temperature,
                   analysis_lr=analysis_lr, first_order_lr=first_order_lr,
                   probe_targets=probe_targets, probe_sets=probe_sets,
                   probe_set_size=probe_set_size, value_per_cell=value_per_cell,
                   value_continuations=value_continuations, formats=formats)
print(S.train_problems[0].prompt, "→", S.train_problems[0].answer)

# %% [markdown]
# ## The starting policy and one rollout batch
#
# The analyses start from the briefly fine-tuned policy. A useful starting point has groups with
# both correct and failed rollouts. The figures below show the first root seed (its own
# policy); the claims use all of them, each with its own policy.

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
# control: every rollout updated alone (its own tokens' terms, self and within-rollout, kept at
# the full step's size), so no token is coupled to tokens of other rollouts. The two tables
# show the flip *balance*: the isolated control can flip tokens of both signs too (a token's
# within-rollout terms can overrule its own), so the balance is described here and the claim
# reads what the coupling adds.

# %%
table["entropy_bucket"] = dyn.entropy_bucket(table["entropy"])
pd.concat({"full batch (GRPO)": dyn.flip_ratios(table),
           "each rollout alone (control)": dyn.flip_ratios(tables["isolated"])})

# %% [markdown]
# **The flip excess** is what the cross-rollout coupling adds: per advantage sign, the flip
# ratio of the full-batch step minus that of the isolated control (loss tokens with A ≠ 0), and
# the claim's statistic is the smaller of the two. Its **known answer** is computed for the
# same batch and the same update, with no step taken: the exact first-order change of every
# token, η ∇log π_j · (1/N) Σ_k A_k ∇log π_k, summed over all loss tokens (full batch) or over
# the token's own rollout (isolated), from autograd Jacobian-vector products over *all*
# parameters (`dynamics.first_order_full`). Restricted to the output layer it is the
# linear-softmax closed form (η/N) Σ_k A_k φ_jk (h_j·h_k) (a test checks the two agree, and
# that small measured steps agree with the first-order Δ). The sign agreement says how linear
# the analysis step is (the share of scored tokens whose measured Δ has the sign of its
# first-order Δ). Off, the control is compared with itself: 0 by construction.
#
# **Two updates, two claims.** With every parameter moving, a rollout updated *alone* already
# moves the shared representations of its other tokens, so the isolated control is not free of
# coupling in the paper's sense, and the all-parameter known answer says whether this world
# plants an excess at all (at the chapter's size it does not: compare the first two rows). The
# paper's coupling is the output layer's, φ_jk (h_j·h_k) (§3). So the chapter also takes the
# same step with **only the output layer moving**, full batch and every rollout alone
# (`token_dynamics(..., head_only=True)`): there the hidden states stay fixed and the coupling
# is exactly the closed form, whose flip excess is that claim's known answer
# (`flip-excess-output-layer`). Its manipulation check is the share of scored tokens whose
# cross-rollout first-order term outweighs their own rollout's (`coupling_dominance`; 0 in the
# isolated control).

# %%
ff = tables["first_order_full"]
pd.Series({"flip excess, one GRPO step (all parameters)":
           verdicts.flip_excess(table, tables["isolated"]),
           "known answer: first-order Δ of the same step (all parameters)":
           verdicts.first_order_flip_excess(ff),
           "sign agreement, measured vs first-order Δ (full step)":
           verdicts.sign_agreement(table, ff, "full"),
           "flip excess, one GRPO step of the output layer alone":
           verdicts.flip_excess(tables["grpo_head"], tables["isolated_head"]),
           "known answer: closed form of the output-layer step":
           verdicts.predicted_flip_excess(tables["first_order"]),
           "cross-rollout term outweighs the own rollout's (share of scored tokens)":
           verdicts.coupling_dominance(tables["first_order"])}).round(3)

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
# checks it against redoing the step.) The claim's known answer is the same statistic on each
# set's τ to first order in the step (`tau_first_order`: the target's gradient against the
# masked peers' gradients, no step taken): what the softmax-gradient algebra says masking
# these peers does to this target.

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
      f"probe statistics resolved with {probe['seed'].nunique()} seeds × {probe_targets} targets; "
      f"the claim's contrast needs {gap_power['n_needed']:.0f} targets, "
      f"{gap_power['n_now']:.0f} probed")
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
# failed): the share of the update mass Σ|Δ| on each token class. How much the template tokens
# *can* move is printed first: their mean probability and entropy (nats) under the starting
# policy, per root seed. A template the SFT has made near-certain (mean p near 1) leaves an
# update little to shift, whatever the estimator: with one fixed template the SFT leaves
# 0.03–0.04 nats (mean p ≈ 0.99). The default world (`formats="variants"`) writes every
# solution with equivalent template choices (`=` or ` = `, `;` or `; `, `Answer: ` or
# `Answer:`, the same reward and token classes), which leaves 0.12–0.15 nats. The claim's
# manipulation check asks for a mean template-token entropy above
# `TEMPLATE_ENTROPY_FLOOR` = 0.1 nats at every root seed, with the mechanism on (the off world
# permutes the labels of the same tokens, so it shares the policy); a seed below the floor is
# not judged. The claim's known answer is the same statistic on the exact first-order Δ of the
# same two steps (`dynamics.first_order_full` with the GRPO and with the PSR advantages, no
# step taken): what the estimators' algebra says the template share should do for this batch.

# %%
display(pd.Series(verdicts.template_confidence(table), name="template tokens").round(3))
pd.DataFrame({"GRPO": dyn.update_mass_share(tables["grpo"]),
              "positive-only (PSR)": dyn.update_mass_share(tables["psr"])})

# %% [markdown]
# ## Value of boosted vs suppressed tokens
#
# For a seeded sample of boosted and suppressed tokens in each rollout sign, the success rate of
# continuations sampled after the token (Monte-Carlo value). With 16 tokens per cell the per-seed
# gap had a standard error of about 0.10 (most tokens of failed rollouts have value 0), and a
# 0.1 gap needed about 124 tokens per cell: the default is 120 tokens per cell with 4
# continuations each. The estimator's known answer is the exact success probability of a
# partial solution, the sum over every continuation the policy can write
# (`value.exact_values`); with continuations of up to 32 tokens it is too costly here, so a
# test checks the Monte-Carlo value against it on a small arithmetic world. The *claim's*
# known answer asks the world instead of the policy: over every token of the batch, the value
# is 1 where the response through the token is still the start of one of the world's worked
# solutions of its problem (`worlds.arithmetic.on_solution_path`), else 0, and the direction
# is the sign of the token's exact first-order Δ (`value.oracle_values`: nothing sampled, no
# step taken). Our reading: a partial solution is valuable when it can still be completed
# correctly. The table below gives both per cell for the first root seed.

# %%
pd.concat({"Monte-Carlo value (sampled tokens)":
           tables["values"].groupby(["rollout", "direction"])["value"].agg(["mean", "size"]),
           "on a solution path (every token)":
           tables["oracle_values"].groupby(["rollout", "direction"])["value"]
           .agg(["mean", "size"])}, axis=1).round(3)

# %% [markdown]
# Whether this world plants what the claim says can be read off the known answer's own table:
# the claim needs the step to tell a failed rollout's tokens before its mistake (shared with
# the correct rollouts, still on a solution path) from those after it, boosting the first and
# suppressing the second. Below, per rollout sign, the share of rollouts that leave the
# world's solution path (a correct one that does reached the right number by a wrong
# scratchpad, and its tokens after that count as value 0), the share of tokens still on the
# path, and how often the step boosts a token on the path and off it
# (`value.path_breakdown`). Where the two boosted shares of the failed rollouts are alike, the
# token's direction does not follow the mistake, and the known answer shows no effect: the
# tiny world does not plant the mechanism this claim tests, whatever the Monte-Carlo value
# then reads.

# %%
path_breakdown(tables["oracle_values"]).round(3)

# %% [markdown]
# ## The claims over seeds, mechanism on and off
#
# Each claim's statistic per root seed with the mechanism on and under its control; the paired
# differences give the power analysis: how many seeds each comparison needs to detect the
# difference measured here (80% power, α = 0.05). Beside them, per root seed, the flip excess's
# known answer and the described statistics (the flip balance, the template tokens' mean p and
# entropy before the update: the same on and off).

# %%
sweep = run_seeds(seeds, boot_seed=boot_seed, **seed_params)
power = verdicts.seed_power(sweep)
claim_rows_on = (sweep["mechanism"] == "on") & ~sweep["claim_id"].str.contains(":")
display(sweep[claim_rows_on].groupby("claim_id")["value"]
        .agg(["mean", "std", "min", "max"]).round(3))   # each claim over the root seeds, on
power

# %% mystnb={"figure": {"name": "fig-cancel-seeds", "caption": "Each claim's statistic per seed, with the mechanism on and under its null control (off); dashed: the claim's threshold (units in the claims table)."}}
fig = figs.plot_seed_values(sweep[~sweep["claim_id"].str.contains(":")])
savefig(fig, "seed-values")
fig;

# %% [markdown]
# **Which rollouts set the flip excess.** The claim's statistic is the smaller of the two
# advantage signs' excesses, so one sign can hold it at zero while the other shows coupling.
# Per root seed and sign, the measured excess of the all-parameter step and its first-order
# known answer ({py:func}`tokenbook.cancellation_hypothesis.experiments.flip_excess_by_seed`):
# where the failed rollouts' tokens gain flips from the other rollouts and the correct ones'
# do not, the world plants coupling on one side only, and `flip-excess` reads the side that
# lacks it.

# %%
by_sign = flip_excess_by_seed(seeds, **seed_params)
smaller = by_sign.loc[by_sign.groupby("seed")["known"].idxmin(), "sign"]
print(f"the known excess is smaller for the correct rollouts (A > 0) in "
      f"{int((smaller == 'positive').sum())} of {len(smaller)} root seeds; mean known excess: "
      + ", ".join(f"{sign} {v:+.3f}" for sign, v in by_sign.groupby("sign")["known"].mean().items()))
by_sign.pivot(index="seed", columns="sign", values=["measured", "known"]).round(3)

# %% [markdown]
# ## Across policy sizes
#
# The abstract says the interventions "improve RLVR training across multiple model scales".
# Their gains cannot be resolved here even at one size (the batching power table below), so we
# take the reading this scale can test: do the token-level findings that the cancellation
# explanation rests on hold at every policy size, not only at the chapter's own? Per size, only
# the two claims one update's token tables decide are recomputed — token flipping (the flip
# excess, with its first-order known answer) and the template shift (template share of
# Σ abs(Δ), GRPO − PSR) — with the same root
# seeds, streams and null controls as above; the probe and the MC values are too costly to
# repeat per size. Each tiny size is the Qwen2 policy at `hidden × layers` (4 heads, MLP width
# 4 × hidden) fine-tuned like the chapter's own (same data, steps and learning rate, and per
# root seed the same policy seed);
# the chapter's size is read from the seed sweep, so its values are the ones above. At the
# paper scale the sizes are the Qwen3 models the authors' code points to (1.7B, 4B and 8B).

# %%
sizes_start = time.perf_counter()
sizes = scale_sweep(scale_sizes, seeds, scale=scale, boot_seed=boot_seed, dataset=dataset,
                    data_files=data_files, device=device, n_workers=n_workers,
                    **seed_params)
print(f"size sweep {time.perf_counter() - sizes_start:.0f} s")
print("parameters per size: " + ", ".join(f"{k} {v:,}" for k, v in
                                          sizes.groupby("size", sort=False)["n_params"].first().items()))
sizes.pivot_table(index=["claim_id", "size"], columns="mechanism", values="value",
                  aggfunc=["mean", "min", "max"], sort=False).round(3)

# %% mystnb={"figure": {"name": "fig-cancel-sizes", "caption": "The two cheap claims per policy size (hidden × layers, parameters): each seed's statistic with the mechanism on and under its control (points) and their means (black); shaded: what the claim expects. Left: flip excess over the isolated control (difference of shares); right: template share of Σ abs(Δ), GRPO − PSR (difference of shares)."}}
claim_rows = sizes["claim_id"].isin(["flip-excess", "template-less-under-grpo"])
fig = figs.plot_scale_sweep(sizes[claim_rows], expect={"flip-excess": (0.0, None),
                                                       "template-less-under-grpo": (None, 0.0)})
savefig(fig, "policy-sizes")
fig;

# %% [markdown]
# What to read off: the table gives this run's numbers and the claims table at the end each
# size's verdict; the flip excess is compared there with its first-order known answer per size.
# The flip *balance* (`flip-both-signs` rows) is described, not judged: it is as high with
# every rollout updated alone. Whether the findings change between the Qwen3 sizes is a
# question for the paper-scale run.

# %% [markdown]
# ## Interventions: mini-batch order and reward-balanced batching
#
# Every run starts from its root seed's fine-tuned policy (the one its claims use) and does
# `rl_steps` generation steps, each
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
                         suite=bool(S.suite), n_workers=n_workers or curve_workers,
                         seed_setup=(partial(root_setup, **setup_args, progress=False)
                                     if scale == "tiny" else None), **suite_args)
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
# Tiny-scale verdicts over the root seeds above (see the top of the chapter for what they
# mean), declared in {py:func}`tokenbook.cancellation_hypothesis.claims.claim_specs`. The flip claim is judged on the
# flip excess over the isolated control, twice: for the step of every parameter
# (`flip-excess`) and of the output layer alone (`flip-excess-output-layer`), each with its
# first-order known answer beside it; the flip balance is described above, not judged. Coupling between identical low-confidence tokens is
# not testable here: for identical tokens φ = (1 − p_j)(1 − p_k) + (overlap of the remaining
# mass) by the algebra of the softmax, so the bucket ordering of φ is settled before anything
# is measured. The peer-masking claim is judged only when the probe has the targets its power
# table asks for, else not testable with both numbers; the batching claims are bounded, not
# tested: the seeds here cannot resolve a gain of the size a benchmark would care about. The
# claims marked `@hidden×layers` repeat the flip-excess and template claims at each policy size
# (the chapter's own size gives the same values as the unmarked claims).

# %%
claims = tiny_claims(sweep, sizes, probe_power=probe_power,
                     batching={"query-preserved-helps": (summary, power_qp, baseline),
                               "reward-balanced-helps": (summary_rb, power_rb,
                                                         "query-preserved")},
                     n_seeds=len(seeds), rl_steps=rl_steps)
print(f"chapter time {time.perf_counter() - chapter_start:.0f} s")
report(claims)
