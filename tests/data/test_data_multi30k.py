"""Multi30K loader on a tiny fixture in the release layout (data/task1/raw/{split}.{lang}.gz,
data/task1/image_splits/{split}.txt), gzipped and plain."""

import gzip

import pytest

from tokenbook.data.multi30k import Multi30kError, load_multi30k, multi30k_units

IMAGES = ["1000092795.jpg", "10002456.jpg", "1000268201.jpg"]
CAPTIONS = {
    "en": ["Two young guys with shaggy hair look at their hands.",
           "Several men in hard hats are operating a giant pulley system.",
           "A child in a pink dress is climbing up a set of stairs."],
    "de": ["Zwei junge weiße Männer sind im Freien in der Nähe vieler Büsche.",
           "Mehrere Männer mit Schutzhelmen bedienen ein Antriebsradsystem.",
           "Ein kleines Mädchen klettert in ein Spielhaus aus Holz."],
}


def _write(path, lines, gz):
    text = "".join(line + "\n" for line in lines).encode("utf-8")
    if gz:
        path.with_name(path.name + ".gz").write_bytes(gzip.compress(text))
    else:
        path.write_bytes(text)


def make_release(root, *, gz=True, captions=CAPTIONS, images=IMAGES, split="val"):
    task1 = root / "data" / "task1"
    (task1 / "raw").mkdir(parents=True, exist_ok=True)
    (task1 / "image_splits").mkdir(parents=True, exist_ok=True)
    (task1 / "image_splits" / f"{split}.txt").write_text("".join(i + "\n" for i in images))
    for lang, lines in captions.items():
        _write(task1 / "raw" / f"{split}.{lang}", lines, gz)
    return root


@pytest.mark.parametrize("gz", [True, False])
def test_reads_line_aligned_captions(tmp_path, gz):
    root = make_release(tmp_path, gz=gz)
    df = load_multi30k(root, "val", ["en", "de"])
    assert len(df) == 6 and list(df.columns) == ["split", "lang", "line_idx", "image", "text",
                                                 "caption_id", "image_path"]
    de = df[df.lang == "de"].set_index("line_idx")
    assert de.loc[1, "image"] == "10002456.jpg"
    assert de.loc[1, "text"].startswith("Mehrere Männer")  # UTF-8 kept
    assert de.loc[2, "caption_id"] == "val-2-de"
    en = df[df.lang == "en"].set_index("line_idx")
    assert en.loc[0, "text"] == CAPTIONS["en"][0] and en.loc[0, "image"] == IMAGES[0]
    # the data/task1 folder itself works as root too
    assert len(load_multi30k(root / "data" / "task1", "val", "en")) == 3


def test_windows_line_ends_are_stripped(tmp_path):
    root = make_release(tmp_path, captions={"en": [c + "\r" for c in CAPTIONS["en"]]})
    assert load_multi30k(root, "val", ["en"])["text"].tolist() == CAPTIONS["en"]


def test_images_dir_paths_and_missing_images(tmp_path):
    root = make_release(tmp_path / "m30k")
    imgs = tmp_path / "flickr30k-images"
    imgs.mkdir()
    for name in IMAGES:
        (imgs / name).write_bytes(b"jpg")
    df = load_multi30k(root, "val", ["en"], images_dir=imgs)
    assert df["image_path"].tolist() == [str(imgs / n) for n in IMAGES]
    assert multi30k_units(df)["image_id"].tolist() == df["image_path"].tolist()
    (imgs / IMAGES[1]).unlink()
    with pytest.raises(Multi30kError, match=r"1 image\(s\).*10002456.jpg"):
        load_multi30k(root, "val", ["en"], images_dir=imgs)
    with pytest.raises(Multi30kError, match="images_dir"):
        multi30k_units(load_multi30k(root, "val", ["en"]))


def test_missing_files(tmp_path):
    root = make_release(tmp_path)
    with pytest.raises(Multi30kError, match=r"val\.fr\.gz not found"):
        load_multi30k(root, "val", ["en", "fr"])
    with pytest.raises(Multi30kError, match=r"image_splits/train\.txt not found"):
        load_multi30k(root, "train", ["en"])
    with pytest.raises(Multi30kError, match="no raw/ or image_splits/"):
        load_multi30k(tmp_path / "data", "val")  # the parent of task1 holds neither
    with pytest.raises(Multi30kError, match="not a folder"):
        load_multi30k(tmp_path / "nowhere", "val")


def test_line_counts_must_match(tmp_path):
    root = make_release(tmp_path, captions={"en": CAPTIONS["en"][:2]})
    with pytest.raises(Multi30kError, match=r"val\.en\.gz has 2 line\(s\) but .* lists 3"):
        load_multi30k(root, "val", ["en"])


def test_empty_lines_are_errors(tmp_path):
    root = make_release(tmp_path, captions={"en": [CAPTIONS["en"][0], "  ", CAPTIONS["en"][2]]})
    with pytest.raises(Multi30kError, match=r"val\.en\.gz:2: empty caption"):
        load_multi30k(root, "val", ["en"])
    root2 = make_release(tmp_path / "b", images=[IMAGES[0], "", IMAGES[2]])
    with pytest.raises(Multi30kError, match=r"val\.txt:2: empty image file name"):
        load_multi30k(root2, "val", ["en"])


def test_truncated_gzip_is_a_clear_error(tmp_path):
    root = make_release(tmp_path)
    path = root / "data" / "task1" / "raw" / "val.en.gz"
    path.write_bytes(path.read_bytes()[:20])
    with pytest.raises(Multi30kError, match="cannot be read"):
        load_multi30k(root, "val", ["en"])
    assert issubclass(Multi30kError, ValueError)


def test_caption_words_scores_each_language_with_image_paths(tmp_path, monkeypatch):
    """The paper-scale entry point hands each language's captions, with their image paths, to
    caption_word_table (models and Stanza stubbed: no GPU here)."""
    import pandas as pd

    import tokenbook.data.multi30k as m

    root = make_release(tmp_path / "m30k")
    imgs = tmp_path / "imgs"
    imgs.mkdir()
    for name in IMAGES:
        (imgs / name).write_bytes(b"jpg")
    calls = []

    class Seg:
        id = "stub"

        def __init__(self, **kw):
            pass

    def fake_table(caps, **kw):
        calls.append((caps, kw))
        return pd.DataFrame({"lang": caps["lang"], "unit_id": caps["caption_id"]})

    monkeypatch.setattr(m, "StanzaSegmenter", Seg)   # the names multi30k's functions call
    monkeypatch.setattr(m, "caption_word_table", fake_table)
    monkeypatch.setattr(m, "lazy_model", lambda handle, kind, **kw: f"{kind}:{handle}")
    out = m.multi30k_caption_words(root, images_dir=imgs, split="val", langs=["de", "en"],
                                   captioner="P", text_lm="U", device="cpu")
    assert len(out) == 6 and [c[0]["lang"].iloc[0] for c in calls] == ["de", "en"]
    caps, kw = calls[0]
    assert caps["image_id"].tolist() == [str(imgs / n) for n in IMAGES]
    assert kw["dataset"] == "multi30k-val" and kw["captioner"] == "captioner:P"
    assert kw["segmenter_id"] == "stub"
