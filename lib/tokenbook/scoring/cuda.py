"""CUDA path of the scoring reduction: CuPy raw kernels with the torch reference's semantics.

The kernels are the CUDA C sources shipped as ``tokenbook.kernels`` (``row_state.cu``,
``softmax_dots.cu``), compiled once per device with ``cupy.RawModule`` (NVRTC) and cached.
Tensors cross between torch and CuPy through DLPack without copies, and every kernel runs on
torch's current CUDA stream, so it is ordered with the surrounding torch work.

Public functions (same signatures and semantics as :mod:`tokenbook.scoring.reduction`):

* :func:`cuda_available_for` — True only if CuPy imports, ``cupy.cuda.is_available()`` and the
  tensor lives on a CUDA device, and the environment variable ``TOKENBOOK_CUDA_KERNELS`` is not
  ``0`` (set it to run the torch reference on the GPU instead: a benchmark's baseline, or a
  workaround if a kernel misbehaves). Call it before any other function of this module.
* :func:`chunk_state_cuda` — ``(logits[N, C], target_local[N], bow_mask[C]) -> RowState``, one
  fused pass over the chunk (online max; ``-inf`` logits contribute exactly 0).
* :func:`merge_states_cuda` — exact merge of two :class:`RowState` (one fused elementwise kernel).
* :func:`softmax_row_dots_cuda` — ``<softmax(logits[j]), softmax(logits[k])>`` per pair, [P],
  float32, without materialising the softmax; like the torch path it raises IndexError for rows
  out of range and FloatingPointError when a row is NaN, +inf or all ``-inf`` (no softmax).

CuPy compiles with ``-ftz=true`` (denormals flushed to zero): a state field below ~1e-38
(a beginning-of-word mass under e^-87 relative to the row's max) becomes 0 here, where the torch
reference keeps a subnormal; such a ``bow_logmass`` is ``-inf`` instead of about -87 to -103 nats.

float32 and bfloat16 logits are read natively (bf16 as its 16-bit pattern, widened exactly);
other float dtypes are converted to float32 first. Every reduction runs in float32. This module
imports without CuPy and without a GPU; the kernels are only compiled on first use.
"""

from __future__ import annotations

import functools
import os
import re
from importlib import resources

import numpy as np
import torch

from tokenbook.scoring.reduction import RowState, check_chunk_shapes, init_state

__all__ = [
    "KERNELS_ENV",
    "cuda_available_for",
    "chunk_state_cuda",
    "merge_states_cuda",
    "softmax_row_dots_cuda",
    "kernel_source",
    "compile_options",
]

#: environment variable: ``0`` turns the kernels off (the torch reference runs on the GPU instead)
KERNELS_ENV = "TOKENBOOK_CUDA_KERNELS"
#: threads per block of the row kernels (a multiple of 32, at most 1024)
ROW_BLOCK = 256
#: threads per block of the elementwise merge kernel
MERGE_BLOCK = 256
_MAX_GRID = 1 << 20  # the kernels grid-stride over rows / pairs beyond this

_KERNELS = {
    "row_state_f32": "row_state.cu",
    "row_state_bf16": "row_state.cu",
    "merge_states": "row_state.cu",
    "softmax_dots_f32": "softmax_dots.cu",
    "softmax_dots_bf16": "softmax_dots.cu",
}


def _cupy():
    try:
        import cupy
    except Exception:  # not installed, or a broken CUDA install
        return None
    return cupy


def cuda_available_for(tensor: torch.Tensor) -> bool:
    """True if the CuPy kernels can run on ``tensor``: CuPy imports, it sees a CUDA device,
    ``tensor`` is on a CUDA device, and ``TOKENBOOK_CUDA_KERNELS`` is not ``"0"``."""
    if not isinstance(tensor, torch.Tensor) or tensor.device.type != "cuda":
        return False
    if os.environ.get(KERNELS_ENV, "1").strip() == "0":
        return False
    cupy = _cupy()
    if cupy is None:
        return False
    try:
        return bool(cupy.cuda.is_available())
    except Exception:
        return False


_LOCAL_INCLUDE = re.compile(r'^[ \t]*#[ \t]*include[ \t]+"([^"]+)"[ \t]*$', re.MULTILINE)


