"""Exercise checks and the toy linear head of the cancellation chapter
(``notebooks/exercises/cancellation_hypothesis.py``).

Each ``check_*`` compares a reader's answer with :mod:`tokenbook.cancellation_hypothesis.grpo`
or :mod:`tokenbook.cancellation_hypothesis.dynamics` on seeded batches
(:mod:`tokenbook.answers`: ``✅`` when right, :class:`~tokenbook.answers.WrongAnswer` naming
the slip when not). Log-probabilities in nats.
"""

from __future__ import annotations

import functools
from typing import Callable, Mapping

import numpy as np
import pandas as pd

from tokenbook.answers import CheckResult, compare_dict, compare_fn, outcome
from tokenbook.cancellation_hypothesis.dynamics import flip_ratios, phi_matrix, phi_pairs
from tokenbook.cancellation_hypothesis.grpo import advantages, mixed_groups
from tokenbook.seeds import derive_seed

__all__ = ["linear_head_batch", "linear_head_step", "check_grpo_advantages",
           "check_mixed_groups", "check_phi", "check_first_order_delta",
           "check_coupling_verdicts"]


def check_grpo_advantages(fn: Callable, *, seed: int = 0, raise_on_wrong: bool = True
                          ) -> CheckResult:
    """Exercise (cancellation_hypothesis): ``fn(rewards, group_size) -> A`` (prompt-major
    rewards [B], B = n·G; A = (r − group mean) / (group sample SD + 1e-4)) against
    :func:`tokenbook.cancellation_hypothesis.grpo.advantages`."""
    import torch

    rng = np.random.default_rng(seed)
    cases = [(np.array([1.0, 0.0, 0.0, 1.0, 1.0, 1.0, 1.0, 1.0]), 4),
             (rng.integers(0, 2, 24).astype(float), 6), (rng.normal(0, 1, 12), 3)]

    def ref(r, g):
        return advantages(torch.as_tensor(r), g)[0].numpy()

    def pop(r, g):
        x = np.asarray(r, float).reshape(-1, g)
        return ((x - x.mean(1, keepdims=True)) / (x.std(1, keepdims=True) + 1e-4)).ravel()

    def batch(r, g):
        x = np.asarray(r, float)
        return (x - x.mean()) / (x.std(ddof=1) + 1e-4)

    problem = compare_fn(fn, ref, cases, "grpo_advantages", {
        "use the population SD (ddof=0); GRPO/TRL use the sample SD (ddof=1)": pop,
        "normalise over the whole batch instead of within each group": batch,
        "skip the division by the SD (that is Dr. GRPO)":
            lambda r, g: advantages(torch.as_tensor(r), g, scale_rewards="none")[0].numpy()},
        rtol=1e-5, atol=1e-6)
    return outcome("GRPO advantages", problem,
                   f"agrees with tokenbook.cancellation_hypothesis.grpo.advantages on "
                   f"{len(cases)} reward batches",
                   raise_on_wrong)


def check_mixed_groups(fn: Callable, *, seed: int = 0, raise_on_wrong: bool = True
                       ) -> CheckResult:
    """Exercise (cancellation_hypothesis): ``fn(rewards, group_size) -> int`` groups holding
    both a correct (1) and a failed (0) rollout, against
    :func:`tokenbook.cancellation_hypothesis.grpo.mixed_groups`."""
    import torch

    rng = np.random.default_rng(seed)
    cases = [(np.array([1, 1, 1, 1, 0, 0, 0, 0, 1, 0, 0, 0]), 4)]
    cases += [((rng.uniform(size=40) < q).astype(int), 8) for q in (0.1, 0.5, 0.9)]
    problem = compare_fn(fn, lambda r, g: mixed_groups(torch.as_tensor(r), g), cases,
                          "mixed_groups", {
                              "count groups with at least one correct rollout":
                                  lambda r, g: int((np.reshape(r, (-1, g)).sum(1) > 0).sum()),
                              "count rollouts instead of groups":
                                  lambda r, g: g * mixed_groups(torch.as_tensor(r), g)})
    return outcome("Mixed groups", problem, f"agrees with mixed_groups on {len(cases)} batches",
                   raise_on_wrong)


def _phi_ref(zj, zk, aj, ak) -> float:
    import torch

    logits = torch.as_tensor(np.stack([zj, zk]), dtype=torch.float32)
    return float(phi_pairs(logits, torch.tensor([aj, ak]), torch.tensor([[0, 1]]))[0])


