"""A readable GRPO loop: rollouts → group advantages → clipped, token-mean policy loss.

One training step (cf. Shao et al. 2024; Liu et al. 2025 for Dr. GRPO)::

    rollouts = collect(model, tokenizer, problems, cfg, reward_fn, label_fn)   # G per prompt
    rollouts.advantages = advantages(rewards, G, estimator, scale_rewards)      # per rollout
    for each of cfg.epochs × cfg.n_minibatches mini-batches (in cfg.order):
        ratio = exp(log π_θ − log π_old)                                         # per token
        loss  = agg(−min(ratio·A, clip(ratio, 1−ε_low, 1+ε_high)·A) [+ β·KL])
        AdamW step

Where this differs from TRL's ``GRPOTrainer`` defaults (TRL 1.16): TRL's ``loss_type`` default is
``"dapo"`` (normalise by active tokens of the whole generation batch); ours is ``"token-mean"``
over each optimizer mini-batch (TRL's ``"bnpo"``, verl's ``token-mean``) — identical when there
is one mini-batch. TRL shuffles completions before splitting a generation batch into steps
(our ``order="random"``); ours defaults to ``"prompt"`` (groups kept together). TRL's learning
rate default is 1e-6 (for billion-parameter models); the tiny policy uses 1e-4. KL is off
(β = 0) in both; ε = 0.2 in both; the advantage std uses the same ``+1e-4``.

Estimators: ``"grpo"`` ((r − mean_g r)/(std_g r + 1e-4), or without the std for
``scale_rewards="none"`` = Dr. GRPO), ``"psr"`` (A = r ∈ {1, 0}: positive-sample reinforcement,
Zhu et al. 2025), ``"posonly"`` (GRPO advantages, failed rollouts masked out of the loss).
Log-probabilities are natural logs (nats).
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field, replace
from typing import Any, Callable, Sequence

import numpy as np
import pandas as pd
import torch

from tokenbook.cancellation_hypothesis.batching import (ORDERS, RewardBalancedBuffer,
                                                        balance_posneg_keep, minibatch_indices)
from tokenbook.models.policy import position_ids, sample
from tokenbook.seeds import derive_seed
from tokenbook.validation import check_positive_int

ESTIMATORS = ("grpo", "psr", "posonly")
SCALE_REWARDS = ("group", "batch", "none")
LOSS_AGGS = ("token-mean", "seq-mean", "dr-grpo")


@dataclass
class GRPOConfig:
    """Everything that defines a GRPO run (all seeds are passed separately)."""

    group_size: int = 8              #: G rollouts per prompt
    prompts_per_step: int = 8        #: prompts per rollout batch
    n_minibatches: int = 4           #: optimizer mini-batches per rollout batch
    epochs: int = 1                  #: passes over each rollout batch (PPO epochs)
    lr: float = 1e-4
    weight_decay: float = 0.0
    clip_low: float = 0.2
    clip_high: float = 0.2
    estimator: str = "grpo"
    scale_rewards: str = "group"     #: "group" (GRPO), "batch", "none" (Dr. GRPO)
    reward_scale: float = 1.0        #: rewards are multiplied by this before advantages
    loss_agg: str = "token-mean"     #: "token-mean", "seq-mean" (original GRPO), "dr-grpo"
    kl_beta: float = 0.0
    order: str = "prompt"            #: mini-batch order, see tokenbook.cancellation_hypothesis.batching
    dp_size: int = 2                 #: simulated data-parallel ranks of order="seqlen"
    balance_posneg: bool = False     #: per-query pos/neg balance (batching.balance_posneg_keep)
    reward_balanced: bool = False    #: release updates through a RewardBalancedBuffer
    buffer_size: int = 64            #: its target size B
    max_buffer_steps: int = 4
    temperature: float = 1.0
    max_new_tokens: int = 40
    grad_clip: float = 1.0
    micro_batch_size: int = 0        #: rows per forward/backward (0: whole mini-batch)

    def __post_init__(self) -> None:
        if self.estimator not in ESTIMATORS:
            raise ValueError(f"estimator must be one of {ESTIMATORS}, got {self.estimator!r}")
        if self.scale_rewards not in SCALE_REWARDS:
            raise ValueError(f"scale_rewards must be one of {SCALE_REWARDS}, "
                             f"got {self.scale_rewards!r}")
        if self.loss_agg not in LOSS_AGGS:
            raise ValueError(f"loss_agg must be one of {LOSS_AGGS}, got {self.loss_agg!r}")
        if self.group_size < 2:
            raise ValueError("group_size must be ≥ 2 (a group baseline needs two rollouts)")
        if self.order not in ORDERS:
            raise ValueError(f"order must be one of {ORDERS}, got {self.order!r}")
        if self.dp_size < 1:
            raise ValueError(f"dp_size must be ≥ 1, got {self.dp_size}")


# ----------------------------------------------------------------------------- advantages
def advantages(rewards: torch.Tensor, group_size: int, *, estimator: str = "grpo",
               scale_rewards: str = "group", eps: float = 1e-4
               ) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-rollout advantages and loss mask for rewards laid out prompt-major ([B], B = n·G).

    Returns ``(A [B], keep [B] bool)``. ``grpo``: A = r − mean_group(r), divided by
    ``std_group(r) + eps`` (unbiased std, as TRL) for ``scale_rewards="group"``, by the batch
    std for ``"batch"``, not at all for ``"none"`` (Dr. GRPO). ``psr``: A = r, keep all.
    ``posonly``: GRPO's A, keep only rollouts with r > 0. ``group_size`` is at least 2 (a
    group of one has no spread: its advantage is 0, or NaN once divided by its std), except for
    ``psr``.
    """
    if estimator not in ESTIMATORS:
        raise ValueError(f"estimator must be one of {ESTIMATORS}, got {estimator!r}")
    group_size = check_positive_int(group_size, "group_size",
                                    minimum=1 if estimator == "psr" else 2)
    try:
        r = torch.as_tensor(rewards, dtype=torch.float32).flatten()
    except (TypeError, ValueError, RuntimeError):
        raise TypeError(f"rewards: expected numbers (a tensor or list of floats), got "
                        f"{type(rewards).__name__}") from None
    if r.numel() == 0:
        raise ValueError("rewards: empty; give one reward per rollout (n_prompts × group_size)")
    if not torch.isfinite(r).all():
        raise ValueError(f"rewards: {int((~torch.isfinite(r)).sum())} NaN/inf value(s)")
    if r.numel() % group_size:
        raise ValueError(f"{r.numel()} rewards are not a whole number of groups of {group_size}")
    if estimator not in ESTIMATORS:
        raise ValueError(f"estimator must be one of {ESTIMATORS}, got {estimator!r}")
    keep = torch.ones_like(r, dtype=torch.bool)
    if estimator == "psr":
        return r.clone(), keep
    grouped = r.view(-1, group_size)
    a = (grouped - grouped.mean(1, keepdim=True)).flatten()
    if scale_rewards == "group":
        a = a / (grouped.std(1, keepdim=True).expand_as(grouped).flatten() + eps)
    elif scale_rewards == "batch":
        a = a / (r.std() + eps)
    elif scale_rewards != "none":
        raise ValueError(f"scale_rewards must be one of {SCALE_REWARDS}, got {scale_rewards!r}")
    if estimator == "posonly":
        keep = r > 0
    return a, keep


