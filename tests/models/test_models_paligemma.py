"""Tiny PaliGemma captioner + Gemma text LM: tokenizer, layout, round trip, determinism."""

import numpy as np
import pytest
import torch

from tokenbook.models.paligemma import (TrainConfig, build_captioner, build_processor,
                                        build_text_lm, condition_inputs, image_prefix,
                                        load_captioner, load_text_lm, text_prefix,
                                        train_grounded_models, train_tokenizer,
                                        training_examples)
from tokenbook.models.paligemma import _encode, _eval_nll
from tokenbook.worlds.scenes import make_world

TINY = TrainConfig(vocab_size=300, hidden=32, layers=1, heads=2, steps=6, text_steps=3,
                   batch_size=8, warmup=2)


@pytest.fixture(scope="module")
def world():
    return make_world(seed=2, n_languages=6, n_scenes=12, n_stories=3, captions_per_scene=1,
                      min_story_len=4, max_story_len=4)


@pytest.fixture(scope="module")
def trained(world, tmp_path_factory):
    import os
    old = os.environ.get("TOKENBOOK_CACHE")
    os.environ["TOKENBOOK_CACHE"] = str(tmp_path_factory.mktemp("cache-a"))
    try:
        return train_grounded_models(world, seed=0, config=TINY, progress=False)
    finally:
        if old is not None:
            os.environ["TOKENBOOK_CACHE"] = old


def test_tokenizer_marks_word_starts(world):
    tok = train_tokenizer(list(world.captions.text), vocab_size=300)
    text = world.captions.text.iloc[0]
    enc = tok(text, add_special_tokens=False, return_offsets_mapping=True)
    toks = tok.convert_ids_to_tokens(enc["input_ids"])
    starts = {s for s, _ in world.captions.word_spans.iloc[0]}
    # every word of a spaced language begins with a ▁ token at the word's first character
    bow_offsets = {o[0] + (1 if text[o[0]] == " " else 0) for t, o in
                   zip(toks, enc["offset_mapping"]) if t.startswith("▁")}
    assert starts <= bow_offsets
    assert tok.decode(enc["input_ids"]) == text
    assert [tok.pad_token_id, tok.eos_token_id, tok.bos_token_id] == [0, 1, 2]


def test_text_lm_starts_from_the_captioners_decoder(world):
    tok = train_tokenizer(list(world.captions.text), vocab_size=300)
    proc = build_processor(tok, 32, 8)
    assert proc.image_seq_length == 16  # 32 px / 8 px patches (build_processor defaults: 9)
    cap = build_captioner(proc, TINY, seed=0)
    lm = build_text_lm(cap, proc.tokenizer, TINY)
    assert cap.config.text_config.vocab_size == len(proc.tokenizer)
    a = cap.model.language_model.state_dict()
    b = lm.model.state_dict()
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


def test_round_trip_and_scoring_matches_training_layout(world, trained):
    """Reloaded through Auto classes; tokenbook.scoring reproduces the trainer's own NLL."""
    from tokenbook.scoring import score_image_texts, score_texts

    model, proc = load_captioner(trained.captioner_dir)
    lm, tok = load_text_lm(trained.text_lm_dir)
    assert type(model).__name__ == "PaliGemmaForConditionalGeneration"
    assert type(lm).__name__ == "GemmaForCausalLM"
    assert len(tok) == len(proc.tokenizer)
    ex = training_examples(world, "test").head(6)
    enc = _encode(world, ex, proc)
    own_c = _eval_nll(model, enc, proc.tokenizer, n_image=proc.image_seq_length, batch_size=4)
    own_t = _eval_nll(lm, enc, tok, n_image=None, batch_size=4)
    images = [world.image(s) for s in ex.scene_id]
    pre_img = [image_prefix(lang, ctx) for lang, ctx in zip(ex.lang, ex.context)]
    pre_txt = [text_prefix(lang, ctx) for lang, ctx in zip(ex.lang, ex.context)]
    tc = score_image_texts(model, proc, images, list(ex.text), prefixes=pre_img, progress=False)
    tt = score_texts(lm, tok, list(ex.text), prefixes=pre_txt, progress=False)
    np.testing.assert_allclose(-tc.groupby("seq_id").logprob.sum().values, own_c.nll.values,
                               rtol=1e-4, atol=1e-3)
    np.testing.assert_allclose(-tt.groupby("seq_id").logprob.sum().values, own_t.nll.values,
                               rtol=1e-4, atol=1e-3)


def test_heldout_table(world, trained):
    h = trained.heldout
    assert set(h.lang) == set(world.languages)
    assert {"ppl_captioner", "ppl_text_lm", "n_tokens"} <= set(h.columns)
    assert (h.ppl_captioner > 1).all() and np.isfinite(h.ppl_text_lm).all()
    assert trained.log["seconds"]["total"] > 0


def test_same_seed_same_weights(world, trained, tmp_path, monkeypatch):
    monkeypatch.setenv("TOKENBOOK_CACHE", str(tmp_path))
    again = train_grounded_models(world, seed=0, config=TINY, progress=False)
    assert again.root != trained.root  # really retrained, not read from the same cache entry
    from safetensors.torch import load_file
    for sub in ("captioner", "text_lm"):
        a = load_file(trained.root / sub / "model.safetensors")
        b = load_file(again.root / sub / "model.safetensors")
        assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    other = train_grounded_models(world, seed=1, config=TINY, progress=False)
    a = load_file(trained.root / "captioner" / "model.safetensors")
    c = load_file(other.root / "captioner" / "model.safetensors")
    assert any(not torch.equal(a[k], c[k]) for k in a)


def test_cached(world, trained, monkeypatch):
    monkeypatch.setenv("TOKENBOOK_CACHE", str(trained.root.parent))
    again = train_grounded_models(world, seed=0, config=TINY, progress=False)
    assert again.root == trained.root


def test_condition_inputs(world):
    sid = world.stories.story_id.iloc[0]
    lang = world.languages[1]
    sents = list(world.stories[(world.stories.story_id == sid) &
                               (world.stories.lang == lang)].sort_values("sent_idx").text)
    u = condition_inputs(world, sid, 2, "U", lang=lang)
    p = condition_inputs(world, sid, 2, "P", lang=lang)
    d = condition_inputs(world, sid, 2, "D", lang=lang)
    pd_ = condition_inputs(world, sid, 2, "P+D", lang=lang)
    assert u["image"] is None and d["image"] is None
    assert p["image"].size == (48, 48) and pd_["image"] is not None
    assert u["text"] == p["text"] == d["text"] == sents[2]
    assert u["prefix"] == f"caption {lang}\n" and p["prefix"] == f"caption {lang}"
    assert d["prefix"] == f"caption {lang}\n{sents[0]}\n{sents[1]}\n"
    assert pd_["prefix"] + "\n" == d["prefix"]  # the processor appends the newline
    assert (u["model"], p["model"]) == ("text_lm", "captioner")
    first = condition_inputs(world, sid, 0, "D", lang=lang)
    assert first["prefix"] == u["prefix"]
    with pytest.raises(ValueError, match="unknown condition"):
        condition_inputs(world, sid, 0, "X", lang=lang)
    with pytest.raises(ValueError, match="pass lang"):
        condition_inputs(world, sid, 0, "U")
    with pytest.raises(KeyError, match="sentences"):
        condition_inputs(world, sid, 99, "U", lang=lang)


def test_load_errors(tmp_path):
    with pytest.raises(FileNotFoundError, match="save_pretrained"):
        load_captioner(tmp_path)
    with pytest.raises(ValueError, match="divisible"):
        TrainConfig(hidden=33, heads=2)
