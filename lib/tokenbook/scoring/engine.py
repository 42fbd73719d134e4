"""Model adapters and the memory-bounded scoring loop.

Every adapter runs the model's *base* network (no language-model head) to get the final hidden
states, picks the rows that predict the requested tokens, and reduces ``hidden @ W_outᵀ`` over the
vocabulary in chunks with :mod:`tokenbook.scoring.reduction` (or its CUDA twin), so the extra memory
is O(rows × chunk) instead of O(rows × vocabulary). The output head is reproduced exactly as the
architecture applies it: the output embedding (often tied to the input one), its bias, Marian/BART's
``final_logits_bias``, Cohere's ``logit_scale``, Granite's ``logits_scaling`` and Gemma-2/PaliGemma's
``final_logit_softcapping`` (``cap·tanh(l/cap)``), applied to each chunk. For causal LMs the head is
checked once per model against the model's own logits of the last position (``logits_to_keep=1``).

Token tables (one row per scored token) have the columns

``seq_id, token_idx, token_id, token, char_start, char_end, logprob, entropy, bow_logmass, is_bow``

``seq_id`` is the index of the text in the input list, ``token_idx`` counts the scored tokens of that
text from 0, ``char_start:char_end`` are offsets into the scored text (the final EOS row, when
``add_eos`` is on, has the empty span ``len(text):len(text)``), ``logprob`` is ``log p(token | context)``,
``entropy`` the entropy of the predictive distribution at that position and ``bow_logmass`` the log
of the total probability of the beginning-of-word set 𝓑 (tokens starting with whitespace, plus EOS)
at that position — all in nats. ``is_bow`` says whether the token itself is in 𝓑.

Memory and speed: ``chunk_size`` is the number of vocabulary entries per chunk; the default
(``None``) is :func:`default_blocks` of the device. On the CPU (2,048 entries) the scored rows are
cut into blocks of 512 and spread over torch's intra-op thread count, so the extra memory is about
``threads × 2 × 512 × chunk_size × 4`` bytes (16 MB with 2 threads) whatever the vocabulary size.
On CUDA (32,768 entries, blocks of 4,096 rows: 512 MB of float32 logits at a time) the CuPy kernels
reduce each chunk; CPU-sized blocks there spend their time launching kernels (the sweep of
``benchmarks/results/scoring_gpu.json`` times both on an H200). Texts longer than the model's
positions raise (no silent truncation, no sliding window).

Tokenisation: the scored text is tokenised on its own (``add_special_tokens=False``) and appended to
the context tokens ``[BOS] + tokens(prefix)`` — the way PaliGemma's processor tokenises a suffix — so
only the text's own tokens are scored and their offsets point into the text. End a prefix with
whitespace or a newline (as ``"caption en\\n"``) so that no natural token would straddle the seam.
"""

from __future__ import annotations

import inspect
import math
import warnings
import weakref
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np
import pandas as pd
import torch

from tokenbook.scoring import reduction as _red
from tokenbook.scoring.vocab import bow_vocab_mask

try:  # the CUDA path is optional (the module may be absent; it needs cupy and a GPU)
    from tokenbook.scoring import cuda as _cuda
except Exception:  # pragma: no cover - depends on the installation
    _cuda = None

__all__ = [
    "score_texts",
    "score_image_texts",
    "score_seq2seq",
    "reduce_hidden",
    "default_blocks",
    "OutputHead",
    "TOKEN_COLUMNS",
]

TOKEN_COLUMNS = [
    "seq_id", "token_idx", "token_id", "token", "char_start", "char_end",
    "logprob", "entropy", "bow_logmass", "is_bow",
]


