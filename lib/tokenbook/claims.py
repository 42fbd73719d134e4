"""Claims: a paper's claims stated as checks on a chapter's own measured results.

A chapter builds one :class:`Claim` per claim of its paper with one of the constructors
below; the verdict is *computed* from the measured value and the expectation, never typed in.
The chapter ends with :func:`report`, which shows the claims table and writes
``claims.json`` into the current run folder (:func:`tokenbook.run_folder.run_dir`), where the
runner and the book's scorecard find it.

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
from typing import Any, Callable, Iterable, Mapping, Sequence

import pandas as pd

from tokenbook.cache import atomic_path
from tokenbook.robustness import values_by_claim
from tokenbook.run_folder import run_dir
from tokenbook.scorecard import ClaimsTable
from tokenbook.validation import is_finite_number
from tokenbook.verdicts import (MIN_ROOT_SEEDS, REPLICATION_TARGET, TINY_VERDICTS, Expect,
                                judge, mean_interval, replication_chance,
                                seeds_for_agreement)

#: verdicts at paper scale (the real checkpoints and data)
PAPER_VERDICTS = ("holds", "does not hold", "not testable")
#: verdicts at tiny scale: see :mod:`tokenbook.verdicts`
VERDICTS = PAPER_VERDICTS + TINY_VERDICTS[:3]

#: seed-table claim ids of a claim's manipulation check and known answer (``<prefix><claim id>``)
MANIPULATION_PREFIX = "manipulation:"
KNOWN_PREFIX = "known:"
#: seed-table claim id of a claim's balance check (a quantity the mechanism must not change)
BALANCE_PREFIX = "balance:"

def _known_summary(known_answer: Mapping[str, Any] | None, expect: Expect,
                   keep: Sequence[int] | None, *, level: float, min_seeds: int
                   ) -> tuple[dict | None, list[str]]:
    """The known answer as a claim stores it, and the notes it adds: its per-seed values
    (``values_on``/``values_off``, when given) judged by the claim's own rule on the seeds
    ``keep`` (None: all; those that passed the manipulation check), written as ``verdict``
    (*not testable* when no seed is left; then ``verdict_all_seeds`` is the rule's verdict on
    every root seed, with a note: what the world plants although nothing was judged); a note
    when its means show no effect."""
    if known_answer is None:
        return None, []
    known, notes = dict(known_answer), []
    if known.get("values_on") is not None:
        k_on, k_off = list(known.pop("values_on")), list(known.pop("values_off"))
        if k_on and not k_off:
            k_off = [float("nan")] * len(k_on)
        if keep is not None and not keep and k_on:   # no seed judged: say what the world holds
            known["verdict_all_seeds"] = judge(expect, k_on, k_off, level=level,
                                               min_seeds=min_seeds)["verdict"]
            notes.append(f"the known answer over all {len(k_on)} root seeds is "
                         f"{known['verdict_all_seeds']}")
        if keep is not None:
            k_on, k_off = [k_on[i] for i in keep], [k_off[i] for i in keep]
        known["verdict"] = (judge(expect, k_on, k_off, level=level, min_seeds=min_seeds)["verdict"]
                            if k_on else "not testable")
        if k_on and not any(is_finite_number(v) for v in k_off):
            # no off world to pair with (nothing is reduced there): the paired rule cannot
            # judge it, so say whether its on values alone meet the expectation
            mean, (low, high) = mean_interval(k_on, level)
            known["on_alone"] = {"mean": mean, "ci": [low, high],
                                 "meets": expect.holds_for_interval(low, high)}
    k_on, k_off = known.get("on"), known.get("off")
    if is_finite_number(k_on) and (expect.holds(k_on) is False or expect.holds(k_off) is True):
        notes.append(f"the known answer itself shows no effect (on {k_on!s:.6}, off "
                     f"{k_off!s:.6}): the world does not plant the mechanism")
    return known, notes


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
    value : the measured value (paper scale; at tiny scale the mean over root seeds on).
    expected : the expectation in words (``"> 0"``, ``"≥ 0.8 of languages"``).
    verdict : computed. Paper scale: ``"holds"``, ``"does not hold"``, ``"not testable"``;
        tiny scale (:meth:`Claim.over_seeds`, :mod:`tokenbook.verdicts`): ``"detected"``,
        ``"not detected"``, ``"not specific"``, ``"not testable"``.
    paper : where the paper makes the claim (section, figure, table).
    note : free text, e.g. why a claim is not testable at this scale, or "our reading".
    scale : ``"tiny"`` or ``"paper"``.
    published : the paper's own value of the statistic, where the method notes give one.
    computed_by : ``"module:qualname"`` of the function that computed the statistic.
    mechanism : tiny scale: what the *on* world plants and what *off* removes (or the null).
    on_value, on_ci, off_value, off_ci : tiny scale: the mean statistic over root seeds with
        the mechanism on / off, with Student-t intervals.
    paired_effect, paired_ci : tiny scale: the mean over root seeds of on − off, with its
        t interval: the effect the verdict is read from.
    share_on, share_off : tiny scale: share of root seeds in which the claim holds on / off
        (readable, decides nothing), with Wilson intervals ``share_on_ci`` / ``share_off_ci``.
    n_root_seeds : tiny scale: root seeds judged (each its own world, models and analysis).
    known_answer : tiny scale: the statistic according to the generator alone, on and off
        (``{"on", "off", "how", "verdict"}``: means over the root seeds, how it is computed,
        and the verdict the same rule gives the per-seed known answers — what the pipeline's
        verdict should recover), or None where the chapter has no oracle yet (``how`` says).
    manipulation : tiny scale: the per-seed check that the mechanism is present on and absent
        off (``{"what", "values_on", "values_off", "failed_seeds", "passed"}``), or None.
    replication : tiny scale: the chance that a second seed set of the same size gets the
        same verdict (:func:`tokenbook.verdicts.replication_chance`).
    seeds_needed : tiny scale, only for a claim whose ``replication`` is below
        :data:`tokenbook.verdicts.REPLICATION_TARGET`: the root seeds two sets would need to get
        the same verdict that often (:func:`tokenbook.verdicts.seeds_for_agreement`; one more
        than :data:`tokenbook.verdicts.MOST_SEEDS_SEARCHED` when not even that many would).
    balance : tiny scale: the per-seed check that the off world differs from the on world only
        in the mechanism (:func:`balance_summary`), or None.
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
    computed_by: str = ""
    mechanism: str = ""
    on_value: float | None = None
    on_ci: tuple | None = None
    off_value: float | None = None
    off_ci: tuple | None = None
    paired_effect: float | None = None
    paired_ci: tuple | None = None
    share_on: float | None = None
    share_on_ci: tuple | None = None
    share_off: float | None = None
    share_off_ci: tuple | None = None
    n_root_seeds: int | None = None
    known_answer: dict | None = None
    manipulation: dict | None = None
    replication: float | None = None
    balance: dict | None = None
    seeds_needed: int | None = None

    def __post_init__(self) -> None:
        allowed = TINY_VERDICTS if self.scale == "tiny" else PAPER_VERDICTS
        if self.scale not in ("tiny", "paper"):
            raise ValueError(f"scale must be 'tiny' or 'paper', got {self.scale!r}")
        if self.verdict not in allowed:
            raise ValueError(f"a {self.scale}-scale verdict must be one of {allowed}, "
                             f"got {self.verdict!r}")

    # -- tiny scale: mechanism on / off over root seeds ----------------------------------
    @classmethod
    def over_seeds(cls, id: str, claim: str, *, statistic: str, expect: Expect,
                   values_on: Sequence[float], values_off: Sequence[float], mechanism: str,
                   paper: str = "", note: str = "", computed_by: str | Callable = "",
                   known_answer: Mapping[str, Any] | None = None,
                   manipulation: Mapping[str, Any] | None = None,
                   balance: Mapping[str, Any] | None = None, level: float = 0.95,
                   min_seeds: int = MIN_ROOT_SEEDS, **extra: Any) -> "Claim":
        """A tiny-scale claim judged over root seeds with the paper's mechanism on and off.

        ``expect`` is what the paper predicts for the statistic; ``values_on[i]`` and
        ``values_off[i]`` are the statistic at the same root seed. The verdict is
        :func:`tokenbook.verdicts.judge`'s (the paired on − off effect and the on value, each
        with its interval). ``manipulation`` (see :func:`manipulation_summary`) drops the
        seeds whose world failed its manipulation check from the verdict, and says so;
        ``balance`` (see :func:`balance_summary`) is reported, and a seed that fails it is named
        in the note (it is still judged: the balance check says what else moved, not whether
        the mechanism is there).
        """
        on, off = list(values_on), list(values_off)
        notes = []
        if on and not off:                 # no off world was run (e.g. paper-scale data)
            off = [float("nan")] * len(on)
            notes.append("no values with the mechanism off")
        failed = list(manipulation.get("failed_seeds", [])) if manipulation else []
        if failed:
            keep = [i for i in range(len(on)) if i not in set(manipulation["failed_index"])]
            on, off = [on[i] for i in keep], [off[i] for i in keep]
            notes.append(f"manipulation check failed at root seed(s) {failed}: not judged")
        if balance and balance.get("failed_seeds"):
            notes.append(f"balance check failed at root seed(s) {list(balance['failed_seeds'])}: "
                         f"{balance.get('what', 'a quantity')} moved by more than "
                         f"{balance.get('tolerance')} between on and off")
        known_answer, known_notes = _known_summary(known_answer, expect,
                                                   keep if failed else None,
                                                   level=level, min_seeds=min_seeds)
        notes += known_notes
        if not on:
            return cls(id, claim, statistic, None, expect.text, "not testable", paper,
                       "; ".join(t for t in (*notes, note) if t), scale="tiny",
                       computed_by=qualified_name(computed_by), mechanism=mechanism,
                       known_answer=known_answer, manipulation=dict(manipulation),
                       balance=dict(balance) if balance else None)
        r = judge(expect, on, off, level=level, min_seeds=min_seeds)
        replication = replication_chance(expect, on, off, level=level, min_seeds=min_seeds)
        seeds_needed = (seeds_for_agreement(expect, on, off, level=level)
                        if replication < REPLICATION_TARGET else None)
        k_verdict = (known_answer or {}).get("verdict")
        alone = (known_answer or {}).get("on_alone")
        if alone and k_verdict == "not testable" and r["verdict"] != "not testable":
            meets = "meet" if alone["meets"] else "do not meet"
            agrees = alone["meets"] == (r["verdict"] == "detected")
            notes.append(f"the known answer has no off values to pair with; its on values "
                         f"alone {meets} {expect.text} with their interval "
                         f"[{alone['ci'][0]:.3g}, {alone['ci'][1]:.3g}]: the pipeline "
                         + ("agrees" if agrees else "does not recover it"))
        elif k_verdict is not None and k_verdict != r["verdict"]:
            notes.append(f"the known answer, judged by the same rule, is {k_verdict}: "
                         f"the pipeline does not recover it")
        note = "; ".join(t for t in (r["reason"], *notes, note) if t)
        return cls(id, claim, statistic, r["on_value"], expect.text, r["verdict"], paper, note,
                   {**extra, "values_on": r["values_on"], "values_off": r["values_off"]},
                   scale="tiny", computed_by=qualified_name(computed_by), mechanism=mechanism,
                   on_value=r["on_value"], on_ci=r["on_ci"], off_value=r["off_value"],
                   off_ci=r["off_ci"], paired_effect=r["paired_effect"],
                   paired_ci=r["paired_ci"], share_on=r["share_on"],
                   share_on_ci=r["share_on_ci"], share_off=r["share_off"],
                   share_off_ci=r["share_off_ci"], n_root_seeds=r["n_root_seeds"],
                   known_answer=known_answer, manipulation=(dict(manipulation)
                                                            if manipulation else None),
                   replication=replication, balance=dict(balance) if balance else None,
                   seeds_needed=seeds_needed)

    @classmethod
    def not_testable_tiny(cls, id: str, claim: str, *, statistic: str, why: str,
                          paper: str = "", computed_by: str | Callable = "") -> "Claim":
        """A claim the tiny scale cannot test (e.g. the world's construction settles it):
        ``why`` says so."""
        return cls(id, claim, statistic, None, "—", "not testable", paper, why, scale="tiny",
                   computed_by=qualified_name(computed_by))

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
        if not is_finite_number(value):
            return cls(id, claim, statistic, value, expected, "not testable", paper,
                       note or "statistic is undefined in this run", extra, published=published)
        verdict = "holds" if test(float(value)) else "does not hold"
        return cls(id, claim, statistic, float(value), expected, verdict, paper, note, extra,
                   published=published)

    def to_dict(self) -> dict:
        return _jsonable(asdict(self))


def qualified_name(fn: str | Callable | None) -> str:
    """``"module:qualname"`` of a function (a string is returned as it is).

    >>> qualified_name(qualified_name)
    'tokenbook.claims:qualified_name'
    """
    if not fn:
        return ""
    if isinstance(fn, str):
        return fn
    inner = getattr(fn, "func", fn)   # functools.partial
    return f"{inner.__module__}:{inner.__qualname__}"


def manipulation_summary(expect: Expect, values_on: Sequence[float],
                         values_off: Sequence[float], seeds: Sequence[int], *,
                         what: str, on_only: bool = False) -> dict[str, Any]:
    """The manipulation check of one claim over root seeds.

    Per root seed the check's statistic must meet ``expect`` with the mechanism on and fail it
    off (the mechanism is present in the on world and absent from the off world). With
    ``on_only`` it need only meet it on (a precondition of the on world that the off world
    may share, e.g. "template tokens are still uncertain after the SFT"). Returns
    ``what``, ``expected``, ``values_on``, ``values_off``, ``failed_seeds`` (root seeds where
    it did not), ``failed_index`` (their positions) and ``passed`` (no seed failed).

    >>> m = manipulation_summary(Expect.greater(0.1), [0.5, 0.05], [0.0, 0.0], [3, 4],
    ...                          what="s_U − s_P on depicted words (nats)")
    >>> m["failed_seeds"], m["passed"]
    ([4], False)
    """
    if not (len(values_on) == len(values_off) == len(seeds)):
        raise ValueError(f"manipulation check: {len(values_on)} values on, {len(values_off)} "
                         f"off and {len(seeds)} seeds; give one of each per root seed")
    ok = [expect.holds(a) is True and (on_only or expect.holds(b) is False)
          for a, b in zip(values_on, values_off)]
    failed = [i for i, good in enumerate(ok) if not good]
    return {"what": what, "expected": f"on {expect.text}" + ("" if on_only else ", off not"),
            "values_on": [float(v) for v in values_on],
            "values_off": [float(v) for v in values_off],
            "failed_seeds": [int(seeds[i]) for i in failed], "failed_index": failed,
            "passed": not failed}


def balance_summary(values_on: Sequence[float], values_off: Sequence[float],
                    seeds: Sequence[int], *, what: str, tolerance: float) -> dict[str, Any]:
    """The balance check of one claim over root seeds: the off world differs from the on world
    only in the mechanism.

    ``values_on[i]`` / ``values_off[i]``: a quantity the mechanism must not change (mean
    caption length, a base rate, a vocabulary size) at root seed ``seeds[i]``; a seed passes
    when ``|on − off| ≤ tolerance`` (a NaN fails). Returns ``what``, ``tolerance``,
    ``values_on``, ``values_off``, ``max_abs_difference``, ``failed_seeds`` and ``passed``.

    >>> b = balance_summary([5.0, 5.1], [5.02, 6.0], [0, 1], what="mean words", tolerance=0.1)
    >>> b["failed_seeds"], b["passed"]
    ([1], False)
    """
    if not (len(values_on) == len(values_off) == len(seeds)):
        raise ValueError(f"balance check: {len(values_on)} values on, {len(values_off)} off and "
                         f"{len(seeds)} seeds; give one of each per root seed")
    if not (math.isfinite(tolerance) and tolerance >= 0):
        raise ValueError(f"balance tolerance must be a finite number ≥ 0, got {tolerance!r}")
    diffs = [abs(float(a) - float(b)) for a, b in zip(values_on, values_off)]
    failed = [int(s) for s, d in zip(seeds, diffs) if not d <= tolerance]
    finite = [d for d in diffs if math.isfinite(d)]
    return {"what": what, "tolerance": float(tolerance),
            "values_on": [float(v) for v in values_on],
            "values_off": [float(v) for v in values_off],
            "max_abs_difference": max(finite) if finite else None,
            "failed_seeds": failed, "passed": not failed}


@dataclass(frozen=True)
class ClaimSpec:
    """One claim of a paper as the library declares it, for every scale.

    ``id``, ``claim`` (the wording as the source gives it), ``paper`` (where), ``statistic``
    (what is measured, with its unit) and ``expect`` (what the paper predicts);
    ``computed_by``: the per-seed function that returns the statistic (its qualified name is
    written into ``claims.json``). Tiny scale: ``mechanism`` (what *on* plants, what *off*
    removes — and nothing else), ``manipulation``/``manipulation_what`` (a per-seed statistic
    that must meet the expectation on and fail it off, read from the seed table under
    ``manipulation:<id>``), ``known_answer_how`` (how the generator alone gives the statistic,
    read under ``known:<id>``; empty: no oracle yet), ``not_testable`` (why the tiny scale
    cannot test it; empty: testable). ``manipulation_on_only``: the manipulation check need
    only pass on (:func:`manipulation_summary`). ``balance_what``/``balance_tolerance``: a
    per-seed quantity the mechanism must not change, read under ``balance:<id>``
    (:func:`balance_summary`; empty: no balance check). Paper / released scale: ``min_sizes``
    (what a verdict needs, e.g. ``{"languages": 2}``).
    """

    id: str
    claim: str
    paper: str
    statistic: str
    expect: Expect
    computed_by: str | Callable = ""
    mechanism: str = ""
    manipulation: Expect | None = None
    manipulation_what: str = ""
    manipulation_on_only: bool = False
    known_answer_how: str = ""
    not_testable: str = ""
    note: str = ""
    min_sizes: Mapping[str, int] = field(default_factory=dict)
    balance_what: str = ""
    balance_tolerance: float | None = None

    def __post_init__(self) -> None:
        if bool(self.balance_what) != (self.balance_tolerance is not None):
            raise ValueError(f"claim {self.id!r}: a balance check needs both balance_what and "
                             f"balance_tolerance (got {self.balance_what!r}, "
                             f"{self.balance_tolerance!r})")

    def judge(self, table: pd.DataFrame, *, level: float = 0.95,
              min_seeds: int = MIN_ROOT_SEEDS) -> Claim:
        """The tiny-scale claim from a seed table (``seed, mechanism, claim_id, value``, as
        :func:`tokenbook.robustness.over_seeds` returns)."""
        if self.not_testable:
            return Claim.not_testable_tiny(self.id, self.claim, statistic=self.statistic,
                                           why=self.not_testable, paper=self.paper,
                                           computed_by=self.computed_by)
        present = set(table["claim_id"])
        if self.id not in present:
            return Claim.not_testable_tiny(self.id, self.claim, statistic=self.statistic,
                                           why="this run computed no value for the claim",
                                           paper=self.paper, computed_by=self.computed_by)
        on, off = values_by_claim(table, self.id)
        seeds = sorted(set(table.loc[table["claim_id"] == self.id, "seed"]))
        manipulation = known = balance = None
        m_id, k_id = MANIPULATION_PREFIX + self.id, KNOWN_PREFIX + self.id
        b_id = BALANCE_PREFIX + self.id
        if self.manipulation is not None and m_id in present:
            m_on, m_off = values_by_claim(table, m_id)
            manipulation = manipulation_summary(self.manipulation, m_on, m_off, seeds,
                                                what=self.manipulation_what,
                                                on_only=self.manipulation_on_only)
        if self.balance_what and b_id in present:
            b_on, b_off = values_by_claim(table, b_id)
            balance = balance_summary(b_on, b_off, seeds, what=self.balance_what,
                                      tolerance=float(self.balance_tolerance))
        if k_id in present:
            k_on, k_off = values_by_claim(table, k_id)
            known = {"on": float(pd.Series(k_on).mean()), "off": float(pd.Series(k_off).mean()),
                     "how": self.known_answer_how, "values_on": k_on, "values_off": k_off}
        elif self.known_answer_how:
            known = {"on": None, "off": None, "how": self.known_answer_how}
        return Claim.over_seeds(self.id, self.claim, statistic=self.statistic,
                                expect=self.expect, values_on=on, values_off=off,
                                mechanism=self.mechanism, paper=self.paper, note=self.note,
                                computed_by=self.computed_by, known_answer=known,
                                manipulation=manipulation, balance=balance, level=level,
                                min_seeds=min_seeds, root_seeds=seeds)


def judge_claims(specs: Sequence[ClaimSpec], table: pd.DataFrame, **kwargs: Any) -> list[Claim]:
    """Every spec of a chapter judged on its seed table (:meth:`ClaimSpec.judge`)."""
    return [spec.judge(table, **kwargs) for spec in specs]


def save_claims(claims: Sequence[Claim], path: str | os.PathLike) -> Path:
    """Write claims as a JSON list, atomically."""
    ids = [c.id for c in claims]
    dupes = {i for i in ids if ids.count(i) > 1}
    if dupes:
        raise ValueError(f"claim ids must be unique; repeated: {sorted(dupes)}")
    with atomic_path(path) as tmp:
        tmp.write_text(json.dumps([c.to_dict() for c in claims], indent=2, ensure_ascii=False))
    return Path(path)


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
    shows (:class:`tokenbook.scorecard.ClaimsTable`): the chapter's summary box (claims counted by
    verdict, one line on what they show) and the compact claims table (id, verdict, root seeds
    holding on / off, effect; the wording, statistic, intervals and note fold under the id).
    Its ``frame`` is :func:`tokenbook.scorecard.claims_frame`."""
    claims = list(claims)
    save_claims(claims, run_dir() / "claims.json")
    return ClaimsTable(claims)
