"""Content-addressed on-disk cache for tables (parquet) and trained models (folders).

Everything a chapter computes that takes more than a few seconds goes through here, keyed by a
dict of everything that produced it (world parameters, training parameters, model ids, code
version tag). Writes are atomic: a killed run leaves either the old entry or none, never half.

Concurrent processes sharing one cache (a sweep, two runs) never build the same entry at once:
each key has a lock (``fcntl.flock`` on ``<key>.lock`` in the cache root, removed when released);
the second process waits and then reuses the first one's entry. Temporaries of a build are named
``<key>.tmp-<host>-<pid>-<random>``; those whose process is gone are removed by the next build of
that key and by :func:`clean_stale`.

The cache root is ``$TOKENBOOK_CACHE`` if set, else ``<repo>/_build/cache`` when running from a
checkout, else ``~/.cache/tokenbook``.

Example
-------
>>> table = cached_table("word-surprisal", {"world": 0, "model": "tiny-v1"}, compute_fn)  # doctest: +SKIP
>>> model_dir = cached_dir("paligemma-tiny", params, lambda out: train_and_save(out))   # doctest: +SKIP
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import secrets
import shutil
import socket
import time
import warnings
from pathlib import Path
from typing import Any, Callable, Iterator

import filelock
import pandas as pd

CACHE_ENV = "TOKENBOOK_CACHE"


#: the folder of the cache root that holds the entries' lock files
LOCKS = "locks"


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


def without_later_defaults(params: dict, later: dict) -> dict:
    """``params`` without the fields of ``later`` that hold the default ``later`` gives them.

    For keys that gained a field after entries were written: at its default the field stays out
    of the key, so the entries made before it existed keep their keys (a new value gets new ones).

    >>> without_later_defaults({"steps": 10, "story_steps": 0}, {"story_steps": 0})
    {'steps': 10}
    >>> without_later_defaults({"steps": 10, "story_steps": 5}, {"story_steps": 0})
    {'steps': 10, 'story_steps': 5}
    """
    return {k: v for k, v in params.items() if not (k in later and v == later[k])}


def cache_key(kind: str, params: dict) -> str:
    """``kind-<16 hex>``: a stable hash of ``params`` (dict order does not matter)."""
    if not kind or "/" in kind:
        raise ValueError(f"cache kind must be a non-empty name without '/', got {kind!r}")
    blob = json.dumps(_canonical(params), sort_keys=True, default=str).encode()
    return f"{kind}-{hashlib.sha256(blob).hexdigest()[:16]}"


# --------------------------------------------------------------------------------------------
# Locks and temporaries
# --------------------------------------------------------------------------------------------
_HOST = re.sub(r"[^A-Za-z0-9]", "_", socket.gethostname())[:40] or "host"
_TMP_RE = re.compile(r"\.tmp-(?P<host>[A-Za-z0-9_]+)-(?P<pid>\d+)(?:-|$|\.)")
STALE_AFTER_S = 24 * 3600  # another host's temporary older than this is abandoned


def tmp_tag() -> str:
    """``tmp-<host>-<pid>-<random>``: lets a later process tell whether the writer is alive."""
    return f"tmp-{_HOST}-{os.getpid()}-{secrets.token_hex(3)}"


def _pid_alive(pid: int) -> bool:
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # exists, owned by someone else
        return True
    return True


def _is_stale(path: Path, now: float | None = None) -> bool:
    """True when ``path`` is a temporary whose writer is gone (same host: its pid is not
    running; another host: older than :data:`STALE_AFTER_S`)."""
    m = _TMP_RE.search(path.name)
    if m and m["host"] == _HOST:
        pid = int(m["pid"])
        return pid != os.getpid() and not _pid_alive(pid)
    # another host's temporary, or an older naming without host and pid: judged by age
    try:
        age = (now or time.time()) - path.lstat().st_mtime
    except OSError:
        return False
    return age > STALE_AFTER_S


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path, ignore_errors=True)
    else:
        with contextlib.suppress(OSError):
            path.unlink()


def clean_stale(root: str | os.PathLike | None = None, prefix: str = "") -> list[Path]:
    """Remove the temporaries under ``root`` (default: the cache root) left by dead processes,
    optionally only those whose name starts with ``prefix``. Returns what was removed."""
    root = Path(root) if root is not None else cache_root()
    removed = []
    if not root.is_dir():
        return removed
    for path in root.iterdir():
        name = path.name.lstrip(".")
        if ".tmp-" in name and name.startswith(prefix) and _is_stale(path):
            _remove(path)
            removed.append(path)
    return removed


@contextlib.contextmanager
def file_lock(path: str | os.PathLike, *,
              timeout_s: float | None = None) -> Iterator[Path]:
    """Hold an exclusive lock on ``path`` across processes (:class:`filelock.FileLock`).

    Re-entrant within one process (one lock object per path, shared by its threads). The lock
    dies with its process (``flock``), so a killed holder never blocks others; the lock file
    is removed on release. Raises :class:`TimeoutError` after ``timeout_s`` seconds.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    lock = filelock.FileLock(path, timeout=-1 if timeout_s is None else timeout_s,
                             thread_local=False, is_singleton=True)
    try:
        lock.acquire()
    except filelock.Timeout:
        raise TimeoutError(f"{path}: still locked by another process after "
                           f"{timeout_s:.0f} s") from None
    try:
        yield path
    finally:
        lock.release()


