"""The UID chapter's experiments (Gay et al. 2026), one call each.

* :func:`caption_comparison` / :func:`story_comparison` — the paired U-vs-P (and story)
  comparisons of every UID measure per language (:func:`tokenbook.uid_grounding.measures.compare_conditions`).
* the per-seed statistics the verdicts are computed from, each a small tested function:
  :func:`share_lower` (share of languages where a condition lowers a measure, optionally
  significantly) and :func:`min_onset_enrichment`.
* :func:`seed_claims` — every claim's statistic for one seed with the mechanism on or off
  (the tiny setting of :mod:`tokenbook.grounded.tiny`); :func:`run_seeds` runs it over seeds
  through :func:`tokenbook.robustness.over_seeds` with a context-managed Dask client.
* :data:`CLAIMS` — the claims, worded as the sources word them; :func:`paper_claims` — their
  paper-scale verdicts. The tiny-scale specs and verdicts are in
  :mod:`tokenbook.uid_grounding.claims`.

Where the claims come from (method notes, ``grounding-uid-and-typology.md``): the abstract
(§2.1: "grounding on perception consistently smooths the distribution of information,
increasing both global and local uniformity across typologically diverse languages"; "in
visual narratives, grounding in both image and discourse contexts has additional effects, with
the strongest surprisal reductions occurring at the onset of discourse units"), Table 3 (Δ%
and BH stars per language), App. Table 4 (CV variants), §5 / Figs. 3–4 and 8–20 (Bloom-VIST).
The notes could not verify how many languages are significant, so that claim is marked "our
reading".
"""

from __future__ import annotations

from dataclasses import replace
from functools import partial
from typing import Any, Mapping, Sequence

import numpy as np
import pandas as pd

from tokenbook.claims import BALANCE_PREFIX, KNOWN_PREFIX, MANIPULATION_PREFIX, Claim
from tokenbook.grounded import tiny as gt
from tokenbook.minsizes import counts_note, shortfall, smallest
from tokenbook.parallel import dask_client
from tokenbook.robustness import over_seeds
from tokenbook.seeds import derive_seed
from tokenbook.uid_grounding import measures as uid
from tokenbook.validation import check_table

__all__ = ["UID_METRICS", "PAPER", "caption_comparison", "story_comparison",
           "discourse_comparison", "share_lower", "language_deltas", "language_entries",
           "language_table",
           "LANGUAGE_PREFIX",
           "min_onset_enrichment", "ONSET_CONTEXTS", "ONSET_PREFIX", "ONSET_ROWS",
           "onset_contexts",
           "onset_enrichment_of", "onset_context_table", "onset_manipulation",
           "ONSET_CLAIM", "onset_world", "with_onset_world",
           "STORY_WORD_KEYS", "story_contexts_by_class",
           "seed_claims", "run_seeds",
           "paper_claims", "CLAIMS",
           "CAPTION_CLAIMS", "STORY_CLAIMS", "POOLED_CLAIMS", "POOLED_TWINS", "PAPER_SIZES",
           "size_requirements",
           "pooled_delta", "known_vs_trained", "grounding_by_class", "wrong_about_the_picture"]

PAPER = "Gay et al. 2026"
UID_METRICS = ("uid_v", "uid_lv", "cv_global", "cv_local")
STORY_CONTRASTS = (("P", "U"), ("D", "U"), ("PD", "P"), ("PD", "D"))


# --------------------------------------------------------------------------- comparisons
def caption_comparison(words: pd.DataFrame, *, min_words: int = 3,
                       metrics: Sequence[str] = UID_METRICS, n_boot: int = 2000,
                       boot_seed: int = 0, level: float = 0.95) -> pd.DataFrame:
    """Per language and metric: P vs U over captions (:func:`tokenbook.uid_grounding.measures.compare_conditions`).

    ``words``: caption word table with ``s_U, s_P`` (nats). Units with an unscorable word are
    dropped first. The bootstrap draws from ``boot_seed`` (an analysis seed).
    """
    check_table(words, "words", columns=["lang", "unit_id", "word_idx"], numeric=["s_U", "s_P"])
    scored, _ = uid.drop_unscorable(words, ("s_U", "s_P"))
    measures = uid.unit_measures(scored, {"U": "s_U", "P": "s_P"}, min_words=min_words)
    return uid.compare_conditions(measures.table, a="P", b="U", metrics=list(metrics),
                                  n_boot=n_boot, seed=boot_seed, level=level)


def story_comparison(story_measures: pd.DataFrame, *, metrics: Sequence[str] = ("uid_v",
                                                                                  "cv_global"),
                     n_boot: int = 2000, boot_seed: int = 0, level: float = 0.95
                     ) -> pd.DataFrame:
    """The four story contrasts (P vs U, D vs U, P+D vs P, P+D vs D) per language and metric,
    stacked with a ``contrast`` column (``"PD vs P"`` …)."""
    return pd.concat([
        uid.compare_conditions(story_measures, a=a, b=b, metrics=list(metrics),
                               unit=["lang", "story_id", "sent_idx"], n_boot=n_boot,
                               seed=boot_seed, level=level).assign(contrast=f"{a} vs {b}")
        for a, b in STORY_CONTRASTS], ignore_index=True)


def discourse_comparison(story_measures: pd.DataFrame, *, reference: str = "U",
                         condition: str = "D", metrics: Sequence[str] = ("uid_v",),
                         n_boot: int = 2000, boot_seed: int = 0, level: float = 0.95
                         ) -> pd.DataFrame:
    """A discourse ``condition`` (D, or PD: image and discourse) against ``reference``: for D
    ``"U"`` (no discourse, the paper's contrast, as in :func:`story_comparison`) or
    ``"D_other"`` (another story's pages, the tiny claims' contrast), for PD ``"P"`` or
    ``"PD_other"``; with a ``contrast`` column ``"<condition> vs <reference>"``."""
    return uid.compare_conditions(story_measures, a=condition, b=reference,
                                  metrics=list(metrics), unit=["lang", "story_id", "sent_idx"],
                                  n_boot=n_boot, seed=boot_seed, level=level).assign(
                                      contrast=f"{condition} vs {reference}")


