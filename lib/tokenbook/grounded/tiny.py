"""The tiny setting both grounded chapters share: one seed's world, models and scored tables.

A root ``seed`` is split into named streams (:func:`tokenbook.seeds.derive_seed`): ``"world"``
draws the world (:func:`tokenbook.worlds.scenes.make_world`), ``"train"`` initialises and orders
the training of the tiny captioner + text LM
(:func:`tokenbook.models.paligemma.train_grounded_models`) and ``"null"`` draws the shuffles of the null below. Analyses take their
own root, ``boot_seed``, so changing it retrains and rescores nothing.

**Mechanism on / off.** ``on`` scores the held-out captions (and story sentences) of the world
(built with the papers' mechanism planted, ``make_world(mechanism="on")``) against their own
images and discourse. The default ``off`` is the cheap null that needs no retraining
(``null="shuffle"``): the same models score the same texts against *another* scene's image
(a derangement of the held-out scenes, per language and split) and, for stories, after the
preceding sentences of *another* story of the same language — the image and the discourse then
carry no information about the words. ``null="world"`` instead regenerates the world with the
mechanism off (``make_world(mechanism="off")``) and retrains the models on it (twice the
training cost).

**Merged segments.** In a language written without spaces the tiny BPE merges characters
across word boundaries, so some tokens straddle two words (``dov``: about a third of its words).
``merged="split"`` (default) shares each straddled run's surprisal over its words in proportion
to their length; ``merged="drop"`` drops every unit containing one (see
:mod:`tokenbook.grounded.tables`). Neither keeps the multi-word segments as "words".

**Image baselines.** G = s_U − s_P compares two *models*; a word can come out "grounded" just
because the captioner was fine-tuned differently. :func:`blank_caption_words` scores the same
captions with the same captioner against one constant grey image (``BLANK_FILL``; the
authors' exploratory ``blank_coco35`` rule used a black 224×224 image, method notes §1.2), and
:func:`image_baseline_words` puts s_P under the true, a *mismatched* (the shuffle null's
derangement: another held-out scene's image) and the blank image side by side. The blank
table is its own cache entry (data set ``"tiny-blank"``, image ids ``blank-<fill>``), so no
existing key changes.

Example
-------
>>> streams(0) == streams(0) and streams(0)["world"] != streams(1)["world"]
True
>>> sorted(derangement(["a", "b", "c"], seed=0).items())[0][1] != "a"
True
"""

from __future__ import annotations

import itertools
import weakref
from dataclasses import dataclass
from dataclasses import replace
from functools import lru_cache, partial
from typing import Any, Mapping, Sequence

import numpy as np
import pandas as pd
from scipy.stats import spearmanr

from tokenbook.cache import without_later_defaults
from tokenbook.data.tagging import GoldSegmenter
from tokenbook.grounded.tables import caption_word_table, drop_unscorable, story_word_table
from tokenbook.models.paligemma import TrainConfig, train_grounded_models
from tokenbook.parallel import map_ordered
from tokenbook.seeds import derive_seed
from tokenbook.validation import check_choice, check_positive_int, check_table
from tokenbook.worlds.languages import CONCEPTS, DEFAULT_TYPOLOGIES, DEPICTED, RATER_SD, rng_for
from tokenbook.worlds.render import COLOURS, SHAPES, SIZES
from tokenbook.worlds.scenes import make_world, uid_caption_prefix_probability
from tokenbook.worlds.stories import (BOOK_STORY, StoryProcess, check_narrator_p, event_rates,
                                      next_sentence_distribution,
                                      next_sentence_given_picture, page_contexts,
                                      sentence_given_picture, sentence_plan, story_pages,
                                      story_states)

__all__ = ["TinyParams", "streams", "derangement", "shuffled_contexts", "tiny_world",
           "train_tiny_models", "count_model_words",
           "tiny_models", "caption_words", "story_words", "MERGED", "NULLS", "BLANK_FILL",
           "blank_image", "blank_caption_words", "image_baseline_words", "DEPICTED_CLASSES",
           "mean_gain", "reference_caption_words", "tiny_norms", "concept_rating_mean",
           "with_norms",
           "exact_caption_words", "exact_story_words", "reference_story_words",
           "MARGINAL_STORIES", "REGISTERS"]

MERGED = ("split", "drop")
NULLS = ("shuffle", "world")
_STRADDLE = {"split": "split", "drop": "nan"}
#: grey level (0–255) of the blank image, all three channels
BLANK_FILL = 128
#: the registers a tiny ``uid`` world can be told in (``TinyParams.register``): name ->
#: (overrides of every language's typology, :class:`tokenbook.worlds.languages.Typology` fields;
#: the persistent stories' process). ``"book"``: the languages as drawn, the book's process.
#: ``"subject first, bare, protagonist 0.5"``: every language S–V with bare nouns (no articles,
#: adjectives after the noun), no connectives, and a later sentence about the previous one's
#: subject half the time — the register whose known answer front-loads all three onset
#: reductions (``benchmarks/uid_onset_orders.py``)
REGISTERS: dict[str, tuple[dict[str, str], StoryProcess]] = {
    "book": ({}, BOOK_STORY),
    "subject first, bare, protagonist 0.5": (
        {"word_order": "SVO", "articles": "none", "adj_position": "after"},
        StoryProcess(protagonist_p=0.5, connectives=((None, 1.0),))),
}


