"""Tiny Marian: builds from config, learns, round-trips, and the scoring engine agrees with its loss."""

import pytest
import torch

from tokenbook.memorisation_cartography.estimator import score_pairs
from tokenbook.models.marian import (build_marian, make_batch, encode_pairs, train_bpe_tokenizer,
                                     train_marian, translate)
from tokenbook.worlds.translation import make_translation_world


@pytest.fixture(scope="module")
def trained():
    torch.set_num_threads(1)
    w = make_translation_world(120, n_test=10, seed=0)
    src, tgt = w.pairs.source.tolist(), w.pairs.target.tolist()
    tok = train_bpe_tokenizer(src + tgt, vocab_size=250)
    model = build_marian(tok, seed=0)
    before = score_pairs(model, tok, src, tgt)
    log = train_marian(model, tok, src, tgt, epochs=8, batch_size=16, warmup_steps=10,
                       progress=False)
    return w, tok, model, before, log


@pytest.mark.slow
def test_training_lowers_loss_and_raises_likelihood(trained):
    w, tok, model, before, log = trained
    assert log["epoch_loss"][-1] < 0.8 * log["epoch_loss"][0]
    after = score_pairs(model, tok, w.pairs.source.tolist(), w.pairs.target.tolist())
    assert after["gmp"].mean() > 3 * before["gmp"].mean()
    assert ((after["gmp"] > 0) & (after["gmp"] <= 1)).all()


def test_engine_scores_match_the_models_own_loss(trained):
    """Mean of the engine's per-token log-probs (EOS included) == −(the model's own CE loss)."""
    w, tok, model, _, _ = trained
    src, tgt = w.pairs.source.tolist()[:16], w.pairs.target.tolist()[:16]
    sc = score_pairs(model, tok, src, tgt)
    s_ids, t_ids = encode_pairs(tok, src, tgt)
    with torch.no_grad():
        for i in range(3):
            batch = make_batch([s_ids[i]], [t_ids[i]], tok.pad_token_id)
            loss = model(**batch).loss.item()
            assert sc.loc[i, "logprob_mean"] == pytest.approx(-loss, abs=1e-4)
            assert sc.loc[i, "n_tokens"] == len(t_ids[i])  # target tokens + </s>


def test_roundtrip_and_greedy(trained, tmp_path):
    from transformers import MarianMTModel, PreTrainedTokenizerFast

    w, tok, model, _, _ = trained
    model.save_pretrained(tmp_path / "m")
    tok.save_pretrained(tmp_path / "m")
    m2 = MarianMTModel.from_pretrained(tmp_path / "m")
    t2 = PreTrainedTokenizerFast.from_pretrained(tmp_path / "m")
    src = w.pairs.source.tolist()[:8]
    a = translate(model, tok, src)
    assert a == translate(m2, t2, src)
    assert all(isinstance(h, str) for h in a) and any(h for h in a)


def test_bad_preset():
    tok = train_bpe_tokenizer(["a b", "c d"], vocab_size=30)
    with pytest.raises(ValueError, match="unknown Marian preset"):
        build_marian(tok, preset="huge")


def test_make_batch_pads_right_and_masks_labels():
    batch = make_batch([[5, 6, 1], [7, 1]], [[8, 1], [9, 9, 9, 1]], pad_id=0)
    assert batch["input_ids"].tolist() == [[5, 6, 1], [7, 1, 0]]
    assert batch["attention_mask"].tolist() == [[True, True, True], [True, True, False]]
    assert batch["labels"].tolist() == [[8, 1, -100, -100], [9, 9, 9, 1]]
    assert batch["input_ids"].dtype == batch["labels"].dtype == torch.long