# ----------------------------------------------------------------------------------------------
# the output head, chunked
# ----------------------------------------------------------------------------------------------
@dataclass
class OutputHead:
    """The map hidden state → logits of a model, evaluable one vocabulary slice at a time.

    ``logits(h, lo, hi) == full_logits(h)[:, lo:hi]`` for ``h`` of shape [N, H].
    """

    weight: torch.Tensor  # [V, H]
    bias: torch.Tensor | None = None  # [V]
    scale: float | None = None  # multiply logits
    softcap: float | None = None  # cap * tanh(logits / cap)

    @property
    def vocab_size(self) -> int:
        return int(self.weight.shape[0])

    def logits(self, h: torch.Tensor, lo: int, hi: int) -> torch.Tensor:
        w = self.weight[lo:hi]
        if self.bias is not None:
            out = torch.addmm(self.bias[lo:hi].to(h.dtype), h, w.T)
        else:
            out = h @ w.T
        if self.scale is not None:
            out.mul_(self.scale)
        if self.softcap is not None:  # as the models do it: cap * tanh(logits / cap)
            out.div_(self.softcap).tanh_().mul_(self.softcap)
        return out

    @classmethod
    def from_model(cls, model) -> "OutputHead":
        """Read the output head off a Hugging Face model (see the module docstring)."""
        emb = model.get_output_embeddings()
        weight = getattr(emb, "weight", None)
        if weight is None or weight.dim() != 2:
            raise TypeError(
                f"{type(model).__name__}: the output embedding ({type(emb).__name__}) is not a "
                "linear layer with a [vocab, hidden] weight; tokenbook.scoring cannot chunk it."
            )
        bias = getattr(emb, "bias", None)
        flb = getattr(model, "final_logits_bias", None)
        if flb is not None:
            flb = flb.reshape(-1)
            bias = flb if bias is None else bias + flb
        cfg = model.config
        text_cfg = cfg.get_text_config() if hasattr(cfg, "get_text_config") else cfg
        softcap = getattr(text_cfg, "final_logit_softcapping", None) or getattr(
            cfg, "final_logit_softcapping", None
        )
        scale = None
        if getattr(model, "logit_scale", None) is not None and not isinstance(
            model.logit_scale, torch.nn.Module
        ):
            scale = float(model.logit_scale)  # Cohere
        logits_scaling = getattr(text_cfg, "logits_scaling", None)
        if logits_scaling:  # Granite divides
            scale = (scale or 1.0) / float(logits_scaling)
        return cls(weight=weight, bias=bias, scale=scale, softcap=softcap or None)


def _use_cuda(t: torch.Tensor) -> bool:
    if _cuda is None or t.device.type != "cuda":
        return False
    try:
        return bool(_cuda.cuda_available_for(t))
    except Exception:  # pragma: no cover
        return False


def _check_reduce_inputs(head: OutputHead, hidden, targets, bow_mask) -> None:
    """Shapes, dtypes and vocabulary range of :func:`reduce_hidden`'s inputs."""
    for name, t in (("hidden", hidden), ("targets", targets), ("bow_mask", bow_mask)):
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"{name}: expected a torch.Tensor, got {type(t).__name__}")
    v, h = head.weight.shape
    if hidden.dim() != 2 or hidden.shape[1] != h:
        raise ValueError(f"hidden: expected shape [N, {h}] (the head's hidden size), got "
                         f"{tuple(hidden.shape)}; select the scored rows of the last hidden state")
    if not hidden.is_floating_point():
        raise TypeError(f"hidden: expected a float tensor, got {hidden.dtype}")
    if targets.dim() != 1 or targets.shape[0] != hidden.shape[0]:
        raise ValueError(f"targets: expected shape [{hidden.shape[0]}] (one id per row of "
                         f"hidden), got {tuple(targets.shape)}")
    if targets.is_floating_point() or targets.is_complex() or targets.dtype == torch.bool:
        raise TypeError(f"targets: expected integer token ids, got {targets.dtype}; "
                        f"convert with .long() only if the values are whole ids")
    if targets.numel():
        lo, hi = int(targets.min()), int(targets.max())
        if lo < 0 or hi >= v:
            raise ValueError(f"targets: ids must lie in [0, {v}) (the model's vocabulary), got "
                             f"{lo if lo < 0 else hi}; is the tokenizer the model's own?")
    if bow_mask.dim() != 1 or bow_mask.shape[0] != v:
        raise ValueError(f"bow_mask: expected shape [{v}] (the model's vocabulary), got "
                         f"{tuple(bow_mask.shape)}; build it with bow_vocab_mask(tokenizer, {v})")


#: (vocabulary entries per chunk, rows per block) by device type: small blocks that stay in the
#: CPU's caches; on a GPU large ones, since each block costs a few kernel launches
_BLOCKS = {"cpu": (2048, 512), "cuda": (32768, 4096)}


def default_blocks(device: torch.device | str) -> tuple[int, int]:
    """``(chunk_size, row_block)`` that :func:`reduce_hidden` uses on ``device`` when not given:
    (2048, 512) on the CPU, (32768, 4096) on CUDA and other accelerators.

    >>> default_blocks("cpu"), default_blocks("cuda:0")
    ((2048, 512), (32768, 4096))
    """
    kind = torch.device(device).type
    return _BLOCKS["cpu" if kind == "cpu" else "cuda"]


