"""Claims: a paper's claims stated as checks on a chapter's own measured results.

A chapter builds one :class:`Claim` per claim of its paper with one of the constructors
below; the verdict is *computed* from the measured value and the expectation, never typed in.
The chapter ends with :func:`report`, which shows the claims table and writes
``claims.json`` into the current run folder (see :func:`run_dir`), where the runner and the
book's scorecard find it.

Example
-------
>>> c = Claim.greater("noun-gt-det", "Nouns are more grounded than determiners",
...                   paper="Haley et al. 2025, §4", statistic="mean groundedness NOUN − DET (nats)",
...                   value=0.8, threshold=0.0)
>>> c.verdict
'holds'
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Iterable, Sequence

VERDICTS = ("holds", "does not hold", "not testable")

#: environment variable the runner sets to the run folder of the executing notebook
RUN_DIR_ENV = "TOKENBOOK_RUN_DIR"


def run_dir() -> Path:
    """The folder where the executing chapter writes claims.json and figures.

    The runner sets ``TOKENBOOK_RUN_DIR``; outside the runner (a notebook opened by hand) it is
    ``_build/runs/_interactive`` under the current directory.
    """
    path = Path(os.environ.get(RUN_DIR_ENV, Path("_build") / "runs" / "_interactive"))
    path.mkdir(parents=True, exist_ok=True)
    return path


def _finite(x: Any) -> bool:
    try:
        return x is not None and math.isfinite(float(x))
    except (TypeError, ValueError):
        return False


def _jsonable(x: Any) -> Any:
    """numpy scalars/arrays and NaN made JSON-safe (NaN -> None)."""
    if hasattr(x, "tolist"):
        x = x.tolist()
    if isinstance(x, float) and not math.isfinite(x):
        return None
    if isinstance(x, (list, tuple)):
        return [_jsonable(v) for v in x]
    if isinstance(x, dict):
        return {str(k): _jsonable(v) for k, v in x.items()}
    return x


@dataclass
class Claim:
    """One claim of a paper, checked against one measured statistic.

    Attributes
    ----------
    id : short stable identifier (``"uid-v-lower-with-image"``).
    claim : the paper's claim in words.
    statistic : what was measured, with its unit.
    value : the measured value (a number, or a list/dict for composite checks).
    expected : the expectation in words (``"> 0"``, ``"≥ 0.8 of languages"``).
    verdict : ``"holds"``, ``"does not hold"`` or ``"not testable"`` — computed.
    paper : where the paper makes the claim (section, figure, table).
    note : free text, e.g. why a claim is not testable at this scale.
    """

    id: str
    claim: str
    statistic: str
    value: Any
    expected: str
    verdict: str
    paper: str = ""
    note: str = ""
    extra: dict = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.verdict not in VERDICTS:
            raise ValueError(f"verdict must be one of {VERDICTS}, got {self.verdict!r}")

    # -- constructors: each computes the verdict from the value ------------------------
    @classmethod
    def greater(cls, id: str, claim: str, *, statistic: str, value: float, threshold: float = 0.0,
                paper: str = "", note: str = "", **extra: Any) -> "Claim":
        """Holds when ``value > threshold``; not testable when value is NaN/None."""
        return cls._compare(id, claim, statistic, value, f"> {threshold:g}",
                            lambda v: v > threshold, paper, note, extra)

    @classmethod
    def less(cls, id: str, claim: str, *, statistic: str, value: float, threshold: float = 0.0,
             paper: str = "", note: str = "", **extra: Any) -> "Claim":
        """Holds when ``value < threshold``; not testable when value is NaN/None."""
        return cls._compare(id, claim, statistic, value, f"< {threshold:g}",
                            lambda v: v < threshold, paper, note, extra)

    @classmethod
    def at_least(cls, id: str, claim: str, *, statistic: str, value: float, threshold: float,
                 paper: str = "", note: str = "", **extra: Any) -> "Claim":
        """Holds when ``value >= threshold`` (e.g. a share of languages)."""
        return cls._compare(id, claim, statistic, value, f"≥ {threshold:g}",
                            lambda v: v >= threshold, paper, note, extra)

    @classmethod
    def between(cls, id: str, claim: str, *, statistic: str, value: float, low: float, high: float,
                paper: str = "", note: str = "", **extra: Any) -> "Claim":
        """Holds when ``low <= value <= high``."""
        return cls._compare(id, claim, statistic, value, f"in [{low:g}, {high:g}]",
                            lambda v: low <= v <= high, paper, note, extra)

    @classmethod
    def all_of(cls, id: str, claim: str, *, statistic: str, values: dict[str, bool],
               min_share: float = 1.0, paper: str = "", note: str = "", **extra: Any) -> "Claim":
        """Holds when at least ``min_share`` of the named sub-checks hold (e.g. per language).

        ``value`` is stored as the share that held; the per-item results go to ``extra``.
        """
        if not values:
            return cls.not_testable(id, claim, statistic=statistic, paper=paper,
                                    note=note or "no items to check")
        share = sum(bool(v) for v in values.values()) / len(values)
        expected = "all" if min_share >= 1.0 else f"≥ {min_share:.0%} of items"
        return cls(id, claim, statistic, share, expected,
                   "holds" if share >= min_share else "does not hold", paper, note,
                   {**extra, "items": {k: bool(v) for k, v in values.items()}})

    @classmethod
    def not_testable(cls, id: str, claim: str, *, statistic: str, paper: str = "", note: str = "",
                     value: Any = None, expected: str = "—") -> "Claim":
        """A claim this run cannot check (say why in ``note``)."""
        return cls(id, claim, statistic, value, expected, "not testable", paper, note)

    @classmethod
    def _compare(cls, id, claim, statistic, value, expected, test, paper, note, extra) -> "Claim":
        if not _finite(value):
            return cls(id, claim, statistic, value, expected, "not testable", paper,
                       note or "statistic is undefined in this run", extra)
        verdict = "holds" if test(float(value)) else "does not hold"
        return cls(id, claim, statistic, float(value), expected, verdict, paper, note, extra)

    def to_dict(self) -> dict:
        return _jsonable(asdict(self))


def claims_frame(claims: Sequence[Claim]):
    """The claims as a pandas DataFrame (claim, paper, statistic, value, expected, verdict)."""
    import pandas as pd

    rows = []
    for c in claims:
        value = c.value
        if isinstance(value, float):
            value = f"{value:.4g}"
        rows.append({"id": c.id, "claim": c.claim, "paper": c.paper, "statistic": c.statistic,
                     "measured": value, "expected": c.expected, "verdict": c.verdict,
                     "note": c.note})
    return pd.DataFrame(rows)


def save_claims(claims: Sequence[Claim], path: str | os.PathLike) -> Path:
    """Write claims as a JSON list, atomically."""
    ids = [c.id for c in claims]
    dupes = {i for i in ids if ids.count(i) > 1}
    if dupes:
        raise ValueError(f"claim ids must be unique; repeated: {sorted(dupes)}")
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(json.dumps([c.to_dict() for c in claims], indent=2, ensure_ascii=False))
    os.replace(tmp, path)
    return path


def load_claims(path: str | os.PathLike) -> list[dict]:
    """Read a claims.json written by :func:`save_claims`, checking the required keys."""
    data = json.loads(Path(path).read_text())
    required = {"id", "claim", "statistic", "value", "expected", "verdict"}
    for i, row in enumerate(data):
        missing = required - set(row)
        if missing:
            raise ValueError(f"{path}: claim #{i} lacks keys {sorted(missing)}")
        if row["verdict"] not in VERDICTS:
            raise ValueError(f"{path}: claim {row['id']!r} has verdict {row['verdict']!r}")
    return data


def report(claims: Iterable[Claim]):
    """End of a chapter: save ``claims.json`` into the run folder and return the table to show."""
    claims = list(claims)
    save_claims(claims, run_dir() / "claims.json")
    frame = claims_frame(claims)
    try:
        colours = {"holds": "#d9f2d9", "does not hold": "#f8d7da", "not testable": "#eeeeee"}
        return (frame.style.hide(axis="index")
                .map(lambda v: f"background-color: {colours.get(v, '')}", subset=["verdict"]))
    except Exception:  # jinja2 missing: plain frame
        return frame
