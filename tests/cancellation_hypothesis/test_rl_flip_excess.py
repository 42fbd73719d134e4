"""The flip-excess claim against an exact linear-softmax case: z_j = W h_j with fixed features,
where the first-order Δ log π of a full-batch and of an every-rollout-alone SGD step are known in
closed form (self, within-rollout and cross-rollout terms); a small real step must match them and
give the predicted flip excess."""

import numpy as np
import pandas as pd
import pytest
import torch

from tokenbook.cancellation_hypothesis.dynamics import (first_order_full, first_order_prediction,
                                                        first_order_terms, token_dynamics,
                                                        token_dynamics_isolated)
from tokenbook.cancellation_hypothesis.verdicts import (coupling_dominance,
                                                        first_order_flip_excess, flip_excess,
                                                        flip_excess_by_sign,
                                                        predicted_flip_excess, sign_agreement)

V, D = 5, 4


def _world(seed=0):
    """Four rollouts × 6 tokens (two with A = +1, two with A = −1), low-confidence logits and
    shared features, so that tokens of opposite rollouts couple strongly."""
    g = torch.Generator().manual_seed(seed)
    W = 0.3 * torch.randn(V, D, generator=g, dtype=torch.float64)
    base = torch.randn(6, D, generator=g, dtype=torch.float64)
    h = torch.cat([base + 0.3 * torch.randn(6, D, generator=g, dtype=torch.float64)
                   for _ in range(4)])                       # same step ≈ same context
    rows = torch.arange(4).repeat_interleave(6)
    actions = torch.randint(V, (24,), generator=g)
    A = torch.tensor([1., 1., -1., -1.], dtype=torch.float64)[rows]
    return W, h, actions, A, rows


def _logp(W, h, actions):
    return torch.log_softmax(h @ W.T, -1)[torch.arange(len(actions)), actions]


def _step(W, h, actions, A, idx, lr):
    """One SGD step of the token-mean loss over the tokens ``idx``; Δ log π of every token."""
    W1 = W.clone().requires_grad_(True)
    loss = -(A[idx] * _logp(W1, h[idx], actions[idx])).mean()
    (grad,) = torch.autograd.grad(loss, W1)
    with torch.no_grad():
        return _logp(W - lr * grad, h, actions) - _logp(W, h, actions)


def _actual(W, h, actions, A, rows, lr):
    full = _step(W, h, actions, A, torch.arange(len(rows)), lr)
    alone = torch.zeros_like(full)
    for r in torch.unique(rows):
        idx = torch.nonzero(rows == r).flatten()
        alone[idx] = _step(W, h, actions, A, idx, lr * len(idx) / len(rows))[idx]
    return full, alone


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_closed_form_matches_a_small_sgd_step(seed):
    W, h, actions, A, rows = _world(seed)
    lr = 1e-4
    terms = first_order_terms(h @ W.T, h, actions, A, rows, lr=lr, n_loss=len(rows))
    full, alone = _actual(W, h, actions, A, rows, lr)
    scale = float(full.abs().max())
    np.testing.assert_allclose(terms["self"] + terms["within"] + terms["across"], full,
                               atol=1e-3 * scale)
    np.testing.assert_allclose(terms["self"] + terms["within"], alone, atol=1e-3 * scale)
    # the self term has the sign of the token's own advantage; coupling is really there
    assert torch.all(torch.sign(terms["self"]) == torch.sign(A))
    assert float(terms["across"].abs().mean()) > 0.1 * float(terms["self"].abs().mean())
    # a wrong split (cross-rollout terms counted as the rollout's own) would not match
    wrong = terms["self"] + terms["across"]
    assert float((wrong - alone).abs().max()) > 1e-2 * scale


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_flip_excess_of_the_real_step_is_the_predicted_one(seed):
    W, h, actions, A, rows = _world(seed)
    lr = 1e-4
    terms = first_order_terms(h @ W.T, h, actions, A, rows, lr=lr, n_loss=len(rows))
    fo = pd.DataFrame({"advantage": A.numpy(), "self": terms["self"].numpy(),
                       "within_rollout": terms["within"].numpy(),
                       "across_rollouts": terms["across"].numpy()})
    predicted = predicted_flip_excess(fo)
    full, alone = _actual(W, h, actions, A, rows, lr)
    t_full = pd.DataFrame({"advantage": A.numpy(), "delta": full.numpy()})
    t_alone = t_full.assign(delta=alone.numpy())
    assert flip_excess(t_full, t_alone) == pytest.approx(predicted)
    assert flip_excess(t_alone, t_alone) == 0.0          # the off world: 0 by construction
    # by hand: per sign, the share flipped by the full step minus the share flipped alone
    pos, neg = A.numpy() > 0, A.numpy() < 0
    f, a = full.numpy(), alone.numpy()
    by_hand = min((f[pos] < 0).mean() - (a[pos] < 0).mean(),
                  (f[neg] > 0).mean() - (a[neg] > 0).mean())
    assert flip_excess(t_full, t_alone) == pytest.approx(by_hand)


