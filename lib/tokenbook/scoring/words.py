"""From token scores to word surprisals (Pimentel & Meister 2024 beginning-of-word correction).

Definition (the reading implemented here)
-----------------------------------------
Let 𝓑 be the beginning-of-word set: vocabulary items whose string starts with whitespace
(SentencePiece ``▁``, byte-level ``Ġ``/``Ċ``, or a literal space), plus EOS. For a word ``w`` whose
tokens are rows ``i..k`` of the token table (context ``c`` before row ``i``):

    s(w) = −Σ_{j=i..k} logprob_j  −  [row k+1 ∈ 𝓑]·bow_logmass_{k+1}  +  [row i ∈ 𝓑]·bow_logmass_i

i.e. ``−log p(tokens(w) | c) − log P(𝓑 | c∘w) + log P(𝓑 | c)`` (nats), where ``bow_logmass_j =
log P(𝓑 | context before row j)``. This is the *corrected* sign of Haley et al.'s
``WhitespaceCorrector`` (after their commit e19d65b "fix space correction": the end-of-word term is
*added* to the word's log-probability, the beginning term *subtracted*), which equals Pimentel &
Meister's ``p(w | c) = p(tokens(w) | c) · P(𝓑 | c∘w) / P(𝓑 | c)``.

The indicators make the correction exact for both kinds of boundary:

* the ``+log P(𝓑 | c)`` term applies only when the word's first token carries the space marker. A
  word at the start of the scored text that begins without a space (GPT-2's first word, a caption
  after ``"caption en\\n"``) begins a word whatever token comes next, so nothing is divided out;
* the ``−log P(𝓑 | c∘w)`` term applies when the next row is in 𝓑 (a space-marked token, or the
  EOS row at the end of the text): the word's end is then the event "the next token starts a new
  word or the text ends". When a given segmentation splits inside a whitespace-delimited chunk
  (a tagger's ``dog`` | ``.``), the next token carries no space marker and no term applies at that
  seam, so the corrected surprisals of ``dog`` and ``.`` still add up to that of ``dog.``.

The last word needs the row after it: score with ``add_eos=True`` (the default of the scoring
functions), which appends the EOS row (empty span at the end of the text; it belongs to no word).

Alignment by character offsets
------------------------------
Words are the whitespace-separated chunks of the text, or a given segmentation (``words=``: a
list of strings found left to right in the text, or ``(start, end)`` character spans) — a tagger's
words, or the words of a language written without spaces. A token belongs to the word containing
its first non-whitespace character; a token made only of whitespace belongs to the next word (its
space marks that word's beginning; byte-level tokenizers with trimmed offsets give such a token
an empty span just before the word); tokens after the last word (trailing spaces, the EOS row)
belong to none.

A token *straddles* when its characters continue past the end of its word into the next word
(possible with given segmentations, e.g. a token ``'s.`` over the words ``'s`` | ``.``, or a Chinese
token spanning two words). A straddling token's probability cannot be split between the words, so
every word it touches gets ``straddles=True`` and ``surprisal = NaN`` (the analogue of the
reference code's ``#SKIP#``); the other words are unaffected.
"""

from __future__ import annotations

import re
from typing import Sequence

import numpy as np
import pandas as pd

__all__ = ["word_surprisals", "word_spans", "WORD_COLUMNS"]

WORD_COLUMNS = ["seq_id", "word_idx", "word", "char_start", "char_end", "surprisal", "n_tokens", "straddles"]

_WS = re.compile(r"\S+")


def word_spans(text: str, words: Sequence | None = None) -> list[tuple[int, int]]:
    """Character spans ``[(start, end), ...]`` of the words of ``text``.

    ``words=None``: whitespace-separated chunks. A list of strings is located left to right
    (each must occur in the text after the previous one); a list of ``(start, end)`` pairs is
    checked (in range, non-empty, increasing, non-overlapping) and returned.
    """
    if words is None:
        return [(m.start(), m.end()) for m in _WS.finditer(text)]
    spans: list[tuple[int, int]] = []
    pos = 0
    for j, w in enumerate(words):
        if isinstance(w, str):
            if not w:
                raise ValueError(f"word {j} is the empty string")
            at = text.find(w, pos)
            if at < 0:
                raise ValueError(
                    f"word {j} {w!r} does not occur in the text after character {pos}: "
                    f"{text!r}. Give words in order, spelt exactly as in the text."
                )
            spans.append((at, at + len(w)))
            pos = at + len(w)
        else:
            try:
                a, b = w
            except (TypeError, ValueError):
                raise TypeError(f"word {j}: expected a string or a (start, end) pair, got "
                                f"{w!r}") from None
            if not all(isinstance(x, (int, np.integer)) and not isinstance(x, bool)
                       for x in (a, b)):
                raise TypeError(f"word span {j} {(a, b)!r}: character offsets must be "
                                f"integers, got {type(a).__name__}/{type(b).__name__}")
            a, b = int(a), int(b)
            if not (0 <= a < b <= len(text)) or a < pos:
                raise ValueError(
                    f"word span {j} {(a, b)} is empty, out of range or overlaps the previous one "
                    f"(text has {len(text)} characters)"
                )
            spans.append((a, b))
            pos = b
    return spans


