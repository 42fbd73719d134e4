"""Held-out agreement: the tiny claims re-judged on root seeds the book never uses."""

from __future__ import annotations

import pandas as pd
import pytest

from tokenbook.book.agreement import (agreement_summary, compare_verdicts, heldout_agreement,
                                      heldout_overrides)
from tokenbook.book.runner import run_chapter

from .conftest import DUMMY_CHAPTER, make_book

# a chapter with one tiny claim whose effect is planted (clear: the same verdict on any seed
# set) and one with no effect at all (never detected)
SEEDED = DUMMY_CHAPTER.replace("seed = 0\n", "seed = 0\nn_seeds = 8\n").replace(
    '''claims.report([''', '''from tokenbook.verdicts import Expect

def stat(root, on, planted):
    r = np.random.default_rng([root, on])
    return float(r.normal(planted * on, 0.3, 50).mean())

roots = range(seed, seed + n_seeds)
claims.report([
    claims.Claim.over_seeds("planted", "X rises", statistic="mean", expect=Expect.greater(0.5),
                            values_on=[stat(s, 1, 1.0) for s in roots],
                            values_off=[stat(s, 0, 1.0) for s in roots], mechanism="on/off"),
    claims.Claim.over_seeds("absent", "Y rises", statistic="mean", expect=Expect.greater(0.5),
                            values_on=[stat(s, 1, 0.0) for s in roots],
                            values_off=[stat(s, 0, 0.0) for s in roots], mechanism="on/off"),''')


def test_heldout_overrides_move_every_root_seed():
    assert heldout_overrides({"seed": 0, "n_seeds": 8}, 100) == {"seed": 100}
    with pytest.raises(ValueError, match="no 'seed'"):
        heldout_overrides({"n": 3}, 100)
    with pytest.raises(ValueError, match="start"):
        heldout_overrides({"seed": 0}, -1)


def test_compare_verdicts_and_summary():
    book = [{"id": "a", "verdict": "detected", "scale": "tiny"},
            {"id": "b", "verdict": "not detected", "scale": "tiny"},
            {"id": "p", "verdict": "holds", "scale": "paper"}]
    held = [{"id": "a", "verdict": "detected", "scale": "tiny"},
            {"id": "b", "verdict": "not specific", "scale": "tiny"}]
    t = compare_verdicts(book, held, "ch")
    assert list(t["id"]) == ["a", "b"] and list(t["same"]) == [True, False]
    s = agreement_summary(pd.concat([t, t.assign(chapter="other")]))
    assert (s["n_claims"], s["n_same"], s["agreement"]) == (4, 2, 0.5)
    assert s["flips"][0] == {"chapter": "ch", "id": "b", "book": "not detected",
                             "heldout": "not specific"}


@pytest.mark.slow
def test_heldout_agreement_reruns_the_chapter_on_new_root_seeds(tmp_path):
    root = make_book(tmp_path / "book", SEEDED)
    with pytest.raises(RuntimeError, match="make book"):
        heldout_agreement(root=root)
    assert run_chapter("dummy", root=root, quiet=True).ok
    table = heldout_agreement(root=root, start=100)
    assert list(table["book"]) == ["detected", "not detected"]
    assert table["same"].all()
    held = sorted((root / "_build" / "heldout" / "dummy").glob("*/run.json"))
    assert len(held) == 1 and '"seed": 100' in held[0].read_text()
