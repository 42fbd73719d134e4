"""Library entry points validate their arguments (issue #30 item 5): the cases the issue
found, then a hypothesis fuzz test per module showing that no bare numpy/pandas/torch
exception escapes: only ValueError/TypeError whose message names an argument."""

from __future__ import annotations

import inspect
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tokenbook import stats
from tokenbook.uid_grounding import measures as uid
from tokenbook.data.parallel import CorpusError, read_parallel_text
from tokenbook.memorisation_cartography.estimator import counterfactual_memorisation, map_regions
from tokenbook.cancellation_hypothesis.grpo import advantages

FUZZ = settings(max_examples=40, deadline=None, derandomize=True,
                suppress_health_check=[HealthCheck.function_scoped_fixture,
                                       HealthCheck.too_slow])


# ------------------------------------------------------------------ the cases
@pytest.mark.parametrize("kwargs, says", [
    ({"level": -0.5}, "level"), ({"level": 1.0}, "level"), ({"level": 95}, "percentage"),
    ({"level": float("nan")}, "level"), ({"n_boot": 0}, "n_boot"), ({"n_boot": 2.5}, "n_boot"),
    ({"seed": -1}, "seed"),
])
def test_paired_bootstrap_ci_rejects_bad_level_and_n_boot(kwargs, says):
    with pytest.raises((ValueError, TypeError), match=says):
        stats.paired_bootstrap_ci([1.0, 2.0, 3.0], [0.0, 1.0, 1.0], **kwargs)
    lo, hi = stats.paired_bootstrap_ci([1.0, 2.0, 3.0], [0.0, 1.0, 1.0], n_boot=50)
    assert lo <= hi


@pytest.mark.parametrize("group_size, says", [(0, "group_size"), (1, "group_size"),
                                              (-2, "group_size"), (2.5, "group_size")])
def test_advantages_need_groups_of_two_or_more(group_size, says):
    with pytest.raises((ValueError, TypeError), match=says):
        advantages(torch.tensor([1.0, 0.0, 1.0, 0.0]), group_size)
    a, _ = advantages(torch.tensor([1.0, 0.0]), 1, estimator="psr")  # PSR needs no group
    assert torch.isfinite(a).all()
    a, _ = advantages(torch.tensor([1.0, 0.0, 1.0, 1.0]), 2)
    assert torch.isfinite(a).all()


def _words(n_units=2, n_words=4):
    rows = [dict(lang="en", unit_id=u, word_idx=w, s_U=1.0 + w, s_P=0.5 + w)
            for u in range(n_units) for w in range(n_words)]
    return pd.DataFrame(rows, columns=["lang", "unit_id", "word_idx", "s_U", "s_P"])


def test_uid_measures_of_an_empty_or_all_short_table_say_so():
    with pytest.raises(ValueError, match="empty"):
        uid.unit_measures(_words().iloc[:0])
    with pytest.raises(ValueError, match="min_words=5"):
        uid.unit_measures(_words(n_words=2), min_words=5)
    assert len(uid.unit_measures(_words()).table) == 4


def test_map_regions_leaves_pairs_without_a_value_unmapped():
    table = pd.DataFrame({"tm": [0.9, np.nan, 0.1], "gs": [0.9, 0.5, 0.1],
                          "cm": [0.0, np.nan, 0.0]})
    assert map_regions(table).tolist() == ["generalised", None, "unlearnt"]
    with pytest.raises(ValueError, match="high"):
        map_regions(table, high=float("nan"))


def _scores(in_train):
    return pd.DataFrame({"model": [0, 0, 1, 1], "pair_id": [0, 1, 0, 1],
                         "score": [0.9, 0.5, 0.4, 0.8], "in_train": in_train})


def test_counterfactual_memorisation_rejects_booleans_given_as_text():
    with pytest.raises(TypeError, match="in_train"):
        counterfactual_memorisation(_scores(["True", "False", "False", "True"]))
    cm = counterfactual_memorisation(_scores([True, False, False, True]))
    assert cm["cm"].round(2).tolist() == [0.5, 0.3]


def test_read_parallel_text_drops_a_bom_rejects_nul_and_max_pairs_0(tmp_path):
    src, tgt = tmp_path / "s.txt", tmp_path / "t.txt"
    src.write_bytes(b"\xef\xbb\xbfhello\nworld\n")
    tgt.write_text("hallo\nwereld\n")
    assert read_parallel_text(src, tgt)["source"].tolist() == ["hello", "world"]
    with pytest.raises(ValueError, match="max_pairs"):
        read_parallel_text(src, tgt, max_pairs=0)
    tgt.write_bytes(b"hallo\nwer\x00eld\n")
    with pytest.raises(CorpusError, match="line 2 holds a NUL"):
        read_parallel_text(src, tgt)


