# ---
# jupyter:
#   jupytext:
#     formats: py:percent
#     text_representation:
#       extension: .py
#       format_name: percent
#       format_version: '1.3'
#       jupytext_version: 1.19.6
#   kernelspec:
#     name: python3
#     display_name: Python 3
#     language: python
# ---

# %% [markdown]
# # Memorisation cartography
#
# {cite}`dankers2023memorisation` place every sentence pair of a machine-translation corpus on a
# *map*: how well models predict the pair's reference when they **trained on it** (training
# memorisation, TM) against how well they predict it when they **did not** (generalisation score,
# GS). The difference is *counterfactual memorisation*, CM = TM − GS
# {cite}`feldman2020neural,zhang2023counterfactual`. Pairs that are only predicted when seen sit
# below the diagonal (memorised); pairs predicted either way sit top right (generalised); pairs
# never fitted sit bottom left (unlearnt, CM ≈ 0). The paper then asks what predicts a pair's
# place on the map (surface features and training signals, after dataset cartography
# {cite}`swayamdipta2020cartography` and forgetting events {cite}`toneva2019forgetting`) and what
# happens to translation quality when a region of the map is removed from training.
#
# **Estimator** (the authors' `compute_memorisation.py`): each of M models trains from scratch on
# a random half of the corpus; every model scores every pair teacher-forced with the per-token
# geometric-mean probability of the reference (EOS included, as fairseq's `--score-reference`);
# TM is the mean over the models that trained on the pair, GS over those that did not.
#
# **What a tiny-scale verdict means.** At the **tiny** scale (the default) the corpus is a
# synthetic translation world whose phenomena we plant, and an ensemble of tiny Marian models
# {cite}`junczys2018marian,vaswani2017attention` gives the map. Whether a claim "holds" in a world
# we generate is decided by the generator, so a tiny run tests the *pipeline*: every claim is
# measured on `n_seeds` independent root seeds (each a new world, new subsets, new models and new
# analysis draws) with the paper's mechanism **on** and **off** (a planted control world, or a
# null that needs no retraining and then tests only that there is a relation), and is *detected* when its mean over the seeds on meets the expectation
# with its whole 95% interval, the paired on − off difference excludes 0 in the claimed
# direction and the off mean does not meet it ({py:mod}`tokenbook.verdicts`).
# Only the **paper** scale (`-f params/memorisation_cartography/paper.yaml`: a real corpus and
# Transformer-base models, the same code path) can say whether the paper's findings hold for real
# translation data.

# %% tags=["parameters"]
from tokenbook.book.paramtypes import (Count, EnsembleDesign, ModelPreset, NullControl, OpenShare,
                                       OptionalCorpora, OptionalCorpus, OptionalText, Positive,
                                       Scale, Seed, Share, SomeLanguages)

