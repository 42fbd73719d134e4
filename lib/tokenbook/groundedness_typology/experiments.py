"""The groundedness chapter's experiments (Haley et al. 2025), one call each.

* :func:`class_analyses` — everything the claims read from one word table: class summary,
  lexical vs functional, the cline, rank agreement (:mod:`tokenbook.groundedness_typology.measures`).
* per-seed statistics, each a small tested function: :func:`share_languages` (share of
  languages where a per-language check holds) and :func:`norms_correlation` (Spearman ρ of
  type-level groundedness with the concreteness rating).
* :func:`seed_claims` / :func:`run_seeds` — every claim's statistic for one seed, mechanism on
  or off, over seeds (the tiny setting of :mod:`tokenbook.grounded.tiny`, shared with the UID
  chapter: same cached models and word tables).
* :data:`CLAIMS` — the claims as the sources word them; :func:`paper_claims` — their
  paper-scale verdicts. The tiny-scale specs and verdicts are in
  :mod:`tokenbook.groundedness_typology.claims`.
* :func:`image_baselines` — grounding or mere fine-tuning? Mean G per word class with the
  captioner given the true image, a mismatched image and a blank image (the word table of
  :func:`tokenbook.grounded.tiny.image_baseline_words`).

Sources (method notes §1.1, §1.5): the NAACL abstract ("captures the contentfulness asymmetry
between functional and lexical classes … but contradicts the view that functional classes do
not convey content"), the arXiv abstract ("universal trends in the hierarchy of groundedness
(e.g., nouns > adjectives > verbs)"; "partly correlates with psycholinguistic concreteness
norms in English"), and the cross-lingual τ/ρ heatmaps of the code (§1.4).
"""

from __future__ import annotations

from functools import partial
from typing import Any, Mapping, Sequence

import numpy as np
import pandas as pd
from scipy.stats import spearmanr

from tokenbook.claims import BALANCE_PREFIX, KNOWN_PREFIX, MANIPULATION_PREFIX, Claim
from tokenbook.grounded import tiny as gt
from tokenbook.groundedness_typology import measures as gr
from tokenbook.minsizes import counts_note, shortfall, smallest, units_per_group
from tokenbook.parallel import dask_client
from tokenbook.robustness import over_seeds
from tokenbook.seeds import derive_seed
from tokenbook.stats import cluster_bootstrap_ci
from tokenbook.validation import check_choice, check_positive_int, check_share, check_table

__all__ = ["PAPER", "CLAIMS", "NORMS_CLAIM", "AGREEMENT_CLAIM", "independent_pos_systems",
           "with_pos_systems", "shared_class_share", "class_analyses", "share_languages",
           "norms_correlation", "seed_claims", "run_seeds", "paper_claims", "IMAGE_CONDITIONS",
           "image_baselines", "PAPER_SIZES", "size_requirements"]

PAPER = "Haley et al. 2025"


def class_analyses(words: pd.DataFrame, *, min_class_tokens: int = 20, n_boot: int = 1000,
                   n_perm: int = 1000, boot_seed: int = 0, level: float = 0.95) -> dict:
    """The class-level analyses of one word table (``s_U, s_P`` or ``groundedness``).

    Returns ``words`` (with ``groundedness``), ``summary`` (class means with caption-clustered
    CIs), ``lexfun`` (:func:`tokenbook.groundedness_typology.measures.lexical_vs_functional`), ``cline``, ``ranks``,
    ``agreement_test`` (permutation test of the mean pairwise Kendall τ: always the keys
    ``mean_tau, mean_rho, p_perm, n_languages, n_classes, n_perm``, the statistics NaN with
    fewer than 2 languages or 3 classes) and ``min_class_tokens``. Works from one language up.
    """
    check_table(words, "words", columns=["lang", "unit_id", "upos"])
    if "groundedness" not in words:
        words = gr.add_groundedness(words)
    summary = gr.class_summary(words, min_count=min_class_tokens, n_boot=n_boot,
                               seed=boot_seed, level=level)
    ranks = gr.rank_vectors(summary)
    # rank_agreement_test returns every key (NaN statistics) below 2 languages or 3 classes
    return {"words": words, "summary": summary,
            "lexfun": gr.lexical_vs_functional(words, n_boot=n_boot, seed=boot_seed,
                                               level=level),
            "cline": gr.cline_holds(summary), "ranks": ranks,
            "agreement_test": gr.rank_agreement_test(ranks, n_perm=n_perm, seed=boot_seed),
            "min_class_tokens": min_class_tokens}


