"""Paper-scale math data for the cancellation chapter: GSM8K and DAPO-Math-17K through
``datasets``, answers checked with ``math-verify``.

* :func:`load_gsm8k` — ``openai/gsm8k`` (config ``main``; columns ``question``, ``answer`` whose
  last line is ``#### <number>``) or local parquet/json files of that schema.
* :func:`load_dapo_math` — ``BytedTsinghua-SIA/DAPO-Math-17k`` (columns ``data_source``,
  ``prompt`` = list of ``{role, content}``, ``ability``, ``reward_model`` = ``{ground_truth,
  style}``, ``extra_info`` = ``{index}``), deduplicated by ``extra_info.index`` as the authors
  did (1.79M rows → 17,917 prompts), with the DAPO instruction prefix/suffix stripped and the
  authors' system prompt used instead.
* :func:`math_reward` — 1.0 when ``math_verify.verify(parse(gold), parse(response))``, else 0.0
  (never raises).
* :func:`label_math_tokens` — template / reasoning / answer classes for decoded tokens.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

SYSTEM_PROMPT = "Please reason step by step, and put your final answer within \\boxed{}."
_DAPO_PREFIX = re.compile(r"^Solve the following math problem step by step\..*?\n\n", re.S)
_DAPO_SUFFIX = re.compile(r"\n\nRemember to put your answer on its own line after \"Answer:\"\.?\s*$")


@dataclass(frozen=True)
class MathProblem:
    """A math problem: ``prompt`` (the text the policy continues, chat template applied),
    ``answer`` (gold answer string), ``question`` (raw question) and an integer ``id``."""

    prompt: str
    answer: str
    question: str
    id: int


def gsm8k_final_answer(solution: str) -> str:
    """The number after ``####`` in a GSM8K solution, commas removed."""
    if "####" not in solution:
        raise ValueError("GSM8K answer field has no '####' line; is this the 'main' config?")
    return solution.rsplit("####", 1)[1].strip().replace(",", "")


def format_prompt(question: str, tokenizer=None, *, system_prompt: str = SYSTEM_PROMPT) -> str:
    """The policy's prompt: the tokenizer's chat template (system + user, generation prompt
    added) when it has one, else ``system_prompt + "\\n\\n" + question + "\\n"``."""
    if tokenizer is not None and getattr(tokenizer, "chat_template", None):
        msgs = [{"role": "system", "content": system_prompt}, {"role": "user", "content": question}]
        return tokenizer.apply_chat_template(msgs, tokenize=False, add_generation_prompt=True)
    return f"{system_prompt}\n\n{question}\n"


class MathDataError(ValueError):
    """A local GSM8K / DAPO-Math file or record that cannot be used as it is."""


def _load(hub_id: str, config: str | None, split: str, data_files):
    import datasets

    from ._files import load_local_dataset

    if data_files is not None:
        files = [str(p) for p in ([data_files] if isinstance(data_files, (str, Path))
                                  else data_files)]
        missing = [f for f in files if not Path(f).exists()]
        if missing:
            raise FileNotFoundError(f"data files not found: {missing}")
        if not files:
            raise MathDataError("data_files is empty: give one or more parquet/json files")
        kind = "parquet" if files[0].endswith(".parquet") else "json"
        return load_local_dataset(files, kind, MathDataError)
    try:
        return datasets.load_dataset(hub_id, config, split=split)
    except Exception as exc:  # offline, or no such split
        raise RuntimeError(
            f"could not load {hub_id!r} ({config}, split {split!r}) through datasets: {exc}. "
            f"Run with network access (HF_HUB_OFFLINE unset) once, or pass data_files= with "
            f"local parquet/json files of the same schema.") from exc


def _subsample(ds, n: int | None, seed: int):
    if n is not None and n < len(ds):
        ds = ds.shuffle(seed=seed).select(range(n))
    return ds


def load_gsm8k(split: str = "train", *, data_files=None, n: int | None = None, seed: int = 0,
               tokenizer=None, system_prompt: str = SYSTEM_PROMPT) -> list[MathProblem]:
    """GSM8K problems (optionally a seeded subsample of ``n``)."""
    ds = _load("openai/gsm8k", "main", split, data_files)
    for col in ("question", "answer"):
        if col not in ds.column_names:
            raise ValueError(f"GSM8K data lacks column {col!r} (has {ds.column_names})")
    ds = _subsample(ds, n, seed)
    from ._files import check_text_fields

    out = []
    for i, r in enumerate(ds):
        check_text_fields(r, ["question", "answer"], f"GSM8K row {i}", MathDataError)
        try:
            answer = gsm8k_final_answer(r["answer"])
        except ValueError as exc:
            raise MathDataError(f"GSM8K row {i}: {exc}") from None
        out.append(MathProblem(format_prompt(r["question"], tokenizer,
                                             system_prompt=system_prompt), answer,
                               r["question"], i))
    return out