def check_phi(fn: Callable, *, seed: int = 0, raise_on_wrong: bool = True) -> CheckResult:
    """Exercise (cancellation_hypothesis): ``fn(z_j, z_k, a_j, a_k) -> φ_jk`` from two logit
    rows (1-D, length V) and the two sampled token ids, against
    :func:`tokenbook.cancellation_hypothesis.dynamics.phi_pairs`."""
    rng = np.random.default_rng(seed)
    cases = [(np.zeros(4), np.zeros(4), 1, 1), (np.array([2.0, 0.0, -1.0]),
                                                 np.array([0.0, 1.0, 0.5]), 0, 2)]
    for same in (True, False, False):
        z = rng.normal(0, 2, size=(2, 12))
        a = int(rng.integers(12))
        cases.append((z[0], z[1], a, a if same else int((a + 5) % 12)))

    def softmax(z):
        e = np.exp(z - np.max(z))
        return e / e.sum()

    def no_dot(zj, zk, aj, ak):
        return float(aj == ak) - softmax(zj)[ak] - softmax(zk)[aj]

    problem = compare_fn(fn, _phi_ref, cases, "phi", {
        "leave out the ⟨π_j, π_k⟩ term": no_dot,
        "flip the sign": lambda *c: -_phi_ref(*c)}, rtol=1e-4, atol=1e-6,
        describe=lambda c: f"<{len(c[0])} logits>, <{len(c[1])} logits>, a_j={c[2]}, a_k={c[3]}")
    return outcome("φ from two logit rows", problem,
                   f"agrees with tokenbook.cancellation_hypothesis.dynamics.phi_pairs on "
                   f"{len(cases)} token pairs",
                   raise_on_wrong)


def linear_head_batch(seed: int = 0, *, n_tokens: int = 24, vocab: int = 10, dim: int = 6,
                      group_size: int = 4, orthogonal: bool = False) -> dict[str, np.ndarray]:
    """A toy batch for a linear output layer z = W h: ``H`` [N, d] hidden states (one token per
    rollout, N = n_tokens), ``W`` [V, d], sampled ``actions`` [N] (from the policy),
    binary ``rewards`` [N] and GRPO advantages ``A`` [N] over groups of ``group_size``. With
    ``orthogonal`` the hidden states are orthonormal (d = N): no two tokens share a direction."""
    import torch

    rng = np.random.default_rng(seed)
    if orthogonal:
        dim = n_tokens
        H = np.linalg.qr(rng.normal(size=(dim, dim)))[0][:n_tokens] * 2.0
    else:  # tokens share a common direction, as hidden states of one model do
        H = rng.normal(size=(n_tokens, dim)) + 1.5 * rng.normal(size=(1, dim))
    W = rng.normal(0, 0.5, size=(vocab, dim))
    z = H @ W.T
    p = np.exp(z - z.max(1, keepdims=True))
    p /= p.sum(1, keepdims=True)
    actions = np.array([rng.choice(vocab, p=row) for row in p])
    rewards = (rng.uniform(size=n_tokens) < 0.5).astype(float)
    rewards.reshape(-1, group_size)[:, 0] = 1.0  # every group mixed: non-zero advantages
    rewards.reshape(-1, group_size)[:, 1] = 0.0
    A = advantages(torch.as_tensor(rewards), group_size)[0].double().numpy()
    return {"H": H, "W": W, "actions": actions, "rewards": rewards, "A": A}


def linear_head_step(H, W, actions, A, lr: float) -> np.ndarray:
    """The exact change Δ log π_j(a_j) [N] of one SGD step of size ``lr`` on W for the loss
    −(1/N) Σ_k A_k log π_k(a_k) (GRPO at ratio 1, token-mean), computed with torch autograd."""
    import torch

    H_, A_ = torch.as_tensor(H, dtype=torch.float64), torch.as_tensor(A, dtype=torch.float64)
    a = torch.as_tensor(actions, dtype=torch.long)
    W_ = torch.as_tensor(W, dtype=torch.float64).clone().requires_grad_(True)

    def logp(w):
        return torch.log_softmax(H_ @ w.T, -1).gather(1, a[:, None]).squeeze(1)

    before = logp(W_)
    loss = -(A_ * before).mean()
    (g,) = torch.autograd.grad(loss, W_)
    with torch.no_grad():
        after = logp(W_ - lr * g)
    return (after - before).detach().numpy()


