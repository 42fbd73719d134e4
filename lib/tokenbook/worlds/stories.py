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

from dataclasses import dataclass, replace
from typing import Mapping, NamedTuple, Sequence

from tokenbook.worlds.languages import rng_for
from tokenbook.worlds.render import COLOURS, GRID, SHAPES, SIZES

__all__ = ["generate_story_plans", "story_pages", "FALSIFYING", "SCENE_CHANGING",
           "PAGES_VERSION", "PROTAGONIST_P", "REMENTION", "CONNECTIVES", "ADVERBS",
           "StoryProcess", "BOOK_STORY",
           "story_states", "next_sentence_distribution", "sentence_plan",
           "narrator_plain_noun_p", "check_narrator_p", "picture_objects", "event_rates",
           "sentence_given_picture", "next_sentence_given_picture", "page_contexts"]

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
#: persistent stories: a re-mentioned object keeps its size word, its colour word and its plain
#: noun (else the language's synonym) each with these probabilities, independently — the
#: residual uncertainty the discourse cannot resolve, as the captions' optional adjectives and
#: synonyms (the world's parameters record it)
REMENTION = {"size_p": 0.5, "colour_p": 0.5, "plain_noun_p": 0.5}
#: a later sentence's connective and its probability (None: no connective)
CONNECTIVES = (("then", 0.35), ("next", 0.15), ("and", 0.2), (None, 0.3))
#: the evaluative adverbs a later sentence may carry (probability ``adv_p``, uniform)
ADVERBS = ("really", "surely", "oddly")


@dataclass(frozen=True)
class StoryProcess:
    """How a persistent story (``world_style="uid"``) is told: the story process's
    probabilities, which the generator (:func:`generate_story_plans`) and its exact oracle
    (:func:`next_sentence_distribution` and the picture oracles) both read.

    ``protagonist_p``: the probability that a later sentence is about the previous sentence's
    subject (else any object, uniformly); ``connectives``: ``(connective or None, probability)``
    pairs a later sentence opens with, summing to 1; ``size_p`` / ``colour_p``: the
    probabilities that a re-mention keeps its object's size and colour words. The defaults,
    :data:`BOOK_STORY`, are the book's (:data:`PROTAGONIST_P`, :data:`CONNECTIVES`,
    :data:`REMENTION`).

    >>> StoryProcess(protagonist_p=0.5, connectives=((None, 1.0),)).protagonist_p
    0.5
    >>> StoryProcess(connectives=(("then", 0.5),))
    Traceback (most recent call last):
    ...
    ValueError: connectives: the probabilities must sum to 1, got 0.5 ((('then', 0.5),))
    """

    protagonist_p: float = PROTAGONIST_P
    connectives: tuple[tuple[str | None, float], ...] = CONNECTIVES
    size_p: float = REMENTION["size_p"]
    colour_p: float = REMENTION["colour_p"]

    def __post_init__(self) -> None:
        for name in ("protagonist_p", "size_p", "colour_p"):
            value = getattr(self, name)
            if isinstance(value, bool) or not 0.0 <= float(value) <= 1.0:
                raise ValueError(f"{name} must be a probability in [0, 1], got {value!r}")
        pairs = tuple((c, float(q)) for c, q in self.connectives)
        if not pairs or any(q < 0 for _, q in pairs):
            raise ValueError(f"connectives: give (connective or None, probability) pairs with "
                             f"probabilities >= 0, got {self.connectives!r}")
        if abs(sum(q for _, q in pairs) - 1.0) > 1e-9:
            raise ValueError(f"connectives: the probabilities must sum to 1, got "
                             f"{sum(q for _, q in pairs):g} ({self.connectives!r})")
        object.__setattr__(self, "connectives", pairs)

    def record(self) -> dict:
        """The process as a world records it in its parameters (JSON-able)."""
        return {"protagonist_p": float(self.protagonist_p),
                "connectives": [[c, q] for c, q in self.connectives],
                "size_p": float(self.size_p), "colour_p": float(self.colour_p)}

    @classmethod
    def from_record(cls, record: Mapping | None) -> "StoryProcess":
        """The process :meth:`record` wrote (None: the book's)."""
        if not record:
            return BOOK_STORY
        return cls(protagonist_p=record["protagonist_p"],
                   connectives=tuple((c, q) for c, q in record["connectives"]),
                   size_p=record["size_p"], colour_p=record["colour_p"])