# --------------------------------------------------------------------------- statistics
def known_vs_trained(exact: pd.DataFrame, trained: pd.DataFrame,
                     metrics: Sequence[str] = ("uid_v", "uid_lv", "cv_global")) -> pd.DataFrame:
    """Δ% per language (rows) of each metric by the generator's exact surprisals (the known
    answer, ``<metric> exact``) beside the trained pair's (``<metric> trained``).

    ``exact`` and ``trained``: :func:`caption_comparison` tables (``lang, metric,
    delta_pct``), the first on :func:`tokenbook.grounded.tiny.exact_caption_words`.

    >>> e = pd.DataFrame({"lang": ["a"], "metric": "uid_v", "delta_pct": [-50.0]})
    >>> t = pd.DataFrame({"lang": ["a"], "metric": "uid_v", "delta_pct": [-20.0]})
    >>> known_vs_trained(e, t, ["uid_v"]).to_dict("records")
    [{'uid_v exact': -50.0, 'uid_v trained': -20.0}]
    """
    def wide(table: pd.DataFrame, name: str) -> pd.DataFrame:
        check_table(table, name, columns=["lang", "metric"], numeric=["delta_pct"])
        return table[table["metric"].isin(list(metrics))].pivot(
            index="lang", columns="metric", values="delta_pct")

    return wide(exact, "exact").merge(wide(trained, "trained"), left_index=True,
                                      right_index=True, suffixes=(" exact", " trained"))


def grounding_by_class(exact: pd.DataFrame, trained: pd.DataFrame, *,
                       min_gain: float = 0.05) -> pd.DataFrame:
    """The image's mean surprisal reduction s_U − s_P (nats) per language and word class, by
    the generator's exact surprisals (``exact``, the known answer) and by the trained pair
    (``trained``), and the share of it the pair recovers (``recovered`` = trained / exact).

    Rows: (``lang``, ``upos``) of the classes the image informs in the exact answer (mean
    exact gain > ``min_gain`` nats); ``recovered`` near 0 marks a class the trained captioner
    does not ground at all, near 1 one it grounds as the generator does. Both tables are word
    tables with ``lang, upos, s_U, s_P`` (:func:`tokenbook.grounded.tiny.exact_caption_words`
    and the scored caption words of the same held-out splits).

    >>> e = pd.DataFrame({"lang": "a", "upos": ["NOUN", "ADJ", "VERB"],
    ...                   "s_U": [2.0, 2.0, 1.0], "s_P": [0.5, 0.5, 1.0]})
    >>> t = e.assign(s_P=[1.25, 2.0, 1.0])
    >>> grounding_by_class(e, t)["recovered"].to_dict()
    {('a', 'ADJ'): 0.0, ('a', 'NOUN'): 0.5}
    """
    def gains(table: pd.DataFrame, name: str) -> pd.Series:
        check_table(table, name, columns=["lang", "upos"], numeric=["s_U", "s_P"])
        return (table["s_U"] - table["s_P"]).groupby([table["lang"], table["upos"]]).mean()

    out = pd.DataFrame({"exact": gains(exact, "exact"), "trained": gains(trained, "trained")})
    out = out[out["exact"] > min_gain].copy()
    out["recovered"] = out["trained"] / out["exact"]
    return out


def wrong_about_the_picture(words: pd.DataFrame, *, classes: Sequence[str] = ("NOUN", "ADJ"),
                            high: float = 3.0) -> pd.DataFrame:
    """Per language, over the words of ``classes``: ``raised`` = share whose surprisal rises
    with the image (s_P > s_U), ``above_<high>_nats`` = share with s_P above ``high`` nats.

    In the UID world the image fixes every referent, so the exact answer never raises such a
    word: a raised word is one the trained captioner gets wrong about the picture.

    >>> w = pd.DataFrame({"lang": "a", "upos": ["NOUN", "ADJ", "VERB"],
    ...                   "s_U": [2.0, 1.0, 1.0], "s_P": [1.0, 4.0, 9.0]})
    >>> wrong_about_the_picture(w).to_dict("records")
    [{'raised': 0.5, 'above_3_nats': 0.5}]
    """
    check_table(words, "words", columns=["lang", "upos"], numeric=["s_U", "s_P"])
    d = words[words["upos"].isin(list(classes))]
    flags = pd.DataFrame({"lang": d["lang"], "raised": d["s_P"] > d["s_U"],
                          f"above_{high:g}_nats": d["s_P"] > high})
    return flags.groupby("lang").mean()


def _metric_rows(comparison: pd.DataFrame, metric: str, contrast: str | None) -> pd.DataFrame:
    """The rows of ``comparison`` for ``metric`` (and ``contrast``) with a finite ``delta_pct``."""
    check_table(comparison, "comparison", columns=["lang", "metric"], numeric=["delta_pct"])
    rows = comparison[comparison["metric"] == metric]
    if contrast is not None:
        if "contrast" not in rows:
            raise ValueError("comparison: has no 'contrast' column; build it with "
                             "story_comparison")
        rows = rows[rows["contrast"] == contrast]
    return rows[np.isfinite(rows["delta_pct"].to_numpy(float))]


def share_lower(comparison: pd.DataFrame, metric: str, *, contrast: str | None = None,
                significant: bool = False, alpha: float = 0.05) -> float:
    """Share of languages whose mean ``metric`` is lower under the first condition:
    ``delta_pct < 0`` (and BH ``q < alpha`` when ``significant``). NaN when no language has it.

    >>> c = pd.DataFrame({"lang": ["a", "b"], "metric": "uid_v", "delta_pct": [-5.0, 2.0],
    ...                   "q": [0.01, 0.2]})
    >>> share_lower(c, "uid_v"), share_lower(c, "uid_v", significant=True)
    (0.5, 0.5)
    """
    rows = _metric_rows(comparison, metric, contrast)
    if rows.empty:
        return float("nan")
    ok = rows["delta_pct"].to_numpy(float) < 0
    if significant:
        ok &= rows["q"].to_numpy(float) < alpha
    return float(ok.mean())


def pooled_delta(comparison: pd.DataFrame, metric: str, *, contrast: str | None = None
                 ) -> float:
    """The pooled paired statistic across languages: the mean over languages of Δ% (each
    language's paired relative change of ``metric``, first condition vs second), so a claim
    "across languages" is judged on the size of the effect as well as on the share of
    languages (:func:`share_lower`). NaN when no language has it.

    >>> c = pd.DataFrame({"lang": ["a", "b"], "metric": "uid_v", "delta_pct": [-5.0, 2.0]})
    >>> pooled_delta(c, "uid_v")
    -1.5
    """
    rows = _metric_rows(comparison, metric, contrast)
    return float(rows["delta_pct"].mean()) if len(rows) else float("nan")


