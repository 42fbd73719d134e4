"""The UID world's persistent stories: re-mentions with residual uncertainty, the exact
next-sentence distribution against the generator itself, the oracle's word surprisals and the
page picture's answer against brute-force enumeration, and the known answer (the discourse
lowers UID_v)."""

import math
from collections import Counter
from collections.abc import Mapping

import numpy as np
import pytest

from tokenbook.grounded import tiny as gt
from tokenbook.uid_grounding import experiments as ux
from tokenbook.uid_grounding import measures as uid
from tokenbook.worlds.scenes import SceneObject, make_world
from tokenbook.worlds.stories import (BOOK_STORY, CONNECTIVES, PROTAGONIST_P, REMENTION,
                                      StoryProcess, _after,
                                      _closes, _content_keys, _free_cells, _transitions,
                                      event_rates, narrator_plain_noun_p,
                                      next_sentence_distribution, next_sentence_given_picture,
                                      page_contexts, picture_objects, sentence_given_picture,
                                      sentence_plan, story_pages, story_states)

KW = dict(n_languages=2, n_scenes=10, n_stories=30, max_page_sentences=3)


@pytest.fixture(scope="module")
def world():
    return make_world(seed=5, world_style="uid", **KW)


@pytest.fixture(scope="module")
def narrated():
    """The same world with a narrator who keeps the preferred noun form 9 times in 10."""
    return make_world(seed=5, world_style="uid", narrator_p=0.9, **KW)


#: a story process unlike the book's in every probability
TOLD = StoryProcess(protagonist_p=0.5, connectives=(("then", 0.6), (None, 0.4)), size_p=0.25,
                    colour_p=0.75)


@pytest.fixture(scope="module")
def told():
    """The narrated world told with another story process (:data:`TOLD`)."""
    return make_world(seed=5, world_style="uid", narrator_p=0.9, story_process=TOLD, **KW)


def test_a_story_process_is_a_world_parameter():
    """The book's process leaves the world's parameters (hence every cache key) as they were;
    another is recorded, changes the fingerprint and tells other stories; bad ones are named."""
    book = make_world(seed=5, world_style="uid", **KW)
    same = make_world(seed=5, world_style="uid", story_process=BOOK_STORY, **KW)
    assert "story_process" not in book.params and same.fingerprint == book.fingerprint
    assert book.story_process == BOOK_STORY
    other = make_world(seed=5, world_style="uid", story_process=TOLD, **KW)
    assert other.params["story_process"]["protagonist_p"] == 0.5
    assert other.story_process == TOLD and other.fingerprint != book.fingerprint
    assert not other.stories["words"].equals(book.stories["words"])
    # no connective opens any later sentence of a world told without them
    bare = make_world(seed=5, world_style="uid", story_process=StoryProcess(
        connectives=((None, 1.0),)), **KW)
    later = bare.stories[bare.stories.sent_idx > 0]
    assert not later["upos"].map(lambda u: u[0] in ("ADV", "CCONJ")).any()
    with pytest.raises(TypeError, match="StoryProcess"):
        make_world(seed=5, world_style="uid", story_process={"protagonist_p": 0.5}, **KW)
    with pytest.raises(ValueError, match="world_style='uid'"):
        make_world(seed=5, story_process=TOLD, n_scenes=10, n_stories=3)
    with pytest.raises(ValueError, match="protagonist_p"):
        StoryProcess(protagonist_p=1.5)
    with pytest.raises(ValueError, match="sum to 1"):
        StoryProcess(connectives=(("then", 0.5),))


def _key_of(plan: dict) -> tuple:
    """The key (:func:`next_sentence_distribution`) of a drawn sentence's clause plan."""
    s = plan["subj"]
    return (plan["verb"], (s["definite"], s["noun"], tuple(s["adjs"]), bool(s.get("synonym"))),
            plan.get("pp", (None, {"noun": None}))[1]["noun"] if plan["verb"] == "move"
            else plan.get("adj"), plan.get("conn"), plan.get("adv"))


