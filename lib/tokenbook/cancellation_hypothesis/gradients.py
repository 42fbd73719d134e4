"""Gradient dumps of the analysis step: what the positive- and the negative-advantage rollouts
each contribute to the gradient, and how much of it cancels on the tokens they share
(issue #15, item 3; the authors' ``dp_actor.gradient_analysis``, notes §2.2).

The analysis step is the chapter's one on-policy SGD step on the token-mean loss
L = −(1/N) Σ_k A_k log π_k(a_k) over the N loss tokens of the batch (ratio = 1, clipping
inactive; L in nats per loss token). Every loss token k contributes d_k = −(A_k/N) ∇_θ log π_k(a_k)
to ∇_θ L. For a set S of tokens, g(S) = Σ_{k∈S} d_k. The two *groups* are the positive-advantage
tokens (A > 0) and the negative-advantage tokens (A < 0); so g(pos) + g(neg) = ∇_θ L exactly
(zero-advantage rollouts contribute nothing).

θ is one of the authors' dumped parameter sets (their ``gradient_layers.py``), reported separately:

* ``"output layer"`` — ``get_output_embeddings().weight`` [V, d] (``lm_head``; with tied
  embeddings this is also the input embedding, as the authors dump ``embed_tokens`` for tied
  models);
* ``"last block"`` — every matrix, bias and norm weight of the last transformer block;
* ``"authors' set"`` — both together.

**Units.** A *unit* is what counts as "the same token" (``key``):

* ``"prompt_token"`` (default, our reading of "tokens shared by positive and negative
  rollouts") — the same token id anywhere in the rollouts of one prompt: the group, whose
  advantages sum to zero, so that a token all its rollouts share is where cancellation can
  happen;
* ``"prompt_position_token"`` — the same token id at the same completion position in rollouts
  of one prompt (stricter: mostly the same token after the same prefix, whose gradients are
  then nearly exact negatives).

A unit is *shared* when it occurs in at least one positive- and one negative-advantage rollout
of its prompt, else *positive-only* or *negative-only* (*group-specific*). Each unit's positive
part is g(its occurrences in positive rollouts), its negative part g(those in negative ones).
The group-specific comparison pairs, within a prompt, the sum over its positive-only units
(a) with the sum over its negative-only units (b): do the tokens only correct rollouts hold and
the tokens only failed rollouts hold pull against each other, as the shared ones do?

**Cancellation** of two gradients a (positive group) and b (negative group), flattened:

* ``cos`` = ⟨a, b⟩ / (‖a‖‖b‖) (−1: opposite directions);
* ``cancelled`` = −2⟨a, b⟩ / (‖a‖² + ‖b‖²) ∈ [−1, 1]: the share of the two gradients' squared
  norm that their interaction removes, since ‖a + b‖² = (‖a‖² + ‖b‖²)(1 − cancelled). 1 for
  exact negatives, 0 for orthogonal gradients, −1 for identical ones (they add up);
* ``kept`` = ‖a + b‖ / (‖a‖ + ‖b‖) ∈ [0, 1]: the share of the summed norm that survives
  (0 for exact negatives, 1/√2 for orthogonal equal-norm gradients, 1 for parallel ones).

Norms are L2 norms of ∂L/∂θ (nats per loss token per unit of the parameter).

Example
-------
>>> import torch
>>> c = cancellation(torch.tensor([1.0, 2.0]), torch.tensor([-1.0, -2.0]))
>>> round(c["cos"], 6), round(c["cancelled"], 6), round(c["kept"], 6)
(-1.0, 1.0, 0.0)
>>> abs(cancellation(torch.tensor([1.0, 0.0]), torch.tensor([0.0, 3.0]))["cancelled"])
0.0
"""

from __future__ import annotations

import copy
import math
from dataclasses import dataclass

import numpy as np
import pandas as pd
import torch

from tokenbook.cancellation_hypothesis.coupling import cluster_bootstrap_mean
from tokenbook.cancellation_hypothesis.grpo import Rollouts, completion_logprobs
from tokenbook.seeds import derive_seed
from tokenbook.validation import check_choice, check_positive_int

