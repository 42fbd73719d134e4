"""The UID chapter's caption style: referents fixed by the image in reading order, residual
uncertainty on the words the image informs, an off world that drops only the image–word
dependence, and the generator's exact surprisals against brute-force enumeration."""

from collections import Counter

import numpy as np
import pandas as pd
import pytest

from tokenbook.grounded import tiny as gt
from tokenbook.worlds.languages import make_languages
from tokenbook.worlds.render import COLOURS
from tokenbook.worlds.scenes import (UID_STYLE, SceneObject, _uid_caption_plans,
                                     _uid_clause_options, make_world, reading_order,
                                     uid_caption_prefix_probability, uid_clause_distribution)

SMALL = dict(n_languages=4, n_scenes=120, n_stories=4, captions_per_scene=2)


@pytest.fixture(scope="module")
def on():
    return make_world(seed=3, world_style="uid", **SMALL)


@pytest.fixture(scope="module")
def off():
    return make_world(seed=3, world_style="uid", mechanism="off", **SMALL)


def _shape_concepts(row):
    return [c for c, u in zip(row.concepts, row.upos) if u == "NOUN"]


def test_default_world_keeps_the_typology_captions_and_key():
    a = make_world(seed=2, n_scenes=20, n_stories=3)
    b = make_world(seed=2, n_scenes=20, n_stories=3, world_style="typology")
    assert "world_style" not in a.params and a.fingerprint == b.fingerprint
    assert a.captions["text"].tolist() == b.captions["text"].tolist()
    u = make_world(seed=2, n_scenes=20, n_stories=3, world_style="uid")
    assert u.fingerprint != a.fingerprint
    assert u.stories["text"].tolist() != a.stories["text"].tolist()   # persistent stories
    with pytest.raises(ValueError, match="world_style"):
        make_world(seed=2, n_scenes=20, n_stories=3, world_style="bogus")
    assert gt.TinyParams().key() == {k: v for k, v in gt.TinyParams(
        world_style="uid").key().items() if k != "world_style"}


def test_on_clauses_describe_the_objects_in_reading_order(on):
    for r in on.captions.itertuples():
        objs = reading_order(on.scenes[r.scene_id].objects)
        nouns = _shape_concepts(r)
        assert 1 <= len(nouns) <= 2
        assert nouns == [o.shape for o in objs[:len(nouns)]]
        adjs = {c for c, u in zip(r.concepts, r.upos) if u == "ADJ"}
        said = {a for o in objs[:len(nouns)] for a in (o.colour, o.size)}
        assert adjs <= said


def test_off_captions_do_not_follow_their_image_but_keep_the_distribution(on, off):
    match_on = np.mean([_shape_concepts(r)[0] == reading_order(
        on.scenes[r.scene_id].objects)[0].shape for r in on.captions.itertuples()])
    match_off = np.mean([_shape_concepts(r)[0] == reading_order(
        off.scenes[r.scene_id].objects)[0].shape for r in off.captions.itertuples()])
    assert match_on == 1.0 and match_off < 0.35          # chance: 1/5
    assert on.captions["scene_id"].tolist() == off.captions["scene_id"].tolist()
    # same lengths distribution and the same vocabulary kinds (word frequencies by class)
    len_on, len_off = on.captions["words"].map(len), off.captions["words"].map(len)
    assert abs(len_on.mean() - len_off.mean()) < 0.3
    f_on = Counter(u for us in on.captions["upos"] for u in us)
    f_off = Counter(u for us in off.captions["upos"] for u in us)
    n_on, n_off = sum(f_on.values()), sum(f_off.values())
    for u in f_on:
        assert abs(f_on[u] / n_on - f_off[u] / n_off) < 0.02, u


