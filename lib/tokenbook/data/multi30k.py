"""Multi30K captions (Elliott et al. 2016), line-aligned with their Flickr30K images.

Release layout (the ``multi30k/dataset`` repository, task 1)::

    data/task1/raw/{split}.{lang}.gz      one caption per line (gzip; plain text also accepted)
    data/task1/image_splits/{split}.txt   one Flickr30K image file name per line (1000092795.jpg)

Line *i* of every ``{split}.{lang}`` file translates/describes the image on line *i* of
``image_splits/{split}.txt``. Splits: ``train``, ``val``, ``test_2016_flickr``,
``test_2017_flickr``, ``test_2017_mscoco``, ``test_2018_flickr``; languages ``en, de, fr, cs``
(not every split has every language). Images: ``flickr30k-images.tar`` (Flickr30K, obtained
separately), unpacked into one folder of ``<name>.jpg`` files.

Haley et al.'s code scored Multi30K ``val`` and ``train`` in en, de, fr, cs and ar (method notes
§1.3, [V-code]); whether the paper reports it is not known ([U]). Their download was Zenodo
record 4394718 (``Train.zip``/``Val.zip``, a repackaging that adds Arabic), whose inner layout
the notes do not give; this loader reads the repository layout above (an Arabic file in the same
layout, ``{split}.ar(.gz)``, loads like the others).

Every problem raises :class:`Multi30kError` (a ``ValueError``) naming the file: a missing caption
or image-list file, caption and image files of different lengths, an empty caption or image
name, and (with ``images_dir``) image files that are not there.
"""

from __future__ import annotations

import gzip
from pathlib import Path
from typing import Any, Iterable, Sequence

import pandas as pd

from tokenbook.data.tagging import StanzaSegmenter
from tokenbook.grounded.tables import caption_word_table, lazy_model, open_image
from tokenbook.validation import check_table

__all__ = ["MULTI30K_LANGUAGES", "Multi30kError", "load_multi30k", "multi30k_units",
           "multi30k_caption_words"]

#: languages of the multi30k/dataset release (task 1); the authors also scored Arabic ("ar")
MULTI30K_LANGUAGES = ("en", "de", "fr", "cs")


class Multi30kError(ValueError):
    """A Multi30K file is missing, misaligned or malformed."""


def _task1(root: Path) -> Path:
    """``root`` itself or ``root/data/task1`` — whichever holds ``raw/`` and ``image_splits/``."""
    for cand in (root / "data" / "task1", root):
        if (cand / "raw").is_dir() or (cand / "image_splits").is_dir():
            return cand
    raise Multi30kError(f"{root}: no raw/ or image_splits/ folder here or under data/task1/; "
                        "point root at a checkout of https://github.com/multi30k/dataset")


def _read_lines(path: Path) -> list[str]:
    """The lines of a (gzipped) UTF-8 text file, without their line ends."""
    try:
        if path.suffix == ".gz":
            with gzip.open(path, "rt", encoding="utf-8", newline="") as fh:
                text = fh.read()
        else:
            text = path.read_bytes().decode("utf-8-sig")
    except (OSError, EOFError) as exc:
        raise Multi30kError(f"{path} cannot be read ({exc}); is the download complete?") from None
    except UnicodeDecodeError as exc:
        raise Multi30kError(f"{path}: not valid UTF-8 (byte {exc.start})") from None
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()  # the final newline
    return [line[:-1] if line.endswith("\r") else line for line in lines]


def _caption_file(raw: Path, split: str, lang: str) -> Path:
    for name in (f"{split}.{lang}.gz", f"{split}.{lang}"):
        if (raw / name).is_file():
            return raw / name
    raise Multi30kError(f"{raw / (split + '.' + lang + '.gz')} not found (nor the unzipped "
                        f"{split}.{lang}): the release has no {lang!r} captions for split "
                        f"{split!r}, or the folder is incomplete")


def _check_nonempty(lines: Sequence[str], path: Path, what: str) -> None:
    empty = [i + 1 for i, line in enumerate(lines) if not line.strip()]
    if empty:
        raise Multi30kError(f"{path}:{empty[0]}: empty {what} ({len(empty)} empty line(s) in "
                            f"all); every line must hold one {what}")