def mixed_groups(rewards: torch.Tensor, group_size: int) -> int:
    """How many groups (prompt-major rewards in {0, 1}) hold both a correct and a failed
    rollout: the groups whose GRPO advantages are not all zero."""
    g = torch.as_tensor(rewards).reshape(-1, group_size).sum(1)
    return int(((g > 0) & (g < group_size)).sum())


# ----------------------------------------------------------------------------- log-probs
def completion_logprobs(model, input_ids: torch.Tensor, attention_mask: torch.Tensor,
                        prompt_len: int, *, with_entropy: bool = False, with_hidden: bool = False):
    """log π(y_t | x, y_<t) of every completion token: [B, C] nats (differentiable).

    With ``with_entropy`` also the entropy of each next-token distribution [B, C] (nats);
    with ``with_hidden`` also the input of the output layer [B, C, d] and the logits [B, C, V].
    Position ids skip the left padding, exactly as during sampling.
    """
    dev = next(model.parameters()).device
    input_ids, attention_mask = input_ids.to(dev), attention_mask.to(dev)
    captured = {}
    handle = None
    if with_hidden:
        head = model.get_output_embeddings()
        handle = head.register_forward_hook(lambda m, i, o: captured.__setitem__("h", i[0]))
    try:
        out = model(input_ids=input_ids, attention_mask=attention_mask,
                    position_ids=position_ids(attention_mask), use_cache=False)
    finally:
        if handle is not None:
            handle.remove()
    logits = out.logits[:, prompt_len - 1:-1].float()
    target = input_ids[:, prompt_len:]
    logp_all = torch.log_softmax(logits, -1)
    logp = logp_all.gather(-1, target.unsqueeze(-1)).squeeze(-1)
    res: list[Any] = [logp]
    if with_entropy:
        res.append(-(logp_all.exp() * logp_all).sum(-1))
    if with_hidden:
        res.append(captured["h"][:, prompt_len - 1:-1])
        res.append(logits)
    return res[0] if len(res) == 1 else tuple(res)