def test_clause_options_are_a_distribution_and_the_sampler_follows_it():
    opts = _uid_clause_options("circle", "red", "big")
    assert abs(sum(p for _, p in opts) - 1) < 1e-12
    lang = make_languages(0, 1)[0]
    scene_objs = (SceneObject(0, "square", "blue", "small", 1, 1),
                  SceneObject(1, "circle", "red", "big", 0, 2))
    from tokenbook.worlds.scenes import Scene
    scene = Scene("x", scene_objs)
    exact = uid_clause_distribution(lang, ("circle", "red", "big"))
    rng = np.random.default_rng(0)
    counts: Counter = Counter()
    n = 6000
    for _ in range(n):
        plan = _uid_caption_plans(scene, rng)[0]
        counts[tuple(w.form for w in lang.clause(plan))] += 1
    for seq, p in exact.items():
        assert abs(counts[seq] / n - p) < 4 * np.sqrt(p * (1 - p) / n) + 1e-3


def _brute_force(lang, objects_pairs, shapes, colours):
    """The caption distribution by direct enumeration of every latent choice (no factoring)."""
    conn = lang.word("and").form
    dist: dict = {}
    for (o0, o1), p_objs in objects_pairs:
        for (pl0, p0) in _uid_clause_options(*o0):
            c0 = tuple(w.form for w in lang.clause(pl0))
            key = c0
            dist[key] = dist.get(key, 0) + p_objs * (1 - UID_STYLE.two_clause_p) * p0
            for (pl1, p1) in _uid_clause_options(*o1):
                c1 = tuple(w.form for w in lang.clause(dict(pl1, conn="and")))
                assert c1[0] == conn
                key = c0 + c1
                dist[key] = dist.get(key, 0) + p_objs * UID_STYLE.two_clause_p * p0 * p1
    return dist


def _prefix_brute(dist, prefix):
    return sum(p for seq, p in dist.items() if seq[:len(prefix)] == prefix)


@pytest.mark.parametrize("code_idx", [0, 2, 3])
def test_exact_prefix_probabilities_match_brute_force(code_idx):
    lang = make_languages(5, 4)[code_idx]
    shapes, colours = ("circle", "square"), ("red", "blue")
    feats = [(s, c, z) for s in shapes for c in colours for z in ("big", "small")]
    prior_pairs = [((a, b), 1 / len(feats) ** 2) for a in feats for b in feats]
    brute_u = _brute_force(lang, prior_pairs, shapes, colours)
    assert abs(sum(brute_u.values()) - 1) < 1e-9
    fast_u = uid_caption_prefix_probability(lang, None, shapes=shapes, colours=colours)
    objs = (SceneObject(0, "square", "blue", "small", 2, 0),
            SceneObject(1, "circle", "red", "big", 0, 1),
            SceneObject(2, "square", "red", "big", 1, 1))
    ro = reading_order(objs)
    brute_p = _brute_force(lang, [(((ro[0].shape, ro[0].colour, ro[0].size),
                                    (ro[1].shape, ro[1].colour, ro[1].size)), 1.0)],
                           shapes, colours)
    fast_p = uid_caption_prefix_probability(lang, objs, shapes=shapes, colours=colours)
    rng = np.random.default_rng(1)
    seqs = list(brute_p)
    for i in rng.choice(len(seqs), size=min(25, len(seqs)), replace=False):
        seq = seqs[int(i)]
        for k in range(len(seq) + 1):
            assert fast_u(seq[:k]) == pytest.approx(_prefix_brute(brute_u, seq[:k]), rel=1e-9)
            assert fast_p(seq[:k]) == pytest.approx(_prefix_brute(brute_p, seq[:k]), rel=1e-9)
    assert fast_p(seqs[0][:1] + ("nonexistent",)) == 0.0