scale: Scale = "tiny"  # "tiny": synthetic world + tiny Marian; "paper": a real corpus, Transformer-base
seed: Seed = 0  # first root seed: world, subsets and model initialisation (retrains every model)
boot_seed: Seed = 0  # analysis seed: bootstraps, predictor splits and nulls (trains nothing, ~1 min)
n_seeds: Count = 6  # root seeds for the tiny-scale verdicts (each ~3.5 CPU-min to train)
corpus: OptionalCorpus = None  # paper scale: spec for tokenbook.data.parallel.load_corpus
test_corpus: OptionalCorpus = None  # paper scale: the held-out test corpus spec (e.g. FLORES dev)
n_pairs: Count = 300  # pairs in the synthetic world (retrains)
n_test: Count = 60  # held-out test pairs of the synthetic world (retrains the removal models)
n_models: Count = 8  # models in the CM ensemble, paper 40 (retrains)
design: EnsembleDesign = "balanced"  # "balanced" (each pair in M/2 subsets) or "random" halves (the paper)
subset_ratio: OpenShare = 0.5  # share of the corpus each ensemble model trains on (retrains)
vocab_size: Count = 250  # joint BPE vocabulary (retrains)
model_preset: ModelPreset = "tiny"  # "tiny" (d 64, 2+2 layers) or "base" (Transformer-base) (retrains)
epochs: Count = 40  # ensemble training epochs, paper 100 (retrains)
dynamics_epochs: Count = 20  # the full-data run giving training signals, paper 50 (retrains)
removal_epochs: Count = 20  # retraining after removal, paper 50 (retrains the removal models)
batch_size: Count = 16  # training batch size in pairs (retrains)
learning_rate: Positive = 0.003  # peak Adam learning rate (retrains)
removal_token_share: OpenShare = 0.08  # share of source tokens removed per condition (retrains removal)
bleu_variant: bool = False  # also decode every pair for the BLEU-based map (retrains, ~2x)
rare_null: NullControl = "world"  # rare-high-cm off: "world" (rare words derivable from regular pairs, its own ensemble; retrains) or "shuffle" (rare-word labels permuted)
n_splits: Count = 5  # 70/30 predictor splits per seed, MLP and linear each (~20 s per seed)
region_grid_size: Count = 3  # §6.1 grid of size·(size+1)/2 cells, paper 10: 55 cells (retrains the grid)
region_seeds: Count = 1  # model seeds per grid cell and corpus on each root seed's map, paper 3 (retrains the grid and corpora)
specialised_token_share: OpenShare = 0.5  # §6.2 corpora: share of the source tokens each keeps (retrains)
num_beams: Count = 5  # beam size of the grid's and corpora's BLEU, as the authors (decoding only)
cm_high: Share = 0.25  # map regions: CM at least this is "memorised"
high: Share = 0.6  # map regions: TM and GS at least this is "generalised"
low: Share = 0.3  # map regions: TM below this is "unlearnt"
n_workers: Count = 2  # LocalCluster processes (1 thread each)
scheduler_address: OptionalText = None  # e.g. "tcp://10.0.0.1:8786" of an existing Dask cluster
gpu_flops: Positive = 4.6e13  # sustained FLOP/s of one GPU for the paper-scale compute estimate; the default is what train_marian sustained for Transformer-base in float32 on an H200, see benchmarks/results/marian_gpu.json
crosslingual_languages: SomeLanguages = ["de", "nl", "fr"]  # target languages of the multi-parallel maps, paper de nl fr es it
crosslingual_corpora: OptionalCorpora = None  # paper scale: one load_corpus spec per language, same English lines
crosslingual_pairs: Count = 120  # pairs of the multi-parallel world (retrains the cross-lingual maps)
crosslingual_models: Count = 4  # models per language and seed in the cross-lingual maps (retrains; ~35 s per seed)
crosslingual_epochs: Count = 20  # training epochs of the cross-lingual models (retrains)
crosslingual_bleu: bool = True  # also decode the first seed's pairs for the BLEU-based maps (~20 s)
maps: str = ""  # the authors' own maps instead of the tiny world, nothing trained: a folder, file or URL of their pickles (counterfactual_memorisation_ref.pickle) or of the demo's Plotly pages (see the README)
min_map_rows: Count = 100  # authors' maps: rows a map needs for the feature and predictor verdicts (ours; the demo shows 10k pairs per language)
min_phrases: Count = 20  # authors' maps: phrases a phrase group needs (ours; the demo's groups hold 32 to 92)
min_map_languages: Count = 2  # authors' maps: languages needed for the cross-language verdicts
min_shared_sources: Count = 100  # authors' maps: sources any two languages' maps must share (ours)

# %% [markdown]
# Every computation below is a call into the `tokenbook` library; the modules this chapter
# uses are documented in the {doc}`API reference <../book/api>`: {py:mod}`tokenbook.memorisation_cartography.experiments`, {py:mod}`tokenbook.memorisation_cartography.claims`, {py:mod}`tokenbook.memorisation_cartography.estimator`, {py:mod}`tokenbook.memorisation_cartography.signals`, {py:mod}`tokenbook.memorisation_cartography.crosslingual`, {py:mod}`tokenbook.memorisation_cartography.mapfeatures`, {py:mod}`tokenbook.memorisation_cartography.released`, {py:mod}`tokenbook.memorisation_cartography.figures`, {py:mod}`tokenbook.robustness`, {py:mod}`tokenbook.claims`.

# %%
import time

import pandas as pd
from IPython.display import display

from tokenbook.claims import judge_claims, report
from tokenbook.memorisation_cartography import figures
from tokenbook.book.interactive import check_parameters
from tokenbook.memorisation_cartography import claims as memorisation_claims
from tokenbook.memorisation_cartography import experiments
from tokenbook.memorisation_cartography import released as authors_maps
from tokenbook.memorisation_cartography.crosslingual import cross_language_correlations
from tokenbook.memorisation_cartography.ensemble import training_gpu_hours
from tokenbook.memorisation_cartography.estimator import map_regions
from tokenbook.memorisation_cartography.features import FEATURES
from tokenbook.memorisation_cartography.mapfeatures import (feature_by_region,
                                                            feature_feature_correlations,
                                                            map_agreement, region_feature_summary)
from tokenbook.plotting import savefig, use_book_style
from tokenbook.provenance import show_versions
from tokenbook.seeds import seed_list

check_parameters("memorisation_cartography", globals())  # the runner's checks (plain papermill too)

use_book_style()
show_versions()

# %% [markdown]
# ## The corpus
#
# The synthetic world translates an SVO source language into an SOV target language with
# adjectives after the noun, gender/number agreement and verb agreement
# (`tokenbook.worlds.translation`). Planted at known rates and labelled **for evaluation only**:
# *idioms* (a fixed verb + object phrase with an unrelated fixed translation, each twice), their
# control *idiom_literal* (a fixed phrase repeated the same way but translated literally), *noisy*
# pairs (another pair's target, a truncated target, an untranslated copy), *rare words* (a hapax
# noun) and exact *duplicates* (assigned to subsets together). 30% of the test sentences use a
# training idiom in a new sentence.

