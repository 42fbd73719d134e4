"""Token dynamics: the φ identity against autograd, the first-order prediction against a real
update, the dynamics table, flip ratios and the peer-masking probe (on a tiny Qwen2)."""

import numpy as np
import pytest
import torch

from tokenbook.cancellation_hypothesis.dynamics import (DYNAMICS_COLUMNS, coupling_table,
                                                        first_order_full, first_order_prediction,
                                                        flip_ratios,
                                                        peer_masking_probe, phi_matrix, phi_pairs,
                                                        token_dynamics, update_mass_share)
from tokenbook.cancellation_hypothesis.grpo import completion_logprobs


@pytest.fixture(scope="module")
def tiny(tiny_batch):
    torch.manual_seed(0)
    return tiny_batch(num_layers=1)


@pytest.mark.slow
def test_phi_equals_autograd_inner_products(tiny):
    model, _, roll = tiny
    with torch.no_grad():
        _, _, h, logits = completion_logprobs(model, roll.input_ids, roll.attention_mask,
                                              roll.prompt_len, with_entropy=True,
                                              with_hidden=True)
    cm = roll.completion_mask.bool()
    z = logits[cm].double().clone().requires_grad_(True)                # [N, V]
    a = roll.input_ids[:, roll.prompt_len:][cm]
    N = z.shape[0]
    lp = torch.log_softmax(z, -1)[torch.arange(N), a]
    grads = torch.stack([torch.autograd.grad(lp[j], z, retain_graph=True)[0][j] for j in range(N)])
    gram = grads @ grads.T                                                  # ⟨∇z_j, ∇z_k⟩
    np.testing.assert_allclose(phi_matrix(logits[cm], a), gram.float(), atol=1e-5)
    jj, kk = torch.triu_indices(N, N)
    pairs = torch.stack([jj, kk], 1)
    np.testing.assert_allclose(phi_pairs(logits[cm], a, pairs), gram[jj, kk].float(), atol=1e-5)
    # identical tokens, both confident -> φ ≈ 0; the diagonal is ‖e − π‖² ≥ (1 − p)²
    p = lp.exp().detach()
    assert torch.all(torch.diagonal(gram) >= (1 - p) ** 2 - 1e-9)


def test_output_layer_gram_is_phi_times_hidden_similarity(tiny):
    model, _, roll = tiny
    head = model.get_output_embeddings().weight
    logp, _, h, logits = completion_logprobs(model, roll.input_ids, roll.attention_mask,
                                             roll.prompt_len, with_entropy=True, with_hidden=True)
    cm = roll.completion_mask.bool()
    sel = torch.nonzero(cm)[:10]
    g = torch.stack([torch.autograd.grad(logp[i, t], head, retain_graph=True)[0].flatten()
                     for i, t in sel.tolist()]).double()
    a = roll.input_ids[:, roll.prompt_len:][sel[:, 0], sel[:, 1]]
    hs = h[sel[:, 0], sel[:, 1]].detach().double()
    K = phi_matrix(logits[sel[:, 0], sel[:, 1]], a).double() * (hs @ hs.T)
    np.testing.assert_allclose(K, g @ g.T, rtol=1e-4, atol=1e-6)


def test_first_order_prediction_matches_a_real_small_step(tiny):
    model, _, roll = tiny
    before = [p.detach().clone() for p in model.parameters()]
    fo = first_order_prediction(model, roll, lr=1e-2)
    assert all(torch.equal(a, b) for a, b in zip(before, model.parameters()))   # a copy moved
    assert np.corrcoef(fo["predicted"], fo["actual"])[0, 1] > 0.999
    scale = np.abs(fo["actual"]).max()
    assert scale > 0
    np.testing.assert_allclose(fo["predicted"], fo["actual"], atol=0.02 * scale)
    np.testing.assert_allclose(fo["self"] + fo["coupling"], fo["predicted"], atol=1e-7)
    # the self term alone is a worse prediction than self + coupling
    err_self = np.abs(fo["self"] - fo["actual"]).mean()
    err_full = np.abs(fo["predicted"] - fo["actual"]).mean()
    assert err_full < err_self


def test_token_dynamics_table_and_summaries(tiny):
    model, _, roll = tiny
    table = token_dynamics(model, roll, lr=0.05, step=3)
    assert list(table.columns[:len(DYNAMICS_COLUMNS)]) == DYNAMICS_COLUMNS
    assert len(table) == int(roll.completion_mask.sum())
    assert (table["step"] == 3).all()
    # logp_before is the sampling policy's log-prob of the same tokens
    np.testing.assert_allclose(table["logp_before"],
                               roll.old_logp[roll.completion_mask.bool()].numpy(), atol=1e-5)
    assert table["delta"].abs().sum() > 0
    # rows of a correct rollout are mostly pushed up by one policy-gradient step
    assert table.loc[table["advantage"] > 0, "delta"].mean() > 0
    assert table.loc[table["advantage"] < 0, "delta"].mean() < 0
    fr = flip_ratios(table, by=["class"])
    assert set(fr["rollout"]) == {"correct", "incorrect"}
    assert fr["flip_ratio"].between(0, 1).all()
    c = fr[fr["rollout"] == "correct"]
    np.testing.assert_allclose(c["flip_ratio"], c["suppressed"])
    share = update_mass_share(table)
    assert share.sum() == pytest.approx(1.0)


