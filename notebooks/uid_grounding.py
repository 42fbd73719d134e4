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
# # Is information density uniform when utterances are grounded?
#
# The Uniform Information Density (UID) hypothesis says speakers spread information evenly over
# an utterance {cite}`levy2007speakers,jaeger2010redundancy`. Gay, Haley, Giulianelli & Ponti
# {cite}`gay2026uid` ask what happens when the utterance is *grounded*: a caption that describes
# an image, a story sentence read after the previous pages. If a listener sees the image, much of
# what the caption says is predictable from it, so the surprisal profile of the caption should be
# flatter under a model that sees the image (**P**, perception) than under a text-only model
# (**U**, unimodal). In stories, the preceding discourse (**D**) and image plus discourse (**P+D**)
# should smooth it further, and the reductions should come where new information enters: at the
# onset of a unit.
#
# For a unit with word surprisals $s_1, \dots, s_N$ (nats) and mean $\bar s$, the paper's two
# measures are the global and the local variance
#
# $$ \mathrm{UID}_v = \frac1N\sum_{n=1}^N (s_n-\bar s)^2, \qquad
#    \mathrm{UID}_{lv} = \frac1{N-1}\sum_{n=2}^N (s_n-s_{n-1})^2 , $$
#
# (lower = more uniform, nats²), with mean-normalised variants $\mathrm{CV}_g =
# \mathrm{sd}(s)/\bar s$ and $\mathrm{CV}_l = \sqrt{\mathrm{UID}_{lv}}/\bar s$ that guard against
# the trivial explanation "the image lowers all surprisals, so the variance falls with them". The
# library computes the wider family too — Meister et al.'s variance around a language mean, local
# absolute differences, super-linear power costs and maximum surprisal
# {cite}`meister2021revisiting`, and Clark et al.'s $k$-norm {cite}`clark2023crosslinguistic`
# (`tokenbook.uid_grounding.measures`, each with its formula). Word surprisals are sums of beginning-of-word
# corrected token surprisals {cite}`pimentel2024compute`.
#
# **Scales.** By default (tiny) the captions and stories come from the library's grounded world:
# six synthetic languages with known word classes, in the UID chapter's own style
# (`make_world(world_style="uid")`, {py:class}`tokenbook.worlds.scenes.UidStyle`). It plants
# what the paper describes, the way real images do it. Each caption clause describes the next
# object of the picture in reading order, so the image fixes which object a clause is about and
# no grounded word can be confidently wrong. The words the image informs keep uncertainty it
# cannot resolve: whether the size or colour is named, which of two synonyms names the shape,
# which verb. So the image lowers the text-only peaks (nouns, adjectives) toward the mean
# instead of to zero. Story pages re-mention their protagonist, naming its size and its colour
# each half the time and its noun in the form the story's narrator prefers (plain or synonym,
# 9 times in 10: `narrator_p`), so the earlier pages predict the next page's nouns and
# adjectives, not only its connectives, and leave them some uncertainty, as the image does for
# captions. The captions and
# stories are scored
# by a tiny PaliGemma captioner
# {cite}`beyer2024paligemma` and an architecture-matched text-only Gemma LM {cite}`gemma2024`,
# both trained on the world of each root seed (cached; with `world_style="typology"` they are the
# groundedness chapter's models). They are
# trained in stages that mirror how the real pair was made (`tokenbook.models.paligemma`): the
# SigLIP tower first learns the world's objects, the decoder its text, then the captioner's
# projector and decoder learn to caption while the text LM continues on the same batches. At paper
# scale (`-f params/uid_grounding/paper.yaml`) the same code scores Crossmodal-3600
# {cite}`thapliyal2022crossmodal` with `google/paligemma-3b-ft-coco35l-224` (P) and the authors'
# text-only `chaley22/pali-captioning-lm-nolora` (U) after the prefix `caption {lang}\n`
# {cite}`haley2025grounded`, and Bloom-VIST stories {cite}`leong2022bloom` with a configurable
# multilingual VLM. Setting `released_table` redraws the caption analyses from the authors'
# released word-level table (`groundedness.csv`), and `released_stories` the story analyses
# from their released Bloom-VIST word surprisals (bits, converted to nats). On released or
# paper-scale data a claim gets a verdict only when the data reach the paper's sizes
# (`min_languages`, `min_captions`, `min_story_languages`, `min_stories`); below them it is
# *not testable*, with the counts in its note.

# %% tags=["parameters"]
from tokenbook.book.paramtypes import (Count, CountOrZero, Languages, MergedSegments,
                                       NullControl, OpenShare, Positive, Scale, Seed, Share,
                                       StoryRegister, WorldStyle)

