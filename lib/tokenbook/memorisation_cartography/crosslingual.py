"""Memorisation across languages: the authors' cross-language correlations and predictor transfer.

Dankers et al. compute TM, GS and CM for the *same* English sources in five language pairs. They
correlate each metric across languages (``section4.py::compare_languages``), and they train the
map predictor on one language and test it on the others (``section5.py::train_mlps``): a random
70/30 split of the train language, evaluated on its held-out 30 % and on all rows of every other
language, by Pearson r and mean absolute difference (the appendix's 5×5 train→test heatmap of
the CM error). :func:`cross_language_correlations` and :func:`cross_lingual_transfer` do both on
one table per language, e.g. the maps of the worlds of
:func:`tokenbook.worlds.translation.make_multiparallel_world`.

In a multi-parallel corpus the other languages' rows hold the same sources as the train
language's training rows; the transfer cells therefore measure how much of the map a model
learnt from one language carries over to the same sentences in another, as in the paper.
"""

from __future__ import annotations

import warnings
from itertools import combinations, permutations

import numpy as np
import pandas as pd
from scipy.stats import pearsonr, rankdata, spearmanr

from tokenbook.memorisation_cartography.predict import fit_map_predictor
from tokenbook.stats import bootstrap_ci
from tokenbook.worlds.translation import SOURCE_SIDE_PHENOMENA

__all__ = ["cross_language_correlations", "cross_lingual_transfer", "phenomenon_agreement",
           "mean_phenomenon_agreement"]


def _check_tables(tables: dict, columns, what: str) -> None:
    if not isinstance(tables, dict) or len(tables) < 2:
        raise ValueError(f"{what} must be a dict of at least 2 languages, got "
                         f"{len(tables) if isinstance(tables, dict) else type(tables).__name__}")
    for lang, df in tables.items():
        missing = [c for c in columns if c not in df.columns]
        if missing:
            raise ValueError(f"{what}[{lang!r}] lacks column(s) {missing}")


def _spearman(x: np.ndarray, y: np.ndarray) -> float:
    if len(x) < 3 or np.ptp(x) == 0 or np.ptp(y) == 0:
        return float("nan")
    return float(spearmanr(x, y).statistic)


def _spearman_of_resamples(block: np.ndarray) -> np.ndarray:
    """Spearman ρ of the two columns of each resample: ``block`` [b, n, 2] → [b] (NaN where a
    column is constant)."""
    r = rankdata(block, axis=1)
    r -= r.mean(axis=1, keepdims=True)
    rx, ry = r[..., 0], r[..., 1]
    den = np.sqrt((rx ** 2).sum(axis=1) * (ry ** 2).sum(axis=1))
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(den > 0, (rx * ry).sum(axis=1) / den, np.nan)


def paired_spearman(merged: pd.DataFrame, metrics, suffixes: tuple[str, str], *,
                    n_boot: int, seed: int) -> list[tuple[str, float, float, float, int]]:
    """Per metric, Spearman ρ between the columns ``<metric><suffixes[0]>`` and
    ``<metric><suffixes[1]>`` of ``merged`` (one row per pair, both maps side by side), over
    the rows where both are finite, with a 95% percentile bootstrap interval over those rows
    (:func:`tokenbook.stats.bootstrap_ci`, ``n_boot`` resamples from ``seed``, the same stream
    for every metric; NaN with ``n_boot=0`` or an undefined ρ). Returns ``(metric, rho,
    ci_low, ci_high, n)`` per metric; rows are taken in ``pair_id`` order."""
    merged = merged.sort_values("pair_id", kind="stable")
    rows = []
    for metric in metrics:
        x = merged[f"{metric}{suffixes[0]}"].to_numpy(float)
        y = merged[f"{metric}{suffixes[1]}"].to_numpy(float)
        ok = np.isfinite(x) & np.isfinite(y)
        x, y = x[ok], y[ok]
        rho = _spearman(x, y)
        lo = hi = float("nan")
        if n_boot and np.isfinite(rho):
            lo, hi = bootstrap_ci(np.column_stack([x, y]), _spearman_of_resamples,
                                  n_boot=n_boot, seed=seed, level=0.95, vectorized=True)
        rows.append((metric, rho, lo, hi, int(ok.sum())))
    return rows


