"""LUFFY / verl evaluation-suite loader and per-benchmark avg@k table, on tiny fixtures written in
the real verl parquet layout (nested ``prompt`` list and ``reward_model`` struct)."""

import json
import math

import pandas as pd
import pytest

from tokenbook.data.math import (SYSTEM_PROMPT, MathDataError, MathProblem, eval_suite_accuracy,
                                 load_math_eval)

LUFFY_SYSTEM = ("Your task is to follow a systematic, thorough reasoning process before "
                "providing the final solution.")
AIME = [("Find the remainder when $2^{10}$ is divided by $1000$.", "24"),
        ("How many positive divisors does $36$ have?", "9")]
MATH500 = [("What is $3+4$?", "7"), ("Simplify $\\frac{6}{8}$.", "\\frac{3}{4}"),
           ("Compute $12 \\times 12$.", "144")]


def _row(source, question, gold, index, *, system=True):
    prompt = ([{"content": LUFFY_SYSTEM, "role": "system"}] if system else []) + \
        [{"content": question, "role": "user"}]
    return {"data_source": source, "prompt": prompt, "ability": "math",
            "reward_model": {"ground_truth": gold, "style": "rule"},
            "extra_info": {"index": index, "split": "test"}}


def _suite_rows():
    rows = []
    for j, (q, a) in enumerate(AIME):          # AIME24-style: each problem repeated k = 4 times
        rows += [_row("aime", q, a, j) for _ in range(4)]
    rows += [_row("math", q, a, 10 + j) for j, (q, a) in enumerate(MATH500)]
    return rows


def _write(tmp_path, rows, name="valid.all.parquet"):
    path = tmp_path / name
    pd.DataFrame(rows).to_parquet(path)
    return path


@pytest.fixture()
def suite(tmp_path):
    return _write(tmp_path, _suite_rows())


def test_fixture_has_the_real_nested_layout(suite):
    import pyarrow.parquet as pq

    schema = pq.read_schema(suite)
    assert str(schema.field("prompt").type) == \
        "list<element: struct<content: string, role: string>>"
    assert str(schema.field("reward_model").type) == "struct<ground_truth: string, style: string>"


def test_loader_keeps_repeats_and_reads_benchmark_question_gold(suite):
    probs = load_math_eval(suite)
    assert len(probs) == 11 and all(isinstance(p, MathProblem) for p in probs)
    assert [p.source for p in probs] == ["aime"] * 8 + ["math"] * 3
    assert [p.question for p in probs[:8]] == [AIME[0][0]] * 4 + [AIME[1][0]] * 4
    assert [p.answer for p in probs] == ["24"] * 4 + ["9"] * 4 + ["7", "\\frac{3}{4}", "144"]
    assert [p.question for p in probs[8:]] == [q for q, _ in MATH500]
    assert [p.id for p in probs] == list(range(11))
    # our system prompt replaces the file's, as LUFFY's --remove_system does
    assert probs[0].prompt.startswith(SYSTEM_PROMPT) and LUFFY_SYSTEM not in probs[0].prompt
    assert AIME[0][0] in probs[0].prompt


def test_loader_reads_json_lines_and_several_files(tmp_path, suite):
    path = tmp_path / "suite.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in _suite_rows()))
    probs = load_math_eval(path)
    assert [(p.source, p.question, p.answer) for p in probs] == \
        [(p.source, p.question, p.answer) for p in load_math_eval(suite)]
    assert len(load_math_eval([suite, path])) == 22


def test_benchmark_filter(suite):
    aime = load_math_eval(suite, benchmarks=["aime"])
    assert len(aime) == 8 and {p.source for p in aime} == {"aime"}
    assert len(load_math_eval(suite, benchmarks="math")) == 3
    with pytest.raises(MathDataError, match=r"\['aime24'\].*\['aime', 'math'\]"):
        load_math_eval(suite, benchmarks=["aime24", "math"])