def share_languages(lexfun: pd.DataFrame, check: str, *, alpha: float = 0.05) -> float:
    """Share of languages where a per-language check holds, from ``lexical_vs_functional``:

    * ``"lexical-gt-functional"``: mean(lexical) − mean(functional) > 0 with BH q < ``alpha``;
    * ``"functional-above-zero"``: functional mean > 0 with BH q < ``alpha`` (one-sided t).

    NaN when there are no languages.

    >>> lf = pd.DataFrame({"lang": ["a", "b"], "diff": [0.5, 0.4], "q_diff": [0.01, 0.3],
    ...                    "mean_functional": [0.1, -0.1], "q_functional_gt0": [0.01, 0.9]})
    >>> share_languages(lf, "lexical-gt-functional"), share_languages(lf, "functional-above-zero")
    (0.5, 0.5)
    """
    check_choice(check, "check", ("lexical-gt-functional", "functional-above-zero"))
    cols = ["diff", "q_diff"] if check == "lexical-gt-functional" else \
        ["mean_functional", "q_functional_gt0"]
    check_table(lexfun, "lexfun", columns=["lang", *cols])
    if lexfun.empty:
        return float("nan")
    x, q = lexfun[cols[0]].to_numpy(float), lexfun[cols[1]].to_numpy(float)
    return float(((x > 0) & (q < alpha)).mean())


def norms_correlation(words: pd.DataFrame, *, min_type_tokens: int = 5,
                      rating: str = "concreteness", alpha: float = 0.05) -> tuple[float, dict]:
    """Spearman ρ between type-level groundedness and ``rating`` over all types with at least
    ``min_type_tokens`` tokens (pooled over languages), counted as 0 when not significant
    (p ≥ ``alpha``); and the norms analysis summary (R², informativity)."""
    types = gr.type_table(words if "groundedness" in words else gr.add_groundedness(words),
                          min_tokens=min_type_tokens)
    types = types.dropna(subset=[rating])
    if len(types) < 5:
        return float("nan"), {"n_types": len(types)}
    summary, _ = gr.norms_analysis(types, norms=(rating,), frequency=None)
    rho, p = summary[f"spearman_{rating}"], summary[f"spearman_{rating}_p"]
    value = float(rho) if np.isfinite(rho) and p < alpha else (0.0 if np.isfinite(rho) else
                                                               float("nan"))
    return value, summary


#: id -> (claim as the source words it, statistic, source), in the book's order
CLAIMS: dict[str, tuple[str, str, str]] = {
    "lexical-gt-functional": (
        "Groundedness captures the contentfulness asymmetry between functional and lexical "
        "classes (lexical more grounded)",
        "share of languages with mean(lexical) − mean(functional) > 0, BH q < .05",
        f"{PAPER}, NAACL abstract"),
    "functional-above-zero": (
        "Groundedness contradicts the view that functional classes do not convey content; our "
        "reading: the functional classes' mean groundedness is above zero",
        "share of languages with functional mean > 0 (one-sided t, BH q < .05)",
        f"{PAPER}, NAACL abstract; author's thread"),
    "cline-noun-adj-verb": (
        "Universal trends in the hierarchy of groundedness (e.g., nouns > adjectives > verbs)",
        "share of languages with mean NOUN > mean ADJ > mean VERB",
        "Haley et al. 2024, arXiv abstract"),
    "rank-agreement": (
        "Our reading of the cross-lingual τ/ρ heatmaps: languages order the word classes alike",
        "permutation p-value of the mean pairwise Kendall τ of UPOS rank vectors",
        f"{PAPER}, code: compare_langs (notes §1.4)"),
    "partly-concreteness": (
        "Our measure partly correlates with psycholinguistic concreteness norms",
        "Spearman ρ of type-level groundedness with the concreteness rating (0 if p ≥ .05)",
        "Haley et al. 2024, arXiv abstract"),
}
#: the claim judged against concreteness norms (its mechanism is the norms', not the image's)
NORMS_CLAIM = "partly-concreteness"
#: the claim judged against languages whose part-of-speech systems are drawn independently
#: (its mechanism is the languages' shared word classes, not the image)
AGREEMENT_CLAIM = "rank-agreement"


