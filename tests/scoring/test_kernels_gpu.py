"""GPU parity: tokenbook.scoring.cuda (CuPy raw kernels) against the torch reference of the scoring
contract (tokenbook.scoring.reduction) and the torch softmax_row_dots. Marked ``gpu``: skipped (by
tests/conftest.py, with the reason) where CuPy sees no CUDA device."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

pytestmark = pytest.mark.gpu

NEG_INF = float("-inf")


def _require_gpu():
    from tokenbook.scoring import cuda

    if not torch.cuda.is_available():
        pytest.skip("torch sees no CUDA device")
    x = torch.zeros(1, device="cuda")
    if not cuda.cuda_available_for(x):
        pytest.skip("CuPy cannot use the CUDA device")
    return cuda


def _logits(n, c, scale, *, p_neginf=0.0, seed=0, dtype=torch.float32):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, c, generator=g) * scale
    if p_neginf:
        x[torch.rand(n, c, generator=g) < p_neginf] = NEG_INF
    t = torch.randint(-1, c, (n,), generator=g)
    bow = torch.rand(c, generator=g) < 0.3
    return x.to(dtype), t, bow


def _assert_states(got, want, *, rtol=1e-5, atol=1e-6):
    for name, g, w in zip(("m", "s", "u", "b", "xt"), got, want):
        torch.testing.assert_close(g.cpu(), w.cpu(), rtol=rtol, atol=atol, equal_nan=True, msg=name)


CASES = [
    dict(n=16, c=32000 + 7, scale=3.0),
    dict(n=5, c=517, scale=1e4),
    dict(n=5, c=517, scale=1e-30),
    dict(n=9, c=1000, scale=4.0, p_neginf=0.4),
    dict(n=1, c=3, scale=1.0),
]


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("case", CASES, ids=lambda c: f"{c['n']}x{c['c']}@{c['scale']:g}")
def test_chunk_state_matches_the_reference(case, dtype):
    cuda = _require_gpu()
    from tokenbook.scoring import reduction

    x, t, bow = _logits(**case, dtype=dtype)
    if case["n"] > 3:
        x[2] = NEG_INF  # a whole -inf row
    got = cuda.chunk_state_cuda(x.cuda(), t.cuda(), bow.cuda())
    want = reduction.chunk_state(x, t, bow)
    _assert_states(got, want)
    (lp, ent, bl), (rlp, rent, rbl) = reduction.finalize(got), reduction.finalize(want)
    torch.testing.assert_close(lp.cpu(), rlp, rtol=1e-5, atol=2e-5, equal_nan=True)
    torch.testing.assert_close(ent.cpu(), rent, rtol=1e-5, atol=2e-5, equal_nan=True)
    ok = rbl > -80  # below ~e^-87 a float32 b is subnormal: rounding differs with the order
    torch.testing.assert_close(bl.cpu()[ok], rbl[ok], rtol=1e-5, atol=2e-5)


def test_chunked_views_and_merge_equal_the_single_pass():
    cuda = _require_gpu()
    from tokenbook.scoring import reduction

    x, t, bow = _logits(12, 50000, 6.0, p_neginf=0.1, seed=3)
    x[0] = NEG_INF
    x[1, :20000] = NEG_INF
    xg, tg, bg = x.cuda(), t.cuda(), bow.cuda()
    state = reduction.init_state(12, "cuda")
    for lo in range(0, 50000, 16384):  # non-contiguous chunk views of the full logits
        hi = min(50000, lo + 16384)
        tl = torch.where((tg >= lo) & (tg < hi), tg - lo, -1)
        state = cuda.merge_states_cuda(state, cuda.chunk_state_cuda(xg[:, lo:hi], tl, bg[lo:hi]))
    _assert_states(state, reduction.chunk_state(x, t, bow))
    gpu_ref = reduction.merge_states(reduction.init_state(12, "cuda"), cuda.chunk_state_cuda(xg, tg, bg))
    _assert_states(cuda.merge_states_cuda(reduction.init_state(12, "cuda"), cuda.chunk_state_cuda(xg, tg, bg)), gpu_ref)


def test_merge_matches_the_reference_merge():
    cuda = _require_gpu()
    from tokenbook.scoring import reduction

    x, t, bow = _logits(64, 3000, 5.0, p_neginf=0.3, seed=4)
    x[:5, :1500] = NEG_INF
    a = reduction.chunk_state(x[:, :1500], torch.where(t < 1500, t, -1), bow[:1500])
    b = reduction.chunk_state(x[:, 1500:], torch.where(t >= 1500, t - 1500, -1), bow[1500:])
    got = cuda.merge_states_cuda(reduction.RowState(*(f.cuda() for f in a)), reduction.RowState(*(f.cuda() for f in b)))
    _assert_states(got, reduction.merge_states(a, b))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_softmax_row_dots_matches_torch(dtype):
    cuda = _require_gpu()
    from tokenbook.scoring import dots

    x, _, _ = _logits(10, 40000 + 3, 4.0, p_neginf=0.05, seed=5, dtype=dtype)
    j, k = torch.meshgrid(torch.arange(10), torch.arange(10), indexing="ij")
    pairs = torch.stack([j.flatten(), k.flatten()], 1)
    got = cuda.softmax_row_dots_cuda(x.cuda(), pairs.cuda())
    want = dots.softmax_row_dots(x, pairs)  # CPU tensors: the torch path
    torch.testing.assert_close(got.cpu(), want, rtol=1e-5, atol=1e-8)


def test_softmax_row_dots_refuses_rows_without_softmax_and_bad_indices():
    cuda = _require_gpu()
    x = torch.randn(4, 100, device="cuda")
    x[3] = NEG_INF
    with pytest.raises(FloatingPointError, match="rows \\[3\\]"):
        cuda.softmax_row_dots_cuda(x, torch.tensor([[0, 1]], device="cuda"))
    with pytest.raises(IndexError):
        cuda.softmax_row_dots_cuda(x[:3], torch.tensor([[0, 3]], device="cuda"))


@pytest.mark.parametrize("arch", ["gpt2", "gemma2"])
def test_score_texts_on_the_gpu_equals_the_cpu(arch, monkeypatch):
    """The whole engine on CUDA (CuPy kernels, then the torch reference on the GPU) against the CPU
    path: same token table, log-probabilities and entropies within float32 rounding."""
    cuda = _require_gpu()
    from tokenbook.scoring import score_texts
    from tokenbook.scoring._tiny import tiny_causal, tiny_tokenizer

    tok = tiny_tokenizer("metaspace")
    model = tiny_causal(arch, len(tok))
    texts = ["the dog runs in the park", "a cat.", "two birds sing in the old green tree today"]
    cpu = score_texts(model, tok, texts, progress=False, chunk_size=53, batch_size=2)
    gpu_model = model.to("cuda")
    x = torch.zeros(1, device="cuda")
    assert cuda.cuda_available_for(x)
    with_kernels = score_texts(gpu_model, tok, texts, progress=False, chunk_size=53, batch_size=2,
                               device="cuda")
    gpu_defaults = score_texts(gpu_model, tok, texts, progress=False, device="cuda")  # default_blocks
    monkeypatch.setenv(cuda.KERNELS_ENV, "0")
    assert not cuda.cuda_available_for(x)
    torch_on_gpu = score_texts(gpu_model, tok, texts, progress=False, chunk_size=53, batch_size=2,
                               device="cuda")
    for got in (with_kernels, gpu_defaults, torch_on_gpu):
        assert got[["seq_id", "token_idx", "token_id"]].equals(cpu[["seq_id", "token_idx", "token_id"]])
        for col in ("logprob", "entropy"):
            torch.testing.assert_close(torch.tensor(got[col].to_numpy()), torch.tensor(cpu[col].to_numpy()),
                                       rtol=1e-5, atol=2e-5)


def test_the_switch_is_read_on_every_call(monkeypatch):
    cuda = _require_gpu()
    x = torch.zeros(1, device="cuda")
    monkeypatch.setenv(cuda.KERNELS_ENV, "0")
    assert not cuda.cuda_available_for(x)
    monkeypatch.setenv(cuda.KERNELS_ENV, "1")
    assert cuda.cuda_available_for(x)
    assert not cuda.cuda_available_for(torch.zeros(1))  # a CPU tensor never
