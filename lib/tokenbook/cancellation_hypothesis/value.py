"""Monte-Carlo token value: the success rate of continuations sampled after a token.

V(x, y_≤t) = (1/M) Σ_m r(y_≤t ⊕ c_m), c_m ~ π(· | x, y_≤t), with M continuations at the training
temperature (the paper's value estimator is not public; this critic-free Monte-Carlo reading is
ours, see the chapter). ``include_token=False`` gives V(y_<t), for the advantage form
V(y_≤t) − V(y_<t).

:func:`exact_values` is the known answer of the estimator: the success probability of a
partial solution under the policy, summed over every continuation the policy can write
(enumerated, branches below ``min_prob`` bounded), as an interval [lower, upper] that is a
point where nothing is pruned.
"""

from __future__ import annotations

from typing import Callable, Sequence

import numpy as np
import pandas as pd
import torch

from tokenbook.models.policy import position_ids, sample
from tokenbook.seeds import derive_seed
from tokenbook.validation import check_table


@torch.no_grad()
def mc_values(model, tokenizer, roll, problems_by_id: dict, positions: Sequence[tuple[int, int]],
              reward_fn: Callable, *, n_continuations: int = 8, temperature: float = 1.0,
              max_new_tokens: int = 40, include_token: bool = True, seed: int = 0,
              batch_size: int = 512) -> np.ndarray:
    """MC value of each (row, pos) of ``roll``: mean reward over ``n_continuations`` sampled
    after the prefix ending *with* the token (or just before it if ``include_token=False``).

    ``problems_by_id`` maps ``roll.prompt_ids`` values to problems (with ``.prompt``);
    ``reward_fn(text, problem)`` scores the full completion text. Returns values in [0, 1].
    """
    prefixes, probs, heads = [], [], []
    for row, pos in positions:
        p = problems_by_id[int(roll.prompt_ids[row])]
        head = "".join(roll.tokens[row][:pos + 1 if include_token else pos])
        prefixes.append(p.prompt + head)
        probs.append(p)
        heads.append(head)
    values = np.zeros(len(positions))
    per = max(1, batch_size // n_continuations)
    for start in range(0, len(prefixes), per):
        chunk = slice(start, start + per)
        s = sample(model, tokenizer, prefixes[chunk], n=n_continuations,
                   temperature=temperature, max_new_tokens=max_new_tokens,
                   seed=derive_seed(seed, "continuations", start))
        r = np.array([float(reward_fn(heads[chunk][i // n_continuations] + t,
                                      probs[chunk][i // n_continuations]))
                      for i, t in enumerate(s.texts)])
        values[chunk] = r.reshape(-1, n_continuations).mean(1)
    return values


@torch.no_grad()
def exact_values(model, tokenizer, prefixes: Sequence[str], heads: Sequence[str],
                 problems: Sequence, reward_fn: Callable, *, max_new_tokens: int = 40,
                 temperature: float = 1.0, min_prob: float = 1e-4,
                 batch_size: int = 1024) -> pd.DataFrame:
    """The exact success probability of each partial solution under ``model``'s sampling
    (ancestral, ``temperature``, no top-k/top-p, as :func:`tokenbook.models.policy.sample`):
    Σ over continuations c of π(c | prefix) · r(head ⊕ c), with c ending at end-of-sequence
    or after ``max_new_tokens`` tokens (scored as the text so far, as sampling does).

    ``prefixes[i]`` is the model input (prompt + head), ``heads[i]`` the completion so far
    (scored with the continuation by ``reward_fn(text, problems[i])``). Every continuation is
    enumerated breadth first; a branch whose probability falls below ``min_prob`` is not
    followed and its mass is unknown. Returns a frame with ``lower`` (success mass found),
    ``upper`` (lower + the unknown mass), ``pruned`` (the unknown mass) and ``n_paths``
    (complete continuations scored); ``min_prob=0`` enumerates everything (lower = upper).
    """
    if not (len(prefixes) == len(heads) == len(problems)):
        raise ValueError(f"exact_values: {len(prefixes)} prefixes, {len(heads)} heads and "
                         f"{len(problems)} problems; give one of each per partial solution")
    if temperature <= 0:
        raise ValueError(f"temperature must be > 0, got {temperature}")
    model.eval()
    dev = next(model.parameters()).device
    eos, pad = tokenizer.eos_token_id, tokenizer.pad_token_id
    n = len(prefixes)
    lower, pruned, n_paths = np.zeros(n), np.zeros(n), np.zeros(n, dtype=int)
    # live branches: (prefix index, token ids so far incl. the prefix, new ids, probability)
    live = [(i, tokenizer(p, add_special_tokens=False).input_ids, [], 1.0)
            for i, p in enumerate(prefixes)]
    for depth in range(max_new_tokens):
        nxt = []
        for start in range(0, len(live), batch_size):
            chunk = live[start:start + batch_size]
            width = max(len(ids) for _, ids, _, _ in chunk)
            ids = torch.full((len(chunk), width), pad, dtype=torch.long)
            att = torch.zeros_like(ids)
            for r, (_, seq, _, _) in enumerate(chunk):
                ids[r, width - len(seq):] = torch.tensor(seq)
                att[r, width - len(seq):] = 1
            logits = model(input_ids=ids.to(dev), attention_mask=att.to(dev),
                           position_ids=position_ids(att).to(dev),
                           use_cache=False).logits[:, -1].float().cpu()
            probs = torch.softmax(logits / temperature, -1).double().numpy()
            for r, (i, seq, new, p) in enumerate(chunk):
                q = p * probs[r]
                keep = np.flatnonzero(q >= min_prob) if min_prob > 0 else np.arange(q.size)
                pruned[i] += q.sum() - q[keep].sum()
                for t in keep:
                    t = int(t)
                    if t == eos or depth == max_new_tokens - 1:
                        done = new if t == eos else new + [t]
                        text = heads[i] + tokenizer.decode(
                            [x for x in done if x not in (eos, pad)])
                        lower[i] += q[t] * float(reward_fn(text, problems[i]))
                        n_paths[i] += 1
                    else:
                        nxt.append((i, seq + [t], new + [t], float(q[t])))
        live = nxt
        if not live:
            break
    return pd.DataFrame({"lower": lower, "upper": lower + pruned, "pruned": pruned,
                         "n_paths": n_paths})


def value_of_flips(model, tokenizer, roll, table: pd.DataFrame, problems_by_id: dict,
                   reward_fn: Callable, *, n_per_cell: int = 24, n_continuations: int = 8,
                   tol: float = 0.0, seed: int = 0, max_new_tokens: int = 40,
                   temperature: float = 1.0) -> pd.DataFrame:
    """MC values of boosted (Δ > tol) vs suppressed (Δ < −tol) tokens, sampled (seeded) up to
    ``n_per_cell`` per (rollout sign × direction) cell from a token dynamics ``table`` (which
    must carry the ``row`` column of :func:`tokenbook.cancellation_hypothesis.dynamics.token_dynamics`).

    Excludes the final end-of-sequence token (its continuation is empty). Columns: the table's
    columns plus ``rollout`` (correct/incorrect), ``direction`` (boosted/suppressed), ``value``.
    """
    rng = np.random.default_rng(seed)
    t = table[table["token"] != ""].copy()
    t["rollout"] = np.where(t["reward"] > 0, "correct", "incorrect")
    t["direction"] = np.where(t["delta"] > tol, "boosted",
                              np.where(t["delta"] < -tol, "suppressed", "unchanged"))
    t = t[t["direction"] != "unchanged"]
    picks = []
    for _, cell in t.groupby(["rollout", "direction"]):
        n = min(n_per_cell, len(cell))
        picks.append(cell.iloc[rng.choice(len(cell), n, replace=False)])
    if not picks:
        return t.assign(value=np.nan).iloc[:0]
    sel = pd.concat(picks, ignore_index=True)
    sel["value"] = mc_values(model, tokenizer, roll, problems_by_id,
                             list(zip(sel["row"].astype(int), sel["pos"].astype(int))), reward_fn,
                             n_continuations=n_continuations, seed=seed,
                             max_new_tokens=max_new_tokens, temperature=temperature)
    return sel


def oracle_values(table: pd.DataFrame, first_order: pd.DataFrame, problems_by_id: dict,
                  on_path: Callable[[object, str], bool], *, tol: float = 0.0) -> pd.DataFrame:
    """The boosted-vs-suppressed value table as the generator and the step's algebra give
    it, with no sampling: every token of a token dynamics ``table`` (the final
    end-of-sequence token left out, as in :func:`value_of_flips`), its direction from the
    sign of its exact first-order Δ (``first_order``:
    :func:`tokenbook.cancellation_hypothesis.dynamics.first_order_full`, rows aligned; column
    ``full``), and as ``value`` the world's own answer, 1.0 where the response through the
    token still starts one of the world's solutions of its problem (``on_path(problem,
    text)``), else 0.0.

    Columns ``row, pos, rollout`` (correct/incorrect), ``direction``
    (boosted/suppressed), ``value``: the input of
    :func:`tokenbook.cancellation_hypothesis.verdicts.value_gap`.
    """
    for col in ("row", "pos", "prompt_id", "token", "reward"):
        if col not in table.columns:
            raise ValueError(f"oracle_values: the token table has no {col!r} column; pass "
                             f"a table of dynamics.token_dynamics")
    if len(first_order) != len(table) or not (
            np.array_equal(first_order["row"].to_numpy(), table["row"].to_numpy())
            and np.array_equal(first_order["pos"].to_numpy(), table["pos"].to_numpy())):
        raise ValueError("oracle_values: first_order must hold the table's tokens in its order "
                         "(compute both from one rollout batch)")
    t = table[["row", "pos", "prompt_id", "token", "reward"]].assign(
        full=first_order["full"].to_numpy())
    t = t.sort_values(["row", "pos"], kind="stable")
    text = t.groupby("row")["token"].transform(lambda s: s.cumsum())
    t["value"] = [float(on_path(problems_by_id[int(p)], x))
                  for p, x in zip(t["prompt_id"], text)]
    t = t[t["token"] != ""]
    t["rollout"] = np.where(t["reward"] > 0, "correct", "incorrect")
    t["direction"] = np.where(t["full"] > tol, "boosted",
                              np.where(t["full"] < -tol, "suppressed", "unchanged"))
    t = t[t["direction"] != "unchanged"]
    return t[["row", "pos", "rollout", "direction", "value"]].reset_index(drop=True)


def path_breakdown(oracle: pd.DataFrame) -> pd.DataFrame:
    """Where the value claim's known answer comes from, per rollout sign (rows ``correct``,
    ``incorrect``) of an :func:`oracle_values` table: ``rollouts``, ``tokens``,
    ``left_path`` (share of the rollouts with a token off the world's solution path: for a
    correct rollout, the right answer reached by a wrong scratchpad), ``on_path`` (share of
    the tokens still on it, value 1), and the share boosted (first-order Δ > 0) among the
    tokens on the path (``boosted_on_path``) and off it (``boosted_off_path``; NaN where none).

    The claim needs the step to tell them apart: in a failed rollout, the tokens before its
    mistake (shared with the correct rollouts) boosted more often than those after it.

    >>> t = pd.DataFrame({"row": [0, 0, 1, 1], "pos": [0, 1, 0, 1],
    ...                   "rollout": ["incorrect"] * 2 + ["correct"] * 2,
    ...                   "direction": ["boosted", "suppressed", "boosted", "boosted"],
    ...                   "value": [1.0, 0.0, 1.0, 1.0]})
    >>> path_breakdown(t).loc["incorrect", ["left_path", "boosted_on_path", "boosted_off_path"]].tolist()
    [1.0, 1.0, 0.0]
    """
    check_table(oracle, "oracle", columns=["row", "rollout", "direction", "value"],
                numeric=["value"])
    out = {}
    for sign in ("correct", "incorrect"):
        t = oracle[oracle["rollout"] == sign]
        on = t["value"].to_numpy() == 1.0
        boosted = t["direction"].to_numpy() == "boosted"

        def share(mask: np.ndarray) -> float:
            return float(boosted[mask].mean()) if mask.any() else float("nan")

        out[sign] = {"rollouts": int(t["row"].nunique()), "tokens": int(len(t)),
                     "left_path": (float(t.groupby("row")["value"].min().lt(1.0).mean())
                                   if len(t) else float("nan")),
                     "on_path": float(on.mean()) if len(t) else float("nan"),
                     "boosted_on_path": share(on), "boosted_off_path": share(~on)}
    return pd.DataFrame.from_dict(out, orient="index").rename_axis("rollout")