@dataclass(frozen=True)
class TinyParams:
    """World and model sizes of the tiny setting (every field enters the cache keys).

    Defaults are the smallest that still gave the papers' effects on the on-world (measured;
    see the chapters' time tables): ``n_scenes`` caption scenes, ``n_stories`` stories,
    ``train_steps`` fine-tuning steps (stage 2b), ``text_steps``/``align_steps``/
    ``vision_steps`` the earlier stages of :class:`tokenbook.models.paligemma.TrainConfig`
    (``story_steps`` on ``story_documents`` text-only stories: the decoder first reads whole
    stories; 0 and 0: it does not; ``story_share``: the story sentences' share of each
    fine-tuning batch, 0: as drawn);
    ``max_page_sentences`` the most sentences a story page holds under its one picture (1: a
    picture per sentence; :func:`tokenbook.worlds.scenes.make_world`); ``world_style`` the
    world's style (``"typology"``: the groundedness chapter's; ``"uid"``: the UID chapter's,
    :class:`tokenbook.worlds.scenes.UidStyle`, whose known answer is
    :func:`exact_caption_words`); ``narrator_p`` (uid world only; 0: none) the stories'
    narrator (:func:`tokenbook.worlds.stories.narrator_plain_noun_p`); ``lr`` the peak
    learning rate of every training stage but the projector's alignment
    (:class:`tokenbook.models.paligemma.TrainConfig`'s ``lr``); ``register`` (uid world only)
    the word order and story process the world is told in (a name of :data:`REGISTERS`).
    """

    n_languages: int = 4
    n_scenes: int = 400
    n_stories: int = 40
    train_steps: int = 1000
    text_steps: int = 400
    story_steps: int = 0
    story_documents: int = 0
    story_share: float = 0.0
    align_steps: int = 300
    vision_steps: int = 600
    max_page_sentences: int = 3
    caption_splits: tuple = ("test", "validation")
    story_splits: tuple = ("test", "validation")
    merged: str = "split"
    null: str = "shuffle"
    world_style: str = "typology"
    narrator_p: float = 0.0
    lr: float = TrainConfig.lr
    register: str = "book"

    def __post_init__(self):
        for name in ("n_languages", "n_scenes", "n_stories", "train_steps",
                     "max_page_sentences"):
            check_positive_int(getattr(self, name), name)
        check_choice(self.merged, "merged", MERGED)
        check_choice(self.null, "null", NULLS)
        check_choice(self.world_style, "world_style", ("typology", "uid"))
        check_narrator_p(float(self.narrator_p) or None, self.world_style)   # 0: none
        check_choice(self.register, "register", tuple(REGISTERS))
        if self.register != "book" and self.world_style != "uid":
            raise ValueError(f"register {self.register!r} needs world_style='uid' (its "
                             f"persistent stories), got {self.world_style!r}")
        # their ranges, before any training
        TrainConfig(story_share=float(self.story_share), lr=self.lr)

    @classmethod
    def from_mapping(cls, params: Mapping[str, Any]) -> "TinyParams":
        """The fields of ``params`` that name a field here (others ignored)."""
        names = set(cls.__dataclass_fields__)
        kw = {k: (tuple(v) if isinstance(v, list) else v) for k, v in params.items()
              if k in names}
        return cls(**kw)

    def key(self) -> dict:
        """The fields as a JSON-able dict (for cache keys); ``world_style``, ``story_steps``,
        ``story_documents``, ``story_share``, ``narrator_p``, ``lr`` and ``register`` only when
        they are not the defaults, so the keys of settings without them are those from before
        the fields existed."""
        fields = {k: (list(v) if isinstance(v, tuple) else v) for k, v in self.__dict__.items()}
        return without_later_defaults(fields, {"world_style": "typology", "story_steps": 0,
                                               "story_documents": 0, "story_share": 0.0,
                                               "narrator_p": 0.0, "lr": TrainConfig.lr,
                                               "register": "book"})


def streams(seed: int) -> dict[str, int]:
    """The derived seeds of one root ``seed``: ``world``, ``train`` and ``null``."""
    return {name: derive_seed(seed, name) for name in ("world", "train", "null")}


def derangement(ids: Sequence[str], seed: int) -> dict[str, str]:
    """A seeded permutation of ``ids`` with no fixed point (each id maps to another one).

    A random cyclic shift of a random order: every id gets a different id (needs ≥ 2 ids).
    """
    ids = list(dict.fromkeys(ids))
    if len(ids) < 2:
        raise ValueError(f"a derangement needs at least 2 distinct ids, got {len(ids)}")
    rng = np.random.default_rng(seed)
    order = [ids[i] for i in rng.permutation(len(ids))]
    shift = int(rng.integers(1, len(ids)))
    return {a: order[(i + shift) % len(order)] for i, a in enumerate(order)}


def shuffled_contexts(stories: pd.DataFrame, seed: int) -> list[list[str]]:
    """Per row of ``stories`` (sorted by lang, story_id, sent_idx): the preceding sentences of
    *another* story of the same language (a derangement of stories), as many as the row's own
    sentence index allows (the other story's first ``min(k, its length)`` sentences)."""
    check_table(stories, "stories", columns=["lang", "story_id", "sent_idx", "text"])
    out: list[list[str]] = []
    for lang, g in stories.groupby("lang", sort=False):
        texts = {sid: gg.sort_values("sent_idx")["text"].tolist()
                 for sid, gg in g.groupby("story_id", sort=False)}
        other = derangement(list(texts), derive_seed(seed, "contexts", str(lang)))
        for sid, k in zip(g["story_id"], g["sent_idx"]):
            src = texts[other[sid]]
            out.append(src[:min(int(k), len(src))] if k else [])
    return out


def tiny_world(seed: int, params: TinyParams, mechanism: str = "on"):
    """The world of root ``seed`` (its ``world`` stream) with the mechanism on or off.

    ``params.max_page_sentences`` > 1 groups the stories' sentences into picture-book pages of
    1..max sentences under one picture (:func:`tokenbook.worlds.scenes.make_world`; the world's
    fingerprint, hence the models' cache key, records it).

    The world is generated once per process for the same seed, mechanism and world sizes
    (the last :data:`WORLDS_KEPT` of them are kept): the per-seed steps ask for it several
    times. The same object is returned each time, so treat it as read-only.
    """
    return _world(int(seed), params.n_languages, params.n_scenes, params.n_stories,
                  mechanism, params.max_page_sentences, params.world_style,
                  float(params.narrator_p) or None, params.register)


#: how many generated worlds :func:`tiny_world` keeps per process (a root seed's on and off
#: worlds and the next seed's)
WORLDS_KEPT = 4


