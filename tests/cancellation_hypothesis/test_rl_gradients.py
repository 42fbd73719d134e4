"""Gradient dumps (issue #15 item 3): the cancellation statistics on hand-made vectors, and the
positive / negative gradient parts of a tiny Qwen2's analysis step where the answer is known —
identical positive and negative rollouts cancel exactly, the two parts sum to the policy
loss's gradient, units are shared exactly when both signs hold them."""

import math

import numpy as np
import pytest
import torch

from tokenbook.cancellation_hypothesis.gradients import (PARAM_SETS, GradientDump, cancellation,
                                                         gradient_dump, gradient_summary,
                                                         group_gradients, parameter_sets,
                                                         token_units)
from tokenbook.cancellation_hypothesis.grpo import completion_logprobs, policy_loss


@pytest.fixture(scope="module")
def tiny(tiny_batch):
    model, _, roll = tiny_batch(num_layers=2)
    return model, roll


def _twins(roll, adv):
    """Rows 0 and 4 (two prompts), each twice: the positive and negative rollouts of a prompt
    are the same sequence, with advantages ``adv`` (per row)."""
    out = roll.select([0, 0, 4, 4])
    out.advantages = torch.tensor(adv, dtype=torch.float32)
    out.keep = torch.ones(4, dtype=torch.bool)
    return out


def test_cancellation_known_answers():
    a = torch.tensor([1.0, 2.0, -3.0])
    neg = cancellation(a, -a)
    assert (neg["cos"], neg["cancelled"], neg["kept"]) == pytest.approx((-1.0, 1.0, 0.0))
    orth = cancellation(torch.tensor([2.0, 0.0]), torch.tensor([0.0, 2.0]))
    assert orth["cos"] == pytest.approx(0.0) and orth["cancelled"] == pytest.approx(0.0)
    assert orth["kept"] == pytest.approx(1 / math.sqrt(2))
    same = cancellation(a, a)
    assert (same["cos"], same["cancelled"], same["kept"]) == pytest.approx((1.0, -1.0, 1.0))
    half = cancellation(a, -2 * a)                    # opposite, unequal: 2·2/(1 + 4) cancels
    assert (half["cancelled"], half["kept"]) == pytest.approx((0.8, 1 / 3))
    assert half["norm_sum"] == pytest.approx(float(a.norm()))
    zero = cancellation(a, torch.zeros(3))
    assert math.isnan(zero["cos"]) and zero["cancelled"] == 0 and zero["kept"] == 1
    with pytest.raises(ValueError, match="same number"):
        cancellation(a, torch.zeros(2))
    with pytest.raises(ValueError, match="finite"):
        cancellation(a, torch.tensor([1.0, float("nan"), 0.0]))


@pytest.mark.parametrize("key", ["prompt_token", "prompt_position_token"])
def test_identical_rollouts_cancel_exactly(tiny, key):
    model, roll = tiny
    twins = _twins(roll, [1.0, -1.0, 1.0, -1.0])
    dump = gradient_dump(model, twins, key=key)
    assert isinstance(dump, GradientDump) and len(dump.units) > 0
    assert (dump.units["sharing"] == "shared").all()
    np.testing.assert_allclose(dump.units["cos"], -1.0, atol=1e-6)
    np.testing.assert_allclose(dump.units["cancelled"], 1.0, atol=1e-6)
    np.testing.assert_allclose(dump.units["kept"], 0.0, atol=1e-4)
    pooled = dump.pooled.set_index(["tokens", "params"])
    assert pooled.loc[("group-specific", "authors' set"), "n_units"] == 0
    assert pooled.loc[("all", "authors' set"), "cancelled"] == pytest.approx(1.0, abs=1e-6)
    # unequal weights: the positive part is twice the negative one, opposite
    dump2 = gradient_dump(model, _twins(roll, [2.0, -1.0, 2.0, -1.0]), key=key)
    np.testing.assert_allclose(dump2.units["cos"], -1.0, atol=1e-6)
    np.testing.assert_allclose(dump2.units["cancelled"], 0.8, atol=1e-6)
    np.testing.assert_allclose(dump2.units["kept"], 1 / 3, atol=1e-5)


