"""The map's regions and what they do to translation: the §6.1 removal grid and §6.2 corpora.

**§6.1 removal grid** (the authors' ``store_subsets.py``, ``--array=0-54``): target coordinates
(TM, GS) = (i/n, j/n) for 1 ≤ j ≤ i ≤ n, i.e. a triangular grid on and below the diagonal of the
unit square; n = 10 gives the paper's 55 cells. We read the grid this way from the released
code (the method notes, §3.1 and §5.1); :func:`grid_centres` takes n as ``size``, so a tiny run
uses a coarser grid of the same shape (n = 3: 6 cells). Around each centre the pairs nearest on
the map are removed up to a source-token budget (:func:`tokenbook.memorisation_cartography.removal.select_region`),
a model is retrained per seed, and each cell is compared with random removal of the same budget
(:func:`paired_differences`: seed-paired differences with t-based 95% intervals over seeds).

**§6.2 specialised corpora** (the authors' ``store_specialised_corpora.py``): an MLP trained on
20% of the map predicts (TM, GS) of every candidate pair from surface features; a corpus is built
from the pairs whose *predicted* position falls inside a polygon of the map, with the same
number of source tokens as a random corpus. The two polygons (:data:`POLYGONS`):

* ``bleu_hal``: the triangle (0.6, 0), (1, 1), (1, 0) — high TM, on or below the line from
  (0.6, 0) to (1, 1): the memorised corner and the high-TM part of the diagonal (named for BLEU
  and hallucinations);
* ``log_probability``: (0, 0), (0.4, 0.4), (1, 0.4), (1, 0) — GS ≤ 0.4 on or below the
  diagonal (named for the reference log-probability).

Our reading where the released code is silent or a placeholder (notes §5.2, §9): the candidate
pool is the mapped corpus itself (the released ``predict_on_30M`` iterates over the 1M-pair map,
not a 30M pool). When the polygon's pairs hold fewer source tokens than the budget — certain on
a small corpus — the corpus is completed with the pairs whose predicted position lies *nearest*
to the polygon (Euclidean distance in the unit square), and the share of tokens taken from
inside the polygon is reported (:func:`specialised_corpus`).
"""

from __future__ import annotations

from typing import Sequence

import numpy as np
import pandas as pd
from scipy import stats

from tokenbook.memorisation_cartography.predict import TARGETS, fit_map_predictor
from tokenbook.memorisation_cartography.removal import source_token_counts, take_within_budget
from tokenbook.validation import check_table

#: the §6.2 polygons in (TM, GS), vertices in order (both convex)
POLYGONS: dict[str, tuple[tuple[float, float], ...]] = {
    "bleu_hal": ((0.6, 0.0), (1.0, 1.0), (1.0, 0.0)),
    "log_probability": ((0.0, 0.0), (0.4, 0.4), (1.0, 0.4), (1.0, 0.0)),
}


# --------------------------------------------------------------------------- §6.1 grid
def grid_centres(size: int = 10) -> pd.DataFrame:
    """The removal grid's cell centres: (TM, GS) = (i/size, j/size), 1 ≤ j ≤ i ≤ size.

    ``size`` = 10 is the paper's grid of 55 cells; in general there are size·(size+1)/2.
    Returns one row per cell, ordered by i then j, with columns ``cell`` (e.g. ``"tm0.67-gs0.33"``),
    ``i``, ``j``, ``tm``, ``gs`` (probabilities in [0, 1]) and ``cm`` = tm − gs (≥ 0).
    """
    if isinstance(size, bool) or not isinstance(size, (int, np.integer)) or size < 1:
        raise ValueError(f"grid size must be a positive integer, got {size!r} "
                         "(10 gives the paper's 55 cells)")
    rows = [(i, j, i / size, j / size) for i in range(1, size + 1) for j in range(1, i + 1)]
    out = pd.DataFrame(rows, columns=["i", "j", "tm", "gs"])
    out["cm"] = out["tm"] - out["gs"]
    out.insert(0, "cell", [f"tm{t:.2f}-gs{g:.2f}" for t, g in zip(out["tm"], out["gs"])])
    return out


