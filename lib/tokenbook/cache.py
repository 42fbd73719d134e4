"""Content-addressed on-disk cache for tables (parquet) and trained models (folders).

Everything a chapter computes that takes more than a few seconds goes through here, keyed by a
dict of everything that produced it (world parameters, training parameters, model ids, code
version tag). Writes are atomic: a killed run leaves either the old entry or none, never half.

The cache root is ``$TOKENBOOK_CACHE`` if set, else ``<repo>/_build/cache`` when running from a
checkout, else ``~/.cache/tokenbook``.

Example
-------
>>> table = cached_table("word-surprisal", {"world": 0, "model": "tiny-v1"}, compute_fn)  # doctest: +SKIP
>>> model_dir = cached_dir("paligemma-tiny", params, lambda out: train_and_save(out))   # doctest: +SKIP
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any, Callable

CACHE_ENV = "TOKENBOOK_CACHE"


def cache_root() -> Path:
    """The cache folder (created if missing)."""
    if os.environ.get(CACHE_ENV):
        root = Path(os.environ[CACHE_ENV])
    else:
        repo = Path(__file__).resolve().parents[2]
        root = (repo / "_build" / "cache") if (repo / "pyproject.toml").exists() \
            else Path.home() / ".cache" / "tokenbook"
    root.mkdir(parents=True, exist_ok=True)
    return root


def _canonical(obj: Any) -> Any:
    if isinstance(obj, dict):
        return {str(k): _canonical(v) for k, v in sorted(obj.items(), key=lambda kv: str(kv[0]))}
    if isinstance(obj, (list, tuple)):
        return [_canonical(v) for v in obj]
    if isinstance(obj, Path):
        return str(obj)
    if hasattr(obj, "tolist"):
        return obj.tolist()
    return obj


def cache_key(kind: str, params: dict) -> str:
    """``kind-<16 hex>``: a stable hash of ``params`` (dict order does not matter)."""
    if not kind or "/" in kind:
        raise ValueError(f"cache kind must be a non-empty name without '/', got {kind!r}")
    blob = json.dumps(_canonical(params), sort_keys=True, default=str).encode()
    return f"{kind}-{hashlib.sha256(blob).hexdigest()[:16]}"


def cached_table(kind: str, params: dict, compute: Callable[[], "Any"], *, refresh: bool = False):
    """Return the DataFrame cached under (kind, params), computing and storing it if absent."""
    import pandas as pd

    path = cache_root() / f"{cache_key(kind, params)}.parquet"
    if path.exists() and not refresh:
        return pd.read_parquet(path)
    frame = compute()
    if not isinstance(frame, pd.DataFrame):
        raise TypeError(f"cached_table({kind!r}): compute() must return a DataFrame, "
                        f"got {type(frame).__name__}")
    write_parquet_atomic(frame, path)
    write_json_atomic(params, path.with_suffix(".json"))
    return frame


def cached_dir(kind: str, params: dict, build: Callable[[Path], None], *,
               refresh: bool = False) -> Path:
    """Return a folder cached under (kind, params); ``build(tmp_dir)`` fills it if absent.

    The folder is built in a temporary sibling and renamed into place when ``build`` returns,
    so an interrupted build never leaves a half-written entry.
    """
    final = cache_root() / cache_key(kind, params)
    if final.exists() and not refresh:
        return final
    tmp = Path(tempfile.mkdtemp(prefix=final.name + ".tmp-", dir=final.parent))
    try:
        build(tmp)
        (tmp / "cache_params.json").write_text(json.dumps(_canonical(params), indent=2,
                                                          default=str))
        if final.exists():
            if not refresh:  # built meanwhile by another process (e.g. a sweep): keep theirs
                shutil.rmtree(tmp, ignore_errors=True)
                return final
            shutil.rmtree(final)
        try:
            os.replace(tmp, final)
        except OSError:
            if not final.exists():
                raise
            shutil.rmtree(tmp, ignore_errors=True)  # lost the race to a concurrent build
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return final


def write_parquet_atomic(frame, path: str | os.PathLike) -> Path:
    """Write a DataFrame to parquet through a temporary file and an atomic rename."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    frame.to_parquet(tmp, index=False)
    os.replace(tmp, path)
    return path


def write_json_atomic(obj: Any, path: str | os.PathLike) -> Path:
    """Write JSON through a temporary file and an atomic rename."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    tmp.write_text(json.dumps(_canonical(obj), indent=2, default=str))
    os.replace(tmp, path)
    return path
