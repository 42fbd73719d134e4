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
# **Scales.** At the **tiny** scale (default) the task is arithmetic with a scratchpad
# (`<think>3+5=8;8-2=6</think>Answer: 6`), the policy a tiny Qwen2 trained here briefly on worked
# solutions, everything on a CPU in minutes. The **paper** scale
# (`-f params/cancellation_hypothesis/paper.yaml`) runs the same code on a small Qwen model and
# GSM8K {cite}`cobbe2021gsm8k` or DAPO-Math {cite}`yu2025dapo` with `math-verify` answer checking,
# on one GPU.
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

# %%
import time

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from tokenbook.claims import Claim, report
from tokenbook.plotting import savefig, use_book_style
from tokenbook.provenance import show_versions
from tokenbook.rl import dynamics as dyn
from tokenbook.rl.experiments import analysis_rollouts, curve_summary, learning_curves, setup
from tokenbook.rl.grpo import GRPOConfig, mixed_groups, with_overrides
from tokenbook.rl.value import value_of_flips

use_book_style()
show_versions()
chapter_start = time.perf_counter()

# %% tags=["parameters"]
scale = "tiny"              # "tiny": arithmetic world + tiny Qwen2 (CPU); "paper": Qwen + GSM8K
seed = 0
model_id = ""               # paper scale: a Qwen checkpoint id or folder
dataset = "gsm8k"           # paper scale: "gsm8k" or "dapo"
data_files = None           # paper scale: local parquet/json files in the hub schema (optional)
device = "cpu"
n_train = 2000              # training prompts (tiny: also the SFT set)
n_eval = 64                 # held-out prompts for greedy accuracy
hidden_size = 64            # tiny policy size
num_layers = 2
sft_steps = 200             # brief SFT: format confident, reasoning not
sft_lr = 0.003
group_size = 8              # G rollouts per prompt
prompts_per_step = 8
n_minibatches = 4           # optimizer mini-batches per rollout batch
learning_rate = 0.0001      # Adam, GRPO runs
micro_batch_size = 0        # rows per forward/backward (0: whole mini-batch; paper: small)
max_new_tokens = 32
temperature = 1.0
analysis_prompts = 8        # prompts in the token-dynamics batch
analysis_lr = 0.05          # SGD step of the one-update analyses
first_order_lr = 0.001      # SGD step of the output-layer-only first-order check
probe_targets = 4           # peer-masking probe
probe_sets = 2
probe_set_size = 3
value_per_cell = 12         # MC value: tokens per (rollout sign × boosted/suppressed) cell
value_continuations = 8
rl_steps = 40              # learning curves: generation steps per run
eval_every = 8
seeds = [0, 1, 2, 3, 4]
buffer_size = 64            # reward-balanced buffer target size

# %%
S = setup(scale=scale, seed=seed, n_train=n_train, n_eval=n_eval, hidden_size=hidden_size,
          num_layers=num_layers, sft_steps=sft_steps, sft_lr=sft_lr, model_id=model_id,
          dataset=dataset, data_files=data_files, device=device)
cfg = GRPOConfig(group_size=group_size, prompts_per_step=prompts_per_step,
                 n_minibatches=n_minibatches, lr=learning_rate, max_new_tokens=max_new_tokens,
                 temperature=temperature, buffer_size=buffer_size,
                 micro_batch_size=micro_batch_size)
print(S.train_problems[0].prompt, "→", S.train_problems[0].answer)

# %% [markdown]
# ## The starting policy and one rollout batch
#
# The analyses start from the briefly fine-tuned policy. A useful starting point has groups with
# both correct and failed rollouts; the table shows the batch's mean reward and how many groups
# are mixed.

# %%
policy, roll = analysis_rollouts(S, cfg, n_prompts=analysis_prompts, seed=seed)
print(f"mean reward {roll.rewards.mean():.2f}; mixed groups "
      f"{mixed_groups(roll.rewards, group_size)}/{len(roll.rewards) // group_size}")
pd.DataFrame({"completion": roll.texts[:6], "reward": roll.rewards[:6].tolist()})

# %% [markdown]
# ## Token flipping
#
# One on-policy GRPO step on this batch; Δ log π of every sampled token (nats). The token
# dynamics table has one row per sampled token.

# %%
table = dyn.token_dynamics(policy, roll, lr=analysis_lr)
table["entropy_bucket"] = dyn.entropy_bucket(table["entropy"])
flips = dyn.flip_ratios(table)
flips_by = dyn.flip_ratios(table, by=["class", "entropy_bucket"])
display(flips)
flips_by

# %%
fig, ax = plt.subplots()
for name, sub in table.groupby(np.where(table["reward"] > 0, "correct", "failed")):
    ax.hist(sub["delta"], bins=40, alpha=0.6, label=f"{name} rollouts")
ax.axvline(0, color="k", lw=0.8)
ax.set_xlabel("Δ log π after one update (nats)")
ax.set_ylabel("sampled tokens")
ax.legend()
savefig(fig, "delta-logp-by-rollout-sign");

