# ---
# jupyter:
#   jupytext:
#     formats: py:percent
#     text_representation:
#       extension: .py
#       format_name: percent
#       format_version: '1.3'
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # A grounded typology of word classes
#
# Haley, Goldwater & Ponti {cite}`haley2025grounded` measure how much a word owes to what is
# seen: the **groundedness** of a word token is how much less surprising it becomes when a
# captioning model sees the image,
#
# $$ G(w_t) = s_U(w_t) - s_P(w_t) = \log p_P(w_t \mid w_{<t}, \text{image}) - \log p_U(w_t \mid w_{<t}), $$
#
# in nats, where $s_U$ is the surprisal under a text-only language model and $s_P$ under the
# captioner, on the same caption after the same prefix (`caption {lang}\n`). Word surprisals are
# sums of beginning-of-word–corrected token surprisals {cite}`pimentel2024compute`, for the
# *tagger's* words, aligned to model tokens by character offsets. $G$ estimates the pointwise
# mutual information between the word and the image given its context.
#
# The paper's claims checked here: lexical word classes are more grounded than functional ones,
# yet functional classes still carry some grounding (their mean is above zero); a cline
# NOUN > ADJ > VERB holds across languages; and groundedness correlates only partly with
# concreteness norms {cite}`scott2019glasgow`.
#
# **Scales.** At tiny scale (default) the captions come from the library's grounded world —
# synthetic languages with known word classes, built with the papers' mechanism planted
# (`make_world(mechanism="on")`: nouns and adjectives determined by the image, articles marking
# whether the scene holds one object of a shape) and concreteness ratings derived from the
# generator — scored by a tiny PaliGemma captioner {cite}`beyer2024paligemma` and an
# architecture-matched text-only LM, both trained here for each root seed on this chapter's own world
# (the UID chapter trains the same architecture on its world). At paper scale
# (`-f params/groundedness_typology/paper.yaml`) the same code scores Crossmodal-3600
# {cite}`thapliyal2022crossmodal` with the authors' model pair and tags words with Stanza's UD
# pipelines {cite}`qi2020stanza` (multi-word tokens such as French *du* = *de le* are kept as one
# segment tagged `ADP+DET` and excluded from the class analyses). Setting `source = "released"`
# analyses the authors' released `groundedness.csv` instead. With `dataset = "multi30k"` the
# same pair scores Multi30K (Elliott et al. 2016; the authors' code scored its val and
# train splits; whether the paper reports them is not known). COCO-35L, the machine-translated
# captions the text-only LM was fine-tuned on, is read by `tokenbook.data.coco35l` (only needed
# to retrain that LM; the chapter uses the authors' checkpoint).

# %% tags=["parameters"]
from tokenbook.book.paramtypes import (CaptionDataset, Count, GreyLevel, Languages,
                                       MergedSegments, NullControl, OpenShare, Scale, Seed, Share,
                                       SurprisalSource)

