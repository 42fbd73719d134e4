"""Bad inputs at the public entries of tokenbook.scoring: the library's own ValueError/TypeError,
never an error from inside transformers or torch, and nothing silent."""

from __future__ import annotations

import copy

import numpy as np
import pandas as pd
import pytest
import torch

from tokenbook import scoring
from tokenbook.scoring import OutputHead, _tiny
from tokenbook.scoring.reduction import chunk_state, init_state, merge_states


@pytest.fixture(scope="module")
def tok():
    return _tiny.tiny_tokenizer("bytelevel")


@pytest.fixture(scope="module")
def model(tok):
    return _tiny.tiny_causal("gpt2", len(tok))


def test_empty_batch_and_wrong_containers(model, tok):
    with pytest.raises(ValueError, match="texts is empty"):
        scoring.score_texts(model, tok, [], progress=False)
    with pytest.raises(TypeError, match="not a single string"):
        scoring.score_texts(model, tok, "a text", progress=False)
    with pytest.raises(TypeError, match="text 1 is a int"):
        scoring.score_texts(model, tok, ["a text", 3], progress=False)
    with pytest.raises(TypeError, match="list of strings"):
        scoring.score_texts(model, tok, 42, progress=False)


def test_model_vocabulary_smaller_than_the_tokenizers(tok):
    small = _tiny.tiny_causal("gpt2", 40)  # the tokenizer has 400 tokens
    with pytest.raises(ValueError, match=r"outside the model's vocabulary of 40.*400 tokens"):
        scoring.score_texts(small, tok, ["the cat sat on the mat"], progress=False)


def test_bow_vocab_mask_refuses_to_truncate(tok):
    with pytest.raises(ValueError, match="fewer than the tokenizer's"):
        scoring.bow_vocab_mask(tok, len(tok) - 1)
    with pytest.raises(TypeError, match="vocab_size"):
        scoring.bow_vocab_mask(tok, float(len(tok)))
    assert scoring.bow_vocab_mask(tok, len(tok) + 5).shape == (len(tok) + 5,)


def test_bow_vocab_mask_may_leave_out_added_tokens(tok):
    """Tokens added after the base vocabulary (PaliGemma's <loc>/<seg>) may lie beyond the
    model's outputs; the mask is the full one, cut at the model's size."""
    grown = copy.deepcopy(tok)
    n = len(grown)
    grown.add_tokens(["<loc0000>", "<loc0001>"])
    mask = scoring.bow_vocab_mask(grown, n)
    assert torch.equal(mask, scoring.bow_vocab_mask(tok, n))
    with pytest.raises(ValueError, match=f"id {n - 1} is part of its base vocabulary"):
        scoring.bow_vocab_mask(grown, n - 1)


def _head(v=12, h=4):
    g = torch.Generator().manual_seed(0)
    return OutputHead(weight=torch.randn(v, h, generator=g))


def test_reduce_hidden_shapes_dtypes_and_ranges():
    head = _head()
    hidden = torch.randn(3, 4)
    targets = torch.tensor([0, 5, 11])
    bow = torch.zeros(12, dtype=torch.bool)
    lp, *_ = scoring.reduce_hidden(head, hidden, targets, bow)
    assert lp.shape == (3,) and bool(torch.isfinite(lp).all())
    cases = [
        ((torch.randn(3, 5), targets, bow), ValueError, r"hidden: expected shape \[N, 4\]"),
        ((torch.randn(3, 4, 1), targets, bow), ValueError, "hidden"),
        ((hidden, targets[:2], bow), ValueError, r"targets: expected shape \[3\]"),
        ((hidden, targets.float(), bow), TypeError, "integer token ids"),
        ((hidden, torch.tensor([0, 5, 12]), bow), ValueError, r"\[0, 12\).*got 12"),
        ((hidden, torch.tensor([0, -1, 3]), bow), ValueError, "got -1"),
        ((hidden, targets, bow[:11]), ValueError, r"bow_mask: expected shape \[12\]"),
        ((hidden.long(), targets, bow), TypeError, "float tensor"),
        ((hidden.numpy(), targets, bow), TypeError, "torch.Tensor"),
    ]
    for args, exc, match in cases:
        with pytest.raises(exc, match=match):
            scoring.reduce_hidden(head, *args)


def test_chunk_state_and_merge_validation():
    x = torch.randn(3, 5)
    bow = torch.zeros(5, dtype=torch.bool)
    ok = chunk_state(x, torch.tensor([0, -1, 4]), bow)
    assert ok.m.shape == (3,)
    with pytest.raises(ValueError, match="target_local must have shape"):
        chunk_state(x, torch.tensor([0, 1]), bow)
    with pytest.raises(ValueError, match="bow_mask must have shape"):
        chunk_state(x, torch.tensor([0, 1, 2]), bow[:4])
    with pytest.raises(TypeError, match="integer indices"):
        chunk_state(x, torch.tensor([0.0, 1.5, 2.0]), bow)
    with pytest.raises(ValueError, match=r"\[-1, 5\)"):
        chunk_state(x, torch.tensor([0, 1, 5]), bow)  # silently -inf before
    with pytest.raises(ValueError, match=r"\[-1, 5\)"):
        chunk_state(x, torch.tensor([0, -2, 1]), bow)
    with pytest.raises(TypeError, match="float tensor"):
        chunk_state(x.long(), torch.tensor([0, 1, 2]), bow)
    with pytest.raises(ValueError, match="same rows"):
        merge_states(ok, init_state(2))


def test_word_spans_reject_float_offsets_and_bad_items():
    with pytest.raises(TypeError, match="must be integers"):
        scoring.word_spans("the cat", [(0.0, 3.0), (4, 7)])
    with pytest.raises(TypeError, match="must be integers"):
        scoring.word_spans("the cat", [(0, 2.9)])  # used to be truncated to (0, 2)
    with pytest.raises(TypeError, match="string or a"):
        scoring.word_spans("the cat", [3])
    assert scoring.word_spans("the cat", [(np.int64(0), np.int64(3))]) == [(0, 3)]


def test_word_surprisals_rejects_extra_texts_and_duplicated_rows(model, tok):
    texts = ["the cat sat", "a dog ran"]
    table = scoring.score_texts(model, tok, texts, progress=False)
    words = scoring.word_surprisals(table, texts)
    assert sorted(words.seq_id.unique()) == [0, 1]
    with pytest.raises(ValueError, match="1 of 3 texts have no rows"):
        scoring.word_surprisals(table, texts + ["an extra text"])
    with pytest.raises(ValueError, match="duplicated"):
        scoring.word_surprisals(pd.concat([table, table.iloc[:1]]), texts)
    with pytest.raises(ValueError, match="lacks column"):
        scoring.word_surprisals(table.drop(columns=["logprob"]), texts)
    with pytest.raises(ValueError, match="seq_id 1 has no text"):
        scoring.word_surprisals(table, texts[:1])