#: the book's story process
BOOK_STORY = StoryProcess()

_DIRS = {"left": (0, -1), "right": (0, 1), "top": (-1, 0), "bottom": (1, 0)}


def _free_cells(objs) -> list[tuple[int, int]]:
    taken = {(o.row, o.col) for o in objs}
    return [(r, c) for r in range(GRID) for c in range(GRID) if (r, c) not in taken]


def _move_directions(o, free) -> list[str]:
    """The directions (keys of ``_DIRS``, in its order) in which object ``o`` can move: to a
    neighbouring cell inside the grid that is among the ``free`` cells."""
    return [d for d, (dr, dc) in _DIRS.items()
            if 0 <= o.row + dr < GRID and 0 <= o.col + dc < GRID
            and (o.row + dr, o.col + dc) in free]


def _connective(u: float, connectives: Sequence[tuple[str | None, float]]) -> str | None:
    """The connective ``connectives`` (:attr:`StoryProcess.connectives`) give a uniform draw
    ``u`` in [0, 1)."""
    upper = 0.0
    for conn, p in connectives:
        upper += p
        if u < upper:
            return conn
    return None


def check_narrator_p(narrator_p: float | None, world_style: str = "uid") -> None:
    """Raise a ValueError unless ``narrator_p`` is None (no narrator) or a probability in
    [0.5, 1] for a ``"uid"`` world (the only one with persistent stories)."""
    if narrator_p is None:
        return
    if world_style != "uid":
        raise ValueError(f"narrator_p needs world_style='uid' (its persistent stories), got "
                         f"world_style={world_style!r}")
    if isinstance(narrator_p, bool) or not 0.5 <= float(narrator_p) <= 1.0:
        raise ValueError(f"narrator_p must be a probability in [0.5, 1] (how often a narrator "
                         f"uses the noun form it prefers), got {narrator_p!r}")


def narrator_plain_noun_p(seed: int, story_idx: int, narrator_p: float | None) -> float:
    """The probability that story ``story_idx``'s re-mentions keep the plain noun.

    Without a narrator (``narrator_p`` None) it is :data:`REMENTION`'s 1/2 in every story.
    With one, each story's narrator prefers the plain noun or the synonym (1/2 each, from the
    story's own stream ``rng_for(seed, "story-narrator", story_idx)``, so the story's other
    draws are unchanged) and uses the preferred form with probability ``narrator_p``: the
    earlier pages tell a reader which form the next page will use (lexical consistency across
    a story), which neither the page's picture nor the sentence alone can tell.

    >>> narrator_plain_noun_p(0, 3, None)
    0.5
    >>> round(narrator_plain_noun_p(0, 3, 0.9), 12) in (0.9, 0.1)
    True
    """
    if narrator_p is None:
        return float(REMENTION["plain_noun_p"])
    check_narrator_p(narrator_p)
    prefers_plain = rng_for(seed, "story-narrator", int(story_idx)).random() < 0.5
    return float(narrator_p) if prefers_plain else 1.0 - float(narrator_p)


def _remention(o, rng, plain_noun_p: float, process: StoryProcess = BOOK_STORY) -> dict:
    """A persistent story's definite NP for a given object: never a pronoun; its size and its
    colour each kept with ``process``'s probabilities and its plain noun with
    ``plain_noun_p`` (:func:`narrator_plain_noun_p`; three draws, in that order)."""
    keep_size = rng.random() < process.size_p
    keep_colour = rng.random() < process.colour_p
    synonym = not rng.random() < plain_noun_p
    return dict(noun=o.shape, adjs=[a for a, k in ((o.size, keep_size), (o.colour, keep_colour))
                                    if k], definite=True, synonym=synonym)


