"""Word surprisals: the beginning-of-word correction against a brute-force evaluation of the definition."""


import numpy as np
import pandas as pd
import pytest
import torch

from tokenbook.scoring import WORD_COLUMNS, score_texts, word_spans, word_surprisals
from tokenbook.scoring._tiny import tiny_causal, tiny_tokenizer


@pytest.fixture(scope="module")
def setups():
    out = {}
    for style in ("metaspace", "bytelevel"):
        tok = tiny_tokenizer(style)
        out[style] = (tok, tiny_causal("gpt2", len(tok), seed=1))
    return out


def brute_bow_set(tok):
    """𝓑 by brute force over the vocabulary: tokens whose decoded string starts with a space, + EOS."""
    out = []
    for i in range(len(tok)):
        s = tok.convert_tokens_to_string([tok.convert_ids_to_tokens(i)])
        if i == tok.eos_token_id or (i not in tok.all_special_ids and s[:1].isspace()):
            out.append(i)
    return out


def next_dist(model, ids):
    with torch.no_grad():
        return model(torch.tensor([ids])).logits[0, -1].double().log_softmax(-1)


def brute_word_surprisals(model, tok, text):
    """−log p(w | c) = −log p(tokens(w) | c) − log P(𝓑 | c∘w) + log P(𝓑 | c), one model call per token.

    The words' token spans come from tokenising each whitespace word with its leading space; the
    beginning term applies when the word's first token carries the space (not the text's first word).
    """
    bow = brute_bow_set(tok)
    ids = tok(text, add_special_tokens=False)["input_ids"]
    words = text.split()
    ctx = [tok.bos_token_id]
    out, pos = [], 0
    for j, w in enumerate(words):
        piece = w if j == 0 else " " + w
        n = len(tok(piece, add_special_tokens=False)["input_ids"])
        w_ids = ids[pos : pos + n]
        assert tok.decode(w_ids).strip() == w
        logp = 0.0
        first = next_dist(model, ctx)
        c = ctx
        for t in w_ids:
            logp += float(next_dist(model, c)[t])
            c = c + [t]
        s = -logp - float(torch.logsumexp(next_dist(model, c)[bow], 0))
        if w_ids[0] in bow:
            s += float(torch.logsumexp(first[bow], 0))
        out.append(s)
        ctx, pos = c, pos + n
    assert pos == len(ids)
    return out


@pytest.mark.parametrize("style", ["metaspace", "bytelevel"])
def test_word_surprisal_equals_brute_force_definition(style, setups):
    tok, model = setups[style]
    texts = ["the dog runs in the park", "a black cat sleeps on the old mat."]
    df = score_texts(model, tok, texts, progress=False)
    words = word_surprisals(df, texts)
    assert list(words.columns) == WORD_COLUMNS
    for i, t in enumerate(texts):
        got = words[words.seq_id == i]
        assert got.word.tolist() == t.split()
        np.testing.assert_allclose(got.surprisal, brute_word_surprisals(model, tok, t), atol=1e-4)
        # the correction matters: the plain sum of token surprisals is different
        plain = [-df[(df.seq_id == i) & (df.char_start >= a) & (df.char_end <= b) & (df.char_end > df.char_start)
                     ].logprob.sum() for a, b in zip(got.char_start, got.char_end)]
        assert np.abs(np.asarray(plain) - got.surprisal.to_numpy()).max() > 1e-3


def test_tagger_split_adds_up_to_whitespace_word(setups):
    tok, model = setups["metaspace"]
    texts = ["a black cat sleeps on the old mat."]
    df = score_texts(model, tok, texts, progress=False)
    ws = word_surprisals(df, texts)
    tagged = word_surprisals(df, texts, words=[["a", "black", "cat", "sleeps", "on", "the", "old", "mat", "."]])
    assert tagged.word.tolist()[-2:] == ["mat", "."]
    assert not tagged.straddles.any()
    np.testing.assert_allclose(tagged.surprisal.iloc[-2:].sum(), ws.surprisal.iloc[-1], atol=1e-5)
    np.testing.assert_allclose(tagged.surprisal.iloc[:-2], ws.surprisal.iloc[:-1], atol=1e-6)
    assert np.isclose(tagged.surprisal.sum(), ws.surprisal.sum(), atol=1e-4)