# ----------------------------------------------------------------------------- loss
def policy_loss(logp: torch.Tensor, old_logp: torch.Tensor, adv: torch.Tensor,
                mask: torch.Tensor, *, clip_low: float = 0.2, clip_high: float = 0.2,
                loss_agg: str = "token-mean", max_len: int | None = None,
                ref_logp: torch.Tensor | None = None, kl_beta: float = 0.0
                ) -> tuple[torch.Tensor, dict]:
    """Clipped surrogate loss (to minimise). ``logp, old_logp, mask``: [B, C]; ``adv``: [B] or
    [B, C]. Per token ℓ = −min(ρA, clip(ρ, 1−ε_low, 1+ε_high)A) (+ β·k3-KL to ``ref_logp``);
    aggregated by ``loss_agg``: ``token-mean`` Σℓm/Σm; ``seq-mean`` mean_i(Σ_t ℓm/Σ_t m);
    ``dr-grpo`` Σℓm/(B·max_len). Returns (loss, stats)."""
    if adv.dim() == 1:
        adv = adv.unsqueeze(1)
    mask = mask.to(logp.dtype)
    ratio = torch.exp(logp - old_logp)
    clipped = torch.clamp(ratio, 1 - clip_low, 1 + clip_high)
    per_token = -torch.min(ratio * adv, clipped * adv)
    if kl_beta:
        if ref_logp is None:
            raise ValueError("kl_beta > 0 needs ref_logp")
        d = ref_logp - logp
        per_token = per_token + kl_beta * (torch.exp(d) - d - 1)
    if loss_agg == "token-mean":
        loss = (per_token * mask).sum() / mask.sum().clamp(min=1.0)
    elif loss_agg == "seq-mean":
        loss = ((per_token * mask).sum(-1) / mask.sum(-1).clamp(min=1.0)).mean()
    elif loss_agg == "dr-grpo":
        loss = (per_token * mask).sum() / (per_token.shape[0] * (max_len or mask.shape[1]))
    else:
        raise ValueError(f"loss_agg must be one of {LOSS_AGGS}, got {loss_agg!r}")
    with torch.no_grad():
        is_clipped = ((ratio < 1 - clip_low) & (adv < 0)) | ((ratio > 1 + clip_high) & (adv > 0))
        stats = {"clip_frac": float((is_clipped * mask).sum() / mask.sum().clamp(min=1.0))}
    return loss, stats


