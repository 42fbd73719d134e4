"""Token-level learning dynamics of one GRPO update (the paper's §3–§4 measurements).

* :func:`token_dynamics` — Δ log π of every sampled token before vs after one update on the same
  batch: the *token dynamics table* (one row per sampled token; columns ``step, prompt_id,
  rollout_id, pos, token, class, reward, advantage, in_loss, logp_before, logp_after, delta,
  entropy``; log-probs and entropy in nats).
* :func:`token_dynamics_isolated` — the same table when each rollout is updated alone (the
  control with cross-rollout coupling removed). Both take ``head_only=True`` for a step of the
  output layer alone, where the coupling is exactly the linear-softmax kernel.
* :func:`flip_ratios` — Pr(Δ < 0 | correct rollout) and Pr(Δ > 0 | incorrect rollout), by token
  class and entropy bucket.
* :func:`phi_pairs` / :func:`phi_matrix` — the coupling term
  φ_jk = (e_{a_j} − π_j)·(e_{a_k} − π_k) = 1[a_j = a_k] − π_j(a_k) − π_k(a_j) + ⟨π_j, π_k⟩.
* :func:`first_order_terms` — the closed-form first-order Δ log π of an output-layer SGD step,
  split into self, within-rollout and cross-rollout terms.
* :func:`first_order_prediction` — Δ log π_j ≈ (η/N) Σ_k A_k φ_jk (h_j·h_k) for an SGD step of
  size η on the output layer only, against the actual change of that step.
* :func:`coupling_table` — φ and the output-layer kernel K = φ·(h_j·h_k) for token pairs of the
  same prompt, by same/different token × confidence.
* :func:`peer_masking_probe` — τ = Δ_full − Δ_mask for the 2×2×2 peer buckets: random peer
  sets and the authors' top-scored set (:func:`peer_score`, :func:`top_scored`).
* :func:`update_mass_share` — the share of Σ|Δ| on each token class.

The analysis update is the authors' ``recipe/_logprob`` regime: one on-policy step on the whole
batch as a single mini-batch (ratio = 1, clipping inactive). We take it with plain SGD at
``lr`` so that the step is a pure gradient step (a fresh Adam's first step is ≈ lr·sign(g),
which hides magnitudes); this reading is ours.
"""

from __future__ import annotations

import atexit
import copy
import multiprocessing
import os
import pickle
import signal
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from typing import Sequence

import numpy as np
import pandas as pd
import torch
from scipy import stats
from torch.nn.attention import SDPBackend, sdpa_kernel

from tokenbook.cancellation_hypothesis.grpo import (Rollouts, advantages, completion_logprobs,
                                                    policy_loss)
from tokenbook.scoring import softmax_row_dots
from tokenbook.validation import check_positive_int, check_table

DYNAMICS_COLUMNS = ["step", "prompt_id", "rollout_id", "pos", "token", "class", "reward",
                    "advantage", "in_loss", "logp_before", "logp_after", "delta", "entropy"]


def with_estimator(roll: Rollouts, group_size: int, estimator: str,
                   scale_rewards: str = "group") -> Rollouts:
    """The same rollouts with advantages recomputed by another estimator (rows prompt-major)."""
    out = copy.copy(roll)
    out.advantages, out.keep = advantages(roll.rewards, group_size, estimator=estimator,
                                          scale_rewards=scale_rewards)
    return out


def check_rows_per_pass(rows_per_pass: int | None) -> None:
    """``rows_per_pass``: None (the whole batch in one pass) or a positive whole number."""
    if rows_per_pass is not None and (isinstance(rows_per_pass, bool)
                                      or not isinstance(rows_per_pass, int) or rows_per_pass < 1):
        raise ValueError(f"rows_per_pass must be a positive whole number or None, got "
                         f"{rows_per_pass!r}")


def _row_chunks(n_rows: int, rows_per_pass: int | None) -> list[list[int]]:
    """The batch's rows in passes of ``rows_per_pass`` (None: one pass)."""
    check_rows_per_pass(rows_per_pass)
    if rows_per_pass is None or rows_per_pass >= n_rows:
        return [list(range(n_rows))]
    return [list(range(i, min(i + rows_per_pass, n_rows)))
            for i in range(0, n_rows, rows_per_pass)]


def _row_parts(roll: Rollouts, rows_per_pass: int | None) -> list[tuple[list[int], Rollouts]]:
    """``(rows, their rollouts)`` per pass of :func:`_row_chunks`; one pass is the batch itself
    (not a copy, so a one-pass step computes exactly what it did before passes existed)."""
    chunks = _row_chunks(len(roll), rows_per_pass)
    if len(chunks) == 1:
        return [(chunks[0], roll)]
    return [(rows, roll.select(rows)) for rows in chunks]


def _chunk_weight(mask: torch.Tensor, rows: list[int], loss_agg: str) -> float:
    """What a pass over ``rows`` weighs in the batch's loss: ``policy_loss`` of the rows alone,
    times this, summed over the passes, is the batch's loss (``token-mean``: the rows' share of
    the loss tokens; ``seq-mean`` and ``dr-grpo``: their share of the rows)."""
    if loss_agg == "token-mean":
        return float(mask[rows].sum().clamp(min=1.0) / mask.sum().clamp(min=1.0))
    return len(rows) / mask.shape[0]


def sgd_step(model, roll: Rollouts, lr: float, *, params: Sequence[torch.nn.Parameter] | None = None,
             loss_mask: torch.Tensor | None = None, loss_agg: str = "token-mean",
             rows_per_pass: int | None = None) -> None:
    """One on-policy SGD step of size ``lr`` on the whole batch (ratio = 1, so the clipped loss
    is the plain policy gradient); only ``params`` move if given (others keep their values).
    ``rows_per_pass``: the gradient is summed over passes of this many rollouts (None: one
    pass), the same step up to float rounding at the memory of one pass (paper scale: a
    Qwen3-1.7B batch of 32 rollouts of 640 tokens took 95 GB in one pass)."""
    mask = roll.loss_mask if loss_mask is None else loss_mask
    params = list(params) if params is not None else list(model.parameters())
    model.train()
    grads = [None] * len(params)
    for rows, part in _row_parts(roll, rows_per_pass):
        logp = completion_logprobs(model, part.input_ids, part.attention_mask, part.prompt_len)
        loss, _ = policy_loss(logp, logp.detach(), part.advantages.to(logp.device),
                              mask[rows].to(logp.device), loss_agg=loss_agg,
                              max_len=mask.shape[1])
        loss = loss * _chunk_weight(mask, rows, loss_agg)     # one pass: × 1.0
        for j, g in enumerate(torch.autograd.grad(loss, params, allow_unused=True)):
            if g is not None:
                grads[j] = g if grads[j] is None else grads[j] + g
    with torch.no_grad():
        for p, g in zip(params, grads):
            if g is not None:
                p.add_(g, alpha=-lr)
    model.eval()


