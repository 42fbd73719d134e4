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
