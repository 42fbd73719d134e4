"""Visual stories: 4-8 scenes where objects persist, move and change, told sentence by sentence.

Scene 0 introduces the objects (indefinite NPs, coordinated); every later scene is the result of
one event (move / turn colour / grow / shrink / appear / leave) narrated by one sentence whose
subject is a *given* entity: a pronoun when it was the previous sentence's subject (p=0.7),
otherwise a definite NP (with its colour when another object has the same shape). Sentences start
with a connective (``then``/``next`` ADV, ``and`` CCONJ) or none, so both the image of the current
scene (P) and the preceding sentences (D) inform the next words. The story plan is drawn once and
realised in every language (parallel stories, like Bloom-VIST translations).

**Pages** (off by default; :func:`story_pages`). With ``max_page_sentences`` > 1 a story is a
picture book: consecutive sentences are grouped into pages of 1..``max_page_sentences``
sentences that share one picture, the state after the page's *last* event (Bloom-VIST pages
hold one or more sentences under one image). The sentences are the ones drawn above, unchanged;
paging only groups them (from a per-story stream of its own, ``rng_for(seed, "story-pages",
story_idx)``), so a paged world tells the very same stories as the default one.

The picture must not contradict a page's earlier sentences (an earlier attempt that paged freely
did: "the red circle moves. it turns blue." under a picture with a blue circle, and the captioner
trained on such pairs stopped grounding nouns and adjectives). The choice made here: *every
sentence of a page is as true of the page's picture as of the scene right after its own event,
and the picture holds the same objects* (a ``turn`` sentence may name its object's former colour,
as it does under its own picture in the default world). By construction:

* an event that changes which objects the scene holds (:data:`SCENE_CHANGING`: ``appear``,
  ``leave``) always opens a new page: a noun phrase's colour says that another object of its
  shape is in the scene (the uniqueness mechanism of :mod:`.scenes`), so an object appearing or
  leaving later on the page would make an earlier sentence's description wrong for the picture
  (measured: with ``appear`` allowed mid-page, root seed 0's captioner grounded adjectives in
  one language barely above determiners, 0.029 against 0.018 nats);
* an event that changes an object's colour or size (:data:`FALSIFYING`: ``turn``, ``resize``)
  closes the page first when an earlier sentence of the page is about that object (the intro is
  about every object it introduces).

Only ``move`` (positions are not described absolutely), and ``turn``/``resize`` of an object the
page has not mentioned, may follow other sentences on a page.
"""

from __future__ import annotations

from dataclasses import replace

from tokenbook.worlds.languages import rng_for
from tokenbook.worlds.render import COLOURS, GRID

__all__ = ["generate_story_plans", "story_pages", "FALSIFYING", "SCENE_CHANGING",
           "PAGES_VERSION", "PROTAGONIST_P"]

#: bump when :func:`story_pages` groups sentences differently (a paged world records it in its
#: parameters, hence in its fingerprint and every cache key built on it)
PAGES_VERSION = "pages-v2"
#: events that change an object's colour or size: they may not follow a mention of their object
#: on the same page
FALSIFYING = ("turn", "resize")
#: events that change which objects the scene holds: they always open a new page
SCENE_CHANGING = ("appear", "leave")

#: persistent stories: probability that a sentence is about the previous sentence's subject
PROTAGONIST_P = 0.8

_DIRS = {"left": (0, -1), "right": (0, 1), "top": (-1, 0), "bottom": (1, 0)}


def _free_cells(objs) -> list[tuple[int, int]]:
    taken = {(o.row, o.col) for o in objs}
    return [(r, c) for r in range(GRID) for c in range(GRID) if (r, c) not in taken]


def _ref(objs, i, prev_subj, rng, *, allow_pronoun=True, full=False) -> dict:
    """NP spec for a given (already introduced) object ``objs[i]`` (``full``: never a pronoun,
    always its colour and size: the words the discourse can predict)."""
    o = objs[i]
    if full:
        return dict(noun=o.shape, adjs=[o.size, o.colour], definite=True)
    if allow_pronoun and prev_subj is not None and prev_subj == o.uid and rng.random() < 0.7:
        return dict(pronoun=True)
    same_shape = any(p.shape == o.shape for j, p in enumerate(objs) if j != i)
    adjs = [o.colour] if same_shape or rng.random() < 0.3 else []
    return dict(noun=o.shape, adjs=adjs, definite=True)


