"""Parallel-corpus loaders on fixtures in the real formats, and bad input."""

import json

import pytest

from tokenbook.data.parallel import (CorpusError, load_corpus, load_parallel_dataset,
                                     read_parallel_text)


def _write(tmp_path, src, tgt, name="corpus"):
    sp, tp = tmp_path / f"{name}.en", tmp_path / f"{name}.nl"
    sp.write_bytes(src if isinstance(src, bytes) else src.encode())
    tp.write_bytes(tgt if isinstance(tgt, bytes) else tgt.encode())
    return sp, tp


def test_plain_text_fixture(tmp_path):
    sp, tp = _write(tmp_path, "The cat sleeps.\nA dog barks.\r\nCafé au lait\n",
                    "De kat slaapt.\nEen hond blaft.\r\nKoffie verkeerd\n")
    df = read_parallel_text(sp, tp)
    assert df.columns.tolist() == ["pair_id", "line", "source", "target"]
    assert df.source.tolist() == ["The cat sleeps.", "A dog barks.", "Café au lait"]
    assert df.target.iloc[1] == "Een hond blaft."
    assert read_parallel_text(sp, tp, max_pairs=2).shape[0] == 2
    assert load_corpus({"source_path": str(sp), "target_path": str(tp)}).equals(df)


def test_empty_line_named(tmp_path):
    sp, tp = _write(tmp_path, "a\nb\nc\n", "x\n  \nz\n")
    with pytest.raises(CorpusError, match=r"corpus\.nl: line 2 is empty"):
        read_parallel_text(sp, tp)
    df = read_parallel_text(sp, tp, on_empty="skip")
    assert df.line.tolist() == [1, 3] and df.pair_id.tolist() == [0, 1]


def test_mismatched_line_counts_named(tmp_path):
    sp, tp = _write(tmp_path, "a\nb\nc\n", "x\ny\n")
    with pytest.raises(CorpusError, match=r"3 lines but .*corpus\.nl has 2.*line 3"):
        read_parallel_text(sp, tp)


def test_non_utf8_named(tmp_path):
    sp, tp = _write(tmp_path, "ok\n".encode() + "caf\xe9\n".encode("latin-1"), "ok\nkoffie\n")
    with pytest.raises(CorpusError, match=r"corpus\.en: line 2 is not valid UTF-8"):
        read_parallel_text(sp, tp)


def test_missing_file(tmp_path):
    with pytest.raises(CorpusError, match="no such file"):
        read_parallel_text(tmp_path / "nope.en", tmp_path / "nope.nl")


def test_datasets_save_to_disk_fixture(tmp_path):
    import datasets

    ds = datasets.Dataset.from_dict({"translation": [{"en": "hello world", "nl": "hallo wereld"},
                                                     {"en": "good day", "nl": "goedendag"}]})
    ds.save_to_disk(str(tmp_path / "opus"))
    df = load_parallel_dataset(tmp_path / "opus", source_lang="en", target_lang="nl")
    assert df.source.tolist() == ["hello world", "good day"]
    assert df.target.tolist() == ["hallo wereld", "goedendag"]
    dd = datasets.DatasetDict({"train": ds})
    dd.save_to_disk(str(tmp_path / "opus_dict"))
    spec = {"dataset": str(tmp_path / "opus_dict"), "source_lang": "en", "target_lang": "nl"}
    assert load_corpus(spec).equals(df)
    with pytest.raises(CorpusError, match="splits"):
        load_parallel_dataset(tmp_path / "opus_dict", source_lang="en", target_lang="nl",
                              split="test")


def test_datasets_jsonl_columns_and_errors(tmp_path):
    p = tmp_path / "c.jsonl"
    p.write_text("\n".join(json.dumps(r) for r in [{"en": "a b", "de": "c d"},
                                                   {"en": "e", "de": ""}]) + "\n")
    with pytest.raises(CorpusError, match="row 1 has an empty target"):
        load_parallel_dataset(p, source_lang="en", target_lang="de")
    df = load_parallel_dataset(p, source_lang="en", target_lang="de", on_empty="skip")
    assert df.source.tolist() == ["a b"]
    with pytest.raises(CorpusError, match="expected a 'translation' column"):
        load_parallel_dataset(p, source_lang="en", target_lang="fr")