#: the seed table's per-language entries (:func:`language_table`; not claims), each after this
#: prefix as ``<claim id>:<language>``: that language's Δ% of the statistic a share claim counts
#: (:func:`share_lower`: the language counts when Δ% < 0)
LANGUAGE_PREFIX = "language:"


def language_deltas(comparison: pd.DataFrame, metric: str, *, contrast: str | None = None
                    ) -> pd.Series:
    """Each language's Δ% of ``metric`` (first condition vs second), indexed by language: the
    values :func:`share_lower` counts (< 0: the language falls).

    >>> c = pd.DataFrame({"lang": ["a", "b"], "metric": "uid_v", "delta_pct": [-5.0, 2.0]})
    >>> language_deltas(c, "uid_v").to_dict()
    {'a': -5.0, 'b': 2.0}
    """
    rows = _metric_rows(comparison, metric, contrast)
    return pd.Series(rows["delta_pct"].to_numpy(float), index=rows["lang"].astype(str),
                     name="delta_pct")


def _did_not_fall(up: pd.DataFrame) -> str:
    """The pairs of ``up`` (columns ``seed``, ``lang``, ``value``: Δ% ≥ 0) by language, the
    language with the most pairs first: ``"cit: root seeds 0, 4 (+1.5% to +4.1%); aru: root
    seed 5 (+0.9%)"``."""
    parts = []
    by_lang = sorted(up.groupby("lang"), key=lambda item: (-len(item[1]), item[0]))
    for lang, g in by_lang:
        seeds = ", ".join(str(int(s)) for s in sorted(g["seed"]))
        low, high = float(g["value"].min()), float(g["value"].max())
        span = f"{low:+.1f}%" if len(g) == 1 else f"{low:+.1f}% to {high:+.1f}%"
        parts.append(f"{lang}: root seed{'s' if len(g) > 1 else ''} {seeds} ({span})")
    return "; ".join(parts)


def language_entries(seed_table: pd.DataFrame, *, mechanism: str = "on") -> pd.DataFrame:
    """The seed table's per-language entries (:data:`LANGUAGE_PREFIX`) with the mechanism
    ``mechanism``, with their claim id and language in columns ``claim`` and ``lang``; empty
    when the table has none.

    >>> t = pd.DataFrame({"seed": [0], "mechanism": "on", "value": [-1.0],
    ...                   "claim_id": ["language:uid-v-lower-with-image:aru"]})
    >>> language_entries(t)[["claim", "lang"]].values.tolist()
    [['uid-v-lower-with-image', 'aru']]
    """
    check_table(seed_table, "seed table", columns=["seed", "mechanism", "claim_id", "value"])
    ids = seed_table["claim_id"].astype(str)
    rows = seed_table[ids.str.startswith(LANGUAGE_PREFIX)
                      & (seed_table["mechanism"] == mechanism)]
    if rows.empty:
        return rows.assign(claim=pd.Series(dtype=str), lang=pd.Series(dtype=str))
    parts = rows["claim_id"].astype(str).str.removeprefix(LANGUAGE_PREFIX).str.rsplit(
        ":", n=1, expand=True)
    return rows.assign(claim=parts[0], lang=parts[1])


def language_table(seed_table: pd.DataFrame, *, mechanism: str = "on") -> pd.DataFrame:
    """The (root seed, language) pairs each share claim counts, from :func:`run_seeds`'s table
    (its :data:`LANGUAGE_PREFIX` entries), one row per claim: ``pairs``, how many fell
    (``fell``: Δ% < 0), the largest Δ% (``largest Δ%``: the pair nearest to not falling) and
    ``did not fall``: by language, the root seeds whose Δ% did not fall and their range
    (``cit: root seeds 0, 4 (+1.5% to +4.1%)``, the language with the most first; empty when
    every pair fell). With four languages in each of six root seeds the share claims at 0.9 are
    not testable (24 pairs cannot show that share: :func:`tokenbook.verdicts.pairs_needed`);
    the table says what the pairs did."""
    rows = language_entries(seed_table, mechanism=mechanism)
    if rows.empty:
        raise ValueError("seed table: no per-language entries (claim ids starting with "
                         f"{LANGUAGE_PREFIX!r}) with the mechanism {mechanism!r}; recompute it "
                         "with this library's seed_claims, which writes them")
    out = []
    for claim, group in rows.groupby("claim", sort=False):
        up = group[~(group["value"] < 0)]
        out.append({"claim": claim, "pairs": len(group), "fell": len(group) - len(up),
                    "largest Δ%": float(group["value"].max()), "did not fall": _did_not_fall(up)})
    order = [c for c in CLAIMS if c in {r["claim"] for r in out}]
    return pd.DataFrame(out).set_index("claim").loc[order]


def min_onset_enrichment(story_words: pd.DataFrame) -> tuple[float, dict[str, float]]:
    """The smallest onset enrichment E over δ_P, δ_D, δ_DP
    (:func:`tokenbook.uid_grounding.measures.story_reductions`; E > 1: reduction mass front-loaded in the unit) and all three."""
    _, enrichment = uid.story_reductions(story_words)
    vals = [v for v in enrichment.values() if np.isfinite(v)]
    return (float(min(vals)) if len(vals) == len(enrichment) and vals else float("nan"),
            dict(enrichment))


#: the onset claim's three contexts: name -> (surprisal without it, with it), as in
#: :func:`onset_contexts`
ONSET_CONTEXTS = {"image (s_U − s_P)": ("s_U", "s_P"),
                  "own pages (s_D_other − s_D)": ("s_D_other", "s_D"),
                  "image given the pages (s_D − s_PD)": ("s_D", "s_PD")}


def onset_contexts(story_words: pd.DataFrame) -> dict[str, float]:
    """The mean reduction (nats) each of the onset claim's three contexts brings to the words
    it determines (nouns, adjectives, counts; :func:`tokenbook.grounded.tiny.mean_gain`): the
    image (s_U − s_P), what the story's own pages say beyond another story's pages, which any
    story's pages would give (s_D_other − s_D), and the image given the pages (s_D − s_PD).
    Keys: :data:`ONSET_CONTEXTS`.

    >>> w = pd.DataFrame({"upos": ["NOUN", "DET"], "s_U": [3.0, 1.0], "s_P": [1.0, 1.0],
    ...                   "s_D": [2.5, 0.2], "s_D_other": [2.75, 0.2], "s_PD": [2.0, 0.2]})
    >>> list(onset_contexts(w).values())
    [2.0, 0.25, 0.5]
    """
    return {name: gt.mean_gain(story_words, without, with_)
            for name, (without, with_) in ONSET_CONTEXTS.items()}


