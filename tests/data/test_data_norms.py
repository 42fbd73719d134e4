"""Glasgow Norms loader (both file layouts, schema errors) and Zipf frequencies."""

import math

import pytest

from tokenbook.data import norms as nm

TWO_ROW = """Words,Length,AROU,,,VAL,,,CNC,,,IMAG,,
,,M,SD,N,M,SD,N,M,SD,N,M,SD,N
dog,3,5.2,1.1,30,6.4,1.0,30,6.9,0.3,30,6.8,0.4,30
idea,4,4.1,1.3,31,5.9,1.2,31,1.9,1.0,31,2.6,1.4,31
Bank (river),4,3.2,1.3,31,5.2,1.2,31,6.1,1.0,31,6.0,1.4,31
bank,4,3.2,1.3,31,5.2,1.2,31,5.5,1.0,31,5.2,1.4,31
"""


def test_distributed_two_row_header(tmp_path):
    p = tmp_path / "glasgow.csv"
    p.write_text(TWO_ROW)
    n = nm.load_glasgow_norms(p)
    assert list(n.columns) == ["word", "concreteness", "imageability"]
    assert list(n["word"]) == ["bank", "dog", "idea"]  # sense row dropped, lower-cased
    assert n.set_index("word").loc["dog", "concreteness"] == 6.9
    assert n.set_index("word").loc["idea", "imageability"] == 2.6  # the mean, not the SD


def test_flat_header_with_authors_names(tmp_path):
    p = tmp_path / "flat.csv"
    p.write_text("Words,CNC.M,IMAG.M\nDog,6.9,6.8\nidea,1.9,2.6\n")
    n = nm.load_glasgow_norms(p)
    assert list(n["word"]) == ["dog", "idea"] and list(n["concreteness"]) == [6.9, 1.9]


def test_wrong_columns_name_the_problem(tmp_path):
    p = tmp_path / "brysbaert.csv"
    p.write_text("Word,Conc.M,Conc.SD\ndog,4.85,0.4\n")
    with pytest.raises(nm.NormsSchemaError, match=r"concreteness column.*found columns"):
        nm.load_glasgow_norms(p)
    p2 = tmp_path / "nowords.csv"
    p2.write_text("token,CNC\ndog,6.9\n")
    with pytest.raises(nm.NormsSchemaError, match="word column"):
        nm.load_glasgow_norms(p2)


def test_bad_values_are_errors(tmp_path):
    p = tmp_path / "bad.csv"
    p.write_text("word,concreteness\ndog,high\n")
    with pytest.raises(nm.NormsSchemaError, match="non-numeric"):
        nm.load_glasgow_norms(p)
    p.write_text("word,concreteness\ndog,69\n")  # percent scale, not Glasgow's 1-7
    with pytest.raises(nm.NormsSchemaError, match="outside the Glasgow scale"):
        nm.load_glasgow_norms(p)
    with pytest.raises(FileNotFoundError, match="norms_path"):
        nm.load_glasgow_norms(tmp_path / "absent.csv")


def test_corpus_zipf_and_wordfreq():
    z = nm.corpus_zipf(["a", "a", "a", "dog"])
    assert z["a"] == pytest.approx(math.log10(0.75e9)) and z["a"] > z["dog"]
    wf = nm.zipf_frequency(["the", "dog", "qzxqzxq"], "en")
    assert wf[0] > wf[1] > 0 and wf[2] == 0
    with pytest.raises(ValueError, match="empty"):
        nm.corpus_zipf([])
