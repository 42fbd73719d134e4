"""What scoring the UID chapter's paper scale costs on a GPU, in captions per second.

Measured for PaliGemma-3B's shape (P: the captioner with the image) and its Gemma-2B text LM's
shape (U), with the library's scorer in bfloat16.

Paper scale scores every Crossmodal-3600 caption of 30 languages twice: with the captioner
``paligemma-3b-ft-coco35l-224`` and its image (P) and with the text-only LM (U)
(``params/uid_grounding/paper.yaml``). No checkpoint can be fetched here, so the models are
*randomly initialised* at the real shapes — SigLIP-So400m (1,152 wide, 27 layers, 224-pixel
images in 14-pixel patches: 256 image tokens) and Gemma-2B (2,048 wide, 18 layers, 8 heads with
one key-value head of 256, feed-forward 16,384, a 257,216-token vocabulary) — in bfloat16 on the
GPU, as ``grounded.tables.load_model`` loads them there. Speed does not depend on the weights'
values. The captions are the tiny UID world's (tokenised by a small BPE, about 10 tokens each;
XM3600's run longer in some scripts) and the images random 224 × 224 pictures, one per caption.
Each model scores ``--captions`` captions with ``score_image_texts`` / ``score_texts`` at
``--batch`` captions a call after a warm-up, and the best of ``--repeats`` is kept. Printed:
captions/s for P and U, and the GPU-hours per 100,000 captions for both. Written to
``benchmarks/results/uid_paper_gpu.json`` with the device named.

    python benchmarks/uid_paper_gpu.py                      # a CUDA GPU, tokenbook installed

Without an installed tokenbook, put a copy of ``lib/tokenbook`` with ``kernels/`` inside it as
``tokenbook/kernels`` on ``PYTHONPATH`` (as ``benchmarks/gpu_checks.sh`` does): the CUDA scorer
loads its kernels from there.

    python benchmarks/uid_paper_gpu.py --device cpu --tiny --captions 8   # a dry run
"""

from __future__ import annotations

import argparse
import platform
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
VOCAB = 257_216


def _configs(tiny: bool, vocab: int, image_token: int, tok):
    from transformers import GemmaConfig, PaliGemmaConfig, SiglipVisionConfig

    if tiny:
        v = dict(hidden_size=32, intermediate_size=64, num_hidden_layers=1, num_attention_heads=2)
        t = dict(hidden_size=32, intermediate_size=64, num_hidden_layers=1, num_attention_heads=2,
                 num_key_value_heads=1, head_dim=16)
        image, patch = 28, 14
    else:
        v = dict(hidden_size=1152, intermediate_size=4304, num_hidden_layers=27,
                 num_attention_heads=16)
        t = dict(hidden_size=2048, intermediate_size=16384, num_hidden_layers=18,
                 num_attention_heads=8, num_key_value_heads=1, head_dim=256)
        image, patch = 224, 14
    vision = SiglipVisionConfig(image_size=image, patch_size=patch, num_channels=3, **v)
    text = GemmaConfig(vocab_size=vocab, max_position_embeddings=8192,
                       pad_token_id=tok.pad_token_id, bos_token_id=tok.bos_token_id,
                       eos_token_id=tok.eos_token_id, **t)
    cap = PaliGemmaConfig(vision_config=vision, text_config=text, image_token_index=image_token,
                          projection_dim=t["hidden_size"], hidden_size=t["hidden_size"])
    cap.vocab_size = vocab
    return cap, text, image, patch


def _best(run, repeats: int, sync) -> float:
    run()                                    # warm-up
    best = None
    for _ in range(repeats):
        sync()
        t0 = time.perf_counter()
        run()
        sync()
        dt = time.perf_counter() - t0
        best = dt if best is None else min(best, dt)
    return best


