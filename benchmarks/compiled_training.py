"""Training step time of the tiny models under ``torch.compile`` against eager PyTorch.

The tiny models spend most of a training step in many small operations (the text LM's step
is ~1,700 matrix products and ~3,000 elementwise multiplications of a few thousand numbers
each), where the interpreter's and the dispatcher's overhead dominates; inductor fuses them.
This measures, one torch thread, from the same initial weights and on the same batches:

* the UID pair's **text LM** (stage 1, ``paligemma._train``; ``model.model`` compiled),
* the UID pair's **captioner** (stage 2b: projector + decoder on the locked tower's states),
* the memorisation chapter's **tiny Marian** (vocabulary 250, batches of 16 pairs of 6–20
  tokens; the whole model compiled),

each for ``--steps`` steps eager, compiled, and eager again (the faster eager run is the
baseline), and prints the compiled/eager ratio of the steady-state ms per step, the seconds the
first ``--warm`` compiled steps cost beyond that (compiling, with dynamic shapes, and
recompiling as new batch shapes arrive), the steps
that cost takes to pay back, and the largest difference between the eager and the compiled
per-step losses (compiled code is not the same arithmetic: the book's numbers would change).
It runs twice, in two fresh processes sharing one inductor cache folder: first with the cache
empty (the cost a first chapter would pay), then with it full (every later process: workers,
seeds, chapters). The load average is recorded: run it on an idle machine. Written to
``benchmarks/results/compiled_training.json``.

    python benchmarks/compiled_training.py [--steps 150 --warm 60]
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def _timed(fn) -> tuple[float, object]:
    t0 = time.perf_counter()
    out = fn()
    return time.perf_counter() - t0, out


def _pair_workloads(seed: int):
    """(name, initial model, train(model, steps, part) -> losses, module to compile)."""
    from dataclasses import replace

    from _uid_pair import uid_pair
    from tokenbook.models import paligemma as pg

    cfg, processor, captioner, text_lm, enc, _ = uid_pair(seed, 10)
    tok = processor.tokenizer
    tower_enc = replace(enc, tower_states=pg.locked_tower_states(captioner.model.vision_tower,
                                                                 enc.pixel_values))
    n_image = processor.image_seq_length

    def text_train(model, steps, part):
        return pg._train(model, enc, tok, replace(cfg, steps=steps, warmup=5), n_image=None,
                         seed=seed + part, desc="", progress=False)

    def caption_train(model, steps, part):
        return pg._train(model, tower_enc, tok, replace(cfg, steps=steps, warmup=5),
                         n_image=n_image, seed=seed + part, desc="", progress=False,
                         trainable=[model.model.multi_modal_projector, model.model.language_model])

    return [("text LM (UID pair, stage 1)", text_lm, text_train, lambda m: m.model),
            ("captioner (UID pair, stage 2b)", captioner, caption_train, lambda m: m.model)]


def _marian_workload():
    import torch
    from flat_adamw import _batches, _models

    from tokenbook.models.flat_adamw import flat_adamw

    name = "tiny Marian (memorisation)"
    marian, vocab, batch, lengths, causal = _models()[name]

    def train(model, steps, part):
        batches = _batches(vocab, batch, lengths, causal, steps + 7 * part)[-steps:]
        losses = []
        with flat_adamw(model.parameters(), lr=3e-3, betas=(0.9, 0.98)) as opt:
            for b in batches:
                loss = model(**b).loss
                opt.zero_grad()
                loss.backward()
                torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
                opt.step()
                losses.append(loss.item())
        return losses

    return [(name, marian, train, lambda m: m)]


def child(args) -> dict:
    """One process's measurements (its inductor cache is ``TORCHINDUCTOR_CACHE_DIR``)."""
    import logging

    import torch

    torch.set_num_threads(1)
    torch._logging.set_logs(dynamo=logging.ERROR)  # graph breaks are expected (HF's checks)
    out = {}
    for name, model, train, target in _pair_workloads(args.seed) + _marian_workload():
        runs = {}
        for way in ("eager", "compiled", "eager again"):
            clone = copy.deepcopy(model)
            if way == "compiled":
                target(clone).compile(dynamic=True)
            first_s, first = _timed(lambda: train(clone, args.warm, 0))
            steady_s, rest = _timed(lambda: train(clone, args.steps, 1))
            runs[way] = dict(first_s=first_s, ms=1e3 * steady_s / args.steps,
                             losses=list(first) + list(rest))
        base = min(runs["eager"]["ms"], runs["eager again"]["ms"])
        comp = runs["compiled"]
        compile_s = comp["first_s"] - args.warm * comp["ms"] / 1e3
        gain_ms = base - comp["ms"]
        diff = max(abs(a - b) for a, b in zip(runs["eager"]["losses"], comp["losses"]))
        out[name] = dict(
            eager_ms_per_step=[round(runs[w]["ms"], 2) for w in ("eager", "eager again")],
            compiled_ms_per_step=round(comp["ms"], 2),
            ratio_compiled_over_eager=round(comp["ms"] / base, 3),
            compile_s=round(compile_s, 1),
            break_even_steps=round(1e3 * compile_s / gain_ms) if gain_ms > 0 else None,
            max_loss_difference=float(f"{diff:.3g}"))
        print(f"  {name}: eager {base:.1f} ms/step, compiled {comp['ms']:.1f} (ratio "
              f"{comp['ms'] / base:.3f}); compiling {compile_s:.0f} s, paid back after "
              f"{out[name]['break_even_steps']} steps; losses differ by up to {diff:.2g}",
              flush=True)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=150)
    ap.add_argument("--warm", type=int, default=60)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", default=str(Path(__file__).parent / "results"
                                         / "compiled_training.json"))
    ap.add_argument("--child", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        Path(args.child).write_text(json.dumps(child(args)))
        return

    from tokenbook.cache import write_json_atomic

    result = dict(cpu_count=os.cpu_count(), platform=platform.platform(), steps=args.steps,
                  warm=args.warm, seed=args.seed,
                  load_average_before=[round(x, 2) for x in os.getloadavg()], runs={})
    with tempfile.TemporaryDirectory(prefix="inductor-cache-") as cache:
        env = {**os.environ, "TORCHINDUCTOR_CACHE_DIR": cache, "OMP_NUM_THREADS": "1",
               "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
        for label in ("cache empty", "cache full"):
            print(f"{label}:", flush=True)
            report = Path(cache) / f"{label.replace(' ', '-')}.json"
            subprocess.run([sys.executable, __file__, "--child", str(report),
                            "--steps", str(args.steps), "--warm", str(args.warm),
                            "--seed", str(args.seed)], env=env, check=True)
            result["runs"][label] = json.loads(report.read_text())
    result["load_average_after"] = [round(x, 2) for x in os.getloadavg()]
    print(f"load average {result['load_average_before']} before, "
          f"{result['load_average_after']} after")
    write_json_atomic(result, Path(args.out))


if __name__ == "__main__":
    main()
