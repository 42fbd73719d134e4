"""The CPU SIMT harness itself (tests/scoring/simt/simt.h): CUDA semantics of the warp primitives,
__shared__ and __syncthreads, float atomics, and kernel bugs reported instead of hanging."""

from __future__ import annotations


import numpy as np
import pytest




def _lanes(n):
    i = np.arange(n)
    return i, i % 32, i - i % 32  # global index, lane, warp base


BLOCK, GRID = 96, 3  # three warps per block, three blocks
N = BLOCK * GRID
VALUES = np.random.default_rng(0).integers(-1000, 1000, N)


def test_3d_grid_and_block_indices(simt):
    grid, block = (3, 2, 2), (8, 4, 2)
    got = simt.indices(grid, block)
    bz, by, bx, tz, ty, tx = np.meshgrid(*(np.arange(k) for k in (*grid[::-1], *block[::-1])), indexing="ij")
    want = np.stack([a.ravel() for a in (tx, ty, tz, bx, by, bz)], 1)
    np.testing.assert_array_equal(got, want)


def test_shfl_xor(simt):
    i, lane, base = _lanes(N)
    out = simt.selftest(0, VALUES, block=BLOCK, grid=GRID)
    np.testing.assert_array_equal(out, VALUES[base + (lane ^ 5)])


def test_shfl_down_keeps_own_value_past_the_warp(simt):
    i, lane, base = _lanes(N)
    out = simt.selftest(1, VALUES, block=BLOCK, grid=GRID)
    np.testing.assert_array_equal(out, np.where(lane + 3 < 32, VALUES[np.minimum(i + 3, N - 1)], VALUES))


def test_shfl_up_keeps_own_value_below_lane_0(simt):
    i, lane, base = _lanes(N)
    out = simt.selftest(2, VALUES, block=BLOCK, grid=GRID)
    np.testing.assert_array_equal(out, np.where(lane >= 2, VALUES[np.maximum(i - 2, 0)], VALUES))


def test_shfl_broadcast(simt):
    i, lane, base = _lanes(N)
    out = simt.selftest(3, VALUES, block=BLOCK, grid=GRID)
    np.testing.assert_array_equal(out, VALUES[base + 7])


def test_shfl_down_with_width_segments(simt):
    i, lane, base = _lanes(N)
    out = simt.selftest(4, VALUES, block=BLOCK, grid=GRID)
    np.testing.assert_array_equal(out, np.where(lane % 8 + 1 < 8, VALUES[np.minimum(i + 1, N - 1)], VALUES))


def test_ballot(simt):
    i, lane, base = _lanes(N)
    out = simt.selftest(5, VALUES, block=BLOCK, grid=GRID).astype(np.uint32)
    bits = (VALUES & 1).astype(np.uint64) << lane.astype(np.uint64)
    want = np.array([bits[b:b + 32].sum() for b in base], dtype=np.uint64).astype(np.uint32)
    np.testing.assert_array_equal(out, want)


@pytest.mark.parametrize("threads", ["1", "2"])
def test_shared_memory_is_per_block_and_syncthreads_orders(simt, monkeypatch, threads):
    monkeypatch.setenv("SIMT_THREADS", threads)  # blocks run on 1 or 2 OS threads
    i, lane, base = _lanes(N)
    out = simt.selftest(6, VALUES, block=BLOCK, grid=GRID)
    blk = i // BLOCK
    t = i % BLOCK
    np.testing.assert_array_equal(out, VALUES[blk * BLOCK + BLOCK - 1 - t])


def test_block_sum_with_shuffles_and_shared_memory(simt):
    block, grid = 256, 5
    v = np.random.default_rng(1).integers(-50, 50, block * grid)
    out = simt.selftest(7, v, block=block, grid=grid)
    np.testing.assert_array_equal(out[:grid], v.reshape(grid, block).sum(1))


def test_float_atomics_across_blocks(simt):
    out = simt.selftest(10, np.zeros(4 * 64, np.int32), block=64, grid=4)
    assert out[:1].view(np.float32)[0] == 256.0


def test_early_return_before_syncthreads_is_reported_as_deadlock(simt):
    with pytest.raises(RuntimeError, match="deadlock"):
        simt.selftest(8, VALUES, block=BLOCK, grid=GRID)
    # the library stays usable after a failed launch
    out = simt.selftest(3, VALUES, block=BLOCK, grid=GRID)
    np.testing.assert_array_equal(out, VALUES[_lanes(N)[2] + 7])


def test_full_mask_on_a_partial_warp_is_reported(simt):
    # blockDim 48: the second warp has 16 lanes, so 0xffffffff names lanes that do not exist
    with pytest.raises(RuntimeError, match="do not exist"):
        simt.selftest(0, np.arange(48), block=48, grid=1)
    # without warp primitives a partial warp is fine
    np.testing.assert_array_equal(simt.selftest(6, np.arange(48), block=48, grid=1), np.arange(48)[::-1])


def test_reading_a_lane_outside_the_mask_is_reported(simt):
    with pytest.raises(RuntimeError, match="outside the mask"):
        simt.selftest(9, VALUES, block=BLOCK, grid=GRID)


def test_random_schedule_exposes_a_missing_syncthreads(simt, monkeypatch):
    v = np.arange(128)
    results = set()
    for seed in ["1", "2", "3", "4"]:
        monkeypatch.setenv("SIMT_SEED", seed)
        results.add(simt.selftest(11, v, block=64, grid=2).tobytes())
    assert len(results) > 1  # the racy kernel's output depends on the thread order


@pytest.mark.parametrize("which", [0, 1, 5, 6, 7])
def test_race_free_kernels_do_not_depend_on_the_schedule(simt, monkeypatch, which):
    base = simt.selftest(which, VALUES, block=BLOCK, grid=GRID)
    for seed in ["1", "2"]:
        monkeypatch.setenv("SIMT_SEED", seed)
        np.testing.assert_array_equal(simt.selftest(which, VALUES, block=BLOCK, grid=GRID), base)


@pytest.mark.slow
def test_portable_ucontext_fibres(simt, simt_build, tmp_path_factory):
    """The ucontext fallback (non-x86-64 machines, or -DSIMT_UCONTEXT) gives the same results."""
    slow = simt_build.load(tmp_path_factory.getbasetemp() / "simt", defines=("SIMT_UCONTEXT",))
    for which in (0, 1, 5, 6, 7):
        np.testing.assert_array_equal(slow.selftest(which, VALUES, block=BLOCK, grid=GRID),
                                      simt.selftest(which, VALUES, block=BLOCK, grid=GRID))
    with pytest.raises(RuntimeError, match="deadlock"):
        slow.selftest(8, VALUES, block=BLOCK, grid=GRID)
    x = np.random.default_rng(3).standard_normal((4, 700)).astype(np.float32)
    for g, w in zip(slow.row_state(x, block=64), simt.row_state(x, block=64)):
        np.testing.assert_array_equal(g, w)
