"""kernels/row_state.cu run on the CPU through the SIMT harness, against an independent float64 numpy
reference of the scoring contract and against the torch reference (tokenbook.scoring.reduction)."""

from __future__ import annotations


import numpy as np
import pytest
import torch

from tokenbook.scoring import reduction

NEG_INF = -np.inf



# ------------------------------------------------------------------ float64 reference (independent)
def ref_state(x, target, bow):
    """Contract state (m, s, u, b, xt) in float64 from the (float32 or bf16-rounded) logits."""
    x = np.asarray(x, np.float64)
    n, c = x.shape
    finite = x > NEG_INF
    m = np.where(finite.any(1), np.where(finite, x, NEG_INF).max(1), NEG_INF)
    d = np.where(finite, x - np.where(np.isfinite(m), m, 0.0)[:, None], 0.0)
    e = np.where(finite, np.exp(d), 0.0)
    s = e.sum(1)
    u = (e * d).sum(1)
    b = (e * np.asarray(bow, bool)[None, :]).sum(1)
    t = np.asarray(target)
    xt = np.where((t >= 0) & (t < c), x[np.arange(n), np.clip(t, 0, c - 1)], NEG_INF)
    return m, s, u, b, xt


def finalize(m, s, u, b, xt):
    with np.errstate(divide="ignore", invalid="ignore"):
        ls = np.log(np.asarray(s, np.float64))
        return xt - m - ls, ls - np.asarray(u, np.float64) / s, np.log(np.asarray(b, np.float64)) - ls


def assert_state_close(got, want, *, rtol=2e-6, atol_final=2e-5):
    m, s, u, b, xt = got
    rm, rs, ru, rb, rxt = want
    np.testing.assert_array_equal(m, rm.astype(np.float32))  # the max is exact
    np.testing.assert_array_equal(xt, rxt.astype(np.float32))  # the target logit is a copy
    np.testing.assert_allclose(s, rs, rtol=rtol, atol=0)
    np.testing.assert_allclose(b, rb, rtol=rtol, atol=1e-30)
    # u is a sum of same-signed terms; absolute slack relative to s for rows where u ~ 0
    err_u = np.abs(u - ru)
    assert np.all(err_u <= rtol * np.abs(ru) + 1e-6 * np.maximum(rs, 1)), (u, ru)
    assert not np.isnan(np.stack(got)).any()
    lp, ent, bl = finalize(*got)
    rlp, rent, rbl = finalize(*want)
    np.testing.assert_allclose(lp, rlp, rtol=1e-5, atol=atol_final)  # nats
    np.testing.assert_allclose(ent, rent, rtol=1e-5, atol=atol_final)
    # a float32 state holds b down to e^-87 (normal floats) and underflows to 0 below ~e^-103:
    # compare bow_logmass where it is representable, and require "tiny" elsewhere
    ok = rbl > -80
    np.testing.assert_allclose(bl[ok], rbl[ok], rtol=1e-5, atol=atol_final)
    assert np.all(bl[~ok] < -79)


def _case(rng, n, c, scale, *, p_neginf=0.0, p_bow=0.3):
    x = (rng.standard_normal((n, c)) * scale).astype(np.float32)
    if p_neginf:
        x[rng.random((n, c)) < p_neginf] = NEG_INF
    target = rng.integers(-1, c, n)
    bow = rng.random(c) < p_bow
    return x, target, bow


# ------------------------------------------------------------------ single pass
@pytest.mark.parametrize("block", [32, 128, 256])
def test_random_logits_vocabulary_not_a_multiple_of_the_block(simt, block):
    rng = np.random.default_rng(block)
    x, t, bow = _case(rng, 6, 1000 + 7, 3.0)
    assert_state_close(simt.row_state(x, t, bow, block=block), ref_state(x, t, bow))


@pytest.mark.parametrize("scale", [1e4, 1e-30])
def test_huge_and_tiny_logits(simt, scale):
    rng = np.random.default_rng(int(np.log10(scale)) + 50)
    x, t, bow = _case(rng, 5, 517, scale)
    if scale > 1:  # near-ties at the top: the second largest logit 0.5 nats below the max
        j = x.argmax(1)
        k = (j + 1) % x.shape[1]
        x[np.arange(5), k] = x[np.arange(5), j] - np.float32(0.5)
    got = simt.row_state(x, t, bow, block=128)
    assert_state_close(got, ref_state(x, t, bow))
    if scale < 1:  # uniform: entropy = log C, s = C
        np.testing.assert_allclose(finalize(*got)[1], np.log(517), rtol=1e-6)