def onset_enrichment_of(story_words: pd.DataFrame, without: str, with_: str) -> float:
    """Onset enrichment E (:func:`tokenbook.uid_grounding.measures.onset_enrichment`: the share
    of the reduction mass in a sentence's first 20% over the share of its words there; > 1:
    front-loaded) of the positive reductions max(0, ``without`` − ``with_``) (nats) of a story
    word table (:func:`tokenbook.uid_grounding.measures.story_reductions` with that pair: a
    word's position is its place among all its sentence's words; words with a missing
    surprisal are then left out). NaN where nothing is reduced.

    >>> w = pd.DataFrame({"lang": "x", "story_id": 0, "sent_idx": 1, "word_idx": range(5),
    ...                   "s_A": [3.0, 1.0, 1.0, 1.0, 1.0], "s_B": [1.0, 1.0, 1.0, 1.0, 0.0]})
    >>> round(onset_enrichment_of(w, "s_A", "s_B"), 3)   # 2 of 3 nats on the first of 5 words
    3.333
    """
    _, enrichment = uid.story_reductions(story_words, {"x": (without, with_)})
    return enrichment.get("x", float("nan"))


#: the seed table's entries for the onset table (:func:`onset_context_table`; not claims), each
#: after this prefix: the reduction of each context of :data:`ONSET_CONTEXTS` under its name,
#: by the trained pair and (``<name>, generator``) by the generator; the onset enrichment of what the own pages say beyond another story's, the pipeline's
#: (``E, own pages``) and the generator's (``E, own pages, generator``); and the pipeline's
#: onset enrichment of the claim's own δ_D = max(0, s_U − s_D) (``E, δ_D``)
ONSET_PREFIX = "onset:"
#: the onset table's rows: (entry after :data:`ONSET_PREFIX`, mechanism) -> label
ONSET_ROWS = {**{row: label for name in ONSET_CONTEXTS
                 for row, label in (((name, "on"), f"{name}, nats (pipeline)"),
                                    ((f"{name}, generator", "on"), f"{name}, nats (generator)"))},
              ("E, own pages", "on"): "E of what the own pages say (pipeline)",
              ("E, own pages, generator", "on"): "E of what the own pages say (generator)",
              ("E, δ_D", "on"): "E of δ_D = s_U − s_D (pipeline)",
              ("E, δ_D", "off"): "E of δ_D, off: another story's pages (pipeline)"}


def onset_context_table(seed_table: pd.DataFrame) -> pd.DataFrame:
    """The onset claim per root seed from :func:`run_seeds`'s table (rows :data:`ONSET_ROWS`,
    mechanism on unless the label says off; one column per root seed): the reduction each
    context of :data:`ONSET_CONTEXTS` brings to the words it determines (nats;
    :func:`onset_contexts`), by the trained pair and by the generator
    (:func:`tokenbook.grounded.tiny.exact_story_words`, the page's picture read by its
    objects); the onset enrichment E of what the story's own pages say beyond
    another story's, by the trained pair and by the generator (the known answer of the
    pages' part of the claim: :func:`tokenbook.grounded.tiny.exact_story_words`, where
    another story's pages tell nothing, so s_D_other = s_U); and E of the claim's own δ_D
    with the story's pages (on) and with another story's (off)."""
    check_table(seed_table, "seed table", columns=["seed", "mechanism", "claim_id", "value"])
    entries = seed_table.assign(entry=seed_table["claim_id"].astype(str)
                                .str.removeprefix(ONSET_PREFIX))
    keys = pd.MultiIndex.from_frame(entries[["entry", "mechanism"]])
    rows = entries[seed_table["claim_id"].astype(str).str.startswith(ONSET_PREFIX)
                   & keys.isin(list(ONSET_ROWS))]
    if rows.empty:
        raise ValueError("seed table: no onset entries (claim ids starting with "
                         f"{ONSET_PREFIX!r}); it was computed without the stories "
                         "(seed_claims(stories=True) writes them)")
    table = rows.pivot(index=["entry", "mechanism"], columns="seed", values="value")
    present = [k for k in ONSET_ROWS if k in table.index]
    table = table.loc[present]
    table.index = pd.Index([ONSET_ROWS[k] for k in present])
    return table.rename_axis(columns="root seed")


def onset_manipulation(story_words: pd.DataFrame) -> float:
    """The onset claim's manipulation check (nats): the smallest of the three reductions of
    :func:`onset_contexts`. Where a context does not inform the words it determines, where its
    reductions fall in the sentence says nothing of the mechanism.

    >>> w = pd.DataFrame({"upos": ["NOUN", "DET"], "s_U": [3.0, 1.0], "s_P": [1.0, 1.0],
    ...                   "s_D": [2.5, 0.2], "s_D_other": [2.75, 0.2], "s_PD": [2.0, 0.2]})
    >>> onset_manipulation(w)
    0.25
    """
    return float(min(onset_contexts(story_words).values()))


#: the claim whose statistic is the onset enrichment (its own world: :func:`onset_world`)
ONSET_CLAIM = "reductions-at-onsets"


def onset_world(tiny: gt.TinyParams, register: str, *, n_stories: int,
                train_steps: int) -> gt.TinyParams | None:
    """The world the onset claim is judged in: None (the chapter's own) when ``register`` is
    ``"book"``, else the chapter's world ``tiny`` told in ``register`` (a name of
    :data:`tokenbook.grounded.tiny.REGISTERS`) with ``n_stories`` stories and ``train_steps``
    fine-tuning steps, its other sizes the chapter's (None too when that is the chapter's world).

    Why a world of its own: the paper's two story mechanisms ask opposite things of one story
    process. Pages that keep to one protagonist smooth UID_v (the book's register); pages that
    leave the subject open, in sentences that name it first, front-load the contexts'
    reductions (``"subject first, bare, protagonist 0.5"``), and there the pages' own known
    answer for the smoothing turns (``HISTORY.md``, thirty-fifth session).

    >>> tiny = gt.TinyParams(world_style="uid", n_stories=200, train_steps=2000)
    >>> onset_world(tiny, "book", n_stories=600, train_steps=4000) is None
    True
    >>> w = onset_world(tiny, "subject first, bare, protagonist 0.5", n_stories=600,
    ...                 train_steps=4000)
    >>> (w.register, w.n_stories, w.train_steps, w.n_scenes == tiny.n_scenes)
    ('subject first, bare, protagonist 0.5', 600, 4000, True)
    """
    if register == "book":
        return None
    world = replace(tiny, register=register, n_stories=n_stories, train_steps=train_steps)
    return None if world == tiny else world