scale: Scale = "tiny"  # "tiny" (the library's world, CPU) or "paper" (Crossmodal-3600, GPU)
source: SurprisalSource = "models"  # "models": score captions here; "released": the authors' groundedness.csv
seed: Seed = 0  # root seed of the tiny world, model training and null shuffles (retrains, ~1 min)
boot_seed: Seed = 0  # analysis seed: bootstraps and permutations (retrains nothing)
n_seeds: Count = 6  # tiny verdicts: root seeds seed, seed+1, … (each its own world and models)
n_workers: Count = 2  # tiny verdicts: Dask processes (1 thread each) the seeds are spread over; 1: all in this process (on Binder: 1)
n_languages: Count = 4  # tiny world (retrains)
n_scenes: Count = 400  # tiny world: caption scenes (retrains)
n_stories: Count = 40  # tiny world: stories, in the models' training data (retrains)
train_steps: Count = 1000  # tiny models: fine-tuning steps (retrains)
text_steps: Count = 400  # tiny models: text-only decoder steps (retrains)
align_steps: Count = 300  # tiny models: projector alignment steps (retrains)
vision_steps: Count = 600  # tiny models: vision tower steps (retrains; with 200, `rank-agreement` was not detected)
max_page_sentences: Count = 3  # tiny world: at most this many sentences on a story page under one picture, like Bloom-VIST pages (1: a picture per sentence; retrains)
merged: MergedSegments = "split"  # segments merged by a straddling token: split (by length) or drop (their captions) (rescores)
null: NullControl = "shuffle"  # tiny off: shuffle (captions against other images, no retraining) or world (mechanism-off world, retrains)
released_path: str = ""  # path or URL of the released groundedness.csv (for source "released")
released_dataset: str = "xm"  # rows of the released table to analyse ("xm": Crossmodal-3600)
xm3600_dir: str = ""  # paper scale: folder with captions.jsonl and images/
dataset: CaptionDataset = "xm3600"  # paper scale, source "models": captions to score, "xm3600" (the paper's) or "multi30k"
xm_langs: Languages = []  # paper scale: languages to score (empty: all)
multi30k_dir: str = ""  # dataset "multi30k": checkout of github.com/multi30k/dataset (data/task1/raw, image_splits)
multi30k_images: str = ""  # dataset "multi30k": folder of the unpacked flickr30k-images.tar
multi30k_split: str = "val"  # dataset "multi30k": split (the authors scored val and train)
multi30k_langs: Languages = []  # dataset "multi30k": languages (empty: en, de, fr, cs)
captioner_id: str = "google/paligemma-3b-ft-coco35l-224"  # paper scale: P (sees the image)
text_lm_id: str = "chaley22/pali-captioning-lm-nolora"  # paper scale: U (text-only, same decoder)
text_lm_tokenizer: str = ""  # paper scale: U's tokenizer if its folder has none (google/gemma-2b)
batch_size: Count = 16  # paper scale: scoring batch size
device: str = "cuda"  # paper scale: scoring device
norms_path: str = ""  # paper scale: Glasgow Norms CSV (tiny: ratings derived from the generator)
norms_lang: str = "en"  # language the norms file describes
min_type_tokens: Count = 5  # a word type needs at least this many tokens (paper: 50)
min_class_tokens: Count = 20  # a UPOS class needs at least this many tokens in a language
min_languages: Count = 30  # paper-scale and released verdicts: languages needed (paper: 30); below, not testable
min_captions: Count = 3600  # paper-scale and released verdicts: captions needed in every language (paper: 3600 images per language)
n_boot: Count = 1000  # bootstrap resamples (captions resampled) for confidence intervals
n_perm: Count = 1000  # permutations for the cross-language rank agreement test
ci_level: OpenShare = 0.95  # confidence level
alpha: OpenShare = 0.05  # level of the BH q-values in the pairwise class tests
min_share: Share = 0.8  # our reading of "across languages": share of languages a per-language check must hold in
blank_fill: GreyLevel = 128  # tiny image baselines: grey level (0–255) of the blank image (rescores the blank table only)

# %% [markdown]
# Every computation below is a call into the `tokenbook` library; the modules this chapter
# uses are documented in the {doc}`API reference <../book/api>`: {py:mod}`tokenbook.groundedness_typology.measures`, {py:mod}`tokenbook.groundedness_typology.experiments`, {py:mod}`tokenbook.groundedness_typology.claims`, {py:mod}`tokenbook.grounded.tiny`, {py:mod}`tokenbook.groundedness_typology.figures`, {py:mod}`tokenbook.claims`.

# %%
import pandas as pd
from IPython.display import Markdown, display

from tokenbook.grounded import tiny as gt
from tokenbook.groundedness_typology import measures as gr
from tokenbook.groundedness_typology import experiments as gx
from tokenbook.groundedness_typology import claims as typology_claims
from tokenbook.claims import report
from tokenbook.groundedness_typology import figures as figs
from tokenbook.book.interactive import check_parameters
from tokenbook.plotting import savefig, use_book_style
from tokenbook.provenance import show_versions
from tokenbook.seeds import seed_list
from tokenbook.validation import check_choice

check_parameters("groundedness_typology", globals())  # the runner's checks (plain papermill too)

use_book_style()
show_versions()

