"""Tiny models of the grounded papers' architectures, trained on a ``SceneWorld``.

Haley et al.'s design (grounding-uid-and-typology §1.2): a captioner of the PaliGemma
architecture (SigLIP vision tower + Gemma decoder) fine-tuned on image-caption pairs with the
task prefix ``caption {lang}\\n``, and a text-only LM with *the same decoder and tokenizer*
trained on the same text with the same prefix. Here both are built from configs and trained in
stages that mirror how the real pair was made (PaliGemma = pretrained SigLIP + pretrained Gemma):

0. *vision* (``vision_steps``): the SigLIP tower learns to recognise the world's objects (linear
   heads read each patch's shape, colour and size; the heads are then discarded). This stands in
   for SigLIP's own image-text pretraining, which a tiny world cannot reproduce in seconds;
1. *text* (``text_steps``): a ``GemmaForCausalLM`` with the captioner's decoder config and initial
   weights learns the world's text alone (the stand-in for Gemma's pretraining); its weights are
   copied into the captioner's decoder. With ``story_steps`` it first reads whole stories of a
   text-only corpus (``story_documents`` fresh stories of the world's generator per language,
   :meth:`tokenbook.worlds.scenes.SceneWorld.story_corpus`), with a loss on every sentence after
   the pages before it: documents, as Gemma read them;
2. *align* (``align_steps``): only the captioner's projector trains, with the tower and the decoder
   locked (LLaVA-style alignment); the text LM has no projector and waits. From here on the
   tower is locked, so its output for every training image is computed once
   (:func:`locked_tower_states`) and the batches read it: the same weights, bit for bit, as
   running the tower on every batch, in 0.78 of the captioner's step time;
3. *fine-tune* (``steps``): the captioner (projector + decoder; the tower stays locked, as in LiT)
   and the text LM (decoder) continue on the *same* batches in the same order, so the two
   decoders differ only in what the image taught one of them.

Why the stages (measured on the default world, seed 0): with a trainable, randomly initialised
tower, the captioner never learned to read shape (nouns ungrounded after 800 + 3,000 steps, only
colour); a linear probe of a random tower's patch features recovers shape 54% of the time (colour
97%) because its random layers mix the patches. A pretrained but trainable tower did not help
either (no image use after 800 fine-tuning steps, where the locked one already grounded nouns).
Locking the pretrained tower and aligning the projector first made nouns and adjectives
grounded. The story stage is off by default: on the UID world (root seeds 0–7) 1,500 steps on
640 stories made the text LM use what earlier pages say in some root seeds only, by at most
0.11 nats per noun, adjective or count after the fine-tuning, and the captioner grounded less
(HISTORY.md, 29 Nov). The UID chapter uses it with stories whose narrator keeps a noun form
and a fixed ``story_share`` of story sentences in each batch of the later stages (without the
share, 200 stories made half of every batch story sentences and one root seed's captioner
grounded less; HISTORY.md, 1 Dec). ``GroundedModels.log`` records each stage's seconds and the
tower's probe accuracy.
Both models are saved with ``save_pretrained`` and reloaded through ``AutoProcessor`` /
``AutoModelForImageTextToText`` / ``AutoModelForCausalLM``.

Input layout (identical to :func:`tokenbook.scoring.engine.score_image_texts` / ``score_texts``):

* captioner: ``<image>×n  <bos>  tokens("caption {lang}\\n" + context)  tokens(text)  <eos>``
  with ``token_type_ids`` 0 on the prefix block (bidirectional) and 1 on text + EOS (causal);
* text LM: ``<bos>  tokens("caption {lang}\\n" + context)  tokens(text)  <eos>``.

Only text and EOS tokens carry a loss. ``context`` (story sentences before the current one, each
followed by ``"\\n"``) is empty for captions. Story sentences are trained both without and with
their discourse context, so all four conditions U, P, D, P+D are in-distribution
(:func:`condition_inputs`). Losses and perplexities are in nats.
"""

from __future__ import annotations

import io
import json
import math
import multiprocessing as mp
import sys
import time
import traceback
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Iterator, Sequence

import numpy as np
import pandas as pd
import torch

from tokenbook.cache import cached_dir, without_later_defaults
from tokenbook.models.flat_adamw import flat_adamw
from tokenbook.seeds import derive_seed
from tokenbook.worlds.render import COLOURS, GRID, SHAPES

__all__ = ["TrainConfig", "GroundedModels", "train_tokenizer", "build_processor",
           "build_captioner", "build_text_lm", "train_grounded_models", "load_captioner",
           "load_text_lm", "condition_inputs", "task_prefix", "text_prefix", "image_prefix",
           "training_examples", "heldout_perplexities", "cell_targets", "pretrain_vision_tower",
           "probe_vision_tower", "CONDITIONS", "MODELS_VERSION", "length_groups",
           "untrained_pair", "story_documents", "locked_tower_states", "model_vocab_size"]

#: bump when training changes for the same parameters (part of the cache key)
MODELS_VERSION = "paligemma-tiny-v7"   # v7: the output layer stops at <image>
# (model_vocab_size); v6: batches split by length (length_groups); v5: every training stage's
# seed from derive_seed
CONDITIONS = ("U", "P", "D", "PD")


# --------------------------------------------------------------------------- prefixes
def task_prefix(lang: str) -> str:
    """PaliGemma's captioning task prefix *without* its newline (the processor appends it)."""
    return f"caption {lang}"


def text_prefix(lang: str, context: Sequence[str] = ()) -> str:
    """Text before a caption/sentence: ``"caption {lang}\\n"``, then each context line + newline."""
    return f"caption {lang}\n" + "".join(f"{c}\n" for c in context)


def image_prefix(lang: str, context: Sequence[str] = ()) -> str:
    """What to give PaliGemma's processor as ``text`` (it appends the final ``"\\n"``)."""
    return text_prefix(lang, context)[:-1]