@torch.no_grad()
def _logp(model, roll: Rollouts) -> torch.Tensor:
    return completion_logprobs(model, roll.input_ids, roll.attention_mask, roll.prompt_len).cpu()


def _moving(model, head_only: bool) -> list[torch.nn.Parameter] | None:
    """The parameters an analysis step moves: the output layer's weight (``head_only``, where
    the coupling is the linear-softmax kernel φ_jk (h_j·h_k)) or all (None)."""
    return [model.get_output_embeddings().weight] if head_only else None


def token_dynamics(model, roll: Rollouts, *, lr: float = 1e-2, step: int = 0,
                   loss_agg: str = "token-mean", head_only: bool = False,
                   rows_per_pass: int | None = None) -> pd.DataFrame:
    """The token dynamics table for one SGD update of a copy of ``model`` on ``roll``
    (``head_only``: only the output layer moves; ``rows_per_pass``: :func:`sgd_step`'s)."""
    check_rows_per_pass(rows_per_pass)
    m = copy.deepcopy(model)
    before = _logp(m, roll)
    sgd_step(m, roll, lr, loss_agg=loss_agg, params=_moving(m, head_only),
             rows_per_pass=rows_per_pass)
    after = _logp(m, roll)
    return _table(roll, before, after, step)


def adamw_step(model, roll: Rollouts, lr: float, *, weight_decay: float = 0.01,
               betas: tuple[float, float] = (0.9, 0.999), eps: float = 1e-8,
               loss_agg: str = "token-mean") -> None:
    """One on-policy step of a fresh ``torch.optim.AdamW`` (verl's actor defaults: weight decay
    0.01, betas (0.9, 0.999), eps 1e-8) on the whole batch. A fresh AdamW's first step moves
    every parameter by ≈ lr·sign(g) (plus decay), so magnitudes are equalised across
    parameters, unlike :func:`sgd_step`."""
    model.train()
    opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=weight_decay, betas=betas,
                            eps=eps)
    logp = completion_logprobs(model, roll.input_ids, roll.attention_mask, roll.prompt_len)
    loss, _ = policy_loss(logp, logp.detach(), roll.advantages.to(logp.device),
                          roll.loss_mask.to(logp.device), loss_agg=loss_agg)
    opt.zero_grad(set_to_none=True)
    loss.backward()
    opt.step()
    model.eval()


def optimizer_comparison(model, roll: Rollouts, *, sgd_lr: float = 0.05,
                         adamw_lr: float = 1e-3) -> pd.DataFrame:
    """Flip ratios of one analysis step taken with plain SGD and with AdamW (verl settings):
    :func:`flip_ratios` of each, with an ``optimizer`` column."""
    m = copy.deepcopy(model)
    before = _logp(m, roll)
    adamw_step(m, roll, adamw_lr)
    adam = _table(roll, before, _logp(m, roll), 0)
    sgd = token_dynamics(model, roll, lr=sgd_lr)
    return pd.concat([flip_ratios(sgd).assign(optimizer="SGD"),
                      flip_ratios(adam).assign(optimizer="AdamW")], ignore_index=True)


def dual_update(model, roll: Rollouts, *, lr: float = 0.05) -> pd.DataFrame:
    """The authors' dual-update dump: Δ log π of every sampled token after an SGD step on the
    output layer only (``delta_head``) and after the full update (``delta_full``), both from
    the same start (nats); the token dynamics table with these two columns. Where the signs
    agree, the softmax-layer (φ-type) coupling explains the full update's direction."""
    m = copy.deepcopy(model)
    before = _logp(m, roll)
    sgd_step(m, roll, lr, params=[m.get_output_embeddings().weight])
    head = _logp(m, roll)
    full = token_dynamics(model, roll, lr=lr)
    cm = roll.completion_mask.bool()
    rows, cols = torch.nonzero(cm, as_tuple=True)
    return full.rename(columns={"delta": "delta_full"}).assign(
        delta_head=(head - before)[rows, cols].numpy())


def dual_update_agreement(dual: pd.DataFrame, *, by: Sequence[str] = ("rollout",)
                          ) -> pd.DataFrame:
    """How far the output-layer-only step explains the full one (:func:`dual_update`'s table).

    Per group of ``by`` (``rollout``: correct if reward > 0, else incorrect): ``agree`` — the
    share of tokens whose Δ log π has the same sign under both steps (zeros count as
    disagreeing), ``spearman`` — the rank correlation of the two Δs, ``n`` tokens."""
    check_table(dual, "dual-update table", columns=["delta_head", "delta_full", "reward"],
                numeric=["delta_head", "delta_full"])
    t = dual.assign(rollout=np.where(dual["reward"] > 0, "correct", "incorrect"))
    rows = []
    for key, g in t.groupby(list(by), observed=True):
        key = key if isinstance(key, tuple) else (key,)
        same = np.sign(g["delta_head"]) * np.sign(g["delta_full"]) > 0
        rho = (stats.spearmanr(g["delta_head"], g["delta_full"]).statistic
               if len(g) > 2 else float("nan"))
        rows.append({**dict(zip(by, key)), "agree": float(same.mean()),
                     "spearman": float(rho), "n": len(g)})
    return pd.DataFrame(rows)


