"""The cancellation chapter's analyses with the policy on a CUDA GPU (paper scale runs them
there, ``device: cuda``): on the same rollouts, every one-step table equals the CPU's within
float32 rounding; and the paper-scale path — a ``save_pretrained`` checkpoint and DAPO-Math
parquet loaded with ``device="cuda"``, rollouts sampled there, the size sweep's tables and a
learning curve with its suite score — runs end to end. Marked ``gpu``: skipped (by
tests/conftest.py, with the reason) where CuPy sees no CUDA device."""

from __future__ import annotations

import copy
from dataclasses import replace

import numpy as np
import pandas as pd
import pytest
import torch

from tokenbook.cancellation_hypothesis import dynamics as dyn
from tokenbook.cancellation_hypothesis import experiments as E
from tokenbook.cancellation_hypothesis.grpo import GRPOConfig

pytestmark = pytest.mark.gpu


def _require_gpu() -> None:
    if not torch.cuda.is_available():
        pytest.skip("torch sees no CUDA device")


#: nats: a step's Δ (and the probe's τ) is a difference of two float32 log-probabilities, whose
#: spacing is 2.4e-7 to 4.8e-7 at −2 to −8 nats, so the devices may differ by a few of those
#: (measured on an H200: 4.8e-7)
ULPS = 2e-6


def _close(gpu: pd.DataFrame, cpu: pd.DataFrame, columns, *, rtol: float = 1e-3) -> None:
    assert len(gpu) == len(cpu) > 0
    for col in columns:
        want = cpu[col].to_numpy(dtype=float)
        scale = float(np.abs(want).max()) or 1.0
        np.testing.assert_allclose(gpu[col].to_numpy(dtype=float), want, rtol=rtol,
                                   atol=max(1e-4 * scale, ULPS), err_msg=col)


def test_one_step_tables_on_the_gpu_equal_the_cpu(tiny_batch):
    _require_gpu()
    model, _, roll = tiny_batch(num_layers=1)
    gpu = copy.deepcopy(model).to("cuda")
    runs = {
        "token_dynamics": (lambda m: dyn.token_dynamics(m, roll, lr=0.05),
                           ["logp_before", "logp_after", "delta"]),
        "isolated": (lambda m: dyn.token_dynamics_isolated(m, roll, lr=0.05),
                     ["logp_before", "logp_after", "delta"]),
        "head_only": (lambda m: dyn.token_dynamics(m, roll, lr=0.05, head_only=True), ["delta"]),
        "first_order_full": (lambda m: dyn.first_order_full(m, roll, lr=0.05), ["full", "alone"]),
        "first_order_prediction": (lambda m: dyn.first_order_prediction(m, roll, lr=1e-3),
                                   ["self", "within_rollout", "across_rollouts", "actual"]),
        "coupling_table": (lambda m: dyn.coupling_table(m, roll, max_pairs=300, seed=0),
                           ["phi"]),
        "probe": (lambda m: dyn.peer_masking_probe(m, roll, lr=0.05, n_targets=2, n_sets=2,
                                                   set_size=2, seed=0, progress=False),
                  ["tau"]),
    }
    for name, (run, columns) in runs.items():
        cpu_table, gpu_table = run(model), run(gpu)
        keys = [c for c in cpu_table.columns if c not in columns
                and cpu_table[c].dtype.kind in "iub"]
        pd.testing.assert_frame_equal(gpu_table[keys], cpu_table[keys], obj=name)
        _close(gpu_table, cpu_table, columns)
    assert next(gpu.parameters()).device.type == "cuda"      # analyses step copies
    for p, q in zip(gpu.parameters(), model.parameters()):
        torch.testing.assert_close(p.cpu(), q)                 # the policy itself unchanged


def _parity_reward(text, problem):
    return float(len(text) % 2)


def test_the_paper_scale_path_runs_on_the_gpu(paper_files, monkeypatch):
    _require_gpu()
    monkeypatch.setattr(E, "problem_reward", _parity_reward)   # mixed groups: every step moves
    data = dict(dataset="dapo", data_files=paper_files / "dapo.parquet")
    S = E.setup(scale="paper", model_id=str(paper_files / "ckpt"), n_train=4, n_eval=2,
                device="cuda", **data)
    assert S.device == "cuda"
    model, _ = S.load()
    assert next(model.parameters()).device.type == "cuda"
    size = E.policy_sizes([str(paper_files / "ckpt")], scale="paper")[0]
    t = E.scale_tables(0, size, scale="paper", n_train=4, n_eval=2, group_size=4,
                       analysis_prompts=2, max_new_tokens=6, device="cuda", **data)
    for name in ("grpo", "psr", "isolated", "first_order_full"):
        frame = t[name]
        assert len(frame) > 0, name
        numeric = frame.select_dtypes("number")
        assert np.isfinite(numeric.to_numpy(dtype=float)).all(), name
    assert t["grpo"]["advantage"].abs().max() > 0            # the parity reward mixed a group
    assert t["grpo"]["delta"].abs().max() > 0
    cfg = GRPOConfig(group_size=4, prompts_per_step=2, max_new_tokens=6, lr=0.5)
    curves = E.learning_curves(replace(S, reward_fn=_parity_reward), {"grpo": cfg}, [0],
                               steps=1, eval_every=1, progress=False)
    assert list(curves["step"]) == [0, 1] and curves["accuracy"].between(0, 1).all()
