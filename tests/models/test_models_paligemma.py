"""Tiny PaliGemma captioner + Gemma text LM: tokenizer, layout, round trip, determinism."""

import copy
from dataclasses import replace

import numpy as np
import pytest
import torch
from safetensors.torch import load_file

from tokenbook.models.paligemma import (TrainConfig, build_captioner, build_processor,
                                        build_text_lm, cell_targets, condition_inputs,
                                        image_prefix, load_captioner, load_text_lm,
                                        locked_tower_states, model_vocab_size,
                                        pretrain_vision_tower, probe_vision_tower,
                                        story_documents, text_prefix, train_grounded_models,
                                        train_tokenizer, training_examples)
from tokenbook.models.paligemma import (MIN_PADDING_SAVED, _batch, _batch_indices,
                                        _batch_loss, _encode,
                                        _eval_nll, _length, _params, _sum_nll, _train,
                                        length_groups)
from tokenbook.worlds.scenes import make_world

TINY = TrainConfig(vocab_size=300, hidden=32, layers=1, heads=2, steps=6, text_steps=3,
                   vision_steps=3, align_steps=2,
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
    # the vocabulary stops at <image>: the processor's <loc>/<seg> tokens are left out
    image = proc.tokenizer.convert_tokens_to_ids("<image>")
    assert cap.config.text_config.vocab_size == lm.config.vocab_size == image + 1
    assert len(proc.tokenizer) == image + 1 + 1152
    ids = proc.tokenizer(list(world.captions.text))["input_ids"]
    assert max(map(max, ids)) < image   # every text token is an output of the models
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


# --------------------------------------------------------------------------- staged training
def test_cell_targets_label_each_patch_with_its_object(world):
    from tokenbook.worlds.render import COLOURS, SHAPES

    sid = world.captions.scene_id.iloc[0]
    t3 = cell_targets(world, [sid], 3)[0]             # one patch per grid cell
    objs = {(o.row, o.col): o for o in world.scenes[sid].objects}
    for r in range(3):
        for c in range(3):
            o = objs.get((r, c))
            want = [0, 0, 0] if o is None else [SHAPES.index(o.shape) + 1,
                                                list(COLOURS).index(o.colour) + 1,
                                                ("small", "big").index(o.size) + 1]
            assert t3[r * 3 + c].tolist() == want, (r, c)
    # finer patches: every patch of a cell carries that cell's label
    t6 = cell_targets(world, [sid], 6)[0].reshape(6, 6, 3)
    assert torch.equal(t6[::2, ::2].reshape(9, 3), t3)
    assert torch.equal(t6[1::2, 1::2].reshape(9, 3), t3)


@pytest.mark.parametrize("lengths", [[30, 31, 60, 29], [5] * 8, [9, 40, 41, 8, 39, 10],
                                     list(range(1, 33)), [7]])
def test_length_groups_partition_the_batch_by_length(lengths):
    groups = length_groups(lengths)
    flat = sorted(j for g in groups for j in g)
    assert flat == list(range(len(lengths)))            # every example exactly once
    assert 1 <= len(groups) <= 2 and all(g == sorted(g) for g in groups)
    area = sum(len(g) * max(lengths[j] for j in g) for g in groups)
    whole = len(lengths) * max(lengths)
    if len(groups) == 2:
        short, long_ = groups
        assert max(lengths[j] for j in short) <= min(lengths[j] for j in long_)
        assert whole - area >= MIN_PADDING_SAVED * whole
        # no other cut of the length order pads fewer positions
        ranked = sorted(lengths)
        assert area == min(c * ranked[c - 1] + (len(ranked) - c) * ranked[-1]
                           for c in range(1, len(ranked)))


def test_length_groups_give_the_whole_batchs_loss(world):
    """The training step's loss over the length groups equals the whole batch's (same tokens)."""
    tok = train_tokenizer(list(training_examples(world, "train").text), vocab_size=300)
    proc = build_processor(tok, 48, 16)
    cap = build_captioner(proc, TINY, seed=0)
    ex = training_examples(world, "train")
    enc = _encode(world, ex, proc)
    kinds = ex["kind"].to_numpy()
    idx = ([i for i in range(len(ex)) if kinds[i] == "caption"][:12]
           + [i for i in range(len(ex)) if kinds[i] == "story+context"][-4:])
    groups = length_groups([_length(enc, i) for i in idx])
    assert len(groups) == 2    # the stories with their context pad the captions otherwise
    with torch.no_grad():
        whole, n = _sum_nll(cap, _batch(enc, idx, proc.tokenizer, n_image=proc.image_seq_length))
        parts = [_sum_nll(cap, _batch(enc, [idx[j] for j in g], proc.tokenizer,
                                      n_image=proc.image_seq_length)) for g in groups]
        grouped, one_batch = (float(_batch_loss(cap, enc, idx, proc.tokenizer,
                                                n_image=proc.image_seq_length,
                                                length_grouped=g)) for g in (True, False))
    assert sum(c for _, c in parts) == n
    assert float(sum(t for t, _ in parts)) / n == pytest.approx(float(whole) / n, rel=1e-5)
    assert one_batch == pytest.approx(float(whole) / n, rel=1e-6)
    assert grouped == pytest.approx(one_batch, rel=1e-5)


def test_train_updates_only_the_trainable_modules(world):
    tok = train_tokenizer(list(world.captions.text), vocab_size=300)
    proc = build_processor(tok, 48, 16)
    cap = build_captioner(proc, TINY, seed=0)
    enc = _encode(world, training_examples(world, "train").head(16), proc)
    before = {k: v.clone() for k, v in cap.state_dict().items()}
    projector = cap.model.multi_modal_projector
    _train(cap, enc, proc.tokenizer, TINY, n_image=proc.image_seq_length, seed=0, desc="t",
           progress=False, trainable=[projector])
    after = cap.state_dict()
    changed = {k for k in before if not torch.equal(before[k], after[k])}
    assert changed and all(k.startswith("model.multi_modal_projector") for k in changed), changed
    assert all(p.requires_grad for p in cap.parameters())  # nothing left frozen


@pytest.fixture
def one_torch_thread():
    """Training at one torch thread, as ``train_grounded_models`` trains (``TrainConfig.threads``).
    At torch's default of two threads on a 2-core machine (``make unit``) the two ways below
    end with weights that differ in their last bits (measured 4 Dec 2026); the bitwise promise
    is the one-thread one."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def test_locked_tower_states_train_the_same_weights(world, one_torch_thread):
    """Reading the locked tower's states computed once gives the very weights (and losses) of
    running the tower on every batch (at one torch thread, as the models train); a trainable
    tower with them is refused."""
    tok = train_tokenizer(list(world.captions.text), vocab_size=300)
    proc = build_processor(tok, 48, 16)
    cap = build_captioner(proc, TINY, seed=0)
    enc = _encode(world, training_examples(world, "train"), proc)
    tower = cap.model.vision_tower
    pretrain_vision_tower(tower, enc.pixel_values, cell_targets(world, enc.scene_ids, 3),
                          steps=3, seed=0)
    states = locked_tower_states(tower, enc.pixel_values, batch_size=5)
    with torch.no_grad():
        assert torch.equal(states, tower(pixel_values=enc.pixel_values).last_hidden_state)
    assert states.shape == (len(enc.scene_ids), proc.image_seq_length, TINY.hidden)
    per_batch, once = copy.deepcopy(cap), copy.deepcopy(cap)
    losses = [_train(m, e, proc.tokenizer, TINY, n_image=proc.image_seq_length, seed=1,
                     desc="", progress=False,
                     trainable=[m.model.multi_modal_projector, m.model.language_model])
              for m, e in ((per_batch, enc), (once, replace(enc, tower_states=states)))]
    assert losses[0] == losses[1]
    a, b = per_batch.state_dict(), once.state_dict()
    assert all(torch.equal(a[k], b[k]) for k in a)
    assert not torch.equal(a["model.multi_modal_projector.linear.weight"],
                           cap.state_dict()["model.multi_modal_projector.linear.weight"])
    with pytest.raises(ValueError, match="vision tower is among the trainable"):
        _train(once, replace(enc, tower_states=states), proc.tokenizer, TINY,
               n_image=proc.image_seq_length, seed=1, desc="", progress=False)


def test_vision_pretraining_makes_objects_linearly_readable():
    """A random tower's patch features hide shape (its layers mix patches); stage 0 fixes that."""
    w = make_world(seed=3, n_languages=1, n_scenes=240, n_stories=3, captions_per_scene=1)
    tok = train_tokenizer(list(w.captions.text), vocab_size=200)
    proc = build_processor(tok, 48, 16)
    tower = build_captioner(proc, TrainConfig(hidden=32, heads=2, layers=2), seed=0) \
        .model.vision_tower
    scenes = sorted(w.captions.scene_id.unique())
    pixels = proc.image_processor([w.image(s) for s in scenes], return_tensors="pt")[
        "pixel_values"]
    targets = cell_targets(w, scenes, 3)
    train = torch.arange(len(scenes)) < 180
    before = probe_vision_tower(tower, pixels, targets, train)
    losses = pretrain_vision_tower(tower, pixels[train], targets[train], steps=150,
                                   batch_size=32, seed=0)
    after = probe_vision_tower(tower, pixels, targets, train)
    assert np.mean(losses[-10:]) < 0.5 * np.mean(losses[:10])
    assert after["shape"] > 0.8 and after["shape"] > before["shape"] + 0.25, (before, after)
    assert after["colour"] > 0.9 and after["size"] > 0.9, after
    assert pretrain_vision_tower(tower, pixels, targets, steps=0) == []


def test_text_lm_in_a_second_process_gives_the_same_weights(world, tmp_path, monkeypatch):
    """``parallel`` only changes where the text LM trains: same weights, same cache entry."""
    monkeypatch.setenv("TOKENBOOK_CACHE", str(tmp_path / "a"))
    forked = train_grounded_models(world, seed=0, config=replace(TINY, parallel=True),
                                   progress=False)
    monkeypatch.setenv("TOKENBOOK_CACHE", str(tmp_path / "b"))
    inline = train_grounded_models(world, seed=0, config=replace(TINY, parallel=False),
                                   progress=False)
    assert forked.log["text_lm_in_second_process"] and not inline.log["text_lm_in_second_process"]
    assert forked.root.name == inline.root.name  # the cache key ignores ``parallel``
    for sub in ("captioner", "text_lm"):
        a = load_file(forked.root / sub / "model.safetensors")
        b = load_file(inline.root / sub / "model.safetensors")
        assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a), sub


