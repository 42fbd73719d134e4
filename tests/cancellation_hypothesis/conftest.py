"""Shared fixtures of the RL tests: the tiny policy and its analysis batch."""

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
