"""The two grounded chapters must share one trained world: their tiny defaults have to build the
same worlds and train the same models, or the book trains the tiny models twice."""

from __future__ import annotations

from pathlib import Path

from tokenbook.grounded_tiny import TinyParams
from tokenbook.runner import get_chapter

ROOT = Path(__file__).resolve().parents[2]


def _defaults(name: str) -> dict:
    return get_chapter(name, root=ROOT).parameters


def test_grounded_chapters_build_the_same_worlds_and_models():
    uid, gr = _defaults("uid_grounding"), _defaults("groundedness_typology")
    shared = set(TinyParams.__dataclass_fields__) - {"caption_splits", "story_splits"}
    for key in sorted(shared) + ["seed", "n_seeds"]:
        assert uid[key] == gr[key], key
    assert TinyParams.from_mapping(uid) == TinyParams.from_mapping(gr)


def test_chapter_defaults_are_the_library_defaults():
    assert TinyParams.from_mapping(_defaults("uid_grounding")) == TinyParams()
