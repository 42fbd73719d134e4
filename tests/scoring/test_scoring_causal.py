"""score_texts on tiny causal LMs of real architectures: equal to the model's own loss and logits."""

import math

import numpy as np
import pandas as pd
import pytest
import torch

from tokenbook.scoring import (
    TOKEN_COLUMNS,
    OutputHead,
    check_same_tokenization,
    reduce_hidden,
    score_image_texts,
    score_texts,
)
from tokenbook.scoring._tiny import tiny_causal, tiny_tokenizer

TEXTS = ["the dog runs in the park", "a cat.", "two birds sing in the old green tree today"]


@pytest.fixture(scope="module")
def toks():
    return {s: tiny_tokenizer(s) for s in ("bytelevel", "metaspace")}


def naive(model, ids):
    """log p of ids[1:] given the prefix, from the full log-softmax, and the model's own loss."""
    x = torch.tensor([ids])
    with torch.no_grad():
        out = model(x, labels=x)
    lsm = out.logits[0, :-1].double().log_softmax(-1)
    lp = lsm.gather(1, x[0, 1:, None])[:, 0]
    p = lsm.exp()
    ent = -(p * lsm).sum(-1)
    return lp, ent, lsm, out.loss.item()


@pytest.mark.parametrize("arch", ["gpt2", "qwen2", "gemma", "gemma2"])
@pytest.mark.parametrize("style", ["bytelevel", "metaspace"])
def test_equals_model_loss_and_naive(arch, style, toks):
    tok = toks[style]
    model = tiny_causal(arch, len(tok))
    df = score_texts(model, tok, TEXTS, progress=False, chunk_size=53, batch_size=2)
    assert list(df.columns) == TOKEN_COLUMNS
    for i, t in enumerate(TEXTS):
        ids = [tok.bos_token_id] + tok(t, add_special_tokens=False)["input_ids"] + [tok.eos_token_id]
        lp, ent, _, loss = naive(model, ids)
        g = df[df.seq_id == i].sort_values("token_idx")
        assert g.token_id.tolist() == ids[1:]
        np.testing.assert_allclose(g.logprob.to_numpy(), lp.numpy(), atol=1e-5)
        np.testing.assert_allclose(g.entropy.to_numpy(), ent.numpy(), atol=1e-5)
        assert abs(-g.logprob.mean() - loss) < 1e-5


def test_softcapping_is_applied(toks):
    tok = toks["metaspace"]
    capped = tiny_causal("gemma2", len(tok))
    assert capped.config.final_logit_softcapping == 2.0
    df = score_texts(capped, tok, TEXTS[:1], progress=False)
    # with a cap of 2 every logit lies in (-2, 2): the entropy is near log V, far from the uncapped one
    capped.config.final_logit_softcapping = None
    df_uncapped = score_texts(capped, tok, TEXTS[:1], progress=False)
    assert (df.entropy - df_uncapped.entropy).abs().max() > 0.1
    assert df.entropy.min() > math.log(len(tok)) - 1.0


def test_bow_logmass_and_is_bow(toks):
    tok = toks["bytelevel"]
    model = tiny_causal("gpt2", len(tok))
    df = score_texts(model, tok, TEXTS[:1], progress=False)
    ids = [tok.bos_token_id] + tok(TEXTS[0], add_special_tokens=False)["input_ids"] + [tok.eos_token_id]
    _, _, lsm, _ = naive(model, ids)
    vocab = tok.convert_ids_to_tokens(list(range(len(tok))))
    decoded = [tok.convert_tokens_to_string([s]) for s in vocab]
    bow = [i for i, s in enumerate(decoded) if s[:1].isspace() or i == tok.eos_token_id]
    assert 20 < len(bow) < len(vocab) / 2
    np.testing.assert_allclose(df.bow_logmass, torch.logsumexp(lsm[:, bow], -1).numpy(), atol=1e-5)
    assert df.is_bow.tolist() == [i in bow for i in df.token_id]
    assert df.is_bow.sum() >= 6  # the space-marked words and EOS


@pytest.mark.parametrize("arch", ["gpt2", "qwen2", "gemma"])
def test_padding_side_and_batch_size_do_not_change_scores(arch, toks):
    tok = toks["metaspace"]
    model = tiny_causal(arch, len(tok))
    one = score_texts(model, tok, TEXTS, batch_size=1, progress=False)
    for side in ("left", "right"):
        many = score_texts(model, tok, TEXTS, batch_size=3, padding_side=side, progress=False)
        pd.testing.assert_frame_equal(one[TOKEN_COLUMNS[:6]], many[TOKEN_COLUMNS[:6]])
        np.testing.assert_allclose(one.logprob, many.logprob, atol=1e-5)
        np.testing.assert_allclose(one.bow_logmass, many.bow_logmass, atol=1e-5)


def test_prefix_conditions_only(toks):
    tok = toks["metaspace"]
    model = tiny_causal("qwen2", len(tok))
    pre = "caption en\n"
    df = score_texts(model, tok, ["a dog runs"], prefixes=[pre], progress=False)
    ctx = [tok.bos_token_id] + tok(pre, add_special_tokens=False)["input_ids"]
    tgt = tok("a dog runs", add_special_tokens=False)["input_ids"] + [tok.eos_token_id]
    lp, *_ = naive(model, ctx + tgt)
    np.testing.assert_allclose(df.logprob, lp[len(ctx) - 1 :].numpy(), atol=1e-5)
    assert df.token_id.tolist() == tgt
    plain = score_texts(model, tok, ["a dog runs"], progress=False)
    assert (plain.logprob - df.logprob).abs().max() > 1e-3  # the prefix does condition