__all__ = ["UNIT_KEYS", "PARAM_SETS", "cancellation", "parameter_sets", "token_units",
           "group_gradients", "GradientDump", "gradient_dump", "gradient_summary"]

UNIT_KEYS = ("prompt_token", "prompt_position_token")
#: the reported parameter sets; the last is the union of the others
PARAM_SETS = ("output layer", "last block", "authors' set")
UNIT_COLUMNS = ["unit", "prompt_id", "pos", "token_id", "token", "class", "n_pos", "n_neg",
                "sharing"]


def cancellation(a: torch.Tensor, b: torch.Tensor) -> dict[str, float]:
    """``cos``, ``cancelled`` and ``kept`` (see the module docstring) of two gradients of the
    same shape (flattened), plus their norms ``norm_a``, ``norm_b`` and ``norm_sum`` = ‖a + b‖.
    A zero gradient has no direction: ``cos`` is NaN, ``cancelled`` 0 and ``kept`` 1 (NaN for
    both zero)."""
    a = torch.as_tensor(a).detach().double().flatten()
    b = torch.as_tensor(b).detach().double().flatten()
    if a.shape != b.shape:
        raise ValueError(f"a and b must have the same number of elements, got {a.numel()} and "
                         f"{b.numel()}")
    if not (torch.isfinite(a).all() and torch.isfinite(b).all()):
        raise ValueError("a and b must be finite (NaN/inf in a gradient: check the loss)")
    return _stats(float(a @ a), float(b @ b), float(a @ b))


def _stats(aa: float, bb: float, ab: float) -> dict[str, float]:
    na, nb = math.sqrt(aa), math.sqrt(bb)
    nsum = math.sqrt(max(aa + bb + 2 * ab, 0.0))
    both = aa + bb
    return {"norm_a": na, "norm_b": nb, "norm_sum": nsum,
            "cos": ab / (na * nb) if na > 0 and nb > 0 else float("nan"),
            "cancelled": -2 * ab / both if both > 0 else float("nan"),
            "kept": nsum / (na + nb) if na + nb > 0 else float("nan")}


def parameter_sets(model) -> dict[str, list[torch.nn.Parameter]]:
    """The dumped parameters: ``{"output layer": [W_out], "last block": [...]}`` (the last
    decoder layer of a Qwen2/Qwen3/Llama-style ``model.model.layers``)."""
    head = model.get_output_embeddings()
    if head is None:
        raise ValueError("model has no output embeddings (get_output_embeddings() is None)")
    layers = getattr(getattr(model, "model", None), "layers", None)
    if layers is None or len(layers) == 0:
        raise ValueError("model has no model.layers (a Qwen2/Qwen3/Llama-style decoder is "
                         "needed to find the last transformer block)")
    last = [p for p in layers[-1].parameters()]
    if any(p is head.weight for p in last):
        raise ValueError("the output layer's weight is inside the last block")
    return {"output layer": [head.weight], "last block": last}