def test_story_documents_train_every_sentence_after_its_pages(world):
    corpus = world.story_corpus(3)
    docs = story_documents(corpus)
    assert len(docs) == 3 * len(world.languages)   # one document per story and language
    assert set(docs.kind) == {"story-document"} and docs.scene_id.isna().all()
    first = corpus[(corpus.lang == docs.lang.iloc[0]) & (corpus.story_id == "corpus00000")]
    assert docs.text.iloc[0] == "\n".join(first.sort_values("sent_idx").text)
    # token for token, the text LM's D input of the last sentence (its pages, then it)
    tok = train_tokenizer(list(world.captions.text) + list(world.stories.text), vocab_size=300)
    proc = build_processor(tok, 32, 8)
    enc = _encode(world, docs, proc)
    assert enc.pixel_values.numel() == 0   # text only: no image rendered
    sents = list(first.sort_values("sent_idx").text)
    whole = tok(text_prefix(docs.lang.iloc[0]) + docs.text.iloc[0],
                add_special_tokens=False)["input_ids"]
    as_d = tok(text_prefix(docs.lang.iloc[0], sents[:-1]) + sents[-1],
               add_special_tokens=False)["input_ids"]
    assert whole == as_d == enc.prefix_ids[0] + enc.text_ids[0]
    assert _batch(enc, [0, 1], tok, n_image=None)["input_ids"].shape[0] == 2
    with pytest.raises(ValueError, match="text-only examples"):   # never a captioner batch
        _batch(enc, [0, 1], tok, n_image=proc.image_seq_length)