scale: Scale = "tiny"  # tiny (the library world, CPU, offline) or paper (real data, GPU)
seed: Seed = 0  # root seed of the tiny world, the model training and the null's shuffles (retrains the tiny models, about 200 s on an idle machine)
boot_seed: Seed = 0  # analysis seed: bootstraps (changing it retrains and rescores nothing)
n_seeds: Count = 6  # tiny verdicts: root seeds seed, seed+1, … each with its own world and models (about 130 s of training each on an idle machine, two at a time; 6 give a clear effect the same verdict on a second seed set about 71% of the time, 8 ≥ 90%, 5 about 56%)
n_workers: Count = 2  # tiny verdicts: Dask processes (1 thread each) the seeds are spread over; 1: all in this process
n_languages: Count = 6  # tiny world: languages (retrains; 6 × 6 root seeds give 36 (seed, language) pairs, enough to show a share of 0.9)
n_scenes: Count = 1200  # tiny world: caption scenes (retrains; 3x the groundedness chapter's: at 400 the captioner overfits and is confidently wrong on ~10% of held-out nouns/adjectives, measured on root seed 100)
n_stories: Count = 200  # tiny world: stories (retrains; 40 before 1 Dec 2026: too few for the models to learn that the earlier pages tell the next page's noun form: HISTORY.md)
train_steps: Count = 2000  # tiny models: fine-tuning steps, captioner and text LM (retrains; at 600 the captioner recovered at most 9% of the exact answer's 1.3-nat adjective reduction in every language of root seeds 0, 2 and 3; at 1500 48-85%, but the adjectives of one language 21% and 3% in root seeds 4 and 103; at 2000 there 87% and 90%: benchmarks/results/uid_training.json)
text_steps: Count = 400  # tiny models: text-only decoder steps before fine-tuning (retrains)
story_steps: CountOrZero = 3000  # tiny models: steps in which the decoder first reads whole stories of a text-only corpus, each sentence after its pages (retrains; 0: none. Without it, or with the stories' share of fine-tuning left as drawn, the pair did not read the pages or the captioner grounded less; with four languages at 1500 root seed 5's pair did not; with six at 2000 the pages of two languages were read too little for the share claims: HISTORY.md)
story_documents: CountOrZero = 960  # tiny models: stories in that corpus, each in every language, none of them the world's own (retrains; set with story_steps)
story_share: Share = 0.3  # tiny models: the story sentences' share of each fine-tuning batch, captions the rest (retrains; 0: as drawn, 48% story sentences at 200 stories, and a captioner that grounded less in root seed 2; 0.15 halved the pages' effect: HISTORY.md)
narrator_p: Share = 0.9  # tiny world: each story's narrator re-mentions with the noun form it prefers (plain or synonym) with this probability, so the earlier pages tell the next page's noun form (0: no narrator; else 0.5-1; retrains. Without one the earlier pages told the models too little for them to learn: HISTORY.md)
lr: Positive = 0.005  # tiny models: peak learning rate of every training stage but the projector's alignment (retrains; at 0.003 the captioner left one language's adjectives ungrounded, 0.00 nats, in root seeds 5 and 503; at 0.005 1.22 in both: HISTORY.md)
align_steps: Count = 300  # tiny models: projector alignment steps (retrains)
vision_steps: Count = 600  # tiny models: vision tower steps (retrains; at 200 root seed 5's tower told shapes apart in 82% of held-out patches and its captioner grounded almost no nouns; at 600 99.6% and 46-97% of the exact noun reduction: benchmarks/results/uid_training.json)
max_page_sentences: Count = 3  # tiny world: at most this many sentences on a story page under one picture, like Bloom-VIST pages (1: a picture per sentence; retrains)
register: StoryRegister = "book"  # tiny world: word order and story process (retrains; "subject first, bare, protagonist 0.5": every language subject-verb-object without articles or connectives, a sentence about the previous one's subject half the time, the onset claim's known answer front-loaded; with n_stories 600 and train_steps 4000 the onset claim is detected there, but the UID_lv claims are not, and there the pages raise UID_v by the generator's own answer: HISTORY.md, 5 Dec)
onset_register: StoryRegister = "book"  # the onset claim's world: book judges it in the chapter's world (where its known answer is no onset concentration); another register trains a world of its own for it alone, the chapter's sizes told in that register with onset_stories and onset_train_steps (retrains; "subject first, bare, protagonist 0.5" with 600 and 4000: about 17 more minutes on two cores, over the book's 45-minute budget, so not the default: HISTORY.md, 5 Dec)
onset_stories: Count = 600  # the onset claim's own world: stories (retrains; 600 with 4000 fine-tuning steps passed its check in root seeds 0-5, 200 with 2000 in 2 of 6)
onset_train_steps: Count = 4000  # the onset claim's own world: fine-tuning steps (retrains; with 2000 and 600 stories root seed 5's captioner read a page's picture given the pages by 0.02 nats, with 4000 by 0.15)
merged: MergedSegments = "split"  # segments merged by a straddling token: split (share their surprisal by length) or drop (drop their units) (rescores)
world_style: WorldStyle = "uid"  # tiny world's captions: uid (the image fixes each clause's referent, reading order; synonyms and optional adjectives stay uncertain) or typology (the groundedness chapter's captions) (retrains)
null: NullControl = "shuffle"  # tiny off: shuffle (other images and discourse, no retraining) or world (mechanism-off world, retrains)
min_words: Count = 3  # units with fewer words are excluded (and counted)
n_boot: Count = 2000  # bootstrap resamples for the CI of the mean paired difference
ci_level: OpenShare = 0.95  # confidence level of the intervals
pos_min_count: Count = 20  # per (language, UPOS) words needed in the decomposition (paper: 50)
n_story_paragraphs: Count = 4  # Fig. 4: stories with exactly this many paragraphs (paper: 20; tiny stories have 2-8 pages at max_page_sentences 3; 4 is the most frequent in root seed 0's held-out stories)
min_story_paragraphs: Count = 5  # Figs. 8-20: stories with at least this many paragraphs (paper: 5; about half the tiny stories have 5 pages or more)
min_paragraph_words: Count = 3  # Figs. 8-20: and every paragraph with at least this many words (paper: 10; tiny pages have 2-14 words, median 5)
min_para_sentences: Count = 1  # Tables 6-7, sentence level: paragraphs with at least this many sentences (paper: 3; tiny pages hold 1-3 sentences and stories are short: a filter would leave too few sentences for the mixed models)
min_share: Share = 0.9  # our reading of "consistently … across languages": share of languages the direction must hold in
min_languages: Count = 30  # paper-scale and released caption verdicts: languages needed (paper: 30); below, not testable
min_captions: Count = 3600  # paper-scale and released caption verdicts: captions needed in every language (paper: 3600 images per language)
min_story_languages: Count = 13  # paper-scale and released story verdicts: Bloom-VIST languages needed (paper: 13)
min_stories: Count = 5  # paper-scale and released story verdicts: stories needed in every language (the authors' mixed-model minimum)
released_stories: str = ""  # folder of the authors' released Bloom-VIST word surprisals, BLOOM_word_surprisal (OSF rh3dn; bits, read as nats); needs released_table
released_table: str = ""  # path or URL of the released groundedness.csv (empty: score captions here)
released_dataset: str = "xm"  # rows of the released table to use (xm: Crossmodal-3600)
crossmodal_dir: str = ""  # paper: folder with captions.jsonl and images/
xm_langs: Languages = []  # paper: languages to score (empty: all in the folder)
captioner_id: str = "google/paligemma-3b-ft-coco35l-224"  # paper: P model
text_lm_id: str = "chaley22/pali-captioning-lm-nolora"  # paper: U model
text_lm_tokenizer: str = ""  # paper: tokenizer of the U model if its folder has none (google/gemma-2b)
bloom_source: str = ""  # paper: Bloom-VIST dataset id or local folder (empty: skip stories)
bloom_langs: Languages = []  # paper: Bloom-VIST languages (ISO 639-3 configs, e.g. eng, ind)
bloom_split: str = "test"  # paper: Bloom-VIST split
bloom_images_dir: str = ""  # paper: folder with the page images (image_id.jpg/png)
story_captioner_id: str = "google/paligemma-3b-ft-coco35l-224"  # paper: VLM for P and P+D on stories
story_text_lm_id: str = "chaley22/pali-captioning-lm-nolora"  # paper: text LM for U and D on stories
device: str = "cpu"  # scoring device (cuda at paper scale)
batch_size: Count = 32  # scoring batch size

# %% [markdown]
# Every computation below is a call into the `tokenbook` library; the modules this chapter
# uses are documented in the {doc}`API reference <../book/api>`: {py:mod}`tokenbook.uid_grounding.measures`, {py:mod}`tokenbook.uid_grounding.experiments`, {py:mod}`tokenbook.uid_grounding.claims`, {py:mod}`tokenbook.grounded.tiny`, {py:mod}`tokenbook.grounded.tables`, {py:mod}`tokenbook.uid_grounding.figures`, {py:mod}`tokenbook.claims`.

# %%
import pandas as pd
from IPython.display import Markdown, display

from tokenbook.grounded import tiny as gt
from tokenbook.uid_grounding import measures as uid
from tokenbook.uid_grounding import experiments as ux
from tokenbook.uid_grounding import claims as uid_claims
from tokenbook.claims import report
from tokenbook.minsizes import units_per_group
from tokenbook.uid_grounding import figures as figs
from tokenbook.book.interactive import check_parameters
from tokenbook.plotting import savefig, use_book_style
from tokenbook.provenance import show_versions
from tokenbook.seeds import seed_list
from tokenbook.validation import check_choice

check_parameters("uid_grounding", globals())  # the runner's checks (plain papermill too)

use_book_style()
show_versions()

# %%
check_choice(scale, "scale", ("tiny", "paper"))
tiny = gt.TinyParams(n_languages=n_languages, n_scenes=n_scenes, n_stories=n_stories,
                     train_steps=train_steps, text_steps=text_steps, story_steps=story_steps,
                     story_documents=story_documents, story_share=story_share,
                     align_steps=align_steps,
                     vision_steps=vision_steps, max_page_sentences=max_page_sentences,
                     merged=merged, null=null, world_style=world_style,
                     narrator_p=narrator_p, lr=lr, register=register)

