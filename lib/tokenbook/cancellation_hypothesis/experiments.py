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
* :func:`scale_sweep` — the cheap token-level claims (flip balance, template share gap) per
  policy size × seed, mechanism on and off; :func:`scale_values` picks one size's values.
* :func:`suite_accuracy` — paper scale: one sampled response per row of the evaluation suite
  (``setup(eval_files=...)``), scored per benchmark (avg@k on the ×k repeated benchmarks);
  :func:`suite_results` — the suite tables of every learning-curve run's final policy.
"""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass, field
from functools import partial
from pathlib import Path
from typing import Callable, Sequence

import numpy as np
import pandas as pd

from tokenbook.cache import cached_dir, cached_table
from tokenbook.cancellation_hypothesis import dynamics as dyn, verdicts as V
from tokenbook.cancellation_hypothesis.grpo import GRPOConfig, collect, mixed_groups, train
from tokenbook.cancellation_hypothesis.value import oracle_values, value_of_flips
from tokenbook.cancellation_hypothesis.verdicts import min_detectable_effect, required_n
from tokenbook.claims import BALANCE_PREFIX, KNOWN_PREFIX, MANIPULATION_PREFIX
from tokenbook.data.math import (MathProblem, eval_suite_accuracy, label_math_tokens,
                                 load_dapo_math, load_gsm8k, load_math_eval, problem_reward)
from tokenbook.models.policy import build_policy, char_tokenizer, load_policy, sample, sft_policy
from tokenbook.parallel import dask_client, map_ordered
from tokenbook.robustness import over_seeds, values_by_claim
from tokenbook.seeds import as_seed_sequence, derive_seed
from tokenbook.stats import bootstrap_ci
from tokenbook.validation import check_choice, check_positive_int, check_table
from tokenbook.worlds.arithmetic import (label_tokens, make_problems, on_solution_path, verify,
                                         worked_solution)

EXPERIMENTS_VERSION = "rl-exp-v2"   # v2: GRPO's streams from derive_seed


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
    #: paper scale with ``eval_files``: the evaluation suite's problems (repeated rows kept),
    #: scored by :func:`suite_accuracy`; empty otherwise
    suite: list = field(default_factory=list)


def policy_seed_for(root_seed: int) -> int:
    """The tiny starting policy's seed of a root seed (stream ``policy``): it seeds the
    policy's initialisation, its SFT batches and its world's problems, so every root seed is
    an independent replicate, the starting policy included.

    >>> policy_seed_for(0) != policy_seed_for(1)
    True
    """
    return derive_seed(int(root_seed), "policy")


def root_setup(root_seed: int, *, scale: str = "tiny", seed: int = 0, **kwargs) -> Setup:
    """The :class:`Setup` of one root seed: at the tiny scale the world and the SFT'd starting
    policy of :func:`policy_seed_for` (``seed`` is ignored; cached per root seed, shared by
    that seed's claims, learning curves and size sweep); at the paper scale the pretrained
    checkpoint with the data split of ``seed`` (the same for every root seed). ``kwargs``: the
    other :func:`setup` arguments."""
    if scale == "tiny":
        return setup(scale="tiny", seed=policy_seed_for(root_seed), **kwargs)
    return setup(scale=scale, seed=seed, **kwargs)


def _arith_reward(text, problem):
    return verify(text, problem.answer)


def setup(*, scale: str = "tiny", seed: int = 0, n_train: int = 2000, n_eval: int = 128,
          n_terms: Sequence[int] = (2, 3), digits: Sequence[int] = (1, 1),
          hidden_size: int = 64, num_layers: int = 2, sft_steps: int = 300,
          sft_batch_size: int = 64, sft_lr: float = 3e-3, model_id: str = "",
          dataset: str = "gsm8k", data_files=None, device: str = "cpu",
          eval_files=None, formats: str = "fixed", progress: bool = True) -> Setup:
    """The chapter's world and starting policy at ``scale`` (``"tiny"`` or ``"paper"``).

    Paper scale: ``model_id`` (a hub id or a ``save_pretrained`` folder), ``dataset``
    (``"gsm8k"`` or ``"dapo"``: DAPO-Math-17K) from the hub or local ``data_files``. The
    learning curves' ``eval_problems`` are a held-out split of the same data (``n_eval``
    rows, greedy accuracy: cheap enough to evaluate every few steps). With ``eval_files``
    (local verl-format parquet/JSON files: the LUFFY suite the authors evaluate on, see
    :func:`tokenbook.data.math.load_math_eval`) the suite's rows, repeats included, are also
    read into ``suite``; :func:`suite_accuracy` scores a policy on them and
    ``learning_curves(..., suite=True)`` scores every run's final policy. ``eval_files`` is a
    paper-scale option only. ``formats`` (tiny): the worked solutions' template,
    ``"fixed"`` or ``"variants"`` (:func:`tokenbook.worlds.arithmetic.worked_solution`; part of
    the policy's cache key when not ``"fixed"``).
    """
    if eval_files is not None and scale != "paper":
        raise ValueError(f"eval_files is a paper-scale option (the LUFFY math suite); "
                         f"scale={scale!r} evaluates on its own held-out problems")
    if scale == "tiny":
        world = dict(n_terms=tuple(n_terms), digits=tuple(digits))
        solution = partial(worked_solution, formats=formats, seed=seed)
        if formats != "fixed":          # the fixed world keeps its cache keys
            world = dict(world, formats=formats)
        world_args = {k: v for k, v in world.items() if k != "formats"}
        gen = lambda n, s: make_problems(n, seed=s, **world_args)  # noqa: E731
        folder = sft_policy(gen, solution, n_train=n_train, world_seed=seed,
                            hidden_size=hidden_size, num_layers=num_layers, steps=sft_steps,
                            batch_size=sft_batch_size, lr=sft_lr, seed=seed, world=world,
                            progress=progress)
        train_p = make_problems(n_train, seed=derive_seed(seed, "grpo-problems"), start_id=0,
                                **world_args)
        eval_p = make_problems(n_eval, seed=derive_seed(seed, "eval-problems"),
                               start_id=10 ** 6, **world_args)
        tok = load_policy(folder)[1]
        key = dict(scale=scale, folder=folder.name, n_train=n_train, n_eval=n_eval, seed=seed,
                   **({"formats": formats} if formats != "fixed" else {}))
        return Setup(lambda: load_policy(folder), tok, train_p, eval_p, _arith_reward,
                     label_tokens, key, "cpu")
    if scale == "paper":
        if not model_id:
            raise ValueError("scale='paper' needs model_id (e.g. 'Qwen/Qwen3-1.7B')")
        tok = load_policy(model_id)[1]
        if dataset not in ("gsm8k", "dapo"):
            raise ValueError(f"dataset must be 'gsm8k' or 'dapo', got {dataset!r}")
        n_held = n_eval   # held-out rows of the dataset (the learning curves' evaluation)
        if dataset == "gsm8k" and data_files is None:
            train_p = load_gsm8k("train", n=n_train, seed=seed, tokenizer=tok)
            eval_p = load_gsm8k("test", n=n_eval, seed=seed, tokenizer=tok)
        elif dataset == "gsm8k":   # local files: a seeded split into train and eval
            allp = load_gsm8k(data_files=data_files, n=n_train + n_held, seed=seed,
                              tokenizer=tok)
            train_p, eval_p = allp[:n_train], allp[n_train:]
        else:
            allp = load_dapo_math(n=n_train + n_held, seed=seed, tokenizer=tok,
                                  data_files=data_files)
            train_p, eval_p = allp[:n_train], allp[n_train:]
        suite = load_math_eval(eval_files, tokenizer=tok) if eval_files is not None else []
        key = dict(scale=scale, model_id=model_id, dataset=dataset, n_train=n_train,
                   n_eval=n_eval, seed=seed)
        if eval_files is not None:
            files = [eval_files] if isinstance(eval_files, (str, Path)) else list(eval_files)
            key["eval_files"] = [str(f) for f in files]
        return Setup(lambda: load_policy(model_id, device=device), tok, train_p, eval_p,
                     problem_reward, label_math_tokens, key, device, suite)
    raise ValueError(f"scale must be 'tiny' or 'paper', got {scale!r}")


def analysis_rollouts(s: Setup, cfg: GRPOConfig, *, n_prompts: int = 8, seed: int = 0,
                      min_mixed: int = 4, max_tries: int = 8):
    """(policy, rollouts): ``n_prompts`` training problems × ``cfg.group_size`` rollouts from
    the starting policy, seeded. Draws are retried (new seed) until at least ``min_mixed``
    groups contain both correct and incorrect rollouts, or ``max_tries`` is reached."""
    model, tok = s.load()
    rng = np.random.default_rng(derive_seed(seed, "analysis-prompts"))
    best = None
    for t in range(max_tries):
        pick = rng.choice(len(s.train_problems), n_prompts, replace=False)
        roll = collect(model, tok, [s.train_problems[i] for i in pick], cfg, s.reward_fn,
                       s.label_fn, seed=derive_seed(seed, "analysis-draw", t))
        mixed = mixed_groups(roll.rewards, cfg.group_size)
        if best is None or mixed > best[0]:
            best = (mixed, roll)
        if mixed >= min_mixed:
            break
    return model, best[1]


def _check_seeds(seeds) -> None:
    if isinstance(seeds, (str, int)) or not all(isinstance(x, (int, np.integer)) for x in seeds):
        raise ValueError(f"seeds must be a list of integers, got {seeds!r} "
                         f"(papermill: pass lists with -y 'seeds: [0, 1, 2]')")


def _curve_runs(s: Setup, conditions: dict[str, GRPOConfig], seeds: Sequence[int], *,
                steps: int, eval_every: int, progress: bool, suite: bool, suite_seed: int,
                suite_max_new_tokens: int | None, suite_temperature: float,
                seed_setup: Callable[[int], Setup] | None = None):
    """Yield (condition, seed, curve, suite table or None) for every run, each cached apart:
    ``rl-curve`` (the curve alone) or, with ``suite``, ``rl-curve-suite`` (a folder with the
    curve and the final policy's :func:`suite_accuracy`, computed before the model is
    dropped)."""
    _check_seeds(seeds)
    if suite and not s.suite:
        raise ValueError("suite=True needs a setup with an evaluation suite: "
                         "setup(scale='paper', eval_files=...) (the LUFFY verl parquet)")
    base = s
    for name, cfg in conditions.items():
        for seed in seeds:
            s = seed_setup(int(seed)) if seed_setup is not None else base
            params = _curve_params(s, cfg, seed, steps, eval_every)

            def train_run(cfg=cfg, seed=seed, s=s):
                return _train_run(s, cfg, seed, steps, eval_every, progress)

            if not suite:
                yield name, seed, _curve_table(s, (cfg, seed), steps, eval_every, progress), None
                continue
            tokens = suite_max_new_tokens or cfg.max_new_tokens

            def build(out, f=train_run, seed=seed, tokens=tokens):
                model, curve = f()
                table = suite_accuracy(s, model=model, max_new_tokens=tokens,
                                       temperature=suite_temperature,
                                       seed=derive_seed(suite_seed, "suite-run", seed))
                curve.to_parquet(out / "curve.parquet")
                table.to_parquet(out / "suite.parquet")

            folder = cached_dir("rl-curve-suite",
                                dict(params, suite_seed=suite_seed, suite_max_new_tokens=tokens,
                                     suite_temperature=suite_temperature), build)
            yield (name, seed, pd.read_parquet(folder / "curve.parquet"),
                   pd.read_parquet(folder / "suite.parquet"))


def _curve_params(s: Setup, cfg: GRPOConfig, seed: int, steps: int, eval_every: int) -> dict:
    return dict(version=EXPERIMENTS_VERSION, setup=s.key, cfg=asdict(cfg), seed=seed,
                steps=steps, eval_every=eval_every)


def _train_run(s: Setup, cfg: GRPOConfig, seed: int, steps: int, eval_every: int,
               progress: bool):
    """(trained model, curve) of one GRPO run from a fresh copy of the starting policy."""
    model, tok = s.load()
    curve = train(model, tok, s.train_problems, s.eval_problems, cfg, s.reward_fn,
                  steps=steps, eval_every=eval_every, seed=seed, label_fn=None,
                  progress=progress)
    return model, curve


def _curve_table(s: Setup, run: tuple[GRPOConfig, int], steps: int, eval_every: int,
                 progress: bool = False, seed_setup: Callable[[int], Setup] | None = None
                 ) -> pd.DataFrame:
    """One run's curve (``rl-curve``, cached); ``run`` = (config, seed), one fan-out item;
    ``seed_setup``: the run's own setup from its seed (else ``s``)."""
    cfg, seed = run
    if seed_setup is not None:
        s = seed_setup(int(seed))
    return cached_table("rl-curve", _curve_params(s, cfg, seed, steps, eval_every),
                        lambda: _train_run(s, cfg, seed, steps, eval_every, progress)[1])


def learning_curves(s: Setup, conditions: dict[str, GRPOConfig], seeds: Sequence[int], *,
                    steps: int = 10, eval_every: int = 5, progress: bool = True,
                    suite: bool = False, suite_seed: int = 0,
                    suite_max_new_tokens: int | None = None,
                    suite_temperature: float = 1.0, n_workers: int = 0,
                    seed_setup: Callable[[int], Setup] | None = None) -> pd.DataFrame:
    """One GRPO run per (condition, seed), each from a fresh copy of the starting policy
    (``seed_setup(seed)``'s when given, e.g. ``partial(root_setup, ...)``: every root seed
    its own starting policy; else ``s``'s);
    each run cached separately (``rl-curve``), so an interrupted sweep resumes. Rows:
    ``condition, seed, step, accuracy`` (greedy, on ``s.eval_problems``), ``train_reward``,
    ``n_updates``, ``loss``.

    ``suite=True`` (paper scale, a setup with ``eval_files``) also scores each run's final
    policy on the evaluation suite (:func:`suite_accuracy`: one response per row sampled at
    ``suite_temperature`` with at most ``suite_max_new_tokens`` tokens, default the run's
    ``max_new_tokens``; seeds from ``suite_seed`` and the run's seed) and caches it with the
    curve (``rl-curve-suite``); read those tables with :func:`suite_results`.

    ``n_workers`` ≥ 2 (tiny scale, no suite): the runs not yet cached are trained first on a
    Dask LocalCluster of that many single-threaded processes
    (:func:`tokenbook.parallel.map_ordered`), then read back; the curves are those of the
    same runs trained in this process, up to floating-point summation order (one torch
    thread each)."""
    _check_seeds(seeds)
    if n_workers > 1 and not suite and s.device == "cpu":
        runs = [(cfg, int(seed)) for cfg in conditions.values() for seed in seeds]
        map_ordered(partial(_curve_table, s, steps=steps, eval_every=eval_every,
                            seed_setup=seed_setup), runs,
                    n_workers=n_workers, desc="GRPO runs", progress=progress)
    frames = [curve.assign(condition=name, seed=seed)
              for name, seed, curve, _ in _curve_runs(
                  s, conditions, seeds, steps=steps, eval_every=eval_every, progress=progress,
                  suite=suite, suite_seed=suite_seed, suite_max_new_tokens=suite_max_new_tokens,
                  suite_temperature=suite_temperature, seed_setup=seed_setup)]
    return pd.concat(frames, ignore_index=True)


def suite_results(s: Setup, conditions: dict[str, GRPOConfig], seeds: Sequence[int], *,
                  steps: int = 10, eval_every: int = 5, progress: bool = True,
                  suite_seed: int = 0, suite_max_new_tokens: int | None = None,
                  suite_temperature: float = 1.0) -> pd.DataFrame:
    """The evaluation-suite table of every run's final policy (``learning_curves(...,
    suite=True)`` with the same arguments; read from its cache, runs that are missing are
    trained): :func:`suite_accuracy`'s rows with ``condition`` and ``seed`` columns."""
    frames = [table.assign(condition=name, seed=seed)
              for name, seed, _, table in _curve_runs(
                  s, conditions, seeds, steps=steps, eval_every=eval_every, progress=progress,
                  suite=True, suite_seed=suite_seed, suite_max_new_tokens=suite_max_new_tokens,
                  suite_temperature=suite_temperature)]
    return pd.concat(frames, ignore_index=True)


def curve_summary(curves: pd.DataFrame, *, reference: str | None = None, n_boot: int = 2000,
                  seed: int = 0) -> pd.DataFrame:
    """Per condition: final accuracy and AUC (mean accuracy over evaluations after step 0),
    mean over seeds with a percentile bootstrap 95% CI; with ``reference``, also the mean
    paired (same seed) AUC difference to it and its CI."""
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
#: v3: the isolated control steps one row at a time; v2: probe with the top-scored set, 10 sets,
#: linear masked steps
#: v4: the starting policy of each root seed (policy_seed None), the first-order table
#: v5: the exact first-order table of the full-model step (the flip excess's known answer)
#: v6: the output-layer-only step and its isolated control (grpo_head, isolated_head)
#: v8: the PSR step's first-order table, the probe's first-order τ and the generator's values
#: (the known answers of the template, peer-masking and value claims)
SEED_TABLES_VERSION = "rl-seed-v8"
#: the parameters that define one seed's token tables (the tiny world, policy and analyses)
SEED_PARAMS = ("n_train", "n_eval", "hidden_size", "num_layers", "sft_steps", "sft_lr",
               "policy_seed", "group_size", "analysis_prompts", "max_new_tokens", "temperature",
               "analysis_lr", "first_order_lr", "probe_targets", "probe_sets", "probe_set_size", "value_per_cell",
               "value_continuations", "formats")


def seed_tables(seed: int, *, n_train: int = 2000, n_eval: int = 64, hidden_size: int = 64,
                num_layers: int = 2, sft_steps: int = 200, sft_lr: float = 3e-3,
                policy_seed: int | None = None, group_size: int = 8, analysis_prompts: int = 8,
                max_new_tokens: int = 32, temperature: float = 1.0, analysis_lr: float = 0.05,
                first_order_lr: float = 1e-3, probe_targets: int = 136, probe_sets: int = 10, probe_set_size: int = 3,
                value_per_cell: int = 120, value_continuations: int = 4,
                formats: str = "fixed", probe_processes: int = 1,
                progress: bool = False) -> dict[str, pd.DataFrame]:
    """One seed's token tables (tiny scale), cached together (``rl-seed-tables``, keyed by the
    parameters, the seed and ``SEED_TABLES_VERSION`` — bump it when the analyses change):

    ``grpo`` (token dynamics of one full-batch GRPO SGD step), ``psr`` (the same rollouts with
    positive-only advantages), ``isolated`` (each rollout updated alone: the coupling-off
    control), ``grpo_head`` / ``isolated_head`` (the same two steps with only the output layer
    moving), ``first_order`` (the closed-form first-order prediction of an output-layer SGD
    step of size ``first_order_lr`` on the same batch, self / within-rollout / cross-rollout
    terms: the flip excess's known answer), ``values`` (MC values of boosted/suppressed
    tokens), ``probe`` (peer masking:
    ``probe_targets`` targets × 8 buckets × (``probe_sets`` random sets + the authors'
    top-scored set), see :func:`tokenbook.cancellation_hypothesis.dynamics.peer_masking_probe`).

    Streams from the root ``seed`` (:func:`tokenbook.seeds.derive_seed`): ``rollouts`` (which
    prompts, which samples), ``value`` (which tokens, which continuations), ``probe`` (targets,
    peer sets). The starting policy (and its world's problems) are the root seed's own,
    :func:`policy_seed_for` (``policy_seed=None``, the default: every root seed an independent
    replicate; its SFT is cached, so the seed's claims, learning curves and size sweep share
    it); an int ``policy_seed`` shares one policy across seeds. ``probe_processes``: the
    processes of the peer-masking probe (1 or 2; the same numbers either way, not part of the
    cache key).
    """
    params = dict(version=SEED_TABLES_VERSION, seed=int(seed),
                  **{k: v for k, v in locals().items() if k in SEED_PARAMS})
    names = ("grpo", "psr", "isolated", "first_order", "first_order_full", "first_order_psr",
             "grpo_head", "isolated_head", "values", "probe", "oracle_values")
    ps = policy_seed_for(seed) if policy_seed is None else int(policy_seed)

    def build(out):
        S = setup(scale="tiny", seed=ps, n_train=n_train, n_eval=n_eval,
                  hidden_size=hidden_size, num_layers=num_layers, sft_steps=sft_steps,
                  sft_lr=sft_lr, formats=formats, progress=progress)
        policy, roll, (grpo, psr, iso, fo, ff, ffp, grpo_head, iso_head) = _update_tables(
            S, seed, group_size=group_size, analysis_prompts=analysis_prompts,
            max_new_tokens=max_new_tokens, temperature=temperature, analysis_lr=analysis_lr,
            first_order_lr=first_order_lr)
        by_id = {p.id: p for p in S.train_problems}
        values = value_of_flips(policy, S.tokenizer, roll, grpo, by_id, S.reward_fn,
                                n_per_cell=value_per_cell, n_continuations=value_continuations,
                                seed=derive_seed(seed, "value"), max_new_tokens=max_new_tokens,
                                temperature=temperature)
        probe = dyn.peer_masking_probe(policy, roll, lr=analysis_lr, n_targets=probe_targets,
                                       n_sets=probe_sets, set_size=probe_set_size,
                                       seed=derive_seed(seed, "probe"),
                                       processes=probe_processes, progress=progress)
        oracle = oracle_values(grpo, ff, by_id, partial(on_solution_path, formats=formats))
        for name, frame in zip(names, (grpo, psr, iso, fo, ff, ffp, grpo_head, iso_head, values,
                                       probe, oracle)):
            frame.to_parquet(out / f"{name}.parquet")

    folder = cached_dir("rl-seed-tables", params, build)
    return {name: pd.read_parquet(folder / f"{name}.parquet") for name in names}


def _update_tables(s: Setup, seed: int, *, group_size: int, analysis_prompts: int,
                   max_new_tokens: int, temperature: float, analysis_lr: float,
                   first_order_lr: float = 1e-3, head: bool = True):
    """(policy, rollouts, (grpo, psr, isolated, first_order, first_order_full,
    first_order_psr, grpo_head, isolated_head)): one seed's analysis batch (stream
    ``rollouts`` of the root ``seed``), its three one-step token dynamics tables, the
    first-order output-layer prediction of the same batch, the exact first-order Δ of the
    same full-model step (:func:`tokenbook.cancellation_hypothesis.dynamics.first_order_full`,
    full batch and each rollout alone: the flip excess's known answer) and of the PSR step
    (full batch: with ``first_order_full`` the template claim's known answer), and the
    full-batch and isolated steps of the output layer alone (``first_order`` is their known
    answer; ``head=False``: not computed, the tuple ends at ``first_order_psr``)."""
    cfg = GRPOConfig(group_size=group_size, prompts_per_step=analysis_prompts,
                     max_new_tokens=max_new_tokens, temperature=temperature)
    policy, roll = analysis_rollouts(s, cfg, n_prompts=analysis_prompts,
                                     seed=derive_seed(seed, "rollouts"))
    # paper scale: the full batch's gradients and Jacobian-vector products one rollout at a
    # time, the same steps at the memory of one rollout (at once, the exact first-order Δ of a
    # Qwen3-1.7B batch did not fit an H200, and its SGD step took 95 GB of it); tiny scale keeps
    # the one pass its tables were built by
    rows = 1 if s.key.get("scale") == "paper" else None
    grpo = dyn.token_dynamics(policy, roll, lr=analysis_lr, rows_per_pass=rows)
    psr_roll = dyn.with_estimator(roll, group_size, "psr")
    psr = dyn.token_dynamics(policy, psr_roll, lr=analysis_lr, rows_per_pass=rows)
    iso = dyn.token_dynamics_isolated(policy, roll, lr=analysis_lr)
    fo = dyn.first_order_prediction(policy, roll, lr=first_order_lr)
    ff = dyn.first_order_full(policy, roll, lr=analysis_lr, rows_per_pass=rows)
    ffp = dyn.first_order_full(policy, psr_roll, lr=analysis_lr, alone=False, rows_per_pass=rows)
    if not head:
        return policy, roll, (grpo, psr, iso, fo, ff, ffp)
    grpo_head = dyn.token_dynamics(policy, roll, lr=analysis_lr, head_only=True,
                                   rows_per_pass=rows)
    iso_head = dyn.token_dynamics_isolated(policy, roll, lr=analysis_lr, head_only=True)
    return policy, roll, (grpo, psr, iso, fo, ff, ffp, grpo_head, iso_head)


def _update_claims(grpo: pd.DataFrame, psr: pd.DataFrame, iso: pd.DataFrame,
                   fo: pd.DataFrame | None, seed: int, mechanism: str, *, boot_seed: int = 0,
                   ff: pd.DataFrame | None = None,
                   head: tuple[pd.DataFrame, pd.DataFrame] | None = None,
                   ffp: pd.DataFrame | None = None) -> dict[str, float]:
    """The statistics one update's token tables decide (on / off, as in :func:`seed_claims`):
    ``flip-excess`` (on: full-batch − isolated flip ratios; off: isolated − isolated, 0 by
    construction) with its known answer ``known:flip-excess`` (the exact first-order Δ of the
    same full-model step on the same batch, ``ff`` =
    :func:`tokenbook.cancellation_hypothesis.dynamics.first_order_full`: full batch − each rollout alone; off 0),
    with ``head`` = (full-batch, isolated) output-layer-only tables and ``fo``:
    ``flip-excess-output-layer`` (the same statistic for the output-layer step; known answer
    :func:`~tokenbook.cancellation_hypothesis.verdicts.predicted_flip_excess` of ``fo``, the
    closed form; manipulation check :func:`~tokenbook.cancellation_hypothesis.verdicts.coupling_dominance`
    of ``fo`` on, 0 off: the isolated control has no cross-rollout term), descriptions (no claims, equal on and off where they describe the batch):
    ``describe:flip-excess-output-layer`` (the closed form of an output-layer-only step,
    ``fo``: the linear-softmax part of the coupling), ``describe:flip-sign-agreement`` (share
    of loss tokens whose measured Δ has the sign of its first-order Δ: how linear the
    analysis step is; on the full step, off the isolated one), ``flip-both-signs`` (the flip
    balance of the full-batch step on, of the isolated control off),
    ``describe:template-mean-p`` / ``describe:template-entropy``
    (:func:`tokenbook.cancellation_hypothesis.verdicts.template_confidence`) and ``template-less-under-grpo`` (on:
    the world's classes; off: classes permuted, stream ``null/template`` of ``seed`` and
    ``boot_seed``) with its known answer ``known:template-less-under-grpo`` (the same
    statistic on the exact first-order Δs of the GRPO step, ``ff``, and of the PSR step,
    ``ffp``; off: the same permuted classes)."""
    known = V.first_order_flip_excess(ff) if ff is not None else float("nan")
    conf = V.template_confidence(grpo)       # descriptions: the same on and off
    described = {"describe:template-mean-p": conf["mean_p"],
                 "describe:template-entropy": conf["entropy"],
                 # the template claim's precondition (on only): template tokens can move
                 MANIPULATION_TEMPLATE: conf["entropy"],
                 "describe:flip-excess-output-layer": (V.predicted_flip_excess(fo)
                                                       if fo is not None else float("nan"))}
    layer: dict[str, float] = {}
    if head is not None and fo is not None:
        grpo_head, iso_head = head
        on = mechanism == "on"
        layer = {FLIP_HEAD: V.flip_excess(grpo_head if on else iso_head, iso_head),
                 KNOWN_PREFIX + FLIP_HEAD: V.predicted_flip_excess(fo) if on else 0.0,
                 MANIPULATION_PREFIX + FLIP_HEAD: V.coupling_dominance(fo) if on else 0.0,
                 BALANCE_PREFIX + FLIP_HEAD: V.scored_tokens(grpo_head if on else iso_head)}
    first_order = ((grpo.assign(delta=ff["full"].to_numpy()),
                    psr.assign(delta=ffp["full"].to_numpy()))
                   if ff is not None and ffp is not None else None)
    if mechanism == "on":
        if first_order is not None:
            layer[KNOWN_TEMPLATE] = V.template_share_gap(*first_order)
        return {**layer, "flip-excess": V.flip_excess(grpo, iso), KNOWN_FLIP: known,
                MANIPULATION_FLIP: (V.coupling_dominance(ff) if ff is not None
                                    else float("nan")),
                BALANCE_FLIP: V.scored_tokens(grpo),
                BALANCE_TEMPLATE: float((grpo["class"] == "template").mean()),
                "describe:flip-sign-agreement": (V.sign_agreement(grpo, ff, "full")
                                                 if ff is not None else float("nan")),
                "flip-both-signs": V.flip_balance(grpo), **described,
                "template-less-under-grpo": V.template_share_gap(grpo, psr)}
    classes = V.permute_within(grpo["class"].to_numpy(), None,
                               derive_seed(seed, "null", "template", boot_seed))
    if first_order is not None:
        layer[KNOWN_TEMPLATE] = V.template_share_gap(*first_order, classes)
    return {**layer, "flip-excess": V.flip_excess(iso, iso), KNOWN_FLIP: 0.0 * known,
            MANIPULATION_FLIP: 0.0 * known, BALANCE_FLIP: V.scored_tokens(iso),
            BALANCE_TEMPLATE: float((classes == "template").mean()),
            "describe:flip-sign-agreement": (V.sign_agreement(iso, ff, "alone")
                                             if ff is not None else float("nan")),
            "flip-both-signs": V.flip_balance(iso), **described,
            "template-less-under-grpo": V.template_share_gap(grpo, psr, classes)}


#: the seed-table row of the flip excess's known answer (read by :func:`claim_specs`' spec)
KNOWN_FLIP = "known:flip-excess"
#: the known answers of the template, value and peer-masking claims (seed-table rows)
KNOWN_TEMPLATE = "known:template-less-under-grpo"
KNOWN_VALUE = "known:boosted-higher-value"
KNOWN_PROBE = "known:peer-masking-same-high-entropy"
#: the value and peer-masking claims' manipulation checks: Cohen's κ of the labels the
#: statistic reads with the tokens' own (1 on; the permuted control about 0), and the
#: peer-masking balance row: the share of random peer sets in the same-token, high-entropy
#: bucket (a permutation within target keeps it)
MANIPULATION_VALUE = "manipulation:boosted-higher-value"
MANIPULATION_PROBE = "manipulation:peer-masking-same-high-entropy"
BALANCE_PROBE = "balance:peer-masking-same-high-entropy"
#: the flip excess of the output-layer-only step (its known, manipulation and balance rows
#: carry the prefixes of :mod:`tokenbook.claims`)
FLIP_HEAD = "flip-excess-output-layer"
#: the template claim's manipulation check: mean template-token entropy before the update
MANIPULATION_TEMPLATE = "manipulation:template-less-under-grpo"
#: balance rows (:data:`tokenbook.claims.BALANCE_PREFIX`): what on and off must share —
#: the scored tokens of the flip excess (the same batch's loss tokens with A ≠ 0), the
#: template share of the tokens (a permutation keeps it), the boosted share of the valued
#: tokens per rollout sign (a permutation within sign keeps it)
BALANCE_FLIP = "balance:flip-excess"
#: the flip excess's manipulation check: the share of scored tokens whose cross-rollout
#: first-order term outweighs their own rollout's, in the full-model step (0 off: the isolated
#: control has no cross-rollout term)
MANIPULATION_FLIP = "manipulation:flip-excess"
BALANCE_TEMPLATE = "balance:template-less-under-grpo"
BALANCE_VALUE = "balance:boosted-higher-value"


def _build_seed_tables(seed: int, **params) -> None:
    seed_tables(seed, **params)


def probe_tables(seeds: Sequence[int], *, n_workers: int = 0, **params) -> pd.DataFrame:
    """The peer-masking probes of several seeds (:func:`seed_tables`, cached), stacked with a
    ``seed`` column, so that :func:`tokenbook.cancellation_hypothesis.verdicts.probe_bucket_summary` and
    :func:`tokenbook.cancellation_hypothesis.verdicts.probe_power` pool their targets (units ``seed:target``).
    ``n_workers`` ≥ 2: the seeds' tables not yet cached are computed on that many
    single-threaded Dask processes first (:func:`tokenbook.parallel.map_ordered`); otherwise
    here, one seed after another, with each probe's one-thread passes split over two
    processes where the machine has two cores (``probe_processes``; the same numbers)."""
    _check_seeds(seeds)
    if n_workers > 1:
        map_ordered(partial(_build_seed_tables, **params), [int(s) for s in seeds],
                    n_workers=n_workers, desc="seed tables", progress=params.get("progress", True))
    elif "probe_processes" not in params:
        params = dict(params, probe_processes=2 if (os.cpu_count() or 1) >= 2 else 1)
    frames = [seed_tables(int(s), **params)["probe"].assign(seed=int(s)) for s in seeds]
    return pd.concat(frames, ignore_index=True)


def seed_claims(seed: int, mechanism: str, *, boot_seed: int = 0, **params) -> dict[str, float]:
    """Each tiny-scale claim's statistic for one seed, with the paper's mechanism ``"on"`` or
    under its null control ``"off"`` (see :mod:`tokenbook.cancellation_hypothesis.verdicts`). Reads
    :func:`seed_tables` (``params`` are its parameters), so *on* and *off* share one set of
    trained models and rollouts; ``boot_seed`` drives only the permutations of the controls
    (changing it recomputes no table and trains nothing)."""
    check_choice(mechanism, "mechanism", ("on", "off"))
    t = seed_tables(seed, **params)
    grpo, psr, iso, fo, values, probe = (t[k] for k in ("grpo", "psr", "isolated",
                                                        "first_order", "values", "probe"))
    ff, ffp = t.get("first_order_full"), t.get("first_order_psr")
    head = (t["grpo_head"], t["isolated_head"])
    probe = V.random_sets(probe)      # the claim: random peer sets (the top-scored set aside)
    null = lambda name: derive_seed(seed, "null", name, boot_seed)  # noqa: E731
    cheap = _update_claims(grpo, psr, iso, fo, seed, mechanism, boot_seed=boot_seed, ff=ff,
                           head=head, ffp=ffp)
    oracle = t["oracle_values"]
    probe_fo = probe.assign(tau=probe["tau_first_order"])
    own_buckets = V.probe_bucket_names(probe)
    if mechanism == "on":
        return {**cheap, "boosted-higher-value": V.value_gap(values),
                KNOWN_VALUE: V.value_gap(oracle),
                MANIPULATION_VALUE: V.label_agreement(values["direction"], values["direction"]),
                BALANCE_VALUE: V.boosted_share(values),
                "peer-masking-same-high-entropy": (V.probe_gap(probe) if len(probe)
                                                   else float("nan")),
                KNOWN_PROBE: V.probe_gap(probe_fo) if len(probe) else float("nan"),
                MANIPULATION_PROBE: V.label_agreement(own_buckets, own_buckets),
                BALANCE_PROBE: _same_high_share(own_buckets)}
    direction = V.permute_within(values["direction"].to_numpy(), values["rollout"].to_numpy(),
                                 null("value"))
    oracle_direction = V.permute_within(oracle["direction"].to_numpy(),
                                        oracle["rollout"].to_numpy(), null("value-known"))
    probe_off = known_probe_off = float("nan")
    buckets = own_buckets
    if len(probe):
        buckets = V.permute_within(own_buckets, probe["target"].to_numpy(), null("probe"))
        probe_off = V.probe_gap(probe, buckets)
        known_probe_off = V.probe_gap(probe_fo, buckets)
    return {**cheap, "boosted-higher-value": V.value_gap(values, direction),
            KNOWN_VALUE: V.value_gap(oracle, oracle_direction),
            MANIPULATION_VALUE: V.label_agreement(direction, values["direction"]),
            BALANCE_VALUE: V.boosted_share(values, direction),
            "peer-masking-same-high-entropy": probe_off, KNOWN_PROBE: known_probe_off,
            MANIPULATION_PROBE: V.label_agreement(buckets, own_buckets),
            BALANCE_PROBE: _same_high_share(buckets)}


def _same_high_share(buckets: np.ndarray) -> float:
    """Share of probe rows labelled ``same/high`` (NaN without rows)."""
    return float(np.mean(np.asarray(buckets) == "same/high")) if len(buckets) else float("nan")


def run_seeds(seeds: Sequence[int], *, boot_seed: int = 0, n_workers: int = 0,
               **params) -> pd.DataFrame:
    """:func:`tokenbook.robustness.over_seeds` of :func:`seed_claims` (kind
    ``rl-cancellation-seed``), through a context-managed Dask client when ``n_workers`` > 0."""
    task = partial(seed_claims, boot_seed=boot_seed, **params)
    key = dict(params, boot_seed=boot_seed)
    if n_workers > 0:
        with dask_client(n_workers=n_workers) as client:
            return over_seeds(task, seeds, kind="rl-cancellation-seed", params=key,
                              client=client)
    return over_seeds(task, seeds, kind="rl-cancellation-seed", params=key)


def flip_excess_by_seed(seeds: Sequence[int], **params) -> pd.DataFrame:
    """Which advantage sign sets each root seed's flip excess (the claim takes the smaller):
    per seed and sign, the full-batch step's flip ratio − the isolated control's, measured
    (``measured``: the all-parameter step, :func:`seed_tables`' ``grpo`` vs ``isolated``) and
    by its known answer (``known``: the exact first-order Δ, ``first_order_full``). Reads
    :func:`seed_tables` (``params``: its parameters; cached after :func:`run_seeds`). Columns
    ``seed, sign, measured, known`` (differences of shares)."""
    rows = []
    for seed in as_seed_sequence(seeds):
        t = seed_tables(seed, **params)
        measured = V.flip_excess_by_sign(t["grpo"], t["isolated"])
        ff = t["first_order_full"]
        known = V.flip_excess_by_sign(ff, ff, delta_full="full", delta_isolated="alone")
        rows += [{"seed": int(seed), "sign": sign, "measured": measured[sign],
                  "known": known[sign]} for sign in ("positive", "negative")]
    return pd.DataFrame(rows)


def batching_power(curves: pd.DataFrame, *, reference: str, effect: float = 0.02
                   ) -> dict[str, float]:
    """Power of a paired learning-curve comparison: per-seed sd of the AUC difference of every
    condition against ``reference``, the seeds needed to detect ``effect`` (accuracy, AUC
    units) and the effect the seeds at hand detect (80% power, α = 0.05). One row per
    condition."""
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


# ----------------------------------------------------------------------------- policy sizes
# v3: per-root-seed policies, first-order table; v4: full-model first order; v5: every stream
# from derive_seed; v6: the PSR step's first-order table (the template claim's known answer)
SCALE_TABLES_VERSION = "rl-scale-v6"
#: the claims :func:`scale_sweep` computes per size (the ones one update's token tables decide)
SCALE_CLAIMS = ("flip-excess", "template-less-under-grpo")
_TINY_HEADS = 4     # sft_policy's attention heads: the hidden size must be a multiple


@dataclass(frozen=True)
class PolicySize:
    """One policy size of :func:`scale_sweep`: tiny (``hidden_size`` × ``num_layers`` of the
    tiny Qwen2 policy) or paper (``model_id``, a hub id or folder). ``label`` names it in
    tables and figures (``"64×2"``, ``"Qwen3-1.7B"``)."""

    label: str
    hidden_size: int | None = None
    num_layers: int | None = None
    model_id: str | None = None


def policy_sizes(sizes: Sequence, *, scale: str = "tiny") -> list[PolicySize]:
    """``sizes`` checked and named: at ``scale="tiny"`` a list of ``[hidden_size, num_layers]``
    pairs (positive whole numbers, the hidden size a multiple of the policy's 4 attention
    heads); at ``scale="paper"`` a list of model ids (``"Qwen/Qwen3-1.7B"`` or a folder).
    Duplicates and empty lists raise ValueError.

    >>> [s.label for s in policy_sizes([[32, 2], [64, 2]])]
    ['32×2', '64×2']
    >>> policy_sizes(["Qwen/Qwen3-1.7B"], scale="paper")[0].label
    'Qwen3-1.7B'
    """
    check_choice(scale, "scale", ("tiny", "paper"))
    if isinstance(sizes, (str, bytes)) or not isinstance(sizes, Sequence) or not len(sizes):
        want = ("a list of [hidden_size, num_layers] pairs, e.g. [[32, 2], [64, 2]]"
                if scale == "tiny" else "a list of model ids, e.g. ['Qwen/Qwen3-1.7B']")
        raise ValueError(f"sizes must be {want}; got {sizes!r}")
    out = []
    for i, size in enumerate(sizes):
        if scale == "tiny":
            if isinstance(size, (str, bytes)) or not isinstance(size, Sequence) \
                    or len(size) != 2:
                raise ValueError(f"sizes[{i}] = {size!r}: a tiny size is a pair "
                                 f"[hidden_size, num_layers], e.g. [64, 2]")
            h = check_positive_int(size[0], f"sizes[{i}] hidden_size")
            n = check_positive_int(size[1], f"sizes[{i}] num_layers")
            if h % _TINY_HEADS:
                raise ValueError(f"sizes[{i}] hidden_size {h} must be a multiple of the tiny "
                                 f"policy's {_TINY_HEADS} attention heads")
            out.append(PolicySize(f"{h}×{n}", hidden_size=h, num_layers=n))
        else:
            if not isinstance(size, str) or not size.strip():
                raise ValueError(f"sizes[{i}] = {size!r}: a paper-scale size is a model id "
                                 f"(e.g. 'Qwen/Qwen3-4B') or a checkpoint folder")
            out.append(PolicySize(size.rstrip("/").split("/")[-1], model_id=size))
    labels = [s.label for s in out]
    dup = sorted({x for x in labels if labels.count(x) > 1})
    if dup:
        raise ValueError(f"sizes: {dup} given more than once")
    return out


def tiny_policy_params(hidden_size: int, num_layers: int) -> int:
    """Parameters of the tiny Qwen2 policy (:func:`tokenbook.models.policy.build_policy` with
    the chapter's character tokenizer and 4 heads), counted on a freshly built model."""
    model = build_policy(char_tokenizer(), hidden_size=hidden_size, num_layers=num_layers,
                         num_heads=_TINY_HEADS)
    return int(sum(p.numel() for p in model.parameters()))


def scale_tables(seed: int, size: PolicySize, *, scale: str = "tiny", n_train: int = 2000,
                 n_eval: int = 64, sft_steps: int = 200, sft_lr: float = 3e-3,
                 policy_seed: int | None = None, group_size: int = 8,
                 analysis_prompts: int = 8, max_new_tokens: int = 32,
                 temperature: float = 1.0, analysis_lr: float = 0.05,
                 first_order_lr: float = 1e-3, formats: str = "fixed", dataset: str = "gsm8k", data_files=None, device: str = "cpu",
                 progress: bool = False) -> dict:
    """One (size, seed)'s token tables, cached together (``rl-scale-tables``, keyed by the
    size, the parameters, the seed and ``SCALE_TABLES_VERSION``): ``grpo``, ``psr`` and
    ``isolated`` exactly as :func:`seed_tables` computes them (same streams of the root
    ``seed``), and ``n_params`` (the policy's parameter count). The starting policy of a tiny
    size is SFT'd once with ``policy_seed`` (cached by its own parameters); a paper size is
    ``setup(scale="paper", model_id=size.model_id, ...)``."""
    params = dict(version=SCALE_TABLES_VERSION, scale=scale, size=asdict(size), seed=int(seed),
                  n_train=n_train, n_eval=n_eval, policy_seed=policy_seed,
                  group_size=group_size, analysis_prompts=analysis_prompts,
                  max_new_tokens=max_new_tokens, temperature=temperature,
                  analysis_lr=analysis_lr, first_order_lr=first_order_lr)
    if scale == "tiny":
        params.update(sft_steps=sft_steps, sft_lr=sft_lr, formats=formats)
    else:
        params.update(dataset=dataset, data_files=data_files)
    names = ("grpo", "psr", "isolated", "first_order", "first_order_full", "first_order_psr")
    ps = policy_seed_for(seed) if policy_seed is None else int(policy_seed)

    def build(out):
        if scale == "tiny":
            S = setup(scale="tiny", seed=ps, n_train=n_train, n_eval=n_eval,
                      hidden_size=size.hidden_size, num_layers=size.num_layers,
                      sft_steps=sft_steps, sft_lr=sft_lr, formats=formats, progress=progress)
        else:
            S = setup(scale="paper", seed=0 if policy_seed is None else policy_seed,
                      n_train=n_train, n_eval=n_eval,
                      model_id=size.model_id, dataset=dataset, data_files=data_files,
                      device=device, progress=progress)
        policy, _, frames = _update_tables(
            S, seed, group_size=group_size, analysis_prompts=analysis_prompts,
            max_new_tokens=max_new_tokens, temperature=temperature, analysis_lr=analysis_lr,
            first_order_lr=first_order_lr, head=False)
        for name, frame in zip(names, frames):
            frame.to_parquet(out / f"{name}.parquet")
        n = int(sum(p.numel() for p in policy.parameters()))
        pd.DataFrame({"n_params": [n]}).to_parquet(out / "meta.parquet")

    folder = cached_dir("rl-scale-tables", params, build)
    t = {name: pd.read_parquet(folder / f"{name}.parquet") for name in names}
    t["n_params"] = int(pd.read_parquet(folder / "meta.parquet")["n_params"].iloc[0])
    return t


def _build_scale_tables(job: tuple[int, PolicySize], **kwargs) -> None:
    seed, size = job
    scale_tables(seed, size, **kwargs)


def scale_sweep(sizes: Sequence, seeds: Sequence[int], *, scale: str = "tiny",
                boot_seed: int = 0, dataset: str = "gsm8k",
                data_files=None, device: str = "cpu", progress: bool = True,
                n_workers: int = 0, **params) -> pd.DataFrame:
    """The cheap token-level claims at several policy sizes: for every size × root seed, the
    statistics of :data:`SCALE_CLAIMS` with the mechanism on and off, as :func:`seed_claims`
    defines them (flip balance min/max of Pr(Δ<0 | correct), Pr(Δ>0 | failed), a ratio in
    [0, 1]; template share of Σ abs(Δ), GRPO − PSR, a difference of shares). No probe, no MC
    values: one rollout batch and three SGD steps' tables per (size, seed)
    (:func:`scale_tables`, cached).

    ``sizes``: see :func:`policy_sizes` (tiny: ``[hidden_size, num_layers]`` pairs; paper:
    model ids, each loaded through ``setup(scale="paper", model_id=...)`` with ``dataset``,
    ``data_files`` and ``device``). ``params``: the :func:`seed_tables` parameters
    (:data:`SEED_PARAMS`); at the tiny scale the size equal to their ``hidden_size`` ×
    ``num_layers`` (the chapter's policy) is read from :func:`seed_tables` — cached by the
    chapter's seed sweep, so it costs nothing there and its values equal the seed sweep's.

    ``n_workers`` ≥ 2 (tiny scale): the (size, seed) tables not yet cached are computed first
    on that many single-threaded Dask processes (:func:`tokenbook.parallel.map_ordered`;
    seeds in the outer loop, so the sizes' fine-tunings start side by side).

    Returns the tidy table ``size, hidden_size, num_layers, model_id, n_params, seed,
    mechanism, claim_id, value``, sizes in the given order.
    """
    from tqdm.auto import tqdm

    unknown = sorted(set(params) - set(SEED_PARAMS))
    if unknown:
        raise TypeError(f"scale_sweep: unknown parameter(s) {unknown}; the parameters are "
                        f"{list(SEED_PARAMS)}")
    seeds = as_seed_sequence(seeds)
    spec = policy_sizes(sizes, scale=scale)
    keep = ("n_train", "n_eval", "sft_steps", "sft_lr", "policy_seed", "group_size",
            "analysis_prompts", "max_new_tokens", "temperature", "analysis_lr",
            "first_order_lr", "formats")
    own = {k: v for k, v in params.items() if k in keep}
    chapter_size = (params.get("hidden_size", 64), params.get("num_layers", 2))
    if n_workers > 1 and scale == "tiny":
        jobs = [(int(s), size) for s in seeds for size in spec
                if (size.hidden_size, size.num_layers) != chapter_size]
        map_ordered(partial(_build_scale_tables, scale=scale, **own), jobs,
                    n_workers=n_workers, desc="policy sizes × seeds (tables)", progress=progress)
    rows = []
    bar = tqdm(total=len(spec) * len(seeds), desc="policy sizes × seeds", disable=not progress)
    for size in spec:
        reuse = scale == "tiny" and (size.hidden_size, size.num_layers) == chapter_size
        n_params = tiny_policy_params(size.hidden_size, size.num_layers) if reuse else None
        for s in seeds:
            if reuse:
                t = seed_tables(s, **params)
            else:
                t = scale_tables(s, size, scale=scale, dataset=dataset,
                                 data_files=data_files, device=device, **own)
                n_params = t["n_params"]
            for mechanism in ("on", "off"):
                values = _update_claims(t["grpo"], t["psr"], t["isolated"],
                                        t.get("first_order"), s, mechanism,
                                        boot_seed=boot_seed, ff=t.get("first_order_full"),
                                        ffp=t.get("first_order_psr"))
                rows += [{"size": size.label, "hidden_size": size.hidden_size,
                          "num_layers": size.num_layers, "model_id": size.model_id,
                          "n_params": n_params, "seed": s, "mechanism": mechanism,
                          "claim_id": cid, "value": float(v)} for cid, v in values.items()]
            bar.update()
    bar.close()
    return pd.DataFrame(rows)


def scale_values(table: pd.DataFrame, size: str, claim_id: str
                 ) -> tuple[list[float], list[float]]:
    """``(values_on, values_off)`` of one claim at one size of :func:`scale_sweep`'s table (by
    seed), for :meth:`tokenbook.claims.Claim.over_seeds`."""
    check_table(table, "scale table", columns=["size", "seed", "mechanism", "claim_id",
                                                "value"])
    if size not in set(table["size"]):
        raise ValueError(f"scale table: no size {size!r} (sizes there: "
                         f"{list(pd.unique(table['size']))})")
    return values_by_claim(table[table["size"] == size], claim_id)


# ----------------------------------------------------------------------------- paper: the suite
def suite_accuracy(s: Setup, *, model=None, max_new_tokens: int = 512,
                   temperature: float = 1.0, seed: int = 0, batch_size: int = 64
                   ) -> pd.DataFrame:
    """Accuracy of the policy on the evaluation suite of a paper-scale :class:`Setup` built
    with ``eval_files``: one response per suite row, sampled at ``temperature`` (plain
    ancestral sampling, :func:`tokenbook.models.policy.sample`; the ×k repeated rows get
    independent samples, so a repeated benchmark's accuracy is avg@k, e.g. AIME24/25 and AMC
    avg@32 as the authors report), scored by
    :func:`tokenbook.data.math.eval_suite_accuracy` (one row per benchmark, then ``all`` and
    ``macro``). ``model`` defaults to a fresh copy of the starting policy (``s.load()``);
    batch ``b`` of ``batch_size`` rows samples with seed ``derive_seed(seed, "suite", b)``.
    """
    problems = list(s.suite)
    if not problems or not all(isinstance(p, MathProblem) and p.source is not None
                               for p in problems):
        raise ValueError("suite_accuracy needs a paper-scale setup with an evaluation suite: "
                         "setup(scale='paper', eval_files=...) (the LUFFY verl parquet)")
    check_positive_int(batch_size, "batch_size")
    check_positive_int(max_new_tokens, "max_new_tokens")
    if not temperature > 0:
        raise ValueError(f"temperature must be > 0 for avg@k sampling, got {temperature}")
    if model is None:
        model = s.load()[0]
    responses: list[str] = []
    for b, lo in enumerate(range(0, len(problems), batch_size)):
        chunk = problems[lo:lo + batch_size]
        out = sample(model, s.tokenizer, [p.prompt for p in chunk], n=1,
                     temperature=temperature, max_new_tokens=max_new_tokens,
                     seed=derive_seed(seed, "suite", b))
        responses += list(out.texts)
    return eval_suite_accuracy(problems, responses)