@pytest.mark.parametrize("style", ["bytelevel", "metaspace"])
def test_offsets_point_into_the_text(style, toks):
    tok = toks[style]
    model = tiny_causal("gpt2", len(tok))
    text = "the dog  runs. the cat."
    df = score_texts(model, tok, [text], progress=False)
    body, eos = df.iloc[:-1], df.iloc[-1]
    assert eos.token_id == tok.eos_token_id and eos.char_start == eos.char_end == len(text)
    rebuilt = "".join(text[a:b] for a, b in zip(body.char_start, body.char_end))
    assert rebuilt.replace(" ", "") == text.replace(" ", "")
    for a, b, t in zip(body.char_start, body.char_end, body.token):
        assert text[a:b].strip() == t.lstrip("Ġ▁")


def test_bf16_close_to_bf16_naive(toks):
    tok = toks["metaspace"]
    model = tiny_causal("qwen2", len(tok), dtype=torch.bfloat16)
    df = score_texts(model, tok, TEXTS[:1], progress=False, chunk_size=64)
    ids = [tok.bos_token_id] + tok(TEXTS[0], add_special_tokens=False)["input_ids"] + [tok.eos_token_id]
    with torch.no_grad():
        logits = model(torch.tensor([ids])).logits[0, :-1].float()
    ref = logits.log_softmax(-1).gather(1, torch.tensor(ids[1:])[:, None])[:, 0]
    assert df.logprob.dtype == np.float32
    np.testing.assert_allclose(df.logprob, ref.numpy(), atol=0.1)


def test_memory_bound_of_reduce_hidden():
    """No logits block larger than row_block x chunk_size is ever materialised."""
    g = torch.Generator().manual_seed(0)
    w = torch.randn(1000, 8, generator=g)
    shapes = []

    class Spy(OutputHead):
        def logits(self, h, lo, hi):
            out = super().logits(h, lo, hi)
            shapes.append(tuple(out.shape))
            return out

    h = torch.randn(50, 8, generator=g)
    t = torch.randint(0, 1000, (50,), generator=g)
    bow = torch.arange(1000) % 2 == 0
    lp, ent, bl, _ = reduce_hidden(Spy(weight=w), h, t, bow, chunk_size=128, row_block=16)
    assert max(a * b for a, b in shapes) <= 16 * 128
    full = (h @ w.T).double().log_softmax(-1)
    np.testing.assert_allclose(lp, full.gather(1, t[:, None])[:, 0], atol=1e-5)
    np.testing.assert_allclose(bl, torch.logsumexp(full[:, bow], -1), atol=1e-5)


# ---------------------------------------------------------------------------- errors
def test_empty_text_is_an_error(toks):
    model = tiny_causal("gpt2", len(toks["bytelevel"]))
    with pytest.raises(ValueError, match="text 1 is empty"):
        score_texts(model, toks["bytelevel"], ["a dog", "  "], progress=False)
    with pytest.raises(TypeError, match="list of strings"):
        score_texts(model, toks["bytelevel"], "a dog", progress=False)


def test_too_long_names_length_and_limit(toks):
    tok = toks["bytelevel"]
    model = tiny_causal("gpt2", len(tok))  # 64 positions
    with pytest.raises(ValueError, match=r"text 0 needs \d+ positions .* only 64"):
        score_texts(model, tok, [" ".join(["dog"] * 80)], progress=False)


def test_nan_logits_name_the_sequence(toks):
    tok = toks["metaspace"]
    model = tiny_causal("qwen2", len(tok))  # untied embeddings
    with torch.no_grad():
        # a NaN in an input embedding poisons only the sequences that contain that token
        model.model.embed_tokens.weight[tok.convert_tokens_to_ids("▁birds")] = float("nan")
    with pytest.raises(FloatingPointError, match=r"sequence\(s\) \[2\]"):
        score_texts(model, tok, TEXTS, progress=False)


def test_images_to_text_only_model(toks):
    tok = toks["metaspace"]
    model = tiny_causal("gpt2", len(tok))
    with pytest.raises(TypeError, match="text-only model"):
        score_image_texts(model, tok, [object()], ["a dog"], prefixes="caption en")


def test_check_same_tokenization(toks):
    a_tok, b_tok = toks["bytelevel"], toks["metaspace"]
    a = score_texts(tiny_causal("gpt2", len(a_tok)), a_tok, TEXTS, progress=False)
    b = score_texts(tiny_causal("gpt2", len(b_tok)), b_tok, TEXTS, progress=False)
    c = score_texts(tiny_causal("qwen2", len(a_tok)), a_tok, TEXTS, progress=False)
    check_same_tokenization(a, c)  # same tokenizer: fine
    with pytest.raises(ValueError, match="different tokenizations"):
        check_same_tokenization(a, b)


def test_reduce_hidden_threads_outside_inference_mode():
    """Worker threads do not inherit grad mode: a caller under no_grad (or with grad on) still works."""
    g = torch.Generator().manual_seed(0)
    w = torch.randn(300, 8, generator=g)
    h = torch.randn(40, 8, generator=g)
    t = torch.randint(0, 300, (40,), generator=g)
    bow = torch.arange(300) % 3 == 0
    ref = (h @ w.T).double().log_softmax(-1).gather(1, t[:, None])[:, 0]
    with torch.inference_mode():
        h_inf = h.clone()
    for hh in (h, h_inf, h.clone().requires_grad_()):
        lp, *_ = reduce_hidden(OutputHead(weight=w), hh, t, bow, chunk_size=64, row_block=8, workers=2)
        np.testing.assert_allclose(lp, ref, atol=1e-5)