@lru_cache(maxsize=WORLDS_KEPT)
def _world(seed: int, n_languages: int, n_scenes: int, n_stories: int, mechanism: str,
           max_page_sentences: int, world_style: str, narrator_p: float | None = None,
           register: str = "book"):
    overrides, process = REGISTERS[register]
    typologies = (tuple(replace(t, **overrides) for t in DEFAULT_TYPOLOGIES) if overrides
                  else None)
    return make_world(streams(seed)["world"], n_languages=n_languages, n_scenes=n_scenes,
                      n_stories=n_stories, mechanism=mechanism,
                      max_page_sentences=max_page_sentences, world_style=world_style,
                      narrator_p=narrator_p, typologies=typologies,
                      story_process=None if process == BOOK_STORY else process)


def tiny_models(world, seed: int, params: TinyParams, *, progress: bool = False):
    """The tiny captioner + text LM of ``world`` (cached; the ``train`` stream of ``seed``)."""
    cfg = TrainConfig(steps=params.train_steps, text_steps=params.text_steps,
                      story_steps=params.story_steps, story_documents=params.story_documents,
                      story_share=params.story_share, align_steps=params.align_steps,
                      vision_steps=params.vision_steps, lr=float(params.lr))
    return train_grounded_models(world, seed=streams(seed)["train"], config=cfg,
                                 progress=progress)


def _train_seed(seed: int, params: TinyParams) -> str:
    """One root seed's models (each world the null needs: the off world's too under
    ``null="world"``); returns the folder of the last pair."""
    root = ""
    for mechanism in (("on", "off") if params.null == "world" else ("on",)):
        _, models, _ = _setting(int(seed), params, mechanism, progress=False)
        root = str(models.root)
    return root


def train_tiny_models(seeds: Sequence[int], params: TinyParams, *, n_workers: int = 2,
                      progress: bool = True) -> list[str]:
    """Train (or find in the cache) the captioner + text LM of every root seed in ``seeds``,
    ``n_workers`` seeds at a time (:func:`tokenbook.parallel.map_ordered`; 1: in this
    process). Training is where a cold chapter spends its time: run this first, so the later
    per-seed steps (:func:`caption_words`, the seed sweep) find every pair in the cache
    instead of training the first seed alone on one core. Returns the model folders."""
    return map_ordered(partial(_train_seed, params=params), [int(s) for s in seeds],
                       n_workers=n_workers, desc="tiny models: root seeds", progress=progress)


def _setting(seed: int, params: TinyParams, mechanism: str, progress: bool):
    """(world, models, shuffle?) for one seed and mechanism."""
    check_choice(mechanism, "mechanism", ("on", "off"))
    world_mech = "off" if (mechanism == "off" and params.null == "world") else "on"
    world = tiny_world(seed, params, world_mech)
    models = tiny_models(world, seed, params, progress=progress)
    return world, models, mechanism == "off" and params.null == "shuffle"


def caption_words(seed: int, params: TinyParams, mechanism: str = "on", *,
                  progress: bool = False) -> pd.DataFrame:
    """Caption word table (s_U, s_P; nats) of the held-out splits for one seed and mechanism.

    Under the shuffle null every caption is scored against another held-out scene's image.
    Units with a merged segment are dropped when ``params.merged == "drop"``.
    """
    world, models, shuffle = _setting(seed, params, mechanism, progress)
    return _caption_table(world, models, seed, params, shuffle=shuffle, blank_fill=None,
                          progress=progress)


def blank_image(size: int, fill: int = BLANK_FILL):
    """A constant RGB image (PIL), ``size``×``size`` px, every pixel ``(fill, fill, fill)``.

    >>> blank_image(4, 10).getpixel((3, 3))
    (10, 10, 10)
    """
    from PIL import Image

    check_positive_int(size, "size")
    if isinstance(fill, bool) or not isinstance(fill, (int, np.integer)) or not 0 <= fill <= 255:
        raise ValueError(f"fill must be an integer grey level in 0..255, got {fill!r}")
    return Image.new("RGB", (int(size), int(size)), (int(fill),) * 3)


def blank_caption_words(seed: int, params: TinyParams, *, fill: int = BLANK_FILL,
                        progress: bool = False) -> pd.DataFrame:
    """Caption word table (s_U, s_P; nats) of the held-out splits with every caption scored
    by the mechanism-on captioner against one blank image (:func:`blank_image`, the world's
    image size). Cached as its own entry (``dataset="tiny-blank"``, image id ``blank-<fill>``).
    """
    blank_image(1, fill)  # check the grey level before any training or scoring
    world, models, _ = _setting(seed, params, "on", progress)
    return _caption_table(world, models, seed, params, shuffle=False, blank_fill=fill,
                          progress=progress)


def image_baseline_words(seed: int, params: TinyParams, *, fill: int = BLANK_FILL,
                         progress: bool = False) -> pd.DataFrame:
    """The held-out caption words scored by the mechanism-on pair under three images (nats):

    ``s_U`` (text-only LM), ``s_P`` (captioner, the caption's own image), ``s_P_mismatched``
    (same captioner, another held-out scene's image: the shuffle null of :func:`caption_words`,
    whatever ``params.null`` says) and ``s_P_blank`` (same captioner, :func:`blank_image`).
    One row per word of :func:`caption_words` (``lang, unit_id, word_idx, word, upos`` …); all
    three tables come from the cache when the chapters have scored them.
    """
    true = caption_words(seed, params, "on", progress=progress)
    mism = caption_words(seed, replace(params, null="shuffle"), "off", progress=progress)
    blank = blank_caption_words(seed, params, fill=fill, progress=progress)
    keys = ["lang", "unit_id", "word_idx"]
    out = true
    for name, other in (("s_P_mismatched", mism), ("s_P_blank", blank)):
        part = other[keys + ["word", "s_U", "s_P"]].rename(
            columns={"word": "_word", "s_U": "_s_U", "s_P": name})
        merged = out.merge(part, on=keys, how="left", validate="one_to_one")
        lost = merged["_word"].isna() | (merged["_word"].astype(str) != merged["word"].astype(str))
        if lost.any():
            raise ValueError(f"image_baseline_words: {int(lost.sum())} word(s) of the true-image "
                             f"table have no matching word in the {name} table (the tables "
                             f"must come from the same captions, segmentation and models)")
        out = merged.drop(columns=["_word", "_s_U"])
    return out.reset_index(drop=True)


