"""Beginning-of-word vocabulary masks and tokenizer helpers."""

from __future__ import annotations

import functools
import json

import numpy as np
import torch

__all__ = ["bow_vocab_mask", "token_starts_word"]


@functools.lru_cache(maxsize=1)
def _byte_decoder() -> dict[str, int]:
    """GPT-2's byte-level alphabet, inverted: printable char -> byte value."""
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1))
    bs += list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for byte in range(256):
        if byte not in bs:
            bs.append(byte)
            cs.append(256 + n)
            n += 1
    return {chr(c): b for b, c in zip(bs, cs)}


def _backend_spec(tokenizer) -> dict:
    backend = getattr(tokenizer, "backend_tokenizer", None) or getattr(tokenizer, "_tokenizer", None)
    if backend is None:
        return {}
    try:
        return json.loads(backend.to_str())
    except Exception:  # pragma: no cover - exotic backends
        return {}


def _continuing_prefix(tokenizer) -> str | None:
    """WordPiece-style continuation marker (``##``) of the tokenizer's model, if any."""
    model = _backend_spec(tokenizer).get("model") or {}
    return model.get("continuing_subword_prefix") or None


def _is_byte_level(tokenizer) -> bool:
    spec = _backend_spec(tokenizer)
    if not spec:
        return False

    def has_bytelevel(node) -> bool:
        if isinstance(node, dict):
            if node.get("type") == "ByteLevel":
                return True
            return any(has_bytelevel(v) for v in node.values())
        if isinstance(node, list):
            return any(has_bytelevel(v) for v in node)
        return False

    return has_bytelevel(spec.get("pre_tokenizer")) or has_bytelevel(spec.get("decoder"))


def token_starts_word(token: str, byte_level: bool) -> bool:
    """Whether a vocabulary string begins with whitespace (a beginning-of-word token).

    SentencePiece marks a leading space with ``▁``; byte-level BPE (GPT-2, Qwen2) writes the space
    byte as ``Ġ`` (and newline ``Ċ``, tab ``ĉ``); other tokenizers keep the whitespace itself.
    """
    if not token:
        return False
    if token[0] == "▁":
        return True
    if byte_level:
        byte = _byte_decoder().get(token[0])
        if byte is not None:  # only ASCII whitespace: 0x85/0xA0 are UTF-8 continuation bytes here
            return byte < 0x80 and chr(byte).isspace()
    return token[0].isspace()


def bow_vocab_mask(tokenizer, vocab_size: int | None = None) -> torch.Tensor:
    """BoolTensor[V]: the beginning-of-word set 𝓑 = tokens starting with whitespace, plus EOS.

    ``vocab_size`` is the model's output size. It may exceed the tokenizer's (extra ids are
    False), and it may stop short of it when every id it leaves out is a token *added* to the
    tokenizer after its base vocabulary (PaliGemma's processor adds 1,152 ``<loc>``/``<seg>``
    tokens to any tokenizer, which the library's tiny captioner does not predict); a base
    token beyond the model's outputs is an error.
    Special tokens other than EOS are never beginning-of-word tokens. For tokenizers that mark
    word-*internal* pieces instead (WordPiece-style ``##`` continuation prefix), 𝓑 is every
    non-special token without that prefix.
    """
    n_tok = len(tokenizer)
    if vocab_size is not None:
        if isinstance(vocab_size, bool) or not isinstance(vocab_size, (int, np.integer)):
            raise TypeError(f"vocab_size: expected an int, got {type(vocab_size).__name__}")
        added = set(getattr(tokenizer, "added_tokens_decoder", {}) or {})
        missing = [i for i in range(vocab_size, n_tok) if i not in added]
        if missing:
            raise ValueError(f"vocab_size: the model's {vocab_size} outputs are fewer than the "
                             f"tokenizer's {n_tok} tokens, and id {missing[0]} is part of its "
                             f"base vocabulary (only added tokens may be left out); use the "
                             f"tokenizer that belongs to the model")
    v = max(vocab_size or 0, n_tok)
    byte_level = _is_byte_level(tokenizer)
    tokens = tokenizer.convert_ids_to_tokens(list(range(n_tok)))
    special = set(getattr(tokenizer, "all_special_ids", []) or [])
    cont = _continuing_prefix(tokenizer)
    mask = torch.zeros(v, dtype=torch.bool)
    for i, t in enumerate(tokens):
        if t is None or i in special:
            continue
        if cont is not None:
            mask[i] = not t.startswith(cont)
        elif token_starts_word(t, byte_level):
            mask[i] = True
    eos = getattr(tokenizer, "eos_token_id", None)
    if eos is not None:
        mask[eos] = True
    if vocab_size is not None:
        mask = mask[:vocab_size]
    return mask