def token_dynamics_isolated(model, roll: Rollouts, *, lr: float = 1e-2, step: int = 0,
                            head_only: bool = False) -> pd.DataFrame:
    """The token dynamics table when every rollout is updated *alone* (the coupling-off
    control): for each row i, one SGD step on a copy of ``model`` whose loss holds only row i's
    tokens, with the step scaled by (row i's loss tokens / the batch's) so each token's own
    (self) term is the one of the full-batch step; Δ is read on row i only. Cross-rollout
    coupling is removed by construction: Δ of row i does not depend on any other row.

    Each step runs on row i alone (``roll.select([i])``: the token-mean loss over its own
    tokens is the batch loss with the other rows masked), and its log-probabilities before and
    after are read from the same one-row forward pass, so Δ holds no batch-shape rounding.
    ``head_only``: only the output layer moves (the control of ``token_dynamics(...,
    head_only=True)``)."""
    state = copy.deepcopy(model.state_dict())
    m = copy.deepcopy(model)
    before = _logp(m, roll)
    after = before.clone()
    lm = roll.loss_mask
    n_all = float(lm.sum().clamp(min=1))
    for i in range(len(roll)):
        n_i = float(lm[i].sum())
        if n_i == 0:
            continue
        row = roll.select([i])
        m.load_state_dict(state)
        before[i] = _logp(m, row)[0]
        sgd_step(m, row, lr * n_i / n_all, params=_moving(m, head_only))
        after[i] = _logp(m, row)[0]
    return _table(roll, before, after, step)


def _table(roll: Rollouts, before: torch.Tensor, after: torch.Tensor, step: int) -> pd.DataFrame:
    cm = roll.completion_mask.bool()
    rows, cols = torch.nonzero(cm, as_tuple=True)
    r, c = rows.numpy(), cols.numpy()
    # rollout index within its group
    pid = roll.prompt_ids.numpy()
    rollout_id = np.zeros(len(roll), dtype=int)
    for g in np.unique(pid):
        idx = np.flatnonzero(pid == g)
        rollout_id[idx] = np.arange(idx.size)
    frame = pd.DataFrame({
        "step": step, "prompt_id": pid[r], "rollout_id": rollout_id[r], "pos": c,
        "token": [roll.tokens[i][j] if j < len(roll.tokens[i]) else "" for i, j in zip(r, c)],
        "class": [roll.classes[i][j] if j < len(roll.classes[i]) else "template"
                  for i, j in zip(r, c)],
        "reward": roll.rewards.numpy()[r], "advantage": roll.advantages.numpy()[r],
        "in_loss": roll.loss_mask.bool().numpy()[r, c],
        "logp_before": before.numpy()[r, c], "logp_after": after.numpy()[r, c],
        "entropy": roll.entropy.numpy()[r, c]})
    frame["delta"] = frame["logp_after"] - frame["logp_before"]
    frame["row"] = r
    return frame[DYNAMICS_COLUMNS + ["row"]]


def entropy_bucket(entropy: pd.Series, quantile: float = 0.8) -> pd.Series:
    """``"high"`` for the top (1 − quantile) of entropies (the authors' 0.8 quantile), else
    ``"low"``."""
    thr = float(np.quantile(entropy, quantile))
    return pd.Series(np.where(entropy > thr, "high", "low"), index=entropy.index)


def flip_ratios(table: pd.DataFrame, *, tol: float = 0.0, by: Sequence[str] = ()) -> pd.DataFrame:
    """Flip ratios of a token dynamics table.

    For correct rollouts (reward > 0) the share of tokens *suppressed* (Δ < −tol); for
    incorrect ones the share *boosted* (Δ > tol). ``by``: extra grouping columns (e.g.
    ``"class"``, ``"entropy_bucket"``). Columns: ``rollout`` (``correct``/``incorrect``), the
    ``by`` columns, ``flip_ratio``, ``boosted``, ``suppressed`` (shares) and ``n`` tokens.
    """
    t = table.assign(rollout=np.where(table["reward"] > 0, "correct", "incorrect"),
                     boosted=table["delta"] > tol, suppressed=table["delta"] < -tol)
    keys = ["rollout", *by]
    g = t.groupby(keys, observed=True)
    out = g.agg(boosted=("boosted", "mean"), suppressed=("suppressed", "mean"),
                n=("delta", "size")).reset_index()
    out["flip_ratio"] = np.where(out["rollout"] == "correct", out["suppressed"], out["boosted"])
    return out[keys + ["flip_ratio", "boosted", "suppressed", "n"]]


def update_mass_share(table: pd.DataFrame, by: str = "class") -> pd.Series:
    """Share of the total update mass Σ|Δ| carried by each value of ``by`` (sums to 1)."""
    mass = table["delta"].abs().groupby(table[by]).sum()
    return mass / mass.sum()


# ----------------------------------------------------------------------------- coupling φ
def phi_pairs(logits: torch.Tensor, actions: torch.Tensor, pairs: torch.Tensor) -> torch.Tensor:
    """φ_jk for each (j, k) in ``pairs`` [P, 2]; ``logits`` [N, V], ``actions`` [N] (token ids).

    φ_jk = 1[a_j = a_k] − π_j(a_k) − π_k(a_j) + ⟨π_j, π_k⟩ (dimensionless), the inner product of
    the logit-space gradients of log π_j(a_j) and log π_k(a_k). ⟨π_j, π_k⟩ comes from
    ``tokenbook.scoring.softmax_row_dots``.
    """
    logits = logits.detach()
    pairs = torch.as_tensor(pairs, dtype=torch.long)
    if pairs.ndim != 2 or pairs.shape[1] != 2:
        raise ValueError(f"pairs must be [P, 2], got {tuple(pairs.shape)}")
    j, k = pairs[:, 0], pairs[:, 1]
    logz = torch.logsumexp(logits.float(), -1)
    pj_ak = torch.exp(logits[j, actions[k]].float() - logz[j])
    pk_aj = torch.exp(logits[k, actions[j]].float() - logz[k])
    same = (actions[j] == actions[k]).float()
    return same - pj_ak - pk_aj + softmax_row_dots(logits.float(), pairs).float()


def phi_matrix(logits: torch.Tensor, actions: torch.Tensor) -> torch.Tensor:
    """The full [N, N] φ matrix as (E − Π)(E − Π)ᵀ (E one-hot of ``actions``, Π softmax)."""
    p = torch.softmax(logits.detach().double(), -1)
    g = torch.nn.functional.one_hot(actions, p.shape[-1]).double() - p
    return (g @ g.T).float()


