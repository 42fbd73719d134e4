"""Predicting TM, GS and CM from features and training signals (the authors' §5 MLPs).

The authors fit ``MLPRegressor(hidden_layer_sizes=(100, 100), max_iter=20)`` on *unscaled*
features, multi-output [TM, GS, CM], on a random 70/30 split without a seed, and report Pearson r
and mean absolute difference on the 30 %. We keep the architecture, outputs, split and metrics,
and change two things on purpose (``authors_exact=True`` restores them): features are
standardised (a ``StandardScaler`` in the pipeline) and the MLP trains to convergence with early
stopping (``max_iter=500``), since 20 epochs on unscaled inputs leaves it badly under-fitted;
the split is seeded. Permutation importance (scikit-learn, on the held-out split, scored by the
MAE of one output) says which inputs the fitted model relies on — the authors ranked features
by Spearman ρ instead (:func:`feature_correlations` gives those too).
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy.stats import pearsonr

TARGETS = ["tm", "gs", "cm"]


@dataclass
class MapPredictor:
    """A fitted predictor and its held-out evaluation.

    ``metrics``: one row per output with ``target, pearson_r, mae, n_test``;
    ``importance``: ``feature, target, importance_mean, importance_std`` (increase in MAE when the
    feature is permuted, same units as the target); ``test_predictions``: held-out rows with
    ``pair_id``, true and predicted values.
    """

    model: object
    inputs: list[str]
    metrics: pd.DataFrame
    importance: pd.DataFrame
    test_predictions: pd.DataFrame


def fit_map_predictor(data: pd.DataFrame, inputs: list[str], *, targets=TARGETS,
                      test_size: float = 0.3, seed: int = 0, hidden=(100, 100),
                      authors_exact: bool = False, importance_repeats: int = 5,
                      importance_for=("cm",), estimator: str = "mlp") -> MapPredictor:
    """Fit the MLP on ``data[inputs]`` → ``data[targets]`` and evaluate on a held-out split.

    ``data`` needs ``pair_id``, the input columns and the target columns; rows with missing
    values are dropped (with a ValueError if fewer than 20 remain). ``estimator="linear"``
    fits the linear baseline instead (ordinary least squares on standardised inputs, the same
    outputs and split), to report next to the MLP.
    """
    from sklearn.inspection import permutation_importance
    from sklearn.model_selection import train_test_split
    from sklearn.neural_network import MLPRegressor
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    targets = list(targets)
    missing = (set(inputs) | set(targets) | {"pair_id"}) - set(data.columns)
    if missing:
        raise ValueError(f"data lacks columns {sorted(missing)}")
    d = data[["pair_id", *inputs, *targets]].dropna()
    if len(d) < 20:
        raise ValueError(f"only {len(d)} complete rows; need at least 20 to fit and evaluate")
    X, Y = d[inputs].to_numpy(float), d[targets].to_numpy(float)
    tr, te = train_test_split(np.arange(len(d)), test_size=test_size, random_state=seed)
    if estimator not in ("mlp", "linear"):
        raise ValueError(f"estimator must be 'mlp' or 'linear', got {estimator!r}")
    if estimator == "linear":
        from sklearn.linear_model import LinearRegression

        model = make_pipeline(StandardScaler(), LinearRegression())
    elif authors_exact:
        model = MLPRegressor(hidden_layer_sizes=hidden, max_iter=20, random_state=seed)
    else:
        model = make_pipeline(StandardScaler(), MLPRegressor(
            hidden_layer_sizes=hidden, max_iter=500, early_stopping=True, random_state=seed,
            n_iter_no_change=10))

    from sklearn.exceptions import ConvergenceWarning
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        model.fit(X[tr], Y[tr])
    P = model.predict(X[te]).reshape(len(te), len(targets))
    rows = []
    for k, t in enumerate(targets):
        defined = np.std(P[:, k]) > 0 and np.std(Y[te, k]) > 0    # r needs both to vary
        r = pearsonr(Y[te, k], P[:, k]).statistic if defined else np.nan
        rows.append((t, float(r), float(np.abs(Y[te, k] - P[:, k]).mean()), len(te)))
    metrics = pd.DataFrame(rows, columns=["target", "pearson_r", "mae", "n_test"])
    imp_rows = []
    for t in importance_for:
        k = targets.index(t)

        def scorer(est, Xs, Ys, k=k):
            return -np.abs(est.predict(Xs).reshape(len(Xs), -1)[:, k] - Ys[:, k]).mean()

        res = permutation_importance(model, X[te], Y[te], scoring=scorer,
                                     n_repeats=importance_repeats, random_state=seed)
        for f, m, s in zip(inputs, res.importances_mean, res.importances_std):
            imp_rows.append((f, t, float(m), float(s)))
    importance = (pd.DataFrame(imp_rows, columns=["feature", "target", "importance_mean",
                                                  "importance_std"])
                  .sort_values(["target", "importance_mean"], ascending=[True, False]))
    preds = pd.DataFrame({"pair_id": d["pair_id"].to_numpy()[te]})
    for k, t in enumerate(targets):
        preds[t] = Y[te, k]
        preds[f"{t}_pred"] = P[:, k]
    return MapPredictor(model, list(inputs), metrics, importance.reset_index(drop=True), preds)


def feature_correlations(data: pd.DataFrame, inputs: list[str], targets=TARGETS) -> pd.DataFrame:
    """Spearman ρ of every input with TM, GS and CM (rows: inputs; the authors' heatmap).

    A constant input (e.g. a signal that never fires at this scale) gets NaN."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # scipy's ConstantInputWarning for constant columns
        return pd.DataFrame({t: [data[f].corr(data[t], method="spearman") for f in inputs]
                             for t in targets}, index=inputs)