def kernel_source(name: str) -> str:
    """The CUDA C source of ``kernels/<name>`` as compiled: local ``#include "x.cuh"`` lines are
    expanded in place (once each), so the text is self-contained and CuPy's compile cache, keyed by
    the source text, sees every change to a shared header."""
    root = resources.files("tokenbook.kernels")
    seen: set[str] = set()

    def expand(file: str) -> str:
        def sub(match: re.Match) -> str:
            inc = match.group(1)
            if inc in seen:
                return f"// {inc} already included"
            seen.add(inc)
            body = re.sub(r"^[ \t]*#[ \t]*pragma[ \t]+once[ \t]*$", "", expand(inc), flags=re.MULTILINE)
            return f"// ---- begin {inc}\n{body}\n// ---- end {inc}"

        return _LOCAL_INCLUDE.sub(sub, root.joinpath(file).read_text())

    return expand(name)


def compile_options() -> tuple[str, ...]:
    """NVRTC options of the kernels (CuPy adds the device's -arch); tests compile with these."""
    return ("-std=c++17",)


@functools.lru_cache(maxsize=None)
def _module(file: str, device_index: int):
    cupy = _cupy()
    with cupy.cuda.Device(device_index):
        mod = cupy.RawModule(code=kernel_source(file), options=compile_options())
        mod.compile()
    return mod


@functools.lru_cache(maxsize=None)
def _function(name: str, device_index: int):
    return _module(_KERNELS[name], device_index).get_function(name)


def _cupy_stream(stream: torch.cuda.Stream, index: int):
    """CuPy view of a torch CUDA stream (the CUDA stream protocol where CuPy has it)."""
    cupy = _cupy()
    if hasattr(cupy.cuda.Stream, "from_external"):
        try:
            return cupy.cuda.Stream.from_external(stream)
        except TypeError:  # a torch without __cuda_stream__
            pass
    return cupy.cuda.ExternalStream(stream.cuda_stream, index)


def _launch(name: str, device: torch.device, grid: int, block: int, args: tuple) -> None:
    """Launch kernel ``name`` on torch's current stream of ``device``.

    ``args`` holds torch CUDA tensors (passed as device pointers through DLPack, no copy) and
    Python ints (passed as ``long long``), in the kernel's parameter order.
    """
    cupy = _cupy()
    index = device.index if device.index is not None else torch.cuda.current_device()
    fn = _function(name, index)
    with cupy.cuda.Device(index), _cupy_stream(torch.cuda.current_stream(index), index):
        # DLPack exchange inside the stream context: CuPy's current stream is torch's, so the
        # export needs no cross-stream synchronisation
        c_args = tuple(_cp(a.detach()) if isinstance(a, torch.Tensor) else np.int64(a) for a in args)
        fn((grid,), (block,), c_args)


def _cp(t: torch.Tensor):
    """Zero-copy CuPy view of a CUDA tensor (DLPack)."""
    return _cupy().from_dlpack(t)


def _logits_view(logits: torch.Tensor) -> tuple[str, torch.Tensor, int]:
    """(dtype suffix, tensor the kernel reads, row stride in elements); column stride made 1."""
    if not logits.is_floating_point():
        raise TypeError(f"logits must be a floating-point tensor, got {logits.dtype}")
    if logits.dtype not in (torch.float32, torch.bfloat16):
        logits = logits.float()
    if logits.shape[1] > 1 and logits.stride(1) != 1:
        logits = logits.contiguous()
    ld = logits.stride(0) if logits.shape[0] > 1 else logits.shape[1]
    if logits.dtype == torch.bfloat16:
        return "bf16", logits.view(torch.int16), ld
    return "f32", logits, ld