# ------------------------------------------------------------------ fuzz tests
def _only_named_errors(fn, *args, **kwargs):
    """Call ``fn``; any exception must be ValueError/TypeError whose message names one of its
    arguments (or the table/column it was given)."""
    names = set(inspect.signature(fn).parameters) | {"table", "column", "rewards", "scores",
                                                      "line", "file", "level", "n_boot"}
    names |= {str(a) for a in args if isinstance(a, Path)}
    try:
        return fn(*args, **kwargs)
    except (ValueError, TypeError) as exc:
        message = str(exc)
        assert any(n in message for n in names), f"{type(exc).__name__}: {message}"
    return None


numbers = st.one_of(st.floats(allow_nan=True, allow_infinity=True), st.integers(-5, 5),
                    st.text(max_size=3), st.none(), st.booleans())
number_lists = st.one_of(st.lists(numbers, max_size=6), numbers)


@FUZZ
@given(x=number_lists, y=number_lists, n_boot=numbers, level=numbers, seed=numbers)
def test_fuzz_stats(x, y, n_boot, level, seed):
    out = _only_named_errors(stats.paired_bootstrap_ci, x, y, n_boot=n_boot, level=level,
                             seed=seed)
    if out is not None and all(math.isfinite(v) for v in out):
        assert out[0] <= out[1]
    _only_named_errors(stats.bootstrap_ci, x, n_boot=n_boot, level=level, seed=seed)
    _only_named_errors(stats.paired_wilcoxon, x, y)
    _only_named_errors(stats.cohens_dz, x, y)
    _only_named_errors(stats.benjamini_hochberg, x)
    _only_named_errors(stats.relative_change, x, y)


@FUZZ
@given(rewards=number_lists, group_size=numbers,
       estimator=st.sampled_from(["grpo", "psr", "posonly", "nope"]))
def test_fuzz_rl_advantages(rewards, group_size, estimator):
    out = _only_named_errors(advantages, rewards, group_size, estimator=estimator)
    if out is not None:
        assert torch.isfinite(out[0]).all()


@FUZZ
@given(n_units=st.integers(0, 3), n_words=st.integers(0, 4), min_words=numbers,
       bad=st.sampled_from([None, "nan", "text", "drop_column"]))
def test_fuzz_uid_unit_measures(n_units, n_words, min_words, bad):
    table = _words(n_units, n_words)
    if bad == "nan" and len(table):
        table.loc[0, "s_U"] = np.nan
    elif bad == "text":
        table["s_P"] = table["s_P"].astype(str)
    elif bad == "drop_column":
        table = table.drop(columns=["word_idx"])
    _only_named_errors(uid.unit_measures, table, min_words=min_words)


@FUZZ
@given(tm=number_lists, high=numbers, in_train=st.lists(st.sampled_from(
    [True, False, "True", "False", 1, 0, None]), min_size=4, max_size=4))
def test_fuzz_memorisation_estimator(tm, high, in_train):
    values = tm if isinstance(tm, list) else [tm]
    table = pd.DataFrame({"tm": values, "gs": values, "cm": values})
    _only_named_errors(map_regions, table, high=high)
    _only_named_errors(counterfactual_memorisation, _scores(in_train))


@FUZZ
@given(source=st.binary(max_size=40), target=st.binary(max_size=40), max_pairs=numbers)
def test_fuzz_read_parallel_text(tmp_path_factory, source, target, max_pairs):
    folder = tmp_path_factory.mktemp("corpus")
    (folder / "s").write_bytes(source)
    (folder / "t").write_bytes(target)
    out = _only_named_errors(read_parallel_text, folder / "s", folder / "t",
                             max_pairs=max_pairs)
    if out is not None:
        assert len(out) >= 1 and not out["source"].str.contains("\ufeff|\x00").any()


series = st.lists(st.one_of(st.floats(), st.text(max_size=2), st.none()), max_size=5).map(
    lambda v: pd.Series(v, index=[f"k{i}" for i in range(len(v))], dtype=object))


@FUZZ
@given(a=series, b=series, test=st.sampled_from(["welch", "student", "mannwhitney", "nope"]),
       alternative=st.sampled_from(["two-sided", "less", "nope"]))
def test_fuzz_stats_tables_and_ranks(a, b, test, alternative):
    _only_named_errors(stats.kendall_tau, a, b)
    _only_named_errors(stats.spearman_rho, a, b)
    data = pd.DataFrame({"g": ["x", "y"] * (len(a) // 2 + 1)})[: len(a)].assign(v=a.to_numpy())
    _only_named_errors(stats.pairwise_tests, data, group="g", value="v", test=test)
    _only_named_errors(stats.paired_wilcoxon, a.to_numpy(), a.to_numpy(), alternative=alternative)
