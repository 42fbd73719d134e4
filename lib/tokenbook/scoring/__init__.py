"""tokenbook.scoring — the one way the book computes token log-probabilities.

Public API (all scores in nats):

* :func:`score_texts` (causal LM), :func:`score_image_texts` (PaliGemma-style),
  :func:`score_seq2seq` (encoder-decoder) → token table with columns
  ``seq_id, token_idx, token_id, token, char_start, char_end, logprob, entropy, bow_logmass, is_bow``;
* :func:`word_surprisals` → word table with the Pimentel & Meister (2024) beginning-of-word
  correction;
* :func:`softmax_row_dots` → ⟨softmax(l_j), softmax(l_k)⟩ without materialising the softmax;
* :func:`check_same_tokenization` → guard before comparing two token tables token by token.

Memory: logits are reduced over vocabulary chunks (:mod:`tokenbook.scoring.reduction`), never
materialised as [tokens × vocabulary]. On CUDA devices the CuPy kernels of
:mod:`tokenbook.scoring.cuda` are used when available.
"""

from tokenbook.scoring.checks import check_same_tokenization
from tokenbook.scoring.dots import row_logsumexp, softmax_row_dots
from tokenbook.scoring.engine import (TOKEN_COLUMNS, OutputHead, default_blocks, reduce_hidden,
                                      score_image_texts, score_seq2seq, score_texts)
from tokenbook.scoring.reduction import (RowState, chunk_state, finalize, init_state,
                                         merge_states)
from tokenbook.scoring.vocab import bow_vocab_mask
from tokenbook.scoring.words import WORD_COLUMNS, word_spans, word_surprisals

__all__ = [
    "score_texts", "score_image_texts", "score_seq2seq", "word_surprisals", "word_spans",
    "softmax_row_dots", "row_logsumexp", "check_same_tokenization", "bow_vocab_mask",
    "reduce_hidden", "default_blocks", "OutputHead", "TOKEN_COLUMNS", "WORD_COLUMNS",
    "RowState", "init_state", "chunk_state", "merge_states", "finalize",
]