# %% [markdown]
# ## Word surprisals
#
# One row per word of a caption, with its surprisal under the text-only LM (`s_U`) and under the
# captioner that sees the image (`s_P`), in nats: the pivot table shared with the groundedness
# chapter (`tokenbook.grounded.tables`). At tiny scale we score the held-out captions; the
# models' held-out perplexities show the captioner does use the image.

# %%
world = models = None
if released_table:
    from tokenbook.data.released import load_released_table

    captions_words = load_released_table(released_table, dataset=released_dataset)
    caption_source = f"released table {released_table} (dataset {released_dataset!r})"
elif scale == "tiny":
    # every root seed's models first, n_workers at a time (cached; the seed sweep reuses them)
    gt.train_tiny_models(seed_list(n_seeds, seed), tiny, n_workers=n_workers)
    world = gt.tiny_world(seed, tiny)          # make_world(world_style=...), the seed's world stream
    models = gt.tiny_models(world, seed, tiny)  # cached per root seed and world
    display(models.summary().round(3))
    print("Linear probes of the locked vision tower's patch features on held-out scenes: "
          + ", ".join(f"{k} {v:.0%}" for k, v in models.log["vision_probe_accuracy"].items()))
    captions_words = gt.caption_words(seed, tiny, "on")
    caption_source = f"tiny world (root seed {seed}), splits {list(tiny.caption_splits)}"
else:
    from tokenbook.grounded.tables import crossmodal_caption_words

    # one cached table per language: an interrupted run resumes at the next language
    captions_words = crossmodal_caption_words(
        crossmodal_dir, langs=xm_langs, captioner=captioner_id, text_lm=text_lm_id,
        text_lm_tokenizer=text_lm_tokenizer, batch_size=batch_size, device=device)
    caption_source = f"Crossmodal-3600 from {crossmodal_dir}"

print(f"{caption_source}: {len(captions_words):,} words, "
      f"{captions_words['unit_id'].nunique():,} captions, "
      f"{captions_words['lang'].nunique()} languages; "
      f"{captions_words.attrs.get('n_straddling', 0):,} words had a token straddling a word "
      f"boundary (merged segments: {merged})")
display(captions_words[["lang", "unit_id", "word_idx", "word", "upos", "s_U", "s_P"]].head())
uid.dataset_summary(captions_words).round(2)

# %% [markdown]
# ## UID of captions, with and without the image
#
# Every measure for every caption under both conditions. Captions with fewer than `min_words`
# words are excluded (the count is printed), and so is any caption with a word the tokenizer
# could not separate from its neighbour (NaN surprisal).

# %%
scored_words, n_unscorable = uid.drop_unscorable(captions_words, ("s_U", "s_P"))
caption_measures = uid.unit_measures(scored_words, {"U": "s_U", "P": "s_P"},
                                     min_words=min_words)
print(f"{caption_measures.n_units:,} captions measured; excluded: "
      f"{caption_measures.n_excluded:,} with < {min_words} words, {n_unscorable:,} with an "
      "unscorable word")
caption_measures.table.groupby("condition")[["n_words", "mean", "uid_v", "uid_lv", "cv_global",
                                             "cv_local", "max", "knorm_1p25"]].mean().round(3)

# %% [markdown]
# Per language: the mean of each measure under U and P, the relative change
# $\Delta\% = 100\,(P-U)/U$ (negative = more uniform with the image), the paired Wilcoxon
# signed-rank test over captions with Benjamini–Hochberg correction across languages
# {cite}`benjamini1995fdr` (stars: q < .05, .01, .001), the paired Cohen's $d_z$ and a seeded
# percentile-bootstrap CI of the mean paired difference P − U.

# %%
metrics = ["uid_v", "uid_lv", "cv_global", "cv_local", "uid_v_lang", "local_abs", "max",
           "knorm_1p25"]
comparison = uid.compare_conditions(caption_measures.table, a="P", b="U", metrics=metrics,
                                    n_boot=n_boot, seed=boot_seed, level=ci_level)
table3 = comparison[comparison.metric.isin(["uid_v", "uid_lv"])].round(3).pivot(
    index="lang", columns="metric", values=["mean_U", "mean_P", "delta_pct", "d_z", "stars"])
table3

# %% [markdown]
# The table has the columns of the paper's Table 3 (UID_v and UID_lv under U and P, Δ%, the
# effect size and the stars per language), so the two can be read side by side. The published
# values themselves are not beside them: the method notes were written from the authors' code
# without the paper's PDF and record no numbers, and the book invents none, so the claims
# table's `published` column stays "—" at paper scale until someone enters them from the paper.

# %% [markdown]
# **The known answer.** In the tiny world the generator itself says what the image should do:
# {py:func}`tokenbook.grounded.tiny.exact_caption_words` computes each held-out word's exact
# surprisal under the world's caption distribution with the scene unseen (U) and given the scene
# (P), with no tokenizer and no trained model. Its Δ% per language, beside the trained pair's,
# is what the trained models should recover (for this root seed):

# %%
if scale == "tiny" and not released_table and tiny.world_style == "uid":
    exact_words = gt.exact_caption_words(world, tiny.caption_splits)
    exact = ux.caption_comparison(exact_words, metrics=("uid_v", "uid_lv", "cv_global"),
                                  n_boot=200, boot_seed=boot_seed)
    display(ux.known_vs_trained(exact, comparison).round(1))

# %% [markdown]
# Where the trained pair falls short of the known answer, the word classes say why: per
# language and class, the image's mean reduction s_U − s_P (nats) by the exact answer and by
# the trained pair, and the share of it the pair recovers (`recovered`: 1 = grounded as the
# generator says, 0 = not grounded at all, below 0 = the captioner is wrong about the picture
# on average). Only the classes the image informs in the exact answer are listed. The training
# lengths are set from this table (`benchmarks/uid_training.py`): with 200 vision-tower and 600
# fine-tuning steps the captioner recovered none of the adjectives' reduction in any language
# of root seeds 0, 2 and 3 (at most 9%), and in root seed 5 almost none of the nouns'; with 1,500
# fine-tuning steps the adjectives of one language stayed almost ungrounded in root seeds 4 and
# 103 (21% and 3% of their reduction), with 2,000 87% and 90%; at the learning rate of 0.003
# the adjectives of `cit` (they follow the noun) stayed wholly ungrounded in root seeds 5 and
# 503 (0.00 nats), at 0.005 (`lr`) 1.22 nats in both (92% of the exact answer's in root seed
# 5). A class still listed below is where the trained pair falls short of the known answer:
# mostly `dov`, the language written without spaces (45–57% of its nouns' reduction and 47–68%
# of its adjectives' in root seeds 0–5; 69–98% in the other languages, but for `cit`'s
# adjectives in root seed 2, 36%).

# %%
if scale == "tiny" and not released_table and tiny.world_style == "uid":
    by_class = ux.grounding_by_class(exact_words, scored_words)
    display(by_class.round(2).unstack("upos"))
    weak = by_class[by_class["recovered"] < 0.2]
    print("classes the trained captioner recovers < 20% of: " + (", ".join(
        f"{lang} {upos} ({row.trained:.2f} of {row.exact:.2f} nats)"
        for (lang, upos), row in weak.iterrows()) or "none"))

# %% mystnb={"figure": {"name": "fig-uid-scatter", "caption": "Mean UID per language under the text-only LM (U, x) and the captioner with the image (P, y), nats²; below the diagonal = more uniform with the image."}}
fig = figs.plot_language_scatter(comparison, ("uid_v", "uid_lv"))
savefig(fig, "uid-captions-language-scatter")
fig;

