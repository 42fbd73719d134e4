"""In the tiny world, where the truth is known, nouns and adjectives must come out more grounded
than determiners and adpositions in every language. Runs the real pipeline on root seed 0's
models as the grounded chapters train them (trained on first use, in the book's cache, which the
book build then reuses)."""

import pytest

from tokenbook.groundedness_typology import measures as gr

# ``chapter`` too: share the book's cache (_build/cache) with the chapters that train these models
pytestmark = [pytest.mark.slow, pytest.mark.chapter]


FUNCTION_CLASSES = ("DET", "ADP", "PRON", "AUX", "CCONJ")


def content_beats_function(words, lang):
    """min(NOUN, ADJ) > max(closed classes) in ``lang``, over the closed classes with ≥ 10
    held-out tokens there; None when it has none (articles and adpositions are typological
    parameters, and a language written without spaces has few held-out words)."""
    s = gr.class_summary(words[words["lang"] == lang], n_boot=50, min_count=10)
    s = s.set_index("upos")["mean"]
    function = [s[c] for c in FUNCTION_CLASSES if c in s.index]
    assert "NOUN" in s.index and "ADJ" in s.index, (lang, s)
    return min(s["NOUN"], s["ADJ"]) > max(function) if function else None


def test_nouns_and_adjectives_beat_determiners_and_adpositions(chapter_grounded_models):
    from tokenbook.data.tagging import GoldSegmenter
    from tokenbook.grounded.tables import caption_word_table

    world, models = chapter_grounded_models
    captions = world.captions[world.captions["split"] == "test"]
    table = caption_word_table(captions, image_fn=world.image, captioner=models.captioner_dir,
                               text_lm=models.text_lm_dir,
                               segmenter=GoldSegmenter.from_frame(world.captions),
                               dataset="tiny", progress=False)
    words = gr.add_groundedness(table)
    assert set(words["lang"]) == set(world.languages)
    verdicts = {lang: content_beats_function(words, lang) for lang in world.languages}
    compared = {lang: v for lang, v in verdicts.items() if v is not None}
    assert len(compared) >= len(world.languages) - 1, verdicts
    assert all(compared.values()), verdicts

    # the property discriminates: a wrong sign breaks it ...
    flipped = words.assign(groundedness=-words["groundedness"])
    assert not any(content_beats_function(flipped, lang) for lang in compared)
    # ... and so do tags misaligned by one word within each caption
    shifted = words.copy()
    shifted["upos"] = shifted.groupby("unit_id")["upos"].shift(1).fillna("X")
    assert not all(content_beats_function(shifted, lang) for lang in compared)
