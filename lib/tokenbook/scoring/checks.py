"""Guards for comparing token tables."""

from __future__ import annotations

import numpy as np
import pandas as pd

__all__ = ["check_same_tokenization"]


def check_same_tokenization(a: pd.DataFrame, b: pd.DataFrame, *, names: tuple[str, str] = ("a", "b")) -> None:
    """Raise ``ValueError`` unless two token tables tokenise the same texts identically.

    Token-by-token comparisons (surprisal differences between two models) are only meaningful
    when both tables have the same ``seq_id``/``token_idx`` rows with the same ``token_id`` and
    character offsets. Compare at the word level (``word_surprisals``) otherwise.
    """
    cols = ["seq_id", "token_idx", "token_id", "char_start", "char_end"]
    for df, nm in zip((a, b), names):
        miss = set(cols) - set(df.columns)
        if miss:
            raise ValueError(f"token table {nm} lacks column(s) {sorted(miss)}")
    ka = a[cols].sort_values(["seq_id", "token_idx"]).reset_index(drop=True)
    kb = b[cols].sort_values(["seq_id", "token_idx"]).reset_index(drop=True)
    sa, sb = set(ka.seq_id.unique()), set(kb.seq_id.unique())
    if sa != sb:
        raise ValueError(
            f"token tables {names[0]} and {names[1]} cover different sequences "
            f"({len(sa ^ sb)} seq_ids in only one of them)"
        )
    if len(ka) != len(kb):
        per_a, per_b = ka.groupby("seq_id").size(), kb.groupby("seq_id").size()
        diff = per_a.index[(per_a != per_b.reindex(per_a.index)).to_numpy()].tolist()[:5]
        raise ValueError(
            f"token tables {names[0]} and {names[1]} come from different tokenizations: sequences "
            f"{diff} have different numbers of tokens. Compare words (word_surprisals), not tokens."
        )
    neq = np.flatnonzero((ka[cols[2:]].to_numpy() != kb[cols[2:]].to_numpy()).any(axis=1))
    if len(neq):
        r = ka.iloc[int(neq[0])]
        raise ValueError(
            f"token tables {names[0]} and {names[1]} come from different tokenizations: first "
            f"mismatch at seq_id {int(r.seq_id)}, token_idx {int(r.token_idx)} ({len(neq)} rows "
            "differ). Compare words (word_surprisals), not tokens."
        )