def _flat(roll: Rollouts, model):
    """Flattened valid tokens: logits [N, V], h [N, d], actions [N], (row, col) indices and
    log π of each token [N] (nats)."""
    with torch.no_grad():
        logp, h, logits = completion_logprobs(model, roll.input_ids, roll.attention_mask,
                                              roll.prompt_len, with_hidden=True)
    logp, h, logits = logp.cpu(), h.cpu(), logits.cpu()
    cm = roll.completion_mask.bool()
    rows, cols = torch.nonzero(cm, as_tuple=True)
    actions = roll.input_ids[:, roll.prompt_len:][rows, cols]
    return logits[rows, cols], h[rows, cols].float(), actions, rows, cols, logp[rows, cols]


def first_order_terms(logits: torch.Tensor, h: torch.Tensor, actions: torch.Tensor,
                      advantages: torch.Tensor, rows: torch.Tensor, *, lr: float,
                      n_loss: int) -> dict[str, torch.Tensor]:
    """The first-order Δ log π (nats) of every token for one SGD step of size ``lr`` on the
    output layer W (logits z_j = W h_j) of the loss −(1/``n_loss``) Σ_k A_k log π_k(a_k).

    Δ log π_j ≈ (η/N) Σ_k A_k φ_jk (h_j·h_k), split by k into three terms (float64, [N]):
    ``self`` (k = j), ``within`` (k ≠ j in the same row, i.e. rollout, as ``rows``) and
    ``across`` (k in other rows: the cross-rollout coupling). ``self + within`` is the
    first-order change when every rollout is updated alone with the step scaled by its share
    of the loss tokens (:func:`token_dynamics_isolated`); ``self + within + across`` the
    full-batch one. ``advantages`` [N] must be 0 on tokens outside the loss. Shapes: logits
    [N, V], h [N, d], actions/advantages/rows [N].
    """
    logits, h = logits.detach().double(), h.detach().double()
    A = torch.as_tensor(advantages).double()
    rows = torch.as_tensor(rows)
    V = logits.shape[-1]
    g = torch.nn.functional.one_hot(actions, V).double() - torch.softmax(logits, -1)  # [N, V]
    scale = lr / max(int(n_loss), 1)
    # Σ_k A_k φ_jk (h_j·h_k) = g_jᵀ M h_j with M = Σ_k A_k g_k h_kᵀ ([V, d]): no [N, N] matrix
    M = g.T @ (A[:, None] * h)
    total = ((g @ M) * h).sum(-1) * scale
    self_term = scale * A * (g * g).sum(-1) * (h * h).sum(-1)
    own = torch.zeros_like(total)
    for r in torch.unique(rows):
        idx = rows == r
        M_r = g[idx].T @ (A[idx, None] * h[idx])
        own[idx] = ((g[idx] @ M_r) * h[idx]).sum(-1) * scale
    return {"self": self_term, "within": own - self_term, "across": total - own}


def first_order_prediction(model, roll: Rollouts, *, lr: float = 1e-3) -> pd.DataFrame:
    """Predicted vs actual Δ log π of every sampled token for one SGD step of size ``lr`` on the
    output layer (``get_output_embeddings()``) only, token-mean loss over the loss tokens.

    prediction_j = (η/N) Σ_k A_k φ_jk (h_j·h_k) (k over the N loss tokens); split into the
    ``self`` term (k = j) and the ``coupling`` term (k ≠ j), the coupling split again into
    ``within_rollout`` (k in the same rollout) and ``across_rollouts`` (k in other rollouts;
    :func:`first_order_terms`). ``self + within_rollout`` is the first-order prediction of the
    isolated control (:func:`token_dynamics_isolated` on the output layer). Columns: ``row,
    pos, token_id, reward, advantage, in_loss, self, coupling, within_rollout,
    across_rollouts, predicted, actual`` (nats).
    """
    m = copy.deepcopy(model)
    head = m.get_output_embeddings()
    if getattr(head, "bias", None) is not None:
        raise ValueError("first_order_prediction assumes an output layer without bias")
    logits, h, actions, rows, cols, logp0 = _flat(roll, m)
    in_loss = roll.loss_mask.bool()[rows, cols]
    A = roll.advantages[rows].double() * in_loss.double()
    terms = first_order_terms(logits, h, actions, A, rows, lr=lr, n_loss=int(in_loss.sum()))
    self_term, within, across = (terms[k].float() for k in ("self", "within", "across"))
    sgd_step(m, roll, lr, params=[head.weight])
    with torch.no_grad():
        after = _logp(m, roll)[rows, cols]
    return pd.DataFrame({"row": rows.numpy(), "pos": cols.numpy(), "token_id": actions.numpy(),
                         "reward": roll.rewards[rows].numpy(),
                         "advantage": roll.advantages[rows].numpy(), "in_loss": in_loss.numpy(),
                         "self": self_term.numpy(), "coupling": (within + across).numpy(),
                         "within_rollout": within.numpy(), "across_rollouts": across.numpy(),
                         "predicted": (self_term + within + across).numpy(),
                         "actual": (after - logp0).numpy()})


def _directional(model, roll: Rollouts, params: Sequence[torch.nn.Parameter],
                 direction: Sequence[torch.Tensor]) -> torch.Tensor:
    """J·v: the derivative of every completion token's log π [B, C] along the parameter
    direction ``direction`` (one tensor per ``params``), exact (autograd's double backward:
    d/du ⟨Jᵀu, v⟩ = J v), so it holds no rounding of a finite step."""
    with sdpa_kernel(SDPBackend.MATH):      # the fused CPU kernels have no double backward
        logp = completion_logprobs(model, roll.input_ids, roll.attention_mask,
                                   roll.prompt_len)
        u = torch.zeros_like(logp, requires_grad=True)
        vjp = torch.autograd.grad(logp, params, grad_outputs=u, create_graph=True,
                                  allow_unused=True)
        dot = sum((g * v).sum() for g, v in zip(vjp, direction) if g is not None)
        (jv,) = torch.autograd.grad(dot, u)
    return jv.detach().cpu()


def _ascent(model, parts: Sequence[Rollouts], params: Sequence[torch.nn.Parameter],
            n_all: float) -> list[torch.Tensor]:
    """−∇ of the token-mean GRPO loss of the rollouts ``parts`` (summed over the parts) with
    the sum over their loss tokens divided by ``n_all`` (the batch's loss tokens): the
    direction one SGD step moves ``params``."""
    total = None
    for roll in parts:
        logp = completion_logprobs(model, roll.input_ids, roll.attention_mask, roll.prompt_len)
        mask = roll.loss_mask.to(logp.device).float()
        adv = roll.advantages.to(logp.device).float()
        objective = (adv[:, None] * logp * mask).sum() / n_all
        grads = torch.autograd.grad(objective, params, allow_unused=True)
        grads = [torch.zeros_like(p) if g is None else g.detach() for p, g in zip(params, grads)]
        total = grads if total is None else [a + b for a, b in zip(total, grads)]
    return total