# ----------------------------------------------------------------------------- rollouts
@dataclass
class Rollouts:
    """A batch of rollouts, rows prompt-major. Tensors: ``input_ids``/``attention_mask`` [B, P+C],
    ``completion_mask`` [B, C], ``prompt_ids`` [B] (global prompt id: the group),
    ``rewards``/``advantages`` [B], ``keep`` [B] bool, ``old_logp``/``entropy`` [B, C] (nats,
    from the sampling policy). ``tokens``/``classes``: per row, per completion token."""

    input_ids: torch.Tensor
    attention_mask: torch.Tensor
    completion_mask: torch.Tensor
    prompt_len: int
    prompt_ids: torch.Tensor
    rewards: torch.Tensor
    advantages: torch.Tensor
    keep: torch.Tensor
    old_logp: torch.Tensor
    entropy: torch.Tensor
    texts: list[str] = field(default_factory=list)
    tokens: list[list[str]] = field(default_factory=list)
    classes: list[list[str]] = field(default_factory=list)

    def __len__(self) -> int:
        return self.input_ids.shape[0]

    @property
    def loss_mask(self) -> torch.Tensor:
        """completion_mask with rows not kept zeroed: [B, C]."""
        return self.completion_mask * self.keep.unsqueeze(1).to(self.completion_mask.dtype)

    def select(self, idx) -> "Rollouts":
        idx = torch.as_tensor(np.asarray(idx), dtype=torch.long)
        il = idx.tolist()
        return Rollouts(self.input_ids[idx], self.attention_mask[idx], self.completion_mask[idx],
                        self.prompt_len, self.prompt_ids[idx], self.rewards[idx],
                        self.advantages[idx], self.keep[idx], self.old_logp[idx],
                        self.entropy[idx], [self.texts[i] for i in il],
                        [self.tokens[i] for i in il], [self.classes[i] for i in il])


def concat_rollouts(parts: Sequence[Rollouts], pad_id: int) -> Rollouts:
    """Stack rollouts of different prompt/completion widths (prompts re-left-padded)."""
    P = max(r.prompt_len for r in parts)
    C = max(r.completion_mask.shape[1] for r in parts)

    def fix(r: Rollouts):
        dp, dc = P - r.prompt_len, C - r.completion_mask.shape[1]
        pad = torch.nn.functional.pad
        ids = pad(r.input_ids, (dp, dc), value=pad_id)
        att = pad(r.attention_mask, (dp, dc), value=0)
        return (ids, att, pad(r.completion_mask, (0, dc)), pad(r.old_logp, (0, dc)),
                pad(r.entropy, (0, dc)))

    fixed = [fix(r) for r in parts]
    cat = lambda k: torch.cat([f[k] for f in fixed])  # noqa: E731
    return Rollouts(cat(0), cat(1), cat(2), P, torch.cat([r.prompt_ids for r in parts]),
                    torch.cat([r.rewards for r in parts]),
                    torch.cat([r.advantages for r in parts]), torch.cat([r.keep for r in parts]),
                    cat(3), cat(4), sum((r.texts for r in parts), []),
                    sum((r.tokens for r in parts), []), sum((r.classes for r in parts), []))


