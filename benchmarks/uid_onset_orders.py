"""Would another story register plant the onset effect? The generator's answer, no training.

``reductions-at-onsets`` (Gay et al. 2026: "the strongest surprisal reductions occurring at
the onset of discourse units") is *not testable* in the book's tiny world because its known
answer says no: the generator's own reductions are not front-loaded (issue #28;
``HISTORY.md``, twenty-first and twenty-fifth sessions). A later sentence of a story opens with
a connective ("then", "next", "and" or none), which no context informs, and in three of the
four languages with an article or the verb; the words the pages and the picture inform come
after. This probe asks the generator alone (``grounded.tiny.exact_story_words`` with the
page's picture, the known answer's computation) what the claim's statistic would be if the
stories were told in another register, the sentence's words unchanged in meaning:

* ``book``: the chapter's world as it is;
* ``no connective``: every later sentence without a connective;
* ``subject first``: no connective, every language's clause in S-V order (the subject NP
  opens the sentence; articles and adjective order as the language has them);
* ``subject first, bare``: as above, with no articles and the adjectives after the noun, so a
  sentence opens with its subject's noun (given before new);
* ``event first, bare``: no connective, V-S order, no articles, adjectives after the noun (the
  verb opens the sentence: new before given) — the candidate off world for a given-before-new
  on world;
* ``subject first, bare, protagonist 0.5`` / ``0.2``: as ``subject first, bare``, with a later
  sentence about the previous one's subject with probability 0.5 or 0.2
  (``worlds.stories.PROTAGONIST_P``; the book's 0.8): the pages then say less about *who* the
  sentence is about, so the picture's value given the pages moves from the event (last) to the
  subject (first);
* ``subject first, bare nouns``: as ``subject first, bare``, with re-mentions that keep no size
  or colour word (``worlds.stories.REMENTION``; the book's 1/2 each), so what the pages tell
  beyond the subject's noun has no word to fall on; ``... , protagonist 0.5``: both.

The registers are applied by overriding the world's typologies (``make_world(typologies=)``)
and its story process (``make_world(story_process=)``, :class:`tokenbook.worlds.stories.
StoryProcess`: the connectives, the protagonist and the re-mention probabilities, which the
generator and its oracle both read; until 5 Dec the module's constants were patched for the
duration of one world, with the same worlds); captions change with the typologies too, but
only the stories are measured. Per root seed and register: the onset enrichment E
(``uid_grounding.measures``: share of a reduction's mass in a sentence's first 20% over the
share of its words there; > 1: front-loaded) of δ_P = s_U − s_P, δ_D = s_U − s_D and
δ_DP = s_D − s_PD, their minimum (the claim's statistic), and the mean sentence length in
words. The chapter's other parameters as in ``params/uid_grounding/tiny.yaml``.

    python benchmarks/uid_onset_orders.py --seeds 0 1 2 3 4 5 \\
        [--out benchmarks/results/uid_onset_orders.json]
"""

from __future__ import annotations

import argparse
import json
import os
from dataclasses import replace
from pathlib import Path

import yaml

from tokenbook.grounded import tiny as gt
from tokenbook.uid_grounding.experiments import min_onset_enrichment
from tokenbook.worlds.languages import DEFAULT_TYPOLOGIES
from tokenbook.worlds.stories import StoryProcess
from tokenbook.worlds.scenes import make_world

ROOT = Path(__file__).resolve().parents[1]
#: the chapter's registers (``grounded.tiny.REGISTERS``): the book's and the bare subject-first
#: one with a protagonist half the time; the others vary them
CHAPTER_REGISTER = "subject first, bare, protagonist 0.5"
BARE_SVO, _ = gt.REGISTERS[CHAPTER_REGISTER]
#: no connective
PLAIN = StoryProcess(connectives=((None, 1.0),))
#: register -> (typology overrides, story process)
REGISTERS = {
    "book": gt.REGISTERS["book"],
    "no connective": ({}, PLAIN),
    "subject first": ({"word_order": "SVO"}, PLAIN),
    "subject first, bare": (BARE_SVO, PLAIN),
    "event first, bare": ({**BARE_SVO, "word_order": "VSO"}, PLAIN),
    CHAPTER_REGISTER: gt.REGISTERS[CHAPTER_REGISTER],
    "subject first, bare, protagonist 0.2": (BARE_SVO, replace(PLAIN, protagonist_p=0.2)),
    "subject first, bare nouns": (BARE_SVO, replace(PLAIN, size_p=0.0, colour_p=0.0)),
    "subject first, bare nouns, protagonist 0.5": (BARE_SVO, replace(
        PLAIN, protagonist_p=0.5, size_p=0.0, colour_p=0.0)),
}


def chapter_params() -> gt.TinyParams:
    """The UID chapter's tiny parameters (``params/uid_grounding/tiny.yaml``)."""
    return gt.TinyParams.from_mapping(
        yaml.safe_load((ROOT / "params" / "uid_grounding" / "tiny.yaml").read_text()))


def register_row(seed: int, register: str, params: gt.TinyParams) -> dict:
    """The generator's onset enrichments of root ``seed``'s world told in ``register``."""
    overrides, process = REGISTERS[register]
    typologies = tuple(replace(t, **overrides) for t in DEFAULT_TYPOLOGIES)
    world = make_world(gt.streams(seed)["world"], n_languages=params.n_languages,
                       n_scenes=params.n_scenes, n_stories=params.n_stories,
                       mechanism="on", max_page_sentences=params.max_page_sentences,
                       world_style=params.world_style,
                       narrator_p=float(params.narrator_p) or None, typologies=typologies,
                       story_process=process)
    words = gt.exact_story_words(world, params.story_splits, picture_informs=True)
    smallest, by_reduction = min_onset_enrichment(words)
    lengths = words.groupby(["lang", "story_id", "sent_idx"]).size()
    return {"root_seed": seed, "register": register, "min_E": round(smallest, 4),
            **{f"E_{k}": round(v, 4) for k, v in by_reduction.items()},
            "mean_sentence_words": round(float(lengths.mean()), 3),
            "n_words": int(len(words))}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3, 4, 5])
    parser.add_argument("--registers", nargs="+", default=list(REGISTERS),
                        choices=list(REGISTERS))
    parser.add_argument("--out", type=Path,
                        default=ROOT / "benchmarks" / "results" / "uid_onset_orders.json")
    args = parser.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    params = chapter_params()
    rows = []
    for seed in args.seeds:
        for register in args.registers:
            row = register_row(seed, register, params)
            print(json.dumps(row, ensure_ascii=False), flush=True)
            rows.append(row)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    tmp = args.out.with_suffix(".tmp")
    tmp.write_text(json.dumps({"params": "params/uid_grounding/tiny.yaml", "rows": rows},
                              indent=1, ensure_ascii=False) + "\n")
    tmp.replace(args.out)


if __name__ == "__main__":
    main()
