"""The chapter on the released-table path: the authors' groundedness.csv format (a fixture with a
known class effect) feeds every figure and the claims table."""

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from tokenbook.book.runner import load_param_file

REPO = Path(__file__).resolve().parents[2]

pytestmark = [pytest.mark.slow]

EFFECTS = {"NOUN": 2.0, "ADJ": 1.2, "VERB": 0.6, "DET": 0.3, "ADP": 0.2, "PRON": 0.25,
           "PUNCT": 0.0}


def released_fixture(path, langs=("de", "fr", "ja"), n_captions=60, seed=0):
    rng = np.random.default_rng(seed)
    rows = []
    for lang in langs:
        for c in range(n_captions):
            for i, upos in enumerate(rng.permutation(list(EFFECTS))):
                s_lm = rng.uniform(2, 8)
                rows.append({"lang": lang, "dataset": "xm", "word": f"{upos.lower()}{c % 5}",
                             "sentence_idx": i, "log_lm": s_lm,
                             "log_cap": max(s_lm - EFFECTS[upos] + rng.normal(0, 0.3), 0.01),
                             "pos": upos})
    pd.DataFrame(rows).to_csv(path, index=False)


def test_chapter_runs_on_the_released_table(tmp_path):
    from tokenbook.book.runner import run_chapter

    csv = tmp_path / "groundedness.csv"
    released_fixture(csv)
    # the parameter file the README gives users, with the fixture in place of the download
    params = load_param_file(REPO / "params" / "groundedness_typology" / "released.yaml")
    assert params["source"] == "released"
    res = run_chapter("groundedness_typology",
                      {**params, "released_path": str(csv), "n_boot": 100, "n_perm": 100,
                       "min_type_tokens": 3, "min_class_tokens": 20, "min_languages": 3,
                       "min_captions": 60},
                      out=tmp_path / "runs", quiet=True, timeout_s=600)
    assert res.ok, res.error
    claims = {c["id"]: c for c in json.loads((res.run_dir / "claims.json").read_text())}
    assert claims["lexical-gt-functional"]["verdict"] == "holds"
    assert claims["functional-above-zero"]["verdict"] == "holds"
    assert claims["cline-noun-adj-verb"]["verdict"] == "holds"
    assert claims["partly-concreteness"]["verdict"] == "not testable"  # no norms given
    figures = {p.name for p in (res.run_dir / "figures").iterdir()}
    assert {"groundedness-violins.png", "groundedness-class-means.png",
            "groundedness-rank-agreement.png"} <= figures


def test_one_language_three_captions_runs_and_is_not_testable(tmp_path):
    """A released table of 1 language and 3 captions: the chapter runs to the end (figures that
    need more data say so) and every class claim is not testable with the counts."""
    from tokenbook.book.runner import run_chapter

    csv = tmp_path / "groundedness.csv"
    released_fixture(csv, langs=("de",), n_captions=3)
    params = load_param_file(REPO / "params" / "groundedness_typology" / "released.yaml")
    for extra in ({}, {"min_class_tokens": 1}):
        res = run_chapter("groundedness_typology",
                          {**params, "released_path": str(csv), "n_boot": 50, "n_perm": 50,
                           **extra}, out=tmp_path / "runs", quiet=True, timeout_s=600)
        assert res.ok, res.error
        claims = {c["id"]: c for c in json.loads((res.run_dir / "claims.json").read_text())}
        for cid in ("lexical-gt-functional", "functional-above-zero", "cline-noun-adj-verb",
                    "rank-agreement"):
            assert claims[cid]["verdict"] == "not testable", (extra, cid)
            assert "1 language(s) (needs ≥ 30); 3 captions in the smallest language (needs ≥ " \
                "3600)" in claims[cid]["note"]
