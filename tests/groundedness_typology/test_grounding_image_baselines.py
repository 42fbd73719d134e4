"""Image baselines (true / mismatched / blank image through the same captioner): known answers
on a small hand-made word table."""

import numpy as np
import pandas as pd
import pytest

from tokenbook.grounded.tiny import blank_image
from tokenbook.groundedness_typology.experiments import IMAGE_CONDITIONS, image_baselines


def table():
    # two languages, captions c1..c4; NOUN: G_true 2, G_mism -1, G_blank 0.5 in every word;
    # DET: G_true varies by caption (1 and 3 → mean 2 in lang a), blank 0, mismatched 0
    rows = []
    for lang in ("a", "b"):
        for k, unit in enumerate(("c1", "c2")):
            uid = f"{lang}-{unit}"
            rows.append(dict(lang=lang, unit_id=uid, upos="NOUN", s_U=5.0, s_P=3.0,
                             s_P_mismatched=6.0, s_P_blank=4.5))
            g_det = 1.0 if k == 0 else 3.0
            rows.append(dict(lang=lang, unit_id=uid, upos="DET", s_U=4.0, s_P=4.0 - g_det,
                             s_P_mismatched=4.0, s_P_blank=4.0))
            rows.append(dict(lang=lang, unit_id=uid, upos="PUNCT", s_U=1.0, s_P=0.0,
                             s_P_mismatched=0.0, s_P_blank=0.0))
    return pd.DataFrame(rows)


def test_known_means_per_class():
    t = image_baselines(table(), n_boot=200, seed=0).set_index("upos")
    assert set(t.index) == {"NOUN", "DET"}  # PUNCT is not an analysed class
    assert t.loc["NOUN", "n"] == 4 and t.loc["DET", "n"] == 4
    assert t.loc["NOUN", ["G_true", "G_mismatched", "G_blank", "true_minus_blank"]].tolist() \
        == pytest.approx([2.0, -1.0, 0.5, 1.5])
    assert t.loc["DET", ["G_true", "G_mismatched", "G_blank", "true_minus_blank"]].tolist() \
        == pytest.approx([2.0, 0.0, 0.0, 2.0])
    assert t.loc["NOUN", "class_kind"] == "lexical" and t.loc["DET", "class_kind"] == "functional"
    # constant within NOUN: every resample gives the mean, so the CI collapses onto it
    assert t.loc["NOUN", ["G_true_ci_low", "G_true_ci_high"]].tolist() == pytest.approx([2, 2])
    assert t.loc["NOUN", ["G_blank_ci_low", "G_blank_ci_high"]].tolist() == pytest.approx(
        [0.5, 0.5])
    # DET varies by caption: CI inside [1, 3] and around 2
    lo, hi = t.loc["DET", ["G_true_ci_low", "G_true_ci_high"]]
    assert 1.0 <= lo < 2.0 < hi <= 3.0


def test_sign_conventions():
    # blank makes a word *less* predictable than the true image → G_true > G_blank
    w = table()
    t = image_baselines(w, n_boot=50).set_index("upos")
    assert t.loc["NOUN", "G_true"] > t.loc["NOUN", "G_blank"] > t.loc["NOUN", "G_mismatched"]
    assert t.loc["NOUN", "true_minus_blank"] == pytest.approx(
        (w.s_P_blank - w.s_P)[w.upos == "NOUN"].mean())
    assert IMAGE_CONDITIONS == {"true": "s_P", "mismatched": "s_P_mismatched",
                                "blank": "s_P_blank"}


def test_grouping_by_language_and_seeding():
    w = table()
    t = image_baselines(w, by=("lang", "upos"), n_boot=100, seed=3)
    assert len(t) == 4 and set(t["lang"]) == {"a", "b"}
    assert t[t.upos == "DET"]["G_true"].tolist() == pytest.approx([2.0, 2.0])
    again = image_baselines(w, by=("lang", "upos"), n_boot=100, seed=3)
    pd.testing.assert_frame_equal(t, again)
    big = pd.concat([w.assign(unit_id=w.unit_id + f"-{r}",
                              s_P=w.s_P + np.tile([0.0, 0.5, 0.0], len(w) // 3) * r)
                     for r in range(6)], ignore_index=True)
    a = image_baselines(big, n_boot=100, seed=1).set_index("upos")
    b = image_baselines(big, n_boot=100, seed=2).set_index("upos")
    ci = ["G_true_ci_low", "G_true_ci_high"]
    assert a.loc["DET", ci].tolist() != b.loc["DET", ci].tolist()   # the seed matters


def test_non_finite_words_dropped_and_validation():
    w = table()
    w.loc[0, "s_P_blank"] = np.nan  # one NOUN word unscorable under the blank image
    t = image_baselines(w, n_boot=20).set_index("upos")
    assert t.loc["NOUN", "n"] == 3
    with pytest.raises(ValueError, match="s_P_blank"):
        image_baselines(table().drop(columns="s_P_blank"))
    with pytest.raises(ValueError, match="by"):
        image_baselines(table(), by=("word",))
    with pytest.raises(ValueError, match="n_boot"):
        image_baselines(table(), n_boot=0)


def test_blank_image():
    img = blank_image(8, 128)
    assert img.size == (8, 8) and img.mode == "RGB"
    assert (np.asarray(img) == 128).all()
    for bad in (-1, 256, 1.5, True):
        with pytest.raises(ValueError, match="fill"):
            blank_image(8, bad)
    with pytest.raises(ValueError):
        blank_image(0)
