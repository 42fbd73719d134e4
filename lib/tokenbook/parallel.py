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
import warnings
from contextlib import contextmanager
from typing import Iterator

__all__ = ["open_client", "dask_client"]


def open_client(scheduler_address: str | None = None, n_workers: int = 2,
                threads_per_worker: int = 1):
    """A ``distributed.Client``: to ``scheduler_address`` if given, else to its own LocalCluster
    of ``n_workers`` processes × ``threads_per_worker`` threads (``client.close()`` closes it)."""
    from distributed import Client

    if scheduler_address:
        return Client(scheduler_address, timeout="10s")
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="Port .* is already in use")
        return Client(n_workers=n_workers, threads_per_worker=threads_per_worker, processes=True,
                      dashboard_address=":0", silence_logs=logging.ERROR)


@contextmanager
def dask_client(scheduler_address: str | None = None, n_workers: int = 2,
                threads_per_worker: int = 1) -> Iterator[object]:
    """:func:`open_client` as a context manager (closed, with its LocalCluster, on exit)."""
    client = open_client(scheduler_address, n_workers, threads_per_worker)
    try:
        yield client
    finally:
        client.close()
