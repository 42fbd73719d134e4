"""The UID chapter's peak learning rate: does every language's pair learn what the world plants?

Per root seed and learning rate (``TinyParams.lr``; the chapter's other parameters as in
``params/uid_grounding/tiny.yaml``), per language of the held-out caption and story splits
(nats):

* ``image_gain_noun`` / ``image_gain_adj``: the image's mean surprisal reduction s_U − s_P on
  nouns / adjectives (the captioner's grounding; the generator's exact answer is about
  1.3–1.5 nats);
* ``uid_v_delta_pct``: Δ% of UID_v with the image (the share claims count the languages where
  it is below 0);
* ``pages_gain_noun`` / ``pages_gain_adj``: s_D_other − s_D, what the story's own pages tell
  the text LM beyond another story's, on nouns / adjectives (the generator's answer: about
  1.2 and 0.5).

A language whose ``image_gain_adj`` or ``pages_gain_noun`` is about 0 is one where the trained
pair did not learn the mechanism at all: one such language in one root seed moves a share of
four languages by a quarter. Models and word tables come from the cache when the book or an
earlier run trained them (else each root seed's pair trains, about 4 minutes on one core).

    python benchmarks/uid_learning_rate.py --lrs 0.003 0.005 --seeds 0 1 2 3 4 5 \\
        [--train-steps 2500] [--out benchmarks/results/uid_learning_rate.json]

Rows of an earlier run that this run did not repeat are kept in the output file.
"""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path

import torch
import yaml

from tokenbook.grounded import tiny as gt
from tokenbook.uid_grounding import experiments as ux

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "benchmarks" / "results" / "uid_learning_rate.json"


def chapter_params(lr: float, train_steps: int | None = None) -> gt.TinyParams:
    """The UID chapter's tiny parameters with peak learning rate ``lr`` (and
    ``train_steps`` fine-tuning steps when given)."""
    defaults = yaml.safe_load((ROOT / "params" / "uid_grounding" / "tiny.yaml").read_text())
    steps = {"train_steps": train_steps} if train_steps else {}
    return gt.TinyParams.from_mapping({**defaults, "lr": lr, **steps})


def per_language(seed: int, params: gt.TinyParams) -> dict[str, dict[str, float]]:
    """The per-language gains (nats) and Δ% of one root seed's pair (module docstring)."""
    words = gt.caption_words(seed, params, "on")
    image = (words.assign(gain=words["s_U"] - words["s_P"])
             .groupby(["lang", "upos"])["gain"].mean())
    comparison = ux.caption_comparison(words, n_boot=50)
    delta = comparison[comparison["metric"] == "uid_v"].set_index("lang")["delta_pct"]
    story = gt.story_words(seed, params, "on")
    pages = (story.assign(gain=story["s_D_other"] - story["s_D"])
             .groupby(["lang", "upos"])["gain"].mean())
    return {lang: {"image_gain_noun": round(float(image[(lang, "NOUN")]), 3),
                   "image_gain_adj": round(float(image[(lang, "ADJ")]), 3),
                   "uid_v_delta_pct": round(float(delta[lang]), 1),
                   "pages_gain_noun": round(float(pages[(lang, "NOUN")]), 3),
                   "pages_gain_adj": round(float(pages[(lang, "ADJ")]), 3)}
            for lang in sorted(delta.index)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--lrs", type=float, nargs="+", default=[0.003, 0.005])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3, 4, 5])
    parser.add_argument("--train-steps", type=int, default=None,
                        help="fine-tuning steps (default: the chapter's)")
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    torch.set_num_threads(1)
    result = json.loads(args.out.read_text()) if args.out.exists() else {}
    rows = result.setdefault("per_seed", {})
    for lr in args.lrs:
        params = chapter_params(lr, args.train_steps)
        setting = f"lr={lr}" + (f",train_steps={args.train_steps}" if args.train_steps else "")
        for seed in args.seeds:
            rows.setdefault(setting, {})[str(seed)] = rec = per_language(seed, params)
            print(f"lr {lr} root seed {seed}: " + ", ".join(
                f"{lang} adj {r['image_gain_adj']:.2f} pages {r['pages_gain_noun']:.2f}"
                for lang, r in rec.items()), flush=True)
    result["what"] = __doc__.split("\n\n")[0]
    tmp = args.out.with_suffix(".tmp")
    tmp.write_text(json.dumps(result, indent=1, sort_keys=True) + "\n")
    tmp.replace(args.out)
    print(f"written {args.out}")


if __name__ == "__main__":
    main()
