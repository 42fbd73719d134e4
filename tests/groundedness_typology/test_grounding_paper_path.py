"""The paper-scale path on local fixtures: an XM3600 folder in its release layout, the Stanza
adapter (with a hand-made pipeline standing in for Stanza's UD models, including a French
multi-word token), the shared word-table builder and the groundedness analyses. The models are
the default tiny pair from the book's cache (standing in for the PaliGemma checkpoints)."""

import json
from types import SimpleNamespace as NS

import numpy as np
import pytest
from PIL import Image

from tokenbook.groundedness_typology import measures as gr
from tokenbook.data.tagging import StanzaSegmenter

pytestmark = [pytest.mark.slow, pytest.mark.chapter]

LEXICON = {"a": "DET", "un": "DET", "red": "ADJ", "dog": "NOUN", "chien": "NOUN", "runs": "VERB",
           "court": "VERB", "on": "ADP", "grass": "NOUN", "herbe": "NOUN", "l'": "DET"}


def fake_pipeline(lang, processors):
    """Whitespace tokens with UPOS from LEXICON; French "du" is a multi-word token."""
    def run(text):
        tokens, pos = [], 0
        for piece in text.split():
            start = text.index(piece, pos)
            pos = start + len(piece)
            words = ([NS(text="de", upos="ADP"), NS(text="le", upos="DET")] if piece == "du"
                     else [NS(text=piece, upos=LEXICON.get(piece, "X"))])
            tokens.append(NS(text=piece, start_char=start, end_char=pos, words=words))
        return NS(sentences=[NS(tokens=tokens)])
    return run


@pytest.fixture
def xm_folder(tmp_path):
    (tmp_path / "images").mkdir()
    caps = {"en": ["a red dog runs on grass", "a dog runs"], "fr": ["un chien court du herbe"]}
    recs = []
    for i in range(3):
        recs.append({"image/key": f"img{i}", **{lang: {"caption": c, "caption/tokenized": c,
                                                       "caption/tokenized/lowercase": c}
                                                for lang, c in caps.items()}})
        Image.new("RGB", (40, 30), (30 * i, 100, 200)).save(tmp_path / "images" / f"img{i}.jpg")
    (tmp_path / "captions.jsonl").write_text("\n".join(json.dumps(r) for r in recs) + "\n")
    return tmp_path


def test_xm3600_folder_through_stanza_adapter_to_groundedness(xm_folder):
    from tokenbook.data.crossmodal import load_crossmodal
    from tokenbook.models.paligemma import TrainConfig, train_grounded_models
    from tokenbook.grounded.tables import caption_word_table, crossmodal_units, open_image
    from tokenbook.worlds.scenes import make_world

    # the plumbing is under test, not the models' quality: a few steps of a small model
    world = make_world(0, n_languages=2, n_scenes=12, n_stories=3, captions_per_scene=1)
    config = TrainConfig(vocab_size=300, hidden=32, layers=1, heads=2, steps=4, text_steps=2,
                         vision_steps=2, align_steps=2, batch_size=8, warmup=2)
    models = train_grounded_models(world, seed=0, config=config, progress=False)
    xm = crossmodal_units(load_crossmodal(xm_folder, langs=["en", "fr"]))
    seg = StanzaSegmenter(mwt="join", pipeline_factory=fake_pipeline)
    table = caption_word_table(xm, image_fn=open_image, captioner=models.captioner_dir,
                               text_lm=models.text_lm_dir, segmenter=seg,
                               segmenter_id="fake-stanza", dataset="xm3600", cache=False,
                               progress=False)
    words = gr.add_groundedness(table)
    assert len(words) == len(table) and np.isfinite(words["groundedness"]).all()
    du = words[words["word"] == "du"]
    assert len(du) == 3 and (du["upos"] == "ADP+DET").all()  # one segment per MWT, no class
    first = words[words["unit_id"] == words["unit_id"].iloc[0]]
    assert list(first["word"]) == "a red dog runs on grass".split()
    assert list(first["upos"]) == ["DET", "ADJ", "NOUN", "VERB", "ADP", "NOUN"]
    s = gr.class_summary(words, n_boot=20)
    assert {"NOUN", "DET", "VERB"} <= set(s["upos"]) and "ADP+DET" not in set(s["upos"])