def test_story_stage_changes_the_decoder_and_only_its_own_keys(world, trained, tmp_path,
                                                              monkeypatch):
    with pytest.raises(ValueError, match="go together"):
        TrainConfig(story_steps=5)
    with pytest.raises(ValueError, match="story_steps"):
        TrainConfig(story_steps=-1, story_documents=2)
    assert "story_steps" not in _params(world, TINY, 0)["train"]   # earlier keys unchanged
    monkeypatch.setenv("TOKENBOOK_CACHE", str(tmp_path))
    cfg = replace(TINY, story_steps=4, story_documents=2)
    assert _params(world, cfg, 0)["train"]["story_steps"] == 4
    read = train_grounded_models(world, seed=0, config=cfg, progress=False)
    assert read.root.name != trained.root.name
    a = load_file(trained.root / "text_lm" / "model.safetensors")
    b = load_file(read.root / "text_lm" / "model.safetensors")
    assert any(not torch.equal(a[k], b[k]) for k in a)   # the stories were read


def _old_batch_order(n: int, batch_size: int, steps: int, seed: int) -> list[list[int]]:
    """The batches _train drew before story_share existed (one permutation at a time)."""
    g = torch.Generator().manual_seed(seed)
    order, pos, out = torch.randperm(n, generator=g), 0, []
    for _ in range(steps):
        if pos + batch_size > n:
            order, pos = torch.randperm(n, generator=g), 0
        out.append(order[pos:pos + batch_size].tolist())
        pos += batch_size
    return out


