"""Captioner step time of the grounded chapters' tiny pair: tower run per batch vs read once.

In stages 2a and 2b the captioner's vision tower is locked, yet each training step ran it on
the batch's images again. ``tokenbook.models.paligemma.locked_tower_states`` computes the
tower's output for every training image once; the batches then carry those rows and only the
projector and the decoder run. This trains the captioner (stage 2b: projector + decoder, tower
locked) for ``--steps`` steps each way from the same weights and the same batches, in one
process, and prints ms/step and the ratio once / per batch (the per-batch way runs before and
after; the faster of the two is the baseline). It also checks that both ways end with the same
weights, bit for bit. The load average is recorded: run it on an idle machine. Written to
``benchmarks/results/locked_tower.json``.

    python benchmarks/locked_tower.py [--steps 200] [--seed 0]
"""

from __future__ import annotations

import copy
import os
import platform
import time
from dataclasses import replace
from pathlib import Path

from _uid_pair import parse_args, uid_pair


def main() -> None:
    args = parse_args(__doc__, "locked_tower.json")
    cfg, processor, captioner, _, enc, examples = uid_pair(args.seed, args.steps)
    import torch

    from tokenbook.cache import write_json_atomic
    from tokenbook.models import paligemma as pg

    tok = processor.tokenizer
    n_image = processor.image_seq_length
    t0 = time.perf_counter()
    states = pg.locked_tower_states(captioner.model.vision_tower, enc.pixel_values)
    once_cost = time.perf_counter() - t0
    encodings = {"per batch": enc, "once": replace(enc, tower_states=states),
                 "per batch again": enc}

    result = dict(cpu_count=os.cpu_count(), platform=platform.platform(), steps=args.steps,
                  seed=args.seed, n_examples=len(examples), n_images=len(enc.scene_ids),
                  seconds_to_compute_states=round(once_cost, 3),
                  load_average_before=[round(x, 2) for x in os.getloadavg()])
    ms, weights = {}, {}
    for way, encoding in encodings.items():
        clone = copy.deepcopy(captioner)
        t0 = time.perf_counter()
        pg._train(clone, encoding, tok, cfg, n_image=n_image, seed=args.seed, desc=way,
                  progress=False,
                  trainable=[clone.model.multi_modal_projector, clone.model.language_model])
        ms[way] = 1e3 * (time.perf_counter() - t0) / args.steps
        weights[way] = clone.state_dict()
    same = all(torch.equal(weights["per batch"][k], weights["once"][k])
               for k in weights["per batch"])
    baseline = min(ms["per batch"], ms["per batch again"])
    result.update(ms_per_step={k: round(v, 2) for k, v in ms.items()},
                  ratio_once_over_per_batch=round(ms["once"] / baseline, 3),
                  same_weights=same,
                  load_average_after=[round(x, 2) for x in os.getloadavg()])
    print(f"captioner: {ms['per batch']:.1f} / {ms['per batch again']:.1f} ms per step with the "
          f"tower run per batch, {ms['once']:.1f} with its states read once: ratio "
          f"{ms['once'] / baseline:.3f}; same weights: {same}; states of "
          f"{len(enc.scene_ids)} images in {once_cost:.2f} s; load average "
          f"{result['load_average_before']} before, {result['load_average_after']} after",
          flush=True)
    write_json_atomic(result, Path(args.out))
    if not same:
        raise SystemExit("the two ways trained different weights")


if __name__ == "__main__":
    main()
