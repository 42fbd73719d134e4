"""COCO-35L text loader on tiny fixtures in the release format (.jsonl and .jsonl.bz2)."""

import bz2
import json

import pytest

from tokenbook.data.coco35l import coco35l_training_texts, load_coco35l_text
from tokenbook.data.crossmodal import CrossmodalError

RECS = [
    dict(image_id=1, src_lang="en", trg_lang="de", caption_tokenized="a dog runs",
         translation_tokenized="ein Hund rennt", backtranslation_tokenized="a dog runs"),
    dict(image_id=1, src_lang="en", trg_lang="fr", caption_tokenized="a dog runs",
         translation_tokenized="un chien court", backtranslation_tokenized="a dog runs"),
    dict(image_id=2, src_lang="en", trg_lang="de", caption_tokenized="two cats",
         translation_tokenized="", backtranslation_tokenized=""),
    dict(image_id=3, src_lang="en", trg_lang="xx", caption_tokenized="a tree",
         translation_tokenized="??", backtranslation_tokenized="a tree"),
]


@pytest.fixture(params=["jsonl", "jsonl.bz2"])
def coco(tmp_path, request):
    text = "\n".join(json.dumps(r) for r in RECS) + "\n"
    path = tmp_path / f"coco_mt_dev.{request.param}"
    if request.param.endswith("bz2"):
        path.write_bytes(bz2.compress(text.encode()))
    else:
        path.write_text(text)
    return path


def test_reads_translations_and_deduplicated_source(coco):
    with pytest.warns(UserWarning, match="1 empty text, 1 unknown language"):
        df = load_coco35l_text(coco)
    assert sorted(df[df.source == "translation"].text) == ["ein Hund rennt", "un chien court"]
    src = df[df.source == "source"]
    assert sorted(src.text) == ["a dog runs", "two cats"]  # deduplicated, unknown-lang row skipped
    texts = coco35l_training_texts(df)
    assert "caption de\nein Hund rennt" in texts


def test_language_filter_and_errors(coco, tmp_path):
    with pytest.warns(UserWarning):
        df = load_coco35l_text(coco, ["fr"], include_source=False)
    assert list(df.text) == ["un chien court"]
    with pytest.raises(CrossmodalError, match="unknown COCO-35L"):
        load_coco35l_text(coco, ["quz"])
    with pytest.raises(CrossmodalError, match="strict"):
        load_coco35l_text(coco, strict=True)
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps({"image_id": 1, "text": "x"}) + "\n")
    with pytest.raises(CrossmodalError, match="missing field"):
        load_coco35l_text(bad)
