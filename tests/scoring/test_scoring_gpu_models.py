"""The scoring engine's model paths on a CUDA GPU: PaliGemma with images (the grounded chapters'
captioner at paper scale) and Marian (the memorisation chapter's NMT models), each against the
same model on the CPU, with the CuPy kernels and with the torch reduction on the GPU; and
PaliGemma in bfloat16 on the GPU (the dtype ``grounded.tables.load_model`` picks on CUDA)
against float32 on the CPU. Marked ``gpu``: skipped (by tests/conftest.py, with the reason)
where CuPy sees no CUDA device."""

from __future__ import annotations

import copy

import numpy as np
import pytest
import torch
from PIL import Image

from tokenbook.scoring import cuda, score_image_texts, score_seq2seq
from tokenbook.scoring._tiny import tiny_marian, tiny_paligemma

pytestmark = pytest.mark.gpu

CAPTIONS = ["the dog runs", "a small cat sleeps on the red mat", "birds", "the dog runs fast"]
SOURCES = ["the dog runs", "a cat sleeps on the mat", "birds", "two birds sing"]
TARGETS = ["a cat sleeps on the mat", "birds sing", "the dog", "the old green tree"]
KEYS = ["seq_id", "token_idx", "token_id"]


def _require_gpu() -> None:
    if not torch.cuda.is_available():
        pytest.skip("torch sees no CUDA device")
    if not cuda.cuda_available_for(torch.zeros(1, device="cuda")):
        pytest.skip("CuPy cannot use the CUDA device")


def _images() -> list:
    rng = np.random.default_rng(0)
    scenes = [Image.fromarray(rng.integers(0, 255, (16, 16, 3), dtype=np.uint8)) for _ in range(3)]
    return [scenes[0], scenes[1], scenes[2], scenes[0]]   # captions 0 and 3 share an image


def _assert_same_scores(got, want, *, atol: float) -> None:
    assert got[KEYS].equals(want[KEYS])
    for col in ("logprob", "entropy"):
        np.testing.assert_allclose(got[col].to_numpy(), want[col].to_numpy(), rtol=1e-5,
                                   atol=atol, err_msg=col)


def _cpu_and_gpu(score, model, args, kw, monkeypatch):
    """``score(model, *args, **kw)`` on the CPU, then on a CUDA copy of ``model`` with the CuPy
    kernels and with the torch reduction: ``(cpu, [with_kernels, torch_on_gpu])``."""
    cpu = score(model, *args, **kw)
    gpu = copy.deepcopy(model).to("cuda")
    with_kernels = score(gpu, *args, device="cuda", **kw)
    monkeypatch.setenv(cuda.KERNELS_ENV, "0")
    return cpu, [with_kernels, score(gpu, *args, device="cuda", **kw)]


def test_paligemma_on_the_gpu_equals_the_cpu(monkeypatch):
    _require_gpu()
    model, proc = tiny_paligemma(softcap=3.0)
    kw = dict(prefixes="caption en", batch_size=3, progress=False)
    cpu, gpu = _cpu_and_gpu(score_image_texts, model, (proc, _images(), CAPTIONS), kw,
                            monkeypatch)
    for got in gpu:
        _assert_same_scores(got, cpu, atol=2e-5)


def test_paligemma_in_bfloat16_on_the_gpu_is_close_to_float32():
    """Paper scale loads hub checkpoints in bfloat16 on CUDA: the bf16 kernel path gives the
    same tokens and log-probabilities within bf16 rounding of the logits (8 bits of mantissa)."""
    _require_gpu()
    model, proc = tiny_paligemma(softcap=3.0)
    images = _images()
    kw = dict(prefixes="caption en", batch_size=3, progress=False)
    cpu = score_image_texts(model, proc, images, CAPTIONS, **kw)
    bf16 = score_image_texts(copy.deepcopy(model).to("cuda", torch.bfloat16), proc, images,
                             CAPTIONS, device="cuda", **kw)
    assert bf16[KEYS].equals(cpu[KEYS])
    assert np.isfinite(bf16["logprob"]).all() and (bf16["logprob"] <= 0).all()
    diff = np.abs(bf16["logprob"].to_numpy() - cpu["logprob"].to_numpy())
    assert diff.max() < 0.15, diff.max()           # nats; the values span several nats
    assert np.corrcoef(bf16["logprob"], cpu["logprob"])[0, 1] > 0.99


def test_marian_on_the_gpu_equals_the_cpu(monkeypatch):
    _require_gpu()
    model, tok = tiny_marian()
    kw = dict(batch_size=3, chunk_size=17, progress=False)
    cpu, gpu = _cpu_and_gpu(score_seq2seq, model, (tok, SOURCES, TARGETS), kw, monkeypatch)
    for got in gpu:
        _assert_same_scores(got, cpu, atol=2e-5)
