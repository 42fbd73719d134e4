"""Shared fixtures of the RL tests: the tiny policy and its analysis batch, and the paper-scale
files (a checkpoint folder and DAPO-Math / LUFFY parquet in verl's layout)."""

import pandas as pd
import pytest
import torch

from tokenbook.models.policy import build_policy, char_tokenizer
from tokenbook.cancellation_hypothesis.dynamics import with_estimator
from tokenbook.cancellation_hypothesis.grpo import GRPOConfig, collect
from tokenbook.worlds.arithmetic import label_tokens, make_problems


def _tiny_batch(num_layers: int = 1):
    """A tiny char-level policy and a 3-prompt × 4-rollout batch with fixed rewards and GRPO
    advantages: ``(model, tokenizer, rollouts)``."""
    tok = char_tokenizer()
    model = build_policy(tok, hidden_size=32, num_layers=num_layers, num_heads=2, seed=0)
    cfg = GRPOConfig(group_size=4, max_new_tokens=6)
    roll = collect(model, tok, make_problems(3, seed=0), cfg, lambda t, p: 0.0, label_tokens,
                   seed=0)
    roll.rewards = torch.tensor([1., 0., 0., 1., 0., 1., 1., 1., 0., 0., 1., 0.])
    return model, tok, with_estimator(roll, 4, "grpo")


@pytest.fixture(scope="session")
def tiny_batch():
    """:func:`_tiny_batch` as a fixture: call it with the number of layers."""
    return _tiny_batch


def _verl_row(source, question, gold, index):
    return {"data_source": source,
            "prompt": [{"content": "Think first.", "role": "system"},
                       {"content": question, "role": "user"}],
            "ability": "math", "reward_model": {"ground_truth": gold, "style": "rule"},
            "extra_info": {"index": index, "split": "test"}}


@pytest.fixture()
def paper_files(tmp_path, monkeypatch):
    """A tiny checkpoint folder, a DAPO-Math-17K training file and a LUFFY-style suite (aime
    ×4 repeats, math ×1), all in the real verl parquet layout."""
    monkeypatch.setenv("TOKENBOOK_CACHE", str(tmp_path / "cache"))
    tok = char_tokenizer(alphabet="0123456789+-=;: Answer?abcdefghijklmnopqrstuvwxyz$.\\{}")
    model = build_policy(tok, hidden_size=32, num_layers=1, num_heads=2, max_positions=512)
    model.save_pretrained(tmp_path / "ckpt")
    tok.save_pretrained(tmp_path / "ckpt")
    prefix = ("Solve the following math problem step by step. The last line of your response "
              "should be of the form Answer: $Answer.\n\n")
    dapo = [{"data_source": "math_dapo",
             "prompt": [{"content": prefix + f"what is {i}+{i}?", "role": "user"}],
             "ability": "MATH", "reward_model": {"ground_truth": str(2 * i), "style": "rule"},
             "extra_info": {"index": f"id-{i}"}} for i in range(6)]
    pd.DataFrame(dapo + dapo[:2]).to_parquet(tmp_path / "dapo.parquet")   # duplicates
    suite = ([_verl_row("aime", "what is 2+2?", "4", 0) for _ in range(4)]
             + [_verl_row("math", f"what is {i}+1?", str(i + 1), 10 + i) for i in range(3)])
    pd.DataFrame(suite).to_parquet(tmp_path / "valid.all.parquet")
    return tmp_path