def reduce_hidden(
    head: OutputHead,
    hidden: torch.Tensor,
    targets: torch.Tensor,
    bow_mask: torch.Tensor,
    *,
    chunk_size: int | None = None,
    row_block: int | None = None,
    workers: int | None = None,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """Memory-bounded ``(logprob, entropy, bow_logmass, max_logit)`` for rows ``hidden[N, H]``.

    ``targets`` is a LongTensor[N] of vocabulary ids, ``bow_mask`` a BoolTensor[V]. Logits are
    computed ``row_block × chunk_size`` at a time and reduced with the running state of
    :mod:`tokenbook.scoring.reduction`. Results are float32 on ``hidden.device``, in nats.
    ``max_logit`` is NaN or +inf exactly when a logit of that row was (the caller names such
    sequences).

    On the CPU the row blocks are spread over ``workers`` threads (default: torch's intra-op
    thread count), each running single-threaded torch ops on a cache-sized block — many small
    parallel regions would otherwise spend their time in thread barriers. Extra memory is
    O(workers × row_block × chunk_size) floats (2 × 4 MB per worker with the defaults), independent
    of the vocabulary size. On CUDA the chunks go to the CuPy kernels when available.
    ``chunk_size`` and ``row_block`` default to :func:`default_blocks` of ``hidden.device``.
    Runs without autograd (results carry no gradient).
    """
    _check_reduce_inputs(head, hidden, targets, bow_mask)
    n = hidden.shape[0]
    v = head.vocab_size
    default_chunk, default_rows = default_blocks(hidden.device)
    chunk_size = default_chunk if chunk_size is None else chunk_size
    row_block = default_rows if row_block is None else row_block
    if chunk_size < 1 or row_block < 1:
        raise ValueError("chunk_size and row_block must be positive")
    dev = hidden.device
    bow_mask = bow_mask.to(dev)
    targets = targets.to(dev)
    if n == 0:
        z = torch.zeros(0, dtype=torch.float32, device=dev)
        return z, z, z, z
    cuda = _use_cuda(hidden)
    if dev.type != "cpu":
        merge_fn = _cuda.merge_states_cuda if cuda else _red.merge_states
        chunk_fn = _cuda.chunk_state_cuda if cuda else _red.chunk_state
        outs = []
        for r0 in range(0, n, row_block):
            h, t = hidden[r0 : r0 + row_block], targets[r0 : r0 + row_block]
            state = None
            for lo in range(0, v, chunk_size):
                hi = min(v, lo + chunk_size)
                local = torch.where((t >= lo) & (t < hi), t - lo, torch.full_like(t, -1))
                st = chunk_fn(head.logits(h, lo, hi), local, bow_mask[lo:hi])
                state = st if state is None else merge_fn(state, st)
            outs.append((*_red.finalize(state), state.m))
        return tuple(torch.cat([o[i] for o in outs]) for i in range(4))  # type: ignore[return-value]

    # CPU: [1, bow] columns give s and b in one pass over each chunk (reduction.chunk_state_)
    cols = torch.stack([torch.ones(v), bow_mask.float()], dim=1)
    starts = list(range(0, n, row_block))
    n_workers = max(1, min(workers or torch.get_num_threads(), len(starts)))

    def block(r0: int):
        # grad mode is thread-local: worker threads must switch autograd off themselves
        with torch.inference_mode():
            h, t = hidden[r0 : r0 + row_block], targets[r0 : r0 + row_block]
            work = torch.empty(h.shape[0] * min(chunk_size, v), dtype=torch.float32)
            state = None
            for lo in range(0, v, chunk_size):
                hi = min(v, lo + chunk_size)
                local = torch.where((t >= lo) & (t < hi), t - lo, torch.full_like(t, -1))
                st = _red.chunk_state_(head.logits(h, lo, hi).float(), local, cols[lo:hi], work)
                state = st if state is None else _red.merge_states(state, st)
            return (*_red.finalize(state), state.m)

    if n_workers == 1:
        outs = [block(r0) for r0 in starts]
    else:
        prev = torch.get_num_threads()
        torch.set_num_threads(1)
        try:
            with ThreadPoolExecutor(n_workers) as pool:
                outs = list(pool.map(block, starts))
        finally:
            torch.set_num_threads(prev)
    return tuple(torch.cat([o[i] for o in outs]) for i in range(4))  # type: ignore[return-value]


# ----------------------------------------------------------------------------------------------
# examples and batching
# ----------------------------------------------------------------------------------------------
@dataclass
class _Example:
    seq_id: int
    inputs: dict[str, torch.Tensor]  # 1-D sequences (input_ids, attention_mask, ...) + extras
    rows: list[int]  # positions in the 1-D sequence whose hidden state predicts a scored token
    targets: list[int]
    offsets: list[tuple[int, int]]
    length_key: str = "input_ids"
    extras: dict[str, Any] = field(default_factory=dict)


_PAD_VALUES = {"attention_mask": 0, "token_type_ids": 0, "decoder_attention_mask": 0}


def _collate(examples: list[_Example], pad_id: int, side: str):
    keys = [k for k in examples[0].inputs]
    batch: dict[str, torch.Tensor] = {}
    shifts: dict[str, list[int]] = {}
    for k in keys:
        seqs = [e.inputs[k] for e in examples]
        if k == "pixel_values":
            batch[k] = torch.stack(seqs)
            continue
        length = max(len(s) for s in seqs)
        pad = _PAD_VALUES.get(k, pad_id)
        out = torch.full((len(seqs), length), pad, dtype=seqs[0].dtype)
        sh = []
        for i, s in enumerate(seqs):
            if side == "left":
                out[i, length - len(s) :] = s
                sh.append(length - len(s))
            else:
                out[i, : len(s)] = s
                sh.append(0)
        batch[k] = out
        shifts[k] = sh
    return batch, shifts


def _pad_id(tokenizer) -> int:
    for name in ("pad_token_id", "eos_token_id", "unk_token_id"):
        v = getattr(tokenizer, name, None)
        if v is not None:
            return int(v)
    return 0


def _model_device(model) -> torch.device:
    try:
        return next(model.parameters()).device
    except StopIteration:  # pragma: no cover
        return torch.device("cpu")


def _max_positions(model) -> int | None:
    cfg = model.config
    text_cfg = cfg.get_text_config() if hasattr(cfg, "get_text_config") else cfg
    for c in (text_cfg, cfg):
        for name in ("max_position_embeddings", "n_positions", "max_seq_len"):
            v = getattr(c, name, None)
            if isinstance(v, int) and v > 0:
                return v
    return None


def _tokenize_with_offsets(tokenizer, texts: Sequence[str], *, target: bool = False):
    """Token ids and char offsets of each text, tokenised alone without special tokens."""
    kw = {"text_target": list(texts)} if target else {"text": list(texts)}
    if getattr(tokenizer, "is_fast", False):
        enc = tokenizer(**kw, add_special_tokens=False, return_offsets_mapping=True)
        return [list(x) for x in enc["input_ids"]], [
            [(int(a), int(b)) for a, b in o] for o in enc["offset_mapping"]
        ]
    # Slow tokenizers (e.g. MarianTokenizer) have no offsets: recover them by decoding prefixes.
    enc = tokenizer(**kw, add_special_tokens=False)
    all_ids = [list(x) for x in enc["input_ids"]]
    return all_ids, [_offsets_by_decoding(tokenizer, ids, t) for ids, t in zip(all_ids, texts)]


def _offsets_by_decoding(tokenizer, ids: list[int], text: str) -> list[tuple[int, int]]:
    """Char offsets from cumulative decoding (for tokenizers without offset mappings)."""
    offs, prev = [], 0
    for k in range(1, len(ids) + 1):
        dec = tokenizer.decode(ids[:k], skip_special_tokens=True, clean_up_tokenization_spaces=False)
        end = min(len(text), len(dec))
        # SentencePiece decoders may drop the leading space of the text: re-align on the text.
        if text.startswith(" ") and not dec.startswith(" "):
            end = min(len(text), len(dec) + 1)
        offs.append((prev, max(prev, end)))
        prev = max(prev, end)
    return offs


def _check_texts(texts, what: str = "text") -> list[str]:
    if isinstance(texts, str):
        raise TypeError(f"{what}s must be a list of strings, not a single string")
    try:
        texts = list(texts)
    except TypeError:
        raise TypeError(f"{what}s must be a list of strings, got {type(texts).__name__}") from None
    if not texts:
        raise ValueError(f"{what}s is empty: give at least one {what} to score")
    for i, t in enumerate(texts):
        if not isinstance(t, str):
            raise TypeError(f"{what} {i} is a {type(t).__name__}, expected str")
        if not t.strip():
            raise ValueError(f"{what} {i} is empty: there is nothing to score. Drop it first.")
    return texts


def _check_prefixes(prefixes, n: int) -> list[str]:
    if prefixes is None:
        return [""] * n
    if isinstance(prefixes, str):
        return [prefixes] * n
    prefixes = list(prefixes)
    if len(prefixes) != n:
        raise ValueError(f"got {len(prefixes)} prefixes for {n} texts; give one per text")
    return prefixes


def _tokens(tokenizer, ids: Sequence[int]) -> list[str]:
    return [str(t) for t in tokenizer.convert_ids_to_tokens(list(ids))]


# ----------------------------------------------------------------------------------------------
# the loop shared by the adapters
# ----------------------------------------------------------------------------------------------
_HEAD_CHECKED: "weakref.WeakKeyDictionary[Any, bool]" = weakref.WeakKeyDictionary()


def _base(model):
    base = getattr(model, "base_model", None)
    if base is None or base is model:
        raise TypeError(
            f"{type(model).__name__} has no base model separate from its head; "
            "tokenbook.scoring needs a *ForCausalLM / *ForConditionalGeneration model."
        )
    return base


def _run(
    model,
    tokenizer,
    examples: list[_Example],
    *,
    forward,
    batch_size: int,
    chunk_size: int | None,
    device,
    progress: bool,
    padding_side: str,
    desc: str,
    head_check=None,
) -> pd.DataFrame:
    from tqdm.auto import tqdm

    if batch_size < 1:
        raise ValueError("batch_size must be >= 1")
    if padding_side not in ("left", "right"):
        raise ValueError(f"padding_side must be 'left' or 'right', got {padding_side!r}")
    device = torch.device(device) if device is not None else _model_device(model)
    head = OutputHead.from_model(model)
    _check_vocabulary(examples, head.vocab_size, tokenizer)
    bow_mask = bow_vocab_mask(tokenizer, head.vocab_size).to(device)
    pad_id = _pad_id(tokenizer)
    order = sorted(range(len(examples)), key=lambda i: -len(examples[i].inputs[examples[i].length_key]))
    batches = [order[i : i + batch_size] for i in range(0, len(order), batch_size)]
    it = tqdm(batches, desc=desc, disable=not progress)
    frames: dict[int, dict[str, np.ndarray]] = {}
    was_training = model.training
    model.eval()
    try:
        with torch.inference_mode():
            for bidx in it:
                exs = [examples[i] for i in bidx]
                batch, shifts = _collate(exs, pad_id, padding_side)
                batch = {k: v.to(device) for k, v in batch.items()}
                hidden = forward(batch)  # [B, T, H]
                if head_check is not None and model not in _HEAD_CHECKED:
                    head_check(batch, hidden, head)
                    _HEAD_CHECKED[model] = True
                rows_b, rows_t, targets, sizes = [], [], [], []
                for i, e in enumerate(exs):
                    sh = shifts[e.length_key][i]
                    rows_b += [i] * len(e.rows)
                    rows_t += [r + sh for r in e.rows]
                    targets += e.targets
                    sizes.append(len(e.rows))
                sel = hidden[torch.tensor(rows_b, device=device), torch.tensor(rows_t, device=device)]
                lp, ent, bow, mx = reduce_hidden(
                    head, sel, torch.tensor(targets, device=device), bow_mask, chunk_size=chunk_size
                )
                bad = torch.isnan(mx) | torch.isposinf(mx) | torch.isnan(lp) | torch.isnan(ent)
                if bool(bad.any()):
                    owners = np.repeat([e.seq_id for e in exs], sizes)[bad.cpu().numpy()]
                    raise FloatingPointError(
                        f"NaN or inf in the logits of sequence(s) {sorted(set(owners.tolist()))}: "
                        "the model's output is not a valid distribution there (check the weights, "
                        "the dtype — try float32 — and the inputs)."
                    )
                lp, ent, bow = (x.float().cpu().numpy() for x in (lp, ent, bow))
                tg = np.asarray(targets, dtype=np.int64)
                bm = bow_mask.cpu().numpy()
                start = 0
                for e, k in zip(exs, sizes):
                    sl = slice(start, start + k)
                    frames[e.seq_id] = {
                        "seq_id": np.full(k, e.seq_id, dtype=np.int64),
                        "token_idx": np.arange(k, dtype=np.int64),
                        "token_id": tg[sl],
                        "token": np.array(_tokens(tokenizer, tg[sl].tolist()), dtype=object),
                        "char_start": np.array([o[0] for o in e.offsets], dtype=np.int64),
                        "char_end": np.array([o[1] for o in e.offsets], dtype=np.int64),
                        "logprob": lp[sl],
                        "entropy": ent[sl],
                        "bow_logmass": bow[sl],
                        "is_bow": bm[tg[sl]],
                    }
                    start += k
    finally:
        model.train(was_training)
    if not frames:
        return pd.DataFrame({c: [] for c in TOKEN_COLUMNS})
    cols = {c: np.concatenate([frames[s][c] for s in sorted(frames)]) for c in TOKEN_COLUMNS}
    return pd.DataFrame(cols)


def _check_vocabulary(examples: list[_Example], vocab_size: int, tokenizer) -> None:
    """Every input and target id must be a row of the model's output (and embedding)."""
    for e in examples:
        ids = [int(x) for x in e.targets]
        # ids read by the decoder (an encoder may have a vocabulary of its own)
        key = "decoder_input_ids" if "decoder_input_ids" in e.inputs else "input_ids"
        value = e.inputs.get(key)
        if isinstance(value, torch.Tensor):
            ids += value.flatten().tolist()
        bad = [i for i in ids if i < 0 or i >= vocab_size]
        if bad:
            raise ValueError(
                f"text {e.seq_id}: token id {max(bad)} is outside the model's vocabulary of "
                f"{vocab_size} (the tokenizer has {len(tokenizer)} tokens); use the tokenizer "
                f"that belongs to the model")


def _accepts(fn, name: str) -> bool:
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):  # pragma: no cover
        return True
    return name in sig.parameters