def _drawn_keys(world, n_stories: int, *, first: int = 10_000):
    """(state, the story's plain-noun probability, the key of the sentence the generator
    drew, its page context (:func:`page_contexts`), its index) for fresh stories' later
    sentences."""
    out = []
    for j in range(first, first + n_stories):
        plain = world.story_plain_noun_p(j)
        plans = world.story_plans(j, own=False)
        pages = story_pages(world.seed, j, plans, world.params["max_page_sentences"])
        for k, (state, context, (_, plan, _)) in enumerate(
                zip(story_states(plans), page_contexts(plans, pages), plans[1:]), start=1):
            out.append((state, plain, _key_of(plan), context, k))
    return out


def _cells(key: tuple) -> tuple[tuple, tuple]:
    """What the draws are counted by: the verb with a move's direction, and the verb with how
    many adjectives the subject keeps and whether it is the synonym."""
    verb, (_, _, adjs, synonym), extra, _, _ = key
    return ("direction", verb, extra if verb == "move" else None), ("np", verb, len(adjs),
                                                                     synonym)


def _is_the_generators(drawn, distributions) -> None:
    """Every drawn key has positive probability under its distribution (``distributions``,
    one per item of ``drawn``), the drawn keys' mean log-probability matches the
    distributions' mean entropy, and each :func:`_cells` cell is drawn as often as the
    distributions say (as they must be when they are the generator's)."""
    logp, entropy, expected, observed = [], [], Counter(), Counter()
    for item, d in zip(drawn, distributions, strict=True):
        assert math.isclose(sum(d.values()), 1.0, rel_tol=1e-9)
        key = item[2]
        assert d.get(key, 0) > 0, key
        logp.append(math.log(d[key]))
        entropy.append(-sum(p * math.log(p) for p in d.values()))
        for k, p in d.items():
            for cell in _cells(k):
                expected[cell] += p
        observed.update(_cells(key))
    se = np.std(np.array(logp) + np.array(entropy)) / math.sqrt(len(drawn))
    assert abs(np.mean(logp) + np.mean(entropy)) < 4 * se + 0.02
    for cell, e in expected.items():
        if e > 20:
            assert abs(observed[cell] - e) < 4 * math.sqrt(e) + 3, (cell, observed[cell], e)


def test_remention_keeps_each_word_with_its_probability(world):
    subjects = [plan["subj"] for j in range(300)
                for _, plan, event in world.story_plans(j, own=False)[1:] if event != "appear"]
    n_adjs = Counter(len(s["adjs"]) for s in subjects)
    n = len(subjects)
    assert abs(n_adjs[0] / n - 0.25) < 0.04 and abs(n_adjs[2] / n - 0.25) < 0.04
    assert abs(np.mean([s["synonym"] for s in subjects]) - 0.5) < 0.04
    assert all(s["definite"] and not s.get("pronoun") for s in subjects)
    assert world.params["uid_style"]["remention"] == REMENTION
    # the realised stories match the plans the oracle reads
    row = world.stories[(world.stories.story_id == "s0003") & (world.stories.sent_idx == 1)]
    plan = world.story_plans(3)[1][1]
    lang = world.language(row.iloc[0].lang)
    assert tuple(w.form for w in lang.clause(plan)) == tuple(row.iloc[0].words)