def test_exact_words_known_answer(on, off):
    words = gt.exact_caption_words(on, ("train",))
    assert np.isfinite(words[["s_U", "s_P"]].to_numpy()).all()
    n_words = on.captions[on.captions.split == "train"]["words"].map(len).sum()
    assert len(words) == n_words
    nouns = words[words.upos == "NOUN"]
    # the image lowers the nouns, but not to zero (synonyms), and never raises a word
    assert (nouns.s_P < nouns.s_U).all() and (nouns.s_P >= np.log(2) - 1e-9).all()
    assert (words.s_P <= words.s_U + 1e-9).all()
    verbs = words[words.upos == "VERB"]
    assert np.allclose(verbs.s_P, verbs.s_U)       # the image cannot tell the verb
    nul = gt.exact_caption_words(on, ("train",), image_informs=False)
    assert np.allclose(nul.s_P, nul.s_U)
    with pytest.raises(ValueError, match="image_informs=False"):
        gt.exact_caption_words(off, ("train",))
    with pytest.raises(ValueError, match="world_style='uid'"):
        gt.exact_caption_words(make_world(seed=1, n_scenes=10, n_stories=3), ("train",))
    bad = on.captions.copy()
    bad.at[bad.index[0], "words"] = list(bad.iloc[0].words[::-1])
    on2 = make_world(seed=3, world_style="uid", **SMALL)
    on2.captions = bad
    with pytest.raises(ValueError, match="probability 0"):
        gt.exact_caption_words(on2, (bad.iloc[0].split,))


def test_synonyms_do_not_change_the_lexicon():
    a = make_languages(0, 4)
    b = make_languages(0, 4)
    for la, lb in zip(a, b):
        rows = pd.DataFrame(la.lexicon_rows())
        syn = la.synonym("circle")
        assert syn != la.stems["circle"] and syn not in set(rows.word)
        assert pd.DataFrame(lb.lexicon_rows()).equals(rows)   # drawing one changes nothing
        assert la.synonym("circle") == syn and lb.synonym("circle") == syn


_SHAPES = ("circle", "square", "triangle", "diamond", "cross")


def _subject(row):
    """The first shape noun of a sentence and the colour next to it (the subject)."""
    cs = list(row.concepts)
    k = next((i for i, c in enumerate(cs) if c in _SHAPES), None)
    if k is None:
        return None
    near = [c for c in cs[max(0, k - 2):k + 3] if c in COLOURS]
    return cs[k], near[0] if near else None


def _predicted_share(stories, shuffle: bool) -> float:
    """Share of later sentences whose subject (its shape, and its colour where both name one)
    is the previous sentence's subject — in the story itself or, with ``shuffle``, in another
    story."""
    hit = tot = 0
    for lang, g in stories.groupby("lang"):
        by_story = {sid: gg.sort_values("sent_idx") for sid, gg in g.groupby("story_id")}
        ids = sorted(by_story)
        for n, sid in enumerate(ids):
            rows = list(by_story[sid].itertuples())
            ctx = list(by_story[ids[(n + 1) % len(ids)]].itertuples()) if shuffle else rows
            for k in range(2, min(len(rows), len(ctx) + 1)):
                subj, prev = _subject(rows[k]), _subject(ctx[k - 1])
                if subj is not None and prev is not None:   # same shape, colours agree if named
                    hit += subj[0] == prev[0] and None in (subj[1], prev[1]) or subj == prev
                    tot += 1
    return hit / tot


def test_uid_stories_carry_content_in_their_discourse():
    kw = dict(n_languages=2, n_scenes=10, n_stories=40, max_page_sentences=3)
    uid_w = make_world(seed=4, world_style="uid", **kw)
    typ_w = make_world(seed=4, **kw)
    true_uid = _predicted_share(uid_w.stories, shuffle=False)
    shuf_uid = _predicted_share(uid_w.stories, shuffle=True)
    assert true_uid > 0.45 and shuf_uid < 0.2
    # later sentences always name their subject in full (no pronouns) in the uid world
    later = uid_w.stories[uid_w.stories.sent_idx > 0]
    assert not any("PRON" in us for us in later["upos"])
    assert any("PRON" in us for us in typ_w.stories[typ_w.stories.sent_idx > 0]["upos"])