# --------------------------------------------------------------------------- configuration
@dataclass(frozen=True)
class TrainConfig:
    """Sizes and optimisation of the tiny captioner and text LM (both get the same steps/data)."""

    vocab_size: int = 512          # BPE merges + alphabet + specials, before PaliGemma's extras
    hidden: int = 64
    layers: int = 2                # decoder layers (and vision layers)
    heads: int = 2
    patch: int | None = None       # None: image_size // 3, one patch per scene grid cell
    vision_steps: int = 300        # stage 0: the vision tower learns the objects (SigLIP stand-in)
    text_steps: int = 800          # stage 1: the shared decoder learns the text (text-only)
    story_steps: int = 0           # stage 1, first: the decoder reads whole stories (documents)
    story_documents: int = 0       # stories in that corpus (each in every language)
    story_share: float = 0.0       # 0: batches drawn from all examples alike; else each batch of
    # a stage with captions and story sentences holds round(batch_size * story_share) of the
    # latter (with or without their pages) and captions for the rest (_batch_indices)
    align_steps: int = 600         # stage 2a: the projector alone (tower and decoder locked)
    align_lr: float = 1e-2         # stage 2a's peak learning rate (the projector starts from noise)
    steps: int = 2500              # stage 2b: captioner (with images) and text LM, same batches
    batch_size: int = 32
    lr: float = 3e-3
    warmup: int = 100
    weight_decay: float = 0.0
    eval_batch_size: int = 64
    threads: int | None = 1        # torch threads while training (None: leave torch's setting).
    # One thread: these models are overhead-bound, and on a shared 2-core machine two threads
    # measured 20x slower than one (spin-waiting under contention).
    parallel: bool = True          # stage 2b of the text LM in a second process (a second core)
    # while the captioner trains; the weights are identical either way (not part of cache keys)

    def __post_init__(self):
        if self.steps < 1 or self.batch_size < 1:
            raise ValueError(f"steps and batch_size must be >= 1, got {self.steps}, "
                             f"{self.batch_size}")
        if min(self.vision_steps, self.text_steps, self.align_steps, self.story_steps,
               self.story_documents) < 0:
            raise ValueError(f"vision_steps, text_steps, align_steps, story_steps and "
                             f"story_documents must be >= 0, got {self.vision_steps}, "
                             f"{self.text_steps}, {self.align_steps}, {self.story_steps}, "
                             f"{self.story_documents}")
        if bool(self.story_steps) != bool(self.story_documents):
            raise ValueError(f"story_steps ({self.story_steps}) and story_documents "
                             f"({self.story_documents}) go together: set both (the corpus and "
                             f"how long the decoder reads it) or neither")
        if self.hidden % self.heads:
            raise ValueError(f"hidden ({self.hidden}) must be divisible by heads ({self.heads})")
        if not 0 <= self.story_share < 1 or (
                self.story_share and not 1 <= round(self.batch_size * self.story_share)
                < self.batch_size):
            raise ValueError(f"story_share must be 0 (off) or a share in (0, 1) that leaves at "
                             f"least one story sentence and one caption in a batch of "
                             f"{self.batch_size}, got {self.story_share}")
        if isinstance(self.lr, bool) or not isinstance(self.lr, (int, float)) or \
                not 0 < float(self.lr) < 1:
            raise ValueError(f"lr (the tiny models' peak learning rate) must be a number in "
                             f"(0, 1), e.g. 0.003, got {self.lr!r}")


# --------------------------------------------------------------------------- tokenizer / processor
def train_tokenizer(texts: Sequence[str], *, vocab_size: int = 512):
    """BPE with SentencePiece-style ``▁`` word starts, wrapped as a ``PreTrainedTokenizerFast``.

    Newlines are split off as their own token, and every whitespace-separated piece (also the
    first piece after a newline) starts with ``▁``, so beginning-of-word tokens are identifiable.
    Specials follow Gemma's ids: ``<pad>`` 0, ``<eos>`` 1, ``<bos>`` 2, ``<unk>`` 3.
    """
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    texts = [t for t in texts if t]
    if not texts:
        raise ValueError("train_tokenizer needs at least one non-empty text")
    specials = ["<pad>", "<eos>", "<bos>", "<unk>"]
    tok = Tokenizer(models.BPE(unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split("\n", behavior="isolated"),
        pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="always", split=True)])
    tok.decoder = decoders.Metaspace(replacement="▁", prepend_scheme="always", split=True)
    alphabet = sorted({ch for t in texts for ch in t.replace(" ", "▁")} | {"▁", "\n"})
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=specials,
                                  initial_alphabet=alphabet, min_frequency=2,
                                  show_progress=False)
    tok.train_from_iterator(list(texts), trainer=trainer)
    return PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<bos>", eos_token="<eos>",
                                   pad_token="<pad>", unk_token="<unk>", padding_side="right")


