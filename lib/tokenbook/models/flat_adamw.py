"""AdamW over one contiguous buffer: the same update, a fraction of the per-tensor overhead.

The tiny models have many small parameter tensors (87 in the tiny Marian), and on a CPU
``torch.optim.AdamW(foreach=True)`` runs each of its ~10 elementwise operations once per tensor:
about a fifth of a tiny Marian training step. :func:`flat_adamw` copies the parameters into one
contiguous buffer and their gradients into another, makes each parameter (and its ``.grad``) a
view of its slice, and runs AdamW on the single flat tensor: ~10 operations per step.

Every operation of the update is elementwise, so each element sees the same arithmetic in the
same order: the weights after training are **bitwise** those of the per-tensor optimizer
(``tests/models/test_models_flat_adamw.py`` checks it on the tiny Marian and the policy).
Backward accumulates into the gradient views (``0 + g``, exact), so the optimizer's
``zero_grad`` always zeroes the buffer in place. Clip gradients on the parameters as usual
(``clip_grad_norm_(params, ...)``: the per-tensor norms, unchanged).

One difference, stated: a parameter that gets *no* gradient in a step is skipped by
``torch.optim.AdamW`` but sees a zero gradient here (its momentum still moves it). Use it where
every trainable parameter takes part in every loss, as in the book's training loops.

Example
-------
>>> import torch
>>> layer = torch.nn.Linear(3, 2)
>>> with flat_adamw(layer.parameters(), lr=0.1) as opt:
...     opt.zero_grad()
...     layer(torch.ones(1, 3)).sum().backward()
...     opt.step()
>>> layer.weight.grad.shape, layer.weight.is_contiguous()
(torch.Size([2, 3]), True)
"""

from __future__ import annotations

from contextlib import contextmanager
from typing import Iterable, Iterator

import torch

__all__ = ["FlatAdamW", "flat_adamw"]


class FlatAdamW(torch.optim.AdamW):
    """``torch.optim.AdamW`` over one flat parameter whose ``.grad`` the model's gradient views
    share; ``zero_grad`` zeroes that buffer in place (never sets it to None), and ``step``
    refuses to run when a view was replaced (e.g. by ``model.zero_grad()``)."""

    def __init__(self, flat: torch.nn.Parameter, views: list[torch.nn.Parameter], **kwargs):
        super().__init__([flat], **kwargs)
        self._flat, self._views = flat, views

    def zero_grad(self, set_to_none: bool = True) -> None:  # noqa: ARG002 - always in place
        self._flat.grad.zero_()

    def step(self, closure=None):
        buffer = self._flat.grad
        start, end = buffer.data_ptr(), buffer.data_ptr() + buffer.nbytes
        if not all(p.grad is not None and start <= p.grad.data_ptr() < end for p in self._views):
            raise RuntimeError("flat_adamw: a parameter's .grad is no longer a view of the flat "
                               "buffer (was model.zero_grad() or set_to_none used?); call the "
                               "optimizer's zero_grad() only")
        return super().step(closure)


@contextmanager
def flat_adamw(params: Iterable[torch.nn.Parameter], **adamw_kwargs) -> Iterator[FlatAdamW]:
    """Train ``params`` with AdamW on one contiguous buffer (see the module docstring).

    ``adamw_kwargs`` go to :class:`torch.optim.AdamW` (``lr``, ``betas``, ``weight_decay``,
    ``eps``; ``foreach`` is set). Parameters without ``requires_grad`` are left alone. On exit
    every parameter gets its own storage again (``save_pretrained`` refuses tensors sharing
    memory) with the same values and last gradients.
    """
    params = list(dict.fromkeys(p for p in params if p.requires_grad))
    if not params:
        raise ValueError("flat_adamw got no trainable parameters")
    kinds = {(p.dtype, p.device) for p in params}
    if len(kinds) > 1:
        raise ValueError(f"flat_adamw needs one dtype and device, got {sorted(map(str, kinds))}: "
                         "give each dtype/device its own optimizer")
    if "foreach" in adamw_kwargs or "fused" in adamw_kwargs:
        raise ValueError("flat_adamw sets foreach itself (fused would change the arithmetic)")
    with torch.no_grad():
        data = torch.cat([p.detach().reshape(-1) for p in params])
    grad = torch.zeros_like(data)
    offset = 0
    for p in params:
        n = p.numel()
        p.data = data[offset:offset + n].view_as(p)
        p.grad = grad[offset:offset + n].view_as(p)
        offset += n
    flat = torch.nn.Parameter(data)
    flat.grad = grad
    try:
        yield FlatAdamW(flat, params, foreach=True, **adamw_kwargs)
    finally:
        for p in params:
            p.data = p.data.clone()
            p.grad = None if p.grad is None else p.grad.clone()