def token_units(roll: Rollouts, key: str = "prompt_token") -> tuple[np.ndarray, pd.DataFrame]:
    """Unit id of every completion token under ``key`` and one row per unit.

    Returns ``ids`` [B, C] (int; −1 for tokens outside the loss or of zero-advantage rows) and
    a table with columns ``unit, prompt_id, pos, token_id, token, class`` (the class of most
    of its occurrences), ``n_pos``, ``n_neg`` (occurrences in positive / negative-advantage
    rollouts) and ``sharing`` (``shared``, ``positive-only``, ``negative-only``). ``pos`` is
    −1 unless ``key`` is ``"prompt_position_token"``.
    """
    check_choice(key, "key", UNIT_KEYS)
    lm = roll.loss_mask.bool()
    adv = roll.advantages
    valid = lm & (adv != 0).unsqueeze(1)
    rows, cols = torch.nonzero(valid, as_tuple=True)
    ids = np.full(tuple(lm.shape), -1, dtype=np.int64)
    if rows.numel() == 0:
        return ids, pd.DataFrame(columns=UNIT_COLUMNS)
    r, c = rows.numpy(), cols.numpy()
    tok = roll.input_ids[:, roll.prompt_len:][rows, cols].numpy()
    pid = roll.prompt_ids[rows].numpy()
    pos = c if key == "prompt_position_token" else np.full(r.size, -1)
    sign = np.where(adv[rows].numpy() > 0, "n_pos", "n_neg")
    cls = [roll.classes[i][j] if i < len(roll.classes) and j < len(roll.classes[i]) else ""
           for i, j in zip(r, c)]
    text = [roll.tokens[i][j] if i < len(roll.tokens) and j < len(roll.tokens[i]) else ""
            for i, j in zip(r, c)]
    occ = pd.DataFrame({"prompt_id": pid, "pos": pos, "token_id": tok, "sign": sign,
                        "class": cls, "token": text})
    keys = ["prompt_id", "pos", "token_id"]
    occ["unit"] = occ.groupby(keys, sort=True).ngroup()
    ids[r, c] = occ["unit"].to_numpy()
    counts = occ.pivot_table(index="unit", columns="sign", values="token_id", aggfunc="size",
                             fill_value=0).reindex(columns=["n_pos", "n_neg"], fill_value=0)
    first = occ.groupby("unit")[keys + ["token"]].first()
    majority = occ.groupby("unit")["class"].agg(lambda s: s.value_counts().index[0])
    units = first.join(majority).join(counts).reset_index()
    units["sharing"] = np.where((units["n_pos"] > 0) & (units["n_neg"] > 0), "shared",
                                np.where(units["n_pos"] > 0, "positive-only", "negative-only"))
    return ids, units[UNIT_COLUMNS]


def _prepare(model) -> tuple[torch.nn.Module, dict[str, list[torch.nn.Parameter]]]:
    """A copy of ``model`` in eval mode in which only the dumped parameters require grad (so
    backward stops at the last block)."""
    m = copy.deepcopy(model).eval()
    for p in m.parameters():
        p.requires_grad_(False)
    sets = parameter_sets(m)
    for ps in sets.values():
        for p in ps:
            p.requires_grad_(True)
    return m, sets


def _weights(roll: Rollouts, masks: torch.Tensor) -> torch.Tensor:
    """d(loss)/d(log π) of each token for each mask: −A·mask/N, [M, B, C] (N: loss tokens)."""
    lm = roll.loss_mask.float()
    n = lm.sum().clamp(min=1.0)
    return -(roll.advantages.float()[None, :, None] * masks.float() * lm[None]) / n


class _PromptGraph:
    """One forward pass over the distinct rollouts of one prompt (rows ``rows`` of ``roll``),
    kept for many backward passes. Identical rollouts have identical per-token gradients, so
    each distinct row is differentiated once with the weights of its copies summed (exact, by
    linearity); rollouts never attend to each other, so nothing outside ``rows`` matters."""

    def __init__(self, m, params: list[torch.nn.Parameter], roll: Rollouts, rows: torch.Tensor):
        key = torch.cat([roll.input_ids[rows], roll.attention_mask[rows],
                         roll.completion_mask[rows]], 1)
        uniq, self.inverse = torch.unique(key, dim=0, return_inverse=True)
        first = torch.zeros(len(uniq), dtype=torch.long).scatter_(0, self.inverse, rows)
        self.rows, self.params, self.n_distinct = rows, params, len(uniq)
        self.logp = completion_logprobs(m, roll.input_ids[first], roll.attention_mask[first],
                                        roll.prompt_len)

    def grad(self, weights: torch.Tensor) -> torch.Tensor:
        """∇_θ Σ weights·log π for batch-shaped ``weights`` [B, C] (only this prompt's rows
        are read): one flattened vector (float64, on the model's device)."""
        w = torch.zeros(self.n_distinct, weights.shape[1]).index_add_(0, self.inverse,
                                                                      weights[self.rows])
        gs = torch.autograd.grad(self.logp, self.params, grad_outputs=w.to(self.logp.device),
                                 retain_graph=True, allow_unused=True)
        return torch.cat([(g if g is not None else torch.zeros_like(p)).reshape(-1)
                          for g, p in zip(gs, self.params)]).double()