# %% mystnb={"figure": {"name": "fig-uid-densities", "caption": "Densities of caption-level UID_v and UID_lv (nats²) under U and P, clipped at the 99th percentile."}}
fig = figs.plot_measure_densities(caption_measures.table, ("uid_v", "uid_lv"))
savefig(fig, "uid-captions-densities")
fig;

# %% [markdown]
# The mean-normalised variants and the rest of the family, as relative change per language
# (rows: measures; negative = lower with the image):

# %%
comparison.pivot(index="metric", columns="lang", values="delta_pct").round(1)

# %% [markdown]
# ### Where grounding makes a caption *less* uniform
#
# Not every caption gets flatter. For the captions whose variance rises under P, each word's
# contribution to the variance $C_t = (s_t-\bar s)^2/N$ (so $\sum_t C_t = \mathrm{UID}_v$) is
# compared between conditions: $\Delta C_t = C_t^P - C_t^U$, averaged per UPOS, with the share
# of those words whose surprisal went up or down under the image.

# %%
decomposition = uid.pos_decomposition(scored_words, caption_measures.table,
                                      min_count=pos_min_count)
print(f"{decomposition.attrs.get('share_units', float('nan')):.1%} of captions have "
      "UID_v(P) > UID_v(U)")
display(uid.pos_decomposition_summary(decomposition).round(3))

# %% [markdown]
# The world fixes every clause's referent, so with a perfect captioner no noun or adjective would
# be *more* surprising with the image (the exact answer never raises a word). Where the trained
# captioner raises one, it is wrong about the picture: the share of nouns and adjectives whose
# surprisal rises under P, and the share of them above 3 nats under P, per language:

# %%
ux.wrong_about_the_picture(scored_words).round(3)

# %% mystnb={"figure": {"name": "fig-uid-pos-decomposition", "caption": "Mean change ΔC (nats², P − U) of each word class's contribution to UID_v, per language, in the captions where the image increases UID_v; grey: too few words of that class."}}
fig = figs.plot_pos_decomposition(decomposition)
savefig(fig, "uid-captions-pos-decomposition")
fig;

# %% [markdown]
# ## Stories: perception and discourse
#
# Each story sentence is scored four ways: text only (U), with its picture (P), after the
# preceding sentences (D) and with both (P+D). The first sentence of a story has no discourse,
# so its D and P+D scores are missing (as in the authors' Bloom-VIST files). A Bloom-VIST page
# (one picture) holds one or more sentences and is the paper's *paragraph*. The tiny world is a
# picture book too: its pages hold 1 to `max_page_sentences` sentences under one picture (the
# scene after the page's last event; a page ends early rather than let a later event contradict
# an earlier sentence of the page, see {py:func}`tokenbook.worlds.stories.story_pages`), so the
# paragraph-level tables below differ from the sentence-level ones, through the same functions
# that split real pages into sentences at paper scale.

# %%
story_words = story_comparisons = None
enrichment = {}
if released_stories:
    from tokenbook.data.bloom_vist import load_bloom_surprisals

    if not released_table:
        raise ValueError("released_stories needs released_table too (the caption analyses "
                         "come first): set both, or neither")
    story_words = load_bloom_surprisals(released_stories)  # bits converted to nats
    print(f"released Bloom-VIST surprisals from {released_stories}: "
          f"{story_words['lang'].nunique()} languages")
elif scale == "tiny" and world is not None:
    story_words = gt.story_words(seed, tiny, "on")
elif scale == "paper" and bloom_source and bloom_langs:
    from tokenbook.data.bloom_vist import bloom_sentences, load_bloom_vist
    from tokenbook.data.tagging import StanzaSegmenter
    from tokenbook.grounded.tables import bloom_units, lazy_model, open_image, story_word_table

    bloom = pd.concat([bloom_units(bloom_sentences(load_bloom_vist(
        bloom_source, lang, split=bloom_split, images_dir=bloom_images_dir or None)))
        for lang in bloom_langs], ignore_index=True)
    segmenter = StanzaSegmenter(mwt="join", use_gpu=str(device).startswith("cuda"))
    story_words = story_word_table(bloom, image_fn=open_image,
                                   captioner=lazy_model(story_captioner_id, "captioner",
                                                        device=device),
                                   text_lm=lazy_model(story_text_lm_id, "text_lm", device=device,
                                                      tokenizer=text_lm_tokenizer or None),
                                   segmenter=segmenter, segmenter_id=segmenter.id,
                                   dataset="bloom-vist", batch_size=batch_size, device=device)
if story_words is None:
    print("No story data at this setting (the released table has captions only: set "
          "released_stories to the authors' Bloom-VIST surprisals; at paper scale set "
          "bloom_source and bloom_langs): the story analyses and their claims are skipped.")
else:
    print(f"{story_words['story_id'].nunique()} stories, "
          f"{story_words.groupby(['lang', 'story_id', 'sent_idx']).ngroups:,} sentences, "
          f"{len(story_words):,} words")

# %%
if story_words is not None:
    story_measures = uid.story_unit_measures(story_words, min_words=min_words)
    print(f"{story_measures.n_units:,} sentences measured, {story_measures.n_excluded} with "
          f"< {min_words} words excluded")
    complete = uid.complete_units(story_measures.table)  # sentences with all four scores
    display(complete.pivot_table(index="lang", columns="condition", values="uid_v").round(3))
    story_comparisons = ux.story_comparison(story_measures.table, n_boot=n_boot,
                                            boot_seed=boot_seed, level=ci_level)
    display(story_comparisons.pivot_table(index=["contrast", "metric"], columns="lang",
                                          values="delta_pct").round(1))

# %% [markdown]
# **The discourse's known answer.** The story generator is small enough to say exactly what the
# discourse should do: {py:func}`tokenbook.grounded.tiny.exact_story_words` enumerates every
# sentence the generator can write next given the story so far (its objects, their cells and
# its protagonist), so each later sentence's words get their exact surprisal after the earlier
# pages (D) and under the marginal of a story's later sentences (U), with no tokenizer and no
# trained model. A page re-mentions its protagonist with a definite noun phrase whose size word
# and colour word each stay with probability 1/2 and whose noun takes the narrator's preferred
# form with probability `narrator_p` (the oracle knows each story's narrator), so the earlier
# pages lower those words toward the sentence's mean rather than to zero. Δ% of UID_v and
# CV_g, D vs U, by the known answer beside the trained LM's (this root seed; whether the
# trained LM's reduction comes from the pages' content is the claims' manipulation check,
# true against shuffled pages, below):

# %%
if scale == "tiny" and not released_table and story_words is not None \
        and tiny.world_style == "uid":
    generator_story_words = gt.reference_story_words(seed, tiny, "on")
    exact_story = uid.story_unit_measures(generator_story_words, min_words=min_words).table
    trained_story = story_comparisons[story_comparisons["contrast"] == "D vs U"]
    display(ux.known_vs_trained(
        ux.discourse_comparison(exact_story, metrics=("uid_v", "cv_global"), n_boot=200,
                                boot_seed=boot_seed), trained_story, ("uid_v", "cv_global"))
            .round(1))

# %% mystnb={"figure": {"name": "fig-uid-story-conditions", "caption": "Sentence-level UID_v (nats²) and CV_g of story sentences under U, P, D and P+D (sentences scored under all four)."}}
if story_words is not None:
    fig = figs.plot_story_conditions(complete, ("uid_v", "cv_global"))
    savefig(fig, "uid-stories-conditions")
    fig;