def independent_pos_systems(words: pd.DataFrame, seed: int, *, min_class_tokens: int = 20
                            ) -> dict[str, dict[str, str]]:
    """Per language, a part-of-speech system of its own: a uniformly random permutation of the
    word classes :func:`tokenbook.groundedness_typology.measures.rank_vectors` would rank (the
    analysed UPOS with at least ``min_class_tokens`` tokens in every language), drawn from
    ``derive_seed(seed, "pos-system", lang)``. Returns ``{lang: {upos: new upos}}``.

    The rank-agreement claim's off world (:func:`seed_claims`): the same words, images and
    models (tags never enter training), but each language groups the words into classes its
    own way, so its class order is independent of the others' — only the shared classes, the
    claim's mechanism, are gone.
    """
    check_table(words, "words", columns=["lang", "upos"])
    check_positive_int(min_class_tokens, "min_class_tokens")
    rankable = sorted(_class_ranks(words, min_class_tokens).index.astype(str))
    systems = {}
    for lang in sorted(words["lang"].astype(str).unique()):
        rng = np.random.default_rng(derive_seed(seed, "pos-system", lang))
        systems[lang] = dict(zip(rankable, (str(u) for u in rng.permutation(rankable))))
    return systems


def with_pos_systems(words: pd.DataFrame, systems: Mapping[str, Mapping[str, str]]
                     ) -> pd.DataFrame:
    """``words`` with each language's UPOS renamed by its system
    (:func:`independent_pos_systems`; classes a system does not list keep their label)."""
    out = words.copy()
    upos = out["upos"].astype(str)
    out["upos"] = [systems.get(lang, {}).get(u, u) for lang, u in zip(out["lang"], upos)]
    return out


def shared_class_share(systems: Mapping[str, Mapping[str, str]]) -> float:
    """Mean over languages of the share of ranked classes a system leaves as they are: 1 when
    the languages share their classes; about 1/k for independent systems of k classes (the
    rank-agreement claim's manipulation check)."""
    shares = [np.mean([a == b for a, b in m.items()]) for m in systems.values() if m]
    return float(np.mean(shares)) if shares else float("nan")


def _class_ranks(words: pd.DataFrame, min_class_tokens: int) -> pd.DataFrame:
    """The languages' UPOS rank vectors (:func:`tokenbook.groundedness_typology.measures.
    rank_vectors`) from the class means alone (no bootstrap)."""
    return gr.rank_vectors(gr.class_summary(words, min_count=min_class_tokens, n_boot=0))


def _agreement_p(words: pd.DataFrame, *, min_class_tokens: int, n_perm: int,
                 boot_seed: int) -> float:
    """The rank-agreement statistic of one word table: the permutation p of the mean pairwise
    Kendall τ of the languages' UPOS rank vectors."""
    ranks = _class_ranks(words, min_class_tokens)
    return float(gr.rank_agreement_test(ranks, n_perm=n_perm, seed=boot_seed)["p_perm"])


def _statistics(an: dict, words: pd.DataFrame, *, min_type_tokens: int) -> dict[str, float]:
    cline = an["cline"]
    return {"lexical-gt-functional": share_languages(an["lexfun"], "lexical-gt-functional"),
            "functional-above-zero": share_languages(an["lexfun"], "functional-above-zero"),
            "cline-noun-adj-verb": float(cline["holds"].mean()) if len(cline) else float("nan"),
            "rank-agreement": float(an["agreement_test"]["p_perm"]),
            "partly-concreteness": norms_correlation(words, min_type_tokens=min_type_tokens)[0]
            if "concreteness" in words and words["concreteness"].notna().any()
            else float("nan")}


