"""Surface features of each pair (the authors' §4–5 datum features, re-derived).

The authors' feature code (``map_features.py``) is missing from their release; the verified names
are ``src_length, trg_length, src_length_tokenised, trg_length_tokenised``, several word-frequency
features and several source–target length differences. We compute those plus the families the
paper describes (segmentation into subwords, rarity, source–target overlap/copying, repetition):

========================================  =================================================
``src_length``/``trg_length``             words (whitespace tokens)
``src_length_tokenised``/``trg_...``      BPE tokens, without ``</s>``
``length_ratio``                          trg words / src words
``length_difference``                     trg words − src words
``src_segmentation``/``trg_...``          BPE tokens per word
``src_mean_log_freq``/``trg_...``         mean log10 word count (over that side of the corpus,
                                          or wordfreq's Zipf frequency for real languages)
``src_min_log_freq``/``trg_...``          the rarest word's log10 count
``src_rare_words``/``trg_...``            words seen ≤ ``rare_count`` times in the corpus
``overlap``                               share of target words that also occur in the source
``char_similarity``                       difflib ratio of the two strings (1 = copy)
``src_repeats``                           lines with the same source (alternatives, duplicates)
``pair_repeats``                          lines with the same (source, target)
========================================  =================================================

Feature values never read the world's phenomenon labels.
"""

from __future__ import annotations

import difflib
from collections import Counter
from typing import Sequence

import numpy as np
import pandas as pd

FEATURES = ["src_length", "trg_length", "src_length_tokenised", "trg_length_tokenised",
            "length_ratio", "length_difference", "src_segmentation", "trg_segmentation",
            "src_mean_log_freq", "trg_mean_log_freq", "src_min_log_freq", "trg_min_log_freq",
            "src_rare_words", "trg_rare_words", "overlap", "char_similarity", "src_repeats",
            "pair_repeats"]


def _log_freqs(side: list[list[str]], lang: str | None):
    if lang is None:
        counts = Counter(w for ws in side for w in ws)
        return lambda w: float(np.log10(counts[w])), counts
    from wordfreq import zipf_frequency

    counts = Counter(w for ws in side for w in ws)
    return lambda w: float(zipf_frequency(w, lang)), counts


def surface_features(sources: Sequence[str], targets: Sequence[str], tokenizer=None, *,
                     rare_count: int = 2, src_lang: str | None = None,
                     tgt_lang: str | None = None) -> pd.DataFrame:
    """One row per pair (index = position), columns :data:`FEATURES`.

    ``tokenizer``: the models' tokenizer, for tokenised lengths and segmentation (NaN without).
    ``src_lang``/``tgt_lang``: ISO codes to use wordfreq frequencies (real corpora) instead of
    corpus-internal counts (the synthetic world, whose words wordfreq does not know).
    """
    sources, targets = list(sources), list(targets)
    if len(sources) != len(targets):
        raise ValueError(f"{len(sources)} sources but {len(targets)} targets")
    sw = [s.split() for s in sources]
    tw = [t.split() for t in targets]
    if any(len(w) == 0 for w in sw) or any(len(w) == 0 for w in tw):
        bad = next(i for i in range(len(sw)) if not sw[i] or not tw[i])
        raise ValueError(f"pair {bad} has an empty side; clean the corpus first")
    sfreq, scount = _log_freqs(sw, src_lang)
    tfreq, tcount = _log_freqs(tw, tgt_lang)
    src_rep = Counter(sources)
    pair_rep = Counter(zip(sources, targets))
    if tokenizer is not None:
        s_tok = [len(x) for x in tokenizer(sources, add_special_tokens=False)["input_ids"]]
        t_tok = [len(x) for x in tokenizer(targets, add_special_tokens=False)["input_ids"]]
    else:
        s_tok = t_tok = [np.nan] * len(sources)
    rows = []
    for i, (s, t, a, b) in enumerate(zip(sources, targets, sw, tw)):
        sf, tf = [sfreq(w) for w in a], [tfreq(w) for w in b]
        sa = set(a)
        rows.append((len(a), len(b), s_tok[i], t_tok[i], len(b) / len(a), len(b) - len(a),
                     s_tok[i] / len(a), t_tok[i] / len(b), np.mean(sf), np.mean(tf), min(sf),
                     min(tf), sum(scount[w] <= rare_count for w in a),
                     sum(tcount[w] <= rare_count for w in b),
                     sum(w in sa for w in b) / len(b),
                     difflib.SequenceMatcher(None, s, t, autojunk=False).ratio(),
                     src_rep[s], pair_rep[(s, t)]))
    return pd.DataFrame(rows, columns=FEATURES).astype(float)