def main(argv=None) -> int:
    import torch
    from PIL import Image
    from transformers import GemmaForCausalLM, PaliGemmaForConditionalGeneration

    from tokenbook.cache import write_json_atomic
    from tokenbook.models.paligemma import build_processor, train_tokenizer
    from tokenbook.scoring import score_image_texts, score_texts
    from tokenbook.worlds.scenes import make_world

    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--device", default="cuda")
    p.add_argument("--tiny", action="store_true", help="tiny shapes (a dry run of the code)")
    p.add_argument("--captions", type=int, default=512)
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--repeats", type=int, default=2)
    p.add_argument("--out", default=str(HERE / "results" / "uid_paper_gpu.json"))
    args = p.parse_args(argv)
    gpu = args.device.startswith("cuda")
    sync = torch.cuda.synchronize if gpu else (lambda: None)
    world = make_world(0, n_languages=1, n_scenes=max(3, args.captions // 2), n_stories=3,
                       world_style="uid")
    texts = (world.captions.text.tolist() * 2)[: args.captions]
    tok = train_tokenizer(texts, vocab_size=512)
    tok.add_special_tokens({"additional_special_tokens": ["<image>"]})
    image_token = tok.convert_tokens_to_ids("<image>")
    cap_cfg, text_cfg, image, patch = _configs(args.tiny, VOCAB if not args.tiny else 1024,
                                               image_token, tok)
    proc = build_processor(tok, image_size=image, patch=patch)
    rng = np.random.default_rng(0)
    images = [Image.fromarray(rng.integers(0, 255, (image, image, 3), dtype=np.uint8))
              for _ in texts]
    dtype = torch.bfloat16 if gpu else torch.float32
    torch.manual_seed(0)
    with torch.device(args.device):
        captioner = PaliGemmaForConditionalGeneration(cap_cfg).to(dtype).eval()
    prefix = "caption en"
    p_s = _best(lambda: score_image_texts(captioner, proc, images, texts, prefixes=prefix,
                                          batch_size=args.batch, device=args.device,
                                          progress=False), args.repeats, sync)
    peak_p = torch.cuda.max_memory_allocated() / 2**30 if gpu else None
    n_cap = sum(x.numel() for x in captioner.parameters())
    captioner = None                         # free its GPU memory before the text LM
    if gpu:
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats()
    with torch.device(args.device):
        lm = GemmaForCausalLM(text_cfg).to(dtype).eval()
    u_s = _best(lambda: score_texts(lm, tok, texts, prefixes=prefix + "\n",
                                    batch_size=args.batch, device=args.device, progress=False),
                args.repeats, sync)
    peak_u = torch.cuda.max_memory_allocated() / 2**30 if gpu else None
    n_lm = sum(x.numel() for x in lm.parameters())
    n_tokens = sum(len(tok(t, add_special_tokens=False)["input_ids"]) + 1 for t in texts)
    rate = {"P": len(texts) / p_s, "U": len(texts) / u_s}
    per_100k = {k: 1e5 / v / 3600 for k, v in rate.items()}
    for k in ("P", "U"):
        print(f"{k}: {rate[k]:10.1f} captions/s  {per_100k[k]:.3f} GPU-hours per 100,000 captions")
    print(f"both: {sum(per_100k.values()):.3f} GPU-hours per 100,000 captions")
    machine = {"platform": platform.platform(), "torch": torch.__version__}
    if gpu:
        machine.update(gpu=torch.cuda.get_device_name(0), torch_cuda=torch.version.cuda)
    out = {"benchmark": __doc__.split("\n")[0], "device": args.device, "tiny": args.tiny,
           "dtype": str(dtype), "captions": len(texts), "batch": args.batch,
           "scored_tokens_per_caption": n_tokens / len(texts), "image_tokens": (image // patch) ** 2,
           "params": {"captioner": n_cap, "text_lm": n_lm},
           "seconds": {"P": p_s, "U": u_s}, "captions_per_s": rate,
           "gpu_hours_per_100k_captions": per_100k,
           "peak_gpu_gb": {"P": peak_p, "U": peak_u}, "machine": machine}
    write_json_atomic(out, args.out)
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
