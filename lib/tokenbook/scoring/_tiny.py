"""Tiny tokenizers and models of real architectures, for the scoring tests and benchmark.

Private: chapters build their models with :mod:`tokenbook.models`.
"""

from __future__ import annotations

import torch

CORPUS = [
    "the dog runs in the park",
    "a small cat sleeps on the red mat",
    "two birds sing in the old tree",
    "the girl throws a ball to the dog",
    "a man rides a bike down the street",
    "children play football on the green grass",
    "the woman reads a book under the tree",
    "a black dog jumps over the fence.",
    "cats and dogs don't like rain",
    "the sun sets behind the mountains",
] * 3


def tiny_tokenizer(style: str = "bytelevel", vocab_size: int | None = None):
    """A BPE tokenizer trained on :data:`CORPUS`; ``style`` 'bytelevel' (Ġ) or 'metaspace' (▁)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
    from transformers import PreTrainedTokenizerFast

    if vocab_size is None:
        vocab_size = 400 if style == "bytelevel" else 200
    special = ["<pad>", "<bos>", "<eos>", "<unk>"]
    tok = Tokenizer(models.BPE(unk_token="<unk>"))
    if style == "bytelevel":
        tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
        tok.decoder = decoders.ByteLevel()
        tok.post_processor = processors.ByteLevel(trim_offsets=True)
        alphabet = pre_tokenizers.ByteLevel.alphabet()
    elif style == "metaspace":
        tok.pre_tokenizer = pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="never")
        tok.decoder = decoders.Metaspace(replacement="▁", prepend_scheme="never")
        alphabet = []
    else:
        raise ValueError(style)
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size, special_tokens=special, initial_alphabet=alphabet, show_progress=False
    )
    tok.train_from_iterator(CORPUS, trainer)
    return PreTrainedTokenizerFast(
        tokenizer_object=tok, pad_token="<pad>", bos_token="<bos>", eos_token="<eos>", unk_token="<unk>"
    )


def tiny_causal(arch: str, vocab_size: int, seed: int = 0, dtype=torch.float32, **over):
    """A randomly initialised tiny causal LM of a real architecture ('gpt2', 'qwen2', 'gemma', 'gemma2')."""
    import transformers as tf

    torch.manual_seed(seed)
    common = dict(vocab_size=vocab_size, pad_token_id=0, bos_token_id=1, eos_token_id=2)
    if arch == "gpt2":
        cfg = tf.GPT2Config(n_embd=32, n_layer=2, n_head=2, n_positions=64, **common)
        cls = tf.GPT2LMHeadModel
    elif arch == "qwen2":
        cfg = tf.Qwen2Config(hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                             num_attention_heads=2, num_key_value_heads=1,
                             max_position_embeddings=64, tie_word_embeddings=False, **common)
        cls = tf.Qwen2ForCausalLM
    elif arch == "gemma":
        cfg = tf.GemmaConfig(hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                             num_attention_heads=2, num_key_value_heads=1, head_dim=16,
                             max_position_embeddings=64, **common)
        cls = tf.GemmaForCausalLM
    elif arch == "gemma2":
        cfg = tf.Gemma2Config(hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                              num_attention_heads=2, num_key_value_heads=1, head_dim=16,
                              max_position_embeddings=64, final_logit_softcapping=2.0, **common)
        cls = tf.Gemma2ForCausalLM
    else:
        raise ValueError(arch)
    for k, v in over.items():
        setattr(cfg, k, v)
    model = cls(cfg).to(dtype).eval()
    # random init is near-uniform; sharpen the head so the distributions are far from flat
    with torch.no_grad():
        model.get_output_embeddings().weight.mul_(8.0)
    return model


def tiny_paligemma(seed: int = 0, image_size: int = 16, patch: int = 8, softcap: float | None = None):
    """A tiny PaliGemma (SigLIP + Gemma) and its processor, with a metaspace BPE tokenizer.

    Returns ``(model, processor)``. The processor adds PaliGemma's ``<image>``/``<loc>``/``<seg>``
    tokens, so the vocabulary is sized after building it.
    """
    import transformers as tf

    tok = tiny_tokenizer("metaspace")
    tok.add_special_tokens({"additional_special_tokens": ["<image>"]})
    ip = tf.SiglipImageProcessorPil(size={"height": image_size, "width": image_size})
    n_img = (image_size // patch) ** 2
    ip.image_seq_length = n_img
    proc = tf.PaliGemmaProcessor(image_processor=ip, tokenizer=tok)
    tok = proc.tokenizer
    torch.manual_seed(seed)
    vision = tf.SiglipVisionConfig(hidden_size=32, intermediate_size=64, num_hidden_layers=1,
                                   num_attention_heads=2, image_size=image_size, patch_size=patch)
    text = tf.GemmaConfig(hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                          num_attention_heads=2, num_key_value_heads=1, head_dim=16,
                          vocab_size=len(tok), max_position_embeddings=128,
                          pad_token_id=tok.pad_token_id, bos_token_id=tok.bos_token_id,
                          eos_token_id=tok.eos_token_id)
    if softcap is not None:
        text.final_logit_softcapping = softcap
    cfg = tf.PaliGemmaConfig(vision_config=vision, text_config=text,
                             image_token_index=tok.convert_tokens_to_ids("<image>"),
                             projection_dim=32, hidden_size=32)
    cfg.vocab_size = len(tok)
    model = tf.PaliGemmaForConditionalGeneration(cfg).eval()
    with torch.no_grad():
        model.get_output_embeddings().weight.mul_(8.0)
    return model, proc


def tiny_marian(seed: int = 0):
    """A tiny MarianMTModel with a joint metaspace BPE tokenizer. Returns ``(model, tokenizer)``."""
    import transformers as tf

    tok = tiny_tokenizer("metaspace")
    torch.manual_seed(seed)
    cfg = tf.MarianConfig(vocab_size=len(tok), d_model=32, encoder_layers=2, decoder_layers=2,
                          encoder_attention_heads=2, decoder_attention_heads=2, encoder_ffn_dim=64,
                          decoder_ffn_dim=64, max_position_embeddings=64, pad_token_id=tok.pad_token_id,
                          eos_token_id=tok.eos_token_id, decoder_start_token_id=tok.pad_token_id,
                          forced_eos_token_id=tok.eos_token_id, dropout=0.0)
    model = tf.MarianMTModel(cfg).eval()
    with torch.no_grad():
        model.get_output_embeddings().weight.mul_(8.0)
        model.final_logits_bias.normal_(0, 1.0)  # exercise the bias path
    return model, tok
