"""Mini-batch orders and the reward-balanced buffer's release rule."""

import math

import numpy as np
import pytest

from tokenbook.cancellation_hypothesis.batching import (RewardBalancedBuffer, balance_posneg_keep,
                                                        groups_per_minibatch, minibatch_indices,
                                                        seqlen_balanced_partitions)

GROUPS = np.repeat(np.arange(8), 8)          # 8 prompts × 8 rollouts, prompt-major


LENGTHS = (np.arange(64) * 7919) % 31 + 1   # fixed, varied completion lengths (tokens)


@pytest.mark.parametrize("order", ["prompt", "round_robin", "random", "seqlen"])
def test_every_rollout_once(order):
    batches = minibatch_indices(GROUPS, 4, order, seed=1, lengths=LENGTHS)
    assert len(batches) == 4
    allidx = np.sort(np.concatenate(batches))
    np.testing.assert_array_equal(allidx, np.arange(64))


def test_prompt_order_keeps_groups_together():
    rng = np.random.default_rng(0)
    shuffled = rng.permutation(GROUPS)        # rows need not arrive prompt-major
    for seed in range(5):
        batches = minibatch_indices(shuffled, 4, "prompt", seed=seed)
        assert groups_per_minibatch(shuffled, batches) == [2, 2, 2, 2]
        owner = {}
        for b, idx in enumerate(batches):
            for g in shuffled[idx]:
                assert owner.setdefault(g, b) == b      # a group never spans two mini-batches


def test_round_robin_spreads_groups_and_random_mixes():
    rr = minibatch_indices(GROUPS, 4, "round_robin", seed=0)
    assert groups_per_minibatch(GROUPS, rr) == [8, 8, 8, 8]
    for idx in rr:                                          # 2 rollouts of every prompt each
        assert np.bincount(GROUPS[idx], minlength=8).tolist() == [2] * 8
    rnd = minibatch_indices(GROUPS, 4, "random", seed=0)
    assert np.mean(groups_per_minibatch(GROUPS, rnd)) > 4
    with pytest.raises(ValueError, match="order"):
        minibatch_indices(GROUPS, 4, "balance")


def test_buffer_thresholds_match_the_spec():
    buf = RewardBalancedBuffer(1024)
    assert buf.min_minority == math.ceil(3 / 8 * 1024) == 384
    assert buf.min_majority == 1024 - math.floor(5 / 8 * 1024) == 384


def test_buffer_release_rule():
    buf = RewardBalancedBuffer(16, max_buffer_steps=3, seed=0)
    # step 1: 2 positive, 14 negative -> minority 2 < ceil(6) -> wait
    buf.add(list(range(16)), [1] * 2 + [0] * 14)
    assert not buf.ready() and not buf.should_update()
    # step 2: 4 more positives -> 6 pos, 24 neg: ready
    buf.add(list(range(16, 32)), [1] * 4 + [0] * 12)
    assert buf.ready() and buf.should_update()
    items, flags = buf.extract()
    assert len(items) == 16 and sum(flags) == 6            # all 6 minority, 10 majority
    assert 3 / 8 <= sum(flags) / len(flags) <= 5 / 8
    assert len(buf) == 32 - 16 and buf.steps_since_update == 0
    assert len(buf.pos) == 0 and len(buf.neg) == 16
    assert len(set(items)) == 16


def test_buffer_caps_the_minority_at_five_eighths():
    buf = RewardBalancedBuffer(8, seed=1)
    buf.add(list(range(20)), [1] * 9 + [0] * 11)           # minority pos 9 > floor(5) cap
    items, flags = buf.extract()
    assert sum(flags) == 5 and len(items) == 8


def test_buffer_forces_an_update_after_max_steps_and_at_the_end():
    buf = RewardBalancedBuffer(16, max_buffer_steps=2, seed=0)
    buf.add([0, 1, 2], [0, 0, 0])
    assert not buf.should_update()
    assert buf.should_update(last_step=True)
    buf.add([3, 4], [0, 0])
    assert buf.should_update()                              # 2 steps without an update
    items, flags = buf.extract()
    assert sorted(items) == [0, 1, 2, 3, 4] and not any(flags)
    assert not RewardBalancedBuffer(4).should_update(last_step=True)   # nothing buffered


def test_seqlen_partitions_known_answer_and_balance():
    # longest first into the lightest partition with room: 9→0, 8→1, 7→1, 6→0 ... sums 15 / 15
    parts = seqlen_balanced_partitions([9, 8, 7, 6], 2)
    assert [p.tolist() for p in parts] == [[0, 3], [1, 2]]
    parts = seqlen_balanced_partitions(LENGTHS, 4)
    assert sorted(np.concatenate(parts).tolist()) == list(range(64))
    assert {len(p) for p in parts} == {16}                   # equal size
    sums = [LENGTHS[p].sum() for p in parts]
    assert max(sums) - min(sums) <= LENGTHS.max()            # balanced to within one row
    with pytest.raises(ValueError, match="data-parallel"):
        seqlen_balanced_partitions([1, 2], 3)


def test_seqlen_order_is_verl_rank_slicing():
    batches = minibatch_indices(GROUPS, 4, "seqlen", lengths=LENGTHS, dp_size=2)
    parts = seqlen_balanced_partitions(LENGTHS, 2)
    for i, b in enumerate(batches):   # mini-batch i = rank 0's i-th slice + rank 1's i-th slice
        expect = np.concatenate([np.array_split(p, 4)[i] for p in parts])
        np.testing.assert_array_equal(b, expect)
    # groups are scattered by length, not kept together as in the prompt order
    assert max(groups_per_minibatch(GROUPS, batches)) > 2
    with pytest.raises(ValueError, match="lengths"):
        minibatch_indices(GROUPS, 4, "seqlen")


def test_balance_posneg_keeps_equal_signs_per_group():
    groups = np.repeat([0, 1, 2, 3], 4)
    rewards = np.array([1, 1, 1, 0,   1, 0, 0, 0,   1, 1, 1, 1,   0, 0, 0, 0], dtype=float)
    keep = balance_posneg_keep(rewards, groups, seed=3)
    for g, n_each in zip(range(4), (1, 1, 0, 0)):
        k, r = keep[groups == g], rewards[groups == g]
        assert (k & (r > 0)).sum() == n_each and (k & (r <= 0)).sum() == n_each
    np.testing.assert_array_equal(keep, balance_posneg_keep(rewards, groups, seed=3))
    draws = {tuple(balance_posneg_keep(rewards, groups, seed=s)) for s in range(20)}
    assert len(draws) > 1                                    # the kept majority is a seeded draw
    with pytest.raises(ValueError, match="one length"):
        balance_posneg_keep(rewards[:-1], groups)