# %% [markdown]
# ## Coupling: φ, the first-order prediction, and peer masking
#
# First the identity at work: an SGD step on the output layer only, predicted token by token
# from φ and hidden-state similarity, against the actual change. Then φ·(h_j·h_k) for token pairs
# of the same prompt, by same/different token and confidence (both sampled-token probabilities
# below 0.5).

# %%
fo = dyn.first_order_prediction(policy, roll, lr=first_order_lr)
fo_r = float(np.corrcoef(fo["predicted"], fo["actual"])[0, 1])
self_sign_flip = float(np.mean(np.sign(fo["self"]) != np.sign(fo["predicted"])))
print(f"corr(predicted, actual) = {fo_r:.5f}; coupling term overrules the self term for "
      f"{self_sign_flip:.1%} of tokens")
coup = dyn.coupling_table(policy, roll, seed=seed)
coup_summary = coup.groupby("bucket").agg(phi=("phi", "mean"), K=("K", "mean"),
                                          n=("K", "size"))
coup_summary

# %%
fig, axes = plt.subplots(1, 2, figsize=(10, 4))
axes[0].scatter(fo["predicted"], fo["actual"], s=6)
lim = np.abs(fo[["predicted", "actual"]].to_numpy()).max()
axes[0].plot([-lim, lim], [-lim, lim], "k--", lw=0.8)
axes[0].set_xlabel("first-order prediction of Δ log π (nats)")
axes[0].set_ylabel("actual Δ log π, output layer step (nats)")
coup_summary["K"].plot.barh(ax=axes[1])
axes[1].set_xlabel("mean coupling K = φ·(h_j·h_k)")
axes[1].set_ylabel("")
savefig(fig, "coupling");

# %% [markdown]
# The causal probe: mask three peers of a target token (from the same prompt's rollouts) out of
# the loss, redo the update, and read τ = Δ_full − Δ_mask (nats) by peer bucket.

# %%
probe = dyn.peer_masking_probe(policy, roll, lr=analysis_lr, n_targets=probe_targets,
                               n_sets=probe_sets, set_size=probe_set_size, seed=seed)
probe_summary = (probe.assign(abs_tau=probe["tau"].abs())
                 .groupby(["same_token", "high_entropy", "peer_adv"])
                 .agg(mean_tau=("tau", "mean"), mean_abs_tau=("abs_tau", "mean"),
                      n=("tau", "size")).reset_index()) if len(probe) else probe
probe_summary

# %% [markdown]
# ## Template vs reasoning: GRPO vs positive-only
#
# The same rollouts updated once with GRPO advantages and once with PSR (1 for correct, 0 for
# failed): the share of the update mass Σ|Δ| on each token class, and the mean signed change of
# template tokens.

# %%
table_psr = dyn.token_dynamics(policy, dyn.with_estimator(roll, group_size, "psr"),
                               lr=analysis_lr)
shares = pd.DataFrame({"GRPO": dyn.update_mass_share(table),
                       "positive-only (PSR)": dyn.update_mass_share(table_psr)})
drift = pd.Series({"GRPO": table.loc[table["class"] == "template", "delta"].mean(),
                   "positive-only (PSR)": table_psr.loc[table_psr["class"] == "template",
                                                        "delta"].mean()},
                  name="mean Δ on template tokens (nats)")
display(shares)
drift

# %% [markdown]
# ## Value of boosted vs suppressed tokens
#
# For a seeded sample of boosted and suppressed tokens in each rollout sign, the success rate of
# continuations sampled after the token (Monte-Carlo value).

# %%
by_id = {p.id: p for p in S.train_problems}
values = value_of_flips(policy, S.tokenizer, roll, table, by_id, S.reward_fn,
                        n_per_cell=value_per_cell, n_continuations=value_continuations,
                        seed=seed, max_new_tokens=max_new_tokens, temperature=temperature)
value_summary = values.groupby(["rollout", "direction"])["value"].agg(["mean", "size"]).unstack()
value_summary

# %% [markdown]
# ## Interventions: mini-batch order and reward-balanced batching
#
# Every run starts from the same fine-tuned policy and does `rl_steps` generation steps, each
# updating in `n_minibatches` Adam steps. Conditions: prompt-major mini-batches (query-preserved),
# round-robin (each group spread over every mini-batch), random (TRL's shuffle), and prompt-major
# with the reward-balanced buffer. Greedy accuracy on held-out prompts; bands are bootstrap 95%
# CIs over seeds.

# %%
conditions = {"query-preserved": with_overrides(cfg, order="prompt"),
              "round-robin": with_overrides(cfg, order="round_robin"),
              "random": with_overrides(cfg, order="random"),
              "reward-balanced": with_overrides(cfg, order="prompt", reward_balanced=True)}
curves = learning_curves(S, conditions, seeds, steps=rl_steps, eval_every=eval_every)
summary = curve_summary(curves, reference="round-robin", seed=seed)
summary_rb = curve_summary(curves, reference="query-preserved", seed=seed)
summary

# %%
from tokenbook.stats import bootstrap_ci

