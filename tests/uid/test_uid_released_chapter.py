"""The UID chapter end to end on the released-table path: a fixture in the exact format of the
authors' groundedness.csv (surprisals in log_lm/log_cap, captions split at sentence_idx == 0)
with a known effect — the image lowers the surprisal of the words that are hard for the text
model — gives the caption claims, and the story claims are not testable (captions only)."""

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from tokenbook.runner import load_param_file

REPO = Path(__file__).resolve().parents[2]

pytestmark = [pytest.mark.slow]


def released_fixture(path, langs=("de", "fr", "ja"), n_captions=80, seed=0):
    rng = np.random.default_rng(seed)
    rows = []
    for lang in langs:
        for c in range(n_captions):
            for i, upos in enumerate(["DET", "ADJ", "NOUN", "VERB", "ADP", "DET", "NOUN"]):
                hard = upos in ("NOUN", "ADJ")
                s_lm = rng.normal(6.0 if hard else 2.0, 0.3)
                s_cap = rng.normal(2.2 if hard else 1.9, 0.3)
                rows.append({"lang": lang, "dataset": "xm", "word": f"{upos.lower()}{c % 7}",
                             "sentence_idx": i, "log_lm": max(s_lm, 0.01),
                             "log_cap": max(s_cap, 0.01), "pos": upos})
    pd.DataFrame(rows).to_csv(path, index=False)


def test_uid_chapter_runs_on_the_released_table(tmp_path):
    from tokenbook.runner import run_chapter

    csv = tmp_path / "groundedness.csv"
    released_fixture(csv)
    # the parameter file the README gives users, with the fixture in place of the download
    params = load_param_file(REPO / "params" / "uid_grounding" / "released.yaml")
    assert params["released_table"] == "data/groundedness.csv"
    res = run_chapter("uid_grounding", {**params, "released_table": str(csv), "n_boot": 100,
                                        "pos_min_count": 20},
                      out=tmp_path / "runs", quiet=True, timeout_s=900)
    assert res.ok, res.error
    claims = {c["id"]: c for c in json.loads((res.run_dir / "claims.json").read_text())}
    assert claims["uid-v-lower-with-image"]["verdict"] == "holds"
    assert claims["uid-lv-lower-with-image"]["verdict"] == "holds"
    assert claims["uid-lower-significant"]["verdict"] == "holds"
    assert claims["discourse-smooths"]["verdict"] == "not testable"
    assert all(c["scale"] == "paper" for c in claims.values())
    figures = {p.name for p in (res.run_dir / "figures").iterdir()}
    assert {"uid-captions-language-scatter.png", "uid-captions-densities.png"} <= figures
