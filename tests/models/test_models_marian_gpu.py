"""The tiny Marian NMT model trained, scored and decoded on a CUDA GPU (``train_marian`` moves
the model to CUDA by default when one is there) against the same steps on the CPU. Marked
``gpu``: skipped (by tests/conftest.py, with the reason) where CuPy sees no CUDA device."""

from __future__ import annotations

import copy

import numpy as np
import pytest
import torch

from tokenbook.memorisation_cartography.estimator import score_pairs
from tokenbook.models.marian import build_marian, train_bpe_tokenizer, train_marian, translate
from tokenbook.worlds.translation import make_translation_world

pytestmark = pytest.mark.gpu


def test_training_on_the_gpu_follows_the_cpu():
    """Same data order, same initial weights, no dropout: the two devices' losses agree to
    float32 rounding carried through a few dozen AdamW steps (flat buffer included), the
    trained models score the pairs alike, and greedy decoding on the GPU runs."""
    if not torch.cuda.is_available():
        pytest.skip("torch sees no CUDA device")
    w = make_translation_world(120, n_test=10, seed=0)
    src, tgt = w.pairs.source.tolist(), w.pairs.target.tolist()
    tok = train_bpe_tokenizer(src + tgt, vocab_size=250)
    model = build_marian(tok, seed=0)
    kw = dict(epochs=3, batch_size=16, warmup_steps=10, progress=False)
    cpu, gpu = copy.deepcopy(model), copy.deepcopy(model)
    log_cpu = train_marian(cpu, tok, src, tgt, device="cpu", **kw)
    log_gpu = train_marian(gpu, tok, src, tgt, **kw)             # the default: CUDA
    assert next(gpu.parameters()).device.type == "cuda"
    assert log_gpu["steps"] == log_cpu["steps"] > 0
    np.testing.assert_allclose(log_gpu["epoch_loss"], log_cpu["epoch_loss"], rtol=1e-3)
    assert log_gpu["epoch_loss"][-1] < log_gpu["epoch_loss"][0]
    a = score_pairs(cpu, tok, src[:16], tgt[:16])
    b = score_pairs(gpu, tok, src[:16], tgt[:16])
    np.testing.assert_allclose(b["gmp"], a["gmp"], rtol=1e-2, atol=1e-4)
    out = translate(gpu, tok, src[:8], num_beams=2, max_new_tokens=16)
    assert len(out) == 8 and all(isinstance(s, str) for s in out)
