"""tokenbook.parallel.map_ordered: one task per item, results in the items' order, in this
process or on a two-process Dask LocalCluster."""

import logging
import os
import time

import pytest

from tokenbook.parallel import map_ordered


def test_in_process_keeps_order_and_runs_here():
    pids = map_ordered(lambda x: (x * x, os.getpid()), [3, 1, 2], n_workers=0, progress=False)
    assert [p[0] for p in pids] == [9, 1, 4]
    assert {p[1] for p in pids} == {os.getpid()}
    # one item never starts a cluster
    assert map_ordered(lambda x: os.getpid(), [7], n_workers=2, progress=False) == [os.getpid()]
    assert map_ordered(abs, [], n_workers=2, progress=False) == []


def test_bad_worker_count_is_a_clear_error():
    with pytest.raises(ValueError, match="n_workers must be >= 0"):
        map_ordered(abs, [1, 2], n_workers=-1, progress=False)


@pytest.mark.slow
def test_two_workers_keep_the_items_order_and_use_two_processes():
    # the first items sleep longest, so they finish last: the order must come from the items
    def task(x):
        time.sleep(0.4 * (4 - x))
        return x, os.getpid()

    out = map_ordered(task, [0, 1, 2, 3], n_workers=2, progress=False)
    assert [x for x, _ in out] == [0, 1, 2, 3]
    pids = {pid for _, pid in out}
    assert len(pids) == 2 and os.getpid() not in pids


def test_a_failing_task_raises_its_own_error():
    def task(x):
        if x == 2:
            raise ValueError("item 2 is bad")
        return x

    with pytest.raises(ValueError, match="item 2 is bad"):
        map_ordered(task, [1, 2, 3], n_workers=2, progress=False)


def test_workers_keep_glibcs_dynamic_mmap_threshold(monkeypatch):
    # Dask's nanny would set MALLOC_TRIM_THRESHOLD_=65536 in every worker (2-3x slower torch
    # training); the book's clusters unset it, also when an earlier cluster left it here,
    # and keep Dask's one-thread settings
    monkeypatch.setenv("MALLOC_TRIM_THRESHOLD_", "65536")

    def env(_):
        return os.environ.get("MALLOC_TRIM_THRESHOLD_"), os.environ.get("OMP_NUM_THREADS")

    assert map_ordered(env, [0, 1], n_workers=2, progress=False) == [(None, "1"), (None, "1")]
    assert "MALLOC_TRIM_THRESHOLD_" not in os.environ


def test_a_users_own_malloc_setting_is_left_alone(monkeypatch):
    from tokenbook.parallel import worker_environ

    monkeypatch.setenv("MALLOC_TRIM_THRESHOLD_", "1048576")
    with worker_environ():
        assert os.environ["MALLOC_TRIM_THRESHOLD_"] == "1048576"


@pytest.mark.slow
def test_the_clusters_own_error_logs_stay_off_the_page(capfd):
    # what a cluster logs at ERROR (a worker's heartbeat race at shutdown) landed on a chapter
    # page as a traceback; the task's own error still reaches the caller
    def task(x):
        logging.getLogger("distributed.worker").error("a shutdown race the page must not show")
        if x == 1:
            raise ValueError("item 1 is bad")
        return x

    assert map_ordered(task, [0, 2], n_workers=2, progress=False) == [0, 2]
    with pytest.raises(ValueError, match="item 1 is bad"):
        map_ordered(task, [0, 1], n_workers=2, progress=False)
    assert "shutdown race" not in capfd.readouterr().err
