"""The grounded chapters' tiny models: the captioner uses the image (slow: trains once, then
cached).

Root seed 0's world and models exactly as the chapters train them (the session fixture
``chapter_grounded_models`` in tests/conftest.py, in the book's cache), so `make test` and the
book build train them once between them.
"""


import numpy as np
import pandas as pd
import pytest

from tokenbook.models.paligemma import image_prefix, load_captioner, load_text_lm, text_prefix

pytestmark = [pytest.mark.slow, pytest.mark.chapter]


FUNCTIONAL = ["CCONJ", "ADV", "DET", "ADP", "PRON", "AUX"]  # closed classes; captions lack ADV


@pytest.fixture(scope="module")
def default(chapter_grounded_models):
    return chapter_grounded_models


def test_captioner_beats_text_lm_on_heldout_captions(default):
    world, models = default
    h = models.heldout[models.heldout.kind == "caption"]
    assert set(h.lang) == set(world.languages)
    pooled = (h.nll_captioner * h.n_tokens).sum() / h.n_tokens.sum()
    pooled_lm = (h.nll_text_lm * h.n_tokens).sum() / h.n_tokens.sum()
    assert pooled < pooled_lm, h
    assert (h.ppl_captioner < h.ppl_text_lm).sum() >= len(h) - 1, h


def test_vision_tower_learned_the_objects(default):
    _, models = default
    probe = models.log["vision_probe_accuracy"]  # held-out (validation) scenes, linear read-out
    assert set(probe) == {"shape", "colour", "size"}
    assert min(probe.values()) > 0.9, probe


def test_captioner_beats_text_lm_in_every_language(default):
    world, models = default
    s = models.summary()
    assert (s.ppl_captioner < s.ppl_text_lm).all(), s


@pytest.fixture(scope="module")
def words(default):
    """Word surprisals of 30 held-out captions per language under P (captioner) and U."""
    from tokenbook.scoring import score_image_texts, score_texts, word_surprisals

    world, models = default
    caps = world.captions[world.captions.split == "test"]
    caps = caps.groupby("lang").head(30).reset_index(drop=True)
    texts = list(caps.text)
    model, proc = load_captioner(models.captioner_dir)
    lm, tok = load_text_lm(models.text_lm_dir)
    tc = score_image_texts(model, proc, [world.image(s) for s in caps.scene_id], texts,
                           prefixes=[image_prefix(lang) for lang in caps.lang], progress=False)
    tt = score_texts(lm, tok, texts, prefixes=[text_prefix(lang) for lang in caps.lang],
                     progress=False)
    spans = [list(map(tuple, s)) for s in caps.word_spans]
    wc = word_surprisals(tc, texts, words=spans)
    wt = word_surprisals(tt, texts, words=spans)
    upos = np.concatenate([np.asarray(u) for u in caps.upos])
    lang = np.concatenate([[lg] * len(u) for lg, u in zip(caps.lang, caps.upos)])
    return pd.DataFrame(dict(lang=lang, upos=upos, s_P=wc.surprisal.values,
                             s_U=wt.surprisal.values)).dropna()


def test_content_words_less_surprising_with_the_image(words):
    content = words[words.upos.isin(["NOUN", "ADJ"])]
    assert len(content) > 100
    assert content.s_P.mean() < content.s_U.mean()
    g = (words.s_U - words.s_P).groupby(words.upos).mean()  # groundedness, nats
    functional = g.reindex(FUNCTIONAL).dropna()  # the classes these captions use
    assert len(functional) >= 2, g
    assert g["ADJ"] > functional.max(), g


def test_nouns_grounded(words):
    g = (words.s_U - words.s_P).groupby(words.upos).mean()
    assert g["NOUN"] > g.reindex(FUNCTIONAL).dropna().max(), g
    # the image shows shape, colour and size, not the posture a verb names
    assert min(g["NOUN"], g["ADJ"]) > g["VERB"], g