def key_lock(key: str, root: str | os.PathLike | None = None):
    """The lock of one cache entry: ``<root>/locks/<key>.lock`` (lock files stay after release,
    as :mod:`filelock` keeps them on Unix: unlinking a held lock's path races with waiters)."""
    root = Path(root) if root is not None else cache_root()
    return file_lock(root / LOCKS / f"{key}.lock")


# --------------------------------------------------------------------------------------------
# Entries
# --------------------------------------------------------------------------------------------
def cached_table(kind: str, params: dict, compute: Callable[[], "Any"], *, refresh: bool = False):
    """Return the DataFrame cached under (kind, params), computing and storing it if absent.

    Concurrent callers with the same key wait for the first one and read its table."""
    key = cache_key(kind, params)
    path = cache_root() / f"{key}.parquet"
    if path.exists() and not refresh:
        frame = _read_entry(path)
        if frame is not None:
            return frame
    with key_lock(key):
        clean_stale(path.parent, prefix=path.name)
        if path.exists() and not refresh:  # built by another process while we waited
            frame = _read_entry(path)
            if frame is not None:
                return frame
        frame = compute()
        if not isinstance(frame, pd.DataFrame):
            raise TypeError(f"cached_table({kind!r}): compute() must return a DataFrame, "
                            f"got {type(frame).__name__}")
        write_parquet_atomic(frame, path)
        write_json_atomic(params, path.with_suffix(".json"))
    return frame


def _read_entry(path: Path):
    """The cached table, or None (with a warning) when the file is corrupt: it is rebuilt."""
    try:
        return pd.read_parquet(path)
    except Exception as exc:  # truncated or overwritten by hand: recompute rather than fail
        warnings.warn(f"cache entry {path.name} is unreadable ({type(exc).__name__}); "
                      f"recomputing it", stacklevel=3)
        return None


def _complete(folder: Path) -> bool:
    """A folder entry is complete when its ``cache_params.json`` (written last) is there."""
    return (folder / "cache_params.json").is_file()


CHECKSUMS = "cache_checksums.json"
#: files up to this size (bytes) are hashed when an entry is loaded; larger ones (paper-scale
#: checkpoints) have their size checked only
HASH_ON_LOAD_MAX_BYTES = 256 * 2**20


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _file_checksums(folder: Path) -> dict[str, dict[str, Any]]:
    """Relative path → ``{"size": bytes, "sha256": hex}`` of every file of a built entry."""
    return {str(p.relative_to(folder)): {"size": p.stat().st_size, "sha256": _sha256(p)}
            for p in sorted(folder.rglob("*")) if p.is_file() and p.name != CHECKSUMS}


