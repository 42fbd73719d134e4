"""One way to derive seeds: named streams from one root seed.

Every random choice in the book takes its seed from :func:`derive_seed` (or :func:`seed_list`),
so that the seed that trains a model and the seed of an analysis never share a value by
accident, and changing one stream leaves every other stream as it was.

The derivation is :class:`numpy.random.SeedSequence` over the root seed and a hash of the
stream's name: stable across processes, machines and Python versions (no ``hash()``, which is
salted per process).

Example
-------
>>> derive_seed(0, "bootstrap") == derive_seed(0, "bootstrap")
True
>>> derive_seed(0, "bootstrap") != derive_seed(0, "training")
True
>>> seed_list(3, 0)
[0, 1, 2]
"""

from __future__ import annotations

import hashlib
from typing import Sequence

import numpy as np

__all__ = ["derive_seed", "seed_list", "rng"]

_MAX = 2 ** 31 - 1   # fits every library's seed argument (torch, numpy, sklearn, Python)


def _name_words(name: str) -> list[int]:
    digest = hashlib.sha256(name.encode("utf-8")).digest()
    return [int.from_bytes(digest[i:i + 4], "little") for i in range(0, 16, 4)]


def derive_seed(root: int, *stream: str | int) -> int:
    """A seed in ``[0, 2**31 - 1)`` for the named ``stream`` under ``root``.

    ``stream`` is one or more names or integers (``derive_seed(s, "bootstrap", "lang", 3)``).
    """
    if isinstance(root, bool) or not isinstance(root, (int, np.integer)):
        raise TypeError(f"root seed must be an int, got {type(root).__name__} {root!r}")
    if root < 0:
        raise ValueError(f"root seed must be ≥ 0, got {root}")
    if not stream:
        raise ValueError("derive_seed needs a stream name, e.g. derive_seed(seed, 'bootstrap')")
    words: list[int] = [int(root)]
    for part in stream:
        words += _name_words(str(part))
    return int(np.random.SeedSequence(words).generate_state(1, dtype=np.uint32)[0] % _MAX)


def seed_list(n: int, start: int = 0) -> list[int]:
    """``n`` consecutive root seeds from ``start``: the seeds a robustness run iterates over.

    Consecutive roots are independent once derived into streams by :func:`derive_seed`.
    """
    if n < 1:
        raise ValueError(f"n must be ≥ 1 seeds, got {n}")
    return list(range(int(start), int(start) + int(n)))


def rng(root: int, *stream: str | int) -> np.random.Generator:
    """A numpy Generator seeded from ``derive_seed(root, *stream)``."""
    return np.random.default_rng(derive_seed(root, *stream))


def as_seed_sequence(seeds: Sequence[int] | int) -> list[int]:
    """Normalise a parameter that is either a count or a list of seeds to a list of seeds."""
    if isinstance(seeds, (int, np.integer)) and not isinstance(seeds, bool):
        return seed_list(int(seeds))
    out = [int(s) for s in seeds]
    if not out:
        raise ValueError("the list of seeds is empty; give at least one seed (5 for a verdict)")
    if len(set(out)) != len(out):
        raise ValueError(f"the list of seeds repeats a seed: {out}")
    return out
