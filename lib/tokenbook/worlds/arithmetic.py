"""A verifiable arithmetic world for critic-free RL (the cancellation chapter).

Prompts are chains of multi-digit additions and subtractions, e.g. ``"47+85-19="``. A worked
solution follows a fixed scratchpad template::

    <think>47+85=132;132-19=113</think>Answer: 113

:func:`verify` is an exact-match verifier (reward 1.0 or 0.0; malformed responses get 0.0 and
never raise). :func:`label_chars` labels every character of a response as ``"template"``
(the scaffold: ``<think>``, ``</think>``, ``=``, ``;``, ``Answer: ``), ``"reasoning"`` (digits
and operators written inside the scratchpad) or ``"answer"`` (the digits after ``Answer:``);
:func:`label_tokens` maps those labels onto a sequence of token strings. The world knows no
model: tokens are plain strings here.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from itertools import product

import numpy as np

from tokenbook.seeds import derive_seed

THINK_OPEN = "<think>"
THINK_CLOSE = "</think>"
ANSWER_PREFIX = "Answer: "
TOKEN_CLASSES = ("template", "reasoning", "answer")
#: solution formats: ``"fixed"`` (one template) or ``"variants"`` (equivalent template choices
#: drawn per step, so the template stays uncertain after SFT; same verifier and labels)
FORMATS = ("fixed", "variants")
#: the ``"variants"`` choices: the equals sign of each step, the separator between steps and the
#: answer prefix (each drawn uniformly, independently)
EQUALS_VARIANTS = ("=", " = ")
SEPARATOR_VARIANTS = (";", "; ")
ANSWER_VARIANTS = ("Answer: ", "Answer:")

_ANSWER_RE = re.compile(r"Answer:\s*(\S+)")
_INT_RE = re.compile(r"^-?\d+$")


@dataclass(frozen=True)
class Problem:
    """One arithmetic problem: ``prompt`` (e.g. ``"47+85-19="``), its integer ``answer``,
    the operand list and the operator list (``"+"``/``"-"``)."""

    prompt: str
    answer: int
    operands: tuple[int, ...] = field(default=())
    ops: tuple[str, ...] = field(default=())
    id: int = 0


def make_problems(n: int, *, seed: int = 0, n_terms: tuple[int, int] = (2, 3),
                  digits: tuple[int, int] = (1, 2), start_id: int = 0) -> list[Problem]:
    """``n`` random problems with ``n_terms[0]..n_terms[1]`` operands of ``digits[0]..digits[1]``
    digits each, operators ``+``/``-`` drawn uniformly (results may be negative).

    Seeded by ``seed`` (numpy ``default_rng``): the same arguments give the same problems.
    """
    if n < 0:
        raise ValueError(f"n must be ≥ 0, got {n}")
    lo_t, hi_t = n_terms
    lo_d, hi_d = digits
    if not (2 <= lo_t <= hi_t):
        raise ValueError(f"n_terms must satisfy 2 ≤ low ≤ high, got {n_terms}")
    if not (1 <= lo_d <= hi_d <= 9):
        raise ValueError(f"digits must satisfy 1 ≤ low ≤ high ≤ 9, got {digits}")
    rng = np.random.default_rng(seed)
    out = []
    for i in range(n):
        k = int(rng.integers(lo_t, hi_t + 1))
        operands = []
        for _ in range(k):
            d = int(rng.integers(lo_d, hi_d + 1))
            operands.append(int(rng.integers(0 if d == 1 else 10 ** (d - 1), 10 ** d)))
        ops = [("+", "-")[int(rng.integers(0, 2))] for _ in range(k - 1)]
        prompt = str(operands[0]) + "".join(o + str(x) for o, x in zip(ops, operands[1:])) + "="
        out.append(Problem(prompt, _evaluate(operands, ops), tuple(operands), tuple(ops),
                           start_id + i))
    return out


def _evaluate(operands, ops) -> int:
    total = operands[0]
    for o, x in zip(ops, operands[1:]):
        total = total + x if o == "+" else total - x
    return total


def worked_solution(problem: Problem, *, formats: str = "fixed", seed: int = 0) -> str:
    """The scratchpad solution: ``<think>a+b=s1;s1-c=s2</think>Answer: s2``.

    ``formats="variants"``: every step's equals sign (``=`` or `` = ``), every separator
    between steps (``;`` or ``; ``) and the answer prefix (``Answer: `` or ``Answer:``) are
    drawn uniformly and independently, seeded by ``derive_seed(seed, "format", problem.id)``:
    equivalent formats (the same reward from :func:`verify`, the same token classes), so the
    template tokens keep real uncertainty after SFT.
    """
    if formats not in FORMATS:
        raise ValueError(f"formats must be one of {FORMATS}, got {formats!r}")
    rng = (np.random.default_rng(derive_seed(int(seed), "format", int(problem.id)))
           if formats == "variants" else None)

    def pick(options):
        return options[0] if rng is None else options[int(rng.integers(len(options)))]

    steps = len(problem.ops)
    # the draw order of the original template: per step its separator (after the first),
    # then its equals sign; the answer prefix last
    seps, eqs = [], []
    for i in range(steps):
        seps.append(pick(SEPARATOR_VARIANTS) if i else "")
        eqs.append(pick(EQUALS_VARIANTS))
    return _render(problem, eqs, seps, pick(ANSWER_VARIANTS))


def _render(problem: Problem, eqs, seps, answer_prefix: str) -> str:
    """The scratchpad solution of ``problem`` with the given equals sign and separator per
    step and answer prefix."""
    text, total = THINK_OPEN, problem.operands[0]
    for i, (o, x) in enumerate(zip(problem.ops, problem.operands[1:])):
        new = total + x if o == "+" else total - x
        text += f"{seps[i]}{total}{o}{x}{eqs[i]}{new}"
        total = new
    return f"{text}{THINK_CLOSE}{answer_prefix}{total}"


def all_solutions(problem: Problem, *, formats: str = "fixed") -> list[str]:
    """Every worked solution the world can write for ``problem``: the one template
    (``"fixed"``) or every combination of the format variants (``"variants"``: 2 equals signs
    per step, 2 separators between steps, 2 answer prefixes)."""
    if formats not in FORMATS:
        raise ValueError(f"formats must be one of {FORMATS}, got {formats!r}")
    steps = len(problem.ops)
    if formats == "fixed":
        return [_render(problem, [EQUALS_VARIANTS[0]] * steps,
                        [""] + [SEPARATOR_VARIANTS[0]] * (steps - 1), ANSWER_VARIANTS[0])]
    out = []
    for eqs in product(EQUALS_VARIANTS, repeat=steps):
        for seps in product(SEPARATOR_VARIANTS, repeat=max(steps - 1, 0)):
            for ans in ANSWER_VARIANTS:
                out.append(_render(problem, eqs, ("",) + seps, ans))
    return out


def on_solution_path(problem: Problem, text: str, *, formats: str = "fixed") -> bool:
    """Whether ``text`` (a response so far) is the start of one of the world's worked
    solutions of ``problem`` (:func:`all_solutions`): the generator's own answer to "can this
    partial solution still be completed correctly along the world's solution?"."""
    return any(s.startswith(text) for s in all_solutions(problem, formats=formats))