# %% mystnb={"figure": {"name": "fig-uid-story-position", "caption": "Mean UID_v (nats²) by sentence index in the story, ±1.96·SEM, per condition."}}
if story_words is not None:
    fig = figs.plot_position_profile(uid.position_profile(complete, "uid_v"))
    savefig(fig, "uid-stories-position-profile")
    fig;

# %% [markdown]
# ### Paragraphs
#
# The paper's Figure 3 and 4 and Table 5 are at paragraph level: every measure of a paragraph
# is taken over the words of all its sentences in order. A paragraph with a missing discourse
# score (the story's first) is left out for D and P+D only.

# %%
if story_words is not None:
    paragraph_measures = uid.story_unit_measures(story_words, level="paragraph",
                                                 min_words=min_words)
    print(f"{paragraph_measures.n_units:,} paragraphs measured, "
          f"{paragraph_measures.n_excluded} with < {min_words} words excluded")
    display(paragraph_measures.table.pivot_table(index="lang", columns="condition",
                                                 values="uid_v").round(3))

# %% mystnb={"figure": {"name": "fig-uid-paragraph-boxplots", "caption": "Paragraph-level UID_v (nats²) per language and condition (boxes: quartiles, whiskers 1.5 IQR, outliers not drawn); dashed: each condition's pooled mean (Gay et al. Fig. 3)."}}
if story_words is not None:
    fig = figs.plot_story_boxplots(paragraph_measures.table, "uid_v")
    savefig(fig, "uid-stories-paragraph-boxplots")
    fig;

# %% [markdown]
# Mean paragraph UID_v by paragraph index, over the stories with exactly `n_story_paragraphs`
# paragraphs (the paper: 20). The paper draws ±1.96·SEM, which dips below zero for a variance
# with a skewed distribution; the band here is a percentile bootstrap 95% CI of the mean
# (`n_boot` resamples of the stories' paragraphs at that index, seeded by `boot_seed`), which
# stays inside the data's range; the table also gives the SEM.

# %%
paragraph_profile = None
if story_words is not None:
    fixed_length = uid.stories_of_length(paragraph_measures.table, n_story_paragraphs)
    n_fixed = fixed_length.groupby(["lang", "story_id"]).ngroups if len(fixed_length) else 0
    print(f"{n_fixed} stories with exactly {n_story_paragraphs} paragraphs")
    if n_fixed:
        paragraph_profile = uid.position_profile(fixed_length, "uid_v", position="para_idx",
                                                 band="bootstrap", n_boot=n_boot,
                                                 seed=boot_seed, level=ci_level)
        display(paragraph_profile.pivot_table(index="para_idx", columns="condition",
                                              values=["mean", "sem"]).round(3))
    else:
        print("no profile: set n_story_paragraphs to a length the stories have")

# %% mystnb={"figure": {"name": "fig-uid-paragraph-profile", "caption": "Mean paragraph UID_v (nats²) by paragraph index in stories with exactly n_story_paragraphs paragraphs, per condition; bands: percentile bootstrap 95% CIs of the mean (Gay et al. Fig. 4 draws ±1.96·SEM)."}}
if paragraph_profile is not None:
    fig = figs.plot_position_profile(paragraph_profile, metric="uid_v", position="para_idx",
                                     band=f"bootstrap {ci_level:.0%} CI")
    savefig(fig, "uid-stories-paragraph-profile")
    fig;

# %% [markdown]
# Table 5 of the paper: the mean over paragraphs of CV = √UID_v / |mean surprisal| (unitless),
# per language and condition. It is the paper's paragraph CV: the population SD over the mean,
# not the caption-level `cv_global` (sample SD) above.

# %%
if story_words is not None:
    display(uid.uid_cv_table(paragraph_measures.table).round(3))

# %% [markdown]
# ### Position trends: a linear mixed model
#
# Does the measure change over the course of a story, and differently per condition? As the
# authors do (Tables 6-7), per language and unit level (sentence, paragraph) and for y ∈
# {UID_v, mean surprisal}: `y ~ rel_pos * C(condition) + log1p(n_words)` with a random intercept
# and a random position slope per story (REML), where `rel_pos` = unit index / (units − 1) in
# the story. A condition's slope is the U slope plus its interaction; its stars test the
# *difference* from U (for U: the slope against 0). At sentence level the paper keeps
# paragraphs with ≥ 3 sentences (`min_para_sentences`; 1 at tiny scale, where pages hold 1-3
# sentences and a filter would leave too few sentences per language for the mixed models). We read the paper's sentence position as the position in the story, like the
# paragraph's (its released code does not say). Languages/levels with < 5 stories or < 30 rows
# are skipped. Convergence is reported, not hidden: `converged` is False where no optimiser
# converged.

# %%
if story_words is not None:
    trends = uid.story_trend_table({"sentence": story_measures.table,
                                    "paragraph": paragraph_measures.table},
                                   outcomes=("uid_v", "mean"), min_sentences=min_para_sentences,
                                   min_groups=5, min_rows=30)
    print("all fits converged:", bool(trends.converged.all()) if len(trends) else "none fitted")
    display(Markdown("**Table 6: slope of UID_v (nats² per story) over the relative position**"))
    display(uid.trend_layout(trends, "uid_v"))

# %%
if story_words is not None:
    display(Markdown("**Table 7: slope of the mean surprisal (nats per story) over the relative "
                     "position**"))
    display(uid.trend_layout(trends, "mean"))

# %% [markdown]
# Pooled over languages (a language fixed effect, stories nested in languages), sentence level,
# UID_v: every fixed effect with its CI.

# %%
if story_words is not None:
    pooled_model = uid.story_position_models(story_measures.table, outcome="uid_v", by=None,
                                             min_groups=5, min_rows=30)
    display(pooled_model[["term", "estimate", "se", "pvalue", "ci_low", "ci_high"]].round(4))
    print("pooled fit converged:", bool(pooled_model.converged.all()) if len(pooled_model)
          else "not fitted", "| warnings:",
          (pooled_model.warnings.iloc[0] or "none") if len(pooled_model) else "-")

# %% [markdown]
# ### Surprisal at unit boundaries and where context helps
#
# The boundary jump $\Delta_w = \bar s(\text{last } w \text{ words of unit } k) - \bar
# s(\text{first } w \text{ words of unit } k{+}1)$ at sentence and paragraph boundaries (the
# paper's Tables 8-9; negative = the next unit starts with a spike; a unit without a score under
# a condition is skipped with both its boundaries), and the positive reductions $\delta_P=\max(0,s_U-s_P)$, $\delta_D=\max(0,s_U-s_D)$,
# $\delta_{DP}=\max(0,s_D-s_{P+D})$ (the image's value *given* the discourse) as densities over
# the normalised position in the sentence. The onset enrichment $E$ is **the book's statistic,
# not the paper's**: the share of reduction mass in the first 20% of the sentence divided by the
# share of words there ($E>1$: front-loaded); the paper shows the densities only.

# %%
if story_words is not None:
    jumps = pd.concat([uid.story_boundary_summary(story_words, level="sentence"),
                       uid.story_boundary_summary(story_words, level="paragraph")],
                      ignore_index=True)
    display(Markdown("**Table 8: Δ_w (nats) at paragraph boundaries**"))
    display(jumps[jumps.level == "paragraph"].pivot_table(index=["lang", "w"],
                                                          columns="condition",
                                                          values="delta").round(3))

