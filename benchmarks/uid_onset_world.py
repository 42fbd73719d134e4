"""Is the UID onset claim detected in its own world on root seeds the book does not use?

The chapter judges ``reductions-at-onsets`` in a world of its own when ``onset_register`` is
set (:func:`tokenbook.uid_grounding.experiments.onset_world`; the book's default, ``book``,
keeps it in the chapter's world). This benchmark runs exactly what the chapter runs for that
world, on six root seeds from ``--start``: its seed table
(:func:`tokenbook.uid_grounding.experiments.onset_world_table`: the pairs, then the seed sweep,
the chapter's parameters from ``params/uid_grounding/tiny.yaml``, so the cache is the
chapter's), and the claim by the
chapter's rule (:func:`tokenbook.uid_grounding.claims.tiny_claims`). It prints the claim and
the onset table and writes the claim to ``--out``.

Measured (``HISTORY.md``, 5 Dec, thirty-sixth session; register "subject first, bare,
protagonist 0.5", 600 stories, 4,000 fine-tuning steps): root seeds 6–11 *detected*, min E
1.142 [1.108, 1.175] on, 0.441 off, the check passing in every root seed
(``benchmarks/results/uid_onset_register_pair/onset_world_claim_root_seeds_6_11.json``).

    python benchmarks/uid_onset_world.py --start 6 [--register "subject first, bare, protagonist 0.5"]
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import yaml  # noqa: E402

from tokenbook.cache import atomic_path  # noqa: E402
from tokenbook.grounded import tiny as gt  # noqa: E402
from tokenbook.seeds import seed_list  # noqa: E402
from tokenbook.uid_grounding import claims as uid_claims  # noqa: E402
from tokenbook.uid_grounding import experiments as ux  # noqa: E402

DEFAULT_REGISTER = "subject first, bare, protagonist 0.5"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--start", type=int, default=6, help="first of six root seeds")
    parser.add_argument("--register", default=DEFAULT_REGISTER,
                        choices=[r for r in gt.REGISTERS if r != "book"])
    parser.add_argument("--out", type=Path, default=None,
                        help="default benchmarks/results/uid_onset_register_pair/"
                             "onset_world_claim_root_seeds_<start>_<start+5>.json")
    args = parser.parse_args()
    p = yaml.safe_load((ROOT / "params" / "uid_grounding" / "tiny.yaml").read_text())
    world = ux.onset_world(gt.TinyParams.from_mapping(p), args.register,
                           n_stories=p["onset_stories"], train_steps=p["onset_train_steps"])
    seeds = seed_list(6, args.start)
    t0 = time.perf_counter()
    table = ux.onset_world_table(seeds, world, boot_seed=p["boot_seed"],
                                 min_words=p["min_words"], n_workers=2, progress=False)
    t1 = time.perf_counter()
    claim = {c.id: c for c in uid_claims.tiny_claims(table, onset_world=world)}[ux.ONSET_CLAIM]
    print(json.dumps(claim.to_dict(), indent=1, ensure_ascii=False, default=str))
    print(ux.onset_context_table(table).round(3).to_string())
    print(f"models and sweep: {t1 - t0:.0f} s")
    out = args.out or (ROOT / "benchmarks" / "results" / "uid_onset_register_pair"
                       / f"onset_world_claim_root_seeds_{seeds[0]}_{seeds[-1]}.json")
    with atomic_path(out) as tmp:
        tmp.write_text(json.dumps({"what": f"{ux.ONSET_CLAIM} in its own world "
                                           f"({args.register!r}, {world.n_stories} stories, "
                                           f"{world.train_steps} fine-tuning steps), root seeds "
                                           f"{seeds[0]}-{seeds[-1]}; benchmarks/uid_onset_world.py",
                                   "claim": claim.to_dict()}, indent=1, ensure_ascii=False,
                                  default=str) + "\n")


if __name__ == "__main__":
    main()