def _onset_entries(table: pd.DataFrame) -> pd.Series:
    ids = table["claim_id"].astype(str)
    own = {prefix + ONSET_CLAIM for prefix in ("", MANIPULATION_PREFIX, KNOWN_PREFIX,
                                               BALANCE_PREFIX)}
    return ids.isin(own) | ids.str.startswith(ONSET_PREFIX)


def with_onset_world(seed_table: pd.DataFrame, onset_table: pd.DataFrame) -> pd.DataFrame:
    """The chapter's seed table (:func:`run_seeds`) with every entry of the onset claim — its
    statistic, check, balance, known answer and the onset table's rows
    (:data:`ONSET_PREFIX`) — taken from the seed table of the onset claim's own world
    (:func:`onset_world`) instead; every other claim's entries stay the chapter's.

    >>> row = lambda c, v: {"seed": 0, "mechanism": "on", "claim_id": c, "value": v}
    >>> book = pd.DataFrame([row("discourse-smooths", 1.0), row(ONSET_CLAIM, 0.3),
    ...                      row("known:" + ONSET_CLAIM, 0.33)])
    >>> own = pd.DataFrame([row("discourse-smooths", 0.2), row(ONSET_CLAIM, 1.1),
    ...                     row("known:" + ONSET_CLAIM, 1.16)])
    >>> with_onset_world(book, own)[["claim_id", "value"]].values.tolist()
    [['discourse-smooths', 1.0], ['reductions-at-onsets', 1.1], ['known:reductions-at-onsets', 1.16]]
    """
    for name, table in (("seed table", seed_table), ("onset world's seed table", onset_table)):
        check_table(table, name, columns=["seed", "mechanism", "claim_id", "value"])
    if not (onset_table["claim_id"] == ONSET_CLAIM).any():
        raise ValueError(f"onset world's seed table: no {ONSET_CLAIM!r} entries; compute it "
                         "with the stories (run_seeds with seed_claims' stories=True)")
    return pd.concat([seed_table[~_onset_entries(seed_table)],
                      onset_table[_onset_entries(onset_table)]], ignore_index=True)


def onset_world_table(seeds: Sequence[int], world: gt.TinyParams, *, boot_seed: int = 0,
                      min_words: int = 3, n_workers: int = 0,
                      progress: bool = True) -> pd.DataFrame:
    """The seed table of the onset claim's own world (:func:`onset_world`) over ``seeds``: its
    pairs first, ``n_workers`` root seeds at a time
    (:func:`tokenbook.grounded.tiny.train_tiny_models`), then its seed sweep
    (:func:`run_seeds` with the chapter's ``boot_seed`` and ``min_words``). Give it to
    :func:`with_onset_world`. Cached and resumable as both steps are; a root seed's pair costs
    about 320–360 s on one core at 600 stories and 4,000 fine-tuning steps (``HISTORY.md``,
    thirty-sixth session)."""
    if not isinstance(world, gt.TinyParams):
        raise TypeError(f"world: the onset claim's world (onset_world(...)), got "
                        f"{type(world).__name__}; with onset_register 'book' there is none "
                        "to run")
    seeds = [int(s) for s in seeds]
    gt.train_tiny_models(seeds, world, n_workers=n_workers, progress=progress)
    return run_seeds(seeds, params=dict(boot_seed=boot_seed, min_words=min_words, **world.key()),
                     n_workers=n_workers, progress=progress)


#: the columns that name one word of a story word table (the same word in the generator's
#: table and the trained pair's)
STORY_WORD_KEYS = ("lang", "story_id", "sent_idx", "word_idx")


def story_contexts_by_class(exact: pd.DataFrame, trained: pd.DataFrame, *,
                            min_gain: float = 0.05) -> pd.DataFrame:
    """What each context of :data:`ONSET_CONTEXTS` brings to each word class of the later
    story sentences: the mean surprisal reduction (nats) by the generator and by the trained
    pair, on the same words.

    ``exact``: :func:`tokenbook.grounded.tiny.exact_story_words` (for it another story's
    pages tell nothing, so its s_D_other is its s_U); ``trained``: the scored story words
    of the same held-out splits (:func:`tokenbook.grounded.tiny.story_words`). The words are
    matched on :data:`STORY_WORD_KEYS` (the trained table's first sentences, which the
    generator does not score, drop out). Rows: the word classes (UPOS) some context informs
    by more than ``min_gain`` nats in the generator's answer, with ``words``, their count;
    columns: (context, ``generator`` / ``pipeline``), after ``("words", "")``.

    >>> keys = {"lang": "a", "story_id": 0, "sent_idx": 1, "word_idx": [0, 1]}
    >>> e = pd.DataFrame({**keys, "word": ["x", "y"], "upos": ["NOUN", "VERB"],
    ...                   "s_U": [2.0, 1.0], "s_P": [1.0, 0.5], "s_D": [1.5, 1.0],
    ...                   "s_PD": [1.0, 0.25]})
    >>> t = e.assign(s_P=[1.5, 1.0], s_D_other=[2.0, 1.0], s_PD=[1.5, 1.0])
    >>> table = story_contexts_by_class(e, t)
    >>> table.loc["VERB", "image given the pages (s_D − s_PD)"].to_dict()
    {'generator': 0.75, 'pipeline': 0.0}
    >>> table.loc["NOUN", "own pages (s_D_other − s_D)"].to_dict()
    {'generator': 0.5, 'pipeline': 0.5}
    """
    surprisals = sorted({c for pair in ONSET_CONTEXTS.values() for c in pair})
    check_table(exact, "exact", columns=[*STORY_WORD_KEYS, "word", "upos"],
                numeric=[c for c in surprisals if c != "s_D_other"])
    check_table(trained, "trained", columns=[*STORY_WORD_KEYS, "word"], numeric=surprisals)
    both = exact.assign(s_D_other=exact["s_U"]).merge(
        trained[[*STORY_WORD_KEYS, "word", *surprisals]], on=list(STORY_WORD_KEYS),
        suffixes=("_generator", "_pipeline"))
    if both.empty or not (both["word_generator"] == both["word_pipeline"]).all():
        raise ValueError("exact and trained: not the same story words (match them on "
                         f"{STORY_WORD_KEYS}: the generator's and the pair's tables of one "
                         "world's held-out splits)")
    gains = {(name, source): both[f"{without}_{source}"] - both[f"{with_}_{source}"]
             for name, (without, with_) in ONSET_CONTEXTS.items()
             for source in ("generator", "pipeline")}
    table = pd.DataFrame(gains).groupby(both["upos"].to_numpy()).mean()
    table.columns = pd.MultiIndex.from_tuples(table.columns, names=["context", "by"])
    informed = table.xs("generator", axis=1, level="by").max(axis=1) > min_gain
    out = table[informed].rename_axis("upos")
    out.insert(0, ("words", ""), both.groupby("upos").size().reindex(out.index))
    return out


