"""Counterfactual memorisation: TM, GS, CM, their standard errors, and the estimator's stability.

Definitions (Dankers, Titov & Hupkes 2023, after Feldman & Zhang 2020 and Zhang et al. 2023).
For pair i and a metric M(model, pair) (here the per-token geometric-mean probability of the
reference, a number in [0, 1]):

* TM(i) = mean of M over the ensemble's models whose training subset *contains* i
  (training memorisation);
* GS(i) = mean of M over the models whose training subset does *not* contain i
  (generalisation score);
* CM(i) = TM(i) − GS(i) (counterfactual memorisation; not clipped here — the authors clip at 0
  only in some analyses, :func:`counterfactual_memorisation` keeps the sign).

The **score matrix** is the pivot table: one row per (model, pair) with columns
``model, pair_id, score, in_train``.

Per-token geometric-mean probability. For a target y of T tokens *including the end-of-sentence
token* ``</s>``: gmp = exp( (1/T) Σ_t log p(y_t | y_<t, x) ). The authors' numbers come from
fairseq's ``--score-reference``, whose per-sentence score averages the log-probabilities of all
target positions and fairseq's targets end with EOS; we include EOS for the same reason (a
truncated target is then penalised for ending early, as it should be).
"""

from __future__ import annotations

from typing import Sequence

import numpy as np
import pandas as pd
from scipy.stats import spearmanr

from tokenbook.scoring import score_seq2seq
from tokenbook.stats import bootstrap_ci
from tokenbook.validation import check_table

SCORE_COLUMNS = ["model", "pair_id", "score", "in_train"]