def dapo_question(content: str) -> str:
    """A DAPO-Math prompt's question with the DAPO instruction prefix and suffix removed."""
    return _DAPO_SUFFIX.sub("", _DAPO_PREFIX.sub("", content)).strip()


def load_dapo_math(*, data_files=None, n: int | None = None, seed: int = 0, tokenizer=None,
                   system_prompt: str = SYSTEM_PROMPT) -> list[MathProblem]:
    """DAPO-Math-17K prompts, deduplicated by ``extra_info["index"]``."""
    ds = _load("BytedTsinghua-SIA/DAPO-Math-17k", None, "train", data_files)
    for col in ("prompt", "reward_model", "extra_info"):
        if col not in ds.column_names:
            raise ValueError(f"DAPO-Math data lacks column {col!r} (has {ds.column_names})")
    seen, rows = set(), []
    for i, r in enumerate(ds):
        info, reward, prompt = r["extra_info"], r["reward_model"], r["prompt"]
        if not isinstance(info, dict) or info.get("index") is None:
            raise MathDataError(f"DAPO-Math row {i}: extra_info has no 'index'")
        key = info["index"]
        if key in seen:
            continue
        seen.add(key)
        if not isinstance(reward, dict) or reward.get("ground_truth") is None:
            raise MathDataError(f"DAPO-Math row {key!r}: reward_model has no 'ground_truth'")
        if not isinstance(prompt, list) or not all(isinstance(m, dict) for m in prompt):
            raise MathDataError(f"DAPO-Math row {key!r}: prompt must be a list of "
                                f"{{role, content}} messages")
        user = [m.get("content") for m in prompt if m.get("role") == "user"]
        if not user:
            raise ValueError(f"DAPO-Math row {key!r} has no user message")
        if not isinstance(user[-1], str) or not user[-1].strip():
            raise MathDataError(f"DAPO-Math row {key!r}: the user message is not text")
        rows.append((dapo_question(user[-1]), str(reward["ground_truth"])))
    if n is not None and n < len(rows):
        import numpy as np

        keep = sorted(np.random.default_rng(seed).choice(len(rows), n, replace=False).tolist())
        rows = [rows[i] for i in keep]
    return [MathProblem(format_prompt(q, tokenizer, system_prompt=system_prompt), a, q, i)
            for i, (q, a) in enumerate(rows)]


def math_reward(response: str, gold: str) -> float:
    """1.0 if ``math-verify`` judges ``response``'s final answer equal to ``gold``, else 0.0.

    The gold string is parsed as LaTeX math (``$gold$``); malformed or empty responses give 0.0.
    """
    try:
        from math_verify import parse, verify
    except ImportError as exc:  # pragma: no cover
        raise ImportError("math_reward needs math-verify: pip install 'tokenbook[paper]'") from exc
    if not isinstance(response, str) or not response.strip():
        return 0.0
    try:
        g = parse(f"${gold}$")
        return 1.0 if verify(g, parse(response)) else 0.0
    except Exception:
        return 0.0


def problem_reward(response: str, problem: MathProblem) -> float:
    """:func:`math_reward` against ``problem.answer`` (the GRPO loop's ``reward_fn``)."""
    return math_reward(response, problem.answer)


_PUNCT = set(".,:;!?()[]{}\"'")
_TEMPLATE_PIECES = ("<think>", "</think>", "\\boxed", "<|im_end|>", "<|endoftext|>")


def label_math_tokens(tokens: Sequence[str]) -> list[str]:
    """Classes of decoded response tokens: ``answer`` inside the last ``\\boxed{…}``,
    ``template`` for think tags, ``\\boxed``, chat specials and tokens of only whitespace or
    punctuation (``.,:;!?()[]{}`` and quotes; operators count as reasoning), ``reasoning`` otherwise (our reading; the paper's rule is not public)."""
    text = "".join(tokens)
    box = text.rfind("\\boxed{")
    ans_lo = ans_hi = -1
    if box >= 0:
        depth, i = 0, box + len("\\boxed")
        for i in range(box + len("\\boxed"), len(text)):
            depth += text[i] == "{"
            depth -= text[i] == "}"
            if depth == 0:
                break
        ans_lo, ans_hi = box + len("\\boxed{"), i
    out, pos = [], 0
    for tok in tokens:
        lo, hi = pos, pos + len(tok)
        pos = hi
        core = tok.strip()
        if ans_lo >= 0 and lo < ans_hi and hi > ans_lo and core not in ("{", "}"):
            out.append("answer")
        elif not core or any(p in tok for p in _TEMPLATE_PIECES) or \
                all(ch in _PUNCT for ch in core):
            out.append("template")
        else:
            out.append("reasoning")
    return out
