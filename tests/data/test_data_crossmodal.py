"""Crossmodal-3600 loader on a tiny fixture in the release layout."""

import json

import pytest
from PIL import Image

from tokenbook.data.crossmodal import (HALEY_LANGUAGES, XM3600_LANGUAGES, CrossmodalError,
                                       crossmodal_image, load_crossmodal)


def _entry(caps):
    return {"caption": caps, "caption/tokenized": [c.replace(",", " ,") for c in caps],
            "caption/tokenized/lowercase": [c.lower() for c in caps]}


@pytest.fixture
def xm(tmp_path):
    (tmp_path / "images").mkdir()
    recs = [
        {"image/key": "000a1", "image/locale": "en", "en": _entry(["A dog, running", "A dog"]),
         "de": _entry(["Ein Hund"])},
        {"image/key": "000b2", "image/locale": "de", "en": _entry(["", "Two cats"]),
         "de": _entry(["Zwei Katzen"])},
        {"image/key": "000c3", "image/locale": "en", "en": _entry(["A house"])},  # no "de"
        {"image/key": "000d4", "image/locale": "en", "en": _entry(["No image here"]),
         "de": _entry(["Kein Bild"])},
    ]
    (tmp_path / "captions.jsonl").write_text("\n".join(json.dumps(r) for r in recs) + "\n")
    for key in ("000a1", "000b2", "000c3"):
        Image.new("RGB", (8, 8), (200, 10, 10)).save(tmp_path / "images" / f"{key}.jpg")
    return tmp_path


def test_reads_tokenized_captions_and_counts_skips(xm):
    with pytest.warns(UserWarning, match="skipped"):
        df = load_crossmodal(xm, ["en", "de"])
    assert set(df.columns) >= {"image_key", "lang", "caption_idx", "text", "image_path"}
    en = df[df.lang == "en"]
    assert "A dog , running" in set(en.text)  # caption/tokenized, not caption
    assert "000d4" not in set(df.image_key)
    sk = df.attrs["skipped"]
    assert sk == {"missing_image": 2, "missing_language": 1, "empty_caption": 1}
    img = crossmodal_image(df.image_path.iloc[0])
    assert img.mode == "RGB" and img.size == (8, 8)


def test_other_field_and_text_only(xm):
    with pytest.warns(UserWarning):
        df = load_crossmodal(xm, ["en"], field="caption", require_images=False)
    assert "A dog, running" in set(df.text)
    assert "No image here" in set(df.text)


def test_errors(xm, tmp_path):
    with pytest.raises(CrossmodalError, match="unknown language"):
        load_crossmodal(xm, ["xx"])
    with pytest.raises(CrossmodalError, match="strict"):
        load_crossmodal(xm, ["en"], strict=True)
    with pytest.raises(CrossmodalError, match="captions.jsonl"):
        load_crossmodal(tmp_path / "nowhere")
    with pytest.raises(FileNotFoundError):
        crossmodal_image(xm / "images" / "nope.jpg")


def test_language_lists():
    assert len(XM3600_LANGUAGES) == 36 and len(HALEY_LANGUAGES) == 30
    assert "quz" not in HALEY_LANGUAGES and "en" in HALEY_LANGUAGES
