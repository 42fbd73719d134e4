"""Psycholinguistic norms and word frequency for the groundedness-typology chapter.

* :func:`load_glasgow_norms` reads the Glasgow Norms {cite}`scott2019glasgow` from a file the
  user supplies (the norms cannot be bundled), validates its schema and returns a tidy table
  ``word, concreteness, imageability`` (means on the norms' 1–7 scales).
* :func:`zipf_frequency` gives word frequency on the Zipf scale (log10 occurrences per billion
  words) from ``wordfreq`` (paper scale); :func:`corpus_zipf` the same scale computed from a
  corpus's own counts (tiny world).

Accepted Glasgow file layouts (CSV, or Excel if ``openpyxl`` is installed):

1. the distributed two-row header — row 1 ``Words, Length, AROU, , , VAL, …, CNC, , , IMAG, …``
   and row 2 ``M, SD, N, …`` — the mean of each scale sits under its name;
2. one flat header with ``Words`` (or ``word``) and ``CNC.M``/``CNC_M``/``CNC``/``concreteness``,
   optionally ``IMAG.M``/``IMAG_M``/``IMAG``/``imageability`` (the authors' flattened names).

Sense-specific rows of ambiguous words (``"bank (river)"``) are dropped; the word rated in
isolation is kept. Words are lower-cased.
"""

from __future__ import annotations

import math
from collections import Counter
from pathlib import Path
from typing import Iterable, Sequence

import numpy as np
import pandas as pd

from tokenbook.data._files import read_csv

WORD_NAMES = ("words", "word")
CONCRETENESS_NAMES = ("cnc.m", "cnc_m", "cnc", "concreteness")
IMAGEABILITY_NAMES = ("imag.m", "imag_m", "imag", "imageability")
#: the Glasgow Norms' rating scale
GLASGOW_RANGE = (1.0, 7.0)


class NormsSchemaError(ValueError):
    """A norms file whose columns or values are not what the loader expects."""


def _read_any(path: Path, header) -> pd.DataFrame:
    if path.is_dir():
        raise NormsSchemaError(f"{path} is a folder; give the norms CSV file")
    if path.suffix.lower() in (".xlsx", ".xls"):
        try:
            return pd.read_excel(path, header=header)
        except Exception as exc:  # openpyxl/xlrd errors: name the file
            raise NormsSchemaError(f"{path.name}: cannot be read as a spreadsheet "
                                   f"({type(exc).__name__}: {str(exc)[:200]})") from None
    return read_csv(path, NormsSchemaError, header=header, encoding_errors="replace")


def _pick(columns: Sequence[str], names: Sequence[str]) -> str | None:
    lower = {str(c).strip().lower(): c for c in columns}
    for n in names:
        if n in lower:
            return lower[n]
    return None


def _flatten_two_row_header(raw: pd.DataFrame) -> pd.DataFrame | None:
    """If row 0 holds ``M``/``SD``/``N`` sub-headers, name each mean column after its scale."""
    if raw.empty:
        return None
    first = [str(v).strip().upper() for v in raw.iloc[0].tolist()]
    if "M" not in first:
        return None
    names, current = [], None
    for col, sub in zip(raw.columns, first):
        col = str(col).strip()
        if col and not col.lower().startswith("unnamed"):
            current = col
        names.append(f"{current}.{sub}" if current and sub in ("M", "SD", "N") else col)
    flat = raw.iloc[1:].copy()
    flat.columns = names
    return flat


def load_glasgow_norms(path: str | Path) -> pd.DataFrame:
    """Load the Glasgow Norms: ``word, concreteness[, imageability]`` (1–7 means), one row a word.

    Raises :class:`NormsSchemaError` naming the missing or malformed columns.
    """
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"Glasgow Norms file {path} does not exist: download the norms "
                                "(Scott et al. 2019, supplementary CSV) and pass its path as "
                                "`norms_path`")
    raw = _read_any(path, header=0)
    frame = _flatten_two_row_header(raw)
    if frame is None:
        frame = raw
    word_col = _pick(frame.columns, WORD_NAMES)
    cnc_col = _pick(frame.columns, CONCRETENESS_NAMES)
    img_col = _pick(frame.columns, IMAGEABILITY_NAMES)
    missing = [what for what, col in (("a word column (Words/word)", word_col),
                                      ("a concreteness column (CNC.M/CNC/concreteness)", cnc_col))
               if col is None]
    if missing:
        raise NormsSchemaError(f"{path.name}: this does not look like the Glasgow Norms: missing "
                               f"{' and '.join(missing)}; found columns "
                               f"{[str(c) for c in frame.columns][:20]}")
    out = pd.DataFrame({"word": frame[word_col].astype(str).str.strip()})
    for name, col in (("concreteness", cnc_col), ("imageability", img_col)):
        if col is None:
            continue
        values = pd.to_numeric(frame[col], errors="coerce")
        bad = values.isna() & frame[col].notna()
        if bad.any():
            example = frame.loc[bad, col].iloc[0]
            raise NormsSchemaError(f"{path.name}: column {col!r} ({name}) has non-numeric values "
                                   f"such as {example!r} in {int(bad.sum())} rows")
        lo, hi = GLASGOW_RANGE
        outside = (values < lo) | (values > hi)
        if outside.any():
            raise NormsSchemaError(f"{path.name}: column {col!r} ({name}) has "
                                   f"{int(outside.sum())} values outside the Glasgow scale "
                                   f"[{lo:g}, {hi:g}], e.g. {values[outside].iloc[0]!r}")
        out[name] = values.to_numpy()
    out = out[~out["word"].str.contains(r"\(", regex=True) & (out["word"] != "")
              & (out["word"].str.lower() != "nan")]
    out["word"] = out["word"].str.lower()
    out = out.dropna(subset=["concreteness"])
    out = out.groupby("word", as_index=False).mean(numeric_only=True)
    if out.empty:
        raise NormsSchemaError(f"{path.name}: no usable rows (word + numeric concreteness)")
    return out.reset_index(drop=True)


def zipf_frequency(words: Iterable[str], lang: str) -> np.ndarray:
    """``wordfreq`` Zipf frequency (log10 per billion words; 0 = unknown) of each word."""
    try:
        from wordfreq import zipf_frequency as _zipf
    except ImportError as exc:  # pragma: no cover - wordfreq is a paper-scale extra
        raise ImportError("word frequency at paper scale needs `pip install wordfreq`") from exc
    try:
        return np.array([_zipf(str(w), lang) for w in words], dtype=float)
    except ImportError as exc:  # Chinese/Japanese/Korean need wordfreq's tokenizers
        raise ImportError(f"wordfreq needs extra tokenizers for {lang!r}: "
                          f"`pip install \"wordfreq[cjk]\"` ({exc})") from exc


def corpus_zipf(tokens: Iterable[str]) -> dict[str, float]:
    """Zipf frequency of each type from a corpus's own counts: log10(count / total · 1e9)."""
    counts = Counter(str(t) for t in tokens)
    total = sum(counts.values())
    if total == 0:
        raise ValueError("corpus_zipf: empty corpus")
    return {w: math.log10(c / total * 1e9) for w, c in counts.items()}
