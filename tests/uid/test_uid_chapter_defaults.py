"""The two grounded chapters must share one trained world: their tiny defaults have to build the
same world and train the same models, or the book trains the tiny models twice."""

from __future__ import annotations

from pathlib import Path

from tokenbook.models.paligemma import TrainConfig
from tokenbook.runner import get_chapter

ROOT = Path(__file__).resolve().parents[2]


def _defaults(name: str) -> dict:
    return get_chapter(name, root=ROOT).parameters


def test_uid_train_steps_default_is_the_library_default():
    assert _defaults("uid_grounding")["train_steps"] == TrainConfig().steps


def test_grounded_chapters_build_the_same_world():
    uid, gr = _defaults("uid_grounding"), _defaults("groundedness_typology")
    for key in ("seed", "world_seed", "n_languages", "n_scenes"):
        assert uid[key] == gr[key], key
