"""The cancellation chapter's experiments, one call each (the notebook stays thin).

* :func:`setup` — the task world (tiny: arithmetic + SFT'd tiny Qwen2; paper: GSM8K/DAPO-Math
  + a Qwen checkpoint) as a :class:`Setup`.
* :func:`analysis_rollouts` — one seeded rollout batch for the token-level analyses.
* :func:`learning_curves` — GRPO runs per condition × seed from the same starting policy,
  cached as a table (``condition, seed, step, accuracy, …``).
* :func:`curve_summary` — per condition: mean final accuracy and area under the curve with a
  seeded bootstrap CI over seeds, and the paired difference against a reference condition.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Callable, Sequence

import numpy as np
import pandas as pd

from ..cache import cached_table
from .grpo import GRPOConfig, collect, mixed_groups, train

EXPERIMENTS_VERSION = "rl-exp-v1"


@dataclass
class Setup:
    """What every experiment needs: a way to load a fresh copy of the starting policy, its
    tokenizer, train/eval problems, the reward and token-label functions, and a cache key."""

    load: Callable[[], tuple]
    tokenizer: object
    train_problems: list
    eval_problems: list
    reward_fn: Callable
    label_fn: Callable
    key: dict
    device: str = "cpu"


def _arith_reward(text, problem):
    from ..worlds.arithmetic import verify

    return verify(text, problem.answer)


def setup(*, scale: str = "tiny", seed: int = 0, n_train: int = 2000, n_eval: int = 128,
          n_terms: Sequence[int] = (2, 3), digits: Sequence[int] = (1, 1),
          hidden_size: int = 64, num_layers: int = 2, sft_steps: int = 300,
          sft_batch_size: int = 64, sft_lr: float = 3e-3, model_id: str = "",
          dataset: str = "gsm8k", data_files=None, device: str = "cpu",
          progress: bool = True) -> Setup:
    """The chapter's world and starting policy at ``scale`` (``"tiny"`` or ``"paper"``)."""
    if scale == "tiny":
        from ..models.policy import load_policy, sft_policy
        from ..worlds.arithmetic import label_tokens, make_problems, worked_solution

        world = dict(n_terms=tuple(n_terms), digits=tuple(digits))
        gen = lambda n, s: make_problems(n, seed=s, **world)  # noqa: E731
        folder = sft_policy(gen, worked_solution, n_train=n_train, world_seed=seed,
                            hidden_size=hidden_size, num_layers=num_layers, steps=sft_steps,
                            batch_size=sft_batch_size, lr=sft_lr, seed=seed, world=world,
                            progress=progress)
        train_p = make_problems(n_train, seed=seed + 1, start_id=0, **world)
        eval_p = make_problems(n_eval, seed=seed + 10_000, start_id=10 ** 6, **world)
        tok = load_policy(folder)[1]
        key = dict(scale=scale, folder=folder.name, n_train=n_train, n_eval=n_eval, seed=seed)
        return Setup(lambda: load_policy(folder), tok, train_p, eval_p, _arith_reward,
                     label_tokens, key, "cpu")
    if scale == "paper":
        from ..data.math import label_math_tokens, load_dapo_math, load_gsm8k, problem_reward
        from ..models.policy import load_policy

        if not model_id:
            raise ValueError("scale='paper' needs model_id (e.g. 'Qwen/Qwen2.5-0.5B-Instruct')")
        tok = load_policy(model_id)[1]
        if dataset == "gsm8k" and data_files is None:
            train_p = load_gsm8k("train", n=n_train, seed=seed, tokenizer=tok)
            eval_p = load_gsm8k("test", n=n_eval, seed=seed, tokenizer=tok)
        elif dataset == "gsm8k":   # local files: a seeded split into train and eval
            allp = load_gsm8k(data_files=data_files, n=n_train + n_eval, seed=seed,
                              tokenizer=tok)
            train_p, eval_p = allp[:n_train], allp[n_train:]
        elif dataset == "dapo":
            allp = load_dapo_math(n=n_train + n_eval, seed=seed, tokenizer=tok,
                                  data_files=data_files)
            train_p, eval_p = allp[:n_train], allp[n_train:]
        else:
            raise ValueError(f"dataset must be 'gsm8k' or 'dapo', got {dataset!r}")
        key = dict(scale=scale, model_id=model_id, dataset=dataset, n_train=n_train,
                   n_eval=n_eval, seed=seed)
        return Setup(lambda: load_policy(model_id, device=device), tok, train_p, eval_p,
                     problem_reward, label_math_tokens, key, device)
    raise ValueError(f"scale must be 'tiny' or 'paper', got {scale!r}")


