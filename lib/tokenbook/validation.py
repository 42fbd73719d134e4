"""Input checks shared by every module, in the scikit-learn manner.

Each check raises :class:`ValueError` (wrong values, shapes, missing columns) or
:class:`TypeError` (wrong kind of object) whose message names the argument, the problem and
what to do, instead of letting pandas, numpy or torch fail deep inside a computation.

Example
-------
>>> import pandas as pd
>>> check_table(pd.DataFrame({"s_U": [1.0, 2.0]}), "words", columns=["s_U"], finite=["s_U"])
>>> check_table(pd.DataFrame({"s_U": [1.0]}), "words", columns=["s_U", "s_P"])
Traceback (most recent call last):
...
ValueError: words: missing column(s) ['s_P'] (has ['s_U']); build the table with the library's table builders or rename the columns
"""

from __future__ import annotations

import math
from typing import Any, Iterable, Sequence

import numpy as np
import pandas as pd

__all__ = ["check_table", "check_array", "check_positive_int", "check_share", "check_level",
           "check_choice", "is_finite_number"]


def is_finite_number(x: Any) -> bool:
    """Whether ``x`` converts to a finite float (False for None, NaN, ±inf and non-numbers).

    >>> [is_finite_number(v) for v in (1, "2.5", None, float("nan"), "a")]
    [True, True, False, False, False]
    """
    try:
        return x is not None and math.isfinite(float(x))
    except (TypeError, ValueError):
        return False


def check_table(frame: Any, name: str, *, columns: Iterable[str] = (),
                numeric: Iterable[str] = (), finite: Iterable[str] = (),
                min_rows: int = 1) -> None:
    """Check a DataFrame argument: its type, required ``columns``, ``numeric`` dtypes, finite
    values in ``finite`` and at least ``min_rows`` rows."""
    if not isinstance(frame, pd.DataFrame):
        raise TypeError(f"{name}: expected a pandas DataFrame, got {type(frame).__name__}")
    columns, numeric, finite = list(columns), list(numeric), list(finite)
    missing = [c for c in dict.fromkeys(columns + numeric + finite) if c not in frame.columns]
    if missing:
        raise ValueError(f"{name}: missing column(s) {missing} (has {list(frame.columns)}); "
                         f"build the table with the library's table builders or rename the "
                         f"columns")
    if len(frame) < min_rows:
        raise ValueError(f"{name}: needs at least {min_rows} row(s), got {len(frame)}; "
                         f"check the filters that produced it (too strict a minimum length?)")
    for col in dict.fromkeys(numeric + finite):
        if not pd.api.types.is_numeric_dtype(frame[col]) or pd.api.types.is_bool_dtype(frame[col]):
            raise ValueError(f"{name}: column {col!r} must be numeric, got dtype "
                             f"{frame[col].dtype}; convert it with pd.to_numeric")
    for col in finite:
        bad = ~np.isfinite(frame[col].to_numpy(dtype=float))
        if bad.any():
            raise ValueError(f"{name}: column {col!r} has {int(bad.sum())} NaN/inf value(s) "
                             f"(first at row {int(np.flatnonzero(bad)[0])}); drop or fix them")


def check_array(x: Any, name: str, *, ndim: int | Sequence[int] | None = None,
                shape: Sequence[int | None] | None = None, finite: bool = True,
                min_size: int = 1, dtype_kind: str | None = None) -> np.ndarray:
    """``x`` as a numpy array, checked: ``ndim``, ``shape`` (None = any length on that axis),
    finite values, at least ``min_size`` elements, ``dtype_kind`` (e.g. ``"iu"`` for
    integers, ``"f"`` for floats). Returns the array."""
    if hasattr(x, "detach"):                 # a torch tensor
        x = x.detach().cpu().numpy()
    try:
        arr = np.asarray(x)
    except (TypeError, ValueError) as exc:
        raise TypeError(f"{name}: cannot be read as a numeric array (ragged nested lists or "
                        f"mixed types?): {exc}") from None
    if arr.dtype == object:
        raise TypeError(f"{name}: expected numbers, got objects (ragged nested lists or "
                        f"strings?)")
    if ndim is not None:
        allowed = (ndim,) if isinstance(ndim, int) else tuple(ndim)
        if arr.ndim not in allowed:
            raise ValueError(f"{name}: expected {' or '.join(map(str, allowed))} dimension(s), "
                             f"got shape {arr.shape}")
    if shape is not None:
        if arr.ndim != len(shape) or any(s is not None and s != a
                                          for s, a in zip(shape, arr.shape)):
            want = tuple("any" if s is None else s for s in shape)
            raise ValueError(f"{name}: expected shape {want}, got {arr.shape}")
    if arr.size < min_size:
        raise ValueError(f"{name}: needs at least {min_size} value(s), got {arr.size}")
    if dtype_kind is not None and arr.dtype.kind not in dtype_kind:
        raise TypeError(f"{name}: expected dtype kind {dtype_kind!r}, got {arr.dtype}; "
                        f"convert it first (e.g. .astype(int))")
    if finite and arr.dtype.kind in "fc" and not np.isfinite(arr).all():
        raise ValueError(f"{name}: has {int((~np.isfinite(arr)).sum())} NaN/inf value(s)")
    return arr


def check_positive_int(value: Any, name: str, *, minimum: int = 1) -> int:
    """``value`` as an int ≥ ``minimum`` (bools and floats with a fraction are rejected)."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        if isinstance(value, float) and value.is_integer():
            value = int(value)
        else:
            raise TypeError(f"{name}: expected a whole number, got {type(value).__name__} "
                            f"{value!r}")
    if value < minimum:
        raise ValueError(f"{name}: must be ≥ {minimum}, got {value}")
    return int(value)


def check_share(value: Any, name: str, *, open_low: bool = False) -> float:
    """``value`` as a float share in [0, 1] (in (0, 1] with ``open_low``)."""
    try:
        v = float(value)
    except (TypeError, ValueError):
        raise TypeError(f"{name}: expected a share between 0 and 1, got {value!r}") from None
    if not (0.0 < v <= 1.0 if open_low else 0.0 <= v <= 1.0):
        raise ValueError(f"{name}: must be a share in {'(0, 1]' if open_low else '[0, 1]'}, "
                         f"got {value!r} (a percentage? divide by 100)")
    return v


def check_level(value: Any, name: str) -> float:
    """``value`` as a float strictly between 0 and 1 (a confidence or test level)."""
    if isinstance(value, bool):
        raise TypeError(f"{name}: expected a level between 0 and 1, got {value!r}")
    try:
        v = float(value)
    except (TypeError, ValueError):
        raise TypeError(f"{name}: expected a level between 0 and 1, got {value!r}") from None
    if not 0.0 < v < 1.0:
        raise ValueError(f"{name}: must be strictly between 0 and 1 (e.g. 0.95), got {value!r}"
                         f"{' (a percentage? divide by 100)' if 1 < v <= 100 else ''}")
    return v


def check_choice(value: Any, name: str, choices: Iterable[Any]) -> Any:
    """``value`` if it is one of ``choices``, else a ValueError listing them."""
    choices = list(choices)
    if value not in choices:
        raise ValueError(f"{name}: must be one of {choices}, got {value!r}")
    return value
