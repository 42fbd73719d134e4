"""The vocabulary-chunked row reduction: the torch reference of the scoring contract.

One *row* is one scored position: the logits ``l[v]`` of the model's predictive distribution over
the vocabulary at that position. Instead of materialising ``log_softmax(l)`` (shape
[rows, vocabulary]) the engine walks the vocabulary in chunks and carries, per row, a small state of
float32 tensors of shape [N]:

* ``m``  running maximum of the logits seen so far (``-inf`` while every seen logit is ``-inf``);
* ``s``  ``Σ exp(l - m)``;
* ``u``  ``Σ exp(l - m)·(l - m)`` (entropy numerator; ``-inf`` logits contribute exactly 0, never NaN);
* ``b``  ``Σ`` over beginning-of-word vocabulary ids of ``exp(l - m)``;
* ``xt`` the target token's logit (``-inf`` until the chunk holding the target has been seen).

Two states merge exactly (see :func:`merge_states`) and :func:`finalize` turns a state into

* ``logprob = xt - m - log s``            (nats),
* ``entropy = log s - u / s``             (nats),
* ``bow_logmass = log b - log s``         (nats; log of the total probability of the
  beginning-of-word tokens).

The CUDA kernels (:mod:`tokenbook.scoring.cuda`) implement the same functions with the same
signatures; this module is what they are tested against and what the CPU path runs.
"""

from __future__ import annotations

from typing import NamedTuple

import torch

__all__ = ["RowState", "init_state", "check_chunk_shapes", "chunk_state", "chunk_state_",
           "merge_states", "finalize"]

_NEG_INF = float("-inf")


class RowState(NamedTuple):
    """Running per-row reduction state; every field is a float32 tensor of shape [N]."""

    m: torch.Tensor
    s: torch.Tensor
    u: torch.Tensor
    b: torch.Tensor
    xt: torch.Tensor


def init_state(n: int, device: torch.device | str | None = None) -> RowState:
    """The identity of :func:`merge_states` for ``n`` rows (nothing seen yet)."""
    full = lambda v: torch.full((n,), v, dtype=torch.float32, device=device)  # noqa: E731
    return RowState(full(_NEG_INF), full(0.0), full(0.0), full(0.0), full(_NEG_INF))


def check_chunk_shapes(logits: torch.Tensor, target_local: torch.Tensor,
                       bow_mask: torch.Tensor) -> tuple[int, int]:
    """``(N, C)`` after checking logits [N, C], target_local [N] and bow_mask [C]."""
    if logits.dim() != 2:
        raise ValueError(f"logits must have shape [N, C], got {tuple(logits.shape)}")
    n, c = logits.shape
    if target_local.shape != (n,):
        raise ValueError(f"target_local must have shape [{n}], got {tuple(target_local.shape)}")
    if bow_mask.shape != (c,):
        raise ValueError(f"bow_mask must have shape [{c}], got {tuple(bow_mask.shape)}")
    if not logits.is_floating_point():
        raise TypeError(f"logits must be a float tensor, got {logits.dtype}")
    if target_local.is_floating_point() or target_local.dtype == torch.bool:
        raise TypeError(f"target_local must hold integer indices (-1: not in this chunk), got "
                        f"{target_local.dtype}")
    return n, c


def _check_targets_in_chunk(target_local: torch.Tensor, c: int) -> None:
    """Range of ``target_local`` (CPU tensors only: on a GPU this would synchronise per chunk;
    :func:`tokenbook.scoring.reduce_hidden` checks the ids once for every device)."""
    if c and target_local.numel() and target_local.device.type == "cpu":
        lo, hi = int(target_local.min()), int(target_local.max())
        if lo < -1 or hi >= c:
            raise ValueError(f"target_local must lie in [-1, {c}) (the chunk's columns, -1: "
                             f"none), got values in [{lo}, {hi}]")