# %%
if story_words is not None:
    display(Markdown("**Table 9: Δ_w (nats) at sentence boundaries**"))
    display(jumps[jumps.level == "sentence"].pivot_table(index=["lang", "w"],
                                                         columns="condition",
                                                         values="delta").round(3))

# %% mystnb={"figure": {"name": "fig-uid-boundary", "caption": "Boundary jumps Δ_w (nats) between consecutive story sentences (left) and paragraphs (right), mean over languages, per condition; negative = the next unit starts with a spike."}}
if story_words is not None:
    fig = figs.plot_boundary_jumps(jumps)
    savefig(fig, "uid-stories-boundary-jumps")
    fig;

# %%
if story_words is not None:
    reductions, enrichment = uid.story_reductions(story_words)
    display(pd.Series(enrichment, name="onset enrichment E (the book's statistic)").round(3))

# %% mystnb={"figure": {"name": "fig-uid-reductions", "caption": "Densities of the positive surprisal reductions δ_P, δ_D, δ_DP (nats) over the normalised position in the sentence and in the paragraph, all stories and languages."}}
if story_words is not None:
    fig = figs.plot_reduction_densities(reductions)
    savefig(fig, "uid-stories-reduction-densities")
    fig;

# %% [markdown]
# The paper draws these densities per language (its Figures 8-20) on the stories with at least
# `min_story_paragraphs` paragraphs numbered without a gap, every one with at least
# `min_paragraph_words` words (the paper: 5 and 10; tiny pages are short, so the tiny default is
# 3 words). The book's onset enrichment per language and level on the same stories:

# %%
if story_words is not None:
    paper_reductions = None
    paper_stories = uid.filter_stories(story_words, min_paragraphs=min_story_paragraphs,
                                       min_words=min_paragraph_words)
    print(f"{paper_stories.attrs['n_kept']} of {paper_stories.attrs['n_stories']} stories kept "
          f"(≥ {min_story_paragraphs} paragraphs of ≥ {min_paragraph_words} words)")
    if paper_stories.attrs["n_kept"]:
        paper_reductions, _ = uid.story_reductions(paper_stories)
        display(uid.reduction_onsets(paper_reductions).pivot_table(
            index=["lang", "level"], columns="reduction", values="E").round(2))
    else:
        print("no story passes the filter: lower min_story_paragraphs or min_paragraph_words")

# %% mystnb={"figure": {"name": "fig-uid-reductions-by-language", "caption": "Per language (rows), the densities of δ_P, δ_D, δ_DP (nats) over the normalised position in the sentence (left) and the paragraph (right), on the stories the paper's filter keeps (Gay et al. App. Figs. 8-20)."}}
if story_words is not None and paper_reductions is not None:
    fig = figs.plot_reduction_densities(paper_reductions, by="lang")
    savefig(fig, "uid-stories-reduction-densities-by-language")
    fig;

