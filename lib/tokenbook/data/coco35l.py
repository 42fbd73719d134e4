"""COCO-35L caption text (Thapliyal et al. 2022), for training a text-only LM as Haley et al. did.

Release files: ``coco_mt_train.jsonl.bz2`` and ``coco_mt_dev.jsonl.bz2`` from
``https://storage.googleapis.com/crossmodal-3600/``. Each line is a JSON object with
``image_id``, ``src_lang``, ``trg_lang``, ``caption_tokenized`` (the English source caption),
``translation_tokenized`` and ``backtranslation_tokenized``.

Haley et al. fine-tune the text LM on ``"caption {lang}\\n{translation_tokenized}"`` for every
target language, plus the *deduplicated* English source captions (``include_source=True``).
Records with an empty text or an unknown language are skipped and counted
(``frame.attrs["skipped"]``, reported with a warning; ``strict=True`` raises).
"""

from __future__ import annotations

import bz2
import gzip
from pathlib import Path
from typing import Iterable

import pandas as pd

from tokenbook.data._files import report_skipped
from tokenbook.data.crossmodal import XM3600_LANGUAGES, CrossmodalError, jsonl_records

__all__ = ["COCO35L_LANGUAGES", "load_coco35l_text", "coco35l_training_texts"]

#: COCO-35L covers the XM3600 languages except Cusco Quechua (quz)
COCO35L_LANGUAGES = tuple(lang for lang in XM3600_LANGUAGES if lang != "quz")
REQUIRED = ("image_id", "src_lang", "trg_lang", "caption_tokenized", "translation_tokenized")


def _open(path: Path):
    if path.suffix == ".bz2":
        return bz2.open(path, "rt", encoding="utf-8")
    if path.suffix == ".gz":
        return gzip.open(path, "rt", encoding="utf-8")
    return path.open(encoding="utf-8")


def _what(value) -> str:
    return "null" if value is None else f"a {type(value).__name__} ({value!r:.40})"


def load_coco35l_text(path: str | Path, langs: Iterable[str] | None = None, *,
                      include_source: bool = True, limit: int | None = None,
                      strict: bool = False) -> pd.DataFrame:
    """Caption texts: one row per (image_id, lang, text), columns ``image_id, lang, text, source``.

    ``langs``: target languages to keep (COCO-35L codes; default all). ``include_source``: add the
    English source captions once each (``source="source"``; deduplicated on the text).
    ``limit``: stop after this many JSON lines (for quick looks at the 19M-line train file).
    """
    path = Path(path)
    if not path.is_file():
        raise CrossmodalError(f"{path} not found: download coco_mt_train.jsonl.bz2 / "
                              "coco_mt_dev.jsonl.bz2 from https://storage.googleapis.com/"
                              "crossmodal-3600/")
    if langs is not None:
        langs = [langs] if isinstance(langs, str) else list(langs)
        unknown = [lang for lang in langs if lang not in COCO35L_LANGUAGES]
        if unknown:
            raise CrossmodalError(f"unknown COCO-35L language code(s) {unknown}; known: "
                                  f"{list(COCO35L_LANGUAGES)}")
    keep = set(langs) if langs is not None else set(COCO35L_LANGUAGES)
    rows, seen_src = [], set()
    skipped = dict(empty_text=0, unknown_language=0)
    n_records = 0
    with _open(path) as fh:
        for line_no, rec in jsonl_records(fh, path, limit=limit):
            n_records += 1
            missing = [k for k in REQUIRED if k not in rec]
            if missing:
                raise CrossmodalError(f"{path}:{line_no}: missing field(s) {missing}; is this "
                                      "a COCO-35L coco_mt_*.jsonl file?")
            for k in ("src_lang", "trg_lang"):
                if not isinstance(rec[k], str):
                    raise CrossmodalError(f"{path}:{line_no}: field {k!r} is "
                                          f"{_what(rec[k])}, not a language code")
            for k in ("caption_tokenized", "translation_tokenized"):
                if rec[k] is not None and not isinstance(rec[k], str):
                    raise CrossmodalError(f"{path}:{line_no}: field {k!r} is {_what(rec[k])}, "
                                          f"not text")
            if not isinstance(rec["image_id"], (str, int)) or isinstance(rec["image_id"], bool):
                raise CrossmodalError(f"{path}:{line_no}: field 'image_id' is "
                                      f"{_what(rec['image_id'])}, not an id")
            lang = rec["trg_lang"]
            if lang not in COCO35L_LANGUAGES:
                skipped["unknown_language"] += 1
                continue
            if include_source and rec["src_lang"] in keep:
                src = (rec["caption_tokenized"] or "").strip()
                if src and src not in seen_src:
                    seen_src.add(src)
                    rows.append(dict(image_id=rec["image_id"], lang=rec["src_lang"], text=src,
                                     source="source"))
            if lang not in keep:
                continue
            text = (rec["translation_tokenized"] or "").strip()
            if not text:
                skipped["empty_text"] += 1
                continue
            rows.append(dict(image_id=rec["image_id"], lang=lang, text=text,
                             source="translation"))
    if n_records == 0:
        raise CrossmodalError(f"{path} holds no records: is the file complete?")
    frame = pd.DataFrame(rows, columns=["image_id", "lang", "text", "source"])
    frame.attrs["skipped"] = skipped
    report_skipped(skipped, f"load_coco35l_text({path.name})", CrossmodalError, strict=strict)
    return frame


def coco35l_training_texts(frame: pd.DataFrame) -> list[str]:
    """Haley et al.'s text-LM training strings: ``"caption {lang}\\n{text}"``."""
    for col in ("lang", "text"):
        if col not in frame.columns:
            raise ValueError(f"frame needs a {col!r} column (from load_coco35l_text)")
    return [f"caption {lang}\n{text}" for lang, text in zip(frame.lang, frame.text)]