def _check_masks(roll: Rollouts, masks: dict[str, torch.Tensor]) -> None:
    if not masks:
        raise ValueError("masks is empty: give at least one token set, e.g. {'pos': mask}")
    shape = tuple(roll.completion_mask.shape)
    for name, mk in masks.items():
        if tuple(mk.shape) != shape:
            raise ValueError(f"mask {name!r} must have the completion shape {shape}, got "
                             f"{tuple(mk.shape)}")


def group_gradients(model, roll: Rollouts, masks: dict[str, torch.Tensor]
                    ) -> dict[str, dict[str, torch.Tensor]]:
    """g(S) = Σ_{k∈S} −(A_k/N) ∇_θ log π_k(a_k) for each token set S given as a 0/1 mask
    [B, C] over completion tokens (intersected with the loss mask; N = the batch's loss tokens):
    ``{mask name: {param set: flattened gradient (float64, on the CPU)}}`` for
    :data:`PARAM_SETS`. ``model`` is not changed (a copy is differentiated). With masks A > 0
    and A < 0 the two gradients sum to the gradient of the token-mean policy loss of the
    analysis step. Each set's gradient is the sum over prompts of one backward pass through
    that prompt's distinct rollouts (cheap for sets inside one prompt); every result is held
    in memory (for many sets of a large model use :func:`gradient_dump`, which streams)."""
    _check_masks(roll, masks)
    m, sets = _prepare(model)
    names = list(masks)
    W = _weights(roll, torch.stack([torch.as_tensor(masks[k]) for k in names]))   # [M, B, C]
    touched = (W != 0).any(-1)                                                       # [M, B]
    params = sets["output layer"] + sets["last block"]
    n_out = sets["output layer"][0].numel()
    out = [torch.zeros(sum(p.numel() for p in params), dtype=torch.float64) for _ in names]
    pid = roll.prompt_ids
    for g in torch.unique(pid).tolist():
        rows = torch.nonzero(pid == g).flatten()
        todo = torch.nonzero(touched[:, rows].any(1)).flatten().tolist()
        if todo:
            graph = _PromptGraph(m, params, roll, rows)
            for i in todo:
                out[i] += graph.grad(W[i]).cpu()
    return {k: {"output layer": v[:n_out], "last block": v[n_out:], "authors' set": v}
            for k, v in zip(names, out)}


@dataclass
class GradientDump:
    """The result of :func:`gradient_dump` (norms in nats per loss token per unit of the
    parameter; ``cos``, ``cancelled``, ``kept`` as in the module docstring).

    * ``units`` — one row per (shared unit, parameter set): the unit's columns of
      :func:`token_units`, ``params``, ``norm_pos``, ``norm_neg``, ``norm_sum``, ``cos``,
      ``cancelled``, ``kept`` of its positive vs negative part;
    * ``prompts`` — one row per (prompt, token set, parameter set): ``tokens`` is ``shared``
      (a, b: the positive / negative parts summed over the prompt's shared units) or
      ``group-specific`` (a: its positive-only units, b: its negative-only units), with
      ``n_units``, ``n_pos``, ``n_neg`` (tokens) and the same statistics;
    * ``pooled`` — the same over the whole batch, plus ``all`` (a = g(A > 0), b = g(A < 0):
      a + b is the analysis step's gradient).
    """

    units: pd.DataFrame
    prompts: pd.DataFrame
    pooled: pd.DataFrame
    key: str


STAT_COLUMNS = ["norm_pos", "norm_neg", "norm_sum", "cos", "cancelled", "kept"]