def analysis_rollouts(s: Setup, cfg: GRPOConfig, *, n_prompts: int = 8, seed: int = 0,
                      min_mixed: int = 4, max_tries: int = 8):
    """(policy, rollouts): ``n_prompts`` training problems × ``cfg.group_size`` rollouts from
    the starting policy, seeded. Draws are retried (new seed) until at least ``min_mixed``
    groups contain both correct and incorrect rollouts, or ``max_tries`` is reached."""
    model, tok = s.load()
    rng = np.random.default_rng(seed)
    best = None
    for t in range(max_tries):
        pick = rng.choice(len(s.train_problems), n_prompts, replace=False)
        roll = collect(model, tok, [s.train_problems[i] for i in pick], cfg, s.reward_fn,
                       s.label_fn, seed=seed * 7919 + t)
        mixed = mixed_groups(roll.rewards, cfg.group_size)
        if best is None or mixed > best[0]:
            best = (mixed, roll)
        if mixed >= min_mixed:
            break
    return model, best[1]


def learning_curves(s: Setup, conditions: dict[str, GRPOConfig], seeds: Sequence[int], *,
                    steps: int = 10, eval_every: int = 5, progress: bool = True) -> pd.DataFrame:
    """One GRPO run per (condition, seed), each from a fresh copy of the starting policy;
    each run cached separately (``rl-curve``), so an interrupted sweep resumes."""
    if isinstance(seeds, (str, int)) or not all(isinstance(x, (int, np.integer)) for x in seeds):
        raise ValueError(f"seeds must be a list of integers, got {seeds!r} "
                         f"(papermill: pass lists with -y 'seeds: [0, 1, 2]')")
    frames = []
    for name, cfg in conditions.items():
        for seed in seeds:
            params = dict(version=EXPERIMENTS_VERSION, setup=s.key, cfg=asdict(cfg), seed=seed,
                          steps=steps, eval_every=eval_every)

            def run(cfg=cfg, seed=seed):
                model, tok = s.load()
                return train(model, tok, s.train_problems, s.eval_problems, cfg, s.reward_fn,
                             steps=steps, eval_every=eval_every, seed=seed, label_fn=None,
                             progress=progress)

            frames.append(cached_table("rl-curve", params, run).assign(condition=name, seed=seed))
    return pd.concat(frames, ignore_index=True)


def curve_summary(curves: pd.DataFrame, *, reference: str | None = None, n_boot: int = 2000,
                  seed: int = 0) -> pd.DataFrame:
    """Per condition: final accuracy and AUC (mean accuracy over evaluations after step 0),
    mean over seeds with a percentile bootstrap 95% CI; with ``reference``, also the mean
    paired (same seed) AUC difference to it and its CI."""
    from ..stats import bootstrap_ci

    per_run = (curves[curves["step"] > 0].groupby(["condition", "seed"])
               .agg(auc=("accuracy", "mean"), final=("accuracy", "last")).reset_index())
    rows = []
    for cond, g in per_run.groupby("condition", sort=False):
        row = {"condition": cond, "n_seeds": len(g), "auc": g["auc"].mean(),
               "final": g["final"].mean()}
        row["auc_lo"], row["auc_hi"] = (bootstrap_ci(g["auc"].values, n_boot=n_boot, seed=seed)
                                        if len(g) > 1 else (np.nan, np.nan))
        if reference is not None:
            ref = per_run[per_run["condition"] == reference].set_index("seed")["auc"]
            d = (g.set_index("seed")["auc"] - ref).dropna()
            row["auc_diff"] = d.mean() if len(d) else np.nan
            row["diff_lo"], row["diff_hi"] = (bootstrap_ci(d.values, n_boot=n_boot, seed=seed)
                                              if len(d) > 1 else (np.nan, np.nan))
        rows.append(row)
    return pd.DataFrame(rows)
