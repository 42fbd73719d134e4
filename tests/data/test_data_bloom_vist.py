"""Bloom-VIST loader on tiny local datasets in the Hub schema (save_to_disk and JSON lines)."""

import json

import datasets
import pytest
from PIL import Image

from tokenbook.data.bloom_vist import BloomVistError, bloom_sentences, load_bloom_vist

STORIES = [
    dict(title="The red ball", license="cc-by", album_id="alb1", story=[
        dict(image_id="im2", image_url="https://x/im2.jpg", story_index=1, story_id="st1",
             text="It rolls away. Then it stops!"),
        dict(image_id="im1", image_url="https://x/im1.jpg", story_index=0, story_id="st1",
             text="A girl has a red ball."),
        dict(image_id="im3", image_url="https://x/im3.jpg", story_index=2, story_id="st1",
             text="   "),
    ]),
    dict(title="Rain", license="cc-by-nc", album_id="alb2", story=[
        dict(image_id="im9", image_url="https://x/im9.jpg", story_index=0, story_id="st2",
             text="Rain falls."),
    ]),
]


@pytest.fixture
def disk(tmp_path):
    dd = datasets.DatasetDict({"test": datasets.Dataset.from_list(STORIES)})
    dd.save_to_disk(str(tmp_path / "bloom"))
    return tmp_path / "bloom"


def test_save_to_disk_copy(disk):
    with pytest.warns(UserWarning, match="1 empty text"):
        pages = load_bloom_vist(disk, "eng", split="test")
    st1 = pages[pages.story_id == "st1"]
    assert list(st1.image_id) == ["im1", "im2"]  # story_index order, empty page skipped
    assert list(st1.page_idx) == [0, 1]
    sents = bloom_sentences(pages)
    s1 = sents[sents.story_id == "st1"]
    assert list(s1.text) == ["A girl has a red ball.", "It rolls away.", "Then it stops!"]
    assert list(s1.sent_idx) == [0, 1, 2] and list(s1.sent_in_page) == [0, 0, 1]
    assert list(s1.image_id) == ["im1", "im2", "im2"]


def test_jsonl_copy_and_images(tmp_path):
    path = tmp_path / "bloom.jsonl"
    path.write_text("\n".join(json.dumps(s) for s in STORIES) + "\n")
    imgs = tmp_path / "images"
    imgs.mkdir()
    Image.new("RGB", (4, 4)).save(imgs / "im1.jpg")
    with pytest.warns(UserWarning, match="missing image"):
        pages = load_bloom_vist(path, "eng", images_dir=imgs)
    assert list(pages.image_id) == ["im1"]
    assert pages.attrs["skipped"] == {"empty_text": 1, "missing_image": 2}
    with pytest.raises(BloomVistError, match="strict"):
        load_bloom_vist(path, "eng", images_dir=imgs, strict=True)


def test_schema_and_hub_errors(tmp_path):
    path = tmp_path / "other.jsonl"
    path.write_text(json.dumps({"title": "x", "pages": []}) + "\n")
    with pytest.raises(BloomVistError, match="missing column"):
        load_bloom_vist(path, "eng")
    with pytest.raises(BloomVistError, match="gated"):  # offline in tests: a clear message
        load_bloom_vist("sil-ai/bloom-vist", "eng")
    with pytest.raises(BloomVistError, match="ISO 639-3"):
        load_bloom_vist(path, "")
