"""The memorisation chapter's claims as library specs, and their per-seed checks.

:func:`claim_specs` declares every claim the chapter reports (Dankers, Titov & Hupkes, EMNLP
2023) as a :class:`tokenbook.claims.ClaimSpec`: the wording and section, the statistic with its
unit, the expectation, the function that computes it, the mechanism (what *on* plants and what
*off* removes; "there is a relation" only where the off control permutes everything), the
manipulation check, the known answer from the generator alone where it gives one (the planted
labels) and the balance check. The chapter judges them in one call
(``judge_claims(claim_specs(...), seed_table)``) and its figures read the thresholds from the
same specs (:func:`thresholds`).

The per-seed checks write rows ``manipulation:<id>``, ``known:<id>`` and ``balance:<id>`` into
the seed table next to the statistics:

* :func:`seed_checks` — the main map's claims (called by
  :func:`tokenbook.memorisation.experiments.seed_statistics`), from the corpus and the planted
  labels only (nothing trained is read except the ensemble's subset masks);
* :func:`crosslingual_checks` — the cross-lingual claims (called by
  :func:`tokenbook.memorisation.experiments.crosslingual_statistics`);
* :func:`region_seed_table` — the §6.1 grid and §6.2 corpora claims as a tidy seed table with
  their test-set checks.

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

from ..claims import BALANCE_PREFIX, KNOWN_PREFIX, MANIPULATION_PREFIX, ClaimSpec
from ..seeds import derive_seed
from ..verdicts import Expect

__all__ = ["claim_specs", "thresholds", "seed_checks", "crosslingual_checks",
           "region_seed_table", "lexically_aligned", "hapax_untranslatable", "oracle_auroc",
           "world_lexicon", "cm_gap", "MANIPULATION_MARGIN", "CM_GAP_MARGIN", "NOISY_KINDS", "CLAIM_ORDER"]

PAPER = "Dankers, Titov & Hupkes 2023"

#: the smallest share (of the claim's positive pairs, or of test sentences) a manipulation
#: check must exceed with the mechanism on; off it must not
MANIPULATION_MARGIN = 0.5

#: the ``cm-stable`` manipulation check's margin on the mean TM − GS (probability): the real
#: subsets give 0.5–0.6 at the default design, random masks a few hundredths either way
CM_GAP_MARGIN = 0.1

#: the noisy kinds the paper names for the bottom-left region ("noisy, misaligned or partially
#: translated pairs"): misaligned, truncated (partly translated) and copied (untranslated)
NOISY_KINDS = ("noisy_misaligned", "noisy_truncated", "noisy_copy")

#: every claim id the chapter reports at tiny scale, in the book's order
CLAIM_ORDER = ("idiom-high-cm", "rare-high-cm", "noisy-unlearnt", "cm-stable",
               "features-predict-cm", "signals-predict-cm", "signals-add",
               "removal-memorised-logprob", "removal-memorised-bleu",
               "removal-grid-lowgs-logprob", "specialised-bleu-hal-bleu",
               "specialised-logprob-logprob", "crosslingual-tm", "crosslingual-gs",
               "crosslingual-cm", "crosslingual-transfer-cm", "crosslingual-strength")

_RELATION_ONLY = ("; this null permutes every relation, so the claim tested is only that "
                  "there is a relation")


# --------------------------------------------------------------------------- generator oracles
def world_lexicon(corpus_key: Mapping[str, Any]) -> pd.DataFrame:
    """The lexicon of the tiny world behind a corpus (regenerated from its parameters, which
    are deterministic in the seed): ``source, target, pos, gender, kind``."""
    from ..worlds.translation import make_translation_world

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
    positive rows (as :func:`tokenbook.memorisation.experiments.permuted_label_null` picks)."""
    pos = np.isin(labels, list(positive))
    neg = np.flatnonzero(labels == "regular")
    pick = np.random.default_rng(seed).choice(neg, size=int(pos.sum()), replace=False)
    out = np.zeros(len(labels), dtype=bool)
    out[pick] = True
    return out


