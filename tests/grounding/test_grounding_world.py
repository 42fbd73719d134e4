"""In the tiny world, where the truth is known, nouns and adjectives must come out more grounded
than determiners and adpositions in every language. Runs the real pipeline on the default
world's cached models (trained on first use; the book build trains them too)."""

import pytest

from tokenbook import grounding as gr

# ``chapter`` too: share the book's cache (_build/cache) with the chapters that train these models
pytestmark = [pytest.mark.slow, pytest.mark.chapter]


def content_beats_function(words, lang):
    """min(NOUN, ADJ) > max(DET, ADP) in ``lang`` (some languages lack DET: articles are a
    typological parameter; every language has NOUN, ADJ and adpositions or case markers)."""
    s = gr.class_summary(words[words["lang"] == lang], n_boot=50, min_count=10)
    s = s.set_index("upos")["mean"]
    function = [s[c] for c in ("DET", "ADP") if c in s.index]
    assert "NOUN" in s.index and "ADJ" in s.index and function, (lang, s)
    return min(s["NOUN"], s["ADJ"]) > max(function)


def test_nouns_and_adjectives_beat_determiners_and_adpositions():
    from tokenbook.data.tagging import GoldSegmenter
    from tokenbook.models.paligemma import train_grounded_models
    from tokenbook.surprisal_tables import caption_word_table
    from tokenbook.worlds.scenes import make_world

    world = make_world(0)
    models = train_grounded_models(world, seed=0, progress=False)
    captions = world.captions[world.captions["split"] == "test"]
    table = caption_word_table(captions, image_fn=world.image, captioner=models.captioner_dir,
                               text_lm=models.text_lm_dir,
                               segmenter=GoldSegmenter.from_frame(world.captions),
                               dataset="tiny", progress=False)
    words = gr.add_groundedness(table)
    assert set(words["lang"]) == set(world.languages)
    for lang in world.languages:
        assert content_beats_function(words, lang), lang

    # the property discriminates: a wrong sign breaks it ...
    flipped = words.assign(groundedness=-words["groundedness"])
    assert not any(content_beats_function(flipped, lang) for lang in world.languages)
    # ... and so do tags misaligned by one word within each caption
    shifted = words.copy()
    shifted["upos"] = shifted.groupby("unit_id")["upos"].shift(1).fillna("X")
    assert not all(content_beats_function(shifted, lang) for lang in world.languages)
