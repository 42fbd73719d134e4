"""Paper-scale paths on tiny fixtures in the releases' formats: XM3600 and Bloom-VIST."""

import json

import numpy as np
import pytest
from PIL import Image

from tokenbook.grounded import tables as stab
from tokenbook.uid_grounding import measures as uid
from tokenbook.data.bloom_vist import bloom_sentences, load_bloom_vist
from tokenbook.data.crossmodal import load_crossmodal
from tokenbook.scoring import _tiny


@pytest.fixture(scope="module")
def models():
    cap, proc = _tiny.tiny_paligemma(seed=0, image_size=16, patch=8)
    lm = _tiny.tiny_causal("gemma", vocab_size=len(proc.tokenizer), seed=1,
                           max_position_embeddings=128)
    cap.config._name_or_path = "tiny-captioner-realdata"
    lm.config._name_or_path = "tiny-lm-realdata"
    return (cap, proc), (lm, proc.tokenizer)


def _img(path, seed):
    rng = np.random.default_rng(seed)
    Image.fromarray(rng.integers(0, 255, (16, 16, 3), dtype=np.uint8)).save(path)


def test_crossmodal_fixture_to_uid(models, tmp_path, monkeypatch):
    monkeypatch.setenv("TOKENBOOK_CACHE", str(tmp_path / "cache"))
    (tmp_path / "images").mkdir()
    caps = {"k1": ["the dog runs in the park", "a black dog jumps"],
            "k2": ["two birds sing in the old tree", "the sun sets"]}
    with open(tmp_path / "captions.jsonl", "w") as fh:
        for i, (key, cs) in enumerate(caps.items()):
            _img(tmp_path / "images" / f"{key}.jpg", i)
            rec = {"image/key": key, "image/locale": "en",
                   "en": {"caption": cs, "caption/tokenized": cs,
                          "caption/tokenized/lowercase": cs}}
            fh.write(json.dumps(rec) + "\n")

    def seg(text, lang):
        out, pos = [], 0
        for w in text.split():
            a = text.index(w, pos)
            out.append((w, "NOUN" if w in ("dog", "park", "birds", "tree", "sun") else "X",
                        a, a + len(w)))
            pos = a + len(w)
        return out

    units = stab.crossmodal_units(load_crossmodal(tmp_path, langs=["en"]))
    assert units.caption_id.tolist() == ["k1-en-0", "k1-en-1", "k2-en-0", "k2-en-1"]
    t = stab.caption_word_table(units, image_fn=stab.open_image, captioner=models[0],
                                text_lm=models[1], segmenter=seg, segmenter_id="ws",
                                dataset="xm3600", progress=False)
    assert len(t) == 6 + 4 + 7 + 3 and set(t.unit_id) == set(units.caption_id)
    assert np.isfinite(t[["s_U", "s_P"]].to_numpy()).all()
    m = uid.unit_measures(t)
    assert m.n_units == 4 and m.n_excluded == 0
    with pytest.raises(ValueError, match="missing column"):
        stab.crossmodal_units(units.drop(columns="image_path"))


def test_bloom_fixture_to_story_table(models, tmp_path, monkeypatch):
    monkeypatch.setenv("TOKENBOOK_CACHE", str(tmp_path / "cache"))
    (tmp_path / "img").mkdir()
    story = [{"image_id": f"p{i}", "image_url": "", "story_index": i, "story_id": "st1",
              "text": t} for i, t in enumerate(["the dog runs. the cat sleeps.",
                                                "two birds sing in the tree."])]
    for i in range(2):
        _img(tmp_path / "img" / f"p{i}.png", 10 + i)
    path = tmp_path / "bloom.jsonl"
    path.write_text(json.dumps({"title": "t", "license": "cc-by", "album_id": "a",
                                "story": story}) + "\n")
    pages = load_bloom_vist(path, "eng", images_dir=tmp_path / "img")
    units = stab.bloom_units(bloom_sentences(pages))
    assert units.para_idx.tolist() == [0, 0, 1] and (units.n_sents == 3).all()
    t = stab.story_word_table(units, image_fn=stab.open_image, captioner=models[0],
                              text_lm=models[1], dataset="bloom-vist", progress=False,
                              segmenter=lambda text, lang: _ws(text), segmenter_id="ws")
    assert "para_idx" in t and t.groupby("sent_idx").para_idx.first().tolist() == [0, 0, 1]
    assert t.loc[t.sent_idx == 0, "s_D"].isna().all()
    assert np.isfinite(t.loc[t.sent_idx > 0, ["s_D", "s_PD"]].to_numpy()).all()
    para = uid.story_unit_measures(t, level="paragraph", min_words=2)
    assert set(para.table.para_idx) == {0, 1}
    no_img = load_bloom_vist(path, "eng")
    with pytest.raises(ValueError, match="images_dir"):
        stab.bloom_units(bloom_sentences(no_img))


def _ws(text):
    out, pos = [], 0
    for w in text.split():
        a = text.index(w, pos)
        out.append((w, "X", a, a + len(w)))
        pos = a + len(w)
    return out
