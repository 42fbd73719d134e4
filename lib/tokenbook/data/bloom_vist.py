"""Bloom-VIST (Leong et al. 2022): multilingual visual stories, through Hugging Face ``datasets``.

The dataset ``sil-ai/bloom-vist`` is gated: accept its conditions on the Hub and log in
(``huggingface-cli login``) before loading it; a config per ISO 639-3 language (``"eng"``,
``"ind"``, ...), splits ``train``/``validation``/``test``. Each example is one story::

    {"title": str, "license": str, "album_id": str,
     "story": [{"image_id": str, "image_url": str, "story_index": int, "story_id": str,
                "text": str}, ...]}

(``datasets`` gives a ``Sequence`` of dicts as a dict of lists; both shapes are accepted.) The
schema follows the dataset's loading script as we know it; a dataset whose columns differ raises a
:class:`BloomVistError` naming the columns it found. :func:`load_bloom_vist` also reads a local
copy in the same schema: a folder written by ``Dataset.save_to_disk`` or
``DatasetDict.save_to_disk``, or a JSON-lines / parquet file.

Pages (story entries) become rows; :func:`bloom_sentences` splits pages into sentences, the unit of
Paper A's sentence-level analyses. Empty pages and pages whose image is missing (with
``images_dir``) are skipped and counted (``frame.attrs["skipped"]``, warned; ``strict=True``
raises).
"""

from __future__ import annotations

import re
import warnings
from pathlib import Path
from typing import Any

import pandas as pd

__all__ = ["BloomVistError", "load_bloom_vist", "bloom_sentences", "STORY_FIELDS"]

STORY_FIELDS = ("image_id", "image_url", "story_index", "story_id", "text")
TOP_FIELDS = ("title", "license", "album_id", "story")
_SENT_END = re.compile(r"(?<=[.!?।۔。！？])\s+|(?<=[。！？])")


class BloomVistError(ValueError):
    """The dataset is not in the Bloom-VIST schema, or cannot be reached."""


def _load_local(path: Path, split: str):
    import datasets

    if path.is_dir():
        try:
            ds = datasets.load_from_disk(str(path))
        except FileNotFoundError as exc:
            raise BloomVistError(f"{path} is not a save_to_disk folder ({exc})") from None
        if isinstance(ds, datasets.DatasetDict):
            if split not in ds:
                raise BloomVistError(f"{path} has splits {list(ds)}, not {split!r}")
            ds = ds[split]
        return ds
    kind = {".jsonl": "json", ".json": "json", ".parquet": "parquet"}.get(path.suffix)
    if kind is None:
        raise BloomVistError(f"{path}: expected a save_to_disk folder, .jsonl/.json or .parquet")
    from ._files import load_local_dataset

    return load_local_dataset(path, kind, BloomVistError)


def _load_hub(name: str, lang: str, split: str, token):
    import datasets

    try:
        return datasets.load_dataset(name, lang, split=split, token=token)
    except Exception as exc:  # gated / offline / unknown config: say what to do
        text = str(exc)
        hint = ("Bloom-VIST is gated: accept the conditions at https://huggingface.co/datasets/"
                f"{name} and log in with `huggingface-cli login` (and unset HF_HUB_OFFLINE / "
                "HF_DATASETS_OFFLINE), or pass a local copy's path.")
        raise BloomVistError(f"could not load {name!r} (config {lang!r}, split {split!r}): "
                             f"{type(exc).__name__}: {text[:300]}\n{hint}") from None


def _pages(story: Any) -> list[dict]:
    if isinstance(story, dict):  # datasets' Sequence-of-dict: dict of lists
        if not all(isinstance(v, list) for v in story.values()) \
                or len({len(v) for v in story.values()}) > 1:
            raise BloomVistError("a story is a record of unequal or non-list fields; expected a "
                                 "list of pages")
        n = len(next(iter(story.values()), []))
        return [{k: story[k][i] for k in story} for i in range(n)]
    if story is not None and not isinstance(story, list):
        raise BloomVistError(f"a story is a {type(story).__name__}; expected a list of pages")
    return list(story or [])