def _caption_table(world, models, seed: int, params: TinyParams, *, shuffle: bool,
                   blank_fill: int | None, progress: bool) -> pd.DataFrame:
    """The held-out caption table: own images, a derangement of them (``shuffle``) or one
    blank image of grey level ``blank_fill``."""
    gold = GoldSegmenter.from_frame(world.captions)
    if blank_fill is None:
        image_fn, dataset = world.image, "tiny"
    else:
        blank = blank_image(int(world.params["image_size"]), blank_fill)

        def image_fn(_image_id: str):
            return blank.copy()

        dataset = "tiny-blank"
    parts = []
    for split in params.caption_splits:
        caps = world.captions[world.captions["split"] == split].copy()
        if shuffle:
            perm = derangement(sorted(caps["scene_id"].unique()),
                               derive_seed(streams(seed)["null"], "images", split))
            caps["scene_id"] = caps["scene_id"].map(perm)
        if blank_fill is not None:
            caps["scene_id"] = f"blank-{int(blank_fill)}"
        parts.append(caption_word_table(caps, image_fn=image_fn,
                                        captioner=models.captioner_dir,
                                        text_lm=models.text_lm_dir, segmenter=gold,
                                        dataset=dataset, straddle=_STRADDLE[params.merged],
                                        progress=progress))
    table = pd.concat(parts, ignore_index=True)
    if params.merged == "drop":
        table, n = drop_unscorable(table, ("s_U", "s_P"))
        table.attrs["n_dropped_units"] = n
    return table


def story_words(seed: int, params: TinyParams, mechanism: str = "on", *,
                progress: bool = False) -> pd.DataFrame:
    """Story word table (s_U, s_P, s_D, s_PD, s_D_other, s_PD_other; nats) of the held-out
    stories.

    Paragraphs are the world's picture-book pages (``params.max_page_sentences`` > 1, the
    default: 1..max sentences under one picture, like Bloom-VIST's pages): the table carries the
    world's ``para_idx`` and ``n_paras``. With ``max_page_sentences=1`` every page holds one
    sentence, so paragraphs are sentences and ``para_idx`` = ``sent_idx``.
    Under the shuffle null each sentence is scored against another scene's image (a
    derangement of the held-out story scenes) and after another story's sentences
    (:func:`shuffled_contexts`).

    ``s_D_other`` / ``s_PD_other``: the same sentence (with the same image as ``s_PD``) after
    the pages of yet another story (:func:`shuffled_contexts` of its own stream, the same in
    the on and off settings): a discourse of the same length and place that says nothing about
    this story, the reference against which the discourse claims measure what the pages *say*
    (a text LM scored without any context also lacks where in a story the sentence stands).
    """
    world, models, shuffle = _setting(seed, params, mechanism, progress)
    st = world.stories[world.stories["split"].isin(params.story_splits)].copy()
    st = st.sort_values(["lang", "story_id", "sent_idx"], kind="mergesort").reset_index(drop=True)
    previous = None
    if shuffle:
        null = streams(seed)["null"]
        perm = derangement(sorted(st["scene_id"].unique()), derive_seed(null, "story-images"))
        st["scene_id"] = st["scene_id"].map(perm)
        previous = shuffled_contexts(st, derive_seed(null, "story-contexts"))

    other = shuffled_contexts(st, derive_seed(streams(seed)["null"], "other-contexts"))
    table = story_word_table(st, image_fn=world.image, captioner=models.captioner_dir,
                             text_lm=models.text_lm_dir, dataset="tiny",
                             straddle=_STRADDLE[params.merged], previous=previous,
                             other_previous=other, progress=progress)
    if "para_idx" in st:   # picture-book pages: story_word_table carried para_idx through
        table["n_paras"] = table["story_id"].map(
            st.groupby("story_id")["n_paras"].first()).astype(np.int64)
    else:
        table["para_idx"] = table["sent_idx"]  # one sentence per page (see above)
    if params.merged == "drop":
        table, n = drop_unscorable(table, ("s_U", "s_P"))
        table.attrs["n_dropped_units"] = n
    return table


# --------------------------------------------------------------------------- manipulation
#: the word classes the tiny world's image determines: nouns, adjectives, counts
DEPICTED_CLASSES = ("NOUN", "ADJ", "NUM")


def mean_gain(words: pd.DataFrame, without: str, with_: str,
              classes: Sequence[str] = DEPICTED_CLASSES) -> float:
    """Mean surprisal reduction ``words[without] − words[with_]`` (nats) over the words of
    ``classes`` (UPOS) with both values finite; NaN when there are none.

    The grounded chapters' manipulation check: with the mechanism on, the image (``s_U − s_P``)
    or the discourse (``s_U − s_D``) must lower the surprisal of the words it determines.

    >>> w = pd.DataFrame({"upos": ["NOUN", "DET", "ADJ"], "s_U": [3.0, 1.0, 2.0],
    ...                   "s_P": [1.0, 1.0, 1.5]})
    >>> mean_gain(w, "s_U", "s_P")
    1.25
    """
    check_table(words, "words", columns=["upos"], numeric=[without, with_])
    rows = words[words["upos"].astype(str).isin(list(classes))]
    diff = (rows[without] - rows[with_]).to_numpy(float)
    diff = diff[np.isfinite(diff)]
    return float(diff.mean()) if diff.size else float("nan")


def reference_caption_words(seed: int, params: TinyParams, mechanism: str = "on"
                            ) -> pd.DataFrame:
    """The held-out caption table of :func:`caption_words`'s setting scored by the *count*
    models (:func:`count_model_words`) instead of the trained pair: the reference answer of
    the caption claims, computed from the world without tokenizer or neural model (seconds).

    Same world and same kind of null as :func:`caption_words` (the shuffle null pairs captions
    with another held-out scene; its derangement is drawn from the seed's ``null`` stream).
    """
    check_choice(mechanism, "mechanism", ("on", "off"))
    world_mech = "off" if (mechanism == "off" and params.null == "world") else "on"
    world = tiny_world(seed, params, world_mech)
    shuffle = mechanism == "off" and params.null == "shuffle"
    if params.world_style == "uid":   # the generator's exact surprisals
        return exact_caption_words(world, params.caption_splits,
                                   image_informs=mechanism == "on")
    return count_model_words(world, params.caption_splits,
                             shuffle_seed=streams(seed)["null"] if shuffle else None)


