"""The cache under concurrency and after crashes: one build per key, stale temporaries removed."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pandas as pd
import pytest

from tokenbook import cache

WORKER = textwrap.dedent('''
    import os, sys, time
    from pathlib import Path
    from tokenbook import cache

    log = Path(sys.argv[1])
    kind = sys.argv[2]

    def build(out):
        with open(log, "a") as f:
            f.write(f"start {os.getpid()}\\n")
        time.sleep(float(sys.argv[3]))
        (out / "who").write_text(str(os.getpid()))
        with open(log, "a") as f:
            f.write(f"end {os.getpid()}\\n")

    if kind == "dir":
        path = cache.cached_dir("model", {"seed": 0}, build)
        print((path / "who").read_text())
    else:
        def compute():
            build(Path(os.environ["TOKENBOOK_CACHE"]) / ".." )
            import pandas as pd
            return pd.DataFrame({"pid": [os.getpid()]})
        print(int(cache.cached_table("tab", {"seed": 0}, compute)["pid"][0]))
''')


@pytest.fixture
def cache_dir(tmp_path, monkeypatch) -> Path:
    root = tmp_path / "cache"
    monkeypatch.setenv(cache.CACHE_ENV, str(root))
    return root


def _spawn(tmp_path, kind, pause, env_root):
    script = tmp_path / "worker.py"
    script.write_text(WORKER)
    env = {**os.environ, cache.CACHE_ENV: str(env_root)}
    return subprocess.Popen([sys.executable, str(script), str(tmp_path / "log"), kind, str(pause)],
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _entries(root: Path) -> list[str]:
    """The cache's entries (its lock files live apart, under ``locks/``)."""
    return sorted(p.name for p in root.iterdir() if p.name != cache.LOCKS)


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["dir", "table"])
def test_two_processes_build_one_entry_once(tmp_path, cache_dir, kind):
    a = _spawn(tmp_path, kind, 2.0, cache_dir)
    deadline = time.time() + 60
    while time.time() < deadline and not (tmp_path / "log").exists():
        time.sleep(0.05)
    b = _spawn(tmp_path, kind, 2.0, cache_dir)  # starts while a is building
    out_a, err_a = a.communicate(timeout=120)
    out_b, err_b = b.communicate(timeout=120)
    assert a.returncode == 0, err_a
    assert b.returncode == 0, err_b
    log = (tmp_path / "log").read_text().split()
    assert log == ["start", str(a.pid), "end", str(a.pid)]  # b never built
    assert out_a.strip() == out_b.strip() == str(a.pid)  # b reused a's entry
    # no lock files, no temporaries left
    assert all(".lock" not in n and ".tmp-" not in n for n in _entries(cache_dir)), \
        _entries(cache_dir)


def test_a_killed_builder_leaves_no_lock_and_its_temporary_is_removed(tmp_path, cache_dir):
    a = _spawn(tmp_path, "dir", 60.0, cache_dir)
    deadline = time.time() + 60
    while time.time() < deadline and not (tmp_path / "log").exists():
        time.sleep(0.05)
    assert any(".tmp-" in n for n in _entries(cache_dir))
    a.kill()
    a.wait()
    t0 = time.time()
    path = cache.cached_dir("model", {"seed": 0}, lambda out: (out / "who").write_text("me"))
    assert time.time() - t0 < 10  # the dead holder's lock did not block us
    assert (path / "who").read_text() == "me"
    assert _entries(cache_dir) == [path.name]  # the dead build's temporary is gone


def test_clean_stale_keeps_live_and_foreign_recent_temporaries(cache_dir):
    cache_dir.mkdir(parents=True, exist_ok=True)
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    host = cache._HOST
    stale = cache_dir / f"model-0123.tmp-{host}-{dead.pid}-abc123"
    live = cache_dir / f"model-0123.tmp-{host}-{os.getpid()}-abc123"
    foreign = cache_dir / "model-0123.tmp-otherhost-12345-abc123"
    old_foreign = cache_dir / ".t.parquet.tmp-otherhost-12345-abc123"
    for p in (stale, live, foreign):
        p.mkdir()
    old_foreign.write_text("x")
    two_days_ago = time.time() - 2 * 24 * 3600
    os.utime(old_foreign, (two_days_ago, two_days_ago))
    removed = cache.clean_stale(cache_dir)
    assert sorted(removed) == sorted([stale, old_foreign])
    assert live.exists() and foreign.exists()