def first_order_full(model, roll: Rollouts, *, lr: float = 1.0,
                     params: Sequence[torch.nn.Parameter] | None = None,
                     alone: bool = True, rows_per_pass: int | None = None) -> pd.DataFrame:
    """The exact first-order Δ log π (nats) of one SGD step of size ``lr`` on the token-mean
    GRPO loss, with *every* parameter moving (or only ``params``), for the full batch and
    for every rollout updated alone (its step scaled by its share of the loss tokens, as in
    :func:`token_dynamics_isolated`):

    full_j = η ∇log π_j · (1/N) Σ_k A_k ∇log π_k (k over all loss tokens),
    alone_j = η ∇log π_j · (1/N) Σ_{k in j's rollout} A_k ∇log π_k.

    Computed with autograd (a gradient and one Jacobian-vector product per rollout), not by
    taking a step, so it is the limit of :func:`token_dynamics` / :func:`token_dynamics_isolated`
    for a small step, free of float rounding. With ``params`` = the output layer it equals the
    closed form :func:`first_order_terms` (self + within + across, and self + within).
    Columns: ``row, pos, reward, advantage, in_loss, full, alone`` (one row per completion
    token, in the order of :func:`token_dynamics`). ``alone=False``: the full batch only (one
    gradient and one Jacobian-vector product; the ``alone`` column is left out).
    ``rows_per_pass``: the full batch's gradient (summed over passes) and its Jacobian-vector
    product are taken this many rollouts at a time (None: all at once). Rows do not interact in
    the forward pass, so the values are the same up to float rounding, and the memory is that
    of ``rows_per_pass`` rollouts: at Qwen3-1.7B's size the double backward of 32 rollouts of
    640 tokens at once did not fit an H200's 139 GiB (``benchmarks/cancellation_paper_gpu.py``).
    """
    check_rows_per_pass(rows_per_pass)
    m = copy.deepcopy(model)
    m.eval()
    params = [p for p in m.parameters()] if params is None else [
        dict(zip(map(id, model.parameters()), m.parameters()))[id(p)] for p in params]
    lm = roll.loss_mask
    n_all = float(lm.sum().clamp(min=1))
    parts = [part for _, part in _row_parts(roll, rows_per_pass)]
    direction = _ascent(m, parts, params, n_all)
    full = torch.cat([_directional(m, part, params, direction) for part in parts]) * lr
    cm = roll.completion_mask.bool()
    rows, cols = torch.nonzero(cm, as_tuple=True)
    frame = pd.DataFrame({"row": rows.numpy(), "pos": cols.numpy(),
                          "reward": roll.rewards[rows].numpy(),
                          "advantage": roll.advantages[rows].numpy(),
                          "in_loss": roll.loss_mask.bool()[rows, cols].numpy(),
                          "full": full[rows, cols].double().numpy()})
    if not alone:
        return frame
    each = torch.zeros_like(full)
    for i in range(len(roll)):
        if float(lm[i].sum()) == 0:
            continue
        row = roll.select([i])
        each[i] = _directional(m, row, params, _ascent(m, [row], params, n_all))[0] * lr
    return frame.assign(alone=each[rows, cols].double().numpy())


def coupling_table(model, roll: Rollouts, *, max_pairs: int = 20000, confidence: float = 0.5,
                   seed: int = 0) -> pd.DataFrame:
    """φ and the output-layer kernel K = φ·(h_j·h_k) for pairs of distinct sampled tokens from
    rollouts of the same prompt (up to ``max_pairs``, seeded sample).

    Columns: ``j, k, prompt_id, same_token, p_j, p_k, low_conf`` (both sampled-token
    probabilities below ``confidence``), ``phi, hh, K``, and ``bucket`` (``same/different token
    × both low / not both low confidence``). ``prompt_id`` (the pair's prompt) is the cluster
    for bootstrap CIs (:func:`tokenbook.cancellation_hypothesis.coupling.coupling_bucket_cis`).
    """
    logits, h, actions, rows, _, logp = _flat(roll, model)
    pid = roll.prompt_ids[rows]
    rng = np.random.default_rng(seed)
    pairs = []
    for g in torch.unique(pid).tolist():
        idx = torch.nonzero(pid == g).flatten().numpy()
        if idx.size < 2:
            continue
        jj, kk = np.triu_indices(idx.size, 1)
        pairs.append(np.stack([idx[jj], idx[kk]], 1))
    if not pairs:
        raise ValueError("coupling_table needs at least one prompt with two sampled tokens")
    pairs = np.concatenate(pairs)
    if len(pairs) > max_pairs:
        pairs = pairs[rng.choice(len(pairs), max_pairs, replace=False)]
    pt = torch.as_tensor(pairs)
    phi = phi_pairs(logits, actions, pt)
    hh = (h[pt[:, 0]] * h[pt[:, 1]]).sum(-1)
    p = logp.exp()
    frame = pd.DataFrame({"j": pairs[:, 0], "k": pairs[:, 1],
                          "prompt_id": pid[pt[:, 0]].numpy(),
                          "same_token": (actions[pt[:, 0]] == actions[pt[:, 1]]).numpy(),
                          "p_j": p[pt[:, 0]].numpy(), "p_k": p[pt[:, 1]].numpy(),
                          "phi": phi.numpy(), "hh": hh.numpy(), "K": (phi * hh).numpy()})
    frame["low_conf"] = (frame["p_j"] < confidence) & (frame["p_k"] < confidence)
    frame["bucket"] = (np.where(frame["same_token"], "same token", "different token") + ", "
                       + np.where(frame["low_conf"], "both low-confidence",
                                  "not both low-confidence"))
    return frame


# ----------------------------------------------------------------------------- peer masking
PROBE_BUCKETS: tuple[tuple[bool, bool, int], ...] = tuple(
    (s, e, a) for s in (True, False) for e in (True, False) for a in (1, -1))
"""The 2×2×2 peer buckets (same token, high entropy, advantage sign), in the authors' order."""


