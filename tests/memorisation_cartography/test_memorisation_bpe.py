"""The BPE tokenizer is deterministic: the same texts give the same files in every process."""

import subprocess
import sys

import pytest

from tokenbook.models.marian import learn_bpe, train_bpe_tokenizer

SCRIPT = """
import sys
from tokenbook.worlds.translation import make_translation_world
from tokenbook.models.marian import train_bpe_tokenizer
w = make_translation_world(150, n_test=5, seed=1)
train_bpe_tokenizer(w.pairs.source.tolist() + w.pairs.target.tolist(), 200, save_dir=sys.argv[1])
"""


@pytest.mark.slow
def test_two_processes_write_identical_tokenizer_files(tmp_path):
    dirs = []
    for k, hashseed in enumerate(["1", "2"]):   # different hash salts, as two cold runs have
        out = tmp_path / f"tok{k}"
        subprocess.run([sys.executable, "-c", SCRIPT, str(out)], check=True,
                       env={"PYTHONHASHSEED": hashseed, "HF_HUB_OFFLINE": "1",
                            "PATH": "/usr/bin:/bin"}, timeout=120)
        dirs.append(out)
    names = sorted(p.name for p in dirs[0].iterdir())
    assert "tokenizer.json" in names
    assert names == sorted(p.name for p in dirs[1].iterdir())
    for name in names:
        assert (dirs[0] / name).read_bytes() == (dirs[1] / name).read_bytes(), name


def test_learn_bpe_known_answer():
    # "ab" occurs 5 times, "bc" 3 times: the first merge is (a, ##b) -> "ab"
    vocab, merges = learn_bpe({"ab": 5, "abc": 3, "c": 1}, vocab_size=10, specials=["<pad>"])
    assert merges[0] == ("a", "##b")
    assert list(vocab)[:5] == ["<pad>", "##b", "##c", "a", "c"]  # specials, sorted alphabet
    assert vocab["ab"] == 5 and merges[1] == ("ab", "##c") and vocab["abc"] == 6
    # ties are broken by the pair's strings, not by insertion order
    v1, m1 = learn_bpe({"xy": 2, "ab": 2}, vocab_size=6)
    v2, m2 = learn_bpe({"ab": 2, "xy": 2}, vocab_size=6)
    assert m1 == m2 == [("a", "##b"), ("x", "##y")] and v1 == v2


def test_tokenizer_round_trips_and_uses_the_merges():
    texts = ["ka mu lasa", "il un rofa", "ka lasa lasa"]
    tok = train_bpe_tokenizer(texts, vocab_size=60)
    assert tok.pad_token_id == 0 and tok.eos_token_id == 1
    ids = tok("ka lasa")["input_ids"]
    assert tok.convert_ids_to_tokens(ids) == ["ka", "lasa", "</s>"]
    assert tok.decode(ids, skip_special_tokens=True) == "ka lasa"


def test_bad_input():
    with pytest.raises(ValueError, match="at least one text"):
        train_bpe_tokenizer([], vocab_size=10)
    with pytest.raises(ValueError, match="vocab_size"):
        learn_bpe({"a": 1}, vocab_size=0)