# %%
check_choice(scale, "scale", ("tiny", "paper"))
check_choice(source, "source", ("models", "released"))
tiny = gt.TinyParams(n_languages=n_languages, n_scenes=n_scenes, n_stories=n_stories,
                     train_steps=train_steps, text_steps=text_steps, align_steps=align_steps,
                     vision_steps=vision_steps, max_page_sentences=max_page_sentences,
                     merged=merged, null=null)

# %% [markdown]
# ## The data
#
# One row per tagged word of a caption: language, caption id, word, UPOS, and the word's
# surprisal under each model (the pivot table shared with the UID chapter).

# %%
world = None
if source == "released":
    from tokenbook.data.released import load_released_table

    words = load_released_table(released_path, dataset=released_dataset)
elif scale == "tiny":
    # every root seed's models first, n_workers at a time (cached; the seed sweep reuses them)
    gt.train_tiny_models(seed_list(n_seeds, seed), tiny, n_workers=n_workers)
    world = gt.tiny_world(seed, tiny)
    models = gt.tiny_models(world, seed, tiny)
    display(models.summary().round(3))
    words = gt.caption_words(seed, tiny, "on")  # the UID chapter's cached tables
elif check_choice(dataset, "dataset", ("xm3600", "multi30k")) == "multi30k":
    from tokenbook.data.multi30k import multi30k_caption_words

    # the authors' code also scored Multi30K (val, train); whether the paper reports it: unknown
    words = multi30k_caption_words(
        multi30k_dir, images_dir=multi30k_images, split=multi30k_split,
        langs=multi30k_langs or None, captioner=captioner_id, text_lm=text_lm_id,
        text_lm_tokenizer=text_lm_tokenizer, batch_size=batch_size, device=device)
else:
    from tokenbook.grounded.tables import crossmodal_caption_words

    # one cached table per language (the UID chapter's entries): a rerun resumes per language
    words = crossmodal_caption_words(
        xm3600_dir, langs=xm_langs, captioner=captioner_id, text_lm=text_lm_id,
        text_lm_tokenizer=text_lm_tokenizer, batch_size=batch_size, device=device)

words = gr.add_groundedness(words)
print(f"{len(words):,} words, {words['unit_id'].nunique():,} captions, "
      f"{words['lang'].nunique()} languages")
words[["lang", "unit_id", "word_idx", "word", "upos", "s_U", "s_P", "groundedness"]].head()

# %% [markdown]
# Groundedness can only separate word classes if the captioner actually uses the image. The mean
# groundedness over all words of a language (and, at tiny scale, the held-out perplexities of
# the two models shown above) says whether it does: a captioner that ignores the image gives
# groundedness scattered around zero for every class, and the class analyses below then
# measure noise.

# %%
words.groupby("lang")["groundedness"].agg(["count", "mean", "std"]).round(3)

# %% [markdown]
# At tiny scale the world is described by its card; its languages differ in word order,
# adjective and adposition placement, articles, morphology and whether they write spaces — the
# typological variety the paper's 30 languages bring.

# %%
if world is not None:
    display(Markdown(world.card()))
    display(world.typology_table().set_index(["lang", "name"]).T)  # one column per language

# %% [markdown]
# ## Word classes
#
# We analyse the authors' 13 UPOS classes (PUNCT, SYM, X, INTJ and multi-word tokens left out).
# Lexical = UD's open classes {NOUN, PROPN, ADJ, VERB, ADV}; functional = UD's closed classes
# {PRON, DET, ADP, AUX, CCONJ, SCONJ, PART, NUM} (NUM as UD classifies it). Intervals are seeded
# percentile bootstraps resampling captions (the words of a caption share its image).

# %%
analyses = gx.class_analyses(words, min_class_tokens=min_class_tokens, n_boot=n_boot,
                             n_perm=n_perm, boot_seed=boot_seed, level=ci_level)
summary, lexfun, cline = analyses["summary"], analyses["lexfun"], analyses["cline"]
summary.pivot_table(index="upos", columns="lang", values="mean").round(2)

# %% mystnb={"figure": {"name": "fig-groundedness-violins", "caption": "Groundedness G = s_U − s_P (nats) of word tokens per UPOS class, one panel per language (every language, three per row; classes with fewer than min_class_tokens tokens left out). Classes keep one order in every panel, by mean over languages; the black line marks a class's mean; blue: lexical, orange: functional."}}
fig = figs.plot_class_violins(words, min_count=min_class_tokens)
savefig(fig, "groundedness-violins")
fig;

