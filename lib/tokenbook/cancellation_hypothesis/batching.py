"""Mini-batch orders and the reward-balanced buffer (the paper's two interventions).

Orders (cf. ``trainer.balance_method`` in the authors' verl fork, see the chapter):

* ``"prompt"`` (``couple``): prompt-major; each prompt's rollouts stay together, so each
  optimizer mini-batch holds whole groups — the *query-preserved* order.
* ``"round_robin"`` (``balance``): p1_r1, p2_r1, …, p1_r2, …; each group is spread over as many
  mini-batches as possible.
* ``"random"``: a seeded random permutation (TRL's ``shuffle_sequence_dict``).
* ``"seqlen"`` (verl's stock ``_balance_batch``, the fork's default): the batch is split into
  ``dp_size`` equal-size partitions with balanced total sequence length, one per data-parallel
  rank (:func:`seqlen_balanced_partitions`); each rank cuts its partition into mini-batches and
  global mini-batch *i* is the union of every rank's *i*-th slice. Groups end up scattered by
  length, not kept together.

Mini-batches are contiguous slices of the reordered batch (per rank for ``"seqlen"``).

The per-query reward balance of the authors' fork (``post_process = "balance-posneg"``) is
:func:`balance_posneg_keep`; the buffer-based one is :class:`RewardBalancedBuffer`.
"""

from __future__ import annotations

import math
from typing import Sequence

import numpy as np

ORDERS = ("prompt", "round_robin", "random", "seqlen")


