"""Word surprisals against a second, independent implementation: minicons' BOW-corrected word
scores (``IncrementalLMScorer.word_score_tokenized(..., bow_correction=True, surprisal=True,
base_two=False)``, minicons 0.3.39), on tiny randomly initialised GPT-2s with the hub-free BPE
tokenizers of :mod:`tokenbook.scoring._tiny`.

Where the two definitions differ (read from both implementations)
-----------------------------------------------------------------
Both compute ``s(w) = −log p(tokens(w) | c) − log P(𝓑 | c∘w) + [w's first token ∈ 𝓑]·log P(𝓑 | c)``
(nats), the beginning term never applied to the text's first word. They differ in the
beginning-of-word set 𝓑 only:

* tokenbook's 𝓑 (:func:`tokenbook.scoring.vocab.bow_vocab_mask`) = tokens whose string starts
  with *any* ASCII whitespace (byte-level ``Ġ`` space, but also ``Ċ`` newline, ``ĉ`` tab, ...) **plus
  EOS**: a word also ends when the text ends;
* minicons' 𝓑 (``bow_subword_idx``) = tokens whose first character is the tokenizer's space
  symbol (``Ġ`` / ``▁``) only; EOS is not in it, so with ``eos_token=True`` the last word gets no
  end-of-word term at all (the EOS row is not a beginning of word) and with ``eos_token=False``
  its end term leaves out P(EOS).

:func:`test_the_two_bow_sets_differ_by_eos_and_other_whitespace_only` pins that difference
exactly. :func:`test_word_surprisals_equal_minicons_with_the_same_bow_set` then gives minicons
tokenbook's 𝓑 (its two attributes ``bow_subwords`` / ``bow_subword_idx``, nothing else) and scores
with BOS and EOS appended as tokenbook does (``score_texts``' ``add_bos``/``add_eos``): every word,
the first and the last included, must then agree to 1e-4 nats. This checks the arithmetic that
the two implement independently: which rows' log-probabilities are summed into a word, which
distribution gives each correction term, and when each term applies.
"""

import numpy as np
import pytest
import torch

minicons_scorer = pytest.importorskip("minicons.scorer")

from tokenbook.scoring import score_texts, word_surprisals  # noqa: E402
from tokenbook.scoring._tiny import tiny_causal, tiny_tokenizer  # noqa: E402
from tokenbook.scoring.vocab import bow_vocab_mask  # noqa: E402

# multi-token words (out-of-corpus words, "mat.", "don't") and single-token ones
TEXTS = ["the dog runs in the park", "a black cat sleeps on the old mat.",
         "cats and dogs don't like rain", "zebras gallop quickly over the fence"]
STYLES = ["bytelevel", "metaspace"]


@pytest.fixture(scope="module")
def setups():
    out = {}
    for style in STYLES:
        tok = tiny_tokenizer(style)
        out[style] = (tok, tiny_causal("gpt2", len(tok), seed=3))  # torch.manual_seed(3) inside
    return out


def _scorer(model, tok):
    return minicons_scorer.IncrementalLMScorer(model, "cpu", tokenizer=tok)


def _minicons_words(sc, texts, *, eos_token=True):
    out = sc.word_score_tokenized(texts, str.split, bow_correction=True, bos_token=True,
                                  eos_token=eos_token, surprisal=True, base_two=False)
    return [([w for w, _ in r], np.array([float(s) for _, s in r])) for r in out]


@pytest.mark.parametrize("style", STYLES)
def test_the_two_bow_sets_differ_by_eos_and_other_whitespace_only(style, setups):
    tok, model = setups[style]
    sc = _scorer(model, tok)
    assert sc.is_bow_tokenizer and sc.bow_symbol == {"bytelevel": "Ġ", "metaspace": "▁"}[style]
    ours = set(torch.nonzero(bow_vocab_mask(tok, len(tok))).flatten().tolist())
    theirs = set(sc.bow_subword_idx)
    assert theirs <= ours
    extra = {tok.convert_ids_to_tokens(i) for i in ours - theirs}
    want = {"<eos>"}
    if style == "bytelevel":  # ASCII whitespace bytes other than the space: \t \n \v \f \r \x1c-\x1f
        want |= {"ĉ", "Ċ", "ċ", "Č", "č", "Ĝ", "ĝ", "Ğ", "ğ"}
    assert extra == want
    # the space-marked words themselves are in both: every word but the first starts in 𝓑
    ids = tok(TEXTS[0], add_special_tokens=False)["input_ids"]
    starts = [i for i in ids if tok.convert_ids_to_tokens(i)[0] == sc.bow_symbol]
    assert len(starts) == len(TEXTS[0].split()) - 1 and set(starts) <= theirs


@pytest.mark.parametrize("style", STYLES)
def test_word_surprisals_equal_minicons_with_the_same_bow_set(style, setups):
    tok, model = setups[style]
    ours = word_surprisals(score_texts(model, tok, TEXTS, progress=False), TEXTS)
    sc = _scorer(model, tok)
    mask = bow_vocab_mask(tok, len(tok))
    sc.bow_subwords = {i: bool(mask[i]) for i in range(len(tok))}
    sc.bow_subword_idx = torch.nonzero(mask).flatten().tolist()
    theirs = _minicons_words(sc, TEXTS, eos_token=True)
    n_multi = 0
    for i, text in enumerate(TEXTS):
        got = ours[ours.seq_id == i]
        words, want = theirs[i]
        assert got.word.tolist() == words == text.split()
        assert np.isfinite(want).all() and (want > 0).all()
        np.testing.assert_allclose(got.surprisal.to_numpy(), want, atol=1e-4, rtol=0)
        n_multi += int((got.n_tokens > 1).sum())
    assert n_multi >= 3  # the sums over a word's tokens are exercised, not only single tokens

    # the correction is not vacuous: minicons without it gives other numbers
    plain = sc.word_score_tokenized(TEXTS, str.split, bow_correction=False, bos_token=True,
                                    eos_token=True, surprisal=True)
    diff = np.abs(np.array([float(s) for _, s in plain[0]])
                  - ours[ours.seq_id == 0].surprisal.to_numpy())
    assert diff.max() > 0.05

