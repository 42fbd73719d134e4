"""Minimum sizes before a paper-scale or released-data verdict.

A share of languages computed on one language, or a mean over three captions, is a number, not
evidence for a claim about 30 languages. Each paper-scale claim therefore states what it needs
(languages, units per language, stories, tokens per class: the paper's sizes by default, as
chapter parameters) and the claim functions of :mod:`tokenbook.uid_grounding.experiments`,
:mod:`tokenbook.groundedness_typology.experiments` and :mod:`tokenbook.memorisation_cartography.released` call
:func:`shortfall` first: below any minimum the claim is *not testable*, and its note gives the
counts (``1 language (needs ≥ 30); 3 captions in the smallest language (needs ≥ 3600)``).

A requirement is a tuple ``(what, have, need)``: ``what`` names the count as it reads after the
number (``"language(s)"``, ``"captions in the smallest language"``).
"""

from __future__ import annotations

from typing import Iterable, Mapping

import pandas as pd

__all__ = ["Requirement", "shortfall", "counts_note", "units_per_group", "smallest"]

Requirement = tuple[str, int, int]


def _check(reqs: Iterable[Requirement]) -> list[Requirement]:
    out = []
    for r in reqs:
        if len(r) != 3:
            raise ValueError(f"a size requirement is (what, have, need), got {r!r}")
        what, have, need = r
        if int(need) < 0:
            raise ValueError(f"{what}: a minimum size must be ≥ 0, got {need!r}")
        out.append((str(what), int(have), int(need)))
    return out


def shortfall(reqs: Iterable[Requirement]) -> str:
    """The note of a claim whose data are below a minimum, or ``""`` when every count suffices.

    >>> shortfall([("language(s)", 1, 30), ("captions", 3, 3600)])
    'too small for a verdict: 1 language(s) (needs ≥ 30); 3 captions (needs ≥ 3600)'
    >>> shortfall([("language(s)", 30, 30)])
    ''
    """
    short = [(w, h, n) for w, h, n in _check(reqs) if h < n]
    if not short:
        return ""
    return "too small for a verdict: " + "; ".join(f"{h} {w} (needs ≥ {n})" for w, h, n in short)


def counts_note(reqs: Iterable[Requirement]) -> str:
    """The counts a verdict rests on, for the note of a testable claim.

    >>> counts_note([("language(s)", 30, 30), ("stories in the smallest language", 8, 5)])
    '30 language(s) (≥ 30); 8 stories in the smallest language (≥ 5)'
    """
    return "; ".join(f"{h} {w} (≥ {n})" for w, h, n in _check(reqs))


def units_per_group(table: pd.DataFrame | None, unit: str | list, *,
                    group: str = "lang") -> Mapping[str, int]:
    """Number of distinct ``unit`` values (or rows of ``unit`` columns) per ``group``
    ({} for ``None`` or an empty table)."""
    if table is None or len(table) == 0:
        return {}
    cols = [unit] if isinstance(unit, str) else list(unit)
    missing = [c for c in [group, *cols] if c not in table.columns]
    if missing:
        raise ValueError(f"units_per_group: table lacks column(s) {missing}; has "
                         f"{list(table.columns)}")
    n = table.drop_duplicates([group, *cols]).groupby(group, observed=True).size()
    return {str(k): int(v) for k, v in n.items()}


def smallest(counts: Mapping[str, int]) -> int:
    """The smallest count (0 when there is none)."""
    return int(min(counts.values())) if counts else 0

