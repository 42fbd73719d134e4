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
from typing import TYPE_CHECKING, Any, Iterable, Sequence

if TYPE_CHECKING:
    from .robustness import Expect

#: verdicts at paper scale (the real checkpoints and data)
PAPER_VERDICTS = ("holds", "does not hold", "not testable")
#: verdicts at tiny scale (mechanism on / off over seeds; see :mod:`tokenbook.robustness`)
TINY_VERDICTS = ("detected", "not detected", "not specific", "not testable")
VERDICTS = PAPER_VERDICTS + TINY_VERDICTS[:3]

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
    verdict : computed. Paper scale: ``"holds"``, ``"does not hold"``, ``"not testable"``;
        tiny scale (:meth:`Claim.over_seeds`): ``"detected"``, ``"not detected"``,
        ``"not specific"``, ``"not testable"``.
    paper : where the paper makes the claim (section, figure, table).
    note : free text, e.g. why a claim is not testable at this scale, or "our reading".
    scale : ``"tiny"`` or ``"paper"``.
    published : the paper's own value of the statistic, where the method notes give one.
    mechanism : tiny scale: what the *on* world plants and what *off* removes (or the null).
    share_on, share_off : tiny scale: share of seeds in which the claim holds with the
        mechanism on / off, with Wilson 95% intervals ``share_on_ci`` / ``share_off_ci``.
    n_seeds : tiny scale: seeds evaluated (per mechanism).
    effect, effect_ci : tiny scale: mean statistic over the seeds with the mechanism on, with a
        t-based 95% interval; ``effect_off`` the same with it off.
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
    scale: str = "paper"
    published: Any = None
    mechanism: str = ""
    share_on: float | None = None
    share_on_ci: tuple | None = None
    share_off: float | None = None
    share_off_ci: tuple | None = None
    n_seeds: int | None = None
    effect: float | None = None
    effect_ci: tuple | None = None
    effect_off: float | None = None

    def __post_init__(self) -> None:
        allowed = TINY_VERDICTS if self.scale == "tiny" else PAPER_VERDICTS
        if self.scale not in ("tiny", "paper"):
            raise ValueError(f"scale must be 'tiny' or 'paper', got {self.scale!r}")
        if self.verdict not in allowed:
            raise ValueError(f"a {self.scale}-scale verdict must be one of {allowed}, "
                             f"got {self.verdict!r}")

    # -- tiny scale: mechanism on / off over seeds --------------------------------------
    @classmethod
    def over_seeds(cls, id: str, claim: str, *, statistic: str, expect: "Expect",
                   values_on: Sequence[float], values_off: Sequence[float], mechanism: str,
                   paper: str = "", note: str = "", min_on: float = 0.8, max_off: float = 0.2,
                   **extra: Any) -> "Claim":
        """A tiny-scale claim judged over seeds with the paper's mechanism on and off.

        ``expect`` (:class:`tokenbook.robustness.Expect`) is what the paper predicts for one
        seed's statistic; the verdict follows :func:`tokenbook.robustness.verdict_over_seeds`
        (detected: holds in ≥ ``min_on`` of the seeds on and ≤ ``max_off`` off).
        ``mechanism`` says what *on* plants and what *off* removes.
        """
        from .robustness import verdict_over_seeds

        r = verdict_over_seeds(expect, values_on, values_off, min_on=min_on, max_off=max_off)
        note = "; ".join(t for t in (r["reason"], note) if t)
        return cls(id, claim, statistic, r["effect"], expect.text, r["verdict"], paper, note,
                   {**extra, "values_on": r["values_on"], "values_off": r["values_off"],
                    "effect_off_ci": r["effect_off_ci"]},
                   scale="tiny", mechanism=mechanism, share_on=r["share_on"],
                   share_on_ci=r["share_on_ci"], share_off=r["share_off"],
                   share_off_ci=r["share_off_ci"], n_seeds=r["n_seeds"], effect=r["effect"],
                   effect_ci=r["effect_ci"], effect_off=r["effect_off"])

    @classmethod
    def not_testable_tiny(cls, id: str, claim: str, *, statistic: str, why: str,
                          paper: str = "") -> "Claim":
        """A claim the tiny scale cannot test (e.g. the world's construction settles it):
        ``why`` says so."""
        return cls(id, claim, statistic, None, "—", "not testable", paper, why, scale="tiny")

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
        published = extra.pop("published", None)
        share = sum(bool(v) for v in values.values()) / len(values)
        expected = "all" if min_share >= 1.0 else f"≥ {min_share:.0%} of items"
        return cls(id, claim, statistic, share, expected,
                   "holds" if share >= min_share else "does not hold", paper, note,
                   {**extra, "items": {k: bool(v) for k, v in values.items()}},
                   published=published)

    @classmethod
    def not_testable(cls, id: str, claim: str, *, statistic: str, paper: str = "", note: str = "",
                     value: Any = None, expected: str = "—") -> "Claim":
        """A claim this run cannot check (say why in ``note``)."""
        return cls(id, claim, statistic, value, expected, "not testable", paper, note)

    @classmethod
    def _compare(cls, id, claim, statistic, value, expected, test, paper, note, extra) -> "Claim":
        published = extra.pop("published", None)
        if not _finite(value):
            return cls(id, claim, statistic, value, expected, "not testable", paper,
                       note or "statistic is undefined in this run", extra, published=published)
        verdict = "holds" if test(float(value)) else "does not hold"
        return cls(id, claim, statistic, float(value), expected, verdict, paper, note, extra,
                   published=published)

    def to_dict(self) -> dict:
        return _jsonable(asdict(self))