def _ref(objs, i, prev_subj, rng, *, allow_pronoun=True, full=False,
         plain_noun_p: float = REMENTION["plain_noun_p"],
         process: StoryProcess = BOOK_STORY) -> dict:
    """NP spec for a given (already introduced) object ``objs[i]`` (``full``: a persistent
    story's re-mention, :func:`_remention`)."""
    o = objs[i]
    if full:
        return _remention(o, rng, plain_noun_p, process)
    if allow_pronoun and prev_subj is not None and prev_subj == o.uid and rng.random() < 0.7:
        return dict(pronoun=True)
    same_shape = any(p.shape == o.shape for j, p in enumerate(objs) if j != i)
    adjs = [o.colour] if same_shape or rng.random() < 0.3 else []
    return dict(noun=o.shape, adjs=adjs, definite=True)


def generate_story_plans(seed: int, story_idx: int, new_scene, *, min_len: int = 4,
                         max_len: int = 8, adv_p: float = 0.2, persistent: bool = False,
                         narrator_p: float | None = None,
                         process: StoryProcess = BOOK_STORY):
    """Draw one story: a list of (objects, clause plan, event name) per sentence.

    ``new_scene(rng, n)`` draws ``n`` objects in distinct cells (from :mod:`.scenes`);
    ``adv_p`` is the probability of an evaluative adverb (words neither image nor discourse
    predicts) in a sentence after the first.

    ``persistent`` (the UID chapter's world, ``make_world(world_style="uid")``): discourse
    carries content. The intro names every object with its size and colour; every later
    sentence is about the previous sentence's subject (the protagonist) with probability
    ``process.protagonist_p`` (else another object; the book's :data:`PROTAGONIST_P`) and
    re-mentions it with a definite NP that keeps its size, its colour and its plain noun each
    with probability 1/2 (``process``'s and the narrator's; the book's :data:`REMENTION`; never
    a pronoun), so the earlier pages lower the next page's nouns and adjectives toward the
    sentence's mean rather than to zero — not only its connectives — and a shuffled discourse
    (another story's pages) misleads on them. :func:`next_sentence_distribution` is this
    process's exact next-sentence distribution (the discourse claims' known answer).
    ``narrator_p`` (persistent stories only): the story's narrator keeps the noun form it
    prefers with this probability (:func:`narrator_plain_noun_p`; None: 1/2, no narrator).
    ``process``: the protagonist, connective and re-mention probabilities
    (:class:`StoryProcess`; the default, :data:`BOOK_STORY`, is the book's).
    """
    if narrator_p is not None and not persistent:
        raise ValueError("narrator_p needs persistent stories (world_style='uid')")
    plain_noun_p = narrator_plain_noun_p(seed, story_idx, narrator_p)
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
            if persistent and prev_subj is not None and rng.random() < process.protagonist_p:
                i = next(j for j, p in enumerate(objs) if p.uid == prev_subj)
            o = objs[i]
            if ev == "move":
                opts = _move_directions(o, _free_cells(objs))
                if not opts:
                    continue
                d = str(rng.choice(opts))
                subj = _ref(objs, i, prev_subj, rng, full=persistent,
                            plain_noun_p=plain_noun_p, process=process)
                dr, dc = _DIRS[d]
                objs[i] = replace(o, row=o.row + dr, col=o.col + dc)
                plan = dict(kind="intr", verb="move", subj=subj,
                            pp=("towards", dict(noun=d, definite=True)))
            elif ev == "turn":
                colour = str(rng.choice([c for c in COLOURS if c != o.colour]))
                subj = _ref(objs, i, prev_subj, rng, full=persistent,
                            plain_noun_p=plain_noun_p, process=process)
                objs[i] = replace(o, colour=colour)
                plan = dict(kind="intr", verb="turn", subj=subj, adj=colour)
            elif ev == "resize":
                subj = _ref(objs, i, prev_subj, rng, full=persistent,
                            plain_noun_p=plain_noun_p, process=process)
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
                subj = _ref(objs, i, prev_subj, rng, full=persistent,
                            plain_noun_p=plain_noun_p, process=process)
                plan = dict(kind="intr", verb="leave", subj=subj)
            break
        prev_subj = objs[i].uid
        if ev == "leave":
            del objs[i]
            prev_subj = None
        plan["conn"] = _connective(rng.random(), process.connectives)
        if rng.random() < adv_p:
            plan["adv"] = str(rng.choice(list(ADVERBS)))
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


