"""What a region of the map does to performance: retrain without it (the authors' §6.1).

Selection (``store_subsets.py``): shuffle the pairs (seeded), build a KD-tree over (TM, GS), take
the pairs nearest to a target coordinate and walk through them by distance, removing each pair
*with all its duplicate copies*, until ``token_budget`` source tokens (whitespace-split) are
removed. The control removes random pairs with the same source-token budget. A model is
retrained on the rest for each condition and seed, then evaluated on held-out test pairs:

* ``test_logprob``: mean log-probability per target token (nats/token, EOS included), from
  the scoring engine, teacher-forced on the test references;
* ``bleu``: corpus BLEU (sacrebleu, default 13a tokenisation) of greedy translations, or with
  ``num_beams`` > 1 of beam-search translations (the authors: beam 5), the greedy BLEU then kept
  as ``bleu_greedy``;
* ``hallucination_rate``: the hallucination probe on perturbed sources (Lee et al. 2018 style;
  the authors' perturbation and detection code is not released, so this reading is ours): each
  test source gets one extra source word inserted at its front; among the sentences whose clean
  translation is adequate (sentence BLEU vs the reference ≥ ``adequate``), the share whose
  perturbed translation has sentence BLEU vs the clean translation < ``threshold``.

The authors evaluate on FLORES dev (also their checkpoint-selection set); we evaluate on a test
set disjoint from training and from model selection (there is none: fixed epochs).
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Sequence

import numpy as np
import pandas as pd
from scipy.spatial import cKDTree

from tokenbook.cache import write_json_atomic
from tokenbook.memorisation_cartography.ensemble import Job, Workspace, task_setup
from tokenbook.memorisation_cartography.estimator import score_pairs
from tokenbook.models.marian import build_marian, train_marian, translate


def source_token_counts(sources: Sequence[str]) -> np.ndarray:
    """Whitespace-token count of each source sentence (the unit of a token budget)."""
    return np.array([len(s.split()) for s in sources])


def region_centres(cm_table: pd.DataFrame, *, share: float = 0.05, min_pairs: int = 5
                   ) -> dict[str, tuple[float, float]]:
    """(TM, GS) centres of the map's regions, as in Dankers et al. §6.1.

    ``memorised``: mean of the top ``share`` of pairs by CM; ``generalised``: top ``share`` by GS;
    ``unlearnt``: bottom ``share`` by TM (at least ``min_pairs`` pairs each). ``cm_table`` has
    columns ``tm, gs, cm``; rows with NaN are ignored.
    """
    missing = {"tm", "gs", "cm"} - set(cm_table.columns)
    if missing:
        raise ValueError(f"cm_table lacks column(s) {sorted(missing)}; pass the table of "
                         "memorisation scores (pair_id, tm, gs, cm)")
    if not 0 < share <= 1:
        raise ValueError(f"share must be in (0, 1], got {share}")
    t = cm_table.dropna(subset=["tm", "gs", "cm"])
    if t.empty:
        raise ValueError("cm_table has no pair with finite tm, gs and cm")
    k = max(min_pairs, int(share * len(t)))
    picks = {"memorised": t.nlargest(k, "cm"), "generalised": t.nlargest(k, "gs"),
             "unlearnt": t.nsmallest(k, "tm")}
    return {name: (float(g["tm"].mean()), float(g["gs"].mean())) for name, g in picks.items()}


def select_region(cm_table: pd.DataFrame, sources: Sequence[str], *, coordinate: tuple[float, float],
                  token_budget: int, groups: Sequence[int] | None = None, seed: int = 1,
                  ) -> np.ndarray:
    """pair_ids removed for the region around ``coordinate`` = (TM, GS), up to ``token_budget``.

    ``cm_table`` has ``pair_id, tm, gs`` with pair_id = position in ``sources``; pairs with
    NaN TM/GS are never selected. Whole duplicate groups are removed together.
    """
    n = len(sources)
    groups = np.arange(n) if groups is None else np.asarray(groups)
    tok = source_token_counts(sources)
    ok = cm_table[["tm", "gs"]].notna().all(axis=1).to_numpy()
    ids = cm_table["pair_id"].to_numpy()[ok]
    rng = np.random.default_rng(seed)
    perm = rng.permutation(len(ids))
    ids = ids[perm]
    pts = cm_table[["tm", "gs"]].to_numpy(float)[ok][perm]
    _, order = cKDTree(pts).query(np.asarray(coordinate, float), k=len(ids))
    return take_within_budget(ids[np.atleast_1d(order)], groups, tok, token_budget)


def select_random(n_pairs: int, sources: Sequence[str], *, token_budget: int,
                  groups: Sequence[int] | None = None, seed: int = 1) -> np.ndarray:
    """Random pairs (whole duplicate groups) with the same source-token budget."""
    groups = np.arange(n_pairs) if groups is None else np.asarray(groups)
    order = np.random.default_rng(seed).permutation(n_pairs)
    return take_within_budget(order, groups, source_token_counts(sources), token_budget)


def take_within_budget(order: np.ndarray, groups: np.ndarray, tok: np.ndarray,
                       budget: int) -> np.ndarray:
    """Walk ``order`` taking whole groups of pairs until their source tokens (``tok``) reach
    ``budget``; returns the sorted indices of the pairs taken."""
    if budget <= 0:
        raise ValueError(f"token_budget must be positive, got {budget}")
    if budget >= tok.sum():
        raise ValueError(f"token_budget {budget} is not below the corpus' {tok.sum()} source tokens")
    members: dict[int, list[int]] = {}
    for i, g in enumerate(groups):
        members.setdefault(int(g), []).append(i)
    removed, seen, total = [], set(), 0
    for i in order:
        g = int(groups[i])
        if g in seen:
            continue
        seen.add(g)
        removed += members[g]
        total += int(tok[members[g]].sum())
        if total >= budget:
            break
    return np.array(sorted(removed), dtype=int)


def perturb_sources(sources: Sequence[str], *, seed: int = 0, vocabulary: Sequence[str] | None = None
                    ) -> list[str]:
    """Insert one word (drawn from ``vocabulary``, default the sources' own words) at the front."""
    vocab = sorted(set(vocabulary or [w for s in sources for w in s.split()]))
    rng = np.random.default_rng(seed)
    return [f"{vocab[rng.integers(len(vocab))]} {s}" for s in sources]


def hallucination_rate(references: Sequence[str], clean: Sequence[str], perturbed: Sequence[str], *,
                       adequate: float = 30.0, threshold: float = 10.0) -> tuple[float, int]:
    """(share of hallucinations, number of adequate sentences it is computed over)."""
    from sacrebleu.metrics import BLEU

    bleu = BLEU(effective_order=True)
    flags = []
    for ref, c, p in zip(references, clean, perturbed):
        if bleu.sentence_score(c, [ref]).score >= adequate:
            flags.append(bleu.sentence_score(p, [c]).score < threshold)
    return (float(np.mean(flags)) if flags else float("nan")), len(flags)


def train_and_evaluate(*, root: str, out_path: str, removed_ids: Sequence[int], condition: str,
                       seed: int, test_sources: Sequence[str], test_targets: Sequence[str],
                       perturbed_sources: Sequence[str], preset: str = "tiny",
                       model_overrides: dict | None = None, train_kwargs: dict | None = None,
                       threads: int = 1, regular_test: Sequence[bool] | None = None,
                       num_beams: int = 1, details: bool = False) -> str:
    """Dask task: retrain without ``removed_ids``, evaluate, write a JSON record atomically.

    With ``regular_test`` (one bool per test pair) the record also holds
    ``test_logprob_regular`` and ``bleu_regular``: the same metrics on those test pairs only.
    ``num_beams`` > 1: ``bleu`` (and ``bleu_regular``) from beam search, ``bleu_greedy`` from
    greedy decoding; the hallucination probe always decodes greedily (as the authors do).
    ``details``: the record also holds ``num_beams``, ``train_src_tokens`` and
    ``train_seconds`` (the wall time of training alone), the region experiments' bookkeeping.
    """
    import sacrebleu

    task_setup(threads)
    ws = Workspace(root)
    corpus, tok = ws.corpus(), ws.tokenizer()
    keep = ~corpus["pair_id"].isin(set(int(i) for i in removed_ids)).to_numpy()
    sub = corpus[keep]
    model = build_marian(tok, preset, seed=seed, **(model_overrides or {}))
    t0 = time.perf_counter()
    train_marian(model, tok, sub["source"].tolist(), sub["target"].tolist(), seed=seed,
                 progress=False, **(train_kwargs or {}))
    train_seconds = time.perf_counter() - t0
    sc = score_pairs(model, tok, list(test_sources), list(test_targets))
    logprob = float((sc["logprob_mean"] * sc["n_tokens"]).sum() / sc["n_tokens"].sum())
    greedy = translate(model, tok, list(test_sources))
    # beams in batches of 64, the size the removal experiments were decoded with before
    # models.marian.translate replaced beam_translate: kept so their BLEU stays byte for byte
    clean = greedy if num_beams == 1 else translate(model, tok, list(test_sources),
                                                    num_beams=num_beams, batch_size=64)
    pert = translate(model, tok, list(perturbed_sources))
    hal, n_adequate = hallucination_rate(test_targets, greedy, pert)
    removed_tokens = int(source_token_counts(corpus["source"][~keep]).sum())
    train_src_tokens = int(source_token_counts(sub["source"]).sum())
    rec = dict(condition=condition, seed=seed, n_removed=int((~keep).sum()),
               removed_src_tokens=removed_tokens, n_train=int(keep.sum()),
               test_logprob=logprob, test_gmp=float(sc["gmp"].mean()),
               bleu=float(sacrebleu.corpus_bleu(clean, [list(test_targets)]).score),
               hallucination_rate=hal, n_adequate=n_adequate)
    if details:
        rec.update(num_beams=int(num_beams), train_src_tokens=train_src_tokens,
                   train_seconds=train_seconds)
    if num_beams > 1:
        rec["bleu_greedy"] = float(sacrebleu.corpus_bleu(greedy, [list(test_targets)]).score)
    if regular_test is not None:
        keep_t = np.asarray(regular_test, dtype=bool)
        if keep_t.shape != (len(test_targets),):
            raise ValueError(f"regular_test must have one flag per test pair "
                             f"({len(test_targets)}), got shape {keep_t.shape}")
        scr = sc[keep_t]
        rec["test_logprob_regular"] = float((scr["logprob_mean"] * scr["n_tokens"]).sum()
                                            / scr["n_tokens"].sum())
        rec["bleu_regular"] = float(sacrebleu.corpus_bleu(
            [c for c, k in zip(clean, keep_t) if k],
            [[t for t, k in zip(test_targets, keep_t) if k]]).score)
    write_json_atomic(rec, out_path)
    return str(out_path)


def removal_jobs(ws, conditions: dict[str, np.ndarray], seeds: Sequence[int], *,
                 test_sources: Sequence[str], test_targets: Sequence[str],
                 perturbed_sources: Sequence[str], tag: str, preset: str = "tiny",
                 model_overrides: dict | None = None, train_kwargs: dict | None = None,
                 regular_test: Sequence[bool] | None = None, num_beams: int = 1,
                 details: bool = False) -> list:
    """One job per (condition, seed); outputs under ``<workspace>/removal/<tag>/``."""
    out = ws.root / "removal" / tag
    out.mkdir(parents=True, exist_ok=True)
    return [Job(f"removal-{name}-{s}", train_and_evaluate,
                dict(root=str(ws.root), out_path=str(out / f"{name}_seed{s}.json"),
                     removed_ids=[int(i) for i in ids], condition=name, seed=int(s),
                     test_sources=list(test_sources), test_targets=list(test_targets),
                     perturbed_sources=list(perturbed_sources), preset=preset,
                     model_overrides=model_overrides, train_kwargs=train_kwargs,
                     regular_test=None if regular_test is None else list(regular_test),
                     num_beams=int(num_beams), details=bool(details)),
                out / f"{name}_seed{s}.json")
            for name, ids in conditions.items() for s in seeds]


def load_removal_results(paths) -> pd.DataFrame:
    return pd.DataFrame([json.loads(Path(p).read_text()) for p in paths])


def compare_to_control(results: pd.DataFrame, control: str = "random",
                       metrics=("test_logprob", "bleu", "hallucination_rate")) -> pd.DataFrame:
    """Per condition and metric: mean, and the seed-paired difference to ``control`` (mean, SD,
    number of seeds, and ``diff_upper`` = mean + 2 standard errors, NaN with fewer than 2
    seeds). Positive differences mean the metric is higher than after random removal; a
    ``diff_upper`` below zero means it is lower beyond seed noise."""
    rows = []
    ctrl = results[results["condition"] == control].set_index("seed")
    for cond, d in results.groupby("condition"):
        d = d.set_index("seed")
        for m in metrics:
            common = d.index.intersection(ctrl.index)
            diff = (d.loc[common, m] - ctrl.loc[common, m]).dropna()
            rows.append((cond, m, float(d[m].mean()), float(diff.mean()) if len(diff) else np.nan,
                         float(diff.std(ddof=1)) if len(diff) > 1 else np.nan, len(diff)))
    out = pd.DataFrame(rows, columns=["condition", "metric", "mean", "diff_vs_control",
                                      "diff_sd", "n_seeds"])
    out["diff_upper"] = out["diff_vs_control"] + 2 * out["diff_sd"] / np.sqrt(out["n_seeds"])
    return out