def _story_encoding(world):
    ex = training_examples(world, "train")
    tok = train_tokenizer(list(world.captions.text) + list(world.stories.text), vocab_size=300)
    return ex, _encode(world, ex, build_processor(tok, 32, 8))


def test_batches_without_a_story_share_are_those_drawn_before(world):
    ex, enc = _story_encoding(world)
    assert enc.is_story.tolist() == ex.kind.isin(["story", "story+context"]).tolist()
    assert 0 < enc.is_story.sum() < len(ex)   # both kinds: the share would apply
    gen = _batch_indices(enc, replace(TINY, batch_size=8), torch.Generator().manual_seed(5))
    assert [next(gen) for _ in range(40)] == _old_batch_order(len(ex), 8, 40, 5)


def test_a_story_share_fixes_the_story_sentences_in_every_batch(world):
    ex, enc = _story_encoding(world)
    cfg = replace(TINY, batch_size=10, story_share=0.3)
    gen = _batch_indices(enc, cfg, torch.Generator().manual_seed(1))
    batches = [next(gen) for _ in range(60)]
    stories = np.flatnonzero(enc.is_story)
    captions = np.flatnonzero(~enc.is_story)
    assert all(sum(enc.is_story[b]) == 3 and len(b) == 10 for b in batches)
    # each kind from its own shuffled passes: no caption twice within a pass over the captions
    per_pass = len(captions) // 7
    first_pass = [i for b in batches[:per_pass] for i in b if not enc.is_story[i]]
    assert len(set(first_pass)) == len(first_pass) == 7 * per_pass
    drawn = {i for b in batches for i in b if enc.is_story[i]}
    assert drawn == set(stories.tolist())   # full passes over the story sentences
    # one kind only (the story documents' stage): the share does not apply
    docs = replace(enc, is_story=np.zeros(len(ex), dtype=bool))
    gen = _batch_indices(docs, cfg, torch.Generator().manual_seed(1))
    assert [next(gen) for _ in range(5)] == _old_batch_order(len(ex), 10, 5, 1)


def test_story_share_checks_and_cache_key(world):
    for bad in (-0.1, 1.0, 0.01):   # 0.01 of 32 rounds to no story sentence at all
        with pytest.raises(ValueError, match="story_share"):
            TrainConfig(story_share=bad)
    assert "story_share" not in _params(world, TINY, 0)["train"]   # earlier keys unchanged
    assert _params(world, replace(TINY, story_share=0.25), 0)["train"]["story_share"] == 0.25


def test_model_vocab_size_refuses_other_tokens_after_the_image(world):
    tok = train_tokenizer(list(world.captions.text), vocab_size=300)
    with pytest.raises(ValueError, match="no <image> token"):
        model_vocab_size(tok)
    proc = build_processor(tok, 32, 8)
    proc.tokenizer.add_tokens(["<extra>"])
    with pytest.raises(ValueError,
                       match=r"other than PaliGemma's <loc>/<seg> tokens: \['<extra>'\]"):
        model_vocab_size(proc.tokenizer)
