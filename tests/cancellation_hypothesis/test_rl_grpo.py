"""GRPO advantages and loss: hand-made groups, and agreement with TRL 1.16's own loss code."""

import types
from collections import defaultdict

import numpy as np
import pytest
import torch

from tokenbook.cancellation_hypothesis.grpo import GRPOConfig, advantages, policy_loss


def test_grpo_advantages_on_a_hand_made_group():
    r = torch.tensor([1., 0., 0., 1., 1., 1., 1., 1.])   # two groups of 4
    a, keep = advantages(r, 4)
    # group 1: mean .5, unbiased std sqrt(1/3)
    s = np.sqrt(1 / 3)
    np.testing.assert_allclose(a[:4], np.array([.5, -.5, -.5, .5]) / (s + 1e-4), rtol=1e-6)
    np.testing.assert_allclose(a[4:], 0.0)                 # uniform group: no signal
    assert keep.all()
    a_dr, _ = advantages(r, 4, scale_rewards="none")       # Dr. GRPO: no std
    np.testing.assert_allclose(a_dr[:4], [.5, -.5, -.5, .5])
    a_b, _ = advantages(r, 4, scale_rewards="batch")
    np.testing.assert_allclose(a_b[:4], np.array([.5, -.5, -.5, .5]) / (r.std().item() + 1e-4),
                               rtol=1e-6)
    psr, keep = advantages(r, 4, estimator="psr")
    assert torch.equal(psr, r) and keep.all()
    pos, keep = advantages(r, 4, estimator="posonly")
    assert torch.equal(keep, r > 0) and torch.allclose(pos, a)
    # group baseline: advantages sum to zero within each group
    rr = torch.rand(40).round()
    aa, _ = advantages(rr, 8)
    np.testing.assert_allclose(aa.view(5, 8).sum(1), 0, atol=1e-5)


def test_advantages_reject_ragged_groups_and_bad_names():
    with pytest.raises(ValueError, match="whole number of groups"):
        advantages(torch.ones(7), 4)
    with pytest.raises(ValueError, match="estimator"):
        advantages(torch.ones(8), 4, estimator="ppo")
    with pytest.raises(ValueError, match="loss_agg"):
        GRPOConfig(loss_agg="mean")


def _hand_batch(seed=0):
    g = torch.Generator().manual_seed(seed)
    logp = -torch.rand(4, 5, generator=g) * 3
    old = logp + 0.4 * torch.randn(4, 5, generator=g)     # some ratios outside [0.8, 1.2]
    adv = torch.tensor([1.5, -0.5, -1.0, 0.0])
    mask = torch.tensor([[1, 1, 1, 0, 0], [1, 1, 1, 1, 1], [1, 1, 0, 0, 0], [1, 1, 1, 1, 0]])
    return logp, old, adv, mask


def test_policy_loss_matches_an_independent_loop():
    logp, old, adv, mask = _hand_batch()
    loss, st = policy_loss(logp, old, adv, mask, clip_low=0.2, clip_high=0.28)
    total, n = 0.0, 0
    for i in range(4):
        for t in range(5):
            if mask[i, t]:
                rho = float(torch.exp(logp[i, t] - old[i, t]))
                a = float(adv[i])
                total += -min(rho * a, min(max(rho, 0.8), 1.28) * a)
                n += 1
    assert loss.item() == pytest.approx(total / n, rel=1e-5)
    assert 0 < st["clip_frac"] < 1
    # on-policy: the gradient is the plain policy gradient −(1/N) Σ A ∇ log π
    x = logp.clone().requires_grad_(True)
    policy_loss(x, x.detach(), adv, mask)[0].backward()
    np.testing.assert_allclose(x.grad, -(adv[:, None] * mask) / mask.sum(), atol=1e-7)


class _Acc:
    num_processes = 1

    @staticmethod
    def reduce(x, reduction="sum"):
        return x

    @staticmethod
    def gather(x):
        return x

    gather_for_metrics = gather


def _trl_loss(loss_type, logp, old, adv, mask, eps_low, eps_high, max_len):
    """Call TRL's GRPOTrainer._compute_loss unbound, with a stand-in trainer whose model
    returns our per-token log-probs (no full trainer, model or dataset needed)."""
    from trl import GRPOTrainer

    fake = types.SimpleNamespace(
        top_entropy_quantile=1.0, off_policy_mask_threshold=None,
        importance_sampling_level="token", beta=0.0, loss_type=loss_type,
        epsilon_low=eps_low, epsilon_high=eps_high,
        args=types.SimpleNamespace(delta=None, use_bias_correction_kl=False,
                                   steps_per_generation=1),
        use_vllm=False, vllm_importance_sampling_correction=False,
        model=types.SimpleNamespace(training=True), current_gradient_accumulation_steps=1,
        _entropy_bonus_enabled=False, aux_loss_enabled=False, _metrics=defaultdict(
            lambda: defaultdict(list)), accelerator=_Acc(), max_completion_length=max_len,
        _get_per_token_logps_and_entropies=lambda *a, **k: (logp, torch.zeros_like(logp), None))
    inputs = {"prompt_ids": torch.zeros(4, 1, dtype=torch.long),
              "prompt_mask": torch.ones(4, 1, dtype=torch.long),
              "completion_ids": torch.zeros(4, 5, dtype=torch.long), "completion_mask": mask,
              "advantages": adv, "old_per_token_logps": old,
              "num_items_in_batch": mask.sum()}
    return GRPOTrainer._compute_loss(fake, None, inputs)


@pytest.mark.parametrize("ours,trl_name", [("token-mean", "bnpo"), ("seq-mean", "grpo"),
                                           ("dr-grpo", "dr_grpo"), ("token-mean", "dapo")])
def test_policy_loss_equals_trl(ours, trl_name):
    pytest.importorskip("trl")
    logp, old, adv, mask = _hand_batch(1)
    expected = _trl_loss(trl_name, logp, old, adv, mask, 0.2, 0.28, 5)
    got, _ = policy_loss(logp, old, adv, mask, clip_low=0.2, clip_high=0.28, loss_agg=ours,
                         max_len=5)
    assert got.item() == pytest.approx(expected.item(), rel=1e-6)


def test_advantages_equal_trls_formula():
    """TRL computes advantages inline in _generate_and_score_completions (not callable alone);
    this re-derives them with TRL's own nanstd helper and its 1e-4 epsilon."""
    from trl.trainer.utils import nanstd

    r = torch.tensor([1., 0., 1., 1., 0., 0., 0., 1., 1., 1., 1., 0.])
    G = 4
    mean = r.view(-1, G).mean(1).repeat_interleave(G)
    std = nanstd(r.view(-1, G), dim=1).repeat_interleave(G)
    np.testing.assert_allclose(advantages(r, G)[0], (r - mean) / (std + 1e-4), rtol=1e-6)
    np.testing.assert_allclose(advantages(r, G, scale_rewards="batch")[0],
                               (r - mean) / (nanstd(r) + 1e-4), rtol=1e-6)