def test_distribution_sums_to_one_and_puts_the_protagonist_first():
    objs = [SceneObject(0, "circle", "red", "big", 0, 0), SceneObject(1, "square", "blue",
                                                                      "small", 1, 1),
            SceneObject(2, "cross", "green", "big", 2, 2)]
    d = next_sentence_distribution(objs, 1)
    assert math.isclose(sum(d.values()), 1.0, rel_tol=1e-12)
    about = Counter()
    for (verb, (_, noun, _, _), *_), p in d.items():
        about[noun] += p
    # the protagonist (the square) is the subject with PROTAGONIST_P + its uniform share,
    # unless a new object appears (one event in six with three objects: move twice, turn,
    # resize, appear, leave; the newcomer a square with probability 1/5)
    expected = 5 / 6 * (PROTAGONIST_P + (1 - PROTAGONIST_P) / 3) + 1 / 6 * 1 / 5
    assert math.isclose(about["square"], expected, rel_tol=1e-9)
    conn = Counter()
    for key, p in d.items():
        conn[key[3]] += p
    for c, p in CONNECTIVES:
        assert math.isclose(conn[c], p, rel_tol=1e-9)
    with pytest.raises(ValueError, match="prev_subj"):
        next_sentence_distribution(objs, 7)
    # another process: its protagonist weight and its connectives
    d = next_sentence_distribution(objs, 1, process=TOLD)
    about, conn = Counter(), Counter()
    for key, p in d.items():
        about[key[1][1]] += p
        conn[key[3]] += p
    expected = 5 / 6 * (0.5 + 0.5 / 3) + 1 / 6 * 1 / 5
    assert math.isclose(about["square"], expected, rel_tol=1e-9)
    assert math.isclose(conn["then"], 0.6) and math.isclose(conn[None], 0.4)


@pytest.mark.parametrize("which", ["world", "narrated", "told"])
def test_distribution_is_the_generators(which, request):
    """Every drawn sentence has positive probability, the drawn sentences' mean log-probability
    matches the distributions' mean entropy (a wrong protagonist weight, adjective or
    plain-noun probability would not), and the drawn verbs follow their predicted
    frequencies; with and without a narrator, and told by another story process."""
    world = request.getfixturevalue(which)
    drawn = _drawn_keys(world, 400)
    _is_the_generators(drawn, [next_sentence_distribution(*item[0], adv_p=world.story_adv_p,
                                                          plain_noun_p=item[1],
                                                          process=world.story_process)
                               for item in drawn])
    if which == "told":   # the book's process is not this world's
        with pytest.raises(AssertionError):
            _is_the_generators(drawn, [next_sentence_distribution(
                *item[0], adv_p=world.story_adv_p, plain_noun_p=item[1]) for item in drawn])


def test_narrator_keeps_the_preferred_noun_form():
    """A narrator world's stories prefer one noun form each (half of them the plain noun),
    re-mention with it 9 times in 10, and differ from the world without a narrator only in
    that choice: same events, subjects and adjectives."""
    world_plain = make_world(seed=5, world_style="uid", narrator_p=0.9, **KW)
    plain_ps = [world_plain.story_plain_noun_p(j) for j in range(400)]
    assert set(np.round(plain_ps, 12)) == {0.1, 0.9}
    assert abs(np.mean(np.array(plain_ps) > 0.5) - 0.5) < 0.08
    kept, n = 0, 0
    base = make_world(seed=5, world_style="uid", **KW)
    for j in range(300):
        mine, theirs = world_plain.story_plans(j, own=False), base.story_plans(j, own=False)
        assert [e for *_, e in mine] == [e for *_, e in theirs]
        for (_, plan, event), (_, other, _) in zip(mine[1:], theirs[1:]):
            assert plan["subj"].get("adjs") == other["subj"].get("adjs")
            if event != "appear":
                kept += plan["subj"]["synonym"] == (plain_ps[j] < 0.5)
                n += 1
    assert abs(kept / n - 0.9) < 0.03
    assert world_plain.params["narrator_p"] == 0.9 and "narrator_p" not in base.params
    assert world_plain.fingerprint != base.fingerprint
    with pytest.raises(ValueError, match="narrator_p must be a probability in"):
        make_world(seed=5, world_style="uid", narrator_p=0.3, **KW)
    with pytest.raises(ValueError, match="world_style='uid'"):
        make_world(seed=5, narrator_p=0.9, n_scenes=10, n_stories=3)
    with pytest.raises(ValueError, match="narrator_p needs world_style='uid'"):
        gt.TinyParams(narrator_p=0.9)
    with pytest.raises(ValueError, match="narrator_p must be a probability in"):
        gt.TinyParams(world_style="uid", narrator_p=0.2)
    assert "narrator_p" not in gt.TinyParams(world_style="uid").key()
    assert gt.TinyParams(world_style="uid", narrator_p=0.9).key()["narrator_p"] == 0.9
    assert narrator_plain_noun_p(5, 3, None) == REMENTION["plain_noun_p"]


