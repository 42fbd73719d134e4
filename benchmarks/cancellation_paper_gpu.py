"""What one root seed's analysis batch costs at the cancellation chapter's paper scale on a GPU.

Paper scale analyses ``analysis_prompts`` (4) × ``group_size`` (8) rollouts of up to
``max_new_tokens`` (512) tokens from Qwen3-1.7B (``params/cancellation_hypothesis/paper.yaml``).
No checkpoint can be fetched here, so the policy is Qwen3-1.7B's shape with random weights
(2,048 wide, 28 layers, 16 query and 8 key-value heads of 128, feed-forward 6,144, a 151,936-token
vocabulary, tied embeddings), in ``--dtype`` on the GPU; cost does not depend on the weights'
values. The rollouts are synthetic and of full length (``--prompt`` prompt tokens + 512
completion tokens, random ids; rewards alternate within each group, so every group is mixed
and every advantage is non-zero), which is the batch's worst case. Timed, in the order one seed
computes them (``cancellation_hypothesis.experiments``): ``token_dynamics`` (one full-batch SGD
step on a copy), ``token_dynamics_isolated`` (every rollout stepped alone), ``first_order_full``
(the exact first-order Δ: a gradient and one Jacobian-vector product per rollout, and the full
batch's product ``--rows-per-pass`` rollouts at a time, as paper scale takes it), each with the
peak GPU memory. Results are written after every step, so a run stopped by its time limit
or by memory keeps what it measured. Written to
``benchmarks/results/cancellation_paper_gpu.json`` with the device named.

    python benchmarks/cancellation_paper_gpu.py                     # a CUDA GPU
    python benchmarks/cancellation_paper_gpu.py --device cpu --tiny # a dry run of the code
"""

from __future__ import annotations

import argparse
import platform
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent


def _policy(tiny: bool, device: str, dtype):
    import torch
    from transformers import Qwen3Config, Qwen3ForCausalLM

    if tiny:
        cfg = Qwen3Config(vocab_size=1000, hidden_size=32, intermediate_size=64,
                          num_hidden_layers=1, num_attention_heads=2, num_key_value_heads=1,
                          head_dim=16, tie_word_embeddings=True)
    else:
        cfg = Qwen3Config(vocab_size=151_936, hidden_size=2048, intermediate_size=6144,
                          num_hidden_layers=28, num_attention_heads=16, num_key_value_heads=8,
                          head_dim=128, tie_word_embeddings=True, max_position_embeddings=40_960)
    torch.manual_seed(0)
    with torch.device(device):
        model = Qwen3ForCausalLM(cfg).to(dtype).eval()
    return model


def _rollouts(vocab: int, prompts: int, group: int, prompt_len: int, completion: int):
    import torch

    from tokenbook.cancellation_hypothesis.dynamics import with_estimator
    from tokenbook.cancellation_hypothesis.grpo import Rollouts

    g = torch.Generator().manual_seed(0)
    B = prompts * group
    ids = torch.randint(10, vocab, (B, prompt_len + completion), generator=g)
    cmask = torch.ones(B, completion, dtype=torch.long)
    rewards = torch.tensor([float(i % 2) for i in range(B)])
    zeros = torch.zeros(B, completion)
    roll = Rollouts(ids, torch.ones_like(ids), cmask, prompt_len,
                    torch.arange(prompts).repeat_interleave(group), rewards, zeros[:, 0].clone(),
                    torch.ones(B, dtype=torch.bool), zeros.clone(), zeros.clone(),
                    [""] * B, [["t"] * completion for _ in range(B)],
                    [["reasoning"] * completion for _ in range(B)])
    return with_estimator(roll, group, "grpo")


def main(argv=None) -> int:
    import torch

    from tokenbook.cache import write_json_atomic
    from tokenbook.cancellation_hypothesis import dynamics as dyn

    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--device", default="cuda")
    p.add_argument("--dtype", default="bfloat16", choices=["bfloat16", "float32"])
    p.add_argument("--tiny", action="store_true", help="tiny shapes (a dry run of the code)")
    p.add_argument("--prompts", type=int, default=4)
    p.add_argument("--group", type=int, default=8)
    p.add_argument("--prompt", type=int, default=128)
    p.add_argument("--completion", type=int, default=512)
    p.add_argument("--lr", type=float, default=1e-4)
    p.add_argument("--rows-per-pass", type=int, default=1,
                   help="first_order_full's rollouts per Jacobian-vector pass (paper scale: 1; "
                        "0: the whole batch at once)")
    p.add_argument("--out", default=str(HERE / "results" / "cancellation_paper_gpu.json"))
    args = p.parse_args(argv)
    args.rows_per_pass = args.rows_per_pass or None
    gpu = args.device.startswith("cuda")
    dtype = getattr(torch, args.dtype)
    model = _policy(args.tiny, args.device, dtype)
    roll = _rollouts(model.config.vocab_size, args.prompts, args.group, args.prompt,
                     args.completion)
    machine = {"platform": platform.platform(), "torch": torch.__version__}
    if gpu:
        machine.update(gpu=torch.cuda.get_device_name(0), torch_cuda=torch.version.cuda)
    out = {"benchmark": __doc__.split("\n")[0], "device": args.device, "dtype": args.dtype,
           "tiny": args.tiny, "params": sum(x.numel() for x in model.parameters()),
           "rollouts": len(roll), "prompt_tokens": args.prompt,
           "completion_tokens": args.completion, "rows_per_pass": args.rows_per_pass,
           "machine": machine, "steps": {}}
    path = Path(args.out)
    steps = {"token_dynamics": lambda: dyn.token_dynamics(model, roll, lr=args.lr),
             "token_dynamics_isolated": lambda: dyn.token_dynamics_isolated(model, roll,
                                                                             lr=args.lr),
             "first_order_full": lambda: dyn.first_order_full(model, roll, lr=args.lr,
                                                              rows_per_pass=args.rows_per_pass)}
    for name, run in steps.items():
        if gpu:
            torch.cuda.synchronize()
            torch.cuda.reset_peak_memory_stats()
        t0 = time.perf_counter()
        table = run()
        if gpu:
            torch.cuda.synchronize()
        dt = time.perf_counter() - t0
        peak = torch.cuda.max_memory_allocated() / 2**30 if gpu else None
        out["steps"][name] = {"seconds": dt, "peak_gpu_gb": peak, "rows": len(table)}
        print(f"{name:24s} {dt:8.1f} s  peak GPU {peak if peak is None else round(peak, 1)} GB",
              flush=True)
        write_json_atomic(out, path)
    out["seed_analysis_seconds"] = sum(s["seconds"] for s in out["steps"].values())
    write_json_atomic(out, path)
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
