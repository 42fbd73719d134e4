"""What the grounded-training benchmarks share: their command line and the UID world's untrained
pair (root seed ``seed``, the chapter's world sizes), encoded for training."""

from __future__ import annotations

import argparse
import os
from pathlib import Path


def parse_args(doc: str, result_name: str) -> argparse.Namespace:
    """``--steps``, ``--seed`` and ``--out`` (default ``benchmarks/results/<result_name>``)."""
    ap = argparse.ArgumentParser(description=doc.splitlines()[0])
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", default=str(Path(__file__).parent / "results" / result_name))
    return ap.parse_args()


def uid_pair(seed: int, steps: int):
    """``(cfg, processor, captioner, text_lm, enc, examples)``: the untrained pair of the UID
    world of root ``seed``, its training examples encoded, and a config of ``steps`` steps (one
    torch thread, offline)."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    from dataclasses import replace

    import torch

    from tokenbook.grounded import tiny as gt
    from tokenbook.models import paligemma as pg

    torch.set_num_threads(1)
    params = gt.TinyParams(n_languages=4, n_scenes=1200, n_stories=40, max_page_sentences=3,
                           world_style="uid")
    world = gt.tiny_world(seed, params, "on")
    examples = pg.training_examples(world, "train")
    cfg = replace(pg.TrainConfig(), steps=steps, warmup=10)
    processor, captioner, text_lm = pg.untrained_pair(world, examples, cfg, seed)
    return cfg, processor, captioner, text_lm, pg._encode(world, examples, processor), examples
