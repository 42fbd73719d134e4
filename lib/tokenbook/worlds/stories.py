"""Visual stories: picture books of 4-8 pages where objects persist, move and change.

Scene 0 introduces the objects (indefinite NPs, coordinated); every later sentence narrates one
event (move / turn colour / grow / shrink / appear / leave) whose subject is a *given* entity: a
pronoun when it was the previous sentence's subject (p=0.7), otherwise a definite NP (with its
colour when another object has the same shape). Sentences start with a connective
(``then``/``next`` ADV, ``and`` CCONJ) or none, so both the page's picture (P) and the
preceding sentences (D) inform the next words. The story plan is drawn once and realised in
every language (parallel stories, like Bloom-VIST translations).

**Pages.** Like Bloom-VIST pages, a page holds one or more sentences under one picture
(:func:`generate_story_pages`): page 0 is the intro sentence alone; each later page narrates 1-3
consecutive events (probabilities :data:`PAGE_SIZE_PROBS`, drawn from a stream of their own,
``rng_for(seed, "pages", story_idx)``), and its picture is the scene *after* its last event. The
number of pages per story lies in ``[min_len, max_len]``; the sentences themselves are drawn as
before (:func:`generate_story_plans`), so connectives and pronouns still refer to the previous
sentence, across page breaks too.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from .languages import rng_for
from .render import COLOURS, GRID

__all__ = ["generate_story_plans", "generate_story_pages", "page_sizes", "paginate",
           "PAGE_SIZE_PROBS"]

#: P(a page after the intro narrates 1, 2 or 3 events)
PAGE_SIZE_PROBS = {1: 0.4, 2: 0.4, 3: 0.2}

_DIRS = {"left": (0, -1), "right": (0, 1), "top": (-1, 0), "bottom": (1, 0)}


def _free_cells(objs) -> list[tuple[int, int]]:
    taken = {(o.row, o.col) for o in objs}
    return [(r, c) for r in range(GRID) for c in range(GRID) if (r, c) not in taken]


def _ref(objs, i, prev_subj, rng, *, allow_pronoun=True) -> dict:
    """NP spec for a given (already introduced) object ``objs[i]``."""
    o = objs[i]
    if allow_pronoun and prev_subj is not None and prev_subj == o.uid and rng.random() < 0.7:
        return dict(pronoun=True)
    same_shape = any(p.shape == o.shape for j, p in enumerate(objs) if j != i)
    adjs = [o.colour] if same_shape or rng.random() < 0.3 else []
    return dict(noun=o.shape, adjs=adjs, definite=True)


def generate_story_plans(seed: int, story_idx: int, new_scene, *, min_len: int = 4,
                         max_len: int = 8, adv_p: float = 0.2, n_sents: int | None = None):
    """Draw one story: a list of (objects after the sentence's event, clause plan, event name)
    per sentence.

    ``new_scene(rng, n)`` draws ``n`` objects in distinct cells (from :mod:`.scenes`);
    ``adv_p`` is the probability of an evaluative adverb (words neither image nor discourse
    predicts) in a sentence after the first. The number of sentences is drawn in
    ``[min_len, max_len]`` unless ``n_sents`` (≥ 1) fixes it (the draw is made either way, so
    the rest of the story stream is the same).
    """
    rng = rng_for(seed, "story", story_idx)
    length = int(rng.integers(min_len, max_len + 1))
    if n_sents is not None:
        if int(n_sents) < 1:
            raise ValueError(f"n_sents must be >= 1, got {n_sents}")
        length = int(n_sents)
    objs = list(new_scene(rng, int(rng.integers(2, 4))))
    next_uid = max(o.uid for o in objs) + 1
    intro = [dict(noun=o.shape, definite=False,
                  adjs=([o.size] if rng.random() < 0.4 else []) + [o.colour]) for o in objs]
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
            o = objs[i]
            if ev == "move":
                opts = [d for d, (dr, dc) in _DIRS.items()
                        if 0 <= o.row + dr < GRID and 0 <= o.col + dc < GRID
                        and (o.row + dr, o.col + dc) in _free_cells(objs)]
                if not opts:
                    continue
                d = str(rng.choice(opts))
                subj = _ref(objs, i, prev_subj, rng)
                dr, dc = _DIRS[d]
                objs[i] = replace(o, row=o.row + dr, col=o.col + dc)
                plan = dict(kind="intr", verb="move", subj=subj,
                            pp=("towards", dict(noun=d, definite=True)))
            elif ev == "turn":
                colour = str(rng.choice([c for c in COLOURS if c != o.colour]))
                subj = _ref(objs, i, prev_subj, rng)
                objs[i] = replace(o, colour=colour)
                plan = dict(kind="intr", verb="turn", subj=subj, adj=colour)
            elif ev == "resize":
                subj = _ref(objs, i, prev_subj, rng)
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
                            adjs=([new.size] if rng.random() < 0.4 else []) + [new.colour])
                plan = dict(kind="intr", verb="appear", subj=subj)
            else:  # leave
                subj = _ref(objs, i, prev_subj, rng)
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


def page_sizes(seed: int, story_idx: int, *, min_len: int = 4, max_len: int = 8,
               probs: dict[int, float] | None = None) -> list[int]:
    """Sentences per page of story ``story_idx``: ``[1, k_1, …, k_{n-1}]``.

    The number of pages ``n`` is drawn in ``[min_len, max_len]`` and every later page's size
    from ``probs`` (default :data:`PAGE_SIZE_PROBS`), all from ``rng_for(seed, "pages",
    story_idx)``; page 0 (the intro) always holds one sentence.

    >>> page_sizes(0, 3) == page_sizes(0, 3) and page_sizes(0, 3)[0] == 1
    True
    """
    if not 1 <= min_len <= max_len:
        raise ValueError(f"need 1 <= min_len <= max_len, got {min_len}, {max_len}")
    probs = dict(PAGE_SIZE_PROBS if probs is None else probs)
    sizes = sorted(probs)
    p = np.array([probs[k] for k in sizes], dtype=float)
    if any(int(k) != k or k < 1 for k in sizes) or (p < 0).any() or not np.isclose(p.sum(), 1):
        raise ValueError(f"probs must map page sizes >= 1 to probabilities summing to 1, "
                         f"got {probs}")
    rng = rng_for(seed, "pages", story_idx)
    n_pages = int(rng.integers(min_len, max_len + 1))
    return [1] + [int(k) for k in rng.choice(sizes, size=n_pages - 1, p=p)]


def paginate(plans, sizes) -> list[tuple]:
    """Group per-sentence ``plans`` (:func:`generate_story_plans`) into pages of ``sizes``.

    Returns one (objects, [(plan, event), …]) per page, where ``objects`` is the state after the
    page's last event (the page's picture).
    """
    sizes = [int(k) for k in sizes]
    if any(k < 1 for k in sizes) or sum(sizes) != len(plans):
        raise ValueError(f"page sizes {sizes} must be >= 1 and sum to the {len(plans)} "
                         f"sentences")
    pages, start = [], 0
    for k in sizes:
        chunk = plans[start:start + k]
        pages.append((chunk[-1][0], [(plan, event) for _, plan, event in chunk]))
        start += k
    return pages


def generate_story_pages(seed: int, story_idx: int, new_scene, *, min_len: int = 4,
                         max_len: int = 8, adv_p: float = 0.2,
                         probs: dict[int, float] | None = None) -> list[tuple]:
    """Draw one picture-book story: ``min_len``-``max_len`` pages of (objects, [(plan, event),
    …]); page 0 is the intro sentence, later pages narrate 1-3 events (:func:`page_sizes`) and
    show the scene after their last one (:func:`paginate`)."""
    sizes = page_sizes(seed, story_idx, min_len=min_len, max_len=max_len, probs=probs)
    plans = generate_story_plans(seed, story_idx, new_scene, min_len=min_len, max_len=max_len,
                                 adv_p=adv_p, n_sents=sum(sizes))
    return paginate(plans, sizes)
