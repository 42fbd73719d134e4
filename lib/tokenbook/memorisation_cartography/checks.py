"""The memorisation chapter's per-seed checks: manipulation checks, known answers and balance.

They write rows ``manipulation:<id>``, ``known:<id>`` and ``balance:<id>`` into the seed table
next to the statistics (:mod:`tokenbook.memorisation_cartography.claims` declares what each
claim expects of them):

* :func:`seed_checks` — the main map's claims (called by
  :func:`tokenbook.memorisation_cartography.experiments.seed_statistics`), from the corpus and
  the planted labels only (nothing trained is read except the ensemble's subset masks);
* :func:`crosslingual_checks` — the cross-lingual claims (called by
  :func:`tokenbook.memorisation_cartography.experiments.crosslingual_statistics`).

Generator-side oracles: :func:`lexically_aligned` says whether a target is the compositional
translation of its source as far as the world's lexicon tells (every source content word's
translation stem appears in the target), and :func:`hapax_untranslatable` whether a pair holds
a source word seen in no other training pair whose translation no other target holds. Neither
reads a model.
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

import numpy as np
import pandas as pd

from tokenbook.claims import BALANCE_PREFIX, KNOWN_PREFIX, MANIPULATION_PREFIX
from tokenbook.memorisation_cartography.crosslingual import mean_phenomenon_agreement
from tokenbook.memorisation_cartography.estimator import counterfactual_memorisation
from tokenbook.memorisation_cartography.regions import POLYGONS, in_polygon
from tokenbook.memorisation_cartography.removal import source_token_counts
from tokenbook.seeds import derive_seed
from tokenbook.validation import check_choice, check_table
from tokenbook.worlds.translation import SOURCE_SIDE_PHENOMENA, make_translation_world

__all__ = ["seed_checks", "crosslingual_checks", "lexically_aligned", "hapax_untranslatable",
           "idioms_still_taught", "oracle_scores", "oracle_map", "oracle_auroc", "world_lexicon",
           "cm_gap", "region_token_share", "MANIPULATION_MARGIN", "CM_GAP_MARGIN",
           "SELECTION_MARGIN", "NOISY_KINDS", "NOT_DERIVABLE"]

#: the smallest share (of the claim's positive pairs, or of test sentences) a manipulation
#: check must exceed with the mechanism on; off it must not
MANIPULATION_MARGIN = 0.5

#: the ``cm-stable`` manipulation check's margin on the mean TM − GS (probability): the real
#: subsets give 0.5–0.6 at the default design, random masks a few hundredths either way
CM_GAP_MARGIN = 0.1

#: the §6.2 corpora's manipulation check: a corpus selected on the predicted map must hold more
#: of its source tokens inside its polygon *on the measured map* than the random corpus does, by
#: more than this share (5 points; the selection on permuted positions must not)
SELECTION_MARGIN = 0.05

#: the noisy kinds the paper names for the bottom-left region ("noisy, misaligned or partially
#: translated pairs"): misaligned, truncated (partly translated) and copied (untranslated)
NOISY_KINDS = ("noisy_misaligned", "noisy_truncated", "noisy_copy")

#: planted labels whose target no other training pair teaches (the cross-lingual known
#: answer's oracle): idioms translated idiomatically, rare words, and the noisy kinds
NOT_DERIVABLE = ("idiom", "rare_word", *NOISY_KINDS)


def world_lexicon(corpus_key: Mapping[str, Any]) -> pd.DataFrame:
    """The lexicon of the tiny world behind a corpus (regenerated from its parameters, which
    are deterministic in the seed): ``source, target, pos, gender, kind``."""
    params = dict(corpus_key["world"])
    return make_translation_world(**params).lexicon


def _stems(lexicon: pd.DataFrame) -> dict[str, list[str]]:
    words = lexicon[lexicon["pos"].isin(["NOUN", "VERB", "ADJ"])]
    out: dict[str, list[str]] = {}
    for s, t in zip(words["source"], words["target"]):
        out.setdefault(s, []).append(t)
    return out


def lexically_aligned(sources: Sequence[str], targets: Sequence[str],
                      lexicon: pd.DataFrame) -> np.ndarray:
    """Per pair: is the target the compositional translation of the source, as far as the
    world's word lexicon tells? True when every source noun, verb and adjective (a plural
    ``-s`` stripped) has one of its translation stems at the start of some target word, and
    the target has no fewer words than the source's content words. An idiom's target (an
    unrelated fixed phrase), another pair's target, a truncated target and a copied source all
    fail it; a regular or rare-word pair passes.

    >>> lex = pd.DataFrame({"source": ["ba", "do"], "target": ["xi", "zu"],
    ...                     "pos": ["NOUN", "VERB"], "gender": ["m", ""], "kind": "base"})
    >>> lexically_aligned(["ka bas do", "ka ba do"], ["il xii zua", "ba do"], lex).tolist()
    [True, False]
    """
    stems = _stems(lexicon)
    out = np.zeros(len(sources), dtype=bool)
    for i, (src, tgt) in enumerate(zip(sources, targets)):
        twords = tgt.split()
        ok, n_content = True, 0
        for w in src.split():
            base = w if w in stems else (w[:-1] if w.endswith("s") and w[:-1] in stems else None)
            if base is None:
                continue
            n_content += 1
            if not any(t.startswith(stem) for stem in stems[base] for t in twords):
                ok = False
                break
        out[i] = ok and len(twords) >= n_content
    return out


def hapax_untranslatable(sources: Sequence[str], targets: Sequence[str]) -> np.ndarray:
    """Per pair: does the source hold a word seen in no other pair (a hapax) that is not made
    of parts the corpus knows, while its target holds a hapax too? I.e. the pair carries a word
    pairing no other training pair can teach: held out, nothing in the corpus gives its
    translation. A hapax whose parts (split at hyphens; a plural ``-s`` stripped or added) are
    words of other sources is derivable (a regular noun's only plural; the rare-but-derivable
    off world's compounds), not untranslatable.

    >>> hapax_untranslatable(["a b", "a c", "a b", "b-a"], ["x y", "x z", "x y", "y-x"]).tolist()
    [False, True, False, False]
    """
    def counts(texts):
        c: dict[str, int] = {}
        for t in texts:
            for w in set(t.split()):
                c[w] = c.get(w, 0) + 1
        return c

    cs, ct = counts(sources), counts(targets)

    def known(part, word):
        # seen in another pair, as it is or with / without the plural -s
        return (cs.get(part, 0) > (1 if part == word else 0)
                or (part.endswith("s") and cs.get(part[:-1], 0) > 0)
                or cs.get(part + "s", 0) > 0)

    def derivable(w):
        return all(p and known(p, w) for p in w.split("-"))

    return np.array([any(cs[w] == 1 and not derivable(w) for w in s.split())
                     and any(ct[w] == 1 for w in t.split())
                     for s, t in zip(sources, targets)], dtype=bool)


def idioms_still_taught(test: pd.DataFrame, pairs: pd.DataFrame, lexicon: pd.DataFrame,
                        removed: Sequence[int]) -> np.ndarray:
    """Per test sentence: can the training set with the pairs ``removed`` (``pair_id`` values) still
    teach its translation, as the generator knows it? True for a sentence without an idiom;
    for one with an idiom (a source phrase of the lexicon's ``IDIOM`` rows), True when some
    kept pair planted as ``idiom`` holds that phrase (its idiomatic translation is taught
    nowhere else). Reads no model.

    >>> lex = pd.DataFrame({"source": ["ka bu"], "target": ["zo"], "pos": ["IDIOM"]})
    >>> pairs = pd.DataFrame({"pair_id": [0, 1], "source": ["ka bu do", "ta do"],
    ...                       "phenomenon": ["idiom", "regular"]})
    >>> test = pd.DataFrame({"source": ["ka bu ti", "ta ti"], "uses_idiom": [True, False]})
    >>> idioms_still_taught(test, pairs, lex, []).tolist(), idioms_still_taught(test, pairs, lex, [0]).tolist()
    ([True, True], [False, True])
    """
    check_table(test, "test", columns=["source", "uses_idiom"])
    check_table(pairs, "pairs", columns=["pair_id", "source", "phenomenon"])
    phrases = [f" {p} " for p in lexicon.loc[lexicon["pos"] == "IDIOM", "source"]]
    kept = pairs[~pairs["pair_id"].isin(list(removed)) & (pairs["phenomenon"] == "idiom")]
    taught = {p for p in phrases if any(p in f" {src} " for src in kept["source"])}
    out = np.ones(len(test), dtype=bool)
    for i, (src, uses) in enumerate(zip(test["source"], test["uses_idiom"].astype(bool))):
        if uses:
            used = [p for p in phrases if p in f" {src} "]
            out[i] = bool(used) and all(p in taught for p in used)
    return out


def region_token_share(cm: pd.DataFrame, pair_ids: Sequence[int], sources: Sequence[str],
                       polygon: str | Sequence[tuple[float, float]]) -> float:
    """Share of the source tokens (whitespace-split) of the corpus ``pair_ids`` that come from
    pairs whose *measured* (TM, GS) lies inside ``polygon`` (a name in
    :data:`~tokenbook.memorisation_cartography.regions.POLYGONS` or convex vertices).

    ``cm``: the map, ``pair_id, tm, gs`` (probabilities); ``sources``: every pair's source,
    indexed by ``pair_id``. NaN for an empty corpus.

    >>> cm = pd.DataFrame({"pair_id": [0, 1], "tm": [0.9, 0.2], "gs": [0.1, 0.1]})
    >>> region_token_share(cm, [0, 1], ["a b c", "d"], "bleu_hal")
    0.75
    """
    check_table(cm, "cm", columns=["pair_id", "tm", "gs"])
    vertices = POLYGONS[polygon] if isinstance(polygon, str) else polygon
    ids = np.asarray(list(pair_ids), dtype=int)
    if not len(ids):
        return float("nan")
    tokens = source_token_counts(list(sources))[ids]
    points = cm.set_index("pair_id").loc[ids, ["tm", "gs"]].to_numpy(float)
    inside = in_polygon(points, vertices)
    return float(tokens[inside].sum() / tokens.sum())


def oracle_scores(scores: pd.DataFrame, pairs: pd.DataFrame) -> pd.DataFrame:
    """The ensemble's score table as the generator would fill it: a model knows a pair (score
    1.0) when it trained on it, or when the world makes its target derivable from other
    pairs (every planted label but :data:`NOT_DERIVABLE`); a held-out pair no other pair
    teaches scores 0.0. Same rows and ``in_train`` as ``scores`` (the real training subsets),
    so the oracle map's CM is 1 on the not-derivable pairs and 0 elsewhere.

    >>> scores = pd.DataFrame({"model": [0, 0, 1, 1], "pair_id": [0, 1, 0, 1],
    ...                        "score": 0.5, "in_train": [True, False, False, True]})
    >>> pairs = pd.DataFrame({"pair_id": [0, 1], "phenomenon": ["idiom", "regular"]})
    >>> oracle_scores(scores, pairs)["score"].tolist()
    [1.0, 1.0, 0.0, 1.0]
    """
    check_table(scores, "scores", columns=["model", "pair_id", "score", "in_train"])
    check_table(pairs, "pairs", columns=["pair_id", "phenomenon"])
    derivable = ~pairs.set_index("pair_id")["phenomenon"].isin(NOT_DERIVABLE)
    known = derivable.reindex(scores["pair_id"]).to_numpy()
    if pd.isna(known).any():
        raise ValueError("oracle_scores: scores hold pair ids the pairs table lacks; pass the "
                         "corpus the ensemble was trained on")
    knows = scores["in_train"].to_numpy(bool) | known.astype(bool)
    return scores.assign(score=knows.astype(float))


def oracle_map(pairs: pd.DataFrame) -> pd.DataFrame:
    """The generator's map of a labelled corpus: TM 1 (a model knows what it trained on), GS
    1 where another pair teaches the target (every planted label but :data:`NOT_DERIVABLE`)
    else 0, CM = TM − GS — the map of :func:`oracle_scores`' table wherever an ensemble
    defines CM. Columns ``pair_id, tm, gs, cm`` (probabilities).

    >>> oracle_map(pd.DataFrame({"pair_id": [0, 1], "phenomenon": ["idiom", "regular"]}))["cm"].tolist()
    [1.0, 0.0]
    """
    check_table(pairs, "pairs", columns=["pair_id", "phenomenon"])
    gs = (~pairs["phenomenon"].isin(NOT_DERIVABLE)).to_numpy(float)
    return pd.DataFrame({"pair_id": pairs["pair_id"].to_numpy(), "tm": 1.0, "gs": gs,
                         "cm": 1.0 - gs})


def oracle_auroc(score: np.ndarray, positive: np.ndarray, negative: np.ndarray) -> float:
    """AUROC of ``score`` separating the ``positive`` rows from the ``negative`` rows (ties
    count one half); NaN when either group is empty.

    >>> oracle_auroc(np.array([1, 1, 0, 0]), np.array([1, 1, 0, 0], bool), np.array([0, 0, 1, 1], bool))
    1.0
    """
    a, b = np.asarray(score, float)[positive], np.asarray(score, float)[negative]
    if not len(a) or not len(b):
        return float("nan")
    diff = a[:, None] - b[None, :]
    return float(((diff > 0) + 0.5 * (diff == 0)).mean())


# --------------------------------------------------------------------------- per-seed checks
def _rows(cid: str, manipulation: float | None = None, known: float | None = None,
          balance: float | None = None) -> dict[str, float]:
    out = {}
    for prefix, v in ((MANIPULATION_PREFIX, manipulation), (KNOWN_PREFIX, known),
                      (BALANCE_PREFIX, balance)):
        if v is not None:
            out[prefix + cid] = float(v)
    return out


def _null_positive(labels: np.ndarray, positive: Sequence[str], seed: int) -> np.ndarray:
    """The labels-permuted control's positives: as many random ``regular`` rows as there are
    positive rows (as :func:`tokenbook.memorisation_cartography.experiments.permuted_label_null` picks)."""
    pos = np.isin(labels, list(positive))
    neg = np.flatnonzero(labels == "regular")
    pick = np.random.default_rng(seed).choice(neg, size=int(pos.sum()), replace=False)
    out = np.zeros(len(labels), dtype=bool)
    out[pick] = True
    return out


def seed_checks(pairs: pd.DataFrame, lexicon: pd.DataFrame, mechanism: str, *,
                analysis_seed: int, test: pd.DataFrame | None = None,
                scores: pd.DataFrame | None = None,
                rare_pairs: pd.DataFrame | None = None,
                removed: Mapping[str, Sequence[int]] | None = None) -> dict[str, float]:
    """The manipulation, known-answer and balance rows of the main map's claims for one root
    seed and mechanism (``pairs`` with the planted ``phenomenon`` labels; ``lexicon`` of the
    world, :func:`world_lexicon`; ``analysis_seed``: the seed the labels-permuted nulls draw
    from, the same as the statistics'; ``test``: the test pairs with ``uses_idiom``;
    ``scores``: the ensemble's score table, for the subset masks).

    Seed-table rows (``manipulation:<id>``, ``known:<id>``, ``balance:<id>``):

    * ``idiom-high-cm``: manipulation — share of the compared pairs (on: idioms, off: literal
      idioms) whose target is not the compositional translation (:func:`lexically_aligned`);
      known — AUROC of that oracle label, compared pairs vs regular pairs; balance — pairs
      compared;
    * ``rare-high-cm``: manipulation — share of the compared pairs (on: rare-word pairs; off:
      the rare-but-derivable world's rare pairs, ``rare_pairs``, or without it the permuted
      null's regular pairs) holding an untranslatable hapax (:func:`hapax_untranslatable`);
      known — AUROC of that label vs regular pairs; balance — mean source words of the
      compared pairs;
    * ``noisy-unlearnt``: manipulation — share of the compared pairs (on: the noisy pairs, off:
      the permuted null's) whose target is not the compositional translation; known — the
      smallest, over noisy kinds, AUROC of that label vs regular pairs; balance — pairs compared;
    * ``removal-memorised-*``: manipulation — share of the scored test sentences that use a
      training idiom (on: the whole test set, off: its regular part); balance — mean source
      words per scored test sentence; known (with ``removed``, the pair ids of the
      ``memorised`` and ``random`` removal conditions) — share of the scored test sentences
      the kept pairs still teach (:func:`idioms_still_taught`), memorised − random removal (a
      difference of shares: the sign the claim's Δ should have);
    * ``cm-stable`` (with ``scores``: the real ones on, the random-masks null's off):
      manipulation — mean TM − GS over pairs (:func:`cm_gap`); balance — mean share of pairs in
      a model's training subset (the null permutes membership within each model).
    """
    check_choice(mechanism, "mechanism", ("on", "off"))
    check_table(pairs, "pairs", columns=["source", "target", "phenomenon"])
    on = mechanism == "on"
    labels = pairs["phenomenon"].to_numpy(dtype=object)
    regular = labels == "regular"
    aligned = lexically_aligned(pairs["source"].tolist(), pairs["target"].tolist(), lexicon)
    hapax = hapax_untranslatable(pairs["source"].tolist(), pairs["target"].tolist())
    out: dict[str, float] = {}

    idiom = labels == ("idiom" if on else "idiom_literal")
    if idiom.any():
        out.update(_rows("idiom-high-cm", manipulation=float((~aligned[idiom]).mean()),
                         known=oracle_auroc(~aligned, idiom, regular),
                         balance=float(idiom.sum())))
    # off: the labels-permuted nulls' compared pairs (random regular pairs, drawn as theirs)
    if rare_pairs is not None:   # the rare-but-derivable off world: its own rare pairs
        r_labels = rare_pairs["phenomenon"].to_numpy(dtype=object)
        r_src, r_tgt = rare_pairs["source"].tolist(), rare_pairs["target"].tolist()
        r_hapax = hapax_untranslatable(r_src, r_tgt)
        rare, r_regular = r_labels == "rare_word", r_labels == "regular"
    else:
        r_src, r_hapax, r_regular = pairs["source"].tolist(), hapax, regular
        rare = (labels == "rare_word") if on else _null_positive(
            labels, ["rare_word"], derive_seed(analysis_seed, "null", "rare"))
    if rare.any():
        words = np.array([len(t.split()) for t in r_src], dtype=float)
        out.update(_rows("rare-high-cm", manipulation=float(r_hapax[rare].mean()),
                         known=oracle_auroc(r_hapax, rare, r_regular & ~rare),
                         balance=float(words[rare].mean())))
    kinds = {k: labels == k for k in NOISY_KINDS if (labels == k).any()}
    if kinds:
        if on:
            noisy = np.isin(labels, list(kinds))
            per_kind = kinds
        else:
            per_kind = {k: _null_positive(labels, [k], derive_seed(analysis_seed, "null",
                                                                   "noisy", k))
                        for k in kinds}
            noisy = np.logical_or.reduce(list(per_kind.values()))
        reg = regular & ~noisy
        out.update(_rows("noisy-unlearnt", manipulation=float((~aligned[noisy]).mean()),
                         known=min(oracle_auroc(~aligned, m, reg) for m in per_kind.values()),
                         balance=float(sum(m.sum() for m in per_kind.values()))))
    if test is not None and "uses_idiom" in test.columns and len(test):
        scored = test if on else test[~test["uses_idiom"].astype(bool)]
        known = None
        if removed is not None:
            share = {k: float(idioms_still_taught(scored, pairs, lexicon, removed[k]).mean())
                     for k in ("memorised", "random")}
            known = share["memorised"] - share["random"]
        for cid in ("removal-memorised-logprob", "removal-memorised-bleu"):
            out.update(_rows(cid, manipulation=float(scored["uses_idiom"].astype(bool).mean()),
                             known=known,
                             balance=float(scored["source"].str.split().str.len().mean())))
    if scores is not None:
        out.update(_rows("cm-stable", manipulation=cm_gap(scores),
                         balance=float(scores["in_train"].astype(float).mean())))
    return out


def cm_gap(scores: pd.DataFrame) -> float:
    """Mean over pairs of TM − GS: how much better the models predict a pair they trained on
    (the ``cm-stable`` manipulation check: clearly positive when membership is real, ≈ 0 under
    random masks)."""
    return float(np.nanmean(counterfactual_memorisation(scores)["cm"].to_numpy(float)))


def crosslingual_checks(maps: Mapping[str, pd.DataFrame]) -> dict[str, float]:
    """The cross-lingual claims' manipulation, known-answer and balance rows for one root seed
    and world. ``maps``: per language, ``pair_id``, ``source`` and ``phenomenon`` (the planted
    label) of every training pair, the world's phenomena shared (on) or drawn per language (off).

    * manipulation — the share of the first language's source-side phenomenon pairs
      (:data:`~tokenbook.worlds.translation.SOURCE_SIDE_PHENOMENA`) whose ``pair_id`` holds the
      same source in every other language (on: 1; off: the chance that the phenomenon sits at
      the same position);
    * known — the claims' statistic computed on a generator oracle instead of a map: the
      planted label "no other pair teaches this target" (:data:`NOT_DERIVABLE`: idiomatic
      idioms, rare words, noisy targets), mean over ordered language pairs of
      :func:`~tokenbook.memorisation_cartography.crosslingual.mean_phenomenon_agreement`;
    * balance — mean source words per pair over every language's pairs (the same sentences
      on and off, placed differently).
    """
    langs = list(maps)
    if len(langs) < 2:
        return {}
    for lang in langs:
        check_table(maps[lang], f"maps[{lang!r}]", columns=["pair_id", "source", "phenomenon"])
    first = maps[langs[0]]
    shared = first[first["phenomenon"].isin(SOURCE_SIDE_PHENOMENA)]
    same = np.ones(len(shared), dtype=bool)
    for lang in langs[1:]:
        other = maps[lang].set_index("pair_id")["source"]
        same &= other.reindex(shared["pair_id"]).to_numpy() == shared["source"].to_numpy()
    oracle = {lang: m.assign(not_derivable=m["phenomenon"].isin(NOT_DERIVABLE).astype(float))
              for lang, m in maps.items()}
    known = (mean_phenomenon_agreement(oracle, "not_derivable")["not_derivable"] if len(shared)
             else float("nan"))
    words = float(np.mean([m["source"].str.split().str.len().mean() for m in maps.values()]))
    out: dict[str, float] = {}
    for metric in ("tm", "gs", "cm"):
        out.update(_rows(f"crosslingual-{metric}",
                         manipulation=float(same.mean()) if len(shared) else float("nan"),
                         known=known, balance=words))
    return out