def _assign(text: str, starts, ends, spans) -> tuple[np.ndarray, np.ndarray]:
    """Word index of each token (-1: none) and, per word, whether a token straddles it."""
    n_tok = len(starts)
    owner = np.full(n_tok, -1, dtype=np.int64)
    straddle = np.zeros(len(spans), dtype=bool)
    w_starts = np.array([s for s, _ in spans], dtype=np.int64)
    w_ends = np.array([e for _, e in spans], dtype=np.int64)
    for t in range(n_tok):
        a, b = int(starts[t]), int(ends[t])
        while a < b and text[a].isspace():
            a += 1
        if a >= b:  # whitespace-only (or empty) token: marks the beginning of the next word
            nxt = int(np.searchsorted(w_starts, int(starts[t]), side="left"))
            if nxt < len(spans):
                owner[t] = nxt
            continue
        w = int(np.searchsorted(w_starts, a, side="right")) - 1
        if w < 0 or a >= w_ends[w]:
            # first visible character outside every word (e.g. punctuation left out of a
            # given segmentation): attach to the next word, or none
            nxt = w + 1
            if nxt < len(spans) and b > w_starts[nxt]:
                owner[t] = nxt
                if b > w_ends[nxt]:
                    last = int(np.searchsorted(w_starts, b - 1, side="right")) - 1
                    straddle[nxt : last + 1] = True
            continue
        owner[t] = w
        if b > w_ends[w]:
            last = int(np.searchsorted(w_starts, b - 1, side="right")) - 1
            straddle[w : max(w, last) + 1] = True
    return owner, straddle


def word_surprisals(
    token_table: pd.DataFrame,
    texts: Sequence[str],
    *,
    words: Sequence[Sequence] | None = None,
) -> pd.DataFrame:
    """Word surprisals (nats) with the beginning-of-word correction (see the module docstring).

    Parameters
    ----------
    token_table : pandas.DataFrame
        The output of ``score_texts`` / ``score_image_texts`` / ``score_seq2seq``.
    texts : sequence of str
        The scored texts, indexed by ``seq_id`` (``texts[seq_id]``).
    words : sequence, optional
        Per-text segmentation, ``words[seq_id]`` a list of word strings or of ``(start, end)``
        spans; default whitespace words.

    Returns
    -------
    pandas.DataFrame
        Columns ``seq_id, word_idx, word, char_start, char_end, surprisal, n_tokens, straddles``:
        one row per word of every text present in the table.
    """
    need = {"seq_id", "token_idx", "char_start", "char_end", "logprob", "bow_logmass", "is_bow"}
    missing = need - set(token_table.columns)
    if missing:
        raise ValueError(f"token_table lacks column(s) {sorted(missing)}: pass a scoring table")
    if isinstance(texts, str):
        raise TypeError("texts must be a list of strings (indexed by seq_id), not a string")
    texts = list(texts)
    if words is not None and len(words) != len(texts):
        raise ValueError(f"got {len(words)} segmentations for {len(texts)} texts")
    if token_table.duplicated(["seq_id", "token_idx"]).any():
        raise ValueError("token_table: duplicated (seq_id, token_idx) rows; pass one scoring "
                         "table (concatenated tables need distinct seq_ids)")
    scored = set(pd.unique(token_table["seq_id"]).tolist())
    unscored = [i for i in range(len(texts)) if i not in scored]
    if unscored:
        raise ValueError(f"texts: {len(unscored)} of {len(texts)} texts have no rows in "
                         f"token_table (first: seq_id {unscored[0]}); pass exactly the texts "
                         f"that were scored, in order")
    out = []
    tt = token_table.sort_values(["seq_id", "token_idx"], kind="stable")
    # one numpy array per column, cut at each seq_id's rows (a pandas groupby costs more
    # than the arithmetic at thousands of short texts)
    seq_ids = tt["seq_id"].to_numpy()
    all_starts, all_ends = tt["char_start"].to_numpy(), tt["char_end"].to_numpy()
    all_lp = tt["logprob"].to_numpy(dtype=np.float64)
    all_bow = tt["bow_logmass"].to_numpy(dtype=np.float64)
    all_isb = tt["is_bow"].to_numpy(dtype=bool)
    cuts = np.flatnonzero(seq_ids[1:] != seq_ids[:-1]) + 1
    for lo, hi in zip(np.r_[0, cuts], np.r_[cuts, len(seq_ids)]):
        if lo == hi:
            continue
        sid = int(seq_ids[lo])
        if not 0 <= sid < len(texts):
            raise ValueError(f"seq_id {sid} has no text: texts has {len(texts)} entries")
        text = texts[sid]
        starts = all_starts[lo:hi]
        ends = all_ends[lo:hi]
        if len(ends) and int(ends.max()) > len(text):
            raise ValueError(
                f"seq_id {sid}: token offsets reach character {int(ends.max())} but the text has "
                f"{len(text)}; pass the same texts that were scored"
            )
        spans = word_spans(text, None if words is None else words[sid])
        owner, straddle = _assign(text, starts, ends, spans)
        lp, bow, isb = all_lp[lo:hi], all_bow[lo:hi], all_isb[lo:hi]
        n = len(lp)
        for w, (a, b) in enumerate(spans):
            rows = np.flatnonzero(owner == w)
            if len(rows) == 0 or straddle[w]:
                s = np.nan
            else:
                i, k = int(rows[0]), int(rows[-1])
                if k - i + 1 != len(rows):  # pragma: no cover - offsets are monotone
                    raise ValueError(f"seq_id {sid}: tokens of word {w} are not contiguous")
                if k + 1 >= n:
                    raise ValueError(
                        f"seq_id {sid}: word {w} {text[a:b]!r} ends the table, so its end-of-word "
                        "probability is unknown. Score with add_eos=True (the default)."
                    )
                s = -lp[i : k + 1].sum()
                if isb[i]:
                    s += bow[i]
                if isb[k + 1]:
                    s -= bow[k + 1]
            out.append((sid, w, text[a:b], a, b, s, len(rows), bool(straddle[w])))
    df = pd.DataFrame(out, columns=WORD_COLUMNS)
    return df.astype({"seq_id": "int64", "word_idx": "int64", "char_start": "int64",
                      "char_end": "int64", "surprisal": "float64", "n_tokens": "int64"})