# %%
if not maps:  # the authors' maps given: no tiny world, nothing trained
    world = dict(n_pairs=n_pairs, n_test=n_test)
    design_params = dict(n_models=n_models, design=design, subset_ratio=subset_ratio,
                         vocab_size=vocab_size, preset=model_preset, epochs=epochs,
                         dynamics_epochs=dynamics_epochs, removal_epochs=removal_epochs,
                         batch_size=batch_size, learning_rate=learning_rate,
                         removal_token_share=removal_token_share, bleu=bleu_variant)
    seeds = seed_list(n_seeds if scale == "tiny" else 1, seed)
    # the chapter's claims as declared in the library (the figures' thresholds come from them)
    specs = memorisation_claims.claim_specs(n_models=n_models, n_splits=n_splits,
                                            n_languages=len(crosslingual_languages),
                                            rare_null=rare_null)
    first = experiments.make_corpus(seed, corpus=corpus, test_corpus=test_corpus, world=world)
    print(f"{len(first.pairs)} training pairs, {len(first.test)} test pairs; root seeds {seeds}")
(first.pairs.groupby("phenomenon").head(1)[["phenomenon", "source", "target"]]
 if not maps else None)

# %% [markdown]
# ## Every model, fanned out with Dask
#
# One call trains every model of every root seed as Dask tasks (a `LocalCluster` of
# single-threaded worker processes; `scheduler_address` uses an existing cluster, e.g.
# dask-jobqueue on Slurm): per seed the ensemble of `n_models` models, the full-data run whose
# per-epoch scores give the training signals, and the two §6.1 retrainings. Each model's output is
# written atomically into a workspace the library keys by the corpus and the design, so a killed
# run resumes and every claim below shares the same models. Then every claim's statistic is
# computed per seed, with the mechanism on and off (cached by seed, mechanism and library source).

# %%
if not maps:  # the authors' maps given: no tiny world, nothing trained
    arts, seed_table, timing = experiments.run_seeds(
        seeds, design=design_params, world=world, corpus=corpus, test_corpus=test_corpus,
        boot_seed=boot_seed, n_splits=n_splits, scheduler_address=scheduler_address,
        n_workers=n_workers, rare_null=rare_null)
    print(f"models: {timing['training_s']:.0f} s; statistics and controls for {len(seeds)} seeds: "
          f"{timing['analysis_s']:.0f} s (0 s: everything was in the cache)")

# %% [markdown]
# ## The map
#
# The map of the first seed, as the authors draw it: TM on x, GS on y, the diagonal, CM as colour
# (clipped at 0 as in their figures), with one typical pair of each region annotated. Regions:
# *memorised* (CM ≥ `cm_high`), *generalised* (TM and GS ≥ `high`), *unlearnt* (TM < `low`),
# *in-between* otherwise.

# %%
if not maps:  # the authors' maps given: no tiny world, nothing trained
    cm = arts[seed].cm()
    cm["region"] = map_regions(cm, high=high, low=low, cm_high=cm_high)
    examples = experiments.region_examples(cm, per_region=1)
(examples
 if not maps else None)

# %% mystnb={"figure": {"name": "fig-memcart-map", "caption": "the memorisation map of the first seed (per-token geometric-mean probabilities; colour CM clipped at 0; dashed: TM = GS)."}}
if not maps:  # the authors' maps given: no tiny world, nothing trained
    fig = figures.plot_map(cm, examples=examples)
    savefig(fig, "memorisation-map")
    fig;

# %% [markdown]
# Where the planted phenomena fall, and how each region is made up (the labels are read only
# here, never by the map or the predictors):

# %% mystnb={"figure": {"name": "fig-memcart-phenomena", "caption": "planted phenomena (colour) against regular pairs (grey) on the map of the first seed (probabilities)."}}
if not maps:  # the authors' maps given: no tiny world, nothing trained
    fig = figures.plot_phenomena(cm)
    savefig(fig, "map-by-phenomenon")
    fig;

# %%
(pd.crosstab(cm["phenomenon"], cm["region"]).join(
     cm.groupby("phenomenon")[["tm", "gs", "cm"]].mean().round(3))
 if not maps else None)

# %% [markdown]
# ### Duplicates and the subset split
#
# The book assigns training subsets per *group* of exact duplicates: both copies of a pair are in
# a model's training half or both are out. The authors' scripts split corpus *lines*, so a
# duplicate's copies can fall on both sides and the model that holds one copy out trained on the
# other (the notes, "Duplicates"). The first seed's ensemble is trained a second time with the
# line-level split (`Design(assignment="line")`, same corpus, seeds and recipe) and the two
# compared: `leakage` is the mean share of a pair's held-out models that trained on its twin.

# %%
if not maps:  # the authors' maps given: no tiny world, nothing trained
    assignment, assignment_maps = experiments.assignment_comparison(
        arts[seed], scheduler_address=scheduler_address, n_workers=n_workers, boot_seed=boot_seed)
(assignment.round(3)
 if not maps else None)

# %% mystnb={"figure": {"name": "fig-memcart-assignment", "caption": "mean CM of duplicated and regular pairs under the book's grouped subsets and the authors' line-level split (first seed; bars: bootstrap 95% CIs over pairs)."}}
if not maps:  # the authors' maps given: no tiny world, nothing trained
    fig = figures.plot_assignment(assignment)
    savefig(fig, "cm-by-assignment")
    fig;