def test_known_excess_of_four_one_token_rollouts():
    """Four one-token rollouts with orthogonal contexts h1 ⊥ h2: token a (context h1) in a
    rollout with A = +1 and one with A = −0.5, token b (context h2) with A = −1 and A = +0.5.
    Alone, each token moves with its own advantage (no flip). Together, the rollouts of one
    token share its gradient, so the larger advantage wins: the −0.5 rollout's a goes up and
    the +0.5 rollout's b goes down. Half the tokens of each sign flip: excess exactly 0.5."""
    g = torch.Generator().manual_seed(3)
    W = 0.2 * torch.randn(V, D, generator=g, dtype=torch.float64)
    h = torch.tensor([[1., 0, 0, 0], [1., 0, 0, 0], [0, 1., 0, 0], [0, 1., 0, 0]],
                     dtype=torch.float64)
    actions = torch.tensor([0, 0, 1, 1])
    rows = torch.arange(4)
    A = torch.tensor([1.0, -0.5, -1.0, 0.5], dtype=torch.float64)
    terms = first_order_terms(h @ W.T, h, actions, A, rows, lr=1e-3, n_loss=4)
    # one token per rollout: no within-rollout term (up to float64 rounding: ~1e-20 on some CPUs)
    assert torch.allclose(terms["within"], torch.zeros(4, dtype=torch.float64), atol=1e-15)
    fo = pd.DataFrame({"advantage": A.numpy(), "self": terms["self"].numpy(),
                       "within_rollout": terms["within"].numpy(),
                       "across_rollouts": terms["across"].numpy()})
    full = (fo["self"] + fo["within_rollout"] + fo["across_rollouts"]).to_numpy()
    np.testing.assert_array_equal(np.sign(full), [1, 1, -1, -1])
    assert predicted_flip_excess(fo) == 0.5
    full_step, alone = _actual(W, h, actions, A, rows, 1e-3)
    t = pd.DataFrame({"advantage": A.numpy(), "delta": full_step.numpy()})
    assert flip_excess(t, t.assign(delta=alone.numpy())) == 0.5


def test_flip_excess_is_the_smaller_sign_and_says_which():
    """Coupling that flips failed rollouts' tokens and unflips correct ones': the per-sign
    excesses differ in sign and the claim's statistic is the smaller (the correct side)."""
    adv = np.array([1., 1., 1., 1., -1., -1., -1., -1.])
    isolated = pd.DataFrame({"advantage": adv, "delta": [-1., -1., 1., 1., -1., -1., -1., -1.]})
    full = isolated.assign(delta=[-1., 1., 1., 1., 1., 1., -1., -1.])
    by_sign = flip_excess_by_sign(full, isolated)
    assert by_sign == {"positive": -0.25, "negative": 0.5}
    assert flip_excess(full, isolated) == min(by_sign.values())
    # a first-order table with two Δ columns reads the same
    table = full.rename(columns={"delta": "full"}).assign(alone=isolated["delta"])
    assert flip_excess_by_sign(table, table, delta_full="full", delta_isolated="alone") == by_sign
    # tokens outside the loss do not count
    assert flip_excess_by_sign(full.assign(in_loss=[1, 0, 1, 1, 1, 1, 1, 1]),
                               isolated.assign(in_loss=[1, 0, 1, 1, 1, 1, 1, 1])
                               )["positive"] == 0.0


def test_flip_excess_errors():
    t = pd.DataFrame({"advantage": [1., -1.], "delta": [0.1, 0.2]})
    with pytest.raises(ValueError, match="same tokens"):
        flip_excess(t, t.iloc[:1])
    assert np.isnan(flip_excess(t.assign(advantage=[1., 1.]), t.assign(advantage=[1., 1.])))