def entry_problem(folder: Path) -> str | None:
    """Why a complete folder entry cannot be trusted (a file missing, truncated or changed
    since it was built, per its ``cache_checksums.json``), or None. Entries built before
    checksums were recorded are trusted."""
    listing = folder / CHECKSUMS
    if not listing.is_file():
        return None
    try:
        expected = json.loads(listing.read_text())
    except (OSError, ValueError):
        return f"{CHECKSUMS} is unreadable"
    for name, want in expected.items():
        path = folder / name
        try:
            size = path.stat().st_size
        except OSError:
            return f"{name} is missing"
        if size != want.get("size"):
            return f"{name} has {size} bytes, {want.get('size')} when built (truncated?)"
        if size <= HASH_ON_LOAD_MAX_BYTES and _sha256(path) != want.get("sha256"):
            return f"{name} changed since it was built (checksum differs)"
    return None


def _usable(folder: Path, key: str) -> bool:
    """A complete entry whose files match their checksums; warns naming the entry and the
    file otherwise (the caller rebuilds it)."""
    if not _complete(folder):
        return False
    problem = entry_problem(folder)
    if problem is None:
        return True

    warnings.warn(f"cache entry {key} ({folder}) fails its check: {problem}; rebuilding it",
                  stacklevel=3)
    return False


def cached_dir(kind: str, params: dict, build: Callable[[Path], None], *,
               refresh: bool = False) -> Path:
    """Return a folder cached under (kind, params); ``build(tmp_dir)`` fills it if absent.

    The folder is built in a temporary sibling and renamed into place when ``build`` returns,
    so an interrupted build never leaves a half-written entry. Concurrent callers with the same
    key wait for the first one and reuse its folder (one build per key at a time).
    A file of the entry that is missing, truncated or changed since it was built (checked
    against ``cache_checksums.json``, written with the entry) makes it rebuilt, with a warning
    naming the entry and the file.
    """
    key = cache_key(kind, params)
    final = cache_root() / key
    if final.exists() and not refresh and _complete(final) and entry_problem(final) is None:
        return final
    with key_lock(key):
        clean_stale(final.parent, prefix=key)
        if final.exists() and not refresh:  # built by another process while we waited
            if _usable(final, key):
                return final
            if not _complete(final):
                warnings.warn(f"cache entry {key} has no cache_params.json (incomplete or "
                              f"edited by hand); rebuilding it", stacklevel=2)
            refresh = True
        tmp = final.parent / f"{key}.{tmp_tag()}"
        tmp.mkdir()
        try:
            build(tmp)
            (tmp / CHECKSUMS).write_text(json.dumps(_file_checksums(tmp), indent=1))
            (tmp / "cache_params.json").write_text(json.dumps(_canonical(params), indent=2,
                                                              default=str))
            if final.exists():
                if not refresh:  # built meanwhile (re-entrant build of the same key): keep it
                    shutil.rmtree(tmp, ignore_errors=True)
                    return final
                old = final.parent / f"{key}.{tmp_tag()}.old"
                os.replace(final, old)
                shutil.rmtree(old, ignore_errors=True)
            os.replace(tmp, final)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
    return final


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike) -> Iterator[Path]:
    """A temporary file name beside ``path`` to write to: renamed onto ``path`` (one atomic
    ``os.replace``) when the block ends without error, removed when it raises, so a reader
    sees the old file or the new one, never half of one. Creates the parent folders.

    >>> import tempfile
    >>> target = Path(tempfile.mkdtemp()) / "runs" / "claims.json"
    >>> with atomic_path(target) as tmp:
    ...     _ = tmp.write_text("[]")
    >>> target.read_text(), sorted(p.name for p in target.parent.iterdir())
    ('[]', ['claims.json'])
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{tmp_tag()}")
    try:
        yield tmp
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise


def write_parquet_atomic(frame, path: str | os.PathLike) -> Path:
    """Write a DataFrame to parquet through a temporary file and an atomic rename."""
    with atomic_path(path) as tmp:
        frame.to_parquet(tmp, index=False)
    return Path(path)


def write_json_atomic(obj: Any, path: str | os.PathLike) -> Path:
    """Write JSON through a temporary file and an atomic rename."""
    with atomic_path(path) as tmp:
        tmp.write_text(json.dumps(_canonical(obj), indent=2, default=str))
    return Path(path)
