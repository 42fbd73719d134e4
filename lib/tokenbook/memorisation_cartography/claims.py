"""The memorisation chapter's claims as library specs.

:func:`claim_specs` declares every claim the chapter reports (Dankers, Titov & Hupkes, EMNLP
2023) as a :class:`tokenbook.claims.ClaimSpec`: the wording and section, the statistic with its
unit, the expectation, the function that computes it, the mechanism (what *on* plants and what
*off* removes; "there is a relation" only where the off control permutes everything), the
manipulation check, the known answer from the generator alone where it gives one (the planted
labels) and the balance check (computed per seed by
:mod:`tokenbook.memorisation_cartography.checks`). The chapter judges them in one call
(``judge_claims(claim_specs(...), seed_table)``) and its figures read the thresholds from the
same specs (:func:`thresholds`). :func:`region_seed_table` gives the §6.1 grid and §6.2 corpora
claims as a tidy seed table with their test-set checks.
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

import numpy as np
import pandas as pd

from tokenbook.claims import BALANCE_PREFIX, KNOWN_PREFIX, MANIPULATION_PREFIX, Claim, ClaimSpec
from tokenbook.memorisation_cartography.checks import (CM_GAP_MARGIN, MANIPULATION_MARGIN,
                                                       SELECTION_MARGIN, idioms_still_taught,
                                                       region_token_share, world_lexicon)
from tokenbook.memorisation_cartography.experiments import (LOW_GS, PERMUTED, REGION_CLAIM_IDS,
                                                            SPECIALISED_POLYGON,
                                                            crosslingual_statistics,
                                                            grid_conditions,
                                                            region_claim_values,
                                                            region_experiments, seed_statistics,
                                                            seed_value)
from tokenbook.memorisation_cartography.removal import source_token_counts
from tokenbook.verdicts import Expect

__all__ = ["claim_specs", "thresholds", "region_seed_table", "paper_claims", "CLAIM_ORDER"]

PAPER = "Dankers, Titov & Hupkes 2023"

#: every claim id the chapter reports at tiny scale, in the book's order
CLAIM_ORDER = ("idiom-high-cm", "rare-high-cm", "noisy-unlearnt", "cm-stable",
               "features-predict-cm", "signals-predict-cm", "signals-add",
               "removal-memorised-logprob", "removal-memorised-bleu",
               "removal-grid-lowgs-logprob", "specialised-bleu-hal-bleu",
               "specialised-logprob-logprob", "crosslingual-tm", "crosslingual-gs",
               "crosslingual-cm", "crosslingual-transfer-cm", "crosslingual-strength")

_REMOVAL_KNOWN = ("from the planted labels: the share of the scored test sentences whose "
                  "translation the kept pairs still teach (a sentence with an idiom needs a "
                  "kept pair planted as that idiom; checks.idioms_still_taught), memorised − "
                  "random removal — a difference of shares, the sign the Δ should have")
_ORACLE_MAP_KNOWN = ("the same statistic, under the same null, on the generator's map: every "
                     "model scores a pair 1 when it trained on it or another pair teaches its "
                     "target, else 0 (checks.oracle_scores), so CM is 1 on the idiom, "
                     "rare-word and noisy pairs and 0 elsewhere")
_RELATION_ONLY = ("; this null permutes every relation, so the claim tested is only that "
                  "there is a relation")


# --------------------------------------------------------------------------- generator oracles
def region_seed_table(results, arts: Mapping[int, Any]) -> pd.DataFrame:
    """The §6.1 grid and §6.2 corpora claims as a tidy seed table (``seed, mechanism,
    claim_id, value``; ``seed`` the root seed whose map was used), with the manipulation and
    balance rows of ``removal-grid-lowgs-logprob`` (the same test-set checks as the removal
    claims) and its known answer (the removal claims' planted-label oracle per low-GS cell,
    :func:`~tokenbook.memorisation_cartography.checks.idioms_still_taught`: share of the scored
    test sentences still taught, cell − random removal, mean over the cells with GS ≤ 0.4).
    ``results``: :class:`~tokenbook.memorisation_cartography.experiments.RegionResults` with one
    model seed per root seed or several (their mean per root seed); ``arts``: the root seeds'
    :class:`~tokenbook.memorisation_cartography.experiments.Artefacts`.

    The §6.2 claims get the same planted-label known answer on the corpus each *keeps* (the
    whole test set scored; on: the polygon's corpus − the random corpus, off: the polygon on
    permuted positions − the random corpus), a manipulation check (share of the corpus' source
    tokens inside its polygon on the measured map,
    :func:`~tokenbook.memorisation_cartography.checks.region_token_share`, minus the random
    corpus' share) and a balance check (the corpus' share of all source tokens), read from
    ``results.kept``."""
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
    grid = results.grid
    low_cells = sorted(set(grid.loc[grid["gs"] <= LOW_GS + 1e-9, "condition"]))
    n_cells = grid.loc[grid["condition"] != "random", "condition"].nunique()
    grid_size = int(round((np.sqrt(8 * n_cells + 1) - 1) / 2))     # n_cells = s(s + 1)/2
    for r in sorted(set(roots)):
        test = arts[r].corpus.test if r in arts else None
        if test is None or "uses_idiom" not in test.columns:
            continue
        art = arts[r]
        removed, _ = grid_conditions(art, grid_size)
        lexicon = world_lexicon(art.corpus.key)
        for mech in ("on", "off"):
            scored = test if mech == "on" else test[~test["uses_idiom"].astype(bool)]
            taught = {c: float(idioms_still_taught(scored, art.corpus.pairs, lexicon,
                                                   removed[c]).mean())
                      for c in [*low_cells, "random"]}
            rows.append((r, mech, KNOWN_PREFIX + "removal-grid-lowgs-logprob",
                         float(np.mean([taught[c] - taught["random"] for c in low_cells]))))
            rows.append((r, mech, MANIPULATION_PREFIX + "removal-grid-lowgs-logprob",
                         float(scored["uses_idiom"].astype(bool).mean())))
            rows.append((r, mech, BALANCE_PREFIX + "removal-grid-lowgs-logprob",
                         float(scored["source"].str.split().str.len().mean())))
        rows += _specialised_rows(r, art, lexicon, getattr(results, "kept", {}).get(r))
    return pd.DataFrame(rows, columns=["seed", "mechanism", "claim_id", "value"])


def _specialised_rows(root: int, art, lexicon: pd.DataFrame,
                      kept: Mapping[str, np.ndarray] | None) -> list[tuple]:
    """The known-answer, manipulation and balance rows of the §6.2 claims of one root seed
    (none when the results do not hold the corpora: region results made before they did)."""
    if not kept or "random" not in kept:
        return []
    pairs, test = art.corpus.pairs, art.corpus.test
    all_ids = pairs["pair_id"].to_numpy()
    sources = pairs["source"].tolist()
    tokens = source_token_counts(sources)
    cm = art.cm()

    def taught(ids) -> float:
        return float(idioms_still_taught(test, pairs, lexicon, np.setdiff1d(all_ids, ids)).mean())

    rows = []
    for cid, polygon in SPECIALISED_POLYGON.items():
        for mech, name in (("on", polygon), ("off", f"{polygon}{PERMUTED}")):
            if name not in kept:
                continue
            ids, rnd = kept[name], kept["random"]
            rows.append((root, mech, KNOWN_PREFIX + cid, taught(ids) - taught(rnd)))
            rows.append((root, mech, MANIPULATION_PREFIX + cid,
                         region_token_share(cm, ids, sources, polygon)
                         - region_token_share(cm, rnd, sources, polygon)))
            rows.append((root, mech, BALANCE_PREFIX + cid,
                         float(tokens[np.asarray(ids, dtype=int)].sum() / tokens.sum())))
    return rows


# --------------------------------------------------------------------------- the specs
def _pairing_check(read: str, balance_what: str = "pairs in the predictor's table"
                   ) -> dict[str, Any]:
    """The manipulation and balance fields of a claim whose off control permutes a map or the
    signals across pairs: Spearman ρ over pairs of ``read``, > the margin on, not off."""
    return dict(manipulation=Expect.greater(MANIPULATION_MARGIN),
                manipulation_what=f"Spearman ρ over pairs of {read}: > {MANIPULATION_MARGIN:g} "
                "on, not off (the permutation breaks the pairing)",
                balance_what=balance_what, balance_tolerance=0.0)


def _specialised_checks(polygon: str) -> dict[str, Any]:
    """The §6.2 claims' manipulation, known-answer and balance fields (rows of
    :func:`region_seed_table`)."""
    return dict(
        manipulation=Expect.greater(SELECTION_MARGIN),
        manipulation_what=f"share of the corpus' source tokens from pairs inside the {polygon} "
        "polygon on the measured map, minus the random corpus' share: the predicted map "
        f"concentrates the corpus in its region by > {SELECTION_MARGIN:g} on, not off",
        known_answer_how="from the planted labels: the share of the test sentences whose "
        "translation the corpus still teaches (a sentence with an idiom needs a kept pair "
        "planted as that idiom; checks.idioms_still_taught), corpus − random corpus — a "
        "difference of shares, the sign the Δ should have",
        balance_what="the corpus' share of all source tokens (the budget)",
        balance_tolerance=0.02)


#: the tiny cross-lingual claims' threshold on the phenomenon pairs' Spearman ρ (Cohen's
#: "medium" correlation; ours): the off world, with phenomena co-located only by chance,
#: keeps ρ a little above 0
CROSSLINGUAL_AGREEMENT = 0.3


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
    margin = Expect.greater(MANIPULATION_MARGIN)
    map_check = _pairing_check("the CM the predictor is fitted to with the pairs' own CM")
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
            balance_tolerance=0.0, known_answer_how=_ORACLE_MAP_KNOWN),
        ClaimSpec(
            "features-predict-cm", "Surface features predict CM on held-out pairs",
            "§5 (r axis 0.5–1)",
            f"held-out Pearson r for CM, better of MLP (100, 100) and linear, mean over "
            f"{n_splits} splits", Expect.at_least(predict_r), computed_by=seed_statistics,
            mechanism="on: the map as measured; off: TM/GS/CM permuted across pairs"
            + _RELATION_ONLY, known_answer_how=_ORACLE_MAP_KNOWN, **map_check),
        ClaimSpec(
            "signals-predict-cm", "Features plus training signals predict CM on held-out pairs",
            "§5", f"held-out Pearson r for CM, better of MLP and linear, mean over {n_splits} "
            "splits", Expect.at_least(predict_r), computed_by=seed_statistics,
            mechanism="on: the map as measured; off: TM/GS/CM permuted across pairs"
            + _RELATION_ONLY, known_answer_how=_ORACLE_MAP_KNOWN, **map_check),
        ClaimSpec(
            "signals-add", "Training signals improve the prediction of CM", "§5",
            f"Δ held-out Pearson r for CM (features + signals − features, better estimator "
            f"of each), mean over {n_splits} splits", Expect.greater(0.0),
            computed_by=seed_statistics,
            mechanism="on: the signals of the full-data run; off: the signals permuted across "
            "pairs" + _RELATION_ONLY, known_answer_how=_ORACLE_MAP_KNOWN,
            **_pairing_check("the training signals the predictor reads with the pairs' own, "
                             "mean over signals")),
        ClaimSpec(
            "removal-memorised-logprob", "Removing memorised pairs lowers the test "
            "log-probability more than removing random pairs", "§6.1 (our reading)",
            "Δ test log-probability per token, nats (memorised − random removal)",
            Expect.less(0.0), computed_by=seed_statistics, mechanism=test_mech,
            manipulation=test_expect, manipulation_what=test_check,
            known_answer_how=_REMOVAL_KNOWN, **test_balance),
        ClaimSpec(
            "removal-memorised-bleu", "Removing memorised pairs costs more BLEU than removing "
            "random pairs", "§6.1 (our reading)", "Δ corpus BLEU (memorised − random removal)",
            Expect.less(0.0), computed_by=seed_statistics, mechanism=test_mech,
            manipulation=test_expect, manipulation_what=test_check,
            known_answer_how=_REMOVAL_KNOWN, **test_balance),
        ClaimSpec(
            "removal-grid-lowgs-logprob", "Removing low-GS regions of the map (the high-CM and "
            "unlearnt pairs) costs the test log-probability most",
            "§6.1 (our reading of the corpus names)",
            "Δ test log-probability per token, nats: mean over the grid cells with GS ≤ 0.4 of "
            "cell − random removal, per root seed (its own map)", Expect.less(0.0),
            computed_by=region_experiments, mechanism=test_mech, manipulation=test_expect,
            manipulation_what=test_check,
            known_answer_how=_REMOVAL_KNOWN.replace("memorised − random removal",
                                                    "cell − random removal, mean over the "
                                                    "cells with GS ≤ 0.4"),
            **test_balance),
        ClaimSpec(
            "specialised-bleu-hal-bleu", "A corpus of pairs predicted high-TM below the diagonal "
            "(bleu_hal) gives higher BLEU than a random corpus of the same size",
            "§6.2 (our reading of the corpus names)",
            "Δ corpus BLEU, beam search (bleu_hal − random corpus), per root seed",
            Expect.greater(0.0), computed_by=region_experiments,
            mechanism="on: the corpus the polygon selects on the predicted map; off: the same "
            "polygon on the predicted positions permuted across pairs" + _RELATION_ONLY,
            **_specialised_checks("bleu_hal")),
        ClaimSpec(
            "specialised-logprob-logprob", "A corpus of pairs predicted low-GS (log_probability) "
            "gives a higher test log-probability than a random corpus",
            "§6.2 (our reading of the corpus names)",
            "Δ test log-probability per token, nats (log_probability − random corpus), per "
            "root seed", Expect.greater(0.0), computed_by=region_experiments,
            mechanism="on: the corpus the polygon selects on the predicted map; off: the same "
            "polygon on the predicted positions permuted across pairs" + _RELATION_ONLY,
            **_specialised_checks("log_probability")),
    ]
    for metric, name in (("tm", "TM"), ("gs", "GS"), ("cm", "CM")):
        specs.append(ClaimSpec(
            f"crosslingual-{metric}", f"{name} of the same source sentences agrees across "
            "target languages", "§4 (cross-language heatmaps, section4.py::compare_languages)",
            f"Spearman ρ of {name} between two languages' maps ({n_languages} languages) over "
            "the pairs whose source carries a source-side phenomenon (idiom or literal-idiom "
            "phrase, rare word, duplicate) in the first, mean over ordered language pairs "
            "(our tiny reading: the shared regular sentences make the maps agree in both "
            "worlds, so the test looks where the mechanism acts)",
            Expect.greater(CROSSLINGUAL_AGREEMENT), computed_by=crosslingual_statistics,
            mechanism="on: the world's phenomena sit on the shared source sentences; off: the "
            "same root seed's world with the same phenomenon sentences placed per language "
            "(each language's own positions; every other position holds the regular sentence "
            "all languages share there), with its own ensembles — only where the phenomena sit "
            "differs, so a phenomenon pair of one language meets, mostly, a regular source in "
            "the others; the subset masks follow each language's duplicate groups",
            manipulation=margin, manipulation_what="share of the first language's source-side "
            "phenomenon pairs that hold the same source in every language: > "
            f"{MANIPULATION_MARGIN:g} on, not off",
            known_answer_how="the same statistic on the generator's label 'no other pair "
            "teaches this target' (idiomatic idioms, rare words, noisy targets) in place of "
            "the map; no model",
            balance_what="mean source words per pair over the languages",
            balance_tolerance=0.5,
            note=f"threshold ρ > {CROSSLINGUAL_AGREEMENT:g}: a medium correlation by Cohen's "
            "convention (ours); chance co-location makes the off world's ρ a little above 0"))
    specs += [
        ClaimSpec(
            "crosslingual-transfer-cm", "The map predictor trained on one language predicts CM "
            "in the other languages", "§5 (trained on DE, tested on each; r axis 0.5–1)",
            "held-out Pearson r for CM, train ≠ test language, mean over the cells, better of "
            "MLP (100, 100) and linear", Expect.at_least(predict_r),
            computed_by=crosslingual_statistics,
            mechanism="on: the maps as measured; off: TM/GS/CM permuted across pairs in every "
            "language" + _RELATION_ONLY, known_answer_how=_ORACLE_MAP_KNOWN,
            **_pairing_check("the CM the predictors read with the pairs' own, mean over "
                             "languages", balance_what="pairs mapped per language")),
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


#: the §6.1/§6.2 region claims at paper scale: (id, comparison, wording, statistic, source)
_PAPER_REGION_CLAIMS = (
    ("removal-grid-lowgs-logprob", Claim.less, "Removing low-GS regions of the map costs the "
     "test log-probability most", "Δ test log-probability per token, nats: mean over the grid "
     "cells with GS ≤ 0.4 of cell − random removal", "§6.1 (our reading)"),
    ("specialised-bleu-hal-bleu", Claim.greater, "The bleu_hal corpus gives higher BLEU than a "
     "random corpus of the same size", "Δ corpus BLEU, beam search (bleu_hal − random corpus)",
     "§6.2 (our reading)"),
    ("specialised-logprob-logprob", Claim.greater, "The log_probability corpus gives a higher "
     "test log-probability than a random corpus", "Δ test log-probability per token, nats "
     "(log_probability − random corpus)", "§6.2 (our reading)"),
)


def paper_claims(seed_table: pd.DataFrame, crosslingual_table: pd.DataFrame, regions,
                 seed: int) -> list[Claim]:
    """The paper-scale claims (holds / does not hold) of one run on a real corpus: the map,
    predictor and removal statistics of root seed ``seed`` (``seed_table``, mechanism on), the
    cross-lingual ones (``crosslingual_table``) and the region claims as the mean over the
    model seeds of ``regions``
    (:func:`tokenbook.memorisation_cartography.experiments.region_claim_values`). The idiom
    claim is not testable: a real corpus has no planted labels."""
    def value(table: pd.DataFrame, claim_id: str) -> float:
        return seed_value(table, claim_id, seed)

    claims = [
        Claim.not_testable("idiom-high-cm", "Idiomatic pairs get higher CM than regular pairs",
                           statistic="AUROC of CM", paper="§4",
                           note="a real corpus has no planted labels"),
        Claim.at_least("cm-stable", "CM ranks pairs reliably across ensembles",
                       statistic="split-half Spearman ρ, Spearman–Brown projected",
                       value=value(seed_table, "cm-stable"), threshold=0.7,
                       paper="§3 (estimator); 0.7 is our threshold"),
        Claim.at_least("features-predict-cm", "Surface features predict CM on held-out pairs",
                       statistic="held-out Pearson r for CM, better of MLP and linear",
                       value=value(seed_table, "features-predict-cm"), threshold=0.5,
                       paper="§5 (r axis 0.5–1)"),
        Claim.at_least("signals-predict-cm", "Features plus training signals predict CM",
                       statistic="held-out Pearson r for CM, better of MLP and linear",
                       value=value(seed_table, "signals-predict-cm"), threshold=0.5,
                       paper="§5"),
        Claim.greater("signals-add", "Training signals improve the prediction of CM",
                      statistic="Δ held-out Pearson r for CM",
                      value=value(seed_table, "signals-add"), paper="§5"),
        Claim.less("removal-memorised-bleu", "Removing memorised pairs costs more BLEU than "
                   "random removal", statistic="Δ corpus BLEU (memorised − random removal)",
                   value=value(seed_table, "removal-memorised-bleu"),
                   paper="§6.1 (our reading)", note="one removal seed at this setting"),
    ]
    claims += [Claim.greater(f"crosslingual-{metric}", f"{metric.upper()} of the same sources "
                             "agrees across target languages", statistic="lowest lower 95% "
                             "bootstrap bound of the Spearman ρ over language pairs",
                             value=value(crosslingual_table, f"crosslingual-{metric}"),
                             paper="§4")
               for metric in ("tm", "gs", "cm")]
    claims.append(Claim.at_least(
        "crosslingual-transfer-cm", "The map predictor trained on one language predicts CM in "
        "the others", statistic="held-out Pearson r for CM, train ≠ test, better of MLP and "
        "linear", value=value(crosslingual_table, "crosslingual-transfer-cm"), threshold=0.5,
        paper="§5"))
    for claim_id, compare, text, statistic, where in _PAPER_REGION_CLAIMS:
        values = region_claim_values(regions, claim_id)["values_on"]
        claims.append(compare(claim_id, text, statistic=statistic,
                              value=sum(values) / len(values), paper=where,
                              note=f"mean over {len(values)} model seeds"))
    return claims
