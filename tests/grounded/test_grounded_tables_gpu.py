"""The caption word table with its models on a CUDA GPU (``device="cuda"``, as paper scale
builds it) equals the table built on the CPU. Marked ``gpu``: skipped (by tests/conftest.py,
with the reason) where CuPy sees no CUDA device."""

from __future__ import annotations

import copy

import numpy as np
import pandas as pd
import pytest
import torch
from PIL import Image

from tokenbook.grounded import tables as stab
from tokenbook.scoring import _tiny

pytestmark = pytest.mark.gpu

CAPTIONS = pd.DataFrame({
    "caption_id": ["a", "b", "c"], "image_id": ["i0", "i1", "i0"], "lang": ["en", "en", "de"],
    "text": ["the dog runs in the park", "a small cat sleeps", "two birds sing"],
    "words": [["the", "dog", "runs", "in", "the", "park"], ["a", "small", "cat", "sleeps"],
              ["two", "birds", "sing"]],
    "upos": [["DET", "NOUN", "VERB", "ADP", "DET", "NOUN"], ["DET", "ADJ", "NOUN", "VERB"],
             ["NUM", "NOUN", "VERB"]],
})


def _image(image_id: str):
    rng = np.random.default_rng(int(image_id[1:]))
    return Image.fromarray(rng.integers(0, 255, (16, 16, 3), dtype=np.uint8))


def _pairs(device: str):
    cap, proc = _tiny.tiny_paligemma(seed=0, image_size=16, patch=8)
    tok = proc.tokenizer
    lm = _tiny.tiny_causal("gemma", vocab_size=len(tok), seed=1, max_position_embeddings=128)
    cap.config._name_or_path = f"tiny-captioner-{device}"
    lm.config._name_or_path = f"tiny-lm-{device}"
    return (copy.deepcopy(cap).to(device), proc), (copy.deepcopy(lm).to(device), tok)


def test_caption_table_on_the_gpu_equals_the_cpu(tmp_path, monkeypatch):
    if not torch.cuda.is_available():
        pytest.skip("torch sees no CUDA device")
    monkeypatch.setenv("TOKENBOOK_CACHE", str(tmp_path))
    tables = {}
    for device in ("cpu", "cuda"):
        cap, lm = _pairs(device)
        tables[device] = stab.caption_word_table(CAPTIONS, image_fn=_image, captioner=cap,
                                                 text_lm=lm, device=device, progress=False)
    cpu, gpu = tables["cpu"], tables["cuda"]
    assert len(cpu) == 13 and list(gpu.columns) == list(cpu.columns)
    assert gpu[["unit_id", "word_idx", "word", "upos"]].equals(cpu[["unit_id", "word_idx", "word", "upos"]])
    for col in ("s_U", "s_P"):
        assert np.isfinite(gpu[col]).all()
        np.testing.assert_allclose(gpu[col], cpu[col], rtol=1e-5, atol=5e-5, err_msg=col)