def load_bloom_vist(name_or_path: str | Path = "sil-ai/bloom-vist", lang: str = "eng", *,
                    split: str = "test", token: str | bool | None = None,
                    images_dir: str | Path | None = None, strict: bool = False) -> pd.DataFrame:
    """One row per story page, in story order.

    Columns: ``lang, story_id, album_id, title, license, page_idx, image_id, image_url,
    image_path, text``. ``page_idx`` counts a story's non-empty pages from 0 in ``story_index``
    order. With ``images_dir``, ``image_path`` is ``<images_dir>/<image_id>.<ext>`` for the first
    existing extension among jpg/jpeg/png, and pages without an image file are skipped (counted).
    """
    if not isinstance(lang, str) or not lang:
        raise BloomVistError(f"lang must be an ISO 639-3 code such as 'eng', got {lang!r}")
    path = Path(name_or_path)
    ds = _load_local(path, split) if path.exists() else _load_hub(str(name_or_path), lang, split,
                                                                  token)
    cols = list(ds.column_names)
    missing = [c for c in TOP_FIELDS if c not in cols]
    if missing:
        raise BloomVistError(f"not the Bloom-VIST schema: missing column(s) {missing}; found "
                             f"{cols}. Expected {list(TOP_FIELDS)} with story entries "
                             f"{list(STORY_FIELDS)}.")
    images = Path(images_dir) if images_dir is not None else None
    if images is not None and not images.is_dir():
        raise BloomVistError(f"images_dir {images} is not a folder")
    rows, skipped = [], dict(empty_text=0, missing_image=0)
    for ex in ds:
        pages = _pages(ex["story"])
        for p in pages:
            if not isinstance(p, dict):
                raise BloomVistError(f"album {ex['album_id']!r}: a story entry is a "
                                     f"{type(p).__name__}, not a page record")
            bad = [k for k in STORY_FIELDS if k not in p]
            if bad:
                raise BloomVistError(f"story entry lacks {bad}; found {sorted(p)}")
            if p["text"] is not None and not isinstance(p["text"], str):
                raise BloomVistError(f"album {ex['album_id']!r}, story {p['story_id']!r}: page "
                                     f"text is a {type(p['text']).__name__}, not text")
            try:
                int(p["story_index"])
            except (TypeError, ValueError):
                raise BloomVistError(f"album {ex['album_id']!r}, story {p['story_id']!r}: "
                                     f"story_index {p['story_index']!r} is not a page number"
                                     ) from None
        by_story: dict[str, list[dict]] = {}
        for p in pages:
            by_story.setdefault(str(p["story_id"]), []).append(p)
        for story_id, ps in by_story.items():
            k = 0
            for p in sorted(ps, key=lambda q: int(q["story_index"])):
                text = (p["text"] or "").strip()
                if not text:
                    skipped["empty_text"] += 1
                    continue
                image_path = None
                if images is not None:
                    cands = [images / f"{p['image_id']}.{e}" for e in ("jpg", "jpeg", "png")]
                    found = [c for c in cands if c.is_file()]
                    if not found:
                        skipped["missing_image"] += 1
                        continue
                    image_path = str(found[0])
                rows.append(dict(lang=lang, story_id=story_id, album_id=ex["album_id"],
                                 title=ex["title"], license=ex["license"], page_idx=k,
                                 image_id=p["image_id"], image_url=p["image_url"],
                                 image_path=image_path, text=text))
                k += 1
    frame = pd.DataFrame(rows, columns=["lang", "story_id", "album_id", "title", "license",
                                        "page_idx", "image_id", "image_url", "image_path",
                                        "text"])
    frame.attrs["skipped"] = skipped
    bad = {k: v for k, v in skipped.items() if v}
    if bad:
        msg = f"load_bloom_vist({name_or_path}, {lang}, {split}): skipped " + ", ".join(
            f"{v} {k.replace('_', ' ')} page(s)" for k, v in bad.items())
        if strict:
            raise BloomVistError(msg + " (strict=True)")
        warnings.warn(msg, stacklevel=2)
    return frame


def bloom_sentences(pages: pd.DataFrame) -> pd.DataFrame:
    """Split pages into sentences: adds ``sent_idx`` (within the story) and ``sent_in_page``.

    Sentences end at ``. ! ?`` (and ``। ۔ 。 ！ ？``) followed by whitespace, or after CJK
    full stops. Rows keep the page's image, so a sentence can be scored with its page's image (P)
    and the story's preceding sentences (D).
    """
    need = {"story_id", "page_idx", "text"}
    if not need <= set(pages.columns):
        raise ValueError(f"pages need columns {sorted(need)} (from load_bloom_vist)")
    rows = []
    for story_id, g in pages.sort_values(["story_id", "page_idx"]).groupby("story_id", sort=False):
        s = 0
        for r in g.itertuples(index=False):
            parts = [x.strip() for x in _SENT_END.split(r.text) if x.strip()]
            for j, sent in enumerate(parts):
                row = r._asdict()
                row.update(text=sent, sent_idx=s, sent_in_page=j)
                rows.append(row)
                s += 1
    return pd.DataFrame(rows)