def build_processor(tokenizer, image_size: int = 48, patch: int = 16):
    """PaliGemma processor (SigLIP image processor + the tokenizer), ``image_seq_length`` set.

    Note: the processor adds ``<image>`` and 1,152 ``<locXXXX>``/``<segXXX>`` tokens to the
    tokenizer; size the models' vocabulary with :func:`model_vocab_size` afterwards.
    """
    from transformers import PaliGemmaProcessor, SiglipImageProcessorPil

    if image_size % patch:
        raise ValueError(f"image_size {image_size} must be a multiple of patch {patch}")
    ip = SiglipImageProcessorPil(size={"height": image_size, "width": image_size},
                                 image_mean=[0.5] * 3, image_std=[0.5] * 3)
    ip.image_seq_length = (image_size // patch) ** 2
    return PaliGemmaProcessor(image_processor=ip, tokenizer=tokenizer)


#: the tokens PaliGemma's processor adds after ``<image>`` (detection boxes and segmentation
#: codes), which no text of the library's worlds contains
_LOCATION_TOKENS = ("<loc", "<seg")


def model_vocab_size(tokenizer) -> int:
    """Outputs (and embedding rows) of the tiny captioner and text LM: every id up to and
    including ``<image>``, i.e. the trained BPE vocabulary, its specials and the image token.

    PaliGemma's processor appends 1,152 ``<loc>``/``<seg>`` tokens after ``<image>``; the real
    model predicts them (detection and segmentation), but no text of the library's worlds
    holds one, and at the tiny models' size an output layer over them would be most of a step's
    work (a story-stage step 0.67 of the time on one core:
    ``benchmarks/results/output_layer.json``, ``benchmarks/output_layer.py``). The scorer
    accepts the shorter vocabulary (``tokenbook.scoring.bow_vocab_mask``: only added tokens may
    be left out) and checks that every scored id is below it.
    """
    image = tokenizer.convert_tokens_to_ids("<image>")
    if image is None or image == tokenizer.unk_token_id:
        raise ValueError("the tokenizer has no <image> token: pass the processor's tokenizer "
                         "(build_processor adds it)")
    after = tokenizer.convert_ids_to_tokens(list(range(image + 1, len(tokenizer))))
    other = [t for t in after if not t.startswith(_LOCATION_TOKENS)]
    if other:
        raise ValueError(f"tokens after <image> other than PaliGemma's <loc>/<seg> tokens: "
                         f"{other[:5]}; add new tokens before build_processor")
    return image + 1


def _gemma_config(cfg: TrainConfig, tokenizer, vocab: int):
    from transformers import GemmaConfig

    return GemmaConfig(vocab_size=vocab, hidden_size=cfg.hidden, intermediate_size=2 * cfg.hidden,
                       num_hidden_layers=cfg.layers, num_attention_heads=cfg.heads,
                       num_key_value_heads=1, head_dim=cfg.hidden // cfg.heads,
                       max_position_embeddings=512, pad_token_id=tokenizer.pad_token_id,
                       bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id,
                       attention_dropout=0.0, tie_word_embeddings=True)


def _patch(cfg: TrainConfig, image_size: int) -> int:
    return cfg.patch or image_size // 3


def build_captioner(processor, cfg: TrainConfig, image_size: int = 48, seed: int = 0):
    """An untrained ``PaliGemmaForConditionalGeneration`` whose vocabulary stops at ``<image>``
    (:func:`model_vocab_size`)."""
    from transformers import PaliGemmaConfig, PaliGemmaForConditionalGeneration, SiglipVisionConfig

    tok = processor.tokenizer
    vocab = model_vocab_size(tok)
    vision = SiglipVisionConfig(hidden_size=cfg.hidden, intermediate_size=2 * cfg.hidden,
                                num_hidden_layers=cfg.layers, num_attention_heads=cfg.heads,
                                image_size=image_size, patch_size=_patch(cfg, image_size),
                                num_channels=3,
                                projection_dim=cfg.hidden)
    config = PaliGemmaConfig(vision_config=vision, text_config=_gemma_config(cfg, tok, vocab),
                             image_token_index=tok.convert_tokens_to_ids("<image>"),
                             vocab_size=vocab, projection_dim=cfg.hidden, hidden_size=cfg.hidden)
    config.pad_token_id = tok.pad_token_id
    torch.manual_seed(seed)
    model = PaliGemmaForConditionalGeneration(config)
    model.generation_config.pad_token_id = tok.pad_token_id
    model.generation_config.eos_token_id = tok.eos_token_id
    model.generation_config.bos_token_id = tok.bos_token_id
    return model


def build_text_lm(captioner, tokenizer, cfg: TrainConfig):
    """A ``GemmaForCausalLM`` with the captioner's decoder config, initialised from its decoder."""
    from transformers import GemmaForCausalLM

    config = _gemma_config(cfg, tokenizer, captioner.config.text_config.vocab_size)
    lm = GemmaForCausalLM(config)
    src = captioner.model.language_model.state_dict()
    missing, unexpected = lm.model.load_state_dict(src, strict=False)
    if missing or unexpected:
        raise RuntimeError(f"decoder weights do not match: missing {missing}, "
                           f"unexpected {unexpected}")
    lm.tie_weights()
    lm.generation_config.pad_token_id = tokenizer.pad_token_id
    lm.generation_config.eos_token_id = tokenizer.eos_token_id
    return lm


def untrained_pair(world, examples: pd.DataFrame, cfg: TrainConfig, seed: int):
    """The processor, captioner and text LM of ``world`` before training: a tokenizer trained on
    ``examples``' texts (:func:`training_examples`) and the language prefixes, the captioner
    initialised from ``seed`` and the text LM from its decoder. Returns ``(processor,
    captioner, text_lm)``."""
    corpus = list(examples["text"]) + [text_prefix(lang) for lang in world.languages]
    tokenizer = train_tokenizer(corpus, vocab_size=cfg.vocab_size)
    size = world.params["image_size"]
    processor = build_processor(tokenizer, size, _patch(cfg, size))
    captioner = build_captioner(processor, cfg, size, seed)
    return processor, captioner, build_text_lm(captioner, processor.tokenizer, cfg)


# --------------------------------------------------------------------------- data
def training_examples(world, split: str = "train") -> pd.DataFrame:
    """Examples of ``split``: one row per (image, prefix context, text).

    Captions with an empty context; each story sentence twice (without and with its preceding
    sentences as context). Columns: ``kind`` (caption/story/story+context), ``lang``,
    ``scene_id``, ``context`` (tuple of str), ``text``.
    """
    rows = []
    caps = world.captions[world.captions.split == split]
    for r in caps.itertuples():
        rows.append(dict(kind="caption", lang=r.lang, scene_id=r.scene_id, context=(),
                         text=r.text))
    st = world.stories[world.stories.split == split].sort_values(["lang", "story_id", "sent_idx"])
    for (lang, sid), g in st.groupby(["lang", "story_id"], sort=True):
        texts = list(g.text)
        for k, r in enumerate(g.itertuples()):
            rows.append(dict(kind="story", lang=lang, scene_id=r.scene_id, context=(),
                             text=r.text))
            if k:
                rows.append(dict(kind="story+context", lang=lang, scene_id=r.scene_id,
                                 context=tuple(texts[:k]), text=r.text))
    return pd.DataFrame(rows)


def story_documents(corpus: pd.DataFrame) -> pd.DataFrame:
    """Whole stories of a text corpus (:meth:`tokenbook.worlds.scenes.SceneWorld.story_corpus`)
    as training examples: one row per (language, story), its sentences joined by ``"\\n"`` as
    the ``text`` after an empty context, so the loss covers every sentence, each after the pages
    before it (token for token the text LM's D input of :func:`condition_inputs`). No image
    (``scene_id`` None): for the text LM only. Columns as :func:`training_examples`."""
    ordered = corpus.sort_values(["lang", "story_id", "sent_idx"])
    return pd.DataFrame([dict(kind="story-document", lang=lang, scene_id=None, context=(),
                              text="\n".join(g.text))
                         for (lang, _), g in ordered.groupby(["lang", "story_id"], sort=True)])


#: ``_Encoded.scene_idx`` of an example without an image (a story document)
NO_IMAGE = -1


@dataclass
class _Encoded:
    prefix_ids: list[list[int]]
    text_ids: list[list[int]]
    scene_idx: np.ndarray        # row of pixel_values per example; NO_IMAGE: none
    pixel_values: torch.Tensor   # [n_scenes, 3, H, W]
    langs: list[str]
    scene_ids: list[str]         # row i of pixel_values is scene_ids[i]
    is_story: np.ndarray         # per example: a story sentence (kind story or story+context)
    # the locked vision tower's output per row of pixel_values, [n_scenes, n_image, hidden]
    # (locked_tower_states), or None: the tower runs on every training batch
    tower_states: torch.Tensor | None = None


def _encode(world, examples: pd.DataFrame, processor) -> _Encoded:
    tok = processor.tokenizer
    prefixes = [text_prefix(lang, ctx) for lang, ctx in zip(examples.lang, examples.context)]
    uniq = sorted(set(prefixes))
    pid = dict(zip(uniq, tok(uniq, add_special_tokens=False)["input_ids"]))
    text_ids = tok(list(examples.text), add_special_tokens=False)["input_ids"]
    scenes = sorted({s for s in examples.scene_id if s is not None})
    index = {s: i for i, s in enumerate(scenes)}
    pixels = (processor.image_processor([world.image(s) for s in scenes],
                                        return_tensors="pt")["pixel_values"] if scenes
              else torch.zeros(0))   # text only (story_documents): nothing to show
    return _Encoded([pid[p] for p in prefixes], text_ids,
                    np.array([NO_IMAGE if s is None else index[s] for s in examples.scene_id]),
                    pixels, list(examples.lang), scenes,
                    examples.kind.isin(["story", "story+context"]).to_numpy())


@torch.no_grad()
def locked_tower_states(tower, pixel_values: torch.Tensor, *, batch_size: int = 256
                        ) -> torch.Tensor:
    """The vision tower's last hidden states for every image of ``pixel_values``
    ([n, 3, H, W] → [n, n_image, hidden]), computed once for the stages in which the tower is
    locked (2a and 2b): their training batches then read these rows instead of running the
    tower again (the captioner's step then takes 0.78 of the time on CPU:
    ``benchmarks/results/locked_tower.json``).

    The tower's output for an image does not depend on the other images of its batch (no
    batch norm, no dropout in the tiny SigLIP tower), so the trained weights are the same
    as with the tower run per batch (a test compares them bit for bit)."""
    was_training = tower.training
    tower.eval()
    try:
        return torch.cat([tower(pixel_values=pixel_values[lo:lo + batch_size]).last_hidden_state
                          for lo in range(0, len(pixel_values), batch_size)])
    finally:
        tower.train(was_training)


def _length(enc: _Encoded, i: int) -> int:
    """Tokens of example ``i`` after its prefix's ``<bos>`` (prefix, text and ``<eos>``)."""
    return len(enc.prefix_ids[i]) + len(enc.text_ids[i]) + 1


#: split a batch in two only when that saves at least this share of its padded positions (a
#: second forward and backward pass costs a few milliseconds of overhead)
MIN_PADDING_SAVED = 0.2


def length_groups(lengths: Sequence[int]) -> list[list[int]]:
    """Positions of one batch's examples as at most two sub-batches: the shorter ones and the
    longer ones, split where the padded area (examples × longest length, summed) is smallest.

    The training step sums the NLL over both sub-batches and divides by their token count, so
    the loss and gradient are those of the whole batch (up to floating-point order), while the
    captions no longer pad to the few long story-with-context examples most batches hold: in
    the UID world 51% of the positions of a whole batch are real tokens, 84% when split (root
    seed 0).
    One group when splitting saves less than :data:`MIN_PADDING_SAVED` of the area.

    >>> length_groups([30, 31, 60, 29])
    [[0, 1, 3], [2]]
    >>> length_groups([30, 31, 32])
    [[0, 1, 2]]
    """
    order = sorted(range(len(lengths)), key=lambda j: lengths[j])
    ranked = [lengths[j] for j in order]
    whole = len(ranked) * ranked[-1] if ranked else 0
    best_area, best_cut = whole, len(ranked)
    for cut in range(1, len(ranked)):
        area = cut * ranked[cut - 1] + (len(ranked) - cut) * ranked[-1]
        if area < best_area:
            best_area, best_cut = area, cut
    if best_cut == len(ranked) or whole - best_area < MIN_PADDING_SAVED * whole:
        return [list(range(len(lengths)))]
    return [sorted(order[:best_cut]), sorted(order[best_cut:])]


def _batch(enc: _Encoded, idx: Sequence[int], tok, *, n_image: int | None) -> dict:
    """Right-padded batch; ``n_image`` image tokens in front (captioner) or none (text LM)."""
    seqs, tts = [], []
    for i in idx:
        head = ([tok.convert_tokens_to_ids("<image>")] * n_image if n_image else []) + \
            [tok.bos_token_id] + enc.prefix_ids[i]
        tail = enc.text_ids[i] + [tok.eos_token_id]
        seqs.append(head + tail)
        tts.append([0] * len(head) + [1] * len(tail))
    width = max(map(len, seqs))
    ids = torch.tensor([s + [tok.pad_token_id] * (width - len(s)) for s in seqs],
                       dtype=torch.long)
    mask = torch.tensor([[1] * len(s) + [0] * (width - len(s)) for s in seqs], dtype=torch.long)
    tt = torch.tensor([t + [0] * (width - len(t)) for t in tts], dtype=torch.long)
    labels = ids.masked_fill(tt == 0, -100)
    out = dict(input_ids=ids, attention_mask=mask, labels=labels)
    if n_image:
        rows = enc.scene_idx[list(idx)]
        if (rows == NO_IMAGE).any():
            raise ValueError("a captioner batch holds text-only examples (story documents): "
                             "train those on the text LM (n_image=None)")
        out["token_type_ids"] = tt
        if enc.tower_states is None:
            out["pixel_values"] = enc.pixel_values[torch.as_tensor(rows)]
        else:   # the locked tower's output, computed once (locked_tower_states)
            out["tower_states"] = enc.tower_states[torch.as_tensor(rows)]
        out["position_ids"] = mask.cumsum(-1).clamp(min=1)  # PaliGemma counts positions from 1
    return out


def _token_nll(model, batch) -> tuple[torch.Tensor, torch.Tensor]:
    """NLL (nats) of every labelled token and the batch row it belongs to.

    Runs the base network and applies the output head only to the rows that predict a labelled
    token (the image and prefix positions need no logits): the same numbers as the model's own
    loss at a fraction of the cost.
    """
    import torch.nn.functional as F

    batch = dict(batch)
    labels = batch.pop("labels")
    if "tower_states" in batch:   # the projector still runs (and trains) on the tower's rows
        from transformers.modeling_outputs import BaseModelOutputWithPooling

        projected = model.model.multi_modal_projector(batch.pop("tower_states"))
        batch["mm_encoder_outputs"] = {"image": BaseModelOutputWithPooling(
            pooler_output=projected)}
    hidden = model.model(**batch, use_cache=False).last_hidden_state[:, :-1]
    tgt = labels[:, 1:]
    keep = tgt != -100
    logits = model.lm_head(hidden[keep]).float()
    cap = getattr(getattr(model.config, "text_config", model.config), "final_logit_softcapping",
                  None)
    if cap:
        logits = cap * torch.tanh(logits / cap)
    nll = F.cross_entropy(logits, tgt[keep], reduction="none")
    rows = torch.arange(tgt.shape[0]).unsqueeze(1).expand_as(tgt)[keep]
    return nll, rows


def _sum_nll(model, batch) -> tuple[torch.Tensor, int]:
    """Summed token NLL (nats) over labelled tokens, and their count."""
    nll, _ = _token_nll(model, batch)
    return nll.sum(), int(nll.numel())


def cell_targets(world, scene_ids: Sequence[str], patches_per_side: int) -> torch.Tensor:
    """What each image patch shows: ``[n_scenes, patches_per_side**2, 3]`` int64 class ids.

    The three columns are the shape, colour and size of the object in the grid cell under the
    patch's centre (1-based indices into ``SHAPES``, ``COLOURS`` and ``("small", "big")``), 0
    where the cell is empty. Patches are in row-major order, as SigLIP flattens them.
    """
    colours, sizes = list(COLOURS), ("small", "big")
    cell = [int((i + 0.5) * GRID / patches_per_side) for i in range(patches_per_side)]
    out = torch.zeros(len(scene_ids), patches_per_side ** 2, 3, dtype=torch.long)
    for k, sid in enumerate(scene_ids):
        where = {(o.row, o.col): o for o in world.scenes[sid].objects}
        for i, r in enumerate(cell):
            for j, c in enumerate(cell):
                o = where.get((r, c))
                if o is not None:
                    out[k, i * patches_per_side + j] = torch.tensor(
                        [SHAPES.index(o.shape) + 1, colours.index(o.colour) + 1,
                         sizes.index(o.size) + 1])
    return out


def pretrain_vision_tower(tower, pixel_values: torch.Tensor, targets: torch.Tensor, *,
                          steps: int, lr: float = 3e-3, batch_size: int = 64, seed: int = 0,
                          progress: bool = False) -> list[float]:
    """Stage 0, the stand-in for SigLIP's pretraining: the tower learns to recognise objects.

    Three linear heads on the tower's patch outputs (``last_hidden_state``, the features
    PaliGemma passes to its projector) predict each patch's shape, colour and size (targets from
    :func:`cell_targets`, class 0 = empty) with summed cross-entropy; the heads are discarded
    afterwards. ``pixel_values``: ``[n_images, 3, H, W]``. Returns the loss per step (nats).
    """
    from tqdm.auto import tqdm

    if steps < 1:
        return []
    g = torch.Generator().manual_seed(seed)
    torch.manual_seed(seed)
    width = tower.config.hidden_size
    heads = torch.nn.ModuleList([torch.nn.Linear(width, int(targets[..., k].max()) + 1)
                                 for k in range(targets.shape[-1])])
    tower.train()
    losses = []
    with flat_adamw(list(tower.parameters()) + list(heads.parameters()), lr=lr,
                    weight_decay=0.0) as opt:
        for _ in tqdm(range(steps), desc="stage 0: vision tower (objects)",
                      disable=not progress, mininterval=1.0):
            idx = torch.randint(len(pixel_values), (batch_size,), generator=g)
            feats = tower(pixel_values=pixel_values[idx]).last_hidden_state  # [B, patches, width]
            y = targets[idx]
            loss = sum(torch.nn.functional.cross_entropy(head(feats).flatten(0, 1),
                                                         y[..., k].flatten())
                       for k, head in enumerate(heads))
            opt.zero_grad()
            loss.backward()
            opt.step()
            losses.append(loss.item())
    tower.eval()
    return losses


@torch.no_grad()
def probe_vision_tower(tower, pixel_values: torch.Tensor, targets: torch.Tensor,
                       train: torch.Tensor, *, l2: float = 1e-2) -> dict[str, float]:
    """Held-out accuracy of linear read-outs of shape, colour and size from the patch features.

    Ridge-regression probes (one-hot targets) fitted on the images where ``train`` is True and
    scored on the others, occupied patches only: a frozen tower that has learned the objects
    scores near 1; chance is about 1/5 (shape), 1/6 (colour), 1/2 (size).
    """
    feats = tower(pixel_values=pixel_values).last_hidden_state.double()
    feats = torch.cat([feats, torch.ones_like(feats[..., :1])], -1)
    occupied = targets[..., 0] > 0
    out = {}
    for k, name in enumerate(("shape", "colour", "size")):
        x_tr = feats[train][occupied[train]]
        y_tr = targets[train][occupied[train]][:, k]
        x_te = feats[~train][occupied[~train]]
        y_te = targets[~train][occupied[~train]][:, k]
        onehot = torch.nn.functional.one_hot(y_tr).double()
        w = torch.linalg.solve(x_tr.T @ x_tr + l2 * torch.eye(x_tr.shape[1], dtype=x_tr.dtype),
                               x_tr.T @ onehot)
        out[name] = float(((x_te @ w).argmax(-1) == y_te).double().mean())
    return out


def _vision_probe(world, tower, processor, enc: _Encoded, patches: int) -> dict[str, float]:
    """Linear-probe accuracy of the tower: fitted on train scenes, scored on validation ones."""
    val = sorted(set(world.captions.scene_id[world.captions.split == "validation"]))
    if not val:
        return {}
    pix_val = processor.image_processor([world.image(s) for s in val],
                                        return_tensors="pt")["pixel_values"]
    pixels = torch.cat([enc.pixel_values, pix_val])
    targets = cell_targets(world, list(enc.scene_ids) + val, patches)
    train = torch.arange(len(pixels)) < len(enc.pixel_values)
    return probe_vision_tower(tower, pixels, targets, train)


@contextmanager
def _only_training(model, modules: Sequence[torch.nn.Module]):
    """Freeze every parameter of ``model`` except those of ``modules`` (restored on exit)."""
    was = {p: p.requires_grad for p in model.parameters()}
    for p in model.parameters():
        p.requires_grad_(False)
    for m in modules:
        for p in m.parameters():
            p.requires_grad_(True)
    try:
        yield [p for m in modules for p in m.parameters()]
    finally:
        for p, flag in was.items():
            p.requires_grad_(flag)


def _batch_loss(model, enc: _Encoded, idx: Sequence[int], tok, *, n_image,
                length_grouped: bool = True) -> torch.Tensor:
    """Mean token NLL (nats) of the examples ``idx`` of ``enc``: their summed NLL over their
    token count, computed in :func:`length_groups` (or in one batch: ``length_grouped`` False;
    the same value up to floating-point order)."""
    groups = (length_groups([_length(enc, i) for i in idx]) if length_grouped
              else [list(range(len(idx)))])
    total, count = 0.0, 0
    for group in groups:
        part, tokens = _sum_nll(model, _batch(enc, [idx[j] for j in group], tok,
                                              n_image=n_image))
        total, count = total + part, count + tokens
    return total / count


def _batch_indices(enc: _Encoded, cfg: TrainConfig, g: torch.Generator) -> Iterator[list[int]]:
    """Each training step's example indices, endlessly, from the generator ``g``.

    Shuffled passes over the examples, ``cfg.batch_size`` at a time (a new permutation when
    fewer than a batch are left). With ``cfg.story_share`` and both captions and story
    sentences among the examples, each batch instead takes round(batch_size × story_share)
    story sentences and captions for the rest, each kind from its own shuffled passes: the
    story sentences' weight in the loss is then fixed, however many stories the world has.
    """
    n_story = round(cfg.batch_size * cfg.story_share)
    if n_story and enc.is_story.any() and not enc.is_story.all():
        pools = [(np.flatnonzero(~enc.is_story), cfg.batch_size - n_story),
                 (np.flatnonzero(enc.is_story), n_story)]
    else:
        pools = [(np.arange(len(enc.text_ids)), cfg.batch_size)]
    state = [[torch.randperm(len(pool), generator=g), 0] for pool, _ in pools]
    while True:
        idx: list[int] = []
        for (pool, size), st in zip(pools, state):
            if st[1] + size > len(pool):
                st[0], st[1] = torch.randperm(len(pool), generator=g), 0
            idx += pool[st[0][st[1]:st[1] + size].numpy()].tolist()
            st[1] += size
        yield idx


def _train(model, enc: _Encoded, tok, cfg: TrainConfig, *, n_image, seed: int, desc: str,
           progress: bool, trainable: Sequence[torch.nn.Module] | None = None,
           length_grouped: bool = True) -> list[float]:
    """``cfg.steps`` AdamW steps (warm-up, then cosine to 10%) on shuffled batches of ``enc``.

    Only the parameters of ``trainable`` (default: the whole model) are updated; the rest of the
    model is frozen meanwhile (no gradients are computed for it). Each step's loss is
    :func:`_batch_loss` (in length groups unless ``length_grouped`` is False: the benchmark's
    baseline). Returns the loss per step.
    """
    from tqdm.auto import tqdm

    def lr_at(step):
        if step < cfg.warmup:
            return (step + 1) / cfg.warmup
        frac = (step - cfg.warmup) / max(1, cfg.steps - cfg.warmup)
        return 0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * frac))

    if n_image and enc.tower_states is not None:
        tower = {id(p) for p in model.model.vision_tower.parameters()}
        if any(id(p) in tower for m in ([model] if trainable is None else trainable)
               for p in m.parameters()):
            raise ValueError("the batches carry the locked tower's states (locked_tower_states), "
                             "but the vision tower is among the trainable modules: train it on "
                             "an encoding without tower_states")
    batches = _batch_indices(enc, cfg, torch.Generator().manual_seed(seed))
    losses = []
    model.train()
    with _only_training(model, [model] if trainable is None else trainable) as params:
        # AdamW on one flat buffer: bitwise the per-tensor (foreach) update (flat_adamw)
        with flat_adamw(params, lr=cfg.lr, weight_decay=cfg.weight_decay,
                        betas=(0.9, 0.98)) as opt:
            sched = torch.optim.lr_scheduler.LambdaLR(opt, lr_at)
            bar = tqdm(range(cfg.steps), desc=desc, disable=not progress, mininterval=1.0)
            for step in bar:
                idx = next(batches)
                loss = _batch_loss(model, enc, idx, tok, n_image=n_image,
                                   length_grouped=length_grouped)
                opt.zero_grad()
                loss.backward()
                torch.nn.utils.clip_grad_norm_(params, 1.0)
                opt.step()
                sched.step()
                losses.append(loss.item())
                if step % 50 == 0:
                    bar.set_postfix(loss=f"{np.mean(losses[-50:]):.3f}")
    model.eval()
    return losses