# %% mystnb={"figure": {"name": "fig-groundedness-means", "caption": "Mean groundedness (nats) per class and language with 95% bootstrap intervals resampling captions."}}
if len(summary):
    fig = figs.plot_class_means(summary)
    savefig(fig, "groundedness-class-means")
    fig;
else:
    print(f"No figure: no class has {min_class_tokens} tokens (min_class_tokens) in any language.")

# %% [markdown]
# ### Lexical versus functional classes
#
# Per language: the difference of means (lexical − functional, Welch t-test, BH over
# languages; CI: bootstrap resampling captions) and whether the functional mean is above zero
# (one-sided t-test, BH; its columns, and the counts, are in `lexfun`: the page shows the
# difference).

# %%
lexfun[["lang", "mean_lexical", "mean_functional", "diff", "diff_ci_low", "diff_ci_high",
        "q_diff"]].round(3)

# %% [markdown]
# ### The cline NOUN > ADJ > VERB

# %%
cline

# %% [markdown]
# ### Do languages order the classes alike?
#
# Each language's classes are ranked by mean groundedness; agreement between two languages is
# Kendall's τ and Spearman's ρ between their **rank vectors indexed by UPOS** (classes present
# in every language). The authors' exploratory script correlated the *lists of labels* sorted by
# mean, which compares tag spellings rather than ranks; the last column shows what that slip
# gives on the same data. Whether the languages share an ordering at all is tested by permuting
# each language's ranks independently (null: no shared ordering).

# %%
ranks = analyses["ranks"]
agreement = gr.rank_agreement(ranks)
means_by_lang = {lang: g.set_index("upos")["mean"].loc[ranks.index].to_dict()
                 for lang, g in summary.groupby("lang")}
agreement["label_list_tau (slip)"] = [gr.label_list_tau(means_by_lang[a], means_by_lang[b])
                                      for a, b in zip(agreement["lang_a"], agreement["lang_b"])]
agreement_test = analyses["agreement_test"]
print("mean pairwise τ = {mean_tau:.3f}, ρ = {mean_rho:.3f}; permutation p = {p_perm:.3g} "
      "({n_languages} languages, {n_classes} classes, {n_perm} permutations)"
      .format(**agreement_test))
display(ranks)
display(agreement.round(3))

# %% mystnb={"figure": {"name": "fig-groundedness-agreement", "caption": "Kendall's τ between the languages' rankings of the word classes by mean groundedness (1 = the same order)."}}
if len(agreement):
    fig = figs.plot_agreement(gr.agreement_matrix(agreement, "kendall_tau"))
    savefig(fig, "groundedness-rank-agreement")
    fig;
else:
    print(f"No agreement figure: it needs 2 or more languages with ranked classes "
          f"({ranks.shape[1]} here).")

# %% [markdown]
# ### Pairwise class differences in every language
#
# Within each language, every pair of analysed classes with at least `min_class_tokens` tokens
# is compared on the groundedness of its tokens: an **unpaired Welch t-test** (the authors'
# "pairwise t-tests"; the two classes are different words, so nothing pairs them), **Cohen's
# d** as the effect size (pooled sd; positive when `class_a`, the class listed first in the
# authors' tag order, is the more grounded), and **Benjamini–Hochberg q-values over all
# comparisons** of all languages at once. The tests treat tokens as independent, as the
# authors' do; the words of a caption share its image, so these p-values are optimistic (the
# intervals above resample captions instead). First, how many pairs differ in each language:

# %%
pair_tests = gr.class_pair_tests(words, min_count=max(min_class_tokens, 2))  # a t-test needs 2
(pair_tests.assign(significant=pair_tests["q"] < alpha).groupby("lang")
 .agg(pairs=("q", "size"), significant=("significant", "sum"), share=("significant", "mean"))
 .round(2))

# %% [markdown]
# The tidy table has one row per language and pair (`diff` = mean_a − mean_b in nats,
# `statistic` = Welch's t, `effect` = Cohen's d); here the pairs of the cline and NOUN–DET:

# %%
shown_pairs = pd.DataFrame([("NOUN", "ADJ"), ("ADJ", "VERB"), ("NOUN", "VERB"), ("NOUN", "DET")],
                           columns=["class_a", "class_b"])
pair_tests.merge(shown_pairs).round(4)

# %% [markdown]
# Across languages: for each pair, in how many languages it differs at q < `alpha`, and in
# which direction (`share_a_gt_b`: the first class significantly more grounded).

# %%
pair_summary = gr.class_pair_summary(pair_tests, alpha=alpha)
pair_summary[["class_a", "class_b", "n_languages", "share_significant", "share_a_gt_b",
              "median_effect"]].round(2)

# %% mystnb={"figure": {"name": "fig-groundedness-class-pairs", "caption": "Share of languages (%) in which the row class is significantly more grounded than the column class (Welch t-tests, BH q < alpha over all comparisons; alpha = 0.05 by default). A cell and its mirror add up to the share of languages where the pair differs; grey: the diagonal, or a pair no language tests. Classes ordered by net dominance, so an ordering shared by the languages fills the upper triangle."}}
fig = figs.plot_class_pair_matrix(gr.class_dominance_matrix(pair_tests, alpha=alpha),
                                  alpha=alpha)
savefig(fig, "groundedness-class-pairs")
fig;

# %% [markdown]
# ### Grounding or mere fine-tuning? Image baselines
#
# $G$ compares two *models*, so a word could come out "grounded" only because the captioner was
# fine-tuned differently from the text LM. Two baselines push the same captions through the
# **same captioner** with the wrong image: a **mismatched** image (another held-out scene's —
# exactly the shuffle null of the tiny verdicts below, reused from its cached table) and a
# **blank** image (one constant grey image of the world's size, grey level `blank_fill`; the
# authors' code explored a black 224 px image, whether the paper reports it is not known —
# method notes §1.2, §5). $G_\text{blank} = s_U - s_P(\text{blank})$ and
# $G_\text{mismatched}$ sit next to $G = s_U - s_P(\text{true image})$, in nats, per class
# pooled over languages, first seed only; `true_minus_blank` $= s_P(\text{blank}) -
# s_P(\text{true})$ is what the scene itself adds. If the baselines matched $G$, the class
# differences would be fine-tuning, not grounding. The blank image is itself out of
# distribution for a captioner that never saw one, so $G_\text{blank}$ can fall well below zero;
# the mismatched image is the tighter control. At paper scale these passes are not run
# (a blank-image pass of the 3B captioner over XM3600 is a GPU job of its own).

# %%
if scale == "tiny" and source == "models":
    baseline_words = gt.image_baseline_words(seed, tiny, fill=blank_fill)  # blank: own cache entry
    image_baselines = gx.image_baselines(baseline_words, n_boot=n_boot, seed=boot_seed,
                                         level=ci_level)
    display(image_baselines[["upos", "class_kind", "n", "G_true", "G_mismatched", "G_blank",
                             "true_minus_blank"]].round(2))  # the intervals: image_baselines
else:
    print("Image baselines: tiny scale only (the paper-scale blank/mismatched passes are not run).")

# %% [markdown]
# ## Word types, concreteness and frequency
#
# Type-level groundedness is the mean over the tokens of a (language, word, UPOS) type with at
# least `min_type_tokens` tokens. We correlate it with concreteness and with Zipf word
# frequency (tiny: counts in the captions; paper: `wordfreq`), fit OLS models, and call the
# residual of the norms model **informativity**: the part of groundedness that concreteness does
# not explain. At paper scale the ratings are the Glasgow Norms (1–7, English). At tiny scale
# they are *derived from the world's generator*, not set by hand
# (`tokenbook.worlds.languages.generator_rating`): 5 for a concept whose value the generator
# reads off the rendered scene (shape, colour, size, region, relation, count), 1 otherwise, plus
# seeded rater noise (sd 0.5), clipped to 1–5.

# %%
types = gr.type_table(words, min_tokens=min_type_tokens)
norm_types, norm_cols, norm_label = None, (), ""
if scale == "tiny" and source == "models":
    norm_types = gr.add_frequency(types, words=words, source="corpus")
    norm_cols, norm_label = ("concreteness",), "concreteness (derived from the generator, 1–5)"
