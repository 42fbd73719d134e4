"""softmax_row_dots (CPU path) against the dense computation."""

import math

import pytest
import torch

from tokenbook.scoring import row_logsumexp, softmax_row_dots


def dense(logits, pairs):
    p = logits.double().softmax(-1)
    return (p[pairs[:, 0]] * p[pairs[:, 1]]).sum(-1)


@pytest.mark.parametrize("chunk", [1, 13, 1000])
def test_matches_dense(chunk):
    g = torch.Generator().manual_seed(chunk)
    logits = torch.randn(7, 300, generator=g) * 3
    pairs = torch.randint(0, 7, (20, 2), generator=g)
    got = softmax_row_dots(logits, pairs, chunk_size=chunk)
    assert got.shape == (20,) and got.dtype == torch.float32
    torch.testing.assert_close(got.double(), dense(logits, pairs), atol=1e-6, rtol=1e-5)


def test_self_dot_is_collision_probability_and_bounds():
    logits = torch.tensor([[0.0, 0.0, 0.0, 0.0], [10.0, -10.0, -10.0, -10.0], [0.0, -math.inf, 0.0, -math.inf]])
    pairs = torch.tensor([[0, 0], [1, 1], [2, 2], [0, 1], [1, 2]])
    got = softmax_row_dots(logits, pairs, chunk_size=3)
    torch.testing.assert_close(got[:3].double(), torch.tensor([0.25, 1.0, 0.5], dtype=torch.float64), atol=1e-6, rtol=0)
    torch.testing.assert_close(got.double(), dense(logits, pairs), atol=1e-7, rtol=1e-6)
    assert torch.all(got >= 0) and torch.all(got <= 1 + 1e-6)


def test_large_logits_bf16():
    g = torch.Generator().manual_seed(0)
    logits = (torch.randn(4, 500, generator=g) * 20 + 1e4).bfloat16()
    pairs = torch.tensor([[0, 1], [2, 3], [1, 1]])
    torch.testing.assert_close(softmax_row_dots(logits, pairs, chunk_size=64).double(),
                               dense(logits.float(), pairs), atol=1e-5, rtol=1e-4)
    m, log_s = row_logsumexp(logits, chunk_size=64)
    torch.testing.assert_close((m + log_s).double(), torch.logsumexp(logits.double(), -1), atol=1e-2, rtol=0)


def test_errors():
    with pytest.raises(ValueError, match=r"\[P, 2\]"):
        softmax_row_dots(torch.zeros(2, 3), torch.zeros(3, dtype=torch.long))
    with pytest.raises(IndexError):
        softmax_row_dots(torch.zeros(2, 3), torch.tensor([[0, 2]]))
    bad = torch.zeros(2, 3)
    bad[1, 0] = float("nan")
    with pytest.raises(FloatingPointError, match=r"rows \[1\]"):
        softmax_row_dots(bad, torch.tensor([[0, 1]]))