def reference_story_words(seed: int, params: TinyParams, mechanism: str = "on"
                          ) -> pd.DataFrame:
    """The held-out later story sentences of :func:`story_words`'s setting with the generator's
    surprisals (:func:`exact_story_words`, the page's picture read by its objects): the known
    answer of the story claims of a ``uid``-style world. Under the shuffle null (another
    story's sentences as the discourse, another scene's picture) both are independent of the
    sentence, so ``s_D = s_P = s_PD = s_U``; the mechanism-off world (``null="world"``) still
    tells persistent picture-book stories, so its discourse and pictures inform."""
    check_choice(mechanism, "mechanism", ("on", "off"))
    if params.world_style != "uid":
        raise ValueError("the story oracle covers the persistent stories of world_style='uid' "
                         "only")
    world_mech = "off" if (mechanism == "off" and params.null == "world") else "on"
    informs = mechanism == "on" or params.null == "world"
    return exact_story_words(tiny_world(seed, params, world_mech), params.story_splits,
                             discourse_informs=informs, picture_informs=informs)


# --------------------------------------------------------------------------- norms
def tiny_norms(seed: int, params: TinyParams, mechanism: str = "on") -> pd.DataFrame:
    """Concreteness norms of the tiny world's words: one row per ``(lang, word)`` with
    ``concept``, ``concreteness`` (1-5) and ``depicted`` (the generator reads the concept's
    value off the picture, :data:`tokenbook.worlds.languages.DEPICTED`).

    Ratings come from a concept property independent of the picture: each concept's base
    concreteness (:data:`tokenbook.worlds.languages.CONCEPTS`, values in the range of human
    norms: 4.85 for "circle", 3.4 for "move", 1.3 for "and") plus rater noise (normal, sd
    ``RATER_SD``, per language and concept, clipped to 1-5). ``on``: each concept keeps its
    own base value, so the ratings correlate with depiction only as far as the base values do
    (partly: "top" 3.4 is depicted, "move" 3.4 is not). ``off``: the base values are permuted
    across the concepts each language's captions use (per language, of 50 permutations drawn
    from stream ``norms`` of the root seed, the one least correlated with the depicted flag), so
    each language's concept ratings keep
    their distribution (the same base values, the same rater noise per concept; only clipping
    to 1-5 can move them) and lose their relation to what the picture shows
    (:func:`concept_rating_mean` is the balance check). The world (and so every model) is
    the same in both.
    """
    check_choice(mechanism, "mechanism", ("on", "off"))
    caps = tiny_world(seed, params, "on").captions
    pairs = sorted({(lang, w, c) for lang, ws, cs in zip(caps["lang"], caps["words"],
                                                        caps["concepts"])
                    for w, c in zip(ws, cs)})
    base_of = {}    # (lang, concept) -> base value
    for lang in sorted({lang for lang, _, _ in pairs}):
        concepts = sorted({c for la, _, c in pairs if la == lang})   # the language's concepts
        base = np.array([CONCEPTS[c][1] for c in concepts])
        if mechanism == "off":  # the permutation (of 50 seeded draws) least related to depiction
            depicted = np.array([c in DEPICTED for c in concepts], dtype=float)
            rng = np.random.default_rng(derive_seed(seed, "norms", "permute", lang))
            draws = [rng.permutation(base) for _ in range(50)]
            base = min(draws, key=lambda b: abs(spearmanr(b, depicted).statistic))
        base_of |= {(lang, c): b for c, b in zip(concepts, base)}
    root = derive_seed(seed, "norms", "raters")
    rows = [{"lang": lang, "word": w, "concept": c,
             "concreteness": float(np.clip(base_of[lang, c] + rng_for(root, lang, c).normal(
                 0.0, RATER_SD), 1.0, 5.0)), "depicted": c in DEPICTED}
            for lang, w, c in pairs]
    return pd.DataFrame(rows, columns=["lang", "word", "concept", "concreteness", "depicted"])


def concept_rating_mean(norms: pd.DataFrame) -> float:
    """Mean concreteness rating (1-5) over the ``(lang, concept)`` pairs of ``norms``
    (:func:`tiny_norms`), each concept once per language however many words name it: what
    the off norms must keep (they permute the concepts' base values, so only clipping moves
    it), unlike the word-weighted mean (depicted concepts have more word types).

    >>> n = pd.DataFrame({"lang": "a", "concept": ["x", "x", "y"],
    ...                   "concreteness": [5.0, 5.0, 1.0]})
    >>> concept_rating_mean(n)
    3.0
    """
    check_table(norms, "norms", columns=["lang", "concept"], numeric=["concreteness"])
    return float(norms.drop_duplicates(["lang", "concept"])["concreteness"].mean())


def with_norms(words: pd.DataFrame, norms: pd.DataFrame) -> pd.DataFrame:
    """``words`` with its ``concreteness`` column replaced by ``norms``'s rating of the same
    ``(lang, word)`` (NaN where the norms have none)."""
    rating = norms.set_index(["lang", "word"])["concreteness"]
    keys = pd.MultiIndex.from_arrays([words["lang"], words["word"]])
    return words.assign(concreteness=rating.reindex(keys).to_numpy())


# --------------------------------------------------------------------------- count models
def _scene_values(scene) -> set[str]:
    """Concepts a scene shows: its shapes, colours, sizes and the counts of repeated shapes."""
    objs = scene.objects
    vals = {o.shape for o in objs} | {o.colour for o in objs} | {o.size for o in objs}
    counts = {}
    for o in objs:
        counts[o.shape] = counts.get(o.shape, 0) + 1
    names = {2: "two", 3: "three", 4: "four"}
    vals |= {names[c] for c in counts.values() if c in names}
    return vals


