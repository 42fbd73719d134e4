"""The tiny policy (tokenizer, sampling, SFT, caching) and the GRPO loop end to end."""

import copy

import numpy as np
import pytest
import torch

from tokenbook.models.policy import build_policy, char_tokenizer, load_policy, sample, sft_policy
from tokenbook.cancellation_hypothesis.grpo import (GRPOConfig, collect, make_optimizer, train,
                                                    update)
from tokenbook.worlds.arithmetic import label_tokens, make_problems, verify, worked_solution


def reward(text, p):
    return verify(text, p.answer)


@pytest.fixture(scope="module")
def tiny():
    tok = char_tokenizer()
    return tok, build_policy(tok, hidden_size=32, num_layers=1, num_heads=2, seed=0)


def test_char_tokenizer_has_single_think_tokens(tiny):
    tok, _ = tiny
    text = "<think>12+3=15</think>Answer: 15"
    ids = tok(text, add_special_tokens=False).input_ids
    toks = tok.convert_ids_to_tokens(ids)
    assert toks[0] == "<think>" and "</think>" in toks
    assert len(ids) == len(text) - len("<think>") - len("</think>") + 2
    assert tok.decode(ids) == text


def test_sample_masks_after_eos_and_is_seeded(tiny):
    tok, model = tiny
    a = sample(model, tok, ["1+2=", "3-4="], n=3, max_new_tokens=8, seed=5)
    b = sample(model, tok, ["1+2=", "3-4="], n=3, max_new_tokens=8, seed=5)
    assert torch.equal(a.input_ids, b.input_ids) and a.texts == b.texts
    assert a.prompt_index.tolist() == [0, 0, 0, 1, 1, 1]
    comp = a.input_ids[:, a.prompt_len:]
    for row, m in zip(comp, a.completion_mask):
        n = int(m.sum())
        assert m[:n].all() and not m[n:].any()        # a prefix of ones
        eos = (row == tok.eos_token_id).nonzero()
        if len(eos):
            assert n == int(eos[0]) + 1                  # up to and including the first eos


def test_sft_learns_the_template_and_caches(tmp_path, monkeypatch):
    monkeypatch.setenv("TOKENBOOK_CACHE", str(tmp_path))
    gen = lambda n, s: make_problems(n, seed=s, digits=(1, 1))  # noqa: E731
    folder = sft_policy(gen, worked_solution, n_train=200, hidden_size=32, num_layers=1,
                        num_heads=2, steps=60, batch_size=32, lr=3e-3, progress=False)
    again = sft_policy(gen, worked_solution, n_train=200, hidden_size=32, num_layers=1,
                       num_heads=2, steps=60, batch_size=32, lr=3e-3, progress=False)
    assert folder == again                                # second call: the cached folder
    model, tok = load_policy(folder)
    s = sample(model, tok, [p.prompt for p in make_problems(16, seed=9, digits=(1, 1))], n=1,
               greedy=True, max_new_tokens=24)
    assert np.mean([t.startswith("<think>") for t in s.texts]) > 0.8


def test_microbatching_gives_the_same_update(tiny):
    tok, model = tiny
    probs = make_problems(4, seed=0)
    cfg = GRPOConfig(group_size=4, max_new_tokens=6, n_minibatches=2, lr=1e-3)
    roll = collect(model, tok, probs, cfg, reward, label_tokens, seed=0)
    roll.advantages = torch.linspace(-1, 1, len(roll))
    m1, m2 = copy.deepcopy(model), copy.deepcopy(model)
    update(m1, make_optimizer(m1, cfg), roll, cfg, seed=0)
    cfg2 = GRPOConfig(group_size=4, max_new_tokens=6, n_minibatches=2, lr=1e-3,
                      micro_batch_size=3)
    update(m2, make_optimizer(m2, cfg2), roll, cfg2, seed=0)
    for a, b in zip(m1.parameters(), m2.parameters()):
        torch.testing.assert_close(a, b, atol=1e-6, rtol=1e-5)
    assert any(not torch.equal(a, b) for a, b in zip(m1.parameters(), model.parameters()))


@pytest.mark.parametrize("variant", [{}, {"reward_balanced": True}, {"order": "seqlen"},
                                     {"balance_posneg": True}])
def test_train_returns_a_learning_curve(tiny, variant):
    tok, model = tiny
    m = copy.deepcopy(model)
    probs = make_problems(20, seed=1)
    cfg = GRPOConfig(group_size=4, prompts_per_step=2, n_minibatches=2, max_new_tokens=6,
                     buffer_size=8, max_buffer_steps=2, **variant)
    curve = train(m, tok, probs, probs[:4], cfg, reward, steps=3, eval_every=2, seed=0,
                  progress=False)
    assert curve["step"].tolist() == [0, 2, 3]
    assert curve["accuracy"].between(0, 1).all()
    assert curve["n_updates"].iloc[-1] >= 1


def test_balance_posneg_masks_uniform_groups_in_the_loop(tiny):
    """Every rollout passes: under PSR (A = r = 1, no baseline) the step moves the policy, but
    balance-posneg masks all-positive groups entirely, so the same loop changes nothing."""
    tok, model = tiny
    probs = make_problems(8, seed=2)
    moved = {}
    for balance in (False, True):
        m = copy.deepcopy(model)
        cfg = GRPOConfig(group_size=4, prompts_per_step=2, n_minibatches=2, max_new_tokens=6,
                         estimator="psr", balance_posneg=balance, lr=1e-2)
        train(m, tok, probs, probs[:2], cfg, lambda text, problem: 1.0, steps=1, eval_every=1,
              seed=0, progress=False)
        moved[balance] = any(not torch.equal(a, b)
                             for a, b in zip(m.parameters(), model.parameters()))
    assert moved == {False: True, True: False}
    with pytest.raises(ValueError, match="order"):
        GRPOConfig(order="by-length")


def test_mixed_groups_counts_groups_with_both_outcomes():
    from tokenbook.cancellation_hypothesis.grpo import mixed_groups

    rewards = torch.tensor([1., 0., 1., 1., 0., 0., 0., 1.])   # groups of 2: mixed, all, none, mixed
    assert mixed_groups(rewards, 2) == 2
    assert mixed_groups(rewards, 4) == 2
    assert mixed_groups(torch.ones(6), 3) == 0
