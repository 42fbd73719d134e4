"""Property-based tests of every local-file loader: whatever the file holds (truncated lines,
wrong or missing fields, nulls, numbers where text belongs, other encodings, empty files,
duplicated ids), a loader either returns a well-formed table or raises the library's own error
(a ValueError subclass raised in tokenbook's code) — never a pandas, datasets or stdlib error."""

from __future__ import annotations

import json
import os
import traceback
import warnings
from pathlib import Path

import pytest

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from tokenbook.data.bloom_vist import load_bloom_vist  # noqa: E402
from tokenbook.data.coco35l import load_coco35l_text  # noqa: E402
from tokenbook.data.crossmodal import load_crossmodal  # noqa: E402
from tokenbook.data.math import load_gsm8k  # noqa: E402
from tokenbook.data.norms import load_glasgow_norms  # noqa: E402
from tokenbook.data.parallel import load_parallel_dataset, read_parallel_text  # noqa: E402
from tokenbook.data.released import read_released  # noqa: E402

# derandomized (the same examples every run, as CI needs); TOKENBOOK_FUZZ_EXAMPLES=500 explores
# further with fresh random examples
_DEEP = int(os.environ.get("TOKENBOOK_FUZZ_EXAMPLES", "0"))
FAST = settings(max_examples=_DEEP or 60, deadline=None, derandomize=not _DEEP,
                suppress_health_check=[HealthCheck.function_scoped_fixture,
                                       HealthCheck.too_slow])
# loaders that go through `datasets` take ~0.3 s a file
SLOW = settings(FAST, max_examples=_DEEP or 20)

JUNK = st.one_of(st.none(), st.booleans(), st.integers(-5, 5), st.floats(allow_nan=False),
                 st.text(max_size=8), st.lists(st.integers(0, 3), max_size=2),
                 st.dictionaries(st.text(max_size=3), st.integers(), max_size=2))
WORDS = st.text(alphabet="abc xyzé", min_size=1, max_size=12)


def _library_error(exc: BaseException) -> None:
    """``exc`` is the library's own: a ValueError (or FileNotFoundError) raised in tokenbook."""
    assert isinstance(exc, (ValueError, FileNotFoundError)), f"{type(exc).__name__}: {exc}"
    last = traceback.extract_tb(exc.__traceback__)[-1]
    assert "tokenbook" in Path(last.filename).parts, \
        f"{type(exc).__name__} raised in {last.filename}:{last.lineno}: {exc}"
    assert str(exc).strip(), "an error without a message"