# --------------------------------------------------------------------------- exact oracle
def _remention_options(o, plain_noun_p: float, process: StoryProcess = BOOK_STORY
                       ) -> list[tuple[tuple, float]]:
    """Every NP :func:`_remention` can give object ``o``: ``((definite, noun, adjs, synonym),
    probability)``."""
    out = []
    for keep_size in (True, False):
        for keep_colour in (True, False):
            for synonym in (False, True):
                p = ((process.size_p if keep_size else 1 - process.size_p)
                     * (process.colour_p if keep_colour else 1 - process.colour_p)
                     * (1 - plain_noun_p if synonym else plain_noun_p))
                adjs = tuple(a for a, k in ((o.size, keep_size), (o.colour, keep_colour)) if k)
                out.append(((True, o.shape, adjs, synonym), p))
    return out


def next_sentence_distribution(objs, prev_subj: int | None, *, adv_p: float = 0.0,
                               shapes: Sequence[str] = (), colours: Sequence[str] = (),
                               plain_noun_p: float = REMENTION["plain_noun_p"],
                               process: StoryProcess = BOOK_STORY) -> dict[tuple, float]:
    """The exact distribution of a persistent story's next sentence given the story so far.

    ``objs``: the objects in the scene before the sentence (with their cells: a ``move`` can
    only go to a free neighbouring cell, and an object with none is redrawn, as
    :func:`generate_story_plans` does); ``prev_subj``: the uid of the previous sentence's
    subject (None after the intro or a ``leave``); ``adv_p`` the adverb probability the world
    was drawn with; ``shapes``/``colours`` what an appearing object is drawn from (uniformly,
    as the world's scene drawer does, and its size big or small; empty: the renderer's
    ``SHAPES`` and ``COLOURS``; ``plain_noun_p`` the probability that a re-mention keeps
    the plain noun, the story's :func:`narrator_plain_noun_p`). Returns
    ``{key: probability}`` summing to 1 over every sentence the generator can write next;
    ``key`` = ``(verb, subject NP, extra, connective, adverb)`` with the NP ``(definite,
    noun, adjs, synonym)`` and ``extra`` the direction of a move or the new colour of a turn
    (:func:`sentence_plan` makes the plan a language realises). ``process``: the story
    process the world was drawn with (:class:`StoryProcess`). Only persistent stories
    (``world_style="uid"``) are covered.

    >>> from tokenbook.worlds.scenes import SceneObject
    >>> objs = [SceneObject(0, "circle", "red", "big", 0, 0), SceneObject(1, "square", "blue",
    ...                                                                  "small", 2, 2)]
    >>> d = next_sentence_distribution(objs, 0, shapes=["circle"], colours=["red", "blue"])
    >>> round(sum(d.values()), 12)
    1.0
    """
    content: dict[tuple, float] = {}
    for p, ev, i, extra in _transitions(objs, prev_subj, shapes, colours,
                                        protagonist_p=process.protagonist_p):
        for key, q in _content_keys(objs[i] if ev != "appear" else None, ev, extra,
                                    plain_noun_p, process):
            content[key] = content.get(key, 0.0) + p * q
    return _with_connective_and_adverb(content, adv_p, process)


def _with_connective_and_adverb(content: Mapping[tuple, float], adv_p: float,
                                process: StoryProcess = BOOK_STORY) -> dict[tuple, float]:
    """Sentence keys from content keys ``(verb, NP, extra)``: each with every connective of
    ``process`` and no adverb (1 − ``adv_p``) or one of :data:`ADVERBS`."""
    advs = [(None, 1.0 - adv_p)] + [(a, adv_p / len(ADVERBS)) for a in ADVERBS]
    return {(*key, conn, adv): p * pc * pa for key, p in content.items()
            for conn, pc in process.connectives for adv, pa in advs if pc * pa > 0}