def _zscore(x: np.ndarray, ref: np.ndarray) -> np.ndarray:
    """(x − mean)/sd with the mean and population sd of ``x[ref]``; 0 where that sd is 0."""
    mu, sd = float(x[ref].mean()), float(x[ref].std())
    return (x - mu) / sd if sd > 0 else np.zeros_like(x, dtype=float)


def peer_score(entropy: np.ndarray, advantage: np.ndarray, same_token: np.ndarray,
               reference: np.ndarray | None = None) -> np.ndarray:
    """The authors' peer score for the "top-scored" set of their causal probe (their code,
    ``recipe/_logprob/ray_trainer.py::_run_offline_causal_probe``, see §2.3 of the research
    note): z(entropy) + z(abs(advantage)) + 1[same token as the target].

    ``entropy`` (nats), ``advantage`` and ``same_token`` (bool): [N], one per token. The
    z-scores use the mean and population sd over ``reference`` (bool [N], default all tokens;
    the probe passes the batch's loss tokens); a constant column contributes 0. Returns [N].
    """
    entropy, advantage = np.asarray(entropy, float), np.asarray(advantage, float)
    same_token = np.asarray(same_token, bool)
    if not (entropy.shape == advantage.shape == same_token.shape) or entropy.ndim != 1:
        raise ValueError(f"entropy, advantage and same_token must be 1-D of one length, got "
                         f"{entropy.shape}, {advantage.shape}, {same_token.shape}")
    ref = np.ones(entropy.shape, bool) if reference is None else np.asarray(reference, bool)
    if ref.shape != entropy.shape or not ref.any():
        raise ValueError(f"reference must be a non-empty bool mask of shape {entropy.shape}")
    return (_zscore(entropy, ref) + _zscore(np.abs(advantage), ref)
            + same_token.astype(float))


def top_scored(pool: np.ndarray, score: np.ndarray, set_size: int) -> np.ndarray:
    """The ``set_size`` members of ``pool`` (token indices) with the highest ``score`` (ties:
    the lower index first), sorted by index."""
    pool = np.asarray(pool)
    if pool.size < set_size:
        raise ValueError(f"pool has {pool.size} tokens, fewer than set_size {set_size}")
    order = np.lexsort((pool, -np.asarray(score)[pool]))
    return np.sort(pool[order[:set_size]])


class _LinearStep:
    """Δ log π of single tokens after an SGD step with some loss tokens masked, without
    redoing the step: for the token-mean policy-gradient loss at ratio 1 the step is
    −lr·∇L_mask = (lr/N_mask)·(Σ_all A_k ∇log π_k − Σ_masked A_k ∇log π_k), so one full-batch
    gradient and the masked tokens' own gradients (cached) give every masked step exactly."""

    def __init__(self, model, roll: Rollouts, lr: float):
        self.roll, self.lr = roll, lr
        self.work = copy.deepcopy(model)
        self.work.eval()
        self.params = [p for p in self.work.parameters() if p.requires_grad]
        self.theta0 = [p.detach().clone() for p in self.params]
        self.n_loss = float(roll.loss_mask.sum().clamp(min=1.0))
        logp = completion_logprobs(self.work, roll.input_ids, roll.attention_mask,
                                   roll.prompt_len)
        adv = roll.advantages.to(logp.device).unsqueeze(1)
        obj = (adv * logp * roll.loss_mask.to(logp.device)).sum()
        self.g_all = self._flat(torch.autograd.grad(obj, self.params, allow_unused=True))
        self.cache: dict[tuple[int, int], torch.Tensor] = {}
        self.row_graph: tuple[int, torch.Tensor] | None = None

    def _flat(self, grads) -> torch.Tensor:
        return torch.cat([(torch.zeros_like(p) if g is None else g).reshape(-1)
                          for p, g in zip(self.params, grads)]).detach()

    def _row_logp(self, r: int) -> torch.Tensor:
        roll = self.roll
        return completion_logprobs(self.work, roll.input_ids[r:r + 1],
                                   roll.attention_mask[r:r + 1], roll.prompt_len)[0]

    def token_grad(self, r: int, c: int) -> torch.Tensor:
        """A_r·∇θ log π(token (r, c)) as a flat vector (cached)."""
        if (r, c) not in self.cache:
            if self.row_graph is None or self.row_graph[0] != r:
                self._set(None)
                self.row_graph = (r, self._row_logp(r))
            g = torch.autograd.grad(self.row_graph[1][c], self.params, retain_graph=True,
                                    allow_unused=True)
            self.cache[(r, c)] = float(self.roll.advantages[r]) * self._flat(g)
        return self.cache[(r, c)]

    @torch.no_grad()
    def _set(self, step: torch.Tensor | None) -> None:
        i = 0
        for p, p0 in zip(self.params, self.theta0):
            n = p.numel()
            p.copy_(p0 if step is None else p0 + step[i:i + n].view_as(p0))
            i += n

    def first_order(self, r: int, c: int, masked: Sequence[tuple[int, int]] = ()) -> float:
        """The first-order Δ log π (nats) of token (r, c) for the same masked step:
        lr/(N − m) · ∇log π_rc · (Σ_all A_k ∇log π_k − Σ_masked A_k ∇log π_k), from the cached
        gradients (token (r, c) must have a non-zero advantage)."""
        adv = float(self.roll.advantages[r])
        if adv == 0:
            raise ValueError(f"first_order: token ({r}, {c}) has advantage 0; its gradient "
                             f"is not cached with a usable scale")
        with torch.enable_grad():
            own = self.token_grad(r, c) / adv
            g = self.g_all.clone()
            for rc in masked:
                g -= self.token_grad(*rc)
        self.row_graph = None
        return float(self.lr / max(self.n_loss - len(masked), 1.0) * torch.dot(own, g))

    @torch.no_grad()
    def logp(self, r: int, c: int, masked: Sequence[tuple[int, int]] | None = None,
             step: bool = True) -> float:
        """log π (nats) of token (r, c) at θ0 (``step=False``) or after the SGD step with the
        loss tokens ``masked`` removed."""
        self.row_graph = None
        if not step:
            self._set(None)
        else:
            g = self.g_all.clone()
            for rc in masked or ():
                with torch.enable_grad():
                    g -= self.token_grad(*rc)
            self.row_graph = None
            self._set(g * (self.lr / max(self.n_loss - len(masked or ()), 1.0)))
        return float(self._row_logp(r)[c])


