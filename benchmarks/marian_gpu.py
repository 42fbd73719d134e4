"""Sustained training throughput of Transformer-base Marian under ``train_marian`` on a GPU.

The number behind the memorisation chapter's paper-scale cost estimate.

The chapter estimates its paper-scale GPU-hours as 6 · parameters · tokens FLOPs at
``gpu_flops`` sustained (``memorisation_cartography.ensemble.training_gpu_hours``; default
1e14 FLOP/s, "an A100 in bf16 at good utilisation"). This measures what the library's own loop
sustains: the ``"base"`` preset (d_model 512, 6+6 layers, FFN 2048, dropout 0.1) with the
paper's 64,000-token joint vocabulary, trained by ``tokenbook.models.marian.train_marian`` on
batches of ``--batch`` pairs of about 27 BPE tokens a side (the paper's ~1M-pair corpora), for
``--epochs`` epochs of ``--steps-per-epoch`` steps; the first epoch is the warm-up and the rest
are timed (``torch.cuda.synchronize`` at each epoch's end). Baseline: float32, as the library
trains (``torch.backends.cuda.matmul.allow_tf32`` off, PyTorch's default); compared in the same
command: TF32 matrix products on. Printed: steps/s, tokens/s (source + target), sustained
FLOP/s = 6 · parameters · tokens/s, its ratio to the chapter's 1e14, the TF32 / float32 ratio,
and the paper design's GPU-hours at the measured rate. Written to
``benchmarks/results/marian_gpu.json`` with the device named.

    python benchmarks/marian_gpu.py                          # a CUDA GPU
    python benchmarks/marian_gpu.py --device cpu --preset tiny --vocab 1000 --steps-per-epoch 3
"""

from __future__ import annotations

import argparse
import platform
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
#: the chapter's paper design (notebooks/memorisation_cartography.py, "What the paper scale costs")
PAPER_RUNS = {"CM ensemble (40 x 50%, 100 epochs)": dict(epochs=100, runs=40, subset_ratio=0.5),
              "training dynamics (1 x 100%, 50 epochs)": dict(epochs=50, runs=1),
              "removal grid (55 cells x 3 seeds, 50 epochs)": dict(epochs=50, runs=165)}


def _corpus(n_pairs: int, seed: int = 0) -> tuple[list[str], list[str]]:
    """Pairs of about 27 BPE tokens a side: four sentences of the translation world joined."""
    from tokenbook.worlds.translation import make_translation_world

    w = make_translation_world(4 * n_pairs, n_test=10, seed=seed)
    src, tgt = w.pairs.source.tolist(), w.pairs.target.tolist()
    join = lambda xs: [" ".join(xs[i:i + 4]) for i in range(0, 4 * n_pairs, 4)]  # noqa: E731
    return join(src), join(tgt)


def measure(args, *, tf32: bool) -> dict:
    import torch

    from transformers import MarianConfig, MarianMTModel

    from tokenbook.models.marian import PRESETS, encode_pairs, train_bpe_tokenizer, train_marian

    gpu = args.device.startswith("cuda")
    if gpu:
        torch.backends.cuda.matmul.allow_tf32 = tf32
    n_pairs = args.batch * args.steps_per_epoch
    src, tgt = _corpus(n_pairs)
    tok = train_bpe_tokenizer(src + tgt, vocab_size=1000)
    s_ids, t_ids = encode_pairs(tok, src, tgt)
    tokens = sum(map(len, s_ids)) + sum(map(len, t_ids))            # per epoch, </s> included
    # build_marian's config with the paper's vocabulary size (the tokenizer's ids lie below it)
    torch.manual_seed(0)
    model = MarianMTModel(MarianConfig(
        vocab_size=args.vocab, decoder_vocab_size=args.vocab, pad_token_id=tok.pad_token_id,
        eos_token_id=tok.eos_token_id, decoder_start_token_id=tok.pad_token_id,
        forced_eos_token_id=tok.eos_token_id, share_encoder_decoder_embeddings=True,
        scale_embedding=True, **PRESETS[args.preset]))
    n_params = sum(p.numel() for p in model.parameters())
    stamps: list[float] = []

    def tick(epoch, _model):
        if gpu:
            torch.cuda.synchronize()
        stamps.append(time.perf_counter())

    train_marian(model, tok, src, tgt, epochs=args.epochs, batch_size=args.batch,
                 warmup_steps=10, device=args.device, progress=False, on_epoch_end=tick)
    timed = stamps[-1] - stamps[0]                                    # epochs 2 .. last
    steps = args.steps_per_epoch * (args.epochs - 1)
    tok_s = tokens * (args.epochs - 1) / timed
    flops = 6.0 * n_params * tok_s
    return {"tf32": tf32, "n_params": n_params, "steps_per_s": steps / timed,
            "tokens_per_s": tok_s, "tokens_per_pair": tokens / n_pairs,
            "sustained_flops": flops, "timed_seconds": timed, "timed_steps": steps}