@torch.no_grad()
def _eval_nll(model, enc: _Encoded, tok, *, n_image, batch_size: int) -> pd.DataFrame:
    """Per-example summed NLL (nats) and token count (text + EOS)."""
    rows = []
    n = len(enc.text_ids)
    for lo in range(0, n, batch_size):
        idx = list(range(lo, min(n, lo + batch_size)))
        batch = _batch(enc, idx, tok, n_image=n_image)
        nll, owner = _token_nll(model, batch)
        sums = torch.zeros(len(idx)).index_add_(0, owner, nll)
        counts = torch.bincount(owner, minlength=len(idx))
        for j, i in enumerate(idx):
            rows.append(dict(i=i, nll=float(sums[j]), n_tokens=int(counts[j])))
    return pd.DataFrame(rows)


def heldout_perplexities(world, captioner, text_lm, processor, *, split: str = "test",
                         batch_size: int = 64) -> pd.DataFrame:
    """Per language and kind: token-level NLL (nats/token) and perplexity of both models.

    Rows: ``lang, kind, n_texts, n_tokens, nll_captioner, nll_text_lm, ppl_captioner,
    ppl_text_lm``. The captioner sees each text's image (P, or P+D with context), the text LM
    the same prefix without it (U, or D).
    """
    ex = training_examples(world, split)
    if ex.empty:
        raise ValueError(f"the world has no {split!r} examples")
    tok = processor.tokenizer
    enc = _encode(world, ex, processor)
    n_image = processor.image_seq_length
    cap = _eval_nll(captioner, enc, tok, n_image=n_image, batch_size=batch_size)
    lm = _eval_nll(text_lm, enc, tok, n_image=None, batch_size=batch_size)
    ex = ex.assign(nll_c=cap.nll.values, nll_t=lm.nll.values, n=cap.n_tokens.values)
    out = ex.groupby(["lang", "kind"], sort=True).agg(
        n_texts=("text", "size"), n_tokens=("n", "sum"), nll_c=("nll_c", "sum"),
        nll_t=("nll_t", "sum")).reset_index()
    out["nll_captioner"] = out.nll_c / out.n_tokens
    out["nll_text_lm"] = out.nll_t / out.n_tokens
    out["ppl_captioner"] = np.exp(out.nll_captioner)
    out["ppl_text_lm"] = np.exp(out.nll_text_lm)
    out.insert(0, "split", split)
    return out.drop(columns=["nll_c", "nll_t"])


