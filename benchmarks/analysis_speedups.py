"""Three analysis steps of the book, each against the way it was computed before, same numbers.

* **The peer-masking probe on two processes** (cancellation chapter): one root seed's starting
  policy and analysis batch at the chapter's tiny sizes (SFT from the cache, or trained), then
  ``peer_masking_probe`` with the chapter's 136 targets × 10 random + 1 top-scored sets, with
  ``processes=1`` and ``processes=2`` alternating ``--repeats`` times (the second process is
  started once before timing, with a two-target probe, as the chapter's first seed starts it;
  that start is timed separately). Prints the median seconds of each and their ratio two / one, and checks that
  the tables are equal bit for bit.
* **The rank-agreement permutation test** (typology chapter): ``rank_agreement_test`` (a
  batched Kendall τ_b, ``measures.kendall_tau_b``) against the same test computed with
  ``scipy.stats.kendalltau`` per pair and permutation (the baseline, written out here), on
  random rank vectors of 13 classes × 4 languages with ties, 1,000 permutations; the p-values
  and mean τ must be equal.
* **The phenomenon AUROC's bootstrap** (memorisation chapter): ``estimator.phenomenon_auroc``
  (1,000 resamples, each AUROC by ``estimator.binary_auroc``) against the same function with
  each AUROC by scikit-learn's ``roc_auc_score`` (the baseline), on a table of 40 idioms and
  260 regular pairs whose CM values hold ties, as the chapter's tiny world has them; the
  AUROC and both interval ends must be equal.

The load average is recorded: run it on an idle machine. Written to
``benchmarks/results/analysis_speedups.json``.

    python benchmarks/analysis_speedups.py [--seed 0 --repeats 2] [--parts auroc ...]
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import platform
import statistics
import time
from pathlib import Path


def _probe_inputs(seed: int):
    """The chapter's policy and analysis batch of root ``seed`` (tiny scale, its defaults)."""
    from tokenbook.cancellation_hypothesis import experiments as cx
    from tokenbook.cancellation_hypothesis.grpo import GRPOConfig
    from tokenbook.seeds import derive_seed

    s = cx.setup(scale="tiny", seed=cx.policy_seed_for(seed), n_train=2000, n_eval=64,
                 hidden_size=64, num_layers=2, sft_steps=200, sft_lr=3e-3, formats="variants",
                 progress=False)
    cfg = GRPOConfig(group_size=8, prompts_per_step=8, max_new_tokens=32, temperature=1.0)
    return cx.analysis_rollouts(s, cfg, n_prompts=8, seed=derive_seed(seed, "rollouts"))


def probe_processes(seed: int, repeats: int) -> dict:
    import pandas as pd

    from tokenbook.cancellation_hypothesis import dynamics as dyn
    from tokenbook.seeds import derive_seed

    policy, roll = _probe_inputs(seed)
    kw = dict(lr=0.05, n_targets=136, n_sets=10, set_size=3, seed=derive_seed(seed, "probe"),
              progress=False)
    t0 = time.perf_counter()                # start the second process and its imports, as
    dyn.peer_masking_probe(policy, roll, processes=2, **{**kw, "n_targets": 2})   # seed 1
    start_s = time.perf_counter() - t0
    seconds, tables = {1: [], 2: []}, {}
    for _ in range(repeats):              # alternating, so drifts of the machine hit both
        for processes in (1, 2):
            t0 = time.perf_counter()
            tables[processes] = dyn.peer_masking_probe(policy, roll, processes=processes, **kw)
            seconds[processes].append(time.perf_counter() - t0)
    try:
        pd.testing.assert_frame_equal(tables[1], tables[2])
        equal = True
    except AssertionError:
        equal = False
    median = {k: statistics.median(v) for k, v in seconds.items()}
    ratio = median[2] / median[1]
    print(f"peer-masking probe, root seed {seed} ({len(tables[1])} rows): median "
          f"{median[1]:.1f} s in one process, {median[2]:.1f} s in two ({repeats} runs each, "
          f"alternating): ratio {ratio:.3f}; second process started (a two-target probe) in "
          f"{start_s:.1f} s; "
          f"tables equal bit for bit: {equal}", flush=True)
    return dict(rows=len(tables[1]), seconds={str(k): [round(x, 2) for x in v]
                                              for k, v in seconds.items()},
                ratio_two_over_one=round(ratio, 3), second_process_start_s=round(start_s, 2),
                equal=equal)


def _scipy_rank_agreement(vals, n_perm: int, seed: int) -> tuple[float, float]:
    """The baseline: mean pairwise τ_b by ``scipy.stats.kendalltau``, one call per pair and
    permutation, and its one-sided permutation p (the same draws as the library's test)."""
    import numpy as np
    from scipy import stats

    pairs = list(itertools.combinations(range(vals.shape[1]), 2))

    def mean_tau(v):
        return float(np.mean([stats.kendalltau(v[:, a], v[:, b]).statistic for a, b in pairs]))

    obs = mean_tau(vals)
    rng = np.random.default_rng(seed)
    null = np.array([mean_tau(np.column_stack([rng.permutation(vals[:, j])
                                               for j in range(vals.shape[1])]))
                     for _ in range(n_perm)])
    return obs, float((1 + np.sum(null >= obs - 1e-12)) / (n_perm + 1))