@pytest.mark.parametrize("which", ["world", "narrated", "told"])
def test_exact_story_words_against_brute_force(which, request):
    world = request.getfixturevalue(which)
    words = gt.exact_story_words(world, ("train",), n_marginal=40)
    assert (words["sent_idx"] > 0).all() and np.isfinite(words[["s_U", "s_D"]]).all().all()
    # one sentence: its summed s_D is −log of the total probability of the keys that realise it
    # (with the story's own plain-noun probability where it has a narrator)
    row = world.stories[(world.stories.split == "train") & (world.stories.sent_idx == 2)].iloc[0]
    story_idx = int(row.story_id[1:])
    state = story_states(world.story_plans(story_idx))[1]
    d = next_sentence_distribution(*state, adv_p=world.story_adv_p,
                                   plain_noun_p=world.story_plain_noun_p(story_idx),
                                   process=world.story_process)
    lang = world.language(row.lang)
    total = sum(p for k, p in d.items()
                if tuple(w.form for w in lang.clause(sentence_plan(k))) == tuple(row.words))
    mine = words[(words.story_id == row.story_id) & (words.sent_idx == 2)
                 & (words.lang == row.lang)]
    assert math.isclose(mine["s_D"].sum(), -math.log(total), rel_tol=1e-9)
    null = gt.exact_story_words(world, ("train",), n_marginal=40, discourse_informs=False)
    assert np.allclose(null["s_D"], null["s_U"])
    # the text-only marginal is computed once per world: the null's s_U is the same numbers
    np.testing.assert_array_equal(null["s_U"].to_numpy(), words["s_U"].to_numpy())
    # the discourse informs the subject's words, not the connective
    gain = (words["s_U"] - words["s_D"]).groupby(words["upos"]).mean()
    assert gain["NOUN"] > 0.3 and abs(gain.get("CCONJ", 0.0)) < 1e-9
    with pytest.raises(ValueError, match="world_style='uid'"):
        gt.exact_story_words(make_world(seed=1, n_scenes=10, n_stories=3), ("train",))


def test_the_narrator_is_what_the_earlier_pages_add(world, narrated):
    """The known answer with a narrator: the earlier pages tell the reader the noun form, so
    the discourse lowers the nouns by more than without one (log 2 − H(0.9) ≈ 0.37 nats per
    re-mentioned noun at most), while the text-only surprisal of a noun is unchanged in
    expectation (each form still 1/2 over stories) and a verb gains the same (up to the
    Monte Carlo marginal: a verb after its subject is conditioned on the noun's form)."""
    plain = gt.exact_story_words(world, ("train",), n_marginal=40)
    told = gt.exact_story_words(narrated, ("train",), n_marginal=40)
    gain = {name: (t["s_U"] - t["s_D"]).groupby(t["upos"]).mean()
            for name, t in (("plain", plain), ("told", told))}
    assert 0.1 < gain["told"]["NOUN"] - gain["plain"]["NOUN"] < 0.37
    assert abs(gain["told"]["VERB"] - gain["plain"]["VERB"]) < 0.01


@pytest.mark.slow
def test_known_answer_the_discourse_lowers_uid_v():
    """The world plants the paper's mechanism: by the generator's own surprisals the discourse
    lowers the sentences' UID_v in every language (root seeds 0 and 1 of the chapter's
    world), and the shuffled discourse in none."""
    params = gt.TinyParams(n_languages=4, n_scenes=40, n_stories=40, world_style="uid")
    for seed in (0, 1):
        for mech, expect in (("on", 1.0), ("off", 0.0)):
            table = uid.story_unit_measures(gt.reference_story_words(seed, params, mech),
                                            min_words=3).table
            comp = ux.discourse_comparison(table, n_boot=100, boot_seed=0)
            assert ux.share_lower(comp, "uid_v", contrast="D vs U") == expect