def seqlen_balanced_partitions(lengths: Sequence[int], k: int) -> list[np.ndarray]:
    """``k`` equal-size partitions of the rows (sizes differ by at most one) whose summed
    ``lengths`` (tokens) are balanced; each partition's row indices sorted ascending.

    verl's ``get_seqlen_balanced_partitions(..., equal_size=True)`` uses Karmarkar–Karp
    differencing; this is the greedy longest-first rule (each row, longest first, goes to the
    lightest partition that still has room; ties to the lower partition), which balances as
    well for the purpose here: which rows share a rank depends on their length, not their group.
    """
    lens = np.asarray(lengths, dtype=float)
    if lens.ndim != 1 or lens.size == 0:
        raise ValueError("lengths must be a non-empty 1-D sequence")
    if not 1 <= k <= lens.size:
        raise ValueError(f"k (data-parallel ranks) must be in [1, {lens.size}], got {k}")
    room = [lens.size // k + (r < lens.size % k) for r in range(k)]
    load, parts = np.zeros(k), [[] for _ in range(k)]
    for i in np.argsort(-lens, kind="stable"):
        open_ = [r for r in range(k) if len(parts[r]) < room[r]]
        r = min(open_, key=lambda q: (load[q], q))
        parts[r].append(int(i))
        load[r] += lens[i]
    return [np.sort(np.asarray(p, dtype=int)) for p in parts]


def minibatch_indices(group_ids: Sequence[int], n_minibatches: int, order: str = "prompt", *,
                      seed: int = 0, lengths: Sequence[int] | None = None,
                      dp_size: int = 2) -> list[np.ndarray]:
    """Row indices of each optimizer mini-batch, in update order.

    ``group_ids``: [B] the prompt (group) of each rollout. ``order``: one of :data:`ORDERS`.
    For ``"prompt"`` the groups are visited in a seeded random order, each contiguous; with
    ``n_minibatches`` dividing the number of groups every mini-batch holds whole groups.
    ``"seqlen"`` needs ``lengths`` ([B] completion lengths, tokens) and splits over ``dp_size``
    simulated data-parallel ranks (see the module docstring).
    """
    g = np.asarray(group_ids)
    if g.ndim != 1 or g.size == 0:
        raise ValueError("group_ids must be a non-empty 1-D sequence")
    if not 1 <= n_minibatches <= g.size:
        raise ValueError(f"n_minibatches must be in [1, {g.size}], got {n_minibatches}")
    if order not in ORDERS:
        raise ValueError(f"order must be one of {ORDERS}, got {order!r}")
    rng = np.random.default_rng(seed)
    uniq = np.unique(g)
    if order == "seqlen":
        if lengths is None or len(lengths) != g.size:
            raise ValueError("order='seqlen' needs lengths: one completion length per rollout "
                             f"({g.size}), got {None if lengths is None else len(lengths)}")
        if not 1 <= dp_size <= g.size // n_minibatches:
            raise ValueError(f"dp_size must be in [1, {g.size // n_minibatches}] so that every "
                             f"rank has a row per mini-batch, got {dp_size}")
        per_rank = [np.array_split(p, n_minibatches)
                    for p in seqlen_balanced_partitions(lengths, dp_size)]
        return [np.concatenate([chunks[i] for chunks in per_rank]) for i in range(n_minibatches)]
    if order == "prompt":
        perm = np.concatenate([np.flatnonzero(g == u) for u in rng.permutation(uniq)])
    elif order == "round_robin":
        members = [list(np.flatnonzero(g == u)) for u in rng.permutation(uniq)]
        perm = []
        for r in range(max(map(len, members))):
            perm.extend(m[r] for m in members if r < len(m))
        perm = np.asarray(perm)
    else:
        perm = rng.permutation(g.size)
    return [np.asarray(c) for c in np.array_split(perm, n_minibatches)]


def groups_per_minibatch(group_ids: Sequence[int], batches: Sequence[np.ndarray]) -> list[int]:
    """Distinct groups per mini-batch (the authors log this as ``diff prompt size``)."""
    g = np.asarray(group_ids)
    return [int(np.unique(g[b]).size) for b in batches]


def balance_posneg_keep(rewards: Sequence[float], group_ids: Sequence[int], *, seed: int = 0
                        ) -> np.ndarray:
    """Per-query reward balance (the fork's ``post_process = "balance-posneg"``): [B] bool,
    True for the rollouts that stay in the loss.

    In each group it keeps min(n_pos, n_neg) positive (reward > 0) and as many negative
    rollouts and masks the rest; an all-positive or all-negative group is masked entirely.
    Which rollouts of the larger side stay is not in the notes: here a seeded random draw.
    """
    r = np.asarray(rewards, dtype=float)
    g = np.asarray(group_ids)
    if r.shape != g.shape or r.ndim != 1:
        raise ValueError(f"rewards and group_ids must be 1-D of one length, got {r.shape} and "
                         f"{g.shape}")
    rng = np.random.default_rng(seed)
    keep = np.zeros(r.size, dtype=bool)
    for u in np.unique(g):
        pos = np.flatnonzero((g == u) & (r > 0))
        neg = np.flatnonzero((g == u) & (r <= 0))
        n = min(pos.size, neg.size)
        if n:
            keep[rng.choice(pos, n, replace=False)] = True
            keep[rng.choice(neg, n, replace=False)] = True
    return keep


class RewardBalancedBuffer:
    """Accumulates rollouts across generation steps; releases balanced updates.

    Mirrors the authors' buffer spec (``test_extract_balanced_batch.py``): with target size
    ``B``, a rollout is positive when ``reward > 0``. An update is *ready* when the minority
    count ≥ ceil(low·B) **and** the majority count ≥ B − floor(high·B); it is *forced* after
    ``max_buffer_steps`` generation steps without an update, or at the last step. Extraction
    takes min(#minority, floor(high·B)) minority rollouts and fills the rest of ``B`` from the
    majority (as many as there are), sampled without replacement from a seeded RNG; the rest
    stays buffered.

    Items are opaque (e.g. row indices or rollout records); only their rewards are read.
    """

    def __init__(self, target_size: int, *, low: float = 3 / 8, high: float = 5 / 8,
                 max_buffer_steps: int = 10, seed: int = 42):
        if target_size < 2:
            raise ValueError(f"target_size must be ≥ 2, got {target_size}")
        if not 0 < low <= 0.5 <= high < 1:
            raise ValueError(f"need 0 < low ≤ 0.5 ≤ high < 1, got low={low}, high={high}")
        self.B, self.low, self.high = int(target_size), float(low), float(high)
        self.max_buffer_steps = int(max_buffer_steps)
        self.rng = np.random.default_rng(seed)
        self.pos: list = []
        self.neg: list = []
        self.steps_since_update = 0

    @property
    def min_minority(self) -> int:
        return math.ceil(self.low * self.B)

    @property
    def min_majority(self) -> int:
        return self.B - math.floor(self.high * self.B)

    def add(self, items: Sequence, rewards: Sequence[float]) -> None:
        """Buffer one generation step's rollouts."""
        if len(items) != len(rewards):
            raise ValueError("items and rewards must have the same length")
        for it, r in zip(items, rewards):
            (self.pos if r > 0 else self.neg).append(it)
        self.steps_since_update += 1

    def ready(self) -> bool:
        """Whether a balanced update can be released now."""
        lo, hi = sorted((len(self.pos), len(self.neg)))
        return lo >= self.min_minority and hi >= self.min_majority

    def should_update(self, *, last_step: bool = False) -> bool:
        """Ready, or forced (``max_buffer_steps`` reached / last step) with something buffered."""
        forced = last_step or self.steps_since_update >= self.max_buffer_steps
        return self.ready() or (forced and bool(self.pos or self.neg))

    def extract(self) -> tuple[list, list[bool]]:
        """Remove and return up to ``B`` items and their positive flags (see class doc)."""
        minority_is_pos = len(self.pos) <= len(self.neg)
        minority, majority = (self.pos, self.neg) if minority_is_pos else (self.neg, self.pos)
        n_min = min(len(minority), math.floor(self.high * self.B))
        n_maj = min(len(majority), self.B - n_min)
        take_min = set(self.rng.choice(len(minority), n_min, replace=False).tolist())
        take_maj = set(self.rng.choice(len(majority), n_maj, replace=False).tolist())
        out_min = [x for i, x in enumerate(minority) if i in take_min]
        out_maj = [x for i, x in enumerate(majority) if i in take_maj]
        rest_min = [x for i, x in enumerate(minority) if i not in take_min]
        rest_maj = [x for i, x in enumerate(majority) if i not in take_maj]
        if minority_is_pos:
            self.pos, self.neg = rest_min, rest_maj
        else:
            self.neg, self.pos = rest_min, rest_maj
        self.steps_since_update = 0
        items = out_min + out_maj
        flags = [minority_is_pos] * len(out_min) + [not minority_is_pos] * len(out_maj)
        return items, flags

    def __len__(self) -> int:
        return len(self.pos) + len(self.neg)
