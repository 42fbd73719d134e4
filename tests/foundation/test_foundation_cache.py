"""The on-disk cache: keys, reuse, atomicity."""

from __future__ import annotations

import json
import os

import pandas as pd
import pytest

from tokenbook import cache


def _entries() -> list:
    """What the cache root holds besides its lock files (kept under ``locks/``)."""
    return [p for p in cache.cache_root().iterdir() if p.name != cache.LOCKS]


@pytest.fixture(autouse=True)
def _own_cache(tmp_path, monkeypatch):
    monkeypatch.setenv(cache.CACHE_ENV, str(tmp_path / "cache"))


def test_keys_are_stable_and_order_free():
    a = cache.cache_key("t", {"a": 1, "b": [1, 2], "c": {"x": 1, "y": 2}})
    b = cache.cache_key("t", {"c": {"y": 2, "x": 1}, "b": [1, 2], "a": 1})
    assert a == b and a.startswith("t-")
    assert cache.cache_key("t", {"a": 2}) != cache.cache_key("t", {"a": 1})
    assert cache.cache_key("u", {"a": 1}) != cache.cache_key("t", {"a": 1})
    with pytest.raises(ValueError):
        cache.cache_key("a/b", {})



def test_a_field_added_later_keeps_the_old_keys_at_its_default():
    old = {"steps": 10, "lr": 0.1}
    later = {"story_steps": 0, "style": "typology"}
    assert cache.cache_key("m", cache.without_later_defaults(
        {**old, "story_steps": 0, "style": "typology"}, later)) == cache.cache_key("m", old)
    moved = cache.without_later_defaults({**old, "story_steps": 5, "style": "typology"}, later)
    assert moved == {**old, "story_steps": 5}
    assert cache.cache_key("m", moved) != cache.cache_key("m", old)
    # a field not named in ``later`` stays even at a falsy value
    assert cache.without_later_defaults({"steps": 0}, later) == {"steps": 0}

def test_cached_table_computes_once():
    calls = []

    def compute():
        calls.append(1)
        return pd.DataFrame({"x": [1, 2, 3]})

    t1 = cache.cached_table("tab", {"n": 3}, compute)
    t2 = cache.cached_table("tab", {"n": 3}, compute)
    pd.testing.assert_frame_equal(t1, t2)
    assert len(calls) == 1
    cache.cached_table("tab", {"n": 4}, compute)
    assert len(calls) == 2
    with pytest.raises(TypeError, match="DataFrame"):
        cache.cached_table("tab", {"n": 5}, lambda: [1, 2])


def test_failed_table_compute_leaves_no_entry():
    def boom():
        raise RuntimeError("no")

    with pytest.raises(RuntimeError):
        cache.cached_table("tab", {"n": 1}, boom)
    assert _entries() == []


def test_cached_dir_is_atomic():
    def build_fail(out):
        (out / "weights.bin").write_bytes(b"half")
        raise KeyboardInterrupt  # killed mid-build

    with pytest.raises(KeyboardInterrupt):
        cache.cached_dir("model", {"seed": 0}, build_fail)
    assert _entries() == []  # no entry, no temporary left behind

    def build_ok(out):
        (out / "weights.bin").write_bytes(b"full")

    path = cache.cached_dir("model", {"seed": 0}, build_ok)
    assert (path / "weights.bin").read_bytes() == b"full"
    assert json.loads((path / "cache_params.json").read_text()) == {"seed": 0}
    again = cache.cached_dir("model", {"seed": 0}, build_fail)  # cached: build not called
    assert again == path


def test_atomic_writers(tmp_path):
    p = cache.write_json_atomic({"b": 1, "a": [1, 2]}, tmp_path / "x" / "a.json")
    assert json.loads(p.read_text()) == {"a": [1, 2], "b": 1}
    q = cache.write_parquet_atomic(pd.DataFrame({"a": [1]}), tmp_path / "t.parquet")
    assert pd.read_parquet(q)["a"].tolist() == [1]
    assert sorted(os.listdir(tmp_path)) == ["t.parquet", "x"]  # no temporaries


def test_atomic_path_keeps_the_old_file_until_the_new_one_is_whole(tmp_path):
    target = tmp_path / "deep" / "claims.json"
    with cache.atomic_path(target) as tmp:
        assert tmp.parent == target.parent and tmp != target     # parents made, a new name
        tmp.write_text("old")
    assert target.read_text() == "old"
    with pytest.raises(RuntimeError, match="killed"):
        with cache.atomic_path(target) as tmp:
            tmp.write_text("half of the new")
            assert target.read_text() == "old"                 # not visible before the end
            raise RuntimeError("killed mid-write")
    assert target.read_text() == "old"                         # the old file survives
    assert os.listdir(target.parent) == ["claims.json"]         # and no temporary is left
    with cache.atomic_path(target) as tmp:
        tmp.write_text("new")
    assert target.read_text() == "new" and os.listdir(target.parent) == ["claims.json"]


def test_cached_dir_concurrent_build_keeps_the_first_entry():
    def build_inner(out):
        (out / "who").write_text("first")

    def build_outer(out):
        (out / "who").write_text("second")
        # another process finishes the same entry while this one is still building
        cache.cached_dir("model", {"seed": 1}, build_inner)

    path = cache.cached_dir("model", {"seed": 1}, build_outer)
    assert (path / "who").read_text() == "first"
    assert [p.name for p in _entries()] == [path.name]  # no temporaries
    refreshed = cache.cached_dir("model", {"seed": 1}, lambda out: (out / "who").write_text("new"),
                                 refresh=True)
    assert (refreshed / "who").read_text() == "new"