# --------------------------------------------------------------------------- subsets
def subset_masks(n_pairs: int, n_models: int, *, design: str = "random", ratio: float = 0.5,
                 groups: Sequence[int] | None = None, seed: int = 0) -> np.ndarray:
    """Training-subset membership, a bool array of shape (n_models, n_pairs).

    ``design="random"``: each model trains on a seeded random ``ratio`` share of the units (the
    authors' ``subsample.py --ratio 0.5``). ``design="balanced"``: every unit is in exactly
    ``n_models/2`` subsets (memseqkd's design; needs an even ``n_models`` and ratio 0.5).
    A *unit* is a pair, or, when ``groups`` is given (e.g. ``group_id`` of exact duplicates),
    a group: all copies of a duplicated pair are in or out together, so a held-out model never
    sees another copy of the pair it is scored on (the authors split lines, which leaks).
    """
    if n_models < 2:
        raise ValueError(f"need at least 2 models, got {n_models}")
    if not 0.0 < ratio < 1.0:
        raise ValueError(f"ratio must be in (0, 1), got {ratio}")
    if groups is None:
        unit_of = np.arange(n_pairs)
    else:
        groups = np.asarray(groups)
        if groups.shape != (n_pairs,):
            raise ValueError(f"groups must have shape ({n_pairs},), got {groups.shape}")
        _, unit_of = np.unique(groups, return_inverse=True)
    n_units = int(unit_of.max()) + 1
    rng = np.random.default_rng(seed)
    if design == "random":
        k = int(round(ratio * n_units))
        unit_mask = np.zeros((n_models, n_units), dtype=bool)
        for m in range(n_models):
            unit_mask[m, rng.choice(n_units, size=k, replace=False)] = True
    elif design == "balanced":
        if n_models % 2 or ratio != 0.5:
            raise ValueError("the balanced design needs an even number of models and ratio 0.5")
        base = np.zeros(n_models, dtype=bool)
        base[: n_models // 2] = True
        unit_mask = np.stack([rng.permutation(base) for _ in range(n_units)], axis=1)
    else:
        raise ValueError(f"design must be 'random' or 'balanced', got {design!r}")
    return unit_mask[:, unit_of]


# --------------------------------------------------------------------------- likelihoods
def geometric_mean_probability(token_table: pd.DataFrame, n_seqs: int | None = None,
                               *, include_eos: bool = True, eos_token_id: int | None = None
                               ) -> pd.DataFrame:
    """Per-sequence ``logprob_mean`` (nats/token), ``gmp`` = exp(logprob_mean), ``n_tokens``.

    ``token_table`` is the scoring engine's token table (``seq_id, token_id, logprob``).
    With ``include_eos=False`` rows whose ``token_id`` equals ``eos_token_id`` are dropped.
    Sequences with no scored token get NaN.
    """
    missing = {"seq_id", "logprob"} - set(token_table.columns)
    if missing:
        raise ValueError(f"token table lacks columns {sorted(missing)}")
    tt = token_table
    if not include_eos:
        if eos_token_id is None:
            raise ValueError("include_eos=False needs eos_token_id")
        tt = tt[tt["token_id"] != eos_token_id]
    g = tt.groupby("seq_id")["logprob"].agg(["mean", "size"])
    n = n_seqs if n_seqs is not None else (int(g.index.max()) + 1 if len(g) else 0)
    out = pd.DataFrame({"seq_id": np.arange(n)})
    out["logprob_mean"] = g["mean"].reindex(out["seq_id"]).to_numpy()
    out["n_tokens"] = g["size"].reindex(out["seq_id"]).fillna(0).astype(int).to_numpy()
    out["gmp"] = np.exp(out["logprob_mean"])
    return out


def score_pairs(model, tokenizer, sources: Sequence[str], targets: Sequence[str], *,
                batch_size: int = 128, progress: bool = False) -> pd.DataFrame:
    """Teacher-forced per-pair scores through the shared scoring engine.

    Returns ``seq_id, logprob_mean`` (nats/token, EOS included), ``gmp`` (per-token
    geometric-mean probability), ``n_tokens``.
    """
    table = score_seq2seq(model, tokenizer, list(sources), list(targets),
                          batch_size=batch_size, progress=progress)
    return geometric_mean_probability(table, len(sources))


# --------------------------------------------------------------------------- estimator
def _validate_scores(scores: pd.DataFrame) -> pd.DataFrame:
    if not isinstance(scores, pd.DataFrame):
        raise TypeError(f"scores: expected the long score matrix as a pandas DataFrame, got "
                        f"{type(scores).__name__}")
    missing = set(SCORE_COLUMNS) - set(scores.columns)
    if missing:
        raise ValueError(f"score matrix lacks columns {sorted(missing)}; expected {SCORE_COLUMNS}")
    if scores.duplicated(["model", "pair_id"]).any():
        raise ValueError("score matrix has repeated (model, pair_id) rows")
    if scores.empty:
        raise ValueError("scores: the score matrix is empty (0 rows)")
    if not pd.api.types.is_bool_dtype(scores["in_train"]):  # "False" as text would read True
        raise TypeError(f"scores: column 'in_train' must be boolean, got dtype "
                        f"{scores['in_train'].dtype} (e.g. {scores['in_train'].iloc[0]!r}); "
                        f"convert it, e.g. scores['in_train'].map({{'True': True, "
                        f"'False': False}})")
    return scores


def pivot_scores(scores: pd.DataFrame, value: str = "score"
                 ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(models, pair_ids, S, mask): S and mask have shape (n_models, n_pairs).

    ``value``: the metric column (``score`` = geometric-mean probability; ``bleu`` for the
    BLEU variant when the ensemble stored it)."""
    _validate_scores(scores)
    if value not in scores.columns:
        raise ValueError(f"score matrix has no column {value!r}")
    S = scores.pivot(index="model", columns="pair_id", values=value)
    mask = scores.pivot(index="model", columns="pair_id", values="in_train")
    if S.isna().any().any():
        raise ValueError("score matrix is incomplete: some model did not score every pair")
    return (S.index.to_numpy(), S.columns.to_numpy(), S.to_numpy(dtype=float),
            mask.to_numpy(dtype=bool))


def tm_gs(S: np.ndarray, mask: np.ndarray):
    """Per pair: TM (mean score of the models trained on it) and GS (of the models that
    were not); NaN where a side has no model. ``S``: [n_models, n_pairs], ``mask`` the same
    shape (True: trained on)."""
    n_in, n_out = mask.sum(0), (~mask).sum(0)
    with np.errstate(invalid="ignore", divide="ignore"):
        tm = np.where(n_in > 0, (S * mask).sum(0) / n_in, np.nan)
        gs = np.where(n_out > 0, (S * ~mask).sum(0) / n_out, np.nan)
    return tm, gs, n_in, n_out


def counterfactual_memorisation(scores: pd.DataFrame, value: str = "score") -> pd.DataFrame:
    """TM, GS, CM per pair with standard errors, from the long score matrix.

    Columns: ``pair_id, tm, gs, cm, tm_se, gs_se, cm_se, n_in, n_out``. Standard errors are
    the standard error of each mean across models (sample SD / sqrt(n)); ``cm_se`` =
    sqrt(tm_se² + gs_se²) (the two means use disjoint models, so they are independent).
    Pairs no model trained on (or every model trained on) get NaN. ``value`` picks the metric
    column (``"bleu"`` gives the authors' hypothesis-based variant, in BLEU points 0–100).
    """
    _, pair_ids, S, mask = pivot_scores(scores, value)
    tm, gs, n_in, n_out = tm_gs(S, mask)

    def se(sel, n, mean):
        with np.errstate(invalid="ignore", divide="ignore"):
            ss = (((S - mean) ** 2) * sel).sum(0)
            return np.where(n > 1, np.sqrt(ss / (n - 1) / n), np.nan)

    tm_se, gs_se = se(mask, n_in, tm), se(~mask, n_out, gs)
    return pd.DataFrame({"pair_id": pair_ids, "tm": tm, "gs": gs, "cm": tm - gs,
                         "tm_se": tm_se, "gs_se": gs_se, "cm_se": np.hypot(tm_se, gs_se),
                         "n_in": n_in, "n_out": n_out})


def split_half_spearman(S: np.ndarray, mask: np.ndarray, k: int,
                        rng: np.random.Generator) -> tuple[float, int]:
    """One split: two disjoint random sets of ``k`` models (``rng.permutation`` of the
    models, first k and next k), CM from each set, and the Spearman ρ of the two CMs over the
    pairs defined in both (NaN with fewer than 3). ``S``, ``mask``: [n_models, n_pairs] as
    from :func:`pivot_scores`. Returns (ρ, number of pairs)."""
    perm = rng.permutation(S.shape[0])
    a, b = perm[:k], perm[k:2 * k]
    ta, ga, _, _ = tm_gs(S[a], mask[a])
    tb, gb, _, _ = tm_gs(S[b], mask[b])
    ca, cb = ta - ga, tb - gb
    ok = np.isfinite(ca) & np.isfinite(cb)
    rho = spearmanr(ca[ok], cb[ok]).statistic if ok.sum() > 2 else np.nan
    return float(rho), int(ok.sum())


def cm_stability(scores: pd.DataFrame, fractions: Sequence[float] = (0.25, 0.5, 0.75), *,
                 repeats: int = 10, seed: int = 0) -> pd.DataFrame:
    """Spearman ρ between CM from a random subset of the models and CM from all of them.

    For each fraction f and repeat r, draw round(f·M) models (seeded), recompute CM from them
    only (pairs left with no in- or out-model are skipped), and correlate with the full-ensemble
    CM. Also reports ρ between CM of two *disjoint* halves (split-half reliability,
    :func:`split_half_spearman` with k = M // 2) in rows with ``fraction == "split-half"``
    (``fractions=()``: those rows only). Columns: ``fraction, n_models, repeat, spearman,
    n_pairs``.
    """
    _, _, S, mask = pivot_scores(scores)
    M = S.shape[0]
    tm, gs, _, _ = tm_gs(S, mask)
    full = tm - gs
    rng = np.random.default_rng(seed)
    rows = []
    for f in fractions:
        k = max(2, int(round(f * M)))
        for r in range(repeats):
            sel = rng.choice(M, size=k, replace=False)
            t, g, _, _ = tm_gs(S[sel], mask[sel])
            cm = t - g
            ok = np.isfinite(cm) & np.isfinite(full)
            rho = spearmanr(cm[ok], full[ok]).statistic if ok.sum() > 2 else np.nan
            rows.append((str(f), k, r, float(rho), int(ok.sum())))
    for r in range(repeats):
        rows.append(("split-half", M // 2, r, *split_half_spearman(S, mask, M // 2, rng)))
    return pd.DataFrame(rows, columns=["fraction", "n_models", "repeat", "spearman", "n_pairs"])


def map_regions(cm_table: pd.DataFrame, *, high: float = 0.6, low: float = 0.3,
                cm_high: float = 0.25) -> pd.Series:
    """Name each pair's region of the TM–GS map (a descriptive reading, thresholds in gmp units).

    ``memorised`` (CM ≥ cm_high: learnt only when trained on), ``generalised`` (TM and GS ≥
    high: top right), ``unlearnt`` (TM < low: bottom left), ``in-between`` (the rest). A pair
    with a missing TM, GS or CM (no model trained on it, or every model did) has no region
    (None), never "in-between".
    """
    check_table(cm_table, "cm_table", columns=["tm", "gs", "cm"], numeric=["tm", "gs", "cm"],
                min_rows=0)
    for name, value in (("high", high), ("low", low), ("cm_high", cm_high)):
        if isinstance(value, bool) or not isinstance(value, (int, float, np.number)) \
                or not np.isfinite(value):
            raise ValueError(f"{name}: expected a finite threshold (gmp units), got {value!r}")
    tm, gs, cm = (cm_table[c].to_numpy(float) for c in ("tm", "gs", "cm"))
    known = np.isfinite(tm) & np.isfinite(gs) & np.isfinite(cm)
    with np.errstate(invalid="ignore"):
        region = np.where(cm >= cm_high, "memorised",
                          np.where((tm >= high) & (gs >= high), "generalised",
                                   np.where(tm < low, "unlearnt", "in-between")))
    return pd.Series(np.where(known, region, None), index=cm_table.index, name="region",
                     dtype=object)


def binary_auroc(positive: np.ndarray, score: np.ndarray) -> float:
    """AUROC of ``score`` [n] separating the rows where ``positive`` [n] (bool or 0/1) is true
    from the rest: the area under the ROC curve by the trapezoidal rule, ties sharing a
    threshold (so a tie counts one half). NaN when either class is empty.

    scikit-learn's ``roc_auc_score(positive, score)`` with its arithmetic — the same integer
    counts of true and false positives at each distinct score, the same collinear points
    dropped, the same divisions and the same trapezoid sum — so equal to it bit for bit
    (``tests/memorisation_cartography/test_memorisation_estimator.py``), without its input
    validation, which took 6 ms of each call and 30 of a root seed's 50 s of statistics in the
    bootstrap of :func:`phenomenon_auroc` (1,000 resamples per interval). Inputs are trusted:
    1-D, one length, finite scores.
    """
    y = np.asarray(positive, dtype=bool)
    s = np.asarray(score, dtype=float)
    n = y.size
    n_pos = int(np.count_nonzero(y))
    if n_pos == 0 or n_pos == n:
        return float("nan")
    order = np.argsort(s, kind="stable")[::-1]          # descending; the order within ties
    s, y = s[order], y[order]                           # does not change the counts below
    last = np.concatenate([np.nonzero(np.diff(s))[0], [n - 1]])  # last row of each score
    tps = np.cumsum(y, dtype=np.float64)[last]
    fps = 1 + last.astype(np.float64) - tps
    if fps.shape[0] > 2:                                # drop points collinear with both
        keep = np.concatenate([[True],                  # neighbours (scikit-learn's
                               np.logical_or(np.diff(fps, 2), np.diff(tps, 2)), [True]])
        fps, tps = fps[keep], tps[keep]                 # drop_intermediate)
    tps = np.concatenate([[0.0], tps])
    fps = np.concatenate([[0.0], fps])
    fpr, tpr = fps / fps[-1], tps / tps[-1]
    return float(np.sum((fpr[1:] - fpr[:-1]) * (tpr[1:] + tpr[:-1]) / 2.0, dtype=np.float64))


def phenomenon_auroc(table: pd.DataFrame, positive: str | Sequence[str], *,
                     negative: str = "regular", value: str = "cm", label: str = "phenomenon",
                     n_boot: int = 1000, seed: int = 0) -> dict:
    """AUROC of ``value`` separating ``positive`` pairs from ``negative`` ones, with a seeded
    percentile-bootstrap 95% CI (pairs resampled; :func:`tokenbook.stats.bootstrap_ci`).

    AUROC = P(value of a random positive > value of a random negative) (:func:`binary_auroc`,
    scikit-learn's ``roc_auc_score`` bit for bit); 0.5 is chance. Returns ``auroc, ci_low,
    ci_high, n_pos, n_neg``.
    """
    pos = [positive] if isinstance(positive, str) else list(positive)
    d = table[table[label].isin(pos + [negative])].dropna(subset=[value])
    y = d[label].isin(pos).to_numpy().astype(float)
    n_pos, n_neg = int(y.sum()), int(len(y) - y.sum())
    if n_pos == 0 or n_neg == 0:
        return dict(auroc=np.nan, ci_low=np.nan, ci_high=np.nan, n_pos=n_pos, n_neg=n_neg)
    x = d[value].to_numpy(float)

    def stat(rows):   # NaN for a resample with one class only (binary_auroc's own check)
        return binary_auroc(rows[:, 0], rows[:, 1])

    lo, hi = bootstrap_ci(np.column_stack([y, x]), stat, n_boot=n_boot, seed=seed)
    return dict(auroc=binary_auroc(y, x), ci_low=lo, ci_high=hi, n_pos=n_pos, n_neg=n_neg)
