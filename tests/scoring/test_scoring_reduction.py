"""The torch reference of the reduction contract against dense float64 computations."""

import math

import pytest
import torch

from tokenbook.scoring.reduction import RowState, chunk_state, finalize, init_state, merge_states


def dense(logits, targets, bow):
    x = logits.double()
    lsm = x.log_softmax(-1)
    p = lsm.exp()
    lp = lsm.gather(1, targets[:, None])[:, 0]
    ent = -(p * torch.where(p > 0, lsm, torch.zeros_like(lsm))).sum(-1)
    bow_lm = torch.logsumexp(lsm[:, bow], dim=-1)
    return lp, ent, bow_lm


def chunked(logits, targets, bow, bounds):
    st = init_state(logits.shape[0])
    for lo, hi in zip(bounds[:-1], bounds[1:]):
        loc = torch.where((targets >= lo) & (targets < hi), targets - lo, -1)
        st = merge_states(st, chunk_state(logits[:, lo:hi], loc, bow[lo:hi]))
    return finalize(st)


def bounds_for(v, chunk):
    return list(range(0, v, chunk)) + [v]


@pytest.mark.parametrize("chunk", [1, 7, 64, 100, 1000])
def test_chunked_equals_dense(chunk):
    g = torch.Generator().manual_seed(chunk)
    n, v = 9, 100
    logits = torch.randn(n, v, generator=g) * 4
    targets = torch.randint(0, v, (n,), generator=g)
    bow = torch.rand(v, generator=g) < 0.3
    got = chunked(logits, targets, bow, bounds_for(v, chunk))
    for a, b in zip(got, dense(logits, targets, bow)):
        torch.testing.assert_close(a.double(), b, atol=1e-5, rtol=1e-5)


def test_uneven_random_bounds_and_merge_order():
    g = torch.Generator().manual_seed(1)
    n, v = 5, 257
    logits = torch.randn(n, v, generator=g) * 10
    targets = torch.randint(0, v, (n,), generator=g)
    bow = torch.rand(v, generator=g) < 0.5
    cuts = sorted(set(torch.randint(1, v, (12,), generator=g).tolist()))
    bounds = [0] + cuts + [v]
    states = []
    for lo, hi in zip(bounds[:-1], bounds[1:]):
        loc = torch.where((targets >= lo) & (targets < hi), targets - lo, -1)
        states.append(chunk_state(logits[:, lo:hi], loc, bow[lo:hi]))
    # merge right-to-left as a tree: associativity and commutativity of the merge
    left = states[0]
    for s in states[1:]:
        left = merge_states(left, s)
    tree = states[::-1]
    while len(tree) > 1:
        tree = [merge_states(tree[i], tree[i + 1]) if i + 1 < len(tree) else tree[i]
                for i in range(0, len(tree), 2)]
    ref = dense(logits, targets, bow)
    for st in (left, tree[0]):
        for a, b in zip(finalize(st), ref):
            torch.testing.assert_close(a.double(), b, atol=1e-5, rtol=1e-5)


def test_minus_inf_logits_never_nan():
    v = 12
    logits = torch.randn(4, v)
    logits[0, :6] = -math.inf  # a whole chunk of -inf for row 0
    logits[1, 3] = -math.inf  # the target of row 1 is impossible
    logits[2, ::2] = -math.inf
    targets = torch.tensor([7, 3, 1, 0])
    bow = torch.zeros(v, dtype=torch.bool)
    bow[[1, 5, 7]] = True
    lp, ent, bl = chunked(logits, targets, bow, bounds_for(v, 6))
    assert not torch.isnan(lp).any() and not torch.isnan(ent).any() and not torch.isnan(bl).any()
    assert lp[1] == -math.inf
    ref = dense(logits, targets, bow)
    for a, b in zip((lp, ent, bl), ref):
        fin = torch.isfinite(b)
        torch.testing.assert_close(a.double()[fin], b[fin], atol=1e-5, rtol=1e-5)


def test_all_minus_inf_chunk_state_is_identity():
    st = chunk_state(torch.full((3, 4), -math.inf), torch.tensor([-1, 0, -1]), torch.ones(4, dtype=torch.bool))
    assert torch.all(st.m == -math.inf) and torch.all(st.s == 0) and torch.all(st.u == 0)
    assert not any(torch.isnan(t).any() for t in st)
    other = chunk_state(torch.tensor([[1.0, 2.0]] * 3), torch.tensor([0, -1, 1]), torch.tensor([True, False]))
    merged = merge_states(st, other)
    for a, b in zip(merged, other):
        torch.testing.assert_close(a[[0, 2]], b[[0, 2]])


def test_huge_and_tiny_logits():
    g = torch.Generator().manual_seed(3)
    v = 300
    logits = torch.cat([torch.randn(2, v, generator=g) * 1e-6, torch.randn(2, v, generator=g) * 50 + 1e4])
    targets = torch.tensor([0, 5, 17, int(logits[3].argmax())])
    bow = torch.arange(v) % 3 == 0
    got = chunked(logits, targets, bow, bounds_for(v, 64))
    ref = dense(logits, targets, bow)
    for a, b in zip(got, ref):
        torch.testing.assert_close(a.double(), b, atol=2e-4, rtol=1e-5)


def test_nan_propagates():
    logits = torch.randn(2, 10)
    logits[1, 4] = float("nan")
    st = chunk_state(logits, torch.tensor([0, 0]), torch.zeros(10, dtype=torch.bool))
    st = merge_states(st, chunk_state(torch.randn(2, 3), torch.tensor([-1, -1]), torch.zeros(3, dtype=torch.bool)))
    assert not torch.isnan(st.m[0]) and torch.isnan(st.m[1])


def test_bf16_input_reduced_in_float32():
    logits = (torch.randn(3, 50) * 5).bfloat16()
    targets = torch.tensor([1, 2, 3])
    bow = torch.arange(50) < 10
    st = chunk_state(logits, targets, bow)
    assert isinstance(st, RowState) and all(t.dtype == torch.float32 for t in st)
    for a, b in zip(finalize(st), dense(logits.float(), targets, bow)):
        torch.testing.assert_close(a.double(), b, atol=1e-5, rtol=1e-5)


def test_shape_errors():
    with pytest.raises(ValueError, match="target_local"):
        chunk_state(torch.zeros(2, 3), torch.zeros(3, dtype=torch.long), torch.zeros(3, dtype=torch.bool))
    with pytest.raises(ValueError, match="bow_mask"):
        chunk_state(torch.zeros(2, 3), torch.zeros(2, dtype=torch.long), torch.zeros(4, dtype=torch.bool))


def test_inplace_fast_variant_matches_reference():
    from tokenbook.scoring.reduction import chunk_state_

    g = torch.Generator().manual_seed(5)
    logits = torch.randn(6, 40, generator=g) * 5
    logits[1, 3:9] = -math.inf
    logits[2, :] = -math.inf
    logits[4, 7] = float("nan")
    targets = torch.tensor([0, 4, -1, 39, 7, -1])
    bow = torch.rand(40, generator=g) < 0.4
    ref = chunk_state(logits, targets, bow)
    cols = torch.stack([torch.ones(40), bow.float()], 1)
    got = chunk_state_(logits.clone(), targets, cols)
    for a, b in zip(got, ref):
        torch.testing.assert_close(a, b, equal_nan=True, atol=1e-5, rtol=1e-5)