def gradient_dump(model, roll: Rollouts, *, key: str = "prompt_token",
                  max_units: int | None = None, threads: int | None = 1) -> GradientDump:
    """The gradient dumps of the analysis step (see the module docstring): the positive- and
    negative-advantage groups' gradients per shared unit, per prompt and over the batch, with
    their cancellation, for each of :data:`PARAM_SETS`.

    ``max_units``: per-unit rows for at most this many shared units (those with the most
    occurrences; ties by unit id, no random choice), for large models; the per-prompt and batch
    rows always cover every token. ``threads``: torch CPU threads while differentiating (the
    many small backward passes run fastest on one thread; restored afterwards; None leaves
    them). Cost: one forward pass per prompt and one backward pass through the last block per
    selected shared unit and sign, plus two (four with ``max_units``) per prompt; memory: a
    few gradient-sized vectors at a time (prompts are processed one after another)."""
    check_choice(key, "key", UNIT_KEYS)
    if max_units is not None:
        max_units = check_positive_int(max_units, "max_units")
    adv = roll.advantages
    if not (adv > 0).any() or not (adv < 0).any():
        raise ValueError("gradient_dump needs rollouts with positive and negative advantages "
                         "(a batch with mixed groups); got "
                         f"{int((adv > 0).sum())} positive, {int((adv < 0).sum())} negative")
    ids, units = token_units(roll, key)
    ids_t = torch.as_tensor(ids)
    pos_row = (adv > 0).unsqueeze(1).expand_as(ids_t)
    row_pid = roll.prompt_ids.unsqueeze(1).expand_as(ids_t)
    shared = units[units["sharing"] == "shared"]
    in_shared = torch.as_tensor(np.isin(ids, shared["unit"].to_numpy()))
    in_spec = (ids_t >= 0) & ~in_shared
    sel = shared
    if max_units is not None and len(shared) > max_units:
        sel = (shared.assign(n=shared["n_pos"] + shared["n_neg"])
               .sort_values(["n", "unit"], ascending=[False, True]).head(max_units)
               .drop(columns="n"))
    prompts = [int(p) for p in units["prompt_id"].unique()]
    m, psets = _prepare(model)
    params = psets["output layer"] + psets["last block"]
    n_out = psets["output layer"][0].numel()
    parts = {"output layer": slice(0, n_out), "last block": slice(n_out, None),
             "authors' set": slice(None)}

    def stats(a: torch.Tensor, b: torch.Tensor) -> dict[str, float]:
        return _rename(_stats(float(a @ a), float(b @ b), float(a @ b)))

    def weights(mask: torch.Tensor) -> torch.Tensor:
        return _weights(roll, mask.unsqueeze(0))[0]

    n_tok = {"shared+": in_shared & pos_row, "shared-": in_shared & ~pos_row,
             "specific+": in_spec & pos_row, "specific-": in_spec & ~pos_row}
    is_shared = units["sharing"] == "shared"
    every = len(sel) == len(shared)
    batch: dict[str, torch.Tensor] = {}
    unit_rows, per_prompt = [], []
    prev = torch.get_num_threads()
    if threads is not None:
        torch.set_num_threads(check_positive_int(threads, "threads"))
    try:
        for p in prompts:
            in_p = row_pid == p
            graph = _PromptGraph(m, params, roll, torch.nonzero(roll.prompt_ids == p).flatten())
            here: dict[str, torch.Tensor] = {}
            for base in sel[sel["prompt_id"] == p].to_dict("records"):
                u = base["unit"]
                a = graph.grad(weights((ids_t == u) & pos_row))
                b = graph.grad(weights((ids_t == u) & ~pos_row))
                unit_rows += [{**base, "params": ps, **stats(a[sl], b[sl])}
                              for ps, sl in parts.items()]
                if every:
                    here["shared+"] = here["shared+"] + a if "shared+" in here else a
                    here["shared-"] = here["shared-"] + b if "shared-" in here else b
            names = ["specific+", "specific-"] + ([] if every else ["shared+", "shared-"])
            for name in names:
                here[name] = graph.grad(weights(n_tok[name] & in_p))
            zero = torch.zeros_like(here["specific+"])
            for name in n_tok:
                here.setdefault(name, zero)
                batch[name] = batch[name] + here[name] if name in batch else here[name]
            units_p = units["prompt_id"] == p
            for label, part, which in (("shared", "shared", is_shared),
                                       ("group-specific", "specific", ~is_shared)):
                per_prompt += [{"prompt_id": p, "tokens": label, "params": ps,
                                "n_units": int((units_p & which).sum()),
                                "n_pos": int((n_tok[part + "+"] & in_p).sum()),
                                "n_neg": int((n_tok[part + "-"] & in_p).sum()),
                                **stats(here[part + "+"][sl], here[part + "-"][sl])}
                               for ps, sl in parts.items()]
            del graph, here
    finally:
        torch.set_num_threads(prev)
    for s in "+-":
        batch[f"all{s}"] = batch[f"shared{s}"] + batch[f"specific{s}"]
        n_tok[f"all{s}"] = n_tok[f"shared{s}"] | n_tok[f"specific{s}"]
    if not (torch.isfinite(batch["all+"]).all() and torch.isfinite(batch["all-"]).all()):
        raise ValueError("the analysis step's gradient has NaN/inf values: check the "
                         "policy's logits and the advantages")
    per_unit = pd.DataFrame(unit_rows, columns=UNIT_COLUMNS + ["params"] + STAT_COLUMNS)
    counts = {"shared": int(is_shared.sum()), "specific": int((~is_shared).sum()),
              "all": len(units)}
    pooled = [{"tokens": name, "params": ps, "n_units": counts[part],
               "n_pos": int(n_tok[part + "+"].sum()), "n_neg": int(n_tok[part + "-"].sum()),
               **stats(batch[part + "+"][sl], batch[part + "-"][sl])}
              for name, part in (("shared", "shared"), ("group-specific", "specific"),
                                 ("all", "all"))
              for ps, sl in parts.items()]
    return GradientDump(per_unit, pd.DataFrame(per_prompt), pd.DataFrame(pooled), key)