def test_neg_inf_entries_and_whole_neg_inf_rows(simt):
    rng = np.random.default_rng(3)
    x, t, bow = _case(rng, 7, 300, 4.0, p_neginf=0.4)
    x[2] = NEG_INF                      # a whole -inf row
    x[5, :299] = NEG_INF                # only the last column is finite
    x[5, 299] = 1.5
    t[2], t[5] = 10, 299
    got = simt.row_state(x, t, bow, block=64)
    m, s, u, b, xt = got
    assert m[2] == NEG_INF and s[2] == 0 and u[2] == 0 and b[2] == 0 and xt[2] == NEG_INF
    assert s[5] == 1 and u[5] == 0 and m[5] == x[5, 299]
    assert not np.isnan(np.stack(got)).any()
    keep = np.array([i for i in range(7) if i != 2])
    assert_state_close(tuple(g[keep] for g in got), tuple(w[keep] for w in ref_state(x, t, bow)))


@pytest.mark.parametrize("c", [1, 5, 31, 33])
def test_one_row_and_chunks_smaller_than_a_warp(simt, c):
    rng = np.random.default_rng(c)
    x, t, bow = _case(rng, 1, c, 2.0)
    t[:] = c - 1
    assert_state_close(simt.row_state(x, t, bow, block=128), ref_state(x, t, bow))


def test_bf16_logits(simt, simt_build):
    b = simt_build
    rng = np.random.default_rng(11)
    x, t, bow = _case(rng, 6, 777, 5.0, p_neginf=0.05)
    bits = b.float_to_bf16_bits(x)
    xr = b.bf16_bits_to_float(bits)          # what the kernel sees: bf16-rounded logits
    assert not np.array_equal(xr, x)         # the rounding is real
    assert_state_close(simt.row_state(bits, t, bow, block=128), ref_state(xr, t, bow))


def test_row_stride_grid_stride_and_no_bow(simt):
    rng = np.random.default_rng(5)
    wide = (rng.standard_normal((10, 900)) * 3).astype(np.float32)
    x = wide[:, 100:611]  # a chunk view: row stride 900, not 511
    assert x.strides[0] == 900 * 4
    t = rng.integers(-1, 511, 10)
    got = simt.row_state(x, t, None, block=64, grid=3)  # 3 blocks for 10 rows
    want = ref_state(np.ascontiguousarray(x), t, np.zeros(511, bool))
    np.testing.assert_array_equal(got[3], 0)
    np.testing.assert_allclose(got[1], want[1], rtol=2e-6)
    np.testing.assert_array_equal(got[0], want[0].astype(np.float32))


def test_nan_and_pos_inf_logits_show_in_m_like_the_reference(simt):
    # the engine names a sequence with NaN/+inf logits by looking at m (NaN or +inf exactly then)
    x = np.zeros((4, 100), np.float32)
    x[1, 37] = np.nan
    x[3, 70] = np.inf
    for block in (32, 64):
        m, s, u, b, xt = simt.row_state(x, np.array([0, 0, 0, 0]), np.ones(100, bool), block=block)
        assert np.isnan(m[1]) and np.isnan(s[1])
        assert m[3] == np.inf
        assert np.isfinite(m[[0, 2]]).all() and np.all(s[[0, 2]] == 100)
    chunks = [simt.row_state(x[:, lo:lo + 25], np.full(4, -1), np.ones(25, bool), block=32)
              for lo in range(0, 100, 25)]
    st = chunks[0]
    for c in chunks[1:]:
        st = simt.merge_states(st, c)
    assert np.isnan(st[0][1]) and st[0][3] == np.inf and np.isfinite(st[0][[0, 2]]).all()


# ------------------------------------------------------------------ chunk + merge = single pass
def _chunked(simt, x, t, bow, edges, *, bits=None):
    state = None
    src = x if bits is None else bits
    for lo, hi in zip(edges[:-1], edges[1:]):
        tl = np.where((t >= lo) & (t < hi), t - lo, -1)
        st = simt.row_state(src[:, lo:hi], tl, bow[lo:hi], block=64)
        state = st if state is None else simt.merge_states(state, st, block=32, grid=2)
    return state


