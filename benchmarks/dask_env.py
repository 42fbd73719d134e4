"""Training in a Dask worker with Dask's default worker environment vs the book's.

Dask's nanny starts every worker with ``distributed.nanny.pre-spawn-environ``, which sets
``MALLOC_TRIM_THRESHOLD_=65536``. Setting it switches off glibc's dynamic mmap threshold, so the
large, short-lived tensors of a PyTorch training loop are each mapped and unmapped (system time).
:func:`tokenbook.parallel.worker_environ` unsets it for the book's clusters. This benchmark trains
the same tiny captioner + text LM (the UID chapter's staged recipe, shortened) in one
single-threaded LocalCluster worker twice in one command: with Dask's default environment
(baseline) and with the book's, each in an empty cache, and prints the ratio.

    python benchmarks/dask_env.py [--steps 150] [--out benchmarks/results/dask_env.json]
"""

from __future__ import annotations

import argparse
import logging
import os
import platform
import tempfile
import time
from pathlib import Path


def _train(cache: str, steps: int) -> dict:
    """Train root seed 31's tiny pair in ``cache``; the wall time and the worker's env."""
    import resource

    os.environ["TOKENBOOK_CACHE"] = cache
    from tokenbook.grounded import tiny as gt

    params = gt.TinyParams(train_steps=steps, text_steps=steps * 2 // 5,
                           align_steps=steps // 3, vision_steps=steps // 5)
    world = gt.tiny_world(31, params, "on")
    before = resource.getrusage(resource.RUSAGE_SELF)
    t0 = time.perf_counter()
    gt.tiny_models(world, 31, params)
    after = resource.getrusage(resource.RUSAGE_SELF)
    return dict(wall_s=round(time.perf_counter() - t0, 2),
                user_s=round(after.ru_utime - before.ru_utime, 2),
                system_s=round(after.ru_stime - before.ru_stime, 2),
                malloc_trim_threshold=os.environ.get("MALLOC_TRIM_THRESHOLD_"))


def _run(steps: int, book_env: bool) -> dict:
    from contextlib import nullcontext

    from distributed import Client

    from tokenbook.parallel import worker_environ

    with tempfile.TemporaryDirectory() as cache:
        with worker_environ() if book_env else nullcontext():
            client = Client(n_workers=1, threads_per_worker=1, processes=True,
                            dashboard_address=":0", silence_logs=logging.ERROR)
        try:
            return client.submit(_train, cache, steps, pure=False).result()
        finally:
            client.close()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=150, help="fine-tuning steps (others scale)")
    ap.add_argument("--out", default=str(Path(__file__).parent / "results" / "dask_env.json"))
    args = ap.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    from tokenbook.cache import write_json_atomic

    result = dict(steps=args.steps, cpu_count=os.cpu_count(), platform=platform.platform(),
                  loadavg_before=list(os.getloadavg()))
    result["dask_default_env"] = _run(args.steps, book_env=False)
    result["book_env"] = _run(args.steps, book_env=True)
    result["loadavg_after"] = list(os.getloadavg())
    result["speedup"] = round(result["dask_default_env"]["wall_s"]
                              / result["book_env"]["wall_s"], 3)
    for name in ("dask_default_env", "book_env"):
        r = result[name]
        print(f"{name:>17}: {r['wall_s']:7.1f} s wall, {r['user_s']:6.1f} s user, "
              f"{r['system_s']:6.1f} s system (MALLOC_TRIM_THRESHOLD_={r['malloc_trim_threshold']})")
    print(f"speed-up of the book's worker environment: {result['speedup']:.2f}x")
    write_json_atomic(result, Path(args.out))


if __name__ == "__main__":
    main()