def seed_claims(seed: int, mechanism: str, *, boot_seed: int = 0, min_class_tokens: int = 20,
                min_type_tokens: int = 5, n_boot: int = 200, n_perm: int = 500,
                **tiny: Any) -> dict[str, float]:
    """Every typology claim's statistic for root ``seed``, mechanism ``on`` or ``off``
    (``tiny``: :class:`tokenbook.grounded.tiny.TinyParams` fields; analysis streams from
    ``boot_seed``), with the manipulation checks (``manipulation:<id>``) and the balance
    checks (``balance:<id>``: the scored caption words' mean text-only surprisal s_U, nats;
    for the norms claim the mean rating over (language, concept) pairs).

    ``partly-concreteness`` is judged on the true images' groundedness against the norms of
    :func:`tokenbook.grounded.tiny.tiny_norms` (on: each concept's own concreteness; off: the
    same ratings permuted across each language's concepts); its reference answer
    (``known:<id>``) is the same statistic with the count models' groundedness. The other claims' reference answers are
    their statistics on the count models' word table of the same setting and mechanism
    (:func:`tokenbook.grounded.tiny.reference_caption_words`: the same held-out captions, the
    same shuffle null, the same analysis streams)."""
    params = gt.TinyParams.from_mapping(tiny)
    bs = derive_seed(boot_seed, "bootstrap", seed)
    words = gr.add_groundedness(gt.caption_words(seed, params, mechanism))
    an = class_analyses(words, min_class_tokens=min_class_tokens, n_boot=n_boot,
                        n_perm=n_perm, boot_seed=bs)
    out = _statistics(an, words, min_type_tokens=min_type_tokens)
    reference = gr.add_groundedness(gt.reference_caption_words(seed, params, mechanism))
    known = _statistics(class_analyses(reference, min_class_tokens=min_class_tokens,
                                       n_boot=n_boot, n_perm=n_perm, boot_seed=bs),
                        reference, min_type_tokens=min_type_tokens)
    image_gain = gt.mean_gain(words, "s_U", "s_P")
    text_only = float(words["s_U"].mean())
    for cid in CLAIMS:
        if cid not in (NORMS_CLAIM, AGREEMENT_CLAIM):
            out[MANIPULATION_PREFIX + cid] = image_gain
            out[KNOWN_PREFIX + cid] = known[cid]
            out[BALANCE_PREFIX + cid] = text_only
    # the norms claim: the true images' groundedness against norms that follow the concepts'
    # concreteness (on) or the same ratings permuted across each language's concepts (off)
    norms = gt.tiny_norms(seed, params, mechanism)
    true_words = gr.add_groundedness(gt.caption_words(seed, params, "on"))
    out[NORMS_CLAIM] = norms_correlation(gt.with_norms(true_words, norms),
                                         min_type_tokens=min_type_tokens)[0]
    out[MANIPULATION_PREFIX + NORMS_CLAIM] = float(
        spearmanr(norms["concreteness"], norms["depicted"].astype(float)).statistic)
    out[BALANCE_PREFIX + NORMS_CLAIM] = gt.concept_rating_mean(norms)
    true_reference = (reference if mechanism == "on" else
                      gr.add_groundedness(gt.reference_caption_words(seed, params, "on")))
    out[KNOWN_PREFIX + NORMS_CLAIM] = norms_correlation(gt.with_norms(true_reference, norms),
                                                       min_type_tokens=min_type_tokens)[0]
    # the agreement claim: the true images' groundedness, the languages sharing their word
    # classes (on) or each grouping the same words its own way (off)
    systems = ({} if mechanism == "on" else
               independent_pos_systems(true_words, derive_seed(seed, "typology-pos-systems"),
                                       min_class_tokens=min_class_tokens))
    agreement = partial(_agreement_p, min_class_tokens=min_class_tokens, n_perm=n_perm,
                        boot_seed=bs)
    out[AGREEMENT_CLAIM] = agreement(with_pos_systems(true_words, systems))
    out[KNOWN_PREFIX + AGREEMENT_CLAIM] = agreement(with_pos_systems(true_reference, systems))
    out[MANIPULATION_PREFIX + AGREEMENT_CLAIM] = shared_class_share(systems) if systems else 1.0
    out[BALANCE_PREFIX + AGREEMENT_CLAIM] = float(true_words["s_U"].mean())
    return out


def run_seeds(seeds: Sequence[int], *, params: Mapping[str, Any], n_workers: int = 0,
              progress: bool = True) -> pd.DataFrame:
    """:func:`seed_claims` over ``seeds`` × {on, off}, cached per seed (resumable)."""
    task = partial(seed_claims, **dict(params))
    if n_workers and n_workers > 1:
        with dask_client(n_workers=n_workers) as client:
            return over_seeds(task, seeds, kind="typology-seed", params=dict(params),
                              client=client, progress=progress, seed_per_task=True)
    return over_seeds(task, seeds, kind="typology-seed", params=dict(params), progress=progress)


#: the paper's sizes (method notes §1.3, §2.4): 30 XM3600 languages, 3,600 images per language
#: (≥ 1 caption each); tokens per class: the chapter's ``min_class_tokens`` (the authors' types
#: need ≥ 50 tokens)
PAPER_SIZES = {"min_languages": 30, "min_captions": 3600}