def cross_language_correlations(maps: dict[str, pd.DataFrame], *, metrics=("tm", "gs", "cm"),
                                n_boot: int = 1000, seed: int = 0) -> pd.DataFrame:
    """Spearman ρ of each metric between every two languages, over the pairs they share.

    ``maps[lang]`` has one row per training pair: ``pair_id`` and the ``metrics`` columns
    (TM, GS, CM in their own units; ρ is rank-based). Rows are matched by ``pair_id`` (in any
    order); a pair without a value of a metric in either map is left out of that metric.

    Returns one row per unordered language pair (in the order of ``maps``) and metric:
    ``lang_a, lang_b, metric, rho, ci_low, ci_high, n``, where ``n`` is the number of pairs used
    and the 95 % interval holds the 2.5th and 97.5th percentiles of ρ over ``n_boot`` resamples
    of those pairs with replacement (seeded by ``seed``, the same stream for every cell; NaN with
    ``n_boot=0``). ρ is NaN with fewer than 3 pairs or a constant metric.

    Raises ValueError with fewer than 2 maps, a missing column, a repeated ``pair_id`` within
    a map, or two maps that share no ``pair_id``.
    """
    metrics = [metrics] if isinstance(metrics, str) else list(metrics)
    if not metrics:
        raise ValueError("metrics is empty")
    if n_boot < 0:
        raise ValueError(f"n_boot must be ≥ 0, got {n_boot}")
    _check_tables(maps, ["pair_id", *metrics], "maps")
    for lang, df in maps.items():
        if df["pair_id"].duplicated().any():
            dup = df.loc[df["pair_id"].duplicated(), "pair_id"].iloc[0]
            raise ValueError(f"maps[{lang!r}] has pair_id {dup!r} more than once; one row per "
                             "pair")
    rows = []
    for a, b in combinations(maps, 2):
        m = maps[a][["pair_id", *metrics]].merge(maps[b][["pair_id", *metrics]], on="pair_id",
                                                 suffixes=("_a", "_b"))
        if m.empty:
            raise ValueError(f"maps {a!r} and {b!r} share no pair_id; the correlations need the "
                             "same pairs (one shared source side) in both")
        rows += [(a, b, *r) for r in paired_spearman(m, metrics, ("_a", "_b"), n_boot=n_boot,
                                                      seed=seed)]
    return pd.DataFrame(rows, columns=["lang_a", "lang_b", "metric", "rho", "ci_low", "ci_high",
                                       "n"])


def _score(y: np.ndarray, p: np.ndarray) -> tuple[float, float]:
    r = pearsonr(y, p).statistic if len(y) > 1 and np.std(p) > 0 and np.std(y) > 0 else np.nan
    return float(r), float(np.abs(y - p).mean())


def phenomenon_agreement(maps: dict[str, pd.DataFrame], *, metrics=("tm", "gs", "cm"),
                         phenomena: tuple[str, ...] = SOURCE_SIDE_PHENOMENA) -> pd.DataFrame:
    """Spearman ρ of each metric between two languages over the pairs whose source carries a
    source-side phenomenon in the *first* of them (the tiny cross-lingual claims' statistic).

    ``maps[lang]``: ``pair_id``, ``phenomenon`` (the planted label) and the ``metrics``. For
    every ordered language pair ``(a, b)`` the rows of ``a`` labelled with one of ``phenomena``
    are matched by ``pair_id`` to ``b``'s rows, and ρ is taken over them. With the phenomena on
    the shared sources (a multi-parallel world) ``b``'s rows hold the same sentences; drawn per
    language, mostly other, regular sources. Returns ``lang_a, lang_b, metric, rho, n`` (ρ NaN
    under 3 rows or a constant column).

    >>> m = {k: pd.DataFrame({"pair_id": range(6), "phenomenon": ["idiom", "regular"] * 3,
    ...                       "cm": [0.9, 0.1, 0.5, 0.2, 0.1, 0.3]}) for k in ("de", "nl")}
    >>> phenomenon_agreement(m, metrics="cm")[["lang_a", "rho", "n"]].values.tolist()
    [['de', 1.0, 3], ['nl', 1.0, 3]]
    """
    metrics = [metrics] if isinstance(metrics, str) else list(metrics)
    _check_tables(maps, ["pair_id", "phenomenon", *metrics], "maps")
    rows = []
    for a, b in permutations(maps, 2):
        first = maps[a][maps[a]["phenomenon"].isin(phenomena)]
        m = first[["pair_id", *metrics]].merge(maps[b][["pair_id", *metrics]], on="pair_id",
                                               suffixes=("_a", "_b"))
        for metric in metrics:
            x, y = m[f"{metric}_a"].to_numpy(float), m[f"{metric}_b"].to_numpy(float)
            ok = np.isfinite(x) & np.isfinite(y)
            rows.append((a, b, metric, _spearman(x[ok], y[ok]), int(ok.sum())))
    return pd.DataFrame(rows, columns=["lang_a", "lang_b", "metric", "rho", "n"])


