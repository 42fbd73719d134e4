"""Dask clients for the book's fan-outs (ensembles, seed sweeps), one way everywhere.

:func:`dask_client` is the context manager every chapter's experiments use: a
``LocalCluster`` of single-threaded worker processes by default, or an existing cluster's
scheduler (e.g. one started by dask-jobqueue on Slurm) when ``scheduler_address`` is given.

Example
-------
>>> with dask_client(n_workers=2) as client:          # doctest: +SKIP
...     futures = client.map(pow, [1, 2, 3], [2, 2, 2])
...     client.gather(futures)
[1, 4, 9]
"""

from __future__ import annotations

import logging
import os
import warnings
from contextlib import contextmanager
from typing import Any, Callable, Iterator, Sequence


__all__ = ["open_client", "dask_client", "map_ordered", "worker_environ"]

#: Variables of Dask's ``distributed.nanny.pre-spawn-environ`` that the book's clusters unset.
#: ``MALLOC_TRIM_THRESHOLD_`` (Dask sets 65536) switches off glibc's dynamic mmap threshold, so
#: every large allocation of a PyTorch training loop becomes an mmap/munmap pair (system time):
#: training the tiny captioner in one worker took 2.18× as long with it
#: (``benchmarks/dask_env.py``, result in ``benchmarks/results/dask_env.json``).
UNSET_WORKER_ENV = ("MALLOC_TRIM_THRESHOLD_",)
#: What the LocalCluster's scheduler and workers may log (``silence_logs``). A task's error
#: reaches the caller through its future (``result()`` raises it, a killed worker as
#: ``KilledWorker``); what the cluster itself logs at ERROR is shutdown races, such as a worker's
#: "Failed to communicate with scheduler during heartbeat" traceback when the scheduler closes
#: first, which landed on a chapter's page (29 Nov). Only CRITICAL gets through.
WORKER_LOG_LEVEL = logging.CRITICAL


def open_client(scheduler_address: str | None = None, n_workers: int = 2,
                threads_per_worker: int = 1):
    """A ``distributed.Client``: to ``scheduler_address`` if given, else to its own LocalCluster
    of ``n_workers`` processes × ``threads_per_worker`` threads (``client.close()`` closes it)."""
    from distributed import Client

    if scheduler_address:
        return Client(scheduler_address, timeout="10s")
    with warnings.catch_warnings(), worker_environ():
        warnings.filterwarnings("ignore", message="Port .* is already in use")
        return Client(n_workers=n_workers, threads_per_worker=threads_per_worker, processes=True,
                      dashboard_address=":0", silence_logs=WORKER_LOG_LEVEL)


@contextmanager
def worker_environ() -> Iterator[None]:
    """Start LocalClusters inside this context: their worker processes get Dask's
    ``pre-spawn-environ`` (one thread for OpenMP, MKL and OpenBLAS) except
    :data:`UNSET_WORKER_ENV`. Dask's nanny also writes those variables into this process's
    environment (inherited by later subprocesses); a value equal to Dask's own default left
    there by an earlier cluster is removed first."""
    import dask
    import distributed  # noqa: F401  (registers the distributed.* config defaults)

    key = "distributed.nanny.pre-spawn-environ"
    defaults = dask.config.get(key)
    for name in UNSET_WORKER_ENV:
        if name in defaults and defaults[name] is not None and \
                os.environ.get(name) == str(defaults[name]):
            del os.environ[name]
    with dask.config.set({f"{key}.{name}": None for name in UNSET_WORKER_ENV}):
        yield


@contextmanager
def dask_client(scheduler_address: str | None = None, n_workers: int = 2,
                threads_per_worker: int = 1) -> Iterator[object]:
    """:func:`open_client` as a context manager (closed, with its LocalCluster, on exit)."""
    client = open_client(scheduler_address, n_workers, threads_per_worker)
    try:
        yield client
    finally:
        client.close()


def map_ordered(task: Callable[[Any], Any], items: Sequence[Any], *, n_workers: int = 0,
                desc: str = "", progress: bool = True,
                scheduler_address: str | None = None) -> list:
    """``[task(item) for item in items]``, in the order of ``items``.

    In this process when ``n_workers`` < 2 (and no ``scheduler_address``) or there is at most
    one item; otherwise one Dask task per item on :func:`dask_client` (a LocalCluster of
    ``n_workers`` single-threaded processes, or the cluster at ``scheduler_address``).
    ``task`` must be picklable (a module-level function or a ``functools.partial`` of one).
    Tasks that cache their results (:func:`tokenbook.cache.cached_dir`) may share
    dependencies: the cache's key locks make the second worker wait for the first one's build.
    """
    from tqdm.auto import tqdm

    items = list(items)
    if n_workers < 0:
        raise ValueError(f"n_workers must be >= 0, got {n_workers}")
    bar = tqdm(total=len(items), desc=desc or getattr(task, "__name__", "tasks"),
               disable=not progress)
    try:
        if len(items) <= 1 or (n_workers < 2 and not scheduler_address):
            results = []
            for item in items:
                results.append(task(item))
                bar.update()
            return results
        from distributed import as_completed

        with dask_client(scheduler_address, n_workers=n_workers) as client:
            futures = [client.submit(task, item, pure=False) for item in items]
            index = {f.key: i for i, f in enumerate(futures)}
            results = [None] * len(items)
            for fut in as_completed(futures):
                results[index[fut.key]] = fut.result()
                bar.update()
            return results
    finally:
        bar.close()
