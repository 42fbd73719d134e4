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
``src_mean_log_freq``/``trg_...``         mean word frequency: wordfreq's Zipf frequency
                                          (log10 per billion words) for a real language,
                                          else log10 of the word's count in the corpus
``src_min_log_freq``/``trg_...``          the rarest word's frequency (same scale)
``src_rare_words``/``trg_...``            rare words: Zipf < ``rare_zipf`` in the language's
                                          reference list (wordfreq), else seen ≤
                                          ``rare_count`` times in the corpus
``overlap``                               share of target words that also occur in the source
``char_similarity``                       difflib ratio of the two strings (1 = copy)
``src_repeats``                           lines with the same source (alternatives, duplicates)
``pair_repeats``                          lines with the same (source, target)
========================================  =================================================

**Rarity.** As the authors (wordfreq 3.0.1 in their environment), a word's frequency and
rarity come from a per-language *reference* frequency list when the language is given
(``src_lang``/``tgt_lang``, ISO 639-1 codes wordfreq knows): a word is rare when its Zipf
frequency is below ``rare_zipf`` (default 3.0, i.e. fewer than one occurrence per million words;
the threshold is ours, the authors' feature code is not released). Without a language, and only
then, the corpus itself is the reference: log10 counts, rare = seen ≤ ``rare_count`` times. That
fallback exists for the tiny synthetic languages, which wordfreq does not know; on a small real
sample it mostly measures length, so give the language for real data.

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


def reference_languages() -> set[str]:
    """The languages wordfreq has a reference frequency list for (ISO 639-1 codes).

    wordfreq is an optional dependency (the ``paper`` extra, in the lock); without it a clear
    ImportError says how to install it."""
    try:
        from wordfreq import available_languages
    except ImportError:
        raise ImportError("rarity against a reference frequency list needs wordfreq: "
                          "pip install 'wordfreq>=3.1' (or tokenbook[paper])") from None
    return set(available_languages())


def _frequencies(side: list[list[str]], lang: str | None, *, rare_count: int,
                 rare_zipf: float):
    """(word → frequency, word → is rare) from wordfreq (``lang``) or the corpus (``None``)."""
    if lang is None:  # documented fallback: the corpus is its own reference
        counts = Counter(w for ws in side for w in ws)
        return (lambda w: float(np.log10(counts[w]))), (lambda w: counts[w] <= rare_count)
    known = reference_languages()
    from wordfreq import zipf_frequency  # optional dependency (the `paper` extra)

    if lang not in known:
        raise ValueError(f"wordfreq has no frequency list for language {lang!r}; give one of "
                         f"{sorted(known)} or None to count frequencies in the corpus itself")
    cache: dict[str, float] = {}

    def zipf(w: str) -> float:
        if w not in cache:
            cache[w] = float(zipf_frequency(w, lang))
        return cache[w]

    return zipf, (lambda w: zipf(w) < rare_zipf)


def surface_features(sources: Sequence[str], targets: Sequence[str], tokenizer=None, *,
                     rare_count: int = 2, rare_zipf: float = 3.0, src_lang: str | None = None,
                     tgt_lang: str | None = None) -> pd.DataFrame:
    """One row per pair (index = position), columns :data:`FEATURES`.

    ``tokenizer``: the models' tokenizer, for tokenised lengths and segmentation (NaN without).
    ``src_lang``/``tgt_lang``: ISO 639-1 codes: frequencies are wordfreq's Zipf values and a
    word is rare when its Zipf frequency < ``rare_zipf``. Without a language (the synthetic
    world, whose words wordfreq does not know) the corpus is the reference: log10 counts, rare =
    seen ≤ ``rare_count`` times (see the module docstring).
    """
    sources, targets = list(sources), list(targets)
    if len(sources) != len(targets):
        raise ValueError(f"{len(sources)} sources but {len(targets)} targets")
    sw = [s.split() for s in sources]
    tw = [t.split() for t in targets]
    if any(len(w) == 0 for w in sw) or any(len(w) == 0 for w in tw):
        bad = next(i for i in range(len(sw)) if not sw[i] or not tw[i])
        raise ValueError(f"pair {bad} has an empty side; clean the corpus first")
    sfreq, srare = _frequencies(sw, src_lang, rare_count=rare_count, rare_zipf=rare_zipf)
    tfreq, trare = _frequencies(tw, tgt_lang, rare_count=rare_count, rare_zipf=rare_zipf)
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
                     min(tf), sum(srare(w) for w in a), sum(trare(w) for w in b),
                     sum(w in sa for w in b) / len(b),
                     difflib.SequenceMatcher(None, s, t, autojunk=False).ratio(),
                     src_rep[s], pair_rep[(s, t)]))
    return pd.DataFrame(rows, columns=FEATURES).astype(float)
