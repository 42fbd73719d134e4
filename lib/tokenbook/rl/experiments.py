"""The cancellation chapter's experiments, one call each (the notebook stays thin).

* :func:`setup` — the task world (tiny: arithmetic + SFT'd tiny Qwen2; paper: GSM8K/DAPO-Math
  + a Qwen checkpoint) as a :class:`Setup`.
* :func:`analysis_rollouts` — one seeded rollout batch for the token-level analyses.
* :func:`learning_curves` — GRPO runs per condition × seed from the same starting policy,
  cached as a table (``condition, seed, step, accuracy, …``).
* :func:`seed_tables` / :func:`probe_tables` — one seed's token tables (cached); the
  peer-masking probes of several seeds stacked.
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


# ----------------------------------------------------------------------------- seeds × on/off
SEED_TABLES_VERSION = "rl-seed-v2"   # v2: probe with the top-scored set, 10 sets, linear
#: the parameters that define one seed's token tables (the tiny world, policy and analyses)
SEED_PARAMS = ("n_train", "n_eval", "hidden_size", "num_layers", "sft_steps", "sft_lr",
               "policy_seed", "group_size", "analysis_prompts", "max_new_tokens", "temperature",
               "analysis_lr", "probe_targets", "probe_sets", "probe_set_size", "value_per_cell",
               "value_continuations")


def seed_tables(seed: int, *, n_train: int = 2000, n_eval: int = 64, hidden_size: int = 64,
                num_layers: int = 2, sft_steps: int = 200, sft_lr: float = 3e-3,
                policy_seed: int = 0, group_size: int = 8, analysis_prompts: int = 8,
                max_new_tokens: int = 32, temperature: float = 1.0, analysis_lr: float = 0.05,
                probe_targets: int = 136, probe_sets: int = 10, probe_set_size: int = 3,
                value_per_cell: int = 16, value_continuations: int = 8,
                progress: bool = False) -> dict[str, pd.DataFrame]:
    """One seed's token tables (tiny scale), cached together (``rl-seed-tables``, keyed by the
    parameters, the seed and ``SEED_TABLES_VERSION`` — bump it when the analyses change):

    ``grpo`` (token dynamics of one full-batch GRPO SGD step), ``psr`` (the same rollouts with
    positive-only advantages), ``isolated`` (each rollout updated alone: the coupling-off
    control), ``values`` (MC values of boosted/suppressed tokens), ``probe`` (peer masking:
    ``probe_targets`` targets × 8 buckets × (``probe_sets`` random sets + the authors'
    top-scored set), see :func:`tokenbook.rl.dynamics.peer_masking_probe`).

    Streams from the root ``seed`` (:func:`tokenbook.seeds.derive_seed`): ``rollouts`` (which
    prompts, which samples), ``value`` (which tokens, which continuations), ``probe`` (targets,
    peer sets). The starting policy is trained once with ``policy_seed`` (shared by all seeds,
    so a seed sweep costs no retraining).
    """
    from ..cache import cached_dir
    from ..seeds import derive_seed
    from . import dynamics as dyn
    from .value import value_of_flips

    params = dict(version=SEED_TABLES_VERSION, seed=int(seed),
                  **{k: v for k, v in locals().items() if k in SEED_PARAMS})
    names = ("grpo", "psr", "isolated", "values", "probe")

    def build(out):
        S = setup(scale="tiny", seed=policy_seed, n_train=n_train, n_eval=n_eval,
                  hidden_size=hidden_size, num_layers=num_layers, sft_steps=sft_steps,
                  sft_lr=sft_lr, progress=progress)
        cfg = GRPOConfig(group_size=group_size, prompts_per_step=analysis_prompts,
                         max_new_tokens=max_new_tokens, temperature=temperature)
        policy, roll = analysis_rollouts(S, cfg, n_prompts=analysis_prompts,
                                         seed=derive_seed(seed, "rollouts"))
        grpo = dyn.token_dynamics(policy, roll, lr=analysis_lr)
        psr = dyn.token_dynamics(policy, dyn.with_estimator(roll, group_size, "psr"),
                                 lr=analysis_lr)
        iso = dyn.token_dynamics_isolated(policy, roll, lr=analysis_lr)
        by_id = {p.id: p for p in S.train_problems}
        values = value_of_flips(policy, S.tokenizer, roll, grpo, by_id, S.reward_fn,
                                n_per_cell=value_per_cell, n_continuations=value_continuations,
                                seed=derive_seed(seed, "value"), max_new_tokens=max_new_tokens,
                                temperature=temperature)
        probe = dyn.peer_masking_probe(policy, roll, lr=analysis_lr, n_targets=probe_targets,
                                       n_sets=probe_sets, set_size=probe_set_size,
                                       seed=derive_seed(seed, "probe"), progress=progress)
        for name, frame in zip(names, (grpo, psr, iso, values, probe)):
            frame.to_parquet(out / f"{name}.parquet")

    folder = cached_dir("rl-seed-tables", params, build)
    return {name: pd.read_parquet(folder / f"{name}.parquet") for name in names}


def probe_tables(seeds: Sequence[int], **params) -> pd.DataFrame:
    """The peer-masking probes of several seeds (:func:`seed_tables`, cached), stacked with a
    ``seed`` column, so that :func:`tokenbook.rl.verdicts.probe_bucket_summary` and
    :func:`tokenbook.rl.verdicts.probe_power` pool their targets (units ``seed:target``)."""
    if isinstance(seeds, (str, int)) or not all(isinstance(x, (int, np.integer)) for x in seeds):
        raise ValueError(f"seeds must be a list of integers, got {seeds!r}")
    frames = [seed_tables(int(s), **params)["probe"].assign(seed=int(s)) for s in seeds]
    return pd.concat(frames, ignore_index=True)


def seed_claims(seed: int, mechanism: str, *, boot_seed: int = 0, **params) -> dict[str, float]:
    """Each tiny-scale claim's statistic for one seed, with the paper's mechanism ``"on"`` or
    under its null control ``"off"`` (see :mod:`tokenbook.rl.verdicts`). Reads
    :func:`seed_tables` (``params`` are its parameters), so *on* and *off* share one set of
    trained models and rollouts; ``boot_seed`` drives only the permutations of the controls
    (changing it recomputes no table and trains nothing)."""
    from ..seeds import derive_seed
    from ..validation import check_choice
    from . import verdicts as V

    check_choice(mechanism, "mechanism", ("on", "off"))
    t = seed_tables(seed, **params)
    grpo, psr, iso, values, probe = (t[k] for k in ("grpo", "psr", "isolated", "values",
                                                    "probe"))
    probe = V.random_sets(probe)      # the claim: random peer sets (the top-scored set aside)
    null = lambda name: derive_seed(seed, "null", name, boot_seed)  # noqa: E731
    if mechanism == "on":
        return {"flip-both-signs": V.flip_balance(grpo),
                "template-less-under-grpo": V.template_share_gap(grpo, psr),
                "boosted-higher-value": V.value_gap(values),
                "peer-masking-same-high-entropy": (V.probe_gap(probe) if len(probe)
                                                   else float("nan"))}
    classes = V.permute_within(grpo["class"].to_numpy(), None, null("template"))
    direction = V.permute_within(values["direction"].to_numpy(), values["rollout"].to_numpy(),
                                 null("value"))
    probe_off = float("nan")
    if len(probe):
        buckets = V.permute_within(V._bucket_names(probe), probe["target"].to_numpy(),
                                   null("probe"))
        probe_off = V.probe_gap(probe, buckets)
    return {"flip-both-signs": V.flip_balance(iso),
            "template-less-under-grpo": V.template_share_gap(grpo, psr, classes),
            "boosted-higher-value": V.value_gap(values, direction),
            "peer-masking-same-high-entropy": probe_off}


def seed_sweep(seeds: Sequence[int], *, boot_seed: int = 0, n_workers: int = 0,
               **params) -> pd.DataFrame:
    """:func:`tokenbook.robustness.over_seeds` of :func:`seed_claims` (kind
    ``rl-cancellation-seed``), through a context-managed Dask client when ``n_workers`` > 0."""
    from functools import partial

    from ..parallel import dask_client
    from ..robustness import over_seeds

    task = partial(seed_claims, boot_seed=boot_seed, **params)
    key = dict(params, boot_seed=boot_seed)
    if n_workers > 0:
        with dask_client(n_workers=n_workers) as client:
            return over_seeds(task, seeds, kind="rl-cancellation-seed", params=key,
                              client=client)
    return over_seeds(task, seeds, kind="rl-cancellation-seed", params=key)


def batching_power(curves: pd.DataFrame, *, reference: str, effect: float = 0.02
                   ) -> dict[str, float]:
    """Power of a paired learning-curve comparison: per-seed sd of the AUC difference of every
    condition against ``reference``, the seeds needed to detect ``effect`` (accuracy, AUC
    units) and the effect the seeds at hand detect (80% power, α = 0.05). One row per
    condition."""
    from .verdicts import min_detectable_effect, required_n

    per_run = (curves[curves["step"] > 0].groupby(["condition", "seed"])["accuracy"].mean()
               .unstack("condition"))
    if reference not in per_run.columns:
        raise ValueError(f"reference {reference!r} is not a condition of curves "
                         f"({list(per_run.columns)})")
    rows = []
    for cond in per_run.columns.drop(reference):
        d = (per_run[cond] - per_run[reference]).dropna().to_numpy()
        sd = float(d.std(ddof=1)) if d.size > 1 else float("nan")
        rows.append({"condition": cond, "reference": reference, "n_seeds": int(d.size),
                     "mean_diff": float(d.mean()) if d.size else float("nan"), "sd": sd,
                     "effect": effect,
                     "seeds_needed": required_n(sd, effect) if np.isfinite(sd) else np.nan,
                     "mde_now": (min_detectable_effect(sd, int(d.size))
                                 if np.isfinite(sd) and d.size > 1 else np.nan)})
    return pd.DataFrame(rows)