def rank_agreement(repeats: int) -> dict:
    import numpy as np
    import pandas as pd

    from tokenbook.groundedness_typology import measures as gr

    rng = np.random.default_rng(0)
    base = rng.permutation(13).astype(float)
    ranks = pd.DataFrame({lang: np.round(base + rng.normal(0, 3, 13)) for lang in "abcd"})
    seconds, results = {"scipy": [], "batched": []}, {}
    for _ in range(repeats):
        t0 = time.perf_counter()
        results["scipy"] = _scipy_rank_agreement(ranks.to_numpy(float), 1000, 7)
        seconds["scipy"].append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        test = gr.rank_agreement_test(ranks, n_perm=1000, seed=7)
        results["batched"] = (test["mean_tau"], test["p_perm"])
        seconds["batched"].append(time.perf_counter() - t0)
    median = {k: statistics.median(v) for k, v in seconds.items()}
    ratio = median["batched"] / median["scipy"]
    equal = results["scipy"] == results["batched"]
    print(f"rank-agreement test (13 classes x 4 languages, 1000 permutations): median "
          f"{median['scipy']:.2f} s with scipy.stats.kendalltau, {median['batched']:.3f} s "
          f"batched: ratio {ratio:.4f}; mean tau and p equal: {equal}", flush=True)
    return dict(seconds={k: [round(x, 4) for x in v] for k, v in seconds.items()},
                ratio_batched_over_scipy=round(ratio, 4), equal=equal,
                mean_tau=results["batched"][0], p_perm=results["batched"][1])


def phenomenon_auroc(repeats: int) -> dict:
    import numpy as np
    import pandas as pd
    from sklearn.metrics import roc_auc_score

    from tokenbook.memorisation_cartography import estimator

    rng = np.random.default_rng(0)
    labels = np.array(["idiom"] * 40 + ["regular"] * 260)
    cm = np.round(rng.normal(0.05, 0.1, 300) + 0.1 * (labels == "idiom"), 2)   # with ties
    table = pd.DataFrame({"phenomenon": labels, "cm": cm})
    lean = estimator.binary_auroc

    def scikit_learn(y, s):
        return float(roc_auc_score(np.asarray(y, dtype=float), s))

    seconds, results = {"scikit-learn": [], "lean": []}, {}
    try:
        for _ in range(repeats):
            for name, fn in (("scikit-learn", scikit_learn), ("lean", lean)):
                estimator.binary_auroc = fn
                t0 = time.perf_counter()
                results[name] = estimator.phenomenon_auroc(table, "idiom", n_boot=1000, seed=3)
                seconds[name].append(time.perf_counter() - t0)
    finally:
        estimator.binary_auroc = lean
    median = {k: statistics.median(v) for k, v in seconds.items()}
    ratio = median["lean"] / median["scikit-learn"]
    equal = results["lean"] == results["scikit-learn"]
    print(f"phenomenon AUROC with a 1000-resample bootstrap (300 pairs): median "
          f"{median['scikit-learn']:.2f} s with scikit-learn's roc_auc_score, "
          f"{median['lean']:.3f} s with binary_auroc: ratio {ratio:.4f}; AUROC and interval "
          f"equal: {equal}", flush=True)
    return dict(seconds={k: [round(x, 4) for x in v] for k, v in seconds.items()},
                ratio_lean_over_scikit_learn=round(ratio, 4), equal=equal, **results["lean"])


PARTS = ("rank_agreement", "auroc", "probe")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--parts", nargs="+", choices=PARTS, default=list(PARTS),
                    help="which comparisons to run (default: all; the others keep the values "
                         "the result file holds)")
    ap.add_argument("--out", default=str(Path(__file__).parent / "results"
                                         / "analysis_speedups.json"))
    args = ap.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    import torch

    from tokenbook.cache import write_json_atomic

    out = Path(args.out)
    kept = json.loads(out.read_text()) if out.exists() else {}
    result = dict(cpu=platform.processor() or platform.machine(), cpu_count=os.cpu_count(),
                  platform=platform.platform(), torch=torch.__version__,
                  torch_threads=torch.get_num_threads(), repeats=args.repeats,
                  load_average_before=[round(x, 2) for x in os.getloadavg()])
    for part, key, run in (("rank_agreement", "rank_agreement", rank_agreement),
                           ("auroc", "phenomenon_auroc", phenomenon_auroc),
                           ("probe", "peer_masking_probe",
                            lambda repeats: probe_processes(args.seed, repeats))):
        if part in args.parts:
            result[key] = run(args.repeats)
        elif key in kept:
            result[key] = kept[key]
    result["load_average_after"] = [round(x, 2) for x in os.getloadavg()]
    print(f"load average {result['load_average_before']} before, "
          f"{result['load_average_after']} after")
    write_json_atomic(result, args.out)
    print(f"written to {args.out}")


if __name__ == "__main__":
    main()
