"""Per-seed values of the tiny-scale claims: one cached table per (root seed, mechanism).

Each tiny-scale claim is measured once per root seed with the paper's mechanism **on** and once
**off** (see :mod:`tokenbook.verdicts` for the rule that turns these values into a verdict).
:func:`over_seeds` computes them — one cached table per (seed, mechanism), keyed by the
library's source hash, fanned out through Dask when asked — so a rebuild recomputes nothing and
a killed run resumes from the seeds it finished. :func:`values_by_claim` reads one claim's
values back, paired by root seed.
"""

from __future__ import annotations

import hashlib
from functools import lru_cache
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

import pandas as pd

from tokenbook.cache import cached_table
from tokenbook.seeds import as_seed_sequence
from tokenbook.validation import check_table, is_finite_number

__all__ = ["over_seeds", "values_by_claim", "library_hash", "MECHANISMS"]

MECHANISMS = ("on", "off")


# --------------------------------------------------------------------------- per-seed values
@lru_cache(maxsize=1)
def library_hash() -> str:
    """sha256 (20 hex) of every library source file and CUDA kernel: the code version that
    keys per-seed results (any library change recomputes them; trained models are keyed by
    their own parameters and survive)."""
    lib = Path(__file__).resolve().parent
    files = [(str(p.relative_to(lib)), p) for p in sorted(lib.rglob("*.py"))
             if "__pycache__" not in p.parts]
    kernels = lib.parents[1] / "kernels"
    if kernels.is_dir():
        files += [(f"kernels/{p.name}", p) for p in sorted(kernels.iterdir()) if p.is_file()]
    h = hashlib.sha256()
    for name, p in files:
        h.update(name.encode())
        h.update(p.read_bytes())
    return h.hexdigest()[:20]


def _seed_tables(task: Callable[..., Mapping[str, float]], jobs: Sequence[tuple[int, str]],
                 kind: str, params: Mapping[str, Any]) -> list[pd.DataFrame]:
    """:func:`_seed_table` for each ``(seed, mechanism)`` of ``jobs``, in order (one Dask task)."""
    return [_seed_table(task, s, m, kind, params) for s, m in jobs]


def _seed_table(task: Callable[..., Mapping[str, float]], seed: int, mechanism: str,
                kind: str, params: Mapping[str, Any]) -> pd.DataFrame:
    def compute() -> pd.DataFrame:
        values = task(seed=seed, mechanism=mechanism)
        if not isinstance(values, Mapping) or not values:
            raise TypeError(f"{kind}: the per-seed task must return a non-empty dict "
                            f"claim id -> value, got {type(values).__name__}")
        return pd.DataFrame({"seed": seed, "mechanism": mechanism,
                             "claim_id": [str(k) for k in values],
                             "value": [float(v) if is_finite_number(v) else float("nan")
                                       for v in values.values()]})

    key = {**dict(params), "seed": int(seed), "mechanism": mechanism, "code": library_hash()}
    return cached_table(kind, key, compute)


def over_seeds(task: Callable[..., Mapping[str, float]], seeds: Sequence[int], *, kind: str,
               params: Mapping[str, Any], mechanisms: Sequence[str] = MECHANISMS,
               client: Any = None, progress: bool = True,
               seed_per_task: bool = False) -> pd.DataFrame:
    """Run ``task(seed=s, mechanism=m)`` for every seed × mechanism; one cached table each.

    ``task`` returns ``{claim_id: statistic}`` for that seed and mechanism (a module-level
    function or a ``functools.partial`` of one, so Dask can send it to a worker).
    ``kind``/``params`` key the cache together with the seed, the mechanism and
    :func:`library_hash` (put every parameter that changes the result into ``params``).
    With a ``distributed.Client`` the (seed, mechanism) jobs run as Dask tasks; finished ones
    are cached as they complete, so a killed run resumes. ``seed_per_task=True`` sends each
    seed's mechanisms to one worker in order (for tasks whose mechanisms share models trained
    on first use: two workers must not train the same models at once). Returns the tidy table
    ``seed, mechanism, claim_id, value``.
    """
    from tqdm.auto import tqdm

    seeds = as_seed_sequence(seeds)
    bad = [m for m in mechanisms if m not in MECHANISMS]
    if bad:
        raise ValueError(f"mechanisms must be among {MECHANISMS}, got {bad}")
    jobs = [(s, m) for s in seeds for m in mechanisms]
    frames: list[pd.DataFrame] = []
    bar = tqdm(total=len(jobs), desc=f"{kind}: seeds × mechanism", disable=not progress)
    if client is None:
        for s, m in jobs:
            frames.append(_seed_table(task, s, m, kind, params))
            bar.update()
    else:
        from distributed import as_completed

        groups = ([[(s, m) for m in mechanisms] for s in seeds] if seed_per_task
                  else [[job] for job in jobs])
        futures = [client.submit(_seed_tables, task, group, kind, dict(params), pure=False)
                   for group in groups]
        for fut in as_completed(futures):
            done = fut.result()
            frames.extend(done)
            bar.update(len(done))
    bar.close()
    table = pd.concat(frames, ignore_index=True)
    return table.sort_values(["claim_id", "mechanism", "seed"], kind="stable",
                             ignore_index=True)


def values_by_claim(table: pd.DataFrame, claim_id: str) -> tuple[list[float], list[float]]:
    """``(values_on, values_off)`` of one claim from :func:`over_seeds`'s table, by seed."""
    check_table(table, "seed table", columns=["seed", "mechanism", "claim_id", "value"])
    rows = table[table["claim_id"] == claim_id]
    if rows.empty:
        raise ValueError(f"seed table: no values for claim {claim_id!r} (claims there: "
                         f"{sorted(table['claim_id'].unique())})")
    on = rows[rows["mechanism"] == "on"].sort_values("seed")["value"].tolist()
    off = rows[rows["mechanism"] == "off"].sort_values("seed")["value"].tolist()
    return on, off
