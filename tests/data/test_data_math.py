"""GSM8K / DAPO-Math loaders on tiny local fixtures in the real schemas; math-verify rewards."""

import pandas as pd
import pytest

from tokenbook.data.math import (SYSTEM_PROMPT, dapo_question, gsm8k_final_answer,
                                 label_math_tokens, load_dapo_math, load_gsm8k, math_reward,
                                 problem_reward)


@pytest.fixture()
def gsm8k_parquet(tmp_path):
    # the schema of openai/gsm8k main/train-00000-of-00001.parquet
    frame = pd.DataFrame({
        "question": ["Natalia sold clips to 48 friends in April, and half as many in May. "
                     "How many clips did she sell altogether?",
                     "Weng earns $12 an hour. How much did she earn for 50 minutes?",
                     "A shop sells 1,200 pens. How many are left after 200 are sold?"],
        "answer": ["In May she sold 48/2 = <<48/2=24>>24.\n48+24 = <<48+24=72>>72\n#### 72",
                   "12/60 = $<<12/60=0.2>>0.2 per minute.\n0.2*50 = <<0.2*50=10>>10\n#### 10",
                   "1,200 - 200 = 1,000\n#### 1,000"]})
    path = tmp_path / "train-00000-of-00001.parquet"
    frame.to_parquet(path)
    return path


@pytest.fixture()
def dapo_parquet(tmp_path):
    pre = ("Solve the following math problem step by step. The last line of your response "
           "should be of the form Answer: $Answer (without quotes) where $Answer is the answer "
           "to the problem.\n\n")
    suf = "\n\nRemember to put your answer on its own line after \"Answer:\"."
    rows = []
    for idx, (q, a) in enumerate([("What is $3+4$?", "7"), ("Compute $2^{10}$.", "1024")]):
        for _ in range(3):   # the hub file repeats each prompt many times
            rows.append({"data_source": "math_dapo",
                         "prompt": [{"content": pre + q + suf, "role": "user"}],
                         "ability": "MATH",
                         "reward_model": {"ground_truth": a, "style": "rule-lighteval/MATH_v2"},
                         "extra_info": {"index": f"id-{idx}"}})
    path = tmp_path / "dapo-math-17k.parquet"
    pd.DataFrame(rows).to_parquet(path)
    return path


def test_gsm8k_loader_reads_the_real_schema(gsm8k_parquet):
    probs = load_gsm8k(data_files=gsm8k_parquet)
    assert [p.answer for p in probs] == ["72", "10", "1000"]
    assert probs[0].prompt.startswith(SYSTEM_PROMPT) and "Natalia" in probs[0].prompt
    assert len(load_gsm8k(data_files=gsm8k_parquet, n=2, seed=0)) == 2
    with pytest.raises(ValueError, match="####"):
        gsm8k_final_answer("no final line")
    with pytest.raises(FileNotFoundError):
        load_gsm8k(data_files=gsm8k_parquet.parent / "missing.parquet")


def test_dapo_loader_dedups_and_strips_instructions(dapo_parquet):
    probs = load_dapo_math(data_files=dapo_parquet)
    assert len(probs) == 2
    assert probs[0].question == "What is $3+4$?" and probs[1].answer == "1024"
    assert "Remember" not in probs[0].prompt and "Solve the following" not in probs[0].prompt
    assert dapo_question("plain question") == "plain question"


@pytest.mark.parametrize("response,gold,expected", [
    ("48 + 24 = 72, so the answer is \\boxed{72}.", "72", 1.0),
    ("\\boxed{\\frac{144}{2}}", "72", 1.0),
    ("The total is \\boxed{71}.", "72", 0.0),
    ("", "72", 0.0), ("banana", "72", 0.0), (None, "72", 0.0),
    ("\\boxed{1024}", "1024", 1.0),
])
def test_math_reward(response, gold, expected):
    assert math_reward(response, gold) == expected


def test_problem_reward_uses_the_gold_answer(gsm8k_parquet):
    p = load_gsm8k(data_files=gsm8k_parquet)[0]
    assert problem_reward("so \\boxed{72}", p) == 1.0
    assert problem_reward("so \\boxed{24}", p) == 0.0


def test_label_math_tokens():
    toks = ["<think>", "We", " add", " 48", " +", " 24", ".", "</think>", " The", " answer",
            " is", " \\boxed", "{", "72", "}", "."]
    lab = label_math_tokens(toks)
    assert len(lab) == len(toks)
    assert lab[0] == lab[6] == lab[7] == lab[11] == lab[12] == lab[14] == "template"
    assert lab[13] == "answer"
    assert lab[1] == lab[3] == lab[4] == "reasoning"
