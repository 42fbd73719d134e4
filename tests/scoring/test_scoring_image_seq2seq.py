"""score_image_texts (tiny PaliGemma) and score_seq2seq (tiny Marian) against the models' own loss."""

import numpy as np
import pytest
import torch
from PIL import Image

from tokenbook.scoring import TOKEN_COLUMNS, score_image_texts, score_seq2seq, score_texts
from tokenbook.scoring._tiny import tiny_marian, tiny_paligemma

CAPTIONS = ["the dog runs", "a small cat sleeps on the red mat", "birds"]


@pytest.fixture(scope="module")
def pali():
    return tiny_paligemma(softcap=3.0)


@pytest.fixture(scope="module")
def images():
    rng = np.random.default_rng(0)
    return [Image.fromarray(rng.integers(0, 255, (16, 16, 3), dtype=np.uint8)) for _ in CAPTIONS]


def processor_reference(model, proc, image, prefix, caption):
    enc = proc(images=[image], text=[prefix], suffix=[caption], return_tensors="pt")
    with torch.no_grad():
        out = model(**enc)
    keep = enc["labels"][0, 1:] != -100
    lsm = out.logits[0, :-1].double().log_softmax(-1)
    lp = lsm.gather(1, enc["input_ids"][0, 1:, None])[:, 0][keep]
    # the model's own loss over the caption tokens (labels = -100 on the prefix)
    loss = torch.nn.functional.cross_entropy(out.logits[0, :-1][keep].float(), enc["input_ids"][0, 1:][keep])
    return enc["input_ids"][0, 1:][keep].tolist(), lp, loss.item()


def test_paligemma_equals_processor_and_loss(pali, images):
    model, proc = pali
    df = score_image_texts(model, proc, images, CAPTIONS, prefixes="caption en", batch_size=2, progress=False)
    assert list(df.columns) == TOKEN_COLUMNS
    for i, cap in enumerate(CAPTIONS):
        ids, lp, loss = processor_reference(model, proc, images[i], "caption en", cap)
        g = df[df.seq_id == i]
        assert g.token_id.tolist() == ids  # built exactly like processor(..., suffix=caption)
        np.testing.assert_allclose(g.logprob, lp.numpy(), atol=1e-5)
        assert abs(-g.logprob.mean() - loss) < 1e-5
        assert g.char_end.iloc[-2] == len(cap) and g.char_start.iloc[0] == 0


def test_paligemma_no_future_leak_and_image_matters(pali, images):
    model, proc = pali
    a = score_image_texts(model, proc, images[:1], ["the dog runs"], prefixes="caption en", progress=False)
    b = score_image_texts(model, proc, images[:1], ["the dog sleeps"], prefixes="caption en", progress=False)
    # tokens before the change are scored identically: no token sees its future
    np.testing.assert_allclose(a.logprob.iloc[:2], b.logprob.iloc[:2], atol=1e-6)
    c = score_image_texts(model, proc, images[1:2], ["the dog runs"], prefixes="caption en", progress=False)
    assert (a.logprob - c.logprob).abs().max() > 1e-4  # the image conditions the caption
    d = score_image_texts(model, proc, images[:1], ["the dog runs"], prefixes="caption de", progress=False)
    assert (a.logprob - d.logprob).abs().max() > 1e-4  # and so does the prefix


def test_paligemma_rejected_by_score_texts(pali):
    model, proc = pali
    with pytest.raises(TypeError, match="score_image_texts"):
        score_texts(model, proc.tokenizer, ["a dog"], progress=False)


def test_image_count_mismatch(pali, images):
    model, proc = pali
    with pytest.raises(ValueError, match="2 images for 3 texts"):
        score_image_texts(model, proc, images[:2], CAPTIONS, prefixes="caption en", progress=False)


def test_marian_equals_loss_and_naive():
    model, tok = tiny_marian()
    src = ["the dog runs", "a cat sleeps on the mat", "birds"]
    tgt = ["a cat sleeps on the mat", "birds sing", "the dog"]
    df = score_seq2seq(model, tok, src, tgt, batch_size=2, progress=False, chunk_size=17)
    single = score_seq2seq(model, tok, src, tgt, batch_size=1, progress=False)
    np.testing.assert_allclose(df.logprob, single.logprob, atol=1e-5)
    for i in range(3):
        enc = tok([src[i]], return_tensors="pt")
        lab = torch.tensor([tok(tgt[i], add_special_tokens=False)["input_ids"] + [tok.eos_token_id]])
        with torch.no_grad():
            out = model(**enc, labels=lab)
        lp = out.logits[0].double().log_softmax(-1).gather(1, lab[0, :, None])[:, 0]
        g = df[df.seq_id == i]
        assert g.token_id.tolist() == lab[0].tolist()
        np.testing.assert_allclose(g.logprob, lp.numpy(), atol=1e-5)
        assert abs(-g.logprob.mean() - out.loss.item()) < 1e-5


def test_seq2seq_errors():
    model, tok = tiny_marian()
    with pytest.raises(ValueError, match="pair up"):
        score_seq2seq(model, tok, ["a"], ["b", "c"], progress=False)
    with pytest.raises(ValueError, match="target 0 is empty"):
        score_seq2seq(model, tok, ["a dog"], [""], progress=False)
    with pytest.raises(TypeError, match="encoder-decoder"):
        score_texts(model, tok, ["a dog"], progress=False)


def test_paligemma_processes_each_image_once_per_prefix(pali, images):
    """Captions that share an image (and prefix) share one processor call, with the scores
    of one call per caption (up to float32 rounding: a batch of another shape may take another
    BLAS path: one float32 ulp, 5e-7 nats, apart on an AMD EPYC; another image or prefix moves
    them by 1e-4 to 3e-3 nats)."""
    model, proc = pali

    class Counting:
        def __init__(self, inner):
            self.inner, self.tokenizer, self.calls = inner, inner.tokenizer, 0

        def __call__(self, *args, **kwargs):
            self.calls += 1
            return self.inner(*args, **kwargs)

    counting = Counting(proc)
    shared = [images[0], images[0], images[1], images[0]]
    texts = ["the dog runs", "birds", "the dog runs", "a cat"]
    prefixes = ["caption en", "caption en", "caption en", "caption de"]
    df = score_image_texts(model, counting, shared, texts, prefixes=prefixes, progress=False)
    assert counting.calls == 3      # (image 0, en), (image 1, en), (image 0, de)
    for i, (img, text, pre) in enumerate(zip(shared, texts, prefixes)):
        alone = score_image_texts(model, proc, [img], [text], prefixes=pre, progress=False)
        np.testing.assert_allclose(df[df.seq_id == i].logprob.to_numpy(),
                                   alone.logprob.to_numpy(), rtol=0, atol=4e-6)
