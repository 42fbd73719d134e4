"""Inner products of softmax rows without materialising the softmax."""

from __future__ import annotations

import warnings

import torch

from tokenbook.scoring import reduction as _red

try:
    from tokenbook.scoring import cuda as _cuda
except Exception:  # pragma: no cover - optional module
    _cuda = None

__all__ = ["softmax_row_dots", "row_logsumexp"]

_warned_fallback = False


def _warn_cuda_fallback(err: Exception) -> None:
    """Say once that the CUDA kernel failed and the (slower) torch path is used instead."""
    global _warned_fallback
    if not _warned_fallback:
        warnings.warn(f"softmax_row_dots: the CUDA kernel failed ({type(err).__name__}: {err}); "
                      "falling back to the torch path", RuntimeWarning, stacklevel=3)
        _warned_fallback = True


def row_logsumexp(logits: torch.Tensor, *, chunk_size: int = 16384) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-row ``(m, log s)`` with ``lse = m + log s`` (float32 [N]), reduced over vocabulary chunks.

    Kept as the pair (max, log-sum) rather than a rounded lse, which stays accurate at large absolute logits.
    """
    n, v = logits.shape
    state = None
    no_target = torch.full((n,), -1, dtype=torch.long, device=logits.device)
    for lo in range(0, v, chunk_size):
        hi = min(v, lo + chunk_size)
        st = _red.chunk_state(
            logits[:, lo:hi], no_target, torch.zeros(hi - lo, dtype=torch.bool, device=logits.device)
        )
        state = st if state is None else _red.merge_states(state, st)
    if state is None:
        raise ValueError("logits have an empty vocabulary dimension")
    return state.m, torch.log(state.s)


def softmax_row_dots(
    logits: torch.Tensor, pairs: torch.Tensor, *, chunk_size: int = 16384
) -> torch.Tensor:
    """``⟨softmax(logits[j]), softmax(logits[k])⟩`` for each ``(j, k)`` in ``pairs``.

    Parameters
    ----------
    logits : Tensor[N, V] (float32/bf16/fp16; ``-inf`` allowed)
    pairs : LongTensor[P, 2] of row indices

    Returns
    -------
    float32 Tensor[P] in [0, 1]. Computed as ``Σ_v exp(l_jv − lse_j)·exp(l_kv − lse_k)`` over
    vocabulary chunks (extra memory O(P × chunk)); dispatched to the CuPy kernel when the
    tensor is on a CUDA device and :func:`tokenbook.scoring.cuda.cuda_available_for` allows it.
    """
    if logits.dim() != 2:
        raise ValueError(f"logits must have shape [N, V], got {tuple(logits.shape)}")
    pairs = torch.as_tensor(pairs, device=logits.device)
    if pairs.dim() != 2 or pairs.shape[1] != 2:
        raise ValueError(f"pairs must have shape [P, 2], got {tuple(pairs.shape)}")
    pairs = pairs.long()
    n = logits.shape[0]
    if pairs.numel() and (int(pairs.min()) < 0 or int(pairs.max()) >= n):
        raise IndexError(f"pairs index rows outside [0, {n})")
    if _cuda is not None and logits.device.type == "cuda" and _cuda.cuda_available_for(logits):
        try:
            return _cuda.softmax_row_dots_cuda(logits, pairs)
        except (IndexError, FloatingPointError):  # bad input: the same errors as the torch path
            raise
        except Exception as err:  # pragma: no cover - compile/launch failure on this GPU
            _warn_cuda_fallback(err)
    m, log_s = row_logsumexp(logits, chunk_size=chunk_size)
    bad = ~torch.isfinite(m) | ~torch.isfinite(log_s)
    if bool(bad.any()):
        rows = torch.nonzero(bad).flatten().tolist()[:10]
        raise FloatingPointError(f"rows {rows} of logits are NaN, +inf or all -inf: no softmax")
    lse = m + log_s
    j, k = pairs[:, 0], pairs[:, 1]
    out = torch.zeros(pairs.shape[0], dtype=torch.float32, device=logits.device)
    v = logits.shape[1]
    for lo in range(0, v, chunk_size):
        hi = min(v, lo + chunk_size)
        # exp(l_j - lse_j) with the shift done as (l - m) - log s for accuracy at large |logit|
        pj = torch.exp(logits[j, lo:hi].float() - m[j, None] - log_s[j, None])
        pk = torch.exp(logits[k, lo:hi].float() - m[k, None] - log_s[k, None])
        out += torch.linalg.vecdot(pj, pk)
    del lse
    return out
