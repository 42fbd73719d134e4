"""The authors' released word-level surprisal table (``groundedness.csv``, OSF ``bdhna``).

Haley et al. (2025) released one row per word of every scored caption; Gay et al. (2026) reuse
it (``dataset == "xm"``) for their Crossmodal-3600 UID analysis. This module reads the file from
a local path or a URL (anything ``pandas.read_csv`` opens; ``.csv``, ``.csv.gz``, ``.parquet``),
validates it, and converts it into the word surprisal pivot table of
:mod:`tokenbook.grounded.tables` so that their data and ours meet the same analyses.

Released schema (columns the analysis code reads; others are kept out):

======================  ==============================================================
``lang``                caption language (ISO 639-1 as in XM3600, e.g. ``de``)
``dataset``             scoring data set (``xm`` = Crossmodal-3600; also e.g. ``coco35``)
``word``                the Stanza word
``sentence_idx``        index of the word *inside its caption*; 0 starts a new caption
``log_lm``              text-only LM word score (condition U)
``log_cap``             captioner word score with the image (condition P)
POS column              one of ``upos``, ``pos``, ``pos_tag``, ``POS`` (UD UPOS)
``mutual_information``  optional: groundedness = s_LM − s_CAP
======================  ==============================================================

**Sign convention.** Despite their names, ``log_lm``/``log_cap`` are expected to hold
*surprisals* (−log p, nats ≥ 0): Gay et al.'s coefficient-of-variation script needs positive
means. ``sign="auto"`` (default) checks this on the data: if (almost) all values are ≤ 0 they are
log-probabilities and are negated; a mixture raises. If ``mutual_information`` is present it must
equal ``s_U − s_P`` (groundedness, positive = the image helped) within tolerance, which checks
the orientation of the two columns as well.

**Captions** are recovered from the word stream as in the authors' code, by starting a new
caption at ``sentence_idx == 0`` — and, more robustly, whenever ``sentence_idx`` does not
increase — within each (dataset, lang) in file order. ``word_idx`` is the position inside the
recovered caption (the released file drops words with zero groundedness, so ``sentence_idx``
can have gaps).
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pandas as pd

from tokenbook.cache import cached_table
from tokenbook.data._files import read_csv

__all__ = ["REQUIRED_COLUMNS", "POS_COLUMNS", "read_released", "validate_released",
           "released_to_pivot", "load_released_table"]

REQUIRED_COLUMNS = ("lang", "dataset", "word", "sentence_idx", "log_lm", "log_cap")
POS_COLUMNS = ("upos", "pos", "pos_tag", "POS")
_MI_TOL = 1e-3


def _pos_column(columns) -> str | None:
    return next((c for c in POS_COLUMNS if c in columns), None)


def read_released(source: str | os.PathLike, *, dataset: str | None = None,
                  nrows: int | None = None) -> pd.DataFrame:
    """Read ``groundedness.csv`` (path or URL) with only the columns the analyses use.

    ``dataset`` keeps one scoring data set (``"xm"`` for Crossmodal-3600). Raises
    ``FileNotFoundError`` for a missing local file and ``ValueError`` (naming the missing
    columns and the expected schema) for a file in another format.
    """
    src = str(source)
    is_url = "://" in src
    if not is_url and not Path(src).exists():
        raise FileNotFoundError(
            f"released table not found: {src!r}. Download groundedness.csv from the OSF project "
            "https://osf.io/bdhna/ (Haley et al. 2025) and pass its path, or pass the URL.")

    if not is_url and Path(src).is_dir():
        raise ValueError(f"released table {src!r} is a folder; give groundedness.csv")
    if src.endswith(".parquet"):
        try:
            frame = pd.read_parquet(src)
        except Exception as exc:  # ArrowInvalid, OSError: name the file
            raise ValueError(f"{src}: cannot be read as parquet ({type(exc).__name__}: "
                             f"{str(exc)[:200]}); is the file complete?") from None
        if nrows is not None:
            frame = frame.head(nrows)
    else:
        header = read_csv(src, ValueError, nrows=0)
        pos = _pos_column(header.columns)
        wanted = [c for c in (*REQUIRED_COLUMNS, "mutual_information", pos) if c in header]
        missing = [c for c in REQUIRED_COLUMNS if c not in header.columns]
        if missing or pos is None:
            raise ValueError(_schema_error(missing, pos, list(header.columns)))
        frame = read_csv(src, ValueError, usecols=wanted, nrows=nrows, keep_default_na=False,
                         na_values={"log_lm": ["", "nan", "NaN"], "log_cap": ["", "nan", "NaN"]},
                         dtype={"lang": str, "dataset": str, "word": str, pos: str})
    if dataset is not None:
        if "dataset" not in frame:
            raise ValueError(_schema_error(["dataset"], _pos_column(frame.columns),
                                           list(frame.columns)))
        have = sorted(frame["dataset"].astype(str).unique())
        frame = frame[frame["dataset"].astype(str) == dataset]
        if frame.empty:
            raise ValueError(f"no rows with dataset == {dataset!r} in {src}; data sets present: "
                             f"{have}")
    return frame.reset_index(drop=True)


def _schema_error(missing, pos, have) -> str:
    parts = []
    if missing:
        parts.append(f"missing columns {list(missing)}")
    if pos is None:
        parts.append(f"no POS column (one of {list(POS_COLUMNS)})")
    return ("released table does not have the groundedness.csv schema: " + "; ".join(parts)
            + f". Expected {list(REQUIRED_COLUMNS)} + a POS column; found {have}.")


def validate_released(frame: pd.DataFrame, *, sign: str = "auto") -> pd.DataFrame:
    """Check columns and the sign convention; return a frame with surprisal columns ``s_U, s_P``.

    ``sign``: ``"surprisal"`` (columns hold −log p), ``"logprob"`` (columns hold log p, negated
    here) or ``"auto"`` (decided from the data: ≥ 95% of values ≥ 0 → surprisal, ≥ 95% ≤ 0 →
    log-prob, otherwise a ``ValueError``). Also checks ``mutual_information == s_U − s_P`` when
    that column is present, and that ``sentence_idx`` is a non-negative integer.
    """
    missing = [c for c in REQUIRED_COLUMNS if c not in frame.columns]
    pos = _pos_column(frame.columns)
    if missing or pos is None:
        raise ValueError(_schema_error(missing, pos, list(frame.columns)))
    if sign not in ("auto", "surprisal", "logprob"):
        raise ValueError(f"sign must be 'auto', 'surprisal' or 'logprob', got {sign!r}")
    out = frame.copy()
    for c in ("log_lm", "log_cap", "sentence_idx"):
        out[c] = pd.to_numeric(out[c], errors="coerce")
    bad = out[["log_lm", "log_cap", "sentence_idx"]].isna().any(axis=1)
    if bad.any():
        raise ValueError(f"{int(bad.sum())} rows have non-numeric or missing log_lm/log_cap/"
                         f"sentence_idx (first at row {int(np.flatnonzero(bad.to_numpy())[0])})")
    idx = out["sentence_idx"].to_numpy()
    if np.any(idx < 0) or np.any(idx != np.round(idx)):
        raise ValueError("sentence_idx must hold non-negative integers (word index in caption)")
    vals = np.r_[out["log_lm"].to_numpy(float), out["log_cap"].to_numpy(float)]
    share_pos = float(np.mean(vals >= 0))
    if sign == "auto":
        if share_pos >= 0.95:
            sign = "surprisal"
        elif share_pos <= 0.05:
            sign = "logprob"
        else:
            raise ValueError(
                f"cannot tell the sign convention of log_lm/log_cap: {share_pos:.0%} of values "
                "are ≥ 0. Pass sign='surprisal' (−log p) or sign='logprob' (log p) explicitly.")
    flip = -1.0 if sign == "logprob" else 1.0
    out["s_U"] = flip * out["log_lm"].to_numpy(float)
    out["s_P"] = flip * out["log_cap"].to_numpy(float)
    if "mutual_information" in out:
        mi = pd.to_numeric(out["mutual_information"], errors="coerce").to_numpy(float)
        g = (out["s_U"] - out["s_P"]).to_numpy()
        ok = np.isfinite(mi)
        if ok.any():
            err = np.abs(mi[ok] - g[ok])
            if np.mean(err <= _MI_TOL * (1 + np.abs(g[ok]))) < 0.99:
                flipped = np.mean(np.abs(mi[ok] + g[ok]) <= _MI_TOL * (1 + np.abs(g[ok])))
                hint = (" It equals s_P − s_U instead: the two columns look swapped."
                        if flipped >= 0.99 else "")
                raise ValueError("mutual_information does not equal s_U − s_P (groundedness = "
                                 "text-only surprisal − captioner surprisal)." + hint)
    out = out.rename(columns={pos: "upos"}) if pos != "upos" else out
    out.attrs["sign"] = sign
    return out


def released_to_pivot(frame: pd.DataFrame, *, sign: str = "auto") -> pd.DataFrame:
    """Convert the released table into the word surprisal pivot table (captions, nats).

    Output columns: ``lang, dataset, unit_kind ("caption"), unit_id ("<dataset>:<lang>:<k>"),
    word_idx, word, upos, concreteness (NaN: not in the release), s_U, s_P``.
    """
    v = validate_released(frame, sign=sign)
    idx = v["sentence_idx"].to_numpy()
    group = (v["dataset"].astype(str) + "\x00" + v["lang"].astype(str)).to_numpy()
    new_group = np.r_[True, group[1:] != group[:-1]]
    starts = new_group | (idx == 0) | np.r_[True, idx[1:] <= idx[:-1]]
    caption = np.cumsum(starts) - 1
    gkey = pd.Series(group)
    # k-th caption within its (dataset, lang): rank of caption start inside the group
    first_cap = pd.Series(caption).groupby(gkey).transform("min").to_numpy()
    k = caption - first_cap
    word_idx = pd.Series(np.arange(len(v))).groupby(caption).cumcount().to_numpy()
    out = pd.DataFrame({
        "lang": v["lang"].astype(str).to_numpy(),
        "dataset": v["dataset"].astype(str).to_numpy(),
        "unit_kind": "caption",
        "unit_id": [f"{d}:{lg}:{i}" for d, lg, i in zip(v["dataset"].astype(str),
                                                         v["lang"].astype(str), k)],
        "word_idx": word_idx.astype(np.int64),
        "word": v["word"].astype(str).to_numpy(),
        "upos": v["upos"].astype(str).to_numpy(),
        "concreteness": np.nan,
        "s_U": v["s_U"].to_numpy(float),
        "s_P": v["s_P"].to_numpy(float),
    })
    out.attrs["sign"] = v.attrs.get("sign")
    return out


def load_released_table(source: str | os.PathLike, *, dataset: str | None = "xm",
                        sign: str = "auto", cache: bool = True) -> pd.DataFrame:
    """Read, validate and convert ``groundedness.csv`` into the pivot table (cached).

    The cache key holds the source and, for local files, their size and modification time, so
    a replaced file is re-read.
    """
    src = str(source)
    stamp = {}
    if "://" not in src and Path(src).exists():
        st = Path(src).stat()
        stamp = {"size": st.st_size, "mtime": st.st_mtime_ns}

    def compute() -> pd.DataFrame:
        return released_to_pivot(read_released(src, dataset=dataset), sign=sign)

    if not cache:
        return compute()
    params = {"source": os.path.abspath(src) if "://" not in src else src, **stamp,
              "dataset": dataset, "sign": sign, "code": "released-v1"}
    return cached_table("released-groundedness", params, compute)
