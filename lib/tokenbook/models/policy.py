"""A tiny causal policy of a real Hugging Face architecture (Qwen2), for the RL chapter.

* :func:`char_tokenizer` — a character-level ``PreTrainedTokenizerFast`` in which ``<think>``
  and ``</think>`` are single tokens (offsets, save/load and decoding work like any HF tokenizer).
* :func:`build_policy` — ``Qwen2ForCausalLM`` from a ``Qwen2Config`` (untied output layer, so the
  unembedding ``lm_head`` is its own parameter for the output-layer-only analyses).
* :func:`sft` — teacher-forced fine-tuning on worked solutions (loss on response tokens only).
* :func:`sample` — ``G`` sampled completions per prompt with the KV cache (left-padded prompts).
* :func:`sft_policy` — build + SFT, cached with :func:`tokenbook.cache.cached_dir`.
* :func:`load_policy` — a checkpoint folder or hub id (paper scale) through ``Auto*`` classes.

Shapes: ``B`` sequences, ``P`` prompt length (left-padded), ``C`` completion length.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

import torch

from tokenbook.cache import cached_dir
from tokenbook.models.flat_adamw import flat_adamw

POLICY_VERSION = "policy-v1"
_SPECIALS = ["<pad>", "<eos>", "<unk>", "<think>", "</think>"]
DEFAULT_ALPHABET = "0123456789+-=;: Answer"


def char_tokenizer(alphabet: str = DEFAULT_ALPHABET):
    """A character tokenizer with ``<think>``/``</think>`` as single tokens.

    Ids 0–4 are ``<pad>, <eos>, <unk>, <think>, </think>``; then the sorted distinct characters
    of ``alphabet``. Unknown characters map to ``<unk>``.
    """
    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    vocab = {s: i for i, s in enumerate(_SPECIALS)}
    for ch in sorted(set(alphabet)):
        vocab.setdefault(ch, len(vocab))
    tok = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Split(
        Regex(r"</think>|<think>|<eos>|<pad>|<unk>|."), behavior="isolated")
    tok.decoder = decoders.Fuse()
    return PreTrainedTokenizerFast(tokenizer_object=tok, pad_token="<pad>", eos_token="<eos>",
                                   unk_token="<unk>", padding_side="left")


def build_policy(tokenizer, *, hidden_size: int = 128, num_layers: int = 2, num_heads: int = 4,
                 intermediate_size: int | None = None, max_positions: int = 128, seed: int = 0):
    """A freshly initialised ``Qwen2ForCausalLM`` sized for ``tokenizer`` (seeded)."""
    from transformers import Qwen2Config, Qwen2ForCausalLM

    if hidden_size % num_heads:
        raise ValueError(f"hidden_size ({hidden_size}) must be divisible by num_heads ({num_heads})")
    cfg = Qwen2Config(vocab_size=len(tokenizer), hidden_size=hidden_size,
                      intermediate_size=intermediate_size or 4 * hidden_size,
                      num_hidden_layers=num_layers, num_attention_heads=num_heads,
                      num_key_value_heads=num_heads, max_position_embeddings=max_positions,
                      tie_word_embeddings=False, pad_token_id=tokenizer.pad_token_id,
                      eos_token_id=tokenizer.eos_token_id, bos_token_id=tokenizer.eos_token_id)
    torch.manual_seed(seed)
    model = Qwen2ForCausalLM(cfg)
    _set_generation_defaults(model, tokenizer)
    return model


def _set_generation_defaults(model, tokenizer) -> None:
    gc = model.generation_config
    gc.pad_token_id = tokenizer.pad_token_id
    gc.eos_token_id = tokenizer.eos_token_id
    # sampling knobs (top_k=0, top_p=1) are passed by `sample`; a saved generation config with
    # top_k but do_sample=False is rejected by transformers 5


def position_ids(attention_mask: torch.Tensor) -> torch.Tensor:
    """Positions that skip left padding (as ``generate`` computes them): [B, T] long."""
    return (attention_mask.long().cumsum(-1) - 1).clamp(min=0)


def sft(model, tokenizer, prompts: Sequence[str], responses: Sequence[str], *, steps: int = 150,
        batch_size: int = 64, lr: float = 3e-3, seed: int = 0, progress: bool = True) -> list[float]:
    """Teacher-forced SFT on ``prompt + response + <eos>``; cross-entropy on response tokens
    only (nats/token). Returns the loss per step."""
    from tqdm.auto import tqdm

    if len(prompts) != len(responses) or not prompts:
        raise ValueError("sft needs equally many (non-zero) prompts and responses")
    eos = tokenizer.eos_token
    p_ids = [tokenizer(p, add_special_tokens=False).input_ids for p in prompts]
    r_ids = [tokenizer(r + eos, add_special_tokens=False).input_ids for r in responses]
    g = torch.Generator().manual_seed(seed)
    model.train()
    losses = []
    # AdamW on one flat buffer: bitwise the per-tensor (foreach) update, with one call per
    # operation instead of one per small tensor (flat_adamw)
    with flat_adamw(model.parameters(), lr=lr, weight_decay=0.0) as opt:
        sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: min(1.0, (s + 1) / 20))
        for _ in tqdm(range(steps), desc="SFT", disable=not progress):
            idx = torch.randint(len(prompts), (batch_size,), generator=g).tolist()
            seqs = [p_ids[i] + r_ids[i] for i in idx]
            T = max(map(len, seqs))
            ids = torch.full((batch_size, T), tokenizer.pad_token_id)
            labels = torch.full((batch_size, T), -100)
            att = torch.zeros((batch_size, T), dtype=torch.long)
            for b, i in enumerate(idx):
                s = seqs[b]
                ids[b, :len(s)] = torch.tensor(s)
                att[b, :len(s)] = 1
                labels[b, len(p_ids[i]):len(s)] = torch.tensor(r_ids[i])
            out = model(input_ids=ids, attention_mask=att, labels=labels)
            opt.zero_grad()
            out.loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            sched.step()
            losses.append(float(out.loss.detach()))
    model.eval()
    return losses


@dataclass
class Samples:
    """Sampled completions. ``input_ids``/``attention_mask``: [B, P + C] (prompt left-padded,
    completion right-padded); ``completion_mask``: [B, C] (1 on generated tokens up to and
    including the first end-of-sequence); ``prompt_index``: [B] which prompt each row answers;
    ``texts``: the decoded completions (special tokens other than pad/eos kept)."""

    input_ids: torch.Tensor
    attention_mask: torch.Tensor
    completion_mask: torch.Tensor
    prompt_len: int
    prompt_index: torch.Tensor
    texts: list[str]
    tokens: list[list[str]]


@torch.no_grad()
def sample(model, tokenizer, prompts: Sequence[str], *, n: int = 8, temperature: float = 1.0,
           max_new_tokens: int = 48, seed: int = 0, greedy: bool = False) -> Samples:
    """``n`` completions per prompt (rows grouped prompt-major: prompt 0 × n, prompt 1 × n, …).

    Sampling is seeded (``torch.manual_seed(seed)``); ``greedy=True`` decodes argmax (then use
    ``n=1``). ``top_k=0``/``top_p=1``: plain ancestral sampling at ``temperature``.
    """
    if not prompts:
        raise ValueError("sample needs at least one prompt")
    model.eval()
    enc = tokenizer(list(prompts), return_tensors="pt", padding=True, add_special_tokens=False,
                    padding_side="left")
    ids = enc.input_ids.repeat_interleave(n, 0)
    att = enc.attention_mask.repeat_interleave(n, 0)
    P = ids.shape[1]
    dev = next(model.parameters()).device
    torch.manual_seed(seed)
    kw = dict(do_sample=False) if greedy else dict(do_sample=True, temperature=temperature,
                                                     top_k=0, top_p=1.0)
    out = model.generate(input_ids=ids.to(dev), attention_mask=att.to(dev), max_new_tokens=max_new_tokens,
                         pad_token_id=tokenizer.pad_token_id, eos_token_id=tokenizer.eos_token_id,
                         **kw)
    comp = out[:, P:].cpu()
    if comp.shape[1] < max_new_tokens:  # all rows stopped early: pad to a fixed width
        pad = torch.full((comp.shape[0], max_new_tokens - comp.shape[1]), tokenizer.pad_token_id)
        comp = torch.cat([comp, pad], 1)
    is_eos = comp == tokenizer.eos_token_id
    # 1 up to and including the first eos
    before_eos = (is_eos.long().cumsum(1) - is_eos.long()) == 0
    cmask = before_eos.long()
    comp = torch.where(before_eos, comp, torch.full_like(comp, tokenizer.pad_token_id))
    texts, tokens = [], []
    specials = {tokenizer.eos_token_id, tokenizer.pad_token_id}
    for row, m in zip(comp, cmask):
        row_ids = row[m.bool()].tolist()
        tokens.append(["" if i in specials else tokenizer.decode([i]) for i in row_ids])
        texts.append(tokenizer.decode([i for i in row_ids if i not in specials]))
    full_att = torch.cat([att, cmask], 1)
    return Samples(torch.cat([ids, comp], 1), full_att, cmask, P,
                   torch.arange(len(prompts)).repeat_interleave(n), texts, tokens)


def sft_policy(problems_fn, solution_fn, *, n_train: int = 2000, world_seed: int = 0,
               hidden_size: int = 128, num_layers: int = 2, num_heads: int = 4,
               steps: int = 150, batch_size: int = 64, lr: float = 3e-3, seed: int = 0,
               world: dict | None = None, progress: bool = True) -> Path:
    """Build and SFT a tiny policy on ``n_train`` worked solutions; cached folder with the
    model and tokenizer (``save_pretrained``). ``problems_fn(n, seed)`` returns objects with
    ``.prompt``; ``solution_fn(problem)`` the worked solution. ``world`` (a dict of the world's
    parameters) is part of the cache key together with every argument here."""
    params = dict(version=POLICY_VERSION, n_train=n_train, world_seed=world_seed,
                  hidden_size=hidden_size, num_layers=num_layers, num_heads=num_heads,
                  steps=steps, batch_size=batch_size, lr=lr, seed=seed, world=world or {})

    def build(out: Path) -> None:
        tok = char_tokenizer()
        model = build_policy(tok, hidden_size=hidden_size, num_layers=num_layers,
                             num_heads=num_heads, seed=seed)
        probs = problems_fn(n_train, world_seed)
        sft(model, tok, [p.prompt for p in probs], [solution_fn(p) for p in probs], steps=steps,
            batch_size=batch_size, lr=lr, seed=seed, progress=progress)
        model.save_pretrained(out)
        tok.save_pretrained(out)

    return cached_dir("rl-sft-policy", params, build)


def load_policy(path_or_id: str | Path, *, dtype=None, device: str | None = None):
    """(model, tokenizer) from a folder written by :func:`sft_policy` or a hub id (paper scale,
    e.g. ``"Qwen/Qwen2.5-0.5B-Instruct"``). Generation defaults: pad/eos set."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    try:
        tok = AutoTokenizer.from_pretrained(str(path_or_id))
        model = AutoModelForCausalLM.from_pretrained(str(path_or_id), dtype=dtype)
    except OSError as exc:
        raise FileNotFoundError(
            f"cannot load a causal LM from {path_or_id!r}: give a folder written by "
            f"save_pretrained or a hub id, with network access (unset HF_HUB_OFFLINE) for a "
            f"hub id not yet in the local cache") from exc
    if tok.pad_token is None:
        tok.pad_token = tok.eos_token
    tok.padding_side = "left"
    _set_generation_defaults(model, tok)
    if device:
        model.to(device)
    model.eval()
    return model, tok
