"""The shared tiny setting: seed streams, the nulls' shuffles and the merged-segment policy."""

from __future__ import annotations

from typing import get_args

import numpy as np
import pandas as pd
import pytest

from tokenbook.book.paramtypes import StoryRegister
from tokenbook.grounded import tiny as gt
from tokenbook.grounded.tables import _split_shares, merge_straddling
from tokenbook.models.paligemma import TrainConfig


def test_streams_differ_by_name_and_root():
    a, b = gt.streams(0), gt.streams(1)
    assert len(set(a.values())) == 3 and a != b and a == gt.streams(0)


def test_derangement_has_no_fixed_point_and_is_seeded():
    ids = [f"s{i}" for i in range(17)]
    d = gt.derangement(ids, seed=3)
    assert sorted(d) == sorted(d.values()) == sorted(ids)
    assert all(k != v for k, v in d.items())
    assert d == gt.derangement(ids, seed=3) and d != gt.derangement(ids, seed=4)
    with pytest.raises(ValueError, match="at least 2"):
        gt.derangement(["a"], seed=0)


def test_shuffled_contexts_come_from_another_story_of_the_same_language():
    rows = [dict(lang=lang, story_id=f"{lang}{s}", sent_idx=k, text=f"{lang}{s}-{k}")
            for lang in ("x", "y") for s in range(4) for k in range(3)]
    st = pd.DataFrame(rows)
    prev = gt.shuffled_contexts(st, seed=0)
    assert len(prev) == len(st)
    for r, p in zip(st.itertuples(), prev):
        assert len(p) == r.sent_idx
        assert all(t.startswith(r.lang) and not t.startswith(r.story_id + "-") for t in p)


def test_split_shares_sum_to_one_per_run():
    segs = [[("ab", "NOUN", 0, 2), ("c", "ADP", 2, 3), ("dd", "VERB", 3, 5)]]
    flags = np.array([True, True, False])
    _, _, n_merged = merge_straddling(["abcdd"], segs, [[1.0, 1.0, 1.0]], flags)
    assert n_merged == [[2, 1]]
    shares, owner = _split_shares(segs, n_merged)
    assert list(owner) == [0, 0, 1]
    assert shares == pytest.approx([2 / 3, 1 / 3, 1.0])


def test_tiny_params_validate():
    with pytest.raises(ValueError, match="merged"):
        gt.TinyParams(merged="keep")
    with pytest.raises(ValueError, match="null"):
        gt.TinyParams(null="blank")
    p = gt.TinyParams.from_mapping({"n_scenes": 50, "caption_splits": ["test"], "other": 1})
    assert p.n_scenes == 50 and p.caption_splits == ("test",)
    assert p.key()["caption_splits"] == ["test"]
    with pytest.raises(ValueError, match="max_page_sentences"):
        gt.TinyParams(max_page_sentences=0)


def test_a_register_tells_the_uid_world_otherwise():
    """``register``: every language's word order and the stories' process, recorded in the
    world (so in every cache key) and in ``key()`` only when not the book's."""
    small = dict(n_languages=2, n_scenes=6, n_stories=6, world_style="uid")
    book = gt.TinyParams(**small)
    told = gt.TinyParams(**small, register="subject first, bare, protagonist 0.5")
    assert "register" not in book.key() and told.key()["register"] == told.register
    overrides, process = gt.REGISTERS[told.register]
    world = gt.tiny_world(0, told)
    assert world.story_process == process and world.fingerprint != gt.tiny_world(0, book).fingerprint
    assert all(t[k] == v for t in world.params["typologies"] for k, v in overrides.items())
    later = world.stories[world.stories.sent_idx > 0]
    # subject first, bare: a later sentence opens with its subject's noun (no connective,
    # no article)
    assert (later["upos"].map(lambda u: u[0]) == "NOUN").all()
    with pytest.raises(ValueError, match="register"):
        gt.TinyParams(**small, register="whisper")
    with pytest.raises(ValueError, match="world_style='uid'"):
        gt.TinyParams(register=told.register)
    # the chapters' parameter type lists exactly the registers there are
    assert get_args(StoryRegister) == tuple(gt.REGISTERS)


def test_tiny_world_has_picture_book_pages_by_default():
    small = dict(n_languages=1, n_scenes=6, n_stories=6)
    paged = gt.tiny_world(0, gt.TinyParams(**small))
    st = paged.stories
    # pages hold 1-3 sentences: some page holds more than one, so paragraphs are not sentences
    per_page = st.groupby(["story_id", "para_idx"]).size()
    assert per_page.between(1, 3).all() and (per_page > 1).any()
    assert (st.groupby("story_id")["para_idx"].max() + 1 == st.groupby("story_id")["n_paras"]
            .first()).all()
    flat = gt.tiny_world(0, gt.TinyParams(**small, max_page_sentences=1))
    assert "para_idx" not in flat.stories and paged.fingerprint != flat.fingerprint
    # the same sentences either way: paging only groups them
    assert flat.stories["text"].tolist() == st["text"].tolist()
    # generated once per process for the same seed, sizes and mechanism (params that do not
    # shape the world, such as the null, do not matter)
    assert gt.tiny_world(0, gt.TinyParams(**small, null="world")) is paged
    assert gt.tiny_world(0, gt.TinyParams(**small), "off") is not paged
    assert gt.tiny_world(1, gt.TinyParams(**small)).fingerprint != paged.fingerprint