def chunk_state(
    logits: torch.Tensor, target_local: torch.Tensor, bow_mask: torch.Tensor
) -> RowState:
    """Reduce one vocabulary chunk of logits to a :class:`RowState`.

    Parameters
    ----------
    logits : Tensor[N, C]
        Logits of the chunk (any float dtype; the reduction runs in float32). ``-inf`` allowed.
    target_local : LongTensor[N]
        Index of each row's target token inside this chunk, or ``-1`` when the target lies in
        another chunk.
    bow_mask : BoolTensor[C]
        True for the chunk's beginning-of-word vocabulary ids.
    """
    n, c = check_chunk_shapes(logits, target_local, bow_mask)
    _check_targets_in_chunk(target_local, c)
    x = logits.float()
    if c == 0:
        return init_state(n, logits.device)
    m = x.amax(dim=1)
    # Rows whose logits are all -inf keep m = -inf; shift them by 0 so that d = -inf, exp(d) = 0.
    shift = torch.where(torch.isfinite(m), m, torch.zeros_like(m))
    d = x - shift[:, None]
    e = torch.exp(d)
    s = e.sum(dim=1)
    # exp(-inf)·(-inf) would be NaN: clamping d keeps those products at exactly 0
    # (exp(d) is 0 there) while NaN logits still propagate.
    u = torch.linalg.vecdot(e, d.clamp_(min=-1e30))
    b = e @ bow_mask.to(e.dtype)
    has_t = target_local >= 0
    idx = target_local.clamp(min=0).unsqueeze(1)
    xt = torch.where(has_t, x.gather(1, idx).squeeze(1), torch.full_like(m, _NEG_INF))
    return RowState(m, s, u, b, xt)


def chunk_state_(
    logits: torch.Tensor,
    target_local: torch.Tensor,
    bow_cols: torch.Tensor,
    work: torch.Tensor | None = None,
) -> RowState:
    """In-place fast variant of :func:`chunk_state` for the CPU engine (same result).

    ``logits`` (float32 [N, C], owned by the caller) is overwritten. ``bow_cols`` is the float32
    [C, 2] matrix ``[1, bow_mask]`` so that ``s`` and ``b`` come from one pass; ``work`` an
    optional float32 buffer with at least N·C elements for ``exp``. ``u = Σ exp(d)·d`` is summed
    with ``nansum``, so the ``0·(−inf)`` products of ``−inf`` logits count as 0; rows holding a
    NaN logit (``m = NaN``) get ``u = NaN`` as in :func:`chunk_state`.
    """
    x = logits if logits.dtype == torch.float32 else logits.float()
    has_t = target_local >= 0
    xt = x.gather(1, target_local.clamp(min=0).unsqueeze(1)).squeeze(1)
    xt = torch.where(has_t, xt, torch.full_like(xt, _NEG_INF))
    m = x.amax(dim=1)
    finite = torch.isfinite(m)
    if bool(finite.all()):
        x.sub_(m[:, None])
    else:
        x.sub_(torch.where(finite, m, torch.zeros_like(m))[:, None])
    if work is not None and work.numel() >= x.numel():
        e = torch.exp(x, out=work.view(-1)[: x.numel()].view(x.shape))
    else:
        e = torch.exp(x)
    sb = e @ bow_cols
    u = torch.nansum(x.mul_(e), dim=1)
    u = torch.where(torch.isnan(m), m, u)  # NaN logits stay NaN, as in chunk_state
    return RowState(m, sb[:, 0].contiguous(), u, sb[:, 1].contiguous(), xt)


def _rescale(st: RowState, big_m: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """exp(m - M) and (m - M), with 0 for rows that have seen only -inf (no NaN)."""
    seen = torch.isfinite(st.m)
    delta = torch.where(seen, st.m - torch.where(torch.isfinite(big_m), big_m, 0.0), 0.0)
    return torch.where(seen, torch.exp(delta), 0.0), delta


def merge_states(a: RowState, b: RowState) -> RowState:
    """Exact merge of two partial states of disjoint vocabulary chunks (associative, commutative).

    With ``M = max(a.m, b.m)``: ``s = a.s·e^(a.m−M) + b.s·e^(b.m−M)``,
    ``u = e^(a.m−M)·(a.u + a.s·(a.m−M)) + e^(b.m−M)·(b.u + b.s·(b.m−M))``, ``b`` like ``s``,
    ``xt`` = the finite one.
    """
    if a.m.shape != b.m.shape:
        raise ValueError(f"merge_states: states of {tuple(a.m.shape)} and {tuple(b.m.shape)} "
                         f"rows; merge states of the same rows (different vocabulary chunks)")
    big_m = torch.maximum(a.m, b.m)
    ea, da = _rescale(a, big_m)
    eb, db = _rescale(b, big_m)
    s = a.s * ea + b.s * eb
    u = ea * (a.u + a.s * da) + eb * (b.u + b.s * db)
    bb = a.b * ea + b.b * eb
    # NaN in either m must survive the merge (torch.maximum propagates NaN).
    return RowState(big_m, s, u, bb, torch.maximum(a.xt, b.xt))


def finalize(state: RowState) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``(logprob, entropy, bow_logmass)``, each float32 [N], in nats."""
    log_s = torch.log(state.s)
    logprob = state.xt - state.m - log_s
    entropy = log_s - state.u / state.s
    bow_logmass = torch.log(state.b) - log_s
    return logprob, entropy, bow_logmass
