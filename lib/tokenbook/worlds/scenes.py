"""The grounded tiny world: scenes, multilingual captions with gold UPOS, and visual stories.

>>> world = make_world(seed=0)                      # doctest: +SKIP
>>> world.captions.head(); world.image("c00000"); print(world.card())  # doctest: +SKIP

Everything is a deterministic function of the parameters of :func:`make_world` (same seed →
identical tables and images). Caption scenes hold 2-4 objects (shape, colour, size, 3×3-grid
cell); captions describe them truly but not exhaustively (1-2 clauses about 1-2 objects). Each
language draws its own captions (independent captioners, as in Crossmodal-3600); stories are
parallel across languages.

**The mechanism switch** (``mechanism``; Gay et al. 2026 / Haley et al. 2025). In real captions the
words that are hard to predict from the text alone — open-class nouns and adjectives — are the
ones the image informs, and some function words carry scene information too (number, and
definiteness as uniqueness of a referent). The switch plants exactly that:

* ``"on"`` (default) — the hard words are image-determined: the first clause describes the
  scene's most salient object (biggest, then top-left) with its colour and size always named, so
  which noun and adjectives come is fully determined by the image and hard to guess from the
  text; the words the image cannot predict are rare or fixed by the text (one posture verb
  ``sit``, one connective ``and``, no evaluative adverbs — at 3% of clauses
  they were 6.4-nat spikes under both models that swamped every profile); and articles mark
  *uniqueness in the scene* (definite iff no other object has that shape, so a determiner tells
  what the image shows), numerals count objects.
* ``"off"`` — the same generator without it (the world of ``scenes-v2``): the described object
  is drawn at random 40% of the time, adjectives are optional (size 35%, colour 80%), articles
  are drawn at random (50%) or mark an earlier mention, and clauses mix in words the image cannot
  predict (evaluative adverbs in 25% of clauses, ``and``/``but``/``also``, four synonymous
  posture verbs). The text-only model's hardest words are then the image-independent ones.

The chapters' cheap null (captions scored against shuffled images; no retraining) is a different
*off*: it keeps the ``on`` world and removes the image's information at scoring time.

Tables (one row per caption / story sentence; list columns are aligned word by word):
``caption_id, scene_id, split, lang, text, words, upos, concreteness, word_spans, concepts``;
stories add ``story_id, sent_idx, event``. ``word_spans`` are (start, end) character offsets of
``words`` in ``text``; ``concreteness`` is on the 1-5 scale; ``concepts`` name the lexical
concept of each word (e.g. ``"circle"``, ``"def"``).

**Story pages** (``max_page_sentences``, off by default). By default every story sentence has
a picture of its own (the scene after its event, ``scene_id`` ``s<story>-<sentence>``). With
``max_page_sentences`` > 1 the same sentences are grouped into picture-book pages of 1..max
sentences under one picture (:func:`.stories.story_pages`; no page's picture contradicts its
earlier sentences), ``scene_id`` becomes ``s<story>-<page>`` and the stories table gains
``para_idx`` (the page in the story, from 0) and ``n_paras`` (pages in the story). At the
default the tables, ``params`` and ``fingerprint`` are exactly those of a world without the
option (no ``para_idx`` column: the paragraph of a sentence is the sentence).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, replace
from functools import lru_cache
from typing import Mapping

import numpy as np
import pandas as pd

from tokenbook.validation import check_positive_int
from tokenbook.worlds.languages import (CONCEPTS, DEFAULT_TYPOLOGIES, Language, Typology,
                                        make_languages, rng_for)
from tokenbook.worlds.render import COLOURS, GRID, SHAPES, SIZES, render_scene
from tokenbook.worlds.stories import (BOOK_STORY, PAGES_VERSION, REMENTION, StoryProcess,
                                      check_narrator_p, generate_story_plans,
                                      narrator_plain_noun_p, story_pages)

__all__ = ["SceneObject", "Scene", "SceneWorld", "make_world", "WORLD_VERSION", "MECHANISMS",
           "WORLD_STYLES", "UidStyle", "UID_STYLE", "CaptionPrefix", "reading_order",
           "uid_clause_distribution", "uid_caption_prefix_probability", "CORPUS_FIRST"]

#: bump when the generated data change for the same parameters (part of every cache key)
WORLD_VERSION = "scenes-v3"
#: the first story index of :meth:`SceneWorld.story_corpus` (far beyond any world's own stories
#: and the known answer's marginal stories, ``grounded.tiny._MARGINAL_FIRST``, so its stories'
#: streams are their own)
CORPUS_FIRST = 2_000_000

_NUMS = {2: "two", 3: "three", 4: "four"}
_EVAL_ADVS = ("really", "clearly", "surely", "oddly")
_POSTURE = ("sit", "rest", "stay", "lie")
MECHANISMS = ("on", "off")
#: caption styles: ``"typology"`` (the groundedness chapter's world, the default) and ``"uid"``
#: (the UID chapter's: referents fixed by the image, residual uncertainty on the words it informs)
WORLD_STYLES = ("typology", "uid")


@dataclass(frozen=True)
class UidStyle:
    """The ``"uid"`` caption style (the UID chapter's world, Gay et al. 2026; issue #28).

    A caption scene holds ``n_objects`` objects (2: the second clause is about "the other one",
    which a tiny captioner finds far more easily than the second of up to four in reading order;
    measured on root seed 100 with 2-4 objects: the second clause's nouns dropped by 0.18 nats
    with the image, against 1.6 by the generator's exact answer). A caption has 1 clause (probability ``1 - two_clause_p``) or 2 joined by ``and``; clause k
    describes the k-th object of the scene in *reading order* (row, then column), so the image
    fixes every clause's referent and no grounded word can be confidently wrong. Each clause is
    "ART (size) (colour) NOUN VERB" in the language's order: the article is always indefinite,
    the size is named with ``size_p``, the colour with ``colour_p``, the noun is the shape's
    second stem (:meth:`~tokenbook.worlds.languages.Language.synonym`) with ``synonym_p``, the
    verb drawn from ``verbs`` (the image cannot tell them apart). The image determines *which*
    noun and adjectives, not *whether* an adjective is named, which synonym nor which verb: the
    residual uncertainty that keeps the depicted words' surprisal above zero under the image,
    as open-class words keep it in real captions.

    With the mechanism off the caption is drawn in the same way about an independent scene
    from the same prior (stream ``"off-scene"``), so lengths, vocabulary and word frequencies
    keep their distribution and only the image–word dependence goes.
    """

    n_objects: int = 2
    two_clause_p: float = 0.5
    size_p: float = 0.5
    colour_p: float = 0.7
    synonym_p: float = 0.5
    verbs: tuple = (("exist", 0.7), ("sit", 0.3))


UID_STYLE = UidStyle()


def reading_order(objects) -> list:
    """The objects sorted by grid row, then column (the order the ``uid`` captions follow)."""
    return sorted(objects, key=lambda o: (o.row, o.col))


def _uid_clause_options(shape: str, colour: str, size: str, style: UidStyle = UID_STYLE
                        ) -> list[tuple[dict, float]]:
    """Every clause plan about one object with its probability (they sum to 1)."""
    out = []
    for say_size in (True, False):
        for say_colour in (True, False):
            p_adj = (style.size_p if say_size else 1 - style.size_p) * \
                (style.colour_p if say_colour else 1 - style.colour_p)
            adjs = ([size] if say_size else []) + ([colour] if say_colour else [])
            for syn in (False, True):
                p_syn = style.synonym_p if syn else 1 - style.synonym_p
                for verb, pv in style.verbs:
                    if p_adj * p_syn * pv > 0:
                        out.append((dict(kind="intr", verb=verb,
                                         subj=dict(noun=shape, adjs=adjs, definite=False,
                                                   synonym=syn)),
                                    p_adj * p_syn * pv))
    return out


def _uid_caption_plans(scene: Scene, rng: np.random.Generator, mechanism: str = "on",
                       style: UidStyle = UID_STYLE, off_rng: np.random.Generator | None = None
                       ) -> list[dict]:
    """1-2 clause plans of the ``uid`` style (:class:`UidStyle`) about ``scene`` (on) or about
    an independent scene drawn from ``off_rng`` (off)."""
    objs = list(scene.objects)
    if mechanism == "off":
        if off_rng is None:
            raise ValueError("the uid style with the mechanism off needs off_rng")
        objs = _draw_objects(off_rng, len(objs))
    objs = reading_order(objs)
    n_clauses = 2 if rng.random() < style.two_clause_p else 1
    plans = []
    for k in range(n_clauses):
        o = objs[k]
        opts = _uid_clause_options(o.shape, o.colour, o.size, style)
        plan = dict(opts[int(rng.choice(len(opts), p=[p for _, p in opts]))][0])
        if k:
            plan["conn"] = "and"
        plans.append(plan)
    return plans


def uid_clause_distribution(lang: Language, obj: tuple[str, str, str] | None = None, *,
                            style: UidStyle = UID_STYLE, shapes=SHAPES, colours=None,
                            sizes=SIZES) -> dict[tuple[str, ...], float]:
    """Exact distribution of one ``uid`` clause's word forms in ``lang`` (no connective).

    ``obj``: (shape, colour, size) of the object the clause describes (the image-conditioned
    distribution), or None: the prior, objects' shape, colour and size independent and
    uniform over ``shapes``, ``colours`` (default: all), ``sizes`` — as :func:`_draw_objects`
    draws them, whatever the object's place in reading order.
    """
    colours = tuple(COLOURS) if colours is None else tuple(colours)
    objs = [obj] if obj is not None else [(s, c, z) for s in shapes for c in colours
                                          for z in sizes]
    w_obj = 1.0 / len(objs)
    out: dict[tuple[str, ...], float] = {}
    for o in objs:
        for plan, p in _uid_clause_options(*o, style):
            words = tuple(w.form for w in lang.clause(plan))
            out[words] = out.get(words, 0.0) + w_obj * p
    return out


def _prefix_table(dist: Mapping[tuple, float]) -> dict[tuple, float]:
    out: dict[tuple, float] = {}
    for seq, p in dist.items():
        for k in range(len(seq) + 1):
            out[seq[:k]] = out.get(seq[:k], 0.0) + p
    return out


class CaptionPrefix:
    """Call with a tuple of word forms: P(caption starts with that prefix) for the ``uid`` style: clause 0 from ``d0``, then with
    probability ``two_clause_p`` the connective and clause 1 from ``d1`` (exact)."""

    def __init__(self, lang: Language, d0, d1, style: UidStyle):
        self.conn = lang.word("and").form
        self.d0, self.p0, self.p1 = dict(d0), _prefix_table(d0), _prefix_table(d1)
        self.two = style.two_clause_p
        if any(self.conn in seq for seq in list(d0) + list(d1)):
            raise ValueError("the connective's form occurs inside a clause; prefixes would be "
                             "ambiguous")

    def __call__(self, prefix: tuple[str, ...]) -> float:
        if self.conn not in prefix:
            return self.p0.get(prefix, 0.0)
        i = prefix.index(self.conn)
        return self.two * self.d0.get(prefix[:i], 0.0) * self.p1.get(prefix[i + 1:], 0.0)


def uid_caption_prefix_probability(lang: Language, objects=None, *, style: UidStyle = UID_STYLE,
                                   **prior) -> CaptionPrefix:
    """A function ``prefix -> P(a uid caption in lang starts with these word forms)``, exact.

    ``objects``: the scene's objects (image-conditioned: clause k is about the k-th in reading
    order) or None (text only: both clauses' objects drawn from the prior, independently).
    ``prior``: ``shapes``/``colours``/``sizes`` of :func:`uid_clause_distribution`.
    The surprisal of word t is ``-log(P(w_1..w_t) / P(w_1..w_{t-1}))``.
    """
    if objects is None:
        d = uid_clause_distribution(lang, None, style=style, **prior)
        return CaptionPrefix(lang, d, d, style)
    objs = reading_order(objects)
    ds = [uid_clause_distribution(lang, (o.shape, o.colour, o.size), style=style, **prior)
          for o in objs[:2]]
    return CaptionPrefix(lang, ds[0], ds[1], style)


@dataclass(frozen=True)
class _Style:
    """How captions are drawn under one setting of the mechanism switch (module docstring)."""

    salient_p: float          # P(first clause describes the most salient object)
    size_p: float             # P(size adjective named)
    colour_p: float           # P(colour adjective named)
    definite: str             # "unique" (scene uniqueness) or "random" (coin / prior mention)
    adv_p: float              # P(evaluative adverb in a clause)
    postures: tuple           # posture verbs to choose from
    connectives: tuple        # (connective, cumulative probability) pairs


_STYLES = {
    "on": _Style(salient_p=1.0, size_p=1.0, colour_p=1.0, definite="unique", adv_p=0.0,
                 postures=("sit",), connectives=(("and", 1.0),)),
    "off": _Style(salient_p=0.6, size_p=0.35, colour_p=0.8, definite="random", adv_p=0.25,
                  postures=_POSTURE, connectives=(("and", 0.5), ("but", 0.65), ("also", 1.0))),
}


@dataclass(frozen=True)
class SceneObject:
    """One object: shape, colour, size ('big'/'small'), grid cell (row, col) and a jitter."""

    uid: int
    shape: str
    colour: str
    size: str
    row: int
    col: int
    dx: float = 0.0
    dy: float = 0.0


@dataclass(frozen=True)
class Scene:
    scene_id: str
    objects: tuple[SceneObject, ...]


def _draw_objects(rng: np.random.Generator, n: int, avoid=()) -> list[SceneObject]:
    taken = {(o.row, o.col) for o in avoid}
    cells = [(r, c) for r in range(GRID) for c in range(GRID) if (r, c) not in taken]
    idx = rng.choice(len(cells), size=n, replace=False)
    out = []
    for k, ci in enumerate(idx):
        r, c = cells[int(ci)]
        out.append(SceneObject(uid=k, shape=str(rng.choice(SHAPES)),
                               colour=str(rng.choice(list(COLOURS))),
                               size=str(rng.choice(list(SIZES))), row=r, col=c,
                               dx=float(rng.uniform(-0.06, 0.06)),
                               dy=float(rng.uniform(-0.06, 0.06))))
    return out


def _story_adv_p(mechanism: str) -> float:
    """The probability of an evaluative adverb in a later story sentence of a ``mechanism``
    world."""
    return _STYLES[mechanism].adv_p


def _story_plans(seed: int, story_idx: int, min_len: int, max_len: int, mechanism: str,
                 world_style: str, narrator_p: float | None = None,
                 process: StoryProcess = BOOK_STORY) -> list:
    """One story's plans (:func:`.stories.generate_story_plans`) as a world draws them."""
    return generate_story_plans(seed, story_idx,
                                lambda rng, n, avoid=(): _draw_objects(rng, n, avoid),
                                min_len=min_len, max_len=max_len, adv_p=_story_adv_p(mechanism),
                                persistent=world_style == "uid", narrator_p=narrator_p,
                                process=process)


def _region(o: SceneObject, rng) -> str:
    opts = []
    if o.row != 1:
        opts.append("top" if o.row == 0 else "bottom")
    if o.col != 1:
        opts.append("left" if o.col == 0 else "right")
    return str(rng.choice(opts)) if opts else "middle"


def _relations(a: SceneObject, b: SceneObject) -> list[str]:
    rel = []
    if a.row < b.row:
        rel.append("above")
    if a.row > b.row:
        rel.append("below")
    if a.col < b.col:
        rel.append("leftof")
    if a.col > b.col:
        rel.append("rightof")
    return rel


def _caption_plans(scene: Scene, rng: np.random.Generator, mechanism: str = "on") -> list[dict]:
    """1-2 clause plans that describe ``scene`` truly but not exhaustively (``mechanism``: see
    the module docstring)."""
    st = _STYLES[mechanism]
    objs = list(scene.objects)
    salient = sorted(objs, key=lambda o: (o.size != "big", o.row, o.col))
    n_clauses = 1 if rng.random() < 0.45 else 2
    plans: list[dict] = []
    mentioned: set[int] = set()
    prev_subj = None

    def mention(o: SceneObject, *, drop=None, definite_p=0.0) -> dict:
        if o.uid == prev_subj and rng.random() < 0.6:
            return dict(pronoun=True)
        adjs = []
        if rng.random() < st.size_p and drop != "size":
            adjs.append(o.size)
        if rng.random() < st.colour_p and drop != "colour":
            adjs.append(o.colour)
        if st.definite == "unique":   # the article says whether the image has one of it
            definite = sum(p.shape == o.shape for p in objs) == 1
        else:
            definite = o.uid in mentioned or rng.random() < definite_p
        mentioned.add(o.uid)
        return dict(noun=o.shape, adjs=adjs, definite=definite)

    for k in range(n_clauses):
        kinds = ["exist", "loc", "attr"]
        if len(objs) >= 2:
            kinds += ["rel", "rel"]
        counts = {s: sum(o.shape == s for o in objs) for s in SHAPES}
        if max(counts.values()) >= 2 and k == 0:
            kinds.append("count")
        kind = str(rng.choice(kinds))
        # salience: captioners tend to start with the biggest, top-left-most object
        o = salient[0] if rng.random() < (st.salient_p if k == 0 else 0.6) \
            else objs[int(rng.integers(len(objs)))]
        if k == 1 and prev_subj is not None and rng.random() < 0.5:
            o = next(p for p in objs if p.uid == prev_subj)
        if kind == "count":
            shape = max(SHAPES, key=lambda s: (counts[s], -SHAPES.index(s)))
            same = [p for p in objs if p.shape == shape]
            adjs = [same[0].colour] if len({p.colour for p in same}) == 1 and \
                rng.random() < 0.5 else []
            plan = dict(kind="intr", verb="exist",
                        subj=dict(noun=shape, number="pl", num=_NUMS[len(same)], adjs=adjs))
            subj_uid = None
        elif kind == "exist":
            plan = dict(kind="intr", verb="exist", subj=mention(o))
            subj_uid = o.uid
        elif kind == "loc":
            plan = dict(kind="intr", verb=str(rng.choice(st.postures)), subj=mention(o),
                        pp=("at", dict(noun=_region(o, rng), definite=True)))
            subj_uid = o.uid
        elif kind == "attr":
            attr = str(rng.choice(["colour", "size"]))
            plan = dict(kind="attr", subj=mention(o, drop=attr, definite_p=0.5),
                        adj=o.colour if attr == "colour" else o.size)
            subj_uid = o.uid
        else:  # rel
            b = objs[int(rng.integers(len(objs)))]
            while b.uid == o.uid:
                b = objs[int(rng.integers(len(objs)))]
            verb = str(rng.choice(_relations(o, b)))
            subj = mention(o, definite_p=0.5)
            plan = dict(kind="trans", verb=verb, subj=subj, obj=mention(b, definite_p=0.5))
            subj_uid = o.uid
        if rng.random() < st.adv_p:
            plan["adv"] = str(rng.choice(_EVAL_ADVS))
        if k > 0:
            u = rng.random()
            plan["conn"] = next(c for c, cum in st.connectives if u < cum)
        plans.append(plan)
        prev_subj = subj_uid
    return plans


def _row(lang: Language, words) -> dict:
    text, spans = lang.join(words)
    return dict(lang=lang.code, text=text, words=[w.form for w in words],
                upos=[w.upos for w in words], concreteness=[w.concreteness for w in words],
                word_spans=[tuple(s) for s in spans], concepts=[w.concept for w in words])


class SceneWorld:
    """A generated world: languages, scenes with images, captions, stories and a lexicon.

    Build with :func:`make_world`. Attributes: ``params`` (dict of everything that made it),
    ``languages`` (codes), ``captions``, ``stories``, ``lexicon``, ``objects`` (DataFrames).
    """

    def __init__(self, params: dict, langs: list[Language], scenes: dict[str, Scene],
                 captions: pd.DataFrame, stories: pd.DataFrame):
        self.params = dict(params)
        self.seed = int(params["seed"])
        self._langs = {lang.code: lang for lang in langs}
        self.languages: list[str] = [lang.code for lang in langs]
        self.scenes = scenes
        self.captions = captions
        self.stories = stories
        self.lexicon = pd.DataFrame([r for lang in langs for r in lang.lexicon_rows()])
        self.objects = pd.DataFrame([dict(scene_id=s.scene_id, **o.__dict__)
                                     for s in scenes.values() for o in s.objects])
        self._image = lru_cache(maxsize=None)(self._render)

    def __repr__(self) -> str:
        return (f"SceneWorld(seed={self.seed}, languages={self.languages}, "
                f"captions={len(self.captions)}, story_sentences={len(self.stories)}, "
                f"scenes={len(self.scenes)})")

    def _repr_markdown_(self) -> str:
        return self.card()

    # -------------------------------------------------------------------------------- access
    @property
    def fingerprint(self) -> str:
        """16-hex hash of the parameters and WORLD_VERSION: use it in cache keys."""
        blob = json.dumps(dict(self.params, version=WORLD_VERSION), sort_keys=True, default=str)
        return hashlib.sha256(blob.encode()).hexdigest()[:16]

    def story_plans(self, story_idx: int, *, own: bool = True) -> list:
        """Story ``story_idx``'s plans as :func:`make_world` drew them (objects after each
        sentence's event, clause plan, event name; :func:`.stories.generate_story_plans`):
        what the exact story oracle (:func:`.stories.next_sentence_distribution`) reads.
        ``own=False``: any index ≥ 0, also beyond the world's stories (a fresh story of the
        same generator, from its own stream)."""
        p = self.params
        if own and not 0 <= int(story_idx) < int(p["n_stories"]):
            raise KeyError(f"story {story_idx} is not in this world (0..{p['n_stories'] - 1})")
        return _story_plans(self.seed, int(story_idx), p["min_story_len"], p["max_story_len"],
                            p["mechanism"], p.get("world_style", "typology"),
                            p.get("narrator_p"), self.story_process)

    @property
    def story_process(self) -> StoryProcess:
        """The story process the world's persistent stories were drawn with
        (:class:`.stories.StoryProcess`; the book's, :data:`.stories.BOOK_STORY`, unless
        ``make_world(story_process=)`` gave another)."""
        return StoryProcess.from_record(self.params.get("story_process"))

    def story_plain_noun_p(self, story_idx: int) -> float:
        """The probability that story ``story_idx``'s re-mentions keep the plain noun (1/2
        without a narrator; :func:`.stories.narrator_plain_noun_p`): with
        :meth:`story_plans` (any index, as ``own=False``), what the exact story oracle
        needs."""
        return narrator_plain_noun_p(self.seed, int(story_idx), self.params.get("narrator_p"))

    def story_corpus(self, n_stories: int) -> pd.DataFrame:
        """A text-only corpus of ``n_stories`` fresh stories of this world's generator, each in
        every language: the documents a decoder can be pretrained on before it meets the
        world's illustrated stories (as Gemma read text before PaliGemma saw images).

        The stories are indices :data:`CORPUS_FIRST` … of :meth:`story_plans` (``own=False``):
        none is one of the world's own stories (whose test split the chapters score) nor one of
        the known answer's marginal stories. No pictures. Columns: ``story_id``, ``sent_idx``,
        ``lang``, ``text``; sorted by language, story and sentence.
        """
        check_positive_int(n_stories, "n_stories")
        rows = []
        for s in range(CORPUS_FIRST, CORPUS_FIRST + int(n_stories)):
            plans = self.story_plans(s, own=False)
            for lang in self._langs.values():
                rows += [dict(story_id=f"corpus{s - CORPUS_FIRST:05d}", sent_idx=k,
                              lang=lang.code, text=lang.join(lang.clause(plan))[0])
                         for k, (_, plan, _) in enumerate(plans)]
        return (pd.DataFrame(rows).sort_values(["lang", "story_id", "sent_idx"])
                .reset_index(drop=True))

    @property
    def story_adv_p(self) -> float:
        """The probability of an evaluative adverb in a later story sentence."""
        return _story_adv_p(self.params["mechanism"])

    def language(self, code: str) -> Language:
        """The :class:`Language` object (grammar and lexicon) of ``code``."""
        if code not in self._langs:
            raise KeyError(f"unknown language {code!r}; this world has {self.languages}")
        return self._langs[code]

    def _render(self, scene_id: str):
        return render_scene(self.scenes[scene_id], self.params["image_size"])

    def image(self, scene_id: str):
        """The scene's RGB image (PIL, ``image_size``×``image_size``); a fresh copy each call."""
        if scene_id not in self.scenes:
            raise KeyError(f"unknown scene_id {scene_id!r} (ids look like 'c00012' for caption "
                           f"scenes and 's0003-2' for story scenes)")
        return self._image(scene_id).copy()

    def typology_table(self) -> pd.DataFrame:
        """One row per language: its typological parameters and lexicon size."""
        rows = []
        for code in self.languages:
            t = self._langs[code].typology
            rows.append(dict(lang=code, name=t.name, word_order=t.word_order,
                             adjective=f"{t.adj_position} noun", adposition=t.adposition,
                             articles=t.articles, number_case_marking=t.morphology,
                             spaces="yes" if t.spaces else "no",
                             lexicon_forms=int((self.lexicon.lang == code).sum())))
        return pd.DataFrame(rows)

    def sizes(self) -> pd.DataFrame:
        """Counts of captions, story sentences and scenes per split."""
        out = []
        for split in ("train", "validation", "test"):
            c = self.captions[self.captions.split == split]
            s = self.stories[self.stories.split == split]
            out.append(dict(split=split, caption_scenes=c.scene_id.nunique(), captions=len(c),
                            stories=s.story_id.nunique(), story_sentences=len(s),
                            story_scenes=s.scene_id.nunique()))
        return pd.DataFrame(out)

    def card(self) -> str:
        """Markdown description: parameters, typology, sizes, an example per language."""
        p = self.params
        lines = [f"## Tiny grounded world (seed {p['seed']}, {WORLD_VERSION}, "
                 f"fingerprint `{self.fingerprint}`)", "",
                 f"- {len(self.languages)} synthetic languages: {', '.join(self.languages)}",
                 f"- {p['n_scenes']} caption scenes × {p['captions_per_scene']} captions per "
                 f"language; {p['n_stories']} stories of {p['min_story_len']}-"
                 f"{p['max_story_len']} "
                 + (f"sentences on pages of 1-{p['max_page_sentences']} sentences (one picture "
                    f"per page)" if p.get("max_page_sentences", 1) > 1 else "scenes"),
                 f"- images {p['image_size']}×{p['image_size']} px RGB, 2-4 objects "
                 f"({len(SHAPES)} shapes × {len(COLOURS)} colours × 2 sizes) on a 3×3 grid",
                 "", "### Typology", "", self.typology_table().to_markdown(index=False), "",
                 "### Sizes", "", self.sizes().to_markdown(index=False), "",
                 "### Example captions (first test scene)", ""]
        test = self.captions[self.captions.split == "test"]
        sc = sorted(test.scene_id.unique())[0] if len(test) else self.captions.scene_id.iloc[0]
        for code in self.languages:
            r = self.captions[(self.captions.scene_id == sc) & (self.captions.lang == code)]
            r = r.iloc[0]
            tagged = " ".join(f"{w}/{u}" for w, u in zip(r.words, r.upos))
            lines.append(f"- **{code}** `{r.text}` — {tagged}")
        return "\n".join(lines)


def _split_labels(n: int, rng, fractions) -> list[str]:
    order = rng.permutation(n)
    n_val = max(1, int(round(fractions[1] * n)))
    n_test = max(1, int(round(fractions[2] * n)))
    labels = np.array(["train"] * n, dtype=object)
    labels[order[:n_val]] = "validation"
    labels[order[n_val:n_val + n_test]] = "test"
    return labels.tolist()


def make_world(seed: int = 0, *, n_languages: int = 6, n_scenes: int = 600,
               captions_per_scene: int = 2, n_stories: int = 60, min_story_len: int = 4,
               max_story_len: int = 8, image_size: int = 48,
               split_fractions: tuple[float, float, float] = (0.8, 0.1, 0.1),
               typologies: tuple[Typology, ...] | None = None,
               mechanism: str = "on", max_page_sentences: int = 1,
               world_style: str = "typology", narrator_p: float | None = None,
               story_process: StoryProcess | None = None) -> SceneWorld:
    """Generate the world deterministically from ``seed`` and the sizes.

    ``mechanism``: ``"on"`` plants the papers' mechanism (the image informs the words that are
    hard to predict from text; articles mark uniqueness in the scene), ``"off"`` is the same
    generator without it (module docstring).

    ``typologies`` overrides :data:`DEFAULT_TYPOLOGIES` (the first ``n_languages`` are used).
    ``world_style``: ``"typology"`` (default; the groundedness chapter's world) or ``"uid"``
    (the UID chapter's: captions of :class:`UidStyle`, and persistent stories where discourse
    carries content, :func:`.stories.generate_story_plans` ``persistent``).
    Splits are by scene (captions) and by story (stories). ``min_story_len``/``max_story_len``
    bound the sentences of a story; ``max_page_sentences`` > 1 groups them into pages of
    1..max sentences with one picture each (module docstring; 1, the default, is one sentence
    and one picture per page, and leaves ``params`` as they were before the option existed).
    ``narrator_p`` (``world_style="uid"`` only): each story's narrator keeps the noun form it
    prefers, plain or synonym, in a re-mention with this probability
    (:func:`.stories.narrator_plain_noun_p`); None, the default, is no narrator (each form
    1/2) and leaves ``params`` as they were. ``story_process`` (``world_style="uid"`` only):
    the persistent stories' protagonist, connective and re-mention probabilities
    (:class:`.stories.StoryProcess`); None, the default, is the book's
    (:data:`.stories.BOOK_STORY`) and leaves ``params`` as they were; another is recorded in
    them (hence in the fingerprint).
    """
    if n_scenes < 3 or n_stories < 3:
        raise ValueError(f"need at least 3 caption scenes and 3 stories (one per split), got "
                         f"n_scenes={n_scenes}, n_stories={n_stories}")
    if captions_per_scene < 1:
        raise ValueError(f"captions_per_scene must be >= 1, got {captions_per_scene}")
    if not 1 <= min_story_len <= max_story_len:
        raise ValueError(f"need 1 <= min_story_len <= max_story_len, got "
                         f"{min_story_len}, {max_story_len}")
    if len(split_fractions) != 3 or abs(sum(split_fractions) - 1) > 1e-9:
        raise ValueError(f"split_fractions must be 3 numbers summing to 1, got {split_fractions}")
    if image_size < 12:
        raise ValueError(f"image_size must be at least 12 pixels, got {image_size}")
    if mechanism not in MECHANISMS:
        raise ValueError(f"mechanism must be one of {MECHANISMS}, got {mechanism!r}")
    if isinstance(max_page_sentences, bool) or \
            not isinstance(max_page_sentences, (int, np.integer)) or max_page_sentences < 1:
        raise ValueError(f"max_page_sentences must be an integer >= 1 (1: one sentence per "
                         f"page), got {max_page_sentences!r}")
    if world_style not in WORLD_STYLES:
        raise ValueError(f"world_style must be one of {WORLD_STYLES}, got {world_style!r}")
    check_narrator_p(narrator_p, world_style)
    if story_process is not None and not isinstance(story_process, StoryProcess):
        raise TypeError(f"story_process must be a tokenbook.worlds.stories.StoryProcess, got "
                        f"{type(story_process).__name__}")
    if story_process not in (None, BOOK_STORY) and world_style != "uid":
        raise ValueError("story_process needs world_style='uid' (its persistent stories)")
    process = story_process or BOOK_STORY
    paged = max_page_sentences > 1
    typs = tuple(typologies) if typologies is not None else DEFAULT_TYPOLOGIES
    params = dict(seed=int(seed), n_languages=n_languages, n_scenes=n_scenes,
                  captions_per_scene=captions_per_scene, n_stories=n_stories,
                  min_story_len=min_story_len, max_story_len=max_story_len,
                  image_size=image_size, split_fractions=list(split_fractions),
                  typologies=[t.__dict__ for t in typs[:n_languages]], mechanism=mechanism)
    if paged:   # absent at the default, so the default world's fingerprint is unchanged
        params["max_page_sentences"] = int(max_page_sentences)
        params["pages_version"] = PAGES_VERSION
    if world_style != "typology":   # absent at the default: the typology world's key stays
        params["world_style"] = world_style
        params["uid_style"] = UID_STYLE.__dict__ | {"verbs": [list(v) for v in UID_STYLE.verbs],
                                                    "protagonist_p": BOOK_STORY.protagonist_p,
                                                    "remention": dict(REMENTION)}
    if narrator_p is not None:   # absent without a narrator: the world's key stays
        params["narrator_p"] = float(narrator_p)
    if process != BOOK_STORY:    # absent for the book's process: the world's key stays
        params["story_process"] = process.record()
    langs = make_languages(seed, n_languages, typs)

    scenes: dict[str, Scene] = {}
    splits = _split_labels(n_scenes, rng_for(seed, "split-scenes"), split_fractions)
    rows = []
    for i in range(n_scenes):
        rng = rng_for(seed, "scene", i)
        n_objects = int(rng.integers(2, 5))
        if world_style == "uid":   # two objects: clause 0 the first in reading order, 1 the other
            n_objects = UID_STYLE.n_objects
        sc = Scene(f"c{i:05d}", tuple(_draw_objects(rng, n_objects)))
        scenes[sc.scene_id] = sc
        for lang in langs:
            for k in range(captions_per_scene):
                crng = rng_for(seed, "caption", i, k, lang.code)
                if world_style == "uid":
                    plans = _uid_caption_plans(sc, crng, mechanism, off_rng=rng_for(
                        seed, "off-scene", i, k, lang.code))
                else:
                    plans = _caption_plans(sc, crng, mechanism)
                words = [w for plan in plans for w in lang.clause(plan)]
                rows.append(dict(caption_id=f"{sc.scene_id}-{lang.code}-{k}",
                                 scene_id=sc.scene_id, split=splits[i], **_row(lang, words)))
    captions = pd.DataFrame(rows)

    story_splits = _split_labels(n_stories, rng_for(seed, "split-stories"), split_fractions)
    rows = []
    for s in range(n_stories):
        plans = _story_plans(seed, s, min_story_len, max_story_len, mechanism, world_style,
                             narrator_p, process)
        pages = story_pages(seed, s, plans, int(max_page_sentences))
        for k, (objs, plan, event) in enumerate(plans):
            scene_id = f"s{s:04d}-{pages[k]}"
            if k + 1 == len(plans) or pages[k + 1] != pages[k]:
                # the page's picture: the state after its last sentence's event
                scenes[scene_id] = Scene(scene_id, tuple(replace(o) for o in objs))
            page = dict(para_idx=pages[k]) if paged else {}
            n_paras = dict(n_paras=pages[-1] + 1) if paged else {}
            for lang in langs:
                rows.append(dict(story_id=f"s{s:04d}", sent_idx=k, **page, scene_id=scene_id,
                                 split=story_splits[s], event=event, n_sents=len(plans),
                                 **n_paras, **_row(lang, lang.clause(plan))))
    stories = pd.DataFrame(rows)
    return SceneWorld(params, langs, scenes, captions, stories)


def _check_concepts() -> None:  # import-time sanity of the concept table
    bad = [c for c, (u, _) in CONCEPTS.items() if u not in
           {"NOUN", "ADJ", "VERB", "DET", "ADP", "PRON", "NUM", "CCONJ", "AUX", "ADV", "PART"}]
    if bad:
        raise AssertionError(f"concepts with a non-UPOS tag: {bad}")


_check_concepts()
