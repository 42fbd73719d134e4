"""Checks shared by the loaders: a local data file is readable before a library parses it.

``datasets`` and ``pandas`` report a truncated JSON line, an empty file or a Latin-1 byte with
their own exceptions (``DatasetGenerationError``, ``StopIteration``, ``ParserError``,
``UnicodeDecodeError``) deep inside their code. The loaders call :func:`check_json_file` /
:func:`load_local_dataset` / :func:`read_csv` instead, which raise the loader's own error class
naming the file, the line and what to do.
"""

from __future__ import annotations

import json
import warnings
from pathlib import Path
from typing import Any, Callable

import pandas as pd

__all__ = ["check_json_file", "load_local_dataset", "read_csv", "check_text_fields",
           "report_skipped"]


def _decode(path: Path, error: Callable[[str], Exception]) -> str:
    try:
        raw = path.read_bytes()
    except IsADirectoryError:
        raise error(f"{path} is a folder, not a data file") from None
    except OSError as exc:
        raise error(f"{path} cannot be read ({exc.strerror})") from None
    if not raw.strip():
        raise error(f"{path} is empty: nothing to load (was the download interrupted?)")
    if raw.startswith((b"\xff\xfe", b"\xfe\xff")):
        raise error(f"{path} is UTF-16 text; re-encode it as UTF-8 "
                    f"(e.g. `iconv -f utf-16 -t utf-8`)")
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = raw[:exc.start].count(b"\n") + 1
        raise error(f"{path}:{line}: not valid UTF-8 (byte {exc.start}: "
                    f"{raw[exc.start:exc.start + 4]!r}); re-encode the file as UTF-8, e.g. "
                    f"with `iconv -f latin1 -t utf-8`") from None


def check_json_file(path: str | Path, error: Callable[[str], Exception]) -> None:
    """``path`` holds a JSON array/object of records or JSON lines, each an object; raises
    ``error(message)`` naming the file and line otherwise."""
    path = Path(path)
    text = _decode(path, error)
    stripped = text.lstrip()
    if stripped.startswith("["):
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise error(f"{path}:{exc.lineno}: not valid JSON ({exc.msg}); is the file "
                        f"truncated?") from None
        bad = [i for i, r in enumerate(data) if not isinstance(r, dict)]
        if bad:
            raise error(f"{path}: record {bad[0]} is a {type(data[bad[0]]).__name__}, not an "
                        f"object of named fields")
        if not data:
            raise error(f"{path} holds an empty list: nothing to load")
        return
    for line_no, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as exc:
            if line_no == 1 and stripped.startswith("{"):  # maybe one pretty-printed object
                try:
                    json.loads(text)
                    return
                except json.JSONDecodeError:
                    pass
            raise error(f"{path}:{line_no}: not valid JSON ({exc.msg}); is the line "
                        f"truncated?") from None
        if not isinstance(record, dict):
            raise error(f"{path}:{line_no}: a {type(record).__name__}, not a JSON object of "
                        f"named fields")


def load_local_dataset(path: str | Path | list, kind: str,
                       error: Callable[[str], Exception]):
    """``datasets.load_dataset(kind, data_files=path, split="train")`` with the file checked
    first (JSON) and any failure of ``datasets`` reported as ``error(message)``."""
    import datasets

    files = [Path(p) for p in (path if isinstance(path, (list, tuple)) else [path])]
    for f in files:
        if kind == "json":
            check_json_file(f, error)
        elif f.is_file() and f.stat().st_size == 0:
            raise error(f"{f} is empty: nothing to load")
    try:
        ds = datasets.load_dataset(kind, data_files=[str(f) for f in files], split="train")
    except Exception as exc:  # DatasetGenerationError, ArrowInvalid, …: name the file instead
        first = str(exc).strip().splitlines()[0][:200] if str(exc).strip() else ""
        cause = exc.__cause__ or exc.__context__
        detail = f"{type(exc).__name__}: {first}" + (f" ({type(cause).__name__}: "
                                                       f"{str(cause)[:200]})" if cause else "")
        raise error(f"{', '.join(map(str, files))}: cannot be read as {kind} ({detail}); check "
                    f"that every record has the same fields with the same types") from None
    if len(ds) == 0:
        raise error(f"{', '.join(map(str, files))}: no records")
    return ds


def read_csv(path: str | Path, error: Callable[[str], Exception], **kwargs: Any):
    """``pandas.read_csv`` with an empty, binary or malformed file reported as
    ``error(message)`` naming the file."""
    try:
        return pd.read_csv(path, **kwargs)
    except pd.errors.EmptyDataError:
        raise error(f"{path} is empty: nothing to load") from None
    except (pd.errors.ParserError, UnicodeDecodeError, ValueError, OSError) as exc:
        if isinstance(exc, FileNotFoundError):
            raise
        msg = str(exc).strip().splitlines()[0][:200] if str(exc).strip() else type(exc).__name__
        raise error(f"{path}: cannot be read as CSV ({msg}); is it the right file, complete "
                    f"and comma-separated?") from None


def check_text_fields(record: dict, fields: list[str], where: str,
                      error: Callable[[str], Exception], *, allow_empty: bool = False) -> None:
    """Every field of ``record`` in ``fields`` is a string (not null, a number or a list)."""
    for name in fields:
        value = record.get(name)
        if not isinstance(value, str):
            what = "null" if value is None else f"a {type(value).__name__} ({value!r:.40})"
            raise error(f"{where}: field {name!r} is {what}, not text; fix or drop the record")
        if not allow_empty and not value.strip():
            raise error(f"{where}: field {name!r} is empty; fix or drop the record")


def report_skipped(skipped: dict[str, int], what: str, error: Callable[[str], Exception], *,
                   strict: bool, unit: str = "") -> None:
    """Say what a loader skipped: ``skipped`` maps a reason (``"empty_text"``) to a count; the
    non-zero ones are named in one message (``"<what>: skipped 3 empty text<unit>"``), raised
    as ``error`` with ``strict``, else warned about at the loader's caller."""
    bad = {k: v for k, v in skipped.items() if v}
    if not bad:
        return
    msg = f"{what}: skipped " + ", ".join(f"{v} {k.replace('_', ' ')}{unit}"
                                           for k, v in bad.items())
    if strict:
        raise error(msg + " (strict=True)")
    warnings.warn(msg, stacklevel=3)
