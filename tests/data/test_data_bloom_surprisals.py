"""The authors' released Bloom-VIST word surprisals (OSF rh3dn, ``BLOOM_word_surprisal/
<name>_<lang>.csv``, in bits) read into the book's story word table in nats, on fixtures written
in that exact format (the columns the authors' ``analysis/BLOOM_*.py`` scripts read)."""

import math

import numpy as np
import pandas as pd
import pytest

from tokenbook.data.bloom_vist import BloomVistError, load_bloom_surprisals

COLUMNS = ["story_id", "paragraph", "sentence_idx", "word", "surprisal_ablation_txt",
           "surprisal_ablation_mm", "surprisal_total_txt", "surprisal_total_mm"]


def write_file(path, stories=("101", "102"), n_paras=3, n_sents=2, n_words=4):
    rows = []
    for story in stories:
        for para in range(n_paras):
            for sent in range(n_sents):
                for w in range(n_words):
                    first = para == 0  # the authors' files: no discourse for the first paragraph
                    rows.append([story, para, sent, f"w{w}", 4.0, 3.0,
                                 np.nan if first else 2.0, np.nan if first else 1.0])
    pd.DataFrame(rows, columns=COLUMNS).to_csv(path, index=False)


def test_bits_become_nats_and_conditions_map_to_u_p_d_pd(tmp_path):
    folder = tmp_path / "BLOOM_word_surprisal"
    folder.mkdir()
    write_file(folder / "word_surprisal_eng.csv")
    write_file(folder / "word_surprisal_ind.csv", stories=("7",))
    t = load_bloom_surprisals(folder)
    assert t.attrs["unit"] == "nats"
    assert sorted(t["lang"].unique()) == ["eng", "ind"]
    # 4 bits (text only) = 4 ln 2 nats; image 3 bits; discourse 2; image + discourse 1
    row = t[(t.lang == "eng") & (t.para_idx == 1)].iloc[0]
    assert row.s_U == pytest.approx(4 * math.log(2))
    assert row.s_P == pytest.approx(3 * math.log(2))
    assert row.s_D == pytest.approx(2 * math.log(2))
    assert row.s_PD == pytest.approx(1 * math.log(2))
    first = t[t.para_idx == 0]
    assert first.s_D.isna().all() and first.s_PD.isna().all() and first.s_U.notna().all()


def test_sentence_and_word_indices(tmp_path):
    path = tmp_path / "x_eng.csv"
    write_file(path, stories=("101",), n_paras=3, n_sents=2, n_words=4)
    t = load_bloom_surprisals(path)
    # sentences are numbered through the story: paragraph 1, sentence 0 is the story's third
    assert t.groupby("para_idx").sent_idx.agg(["min", "max"]).to_numpy().tolist() == \
        [[0, 1], [2, 3], [4, 5]]
    assert (t.n_sents == 6).all()
    assert t.groupby("sent_idx").word_idx.apply(list).iloc[0] == [0, 1, 2, 3]
    assert t.word.iloc[:2].tolist() == ["w0", "w1"]
    assert {"lang", "story_id", "para_idx", "sent_idx", "word_idx", "n_sents", "s_U", "s_P",
            "s_D", "s_PD"} <= set(t.columns)


def test_story_measures_run_on_the_loaded_table(tmp_path):
    from tokenbook.uid_grounding import measures as uid

    path = tmp_path / "x_eng.csv"
    write_file(path)
    t = load_bloom_surprisals(path)
    m = uid.story_unit_measures(t, min_words=3).table
    assert set(m.condition) == {"U", "P", "D", "PD"}
    # every word of a sentence has the same surprisal: no variance
    assert np.allclose(m.uid_v, 0.0)


def test_format_errors_name_the_file_and_what_is_expected(tmp_path):
    bad = tmp_path / "x_eng.csv"
    pd.DataFrame({"story_id": [1], "paragraph": [0], "sentence_idx": [0],
                  "surprisal_txt": [1.0]}).to_csv(bad, index=False)
    with pytest.raises(BloomVistError, match=r"x_eng.csv.*missing column.*surprisal_ablation_txt"):
        load_bloom_surprisals(bad)
    nolang = tmp_path / "words.csv"
    write_file(nolang)
    with pytest.raises(BloomVistError, match="<name>_<lang>.csv"):
        load_bloom_surprisals(nolang)
    with pytest.raises(FileNotFoundError, match="osf.io/rh3dn"):
        load_bloom_surprisals(tmp_path / "absent")
    gap = tmp_path / "y_eng.csv"
    write_file(gap)
    frame = pd.read_csv(gap)
    frame.loc[3, "surprisal_ablation_mm"] = np.nan
    frame.to_csv(gap, index=False)
    with pytest.raises(BloomVistError, match=r"row 5: surprisal_ablation_mm \(condition P\)"):
        load_bloom_surprisals(gap)
    neg = tmp_path / "z_eng.csv"
    write_file(neg)
    frame = pd.read_csv(neg)
    frame[["surprisal_ablation_txt", "surprisal_ablation_mm"]] *= -1
    frame[["surprisal_total_txt", "surprisal_total_mm"]] *= -1
    frame.to_csv(neg, index=False)
    with pytest.raises(BloomVistError, match="log-probabilities"):
        load_bloom_surprisals(neg)