elif norms_path:
    from tokenbook.data.norms import load_glasgow_norms

    types = gr.add_frequency(types, source="wordfreq", langs=[norms_lang])
    norm_types = gr.merge_norms(types, load_glasgow_norms(norms_path), lang=norms_lang)
    norm_cols = ("concreteness", "imageability") if "imageability" in norm_types else \
        ("concreteness",)
    norm_label = "concreteness (Glasgow Norms, 1–7)"
else:
    print("No norms at this scale/source: set norms_path to the Glasgow Norms CSV.")
norms_summary = fitted = None
if norm_types is not None and len(norm_types) >= 5:
    norms_summary, fitted = gr.norms_analysis(norm_types, norms=norm_cols, frequency="zipf")
    display(pd.Series(norms_summary).round(3).to_frame("value"))
    display(fitted.sort_values("informativity")[["lang", "word", "upos", "n_tokens",
                                                 "groundedness", "concreteness",
                                                 "informativity"]].iloc[[*range(5), *range(-5, 0)]]
            .round(3))

# %% mystnb={"figure": {"name": "fig-groundedness-concreteness", "caption": "Type-level groundedness (nats) against the concreteness rating, with the OLS fit."}}
if fitted is not None:
    fig = figs.plot_types_vs_norm(fitted, "concreteness", label=norm_label)
    savefig(fig, "groundedness-vs-concreteness")
    fig;

# %% [markdown]
# ## Claims
#
# **What a tiny-scale verdict means.** The tiny world is generated by the library, so a tiny
# verdict says whether the pipeline *detects* the paper's effect where the mechanism is planted
# and does not report it where it is absent — not whether the paper is right. Each statistic is
# computed for `n_seeds` root seeds (each its own world, models, shuffles and bootstrap stream)
# with the mechanism **on** (nouns, adjectives and relations determined by the image; articles
# marking whether the scene has one object of that shape, so a function word carries scene
# information) and **off** (by default: the same captions scored against another scene's image —
# no retraining). Two claims have mechanisms of their own: the norms claim (the ratings follow
# each concept's concreteness on, are permuted across a language's concepts off), and the rank
# agreement, whose claim is exactly that the languages' class orders are related — on, the
# languages share their word classes; off, each groups the same words into classes its own way
# (a random permutation of the ranked classes per language; tags never enter training, so the
# words, images and models are the same). *Detected* = the mean over root seeds on meets the
# expectation with its whole 95% interval, the paired on − off difference excludes 0 in the
# claimed direction and the off mean does not meet it ({py:mod}`tokenbook.verdicts`); a seed
# whose manipulation check fails (the image does not lower the nouns, adjectives and counts on,
# or still does off) is reported and not judged. Beside each claim stands its reference answer: the same statistic on the
# count models' word table of the same held-out captions and null (a bigram per language whose
# image re-weights the depicted values it shows;
# {py:func}`~tokenbook.grounded.tiny.reference_caption_words`), computed from the world without
# tokenizer or neural model: what the world plants, not an exact answer.

# %%
if scale == "tiny" and source == "models":
    seed_table = gx.run_seeds(seed_list(n_seeds, seed),
                              params=dict(boot_seed=boot_seed, min_class_tokens=min_class_tokens,
                                          min_type_tokens=min_type_tokens, **tiny.key()),
                              n_workers=n_workers)
    claims = typology_claims.tiny_claims(seed_table, min_share=min_share, null=null)
else:
    claims = gx.paper_claims(analyses, min_share=min_share, norms_summary=norms_summary,
                             min_languages=min_languages, min_captions=min_captions)

# %% mystnb={"figure": {"name": "fig-groundedness-seeds", "caption": "Each seed's statistic with the mechanism on and off (dashed: the claim's threshold)."}}
if scale == "tiny" and source == "models":
    fig = figs.plot_seed_statistics(seed_table, typology_claims.thresholds(min_share),
                                    labels={c.id: c.statistic for c in claims})
    savefig(fig, "groundedness-seed-statistics")
    fig;

# %%
report(claims)