@torch.no_grad()
def collect(model, tokenizer, problems: Sequence, cfg: GRPOConfig, reward_fn: Callable,
            label_fn: Callable | None = None, *, seed: int = 0) -> Rollouts:
    """Sample ``cfg.group_size`` completions for each problem, score them with
    ``reward_fn(text, problem) -> float``, compute advantages and the sampling policy's
    log-probs/entropies. ``label_fn(tokens) -> classes`` labels each completion token."""
    s = sample(model, tokenizer, [p.prompt for p in problems], n=cfg.group_size,
               temperature=cfg.temperature, max_new_tokens=cfg.max_new_tokens, seed=seed)
    pidx = s.prompt_index.tolist()
    rewards = torch.tensor([float(reward_fn(t, problems[i])) for t, i in zip(s.texts, pidx)])
    adv, keep = advantages(rewards * cfg.reward_scale, cfg.group_size, estimator=cfg.estimator,
                           scale_rewards=cfg.scale_rewards)
    step = cfg.micro_batch_size or len(s.input_ids)
    parts = [completion_logprobs(model, s.input_ids[i:i + step], s.attention_mask[i:i + step],
                                 s.prompt_len, with_entropy=True)
             for i in range(0, len(s.input_ids), step)]
    logp = torch.cat([p[0].cpu() for p in parts]) * s.completion_mask
    ent = torch.cat([p[1].cpu() for p in parts])
    classes = [label_fn(t) if label_fn else ["other"] * len(t) for t in s.tokens]
    gid = torch.tensor([getattr(problems[i], "id", i) for i in pidx])
    return Rollouts(s.input_ids, s.attention_mask, s.completion_mask, s.prompt_len, gid,
                    rewards, adv, keep, logp, ent * s.completion_mask, s.texts, s.tokens,
                    classes)


def make_optimizer(model, cfg: GRPOConfig, params=None) -> torch.optim.Optimizer:
    """AdamW over ``params`` (default: all parameters) at ``cfg.lr``."""
    return torch.optim.AdamW(params if params is not None else model.parameters(), lr=cfg.lr,
                             weight_decay=cfg.weight_decay)


def update(model, optimizer, roll: Rollouts, cfg: GRPOConfig, *, seed: int = 0,
           ref_model=None) -> dict:
    """``cfg.epochs`` passes of ``cfg.n_minibatches`` optimizer steps over ``roll`` in
    ``cfg.order``. Returns mean loss, clip fraction, and groups per mini-batch."""
    model.train()
    losses, clips, groups = [], [], []
    C = roll.completion_mask.shape[1]
    for epoch in range(cfg.epochs):
        batches = minibatch_indices(roll.prompt_ids.tolist(), min(cfg.n_minibatches, len(roll)),
                                    cfg.order, seed=derive_seed(seed, "epoch", epoch),
                                    lengths=roll.completion_mask.sum(1).tolist(),
                                    dp_size=cfg.dp_size)
        for b in batches:
            mb = roll.select(b)
            n_tok = mb.loss_mask.sum().clamp(min=1)
            step = cfg.micro_batch_size or len(mb)
            optimizer.zero_grad(set_to_none=True)
            loss_total, clip_total = 0.0, 0.0
            for lo in range(0, len(mb), step):      # gradient accumulation over micro-batches
                mu = mb.select(range(lo, min(lo + step, len(mb))))
                logp = completion_logprobs(model, mu.input_ids, mu.attention_mask, mu.prompt_len)
                ref = None
                if cfg.kl_beta:
                    with torch.no_grad():
                        ref = completion_logprobs(ref_model, mu.input_ids, mu.attention_mask,
                                                  mu.prompt_len)
                dev = logp.device
                loss, st = policy_loss(logp, mu.old_logp.to(dev), mu.advantages.to(dev),
                                       mu.loss_mask.to(dev), clip_low=cfg.clip_low,
                                       clip_high=cfg.clip_high, loss_agg=cfg.loss_agg,
                                       max_len=C, ref_logp=ref, kl_beta=cfg.kl_beta)
                # weights that make the accumulated loss equal the mini-batch loss
                w = (float(mu.loss_mask.sum().clamp(min=1) / n_tok)
                     if cfg.loss_agg == "token-mean" else len(mu) / len(mb))
                (loss * w).backward()
                loss_total += float(loss.detach()) * w
                clip_total += st["clip_frac"] * w
            if cfg.grad_clip:
                torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.grad_clip)
            optimizer.step()
            losses.append(loss_total)
            clips.append(clip_total)
            groups.append(len(set(mb.prompt_ids.tolist())))
    model.eval()
    return {"loss": float(np.mean(losses)), "clip_frac": float(np.mean(clips)),
            "groups_per_minibatch": float(np.mean(groups))}