# %% [markdown]
# ## How reliable is CM?
#
# CM from two *disjoint* sets of k models each, correlated across pairs (Spearman), and the
# Spearman–Brown projection of that split-half reliability to the whole ensemble. (Correlating CM
# from 9 of 12 models with CM from all 12 would flatter it: the two share 9 models.)

# %% mystnb={"figure": {"name": "fig-memcart-reliability", "caption": "split-half reliability of CM (Spearman ρ) against models per half, first seed; dashed: Spearman–Brown projection to all models."}}
if not maps:  # the authors' maps given: no tiny world, nothing trained
    fig = figures.plot_reliability(experiments.reliability_curve(arts[seed].scores(),
                                                                 seed=boot_seed))
    savefig(fig, "cm-reliability")
    fig;

# %% [markdown]
# ## What predicts the map
#
# Surface features of each pair (lengths, length ratio and difference, BPE segmentation rate, word
# frequency and rarity, source–target overlap, repetition; `tokenbook.memorisation_cartography.features`) and
# training signals from one full-data run (confidence, variability, final-minus-mean likelihood,
# forgetting, mid and final likelihood, the likelihood of the model's own greedy hypothesis) feed
# the authors' multi-output MLP (100, 100) predicting TM, GS and CM on held-out 30% splits
# (Pearson r, mean absolute error), next to a linear baseline (ordinary least squares) on the same
# standardised inputs and splits. Claims are judged on the better of the two, which the claims
# table names.

# %%
if not maps:  # the authors' maps given: no tiny world, nothing trained
    pred = experiments.predictor_table(arts[seed], boot_seed=boot_seed, n_splits=n_splits)
(pred.groupby(["inputs", "estimator", "target"])[["pearson_r", "mae"]].agg(["mean", "std"]).round(3)
 if not maps else None)

# %% mystnb={"figure": {"name": "fig-memcart-predictors", "caption": "held-out Pearson r for CM of the MLP and the linear baseline (dots: split seeds; bars: means), first seed."}}
if not maps:  # the authors' maps given: no tiny world, nothing trained
    fig = figures.plot_predictors(pred)
    savefig(fig, "cm-predictors")
    fig;

# %% [markdown]
# Which features and signals go with each axis (Spearman ρ over the pairs of the first seed, CM
# clipped at 0 as in the authors' heatmap):

# %% mystnb={"figure": {"name": "fig-memcart-features", "caption": "Spearman ρ of surface features and training signals with TM, GS and CM (clipped at 0), first seed."}}
if not maps:  # the authors' maps given: no tiny world, nothing trained
    fig = figures.plot_feature_correlations(experiments.feature_spearman(arts[seed]))
    savefig(fig, "feature-correlations")
    fig;

# %% [markdown]
# How the features go with each other (Spearman ρ between features over the same pairs; the
# authors blank abs(ρ) < 0.5, here every value is shown): several are near-copies of one
# another (word and BPE lengths, length ratio and difference), so no single feature's
# correlation with CM can be read as its own effect.

# %%
if not maps:  # the authors' maps given: no tiny world, nothing trained
    analysis = experiments.analysis_table(arts[seed])
    map_features = [f for f in FEATURES if f in analysis.columns]
    analysis["region"] = map_regions(analysis, high=high, low=low, cm_high=cm_high)

# %% mystnb={"figure": {"name": "fig-memcart-feature-feature", "caption": "Spearman ρ between the surface features over the pairs of the first seed (lower triangle)."}}
if not maps:  # the authors' maps given: no tiny world, nothing trained
    fig = figures.plot_feature_feature(feature_feature_correlations(analysis, map_features))
    savefig(fig, "feature-feature-correlations")
    fig;

# %% [markdown]
# The authors' density plots: for a few features, the distribution over the pairs of each map
# region (each region's density normalised on its own), and for every feature the median per
# region with a Kruskal–Wallis test that the regions differ (q: Benjamini–Hochberg over
# features).

# %% mystnb={"figure": {"name": "fig-memcart-feature-kde", "caption": "density of six surface features over the pairs of each map region, first seed (words, BPE tokens per word, log10 counts, shares)."}}
if not maps:  # the authors' maps given: no tiny world, nothing trained
    kde_features = [f for f in ("src_length", "trg_segmentation", "src_min_log_freq", "overlap",
                                "char_similarity", "pair_repeats") if f in map_features]
    fig = figures.plot_feature_kde(feature_by_region(analysis, kde_features), kde_features)
    savefig(fig, "feature-kde-by-region")
    fig;

# %%
if not maps:  # the authors' maps given: no tiny world, nothing trained
    if analysis["region"].nunique() >= 2:
        feature_regions = (region_feature_summary(analysis, map_features)
                           .pivot_table(index=["feature", "H", "q"], columns="region",
                                        values="median")
                           .reset_index().sort_values("q").round(3))
    else:   # e.g. models trained too briefly: every pair in one region, nothing to compare
        feature_regions = pd.DataFrame({"note": [f"one map region only "
                                                 f"({analysis['region'].iloc[0]}): no test"]})