def _transitions(objs, prev_subj: int | None, shapes: Sequence[str] = (),
                 colours: Sequence[str] = (), *, looks: bool = True,
                 protagonist_p: float = PROTAGONIST_P
                 ) -> list[tuple[float, str, int, object]]:
    """Every event :func:`generate_story_plans` can narrate next, with its probability:
    ``(p, event, subject index into objs, extra)``, the p summing to 1. ``extra``: a move's
    direction, a turn's new colour, an appearing object's ``(shape, colour, size)`` (its cell
    is uniform over the free cells; ``looks`` False: one entry per index with extra None),
    else None. A move of an object with no free neighbouring cell is never drawn (the
    generator draws again)."""
    if not objs:
        raise ValueError("next_sentence_distribution needs the objects of the scene")
    shapes, colours = list(shapes) or list(SHAPES), list(colours) or list(COLOURS)
    events = ["move", "move", "turn", "resize"]
    if len(objs) < 4:
        events.append("appear")
    if len(objs) > 2:
        events.append("leave")
    n = len(objs)
    pick = [1.0 / n] * n
    if prev_subj is not None:
        prev = [j for j, o in enumerate(objs) if o.uid == prev_subj]
        if not prev:
            raise ValueError(f"prev_subj {prev_subj} is not among the objects' uids "
                             f"{[o.uid for o in objs]}")
        pick = [(1 - protagonist_p) / n + (protagonist_p if j == prev[0] else 0.0)
                for j in range(n)]
    free = set(_free_cells(objs))
    out: list[tuple[float, str, int, object]] = []
    accepted = 0.0
    for ev in events:
        for i, o in enumerate(objs):
            p = pick[i] / len(events)
            if ev == "move":
                opts = _move_directions(o, free)
                out += [(p / len(opts), ev, i, d) for d in opts]
                if not opts:            # the generator draws again: this pair never happens
                    continue
            elif ev == "turn":
                new = [c for c in colours if c != o.colour]
                out += [(p / len(new), ev, i, c) for c in new]
            elif ev == "appear" and looks:
                q = p / (len(shapes) * len(colours) * len(SIZES))
                out += [(q, ev, i, (shape, colour, size)) for shape in shapes
                        for colour in colours for size in SIZES]
            else:
                out.append((p, ev, i, None))
            accepted += p
    return [(p / accepted, ev, i, extra) for p, ev, i, extra in out]


def _content_keys(o, event: str, extra, plain_noun_p: float,
                  process: StoryProcess = BOOK_STORY) -> list[tuple[tuple, float]]:
    """The content keys ``(verb, NP, extra)`` of :func:`next_sentence_distribution` that
    narrate ``event`` of object ``o`` (as it is before the event; None for ``appear``), each
    with its probability given the event."""
    if event == "appear":
        shape, colour, size = extra
        return [(("appear", (False, shape, (size, colour), False), None), 1.0)]
    verb = ("grow" if o.size == "small" else "shrink") if event == "resize" else event
    extra = extra if event in ("move", "turn") else None
    return [((verb, np_key, extra), q)
            for np_key, q in _remention_options(o, plain_noun_p, process)]


def sentence_plan(key: tuple) -> dict:
    """The clause plan (:meth:`tokenbook.worlds.languages.Language.clause`) of a key of
    :func:`next_sentence_distribution`."""
    verb, (definite, noun, adjs, synonym), extra, conn, adv = key
    plan = dict(kind="intr", verb=verb,
                subj=dict(noun=noun, adjs=list(adjs), definite=definite, synonym=synonym))
    if verb == "move":
        plan["pp"] = ("towards", dict(noun=extra, definite=True))
    elif verb == "turn":
        plan["adj"] = extra
    plan["conn"] = conn
    if adv:
        plan["adv"] = adv
    return plan


def story_states(plans) -> list[tuple[list, int | None]]:
    """What :func:`next_sentence_distribution` needs before each sentence k ≥ 1 of ``plans``
    (:func:`generate_story_plans`): ``(objects, previous subject's uid)``, one per later
    sentence (the previous subject: the object the previous sentence's event changed or
    introduced; None after the intro and after a ``leave``)."""
    about = _about(plans)
    out = []
    for k in range(1, len(plans)):
        objs, event = list(plans[k - 1][0]), plans[k - 1][2]
        if k == 1 or event == "leave":
            prev = None
        elif event == "appear":
            prev = max(o.uid for o in objs)
        else:
            prev = next(iter(about[k - 1]))
        out.append((objs, prev))
    return out


# --------------------------------------------------------------------------- the page's picture
class _Look(NamedTuple):
    """An object's look (what a re-mention can name), without a cell or a uid."""

    shape: str
    colour: str
    size: str