def seed_checks(pairs: pd.DataFrame, lexicon: pd.DataFrame, mechanism: str, *,
                analysis_seed: int, test: pd.DataFrame | None = None,
                scores: pd.DataFrame | None = None,
                rare_pairs: pd.DataFrame | None = None) -> dict[str, float]:
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
      words per scored test sentence;
    * ``cm-stable`` (with ``scores``: the real ones on, the random-masks null's off):
      manipulation — mean TM − GS over pairs (:func:`cm_gap`); balance — mean share of pairs in
      a model's training subset (the null permutes membership within each model).
    """
    from ..validation import check_choice, check_table

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
        for cid in ("removal-memorised-logprob", "removal-memorised-bleu"):
            out.update(_rows(cid, manipulation=float(scored["uses_idiom"].astype(bool).mean()),
                             balance=float(scored["source"].str.split().str.len().mean())))
    if scores is not None:
        out.update(_rows("cm-stable", manipulation=cm_gap(scores),
                         balance=float(scores["in_train"].astype(float).mean())))
    return out


def cm_gap(scores: pd.DataFrame) -> float:
    """Mean over pairs of TM − GS: how much better the models predict a pair they trained on
    (the ``cm-stable`` manipulation check: clearly positive when membership is real, ≈ 0 under
    random masks)."""
    from .estimator import counterfactual_memorisation

    return float(np.nanmean(counterfactual_memorisation(scores)["cm"].to_numpy(float)))


def crosslingual_checks(maps: Mapping[str, pd.DataFrame], mechanism: str) -> dict[str, float]:
    """The cross-lingual claims' manipulation rows for one root seed: the share of rows whose
    source is the same sentence in every language after the pairing (on: 1, off: the
    permuted pairing's chance matches). ``maps``: per language, ``pair_id`` (as matched) and
    ``source``."""
    langs = list(maps)
    if len(langs) < 2:
        return {}
    first = maps[langs[0]].set_index("pair_id")["source"]
    shares = []
    for lang in langs[1:]:
        m = maps[lang]
        shares.append(float((first.reindex(m["pair_id"]).to_numpy() == m["source"].to_numpy())
                            .mean()))
    share = min(shares)
    return {MANIPULATION_PREFIX + f"crosslingual-{m}": share for m in ("tm", "gs", "cm")}


def region_seed_table(results, arts: Mapping[int, Any]) -> pd.DataFrame:
    """The §6.1 grid and §6.2 corpora claims as a tidy seed table (``seed, mechanism,
    claim_id, value``; ``seed`` the root seed whose map was used), with the manipulation and
    balance rows of ``removal-grid-lowgs-logprob`` (the same test-set checks as the removal
    claims). ``results``: :class:`~tokenbook.memorisation.experiments.RegionResults` with one
    model seed per root seed or several (their mean per root seed); ``arts``: the root seeds'
    :class:`~tokenbook.memorisation.experiments.Artefacts`."""
    from .experiments import REGION_CLAIM_IDS, region_claim_values

    rows = []
    root_of = (results.grid.drop_duplicates("seed").set_index("seed")["root_seed"]
               if "root_seed" in results.grid.columns else None)
    train_seeds = sorted(set(results.grid["seed"]))
    roots = ([int(root_of[s]) for s in train_seeds] if root_of is not None
             else list(range(len(train_seeds))))
    for cid in REGION_CLAIM_IDS:
        v = region_claim_values(results, cid)
        for mech, key in (("on", "values_on"), ("off", "values_off")):
            per_root: dict[int, list[float]] = {}
            for r, x in zip(roots, v[key]):
                per_root.setdefault(r, []).append(x)
            rows += [(r, mech, cid, float(np.mean(xs))) for r, xs in per_root.items()]
    for r in sorted(set(roots)):
        test = arts[r].corpus.test if r in arts else None
        if test is None or "uses_idiom" not in test.columns:
            continue
        for mech in ("on", "off"):
            scored = test if mech == "on" else test[~test["uses_idiom"].astype(bool)]
            rows.append((r, mech, MANIPULATION_PREFIX + "removal-grid-lowgs-logprob",
                         float(scored["uses_idiom"].astype(bool).mean())))
            rows.append((r, mech, BALANCE_PREFIX + "removal-grid-lowgs-logprob",
                         float(scored["source"].str.split().str.len().mean())))
    return pd.DataFrame(rows, columns=["seed", "mechanism", "claim_id", "value"])


# --------------------------------------------------------------------------- the specs
def claim_specs(*, n_models: int = 8, n_splits: int = 5, n_languages: int = 3,
                reliability: float = 0.7, predict_r: float = 0.5, rare_null: str = "world"
                ) -> list[ClaimSpec]:
    """The chapter's tiny-scale claims, in the book's order (:data:`CLAIM_ORDER`).

    ``rare_null``: the off world of ``rare-high-cm`` the seed table was computed with
    (``"world"``: rare but derivable; ``"shuffle"``: labels permuted).

    ``n_models``, ``n_splits`` and ``n_languages`` only enter the statistics' wording;
    ``reliability`` (split-half CM reliability, our threshold) and ``predict_r`` (held-out
    Pearson r, the bottom of the paper's r axis) are the thresholds of the claims that need
    one.
    """
    from .experiments import (crosslingual_statistics, region_experiments,
                              seed_statistics)

    margin = Expect.greater(MANIPULATION_MARGIN)
    test_check = "share of the scored test sentences that use a training idiom: > 0 on, 0 off"
    test_expect = Expect.greater(0.0)
    test_mech = ("on: the whole test set, 30% of whose sentences use a training idiom (its "
                 "translation is only in the memorised pairs); off: the test sentences without "
                 "idioms, which need nothing memorised (same models, same removal)")
    test_balance = dict(balance_what="mean source words per scored test sentence",
                        balance_tolerance=1.0)
    oracle_how = ("AUROC of the generator's label 'target not the compositional translation of "
                  "its source' (lexicon of the world; no model), {pos} vs regular pairs")
    specs = [
        ClaimSpec(
            "idiom-high-cm", "Non-compositional (idiomatic) pairs are memorised: higher CM than "
            "regular pairs", "§4 (map regions); demo idiom maps",
            "lower 95% bootstrap bound of the AUROC of CM, idioms vs regular pairs",
            Expect.greater(0.5), computed_by=seed_statistics,
            mechanism="on: idioms (a fixed phrase with an unrelated fixed translation, each "
            "twice); off: the literal-idiom control of the same world (the same repetition "
            "and length, translated literally) — only the non-compositional translation differs",
            manipulation=margin, manipulation_what="share of the compared pairs whose target is "
            "not the compositional translation of the source (lexicon check): > "
            f"{MANIPULATION_MARGIN:g} on, not off",
            known_answer_how=oracle_how.format(pos="idioms (on) / literal idioms (off)"),
            balance_what="pairs compared (idioms on, literal idioms off)", balance_tolerance=0.0),
        ClaimSpec(
            "rare-high-cm", "Pairs with rare words get higher CM than regular pairs",
            "§4 (via the notes' secondary source: rare tokens go with high CM)",
            "lower 95% bootstrap bound of the AUROC of CM, rare-word vs regular pairs",
            Expect.greater(0.5), computed_by=seed_statistics,
            mechanism=("on: a hapax noun whose translation no other pair holds; off: "
                       + ("the rare-but-derivable world — the same world whose rare words are "
                          "hyphenated compounds of ordinary nouns translated part by part "
                          "(every other pair identical; its own ensemble), so off removes only "
                          "the need to memorise" if rare_null == "world" else
                          "as many random regular pairs relabelled (labels permuted)"
                          + _RELATION_ONLY)),
            manipulation=margin, manipulation_what="share of the compared pairs holding a "
            "source hapax whose translation no other target holds: > "
            f"{MANIPULATION_MARGIN:g} on, not off",
            known_answer_how="AUROC of the generator's label 'holds an untranslatable hapax' "
            "(word counts of the corpus; no model), compared vs regular pairs",
            balance_what="mean source words of the compared pairs", balance_tolerance=0.5),
        ClaimSpec(
            "noisy-unlearnt", "Noisy, misaligned or partially translated pairs sit bottom left: "
            "not fitted even when trained on (unlearnable rather than memorised)",
            "§4 (map regions, bottom-left; the notes' table)",
            "smallest, over the noisy kinds (misaligned, truncated, copied), lower 95% "
            "bootstrap bound of the AUROC of −TM, that kind vs regular pairs",
            Expect.greater(0.5), computed_by=seed_statistics,
            mechanism="on: misaligned, truncated and copied targets; off: per kind as many "
            "random regular pairs relabelled (labels permuted)" + _RELATION_ONLY,
            manipulation=margin, manipulation_what="share of the compared pairs whose target is "
            f"not the compositional translation (lexicon check): > {MANIPULATION_MARGIN:g} on, "
            "not off",
            known_answer_how=oracle_how.format(pos="each noisy kind (the smallest)")
            + "; it says the targets are not derivable, not whether a model fits them",
            balance_what="pairs compared", balance_tolerance=0.0,
            note="every kind must be unlearnt (the paper names all three); the old statistic "
            "pooled the kinds and was carried by the copies alone"),
        ClaimSpec(
            "cm-stable", "CM ranks pairs reliably across ensembles",
            "§3 (estimator); 0.7 is our threshold",
            f"split-half Spearman ρ of CM, Spearman–Brown projected to {n_models} models",
            Expect.at_least(reliability), computed_by=seed_statistics,
            mechanism="on: the models' real training subsets; off: random-subset masks "
            "(membership independent of training)" + _RELATION_ONLY,
            manipulation=Expect.greater(CM_GAP_MARGIN), manipulation_what="mean over pairs of "
            f"TM − GS (probability): > {CM_GAP_MARGIN:g} on (models predict what they trained on "
            "better), not off",
            balance_what="mean share of pairs in a model's training subset",
            balance_tolerance=0.0),
        ClaimSpec(
            "features-predict-cm", "Surface features predict CM on held-out pairs",
            "§5 (r axis 0.5–1)",
            f"held-out Pearson r for CM, better of MLP (100, 100) and linear, mean over "
            f"{n_splits} splits", Expect.at_least(predict_r), computed_by=seed_statistics,
            mechanism="on: the map as measured; off: TM/GS/CM permuted across pairs"
            + _RELATION_ONLY),
        ClaimSpec(
            "signals-predict-cm", "Features plus training signals predict CM on held-out pairs",
            "§5", f"held-out Pearson r for CM, better of MLP and linear, mean over {n_splits} "
            "splits", Expect.at_least(predict_r), computed_by=seed_statistics,
            mechanism="on: the map as measured; off: TM/GS/CM permuted across pairs"
            + _RELATION_ONLY),
        ClaimSpec(
            "signals-add", "Training signals improve the prediction of CM", "§5",
            f"Δ held-out Pearson r for CM (features + signals − features, better estimator "
            f"of each), mean over {n_splits} splits", Expect.greater(0.0),
            computed_by=seed_statistics,
            mechanism="on: the signals of the full-data run; off: the signals permuted across "
            "pairs" + _RELATION_ONLY),
        ClaimSpec(
            "removal-memorised-logprob", "Removing memorised pairs lowers the test "
            "log-probability more than removing random pairs", "§6.1 (our reading)",
            "Δ test log-probability per token, nats (memorised − random removal)",
            Expect.less(0.0), computed_by=seed_statistics, mechanism=test_mech,
            manipulation=test_expect, manipulation_what=test_check, **test_balance),
        ClaimSpec(
            "removal-memorised-bleu", "Removing memorised pairs costs more BLEU than removing "
            "random pairs", "§6.1 (our reading)", "Δ corpus BLEU (memorised − random removal)",
            Expect.less(0.0), computed_by=seed_statistics, mechanism=test_mech,
            manipulation=test_expect, manipulation_what=test_check, **test_balance),
        ClaimSpec(
            "removal-grid-lowgs-logprob", "Removing low-GS regions of the map (the high-CM and "
            "unlearnt pairs) costs the test log-probability most",
            "§6.1 (our reading of the corpus names)",
            "Δ test log-probability per token, nats: mean over the grid cells with GS ≤ 0.4 of "
            "cell − random removal, per root seed (its own map)", Expect.less(0.0),
            computed_by=region_experiments, mechanism=test_mech, manipulation=test_expect,
            manipulation_what=test_check, **test_balance),
        ClaimSpec(
            "specialised-bleu-hal-bleu", "A corpus of pairs predicted high-TM below the diagonal "
            "(bleu_hal) gives higher BLEU than a random corpus of the same size",
            "§6.2 (our reading of the corpus names)",
            "Δ corpus BLEU, beam search (bleu_hal − random corpus), per root seed",
            Expect.greater(0.0), computed_by=region_experiments,
            mechanism="on: the corpus the polygon selects on the predicted map; off: the same "
            "polygon on the predicted positions permuted across pairs" + _RELATION_ONLY),
        ClaimSpec(
            "specialised-logprob-logprob", "A corpus of pairs predicted low-GS (log_probability) "
            "gives a higher test log-probability than a random corpus",
            "§6.2 (our reading of the corpus names)",
            "Δ test log-probability per token, nats (log_probability − random corpus), per "
            "root seed", Expect.greater(0.0), computed_by=region_experiments,
            mechanism="on: the corpus the polygon selects on the predicted map; off: the same "
            "polygon on the predicted positions permuted across pairs" + _RELATION_ONLY),
    ]
    for metric, name in (("tm", "TM"), ("gs", "GS"), ("cm", "CM")):
        specs.append(ClaimSpec(
            f"crosslingual-{metric}", f"{name} of the same source sentences agrees across "
            "target languages", "§4 (cross-language heatmaps, section4.py::compare_languages)",
            f"lowest, over language pairs, lower 95% bootstrap bound of the Spearman ρ of {name} "
            f"between two languages' maps ({n_languages} languages)", Expect.greater(0.0),
            computed_by=crosslingual_statistics,
            mechanism="on: the maps matched by source sentence; off: each language's rows "
            "matched to other sources (pairing permuted)" + _RELATION_ONLY + "; the world "
            "shares the source side (rare words, duplicates, idiom phrases) by construction, so "
            "agreement is partly planted (an off world drawing the phenomena per language is "
            "not built yet)",
            manipulation=margin, manipulation_what="share of rows matched to the same source "
            f"sentence in every language: > {MANIPULATION_MARGIN:g} on, not off"))
    specs += [
        ClaimSpec(
            "crosslingual-transfer-cm", "The map predictor trained on one language predicts CM "
            "in the other languages", "§5 (trained on DE, tested on each; r axis 0.5–1)",
            "held-out Pearson r for CM, train ≠ test language, mean over the cells, better of "
            "MLP (100, 100) and linear", Expect.at_least(predict_r),
            computed_by=crosslingual_statistics,
            mechanism="on: the maps as measured; off: TM/GS/CM permuted across pairs in every "
            "language" + _RELATION_ONLY),
        ClaimSpec(
            "crosslingual-strength", "How strongly the maps agree across languages (the values "
            "of the paper's 5×5 heatmaps, e.g. CM agreeing less than TM and GS)", "§4",
            "Spearman ρ per language pair and metric", Expect.greater(0.0),
            computed_by=crosslingual_statistics,
            not_testable="the world settles it: the source side (lengths, rare words, "
            "duplicates, idiom phrases) is shared by construction and the per-language "
            "differences (which idioms are idiomatic, noisy pairs, grammar variant) are planted "
            "at rates we chose, so the size of ρ follows from those rates; the paper's values "
            "are not verified"),
    ]
    return specs


def thresholds(specs: Sequence[ClaimSpec], ids: Sequence[str] | None = None
               ) -> dict[str, float]:
    """``{claim id: threshold}`` of the testable specs (the figures' dotted lines), for
    ``ids`` or every spec."""
    return {s.id: s.expect.threshold for s in specs
            if not s.not_testable and (ids is None or s.id in ids)}