def _text_lm_stage(model, enc: _Encoded, tok, cfg: TrainConfig, seed: int, send) -> None:
    """Worker body: stage 2b of the text LM; sends its weights and losses as ``torch.save`` bytes
    (or the error's traceback) through the pipe ``send``."""

    try:
        if cfg.threads:
            torch.set_num_threads(cfg.threads)
        losses = _train(model, enc, tok, cfg, n_image=None, seed=seed, desc="", progress=False)
        buf = io.BytesIO()
        torch.save(dict(state=model.state_dict(), losses=losses), buf)
        send.send_bytes(buf.getvalue())
    except BaseException:  # noqa: BLE001 - the parent re-raises it with the traceback
        send.send_bytes(b"ERROR" + traceback.format_exc().encode())
    finally:
        send.close()


class _TextLMJob:
    """Stage 2b of the text LM, in a forked process (a second core) while the captioner trains.

    The child trains its copy of ``model`` with the same seed and batches, so the weights are
    those of training inline; :meth:`result` loads them into ``model`` and returns the losses.
    Inline instead (training happens in :meth:`result`, with a progress bar) when
    ``cfg.parallel`` is False, where ``fork`` is unavailable or not the platform's default
    (macOS, Windows), or inside a daemonic process, which may not have children.
    """

    def __init__(self, model, enc: _Encoded, tok, cfg: TrainConfig, *, seed: int,
                 progress: bool):
        self.model, self.enc, self.tok, self.cfg = model, enc, tok, cfg
        self.seed, self.progress = seed, progress
        self.parallel = (bool(cfg.parallel) and sys.platform.startswith("linux")
                         and not mp.current_process().daemon)
        self._proc = self._recv = None
        if self.parallel:
            ctx = mp.get_context("fork")
            self._recv, send = ctx.Pipe(duplex=False)
            self._proc = ctx.Process(target=_text_lm_stage, args=(model, enc, tok, cfg, seed, send),
                                     daemon=True, name="tokenbook-text-lm")
            self._proc.start()
            send.close()

    def result(self) -> list[float]:
        """Wait for (or run) the training; ``model`` then holds the trained weights."""
        if not self.parallel:
            return _train(self.model, self.enc, self.tok, self.cfg, n_image=None,
                          seed=self.seed, desc="stage 2b: text LM (Gemma)",
                          progress=self.progress)
        try:
            payload = self._recv.recv_bytes()
        except EOFError:
            self._proc.join()
            raise RuntimeError(f"the process training the text LM died (exit code "
                               f"{self._proc.exitcode}); rerun with "
                               f"TrainConfig(parallel=False) to train it inline") from None
        finally:
            self._recv.close()
        self._proc.join()
        if payload.startswith(b"ERROR"):
            raise RuntimeError("training the text LM failed in its worker process:\n"
                               + payload[5:].decode())
        out = torch.load(io.BytesIO(payload), weights_only=True)
        self.model.load_state_dict(out["state"])
        self.model.eval()
        return out["losses"]

    def cancel(self) -> None:
        """Stop the worker (after an error elsewhere); harmless when it has finished."""
        if self._proc is not None and self._proc.is_alive():
            self._proc.terminate()
            self._proc.join()