def test_coupling_table_buckets(tiny):
    model, _, roll = tiny
    ct = coupling_table(model, roll, max_pairs=500, seed=0)
    assert len(ct) <= 500 and ct["bucket"].nunique() >= 2
    same = ct[ct["same_token"]]
    # identical tokens: φ ≥ (1 − p_j)(1 − p_k) − (overlap) is positive for low confidence
    assert (same.loc[same["low_conf"], "phi"] > 0).all()
    # every pair, with its prompt as the bootstrap cluster of the bucket CIs
    from tokenbook.cancellation_hypothesis.coupling import coupling_bucket_cis

    full = coupling_table(model, roll, max_pairs=10 ** 6, seed=0)
    assert set(full["prompt_id"]) == set(roll.prompt_ids.tolist())
    cis = coupling_bucket_cis(full, n_boot=100, seed=0)
    assert cis.groupby("bucket")["n_pairs"].first().sum() == len(full)
    k = cis[cis["statistic"] == "K"].set_index("bucket")["mean"].dropna()
    a = cis[cis["statistic"] == "abs_K"].set_index("bucket")["mean"].dropna()
    assert (k.abs() <= a + 1e-9).all() and (a >= 0).all()


@pytest.mark.slow
def test_peer_masking_probe_matches_an_autograd_oracle(tiny):
    """τ against the first-order step computed here with autograd, not by the probe's code: an
    SGD step of size lr on the token-mean loss moves log π_t by lr·(G·g_t)/N (g_i = ∇ log π_i,
    G = Σ over the N loss tokens of A_i g_i), so masking the peers P (whose term is G_P)
    changes it by τ ≈ lr·[(G·g_t)/N − ((G − G_P)·g_t)/(N − abs(P))] — the masked step's mean
    is over the N − abs(P) tokens left."""
    model, _, roll = tiny
    lr = 1e-3
    probe = peer_masking_probe(model, roll, lr=lr, n_targets=2, n_sets=1, set_size=2, seed=0,
                               progress=False)
    assert len(probe) > 0
    rows, cols = torch.nonzero(roll.completion_mask.bool(), as_tuple=True)
    loss_mask = roll.loss_mask.float()
    A = roll.advantages.float()
    params = list(model.parameters())
    model.eval()
    logp = completion_logprobs(model, roll.input_ids, roll.attention_mask, roll.prompt_len)

    def gradient(weights: torch.Tensor) -> torch.Tensor:   # ∇ Σ weights · log π, flattened
        grads = torch.autograd.grad((logp * weights).sum(), params, retain_graph=True,
                                    allow_unused=True)
        return torch.cat([(g if g is not None else torch.zeros_like(p)).flatten().double()
                          for g, p in zip(grads, params)])

    G, N = gradient(A[:, None] * loss_mask), float(loss_mask.sum())
    for _, r in probe.head(6).iterrows():
        one = torch.zeros_like(loss_mask)
        one[rows[r.target], cols[r.target]] = 1.0
        peers = torch.zeros_like(loss_mask)
        for k in r.peers:
            peers[rows[k], cols[k]] = A[rows[k]]
        g_t, G_P = gradient(one), gradient(peers)
        predicted = lr * float(G @ g_t / N - (G - G_P) @ g_t / (N - len(r.peers)))
        assert r.tau == pytest.approx(predicted, rel=0.05, abs=1e-6)
        assert r.delta_full == pytest.approx(lr * float(G @ g_t) / N, rel=0.05, abs=1e-6)
    assert probe["tau"].abs().max() > 1e-5       # removing peers changes the target's update

def test_first_order_full_row_passes_give_the_same_values(tiny):
    """Rows do not interact in the forward pass: the full batch's Jacobian-vector product taken
    a rollout (or five) at a time equals the one pass, up to float rounding."""
    model, _, roll = tiny
    whole = first_order_full(model, roll, lr=0.05)
    for rows in (1, 5):
        part = first_order_full(model, roll, lr=0.05, rows_per_pass=rows)
        assert part[["row", "pos", "in_loss"]].equals(whole[["row", "pos", "in_loss"]])
        scale = np.abs(whole["full"]).max()
        assert scale > 0
        np.testing.assert_allclose(part["full"], whole["full"], rtol=1e-5, atol=1e-6 * scale)
        np.testing.assert_array_equal(part["alone"], whole["alone"])   # the same per-row passes
    for bad in (0, -1, 1.5, True):
        with pytest.raises(ValueError, match="rows_per_pass"):
            first_order_full(model, roll, rows_per_pass=bad)


@pytest.mark.parametrize("loss_agg", ["token-mean", "seq-mean", "dr-grpo"])
def test_sgd_step_in_row_passes_is_the_same_step(tiny, loss_agg):
    """The gradient summed over passes of a few rollouts, each weighted by its share of the
    batch's loss, is the one-pass gradient: the same step up to float rounding, for every loss
    aggregation and with a loss mask of the caller's."""
    import copy

    from tokenbook.cancellation_hypothesis.dynamics import sgd_step

    model, _, roll = tiny
    masked = roll.loss_mask.clone()
    masked[0, :3] = 0                                   # a caller's mask (the probe's kind)
    for mask in (None, masked):
        whole, parts = copy.deepcopy(model), copy.deepcopy(model)
        sgd_step(whole, roll, 0.05, loss_agg=loss_agg, loss_mask=mask)
        sgd_step(parts, roll, 0.05, loss_agg=loss_agg, loss_mask=mask, rows_per_pass=5)
        moved = max(float((a - b).abs().max()) for a, b in zip(whole.parameters(),
                                                               model.parameters()))
        assert moved > 1e-4
        for a, b in zip(parts.parameters(), whole.parameters()):
            torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-7)
    table = token_dynamics(model, roll, lr=0.05, rows_per_pass=3)
    np.testing.assert_allclose(table["delta"], token_dynamics(model, roll, lr=0.05)["delta"],
                               atol=2e-6)
    with pytest.raises(ValueError, match="rows_per_pass"):
        token_dynamics(model, roll, rows_per_pass=0)