# ------------------------------------------------------------------ manipulation and norms
def test_mean_gain_averages_the_depicted_classes_only():
    w = pd.DataFrame({"upos": ["NOUN", "DET", "ADJ", "NUM", "VERB"],
                      "s_U": [3.0, 5.0, 2.0, 1.0, 9.0], "s_P": [1.0, 0.0, 1.5, np.nan, 0.0]})
    assert gt.mean_gain(w, "s_U", "s_P") == pytest.approx((2.0 + 0.5) / 2)   # NaN NUM dropped
    assert np.isnan(gt.mean_gain(w.iloc[[1, 4]], "s_U", "s_P"))


def test_norms_off_world_changes_only_the_relation_to_depiction():
    """Balance: on and off norms rate the same words with the same distribution of base values
    and the same rater noise; manipulation: the ratings follow depiction on (ρ > 0.3), not off."""
    from scipy.stats import spearmanr

    params = gt.TinyParams(n_languages=2, n_scenes=60, n_stories=3)
    rho = {}
    for seed in (0, 1, 2):
        on, off = gt.tiny_norms(seed, params, "on"), gt.tiny_norms(seed, params, "off")
        assert list(on[["lang", "word", "concept"]].itertuples(index=False)) == \
            list(off[["lang", "word", "concept"]].itertuples(index=False))
        assert (on["depicted"] == off["depicted"]).all()
        # each language's concepts keep their ratings' distribution (only clipping moves it)
        assert abs(gt.concept_rating_mean(on) - gt.concept_rating_mean(off)) < 0.05
        for lang in on["lang"].unique():
            rate = {m: sorted(f.loc[f["lang"] == lang].drop_duplicates("concept")
                              ["concreteness"].round(1)) for m, f in (("on", on), ("off", off))}
            assert rate["on"] != rate["off"] and \
                abs(np.mean(rate["on"]) - np.mean(rate["off"])) < 0.1, lang
        for m, frame in (("on", on), ("off", off)):
            rho.setdefault(m, []).append(spearmanr(frame["concreteness"],
                                                   frame["depicted"]).statistic)
    assert min(rho["on"]) > 0.3 and max(np.abs(rho["off"])) < 0.3, rho
    # the ratings are not the depicted flag read back: depicted and not-depicted overlap
    on = gt.tiny_norms(0, params, "on")
    assert on.loc[on["depicted"], "concreteness"].min() < \
        on.loc[~on["depicted"], "concreteness"].max()
    words = pd.DataFrame({"lang": [on["lang"][0], "zz"], "word": [on["word"][0], "w"],
                          "concreteness": [9.0, 9.0]})
    rated = gt.with_norms(words, on)
    assert rated["concreteness"][0] == on["concreteness"][0] and np.isnan(rated["concreteness"][1])


def test_train_tiny_models_trains_each_world_the_null_needs_once_per_seed(monkeypatch):
    calls = []

    class _Models:
        def __init__(self, seed, mechanism):
            self.root = f"/models/{seed}/{mechanism}"

    def fake_setting(seed, params, mechanism, progress):
        calls.append((seed, mechanism))
        return None, _Models(seed, mechanism), False

    monkeypatch.setattr(gt, "_setting", fake_setting)
    roots = gt.train_tiny_models([3, 1], gt.TinyParams(null="shuffle"), n_workers=1,
                                 progress=False)
    assert calls == [(3, "on"), (1, "on")] and roots == ["/models/3/on", "/models/1/on"]
    calls.clear()
    gt.train_tiny_models([5], gt.TinyParams(null="world"), n_workers=1, progress=False)
    assert calls == [(5, "on"), (5, "off")]      # the mechanism-off world has its own models


def test_tiny_models_train_with_every_stage_setting(monkeypatch):
    seen = {}

    def fake_train(world, seed, config, progress):
        seen.update(seed=seed, config=config)
        return "models"

    monkeypatch.setattr(gt, "train_grounded_models", fake_train)
    params = gt.TinyParams(story_steps=7, story_documents=3, story_share=0.25, text_steps=5,
                           align_steps=4, vision_steps=2, train_steps=9, lr=0.004)
    assert gt.tiny_models("world", 4, params) == "models"
    cfg = seen["config"]
    assert (cfg.steps, cfg.text_steps, cfg.story_steps, cfg.story_documents, cfg.story_share,
            cfg.align_steps, cfg.vision_steps, cfg.lr) == (9, 5, 7, 3, 0.25, 4, 2, 0.004)
    assert seen["seed"] == gt.streams(4)["train"]
    gt.tiny_models("world", 4, gt.TinyParams())
    assert seen["config"].lr == TrainConfig().lr == gt.TinyParams().lr   # the default's


@pytest.mark.parametrize("lr", [0, -0.01, 1.5, True, "0.003", float("nan")])
def test_a_learning_rate_out_of_range_fails_before_any_training(lr):
    with pytest.raises(ValueError, match="lr"):
        gt.TinyParams(lr=lr)


def test_the_default_learning_rate_leaves_the_cache_keys_as_they_were():
    assert "lr" not in gt.TinyParams().key()
    assert gt.TinyParams(lr=0.005).key()["lr"] == 0.005
