"""The released groundedness.csv path, on a small fixture written in the released schema."""

import numpy as np
import pandas as pd
import pytest

from tokenbook.data import released
from tokenbook.uid_grounding import measures as uid


def _fixture(tmp_path, *, logprob=False, swap_mi=False, pos_col="pos", extra=True):
    # two xm languages, 3 + 2 captions, plus a coco35 caption that must be filtered out
    rows = [
        ("de", "xm", "ein", 0, 3.0, 2.5, "DET"), ("de", "xm", "Hund", 1, 9.0, 2.0, "NOUN"),
        ("de", "xm", "läuft", 2, 4.0, 3.5, "VERB"),
        ("de", "xm", "NA", 0, 5.0, 4.0, "PROPN"), ("de", "xm", "rot", 2, 6.0, 2.0, "ADJ"),  # gap
        ("de", "xm", "Haus", 3, 7.0, 1.0, "NOUN"),
        ("de", "xm", "zwei", 0, 2.0, 2.2, "NUM"), ("de", "xm", "Katzen", 1, 8.0, 3.0, "NOUN"),
        ("fr", "xm", "un", 0, 2.5, 2.0, "DET"), ("fr", "xm", "chat", 1, 8.5, 2.5, "NOUN"),
        ("fr", "xm", "noir", 2, 5.5, 1.5, "ADJ"),
        ("fr", "xm", "une", 1, 3.0, 2.0, "DET"),  # non-increasing index starts a new caption
        ("fr", "xm", "rue", 2, 6.0, 4.0, "NOUN"), ("fr", "xm", "vide", 3, 4.0, 3.0, "ADJ"),
        ("en", "coco35", "a", 0, 1.0, 1.0, "DET"), ("en", "coco35", "dog", 1, 5.0, 1.0, "NOUN"),
    ]
    df = pd.DataFrame(rows, columns=["lang", "dataset", "word", "sentence_idx", "log_lm",
                                     "log_cap", pos_col])
    if extra:
        df["mutual_information"] = df.log_lm - df.log_cap
        if swap_mi:
            df["mutual_information"] *= -1
        df["unused_column"] = "x"
    if logprob:
        df[["log_lm", "log_cap"]] *= -1
    path = tmp_path / "groundedness.csv"
    df.to_csv(path, index=False)
    return path


def test_released_to_pivot_schema_and_captions(tmp_path):
    table = released.load_released_table(_fixture(tmp_path), cache=False)
    assert list(table.columns) == ["lang", "dataset", "unit_kind", "unit_id", "word_idx", "word",
                                   "upos", "concreteness", "s_U", "s_P"]
    assert set(table.dataset) == {"xm"}
    assert table.groupby("lang").unit_id.nunique().to_dict() == {"de": 3, "fr": 2}
    assert table.word.iloc[3] == "NA"  # words are never parsed as missing values
    cap = table[table.unit_id == "xm:de:1"]
    assert cap.word_idx.tolist() == [0, 1, 2] and cap.word.tolist() == ["NA", "rot", "Haus"]
    np.testing.assert_allclose(cap.s_U, [5, 6, 7])
    assert table[table.unit_id == "xm:fr:1"].word.tolist() == ["une", "rue", "vide"]
    res = uid.unit_measures(table)
    assert res.n_excluded == 1  # "zwei Katzen"
    got = res.table.set_index(["unit_id", "condition"]).uid_v
    assert got[("xm:de:0", "U")] == pytest.approx(np.var([3.0, 9.0, 4.0]))


def test_sign_convention_detected_and_checked(tmp_path):
    a = released.load_released_table(_fixture(tmp_path), cache=False)
    (tmp_path / "lp").mkdir()
    b = released.load_released_table(_fixture(tmp_path / "lp", logprob=True), cache=False)
    np.testing.assert_allclose(a.s_U, b.s_U)
    assert b.attrs["sign"] == "logprob"
    (tmp_path / "sw").mkdir()
    with pytest.raises(ValueError, match="swapped"):
        released.load_released_table(_fixture(tmp_path / "sw", swap_mi=True), cache=False)
    frame = released.read_released(_fixture(tmp_path), dataset="xm")
    frame = frame.drop(columns="mutual_information")
    frame.loc[:6, ["log_lm", "log_cap"]] *= -1
    with pytest.raises(ValueError, match="sign convention"):
        released.validate_released(frame)
    ok = released.validate_released(frame, sign="surprisal")
    assert (ok.s_U.iloc[:7] < 0).all()


def test_schema_errors_are_clear(tmp_path):
    with pytest.raises(FileNotFoundError, match="osf.io"):
        released.read_released(tmp_path / "nope.csv")
    bad = tmp_path / "bad.csv"
    pd.DataFrame({"lang": ["de"], "word": ["x"], "log_lm": [1.0]}).to_csv(bad, index=False)
    with pytest.raises(ValueError, match=r"missing columns \['dataset', 'sentence_idx', 'log_cap'\]"):
        released.read_released(bad)
    with pytest.raises(ValueError, match="data sets present"):
        released.read_released(_fixture(tmp_path), dataset="multi30k")
    (tmp_path / "u").mkdir()
    t = released.load_released_table(_fixture(tmp_path / "u", pos_col="upos", extra=False),
                                     cache=False)
    assert "NOUN" in set(t.upos)


def test_cached_load_roundtrip(tmp_path, monkeypatch):
    monkeypatch.setenv("TOKENBOOK_CACHE", str(tmp_path / "cache"))
    path = _fixture(tmp_path)
    a = released.load_released_table(path)
    b = released.load_released_table(path)
    pd.testing.assert_frame_equal(a, b)
    assert len(list((tmp_path / "cache").glob("released-groundedness-*.parquet"))) == 1


def test_released_table_feeds_the_caption_analyses(tmp_path):
    import matplotlib

    matplotlib.use("Agg")
    rng = np.random.default_rng(0)
    rows = []
    for lang in ("de", "fr", "ja"):
        for cap in range(30):
            n = int(rng.integers(3, 9))
            su = rng.gamma(2, 2, n)
            sp = su.mean() + 0.6 * (su - su.mean()) - 0.2
            for i in range(n):
                rows.append((lang, "xm", f"w{i}", i, su[i], sp[i], ["NOUN", "DET", "VERB"][i % 3]))
    df = pd.DataFrame(rows, columns=["lang", "dataset", "word", "sentence_idx", "log_lm",
                                     "log_cap", "pos"])
    df["mutual_information"] = df.log_lm - df.log_cap
    path = tmp_path / "groundedness.csv"
    df.to_csv(path, index=False)
    table = released.load_released_table(path, cache=False)
    m = uid.unit_measures(table)
    assert m.n_units == 90 and m.n_excluded == 0
    cmp_ = uid.compare_conditions(m.table, n_boot=100)
    v = cmp_[cmp_.metric == "uid_v"]
    assert (v.delta_pct < 0).all()
    np.testing.assert_allclose(v.delta_pct, -64.0, atol=1e-6)  # variance scales by 0.6² = 0.36
    from tokenbook.uid_grounding.figures import plot_language_scatter

    fig = plot_language_scatter(cmp_)
    assert len(fig.axes) == 2
    matplotlib.pyplot.close(fig)