# --------------------------------------------------------------------------- train + cache
@dataclass
class GroundedModels:
    """Where the trained models live, and their held-out perplexities (nats per token)."""

    root: Path
    captioner_dir: Path
    text_lm_dir: Path
    heldout: pd.DataFrame
    log: dict

    def summary(self) -> pd.DataFrame:
        """Held-out captions per language: perplexity of each model (lower is better)."""
        h = self.heldout[self.heldout.kind == "caption"]
        return h[["lang", "n_texts", "n_tokens", "ppl_captioner", "ppl_text_lm"]].reset_index(
            drop=True)

    def plot_heldout(self, kind: str = "caption"):
        """Bar chart: held-out perplexity per language of the captioner (P) and text LM (U)."""
        import matplotlib.pyplot as plt

        h = self.heldout[self.heldout.kind == kind]
        if h.empty:
            raise ValueError(f"no held-out rows of kind {kind!r}; kinds: "
                             f"{sorted(self.heldout.kind.unique())}")
        x = np.arange(len(h))
        fig, ax = plt.subplots(figsize=(6.4, 3.6))
        ax.bar(x - 0.2, h.ppl_text_lm, 0.4, label="text-only LM (U)", color="#7f7f7f")
        ax.bar(x + 0.2, h.ppl_captioner, 0.4, label="captioner (P)", color="#1f77b4")
        ax.set_xticks(x, h.lang)
        ax.set_xlabel("language")
        ax.set_ylabel("held-out perplexity (per token)")
        ax.set_title(f"Held-out {kind} texts ({h.split.iloc[0]} split)")
        ax.legend()
        fig.tight_layout()
        return fig