# %% [markdown]
# ## Claims
#
# **What a tiny-scale verdict means.** The tiny world is generated by the library, so whether a
# claim "holds" in it is the generator's doing. What a tiny run can show is that the pipeline
# *detects* the paper's effect where the mechanism is planted and does not report it where it
# is absent. Each claim's statistic is computed for `n_seeds` root seeds — each with its own
# world, its own trained models, its own shuffles and bootstrap stream — with the mechanism
# **on** (the image fixes each caption clause's referent and the earlier pages predict a story
# page's content words: `make_world(world_style="uid")`) and **off** (by default the cheap
# null that needs no retraining: the same captions scored against another scene's image, the
# same story sentences after another story's sentences). *Detected* = the mean over root seeds
# with the mechanism on meets the expectation with its whole 95% interval, the paired on − off
# difference excludes 0 in the claimed direction and the off mean does not meet it
# ({py:mod}`tokenbook.verdicts`); *not specific* = it holds on, but off too or with no paired
# effect; *not detected* = the on interval does not meet it. A seed whose manipulation check
# fails (the image or discourse does not lower the words it determines on, or still does off)
# is reported and not judged. Only paper scale
# tests the paper's claims on its data. Merged multi-word segments (tokens straddling a word
# boundary in the space-less language) are handled by `merged` (default: split by length).
#
# **Reading the caption claims.** Each caption claim carries its known answer: the same
# statistic on the generator's exact surprisals ({py:func}`tokenbook.grounded.tiny.exact_caption_words`;
# off, the image is independent of the words and the exact s_P equals s_U, so the known answer
# shows no effect). The balance check reads the mean text-only surprisal of the scored words,
# which the off condition must leave where it was. "Across languages" is read twice: as the
# share of languages with a lower UID (the paper's wording, our threshold 0.9) and as the
# pooled paired statistic, the mean over languages of the paired Δ% (`uid-v-lower-pooled`,
# `uid-lv-lower-pooled`), which does not turn one language's miss into a failed seed. A share
# claim first meets a resolution check ({py:func}`~tokenbook.verdicts.pairs_needed`): a share
# of at least 0.9 needs 35 (root seed, language) pairs, whose all falling give a 95% Wilson
# interval wholly above 0.9. Six languages in each of six root seeds are 36 pairs (all 36
# falling: an interval from 0.904), so the share claims are judged, by the rule's interval over
# root seeds, which asks nearly every pair to fall; with the four languages the book had until
# 5 Dec 2026 (24 pairs, an interval from 0.862 at best) they could not be, and were *not
# testable*. The pooled twins read the same comparison without turning one language's miss
# into a failed seed. (`uid-lower-significant`, "most languages", needs 4 pairs.) Where the known answer shows the image lowering UID and the trained pair
# detects less, the world plants the effect and the tiny captioner recovers only part of it:
# the known-answer table above and the word-class means show by how much. Where the known
# answer itself shows no effect (CV_g can rise when the image pushes depicted words toward the
# mean of the other words), the claim's note says so with its value. The discourse claim
# compares each later sentence after its own pages (D) with the same sentence after another
# story's pages (D_other), not with no pages at all (U): a text LM given no pages does not know
# where in a story the sentence stands (a continuing story opens with a connective, which the
# tiny LM pays for after no pages and not after any story's pages, true or shuffled — the
# entropy-rate effect of Genzel and Charniak), and that part of D vs U is not what the pages
# say. D vs D_other keeps the sentence's place and removes only its own pages' content; for the
# generator, another story's pages say nothing about this one, so its D_other is its U. The
# manipulation check asks the same of the nouns, adjectives and counts (s_D_other − s_D above
# 0.1 nats on; off, where both contexts are other stories', not): where the seeds fail it, the
# tiny LM does not use what the earlier pages say (although the world puts it there: a page
# re-mentions its protagonist), and the claim is reported, not judged. With the image the
# same holds: `image-plus-discourse-smooths-further` compares P+D with the image after another
# story's pages (P+D_other), and its check reads s_PD_other − s_PD. Both discourse claims
# also have pooled twins, as the caption claims do (`discourse-smooths-pooled`,
# `image-plus-discourse-smooths-further-pooled`: the mean over languages of the paired
# Δ%(UID_v), < 0 asked), with the same checks and, for the first, the same kind of known answer;
# the share is not testable here (the resolution check above), the pooled statistic asks that
# UID_v falls on average. The onset claim's check
# asks the same of each of its statistic's three reductions (the smallest of s_U − s_P,
# s_D_other − s_D and s_D − s_PD on those words,
# {py:func}`tokenbook.uid_grounding.experiments.onset_manipulation`): where a context does not
# inform the words it determines, where its reductions fall in the sentence says nothing about
# the paper's mechanism (here the tiny LM gains on the first words from *any* story context,
# the connective a continuing story starts with, shuffled or not). `discourse-smooths` carries
# its known answer, the same statistic on the generator's story surprisals (the table in the
# stories section; off, both contexts are other stories', so s_D = s_D_other): the world plants
# the discourse's smoothing, and the pipeline must recover it. For the pooled twins the off
# world sits *on* the threshold by construction (two other stories' pages: Δ% is 0 up to
# noise), so whether its mean falls a hair below 0 is a coin flip; there the off world counts as
# meeting "< 0" only when its whole interval does (`Expect.at_null`, {py:mod}`tokenbook.verdicts`;
# a simulation in the tests shows the point reading giving the same verdict on a second seed
# set about half the time however strong the effect, the interval reading ≥ 90%).
#
# **What it took for the tiny pair to read the pages.** The world puts content on the pages,
# but a text LM of this size learns from it only what it sees often enough. Trained on this
# world's sentences alone, each with and without its pages as the pair trains, it learns that a
# story goes on (about 0.17 nats per sentence after any story's pages) but gains 0.00 nats per
# sentence from the content of its own pages after 1,500 steps, where the generator's answer is
# 2.32 (`benchmarks/uid_training.py`, its `copying` part). Three things together make it read
# them (`HISTORY.md`, sixteenth and seventeenth sessions): (1) a *narrator* per story
# (`narrator_p=0.9`) who re-mentions the protagonist with the noun form it prefers, plain or
# synonym, 9 times in 10 — a fact only the earlier pages show, neither the sentence nor its
# picture; (2) a first stage on whole stories as documents (`story_steps=3000` on
# `story_documents=960` fresh stories, 2,000 on 640 while the world had four languages, a loss on every sentence after its pages, as a text LM is
# pretrained) and five times the world's stories (`n_stories=200`); (3) a fixed share of story
# sentences in every later training batch (`story_share=0.3`; captions the rest), so the
# captions keep their weight: with the share left as drawn (48% story sentences) one root
# seed's captioner grounded less (UID_v lower in 3 of 4 languages), at 0.15 the pages' effect
# halved. Without the narrator, or without the stage, the pair did not read the pages
# (0.00–0.13 nats); with 1,500 story steps root seed 5's pair read them by only 0.08 nats, under
# the check's 0.1. The pair trains at a peak learning rate of 0.005 (`lr`; the typology pair's
# 0.003): at 0.003 the captioner left one language's adjectives wholly ungrounded (0.00 nats,
# `cit`, whose adjectives follow the noun) in root seeds 5 and 503, and the text LM did not
# read one language's pages (`aru`) in three of six held-out root seeds; at 0.005 the same
# adjectives gain 1.22 nats in both (the text LM still skips one language's pages in 4 of the
# 19 root seeds measured, `benchmarks/results/uid_learning_rate.json`). With all of it and six
# languages (an AMD EPYC, 5 Dec 2026, root seeds 0–5; `HISTORY.md`, thirty-second session), the
# story's own pages lower the nouns, adjectives and counts of the later sentences by 0.39–0.65
# nats beyond another story's pages, and by 0.11–0.35 with the image (s_PD_other − s_PD), while
# on captions the image lowers them by 1.12–1.30 nats. The pooled `discourse-smooths-pooled` is
# −34% on, its interval below 0, against about 0 off, where the known answer says −27% to −36%;
# the pooled P+D claim is −18% on against about 0 off, where the known answer says −43% to −50%:
# both *detected*, the second recovering about two fifths of what the world plants. Their share
# twins ask nearly every (root seed, language) pair to fall; all 36 did here, the nearest to
# the line by under 1% (the table after the claims), so a share claim turns on a few pairs,
# where the two CPUs the book was built on trained slightly different pairs (their float kernels
# differ in the last bits). With the story stage of four languages (2,000 steps on 640 stories)
# six languages' pages were read too little: two pairs of 36 did not fall and the share claims
# were *not detected* (the same in held-out root seeds). The table after the claims lists this
# build's pairs and those that did not fall,
# and the claims table at the end, not this paragraph, gives this build's verdicts. The tiny text LM copies
# the protagonist's noun from the pages but not its size or colour (about 0 nats on adjectives,
# where the generator's answer is 0.4–0.6), and in some root seeds not even the noun in one
# language. With the image the pages help less, because the picture already tells much of what the
# pages would. The two P+D claims' known answer reads the page's picture by its objects' shapes,
# colours and sizes, not their cells ({py:func}`~tokenbook.worlds.stories.sentence_given_picture`
# for the picture alone, {py:func}`~tokenbook.worlds.stories.next_sentence_given_picture` after
# the story so far; exact given the event rates of the fresh stories the text-only answer mixes
# over, because every object's look is uniform and independent of what the story did, so a picture tells which looks the sentence can name, and, given the pages, which
# object the sentence is about and what happened to it): the story's own pages lower UID_v with
# the picture by 43–50% against another story's pages, in every language of every root seed
# (root seeds 0–5); the trained pair recovers a third to a half of that (the claims
# table). The onset claim stays unjudged: its check asks each of its three contexts to inform
# the words it determines, and the image *given the pages* (s_D − s_PD) does so by more than 0.1
# nats in at most three of the six root seeds of a build measured (and then by 0.10–0.12), too
# few to judge (one, in this book's), where the generator's answer is 0.46–0.71 nats: the world puts the information in the page's picture and
# the tiny captioner does not read it (the table after the claims). The claim's known answer is
# no onset concentration (its note); with `onset_register` set the claim is judged in a world
# of its own instead (the paragraph after the claims). The price is training time: a root seed's pair trains in
# about twice the time of the pair without the stories (`README.md`, "Costs"). Whether real
# captions and stories behave like the paper's account is a question for paper scale.

# %%
onset_world = ux.onset_world(tiny, onset_register, n_stories=onset_stories,
                             train_steps=onset_train_steps)
if scale == "tiny" and not released_table:
    seed_table = ux.run_seeds(seed_list(n_seeds, seed),
                              params=dict(boot_seed=boot_seed, min_words=min_words,
                                          **tiny.key()), n_workers=n_workers)
    if onset_world is not None:   # the onset claim's own world: its models, then its seed sweep
        seed_table = ux.with_onset_world(seed_table, ux.onset_world_table(
            seed_list(n_seeds, seed), onset_world, boot_seed=boot_seed, min_words=min_words,
            n_workers=n_workers))
    claims = uid_claims.tiny_claims(seed_table, min_share=min_share, null=null,
                                    world_style=world_style, onset_world=onset_world)
else:
    claims = ux.paper_claims(comparison, story_comparisons, enrichment, min_share=min_share,
                             story_note="the released table holds captions only (set "
                             "released_stories for the stories)" if released_table else "",
                             story_counts=units_per_group(story_words, "story_id"),
                             min_languages=min_languages, min_captions=min_captions,
                             min_story_languages=min_story_languages, min_stories=min_stories)

# %% [markdown]
# **Each language of each root seed, for the share claims.** A share claim counts the (root
# seed, language) pairs whose Δ% falls below 0 (mechanism on; the caption claims with the
# image against without, the story claims with the story's own pages against another story's);
# with six languages a root seed, six root seeds hold 36 pairs, one more than a share of 0.9
# needs (the resolution check), so one or two pairs that do not fall decide a share claim.
# One row per share claim ({py:func}`~tokenbook.uid_grounding.experiments.language_table`):
# the pairs, how many fell, the largest Δ% (the pair nearest the line) and, by language, the
# root seeds whose pair did not fall in this build, with the range of their Δ%.