(feature_regions
 if not maps else None)

# %% [markdown]
# ## What the map does to translation: removal
#
# As in the paper's §6.1 (our reading of it), each seed retrains once without the pairs nearest
# (KD-tree over TM, GS) to the centre of the *memorised* pairs (top 5% CM) and once without random
# pairs, removing the same number of source tokens (`removal_token_share`). Test metrics: mean
# log-probability per reference token (nats), corpus BLEU of greedy translations
# {cite}`post2018sacrebleu`, and a hallucination probe (one extra source word inserted; the share
# of adequate translations that then change almost entirely). `_regular` columns use only the test
# sentences without idioms.

# %%
if not maps:  # the authors' maps given: no tiny world, nothing trained
    removal = pd.concat([a.removal().assign(root_seed=s) for s, a in arts.items()],
                        ignore_index=True)
(removal.set_index(["root_seed", "condition"])[["n_removed", "test_logprob", "bleu",
                                                "hallucination_rate"]].round(3)
 if not maps else None)

# %% [markdown]
# ## The map's regions: the §6.1 removal grid and the §6.2 specialised corpora
#
# The authors remove, for each of 55 coordinates (TM, GS) = (i/10, j/10) with 1 ≤ j ≤ i ≤ 10
# (the triangle on and below the diagonal), the pairs nearest that point on the map up to a
# fixed source-token budget, retrain three seeds per cell and read the test log-probability,
# beam-search BLEU and greedy-decoding hallucinations. Here the same triangle at
# `region_grid_size` (n·(n + 1)/2 cells), on each root seed's own map (every root seed an
# independent replicate: its world, ensemble and map), with `region_seeds` model seeds per cell
# and root seed and random removal of the same budget as the control; each cell is shown as its
# seed-paired difference to random removal with a t interval over seeds
# ({py:func}`~tokenbook.memorisation_cartography.regions.paired_differences`).
#
# §6.2 turns the map into training corpora: an MLP trained on 20% of the map predicts every
# pair's (TM, GS) from its surface features, and a corpus keeps the pairs whose *predicted*
# position lies in a polygon — `bleu_hal`, the high-TM triangle (0.6, 0), (1, 1), (1, 0), and
# `log_probability`, the band GS ≤ 0.4 below the diagonal — against a random corpus with the
# same number of source tokens (`specialised_token_share`). The candidate pool is the mapped
# corpus itself, and a polygon with too few tokens is completed with the pairs predicted nearest
# to it (our reading; the share of tokens from inside each polygon is in the table). The
# null control of the two §6.2 claims is the same polygon applied to the predicted positions
# permuted across pairs (`bleu_hal_permuted`, `log_probability_permuted`): a corpus of the same
# size chosen by a map that says nothing about its pairs. Every
# retraining is one Dask task whose record is written atomically, so a killed run resumes.
#
# Two checks tell whether this world can test the §6.2 claims at all. The manipulation check
# asks whether selecting on the predicted map really concentrates a corpus in its polygon *on
# the measured map*: the share of its source tokens from pairs inside the polygon must exceed
# the random corpus' share by more than 5 points
# ({py:func}`~tokenbook.memorisation_cartography.checks.region_token_share`), and the permuted
# selection's must not. The known answer reads the planted labels, as for the removal claims:
# the share of the test sentences whose translation the corpus still teaches, corpus − random
# corpus ({py:func}`~tokenbook.memorisation_cartography.checks.idioms_still_taught`).

# %%
if not maps:  # the authors' maps given: no tiny world, nothing trained
    regions = experiments.region_experiments(
        [arts[s] for s in seeds], grid_size=region_grid_size, n_train_seeds=region_seeds,
        specialised_token_share=specialised_token_share, num_beams=num_beams,
        scheduler_address=scheduler_address, n_workers=n_workers)
    print(f"{regions.n_runs} retrainings ({regions.seconds:.0f} s); the §6.2 predictor, held out:")
(regions.predictor.round(3)
 if not maps else None)

# %% mystnb={"figure": {"name": "fig-memcart-removal-grid", "caption": "the §6.1 removal grid. Each cell removes the pairs nearest its (TM, GS) centre on each root seed's own map; colour and number: the seed-paired difference of the retrained models to random removal of the same token budget (log-probability in nats per token, BLEU in points, hallucination rate as a share); a star marks a 95% t interval over seeds that excludes zero."}}
if not maps:  # the authors' maps given: no tiny world, nothing trained
    fig = figures.plot_removal_grid(regions.grid_diff)
    savefig(fig, "removal-grid")
    fig;

# %% [markdown]
# The table's `inside_token_share` is measured on the *predicted* positions the corpora were
# chosen by; the claims table below gives the manipulation check on the measured map per root
# seed. In this tiny world a random corpus already has most of its tokens inside both polygons
# on the measured map (the tiny models learn most training pairs, TM high, and generalise to
# few, GS low), so a selection has little room to concentrate a corpus further.