def size_requirements(an: dict, *, min_languages: int = 30, min_captions: int = 3600
                      ) -> dict[str, list[tuple[str, int, int]]]:
    """Per claim, what it needs, with this run's counts (``(what, have, need)`` for
    :func:`tokenbook.minsizes.shortfall`).

    Every claim needs ``min_languages`` languages and ``min_captions`` captions in the smallest
    language; the class claims also need ``an["min_class_tokens"]`` tokens of each class they
    read in the smallest language (lexical and functional; NOUN, ADJ and VERB for the cline;
    3 classes with that many tokens in every language for the rank agreement).
    """
    words = an["words"]
    k = int(an.get("min_class_tokens", 1))
    caps = units_per_group(words, "unit_id")
    base = [("language(s)", len(caps), min_languages),
            ("captions in the smallest language", smallest(caps), min_captions)]
    langs = sorted(caps)
    upos = words["upos"].astype(str)
    kinds = np.where(upos.isin(gr.LEXICAL), "lexical",
                     np.where(upos.isin(gr.FUNCTIONAL), "functional", "other"))
    by_kind = pd.crosstab(words["lang"].astype(str), kinds).reindex(index=langs, fill_value=0)
    by_upos = pd.crosstab(words["lang"].astype(str), upos).reindex(index=langs, fill_value=0)
    lexfun_have = int(by_kind.reindex(columns=["lexical", "functional"], fill_value=0)
                      .to_numpy().min()) if langs else 0
    cline_have = int(by_upos.reindex(columns=list(gr.CLINE), fill_value=0).to_numpy().min()) \
        if langs else 0
    n_ranked = int(an["agreement_test"].get("n_classes", 0)) if langs else 0
    lexfun = base + [("lexical or functional tokens in the smallest language", lexfun_have, k)]
    return {"lexical-gt-functional": lexfun, "functional-above-zero": lexfun,
            "cline-noun-adj-verb": base + [("NOUN, ADJ or VERB tokens in the smallest "
                                            "language", cline_have, k)],
            "rank-agreement": base + [(f"classes with ≥ {k} tokens in every language",
                                       n_ranked, 3)],
            "partly-concreteness": []}


def paper_claims(an: dict, *, min_share: float = 0.8, norms_summary: dict | None = None,
                 min_languages: int = 30, min_captions: int = 3600) -> list[Claim]:
    """The paper-scale claims (holds / does not hold) from :func:`class_analyses`.

    Below the minimum sizes (:func:`size_requirements`; the paper's by default, see
    :data:`PAPER_SIZES`) a claim is *not testable* with the counts in its note; otherwise the
    note gives the counts the verdict rests on.
    """
    words = an["words"]
    stats = _statistics(an, words.assign(concreteness=np.nan) if "concreteness" in words
                        else words, min_type_tokens=1)
    reqs = size_requirements(an, min_languages=min_languages, min_captions=min_captions)
    claims = []
    for cid, (text, statistic, paper) in CLAIMS.items():
        short = shortfall(reqs[cid])
        if short:
            claims.append(Claim.not_testable(cid, text, statistic=statistic, paper=paper,
                                             note=short))
        elif cid == "rank-agreement":
            claims.append(Claim.less(cid, text, statistic=statistic, value=stats[cid],
                                     threshold=0.05, paper=paper,
                                     note=counts_note(reqs[cid])))
        elif cid == "partly-concreteness":
            if not norms_summary:
                claims.append(Claim.not_testable(cid, text, statistic=statistic, paper=paper,
                                                 note="no norms file given (norms_path)"))
                continue
            rho = norms_summary.get("spearman_concreteness", float("nan"))
            p = norms_summary.get("spearman_concreteness_p", float("nan"))
            claims.append(Claim.between(cid, text, statistic=statistic,
                                        value=rho if p < 0.05 else 0.0, low=0.1, high=0.9,
                                        paper=paper, note="“partly”: our reading"))
        else:
            claims.append(Claim.at_least(cid, text, statistic=statistic, value=stats[cid],
                                         threshold=min_share, paper=paper,
                                         note=counts_note(reqs[cid])))
    return claims


#: image condition → the captioner's surprisal column it uses in G = s_U − s_P(image)
IMAGE_CONDITIONS = {"true": "s_P", "mismatched": "s_P_mismatched", "blank": "s_P_blank"}