def _params(world, cfg: TrainConfig, seed: int) -> dict:
    import transformers

    train = {k: v for k, v in cfg.__dict__.items() if k != "parallel"}  # same weights either way
    train = without_later_defaults(train, {"story_steps": 0, "story_documents": 0,
                                           "story_share": 0.0})
    return dict(world=world.fingerprint, world_params=world.params, train=train,
                seed=int(seed), version=MODELS_VERSION, transformers=transformers.__version__,
                torch=torch.__version__.split("+")[0])


def train_grounded_models(world, seed: int = 0, *, config: TrainConfig | None = None,
                          progress: bool = True, refresh: bool = False) -> GroundedModels:
    """Train (or load from the cache) the tokenizer, captioner and text LM of ``world``.

    Cached with :func:`tokenbook.cache.cached_dir` under the world's fingerprint and every
    training parameter. Returns :class:`GroundedModels`; ``heldout`` has per-language test-split
    perplexities of both models (see :func:`heldout_perplexities`).
    """
    cfg = config or TrainConfig()
    # one stream per use: the weights' initialisation and each stage's batch order; stage 2b's
    # captioner and text LM share theirs (the same batches for both, only one sees the images)
    streams = {name: derive_seed(seed, "grounded-models", name)
               for name in ("init", "vision", "decoder-stories", "decoder-text", "projector",
                            "paired-batches")}

    def build(out: Path) -> None:
        t0, c0 = time.perf_counter(), time.process_time()
        old_threads = torch.get_num_threads()
        if cfg.threads:
            torch.set_num_threads(cfg.threads)
        text_lm_job: _TextLMJob | None = None
        try:
            ex = training_examples(world, "train")
            processor, captioner, text_lm = untrained_pair(world, ex, cfg, streams["init"])
            tok = processor.tokenizer
            enc = _encode(world, ex, processor)
            tower = captioner.model.vision_tower
            patches = int(round(processor.image_seq_length ** 0.5))
            t1 = time.perf_counter()
            # stage 0 (like SigLIP before PaliGemma): the vision tower learns the world's objects
            vision_losses = pretrain_vision_tower(
                tower, enc.pixel_values, cell_targets(world, enc.scene_ids, patches),
                steps=cfg.vision_steps, lr=cfg.lr, seed=streams["vision"], progress=progress)
            probe = _vision_probe(world, tower, processor, enc, patches)
            # from here on the tower is locked: its output per scene is computed once
            enc = replace(enc, tower_states=locked_tower_states(tower, enc.pixel_values))
            t2 = time.perf_counter()
            # stage 1 (like Gemma before PaliGemma): the shared decoder learns the text alone,
            # first (story_steps) reading whole stories as documents
            if cfg.story_steps:
                documents = story_documents(world.story_corpus(cfg.story_documents))
                _train(text_lm, _encode(world, documents, processor), tok,
                       replace(cfg, steps=cfg.story_steps), n_image=None,
                       seed=streams["decoder-stories"], desc="stage 1: decoder reads stories",
                       progress=progress)
            if cfg.text_steps:
                _train(text_lm, enc, tok, replace(cfg, steps=cfg.text_steps), n_image=None,
                       seed=streams["decoder-text"], desc="stage 1: decoder on text",
                       progress=progress)
            if cfg.text_steps or cfg.story_steps:
                missing, unexpected = captioner.model.language_model.load_state_dict(
                    text_lm.model.state_dict(), strict=False)
                if missing or unexpected:
                    raise RuntimeError(f"decoder copy failed: {missing} {unexpected}")
            t3 = time.perf_counter()
            # stage 2b of the text LM needs nothing from the captioner: it runs meanwhile
            text_lm_job = _TextLMJob(text_lm, enc, tok, cfg, seed=streams["paired-batches"],
                                     progress=progress)
            # stage 2a: only the projector learns, mapping the locked tower's features into the
            # locked decoder (the text LM has no projector, so it has nothing to align)
            n_image = processor.image_seq_length
            projector = captioner.model.multi_modal_projector
            if cfg.align_steps:
                _train(captioner, enc, tok, replace(cfg, steps=cfg.align_steps, lr=cfg.align_lr),
                       n_image=n_image, seed=streams["projector"], desc="stage 2a: projector",
                       progress=progress, trainable=[projector])
            # stage 2b: the same batches for both; only the captioner sees the images, and its
            # vision tower stays locked
            desc = "stage 2b: captioner" + (" (text LM alongside)" if text_lm_job.parallel
                                            else " (PaliGemma)")
            cap_losses = _train(captioner, enc, tok, cfg, n_image=n_image,
                                seed=streams["paired-batches"],
                                desc=desc, progress=progress,
                                trainable=[projector, captioner.model.language_model])
            t4 = time.perf_counter()
            lm_losses = text_lm_job.result()
            t5 = time.perf_counter()
            held = heldout_perplexities(world, captioner, text_lm, processor,
                                        batch_size=cfg.eval_batch_size)
            t6 = time.perf_counter()
        finally:
            if text_lm_job is not None:
                text_lm_job.cancel()
            torch.set_num_threads(old_threads)
        captioner.save_pretrained(out / "captioner")
        processor.save_pretrained(out / "captioner")
        text_lm.save_pretrained(out / "text_lm")
        tok.save_pretrained(out / "text_lm")
        held.to_csv(out / "heldout.csv", index=False)
        log = dict(n_train_examples=len(ex), vocab_size=len(tok),
                   captioner_params=sum(p.numel() for p in captioner.parameters()),
                   text_lm_params=sum(p.numel() for p in text_lm.parameters()),
                   seconds=dict(setup=t1 - t0, vision=t2 - t1, decoder_text=t3 - t2,
                                captioner=t4 - t3, text_lm_after_captioner=t5 - t4,
                                heldout=t6 - t5,
                                total=t6 - t0, cpu_total=time.process_time() - c0),
                   vision_probe_accuracy=probe,
                   vision_loss_curve=vision_losses[::10],
                   captioner_loss_curve=cap_losses[::10], text_lm_loss_curve=lm_losses[::10],
                   torch_threads=torch.get_num_threads(),
                   text_lm_in_second_process=text_lm_job.parallel)
        (out / "train_log.json").write_text(json.dumps(log, indent=1))

    root = cached_dir("grounded-models", _params(world, cfg, seed), build, refresh=refresh)
    return GroundedModels(root=root, captioner_dir=root / "captioner", text_lm_dir=root / "text_lm",
                          heldout=pd.read_csv(root / "heldout.csv"),
                          log=json.loads((root / "train_log.json").read_text()))