def extract_answer(response: str) -> int | None:
    """The integer after the single ``Answer:`` that follows ``</think>``; ``None`` if the
    response has no ``</think>``, no answer, several answers, or a non-integer answer."""
    if not isinstance(response, str):
        return None
    _, sep, tail = response.rpartition(THINK_CLOSE)
    if not sep:
        return None
    found = _ANSWER_RE.findall(tail)
    if len(found) != 1:
        return None
    token = found[0]
    if not _INT_RE.match(token):
        return None
    # nothing but whitespace may follow the answer
    if tail.strip() != f"Answer: {token}" and tail.strip() != f"Answer:{token}":
        return None
    return int(token)


def verify(response: str, answer: int) -> float:
    """Exact-match reward: 1.0 if :func:`extract_answer` equals ``answer``, else 0.0."""
    got = extract_answer(response)
    return 1.0 if got is not None and got == int(answer) else 0.0


def label_chars(response: str) -> list[str]:
    """A class per character of ``response``: ``template``, ``reasoning`` or ``answer``.

    Reading chosen here (the paper's exact rule is not public): the scaffold characters of the
    fixed template (``<think>``, ``</think>``, ``=``, ``;``, ``Answer:`` and whitespace) are
    ``template``; digits and ``+``/``-`` inside the scratchpad are ``reasoning``; everything
    after ``Answer:`` that is not whitespace is ``answer``. Anything outside these (garbage the
    policy produced) is ``reasoning``.
    """
    labels = ["reasoning"] * len(response)
    close = response.find(THINK_CLOSE)
    for tag in (THINK_OPEN, THINK_CLOSE):
        for m in re.finditer(re.escape(tag), response):
            for i in range(m.start(), m.end()):
                labels[i] = "template"
    ans = response.find("Answer:", close if close >= 0 else 0)
    for i, ch in enumerate(response):
        if labels[i] == "template":
            continue
        if ch in "=;" or ch.isspace():
            labels[i] = "template"
        elif ans >= 0 and i >= ans:
            labels[i] = "template" if i < ans + len("Answer:") else "answer"
    return labels


def label_tokens(tokens: list[str]) -> list[str]:
    """Classes of a response given as token strings (concatenated in order). A token takes the
    class of its characters, with priority ``answer`` > ``reasoning`` > ``template``; empty
    tokens (e.g. end-of-sequence) are ``template``."""
    text = "".join(tokens)
    chars = label_chars(text)
    out, pos = [], 0
    for tok in tokens:
        span = chars[pos:pos + len(tok)]
        pos += len(tok)
        if "answer" in span:
            out.append("answer")
        elif "reasoning" in span:
            out.append("reasoning")
        else:
            out.append("template")
    return out
