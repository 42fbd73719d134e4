"""The counterfactual-memorisation ensemble, fanned out as Dask tasks, resumable.

Layout of a *workspace* folder (one per corpus × tokenizer × design; the chapter keys it by all
parameters through :mod:`tokenbook.cache`)::

    corpus.parquet      pair_id, source, target           (the whole training corpus)
    tokenizer/          joint BPE tokenizer (save_pretrained)
    masks.npy           bool (n_models, n_pairs): model m trains on pair i
    scores/model_007.parquet   model, pair_id, score, in_train, logprob_mean, n_tokens
    manifest.json       the parameters that made the workspace

Each task trains one Marian model from scratch on its subset and scores *every* pair
teacher-forced; it writes its score file atomically (temporary file + rename) as its last act.
:func:`fan_out` skips every job whose output file exists, so a killed run resumes without
retraining finished models, and submits the rest with ``retries=`` so that a task that raises
(e.g. a worker that ran out of memory and was restarted) is run again. A worker *process* that
dies is handled by the scheduler itself: its tasks are rescheduled on other workers (up to
``distributed.scheduler.allowed-failures`` times).

Scaling out: pass ``scheduler_address="tcp://host:8786"`` of an existing cluster, e.g. one
started with dask-jobqueue on Slurm::

    from dask_jobqueue import SLURMCluster
    cluster = SLURMCluster(cores=4, memory="32GB", processes=1, job_extra_directives=["--gres=gpu:1"])
    cluster.scale(jobs=40)
    # then: fan_out(jobs, scheduler_address=cluster.scheduler_address)

The workspace must then live on a file system every worker sees.
"""

from __future__ import annotations

import json
import os
import shutil
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Sequence

import numpy as np
import pandas as pd

from tokenbook.parallel import dask_client

from tokenbook.cache import atomic_path, write_json_atomic, write_parquet_atomic
from tokenbook.memorisation_cartography.estimator import score_pairs
from tokenbook.models.marian import build_marian, train_bpe_tokenizer, train_marian, translate
from tokenbook.seeds import derive_seed


# --------------------------------------------------------------------------- workspace
@dataclass
class Workspace:
    """A folder holding one experiment's corpus, tokenizer, subset masks and outputs."""

    root: Path

    def __post_init__(self) -> None:
        self.root = Path(self.root)

    corpus_path = property(lambda self: self.root / "corpus.parquet")
    tokenizer_dir = property(lambda self: self.root / "tokenizer")
    masks_path = property(lambda self: self.root / "masks.npy")
    scores_dir = property(lambda self: self.root / "scores")

    @classmethod
    def create(cls, root: str | Path, sources: Sequence[str], targets: Sequence[str], *,
               vocab_size: int = 1000, params: dict | None = None) -> "Workspace":
        """Write corpus and tokenizer into ``root`` unless they are already there (idempotent).

        If ``root`` holds a workspace made with different ``params`` a ValueError says so.
        """
        if len(sources) != len(targets):
            raise ValueError(f"{len(sources)} sources but {len(targets)} targets")
        if len(sources) == 0:
            raise ValueError("the corpus is empty")
        ws = cls(Path(root))
        ws.root.mkdir(parents=True, exist_ok=True)
        manifest = {"n_pairs": len(sources), "vocab_size": vocab_size, **(params or {})}
        mpath = ws.root / "manifest.json"
        if mpath.exists():
            old = json.loads(mpath.read_text())
            if old != json.loads(json.dumps(manifest, default=str)):
                raise ValueError(f"{ws.root} already holds a workspace made with other parameters "
                                 f"({old}); use another folder or delete it")
        if not ws.corpus_path.exists():
            write_parquet_atomic(pd.DataFrame({"pair_id": np.arange(len(sources)),
                                               "source": list(sources),
                                               "target": list(targets)}), ws.corpus_path)
        if not (ws.tokenizer_dir / "tokenizer.json").exists():
            tmp = ws.root / f".tokenizer.tmp-{os.getpid()}"
            train_bpe_tokenizer(list(sources) + list(targets), vocab_size, save_dir=tmp)
            try:
                os.replace(tmp, ws.tokenizer_dir)
            except OSError:   # another process finished first: its tokenizer is identical
                if not (ws.tokenizer_dir / "tokenizer.json").exists():
                    raise

                shutil.rmtree(tmp, ignore_errors=True)
        write_json_atomic(manifest, mpath)
        return ws

    def corpus(self) -> pd.DataFrame:
        return pd.read_parquet(self.corpus_path)

    def tokenizer(self):
        from transformers import PreTrainedTokenizerFast

        return PreTrainedTokenizerFast.from_pretrained(str(self.tokenizer_dir))

    def set_masks(self, masks: np.ndarray) -> np.ndarray:
        """Store the subset masks; if masks are already stored they must be identical."""
        masks = np.asarray(masks, dtype=bool)
        if self.masks_path.exists():
            old = np.load(self.masks_path)
            if old.shape != masks.shape or not (old == masks).all():
                raise ValueError(f"{self.masks_path} holds other subset masks; this workspace was "
                                 "made for another design/seed — use another folder")
            return old
        with atomic_path(self.masks_path) as tmp, open(tmp, "wb") as f:
            np.save(f, masks)
        return masks

    def masks(self) -> np.ndarray:
        return np.load(self.masks_path)

    def score_path(self, model_idx: int) -> Path:
        return self.scores_dir / f"model_{model_idx:03d}.parquet"