def test_lock_is_reentrant_and_exclusive(tmp_path):
    lock = tmp_path / "k.lock"
    with cache.file_lock(lock):
        with cache.file_lock(lock):  # same process: no deadlock
            assert lock.exists()
        held = subprocess.run(
            [sys.executable, "-c",
             "import sys; from tokenbook import cache\n"
             "try:\n"
             f"    with cache.file_lock({str(lock)!r}, timeout_s=0.5): sys.exit(0)\n"
             "except TimeoutError: sys.exit(3)"], timeout=60)
        assert held.returncode == 3  # another process cannot take it
    free = subprocess.run([sys.executable, "-c", "from tokenbook import cache\n"
                           f"with cache.file_lock({str(lock)!r}, timeout_s=5): pass"], timeout=60)
    assert free.returncode == 0


def test_failed_table_compute_releases_the_lock(cache_dir):
    with pytest.raises(RuntimeError):
        cache.cached_table("tab", {"n": 1}, lambda: (_ for _ in ()).throw(RuntimeError("x")))
    frame = cache.cached_table("tab", {"n": 1}, lambda: pd.DataFrame({"a": [1]}))
    assert frame["a"].tolist() == [1]
    assert all(".lock" not in n for n in _entries(cache_dir))


def test_a_corrupt_table_entry_is_recomputed(cache_dir):
    calls = []

    def compute():
        calls.append(1)
        return pd.DataFrame({"a": [1, 2]})

    cache.cached_table("tab", {"n": 2}, compute)
    (entry,) = cache_dir.glob("*.parquet")
    entry.write_bytes(b"PAR1 truncated")  # a corrupt entry (e.g. copied half)
    with pytest.warns(UserWarning, match="unreadable"):
        frame = cache.cached_table("tab", {"n": 2}, compute)
    assert frame["a"].tolist() == [1, 2] and len(calls) == 2
    assert cache.cached_table("tab", {"n": 2}, compute)["a"].tolist() == [1, 2]
    assert len(calls) == 2  # repaired: read from the cache again


def test_an_incomplete_folder_entry_is_rebuilt(cache_dir):
    path = cache.cached_dir("model", {"seed": 3}, lambda out: (out / "w").write_text("1"))
    (path / "cache_params.json").unlink()  # as if someone copied a half folder in
    (path / "w").write_text("half")
    with pytest.warns(UserWarning, match="rebuilding"):
        again = cache.cached_dir("model", {"seed": 3}, lambda out: (out / "w").write_text("2"))
    assert again == path and (path / "w").read_text() == "2"
    assert _entries(cache_dir) == [path.name]


@pytest.mark.parametrize("damage, says", [
    (lambda f: f.write_bytes(f.read_bytes()[:100]), "truncated"),
    (lambda f: f.write_bytes(b"\x00" * f.stat().st_size), "checksum differs"),
    (lambda f: f.unlink(), "missing"),
])
def test_a_folder_entry_whose_weights_fail_their_check_is_named_and_rebuilt(cache_dir, damage,
                                                                            says):
    """#30: a truncated model.safetensors in a complete entry is named in a warning and the
    entry rebuilt, instead of every later run failing to load it."""
    builds = []

    def build(out):
        builds.append(out)
        (out / "model.safetensors").write_bytes(bytes(range(256)) * 8)
        (out / "config.json").write_text("{}")

    path = cache.cached_dir("model", {"seed": 5}, build)
    assert cache.cached_dir("model", {"seed": 5}, build) == path and len(builds) == 1
    damage(path / "model.safetensors")
    with pytest.warns(UserWarning, match=rf"{path.name}.*model\.safetensors.*{says}"):
        again = cache.cached_dir("model", {"seed": 5}, build)
    assert again == path and len(builds) == 2
    assert (path / "model.safetensors").read_bytes() == bytes(range(256)) * 8
    assert cache.entry_problem(path) is None