def count_model_words(world, splits: Sequence[str] = ("test",), *, beta: float = 3.0,
                      shuffle_seed: int | None = None, smoothing: float = 0.1) -> pd.DataFrame:
    """Caption word table scored by two *count* models instead of the trained pair (seconds):

    * U: a bigram model of each language's training captions (add-``smoothing``), nats;
    * P: the same bigram with the probability mass of the depicted words (shapes, colours,
      sizes, counts) redistributed by the image — a value the scene shows
      (:func:`_scene_values`) weighted e^β, one it does not show e^-β, renormalised within
      the depicted words; every other word keeps its text-only probability.

    With ``shuffle_seed`` each caption is scored against another scene's image (the null).
    The tests use it to check the world's mechanism switch and the nulls without training;
    it is not a stand-in for the models in the chapters.
    """
    shown_kinds = set(SHAPES) | set(COLOURS) | {"big", "small", "two", "three", "four"}
    caps = world.captions
    out = []
    for lang, g in caps.groupby("lang", sort=True):
        train = g[g["split"] == "train"]
        vocab = sorted({w for ws in g["words"] for w in ws} | {"<s>"})
        index = {w: i for i, w in enumerate(vocab)}
        counts = np.full((len(vocab), len(vocab)), smoothing)
        for ws in train["words"]:
            seq = ["<s>", *ws]
            for a, b in zip(seq, seq[1:]):
                counts[index[a], index[b]] += 1
        probs = counts / counts.sum(axis=1, keepdims=True)
        concept = {w: c for ws, cs in zip(g["words"], g["concepts"]) for w, c in zip(ws, cs)}
        depicted = np.array([concept.get(w) in shown_kinds for w in vocab])
        concepts = np.array([concept.get(w, "") for w in vocab], dtype=object)
        test = g[g["split"].isin(list(splits))]
        scenes = test["scene_id"].tolist()
        if shuffle_seed is not None:
            perm = derangement(sorted(set(scenes)), derive_seed(shuffle_seed, "images", lang))
            scenes = [perm[s] for s in scenes]
        for r, scene_id in zip(test.itertuples(), scenes):
            shown = _scene_values(world.scenes[scene_id])
            present = np.array([c in shown for c in concepts])
            weight = np.where(present, np.exp(beta), np.exp(-beta))
            seq = ["<s>", *r.words]
            for k, (a, b) in enumerate(zip(seq, seq[1:])):
                p = probs[index[a]]
                q = p.copy()   # the image redistributes the depicted words' mass only
                q[depicted] = p[depicted] * weight[depicted]
                q[depicted] *= p[depicted].sum() / q[depicted].sum()
                out.append({"lang": lang, "unit_id": r.caption_id, "image_id": scene_id,
                            "word_idx": k, "word": b, "upos": r.upos[k],
                            "concreteness": r.concreteness[k], "n_merged": 1,
                            "s_U": float(-np.log(p[index[b]])),
                            "s_P": float(-np.log(q[index[b]] / q.sum()))})
    return pd.DataFrame(out)


# --------------------------------------------------------------------------- exact answer
def exact_caption_words(world, splits: Sequence[str] = ("test",), *, image_informs: bool = True
                        ) -> pd.DataFrame:
    """Caption word table with the generator's *exact* surprisals (nats) of a ``uid``-style
    world (:class:`tokenbook.worlds.scenes.UidStyle`): the known answer of the UID claims.

    ``s_U``: −log p(w_t | w_<t) under the caption distribution with the scene unseen (objects
    from the prior); ``s_P``: the same given the caption's scene
    (:func:`tokenbook.worlds.scenes.uid_caption_prefix_probability`). With ``image_informs``
    False (the mechanism off: the caption is about a scene independent of the image, or the
    image is another scene's) the image carries no information about the words, so
    ``s_P = s_U`` exactly. Columns as :func:`count_model_words`.
    """
    if world.params.get("world_style") != "uid":
        raise ValueError("exact_caption_words needs a world made with world_style='uid' (its "
                         "caption distribution is the one computed here)")
    if world.params.get("mechanism") == "off" and image_informs:
        raise ValueError("in the mechanism-off world the captions do not describe their image; "
                         "pass image_informs=False")
    caps = world.captions[world.captions["split"].isin(list(splits))]
    out = []
    for lang, g in caps.groupby("lang", sort=True):
        language = world.language(lang)
        prior = uid_caption_prefix_probability(language, None)
        for r in g.itertuples():
            cond = uid_caption_prefix_probability(language, world.scenes[r.scene_id].objects) \
                if image_informs else prior
            words = tuple(r.words)
            for k, w in enumerate(words):
                s = {}
                for name, f in (("s_U", prior), ("s_P", cond)):
                    num, den = f(words[:k + 1]), f(words[:k])
                    if not num > 0:
                        raise ValueError(f"caption {r.caption_id}: word {k} ({w!r}) has "
                                         f"probability 0 under {name}: the table does not come "
                                         f"from the uid generator")
                    s[name] = float(-np.log(num / den))
                out.append({"lang": lang, "unit_id": r.caption_id, "image_id": r.scene_id,
                            "word_idx": k, "word": w, "upos": r.upos[k],
                            "concreteness": r.concreteness[k], "n_merged": 1, **s})
    return pd.DataFrame(out)


#: stories whose states make the text-only (U) side of :func:`exact_story_words`
MARGINAL_STORIES = 300
#: where those stories' indices start (far beyond any world's own stories, so their streams,
#: ``rng_for(world seed, "story", index)``, are their own)
_MARGINAL_FIRST = 1_000_000


def _realised(language, key: tuple, realised: dict) -> tuple:
    """The words of story sentence ``key`` in ``language`` (memoised in ``realised``)."""
    words = realised.get(key)
    if words is None:
        words = realised[key] = tuple(w.form for w in language.clause(sentence_plan(key)))
    return words


def _surprisals(masses: Sequence[float], words: tuple, what: str) -> list[float]:
    """−log p(w_t | w_<t) (nats) from ``masses[t]``, the probability that a sentence starts
    with ``words[:t]``."""
    out = []
    for t in range(len(words)):
        if not masses[t + 1] > 0:
            raise ValueError(f"{what}: word {t} ({words[t]!r}) has probability 0 under the "
                             f"story generator: the table does not come from this world")
        out.append(float(-np.log(masses[t + 1] / masses[t])))
    return out