# --------------------------------------------------------------------------- tasks
def task_setup(threads: int) -> None:
    import torch

    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    torch.set_num_threads(threads)


def _maybe_fail(fail_once_marker: str | None) -> None:
    """Fault injection for tests: raise the first time (creating the marker), pass afterwards."""
    if fail_once_marker and not Path(fail_once_marker).exists():
        Path(fail_once_marker).write_text("failed once")
        raise RuntimeError(f"injected failure (marker {fail_once_marker})")


def train_and_score_model(*, root: str, model_idx: int, preset: str = "tiny",
                          model_overrides: dict | None = None, train_kwargs: dict | None = None,
                          seed: int = 0, threads: int = 1, score_batch_size: int = 256,
                          bleu: bool = False, fail_once_marker: str | None = None) -> str:
    """One ensemble member: train on subset ``model_idx`` of the workspace, score every pair.

    Writes ``scores/model_XXX.parquet`` atomically and returns its path. Model seed =
    ``derive_seed(seed, "model", model_idx)`` (initialisation and batch order). With ``bleu=True`` every
    source is also translated greedily and a ``bleu`` column holds sentence BLEU (sacrebleu,
    effective order) against the reference — the authors' hypothesis-based variant.
    """
    task_setup(threads)
    t_wall, t_cpu = time.perf_counter(), time.process_time()
    ws = Workspace(root)
    _maybe_fail(fail_once_marker)
    corpus, tok = ws.corpus(), ws.tokenizer()
    in_train = ws.masks()[model_idx]
    sub = corpus[in_train]
    mseed = derive_seed(seed, "model", model_idx)
    model = build_marian(tok, preset, seed=mseed, **(model_overrides or {}))
    train_marian(model, tok, sub["source"].tolist(), sub["target"].tolist(), seed=mseed,
                 progress=False, **(train_kwargs or {}))
    sc = score_pairs(model, tok, corpus["source"].tolist(), corpus["target"].tolist(),
                     batch_size=score_batch_size)
    out = pd.DataFrame({"model": model_idx, "pair_id": corpus["pair_id"].to_numpy(),
                        "score": sc["gmp"].to_numpy(), "in_train": in_train,
                        "logprob_mean": sc["logprob_mean"].to_numpy(),
                        "n_tokens": sc["n_tokens"].to_numpy()})
    out["task_wall_s"] = time.perf_counter() - t_wall  # per-task cost, for scaling estimates
    out["task_cpu_s"] = time.process_time() - t_cpu
    if bleu:
        from sacrebleu.metrics import BLEU

        hyp = translate(model, tok, corpus["source"].tolist())
        metric = BLEU(effective_order=True)
        out["bleu"] = [metric.sentence_score(h, [r]).score
                       for h, r in zip(hyp, corpus["target"].tolist())]
    return str(write_parquet_atomic(out, ws.score_path(model_idx)))


# --------------------------------------------------------------------------- fan-out
@dataclass
class Job:
    """A unit of work: ``fn(**kwargs)`` must write ``out_path`` atomically."""

    name: str
    fn: Callable[..., object]
    kwargs: dict = field(default_factory=dict)
    out_path: Path | None = None

    def done(self) -> bool:
        return self.out_path is not None and Path(self.out_path).exists()