# --------------------------------------------------------------------------- claims
#: id -> (claim as the source words it, statistic, source)
CLAIMS: dict[str, tuple[str, str, str]] = {
    "uid-v-lower-with-image": (
        "Grounding on perception consistently smooths the distribution of information, "
        "increasing global uniformity (lower UID_v) across languages",
        "share of languages with Δ%(UID_v, P vs U) < 0", f"{PAPER}, abstract; §4, Table 3"),
    "uid-lv-lower-with-image": (
        "Grounding on perception consistently smooths the distribution of information, "
        "increasing local uniformity (lower UID_lv) across languages",
        "share of languages with Δ%(UID_lv, P vs U) < 0", f"{PAPER}, abstract; §4, Table 3"),
    "uid-lower-significant": (
        "Our reading of Table 3's stars (the notes could not count them): the reductions of "
        "UID_v are significant (Wilcoxon, BH q < .05) in most languages",
        "share of languages with Δ%(UID_v) < 0 and BH q < .05", f"{PAPER}, Table 3"),
    "cv-agree-in-direction": (
        "Our reading of App. Table 4: the mean-normalised variant CV_g = sd/mean falls with the "
        "image too (the smoothing is not only lower mean surprisal)",
        "share of languages with Δ%(CV_g, P vs U) < 0", f"{PAPER}, App. Table 4"),
    "uid-v-lower-pooled": (
        "Grounding on perception smooths the distribution of information across languages; "
        "our reading for a handful of languages: the mean over languages of the paired Δ%(UID_v,"
        " P vs U) is negative",
        "mean over languages of Δ%(UID_v, P vs U) (%)", f"{PAPER}, abstract; §4, Table 3"),
    "uid-lv-lower-pooled": (
        "Grounding on perception smooths the distribution of information across languages; "
        "our reading for a handful of languages: the mean over languages of the paired "
        "Δ%(UID_lv, P vs U) is negative",
        "mean over languages of Δ%(UID_lv, P vs U) (%)", f"{PAPER}, abstract; §4, Table 3"),
    "discourse-smooths": (
        "In visual narratives, grounding in discourse context has additional effects; our "
        "reading: discourse (D) lowers UID_v relative to text only (U) — at tiny scale relative "
        "to another story's pages (D_other), which keep where in a story the sentence stands "
        "and remove only what its own pages say",
        "share of languages with paired Δ%(UID_v, D vs U) < 0; tiny scale: D vs D_other",
        f"{PAPER}, abstract; §5, Fig. 3"),
    "image-plus-discourse-smooths-further": (
        "Grounding in both image and discourse contexts has additional effects; our reading: "
        "adding the discourse to the image (P+D) lowers UID_v relative to the image alone (P) "
        "— at tiny scale relative to the image after another story's pages (P+D_other)",
        "share of languages with paired Δ%(UID_v, P+D vs P) < 0; tiny scale: P+D vs P+D_other",
        f"{PAPER}, abstract; §5, Figs. 3–4"),
    "discourse-smooths-pooled": (
        "In visual narratives, grounding in discourse context has additional effects; our "
        "reading for a handful of languages: the mean over languages of the paired Δ%(UID_v, "
        "D vs U) is negative — at tiny scale D vs D_other, as discourse-smooths",
        "mean over languages of Δ%(UID_v, D vs U) (%); tiny scale: D vs D_other",
        f"{PAPER}, abstract; §5, Fig. 3"),
    "image-plus-discourse-smooths-further-pooled": (
        "Grounding in both image and discourse contexts has additional effects; our reading "
        "for a handful of languages: the mean over languages of the paired Δ%(UID_v, P+D vs "
        "P) is negative — at tiny scale P+D vs P+D_other, as "
        "image-plus-discourse-smooths-further",
        "mean over languages of Δ%(UID_v, P+D vs P) (%); tiny scale: P+D vs P+D_other",
        f"{PAPER}, abstract; §5, Figs. 3–4"),
    "reductions-at-onsets": (
        "The strongest surprisal reductions occur at the onset of discourse units",
        "smallest onset enrichment E (share of reduction mass in the first 20% of a sentence / "
        "share of words there) over δ_P, δ_D, δ_DP", f"{PAPER}, abstract; §5, Figs. 8–20"),
}
#: the claims judged on captions (the rest on stories)
CAPTION_CLAIMS = ("uid-v-lower-with-image", "uid-lv-lower-with-image", "uid-lower-significant",
                  "cv-agree-in-direction", "uid-v-lower-pooled", "uid-lv-lower-pooled")
STORY_CLAIMS = ("discourse-smooths", "image-plus-discourse-smooths-further",
                "discourse-smooths-pooled", "image-plus-discourse-smooths-further-pooled",
                "reductions-at-onsets")
#: the claims judged on the pooled paired statistic (:func:`pooled_delta`; the others on shares
#: of languages, significance counts or enrichment), each with the share claim it pools: the
#: twin has that claim's contrast, manipulation and balance checks
POOLED_TWINS = {"uid-v-lower-pooled": "uid-v-lower-with-image",
                "uid-lv-lower-pooled": "uid-lv-lower-with-image",
                "discourse-smooths-pooled": "discourse-smooths",
                "image-plus-discourse-smooths-further-pooled":
                    "image-plus-discourse-smooths-further"}