def test_the_text_only_marginal_is_symmetric_and_keeps_impossible_sentences_out():
    """U averages the Monte Carlo mixture over relabellings of shapes, colours and sizes:
    still a distribution, invariant under a relabelling, and no sentence the generator cannot
    write (growing a big object, turning to the colour it is named with) gets mass."""
    objs = [SceneObject(0, "circle", "red", "big", 0, 0), SceneObject(1, "square", "blue",
                                                                      "small", 2, 1)]
    sym = gt._symmetrised(next_sentence_distribution(objs, 0))
    assert math.isclose(sum(sym.values()), 1.0, rel_tol=1e-9)
    for (verb, (_, _, adjs, _), extra, _, _), p in sym.items():
        assert not (verb == "grow" and "big" in adjs) and not (verb == "shrink" and "small" in adjs)
        assert not (verb == "turn" and extra in adjs)
    swap = {"red": "blue", "blue": "red", "big": "small", "small": "big", "grow": "shrink",
            "shrink": "grow", "circle": "cross", "cross": "circle"}
    for key, p in list(sym.items())[:200]:
        verb, (d, noun, adjs, syn), extra, conn, adv = key
        other = (swap.get(verb, verb), (d, swap.get(noun, noun),
                                        tuple(swap.get(a, a) for a in adjs), syn),
                 swap.get(extra, extra), conn, adv)
        assert math.isclose(sym[other], p, rel_tol=1e-9)


# --------------------------------------------------------------------------- the page's picture
def _oracle_args(world, k: int, context) -> dict:
    size, mentioned, _ = context
    return dict(page_size=size, mentioned=mentioned, sent_idx=k,
                lengths=(world.params["min_story_len"], world.params["max_story_len"]),
                max_page_sentences=world.params["max_page_sentences"],
                adv_p=world.story_adv_p, process=world.story_process)


@pytest.mark.parametrize("which", ["narrated", "told"])
def test_sentence_given_story_and_picture_is_the_generators(which, request):
    """P(sentence | story so far, page picture) against the generator's own draws (every
    drawn sentence possible under its page's picture, as often as predicted; a page break
    at a fixed rate fails this), and sharper than the sentence without the picture; also
    told by another story process."""
    world = request.getfixturevalue(which)
    drawn = _drawn_keys(world, 200)

    def with_picture(item):
        state, plain, _, context, k = item
        return next_sentence_given_picture(*state, context[2], plain_noun_p=plain,
                                           **_oracle_args(world, k, context))

    given = [with_picture(item) for item in drawn]
    _is_the_generators(drawn, given)
    gain = [math.log(d[item[2]])
            - math.log(next_sentence_distribution(*item[0], adv_p=world.story_adv_p,
                                                  plain_noun_p=item[1],
                                                  process=world.story_process)[item[2]])
            for item, d in zip(drawn, given)]
    assert np.mean(gain) > 0.5


_PAGE_ENDS: dict[tuple, Counter] = {}     # the walk's memo: (state, page, story) -> pictures