def test_straddling_token_gives_nan_and_flag(setups):
    tok, model = setups["metaspace"]
    text = "the dog runs"
    df = score_texts(model, tok, [text], progress=False)
    # a segmentation that cuts inside the token "▁dog" (no space: a language without spaces)
    spans = [(0, 3), (4, 6), (6, 7), (8, 12)]
    w = word_surprisals(df, [text], words=[spans])
    assert w.straddles.tolist() == [False, True, True, False]
    assert w.surprisal.isna().tolist() == [False, True, True, False]
    whole = word_surprisals(df, [text])
    np.testing.assert_allclose(w.surprisal.iloc[[0, 3]], whole.surprisal.iloc[[0, 2]], atol=1e-6)


def test_whitespace_only_token_joins_next_word(setups):
    tok, model = setups["bytelevel"]
    text = "the  dog"  # the double space yields a bare 'Ġ' token before 'Ġdog'
    df = score_texts(model, tok, [text], progress=False)
    w = word_surprisals(df, [text])
    assert w.word.tolist() == ["the", "dog"]
    body = df.iloc[:-1]
    # every token's log-prob is counted in exactly one word, except nothing is lost
    assert w.n_tokens.sum() == len(body)


def test_needs_the_row_after_the_last_word(setups):
    tok, model = setups["metaspace"]
    df = score_texts(model, tok, ["the dog"], progress=False, add_eos=False)
    with pytest.raises(ValueError, match="add_eos=True"):
        word_surprisals(df, ["the dog"])


def test_word_spans_and_errors():
    assert word_spans("a  bc d") == [(0, 1), (3, 5), (6, 7)]
    assert word_spans("我喜欢猫", ["我", "喜欢", "猫"]) == [(0, 1), (1, 3), (3, 4)]
    with pytest.raises(ValueError, match="does not occur"):
        word_spans("a b", ["a", "c"])
    with pytest.raises(ValueError, match="overlaps"):
        word_spans("a b", [(0, 2), (1, 3)])
    with pytest.raises(ValueError, match="lacks column"):
        word_surprisals(pd.DataFrame({"seq_id": [0]}), ["a"])


def test_offsets_by_decoding_fallback_matches_fast_offsets(setups):
    """Slow tokenizers (e.g. MarianTokenizer) have no offset mapping; the decoding fallback agrees."""
    from tokenbook.scoring.engine import _offsets_by_decoding

    tok, _ = setups["metaspace"]
    text = "a black cat sleeps on the old mat."
    enc = tok(text, add_special_tokens=False, return_offsets_mapping=True)
    fast = [tuple(o) for o in enc["offset_mapping"]]
    assert _offsets_by_decoding(tok, enc["input_ids"], text) == fast


@pytest.mark.parametrize("style", ["metaspace", "bytelevel"])
def test_word_surprisals_telescope_to_the_text_surprisal(style, setups):
    """Σ_words s(w) = −Σ log p(text tokens) − log P(𝓑 | text) + [first token ∈ 𝓑]·log P(𝓑 | ctx):
    the inner beginning-of-word terms cancel, for whitespace words and for any segmentation cut at
    token boundaries (a language without spaces)."""
    tok, model = setups[style]
    texts = ["the dog runs in the park", "thedogruns"]
    df = score_texts(model, tok, texts, progress=False)
    for i, text in enumerate(texts):
        g = df[df.seq_id == i]
        body, eos = g.iloc[:-1], g.iloc[-1]
        total = -body.logprob.sum() - eos.bow_logmass + (body.bow_logmass.iloc[0] if body.is_bow.iloc[0] else 0)
        # a segmentation at token boundaries: each token its own word (no straddling possible)
        spans = [(a, b) for a, b in zip(body.char_start, body.char_end) if b > a]
        for words in (None, spans):
            w = word_surprisals(df[df.seq_id == i].assign(seq_id=0), [text], words=None if words is None else [words])
            assert not w.straddles.any() and w.surprisal.notna().all()
            assert abs(w.surprisal.sum() - total) < 1e-4