# %%
if scale == "tiny" and not released_table:
    with pd.option_context("display.max_colwidth", None):   # every pair, none cut off
        display(ux.language_table(seed_table).round(2))

# %% [markdown]
# **The onset claim's check, context by context, and where the pages' reductions fall.** One
# column per root seed. The first six rows are the mean reduction each of the three contexts
# of the claim's statistic brings to the nouns, adjectives and counts of the later story
# sentences (nats, mechanism on; {py:func}`~tokenbook.uid_grounding.experiments.onset_contexts`),
# by the trained pair and by the generator (its exact surprisals, the page's picture read by its
# objects); the check asks the pair's each to exceed 0.1. The story's own pages pass it in every
# root seed (0.39–0.65 nats in the six-language build of 5 Dec 2026, `HISTORY.md`). The page's
# picture does not: the captioner lowers those words by only 0.05–0.25 nats with the picture
# alone, and by −0.04 to 0.11 given the pages (above 0.1 in one of the six root seeds; with
# four languages, in at most one of a build's six too, and the picture alone −0.11 to 0.32),
# against 1.12–1.30 on captions — while by the generator the picture alone lowers them by
# 0.67–0.75 nats and given the pages by 0.46–0.64 (root seeds 0–5). The world puts the information there (a page's picture
# shows its sentences' subject as the sentence leaves it, and, with the pages, which object the
# sentence is about and what happened to it); the tiny captioner, trained on the pages too but
# mostly on captions of two objects in reading order, does not read a page's picture of two to
# four objects (the table after this one shows which words it misses). So the claim is
# reported, not judged: the pipeline falls short of its world here.
#
# The next two rows ask where what the story's own pages *say* falls in a sentence: the onset
# enrichment $E$ of the positive part of s_D_other − s_D per word ($E > 1$: front-loaded), by
# the trained pair and by the generator's own surprisals
# ({py:func}`~tokenbook.uid_grounding.experiments.onset_enrichment_of`; for the generator
# another story's pages tell nothing, so s_D_other = s_U). Both are **below 1**: 0.30–0.46 by the
# pipeline, 0.47–0.52 by the generator. In this world the pages inform the protagonist's size,
# colour and noun, the second to fifth words of a sentence that opens with a connective and a
# determiner ("then the big red ball moves …"), not its first fifth; the picture informs the same
# words and the verb. So the claim's known answer — its statistic, the smallest E of the three
# reductions, on the generator's surprisals — is *no onset concentration* (0.33–0.38 in root
# seeds 0–5; the claim's note), and the pipeline agrees with its world for the pages. The last two rows are the
# claim's own δ_D (s_U − s_D, the paper's definition): the trained pair front-loads it, E 1.9–2.1
# — but more with another story's pages (off, 2.4–2.7): the first words of a continuing story,
# its connective, are what *any* pages predict; the generator's s_U already knows that the
# sentence continues a story. Planting the paper's mechanism needs a story world whose new
# information enters at a unit's first words (`HISTORY.md`, twenty-first, twenty-eighth and
# thirty-fourth sessions). One such register is a parameter: `register="subject first, bare,
# protagonist 0.5"` (every language subject-verb-object without articles or connectives, a
# sentence about the previous one's subject half the time; `grounded.tiny.REGISTERS`). There
# the generator front-loads all three reductions (min E 1.04–1.16 in root seeds 0–5), and with
# `n_stories=600` and `train_steps=4000` the captioner reads a page's picture given the pages
# (0.12–0.28 nats, every root seed): the onset claim is *detected* (min E 1.10 on, 0.42 off,
# paired +0.68 [0.62, 0.74]). The book does not use it, because the same world breaks what this
# register keeps: the captions' UID_lv no longer falls with the image (17 of 36 pairs), and by
# the generator's own answer the pages there *raise* UID_v (+16%: a protagonist kept half the
# time makes the pages lower one word sharply and little else), while the pipeline still finds
# them smoothing. The paper's two story mechanisms ask opposite things of one story process —
# pages that keep to one protagonist smooth, pages that leave the subject open front-load — so
# the chapter can judge the onset claim in a world of its own. With `onset_register="subject
# first, bare, protagonist 0.5"` it trains, per root seed, a second pair on this world told in
# that register, with `onset_stories` (600) stories and `onset_train_steps` (4,000) fine-tuning
# steps ({py:func}`~tokenbook.uid_grounding.experiments.onset_world`), and takes the onset
# claim — its statistic, check and known answer, and the table below — from it
# ({py:func}`~tokenbook.uid_grounding.experiments.with_onset_world`); every other claim stays
# with this world. Run so (an AMD EPYC, 5 Dec 2026), the ten other claims kept their verdicts
# and the onset claim was *detected*: in root seeds 0–5 min E 1.10 [1.05, 1.15] on, 0.42 off,
# its check passing in every root seed, beside the known answer's 1.12 [1.08, 1.16]; in
# held-out root seeds 6–11 too (1.14 [1.11, 1.17] on, 0.44 off, the check
# passing in every one, the known answer 1.14). The book does not set it by default: the second world
# costs about 17 more minutes on two cores, and the book must build in 45 (`HISTORY.md`,
# thirty-sixth session).

# %%
if scale == "tiny" and not released_table and story_words is not None:
    display(ux.onset_context_table(seed_table).round(3))

# %% [markdown]
# **Which words each context informs, by the generator and by the trained pair.** The same
# three contexts, now per word class, on the same later story sentences of this root seed
# (mean reduction in nats over every word of the class, not only the check's nouns,
# adjectives and counts;
# {py:func}`~tokenbook.uid_grounding.experiments.story_contexts_by_class`). Read it row by
# row. The story's own pages tell the pair the **noun** as well as they tell the generator
# (about 1.3 nats: the narrator's preferred noun form, which the earlier pages show), but not
# the protagonist's **adjectives** (0.6 nats by the generator, about 0 by the pair: a
# re-mention keeps its size and colour words each with probability 1/2, and the pair does not
# copy them from the pages). The page's picture alone tells the pair part of the noun (which
# shapes the page holds) and little else. Given the pages, the picture's value lies on the
# **verb** and the **adjectives**: with the state the pages leave, the picture says what
# changed (an object moved, turned a colour, grew), about 0.8 nats each by the generator in
# root seed 0 (0.4 on the noun), and about 0 by the pair, which would have to compare the
# picture with a scene it has only read about. That comparison is what the tiny captioner does
# not learn, and it is where the P+D claims' pipeline falls short of their known answer: the
# pooled twin's Δ% is about half the generator's (the claims table).

# %%
if scale == "tiny" and not released_table and story_words is not None \
        and tiny.world_style == "uid":
    with pd.option_context("display.max_columns", None):
        display(ux.story_contexts_by_class(generator_story_words, story_words).round(2))

# %% mystnb={"figure": {"name": "fig-uid-seeds", "caption": "Each seed's statistic with the mechanism on and off (dashed: the claim's threshold)."}}
if scale == "tiny" and not released_table:
    fig = figs.plot_seed_statistics(seed_table, uid_claims.thresholds(min_share),
                                    labels={c.id: c.statistic for c in claims})
    savefig(fig, "uid-seed-statistics")
    fig;

# %%
report(claims)
