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

Run: ``python benchmarks/scoring.py`` (about a minute on 2 idle cores; needs ~10 GB RAM for naive).
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
RESULT = HERE / "results" / "scoring.json"
VOCAB = 256_000


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


def worker(method: str, args) -> dict:
    import torch

    torch.set_grad_enabled(False)
    model, tok, texts = build(args.vocab, args.hidden, args.tokens_per_text, args.batch_texts)
    ids = [[tok.bos_token_id] + tok(t, add_special_tokens=False)["input_ids"] + [tok.eos_token_id] for t in texts]

    if method == "naive":
        def run(batch_ids):
            x = torch.tensor(batch_ids)
            logits = model(input_ids=x, attention_mask=torch.ones_like(x)).logits
            return logits[:, :-1].log_softmax(-1).gather(-1, x[:, 1:, None])[..., 0].reshape(-1).numpy()

        inputs = ids
    elif method == "tokenbook":
        from tokenbook.scoring import score_texts

        def run(batch_texts):
            df = score_texts(model, tok, batch_texts, batch_size=len(batch_texts), progress=False,
                             chunk_size=args.chunk_size)
            return df.logprob.to_numpy()

        inputs = texts
    elif method == "minicons":
        from minicons.scorer import IncrementalLMScorer

        scorer = IncrementalLMScorer(model, device="cpu", tokenizer=tok)

        def run(batch_texts):
            enc = scorer.prepare_text(batch_texts, bos_token=True, eos_token=True)
            assert enc[0]["input_ids"].tolist() == ids[: len(batch_texts)], "minicons tokenised differently"
            scores = scorer.compute_stats(enc)
            return np.concatenate([np.asarray(s, dtype=np.float32) for s in scores])

        inputs = texts
    else:
        raise ValueError(method)

    run(inputs[:2])  # warm-up (allocator, lazy imports)
    base = _rss_mb()
    best, scores = None, None
    for _ in range(args.repeats):
        t0 = time.perf_counter()
        scores = run(inputs)
        dt = time.perf_counter() - t0
        best = dt if best is None else min(best, dt)
    n_tokens = len(scores)
    np.save(args.out, np.asarray(scores, dtype=np.float32))
    return {"tokens_per_s": n_tokens / best, "seconds": best, "peak_rss_mb": _rss_mb(),
            "base_rss_mb": base, "n_tokens": n_tokens, "threads": torch.get_num_threads()}


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
    return {"cpu": cpu, "cores": os.cpu_count(), "mem_gb": mem, "python": platform.python_version(),
            "torch": torch.__version__, "platform": platform.platform(),
            "torch_threads": torch.get_num_threads()}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--vocab", type=int, default=VOCAB)
    p.add_argument("--hidden", type=int, default=64)
    p.add_argument("--tokens-per-text", type=int, default=128)
    p.add_argument("--batch-texts", type=int, default=32)
    p.add_argument("--chunk-size", type=int, default=2048, help="vocabulary chunk (the library default)")
    p.add_argument("--repeats", type=int, default=2)
    p.add_argument("--methods", default="naive,tokenbook,minicons")
    p.add_argument("--worker", default=None, help=argparse.SUPPRESS)
    p.add_argument("--out", default=None, help=argparse.SUPPRESS)
    p.add_argument("--no-write", action="store_true", help="print only, do not write the results file")
    args = p.parse_args(argv)
    if args.worker:
        print(json.dumps(worker(args.worker, args)))
        return 0

    env = dict(os.environ, HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1")
    load_before = os.getloadavg()
    results, scores = {}, {}
    with tempfile.TemporaryDirectory() as tmp:
        for m in args.methods.split(","):
            out = Path(tmp) / f"{m}.npy"
            cmd = [sys.executable, __file__, "--worker", m, "--out", str(out), "--vocab", str(args.vocab),
                   "--hidden", str(args.hidden), "--tokens-per-text", str(args.tokens_per_text),
                   "--batch-texts", str(args.batch_texts), "--chunk-size", str(args.chunk_size),
                   "--repeats", str(args.repeats)]
            proc = subprocess.run(cmd, capture_output=True, text=True, env=env)
            if proc.returncode != 0:
                print(proc.stderr[-3000:], file=sys.stderr)
                raise SystemExit(f"worker {m} failed (exit {proc.returncode})")
            results[m] = json.loads(proc.stdout.strip().splitlines()[-1])
            scores[m] = np.load(out)
            print(f"{m:10s} {results[m]['tokens_per_s']:10.0f} tokens/s   peak RSS "
                  f"{results[m]['peak_rss_mb']:8.0f} MB (before scoring {results[m]['base_rss_mb']:.0f} MB)",
                  flush=True)
    ref = scores.get("naive")
    diff = {}
    for m in ("tokenbook", "minicons"):
        if ref is not None and m in scores:
            diff[m] = float(np.abs(scores[m].astype(np.float64) - ref).max())
    report = {
        "benchmark": "per-token log-probabilities, causal LM (Gemma architecture, random weights)",
        "machine": machine(),
        "load_average_before": [round(x, 2) for x in load_before],
        "load_average_after": [round(x, 2) for x in os.getloadavg()],
        "vocab": args.vocab,
        "hidden_size": args.hidden,
        "tokens_per_batch": args.tokens_per_text * args.batch_texts,
        "chunk_size": args.chunk_size,
        "repeats": args.repeats,
        **results,
        "max_abs_diff": diff.get("tokenbook"),
        "max_abs_diff_minicons": diff.get("minicons"),
    }
    if "naive" in results and "tokenbook" in results:
        tb, nv = results["tokenbook"], results["naive"]
        report["ratios"] = {
            "tokenbook_over_naive_throughput": tb["tokens_per_s"] / nv["tokens_per_s"],
            "tokenbook_over_naive_peak_rss": tb["peak_rss_mb"] / nv["peak_rss_mb"],
        }
        if "minicons" in results:
            report["ratios"]["tokenbook_over_minicons_throughput"] = (
                tb["tokens_per_s"] / results["minicons"]["tokens_per_s"])
        for k, v in report["ratios"].items():
            print(f"{k}: {v:.3f}")
    print(f"max |tokenbook - naive| = {diff.get('tokenbook')}, max |minicons - naive| = {diff.get('minicons')}")
    print(f"load average before {load_before}, after {os.getloadavg()} on {os.cpu_count()} cores")
    if not args.no_write:
        from tokenbook.cache import write_json_atomic

        print(f"wrote {write_json_atomic(report, RESULT)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