def peer_masking_probe(model, roll: Rollouts, *, lr: float = 1e-2, n_targets: int = 4,
                       n_sets: int = 10, set_size: int = 3, entropy_quantile: float = 0.8,
                       seed: int = 0, method: str = "linear", threads: int | None = 1,
                       processes: int = 1, progress: bool = True) -> pd.DataFrame:
    """The causal coupling probe: τ = Δ_full − Δ_mask (nats) of a target token when
    ``set_size`` peers from the same prompt's rollouts are removed from the loss of one SGD
    step of size ``lr`` on the whole batch (every parameter moves).

    Peer buckets (:data:`PROBE_BUCKETS`): same/different token × high/low entropy (top
    1 − ``entropy_quantile`` of the batch's sampled tokens = high) × positive/negative
    advantage; peers are loss tokens with a non-zero advantage. ``n_targets`` targets (loss
    tokens with a non-zero advantage whose peers fill the most buckets; ties broken by a
    seeded draw). Per (target, bucket) with at least ``set_size`` peers, as in the authors'
    code: ``n_sets`` random peer sets (seeded, sets ``0 … n_sets − 1``) and one
    **top-scored** set (set ``n_sets``): the ``set_size`` peers of the bucket with the highest
    :func:`peer_score` z(entropy) + z(abs(advantage)) + 1[same token] — the authors' rule
    from their code — z-scored over the batch's loss tokens.

    ``method``: ``"linear"`` (default) computes each masked step from the full-batch gradient
    minus the masked tokens' own gradients (exact for an SGD step, up to float rounding) and
    evaluates only the target's row; ``"refit"`` reloads the weights and redoes the masked
    step on the whole batch for every set (the authors' procedure; slower, same numbers).
    ``"linear"`` holds one float32 gradient (the model's parameter count) per distinct masked
    peer of the prompt being probed: cheap for the tiny policy, use ``"refit"`` for large models.
    ``threads``: torch CPU threads while probing (restored after; ``None`` leaves them): the
    one-row passes of ``"linear"`` are fastest on one thread, and on a shared CPU more threads
    can be many times slower. ``processes`` = 2 (``"linear"`` only): the later half of the
    sets is computed in a second process at the same thread count, beside this one (the
    one-row passes leave a second core idle otherwise); every number is the same as in one
    process, since each masked step is computed from the same full-batch and per-token
    gradients whichever process holds them (:func:`_probe_in_two`).

    Returns one row per (target, bucket, set): ``target`` (index into the batch's sampled
    tokens, row-major), ``prompt_id, token, target_adv, same_token, high_entropy, peer_adv``
    (``"positive"``/``"negative"``), ``set, top_scored`` (bool), ``peers`` (the masked
    tokens' indices, list), ``peer_score`` (their mean score), ``delta_full, delta_mask, tau``
    (nats), and with ``method="linear"`` ``tau_first_order`` (nats): the same τ to first order
    in the step, lr·∇log π_t·[g_all/N − (g_all − g_S)/(N − m)] with g = Σ A_k ∇log π_k — the
    softmax-gradient algebra's answer, no step taken (the claim's known answer).
    """
    if method not in ("linear", "refit"):
        raise ValueError(f"method must be 'linear' or 'refit', got {method!r}")
    for name, v, lo in (("n_targets", n_targets, 0), ("n_sets", n_sets, 0),
                        ("set_size", set_size, 1)):
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < lo:
            raise ValueError(f"{name} must be an integer ≥ {lo}, got {v!r}")
    if not 0 < entropy_quantile < 1:
        raise ValueError(f"entropy_quantile must lie in (0, 1), got {entropy_quantile}")
    if processes not in (1, 2):
        raise ValueError(f"processes must be 1 or 2, got {processes!r}")
    rng = np.random.default_rng(seed)
    cm = roll.completion_mask.bool()
    lm = roll.loss_mask.bool()
    rows, cols = torch.nonzero(cm, as_tuple=True)
    tokens = roll.input_ids[:, roll.prompt_len:][rows, cols].numpy()
    ent = roll.entropy[rows, cols].numpy()
    thr = float(np.quantile(ent, entropy_quantile))
    adv = roll.advantages[rows].numpy()
    pid = roll.prompt_ids[rows].numpy()
    in_loss = lm[rows, cols].numpy()
    valid = in_loss & (adv != 0)

    def pools(t):
        peers_ok = (pid == pid[t]) & valid & (np.arange(len(pid)) != t)
        return [np.flatnonzero(peers_ok & ((tokens == tokens[t]) == same)
                               & ((ent > thr) == high) & (np.sign(adv) == sign))
                for same, high, sign in PROBE_BUCKETS]

    # targets: among loss tokens, those whose peers fill the most buckets (ties: seeded draw),
    # as the authors probe pre-selected candidate tokens
    cand = np.flatnonzero(valid)
    cover = np.array([sum(p.size >= set_size for p in pools(t)) for t in cand])
    order = np.lexsort((rng.random(cand.size), -cover)) if cand.size else np.array([], int)
    targets = cand[order[:n_targets]]
    targets = targets[np.argsort(pid[targets], kind="stable")]   # prompt by prompt
    jobs = []
    for t in targets:
        score = peer_score(ent, adv, tokens == tokens[t], reference=in_loss)
        for (same, high, sign), pool in zip(PROBE_BUCKETS, pools(t)):
            if pool.size < set_size:
                continue
            sets = [np.sort(rng.choice(pool, set_size, replace=False)) for _ in range(n_sets)]
            sets.append(top_scored(pool, score, set_size))
            for s, peers in enumerate(sets):
                jobs.append((t, same, high, sign, s, peers, float(score[peers].mean())))

    prev = torch.get_num_threads()
    if threads is not None:
        torch.set_num_threads(check_positive_int(threads, "threads"))
    args = (model, roll, lr, method, jobs, targets, rows, cols, pid, tokens, adv, n_sets)
    try:
        records = (_probe_in_two(args, progress) if processes == 2 and method == "linear"
                   else _probe_records(*args, progress=progress))
    finally:
        torch.set_num_threads(prev)
    cols_out = ["target", "prompt_id", "token", "target_adv", "same_token", "high_entropy",
                "peer_adv", "set", "top_scored", "peers", "peer_score", "delta_full",
                "delta_mask", "tau"] + (["tau_first_order"] if method == "linear" else [])
    return pd.DataFrame(records, columns=cols_out)


