"""The arithmetic world: problems, worked solutions, the verifier and token labels."""

import pytest

from tokenbook.worlds.arithmetic import (all_solutions, extract_answer, label_chars, label_tokens,
                                         make_problems, on_solution_path, verify,
                                         worked_solution)


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


def test_all_solutions_hold_every_drawn_variant_and_verify():
    problems = make_problems(30, seed=5, n_terms=(2, 3))
    for p in problems:
        fixed = all_solutions(p, formats="fixed")
        assert fixed == [worked_solution(p)]
        variants = all_solutions(p, formats="variants")
        steps = len(p.ops)
        assert len(set(variants)) == 2 ** steps * 2 ** (steps - 1) * 2   # eq, sep, answer
        drawn = {worked_solution(p, formats="variants", seed=s) for s in range(40)}
        assert drawn <= set(variants)
        assert all(verify(v, p.answer) == 1.0 for v in variants)
    with pytest.raises(ValueError, match="formats"):
        all_solutions(problems[0], formats="free")


def test_on_solution_path_is_the_prefix_of_a_solution():
    p = make_problems(1, seed=2, n_terms=(3, 3))[0]
    sol = worked_solution(p)
    assert all(on_solution_path(p, sol[:i]) for i in range(len(sol) + 1))
    wrong_digit = sol[:8] + ("0" if sol[8] != "0" else "1")
    assert not on_solution_path(p, wrong_digit)
    assert not on_solution_path(p, sol + "1")                 # past the end
    spaced = sol.replace("=", " = ", 1)
    assert not on_solution_path(p, spaced, formats="fixed")
    assert on_solution_path(p, spaced, formats="variants")