def mean_phenomenon_agreement(maps: dict[str, pd.DataFrame], metrics=("tm", "gs", "cm"),
                              ) -> dict[str, float]:
    """Per metric, the mean over ordered language pairs of :func:`phenomenon_agreement`'s ρ
    (NaN pairs left out): the tiny cross-lingual claims' statistic, and their known answer on
    the generator's label."""
    metrics = [metrics] if isinstance(metrics, str) else list(metrics)
    agree = phenomenon_agreement(maps, metrics=metrics)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # every pair NaN: the mean is NaN
        return {m: float(np.nanmean(agree.loc[agree["metric"] == m, "rho"].to_numpy(float)))
                for m in metrics}


def cross_lingual_transfer(data: dict[str, pd.DataFrame], inputs, *, target="cm",
                           test_size: float = 0.3, seed: int = 0, estimator: str = "mlp",
                           authors_exact: bool = False) -> pd.DataFrame:
    """Train the map predictor on each language and test it on every language.

    ``data[lang]`` has one row per pair with the ``inputs`` columns (features, signals) and the
    ``target`` column(s); ``pair_id`` is optional. For each train language,
    :func:`tokenbook.memorisation_cartography.predict.fit_map_predictor` fits on a seeded ``1 - test_size``
    share of its complete rows (split and model seeded by ``seed``); the model is evaluated on
    that language's held-out rows and on all complete rows of every other language.
    ``target`` is one column (default ``"cm"``) or several, fitted jointly as one multi-output
    model (``("tm", "gs", "cm")`` is the authors' setup). ``estimator`` and ``authors_exact``
    are passed on: ``"mlp"`` the MLP(100, 100) (standardised inputs and early stopping, or the
    authors' unscaled ``max_iter=20`` with ``authors_exact=True``), ``"linear"`` the linear
    baseline.

    Returns one row per train language × test language × target (in the order of ``data``):
    ``train, test, target, pearson_r, mae, n`` — Pearson r and mean absolute difference between
    predicted and true values (``mae`` in the target's units) over the ``n`` evaluation rows;
    ``train == test`` is the held-out split. r is NaN when the predictions are constant.
    """
    targets = [target] if isinstance(target, str) else list(target)
    inputs = list(inputs)
    if not targets or not inputs:
        raise ValueError("need at least one input and one target column")
    if estimator not in ("mlp", "linear"):
        raise ValueError(f"estimator must be 'mlp' or 'linear', got {estimator!r}")
    if not 0.0 < test_size < 1.0:
        raise ValueError(f"test_size must be in (0, 1), got {test_size}")
    _check_tables(data, [*inputs, *targets], "data")
    from sklearn.exceptions import DataConversionWarning

    tables = {}
    for lang, df in data.items():
        d = df if "pair_id" in df.columns else df.assign(pair_id=np.arange(len(df)))
        tables[lang] = d[["pair_id", *inputs, *targets]].dropna()
    rows = []
    for train, d in tables.items():
        with warnings.catch_warnings():   # one target: sklearn warns about the (n, 1) y
            warnings.simplefilter("ignore", DataConversionWarning)
            fit = fit_map_predictor(d, inputs, targets=targets, test_size=test_size, seed=seed,
                                    authors_exact=authors_exact, importance_for=(),
                                    estimator=estimator)
        for test, e in tables.items():
            if test == train:
                for t, r, mae, n in fit.metrics[["target", "pearson_r", "mae",
                                                 "n_test"]].itertuples(index=False):
                    rows.append((train, test, t, float(r), float(mae), int(n)))
                continue
            if e.empty:
                rows += [(train, test, t, np.nan, np.nan, 0) for t in targets]
                continue
            P = np.asarray(fit.model.predict(e[inputs].to_numpy(float)), float)
            P = P.reshape(len(e), len(targets))
            Y = e[targets].to_numpy(float)
            for k, t in enumerate(targets):
                r, mae = _score(Y[:, k], P[:, k])
                rows.append((train, test, t, r, mae, len(e)))
    return pd.DataFrame(rows, columns=["train", "test", "target", "pearson_r", "mae", "n"])