def picture_objects(objs) -> tuple[tuple[str, str, str], ...]:
    """What the picture oracles read of a page's picture: its objects' ``(shape, colour,
    size)``, sorted — not their cells (which tell at most whether a move could go one way)."""
    return tuple(sorted((o.shape, o.colour, o.size) for o in objs))


def _count_after(n_before: int, event: str) -> int:
    return n_before + (event == "appear") - (event == "leave")


def event_rates(states, process: StoryProcess = BOOK_STORY) -> dict[int, dict[str, float]]:
    """P(event | number of objects after it) of a later sentence, mixed over ``states``
    (``(objects, previous subject)`` pairs, e.g. :func:`story_states` of many fresh stories,
    each weighted alike, told by ``process``): the one thing of the story so far that
    :func:`sentence_given_picture` needs besides the picture."""
    joint: dict[int, dict[str, float]] = {}
    for objs, prev in states:
        for p, ev, _, _ in _transitions(objs, prev, protagonist_p=process.protagonist_p):
            rates = joint.setdefault(_count_after(len(objs), ev), {})
            rates[ev] = rates.get(ev, 0.0) + p
    return {n: {ev: p / sum(r.values()) for ev, p in r.items()} for n, r in joint.items()}


def sentence_given_picture(picture: Sequence[tuple[str, str, str]],
                           rates: Mapping[int, Mapping[str, float]], *, adv_p: float,
                           plain_noun_p: float = REMENTION["plain_noun_p"],
                           process: StoryProcess = BOOK_STORY) -> dict[tuple, float]:
    """The distribution of a persistent story's later sentence given only its page's picture
    (:func:`picture_objects`; keys as :func:`next_sentence_distribution`).

    Exact given ``rates`` (:func:`event_rates`), because every object's shape, colour and size
    are independent and uniform at every step whatever the story did (turns draw a uniform
    other colour, resizes flip the size, newcomers are uniform) and nothing else the generator
    draws depends on them: given how many objects the picture holds, the looks it shows are
    independent of the events, the sentence's subject is any of its objects alike, a move's
    direction is any of the four alike (the grid's symmetry) and an object that left has any
    look. The picture shows the scene after the page's last event, but a later sentence of the
    page cannot change the subject's look (that would close the page: :func:`story_pages`), so
    the subject is shown as it is after its own event: a turn names its new colour (and may
    name any other as the old one), a resize its size before (the other one), a move or an
    appearance its look. ``plain_noun_p``: 1/2, the narrator's preference being unknown
    without the earlier pages; ``process``: the world's story process (:class:`StoryProcess`:
    its connectives and re-mention probabilities; its protagonist is in ``rates``).
    """
    n = len(picture)
    if n not in rates:
        raise ValueError(f"a picture of {n} objects: the event rates know pictures of "
                         f"{sorted(rates)} objects (is it a story page of this world?)")
    rate = rates[n]
    colours, sizes = list(COLOURS), list(SIZES)
    content: dict[tuple, float] = {}

    def add(p: float, look, event: str, extra) -> None:
        for key, q in _content_keys(look, event, extra, plain_noun_p, process):
            content[key] = content.get(key, 0.0) + p * q

    for shape, colour, size in picture:
        if rate.get("move"):
            for d in _DIRS:
                add(rate["move"] / n / len(_DIRS), _Look(shape, colour, size), "move", d)
        if rate.get("turn"):
            for old in colours:
                if old != colour:
                    add(rate["turn"] / n / (len(colours) - 1), _Look(shape, old, size), "turn",
                        colour)
        if rate.get("resize"):
            before = sizes[1 - sizes.index(size)]
            add(rate["resize"] / n, _Look(shape, colour, before), "resize", None)
        if rate.get("appear"):
            add(rate["appear"] / n, None, "appear", (shape, colour, size))
    if rate.get("leave"):
        looks = [_Look(s, c, z) for s in SHAPES for c in colours for z in sizes]
        for look in looks:
            add(rate["leave"] / len(looks), look, "leave", None)
    return _with_connective_and_adverb(content, adv_p, process)