def _page_end_pictures(objs, prev, size: int, target: int, mentioned: set, j: int,
                       length: int) -> Mapping:
    """Brute force: the distribution of a page's picture, the page holding ``size`` sentences
    about ``mentioned`` up to sentence ``j`` of a story of ``length`` sentences, its drawn
    size ``target``, by walking every sequence of events to the page's end (the rule of
    :func:`story_pages`, written out again: the next sentence joins the page unless the story
    or the page's size is over or its event closes the page)."""
    if j + 1 >= length or size >= target:
        return {picture_objects(objs): 1.0}
    # a story longer than the page can reach walks the same: its length counts up to there
    key = (tuple(objs), prev, size, target, frozenset(mentioned), j,
           min(length, j + 1 + target - size))
    if key in _PAGE_ENDS:
        return _PAGE_ENDS[key]
    out = _PAGE_ENDS[key] = Counter()
    for p, ev, i, extra in _transitions(objs, prev):
        if ev == "appear":                          # a scene change closes the page
            out[picture_objects(objs)] += p
            continue
        nxt, prv, about = _after(objs, ev, i, extra)
        if _closes(ev, about, mentioned):
            out[picture_objects(objs)] += p
            continue
        for picture, q in _page_end_pictures(nxt, prv, size + 1, target, mentioned | about,
                                             j + 1, length).items():
            out[picture] += p * q
    return out


def _brute_force_given_picture(objs, prev, picture, *, page_size, mentioned, sent_idx,
                               lengths, max_page_sentences, plain_noun_p) -> dict:
    """P(sentence content (verb, NP, extra) | story so far, page picture) by enumerating the
    story's length (uniform on ``lengths``, at least ``sent_idx`` + 1), the previous page's
    drawn size (uniform on ``page_size``..max), the new page's (uniform on 1..max), every
    event of the sentence (an appearing object's cell uniform over the free cells) and every
    event after it to the page's end."""
    lo, hi = lengths
    picture = tuple(sorted(picture))
    content = Counter()
    for length in range(max(lo, sent_idx + 1), hi + 1):
        for t_prev in range(page_size, max_page_sentences + 1):
            for p, ev, i, extra in _transitions(objs, prev):
                cells = _free_cells(objs) if ev == "appear" else [None]
                # a newcomer keeps its look to its page's end: one the picture does not show
                # is walked for one cell (asserted impossible below), not for every cell
                unseen_newcomer = ev == "appear" and tuple(extra) not in picture
                if unseen_newcomer:
                    cells = cells[:1]
                like = 0.0
                for cell in cells:
                    nxt, prv, about = _after(objs, ev, i, extra, cell)
                    if _closes(ev, about, mentioned) or t_prev == page_size:
                        pages = [(1, about, t) for t in range(1, max_page_sentences + 1)]
                    else:
                        pages = [(page_size + 1, mentioned | about, t_prev)]
                    for size, on_page, target in pages:
                        ends = _page_end_pictures(nxt, prv, size, target, on_page, sent_idx,
                                                  length)
                        like += ends.get(picture, 0.0) / len(pages) / len(cells)
                if unseen_newcomer:
                    assert like == 0.0, (extra, picture)
                for key, q in _content_keys(objs[i] if ev != "appear" else None, ev, extra,
                                            plain_noun_p):
                    content[key] += p * like * q
    total = sum(content.values())
    return {k: v / total for k, v in content.items() if v > 0}


def test_sentence_given_picture_against_brute_force(narrated):
    """The page's future (how likely the page's picture is after each possible sentence)
    against a walk over every story length, page size and event sequence to the page's end,
    for the later sentences of fresh stories: the same distribution to 1e-9 (a page that
    never ends by its drawn size, or a story that never ends, would not be)."""
    world = narrated
    lengths = (world.params["min_story_len"], world.params["max_story_len"])
    checked = 0
    for state, plain, key, context, k in _drawn_keys(world, 12, first=30_000)[::3]:
        args = _oracle_args(world, k, context)
        oracle = next_sentence_given_picture(*state, context[2], plain_noun_p=plain,
                                             **{**args, "adv_p": 0.0})
        content = Counter()
        for (verb, np_key, extra, _, _), p in oracle.items():
            content[(verb, np_key, extra)] += p
        brute = _brute_force_given_picture(
            *state, context[2], page_size=context[0], mentioned=context[1], sent_idx=k,
            lengths=lengths, max_page_sentences=world.params["max_page_sentences"],
            plain_noun_p=plain)
        assert set(brute) == {c for c, p in content.items() if p > 0}
        assert all(math.isclose(content[c], p, rel_tol=1e-9) for c, p in brute.items())
        assert key[:3] in brute
        checked += 1
    assert checked >= 8