def _last_hidden(out) -> torch.Tensor:
    h = getattr(out, "last_hidden_state", None)
    return h if h is not None else out[0]


class _quiet_transformers:
    def __enter__(self):
        from transformers.utils import logging as hf_logging

        self._lvl = hf_logging.get_verbosity()
        hf_logging.set_verbosity_error()

    def __exit__(self, *exc):
        from transformers.utils import logging as hf_logging

        hf_logging.set_verbosity(self._lvl)


def _is_multimodal(model) -> bool:
    return _accepts(model.forward, "pixel_values")


# ----------------------------------------------------------------------------------------------
# public adapters
# ----------------------------------------------------------------------------------------------
def score_texts(
    model,
    tokenizer,
    texts: Sequence[str],
    *,
    prefixes: Sequence[str] | str | None = None,
    batch_size: int = 16,
    chunk_size: int | None = None,
    device=None,
    progress: bool = True,
    add_bos: bool = True,
    add_eos: bool = True,
    padding_side: str = "right",
) -> pd.DataFrame:
    """Per-token scores of ``texts`` under a causal LM, conditioned on ``prefixes``.

    Each text is scored after the context ``[BOS] + tokens(prefix)`` (``add_bos``: prepend the
    tokenizer's BOS when it has one; a text with neither BOS nor prefix cannot have its first token
    scored and raises). With ``add_eos`` the tokenizer's EOS is appended and scored as the last row
    (empty span at ``len(text)``): the paper's setup, and what gives the last word its
    end-of-word correction in :func:`~tokenbook.scoring.words.word_surprisals`.
    Padding (``padding_side``) does not change the scores: positions are counted over real tokens.

    Returns the token table (see the module docstring), one row per scored token, nats.
    Raises ``ValueError`` on empty texts or a sequence longer than the model's positions,
    ``FloatingPointError`` (naming the sequences) on NaN/inf logits.
    """
    texts = _check_texts(texts)
    prefixes = _check_prefixes(prefixes, len(texts))
    if _is_multimodal(model):
        raise TypeError(
            f"{type(model).__name__} takes images: use score_image_texts(model, processor, images, "
            "texts, prefixes=...) for image-text models."
        )
    if getattr(model.config, "is_encoder_decoder", False):
        raise TypeError(f"{type(model).__name__} is an encoder-decoder: use score_seq2seq.")
    bos = getattr(tokenizer, "bos_token_id", None) if add_bos else None
    eos = getattr(tokenizer, "eos_token_id", None) if add_eos else None
    if add_eos and eos is None:
        raise ValueError("add_eos=True but the tokenizer has no eos_token; pass add_eos=False")
    ids_list, offs_list = _tokenize_with_offsets(tokenizer, texts)
    uniq = sorted(set(prefixes))
    pref_ids = dict(zip(uniq, tokenizer(uniq, add_special_tokens=False)["input_ids"])) if uniq else {}
    limit = _max_positions(model)
    examples = []
    for i, (text, ids, offs, pre) in enumerate(zip(texts, ids_list, offs_list, prefixes)):
        if not ids:
            raise ValueError(f"text {i} tokenises to no tokens: there is nothing to score.")
        ctx = ([bos] if bos is not None else []) + list(pref_ids[pre])
        if not ctx:
            raise ValueError(
                f"text {i}: no context to condition the first token on (the tokenizer has no BOS "
                "token and the prefix is empty). Give a prefix, or a tokenizer with a bos_token."
            )
        tgt = list(ids) + ([eos] if eos is not None else [])
        offs = list(offs) + ([(len(text), len(text))] if eos is not None else [])
        seq = ctx + tgt[:-1]
        if limit is not None and len(seq) > limit:
            raise ValueError(
                f"text {i} needs {len(seq)} positions (context {len(ctx)} + text {len(tgt)} tokens) "
                f"but the model has only {limit}. Split the text or shorten the prefix."
            )
        seq_t = torch.tensor(seq, dtype=torch.long)
        examples.append(
            _Example(
                seq_id=i,
                inputs={"input_ids": seq_t, "attention_mask": torch.ones_like(seq_t)},
                rows=list(range(len(ctx) - 1, len(seq))),
                targets=tgt,
                offsets=offs,
            )
        )
    base = _base(model)
    pos_ok = _accepts(base.forward, "position_ids")

    def forward(batch):
        kw = dict(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"])
        if pos_ok:
            kw["position_ids"] = (batch["attention_mask"].long().cumsum(-1) - 1).clamp(min=0)
        return _last_hidden(base(**kw, use_cache=False))

    def head_check(batch, hidden, head):
        if not _accepts(model.forward, "logits_to_keep"):
            return
        kw = dict(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"])
        if pos_ok:
            kw["position_ids"] = (batch["attention_mask"].long().cumsum(-1) - 1).clamp(min=0)
        ref = model(**kw, logits_to_keep=1, use_cache=False).logits[:, -1].float()
        ours = head.logits(hidden[:, -1], 0, head.vocab_size).float()
        tol = 1e-3 if ref.dtype == torch.float32 and hidden.dtype == torch.float32 else 0.1
        fin = torch.isfinite(ref)
        if not bool(fin.any()):
            return  # NaN/inf logits are reported (with the sequence ids) by the caller
        err = (ref[fin] - ours[fin]).abs().max().item()
        if not math.isfinite(err) or err > tol * max(1.0, ref.abs().max().item()):
            warnings.warn(
                f"tokenbook.scoring: the chunked output head of {type(model).__name__} differs from "
                f"the model's own logits by {err:.3g}; this architecture applies a transform the "
                "engine does not know. Scores may be wrong — please report it.",
                stacklevel=3,
            )

    return _run(
        model, tokenizer, examples, forward=forward, batch_size=batch_size,
        chunk_size=chunk_size, device=device, progress=progress, padding_side=padding_side,
        desc="scoring", head_check=head_check,
    )


def score_image_texts(
    model,
    processor,
    images: Sequence[Any],
    texts: Sequence[str],
    *,
    prefixes: Sequence[str] | str,
    batch_size: int = 16,
    chunk_size: int | None = None,
    device=None,
    progress: bool = True,
    add_eos: bool = True,
) -> pd.DataFrame:
    """Per-token scores of captions ``texts`` given ``images`` and task ``prefixes`` (PaliGemma).

    The input is built exactly as ``processor(images=image, text=prefix, suffix=text)`` builds it:
    image tokens, BOS, the prefix and ``"\\n"`` (prefix block, ``token_type_ids = 0``, attending
    bidirectionally), then the caption tokens (+ EOS with ``add_eos``; ``token_type_ids = 1``,
    causal). ``token_type_ids`` and ``attention_mask`` are always passed, so caption tokens never see
    the future. Only caption (and EOS) tokens are scored. Returns the token table; nats.
    """
    texts = _check_texts(texts)
    prefixes = _check_prefixes(prefixes, len(texts))
    images = list(images)
    if len(images) != len(texts):
        raise ValueError(f"got {len(images)} images for {len(texts)} texts; give one per text")
    if not _is_multimodal(model):
        raise TypeError(
            f"{type(model).__name__} is a text-only model and cannot take images: use "
            "score_texts(model, tokenizer, texts, prefixes=...) instead."
        )
    tokenizer = getattr(processor, "tokenizer", processor)
    eos = tokenizer.eos_token_id if add_eos else None
    ids_list, offs_list = _tokenize_with_offsets(tokenizer, texts)
    limit = _max_positions(model)
    examples = []
    # one processor call per distinct (image object, prefix): captions of one scene share it
    # (the processor is deterministic, so this is the same input; ``images`` keeps every
    # image alive, so an ``id`` is never reused within the call)
    encoded: dict[tuple[int, str], Any] = {}
    for i, (img, text, pre, ids, offs) in enumerate(zip(images, texts, prefixes, ids_list, offs_list)):
        if not ids:
            raise ValueError(f"text {i} tokenises to no tokens: there is nothing to score.")
        enc = encoded.get((id(img), pre))
        if enc is None:
            with _quiet_transformers():  # the processor warns that it adds the image tokens
                enc = processor(images=[img], text=[pre], return_tensors="pt")  # itself
            encoded[(id(img), pre)] = enc
        ctx = enc["input_ids"][0].tolist()
        tgt = list(ids) + ([eos] if eos is not None else [])
        offs = list(offs) + ([(len(text), len(text))] if eos is not None else [])
        seq = ctx + tgt[:-1]
        if limit is not None and len(seq) > limit:
            raise ValueError(
                f"text {i} needs {len(seq)} positions but the model has only {limit}."
            )
        seq_t = torch.tensor(seq, dtype=torch.long)
        tt = torch.zeros_like(seq_t)
        tt[len(ctx) :] = 1
        examples.append(
            _Example(
                seq_id=i,
                inputs={
                    "input_ids": seq_t,
                    "attention_mask": torch.ones_like(seq_t),
                    "token_type_ids": tt,
                    "pixel_values": enc["pixel_values"][0],
                },
                rows=list(range(len(ctx) - 1, len(seq))),
                targets=tgt,
                offsets=offs,
            )
        )
    base = _base(model)
    dtype = next(model.parameters()).dtype

    def forward(batch):
        mask = batch["attention_mask"]
        out = base(
            input_ids=batch["input_ids"],
            pixel_values=batch["pixel_values"].to(dtype),
            attention_mask=mask,
            token_type_ids=batch["token_type_ids"],
            position_ids=mask.long().cumsum(-1).clamp(min=1),  # PaliGemma counts from 1
            use_cache=False,
        )
        return _last_hidden(out)

    return _run(
        model, tokenizer, examples, forward=forward, batch_size=batch_size,
        chunk_size=chunk_size, device=device, progress=progress, padding_side="right",
        desc="scoring image-text",
    )


def score_seq2seq(
    model,
    tokenizer,
    sources: Sequence[str],
    targets: Sequence[str],
    *,
    batch_size: int = 16,
    chunk_size: int | None = None,
    device=None,
    progress: bool = True,
    add_eos: bool = True,
) -> pd.DataFrame:
    """Teacher-forced per-token scores of ``targets`` given ``sources`` (encoder-decoder, e.g. Marian).

    The source is encoded with the tokenizer's special tokens (Marian appends ``</s>``); the target
    is tokenised with ``text_target=`` (the target-side vocabulary), followed by EOS with
    ``add_eos``, and the decoder is fed ``[decoder_start] + target[:-1]``, as the model's own loss
    does. Returns the token table, ``seq_id`` indexing the pairs; offsets point into the target; nats.
    """
    sources = _check_texts(sources, "source")
    targets = _check_texts(targets, "target")
    if len(sources) != len(targets):
        raise ValueError(f"got {len(sources)} sources and {len(targets)} targets; they must pair up")
    if not getattr(model.config, "is_encoder_decoder", False):
        raise TypeError(f"{type(model).__name__} is not an encoder-decoder: use score_texts.")
    eos = tokenizer.eos_token_id if add_eos else None
    start = model.config.decoder_start_token_id
    if start is None:
        start = _pad_id(tokenizer)
    src_ids = tokenizer(list(sources))["input_ids"]
    ids_list, offs_list = _tokenize_with_offsets(tokenizer, targets, target=True)
    limit = _max_positions(model)
    examples = []
    for i, (text, s_ids, ids, offs) in enumerate(zip(targets, src_ids, ids_list, offs_list)):
        if not ids:
            raise ValueError(f"target {i} tokenises to no tokens: there is nothing to score.")
        tgt = list(ids) + ([eos] if eos is not None else [])
        offs = list(offs) + ([(len(text), len(text))] if eos is not None else [])
        dec = [start] + tgt[:-1]
        for what, n in (("source", len(s_ids)), ("target", len(dec))):
            if limit is not None and n > limit:
                raise ValueError(f"{what} {i} has {n} tokens but the model has only {limit} positions.")
        s = torch.tensor(list(s_ids), dtype=torch.long)
        d = torch.tensor(dec, dtype=torch.long)
        examples.append(
            _Example(
                seq_id=i,
                inputs={
                    "input_ids": s,
                    "attention_mask": torch.ones_like(s),
                    "decoder_input_ids": d,
                    "decoder_attention_mask": torch.ones_like(d),
                },
                rows=list(range(len(dec))),
                targets=tgt,
                offsets=offs,
                length_key="decoder_input_ids",
            )
        )
    base = _base(model)

    def forward(batch):
        out = base(
            input_ids=batch["input_ids"],
            attention_mask=batch["attention_mask"],
            decoder_input_ids=batch["decoder_input_ids"],
            decoder_attention_mask=batch["decoder_attention_mask"],
            use_cache=False,
        )
        return _last_hidden(out)

    return _run(
        model, tokenizer, examples, forward=forward, batch_size=batch_size,
        chunk_size=chunk_size, device=device, progress=progress, padding_side="right",
        desc="scoring seq2seq",
    )