def _after(objs, event: str, i: int, extra, cell: tuple[int, int] | None = None):
    """The objects after ``event`` of ``objs[i]`` (an appearing object at ``cell``, with a
    fresh uid), the new previous subject and the uids the sentence is about."""
    objs = list(objs)
    o = objs[i]
    if event == "move":
        dr, dc = _DIRS[extra]
        objs[i] = replace(o, row=o.row + dr, col=o.col + dc)
    elif event == "turn":
        objs[i] = replace(o, colour=extra)
    elif event == "resize":
        objs[i] = replace(o, size="big" if o.size == "small" else "small")
    elif event == "appear":
        shape, colour, size = extra
        new = replace(o, uid=max(p.uid for p in objs) + 1, shape=shape, colour=colour,
                      size=size, row=cell[0], col=cell[1])
        objs.append(new)
        return objs, new.uid, {new.uid}
    else:
        del objs[i]
        return objs, None, {o.uid}
    return objs, o.uid, {o.uid}


def _closes(event: str, about: set, mentioned: set) -> bool:
    """Whether ``event`` about ``about`` must open a new page after a page that mentions
    ``mentioned`` (:func:`story_pages`)."""
    return event in SCENE_CHANGING or (event in FALSIFYING and bool(about & mentioned))


def _continues(sent_idx: int, lengths: tuple[int, int]) -> float:
    """P(a story has a sentence after sentence ``sent_idx`` | it has that one), its length
    uniform on ``lengths`` (inclusive)."""
    lo, hi = lengths
    have = hi - max(sent_idx + 1, lo) + 1
    if have <= 0:
        raise ValueError(f"sentence {sent_idx}: stories of {lo}-{hi} sentences have none")
    return max(0, hi - max(sent_idx + 2, lo) + 1) / have


class _PageFuture:
    """P(a page's picture | the scene after one of its sentences), memoised. The rest of the
    page is the events that follow while the story goes on (its length uniform on
    ``lengths``), the page's drawn size (uniform on 1..``max_page``, so at least its size so
    far) allows and none of them closes it; the picture (:func:`picture_objects`) shows the
    scene after the last."""

    def __init__(self, lengths: tuple[int, int], max_page: int,
                 process: StoryProcess = BOOK_STORY):
        self.lengths, self.max_page, self.process = lengths, max_page, process
        self._memo: dict[tuple, float] = {}

    def __call__(self, picture: tuple, objs, prev: int | None, size: int, mentioned: set,
                 sent_idx: int) -> float:
        """P(``picture`` | the scene ``objs`` after sentence ``sent_idx``, ``prev`` its
        subject, the page holding ``size`` sentences so far about ``mentioned``)."""
        key = (picture, tuple((o.uid, o.shape, o.colour, o.size, o.row, o.col) for o in objs),
               prev, size, frozenset(mentioned), sent_idx)
        if key not in self._memo:
            self._memo[key] = self._compute(picture, objs, prev, size, mentioned, sent_idx)
        return self._memo[key]

    def _compute(self, picture, objs, prev, size, mentioned, sent_idx) -> float:
        here = picture_objects(objs)
        goes_on = _continues(sent_idx, self.lengths) * (1 - 1 / (self.max_page - size + 1))
        total = (1.0 - goes_on) * (here == picture)
        if goes_on <= 0:
            return total
        last = size + 1 == self.max_page      # a next sentence on this page would be its last
        for p, ev, i, extra in _transitions(objs, prev, looks=False,
                                            protagonist_p=self.process.protagonist_p):
            o = objs[i]
            if _closes(ev, {o.uid}, mentioned) or (ev == "move" and last):
                total += goes_on * p * (here == picture)      # the scene stays as it is
                continue
            look = ((o.shape, extra, o.size) if ev == "turn" else
                    (o.shape, o.colour, "big" if o.size == "small" else "small")
                    if ev == "resize" else None)
            if look is not None and look not in picture:      # an edited look stays to the end
                continue
            if last:
                after = list(here)
                after.remove((o.shape, o.colour, o.size))
                total += goes_on * p * (tuple(sorted(after + [look])) == picture)
                continue
            nxt, prv, about = _after(objs, ev, i, extra)
            total += goes_on * p * self(picture, nxt, prv, size + 1, mentioned | about,
                                        sent_idx + 1)
        return total


