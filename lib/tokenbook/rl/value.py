"""Monte-Carlo token value: the success rate of continuations sampled after a token.

V(x, y_≤t) = (1/M) Σ_m r(y_≤t ⊕ c_m), c_m ~ π(· | x, y_≤t), with M continuations at the training
temperature (the paper's value estimator is not public; this critic-free Monte-Carlo reading is
ours, see the chapter). ``include_token=False`` gives V(y_<t), for the advantage form
V(y_≤t) − V(y_<t).
"""

from __future__ import annotations

from typing import Callable, Sequence

import numpy as np
import pandas as pd
import torch


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
    from ..models.policy import sample

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
                   temperature=temperature, max_new_tokens=max_new_tokens, seed=seed + start)
        r = np.array([float(reward_fn(heads[chunk][i // n_continuations] + t,
                                      probs[chunk][i // n_continuations]))
                      for i, t in enumerate(s.texts)])
        values[chunk] = r.reshape(-1, n_continuations).mean(1)
    return values


def value_of_flips(model, tokenizer, roll, table: pd.DataFrame, problems_by_id: dict,
                   reward_fn: Callable, *, n_per_cell: int = 24, n_continuations: int = 8,
                   tol: float = 0.0, seed: int = 0, max_new_tokens: int = 40,
                   temperature: float = 1.0) -> pd.DataFrame:
    """MC values of boosted (Δ > tol) vs suppressed (Δ < −tol) tokens, sampled (seeded) up to
    ``n_per_cell`` per (rollout sign × direction) cell from a token dynamics ``table`` (which
    must carry the ``row`` column of :func:`tokenbook.rl.dynamics.token_dynamics`).

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