class _PrefixMass:
    """Probability mass of every word prefix of a sentence distribution (a trie as a dict),
    for a distribution that scores many sentences."""

    def __init__(self, language, distribution: Mapping[tuple, float], realised: dict):
        self.mass: dict[tuple, float] = {}
        for key, p in distribution.items():
            words = _realised(language, key, realised)
            for t in range(len(words) + 1):
                self.mass[words[:t]] = self.mass.get(words[:t], 0.0) + p

    def surprisals(self, words: tuple, what: str) -> list[float]:
        return _surprisals([self.mass.get(words[:t], 0.0) for t in range(len(words) + 1)],
                           words, what)


def _sentence_surprisals(language, distribution: Mapping[tuple, float], realised: dict,
                         words: tuple, what: str) -> list[float]:
    """The surprisals of one sentence ``words`` under a sentence ``distribution`` (as
    :class:`_PrefixMass`, without a trie: each key counts up to where it parts from
    ``words``)."""
    n = len(words)
    parts_at = [0.0] * (n + 1)
    for key, p in distribution.items():
        other = _realised(language, key, realised)
        t, stop = 0, min(n, len(other))
        while t < stop and other[t] == words[t]:
            t += 1
        parts_at[t] += p
    masses = np.cumsum(parts_at[::-1])[::-1]
    return _surprisals(masses, words, what)


#: a resize's verb and the size the object had before it
_RESIZE = {"grow": "small", "shrink": "big"}


def _canonical(key: tuple) -> tuple[tuple, dict[str, int]]:
    """A story sentence key (:func:`tokenbook.worlds.stories.next_sentence_distribution`) with
    its shapes, colours and sizes replaced by ``(kind, i)`` in order of first appearance, and
    how many of each kind it names."""
    seen: dict[str, list[str]] = {"shape": [], "colour": [], "size": []}

    def slot(kind: str, label: str) -> tuple[str, int]:
        if label not in seen[kind]:
            seen[kind].append(label)
        return kind, seen[kind].index(label)

    def kind_of(label: str) -> str:
        return "size" if label in SIZES else "colour"

    verb, (definite, noun, adjs, synonym), extra, conn, adv = key
    if verb in _RESIZE:            # the verb says the size before the event: relabel it too
        verb = ("resize", slot("size", _RESIZE[verb]))
    subject = (definite, slot("shape", noun), tuple(slot(kind_of(a), a) for a in adjs), synonym)
    if verb == "turn":
        extra = slot("colour", extra)
    return (verb, subject, extra, conn, adv), {k: len(v) for k, v in seen.items()}


def _symmetrised(distribution: Mapping[tuple, float]) -> dict[tuple, float]:
    """``distribution`` averaged over every relabelling of shapes, colours and sizes.

    The story generator treats every shape, colour and size alike (uniform draws, a turn to a
    uniformly drawn other colour, a resize flips the size; swapping the sizes swaps *grow* and
    *shrink* too), so the marginal of a story's sentences is invariant under relabelling them;
    averaging a Monte Carlo estimate over the relabellings keeps it unbiased and gives every
    sentence the generator can write a positive probability, and none it cannot."""
    classes: dict[tuple, float] = {}
    counts: dict[tuple, dict[str, int]] = {}
    for key, p in distribution.items():
        canon, n = _canonical(key)
        classes[canon] = classes.get(canon, 0.0) + p
        counts[canon] = n
    labels = {"shape": SHAPES, "colour": tuple(COLOURS), "size": SIZES}
    out: dict[tuple, float] = {}
    for canon, p in classes.items():
        n = counts[canon]
        choices = list(itertools.product(*(itertools.permutations(labels[k], n[k])
                                           for k in ("shape", "colour", "size"))))
        for shapes, colours, sizes in choices:
            name = {"shape": shapes, "colour": colours, "size": sizes}

            def fill(slot):
                return name[slot[0]][slot[1]]

            verb, (definite, noun, adjs, synonym), extra, conn, adv = canon
            if isinstance(verb, tuple):    # a resize: grow a small object, shrink a big one
                verb = "grow" if fill(verb[1]) == "small" else "shrink"
            key = (verb, (definite, fill(noun), tuple(fill(a) for a in adjs), synonym),
                   fill(extra) if verb == "turn" else extra, conn, adv)
            out[key] = out.get(key, 0.0) + p / len(choices)
    return out


#: the text-only story marginal of each live world (:func:`_story_marginal`), by
#: ``n_marginal``, and its prefix masses per language (:func:`_text_only_mass`): the
#: mechanism-on and shuffle-null answers of a root seed share them
_STORY_MARGINALS: "weakref.WeakKeyDictionary[Any, dict[int, dict]]" = weakref.WeakKeyDictionary()


def _story_marginal(world, n_marginal: int) -> dict[tuple, float]:
    """The marginal distribution of a later story sentence in ``world`` (the ``s_U`` of
    :func:`exact_story_words`): the mean of the exact next-sentence distributions over the
    states of ``n_marginal`` fresh stories, symmetrised over relabellings (computed once per
    world and ``n_marginal``, with the same states' event rates, :func:`_story_event_rates`;
    do not modify the returned dict)."""
    kept = _STORY_MARGINALS.setdefault(world, {})
    if n_marginal not in kept:
        adv_p, process = world.story_adv_p, world.story_process
        marginal: dict[tuple, float] = {}
        states = []
        for j in range(n_marginal):
            plain = world.story_plain_noun_p(_MARGINAL_FIRST + j)
            for state in story_states(world.story_plans(_MARGINAL_FIRST + j, own=False)):
                for key, p in next_sentence_distribution(*state, adv_p=adv_p, plain_noun_p=plain,
                                                         process=process).items():
                    marginal[key] = marginal.get(key, 0.0) + p
                states.append(state)
        kept[n_marginal] = _symmetrised({k: p / len(states) for k, p in marginal.items()})
        kept[("rates", n_marginal)] = event_rates(states, process)
    return kept[n_marginal]


def _story_event_rates(world, n_marginal: int) -> dict[int, dict[str, float]]:
    """P(event | objects after it) of a later story sentence over the states of
    :func:`_story_marginal` (:func:`tokenbook.worlds.stories.event_rates`): the story so far
    as a picture alone leaves it (the ``s_P`` of :func:`exact_story_words`)."""
    _story_marginal(world, n_marginal)
    return _STORY_MARGINALS[world][("rates", n_marginal)]