def generate_story_plans(seed: int, story_idx: int, new_scene, *, min_len: int = 4,
                         max_len: int = 8, adv_p: float = 0.2, persistent: bool = False):
    """Draw one story: a list of (objects, clause plan, event name) per sentence.

    ``new_scene(rng, n)`` draws ``n`` objects in distinct cells (from :mod:`.scenes`);
    ``adv_p`` is the probability of an evaluative adverb (words neither image nor discourse
    predicts) in a sentence after the first.

    ``persistent`` (the UID chapter's world, ``make_world(world_style="uid")``): discourse
    carries content. The intro names every object with its size and colour; every later
    sentence is about the previous sentence's subject (the protagonist) with probability
    :data:`PROTAGONIST_P` (else another object) and names it in full (definite, size and colour,
    never a pronoun), so the earlier pages predict the next page's nouns and adjectives — not
    only its connectives — and a shuffled discourse (another story's pages) misleads on them.
    """
    rng = rng_for(seed, "story", story_idx)
    length = int(rng.integers(min_len, max_len + 1))
    objs = list(new_scene(rng, int(rng.integers(2, 4))))
    next_uid = max(o.uid for o in objs) + 1
    intro = [dict(noun=o.shape, definite=False,
                  adjs=([o.size] if rng.random() < 0.4 or persistent else []) + [o.colour])
             for o in objs]
    plan = dict(kind="intr", verb="exist", subj=intro,
                adv=("clearly" if rng.random() < 0.15 else None))
    out = [(tuple(objs), plan, "intro")]
    prev_subj = None
    for _ in range(1, length):
        events = ["move", "move", "turn", "resize"]
        if len(objs) < 4:
            events.append("appear")
        if len(objs) > 2:
            events.append("leave")
        while True:
            ev = str(rng.choice(events))
            i = int(rng.integers(len(objs)))
            if persistent and prev_subj is not None and rng.random() < PROTAGONIST_P:
                i = next(j for j, p in enumerate(objs) if p.uid == prev_subj)
            o = objs[i]
            if ev == "move":
                opts = [d for d, (dr, dc) in _DIRS.items()
                        if 0 <= o.row + dr < GRID and 0 <= o.col + dc < GRID
                        and (o.row + dr, o.col + dc) in _free_cells(objs)]
                if not opts:
                    continue
                d = str(rng.choice(opts))
                subj = _ref(objs, i, prev_subj, rng, full=persistent)
                dr, dc = _DIRS[d]
                objs[i] = replace(o, row=o.row + dr, col=o.col + dc)
                plan = dict(kind="intr", verb="move", subj=subj,
                            pp=("towards", dict(noun=d, definite=True)))
            elif ev == "turn":
                colour = str(rng.choice([c for c in COLOURS if c != o.colour]))
                subj = _ref(objs, i, prev_subj, rng, full=persistent)
                objs[i] = replace(o, colour=colour)
                plan = dict(kind="intr", verb="turn", subj=subj, adj=colour)
            elif ev == "resize":
                subj = _ref(objs, i, prev_subj, rng, full=persistent)
                verb = "grow" if o.size == "small" else "shrink"
                objs[i] = replace(o, size="big" if o.size == "small" else "small")
                plan = dict(kind="intr", verb=verb, subj=subj)
            elif ev == "appear":
                new = new_scene(rng, 1, avoid=objs)[0]
                new = replace(new, uid=next_uid)
                next_uid += 1
                objs.append(new)
                i = len(objs) - 1
                subj = dict(noun=new.shape, definite=False,
                            adjs=([new.size] if rng.random() < 0.4 or persistent else [])
                            + [new.colour])
                plan = dict(kind="intr", verb="appear", subj=subj)
            else:  # leave
                subj = _ref(objs, i, prev_subj, rng, full=persistent)
                plan = dict(kind="intr", verb="leave", subj=subj)
            break
        prev_subj = objs[i].uid
        if ev == "leave":
            del objs[i]
            prev_subj = None
        u = rng.random()
        plan["conn"] = "then" if u < 0.35 else "next" if u < 0.5 else "and" if u < 0.7 else None
        if rng.random() < adv_p:
            plan["adv"] = str(rng.choice(["really", "surely", "oddly"]))
        out.append((tuple(objs), plan, ev))
    return out


def _about(plans) -> list[set[int]]:
    """The objects (uids) each sentence is about: all of scene 0 for the intro, then the one
    object whose event the sentence narrates (the object that differs between the states)."""
    out = [{o.uid for o in plans[0][0]}]
    for (before, _, _), (after, _, _) in zip(plans, plans[1:]):
        b, a = {o.uid: o for o in before}, {o.uid: o for o in after}
        out.append({u for u in b.keys() | a.keys() if b.get(u) != a.get(u)})
    return out


def story_pages(seed: int, story_idx: int, plans, max_page_sentences: int) -> list[int]:
    """The page (0-based) of each sentence of ``plans`` (:func:`generate_story_plans`).

    Each page draws a size uniformly in 1..``max_page_sentences`` from ``rng_for(seed,
    "story-pages", story_idx)`` and takes that many sentences, unless the next sentence's event
    is :data:`SCENE_CHANGING`, or :data:`FALSIFYING` for an object an earlier sentence of the
    page is about: then the page ends there (module docstring). ``max_page_sentences=1`` gives
    one sentence per page.

    >>> story_pages(0, 0, [((), {}, "intro")], 3)
    [0]
    """
    if isinstance(max_page_sentences, bool) or int(max_page_sentences) != max_page_sentences \
            or max_page_sentences < 1:
        raise ValueError(f"max_page_sentences must be an integer >= 1, got "
                         f"{max_page_sentences!r}")
    if max_page_sentences == 1:
        return list(range(len(plans)))
    rng = rng_for(seed, "story-pages", story_idx)
    about = _about(plans)

    def draw_size() -> int:
        return int(rng.integers(1, max_page_sentences + 1))

    pages, size, target, mentioned = [0], 1, draw_size(), set(about[0])
    for k in range(1, len(plans)):
        event = plans[k][2]
        if size >= target or event in SCENE_CHANGING or (event in FALSIFYING
                                                         and about[k] & mentioned):
            size, target, mentioned = 0, draw_size(), set()
            pages.append(pages[-1] + 1)
        else:
            pages.append(pages[-1])
        size += 1
        mentioned |= about[k]
    return pages