def load_multi30k(root: str | Path, split: str = "val", langs: Iterable[str] | None = None, *,
                  images_dir: str | Path | None = None) -> pd.DataFrame:
    """Captions of one Multi30K split: one row per (line, language).

    ``root``: a checkout of the ``multi30k/dataset`` repository (or its ``data/task1`` folder).
    ``langs``: default :data:`MULTI30K_LANGUAGES`. ``images_dir``: folder of the Flickr30K
    images; when given, every listed image must exist there.

    Returns columns ``split, lang, line_idx`` (0-based), ``image`` (file name), ``text``,
    ``caption_id`` (``<split>-<line_idx>-<lang>``) and ``image_path`` (None without
    ``images_dir``).
    """
    root = Path(root)
    if not root.is_dir():
        raise Multi30kError(f"{root} is not a folder: clone https://github.com/multi30k/dataset "
                            "and pass its path")
    if not isinstance(split, str) or not split:
        raise Multi30kError(f"split must be a split name such as 'val', got {split!r}")
    langs = list(MULTI30K_LANGUAGES) if langs is None else (
        [langs] if isinstance(langs, str) else list(langs))
    if not langs:
        raise Multi30kError("langs is empty: name at least one language (e.g. ['en', 'de'])")
    task1 = _task1(root)
    split_file = task1 / "image_splits" / f"{split}.txt"
    if not split_file.is_file():
        raise Multi30kError(f"{split_file} not found: the image list of split {split!r}")
    images = _read_lines(split_file)
    if not images:
        raise Multi30kError(f"{split_file} is empty: no images in split {split!r}")
    _check_nonempty(images, split_file, "image file name")
    images = [name.strip() for name in images]
    image_paths: list[Any] = [None] * len(images)
    if images_dir is not None:
        images_dir = Path(images_dir)
        image_paths = [str(images_dir / name) for name in images]
        missing = [name for name in images if not (images_dir / name).is_file()]
        if missing:
            raise Multi30kError(f"{len(missing)} image(s) of split {split!r} are not in "
                                f"{images_dir} (first: {missing[0]}); unpack "
                                "flickr30k-images.tar there")
    frames = []
    for lang in langs:
        path = _caption_file(task1 / "raw", split, lang)
        lines = _read_lines(path)
        if len(lines) != len(images):
            raise Multi30kError(f"{path} has {len(lines)} line(s) but {split_file} lists "
                                f"{len(images)} image(s): the files must be line-aligned")
        _check_nonempty(lines, path, "caption")
        frames.append(pd.DataFrame({
            "split": split, "lang": lang, "line_idx": range(len(lines)), "image": images,
            "text": [line.strip() for line in lines],
            "caption_id": [f"{split}-{i}-{lang}" for i in range(len(lines))],
            "image_path": image_paths}))
    return pd.concat(frames, ignore_index=True)


def multi30k_units(frame: pd.DataFrame) -> pd.DataFrame:
    """Rows of :func:`load_multi30k` (loaded with ``images_dir``) as input of
    :func:`tokenbook.grounded.tables.caption_word_table`: ``image_id`` = the image path."""
    check_table(frame, "Multi30K captions (load_multi30k)",
                columns=["caption_id", "lang", "text", "image_path"])
    if frame["image_path"].isna().any():
        raise Multi30kError("the captions have no image paths: load them with "
                            "load_multi30k(..., images_dir=<flickr30k-images folder>)")
    return frame.assign(image_id=frame["image_path"].astype(str))


def multi30k_caption_words(root: str | Path, *, images_dir: str | Path, split: str = "val",
                           langs: Iterable[str] | None = None, captioner: Any, text_lm: Any,
                           text_lm_tokenizer: str | None = None, batch_size: int = 16,
                           device=None, progress: bool = True) -> pd.DataFrame:
    """Caption word table (s_U, s_P; nats) of a Multi30K split, words and UPOS from Stanza —
    the Multi30K twin of :func:`tokenbook.grounded.tables.crossmodal_caption_words` (one cached
    entry per language; models loaded only on a cache miss). Needs a GPU at paper scale."""
    caps = multi30k_units(load_multi30k(root, split, langs, images_dir=images_dir))
    cap_model = lazy_model(captioner, "captioner", device=device)
    lm_model = lazy_model(text_lm, "text_lm", device=device, tokenizer=text_lm_tokenizer or None)
    segmenter = StanzaSegmenter(mwt="join", use_gpu=str(device).startswith("cuda"))
    return pd.concat([
        caption_word_table(caps[caps["lang"] == lang], image_fn=open_image, captioner=cap_model,
                           text_lm=lm_model, segmenter=segmenter, segmenter_id=segmenter.id,
                           dataset=f"multi30k-{split}", batch_size=batch_size, device=device,
                           progress=progress)
        for lang in sorted(caps["lang"].unique())], ignore_index=True)