def test_parts_sum_to_the_policy_loss_gradient(tiny):
    model, roll = tiny
    r = roll.select([0, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11])   # a duplicated row, too
    before = [p.detach().clone() for p in model.parameters()]
    adv = r.advantages
    lm = r.loss_mask.bool()
    g = group_gradients(model, r, {"pos": lm & (adv > 0)[:, None],
                                   "neg": lm & (adv < 0)[:, None]})
    assert all(torch.equal(a, b) for a, b in zip(before, model.parameters()))
    params = [p for ps in parameter_sets(model).values() for p in ps]
    logp = completion_logprobs(model, r.input_ids, r.attention_mask, r.prompt_len)
    loss, _ = policy_loss(logp, logp.detach(), adv, r.loss_mask)
    want = torch.cat([x.reshape(-1) for x in torch.autograd.grad(loss, params)]).double()
    got = g["pos"]["authors' set"] + g["neg"]["authors' set"]
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-4, atol=1e-7)
    n_out = model.get_output_embeddings().weight.numel()
    assert g["pos"]["output layer"].numel() == n_out
    assert g["pos"]["last block"].numel() == want.numel() - n_out
    # the dump's batch row "all" is built from the same parts
    dump = gradient_dump(model, r)
    all_row = dump.pooled.set_index(["tokens", "params"]).loc[("all", "authors' set")]
    assert all_row["norm_sum"] == pytest.approx(float(want.norm()), rel=1e-4)


def test_units_are_shared_exactly_when_both_signs_hold_them(tiny):
    _, roll = tiny
    r = roll.select([0, 1])                            # one prompt, two different samples
    r.advantages = torch.tensor([1.0, -1.0])
    r.keep = torch.ones(2, dtype=torch.bool)
    ids, units = token_units(r, "prompt_position_token")
    comp = r.input_ids[:, r.prompt_len:]
    cm = r.completion_mask.bool()
    shared = {(c, int(comp[0, c])) for c in range(comp.shape[1])
              if cm[0, c] and cm[1, c] and comp[0, c] == comp[1, c]}
    got = set(map(tuple, units.loc[units["sharing"] == "shared", ["pos", "token_id"]]
                  .to_numpy().tolist()))
    assert got == shared
    assert (ids[~cm.numpy()] == -1).all() and (ids[cm.numpy()] >= 0).all()
    pos_only = units[units["sharing"] == "positive-only"]
    assert (pos_only["n_neg"] == 0).all() and (pos_only["n_pos"] > 0).all()
    _, by_token = token_units(r, "prompt_token")
    mine = lambda i: set(comp[i][cm[i]].tolist())  # noqa: E731
    assert set(by_token.loc[by_token["sharing"] == "shared", "token_id"]) == mine(0) & mine(1)


def test_max_units_keeps_the_pooled_rows_and_summary(tiny):
    model, roll = tiny
    full = gradient_dump(model, roll)
    some = gradient_dump(model, roll, max_units=2)
    assert len(some.units) == 2 * len(PARAM_SETS) < len(full.units)
    np.testing.assert_allclose(some.pooled["cancelled"], full.pooled["cancelled"], atol=1e-6)
    np.testing.assert_allclose(some.prompts["cancelled"], full.prompts["cancelled"], atol=1e-6)
    s = gradient_summary(full, n_boot=200, seed=3)
    assert list(s["level"].unique()) == ["per token", "per prompt", "batch"]
    assert s.equals(gradient_summary(full, n_boot=200, seed=3))      # seeded
    ok = s.dropna(subset=["cos_lo"])
    assert ((ok["cos_lo"] <= ok["cos"] + 1e-12) & (ok["cos"] <= ok["cos_hi"] + 1e-12)).all()


def test_input_checks(tiny):
    model, roll = tiny
    r = roll.select([0, 1])
    r.advantages = torch.tensor([1.0, 0.5])
    with pytest.raises(ValueError, match="positive and negative"):
        gradient_dump(model, r)
    with pytest.raises(ValueError, match="key"):
        gradient_dump(model, roll, key="vocabulary")
    with pytest.raises(ValueError, match="masks is empty"):
        group_gradients(model, roll, {})
    with pytest.raises(ValueError, match="completion shape"):
        group_gradients(model, roll, {"x": torch.ones(2, 2)})
    with pytest.raises(TypeError, match="GradientDump"):
        gradient_summary(roll)