def _fmt(x: Any) -> str:
    return f"{x:.3g}" if _finite(x) else "—"


def _fmt_ci(ci: Any) -> str:
    if not ci or len(ci) != 2 or not all(_finite(v) for v in ci):
        return ""
    return f" [{_fmt(ci[0])}, {_fmt(ci[1])}]"


def claims_frame(claims: Sequence[Claim] | Sequence[dict]):
    """The claims (:class:`Claim` objects or ``claims.json`` rows, either schema) as a tidy
    pandas DataFrame, one row per claim, the verdict second: id, verdict, then at tiny scale
    on / off (root seeds in which the claim holds with the mechanism on / off, k/n with the
    Wilson 95% interval), effect (on − off, paired over root seeds, with its 95% interval),
    on value, off value; at paper scale measured and published; then claim, paper, statistic,
    expected, note. The page shows the compact form of the same claims
    (:func:`tokenbook.pages.claims_table_html`)."""
    import pandas as pd

    from .pages import _ci, _g, _seeds, claim_row

    rows = []
    for r in map(claim_row, claims):
        row = {"id": r["id"], "verdict": r["verdict"]}
        if r["scale"] == "tiny":
            row.update({"on": _seeds(r["share_on"], r["n"]) + _ci(r["share_on_ci"]),
                        "off": _seeds(r["share_off"], r["n"]) + _ci(r["share_off_ci"]),
                        "effect": _g(r["paired_effect"]) + _ci(r["paired_ci"]),
                        "on value": _g(r["on_value"]) + _ci(r["on_ci"]),
                        "off value": _g(r["off_value"]) + _ci(r["off_ci"])})
        else:
            value = r["value"]
            row.update({"measured": f"{value:.4g}" if isinstance(value, float) else value,
                        "published": "—" if r["published"] is None else r["published"]})
        row.update({"claim": r["claim"], "paper": r["paper"], "statistic": r["statistic"],
                    "expected": r["expected"], "note": r["note"]})
        rows.append(row)
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
        allowed = TINY_VERDICTS if row.get("scale") == "tiny" else PAPER_VERDICTS
        if row["verdict"] not in allowed:
            raise ValueError(f"{path}: claim {row['id']!r} has verdict {row['verdict']!r}")
    return data


def report(claims: Iterable[Claim]):
    """End of a chapter: save ``claims.json`` into the run folder and return what the page
    shows (:class:`tokenbook.pages.ClaimsTable`): the chapter's summary box (claims counted by
    verdict, one line on what they show) and the compact claims table (id, verdict, root seeds
    holding on / off, effect; the wording, statistic, intervals and note fold under the id).
    Its ``frame`` is :func:`claims_frame`."""
    from .pages import ClaimsTable

    claims = list(claims)
    save_claims(claims, run_dir() / "claims.json")
    return ClaimsTable(claims)