def _text_only_mass(world, n_marginal: int, lang: str, marginal: Mapping[tuple, float]
                    ) -> tuple["_PrefixMass", dict]:
    """The prefix masses of ``marginal`` realised in language ``lang`` of ``world``, with the
    memo of realised sentences (key -> words) they filled (once per world, ``n_marginal``
    and language, like :func:`_story_marginal`)."""
    kept = _STORY_MARGINALS.setdefault(world, {})
    if (n_marginal, lang) not in kept:
        realised: dict[tuple, tuple] = {}
        kept[(n_marginal, lang)] = (_PrefixMass(world.language(lang), marginal, realised),
                                    realised)
    return kept[(n_marginal, lang)]


def exact_story_words(world, splits: Sequence[str] = ("test",), *, discourse_informs: bool = True,
                      picture_informs: bool = False, n_marginal: int = MARGINAL_STORIES
                      ) -> pd.DataFrame:
    """Story word table with the generator's surprisals (nats) of a ``uid``-style world's later
    sentences (k ≥ 1): the known answer of the story claims.

    ``s_D``: −log p(w_t | w_<t) under the exact distribution of the sentence given the story
    so far (:func:`tokenbook.worlds.stories.next_sentence_distribution` of the state the
    earlier sentences leave). That state includes the objects' cells, which the text never
    states (they only restrict where a move can go), and the story narrator's noun preference
    where the world has one (``narrator_p``), which the earlier pages only show, so ``s_D`` is
    what a reader who also knew both would pay: the most the discourse can tell. ``s_U``: the
    same under the marginal of a story's later sentences — the mean of that distribution over
    the states of ``n_marginal`` stories the world's generator draws from streams of their own
    (exact given those states, a Monte Carlo mixture over them), averaged over every relabelling of
    shapes, colours and sizes (the generator treats them alike; :func:`_symmetrised`). With
    ``discourse_informs`` False (the shuffled discourse: another story's sentences,
    independent of this one) ``s_D = s_U``.

    ``s_P`` and ``s_PD`` (with ``picture_informs``; else ``s_P = s_U`` and ``s_PD = s_D``): the
    same given the objects of the sentence's page's picture (their shapes, colours and sizes,
    not their cells), alone (:func:`tokenbook.worlds.stories.sentence_given_picture`, with the
    event rates of the same ``n_marginal`` stories) and after the story so far
    (:func:`tokenbook.worlds.stories.next_sentence_given_picture`, which also knows the
    earlier pages' layout). A reader who also read the cells could pay less.
    Columns: ``lang, story_id, sent_idx, word_idx, word, upos, n_sents`` (and ``para_idx``
    when the world has pages), ``s_U, s_D, s_P, s_PD``.
    """
    if world.params.get("world_style") != "uid":
        raise ValueError("exact_story_words needs a world made with world_style='uid' (its "
                         "persistent stories are the ones computed here)")
    check_positive_int(n_marginal, "n_marginal")
    adv_p, process = world.story_adv_p, world.story_process
    max_page = int(world.params.get("max_page_sentences", 1))
    lengths = (int(world.params["min_story_len"]), int(world.params["max_story_len"]))
    marginal = _story_marginal(world, n_marginal)
    rates = _story_event_rates(world, n_marginal)
    st = world.stories[world.stories["split"].isin(list(splits))
                       & (world.stories["sent_idx"] > 0)]
    by_picture: dict[tuple, dict] = {}

    def distributions(story_idx: int) -> list[tuple[dict, dict | None, dict | None]]:
        """(D, P, PD) of each later sentence of a story, in every language alike."""
        plans = world.story_plans(story_idx)
        plain = world.story_plain_noun_p(story_idx)
        out = []
        contexts = page_contexts(plans, story_pages(world.seed, story_idx, plans, max_page))
        for k, (state, (size, mentioned, picture)) in enumerate(
                zip(story_states(plans), contexts), start=1):
            d = next_sentence_distribution(*state, adv_p=adv_p, plain_noun_p=plain,
                                           process=process)
            p = pd_ = None
            if picture_informs:
                if picture not in by_picture:
                    by_picture[picture] = sentence_given_picture(picture, rates, adv_p=adv_p,
                                                                 process=process)
                p = by_picture[picture]
                pd_ = next_sentence_given_picture(
                    *state, picture, page_size=size, mentioned=mentioned, sent_idx=k,
                    lengths=lengths, max_page_sentences=max_page, adv_p=adv_p,
                    plain_noun_p=plain, process=process)
            out.append((d, p, pd_))
        return out

    stories: dict[str, list] = {}
    out = []
    for lang, g in st.groupby("lang", sort=True):
        language = world.language(lang)
        text_only, realised = _text_only_mass(world, n_marginal, lang, marginal)
        for story_id, story in g.groupby("story_id", sort=True):
            if story_id not in stories:
                stories[story_id] = distributions(int(story_id.lstrip("s")))
            for r in story.sort_values("sent_idx").itertuples():
                words, what = tuple(r.words), f"story {story_id} sentence {r.sent_idx} ({lang})"
                d, p, pd_ = stories[story_id][r.sent_idx - 1]
                s_u = text_only.surprisals(words, what)
                s_d = (_sentence_surprisals(language, d, realised, words, what)
                       if discourse_informs else s_u)
                s_p, s_pd = s_u, s_d
                if picture_informs:
                    s_p = _sentence_surprisals(language, p, realised, words, what)
                    s_pd = _sentence_surprisals(language, pd_, realised, words, what)
                page = {"para_idx": r.para_idx} if "para_idx" in st else {}
                out += [{"lang": lang, "story_id": story_id, "sent_idx": int(r.sent_idx),
                         **page, "word_idx": k, "word": w, "upos": r.upos[k],
                         "n_sents": int(r.n_sents), "s_U": u, "s_D": d, "s_P": sp, "s_PD": spd}
                        for k, (w, u, d, sp, spd) in enumerate(zip(words, s_u, s_d, s_p, s_pd))]
    return pd.DataFrame(out)
