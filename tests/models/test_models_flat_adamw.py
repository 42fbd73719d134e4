"""AdamW on one flat buffer: bitwise the per-tensor optimizer, and safe to leave."""

from __future__ import annotations

import copy

import pytest
import torch

from tokenbook.models.flat_adamw import FlatAdamW, flat_adamw


def _tiny_marian():
    from transformers import MarianConfig, MarianMTModel

    from tokenbook.models.marian import PRESETS

    cfg = MarianConfig(vocab_size=60, decoder_vocab_size=60, pad_token_id=0, eos_token_id=1,
                       decoder_start_token_id=0, share_encoder_decoder_embeddings=True,
                       scale_embedding=True, **PRESETS["tiny"])
    torch.manual_seed(0)
    return MarianMTModel(cfg).train()


def _tiny_policy():
    from tokenbook.models.policy import build_policy, char_tokenizer

    return build_policy(char_tokenizer(), hidden_size=32, num_layers=2, seed=0).train()


def _batches(causal: bool, n: int = 12):
    """Batches of varying lengths with padding: (source, target) pairs, or causal sequences."""
    g = torch.Generator().manual_seed(1)
    out = []
    for _ in range(n):
        src_len, tgt_len = (int(torch.randint(4, 12, (1,), generator=g)) for _ in range(2))
        ids = torch.randint(5, 20, (8, src_len), generator=g)
        labels = ids.clone() if causal else torch.randint(3, 20, (8, tgt_len), generator=g)
        ids[:3, -2:] = 0           # padding, as the training loops leave it
        labels[:2, -3:] = -100
        out.append(dict(input_ids=ids, attention_mask=ids != 0, labels=labels))
    return out


def _train(model, batches, make_optimizer, zero_grad):
    opt = make_optimizer(model)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: min(1.0, (s + 1) / 5))
    for batch in batches:
        loss = model(**batch).loss
        zero_grad(opt)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sched.step()


@pytest.mark.slow
@pytest.mark.parametrize("build,causal,n_trainable",
                         [(_tiny_marian, False, 85), (_tiny_policy, True, 27)],
                         ids=["marian", "qwen2-policy"])
def test_flat_update_is_bitwise_the_per_tensor_update(build, causal, n_trainable):
    base, batches = build(), _batches(causal)
    per_tensor, flat = copy.deepcopy(base), copy.deepcopy(base)
    kw = dict(lr=3e-3, betas=(0.9, 0.98), weight_decay=0.01)
    _train(per_tensor, batches, lambda m: torch.optim.AdamW(m.parameters(), foreach=True, **kw),
           lambda o: o.zero_grad(set_to_none=True))
    with flat_adamw(flat.parameters(), **kw) as opt:
        _train(flat, batches, lambda m: opt, lambda o: o.zero_grad())
    moved = [not torch.equal(p, q) for p, q in zip(base.parameters(), per_tensor.parameters())
             if p.requires_grad]       # the sinusoidal position tables are frozen
    assert len(moved) == n_trainable and all(moved), "every trainable parameter should move"
    for (name, p), q in zip(per_tensor.named_parameters(), flat.parameters()):
        assert torch.equal(p, q), f"{name} differs after flat AdamW"
        if p.requires_grad:
            assert torch.equal(p.grad, q.grad), f"{name}'s last gradient differs"


def test_parameters_get_their_own_storage_back_on_exit():
    model = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.Linear(4, 2))
    with flat_adamw(model.parameters(), lr=0.1) as opt:
        ptrs = {p.untyped_storage().data_ptr() for p in model.parameters()}
        assert len(ptrs) == 1, "inside the context the parameters share one buffer"
        opt.zero_grad()
        model(torch.ones(2, 3)).sum().backward()
        opt.step()
    ptrs = {p.untyped_storage().data_ptr() for p in model.parameters()}
    assert len(ptrs) == 4 and all(p.grad is not None for p in model.parameters())


def test_a_replaced_gradient_view_stops_the_step():
    model = torch.nn.Linear(3, 2)
    with flat_adamw(model.parameters(), lr=0.1) as opt:
        model.zero_grad(set_to_none=True)       # the views are gone
        model(torch.ones(1, 3)).sum().backward()
        with pytest.raises(RuntimeError, match="no longer a view"):
            opt.step()


def test_bad_requests_are_named():
    with pytest.raises(ValueError, match="no trainable"):
        with flat_adamw([torch.nn.Parameter(torch.ones(2), requires_grad=False)], lr=0.1):
            pass
    mixed = [torch.nn.Parameter(torch.ones(2)), torch.nn.Parameter(torch.ones(2).double())]
    with pytest.raises(ValueError, match="one dtype and device"):
        with flat_adamw(mixed, lr=0.1):
            pass
    with pytest.raises(ValueError, match="sets foreach itself"):
        with flat_adamw([torch.nn.Parameter(torch.ones(2))], lr=0.1, fused=True):
            pass
    assert issubclass(FlatAdamW, torch.optim.AdamW)
