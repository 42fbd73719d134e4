"""kernels/softmax_dots.cu (<softmax(l_j), softmax(l_k)> per pair) run on the CPU through the SIMT
harness, against a float64 numpy softmax and the torch path tokenbook.scoring.dots."""

from __future__ import annotations


import numpy as np
import pytest
import torch

from tokenbook.scoring import dots

NEG_INF = -np.inf



def ref_dots(x, pairs):
    """float64 softmax rows, then the dot products (materialised: fine for a reference)."""
    x = np.asarray(x, np.float64)
    with np.errstate(invalid="ignore"):
        m = x.max(1, keepdims=True)
        e = np.exp(x - m)
        p = e / e.sum(1, keepdims=True)
    return np.einsum("pv,pv->p", p[pairs[:, 0]], p[pairs[:, 1]])


def all_pairs(n):
    j, k = np.meshgrid(np.arange(n), np.arange(n), indexing="ij")
    return np.stack([j.ravel(), k.ravel()], 1)


@pytest.mark.parametrize("block", [32, 256])
def test_random_rows_all_pairs(simt, block):
    rng = np.random.default_rng(block)
    x = (rng.standard_normal((6, 700)) * 2).astype(np.float32)
    pairs = all_pairs(6)
    got = simt.softmax_dots(x, pairs, block=block)
    np.testing.assert_allclose(got, ref_dots(x, pairs), rtol=1e-5, atol=1e-9)
    gm = got.reshape(6, 6)
    np.testing.assert_array_equal(gm, gm.T)            # symmetric
    # Cauchy-Schwarz: <pi_j, pi_k>^2 <= ||pi_j||^2 ||pi_k||^2
    assert np.all(gm**2 <= np.outer(np.diag(gm), np.diag(gm)) * (1 + 1e-5))


def test_huge_logits_near_one_hot(simt):
    rng = np.random.default_rng(1)
    x = (rng.standard_normal((4, 333)) * 1e4).astype(np.float32)
    x[1] = x[0]                                   # identical rows: <pi, pi> ~ 1 (near one-hot)
    x[2] = x[0] + np.float32(1e4)                 # a shift leaves the softmax unchanged
    pairs = np.array([[0, 0], [0, 1], [0, 2], [0, 3], [3, 3]])
    got = simt.softmax_dots(x, pairs, block=64)
    np.testing.assert_allclose(got, ref_dots(x, pairs), rtol=1e-5, atol=1e-12)
    assert got[0] == pytest.approx(1.0, abs=1e-6) and got[1] == got[0]


def test_tiny_logits_uniform(simt):
    x = (np.random.default_rng(2).standard_normal((3, 500)) * 1e-30).astype(np.float32)
    got = simt.softmax_dots(x, all_pairs(3), block=128)
    np.testing.assert_allclose(got, 1 / 500, rtol=1e-5)


def test_neg_inf_entries_disjoint_supports_and_dead_rows(simt):
    rng = np.random.default_rng(3)
    x = rng.standard_normal((5, 300)).astype(np.float32)
    x[rng.random((5, 300)) < 0.3] = NEG_INF
    x[1, :150] = NEG_INF
    x[2, 150:] = NEG_INF                          # rows 1 and 2 have disjoint support
    x[4] = NEG_INF                                # no softmax at all
    pairs = np.array([[0, 1], [1, 2], [2, 2], [0, 3], [4, 0], [3, 4], [1, 1]])
    got = simt.softmax_dots(x, pairs, block=64)
    assert got[1] == 0.0
    assert np.isnan(got[4]) and np.isnan(got[5])
    ok = np.array([0, 1, 2, 3, 6])
    np.testing.assert_allclose(got[ok], ref_dots(x, pairs[ok]), rtol=1e-5, atol=1e-9)


def test_bf16_rows_grid_stride_and_out_of_range_pairs(simt, simt_build):
    b = simt_build
    rng = np.random.default_rng(4)
    x = (rng.standard_normal((7, 257)) * 3).astype(np.float32)
    bits = b.float_to_bf16_bits(x)
    pairs = np.concatenate([all_pairs(7), [[0, 7], [-1, 2]]])
    got = simt.softmax_dots(bits, pairs, block=32, grid=5)  # 5 blocks for 51 pairs
    np.testing.assert_allclose(got[:-2], ref_dots(b.bf16_bits_to_float(bits), pairs[:-2]), rtol=1e-5, atol=1e-9)
    assert np.isnan(got[-2:]).all()


def test_agrees_with_the_torch_path(simt):
    rng = np.random.default_rng(5)
    x = (rng.standard_normal((5, 1000)) * 5).astype(np.float32)
    x[rng.random((5, 1000)) < 0.1] = NEG_INF
    pairs = all_pairs(5)
    want = dots.softmax_row_dots(torch.from_numpy(x), torch.from_numpy(pairs), chunk_size=300)
    np.testing.assert_allclose(simt.softmax_dots(x, pairs, block=128), want.numpy(), rtol=1e-5, atol=1e-8)


def test_no_race_results_are_bitwise_identical_under_random_thread_orders(simt, monkeypatch):
    x = (np.random.default_rng(6).standard_normal((5, 1500)) * 3).astype(np.float32)
    pairs = all_pairs(5)
    base = simt.softmax_dots(x, pairs, block=256, grid=7)
    for seed in ["1", "2"]:
        monkeypatch.setenv("SIMT_SEED", seed)
        np.testing.assert_array_equal(simt.softmax_dots(x, pairs, block=256, grid=7), base)