def test_a_picture_of_the_scene_after_the_sentence_alone():
    """With one sentence per page the picture is the scene right after the sentence: one
    that shows the scene unchanged leaves only the moves, in the proportions they have
    without the picture; one that is impossible is an error."""
    objs = [SceneObject(0, "circle", "red", "big", 0, 0), SceneObject(1, "square", "blue",
                                                                      "small", 1, 1)]
    args = dict(page_size=1, mentioned={1}, sent_idx=2, lengths=(4, 8), max_page_sentences=1,
                adv_p=0.2)
    d = next_sentence_given_picture(objs, 1, picture_objects(objs), **args)
    plain = next_sentence_distribution(objs, 1, adv_p=0.2)
    moves = {k: p for k, p in plain.items() if k[0] == "move"}
    assert set(d) == set(moves)
    total = sum(moves.values())
    assert all(math.isclose(d[k], p / total, rel_tol=1e-9) for k, p in moves.items())
    with pytest.raises(ValueError, match="cannot follow this story"):
        next_sentence_given_picture(objs, 1, (("cross", "red", "big"),) * 3, **args)
    with pytest.raises(ValueError, match="page_size must be in 1..max_page_sentences=1"):
        next_sentence_given_picture(objs, 1, picture_objects(objs), **{**args, "page_size": 2})


@pytest.mark.parametrize("which", ["world", "narrated", "told"])
def test_sentence_given_picture_alone_is_the_generators(which, request):
    """P(sentence | page picture) with the event rates of many fresh stories against the
    generator's draws (as above; a narrator's preference is unknown without the pages, so
    every story counts at 1/2), each event as often as the rates say, and a picture with a
    count of objects the rates never saw named."""
    world = request.getfixturevalue(which)
    rates = event_rates([item[0] for item in _drawn_keys(world, 600, first=20_000)],
                        world.story_process)
    assert all(math.isclose(sum(r.values()), 1.0) for r in rates.values())
    drawn = _drawn_keys(world, 250)
    _is_the_generators(drawn, [sentence_given_picture(item[3][2], rates,
                                                      adv_p=world.story_adv_p,
                                                      process=world.story_process)
                               for item in drawn])
    d = sentence_given_picture((("circle", "red", "big"), ("cross", "blue", "small")), rates,
                               adv_p=0.0)
    turns = sum(p for k, p in d.items() if k[0] == "turn")
    assert math.isclose(turns, rates[2]["turn"], rel_tol=1e-9)
    # a turn names the colour it ends in, one of the picture's
    assert {k[2] for k in d if k[0] == "turn"} == {"red", "blue"}
    with pytest.raises(ValueError, match="pictures of"):
        sentence_given_picture((("circle", "red", "big"),) * 9, rates, adv_p=0.0)


def test_exact_story_words_reads_the_picture(world):
    """s_P and s_PD: the picture lowers the subject's words and the verb; without it (the
    shuffle null) they are s_U and s_D."""
    words = gt.exact_story_words(world, ("train",), n_marginal=40, picture_informs=True)
    cols = ["s_U", "s_D", "s_P", "s_PD"]
    assert np.isfinite(words[cols]).all().all()
    gain = {c: (words["s_U"] - words[c]).groupby(words["upos"]).mean() for c in cols}
    assert gain["s_P"]["NOUN"] > 0.3 and gain["s_P"]["VERB"] > 0.1
    assert (words["s_D"] - words["s_PD"]).mean() > 0.2
    blind = gt.exact_story_words(world, ("train",), n_marginal=40)
    np.testing.assert_array_equal(blind["s_P"].to_numpy(), blind["s_U"].to_numpy())
    np.testing.assert_array_equal(blind["s_PD"].to_numpy(), blind["s_D"].to_numpy())
