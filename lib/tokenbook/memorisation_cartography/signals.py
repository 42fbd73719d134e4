"""Training signals from one full-data run (the authors' §5 ``process_proxies``).

One model is trained on the *whole* corpus; after every ``score_every``-th epoch it scores every
pair teacher-forced (per-token geometric-mean probability p_e, as for TM/GS). The *dynamics
table* has one row per (epoch, pair): ``epoch, pair_id, score``. From it, per pair:

* ``confidence``       = mean_e p_e (dataset cartography, Swayamdipta et al. 2020);
* ``variability``      = std_e p_e (population SD over epochs);
* ``final_minus_mean`` = p_E − mean_e p_e (the authors' "LL 50 − conf");
* ``forgetting``       = Σ_e max(0, p_{e−1} − p_e) (the authors' continuous sum of decreases);
* ``forgetting_events``= #{e : p_{e−1} − p_e > ``event_drop``} (a count in the spirit of Toneva
  et al. 2019, whose events are accuracy flips; a likelihood drop stands in for the flip);
* ``ll_final``         = p_E (the authors' "LL 50");
* ``ll_mid``           = p at the scored epoch nearest E/2 (likelihood at mid-training);
* ``hyp_ll_final``     = geometric-mean probability of the final model's own *greedy* hypothesis
  (the authors' "hyp. LL 50" used beam 5; greedy here — optional, ``hypotheses=True``).

These are computed from the epochs that were scored; with ``score_every > 1`` the sums run over
the scored epochs only.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from tokenbook.cache import write_parquet_atomic
from tokenbook.memorisation_cartography.ensemble import Workspace, task_setup
from tokenbook.memorisation_cartography.estimator import score_pairs
from tokenbook.models.marian import build_marian, train_marian, translate

SIGNALS = ["confidence", "variability", "final_minus_mean", "forgetting", "forgetting_events",
           "ll_final", "ll_mid", "hyp_ll_final"]


def train_with_dynamics(*, root: str, out_path: str, preset: str = "tiny",
                        model_overrides: dict | None = None, train_kwargs: dict | None = None,
                        seed: int = 0, score_every: int = 1, hypotheses: bool = True,
                        threads: int = 1, score_batch_size: int = 256) -> str:
    """Dask task: train on the whole workspace corpus, score every pair after scored epochs.

    Writes the dynamics table (``epoch, pair_id, score``; epoch −1 holds ``hyp_ll_final``
    scores when ``hypotheses``) atomically to ``out_path`` and returns it.
    """
    task_setup(threads)
    ws = Workspace(root)
    corpus, tok = ws.corpus(), ws.tokenizer()
    src, tgt = corpus["source"].tolist(), corpus["target"].tolist()
    ids = corpus["pair_id"].to_numpy()
    epochs = int((train_kwargs or {}).get("epochs", 30))
    frames = []

    def on_epoch_end(epoch, model):
        if epoch % score_every == 0 or epoch == epochs:
            sc = score_pairs(model, tok, src, tgt, batch_size=score_batch_size)
            frames.append(pd.DataFrame({"epoch": epoch, "pair_id": ids,
                                        "score": sc["gmp"].to_numpy()}))

    model = build_marian(tok, preset, seed=seed, **(model_overrides or {}))
    train_marian(model, tok, src, tgt, seed=seed, progress=False, on_epoch_end=on_epoch_end,
                 **(train_kwargs or {}))
    if hypotheses:
        hyp = translate(model, tok, src)
        hyp = [h if h.strip() else tok.unk_token for h in hyp]
        sc = score_pairs(model, tok, src, hyp, batch_size=score_batch_size)
        frames.append(pd.DataFrame({"epoch": -1, "pair_id": ids, "score": sc["gmp"].to_numpy()}))
    return str(write_parquet_atomic(pd.concat(frames, ignore_index=True), out_path))


def compute_signals(dynamics: pd.DataFrame, *, event_drop: float = 0.05) -> pd.DataFrame:
    """Per-pair training signals (see the module docstring) from the dynamics table."""
    missing = {"epoch", "pair_id", "score"} - set(dynamics.columns)
    if missing:
        raise ValueError(f"dynamics table lacks columns {sorted(missing)}")
    tr = dynamics[dynamics["epoch"] >= 0]
    P = tr.pivot(index="pair_id", columns="epoch", values="score").sort_index(axis=1)
    if P.shape[1] < 2:
        raise ValueError("need scores from at least 2 epochs to compute training signals")
    X = P.to_numpy(dtype=float)
    epochs = P.columns.to_numpy()
    drops = X[:, :-1] - X[:, 1:]
    mid = int(np.argmin(np.abs(epochs - epochs.max() / 2)))
    out = pd.DataFrame({
        "pair_id": P.index.to_numpy(),
        "confidence": X.mean(1),
        "variability": X.std(1),
        "final_minus_mean": X[:, -1] - X.mean(1),
        "forgetting": np.clip(drops, 0, None).sum(1),
        "forgetting_events": (drops > event_drop).sum(1),
        "ll_final": X[:, -1],
        "ll_mid": X[:, mid],
    })
    hyp = dynamics[dynamics["epoch"] == -1].set_index("pair_id")["score"]
    out["hyp_ll_final"] = hyp.reindex(out["pair_id"]).to_numpy() if len(hyp) else np.nan
    return out
