"""Training step time of the grounded chapters' tiny pair: whole batches vs length groups.

Most of the UID world's training batches hold one of the few long story-with-context examples,
so every caption in them was padded to its length. ``tokenbook.models.paligemma.length_groups``
splits a batch into the shorter and the longer examples (one loss: the NLL summed over both,
divided by their tokens). This trains the captioner (stage 2b: projector + decoder, tower
locked) and the text LM for ``--steps`` steps each way from the same initial weights, in one
process, and prints ms/step and the ratio grouped / whole (whole batches run before and after
the grouped run; the faster of the two is the baseline); it also checks that the two ways give
the same loss on one batch. The load average is recorded: run it on an idle machine. Written to
``benchmarks/results/training_batches.json``.

    python benchmarks/training_batches.py [--steps 200] [--seed 0]
"""

from __future__ import annotations

import copy
import os
import platform
import time
from pathlib import Path

from _uid_pair import parse_args, uid_pair


def main() -> None:
    args = parse_args(__doc__, "training_batches.json")
    cfg, processor, captioner, text_lm, enc, examples = uid_pair(args.seed, args.steps)
    import torch

    from tokenbook.cache import write_json_atomic
    from tokenbook.models import paligemma as pg

    tok = processor.tokenizer
    n_image = processor.image_seq_length

    # the same loss either way, on the first batch
    idx = list(range(cfg.batch_size))
    with torch.no_grad():
        loss_whole, loss_grouped = (
            float(pg._batch_loss(captioner, enc, idx, tok, n_image=n_image, length_grouped=g))
            for g in (False, True))

    result = dict(cpu_count=os.cpu_count(), platform=platform.platform(), steps=args.steps,
                  seed=args.seed, n_examples=len(examples),
                  load_average_before=[round(x, 2) for x in os.getloadavg()],
                  first_batch_loss=dict(whole=loss_whole, grouped=loss_grouped), models={})
    for name, model, images, trainable in (
            ("captioner", captioner, n_image,
             [captioner.model.multi_modal_projector, captioner.model.language_model]),
            ("text LM", text_lm, None, None)):
        ms = {}
        for way, grouped in (("whole", False), ("grouped", True), ("whole again", False)):
            clone = copy.deepcopy(model)
            parts_of = ([clone.model.multi_modal_projector, clone.model.language_model]
                        if trainable else None)
            t0 = time.perf_counter()
            pg._train(clone, enc, tok, cfg, n_image=images, seed=args.seed, desc=way,
                      progress=False, trainable=parts_of, length_grouped=grouped)
            ms[way] = 1e3 * (time.perf_counter() - t0) / args.steps
        baseline = min(ms["whole"], ms["whole again"])
        result["models"][name] = dict(ms_per_step={k: round(v, 2) for k, v in ms.items()},
                                      ratio_grouped_over_whole=round(ms["grouped"] / baseline, 3))
        print(f"{name}: {ms['whole']:.1f} / {ms['whole again']:.1f} ms per step with whole "
              f"batches, {ms['grouped']:.1f} with length groups: ratio "
              f"{ms['grouped'] / baseline:.3f}", flush=True)
    result["load_average_after"] = [round(x, 2) for x in os.getloadavg()]
    print(f"first batch loss: whole {loss_whole:.6f}, grouped {loss_grouped:.6f}; load average "
          f"{result['load_average_before']} before, {result['load_average_after']} after")
    write_json_atomic(result, Path(args.out))


if __name__ == "__main__":
    main()
