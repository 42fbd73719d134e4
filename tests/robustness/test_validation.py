"""The shared input checks name the argument and the fix."""

import numpy as np
import pandas as pd
import pytest

from tokenbook.validation import (check_array, check_choice, check_positive_int, check_share,
                                  check_table)


def test_check_table():
    good = pd.DataFrame({"a": [1.0, 2.0], "b": ["x", "y"]})
    check_table(good, "t", columns=["a", "b"], numeric=["a"], finite=["a"])
    with pytest.raises(TypeError, match="t: expected a pandas DataFrame"):
        check_table({"a": [1]}, "t")
    with pytest.raises(ValueError, match=r"missing column\(s\) \['c'\]"):
        check_table(good, "t", columns=["c"])
    with pytest.raises(ValueError, match="'b' must be numeric"):
        check_table(good, "t", numeric=["b"])
    with pytest.raises(ValueError, match="1 NaN/inf"):
        check_table(pd.DataFrame({"a": [1.0, np.inf]}), "t", finite=["a"])
    with pytest.raises(ValueError, match="at least 1 row"):
        check_table(good.iloc[:0], "t")


def test_check_array():
    assert check_array([[1, 2]], "x", ndim=2, shape=(1, None)).shape == (1, 2)
    with pytest.raises(ValueError, match=r"x: expected shape \(2, 'any'\)"):
        check_array([[1, 2]], "x", shape=(2, None))
    with pytest.raises(ValueError, match="NaN"):
        check_array([1.0, np.nan], "x")
    with pytest.raises(TypeError, match="dtype kind"):
        check_array([1.5], "x", dtype_kind="iu")
    with pytest.raises(ValueError, match="at least 1"):
        check_array([], "x")
    with pytest.raises(TypeError, match="ragged"):
        check_array([[1], [1, 2]], "x")


def test_scalar_checks():
    assert check_positive_int(3.0, "n") == 3
    with pytest.raises(TypeError):
        check_positive_int(True, "n")
    with pytest.raises(ValueError, match="n: must be ≥ 1, got 0"):
        check_positive_int(0, "n")
    assert check_share(0.5, "s") == 0.5
    with pytest.raises(ValueError, match="percentage"):
        check_share(7, "s")
    with pytest.raises(ValueError, match="one of"):
        check_choice("c", "mode", ["a", "b"])