def fan_out(jobs: Sequence[Job], *, client=None, scheduler_address: str | None = None,
            n_workers: int = 2, retries: int = 2, progress: bool = True,
            desc: str = "ensemble") -> list[Path | None]:
    """Run the jobs whose output is missing as Dask tasks; return every job's output path.

    ``client``: an existing ``distributed.Client`` (used as is); else ``scheduler_address`` or a
    LocalCluster of ``n_workers`` single-threaded processes. ``n_workers=0`` runs the jobs in
    this process, one after another (no Dask; for debugging). Jobs are submitted with
    ``retries=retries``; a job that still fails raises here, after the others have finished
    and written their outputs (so a rerun resumes from them).
    """
    from tqdm.auto import tqdm

    todo = [j for j in jobs if not j.done()]
    bar = tqdm(total=len(jobs), initial=len(jobs) - len(todo), desc=desc, disable=not progress)
    if todo and client is None and not scheduler_address and n_workers == 0:
        for j in todo:
            j.fn(**j.kwargs)
            bar.update()
    elif todo:
        from distributed import as_completed

        def run(c):
            futures = {c.submit(j.fn, **j.kwargs, key=f"{j.name}-{uuid.uuid4().hex[:8]}",
                                retries=retries, pure=False): j for j in todo}
            errors = []
            for fut in as_completed(futures):
                if fut.status == "error":
                    errors.append((futures[fut].name, fut.exception()))
                bar.update()
            if errors:
                name, exc = errors[0]
                raise RuntimeError(f"{len(errors)} of {len(todo)} tasks failed after {retries} "
                                   f"retries; first: {name}: {exc!r}. Finished tasks kept their "
                                   "outputs: rerun to resume.") from exc

        if client is not None:
            run(client)
        else:
            with dask_client(scheduler_address, n_workers) as c:
                run(c)
    bar.close()
    missing = [j.name for j in jobs if j.out_path is not None and not j.done()]
    if missing:
        raise RuntimeError(f"jobs finished without writing their outputs: {missing}")
    return [j.out_path for j in jobs]


# --------------------------------------------------------------------------- ensemble
def ensemble_jobs(ws: Workspace, *, preset: str = "tiny", model_overrides: dict | None = None,
                  train_kwargs: dict | None = None, seed: int = 0, threads: int = 1,
                  bleu: bool = False, fail_once_marker: str | None = None) -> list[Job]:
    """One :class:`Job` per ensemble member of the workspace's masks."""
    n_models = ws.masks().shape[0]
    return [Job(f"cm-model-{m:03d}", train_and_score_model,
                dict(root=str(ws.root), model_idx=m, preset=preset,
                     model_overrides=model_overrides, train_kwargs=train_kwargs, seed=seed,
                     threads=threads, bleu=bleu, fail_once_marker=fail_once_marker),
                ws.score_path(m)) for m in range(n_models)]


def load_scores(ws: Workspace) -> pd.DataFrame:
    """The long score matrix ``model, pair_id, score, in_train, logprob_mean, n_tokens``."""
    n_models = ws.masks().shape[0]
    paths = [ws.score_path(m) for m in range(n_models)]
    missing = [p.name for p in paths if not p.exists()]
    if missing:
        raise FileNotFoundError(f"{len(missing)} of {n_models} models have no scores yet "
                                f"({missing[:3]}...); run the ensemble (it resumes)")
    return pd.concat([pd.read_parquet(p) for p in paths], ignore_index=True)


def run_ensemble(ws: Workspace, masks: np.ndarray, *, preset: str = "tiny",
                 model_overrides: dict | None = None, train_kwargs: dict | None = None,
                 seed: int = 0, bleu: bool = False, extra_jobs: Sequence[Job] = (),
                 **fan_out_kwargs) -> pd.DataFrame:
    """Store ``masks``, train and score every missing member (plus ``extra_jobs``, e.g. the
    training-dynamics run, in the same fan-out) and return the long score matrix."""
    ws.set_masks(masks)
    jobs = ensemble_jobs(ws, preset=preset, model_overrides=model_overrides,
                         train_kwargs=train_kwargs, seed=seed, bleu=bleu) + list(extra_jobs)
    fan_out(jobs, **fan_out_kwargs)
    return load_scores(ws)


def training_gpu_hours(*, n_pairs: float, tokens_per_pair: float, n_params: float, epochs: float,
                       runs: int = 1, subset_ratio: float = 1.0,
                       effective_flops: float = 1e14) -> dict:
    """Back-of-envelope training cost: 6 · parameters · tokens FLOPs (forward + backward).

    ``tokens_per_pair`` counts source + target tokens; ``effective_flops`` is the sustained
    FLOP/s of one GPU (1e14 ≈ an A100 in bf16 at good utilisation, ~3e14 an H100). Returns
    ``flops_per_run``, ``gpu_hours_per_run`` and ``gpu_hours`` (all runs).
    """
    flops = 6.0 * n_params * tokens_per_pair * n_pairs * subset_ratio * epochs
    per_run = flops / effective_flops / 3600.0
    return dict(flops_per_run=flops, gpu_hours_per_run=per_run, gpu_hours=per_run * runs)