def test_accuracy_table_is_avg_at_k(suite):
    probs = load_math_eval(suite)
    responses = (["so \\boxed{24}", "\\boxed{24}", "\\boxed{25}", "no answer"]     # 2/4
                 + ["\\boxed{9}", "\\boxed{9}", "\\boxed{9}", "\\boxed{8}"]       # 3/4
                 + ["\\boxed{7}", "\\boxed{0.75}", "\\boxed{143}"])               # 2/3
    table = eval_suite_accuracy(probs, responses).set_index("benchmark")
    assert list(table.index) == ["aime", "math", "all", "macro"]
    assert table.loc["aime", "n_rows"] == 8 and table.loc["aime", "n_problems"] == 2
    assert table.loc["aime", "k"] == 4
    # avg@4 = mean over problems of (correct samples / 4) = (2/4 + 3/4) / 2
    assert table.loc["aime", "accuracy"] == pytest.approx((2 / 4 + 3 / 4) / 2)
    assert table.loc["aime", "n_correct"] == 5
    assert table.loc["math", ["n_rows", "n_problems", "k"]].tolist() == [3, 3, 1]
    assert table.loc["math", "accuracy"] == pytest.approx(2 / 3)
    assert table.loc["all", "n_rows"] == 11 and table.loc["all", "n_problems"] == 5
    assert table.loc["all", "accuracy"] == pytest.approx(7 / 11)
    assert table.loc["macro", "accuracy"] == pytest.approx((5 / 8 + 2 / 3) / 2)
    assert math.isnan(table.loc["macro", "k"])


def test_accuracy_table_validates_lengths(suite):
    probs = load_math_eval(suite)
    with pytest.raises(ValueError, match="11 problems but 10 responses"):
        eval_suite_accuracy(probs, ["\\boxed{1}"] * 10)
    with pytest.raises(ValueError, match="no problems"):
        eval_suite_accuracy([], [])


def test_missing_column_names_the_file(tmp_path):
    rows = [{k: v for k, v in r.items() if k != "reward_model"} for r in _suite_rows()]
    path = _write(tmp_path, rows, "no_reward.parquet")
    with pytest.raises(MathDataError, match=r"no_reward\.parquet.*\['reward_model'\]"):
        load_math_eval(path)


def test_empty_file(tmp_path):
    empty = tmp_path / "empty.parquet"
    empty.write_bytes(b"")
    with pytest.raises(MathDataError, match=r"empty\.parquet is empty"):
        load_math_eval(empty)
    with pytest.raises(FileNotFoundError):
        load_math_eval(tmp_path / "missing.parquet")
    with pytest.raises(MathDataError, match="data_files is empty"):
        load_math_eval([])
    no_rows = _write(tmp_path, [], "no_rows.parquet")
    with pytest.raises(MathDataError, match=r"no_rows\.parquet holds no rows"):
        load_math_eval(no_rows)


def test_row_without_user_message(tmp_path):
    rows = _suite_rows()
    rows[9]["prompt"] = [{"content": LUFFY_SYSTEM, "role": "system"},
                         {"content": "an earlier answer", "role": "assistant"}]
    path = _write(tmp_path, rows, "no_user.parquet")
    with pytest.raises(MathDataError, match=r"no_user\.parquet row 9 \(math\).*no user message"):
        load_math_eval(path)
    # the bad row is a MATH-500 row: filtering it out leaves a loadable AIME suite
    assert len(load_math_eval(path, benchmarks="aime")) == 8


def test_row_without_ground_truth(tmp_path):
    rows = _suite_rows()
    rows[3]["reward_model"] = {"ground_truth": None, "style": "rule"}
    path = _write(tmp_path, rows, "no_gold.parquet")
    with pytest.raises(MathDataError, match=r"no_gold\.parquet row 3 \(aime\).*ground_truth"):
        load_math_eval(path)
    rows[3]["reward_model"] = {"ground_truth": "  ", "style": "rule"}
    with pytest.raises(MathDataError, match="row 3"):
        load_math_eval(_write(tmp_path, rows, "blank_gold.parquet"))