def test_merge_of_chunks_equals_single_pass(simt):
    rng = np.random.default_rng(7)
    n, c = 9, 1200
    x, t, bow = _case(rng, n, c, 6.0, p_neginf=0.2)
    x[0] = NEG_INF                   # whole row -inf
    x[1, :500] = NEG_INF             # the first chunk of row 1 is all -inf
    x[2, 500:] = NEG_INF             # the later chunks of row 2 are all -inf
    x[3, 1000] = 40.0                # the max sits in the last chunk
    t[0] = -1
    edges = [0, 250, 500, 777, 1200]
    merged = _chunked(simt, x, t, bow, edges)
    single = simt.row_state(x, t, bow, block=64)
    assert not np.isnan(np.stack(merged)).any()
    np.testing.assert_array_equal(merged[0], single[0])
    np.testing.assert_array_equal(merged[4], single[4])
    for g, w in zip(merged[1:4], single[1:4]):
        np.testing.assert_allclose(g, w, rtol=3e-6, atol=1e-30)
    keep = np.arange(1, n)
    assert_state_close(tuple(g[keep] for g in merged), tuple(w[keep] for w in ref_state(x, t, bow)))


def test_merge_is_symmetric_and_has_an_identity(simt):
    rng = np.random.default_rng(8)
    x, t, bow = _case(rng, 4, 300, 2.0)
    a = simt.row_state(x[:, :120], np.where(t < 120, t, -1), bow[:120], block=32)
    c = simt.row_state(x[:, 120:], np.where(t >= 120, t - 120, -1), bow[120:], block=32)
    ac, ca = simt.merge_states(a, c), simt.merge_states(c, a)
    for g, w in zip(ac, ca):
        np.testing.assert_array_equal(g, w)
    empty = (np.full(4, NEG_INF, np.float32), *np.zeros((3, 4), np.float32), np.full(4, NEG_INF, np.float32))
    for g, w in zip(simt.merge_states(empty, a), a):
        np.testing.assert_array_equal(g, w)


def test_merged_bf16_chunks(simt, simt_build):
    b = simt_build
    rng = np.random.default_rng(9)
    x, t, bow = _case(rng, 5, 640, 1e3)
    bits = b.float_to_bf16_bits(x)
    merged = _chunked(simt, x, t, bow, [0, 200, 333, 640], bits=bits)
    assert_state_close(merged, ref_state(b.bf16_bits_to_float(bits), t, bow))


# ------------------------------------------------------------------ the torch reference of the contract
def test_agrees_with_the_torch_reference(simt):
    rng = np.random.default_rng(12)
    x, t, bow = _case(rng, 8, 999, 8.0, p_neginf=0.1)
    x[4] = NEG_INF
    got = simt.row_state(x, t, bow, block=128)
    want = reduction.chunk_state(torch.from_numpy(x), torch.from_numpy(t), torch.from_numpy(bow))
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w.numpy(), rtol=1e-5, atol=1e-6)
    for g, w in zip(finalize(*got), reduction.finalize(want)):
        np.testing.assert_allclose(g, w.numpy(), rtol=1e-5, atol=1e-5)


def test_no_race_results_are_bitwise_identical_under_random_thread_orders(simt, monkeypatch):
    rng = np.random.default_rng(13)
    x, t, bow = _case(rng, 6, 2000, 5.0, p_neginf=0.1)
    base = simt.row_state(x, t, bow, block=128, grid=4)
    for seed in ["1", "2", "3"]:
        monkeypatch.setenv("SIMT_SEED", seed)
        for g, w in zip(simt.row_state(x, t, bow, block=128, grid=4), base):
            np.testing.assert_array_equal(g, w)


def test_subnormal_bow_mass_and_the_gpu_flush_to_zero(simt, monkeypatch):
    """CuPy builds the kernels with -ftz=true: a bow mass under ~e^-87 (subnormal in float32) is
    kept approximately on the CPU and flushed to 0 on the GPU (bow_logmass -inf); SIMT_FTZ=1
    emulates the GPU."""
    import platform

    if platform.machine() not in ("x86_64", "AMD64"):
        pytest.skip("SIMT_FTZ is implemented on x86-64 only")
    x = np.zeros((2, 64), np.float32)
    x[:, 40:] = -95.0                      # the beginning-of-word ids: mass 24 e^-95 / (40 + 24 e^-95)
    bow = np.arange(64) >= 40
    b_cpu = simt.row_state(x, None, bow, block=32)[3]
    np.testing.assert_allclose(b_cpu, 24 * np.exp(-95.0), rtol=1e-3)
    monkeypatch.setenv("SIMT_THREADS", "1")  # blocks run on the calling (Python) thread
    monkeypatch.setenv("SIMT_FTZ", "1")
    b_gpu_like = simt.row_state(x, None, bow, block=32)[3]
    np.testing.assert_array_equal(b_gpu_like, 0.0)
    monkeypatch.delenv("SIMT_FTZ")
    # the caller's MXCSR is restored: numpy on this thread still produces subnormals
    assert np.float32(1e-38) * np.float32(1e-3) > 0
    np.testing.assert_array_equal(simt.row_state(x, None, bow, block=32)[3], b_cpu)