def _call(fn, *args, **kwargs):
    """(result, None) or (None, the library's error); any other exception fails the test."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            result = fn(*args, **kwargs)
        except Exception as exc:  # noqa: BLE001 - the property is about which exceptions
            _library_error(exc)
            _event(f"error: {type(exc).__name__}")
            return None, exc
    _event("loaded")
    return result, None


def _event(what: str) -> None:
    """Count outcomes (pytest --hypothesis-show-statistics); a no-op outside @given."""
    try:
        hypothesis.event(what)
    except hypothesis.errors.InvalidArgument:
        pass


def _field(valid):
    """A field: valid 8 times in 10, else junk or missing (marker ``...``)."""
    return st.integers(0, 9).flatmap(
        lambda k: valid if k < 8 else JUNK if k == 8 else st.just(...))


def _record(fields: dict):
    return st.fixed_dictionaries({k: _field(v) for k, v in fields.items()}).map(
        lambda d: {k: v for k, v in d.items() if v is not ...})


@st.composite
def jsonl_bytes(draw, record):
    """JSON lines of ``record``s, then maybe corrupted: a truncated line, a non-object line,
    blank lines, a duplicated line, another encoding, or no content at all."""
    recs = draw(st.lists(record, min_size=0, max_size=5))
    lines = [json.dumps(r, ensure_ascii=False) for r in recs]
    if lines and draw(st.booleans()):
        lines.append(lines[draw(st.integers(0, len(lines) - 1))])  # a duplicated record
    damage = draw(st.sampled_from(["none"] * 5 + ["truncate", "array", "blank", "garbage"]))
    if damage == "truncate" and lines:
        i = draw(st.integers(0, len(lines) - 1))
        lines[i] = lines[i][: draw(st.integers(0, max(0, len(lines[i]) - 1)))]
    elif damage == "array":
        lines.insert(0, draw(st.sampled_from(["[1, 2]", "3", '"text"', "null"])))
    elif damage == "blank":
        lines.insert(draw(st.integers(0, len(lines))), "   ")
    elif damage == "garbage":
        lines.append(draw(st.sampled_from(["{'single': 'quotes'}", "{", "}", "NaN x"])))
    text = "\n".join(lines) + ("\n" if draw(st.booleans()) else "")
    encoding = draw(st.sampled_from(["utf-8"] * 6 + ["latin-1", "utf-16"]))
    try:
        return text.encode(encoding)
    except UnicodeEncodeError:
        return text.encode("utf-8")


# -------------------------------------------------------------------------------- XM3600
LANG_ENTRY = st.fixed_dictionaries({"caption": st.lists(WORDS, max_size=2),
                                    "caption/tokenized": st.one_of(st.lists(WORDS, max_size=2),
                                                                   WORDS, JUNK)})
XM_RECORD = _record({"image/key": st.sampled_from(["a1", "b2", "c3", "d4"]),
                     "en": LANG_ENTRY, "de": LANG_ENTRY})


@FAST
@given(content=jsonl_bytes(XM_RECORD))
def test_fuzz_load_crossmodal(tmp_path_factory, content):
    root = tmp_path_factory.mktemp("xm")
    (root / "captions.jsonl").write_bytes(content)
    frame, err = _call(load_crossmodal, root, ["en", "de"], require_images=False)
    if frame is not None:
        assert list(frame.columns) == ["image_key", "lang", "caption_idx", "text", "image_path"]
        assert all(isinstance(t, str) and t == t.strip() and t for t in frame.text)
        assert all(isinstance(k, str) for k in frame.image_key)
        assert not frame.duplicated(["image_key", "lang", "caption_idx"]).any()


# -------------------------------------------------------------------------------- COCO-35L
COCO_RECORD = _record({"image_id": st.integers(0, 3), "src_lang": st.just("en"),
                       "trg_lang": st.sampled_from(["de", "fr", "xx"]),
                       "caption_tokenized": WORDS, "translation_tokenized": WORDS})


@FAST
@given(content=jsonl_bytes(COCO_RECORD))
def test_fuzz_load_coco35l_text(tmp_path_factory, content):
    path = tmp_path_factory.mktemp("coco") / "coco_mt_dev.jsonl"
    path.write_bytes(content)
    frame, err = _call(load_coco35l_text, path)
    if frame is not None:
        assert list(frame.columns) == ["image_id", "lang", "text", "source"]
        assert all(isinstance(t, str) and t.strip() == t and t for t in frame.text)
        assert set(frame.source) <= {"source", "translation"}


# -------------------------------------------------------------------------------- parallel text
LINE_BYTES = st.one_of(WORDS.map(lambda s: s.encode()), st.just(b""), st.just(b"   "),
                       st.just(b"caf\xe9"), st.just(b"\xff\xfe\x00"), st.just(b"ok\r"))


@FAST
@given(src=st.lists(LINE_BYTES, max_size=5), tgt=st.lists(LINE_BYTES, max_size=5),
       on_empty=st.sampled_from(["error", "skip"]))
def test_fuzz_read_parallel_text(tmp_path_factory, src, tgt, on_empty):
    folder = tmp_path_factory.mktemp("par")
    (folder / "s.txt").write_bytes(b"\n".join(src))
    (folder / "t.txt").write_bytes(b"\n".join(tgt))
    frame, err = _call(read_parallel_text, folder / "s.txt", folder / "t.txt", on_empty=on_empty)
    if frame is not None:
        assert len(frame) >= 1 and frame.pair_id.tolist() == list(range(len(frame)))
        assert all(isinstance(x, str) and x for x in [*frame.source, *frame.target])


PAIR_RECORD = st.one_of(
    _record({"translation": st.fixed_dictionaries({"en": _field(WORDS), "de": _field(WORDS)})
             .map(lambda d: {k: v for k, v in d.items() if v is not ...})}),
    _record({"en": WORDS, "de": WORDS}))


@SLOW
@given(content=jsonl_bytes(PAIR_RECORD))
def test_fuzz_load_parallel_dataset(tmp_path_factory, content, hf_cache):
    path = tmp_path_factory.mktemp("pards") / "pairs.jsonl"
    path.write_bytes(content)
    frame, err = _call(load_parallel_dataset, path, source_lang="en", target_lang="de",
                       on_empty="skip")
    if frame is not None:
        assert all(isinstance(x, str) and x for x in [*frame.source, *frame.target])


# -------------------------------------------------------------------------------- GSM8K
GSM_RECORD = _record({"question": WORDS, "answer": WORDS.map(lambda s: f"{s}\n#### 42")})


@SLOW
@given(content=jsonl_bytes(GSM_RECORD))
def test_fuzz_load_gsm8k(tmp_path_factory, content, hf_cache):
    path = tmp_path_factory.mktemp("gsm") / "gsm8k.jsonl"
    path.write_bytes(content)
    problems, err = _call(load_gsm8k, data_files=str(path))
    if problems is not None:
        for p in problems:
            assert p.answer == "42" and isinstance(p.question, str) and p.question.strip()


# -------------------------------------------------------------------------------- Bloom-VIST
PAGE = _record({"image_id": WORDS, "image_url": WORDS, "story_index": st.integers(0, 3),
                "story_id": st.sampled_from(["s1", "s2"]), "text": WORDS})
BLOOM_RECORD = _record({"title": WORDS, "license": WORDS, "album_id": WORDS,
                        "story": st.lists(PAGE, max_size=3)})


@SLOW
@given(content=jsonl_bytes(BLOOM_RECORD))
def test_fuzz_load_bloom_vist(tmp_path_factory, content, hf_cache):
    path = tmp_path_factory.mktemp("bloom") / "bloom.jsonl"
    path.write_bytes(content)
    frame, err = _call(load_bloom_vist, path, "eng")
    if frame is not None:
        assert all(isinstance(t, str) and t for t in frame.text)


# -------------------------------------------------------------------------------- CSV tables
CELL = st.one_of(WORDS, st.integers(-3, 9).map(str), st.floats(0, 8).map(lambda x: f"{x:.2f}"),
                 st.just(""), st.just("NA"), st.just('"unclosed'))


@st.composite
def csv_bytes(draw, columns: dict):
    """A CSV whose header is usually ``columns`` (name → strategy of a valid cell), else a
    random one; cells valid 9 times in 10; maybe truncated or in another encoding."""
    names = list(columns)
    if draw(st.integers(0, 9)) < 6:
        header = draw(st.permutations(names))
    else:
        header = draw(st.lists(st.sampled_from(names + ["other", ""]), max_size=6))
    rows = []
    for _ in range(draw(st.integers(0, 4))):
        row = [draw(columns[c]) if c in columns and draw(st.integers(0, 9)) < 9 else draw(CELL)
               for c in header]
        if draw(st.integers(0, 9)) == 0:
            row = row[: draw(st.integers(0, len(row)))] + draw(st.lists(CELL, max_size=2))
        rows.append(row)
    text = "\n".join([",".join(header)] + [",".join(r) for r in rows])
    if draw(st.integers(0, 9)) == 0:
        text = text[: draw(st.integers(0, len(text)))]  # truncated file
    encoding = draw(st.sampled_from(["utf-8"] * 6 + ["latin-1", "utf-16"]))
    try:
        return text.encode(encoding)
    except UnicodeEncodeError:
        return text.encode("utf-8")


SCALE = st.floats(1, 7).map(lambda x: f"{x:.3f}")
LOGP = st.floats(-20, 0).map(lambda x: f"{x:.3f}")
NORMS = {"Words": WORDS.filter(lambda w: w.strip() and "," not in w), "CNC.M": SCALE,
         "IMAG.M": SCALE}
RELEASED = {"lang": st.sampled_from(["en", "de"]), "dataset": st.just("xm"),
            "word": WORDS.filter(str.strip), "sentence_idx": st.integers(0, 5).map(str),
            "log_lm": LOGP, "log_cap": LOGP, "upos": st.sampled_from(["NOUN", "VERB"])}


@FAST
@given(content=csv_bytes(NORMS))
def test_fuzz_load_glasgow_norms(tmp_path_factory, content):
    path = tmp_path_factory.mktemp("norms") / "glasgow.csv"
    path.write_bytes(content)
    frame, err = _call(load_glasgow_norms, path)
    if frame is not None:
        assert len(frame) >= 1 and frame["word"].is_unique
        assert frame["concreteness"].between(1, 7).all()


@FAST
@given(content=csv_bytes(RELEASED))
def test_fuzz_read_released(tmp_path_factory, content):
    path = tmp_path_factory.mktemp("rel") / "groundedness.csv"
    path.write_bytes(content)
    frame, err = _call(read_released, path)
    if frame is not None:
        assert {"lang", "dataset", "word", "sentence_idx", "log_lm", "log_cap"} <= set(frame)


# -------------------------------------------------------------------------------- fixed cases
@pytest.fixture
def hf_cache(tmp_path_factory, monkeypatch):
    """A private datasets cache, so the fuzzed files do not fill the user's."""
    import datasets

    folder = tmp_path_factory.mktemp("hf-datasets-cache")
    monkeypatch.setattr(datasets.config, "HF_DATASETS_CACHE", folder)
    monkeypatch.setenv("HF_DATASETS_CACHE", str(folder))
    return folder


