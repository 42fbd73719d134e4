"""tokenbook.scoring.cuda's host code (validation, dtype/stride handling, argument order, output
allocation, the two-pass dots) run without a GPU: its one device hook, ``_launch`` (DLPack export
and CuPy kernel launch), is redirected to the same kernels compiled for the
CPU with the SIMT harness, so the wrappers run on CPU tensors and are compared with the torch
reference (tokenbook.scoring.reduction, tokenbook.scoring.dots)."""

from __future__ import annotations


import pytest

torch = pytest.importorskip("torch")

NEG_INF = float("-inf")



@pytest.fixture()
def cuda(simt, monkeypatch):
    """tokenbook.scoring.cuda with its kernels running on the CPU harness."""
    from tokenbook.scoring import cuda as mod

    lib = simt.lib
    launched = []

    def fake_launch(name, device, grid, block, args):
        assert name in mod._KERNELS and block % 32 == 0 and 0 < block <= 1024 and grid > 0
        launched.append(name)
        for a in args:  # what the real _launch hands to CuPy: tensors (DLPack) and ints
            assert (isinstance(a, torch.Tensor) and a.device == device) or type(a) is int, type(a)
        c_args = [a.data_ptr() if isinstance(a, torch.Tensor) else a for a in args]
        if name.startswith("row_state_"):
            rc = lib.tb_row_state(int(name.endswith("bf16")), *c_args, block, grid)
        elif name.startswith("softmax_dots_"):
            rc = lib.tb_softmax_dots(int(name.endswith("bf16")), *c_args, block, grid)
        else:
            rc = lib.tb_merge_states(*c_args, block, grid)
        assert rc == 0, lib.simt_last_error().decode()

    monkeypatch.setattr(mod, "_launch", fake_launch)
    mod.launched = launched
    yield mod
    del mod.launched


def _logits(n, c, scale, *, p_neginf=0.0, seed=0):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, c, generator=g) * scale
    if p_neginf:
        x[torch.rand(n, c, generator=g) < p_neginf] = NEG_INF
    return x, torch.randint(-1, c, (n,), generator=g), torch.rand(c, generator=g) < 0.3


def _assert_states(got, want, rtol=1e-5, atol=1e-6):
    for name, g, w in zip(("m", "s", "u", "b", "xt"), got, want):
        assert g.dtype == torch.float32 and g.shape == w.shape, name
        torch.testing.assert_close(g, w, rtol=rtol, atol=atol, equal_nan=True, msg=name)


@pytest.mark.slow
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
def test_chunk_state_wrapper_matches_the_reference(cuda, dtype):
    from tokenbook.scoring import reduction

    x, t, bow = _logits(6, 700, 4.0, p_neginf=0.2, seed=1)
    x[3] = NEG_INF
    x = x.to(dtype)
    got = cuda.chunk_state_cuda(x, t, bow)
    _assert_states(got, reduction.chunk_state(x, t, bow))
    assert cuda.launched == ["row_state_bf16" if dtype == torch.bfloat16 else "row_state_f32"]


def test_chunk_views_merge_and_column_strided_logits(cuda):
    from tokenbook.scoring import reduction

    x, t, bow = _logits(5, 1000, 3.0, p_neginf=0.1, seed=2)
    state = reduction.init_state(5)
    for lo in range(0, 1000, 384):  # row-strided chunk views, passed without a copy
        hi = min(1000, lo + 384)
        tl = torch.where((t >= lo) & (t < hi), t - lo, -1)
        state = cuda.merge_states_cuda(state, cuda.chunk_state_cuda(x[:, lo:hi], tl, bow[lo:hi]))
    _assert_states(state, reduction.chunk_state(x, t, bow))
    xt = x.t().contiguous().t()  # column stride != 1: the wrapper makes it contiguous
    _assert_states(cuda.chunk_state_cuda(xt, t, bow), reduction.chunk_state(x, t, bow))


def test_wrapper_validation_and_empty_inputs(cuda):
    from tokenbook.scoring import reduction

    x, t, bow = _logits(3, 10, 1.0)
    with pytest.raises(ValueError, match="target_local"):
        cuda.chunk_state_cuda(x, t[:2], bow)
    with pytest.raises(ValueError, match="bow_mask"):
        cuda.chunk_state_cuda(x, t, bow[:9])
    with pytest.raises(ValueError, match=r"\[N, C\]"):
        cuda.chunk_state_cuda(x[0], t, bow)
    _assert_states(cuda.chunk_state_cuda(x[:, :0], t, bow[:0]), reduction.init_state(3))
    assert cuda.chunk_state_cuda(x[:0], t[:0], bow).m.shape == (0,)
    assert cuda.launched == []


def test_softmax_row_dots_wrapper_matches_the_torch_path(cuda):
    from tokenbook.scoring import dots

    x, _, _ = _logits(6, 900, 5.0, p_neginf=0.1, seed=3)
    pairs = torch.tensor([[0, 0], [0, 5], [5, 0], [2, 3], [4, 4], [1, 2]])
    got = cuda.softmax_row_dots_cuda(x, pairs)
    torch.testing.assert_close(got, dots.softmax_row_dots(x, pairs, chunk_size=256), rtol=1e-5, atol=1e-8)
    xb = x.to(torch.bfloat16)
    torch.testing.assert_close(cuda.softmax_row_dots_cuda(xb, pairs), dots.softmax_row_dots(xb, pairs),
                               rtol=1e-5, atol=1e-8)
    xh = x.to(torch.float16)  # converted to float32 by the wrapper
    torch.testing.assert_close(cuda.softmax_row_dots_cuda(xh, pairs), dots.softmax_row_dots(xh, pairs),
                               rtol=1e-5, atol=1e-8)
    assert cuda.launched == ["row_state_f32", "softmax_dots_f32", "row_state_bf16", "softmax_dots_bf16",
                             "row_state_f32", "softmax_dots_f32"]
    assert cuda.softmax_row_dots_cuda(x, pairs[:0]).shape == (0,)


def test_softmax_row_dots_wrapper_errors(cuda):
    x, _, _ = _logits(4, 50, 1.0)
    x[2] = NEG_INF
    with pytest.raises(FloatingPointError, match=r"rows \[2\]"):
        cuda.softmax_row_dots_cuda(x, torch.tensor([[0, 1]]))
    with pytest.raises(IndexError):
        cuda.softmax_row_dots_cuda(x, torch.tensor([[0, 4]]))
    with pytest.raises(ValueError, match=r"\[P, 2\]"):
        cuda.softmax_row_dots_cuda(x, torch.tensor([0, 1]))
