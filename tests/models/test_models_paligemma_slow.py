"""The default tiny models: the captioner uses the image (slow: trains once, then cached).

Marked ``chapter`` as well as ``slow`` so that it shares the book's cache (``_build/cache``):
the chapters train exactly these models (``train_grounded_models(make_world(seed=0), seed=0)``).
"""

import numpy as np
import pandas as pd
import pytest

from tokenbook.models.paligemma import (image_prefix, load_captioner, load_text_lm, text_prefix,
                                        train_grounded_models)
from tokenbook.worlds.scenes import make_world

pytestmark = [pytest.mark.slow, pytest.mark.chapter]


@pytest.fixture(scope="module")
def default():
    world = make_world(seed=0)
    return world, train_grounded_models(world, seed=0, progress=False)


def test_captioner_beats_text_lm_in_every_language(default):
    world, models = default
    s = models.summary()
    assert set(s.lang) == set(world.languages)
    assert (s.ppl_captioner < s.ppl_text_lm).all(), s


def test_content_words_less_surprising_with_the_image(default):
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
    df = pd.DataFrame(dict(lang=lang, upos=upos, s_P=wc.surprisal.values,
                           s_U=wt.surprisal.values)).dropna()
    content = df[df.upos.isin(["NOUN", "ADJ"])]
    assert len(content) > 100
    assert content.s_P.mean() < content.s_U.mean()
    by_lang = content.groupby("lang")[["s_P", "s_U"]].mean()
    assert (by_lang.s_P < by_lang.s_U).all(), by_lang
    # groundedness (s_U - s_P) of nouns exceeds that of the words the image cannot predict
    g = (df.s_U - df.s_P).groupby(df.upos).mean()
    assert g["NOUN"] > g[["CCONJ", "ADV"]].max(), g