# %%
# the corpora of every root seed's map: means over the root seeds
(regions.corpora.groupby("condition")[["n_pairs", "inside_token_share", "mean_tm",
                                      "mean_gs", "mean_cm"]].mean().round(2)
 if not maps else None)

# %% mystnb={"figure": {"name": "fig-memcart-specialised", "caption": "the §6.2 specialised corpora, each against the random corpus of the same source-token budget: seed-paired differences with 95% t intervals over seeds (log-probability in nats per token, BLEU in points, hallucination rate as a share)."}}
if not maps:  # the authors' maps given: no tiny world, nothing trained
    fig = figures.plot_specialised(regions.specialised_diff)
    savefig(fig, "specialised-corpora")
    fig;

# %% [markdown]
# ## Across languages: the same sources in several target languages
#
# The authors map five pairs, EN→DE, NL, FR, ES and IT, over *one* English corpus with a target
# file per language (a multi-parallel corpus), correlate TM, GS and CM of the same sources across
# languages (`section4.py::compare_languages`) and train the map predictor on one language to
# test it on the others (`section5.py::train_mlps`). Here the multi-parallel tiny world
# ({py:func}`~tokenbook.worlds.translation.make_multiparallel_world`) translates one shared
# source side into `crosslingual_languages`; the source side and what lives on it (rare words,
# duplicates, the idiom phrases) is shared, while each language has its own lexicon and grammar
# variant, makes half of the idiom phrases idiomatic (a different half per language) and draws
# its own noisy pairs. Each language gets its own joint BPE vocabulary and ensemble, in a
# smaller design than the chapter's main map (`crosslingual_pairs` pairs, `crosslingual_models`
# models of `crosslingual_epochs` epochs, no dynamics run), for every root seed; a pair is in the
# same models' training halves in every language, as the authors' seeded split of a line-aligned
# corpus gives. The first seed's pairs are also decoded greedily for the BLEU-based maps.
#
# What this can test: the world shares the source side by construction, so the maps agree on the
# shared regular sentences in any world. The mechanism the claims test is that the *phenomena*
# that drive memorisation (idiom phrases, rare words, duplicates) live on the source sentence:
# the off world of each root seed holds the same phenomenon sentences but places them per
# language (`world={"shared_phenomena": False}` of
# {py:func}`~tokenbook.worlds.translation.make_multiparallel_world`, its own ensembles), so a
# phenomenon pair of one language meets, mostly, a regular source in the others. Each claim's
# tiny statistic is the agreement over the first language's phenomenon pairs
# ({py:func}`~tokenbook.memorisation_cartography.crosslingual.phenomenon_agreement`), beside the
# same statistic computed on the generator's label "no other pair teaches this target" (the
# known answer). How *strongly* the maps agree overall follows from the rates we planted per
# language and is reported as not testable.

# %%
if not maps:  # the authors' maps given: no tiny world, nothing trained
    t_cross = time.perf_counter()
    crosslingual_design = experiments.Design(**{**design_params, "n_models": crosslingual_models,
                                                "epochs": crosslingual_epochs})
    crosslingual, crosslingual_s = experiments.crosslingual_build(
        seeds, crosslingual_design, languages=crosslingual_languages, n_pairs=crosslingual_pairs,
        corpora=crosslingual_corpora, bleu_seeds=[seeds[0]] if crosslingual_bleu else [],
        scheduler_address=scheduler_address, n_workers=n_workers)
    crosslingual_off = None
    if crosslingual_corpora is None:  # the off world: the same phenomena, placed per language
        crosslingual_off, crosslingual_off_s = experiments.crosslingual_build(
            seeds, crosslingual_design, languages=crosslingual_languages,
            n_pairs=crosslingual_pairs, world={"shared_phenomena": False},
            scheduler_address=scheduler_address, n_workers=n_workers)
        crosslingual_s += crosslingual_off_s
    crosslingual_table = experiments.crosslingual_seed_table(
        crosslingual, off_results=crosslingual_off, boot_seed=boot_seed)
    xmaps = crosslingual[seeds[0]].maps
    print(f"{len(crosslingual_languages)} languages × {len(seeds)} root seeds: models "
          f"{crosslingual_s:.0f} s (0 s: cached), maps and statistics with controls "
          f"{time.perf_counter() - t_cross - crosslingual_s:.0f} s")

# %% [markdown]
# The cross-language Spearman ρ of each metric over the same sources, with a bootstrap 95%
# interval over pairs (first seed; the figure adds the other root seeds' ρ in grey):

# %%
if not maps:  # the authors' maps given: no tiny world, nothing trained
    xcorr = pd.concat([cross_language_correlations(cl.maps, n_boot=1000, seed=boot_seed)
                       .assign(seed=s) for s, cl in crosslingual.items()], ignore_index=True)
(xcorr[xcorr["seed"] == seeds[0]].drop(columns="seed").round(3)
 if not maps else None)

