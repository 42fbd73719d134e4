"""Crossmodal-3600 (XM3600; Thapliyal et al. 2022) from its release layout.

Layout (after unpacking ``captions.zip`` and ``images.tgz`` into one folder)::

    <root>/captions.jsonl        one JSON object per image
    <root>/images/<key>.jpg      the 3,600 Open Images photos

Each line of ``captions.jsonl`` is ``{"image/key": "<key>", "image/locale": "<lang>", "<lang>":
{"caption": [...], "caption/tokenized": [...], "caption/tokenized/lowercase": [...]}, ...}`` for
the 36 languages. Haley et al. score the ``caption/tokenized`` field (the default here).

Bad input is never dropped silently: a missing image, a language missing from a record or an
empty caption is skipped and counted; the counts are in ``frame.attrs["skipped"]`` and reported
with a warning (or raise with ``strict=True``). An unknown language code raises at once.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Iterable, Iterator, Sequence, TextIO

import pandas as pd

from tokenbook.data._files import report_skipped

__all__ = ["XM3600_LANGUAGES", "HALEY_LANGUAGES", "CrossmodalError", "load_crossmodal",
           "crossmodal_image"]

#: the 36 languages of XM3600 (ISO 639-1 where one exists; fil, mi, quz as released)
XM3600_LANGUAGES = ("ar", "bn", "cs", "da", "de", "el", "en", "es", "fa", "fi", "fil", "fr", "he",
                    "hi", "hr", "hu", "id", "it", "ja", "ko", "mi", "nl", "no", "pl", "pt", "quz",
                    "ro", "ru", "sv", "sw", "te", "th", "tr", "uk", "vi", "zh")
#: the 30 languages of Haley et al.'s released groundedness data (XM3600 minus bn, fil, mi, quz,
#: sw, th)
HALEY_LANGUAGES = tuple(lang for lang in XM3600_LANGUAGES
                        if lang not in ("bn", "fil", "mi", "quz", "sw", "th"))
FIELDS = ("caption", "caption/tokenized", "caption/tokenized/lowercase")


class CrossmodalError(ValueError):
    """The folder or a record is not in the XM3600 release format."""


def _check_langs(langs: Iterable[str] | None, known: Sequence[str]) -> list[str]:
    if langs is None:
        return list(known)
    langs = [langs] if isinstance(langs, str) else list(langs)
    unknown = [lang for lang in langs if lang not in known]
    if unknown:
        raise CrossmodalError(f"unknown language code(s) {unknown}; XM3600 has {list(known)}")
    return langs


def jsonl_records(fh: TextIO, path: Path, *, limit: int | None = None
                   ) -> Iterator[tuple[int, dict]]:
    """``(line_no, record)`` for each non-blank line of a JSON-lines file (1-based numbers).

    Stops after line ``limit``; a line that is not valid JSON raises :class:`CrossmodalError`
    naming the file and line.
    """
    line_no = 0
    lines = iter(fh)
    while True:
        try:
            line = next(lines)
        except StopIteration:
            return
        except UnicodeDecodeError as exc:
            raise CrossmodalError(f"{path}:{line_no + 1}: not valid UTF-8 ({exc.reason}); "
                                  f"re-encode the file as UTF-8") from None
        except (OSError, EOFError) as exc:  # a corrupt or truncated .bz2/.gz
            raise CrossmodalError(f"{path}: cannot be read after line {line_no} "
                                  f"({type(exc).__name__}: {exc}); is the download complete?"
                                  ) from None
        line_no += 1
        if limit is not None and line_no > limit:
            return
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as exc:
            raise CrossmodalError(f"{path}:{line_no}: not valid JSON ({exc.msg}); is the line "
                                  f"truncated?") from None
        if not isinstance(record, dict):
            raise CrossmodalError(f"{path}:{line_no}: a JSON {type(record).__name__}, not an "
                                  f"object of named fields")
        yield line_no, record


def load_crossmodal(root: str | Path, langs: Iterable[str] | None = None, *,
                    field: str = "caption/tokenized", require_images: bool = True,
                    strict: bool = False) -> pd.DataFrame:
    """One row per caption: ``image_key, lang, caption_idx, text, image_path``.

    ``langs``: XM3600 codes to keep (default all 36). ``field``: which caption field to read.
    ``require_images``: skip (and count) captions whose ``images/<key>.jpg`` is missing.
    ``frame.attrs["skipped"]`` counts ``missing_image``, ``missing_language`` and
    ``empty_caption``.
    """
    root = Path(root)
    path = root / "captions.jsonl"
    if not path.is_file():
        raise CrossmodalError(f"{path} not found: unpack captions.zip from "
                              f"https://google.github.io/crossmodal-3600/ into {root}")
    if field not in FIELDS:
        raise CrossmodalError(f"field must be one of {FIELDS}, got {field!r}")
    langs = _check_langs(langs, XM3600_LANGUAGES)
    images = root / "images"
    if require_images and not images.is_dir():
        raise CrossmodalError(f"{images} not found: unpack images.tgz into {root} (or pass "
                              "require_images=False to read the text only)")
    rows, skipped = [], dict(missing_image=0, missing_language=0, empty_caption=0)
    seen: dict[str, int] = {}
    with path.open(encoding="utf-8") as fh:
        for line_no, rec in jsonl_records(fh, path):
            key = rec.get("image/key")
            if not key:
                raise CrossmodalError(f"{path}:{line_no}: no 'image/key' field; is this the "
                                      "XM3600 captions.jsonl?")
            if not isinstance(key, str):
                raise CrossmodalError(f"{path}:{line_no}: 'image/key' is a "
                                      f"{type(key).__name__}, not text")
            if key in seen:
                raise CrossmodalError(f"{path}:{line_no}: image/key {key!r} repeats line "
                                      f"{seen[key]}; each image has one record")
            seen[key] = line_no
            img = images / f"{key}.jpg"
            has_img = img.is_file() if require_images else None
            for lang in langs:
                entry = rec.get(lang)
                if not isinstance(entry, dict) or field not in entry:
                    skipped["missing_language"] += 1
                    continue
                caps = entry[field]
                if caps is None:
                    caps = []
                    skipped["empty_caption"] += 1
                elif isinstance(caps, str):
                    caps = [caps]
                elif not isinstance(caps, list):
                    raise CrossmodalError(f"{path}:{line_no}: {lang}/{field} is a "
                                          f"{type(caps).__name__}, not a list of captions")
                for k, text in enumerate(caps):
                    if not isinstance(text, str) or not text.strip():
                        skipped["empty_caption"] += 1
                        continue
                    if require_images and not has_img:
                        skipped["missing_image"] += 1
                        continue
                    rows.append(dict(image_key=key, lang=lang, caption_idx=k, text=text.strip(),
                                     image_path=str(img)))
    if not seen:
        raise CrossmodalError(f"{path} holds no records: is the file complete?")
    frame = pd.DataFrame(rows, columns=["image_key", "lang", "caption_idx", "text", "image_path"])
    frame.attrs["skipped"] = skipped
    report_skipped(skipped, f"load_crossmodal({root})", CrossmodalError, strict=strict)
    return frame


def crossmodal_image(path: str | Path):
    """Open an XM3600 image as RGB (PIL), with a clear error if it is missing or unreadable."""
    from PIL import Image, UnidentifiedImageError

    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"image {path} not found")
    try:
        with Image.open(path) as im:
            return im.convert("RGB")
    except UnidentifiedImageError:
        raise CrossmodalError(f"{path} is not a readable image") from None