# --------------------------------------------------------------------------- loading
def _check_dir(path, what: str) -> Path:
    path = Path(path)
    if not (path / "config.json").exists():
        raise FileNotFoundError(f"{what}: no config.json in {path}; pass a folder written by "
                                f"save_pretrained (e.g. train_grounded_models(world).{what}_dir)")
    return path


def load_captioner(path) -> tuple[Any, Any]:
    """``(model, processor)`` through ``AutoModelForImageTextToText`` and ``AutoProcessor``."""
    from transformers import AutoModelForImageTextToText, AutoProcessor

    path = _check_dir(path, "captioner")
    processor = AutoProcessor.from_pretrained(path)
    if getattr(processor.image_processor, "image_seq_length", None) is None:
        raise ValueError(f"{path}: the image processor has no image_seq_length")
    model = AutoModelForImageTextToText.from_pretrained(path).eval()
    return model, processor


def load_text_lm(path) -> tuple[Any, Any]:
    """``(model, tokenizer)`` through ``AutoModelForCausalLM`` and ``AutoTokenizer``."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    path = _check_dir(path, "text_lm")
    return AutoModelForCausalLM.from_pretrained(path).eval(), AutoTokenizer.from_pretrained(path)


# --------------------------------------------------------------------------- conditions
def condition_inputs(world, story_id: str, sent_idx: int, condition: str,
                     lang: str | None = None) -> dict:
    """What to score story sentence ``sent_idx`` of ``story_id`` with, in ``condition``.

    * ``U``: text LM, prefix ``"caption {lang}\\n"``, no image;
    * ``P``: captioner with the sentence's scene image, no discourse;
    * ``D``: text LM, prefix with the preceding sentences (one per line);
    * ``PD`` (or ``"P+D"``): captioner with the image and the preceding sentences.

    Returns ``dict(image=PIL.Image | None, prefix=str, text=str, lang=str, condition=str,
    model="captioner" | "text_lm")``. ``prefix`` is exactly what to pass as ``prefixes=`` to
    ``tokenbook.scoring.score_image_texts`` (image conditions: without the final newline, which
    PaliGemma's processor appends) or ``score_texts`` (text conditions: ending in ``"\\n"``), so
    the model sees the same token sequence it was trained on. For ``sent_idx == 0`` D equals U and
    PD equals P (there is no preceding text).
    """
    cond = "PD" if condition in ("P+D", "DP") else condition
    if cond not in CONDITIONS:
        raise ValueError(f"unknown condition {condition!r}; use one of {CONDITIONS} (or 'P+D')")
    if lang is None:
        if len(world.languages) != 1:
            raise ValueError(f"pass lang=... (one of {world.languages}): stories are told in "
                             f"every language of the world")
        lang = world.languages[0]
    if lang not in world.languages:
        raise ValueError(f"unknown language {lang!r}; this world has {world.languages}")
    st = world.stories
    g = st[(st.story_id == story_id) & (st.lang == lang)].sort_values("sent_idx")
    if g.empty:
        raise KeyError(f"unknown story_id {story_id!r} (ids look like 's0003')")
    if sent_idx not in set(g.sent_idx):
        raise KeyError(f"story {story_id} has sentences 0..{g.sent_idx.max()}, not {sent_idx}")
    row = g[g.sent_idx == sent_idx].iloc[0]
    context = list(g[g.sent_idx < sent_idx].text) if cond in ("D", "PD") else []
    if cond in ("P", "PD"):
        return dict(image=world.image(row.scene_id), prefix=image_prefix(lang, context),
                    text=row.text, lang=lang, condition=cond, model="captioner")
    return dict(image=None, prefix=text_prefix(lang, context), text=row.text, lang=lang,
                condition=cond, model="text_lm")
