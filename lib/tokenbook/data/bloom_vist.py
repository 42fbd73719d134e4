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

:func:`load_bloom_surprisals` reads the authors' *released* word surprisals instead (OSF
``rh3dn``, ``BLOOM_word_surprisal/*_<lang>.csv``, in bits), converted to the book's story word
table in nats, so the story analyses run on them without a model.
"""

from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from tokenbook.data._files import load_local_dataset, read_csv, report_skipped

__all__ = ["BloomVistError", "load_bloom_vist", "bloom_sentences", "STORY_FIELDS",
           "load_bloom_surprisals", "RELEASED_CONDITIONS", "RELEASED_COLUMNS"]

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
    report_skipped(skipped, f"load_bloom_vist({name_or_path}, {lang}, {split})",
                   BloomVistError, strict=strict, unit=" page(s)")
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


# --------------------------------------------------------------------------- released surprisals
#: the authors' condition codes (T/P/D/DP) → their word-surprisal column → the book's column
RELEASED_CONDITIONS = {"U": ("surprisal_ablation_txt", "s_U"),
                       "P": ("surprisal_ablation_mm", "s_P"),
                       "D": ("surprisal_total_txt", "s_D"),
                       "PD": ("surprisal_total_mm", "s_PD")}
RELEASED_COLUMNS = ("story_id", "paragraph", "sentence_idx",
                    *(c for c, _ in RELEASED_CONDITIONS.values()))
_LN2 = math.log(2.0)


def _released_files(source: str | Path | list) -> list[Path]:
    if isinstance(source, (list, tuple)):
        files = [Path(p) for p in source]
    else:
        path = Path(source)
        if not path.exists():
            raise FileNotFoundError(
                f"Bloom-VIST surprisals not found: {str(path)!r}. Download the folder "
                "BLOOM_word_surprisal (one <name>_<lang>.csv per language) from the OSF project "
                "https://osf.io/rh3dn/ (Gay et al. 2026) and pass its path (released_stories), "
                "or leave released_stories empty to skip the stories.")
        files = sorted(path.glob("*.csv")) if path.is_dir() else [path]
    if not files:
        raise BloomVistError(f"{source}: no .csv files; expected the authors' "
                             "BLOOM_word_surprisal folder of <name>_<lang>.csv files")
    bad = [f.name for f in files if len(f.stem.rsplit("_", 1)) != 2 or not f.stem.rsplit("_", 1)[1]]
    if bad:
        raise BloomVistError(f"{bad[0]}: the language is read from the file name, "
                             "<name>_<lang>.csv (e.g. word_surprisal_eng.csv), as in the authors' "
                             "scripts; rename the file")
    return files


def load_bloom_surprisals(source: str | Path | list) -> pd.DataFrame:
    """The authors' released Bloom-VIST word surprisals as the book's story word table (nats).

    ``source``: the folder ``BLOOM_word_surprisal`` of the OSF project ``rh3dn`` (Gay et al.
    2026), a single file of it, or a list of files. As the authors' analysis scripts read it
    (``analysis/BLOOM_densities.py``), every ``<name>_<lang>.csv`` holds one row per word, in
    story order, with ``story_id``, ``paragraph`` (the page, from 0), ``sentence_idx`` (the
    sentence) and the four word surprisals **in bits**:

    ==========================  =========  ==========================================
    authors' column             condition  book's column (nats = bits · ln 2)
    ==========================  =========  ==========================================
    ``surprisal_ablation_txt``  T = U      ``s_U`` text only, no preceding discourse
    ``surprisal_ablation_mm``   P          ``s_P`` image, no preceding discourse
    ``surprisal_total_txt``     D          ``s_D`` text after the story so far
    ``surprisal_total_mm``      DP = P+D   ``s_PD`` image and the story so far
    ==========================  =========  ==========================================

    D and P+D are empty where there is no preceding text (the first paragraph); U and P must be
    numbers everywhere. The language is the file name's last ``_`` field. A ``word`` column is
    kept when present (else empty strings).

    Returns ``lang, dataset ("bloom-vist"), unit_kind ("sentence"), unit_id, story_id,
    para_idx, sent_idx, word_idx, n_sents, word, s_U, s_P, s_D, s_PD`` where ``para_idx`` =
    ``paragraph``, ``sent_idx`` numbers the story's sentences from 0 in (paragraph,
    sentence_idx) order, ``word_idx`` the words of a sentence in file order (as the authors'
    ``cumcount``), ``n_sents`` = sentences in the story. ``attrs["unit"] = "nats"``.
    """
    frames = []
    for f in _released_files(source):
        lang = f.stem.rsplit("_", 1)[1]
        header = read_csv(f, BloomVistError, nrows=0)
        missing = [c for c in RELEASED_COLUMNS if c not in header.columns]
        if missing:
            raise BloomVistError(f"{f}: not the authors' Bloom-VIST word-surprisal format: "
                                 f"missing column(s) {missing}; expected {list(RELEASED_COLUMNS)}"
                                 f" (surprisals in bits), found {list(header.columns)}")
        usecols = [*RELEASED_COLUMNS, *(["word"] if "word" in header.columns else [])]
        t = read_csv(f, BloomVistError, usecols=usecols, dtype={"story_id": str},
                     keep_default_na=False, na_values=["", "nan", "NaN"])
        if t.empty:
            raise BloomVistError(f"{f}: no word rows")
        for c in ("paragraph", "sentence_idx", *(c for c, _ in RELEASED_CONDITIONS.values())):
            t[c] = pd.to_numeric(t[c], errors="coerce")
        for c in ("paragraph", "sentence_idx"):
            v = t[c].to_numpy(float)
            bad = ~np.isfinite(v) | (v < 0) | (v != np.round(v))
            if bad.any():
                first = int(np.flatnonzero(bad)[0])
                raise BloomVistError(f"{f}: row {first + 2}: {c} must be a non-negative whole "
                                     f"number, got {t[c].iloc[first]!r}")
        for cond in ("U", "P"):
            col = RELEASED_CONDITIONS[cond][0]
            bad = ~np.isfinite(t[col].to_numpy(float))
            if bad.any():
                raise BloomVistError(f"{f}: row {int(np.flatnonzero(bad)[0]) + 2}: {col} "
                                     f"(condition {cond}) is missing or not a number; only the "
                                     "discourse conditions may be empty")
        vals = t[[c for c, _ in RELEASED_CONDITIONS.values()]].to_numpy(float)
        vals = vals[np.isfinite(vals)]
        if vals.size and np.mean(vals < 0) > 0.05:
            raise BloomVistError(f"{f}: {np.mean(vals < 0):.0%} of the surprisals are "
                                 "negative; expected surprisals in bits (−log2 p ≥ 0), not "
                                 "log-probabilities")
        t["lang"] = lang
        frames.append(t)
    data = pd.concat(frames, ignore_index=True)
    data["story_id"] = data["story_id"].astype(str)
    data["para_idx"] = data["paragraph"].astype(np.int64)
    data["sentence_idx"] = data["sentence_idx"].astype(np.int64)
    data["_row"] = np.arange(len(data))
    story = ["lang", "story_id"]
    key = data["para_idx"] * 1_000_000 + data["sentence_idx"]  # sentence order in the story
    data["sent_idx"] = (key.groupby([data["lang"], data["story_id"]]).rank(method="dense")
                        .astype(np.int64) - 1)
    data = data.sort_values([*story, "sent_idx", "_row"], kind="mergesort")
    data["word_idx"] = data.groupby([*story, "sent_idx"], sort=False).cumcount().astype(np.int64)
    data["n_sents"] = data.groupby(story)["sent_idx"].transform("nunique").astype(np.int64)
    out = pd.DataFrame({
        "lang": data["lang"].to_numpy(), "dataset": "bloom-vist", "unit_kind": "sentence",
        "unit_id": [f"bloom-vist:{lg}:{s}:{k}" for lg, s, k in
                    zip(data["lang"], data["story_id"], data["sent_idx"])],
        "story_id": data["story_id"].to_numpy(), "para_idx": data["para_idx"].to_numpy(),
        "sent_idx": data["sent_idx"].to_numpy(), "word_idx": data["word_idx"].to_numpy(),
        "n_sents": data["n_sents"].to_numpy(),
        "word": data["word"].astype(str).to_numpy() if "word" in data else "",
    })
    for col, new in RELEASED_CONDITIONS.values():
        out[new] = data[col].to_numpy(float) * _LN2
    out.attrs["unit"] = "nats"
    out.attrs["source"] = str(source)
    return out.reset_index(drop=True)