POOLED_CLAIMS = tuple(POOLED_TWINS)


def _share_sources(comparison: pd.DataFrame, story_comp: pd.DataFrame | None,
                   discourse: pd.DataFrame | None = None
                   ) -> dict[str, tuple[pd.DataFrame, str, str | None]]:
    """The claims whose statistic is a share of languages with Δ% < 0 (:func:`share_lower`),
    each with the comparison table, metric and contrast it reads (see :func:`_statistics`).
    ``discourse``: :func:`_content_comparison` (tiny scale: D vs D_other and PD vs PD_other),
    which the discourse claims (``discourse-smooths``, ``image-plus-discourse-smooths-further``
    and their pooled twins) then read instead of D vs U and PD vs P."""
    out = {"uid-v-lower-with-image": (comparison, "uid_v", None),
           "uid-lv-lower-with-image": (comparison, "uid_lv", None),
           "cv-agree-in-direction": (comparison, "cv_global", None)}
    if story_comp is not None:
        table, d, pd_ = ((story_comp, "D vs U", "PD vs P") if discourse is None
                         else (discourse, "D vs D_other", "PD vs PD_other"))
        out["discourse-smooths"] = (table, "uid_v", d)
        out["image-plus-discourse-smooths-further"] = (table, "uid_v", pd_)
    return out


def _statistics(shares: Mapping[str, tuple[pd.DataFrame, str, str | None]],
                comparison: pd.DataFrame, min_enrichment: float, *, stories: bool
                ) -> dict[str, float]:
    """Every claim's statistic: the shares of languages and their pooled twins from the
    tables ``shares`` names (:func:`_share_sources`), the significant share from
    ``comparison`` and, with ``stories``, the onset enrichment ``min_enrichment``."""
    out = {cid: share_lower(table, metric, contrast=contrast)
           for cid, (table, metric, contrast) in shares.items()}
    out["uid-lower-significant"] = share_lower(comparison, "uid_v", significant=True)
    for twin, share in POOLED_TWINS.items():
        if share in shares:
            table, metric, contrast = shares[share]
            out[twin] = pooled_delta(table, metric, contrast=contrast)
    if stories:
        out["reductions-at-onsets"] = min_enrichment
    return out


def _content_comparison(story_words: pd.DataFrame, *, min_words: int, n_boot: int,
                        boot_seed: int) -> pd.DataFrame:
    """UID_v of the later story sentences after their own pages against after another
    story's, per language (:func:`discourse_comparison`): what the pages *say*, without the
    image (D vs D_other) and with it (PD vs PD_other, where ``story_words`` has ``s_PD`` and
    ``s_PD_other``)."""
    conditions = {c: f"s_{c}" for c in ("D", "D_other", "PD", "PD_other")
                  if f"s_{c}" in story_words}
    measures = uid.story_unit_measures(story_words, min_words=min_words,
                                       conditions=conditions).table
    pairs = [("D", "D_other")] + ([("PD", "PD_other")] if "PD_other" in conditions else [])
    return pd.concat([discourse_comparison(measures, condition=a, reference=b, n_boot=n_boot,
                                           boot_seed=boot_seed) for a, b in pairs],
                     ignore_index=True)


def seed_claims(seed: int, mechanism: str, *, boot_seed: int = 0, min_words: int = 3,
                n_boot: int = 200, stories: bool = True, **tiny: Any) -> dict[str, float]:
    """Every UID claim's statistic for root ``seed`` with the mechanism ``on`` or ``off``,
    with the manipulation checks (``manipulation:<id>``: the mean surprisal reduction on the
    depicted classes, nats, by the image for the caption claims and by the discourse for the
    story claims) and the caption claims' reference answers (``known:<id>``: the same
    statistic on the count models' word table, :func:`tokenbook.grounded.tiny.reference_caption_words`).

    ``tiny``: fields of :class:`tokenbook.grounded.tiny.TinyParams` (sizes, ``merged``,
    ``null``). Models and word tables are cached (shared with the typology chapter); the
    bootstrap seed is ``derive_seed(boot_seed, "bootstrap", seed)``.
    """
    params = gt.TinyParams.from_mapping(tiny)
    bs = derive_seed(boot_seed, "bootstrap", seed)
    words = gt.caption_words(seed, params, mechanism)
    comparison = caption_comparison(words, min_words=min_words, n_boot=n_boot, boot_seed=bs)
    reference = caption_comparison(gt.reference_caption_words(seed, params, mechanism),
                                   min_words=min_words, n_boot=n_boot, boot_seed=bs)
    story_comp, content, min_e = None, None, float("nan")
    if stories:
        sw = gt.story_words(seed, params, mechanism)
        measures = uid.story_unit_measures(sw, min_words=min_words).table
        story_comp = story_comparison(measures, metrics=("uid_v",), n_boot=n_boot, boot_seed=bs)
        content = _content_comparison(sw, min_words=min_words, n_boot=n_boot, boot_seed=bs)
        min_e, enrichment = min_onset_enrichment(sw)
    shares = _share_sources(comparison, story_comp, content)
    out = _statistics(shares, comparison, min_e, stories=stories)
    for cid, (table, metric, contrast) in shares.items():
        for lang, delta in language_deltas(table, metric, contrast=contrast).items():
            out[f"{LANGUAGE_PREFIX}{cid}:{lang}"] = float(delta)
    known = _statistics(_share_sources(reference, None), reference, float("nan"),
                        stories=False)
    image_gain = gt.mean_gain(words, "s_U", "s_P")
    caption_balance = float(words["s_U"].mean())
    for cid in CAPTION_CLAIMS:
        out[MANIPULATION_PREFIX + cid] = image_gain
        out[KNOWN_PREFIX + cid] = known[cid]
        out[BALANCE_PREFIX + cid] = caption_balance
    if stories:
        gains = {"discourse-smooths": gt.mean_gain(sw, "s_D_other", "s_D"),
                 "image-plus-discourse-smooths-further": gt.mean_gain(sw, "s_PD_other", "s_PD"),
                 "reductions-at-onsets": onset_manipulation(sw)}
        for cid in STORY_CLAIMS:      # a pooled twin has its share claim's check
            out[MANIPULATION_PREFIX + cid] = gains[POOLED_TWINS.get(cid, cid)]
        story_balance = float(sw["s_U"].mean())
        for cid in STORY_CLAIMS:
            out[BALANCE_PREFIX + cid] = story_balance
        if params.world_style == "uid":   # the generator's answer: another story's pages tell
            exact = gt.reference_story_words(seed, params, mechanism)   # the reader nothing
            exact_content = _content_comparison(
                exact.assign(s_D_other=exact["s_U"], s_PD_other=exact["s_P"]),
                min_words=min_words, n_boot=n_boot, boot_seed=bs)
            for cid, contrast in (("discourse-smooths", "D vs D_other"),
                                  ("image-plus-discourse-smooths-further", "PD vs PD_other")):
                out[KNOWN_PREFIX + cid] = share_lower(exact_content, "uid_v", contrast=contrast)
                out[KNOWN_PREFIX + cid + "-pooled"] = pooled_delta(exact_content, "uid_v",
                                                                   contrast=contrast)
            out[KNOWN_PREFIX + "reductions-at-onsets"] = min_onset_enrichment(exact)[0]
            out[ONSET_PREFIX + "E, own pages, generator"] = onset_enrichment_of(exact, "s_U",
                                                                                "s_D")
            for name, value in onset_contexts(exact.assign(s_D_other=exact["s_U"])).items():
                out[ONSET_PREFIX + name + ", generator"] = value
        for name, value in onset_contexts(sw).items():
            out[ONSET_PREFIX + name] = value
        out[ONSET_PREFIX + "E, own pages"] = onset_enrichment_of(sw, "s_D_other", "s_D")
        out[ONSET_PREFIX + "E, δ_D"] = enrichment.get("D", float("nan"))
    return out