fig, ax = plt.subplots()
for name, sub in curves.groupby("condition", sort=False):
    m = sub.groupby("step")["accuracy"].mean()
    ci = sub.groupby("step")["accuracy"].apply(
        lambda v: bootstrap_ci(v.values, seed=seed) if len(v) > 1 else (v.mean(), v.mean()))
    ax.plot(m.index, m.values, marker="o", label=name)
    ax.fill_between(m.index, [c[0] for c in ci], [c[1] for c in ci], alpha=0.2)
ax.set_xlabel("GRPO generation step")
ax.set_ylabel("greedy accuracy on held-out prompts")
ax.legend()
savefig(fig, "learning-curves");

# %% [markdown]
# ## Claims
#
# Every verdict below is computed from this run. At the tiny scale few steps and a handful of seeds give
# wide intervals: a claim that does not hold here is reported as not holding at this scale. The
# batching claims hold only when the whole bootstrap interval of the paired difference lies above
# zero; the peer-masking claim compares mean |τ| of same-token, high-entropy peers with every
# other (token × entropy) bucket.

# %%
fc = flips.set_index("rollout")["flip_ratio"]
flip_lo, flip_hi = sorted([fc.get("correct", np.nan), fc.get("incorrect", np.nan)])
K_by = coup_summary["K"]
key_bucket = "same token, both low-confidence"
others = K_by.drop(key_bucket, errors="ignore")
if len(probe):
    pt = probe.assign(abs_tau=probe["tau"].abs()).groupby(["same_token", "high_entropy"])[
        "abs_tau"].mean()
    tau_gap = pt.get((True, True), np.nan) - pt.drop((True, True), errors="ignore").max()
else:
    tau_gap = np.nan
val_items = {}
for sign in ("correct", "incorrect"):
    try:
        val_items[sign] = bool(value_summary.loc[sign, ("mean", "boosted")]
                               > value_summary.loc[sign, ("mean", "suppressed")])
    except KeyError:
        pass
val_gap = values.groupby("direction")["value"].mean()
s = summary.set_index("condition")
s_rb = summary_rb.set_index("condition")
claims = [
    Claim.between("flip-both-signs", "Correct and failed rollouts show similar shares of "
                  "flipped tokens",
                  statistic="min/max of flip ratios (suppressed in correct, boosted in failed)",
                  value=flip_lo / flip_hi if flip_hi > 0 else np.nan, low=0.5, high=1.0,
                  paper="abstract; §3", flip_correct=fc.get("correct"),
                  flip_failed=fc.get("incorrect")),
    Claim.greater("coupling-identical-low-conf", "Coupling is strongest between identical "
                  "low-confidence tokens",
                  statistic="mean K (same token, both p<0.5) − max mean K of the other buckets",
                  value=K_by.get(key_bucket, np.nan) - others.max() if len(others) else np.nan,
                  paper="abstract; §4"),
    Claim.greater("peer-masking-same-high-entropy", "Masking same-token, high-entropy peers "
                  "changes a target's update most",
                  statistic="mean |τ| (same token, high entropy) − max over other buckets (nats)",
                  value=tau_gap, paper="authors' causal probe (code)",
                  note=f"{probe_targets} targets × {probe_sets} sets at this scale"),
    Claim.less("template-less-under-grpo", "GRPO moves template tokens less than positive-only "
               "training", statistic="template share of Σ|Δ|: GRPO − PSR",
               value=shares.loc["template", "GRPO"] - shares.loc["template",
                                                                  "positive-only (PSR)"]
               if "template" in shares.index else np.nan, paper="abstract (evidence 1)"),
    Claim.all_of("boosted-higher-value", "Boosted tokens have higher value than suppressed ones, "
                 "in correct and in failed rollouts",
                 statistic="MC value boosted > suppressed, per rollout sign",
                 values=val_items, paper="abstract (evidence 2)",
                 value_boosted=val_gap.get("boosted"), value_suppressed=val_gap.get("suppressed")),
    Claim.greater("query-preserved-helps", "Query-preserved mini-batching improves training",
                  statistic="lower end of the 95% bootstrap CI of the paired (same seed) AUC "
                            "difference, query-preserved − round-robin",
                  value=s.loc["query-preserved", "diff_lo"], paper="abstract (intervention 1)",
                  note=f"mean difference {s.loc['query-preserved', 'auc_diff']:+.3f} over "
                       f"{len(seeds)} seeds × {rl_steps} steps"),
    Claim.greater("reward-balanced-helps", "Reward-balanced batching improves training",
                  statistic="lower end of the 95% bootstrap CI of the paired AUC difference, "
                            "reward-balanced − query-preserved",
                  value=s_rb.loc["reward-balanced", "diff_lo"],
                  paper="abstract (intervention 2)",
                  note=f"mean difference {s_rb.loc['reward-balanced', 'auc_diff']:+.3f} over "
                       f"{len(seeds)} seeds × {rl_steps} steps"),
]
print(f"chapter time {time.perf_counter() - chapter_start:.0f} s")
report(claims)
