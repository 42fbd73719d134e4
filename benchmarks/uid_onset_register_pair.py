"""Does a pair trained in another story register read its contexts where the generator does?

The UID chapter's onset claim (``reductions-at-onsets``) is *not testable* in the book's
register for two reasons (``HISTORY.md``, twenty-eighth and thirty-fourth sessions): its known
answer (the generator's min E over δ_P, δ_D and δ_DP) is 0.31–0.35, nothing front-loaded, and its
manipulation check fails, because the trained pair's picture-given-the-pages reduction is about
zero. ``benchmarks/uid_onset_orders.py`` found a register whose known answer front-loads all
three (``subject first, bare, protagonist 0.5``: 1.100 [1.030, 1.171]). This benchmark trains
the chapter's pair in a register (the chapter's step counts, ``params/uid_grounding/tiny.yaml``)
and reports, per root seed, what the chapter's onset table reports:

* the three contexts' mean reductions on nouns, adjectives and counts (nats;
  :func:`tokenbook.uid_grounding.experiments.onset_contexts`), by the generator and by the
  pair, and the manipulation check (their smallest, the pair's; the chapter's check asks it
  to be above zero by its margin);
* the onset enrichments E of δ_P, δ_D, δ_DP and their minimum (the claim's statistic), by the
  generator (the known answer) and by the pair with the mechanism on and under the shuffle null
  (off: another scene's picture, another story's pages).

``--set NAME=VALUE`` changes one of the chapter's other tiny parameters (repeatable; the
result file's name records it). Measured (``HISTORY.md``, 5 Dec, thirty-fifth session): with the
chapter's 200 stories and 2,000 fine-tuning steps the check passes in 2 of 6 root seeds; with
``--set n_stories=600 --set train_steps=4000`` in 6 of 6 (the picture given the pages
0.12–0.28 nats), ``n_stories=600`` alone or with ``story_share=0.5`` did not lift root seed 5.

The register is the chapter's ``register`` parameter (``grounded.tiny.REGISTERS``: the
languages' word order and the world's story process, recorded in the world's fingerprint, so
the models and word tables share the book's cache under keys of their own; until 5 Dec this
benchmark patched the story module's constants and kept a cache per register, with the same
worlds). One root seed per process (one torch thread); run two at once on two cores.

    python benchmarks/uid_onset_register_pair.py --seed 0 \\
        [--register "subject first, bare, protagonist 0.5"] [--set n_stories=600 ...] \\
        [--out benchmarks/results/uid_onset_register_pair/<register>_<seed>.json]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from dataclasses import replace
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import torch  # noqa: E402
import yaml  # noqa: E402

from tokenbook.grounded import tiny as gt  # noqa: E402
from tokenbook.uid_grounding.experiments import (min_onset_enrichment,  # noqa: E402
                                                 onset_contexts)

sys.path.insert(0, str(Path(__file__).resolve().parent))
from uid_onset_orders import chapter_params  # noqa: E402

DEFAULT_REGISTER = "subject first, bare, protagonist 0.5"


def slug(register: str) -> str:
    return "".join(c if c.isalnum() else "_" for c in register).strip("_")


def _rounded(d: dict) -> dict:
    return {k: round(float(v), 4) for k, v in d.items()}


def parse_overrides(items: list[str]) -> dict:
    """``["n_stories=600", "story_share=0.5"]`` -> ``{"n_stories": 600, "story_share": 0.5}``
    (fields of :class:`tokenbook.grounded.tiny.TinyParams`, values read as YAML)."""
    fields = gt.TinyParams.__dataclass_fields__
    out = {}
    for item in items:
        name, sep, value = item.partition("=")
        if not sep or name not in fields or name == "register":
            raise SystemExit(f"--set {item!r}: give NAME=VALUE with NAME a field of TinyParams "
                             f"other than register (one of {sorted(set(fields) - {'register'})})")
        out[name] = yaml.safe_load(value)
    return out


def register_pair_row(seed: int, register: str, overrides: dict | None = None) -> dict:
    """Root ``seed``'s pair trained in ``register`` (and the chapter's parameters changed by
    ``overrides``): its contexts and onset enrichments beside the generator's."""
    overrides = dict(overrides or {})
    params = replace(chapter_params(), register=register, **overrides)
    start = time.perf_counter()
    gt.train_tiny_models([seed], params, n_workers=1, progress=False)
    trained_s = time.perf_counter() - start
    exact = gt.reference_story_words(seed, params, "on")
    exact = exact.assign(s_D_other=exact["s_U"])   # another story's pages tell it nothing
    on = gt.story_words(seed, params, "on")
    off = gt.story_words(seed, params, "off")
    row = {"root_seed": seed, "register": register, **({"overrides": overrides} if overrides else {}),
           "train_s": round(trained_s, 1)}
    for name, table in (("generator", exact), ("pipeline", on), ("pipeline, off", off)):
        smallest, by_reduction = min_onset_enrichment(table)
        row[name] = {"min_E": round(smallest, 4),
                     **{f"E_{k}": round(v, 4) for k, v in by_reduction.items()},
                     "contexts": _rounded(onset_contexts(table))}
    row["manipulation"] = min(row["pipeline"]["contexts"].values())
    row["total_s"] = round(time.perf_counter() - start, 1)
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--register", default=DEFAULT_REGISTER,
                        choices=[r for r in gt.REGISTERS if r != "book"])
    parser.add_argument("--set", action="append", default=[], metavar="NAME=VALUE",
                        help="change one of the chapter's tiny parameters (repeatable), e.g. "
                             "--set n_stories=600")
    parser.add_argument("--out", type=Path, default=None,
                        help="default benchmarks/results/uid_onset_register_pair/"
                             "<register>_<seed>.json")
    args = parser.parse_args()
    torch.set_num_threads(1)
    overrides = parse_overrides(args.set)
    tag = "".join(f"_{slug(item)}" for item in args.set)
    out = args.out or (ROOT / "benchmarks" / "results" / "uid_onset_register_pair"
                       / f"{slug(args.register)}{tag}_{args.seed}.json")
    row = register_pair_row(args.seed, args.register, overrides)
    print(json.dumps(row, ensure_ascii=False, indent=1), flush=True)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_suffix(".tmp")
    tmp.write_text(json.dumps({"params": "params/uid_grounding/tiny.yaml", "row": row},
                              indent=1, ensure_ascii=False) + "\n")
    tmp.replace(out)


if __name__ == "__main__":
    main()