@torch.no_grad()
def evaluate(model, tokenizer, problems: Sequence, reward_fn: Callable, *,
             max_new_tokens: int = 40, batch_size: int = 256) -> float:
    """Greedy accuracy (mean reward) on ``problems``."""
    total = 0.0
    for i in range(0, len(problems), batch_size):
        chunk = problems[i:i + batch_size]
        s = sample(model, tokenizer, [p.prompt for p in chunk], n=1, greedy=True,
                   max_new_tokens=max_new_tokens)
        total += sum(float(reward_fn(t, p)) for t, p in zip(s.texts, chunk))
    return total / max(len(problems), 1)


def train(model, tokenizer, train_problems: Sequence, eval_problems: Sequence, cfg: GRPOConfig,
          reward_fn: Callable, *, steps: int = 20, eval_every: int = 5, seed: int = 0,
          label_fn: Callable | None = None, progress: bool = True) -> pd.DataFrame:
    """Run ``steps`` GRPO generation steps on a copy-free ``model`` (trained in place).

    Each step draws ``cfg.prompts_per_step`` problems (seeded), collects rollouts and either
    updates on them at once or, with ``cfg.reward_balanced``, buffers them and updates when the
    buffer releases a balanced batch. Returns the learning curve: one row per evaluation with
    ``step, accuracy, train_reward, n_updates, loss`` (accuracy = greedy, on ``eval_problems``).
    """
    from tqdm.auto import tqdm

    rng = np.random.default_rng(derive_seed(seed, "prompts"))
    opt = make_optimizer(model, cfg)
    ref = copy.deepcopy(model).eval() if cfg.kl_beta else None
    buf = (RewardBalancedBuffer(cfg.buffer_size, max_buffer_steps=cfg.max_buffer_steps,
                                seed=derive_seed(seed, "buffer")) if cfg.reward_balanced else None)
    rows, n_updates, last_loss, rewards_seen = [], 0, float("nan"), []
    pad = tokenizer.pad_token_id

    def log(step):
        rows.append({"step": step, "accuracy": evaluate(model, tokenizer, eval_problems,
                                                        reward_fn,
                                                        max_new_tokens=cfg.max_new_tokens),
                     "train_reward": float(np.mean(rewards_seen)) if rewards_seen else np.nan,
                     "n_updates": n_updates, "loss": last_loss})
        rewards_seen.clear()

    log(0)
    for step in tqdm(range(1, steps + 1), desc=f"GRPO seed {seed}", disable=not progress):
        pick = rng.choice(len(train_problems), cfg.prompts_per_step, replace=False)
        roll = collect(model, tokenizer, [train_problems[i] for i in pick], cfg, reward_fn,
                       label_fn, seed=derive_seed(seed, "rollouts", step))
        rewards_seen.extend(roll.rewards.tolist())
        if cfg.balance_posneg:  # advantages stay those of the full groups
            keep = balance_posneg_keep(roll.rewards.tolist(), roll.prompt_ids.tolist(),
                                       seed=derive_seed(seed, "balance", step))
            roll = replace(roll, keep=roll.keep & torch.as_tensor(keep))
        batch = roll
        if buf is not None:
            buf.add([roll.select([i]) for i in range(len(roll))], roll.rewards.tolist())
            batch = None
            if buf.should_update(last_step=step == steps):
                items, _ = buf.extract()
                batch = concat_rollouts(items, pad)
        if batch is not None and len(batch):
            st = update(model, opt, batch, cfg, seed=derive_seed(seed, "update", step),
                        ref_model=ref)
            n_updates += 1
            last_loss = st["loss"]
        if step % eval_every == 0 or step == steps:
            log(step)
    return pd.DataFrame(rows)


def with_overrides(cfg: GRPOConfig, **kw) -> GRPOConfig:
    """A copy of ``cfg`` with fields replaced (validated)."""
    return replace(cfg, **kw)