def main(argv=None) -> int:
    import torch

    from tokenbook.cache import write_json_atomic
    from tokenbook.memorisation_cartography.ensemble import training_gpu_hours

    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--device", default="cuda")
    p.add_argument("--preset", default="base")
    p.add_argument("--vocab", type=int, default=64000)
    p.add_argument("--batch", type=int, default=128)
    p.add_argument("--steps-per-epoch", type=int, default=40)
    p.add_argument("--epochs", type=int, default=3)
    p.add_argument("--out", default=str(HERE / "results" / "marian_gpu.json"))
    args = p.parse_args(argv)
    if args.epochs < 2:
        p.error("--epochs must be at least 2: the first is the warm-up")
    runs = [measure(args, tf32=False)]
    if args.device.startswith("cuda"):
        runs.append(measure(args, tf32=True))
    base = runs[0]
    for r in runs:
        print(f"tf32={r['tf32']!s:5s} {r['steps_per_s']:8.2f} steps/s {r['tokens_per_s']:12,.0f} "
              f"tokens/s  sustained {r['sustained_flops']:.3g} FLOP/s "
              f"({r['sustained_flops'] / 1e14:.3f}x the chapter's 1e14)")
    ratios = {"float32_over_chapter_1e14": base["sustained_flops"] / 1e14}
    if len(runs) > 1:
        ratios["tf32_over_float32_throughput"] = runs[1]["tokens_per_s"] / base["tokens_per_s"]
        print(f"tf32 / float32 throughput: {ratios['tf32_over_float32_throughput']:.2f}")
    hours = {}
    for r in runs:
        key = "tf32" if r["tf32"] else "float32"
        hours[key] = {name: training_gpu_hours(n_pairs=1e6, tokens_per_pair=54, n_params=7e7,
                                               effective_flops=r["sustained_flops"], **kw)["gpu_hours"]
                      for name, kw in PAPER_RUNS.items()}
    hours["chapter_1e14"] = {name: training_gpu_hours(n_pairs=1e6, tokens_per_pair=54,
                                                      n_params=7e7, **kw)["gpu_hours"]
                             for name, kw in PAPER_RUNS.items()}
    for key, h in hours.items():
        print(f"paper design at {key:12s}: {sum(h.values()):10,.0f} GPU-hours")
    machine = {"platform": platform.platform(), "torch": torch.__version__}
    if torch.cuda.is_available() and args.device.startswith("cuda"):
        machine["gpu"] = torch.cuda.get_device_name(0)
        machine["torch_cuda"] = torch.version.cuda
    out = {"benchmark": __doc__.split("\n")[0], "device": args.device, "preset": args.preset,
           "vocab": args.vocab, "batch_pairs": args.batch, "steps_per_epoch": args.steps_per_epoch,
           "epochs": args.epochs, "machine": machine, "runs": runs, "ratios": ratios,
           "paper_gpu_hours": hours}
    write_json_atomic(out, args.out)
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