# %% mystnb={"figure": {"name": "fig-memcart-crosslingual", "caption": "Spearman ρ of TM, GS and CM between two languages' maps over the same sources; blue: the first seed with bootstrap 95% CIs over pairs; grey: the other root seeds."}}
if not maps:  # the authors' maps given: no tiny world, nothing trained
    fig = figures.plot_crosslingual(xcorr)
    savefig(fig, "crosslingual-correlations")
    fig;

# %% [markdown]
# Transfer: the map predictor (MLP (100, 100) and the linear baseline, TM, GS and CM jointly
# from the surface features, standardised) trained on a 70% split of one language and tested on
# its held-out 30% (the diagonal) and on every pair of each other language (first seed). A
# transfer cell can hardly beat the diagonal: it is bounded by how well CM is predicted within
# one language, which at this size (70% of `crosslingual_pairs` to train on, CM from
# `crosslingual_models` models) is low.

# %%
if not maps:  # the authors' maps given: no tiny world, nothing trained
    xtransfer = experiments.crosslingual_transfer_table(xmaps, seed=boot_seed)
(xtransfer.pivot_table(index=["target", "estimator", "train"], columns="test",
                       values="pearson_r").round(3)
 if not maps else None)

# %% mystnb={"figure": {"name": "fig-memcart-transfer", "caption": "held-out Pearson r for CM of the map predictor trained on one language (rows) and tested on each (columns; diagonal: the held-out 30%), MLP and linear baseline, first seed."}}
if not maps:  # the authors' maps given: no tiny world, nothing trained
    fig = figures.plot_transfer(xtransfer, target="cm")
    savefig(fig, "crosslingual-transfer")
    fig;

# %% [markdown]
# The BLEU-based map (the authors' "hyp" variant: sentence BLEU of each model's greedy
# translation instead of the reference likelihood, same models) against the likelihood-based
# map, per language of the first seed: Spearman ρ per metric with a bootstrap 95% interval
# (`section4.py::compute_correlation_LL_BLEU`). The main map's ensemble does not decode
# (`bleu_variant` is off at tiny scale: it about doubles the cost), so the comparison uses the
# cross-lingual maps; `paper.yaml` keeps `bleu_variant: true`.

# %%
if not maps:  # the authors' maps given: no tiny world, nothing trained
    agreement = experiments.bleu_agreement(crosslingual[seeds[0]], n_boot=1000, seed=boot_seed)
(agreement.set_index(["language", "metric"]).round(3)
 if not maps else None)

# %% mystnb={"figure": {"name": "fig-memcart-crosslingual-seeds", "caption": "the cross-lingual claims' statistic per root seed: on, the phenomena on the shared sources; off, the same phenomena placed per language (TM/GS/CM), or the maps permuted across pairs (transfer); dotted: the claim's threshold."}}
if not maps:  # the authors' maps given: no tiny world, nothing trained
    fig = figures.plot_seed_values(crosslingual_table,
                                   thresholds=memorisation_claims.thresholds(specs))
    savefig(fig, "crosslingual-claims-over-seeds")
    fig;

# %% [markdown]
# ## Every claim over seeds, mechanism on and off

# %% mystnb={"figure": {"name": "fig-memcart-seeds", "caption": "each claim's statistic per root seed with the mechanism on and off; dotted: the claim's threshold."}}
if not maps:  # the authors' maps given: no tiny world, nothing trained
    fig = figures.plot_seed_values(seed_table, thresholds=memorisation_claims.thresholds(specs))
    savefig(fig, "claims-over-seeds")
    fig;

# %% [markdown]
# ## What the paper scale costs
#
# The paper's design: Transformer-base (~70M parameters with a 64k joint vocabulary), M = 40 models
# on 50% subsets for 100 epochs, per language pair of ~1M pairs (~27 BPE tokens per side), plus
# the full-data dynamics run and the removal grid (55 cells × 3 seeds). With 6·N·D training FLOPs
# at `gpu_flops` sustained — by default 4.6e13 FLOP/s, what the library's own `train_marian`
# sustained for this model (64k vocabulary, batches of 128 pairs) in float32 on an NVIDIA H200
# (`benchmarks/marian_gpu.py`); with TF32 matrix products on it ran 1.64× as fast:

# %%
pd.DataFrame({
    "CM ensemble (40 × 50%, 100 epochs)": training_gpu_hours(
        n_pairs=1e6, tokens_per_pair=54, n_params=7e7, epochs=100, runs=40, subset_ratio=0.5,
        effective_flops=gpu_flops),
    "training dynamics (1 × 100%, 50 epochs)": training_gpu_hours(
        n_pairs=1e6, tokens_per_pair=54, n_params=7e7, epochs=50, runs=1,
        effective_flops=gpu_flops),
    "removal grid (55 cells × 3 seeds, 50 epochs)": training_gpu_hours(
        n_pairs=1e6, tokens_per_pair=54, n_params=7e7, epochs=50, runs=165,
        effective_flops=gpu_flops),
}).T.round(1)

