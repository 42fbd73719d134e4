"""Checking a reader's answer against the library: results, and comparisons that name the slip.

Each chapter's exercise checks (``tokenbook.<chapter>.exercises``) are built from these. A check
returns a :class:`CheckResult` (shown as ``✅ …``) when the answer is right; when it is wrong it
raises :class:`WrongAnswer` (an ``AssertionError``) naming the input on which it failed, the
expected and the received value, and — where the answer matches a common slip — which slip.
With ``raise_on_wrong=False`` the failing :class:`CheckResult` is returned instead.

Example
-------
>>> outcome("Sum", None, "agrees on 3 cases", raise_on_wrong=True)
✅ Sum: agrees on 3 cases
>>> compare_fn(lambda x: x + 1, lambda x: x + 1, [(1.0,), (2.0,)], "plus_one") is None
True
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Mapping, Sequence

import numpy as np
import pandas as pd

__all__ = ["CheckResult", "WrongAnswer", "outcome", "show_value", "as_array", "close",
           "call_answer", "compare_fn", "compare_dict"]


class WrongAnswer(AssertionError):
    """Raised by a ``check_*`` function when the answer is wrong (the message says why)."""


@dataclass
class CheckResult:
    """Outcome of one check: ``ok`` and a human-readable ``message``."""

    exercise: str
    ok: bool
    message: str

    def __bool__(self) -> bool:
        return self.ok

    def __str__(self) -> str:
        return f"{'✅' if self.ok else '❌'} {self.exercise}: {self.message}"

    def __repr__(self) -> str:  # a notebook or console shows the verdict, not the fields
        return str(self)


def outcome(exercise: str, problem: str | None, ok_message: str,
            raise_on_wrong: bool) -> CheckResult:
    """The check's result: ok with ``ok_message`` when ``problem`` is None, else failed with
    ``problem`` (raised as :class:`WrongAnswer` when ``raise_on_wrong``)."""
    if problem is None:
        return CheckResult(exercise, True, ok_message)
    res = CheckResult(exercise, False, problem)
    if raise_on_wrong:
        raise WrongAnswer(str(res))
    return res


def show_value(x: Any) -> str:
    """A short text of a number, array or Series for a message (6 significant digits)."""
    if isinstance(x, (float, np.floating)):
        return f"{float(x):.6g}"
    if isinstance(x, np.ndarray):
        return np.array2string(x, precision=4, threshold=8, edgeitems=3)
    if isinstance(x, pd.Series):
        return show_value(x.to_numpy()) if len(x) > 8 else str(x.round(4).to_dict())
    return repr(x)


def as_array(x: Any, name: str) -> np.ndarray:
    """``x`` (a number, array, list or tensor) as a float array; TypeError naming ``name``."""
    if hasattr(x, "detach"):
        x = x.detach().cpu().numpy()
    try:
        return np.asarray(x, dtype=float)
    except (TypeError, ValueError) as exc:
        raise TypeError(f"{name} must be a number or an array of numbers, got "
                        f"{type(x).__name__}") from exc


def close(a: Any, b: Any, rtol: float = 1e-6, atol: float = 1e-9) -> bool:
    """Same shape and equal within tolerance (NaN equals NaN)."""
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    return a.shape == b.shape and bool(np.allclose(a, b, rtol=rtol, atol=atol, equal_nan=True))


def call_answer(fn: Callable, args: tuple, label: str) -> tuple[Any, str | None]:
    """``(fn(*args), None)``, or ``(None, problem)`` when ``fn`` is not a function or fails;
    NotImplementedError propagates (the student stub's message)."""
    if not callable(fn):
        return None, f"{label} must be a function, got {type(fn).__name__}"
    try:
        return fn(*args), None
    except NotImplementedError:
        raise
    except Exception as exc:  # the student's code failed: report it as the problem
        return None, f"{label} raised {type(exc).__name__}: {exc}"


def compare_fn(fn: Callable, reference: Callable, cases: Sequence[tuple], label: str,
               slips: Mapping[str, Callable] | None = None, *, rtol: float = 1e-6,
               atol: float = 1e-9, describe: Callable[[tuple], str] | None = None
               ) -> str | None:
    """None if ``fn`` agrees with ``reference`` on every case, else a description of the first
    disagreement (with the matching slip of ``slips``, description → function, if any)."""
    for case in cases:
        got, err = call_answer(fn, case, label)
        if err:
            return err
        want = reference(*case)
        if got is None:
            return f"{label} returned None: did you forget the `return`?"
        try:
            got_a = as_array(got, f"the value returned by {label}")
        except TypeError as exc:
            return str(exc)
        if close(got_a, want, rtol, atol):
            continue
        where = describe(case) if describe else ", ".join(
            show_value(np.asarray(c)) if not isinstance(c, (int, float)) else show_value(c)
            for c in case)
        msg = f"{label}({where}) returned {show_value(got_a)}, expected " \
              f"{show_value(np.asarray(want))}"
        if got_a.shape != np.shape(want):
            msg += f" (shape {got_a.shape}, expected {np.shape(want)})"
        for name, slip in (slips or {}).items():
            try:
                slipped = slip(*case)
            except Exception:  # a slip that does not apply to this input
                continue
            if close(got_a, slipped, rtol, atol):
                msg += f". This is what you get if you {name}"
                break
        return msg
    return None


def compare_dict(answer: Any, expected: Mapping[str, Any], label: str) -> str | None:
    """None if the dict ``answer`` holds every key of ``expected`` with its value (booleans
    and strings equal, numbers close), else what is missing or off."""
    if not isinstance(answer, Mapping):
        return f"{label} must be a dict with keys {sorted(expected)}, got {type(answer).__name__}"
    missing = sorted(set(expected) - set(answer))
    if missing:
        return f"{label} lacks keys {missing} (expected keys {sorted(expected)})"
    wrong = []
    for key, want in expected.items():
        got = answer[key]
        if isinstance(want, (bool, np.bool_, str)):
            if got != want:
                wrong.append(f"{key}: you said {got!r}, the data say {want!r}")
        else:
            try:
                same = close(as_array(got, f"{label}[{key!r}]"), want, rtol=1e-6, atol=1e-9)
            except TypeError as exc:
                wrong.append(str(exc))
                continue
            if not same:
                wrong.append(f"{key}: you have {show_value(got)}, the data give "
                             f"{show_value(want)}")
    return "; ".join(wrong) if wrong else None