def paired_differences(results: pd.DataFrame, *, control: str = "random",
                       metrics: Sequence[str] = ("test_logprob", "bleu", "hallucination_rate"),
                       alpha: float = 0.05) -> pd.DataFrame:
    """Seed-paired differences of every condition to ``control``, with t-based intervals.

    ``results``: one row per (``condition``, ``seed``) with the metric columns (the records of
    :func:`tokenbook.memorisation_cartography.removal.train_and_evaluate`). For each condition other than the
    control and each metric: ``mean`` (the condition's mean over seeds), ``control_mean``,
    ``diff`` (mean over the seeds both have of condition − control, in the metric's unit: nats
    per token, BLEU points, share), ``ci_low``/``ci_high`` (Student-t 1 − ``alpha`` interval of
    that mean; NaN with fewer than 2 seeds), ``n_seeds`` and ``excludes_zero``.
    """
    metrics = list(metrics)
    check_table(results, "results", columns=["condition", "seed", *metrics])
    if control not in set(results["condition"]):
        raise ValueError(f"results have no control condition {control!r}; conditions: "
                         f"{sorted(set(results['condition']))}")
    if results.duplicated(["condition", "seed"]).any():
        raise ValueError("results must have one row per (condition, seed)")
    ctrl = results[results["condition"] == control].set_index("seed")
    rows = []
    for cond, d in results[results["condition"] != control].groupby("condition", sort=False):
        d = d.set_index("seed")
        common = d.index.intersection(ctrl.index)
        for m in metrics:
            diff = (d.loc[common, m] - ctrl.loc[common, m]).dropna().to_numpy(float)
            lo = hi = float("nan")
            if len(diff) >= 2:
                se = diff.std(ddof=1) / np.sqrt(len(diff))
                if se == 0:
                    lo = hi = float(diff.mean())
                else:
                    lo, hi = (float(x) for x in stats.t.interval(
                        1 - alpha, len(diff) - 1, loc=diff.mean(), scale=se))
            mean_diff = float(diff.mean()) if len(diff) else float("nan")
            rows.append(dict(condition=cond, metric=m, mean=float(d[m].mean()),
                             control_mean=float(ctrl[m].mean()), diff=mean_diff, ci_low=lo,
                             ci_high=hi, n_seeds=len(diff),
                             excludes_zero=bool(lo > 0 or hi < 0)))
    return pd.DataFrame(rows, columns=["condition", "metric", "mean", "control_mean", "diff",
                                       "ci_low", "ci_high", "n_seeds", "excludes_zero"])


def seed_differences(results: pd.DataFrame, condition: str, metric: str, *,
                     control: str = "random") -> list[float]:
    """Per seed (sorted), ``condition`` − ``control`` of one metric (NaN where undefined)."""
    check_table(results, "results", columns=["condition", "seed", metric])
    a = results[results["condition"] == condition].set_index("seed")[metric]
    b = results[results["condition"] == control].set_index("seed")[metric]
    if a.empty or b.empty:
        raise ValueError(f"results need the conditions {condition!r} and {control!r}")
    common = sorted(a.index.intersection(b.index))
    return [float(a[s] - b[s]) for s in common]


# --------------------------------------------------------------------------- §6.2 polygons
def _polygon(vertices) -> np.ndarray:
    v = np.asarray(vertices, dtype=float)
    if v.ndim != 2 or v.shape[1] != 2 or len(v) < 3:
        raise ValueError(f"a polygon needs at least 3 (TM, GS) vertices, got shape {v.shape}")
    # a repeated vertex (e.g. a closed ring repeating the first vertex) is a zero-length edge
    v = v[(np.abs(v - np.roll(v, 1, axis=0)) > 1e-12).any(axis=1)]
    if len(v) < 3:
        raise ValueError("a polygon needs at least 3 distinct (TM, GS) vertices")
    e = np.roll(v, -1, axis=0) - v
    e2 = np.roll(e, -1, axis=0)
    cross = e[:, 0] * e2[:, 1] - e[:, 1] * e2[:, 0]
    # turns all one way *and* winding once (a self-intersecting star also turns all one way)
    turning = np.arctan2(cross, (e * e2).sum(axis=1)).sum()
    if (not ((cross >= -1e-12).all() or (cross <= 1e-12).all()) or np.allclose(cross, 0)
            or not np.isclose(abs(turning), 2 * np.pi)):
        raise ValueError("the polygon must be convex and non-degenerate (vertices in order)")
    return v


def in_polygon(points, vertices, *, tol: float = 1e-9) -> np.ndarray:
    """Whether each (TM, GS) point lies inside the convex polygon ``vertices`` (boundary
    included, up to ``tol``). ``points``: array (n, 2); returns bool (n,); NaN points are
    outside."""
    v = _polygon(vertices)
    p = np.atleast_2d(np.asarray(points, dtype=float))
    if p.shape[1] != 2:
        raise ValueError(f"points must have shape (n, 2), got {p.shape}")
    e = np.roll(v, -1, axis=0) - v                                # (k, 2) edges
    rel = p[:, None, :] - v[None, :, :]                           # (n, k, 2)
    cross = e[None, :, 0] * rel[..., 1] - e[None, :, 1] * rel[..., 0]
    inside = (cross >= -tol).all(axis=1) | (cross <= tol).all(axis=1)
    return inside & np.isfinite(p).all(axis=1)


def polygon_distance(points, vertices) -> np.ndarray:
    """Euclidean distance (in map units) from each (TM, GS) point to the convex polygon:
    0 inside or on the boundary, else the distance to the nearest edge; inf for NaN points."""
    v = _polygon(vertices)
    p = np.atleast_2d(np.asarray(points, dtype=float))
    a, b = v, np.roll(v, -1, axis=0)
    ab = b - a
    t = np.clip((((p[:, None, :] - a[None]) * ab[None]).sum(-1)) / (ab ** 2).sum(-1)[None], 0, 1)
    nearest = a[None] + t[..., None] * ab[None]
    d = np.sqrt(((p[:, None, :] - nearest) ** 2).sum(-1)).min(axis=1)
    d = np.where(in_polygon(p, v), 0.0, d)
    return np.where(np.isfinite(p).all(axis=1), d, np.inf)