@pytest.mark.parametrize("content, match", [
    (b"", "empty"),
    (b'{"question": "q", "answer": "a\\n#### 1"}\n{"question": "q2", "ans', "line 2|:2:"),
    (b'{"question": null, "answer": "a\\n#### 1"}\n', "'question' is null"),
    (b'{"question": 3, "answer": "a\\n#### 1"}\n', "'question' is a int"),
    (b'{"q": "x", "answer": "a\\n#### 1"}\n', "lacks column 'question'"),
    (b'{"question": "caf\xe9", "answer": "a\\n#### 1"}\n', "UTF-8"),
])
def test_gsm8k_bad_files_name_the_problem(tmp_path, hf_cache, content, match):
    path = tmp_path / "gsm8k.jsonl"
    path.write_bytes(content)
    _, err = _call(load_gsm8k, data_files=str(path))
    assert err is not None and __import__("re").search(match, str(err)), err


def test_duplicated_xm3600_image_keys_are_an_error(tmp_path):
    rec = {"image/key": "a1", "en": {"caption/tokenized": ["a dog"]}}
    (tmp_path / "captions.jsonl").write_text(json.dumps(rec) + "\n" + json.dumps(rec) + "\n")
    _, err = _call(load_crossmodal, tmp_path, ["en"], require_images=False)
    assert err is not None and "repeats line 1" in str(err) and ":2:" in str(err)


def test_parallel_dataset_numbers_are_not_stringified(tmp_path, hf_cache):
    path = tmp_path / "pairs.jsonl"
    path.write_text('{"en": "a cat", "de": 5}\n{"en": "a dog", "de": 6}\n')
    _, err = _call(load_parallel_dataset, path, source_lang="en", target_lang="de")
    assert err is not None and "where text was expected" in str(err)


def test_empty_and_truncated_csv(tmp_path):
    empty = tmp_path / "e.csv"
    empty.write_bytes(b"")
    _, err = _call(load_glasgow_norms, empty)
    assert err is not None and "empty" in str(err)
    _, err = _call(read_released, empty)
    assert err is not None and "empty" in str(err)
