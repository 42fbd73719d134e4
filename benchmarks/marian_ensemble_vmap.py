"""Gradient time of K tiny Marian models one after another against one ``torch.func.vmap`` call.

The memorisation chapter trains hundreds of tiny Marian models (d_model 64, 2+2 layers), each a
single-threaded Dask task, and its training steps cost about 17 ms on one core. Stacking an
ensemble's K models (``torch.func.stack_module_state``) and computing their K gradients in one
vmapped call would pay Python's and the dispatcher's overhead once per step instead of K times,
if the batched kernels were as fast as the single ones. This measures it: K models
(``build_marian``, the chapter's tokenizer of vocabulary 250 on its 300-pair world), each with
its own batch of 16 pairs, forward + backward to the gradients, ``--steps`` times

* one after another (the chapter's way; Hugging Face's default SDPA attention and the eager
  attention both);
* in one ``vmap(grad_and_value(...))`` call over the stacked parameters (eager attention and a
  prepared 4-D additive padding mask: the SDPA path asks ``padding_mask.all()``, data-dependent
  control flow that vmap refuses).

It prints the median ms per model-step of each way and the ratios against the first, checks that
the vmapped losses equal the sequential ones (they are the same models and batches), and
records the load average: run it on an idle machine. Written to
``benchmarks/results/marian_ensemble_vmap.json``.

    python benchmarks/marian_ensemble_vmap.py [--models 8 --steps 20 --repeats 3]
"""

from __future__ import annotations

import argparse
import copy
import os
import platform
import statistics
import time
from pathlib import Path


def _setup():
    """The chapter's tokenizer (vocabulary 250) and token ids of its 300-pair world."""
    from tokenbook.models.marian import encode_pairs, train_bpe_tokenizer
    from tokenbook.worlds.translation import make_translation_world

    world = make_translation_world(300, n_test=60, seed=0)
    src, tgt = world.pairs.source.tolist(), world.pairs.target.tolist()
    tok = train_bpe_tokenizer(src + tgt, vocab_size=250)
    s, t = encode_pairs(tok, src, tgt)
    return tok, s, t


def _models(tok, n_models: int, attn: str):
    from tokenbook.models.marian import build_marian

    return [build_marian(tok, "tiny", seed=k, attn_implementation=attn).train()
            for k in range(n_models)]


def _batches(tok, s, t, n_models: int):
    from tokenbook.models.marian import make_batch

    return [make_batch(s[16 * k:16 * k + 16], t[16 * k:16 * k + 16], tok.pad_token_id)
            for k in range(n_models)]


def _sequential(models, batches, steps: int) -> tuple[float, list[float]]:
    t0 = time.perf_counter()
    for _ in range(steps):
        losses = []
        for model, batch in zip(models, batches):
            model.zero_grad(set_to_none=True)
            loss = model(**batch).loss
            loss.backward()
            losses.append(float(loss.detach()))
    return time.perf_counter() - t0, losses


def _vmapped(models, batches, tok, steps: int) -> tuple[float, list[float]]:
    import torch
    import torch.nn.functional as F
    from torch.func import functional_call, grad_and_value, stack_module_state, vmap

    params, buffers = stack_module_state(models)
    base = copy.deepcopy(models[0])
    width = max(b["input_ids"].shape[1] for b in batches)
    target_width = max(b["labels"].shape[1] for b in batches)
    ids = torch.stack([F.pad(b["input_ids"], (0, width - b["input_ids"].shape[1]),
                             value=tok.pad_token_id) for b in batches])
    keep = torch.stack([F.pad(b["attention_mask"], (0, width - b["attention_mask"].shape[1]),
                              value=False) for b in batches])
    mask = torch.where(keep, 0.0, torch.finfo(torch.float32).min)[:, :, None, None, :]
    labels = torch.stack([F.pad(b["labels"], (0, target_width - b["labels"].shape[1]),
                                value=-100) for b in batches])

    def loss(p, b, input_ids, attention_mask, y):
        return functional_call(base, (p, b), (), dict(input_ids=input_ids,
                                                      attention_mask=attention_mask,
                                                      labels=y)).loss

    step = vmap(grad_and_value(loss))
    t0 = time.perf_counter()
    for _ in range(steps):
        _, losses = step(params, buffers, ids, mask, labels)
    return time.perf_counter() - t0, [float(x) for x in losses.detach()]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", type=int, default=8)
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--out", default=str(Path(__file__).parent / "results"
                                         / "marian_ensemble_vmap.json"))
    args = ap.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    import torch

    from tokenbook.cache import write_json_atomic

    torch.set_num_threads(1)
    result = dict(cpu=platform.processor() or platform.machine(), cpu_count=os.cpu_count(),
                  platform=platform.platform(), torch=torch.__version__, threads=1,
                  models=args.models, steps=args.steps, repeats=args.repeats,
                  load_average_before=[round(x, 2) for x in os.getloadavg()])
    tok, s, t = _setup()
    sdpa_models, eager_models = (_models(tok, args.models, attn) for attn in ("sdpa", "eager"))
    batches = _batches(tok, s, t, args.models)
    ways = {"sequential, SDPA attention (the chapter's)": lambda: _sequential(sdpa_models,
                                                                              batches, args.steps),
            "sequential, eager attention": lambda: _sequential(eager_models, batches, args.steps),
            "one vmap call, eager attention": lambda: _vmapped(eager_models, batches, tok,
                                                               args.steps)}
    for run in ways.values():                     # warm-up
        run()
    seconds: dict[str, list[float]] = {k: [] for k in ways}
    losses: dict[str, list[float]] = {}
    for _ in range(args.repeats):                 # alternating: drifts hit every way
        for name, run in ways.items():
            dt, losses[name] = run()
            seconds[name].append(dt)
    per_model_step = {k: statistics.median(v) * 1e3 / (args.steps * args.models)
                      for k, v in seconds.items()}
    first = next(iter(per_model_step.values()))
    result["ms_per_model_step"] = {k: round(v, 2) for k, v in per_model_step.items()}
    result["ratio_to_sequential_sdpa"] = {k: round(v / first, 3)
                                          for k, v in per_model_step.items()}
    reference = losses["sequential, eager attention"]
    result["vmap_losses_max_abs_difference"] = max(
        abs(a - b) for a, b in zip(losses["one vmap call, eager attention"], reference))
    for name, ms in per_model_step.items():
        print(f"{name}: {ms:.2f} ms per model and step (forward + backward), ratio "
              f"{ms / first:.3f}", flush=True)
    print(f"vmapped losses against sequential ones: max |difference| "
          f"{result['vmap_losses_max_abs_difference']:.2e}")
    result["load_average_after"] = [round(x, 2) for x in os.getloadavg()]
    print(f"load average {result['load_average_before']} before, "
          f"{result['load_average_after']} after")
    write_json_atomic(result, Path(args.out))


if __name__ == "__main__":
    main()
