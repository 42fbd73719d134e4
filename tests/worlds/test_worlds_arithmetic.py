"""The arithmetic world: problems, worked solutions, the verifier and token labels."""

import pytest

from tokenbook.worlds.arithmetic import (extract_answer, label_chars, label_tokens, make_problems,
                                         verify, worked_solution)


def test_problems_are_seeded_and_correct():
    a = make_problems(50, seed=3, n_terms=(2, 4), digits=(1, 3))
    b = make_problems(50, seed=3, n_terms=(2, 4), digits=(1, 3))
    assert a == b
    assert a != make_problems(50, seed=4, n_terms=(2, 4), digits=(1, 3))
    for p in a:
        assert p.prompt.endswith("=")
        assert eval(p.prompt[:-1]) == p.answer  # the prompt is a valid Python expression
        assert 2 <= len(p.operands) <= 4


def test_worked_solution_verifies_and_has_running_totals():
    for p in make_problems(30, seed=1):
        sol = worked_solution(p)
        assert sol.startswith("<think>") and "</think>Answer: " in sol
        assert verify(sol, p.answer) == 1.0
        assert verify(sol, p.answer + 1) == 0.0
        steps = sol[len("<think>"):sol.index("</think>")].split(";")
        assert len(steps) == len(p.operands) - 1
        for s in steps:
            lhs, rhs = s.rsplit("=", 1)
            assert eval(lhs) == int(rhs)


@pytest.mark.parametrize("response", [
    "", "<think>1+2=3</think>", "<think>1+2=3</think>Answer: ", "1+2=3 Answer: 3",
    "<think>1+2=3</think>Answer: 3 Answer: 3", "<think>1+2=3</think>Answer: 3</think>Answer: 4",
    "<think>1+2=3</think>Answer: three", "<think>1+2=3</think>Answer: 3.0",
    "<think>1+2=3</think>Answer: 3x", "<think></think>Answer: --3", None, 12,
])
def test_verifier_malformed_answers_get_zero(response):
    assert verify(response, 3) == 0.0


def test_verifier_accepts_negative_and_surrounding_whitespace():
    assert verify("<think>1-4=-3</think>Answer: -3", -3) == 1.0
    assert verify("<think>1-4=-3</think>Answer: -3  ", -3) == 1.0
    assert extract_answer("<think>x</think>Answer: 17") == 17


def test_labels_cover_every_character_and_token():
    sol = "<think>12+5=17;17-3=14</think>Answer: 14"
    chars = label_chars(sol)
    assert len(chars) == len(sol)
    assert set(chars[:7]) == {"template"}                        # <think>
    assert chars[sol.index("=")] == "template"
    assert chars[sol.index(";")] == "template"
    assert chars[7] == chars[8] == chars[9] == "reasoning"      # 1 2 +
    assert chars[-2:] == ["answer", "answer"]
    assert set(chars[sol.index("Answer"):sol.index("Answer") + 8]) == {"template"}
    tokens = ["<think>", "1", "2", "+", "5", "=", "1", "7", "</think>", "A", "n", "s", "w", "e",
              "r", ":", " ", "1", "7", ""]
    labels = label_tokens(tokens)
    assert len(labels) == len(tokens)
    assert labels[0] == labels[5] == labels[8] == labels[-1] == "template"
    assert labels[1:5] == ["reasoning"] * 4
    assert labels[-3:-1] == ["answer", "answer"]


def test_bad_arguments_raise_clear_errors():
    with pytest.raises(ValueError, match="n_terms"):
        make_problems(3, n_terms=(1, 2))
    with pytest.raises(ValueError, match="digits"):
        make_problems(3, digits=(0, 2))