def _row_block(c: int) -> int:
    return int(min(ROW_BLOCK, max(32, -(-c // 32) * 32)))


def _row_state(logits: torch.Tensor, target: torch.Tensor, bow_u8: torch.Tensor, view=None):
    n, c = logits.shape
    suffix, x, ld = view if view is not None else _logits_view(logits)
    out = [torch.empty(n, dtype=torch.float32, device=logits.device) for _ in range(5)]
    if n > 0:
        args = (x, n, c, ld, target, bow_u8, *out)
        _launch(f"row_state_{suffix}", logits.device, min(n, _MAX_GRID), _row_block(c), args)
    return out


def _check_device(name: str, t: torch.Tensor, device: torch.device) -> None:
    if t.device != device:
        raise ValueError(f"{name} is on {t.device} but the logits are on {device}")


def chunk_state_cuda(logits: torch.Tensor, target_local: torch.Tensor, bow_mask: torch.Tensor):
    """CUDA version of :func:`tokenbook.scoring.reduction.chunk_state` (same arguments and result).

    logits [N, C] (float32 or bf16 read natively; -inf allowed), target_local LongTensor[N] (the
    target's index in this chunk or -1), bow_mask BoolTensor[C]. Returns a ``RowState`` of
    float32 [N] tensors (m, s, u, b, xt).
    """
    n, c = check_chunk_shapes(logits, target_local, bow_mask)
    _check_device("target_local", target_local, logits.device)
    _check_device("bow_mask", bow_mask, logits.device)
    if c == 0:
        return init_state(n, logits.device)
    target = target_local.to(torch.int64).contiguous()
    bow = bow_mask.to(torch.bool).contiguous().view(torch.uint8)
    return RowState(*_row_state(logits, target, bow))


def merge_states_cuda(a, b):
    """CUDA version of :func:`tokenbook.scoring.reduction.merge_states`: one fused kernel."""
    n = a.m.shape[0]
    device = a.m.device
    fields = [f.to(torch.float32).contiguous() for f in (*a, *b)]
    for f in fields:
        if f.shape != (n,):
            raise ValueError(f"every state field must have shape [{n}], got {tuple(f.shape)}")
        _check_device("a state field", f, device)
    out = [torch.empty(n, dtype=torch.float32, device=device) for _ in range(5)]
    if n > 0:
        grid = min(-(-n // MERGE_BLOCK), _MAX_GRID)
        args = (n, *fields, *out)
        _launch("merge_states", device, grid, MERGE_BLOCK, args)
    return RowState(*out)


def softmax_row_dots_cuda(logits: torch.Tensor, pairs: torch.Tensor) -> torch.Tensor:
    """``<softmax(logits[j]), softmax(logits[k])>`` for each row (j, k) of ``pairs``.

    logits [N, V] float (bf16/float32 read natively), pairs LongTensor[P, 2] of row indices.
    Returns float32 [P] (a probability-weighted overlap in [0, 1]); two passes: per-row
    (max, sum-exp), then one block per pair. Like the torch path
    (:func:`tokenbook.scoring.dots.softmax_row_dots`) it raises IndexError for row indices out of
    range and FloatingPointError when a row of logits is NaN, +inf or all -inf (no softmax; the
    kernel itself writes NaN for such pairs).
    """
    if logits.dim() != 2:
        raise ValueError(f"logits must have shape [N, V], got {tuple(logits.shape)}")
    if pairs.dim() != 2 or pairs.shape[1] != 2:
        raise ValueError(f"pairs must have shape [P, 2], got {tuple(pairs.shape)}")
    if pairs.dtype.is_floating_point or pairs.dtype == torch.bool:
        raise TypeError(f"pairs must hold integer row indices, got {pairs.dtype}")
    _check_device("pairs", pairs, logits.device)
    n, v = logits.shape
    p = pairs.shape[0]
    out = torch.empty(p, dtype=torch.float32, device=logits.device)
    if p == 0:
        return out
    pairs = pairs.to(torch.int64).contiguous()
    lo, hi = int(pairs.min()), int(pairs.max())
    if lo < 0 or hi >= n:
        raise IndexError(f"pairs index rows outside [0, {n}) (got {lo}..{hi})")
    if v == 0:
        raise ValueError("logits have an empty vocabulary dimension")
    no_target = torch.full((n,), -1, dtype=torch.int64, device=logits.device)
    no_bow = torch.zeros(v, dtype=torch.uint8, device=logits.device)
    view = _logits_view(logits)  # converted once (fp16/fp64) for both passes
    m, s = _row_state(logits, no_target, no_bow, view)[:2]
    bad = ~torch.isfinite(m) | ~torch.isfinite(s) | (s <= 0)
    if bool(bad.any()):
        rows = torch.nonzero(bad).flatten().tolist()[:10]
        raise FloatingPointError(f"rows {rows} of logits are NaN, +inf or all -inf: no softmax")
    suffix, x, ld = view
    args = (x, n, v, ld, pairs, p, m, s, out)
    _launch(f"softmax_dots_{suffix}", logits.device, min(p, _MAX_GRID), _row_block(v), args)
    return out
