"""Training step time of the grounded chapters' tiny pair: output layer over the whole
tokenizer (PaliGemma's 1,152 ``<loc>``/``<seg>`` tokens included) vs up to ``<image>``.

``tokenbook.models.paligemma.model_vocab_size`` sizes the captioner and text LM to the ids a
world's texts can hold (the BPE vocabulary, its specials and ``<image>``: 513 in the UID
world) instead of ``len(tokenizer)`` (1,665). This builds the UID chapter's untrained pair
(its ``params/uid_grounding/tiny.yaml`` world, root ``--seed``) both ways and times
``--steps`` training steps (after 5 warm-up steps; forward and backward, no optimiser) of
each kind the chapter trains: the story stage (whole stories as documents, text LM), the
text stage (text LM) and the captioner's fine-tuning (locked tower's states), from the same
batches. The whole-tokenizer way runs before and after; the faster of the two is the
baseline, and the ratio is trimmed / baseline. One torch thread; the load average is
recorded: run it on an idle machine. Written to ``benchmarks/results/output_layer.json``.

    HF_HUB_OFFLINE=1 python benchmarks/output_layer.py [--steps 200] [--seed 0]
"""

from __future__ import annotations

import os
import platform
import time
from dataclasses import replace
from pathlib import Path
from unittest import mock

import torch
import yaml

from _uid_pair import parse_args
from tokenbook.cache import write_json_atomic
from tokenbook.grounded import tiny as gt
from tokenbook.models import paligemma as pg

ROOT = Path(__file__).resolve().parents[1]
WARMUP = 5


def _ms_per_step(model, enc, tok, cfg, n_image, steps: int) -> float:
    """Milliseconds per forward + backward step of ``model`` on batches of ``enc``."""
    batches = pg._batch_indices(enc, cfg, torch.Generator().manual_seed(0))
    model.train()
    for step in range(WARMUP + steps):
        if step == WARMUP:
            t0 = time.perf_counter()
        pg._batch_loss(model, enc, next(batches), tok, n_image=n_image).backward()
    return 1e3 * (time.perf_counter() - t0) / steps


def main() -> None:
    args = parse_args(__doc__, "output_layer.json")
    torch.set_num_threads(1)
    params = gt.TinyParams.from_mapping(
        yaml.safe_load((ROOT / "params" / "uid_grounding" / "tiny.yaml").read_text()))
    world = gt.tiny_world(args.seed, params, "on")
    cfg = pg.TrainConfig(story_share=params.story_share)
    examples = pg.training_examples(world, "train")
    documents = pg.story_documents(world.story_corpus(params.story_documents))
    result = dict(cpu_count=os.cpu_count(), platform=platform.platform(), steps=args.steps,
                  seed=args.seed, load_average_before=[round(x, 2) for x in os.getloadavg()])
    ms: dict[str, dict[str, float]] = {}
    for way in ("whole tokenizer", "up to <image>", "whole tokenizer again"):
        sizing = len if way.startswith("whole") else pg.model_vocab_size
        with mock.patch.object(pg, "model_vocab_size", sizing):
            processor, captioner, text_lm = pg.untrained_pair(world, examples, cfg, args.seed)
        tok = processor.tokenizer
        enc = pg._encode(world, examples, processor)
        enc = replace(enc, tower_states=pg.locked_tower_states(captioner.model.vision_tower,
                                                               enc.pixel_values))
        docs = pg._encode(world, documents, processor)
        result.setdefault("vocab", {})[way] = text_lm.config.vocab_size
        ms[way] = {
            "story stage (text LM, documents)": _ms_per_step(text_lm, docs, tok, cfg, None,
                                                             args.steps),
            "text stage (text LM)": _ms_per_step(text_lm, enc, tok, cfg, None, args.steps),
            "captioner fine-tuning": _ms_per_step(captioner, enc, tok, cfg,
                                                  processor.image_seq_length, args.steps)}
    baseline = {k: min(ms["whole tokenizer"][k], ms["whole tokenizer again"][k])
                for k in ms["up to <image>"]}
    result.update(ms_per_step={w: {k: round(v, 2) for k, v in d.items()} for w, d in ms.items()},
                  ratio_trimmed_over_baseline={k: round(ms["up to <image>"][k] / baseline[k], 3)
                                               for k in baseline},
                  load_average_after=[round(x, 2) for x in os.getloadavg()])
    for k in baseline:
        print(f"{k:36s} baseline {baseline[k]:6.1f} ms  trimmed {ms['up to <image>'][k]:6.1f} ms"
              f"  ratio {result['ratio_trimmed_over_baseline'][k]:.3f}")
    write_json_atomic(result, Path(args.out))
    print(f"written {args.out}")


if __name__ == "__main__":
    main()