def gradient_summary(dump: GradientDump, *, params: str = "authors' set", n_boot: int = 2000,
                     seed: int = 0) -> pd.DataFrame:
    """The chapter's table of a :class:`GradientDump` for one parameter set: mean ``cos`` and
    ``cancelled`` with percentile bootstrap 95% CIs (seeded), and mean ``kept``.

    Rows (``tokens``, ``level``): shared units one by one, overall and by token class
    (``per token``); shared vs group-specific tokens pooled within each prompt (``per
    prompt``, over the prompts in which both a and b are non-zero); and over the batch
    (``batch``, no CI). CIs resample prompts (units of one prompt share their context), each
    row from its own stream of ``derive_seed(seed, "gradient-ci", …)``. Columns ``tokens,
    level, class, n, cos, cos_lo, cos_hi, cancelled, cancelled_lo, cancelled_hi, kept``."""
    if not isinstance(dump, GradientDump):
        raise TypeError(f"dump: expected a GradientDump, got {type(dump).__name__}")
    check_choice(params, "params", PARAM_SETS)
    n_boot = check_positive_int(n_boot, "n_boot")
    rows = []

    def row(tokens: str, level: str, cls: str, frame: pd.DataFrame, ci: bool) -> None:
        out = {"tokens": tokens, "level": level, "class": cls, "n": len(frame)}
        for col in ("cos", "cancelled"):
            x = frame[col].to_numpy(dtype=float)
            if ci and len(x):
                out[col], out[f"{col}_lo"], out[f"{col}_hi"] = cluster_bootstrap_mean(
                    x, frame["prompt_id"].to_numpy(), n_boot=n_boot,
                    seed=derive_seed(seed, "gradient-ci", tokens, level, cls, col))
            else:
                out[col] = float(x.mean()) if len(x) else float("nan")
                out[f"{col}_lo"] = out[f"{col}_hi"] = float("nan")
        out["kept"] = float(frame["kept"].mean()) if len(frame) else float("nan")
        rows.append(out)

    u = dump.units[dump.units["params"] == params]
    row("shared", "per token", "all", u, True)
    for cls, g in u.groupby("class", sort=True):
        row("shared", "per token", str(cls), g, True)
    pr = dump.prompts[(dump.prompts["params"] == params) & (dump.prompts["norm_pos"] > 0)
                      & (dump.prompts["norm_neg"] > 0)]
    for tokens in ("shared", "group-specific"):
        row(tokens, "per prompt", "all", pr[pr["tokens"] == tokens], True)
    po = dump.pooled[dump.pooled["params"] == params]
    for tokens in ("shared", "group-specific", "all"):
        row(tokens, "batch", "all", po[po["tokens"] == tokens], False)
    return pd.DataFrame(rows)


def _rename(stats: dict[str, float]) -> dict[str, float]:
    return {{"norm_a": "norm_pos", "norm_b": "norm_neg"}.get(k, k): v for k, v in stats.items()}
