"""The arithmetic world's template variants: equivalent formats (same reward, same token
classes) drawn per step from the seed, so the template stays uncertain after SFT."""

import pytest

from tokenbook.worlds.arithmetic import (label_chars, make_problems, verify, worked_solution)


def test_variants_verify_label_and_vary_per_step():
    problems = make_problems(200, seed=0, n_terms=(3, 3), digits=(1, 2))
    texts = [worked_solution(p, formats="variants", seed=7) for p in problems]
    assert all(verify(t, p.answer) == 1.0 for t, p in zip(texts, problems))
    # each choice is taken both ways, independently per step, over the problems
    assert any(" = " in t and t.count(" = ") == 1 for t in texts)
    assert any("; " in t for t in texts) and any(";" in t and "; " not in t for t in texts)
    assert any(t.endswith(f"Answer:{p.answer}") for t, p in zip(texts, problems))
    assert any(t.endswith(f"Answer: {p.answer}") for t, p in zip(texts, problems))
    # the variant characters are template tokens; digits and operators stay reasoning/answer
    for t in texts[:20]:
        fixed_reasoning = [c for c, lab in zip(t, label_chars(t)) if lab == "reasoning"]
        assert all(c.isdigit() or c in "+-" for c in fixed_reasoning)
        assert all(lab == "template" for c, lab in zip(t, label_chars(t)) if c in " ;=")


def test_variants_are_seeded_and_fixed_is_unchanged():
    p = make_problems(50, seed=1, n_terms=(3, 3))
    a = [worked_solution(x, formats="variants", seed=3) for x in p]
    assert a == [worked_solution(x, formats="variants", seed=3) for x in p]
    assert a != [worked_solution(x, formats="variants", seed=4) for x in p]
    x = p[0]
    steps = [f"{x.operands[0]}{x.ops[0]}{x.operands[1]}="]
    assert worked_solution(x).startswith("<think>" + steps[0])
    assert worked_solution(x) == worked_solution(x, formats="fixed", seed=99)
    assert ";" in worked_solution(x) and " " not in worked_solution(x).split("</think>")[0]
    with pytest.raises(ValueError, match="formats"):
        worked_solution(x, formats="random")