def next_sentence_given_picture(objs, prev_subj: int | None,
                                picture: Sequence[tuple[str, str, str]], *, page_size: int,
                                mentioned: set, sent_idx: int, lengths: tuple[int, int],
                                max_page_sentences: int, adv_p: float,
                                plain_noun_p: float = REMENTION["plain_noun_p"],
                                process: StoryProcess = BOOK_STORY) -> dict[tuple, float]:
    """The distribution of a persistent story's sentence ``sent_idx`` given the story so far
    (as :func:`next_sentence_distribution`: the scene ``objs`` and ``prev_subj`` before it,
    the narrator's ``plain_noun_p``) *and* its page's picture (:func:`picture_objects`).

    ``page_size`` and ``mentioned``: how many sentences the page of sentence ``sent_idx`` − 1
    holds up to it and the uids they are about (:func:`story_pages`); the sentence opens a new
    page when that page's drawn size is reached (its size uniform on 1..``max_page_sentences``,
    so on ``page_size``.. given the page so far) or its event closes the page. The picture then
    shows the scene after the new page's last sentence, which the events that follow decide
    (``lengths``: the stories' shortest and longest length, as drawn). Bayes' rule over the
    events the generator can narrate: P(sentence | story, picture) ∝ P(sentence | story) ·
    P(picture | story, sentence's event). ``process``: the world's story process
    (:class:`StoryProcess`). Raises a ValueError when the picture is impossible.
    """
    if not 1 <= page_size <= max_page_sentences:
        raise ValueError(f"page_size must be in 1..max_page_sentences={max_page_sentences} (the "
                         f"sentences on the previous sentence's page so far), got {page_size!r}")
    future = _PageFuture(tuple(lengths), int(max_page_sentences), process)
    picture = tuple(sorted(picture))
    new_page = 1 / (max_page_sentences - page_size + 1)
    content: dict[tuple, float] = {}
    for p, ev, i, extra in _transitions(objs, prev_subj, protagonist_p=process.protagonist_p):
        if ev == "appear":
            if tuple(extra) not in picture:
                continue
            cells = _free_cells(objs)
            like = 0.0
            for cell in cells:
                nxt, prv, about = _after(objs, ev, i, extra, cell)
                like += future(picture, nxt, prv, 1, about, sent_idx) / len(cells)
        else:
            nxt, prv, about = _after(objs, ev, i, extra)
            opens = 1.0 if _closes(ev, about, mentioned) else new_page
            like = opens * future(picture, nxt, prv, 1, about, sent_idx)
            if opens < 1:
                like += (1 - opens) * future(picture, nxt, prv, page_size + 1,
                                             mentioned | about, sent_idx)
        if like > 0:
            for key, q in _content_keys(objs[i] if ev != "appear" else None, ev, extra,
                                        plain_noun_p, process):
                content[key] = content.get(key, 0.0) + p * like * q
    total = sum(content.values())
    if not total > 0:
        raise ValueError(f"sentence {sent_idx}: the picture {picture} cannot follow this story "
                         "(is it the page's picture of this world's story?)")
    return _with_connective_and_adverb({k: v / total for k, v in content.items()}, adv_p,
                                       process)


def page_contexts(plans, pages: Sequence[int]) -> list[tuple[int, set, tuple]]:
    """What :func:`next_sentence_given_picture` needs of the pages before each sentence k ≥ 1
    of ``plans`` (:func:`generate_story_plans`, paged by ``pages``, :func:`story_pages`):
    ``(sentences on the page of sentence k − 1 up to it, the uids they are about, the
    objects of sentence k's page's picture)`` (:func:`picture_objects` of the scene after the
    page's last sentence)."""
    if len(pages) != len(plans):
        raise ValueError(f"{len(pages)} page numbers for {len(plans)} sentences")
    about = _about(plans)
    last = {page: k for k, page in enumerate(pages)}
    out = []
    for k in range(1, len(plans)):
        on_page = [j for j in range(k) if pages[j] == pages[k - 1]]
        out.append((len(on_page), set().union(*(about[j] for j in on_page)),
                    picture_objects(plans[last[pages[k]]][0])))
    return out