def _first_order_ref(H, W, actions, A, lr) -> np.ndarray:
    import torch

    phi = phi_matrix(torch.as_tensor(np.asarray(H) @ np.asarray(W).T),
                     torch.as_tensor(actions, dtype=torch.long)).double().numpy()
    K = np.asarray(H) @ np.asarray(H).T
    return lr / len(A) * (phi * K) @ np.asarray(A)


def check_first_order_delta(fn: Callable, *, seed: int = 0, raise_on_wrong: bool = True
                            ) -> CheckResult:
    """Exercise (cancellation_hypothesis): ``fn(H, W, actions, A, lr) -> Δ`` [N], the
    first-order prediction Δ log π_j ≈ (η/N) Σ_k A_k φ_jk (h_j·h_k) for one SGD step on the
    linear head, against the same formula with
    :func:`tokenbook.cancellation_hypothesis.dynamics.phi_matrix`; also
    reports how close it is to the exact step (:func:`linear_head_step`)."""
    cases = []
    for k, orth in enumerate((False, True, False)):
        b = linear_head_batch(derive_seed(seed, "case", k), orthogonal=orth)
        cases.append((b["H"], b["W"], b["actions"], b["A"], 1e-2))

    def no_kernel(H, W, actions, A, lr):  # φ alone, as if every h_j·h_k were 1
        import torch

        phi = phi_matrix(torch.as_tensor(np.asarray(H) @ np.asarray(W).T),
                         torch.as_tensor(actions, dtype=torch.long)).double().numpy()
        return lr / len(A) * phi @ np.asarray(A)

    def diagonal(H, W, actions, A, lr):  # no coupling: only k = j
        import torch

        phi = phi_matrix(torch.as_tensor(np.asarray(H) @ np.asarray(W).T),
                         torch.as_tensor(actions, dtype=torch.long)).double().numpy()
        K = np.asarray(H) @ np.asarray(H).T
        return lr / len(A) * np.diag(phi) * np.diag(K) * np.asarray(A)

    problem = compare_fn(fn, _first_order_ref, cases, "first_order_delta", {
        "leave out the hidden-state kernel h_j·h_k": no_kernel,
        "keep only the token's own term (k = j): that is the prediction without coupling":
            diagonal}, rtol=1e-4, atol=1e-9,
        describe=lambda c: f"H {c[0].shape}, W {c[1].shape}, <{len(c[2])} actions>, A, "
                           f"lr={c[4]}")
    if problem is None:
        H, W, actions, A, lr = cases[0]
        exact = linear_head_step(H, W, actions, A, lr)
        pred = _first_order_ref(H, W, actions, A, lr)
        rel = float(np.abs(pred - exact).max() / np.abs(exact).max())
        msg = (f"agrees with the φ·K formula on {len(cases)} batches; on the first one the "
               f"largest gap to the exact SGD step is {rel:.2%} of the largest change")
    else:
        msg = ""
    return outcome("First-order prediction", problem, msg, raise_on_wrong)


@functools.lru_cache(maxsize=8)
def _coupling_reference(seed: int, lr: float = 1e-2) -> dict[str, float]:
    out = {}
    for name, orth in (("shared", False), ("orthogonal", True)):
        b = linear_head_batch(seed, orthogonal=orth)
        delta = linear_head_step(b["H"], b["W"], b["actions"], b["A"], lr)
        fr = flip_ratios(pd.DataFrame({"reward": b["rewards"], "delta": delta}))
        out[name] = float(fr.loc[fr["rollout"] == "correct", "flip_ratio"].iloc[0])
    return out


def check_coupling_verdicts(answer: Mapping[str, float], *, seed: int = 0,
                            raise_on_wrong: bool = True) -> CheckResult:
    """Exercise (cancellation_hypothesis): the flip ratio of correct rollouts (share of their
    tokens whose log-probability falls after the step,
    :func:`tokenbook.cancellation_hypothesis.dynamics.flip_ratios`)
    for ``linear_head_batch(seed)`` with shared and with orthogonal hidden states, lr = 1e-2.
    ``answer``: ``{"shared": float, "orthogonal": float}``."""
    expected = _coupling_reference(seed)
    problem = compare_dict(answer, expected, "answer")
    return outcome("Coupling switched off", problem,
                   f"your flip ratios match: {expected}", raise_on_wrong)
