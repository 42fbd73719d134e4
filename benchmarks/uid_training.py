"""How long the UID chapter's tiny pair must train: the measurements behind its step counts.

Two parts, each written to ``benchmarks/results/uid_training.json``:

* ``grounding``: per root seed and training length (vision-tower steps, fine-tuning steps), the
  image's mean surprisal reduction per language and word class recovered by the trained pair,
  as a share of the generator's exact answer
  (:func:`tokenbook.uid_grounding.experiments.grounding_by_class`), and the vision tower's probe
  accuracy. Models come from the cache when the book (or an earlier run) trained them.
* ``copying``: whether a text LM of the chapter's size (or a larger one, ``--copy-sizes``)
  learns to use the *content* of earlier story pages. It is trained on the UID world's story
  sentences alone, in one of two formats (``--copy-formats``): ``sentences``, each sentence
  with and without its preceding sentences as context and a loss on the sentence only (the
  chapter's fine-tuning examples), or ``documents``, each story whole with a loss on every
  sentence after the pages before it (:func:`tokenbook.models.paligemma.story_documents`, the
  chapter's story stage). Held-out sentences are then scored after their true pages and after
  another story's pages (nats per sentence); ``gain`` = shuffled − true, beside
  ``exact_gain``, the generator's own answer on the same sentences (s_U − s_D summed per
  sentence, :func:`tokenbook.grounded.tiny.exact_story_words`: what a reader of the true pages
  gains over one of shuffled pages). ``--copy-roots``: the worlds (root seeds) to repeat it on;
  ``--copy-narrators``: the stories' narrator (``narrator_p``, 0 none; each story's narrator
  keeps the noun form it prefers with that probability,
  :func:`tokenbook.worlds.stories.narrator_plain_noun_p`).

    python benchmarks/uid_training.py [--seeds 0 2 3 5] [--lengths 200:600 600:1500]
                                      [--copy-steps 1500 2500 5000]
                                      [--copy-sizes 64x2x2 128x4x4] [--copy-roots 5]
                                      [--copy-formats sentences documents]
                                      [--copy-narrators 0 0.9]

A part given nothing to run (``--seeds`` or ``--copy-steps`` with no values) keeps its result
from the existing output file (listed under ``kept_from_earlier_run``); rows of an earlier run
that this run did not repeat (another seed, length, format or size) are kept beside the new
ones.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import platform
import time
from pathlib import Path

UID = dict(n_languages=4, n_scenes=1200, n_stories=40, text_steps=400, align_steps=300,
           max_page_sentences=3, world_style="uid")
#: (vision_steps, train_steps): the old defaults, the longer fine-tuning alone, the new defaults
LENGTHS = ((200, 600), (200, 1500), (600, 1500))


def grounding(seed: int, vision_steps: int, train_steps: int) -> dict:
    from tokenbook.grounded import tiny as gt
    from tokenbook.uid_grounding import experiments as ux, measures as uid

    params = gt.TinyParams.from_mapping(dict(UID, vision_steps=vision_steps,
                                             train_steps=train_steps))
    world, models, _ = gt._setting(seed, params, "on", progress=False)
    words, _ = uid.drop_unscorable(gt.caption_words(seed, params, "on"), ("s_U", "s_P"))
    table = ux.grounding_by_class(gt.exact_caption_words(world, params.caption_splits), words)
    return dict(seed=seed, vision_steps=vision_steps, train_steps=train_steps,
                vision_probe=models.log["vision_probe_accuracy"],
                recovered={f"{lang} {upos}": round(float(v), 3)
                           for (lang, upos), v in table["recovered"].items()})


def parse_length(text: str) -> tuple[int, int]:
    """``"VISION:FINETUNE"`` (e.g. ``"600:1500"``, the chapter's) as two ints."""
    try:
        vision_steps, train_steps = (int(v) for v in text.split(":"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"training length {text!r}: write "
                                         f"VISION_STEPS:FINETUNE_STEPS, e.g. 600:1500") from None
    return vision_steps, train_steps


def parse_size(text: str) -> tuple[int, int, int]:
    """``"HIDDENxLAYERSxHEADS"`` (e.g. ``"64x2x2"``, the chapter's size) as three ints."""
    try:
        hidden, layers, heads = (int(v) for v in text.lower().split("x"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"model size {text!r}: write HIDDENxLAYERSxHEADS, "
                                         f"e.g. 64x2x2") from None
    return hidden, layers, heads


@functools.lru_cache(maxsize=None)
def copying_world(root: int, n_stories: int, narrator_p: float = 0.0):
    """The copying part's world: the UID world with ``n_stories`` stories (few caption scenes)
    and the stories' narrator ``narrator_p`` (0: none)."""
    from tokenbook.grounded import tiny as gt

    params = gt.TinyParams.from_mapping(dict(UID, n_scenes=100, n_stories=n_stories,
                                             narrator_p=narrator_p))
    return gt.tiny_world(root, params, "on")


@functools.lru_cache(maxsize=None)
def exact_gain(root: int, n_stories: int, narrator_p: float = 0.0) -> float:
    """The generator's mean s_U − s_D per held-out later sentence (nats) of the copying part's
    world: the known answer (computed once per world, whatever the LM sizes and steps)."""
    from tokenbook.grounded import tiny as gt

    world = copying_world(root, n_stories, narrator_p)
    splits = tuple(sorted(set(world.stories.split) - {"train"}))
    words = gt.exact_story_words(world, splits)
    per_sentence = words.groupby(["lang", "story_id", "sent_idx"])[["s_U", "s_D"]].sum()
    return float((per_sentence.s_U - per_sentence.s_D).mean())


def copying(steps: int, *, size: tuple[int, int, int] = (64, 2, 2), n_stories: int = 800,
            root: int = 5, documents: bool = False, narrator_p: float = 0.0) -> dict:
    import numpy as np
    import torch

    from tokenbook.models import paligemma as pg
    from tokenbook.seeds import derive_seed

    torch.set_num_threads(1)
    world = copying_world(root, n_stories, narrator_p)
    examples = pg.training_examples(world, "train")
    examples = examples[examples.kind != "caption"].reset_index(drop=True)
    train = examples   # the tokenizer is trained on the same texts in both formats
    if documents:
        train = pg.story_documents(world.stories[world.stories.split == "train"])
    hidden, layers, heads = size
    cfg = pg.TrainConfig(steps=steps, hidden=hidden, layers=layers, heads=heads)
    processor, _, lm = pg.untrained_pair(world, examples, cfg, derive_seed(root, "copy-init"))
    tok = processor.tokenizer
    t0 = time.perf_counter()
    pg._train(lm, pg._encode(world, train, processor), tok, cfg, n_image=None,
              seed=derive_seed(root, "copy-batches"), desc="copying", progress=False)
    train_s = time.perf_counter() - t0

    @torch.no_grad()
    def nats(prefix: str, text: str) -> float:
        head = [tok.bos_token_id] + tok(prefix, add_special_tokens=False)["input_ids"]
        tail = tok(text, add_special_tokens=False)["input_ids"]
        logp = lm(input_ids=torch.tensor([head + tail])).logits[0].log_softmax(-1)
        return -float(sum(logp[len(head) - 1 + i, t] for i, t in enumerate(tail)))

    held = world.stories[world.stories.split != "train"].sort_values(
        ["lang", "story_id", "sent_idx"])
    stories = [(lang, sid, list(g.text)) for (lang, sid), g in held.groupby(["lang",
                                                                               "story_id"])]
    rng = np.random.default_rng(derive_seed(root, "copy-shuffle"))
    rows = []
    for lang, sid, texts in stories:
        others = [t for la, s, t in stories if la == lang and s != sid]
        other = others[rng.integers(len(others))]
        for j in range(1, len(texts)):
            rows.append((nats(pg.text_prefix(lang), texts[j]),
                         nats(pg.text_prefix(lang, texts[:j]), texts[j]),
                         nats(pg.text_prefix(lang, other[:j]), texts[j])))
    u, true, shuffled = np.array(rows).T
    return dict(format="documents" if documents else "sentences", steps=steps, hidden=hidden,
                layers=layers, heads=heads, n_stories=n_stories,
                root_seed=root, train_s=round(train_s, 1),
                world=world.fingerprint, remention=world.params["uid_style"].get("remention"),
                narrator_p=narrator_p,
                n_sentences=len(rows), text_only=round(float(u.mean()), 3),
                true_pages=round(float(true.mean()), 3),
                shuffled_pages=round(float(shuffled.mean()), 3),
                gain=round(float((shuffled - true).mean()), 3),
                exact_gain=round(exact_gain(root, n_stories, narrator_p), 3))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, nargs="*", default=[0, 2, 3, 5])
    ap.add_argument("--lengths", type=parse_length, nargs="+", default=list(LENGTHS),
                    help="training lengths of the grounding part, VISION_STEPS:FINETUNE_STEPS "
                    "(default: the three of LENGTHS)")
    ap.add_argument("--copy-steps", type=int, nargs="*", default=[1500, 2500, 5000])
    ap.add_argument("--copy-sizes", type=parse_size, nargs="+", default=[(64, 2, 2)],
                    help="text LM sizes for the copying part, HIDDENxLAYERSxHEADS (the "
                    "chapter's: 64x2x2)")
    ap.add_argument("--copy-roots", type=int, nargs="+", default=[5],
                    help="root seeds (worlds) of the copying part")
    ap.add_argument("--copy-formats", nargs="+", default=["sentences"],
                    choices=["sentences", "documents"],
                    help="training formats of the copying part (see the module docstring)")
    ap.add_argument("--copy-narrators", type=float, nargs="+", default=[0.0],
                    help="the stories' narrator_p in the copying part's worlds (0: none)")
    ap.add_argument("--out", default=str(Path(__file__).parent / "results" / "uid_training.json"))
    args = ap.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    from tokenbook.cache import write_json_atomic

    result = dict(cpu_count=os.cpu_count(), platform=platform.platform(), grounding=[],
                  copying=[])
    out = Path(args.out)
    earlier = json.loads(out.read_text()) if out.exists() else {}
    for seed in args.seeds:
        for vision_steps, train_steps in args.lengths:
            r = grounding(seed, vision_steps, train_steps)
            result["grounding"].append(r)
            print(f"seed {seed}, vision {vision_steps}, fine-tuning {train_steps}: shape probe "
                  f"{r['vision_probe']['shape']:.3f}; recovered {r['recovered']}", flush=True)
    runs = [(fmt, root, size, steps, narrator) for fmt in args.copy_formats
            for root in args.copy_roots for size in args.copy_sizes for steps in args.copy_steps
            for narrator in args.copy_narrators]
    for fmt, root, size, steps, narrator in runs:
        r = copying(steps, size=size, root=root, documents=fmt == "documents",
                    narrator_p=narrator)
        result["copying"].append(r)
        print(f"copying, {fmt}, root seed {root}, narrator {narrator}, "
              f"{'x'.join(map(str, size))}, {steps} steps: "
              f"true pages {r['true_pages']}, shuffled {r['shuffled_pages']} nats/sentence, "
              f"gain {r['gain']} (the generator's: {r['exact_gain']}; {r['train_s']} s)",
              flush=True)
    for part, ran in (("grounding", args.seeds), ("copying", args.copy_steps)):
        if not ran and part in earlier:   # a part not run this time keeps its earlier result
            result[part] = earlier[part]
            result.setdefault("kept_from_earlier_run", []).append(part)
    for part, key, ran in (("grounding", _grounding_key, args.seeds),
                           ("copying", _copy_key, args.copy_steps)):
        if ran:   # earlier rows of other settings stay beside this run's
            done = {key(r) for r in result[part]}
            result[part] = [r for r in earlier.get(part, []) if key(r) not in done] + \
                result[part]
    write_json_atomic(result, out)


def _grounding_key(row: dict) -> tuple:
    """What identifies a grounding run: root seed and training length."""
    return (row["seed"], row["vision_steps"], row["train_steps"])


def _copy_key(row: dict) -> tuple:
    """What identifies a copying run: format, world, narrator, LM size and steps (rows written
    before the formats existed trained on sentences, before the narrator without one)."""
    return (row.get("format", "sentences"), row.get("root_seed"), row.get("n_stories"),
            row.get("narrator_p", 0.0), row.get("hidden"), row.get("layers"), row.get("heads"),
            row.get("steps"))


if __name__ == "__main__":
    main()
