"""Paper-scale math data for the cancellation chapter: GSM8K and DAPO-Math-17K through
``datasets``, answers checked with ``math-verify``.

* :func:`load_gsm8k` — ``openai/gsm8k`` (config ``main``; columns ``question``, ``answer`` whose
  last line is ``#### <number>``) or local parquet/json files of that schema.
* :func:`load_dapo_math` — ``BytedTsinghua-SIA/DAPO-Math-17k`` (columns ``data_source``,
  ``prompt`` = list of ``{role, content}``, ``ability``, ``reward_model`` = ``{ground_truth,
  style}``, ``extra_info`` = ``{index}``), deduplicated by ``extra_info.index`` as the authors
  did (1.79M rows → 17,917 prompts), with the DAPO instruction prefix/suffix stripped and the
  authors' system prompt used instead.
* :func:`load_math_eval` — the LUFFY evaluation suite (verl parquet/JSON lines: ``data_source``,
  ``prompt``, ``reward_model.ground_truth``), one problem per row with its benchmark in
  ``MathProblem.source``, the ×k repeated rows kept so that avg@k falls out.
* :func:`eval_suite_accuracy` — per-benchmark n rows / problems / k and mean binary reward
  (= avg@k), with a pooled ``all`` row and a ``macro`` mean over benchmarks.
* :func:`math_reward` — 1.0 when ``math_verify.verify(parse(gold), parse(response))``, else 0.0
  (never raises).
* :func:`label_math_tokens` — template / reasoning / answer classes for decoded tokens.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

import numpy as np
import pandas as pd

from tokenbook.data._files import check_text_fields, load_local_dataset

SYSTEM_PROMPT = "Please reason step by step, and put your final answer within \\boxed{}."
_DAPO_PREFIX = re.compile(r"^Solve the following math problem step by step\..*?\n\n", re.S)
_DAPO_SUFFIX = re.compile(r"\n\nRemember to put your answer on its own line after \"Answer:\"\.?\s*$")


@dataclass(frozen=True)
class MathProblem:
    """A math problem: ``prompt`` (the text the policy continues, chat template applied),
    ``answer`` (gold answer string), ``question`` (raw question), an integer ``id`` and, for
    evaluation suites, ``source`` (the benchmark name, e.g. verl's ``data_source``)."""

    prompt: str
    answer: str
    question: str
    id: int
    source: str | None = None


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
        keep = sorted(np.random.default_rng(seed).choice(len(rows), n, replace=False).tolist())
        rows = [rows[i] for i in keep]
    return [MathProblem(format_prompt(q, tokenizer, system_prompt=system_prompt), a, q, i)
            for i, (q, a) in enumerate(rows)]


def _eval_row(r: dict, i: int, where: str) -> tuple[str, str, str]:
    """``(benchmark, question, gold)`` of one verl/LUFFY evaluation row, or MathDataError."""
    source = r.get("data_source")
    if not isinstance(source, str) or not source.strip():
        raise MathDataError(f"{where} row {i}: data_source is {source!r}, not a benchmark name")
    prompt = r.get("prompt")
    if isinstance(prompt, str):
        raise MathDataError(f"{where} row {i}: prompt is a plain string; the verl format stores "
                            f"a list of {{role, content}} chat messages")
    if prompt is None or not all(isinstance(m, dict) for m in prompt):
        raise MathDataError(f"{where} row {i}: prompt must be a list of {{role, content}} "
                            f"messages (got {type(prompt).__name__})")
    user = [m.get("content") for m in prompt if m.get("role") == "user"]
    if not user or not isinstance(user[-1], str) or not user[-1].strip():
        roles = [m.get("role") for m in prompt]
        raise MathDataError(f"{where} row {i} ({source}): prompt has no user message with text "
                            f"(roles {roles})")
    reward = r.get("reward_model")
    gold = reward.get("ground_truth") if isinstance(reward, dict) else None
    if isinstance(gold, (int, float)) and not isinstance(gold, bool):
        gold = str(gold)
    if not isinstance(gold, str) or not gold.strip():
        raise MathDataError(f"{where} row {i} ({source}): reward_model has no "
                            f"'ground_truth' text (reward_model = {reward!r:.80})")
    return source, user[-1].strip(), gold.strip()


def load_math_eval(data_files, *, benchmarks=None, tokenizer=None,
                   system_prompt: str = SYSTEM_PROMPT) -> list[MathProblem]:
    """A verl/LUFFY-format evaluation suite: one :class:`MathProblem` per row, benchmark in
    ``source``.

    The authors evaluate on LUFFY's test file (``luffy_test_sys_wo_format``; LUFFY calls it
    ``data/valid.all.parquet``): MATH-500 (500 rows), OlympiadBench (675), Minerva (272) and
    AIME24 / AMC / AIME25 with every problem repeated 32 times (960 = 30 × 32, 2656 = 83 × 32,
    960). Repeated rows are **kept** (in file order), so one sampled response per row and
    :func:`eval_suite_accuracy` give avg@32 on the repeated benchmarks and avg@1 elsewhere.

    ``data_files``: a local ``.parquet`` file (or ``.json``/``.jsonl`` records), or a list of
    them. ``benchmarks``: ``data_source`` names to keep (a name or a list); an unknown name
    raises :class:`MathDataError` listing the names present. ``prompt`` is the user message
    under our ``system_prompt`` and the tokenizer's chat template (:func:`format_prompt`); the
    file's own system message is dropped, as LUFFY's ``generate_vllm.py --remove_system``
    does. ``id`` is the row's position in the returned list.

    Format, verified: the verl columns ``data_source`` (str), ``prompt`` (list of
    ``{content, role}`` structs), ``ability``, ``reward_model`` (struct ``{ground_truth,
    style}``) and ``extra_info`` (struct), as in the dataset cards of verl-format parquet
    files on the Hugging Face hub (e.g. ``BytedTsinghua-SIA/DAPO-Math-17k`` and its dedup
    copies); and how LUFFY's evaluation uses the file (its README runs
    ``eval_scripts/generate_vllm.py --input_file data/valid.all.parquet --remove_system True``;
    read in a public fork of that script): ``pd.read_parquet``, the first message of
    ``prompt`` is the system message (asserted and removed), the gold is
    ``reward_model['ground_truth']``, correctness is averaged per ``data_source`` over all
    rows and ``avg acc`` is the unweighted mean over benchmarks.
    Inferred, not checked against the file itself: the ``data_source`` names (``math``,
    ``olympiad_bench``, ``minerva``, ``aime``, ``aime25``, ``amc``, as listed by a
    LUFFY-derived verl reward router), that ground truths are strings, and that the ×32 copies
    are identical rows. Nothing here depends on those: names are taken as they are, and
    problems are told apart by ``(source, question, answer)``.

    Raises :class:`MathDataError` naming the file (and the 0-based row) for a missing column,
    an empty file, a row whose ``prompt`` has no user message or whose ``reward_model`` has no
    ``ground_truth``; FileNotFoundError for a missing file.
    """
    files = [data_files] if isinstance(data_files, (str, Path)) else list(data_files)
    if not files:
        raise MathDataError("data_files is empty: give one or more parquet/json files")
    wanted = None
    if benchmarks is not None:
        wanted = [benchmarks] if isinstance(benchmarks, str) else list(benchmarks)
    rows: list[tuple[str, str, str]] = []
    present: set[str] = set()
    for f in files:
        if str(f).endswith(".parquet") and Path(f).is_file() and Path(f).stat().st_size:
            try:
                import pyarrow.parquet as pq

                n_rows = pq.ParquetFile(f).metadata.num_rows
            except Exception:  # not parquet at all: let _load report it
                n_rows = None
            if n_rows == 0:
                raise MathDataError(f"{f} holds no rows: nothing to evaluate")
        ds = _load("LUFFY evaluation suite", None, "test", [f])
        missing = [c for c in ("data_source", "prompt", "reward_model")
                   if c not in ds.column_names]
        if missing:
            raise MathDataError(f"{f}: lacks column(s) {missing} of the verl format (has "
                                f"{ds.column_names}); expected data_source, prompt (chat "
                                f"messages) and reward_model {{ground_truth, style}}")
        sources = ds["data_source"]
        present.update(x for x in sources if isinstance(x, str))
        for i, r in enumerate(ds):
            if wanted is not None and sources[i] not in wanted:
                continue
            rows.append(_eval_row(r, i, str(f)))
    if wanted is not None:
        unknown = [b for b in wanted if b not in present]
        if unknown:
            raise MathDataError(f"benchmark(s) {unknown} not in {', '.join(map(str, files))}; "
                                f"its data_source names are {sorted(present)}")
    return [MathProblem(format_prompt(q, tokenizer, system_prompt=system_prompt), a, q, i, s)
            for i, (s, q, a) in enumerate(rows)]


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


def eval_suite_accuracy(problems: Sequence[MathProblem], responses: Sequence[str]):
    """Per-benchmark accuracy of one response per row of an evaluation suite.

    ``responses[i]`` answers ``problems[i]`` (e.g. from :func:`load_math_eval`, repeated rows
    included); each is scored with :func:`math_reward` (binary). Returns a DataFrame with one
    row per benchmark (``MathProblem.source``; ``None`` shows as ``"(none)"``) in order of first
    appearance, then ``all`` (pooled over every row) and ``macro`` (unweighted mean of the
    benchmark accuracies, LUFFY's "avg acc"). Columns: ``benchmark``, ``n_rows``,
    ``n_problems`` (distinct ``(source, question, answer)``), ``k`` (rows per problem; a whole
    number when every problem is repeated equally, else the mean), ``n_correct`` and
    ``accuracy`` = mean reward over rows, which is avg@k when each problem appears k times.
    ``macro`` has NaN ``k`` and ``n_correct``. Raises ValueError when the lengths differ or
    there are no problems.
    """
    problems, responses = list(problems), list(responses)
    if len(problems) != len(responses):
        raise ValueError(f"{len(problems)} problems but {len(responses)} responses: give one "
                         f"response per problem row (repeated rows included)")
    if not problems:
        raise ValueError("no problems to score")
    bad = [i for i, p in enumerate(problems) if not isinstance(p, MathProblem)]
    if bad:
        raise ValueError(f"problems[{bad[0]}] is a {type(problems[bad[0]]).__name__}, "
                         f"not a MathProblem")
    rewards = [math_reward(r, p.answer) for p, r in zip(problems, responses)]
    names = ["(none)" if p.source is None else p.source for p in problems]
    keys = [(n, p.question, p.answer) for n, p in zip(names, problems)]

    def summary(label, idx):
        counts: dict = {}
        for i in idx:
            counts[keys[i]] = counts.get(keys[i], 0) + 1
        n_correct = sum(rewards[i] for i in idx)
        return {"benchmark": label, "n_rows": len(idx), "n_problems": len(counts),
                "k": len(idx) / len(counts), "n_correct": n_correct,
                "accuracy": n_correct / len(idx)}

    order = list(dict.fromkeys(names))
    table = [summary(b, [i for i, n in enumerate(names) if n == b]) for b in order]
    pooled = summary("all", range(len(problems)))
    macro = {"benchmark": "macro", "n_rows": pooled["n_rows"],
             "n_problems": pooled["n_problems"], "k": float("nan"), "n_correct": float("nan"),
             "accuracy": sum(t["accuracy"] for t in table) / len(table)}
    return pd.DataFrame(table + [pooled, macro])


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