#: the second process of :func:`_probe_in_two` (started on first use, kept for the next seeds)
_PROBE_POOL = None


def _probe_pool() -> ProcessPoolExecutor:
    global _PROBE_POOL
    if _PROBE_POOL is None:
        _PROBE_POOL = ProcessPoolExecutor(max_workers=1,
                                          mp_context=multiprocessing.get_context("spawn"),
                                          initializer=_end_quietly_on_interrupt)
        atexit.unregister(_close_probe_pool)   # once, however often the pool restarts
        atexit.register(_close_probe_pool)
    return _PROBE_POOL


def _end_quietly_on_interrupt() -> None:
    """The second process's initializer: an interrupt (Ctrl-C, or a Jupyter kernel's shutdown,
    both sent to the whole process group) ends it at once, without the traceback of an idle
    worker; a parent still waiting on it sees a broken pool (:func:`_probe_in_two`)."""
    signal.signal(signal.SIGINT, lambda signum, frame: os._exit(128 + signum))


def _close_probe_pool() -> None:
    """Shut the second process down before the interpreter tears its modules down (an
    executor collected during teardown prints an ignored ``AttributeError``)."""
    global _PROBE_POOL
    if _PROBE_POOL is not None:
        _PROBE_POOL.shutdown(wait=True, cancel_futures=True)
        _PROBE_POOL = None


def _records_at(threads: int, args: bytes) -> list[dict]:
    """The second process's task: :func:`_probe_records` of the pickled ``args`` at
    ``threads`` torch threads."""
    torch.set_num_threads(threads)
    return _probe_records(*pickle.loads(args), progress=False)


def _probe_in_two(args: tuple, progress: bool) -> list[dict]:
    """:func:`_probe_records` with the jobs cut in half: the later half (and its targets) in
    a second process (:func:`_probe_pool`), the first half here, then the records in the
    jobs' order. Each half builds its own :class:`_LinearStep` from the same model and
    rollouts, and a masked step's numbers depend only on them (the per-token gradients are a
    cache of values computed the same way in either process, at the same thread count), so
    the records equal those of one process. Falls back to this process alone if the second
    cannot run."""
    global _PROBE_POOL
    model, roll, lr, method, jobs, targets, rows, cols, pid, tokens, adv, n_sets = args
    if len(jobs) < 2:
        return _probe_records(*args, progress=progress)
    cut = len(jobs) // 2

    def targets_of(part) -> np.ndarray:
        used = {int(job[0]) for job in part}
        return np.array([t for t in targets if int(t) in used], dtype=targets.dtype)

    part = (model, roll, lr, method, jobs[cut:], targets_of(jobs[cut:]), rows, cols, pid,
            tokens, adv, n_sets)
    # pickled here, before this process goes on: the executor pickles its arguments in a
    # thread of its own, and its pickler moves tensors to shared memory while they are read
    blob = pickle.dumps(part)
    try:
        future = _probe_pool().submit(_records_at, torch.get_num_threads(), blob)
    except (BrokenProcessPool, RuntimeError, OSError):
        _PROBE_POOL = None
        return _probe_records(*args, progress=progress)
    first = _probe_records(model, roll, lr, method, jobs[:cut], targets_of(jobs[:cut]), rows,
                           cols, pid, tokens, adv, n_sets, progress=progress, part_of_two=True)
    try:
        return first + future.result()
    except BrokenProcessPool:
        _PROBE_POOL = None
        return first + _probe_records(*part, progress=False)


def _probe_records(model, roll, lr, method, jobs, targets, rows, cols, pid, tokens, adv, n_sets,
                   *, progress: bool, part_of_two: bool = False) -> list[dict]:
    """One record per job (:func:`peer_masking_probe`'s rows, in the jobs' order;
    ``part_of_two``: the others are computed in a second process, the progress bar says so)."""
    from tqdm.auto import tqdm

    rows_np, cols_np = rows.numpy(), cols.numpy()
    if method == "linear":
        lin = _LinearStep(model, roll, lr)
        before = {t: lin.logp(rows_np[t], cols_np[t], step=False) for t in targets}
        after = {t: lin.logp(rows_np[t], cols_np[t], ()) for t in targets}
        full = {t: after[t] - before[t] for t in targets}

        def delta_mask(t, peers):
            return lin.logp(rows_np[t], cols_np[t],
                            [(rows_np[k], cols_np[k]) for k in peers]) - before[t]

        def tau_first_order(t, peers):
            masked = [(rows_np[k], cols_np[k]) for k in peers]
            return (lin.first_order(rows_np[t], cols_np[t])
                    - lin.first_order(rows_np[t], cols_np[t], masked))
    else:
        state = copy.deepcopy(model.state_dict())
        work = copy.deepcopy(model)
        before_all = _logp(work, roll)

        def delta_after(mask: torch.Tensor) -> np.ndarray:
            work.load_state_dict(state)
            sgd_step(work, roll, lr, loss_mask=mask)
            return (_logp(work, roll) - before_all)[rows, cols].numpy()

        full_all = delta_after(roll.loss_mask)
        full = {t: float(full_all[t]) for t in targets}

        def delta_mask(t, peers):
            mask = roll.loss_mask.clone()
            mask[rows[peers], cols[peers]] = 0
            return float(delta_after(mask)[t])

    out, prompt = [], None
    desc = "peer masking (the rest in a second process)" if part_of_two else "peer masking"
    for t, same, high, sign, s, peers, sc in tqdm(jobs, desc=desc, disable=not progress):
        if method == "linear" and pid[t] != prompt:   # peers never cross prompts
            lin.cache.clear()
            prompt = pid[t]
        d = delta_mask(t, peers)
        first = {"tau_first_order": tau_first_order(t, peers)} if method == "linear" else {}
        out.append({**first, "target": int(t), "prompt_id": int(pid[t]), "token": int(tokens[t]),
                    "target_adv": float(adv[t]), "same_token": same, "high_entropy": high,
                    "peer_adv": "positive" if sign > 0 else "negative", "set": s,
                    "top_scored": s == n_sets, "peers": [int(k) for k in peers],
                    "peer_score": sc, "delta_full": full[t], "delta_mask": d,
                    "tau": full[t] - d})
    return out
