"""Training step time with AdamW on one flat buffer against the per-tensor (foreach) AdamW.

``tokenbook.models.flat_adamw`` runs the optimizer on one contiguous copy of the parameters.
This trains, from the same initial weights and on the same batches, the memorisation chapter's
tiny Marian (vocabulary 250, batches of 16 pairs of 6–20 tokens) and the cancellation chapter's
tiny Qwen2 policy (64×2, batches of 64 sequences of 20–40 characters) for ``--steps`` steps each
way, one torch thread, ``--repeats`` times alternating, and prints the median ms/step of each
way and their ratio flat / per-tensor. It also checks that the weights come out bitwise equal. The load average is recorded: run it on an idle machine.
Written to ``benchmarks/results/flat_adamw.json``.

    python benchmarks/flat_adamw.py [--steps 300 --repeats 3]
"""

from __future__ import annotations

import argparse
import copy
import os
import platform
import statistics
import time
from pathlib import Path


def _models():
    import torch
    from transformers import MarianConfig, MarianMTModel

    from tokenbook.models.marian import PRESETS
    from tokenbook.models.policy import build_policy, char_tokenizer

    cfg = MarianConfig(vocab_size=250, decoder_vocab_size=250, pad_token_id=0, eos_token_id=1,
                       decoder_start_token_id=0, share_encoder_decoder_embeddings=True,
                       scale_embedding=True, **PRESETS["tiny"])
    torch.manual_seed(0)
    marian = MarianMTModel(cfg).train()
    policy = build_policy(char_tokenizer(), hidden_size=64, num_layers=2, seed=0).train()
    return {"tiny Marian (memorisation)": (marian, 250, 16, (6, 20), False),
            "tiny Qwen2 policy 64x2 (cancellation)": (policy, len(char_tokenizer()), 64,
                                                       (20, 40), True)}


def _batches(vocab: int, batch: int, lengths: tuple[int, int], causal: bool, steps: int):
    import torch

    g = torch.Generator().manual_seed(0)
    out = []
    for _ in range(steps):
        a, b = (int(torch.randint(*lengths, (1,), generator=g)) for _ in range(2))
        ids = torch.randint(5, vocab, (batch, a), generator=g)
        labels = ids.clone() if causal else torch.randint(5, vocab, (batch, b), generator=g)
        ids[: batch // 3, -3:] = 0
        labels[: batch // 4, -3:] = -100
        out.append(dict(input_ids=ids, attention_mask=ids != 0, labels=labels))
    return out


def _train(model, batches, flat: bool) -> float:
    import torch

    from tokenbook.models.flat_adamw import flat_adamw

    def loop(opt, zero):
        t0 = time.perf_counter()
        for batch in batches:
            loss = model(**batch).loss
            zero()
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
        return time.perf_counter() - t0

    kw = dict(lr=3e-3, betas=(0.9, 0.98), weight_decay=0.0)
    if flat:
        with flat_adamw(model.parameters(), **kw) as opt:
            return loop(opt, opt.zero_grad)
    opt = torch.optim.AdamW(model.parameters(), foreach=True, **kw)
    return loop(opt, lambda: opt.zero_grad(set_to_none=True))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--out", default=str(Path(__file__).parent / "results" / "flat_adamw.json"))
    args = ap.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    import torch

    from tokenbook.cache import write_json_atomic

    torch.set_num_threads(1)
    result = dict(cpu=platform.processor() or platform.machine(), cpu_count=os.cpu_count(),
                  platform=platform.platform(), torch=torch.__version__, threads=1,
                  steps=args.steps, load_average_before=[round(x, 2) for x in os.getloadavg()],
                  models={})
    for name, (model, vocab, batch, lengths, causal) in _models().items():
        batches = _batches(vocab, batch, lengths, causal, args.steps)
        _train(copy.deepcopy(model), batches[:20], flat=False)       # warm-up
        runs, seconds = {}, {"per-tensor": [], "flat": []}
        for _ in range(args.repeats):       # alternating, so drifts of the machine hit both
            for way in ("per-tensor", "flat"):
                runs[way] = copy.deepcopy(model)
                seconds[way].append(_train(runs[way], batches, flat=way == "flat"))
        bitwise = all(torch.equal(p, q) for p, q in zip(runs["per-tensor"].parameters(),
                                                        runs["flat"].parameters()))
        median = {k: statistics.median(v) for k, v in seconds.items()}
        ratio = median["flat"] / median["per-tensor"]
        result["models"][name] = dict(
            ms_per_step={k: [round(1e3 * x / args.steps, 2) for x in v]
                         for k, v in seconds.items()},
            ratio_flat_over_per_tensor=round(ratio, 3), bitwise_equal=bitwise,
            n_parameter_tensors=sum(1 for _ in model.parameters()))
        print(f"{name}: median {1e3 * median['per-tensor'] / args.steps:.2f} ms per step "
              f"per-tensor, {1e3 * median['flat'] / args.steps:.2f} flat ({args.repeats} runs "
              f"each, alternating): ratio {ratio:.3f}; weights bitwise equal: {bitwise}",
              flush=True)
    result["load_average_after"] = [round(x, 2) for x in os.getloadavg()]
    print(f"load average {result['load_average_before']} before, "
          f"{result['load_average_after']} after")
    write_json_atomic(result, Path(args.out))


if __name__ == "__main__":
    main()
