"""Benchmark: per-token log-probabilities at a 256k vocabulary, tokenbook vs naive vs minicons (CPU).

A causal LM is built from a config (Gemma architecture, 256,000-token vocabulary, small hidden size,
random weights, seed 0) and scores a fixed text corpus: ``--batch-texts`` texts of exactly
``--tokens-per-text`` scored tokens each (4,096 tokens per batch by default), as one batch.

* ``naive``     ``model(...).logits.log_softmax(-1).gather(...)``: materialises [tokens × vocab] twice;
* ``tokenbook`` ``tokenbook.scoring.score_texts`` (hidden states + vocabulary-chunked reduction);
* ``minicons``  ``minicons.scorer.IncrementalLMScorer(model, tokenizer=...).compute_stats``.

Each method runs in a fresh subprocess (so peak RSS values do not mix); a worker builds the model,
warms up on two texts, then scores the full batch ``--repeats`` times and reports the best
throughput and its peak RSS (``ru_maxrss``; the RSS before scoring is reported as ``base_rss_mb``).
``max_abs_diff`` is the largest |tokenbook − naive| log-probability (nats) over all scored tokens;
``max_abs_diff_minicons`` the same for minicons. The parent prints the ratios and writes
``benchmarks/results/scoring.json`` with the machine description and load average.

With ``--device cuda`` the same corpus is scored on the GPU and the methods are ``naive`` (logits
and log-softmax on the GPU), ``tokenbook`` (the CuPy raw kernels of ``tokenbook.scoring.cuda``)
and ``tokenbook_torch`` (the same engine with the kernels switched off by
``TOKENBOOK_CUDA_KERNELS=0``: the torch reference reduction on the GPU). Memory is the peak of
``torch.cuda.max_memory_allocated`` during scoring (``peak_gpu_mb``; ``base_gpu_mb`` before it),
timings are taken after ``torch.cuda.synchronize()``, and a ``sweep`` worker times the reduction
alone (``reduce_hidden`` on the batch's final hidden states) over chunk and row-block sizes, kernels
on and off. The report goes to ``benchmarks/results/scoring_gpu.json`` with the GPU named.

Run: ``python benchmarks/scoring.py`` (about a minute on 2 idle cores; needs ~10 GB RAM for naive);
``python benchmarks/scoring.py --device cuda`` on a machine with a CUDA GPU and CuPy.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
RESULTS = {"cpu": HERE / "results" / "scoring.json", "cuda": HERE / "results" / "scoring_gpu.json"}
VOCAB = 256_000
#: (chunk_size, row_block) pairs the GPU sweep times, kernels on and off
SWEEP = [(2048, 512), (8192, 512), (8192, 4096), (32768, 4096), (65536, 4096)]


def build(vocab: int, hidden: int, tokens_per_text: int, n_texts: int):
    """The model, tokenizer and corpus (deterministic)."""
    import torch
    import transformers as tf

    from tokenbook.scoring._tiny import CORPUS, tiny_tokenizer

    tok = tiny_tokenizer("metaspace")
    torch.manual_seed(0)
    cfg = tf.GemmaConfig(vocab_size=vocab, hidden_size=hidden, intermediate_size=2 * hidden,
                         num_hidden_layers=2, num_attention_heads=2, num_key_value_heads=1,
                         head_dim=hidden // 2, max_position_embeddings=2 * tokens_per_text,
                         pad_token_id=tok.pad_token_id, bos_token_id=tok.bos_token_id,
                         eos_token_id=tok.eos_token_id)
    model = tf.GemmaForCausalLM(cfg).eval()
    # texts with exactly tokens_per_text - 1 tokens (+ EOS = tokens_per_text scored tokens)
    rng = np.random.default_rng(0)
    words = " ".join(CORPUS).split()
    texts = []
    while len(texts) < n_texts:
        ws = list(rng.choice(words, size=4 * tokens_per_text))
        ids = tok(" ".join(ws), add_special_tokens=False)["input_ids"][: tokens_per_text - 1]
        text = tok.decode(ids)
        if len(tok(text, add_special_tokens=False)["input_ids"]) == tokens_per_text - 1:
            texts.append(text)
    return model, tok, texts


def _rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def sweep(model, tok, ids, device: str) -> list[dict]:
    """Tokens/s of ``reduce_hidden`` alone on the batch's final hidden states (GPU), per
    (chunk_size, row_block), with the CuPy kernels and with the torch reference."""
    import torch

    from tokenbook.scoring import OutputHead, bow_vocab_mask, reduce_hidden
    from tokenbook.scoring.cuda import KERNELS_ENV

    x = torch.tensor(ids, device=device)
    hidden = model.model(input_ids=x, attention_mask=torch.ones_like(x)).last_hidden_state[:, :-1]
    hidden = hidden.reshape(-1, hidden.shape[-1]).contiguous()
    targets = x[:, 1:].reshape(-1)
    head = OutputHead.from_model(model)
    bow = bow_vocab_mask(tok, head.vocab_size)
    rows = []
    for kernels in ("1", "0"):
        os.environ[KERNELS_ENV] = kernels
        ref = None
        for chunk, block in SWEEP:
            reduce_hidden(head, hidden, targets, bow, chunk_size=chunk, row_block=block)  # warm-up
            best = None
            for _ in range(3):
                torch.cuda.synchronize()
                t0 = time.perf_counter()
                lp = reduce_hidden(head, hidden, targets, bow, chunk_size=chunk, row_block=block)[0]
                torch.cuda.synchronize()
                dt = time.perf_counter() - t0
                best = dt if best is None else min(best, dt)
            ref = lp if ref is None else ref
            rows.append({"kernels": kernels == "1", "chunk_size": chunk, "row_block": block,
                         "tokens_per_s": hidden.shape[0] / best, "seconds": best,
                         "max_abs_diff_to_first": float((lp - ref).abs().max())})
    os.environ.pop(KERNELS_ENV, None)
    return rows


def worker(method: str, args) -> dict:
    import torch

    torch.set_grad_enabled(False)
    dev = args.device
    model, tok, texts = build(args.vocab, args.hidden, args.tokens_per_text, args.batch_texts)
    model = model.to(dev)
    ids = [[tok.bos_token_id] + tok(t, add_special_tokens=False)["input_ids"] + [tok.eos_token_id] for t in texts]
    gpu = dev == "cuda"

    def sync():
        if gpu:
            torch.cuda.synchronize()

    if method == "sweep":
        return {"sweep": sweep(model, tok, ids, dev)}
    if method == "naive":
        def run(batch_ids):
            x = torch.tensor(batch_ids, device=dev)
            logits = model(input_ids=x, attention_mask=torch.ones_like(x)).logits
            return logits[:, :-1].log_softmax(-1).gather(-1, x[:, 1:, None])[..., 0].reshape(-1).cpu().numpy()

        inputs = ids
    elif method in ("tokenbook", "tokenbook_torch"):
        from tokenbook.scoring import score_texts
        from tokenbook.scoring.cuda import KERNELS_ENV

        if method == "tokenbook_torch":
            os.environ[KERNELS_ENV] = "0"  # the torch reference reduction on the GPU

        def run(batch_texts):
            df = score_texts(model, tok, batch_texts, batch_size=len(batch_texts), progress=False,
                             chunk_size=args.chunk_size, device=dev)
            return df.logprob.to_numpy()

        inputs = texts
    elif method == "minicons":
        from minicons.scorer import IncrementalLMScorer

        scorer = IncrementalLMScorer(model, device=dev, tokenizer=tok)

        def run(batch_texts):
            enc = scorer.prepare_text(batch_texts, bos_token=True, eos_token=True)
            assert enc[0]["input_ids"].tolist() == ids[: len(batch_texts)], "minicons tokenised differently"
            scores = scorer.compute_stats(enc)
            return np.concatenate([np.asarray(s, dtype=np.float32) for s in scores])

        inputs = texts
    else:
        raise ValueError(method)

    run(inputs[:2])  # warm-up (allocator, lazy imports, kernel compilation)
    base = _rss_mb()
    if gpu:
        sync()
        torch.cuda.reset_peak_memory_stats()
        base_gpu = torch.cuda.memory_allocated() / 2**20
    best, scores = None, None
    for _ in range(args.repeats):
        sync()
        t0 = time.perf_counter()
        scores = run(inputs)
        sync()
        dt = time.perf_counter() - t0
        best = dt if best is None else min(best, dt)
    n_tokens = len(scores)
    np.save(args.out, np.asarray(scores, dtype=np.float32))
    out = {"tokens_per_s": n_tokens / best, "seconds": best, "peak_rss_mb": _rss_mb(),
           "base_rss_mb": base, "n_tokens": n_tokens, "threads": torch.get_num_threads()}
    if gpu:
        out.update(peak_gpu_mb=torch.cuda.max_memory_allocated() / 2**20, base_gpu_mb=base_gpu)
    return out


def machine() -> dict:
    import torch

    from tokenbook.provenance import cpu_model

    cpu = cpu_model()
    mem = None
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal"):
                mem = round(int(line.split()[1]) / 1024**2, 1)
    except OSError:
        pass
    out = {"cpu": cpu, "cores": os.cpu_count(), "mem_gb": mem, "python": platform.python_version(),
           "torch": torch.__version__, "platform": platform.platform(),
           "torch_threads": torch.get_num_threads()}
    if torch.cuda.is_available():
        props = torch.cuda.get_device_properties(0)
        out["gpu"] = {"name": props.name, "capability": f"{props.major}.{props.minor}",
                      "memory_gb": round(props.total_memory / 2**30, 1),
                      "multiprocessors": props.multi_processor_count,
                      "torch_cuda": torch.version.cuda}
        try:
            import cupy

            out["gpu"]["cupy"] = cupy.__version__
            out["gpu"]["driver"] = cupy.cuda.runtime.driverGetVersion()
        except Exception as exc:  # CuPy missing: the kernels could not have run
            out["gpu"]["cupy"] = f"not importable ({type(exc).__name__})"
    return out


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--vocab", type=int, default=VOCAB)
    p.add_argument("--hidden", type=int, default=64)
    p.add_argument("--tokens-per-text", type=int, default=128)
    p.add_argument("--batch-texts", type=int, default=32)
    p.add_argument("--chunk-size", type=int, default=None,
                   help="vocabulary chunk (default: the library's default_blocks for the device)")
    p.add_argument("--repeats", type=int, default=2)
    p.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    p.add_argument("--methods", default=None,
                   help="comma-separated (default: naive,tokenbook,minicons on the CPU; "
                        "naive,tokenbook,tokenbook_torch,sweep on CUDA)")
    p.add_argument("--worker", default=None, help=argparse.SUPPRESS)
    p.add_argument("--out", default=None, help=argparse.SUPPRESS)
    p.add_argument("--no-write", action="store_true", help="print only, do not write the results file")
    args = p.parse_args(argv)
    if args.worker:
        print(json.dumps(worker(args.worker, args)))
        return 0
    if args.methods is None:
        args.methods = "naive,tokenbook,minicons" if args.device == "cpu" else "naive,tokenbook,tokenbook_torch,sweep"
    if args.device == "cuda":
        import torch

        if not torch.cuda.is_available():
            raise SystemExit("--device cuda: torch sees no CUDA device; run on a machine with a GPU")

    from tokenbook.scoring import default_blocks

    env = dict(os.environ, HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1")
    load_before = os.getloadavg()
    results, scores = {}, {}
    with tempfile.TemporaryDirectory() as tmp:
        for m in args.methods.split(","):
            out = Path(tmp) / f"{m}.npy"
            cmd = [sys.executable, __file__, "--worker", m, "--out", str(out), "--vocab", str(args.vocab),
                   "--hidden", str(args.hidden), "--tokens-per-text", str(args.tokens_per_text),
                   "--batch-texts", str(args.batch_texts),
                   *(["--chunk-size", str(args.chunk_size)] if args.chunk_size else []),
                   "--repeats", str(args.repeats), "--device", args.device]
            proc = subprocess.run(cmd, capture_output=True, text=True, env=env)
            if proc.returncode != 0:
                print(proc.stderr[-3000:], file=sys.stderr)
                raise SystemExit(f"worker {m} failed (exit {proc.returncode})")
            results[m] = json.loads(proc.stdout.strip().splitlines()[-1])
            if m == "sweep":
                for row in results[m]["sweep"]:
                    print(f"sweep kernels={row['kernels']!s:5s} chunk {row['chunk_size']:6d} rows "
                          f"{row['row_block']:5d}: {row['tokens_per_s']:12.0f} tokens/s", flush=True)
                continue
            scores[m] = np.load(out)
            mem = (f"peak GPU {results[m]['peak_gpu_mb']:8.0f} MB (before scoring {results[m]['base_gpu_mb']:.0f} MB)"
                   if args.device == "cuda" else
                   f"peak RSS {results[m]['peak_rss_mb']:8.0f} MB (before scoring {results[m]['base_rss_mb']:.0f} MB)")
            print(f"{m:15s} {results[m]['tokens_per_s']:12.0f} tokens/s   {mem}", flush=True)
    ref = scores.get("naive")
    diff = {}
    for m in ("tokenbook", "tokenbook_torch", "minicons"):
        if ref is not None and m in scores:
            diff[m] = float(np.abs(scores[m].astype(np.float64) - ref).max())
    report = {
        "benchmark": "per-token log-probabilities, causal LM (Gemma architecture, random weights)",
        "device": args.device,
        "machine": machine(),
        "load_average_before": [round(x, 2) for x in load_before],
        "load_average_after": [round(x, 2) for x in os.getloadavg()],
        "vocab": args.vocab,
        "hidden_size": args.hidden,
        "tokens_per_batch": args.tokens_per_text * args.batch_texts,
        "chunk_size": args.chunk_size or default_blocks(args.device)[0],
        "row_block": default_blocks(args.device)[1],
        "repeats": args.repeats,
        **results,
        "max_abs_diff": diff.get("tokenbook"),
        "max_abs_diff_minicons": diff.get("minicons"),
    }
    if "tokenbook_torch" in diff:
        report["max_abs_diff_tokenbook_torch"] = diff["tokenbook_torch"]
    if "naive" in results and "tokenbook" in results:
        tb, nv = results["tokenbook"], results["naive"]
        report["ratios"] = {
            "tokenbook_over_naive_throughput": tb["tokens_per_s"] / nv["tokens_per_s"],
            "tokenbook_over_naive_peak_rss": tb["peak_rss_mb"] / nv["peak_rss_mb"],
        }
        if args.device == "cuda":
            report["ratios"]["tokenbook_over_naive_peak_gpu_memory"] = tb["peak_gpu_mb"] / nv["peak_gpu_mb"]
        if "tokenbook_torch" in results:
            report["ratios"]["kernels_over_torch_reduction_throughput"] = (
                tb["tokens_per_s"] / results["tokenbook_torch"]["tokens_per_s"])
        if "minicons" in results:
            report["ratios"]["tokenbook_over_minicons_throughput"] = (
                tb["tokens_per_s"] / results["minicons"]["tokens_per_s"])
        for k, v in report["ratios"].items():
            print(f"{k}: {v:.3f}")
    print("max |method - naive| (nats): " + ", ".join(f"{k} {v:.3g}" for k, v in diff.items()))
    print(f"load average before {load_before}, after {os.getloadavg()} on {os.cpu_count()} cores")
    if not args.no_write:
        from tokenbook.cache import write_json_atomic

        print(f"wrote {write_json_atomic(report, RESULTS[args.device])}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