def image_baselines(words: pd.DataFrame, *, by: Sequence[str] = ("upos",),
                    classes: Sequence[str] = gr.POS_FOR_ANALYSIS, n_boot: int = 1000,
                    seed: int = 0, level: float = 0.95) -> pd.DataFrame:
    """Mean groundedness per word class under the true, a mismatched and a blank image (nats).

    ``words``: one row per word with ``lang, unit_id, upos, s_U`` and the captioner's
    surprisal of the word given its caption's own image (``s_P``), another scene's image
    (``s_P_mismatched``) and a blank image (``s_P_blank``) (see :data:`IMAGE_CONDITIONS`).
    For each group of ``by`` (default: UPOS, pooled over languages; only ``classes``) returns
    ``n`` and, per condition c, ``G_c`` = mean of s_U − s_P(c) with a seeded percentile
    bootstrap CI resampling captions (``G_c_ci_low``, ``G_c_ci_high``); and ``true_minus_blank``
    = G_true − G_blank = mean of s_P(blank) − s_P(true) with its CI: the part of G the *scene*
    explains, beyond what any image does to the captioner. All conditions of a group share the
    same bootstrap draws (seed ``derive_seed(seed, "image-baselines", *group)``). Words with
    a non-finite surprisal in any condition are dropped. Rows are sorted by ``G_true``
    (descending).

    >>> w = pd.DataFrame({"lang": "x", "unit_id": ["a", "a", "b", "b"],
    ...                   "upos": ["NOUN", "DET", "NOUN", "DET"], "s_U": 3.0,
    ...                   "s_P": [1.0, 2.5, 1.0, 2.5], "s_P_mismatched": [3.5, 2.9, 3.5, 2.9],
    ...                   "s_P_blank": 3.0})
    >>> t = image_baselines(w, n_boot=50)
    >>> t[["upos", "n", "G_true", "G_mismatched", "G_blank", "true_minus_blank"]].round(2)
       upos  n  G_true  G_mismatched  G_blank  true_minus_blank
    0  NOUN  2     2.0          -0.5      0.0               2.0
    1   DET  2     0.5           0.1      0.0               0.5
    """
    by = [by] if isinstance(by, str) else list(by)
    if not by:
        raise ValueError("by: name at least one column to group by (e.g. 'upos')")
    for col in by:
        check_choice(col, "by", ("lang", "upos", "class_kind"))
    cols = ["s_U", *IMAGE_CONDITIONS.values()]
    check_table(words, "words (image_baseline_words: s_U and s_P under the true, mismatched "
                "and blank images)", columns=["lang", "unit_id", "upos"], numeric=cols)
    check_positive_int(n_boot, "n_boot")
    check_share(level, "level", open_low=True)
    data = words[words["upos"].astype(str).isin(list(classes))].copy()
    values = data[cols].to_numpy(float)
    data = data[np.isfinite(values).all(axis=1)]
    data["upos"] = data["upos"].astype(str)
    data["class_kind"] = np.where(data["upos"].isin(gr.LEXICAL), "lexical",
                                  np.where(data["upos"].isin(gr.FUNCTIONAL), "functional",
                                           "other"))
    for cond, col in IMAGE_CONDITIONS.items():
        data[f"G_{cond}"] = data["s_U"] - data[col]
    data["true_minus_blank"] = data["s_P_blank"] - data["s_P"]
    measures = [*(f"G_{c}" for c in IMAGE_CONDITIONS), "true_minus_blank"]
    rows = []
    for key, g in data.groupby(by, sort=True):
        key = key if isinstance(key, tuple) else (key,)
        row = dict(zip(by, key))
        if "class_kind" not in row:
            row["class_kind"] = g["class_kind"].iloc[0] if "upos" in by else "all"
        row["n"] = int(len(g))
        boot_seed = derive_seed(seed, "image-baselines", *(str(k) for k in key))
        units = g["unit_id"].astype(str).to_numpy()
        for m in measures:
            x = g[m].to_numpy(float)
            lo, hi = cluster_bootstrap_ci(x, units, n_boot=n_boot, seed=boot_seed,
                                          level=level)
            row.update({m: float(x.mean()), f"{m}_ci_low": lo, f"{m}_ci_high": hi})
        rows.append(row)
    columns = [*by, *(["class_kind"] if "class_kind" not in by else []), "n",
               *(c for m in measures for c in (m, f"{m}_ci_low", f"{m}_ci_high"))]
    out = pd.DataFrame(rows, columns=columns)
    return out.sort_values("G_true", ascending=False, kind="mergesort").reset_index(drop=True)