def run_seeds(seeds: Sequence[int], *, params: Mapping[str, Any], n_workers: int = 0,
              progress: bool = True) -> pd.DataFrame:
    """:func:`seed_claims` over ``seeds`` × {on, off} (cached per seed; resumable).

    ``params``: the keyword arguments of :func:`seed_claims` (they key the cache). With
    ``n_workers`` ≥ 2 and several seeds, the seeds run in a Dask LocalCluster of that many
    single-threaded processes, one seed (its models, then on and off) per task.
    """
    task = partial(seed_claims, **dict(params))
    if n_workers and n_workers > 1 and len(seeds) > 1:
        with dask_client(n_workers=n_workers) as client:
            return over_seeds(task, seeds, kind="uid-seed", params=dict(params), client=client,
                              progress=progress, seed_per_task=True)
    return over_seeds(task, seeds, kind="uid-seed", params=dict(params), progress=progress)


#: the paper's sizes (method notes §2.1, §2.6): 30 XM3600 languages, 3,600 images per language
#: (≥ 1 caption each), 13 Bloom-VIST languages, and the authors' minimum of 5 stories per language
#: (their mixed-model script skips a language with fewer)
PAPER_SIZES = {"min_languages": 30, "min_captions": 3600, "min_story_languages": 13,
               "min_stories": 5}


def size_requirements(comparison: pd.DataFrame, story_counts: Mapping[str, int] | None = None,
                      *, min_languages: int = 30, min_captions: int = 3600,
                      min_story_languages: int = 13, min_stories: int = 5
                      ) -> dict[str, list[tuple[str, int, int]]]:
    """What the caption and the story claims need, with the counts of this run.

    Captions per language are the paired captions of ``comparison``'s ``uid_v`` rows (``n``);
    ``story_counts``: stories per language (:func:`tokenbook.minsizes.units_per_group` of the
    story word table). Returns ``{"captions": [...], "stories": [...]}`` of
    ``(what, have, need)`` for :func:`tokenbook.minsizes.shortfall`.
    """
    rows = comparison[comparison["metric"] == "uid_v"] if len(comparison) else comparison
    per_lang = {str(r.lang): int(r.n) for r in rows.itertuples()} if len(rows) else {}
    story_counts = dict(story_counts or {})
    return {"captions": [("language(s)", len(per_lang), min_languages),
                         ("captions in the smallest language", smallest(per_lang),
                          min_captions)],
            "stories": [("story language(s)", len(story_counts), min_story_languages),
                        ("stories in the smallest language", smallest(story_counts),
                         min_stories)]}


def paper_claims(comparison: pd.DataFrame, story_comp: pd.DataFrame | None = None,
                 enrichment: Mapping[str, float] | None = None, *, min_share: float = 0.9,
                 story_note: str = "", story_counts: Mapping[str, int] | None = None,
                 min_languages: int = 30, min_captions: int = 3600,
                 min_story_languages: int = 13, min_stories: int = 5) -> list[Claim]:
    """The paper-scale claims (holds / does not hold) from one run's comparisons.

    Below the minimum sizes (:func:`size_requirements`; defaults: the paper's, see
    :data:`PAPER_SIZES`) a claim is *not testable* and its note gives the counts; otherwise the
    note gives the counts the verdict rests on. ``story_counts``: stories per language.
    """
    stats = _statistics(_share_sources(comparison, story_comp), comparison,
                        min(enrichment.values()) if enrichment else float("nan"),
                        stories=story_comp is not None)
    reqs = size_requirements(comparison, story_counts, min_languages=min_languages,
                             min_captions=min_captions, min_story_languages=min_story_languages,
                             min_stories=min_stories)
    thresholds = {"uid-lower-significant": 0.5, "reductions-at-onsets": 1.0}
    claims = []
    for cid, (text, statistic, paper) in CLAIMS.items():
        need = reqs["captions" if cid in CAPTION_CLAIMS else "stories"]
        if cid not in stats:
            claims.append(Claim.not_testable(cid, text, statistic=statistic, paper=paper,
                                             note=story_note or "no story data in this run"))
        elif shortfall(need):
            claims.append(Claim.not_testable(cid, text, statistic=statistic, paper=paper,
                                             note=shortfall(need)))
        elif cid in POOLED_CLAIMS:
            claims.append(Claim.less(cid, text, statistic=statistic, value=stats[cid],
                                     threshold=0.0, paper=paper, note=counts_note(need)))
        elif cid in ("uid-lower-significant", "reductions-at-onsets"):
            claims.append(Claim.greater(cid, text, statistic=statistic, value=stats[cid],
                                        threshold=thresholds[cid], paper=paper,
                                        note=counts_note(need)))
        else:
            claims.append(Claim.at_least(cid, text, statistic=statistic, value=stats[cid],
                                         threshold=min_share, paper=paper,
                                         note=counts_note(need)))
    return claims