def test_first_order_full_on_the_output_layer_is_the_closed_form(tiny_batch):
    """The autograd first-order Δ of the policy's own step (Jacobian-vector products) with
    only the output layer moving equals the linear-softmax closed form on the same batch,
    full batch and every rollout alone; so its flip excess is the closed form's."""
    model, _, roll = tiny_batch(2)
    head = model.get_output_embeddings().weight
    ff = first_order_full(model, roll, lr=1e-3, params=[head])
    fo = first_order_prediction(model, roll, lr=1e-3)
    scale = float(np.abs(fo["predicted"]).max())
    assert scale > 0
    np.testing.assert_allclose(ff["full"], fo["predicted"], atol=1e-4 * scale)
    np.testing.assert_allclose(ff["alone"], fo["self"] + fo["within_rollout"],
                               atol=1e-4 * scale)
    assert first_order_flip_excess(ff) == pytest.approx(predicted_flip_excess(fo))
    # the full batch is not the rollouts alone: cross-rollout coupling is there
    assert float(np.abs(ff["full"] - ff["alone"]).max()) > 1e-2 * scale


def test_first_order_full_is_the_limit_of_the_measured_steps(tiny_batch):
    """With every parameter moving, the first-order Δ is what token_dynamics and
    token_dynamics_isolated measure for a small step (up to O(η²) and float rounding): the
    known answer is computed for the same batch and the same update as the measured flips."""
    model, _, roll = tiny_batch(2)
    lr = 0.02
    ff = first_order_full(model, roll, lr=lr)
    full, alone = token_dynamics(model, roll, lr=lr), token_dynamics_isolated(model, roll, lr=lr)
    for measured, col in ((full, "full"), (alone, "alone")):
        d, p = measured["delta"].to_numpy(), ff[col].to_numpy()
        big = np.abs(p) > 0.05 * np.abs(p).max()
        assert big.sum() > 10
        np.testing.assert_allclose(d[big], p[big], rtol=0.1)
        assert sign_agreement(measured, ff, col) > 0.9
    batch_only = first_order_full(model, roll, lr=lr, alone=False)
    assert "alone" not in batch_only.columns
    np.testing.assert_allclose(batch_only["full"], ff["full"], rtol=1e-6, atol=1e-9)
    # the output layer alone is a different update: its excess need not be the full step's
    head_only = first_order_full(model, roll, lr=lr, params=[model.get_output_embeddings().weight])
    assert not np.allclose(head_only["full"], ff["full"], rtol=0.1)


def test_head_only_steps_measure_the_closed_form_flip_excess(tiny_batch):
    """The output-layer claim's pipeline against its known answer: a real full-batch step and
    its every-rollout-alone control, each moving the output layer only, have the closed form's
    Δ (self + within + across, and self + within) and so its flip excess; the body does not
    move; and the isolated control against itself is 0 (the off world)."""
    model, _, roll = tiny_batch(1)
    lr = 0.02
    full = token_dynamics(model, roll, lr=lr, head_only=True)
    alone = token_dynamics_isolated(model, roll, lr=lr, head_only=True)
    fo = first_order_prediction(model, roll, lr=lr)
    for measured, predicted in ((full, fo["predicted"]),
                                (alone, fo["self"] + fo["within_rollout"])):
        d, p = measured["delta"].to_numpy(), predicted.to_numpy()
        big = np.abs(p) > 0.05 * np.abs(p).max()
        assert big.sum() > 10
        np.testing.assert_allclose(d[big], p[big], rtol=0.1)
    known = predicted_flip_excess(fo)
    assert known > 0.03          # this batch couples rollouts: the known answer is an effect
    assert coupling_dominance(fo) > 0.1
    # one token of ~31 per sign is 0.032: the measured excess is the known one to a token
    assert flip_excess(full, alone) == pytest.approx(known, abs=0.035)
    assert flip_excess(alone, alone) == 0.0
    # not the full-model step: only the output layer moved
    assert not np.allclose(full["delta"], token_dynamics(model, roll, lr=lr)["delta"], rtol=0.1)


def test_coupling_dominance_counts_tokens_the_other_rollouts_can_turn():
    t = pd.DataFrame({"advantage": [1., 1., -1., 0.], "in_loss": [True, True, True, True],
                      "self": [1., 1., -1., 0.], "within_rollout": [0.5, 0., 0., 0.],
                      "across_rollouts": [-2., 0.5, 3., 9.]})
    # token 4 has A = 0 (not scored); 2 of the 3 scored tokens are dominated
    assert coupling_dominance(t) == pytest.approx(2 / 3)
    assert coupling_dominance(t.assign(across_rollouts=0.0)) == 0.0
    assert np.isnan(coupling_dominance(t.assign(advantage=0.0)))
