"""Parallel corpora for the memorisation chapter at paper scale.

Two formats:

* **line-aligned plain text** (OPUS/Moses style): ``corpus.en`` and ``corpus.nl``, UTF-8, one
  sentence per line, line i of one file translating line i of the other —
  :func:`read_parallel_text`;
* **a Hugging Face ``datasets`` corpus** with a ``translation`` column of ``{lang: text}``
  dicts (the OPUS/WMT layout on the Hub) or two plain columns — :func:`load_parallel_dataset`
  (a folder written by ``Dataset.save_to_disk``, a local data file, or a Hub name).

Both return a DataFrame ``pair_id, source, target`` and validate the input: empty lines,
mismatched line counts and invalid UTF-8 raise :class:`CorpusError` naming the file and line.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from tokenbook.data._files import load_local_dataset
from tokenbook.validation import check_positive_int


class CorpusError(ValueError):
    """A parallel corpus that cannot be used as it is; the message names the file and line."""


def _read_lines(path: Path) -> list[str]:
    if not path.exists():
        raise CorpusError(f"{path}: no such file")
    if path.is_dir():
        raise CorpusError(f"{path}: is a folder; give a text file with one sentence per line")
    raw = path.read_bytes()
    if raw.startswith(b"\xef\xbb\xbf"):  # a UTF-8 byte-order mark is not part of line 1
        raw = raw[3:]
    if b"\x00" in raw:
        line = raw[:raw.index(b"\x00")].count(b"\n") + 1
        raise CorpusError(f"{path}: line {line} holds a NUL byte (a binary or UTF-16 file?); "
                          f"give UTF-8 text with one sentence per line")
    lines = raw.split(b"\n")
    if lines and lines[-1] == b"":
        lines.pop()  # the final newline does not start a line
    out = []
    for i, b in enumerate(lines, start=1):
        try:
            out.append(b.decode("utf-8").rstrip("\r"))
        except UnicodeDecodeError as exc:
            raise CorpusError(
                f"{path}: line {i} is not valid UTF-8 (byte {exc.start}: "
                f"{b[exc.start:exc.start + 4]!r}); re-encode the file as UTF-8, e.g. with "
                f"`iconv -f latin1 -t utf-8`") from None
    return out


def read_parallel_text(source_path: str | Path, target_path: str | Path, *,
                       max_pairs: int | None = None, on_empty: str = "error") -> pd.DataFrame:
    """Read line-aligned source/target files into ``pair_id, source, target``.

    ``on_empty="error"`` (default) raises on an empty or whitespace-only line on either side;
    ``"skip"`` drops those pairs (``pair_id`` then still counts kept pairs from 0, and the
    original 1-based line number is kept in ``line``). ``max_pairs`` (≥ 1) keeps the first
    pairs. A UTF-8 byte-order mark is dropped; a NUL byte is an error naming the line.
    """
    if on_empty not in ("error", "skip"):
        raise ValueError(f"on_empty must be 'error' or 'skip', got {on_empty!r}")
    if max_pairs is not None:
        max_pairs = check_positive_int(max_pairs, "max_pairs")
    sp, tp = Path(source_path), Path(target_path)
    src, tgt = _read_lines(sp), _read_lines(tp)
    if len(src) != len(tgt):
        n = min(len(src), len(tgt))
        raise CorpusError(f"{sp} has {len(src)} lines but {tp} has {len(tgt)}: the files are not "
                          f"line-aligned (the first unmatched line is line {n + 1} of the longer "
                          "file)")
    rows = []
    for i, (s, t) in enumerate(zip(src, tgt), start=1):
        if not s.strip() or not t.strip():
            if on_empty == "skip":
                continue
            which = sp if not s.strip() else tp
            raise CorpusError(f"{which}: line {i} is empty; remove the pair from both files or "
                              "pass on_empty='skip'")
        rows.append((i, s.strip(), t.strip()))
        if max_pairs is not None and len(rows) >= max_pairs:
            break
    if not rows:
        raise CorpusError(f"{sp} / {tp}: no usable sentence pairs")
    df = pd.DataFrame(rows, columns=["line", "source", "target"])
    df.insert(0, "pair_id", range(len(df)))
    return df


def load_parallel_dataset(name_or_path: str | Path, *, source_lang: str, target_lang: str,
                          split: str = "train", config: str | None = None,
                          max_pairs: int | None = None, on_empty: str = "error") -> pd.DataFrame:
    """Load a ``datasets`` corpus into ``pair_id, source, target``.

    ``name_or_path``: a folder from ``save_to_disk``, a local ``.json``/``.jsonl``/``.csv``/
    ``.parquet`` file, or a Hub dataset name (needs internet, e.g. ``"Helsinki-NLP/europarl"``
    with ``config="en-nl"``). Rows carry either ``translation = {source_lang: …,
    target_lang: …}`` or columns named ``source_lang`` and ``target_lang``.
    """
    if max_pairs is not None:
        max_pairs = check_positive_int(max_pairs, "max_pairs")
    import datasets

    p = Path(str(name_or_path))
    if p.is_dir() and ((p / "dataset_info.json").exists() or (p / "dataset_dict.json").exists()):
        ds = datasets.load_from_disk(str(p))
        if isinstance(ds, datasets.DatasetDict):
            if split not in ds:
                raise CorpusError(f"{p} has splits {list(ds)}, not {split!r}")
            ds = ds[split]
    elif p.is_file():
        fmt = {".json": "json", ".jsonl": "json", ".csv": "csv", ".parquet": "parquet"}.get(p.suffix)
        if fmt is None:
            raise CorpusError(f"{p}: unsupported file type {p.suffix!r}; use json(l), csv, parquet "
                              "or a save_to_disk folder")

        ds = load_local_dataset(p, fmt, CorpusError)
    else:
        ds = datasets.load_dataset(str(name_or_path), config, split=split)
    cols = ds.column_names
    if "translation" in cols:
        def get(row):
            tr = row["translation"]
            if not isinstance(tr, dict):
                return None, None
            return tr.get(source_lang), tr.get(target_lang)
    elif source_lang in cols and target_lang in cols:
        def get(row):
            return row[source_lang], row[target_lang]
    else:
        raise CorpusError(f"{name_or_path}: expected a 'translation' column or columns "
                          f"{source_lang!r} and {target_lang!r}; found {cols}")
    rows = []
    for i, row in enumerate(ds):
        s, t = get(row)
        if s is None or t is None:
            raise CorpusError(f"{name_or_path}: row {i} has no {source_lang!r} or "
                              f"{target_lang!r} text")
        if not isinstance(s, str) or not isinstance(t, str):
            bad = s if not isinstance(s, str) else t
            raise CorpusError(f"{name_or_path}: row {i} has a {type(bad).__name__} "
                              f"({bad!r:.40}) where text was expected; fix the data")
        if not str(s).strip() or not str(t).strip():
            if on_empty == "skip":
                continue
            raise CorpusError(f"{name_or_path}: row {i} has an empty "
                              f"{'source' if not str(s).strip() else 'target'}; pass "
                              "on_empty='skip' to drop such rows")
        rows.append((i, str(s).strip(), str(t).strip()))
        if max_pairs is not None and len(rows) >= max_pairs:
            break
    if not rows:
        raise CorpusError(f"{name_or_path}: no usable sentence pairs")
    df = pd.DataFrame(rows, columns=["line", "source", "target"])
    df.insert(0, "pair_id", range(len(df)))
    return df


def load_corpus(spec: dict) -> pd.DataFrame:
    """Dispatch on a params dict: ``{"source_path", "target_path"}`` → plain text, or
    ``{"dataset", "source_lang", "target_lang", ["split", "config"]}`` → datasets. Optional
    ``max_pairs`` and ``on_empty`` in both."""
    common = {k: spec[k] for k in ("max_pairs", "on_empty") if k in spec}
    if "source_path" in spec and "target_path" in spec:
        return read_parallel_text(spec["source_path"], spec["target_path"], **common)
    if "dataset" in spec:
        return load_parallel_dataset(spec["dataset"], source_lang=spec["source_lang"],
                                     target_lang=spec["target_lang"],
                                     split=spec.get("split", "train"), config=spec.get("config"),
                                     **common)
    raise CorpusError(f"corpus spec needs source_path+target_path or dataset; got {sorted(spec)}")