# %% [markdown]
# ## The authors' own maps
#
# With `maps` set the chapter skips the tiny world (nothing above runs, nothing is trained) and
# reads the authors' maps instead: their pickles `counterfactual_memorisation_{ref,hyp}.pickle`
# (every training pair's TM, GS and CM, shared by the authors on request) or the pages of their
# public demo (10k random pairs per language, and the 2025 EN–NL phrase maps of idioms, proverbs
# and non-compositional compounds: one point per phrase at the mean TM/GS of the pairs holding
# it, marker size growing with the pair count, one example pair each). Where to get them: the
# README. Values are on the authors' 0–1 axes (BLEU maps divided by 100). The same analyses as
# above run on them: the regions, the map, the surface features (rarity from wordfreq, as the
# authors; the demo's example texts are cut at about 100 characters, which shortens the length
# features), the MLP against its linear baseline, the phrase groups, and the agreement of the
# maps of languages that share source sentences.

# %%
if maps:
    released_maps = authors_maps.load_maps(maps)
    released = authors_maps.analyse(
        released_maps, seed=boot_seed, n_splits=n_splits, min_map_rows=min_map_rows,
        min_phrases=min_phrases, min_languages=min_map_languages,
        min_shared_sources=min_shared_sources, high=high, low=low, cm_high=cm_high)
    display(released_maps.summary())
    display(released["regions"].pivot_table(index="map", columns="region", values="share")
            .round(3))

# %% mystnb={"figure": {"name": "fig-memcart-authors-map", "caption": "The authors' first map (per-pair maps first; else a phrase map): x = TM, y = GS on the authors' 0-1 axes, colour CM clipped at 0, dashed: TM = GS."}}
if maps:
    first_map = next(iter(released["tables"].values()))
    fig = figures.plot_map(first_map)
    savefig(fig, "authors-map")
    fig;

# %% mystnb={"figure": {"name": "fig-memcart-authors-features", "caption": "Spearman ρ of each surface feature with CM on each of the authors' maps (rarity from wordfreq)."}}
if maps and released["cm_correlations"] is not None:
    fig = figures.plot_feature_correlations(released["cm_correlations"])
    savefig(fig, "authors-feature-correlations")
    fig;

# %% [markdown]
# Held-out Pearson r and mean absolute error of the MLP (100, 100) and the linear baseline, per
# map and target, mean over the `n_splits` 70/30 splits; then the phrase groups with the means
# the method notes derived from the demo beside them (`*_notes`), and the cross-language
# Spearman ρ over shared sources.

# %%
if maps and released["predictor_table"] is not None:
    display(released["predictor_table"].groupby(["inputs", "estimator", "target"])[
        ["pearson_r", "mae"]].mean().round(3))

# %% mystnb={"figure": {"name": "fig-memcart-authors-predictors", "caption": "Held-out Pearson r for CM of the MLP and the linear baseline on each of the authors' maps (dots: splits; bars: means)."}}
if maps and released["predictor_table"] is not None:
    fig = figures.plot_predictors(released["predictor_table"])
    savefig(fig, "authors-predictors")
    fig;

# %%
if maps and released["phrase_groups"] is not None:
    display(released["phrase_groups"].round(3))
if maps and released["crosslingual"] is not None:
    display(released["crosslingual"].round(3))
elif maps:
    print("No cross-language correlations: they need per-pair maps of 2 or more languages "
          "(likelihood metric) that share source sentences.")

# %% [markdown]
# ## Claims
#
# Tiny scale: every claim is declared once in the library
# ({py:func}`tokenbook.memorisation_cartography.claims.claim_specs`: wording, statistic, expectation,
# mechanism, manipulation check, known answer, balance check) and judged here in one call on the
# seed tables: per claim the share of seeds in which it holds with the mechanism on and off, the
# mean statistic with a t-based 95% interval over seeds, the verdict, and beside it the known
# answer from the generator alone (the planted labels' AUROC for the idiom, rare-word and noisy
# claims), the manipulation check (is the mechanism present on and absent off in every seed) and
# the balance check (did anything else move). `rare_null` picks the rare-word claim's off world:
# `world` (the same world whose rare words are compounds of ordinary nouns translated part by
# part: as rare, but derivable; its own ensemble) or `shuffle` (labels permuted: there is a
# relation only). `noisy-unlearnt` asks every noisy kind the paper names (misaligned, partly
# translated, untranslated) to sit at lower TM than regular pairs. The paper's own numbers
# could not be checked (see the method notes), so no published values are listed; claims marked
# "our reading" follow our interpretation of the paper's §6.1.

# %%
if maps:
    claims = released["claims"]
elif scale == "tiny":
    # every claim from its library spec, judged on the seed tables of the map, the regions and
    # the cross-lingual maps (statistics, manipulation checks, known answers, balance checks)
    claims = judge_claims(specs, pd.concat(
        [seed_table, crosslingual_table, memorisation_claims.region_seed_table(regions, arts)],
        ignore_index=True))
else:   # paper scale on a real corpus: holds / does not hold at root seed `seed`
    claims = memorisation_claims.paper_claims(seed_table, crosslingual_table, regions, seed)
report(claims)