def permute_positions(predicted: pd.DataFrame, *, seed: int) -> pd.DataFrame:
    """``predicted`` with its (``tm_pred``, ``gs_pred``) rows permuted across pairs (seeded):
    each pair keeps its ``pair_id`` and other columns but gets another pair's predicted
    position, so a corpus selected on it has the same size and map shape as a real selection
    but is unrelated to the pairs' features (the §6.2 claims' null control)."""
    check_table(predicted, "predicted", columns=["pair_id", "tm_pred", "gs_pred"])
    order = np.random.default_rng(seed).permutation(len(predicted))
    return predicted.assign(tm_pred=predicted["tm_pred"].to_numpy()[order],
                            gs_pred=predicted["gs_pred"].to_numpy()[order])


def specialised_corpus(predicted: pd.DataFrame, sources: Sequence[str], *,
                       polygon: str | Sequence[tuple[float, float]], token_budget: int,
                       groups: Sequence[int] | None = None, seed: int = 0
                       ) -> tuple[np.ndarray, dict]:
    """A §6.2 corpus: pairs whose *predicted* (TM, GS) lies in ``polygon``, up to a budget.

    ``predicted``: ``pair_id`` (position in ``sources``), ``tm_pred``, ``gs_pred``;
    ``polygon``: a name in :data:`POLYGONS` or convex vertices; ``token_budget``: source tokens
    (whitespace-split) to collect — pairs are added (whole duplicate groups together) until the
    corpus holds at least that many. Order: the pairs inside the polygon in a seeded random
    order, then, if those run out, the pairs nearest to the polygon. Pairs without a prediction
    are never taken. Returns (sorted pair_ids, info) with info ``inside_token_share`` (share of
    the corpus' source tokens from pairs inside the polygon), ``n_inside`` (pairs inside, whole
    pool), ``n_pairs`` and ``src_tokens`` of the corpus.
    """
    check_table(predicted, "predicted", columns=["pair_id", "tm_pred", "gs_pred"])
    if isinstance(polygon, str):
        if polygon not in POLYGONS:
            raise ValueError(f"unknown polygon {polygon!r}; choose one of {sorted(POLYGONS)} "
                             "or pass its vertices")
        polygon = POLYGONS[polygon]
    n = len(sources)
    ids = predicted["pair_id"].to_numpy(int)
    if len(ids) and (ids.min() < 0 or ids.max() >= n):
        raise ValueError(f"predicted pair_ids must index the {n} sources")
    pts = predicted[["tm_pred", "gs_pred"]].to_numpy(float)
    dist = polygon_distance(pts, polygon)
    ok = np.isfinite(dist)
    ids, dist = ids[ok], dist[ok]
    # seeded random order inside (all at distance 0), then by distance (ties: that order)
    perm = np.random.default_rng(seed).permutation(len(ids))
    ids, dist = ids[perm], dist[perm]
    order = ids[np.argsort(dist, kind="stable")]
    groups = np.arange(n) if groups is None else np.asarray(groups)
    tok = source_token_counts(sources)
    if token_budget > tok[order].sum():
        raise ValueError(f"token_budget {token_budget} exceeds the {int(tok[order].sum())} source "
                         "tokens of the pairs with a prediction")
    chosen = take_within_budget(order, groups, tok, token_budget)
    inside = set(ids[dist == 0].tolist())
    in_tok = int(sum(tok[i] for i in chosen if i in inside))
    total = int(tok[chosen].sum())
    return chosen, dict(inside_token_share=in_tok / total if total else float("nan"),
                        n_inside=len(inside), n_pairs=int(len(chosen)), src_tokens=total)


def predict_map(data: pd.DataFrame, inputs: Sequence[str], *, train_share: float = 0.2,
                seed: int = 0) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The §6.2 predictor: the authors' MLP (100, 100) on ``inputs`` → [TM, GS, CM], fitted on a
    seeded ``train_share`` of the rows (the authors: 20% of EN-NL, ``test_size=0.8``), then
    applied to every row (the candidate pool). Returns (predictions ``pair_id, tm_pred,
    gs_pred, cm_pred`` for every complete row, the held-out metrics of
    :func:`tokenbook.memorisation_cartography.predict.fit_map_predictor`)."""
    if not 0 < train_share < 1:
        raise ValueError(f"train_share must be in (0, 1), got {train_share}")
    p = fit_map_predictor(data, list(inputs), test_size=1 - train_share, seed=seed,
                          importance_for=())
    d = data[["pair_id", *inputs]].dropna()
    P = p.model.predict(d[list(inputs)].to_numpy(float)).reshape(len(d), len(TARGETS))
    out = pd.DataFrame({"pair_id": d["pair_id"].to_numpy(int)})
    for k, t in enumerate(TARGETS):
        out[f"{t}_pred"] = P[:, k]
    return out, p.metrics
