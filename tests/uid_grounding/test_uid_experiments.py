"""The UID chapter's tiny-scale verdict machinery: statistics, nulls, seeds.

The trained models are too slow for a unit test, so the end-to-end checks score the world with
the library's two count models (``grounded.tiny.count_model_words``): a bigram text LM and the
same bigram whose depicted words the image reweights. They show the pipeline detecting the
planted mechanism and not reporting it under the shuffled-image null.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from tokenbook.grounded import tiny as gt
from tokenbook.uid_grounding import experiments as ux
from tokenbook.uid_grounding import measures as uid
from tokenbook.claims import Claim
from tokenbook.verdicts import Expect
from tokenbook.worlds.scenes import make_world

SMALL = dict(n_scenes=150, n_stories=3, n_languages=4)


def _uid_v_change(world, shuffle_seed):
    """(share of languages where P lowers UID_v, mean over languages of its Δ% P vs U)."""
    words = gt.count_model_words(world, ("test", "validation"), shuffle_seed=shuffle_seed)
    comparison = ux.caption_comparison(words, n_boot=20)
    rows = comparison[comparison["metric"] == "uid_v"]
    return ux.share_lower(comparison, "uid_v"), float(rows["delta_pct"].mean())


@pytest.mark.slow
def test_uid_v_claim_detected_on_and_not_under_the_shuffled_image_null():
    """The generator's count models (an oracle of the world's word distributions) lower UID_v
    with the true image and not with a shuffled one: the paired rule detects it over 8 root
    seeds on the pooled per-language change. The share of languages is coarse with 4
    languages (one seed at 3/4 puts the on interval below 0.9), which is why the rule reads
    the pooled statistic."""
    shares_on, on, off = [], [], []
    for s in range(8):
        world = make_world(s, **SMALL)
        share, change = _uid_v_change(world, None)
        shares_on.append(share)
        on.append(change)
        off.append(_uid_v_change(world, 100 + s)[1])
    c = Claim.over_seeds("uid-v-lower-with-image", "x", statistic="mean Δ% UID_v, P vs U",
                         expect=Expect.less(0.0), values_on=on, values_off=off,
                         mechanism="count models")
    assert c.verdict == "detected", (on, off)
    assert min(shares_on) >= 0.75 and max(off) > 0


def test_mechanism_off_world_has_image_independent_hard_words():
    """The off world's text-only hardest words include ones the image cannot predict: adverbs
    are frequent there, and under the count models the image lowers UID_v in fewer languages."""
    on_w, off_w = make_world(0, **SMALL), make_world(0, mechanism="off", **SMALL)
    adv = {name: np.mean(["ADV" in u for u in w.captions.upos])
           for name, w in (("on", on_w), ("off", off_w))}
    assert adv["off"] > 0.3 > 0.1 > adv["on"]


def test_shuffled_null_centres_groundedness_on_or_below_zero():
    world = make_world(1, **SMALL)
    words = gt.count_model_words(world, ("test", "validation"), shuffle_seed=3)
    g = (words["s_U"] - words["s_P"]).to_numpy()
    assert g.mean() <= 0.0
    true = gt.count_model_words(world, ("test", "validation"))
    assert (true["s_U"] - true["s_P"]).mean() > 0.0


def test_boot_seed_retrains_nothing(monkeypatch):
    """Changing boot_seed asks for exactly the same model trainings (same cache keys)."""

    calls = []

    class Fake:
        captioner_dir = text_lm_dir = "fake"

    def fake_train(world, seed=0, *, config=None, progress=True, refresh=False):
        calls.append((world.fingerprint, seed, config))
        return Fake()

    def fake_table(captions, **kw):
        rows = []
        for r in captions.itertuples():
            rng = np.random.default_rng(abs(hash(r.caption_id)) % 2**32)
            for k, (w, u) in enumerate(zip(r.words, r.upos)):
                rows.append({"lang": r.lang, "unit_id": r.caption_id, "word_idx": k, "word": w,
                             "upos": u, "s_U": rng.gamma(2.0), "s_P": rng.gamma(2.0),
                             "n_merged": 1})
        return pd.DataFrame(rows)

    monkeypatch.setattr(gt, "train_grounded_models", fake_train)
    monkeypatch.setattr(gt, "caption_word_table", fake_table)
    tiny = dict(n_scenes=60, n_stories=3, n_languages=2, train_steps=5)
    ux.seed_claims(0, "on", boot_seed=0, stories=False, n_boot=10, **tiny)
    first = list(calls)
    ux.seed_claims(0, "on", boot_seed=7, stories=False, n_boot=10, **tiny)
    assert len(first) == 1 and calls[1:] == first
    ux.seed_claims(1, "on", boot_seed=0, stories=False, n_boot=10, **tiny)
    assert calls[-1] != first[0]          # another root seed: another world and training


def test_seed_statistics_figure_has_one_panel_per_claim():
    import matplotlib

    matplotlib.use("Agg")
    from tokenbook.uid_grounding.figures import plot_seed_statistics

    rows = [{"seed": s, "mechanism": m, "claim_id": c, "value": float(s)}
            for s in range(5) for m in ("on", "off") for c in ("a", "b", "c", "d")]
    for row in rows:
        if row["claim_id"] == "a":
            row["claim_id"] = "a-claim-id-much-longer-than-one-panel-is-wide"
    from tokenbook.plotting import MIN_FONT_PT, rendered_font_pt

    fig = plot_seed_statistics(pd.DataFrame(rows), {"b": 0.5},
                               labels={"b": "share of languages with Δ%(UID_v) < 0 (share)"})
    visible = [ax for ax in fig.axes if ax.get_visible()]
    assert len(visible) == 4
    titles = [ax.get_title().replace("\n", "") for ax in visible]
    assert titles[0] == "a-claim-id-much-longer-than-one-panel-is-wide"  # wrapped, never cut
    assert max(len(line) for ax in visible for line in ax.get_title().split("\n")) <= 30
    b = visible[titles.index("b")]
    assert b.get_ylabel().replace("\n", " ") == "share of languages with Δ%(UID_v) < 0 (share)"
    assert [ln.get_ydata()[0] for ln in b.get_lines() if ln.get_linestyle() == "--"] == [0.5]
    drawn = sorted(y for c in b.collections for _, y in c.get_offsets())  # the seeds' values
    assert drawn == sorted(float(s) for s in range(5) for _ in ("on", "off"))
    assert rendered_font_pt(fig) >= MIN_FONT_PT
    with pytest.raises(ValueError, match="missing column"):
        plot_seed_statistics(pd.DataFrame({"seed": [0]}))


@pytest.mark.slow
def test_exact_known_answer_of_the_uid_world():
    """The generator's exact surprisals (the known answer of the caption claims) lower UID_v
    and UID_lv with the image in every language and every seed tried; with the image carrying
    nothing (off) the statistics show no effect."""
    for s in range(3):
        world = make_world(s, world_style="uid", **SMALL)
        on = ux.caption_comparison(gt.exact_caption_words(world, ("test", "validation")),
                                   n_boot=20)
        off = ux.caption_comparison(gt.exact_caption_words(world, ("test", "validation"),
                                                           image_informs=False), n_boot=20)
        for metric in ("uid_v", "uid_lv"):
            assert ux.share_lower(on, metric) == 1.0
            assert ux.pooled_delta(on, metric) < -30
            assert ux.share_lower(off, metric) == 0.0
            assert ux.pooled_delta(off, metric) == pytest.approx(0.0, abs=1e-9)


def test_pooled_delta_reads_one_contrast():
    c = pd.DataFrame({"lang": ["a", "b", "a"], "metric": "uid_v", "delta_pct": [-4.0, -2.0, 9.0],
                      "contrast": ["D vs U", "D vs U", "PD vs P"]})
    assert ux.pooled_delta(c, "uid_v", contrast="D vs U") == -3.0
    assert ux.pooled_delta(c, "uid_v", contrast="PD vs P") == 9.0
    assert np.isnan(ux.pooled_delta(c, "uid_lv"))
    with pytest.raises(ValueError, match="contrast"):
        ux.pooled_delta(c.drop(columns="contrast"), "uid_v", contrast="D vs U")


def test_seed_claims_rows_with_balance_and_exact_known_answer(monkeypatch):
    """One seed's rows: every claim, its manipulation check, the caption claims' known answers
    (exact: 1.0 of languages on, 0.0 off in the uid world) and the balance rows, which read the
    text-only surprisal and so do not move under the shuffle null."""

    class Fake:
        captioner_dir = text_lm_dir = "fake"

    def fake_table(captions, **kw):
        rows = []
        for r in captions.itertuples():
            rng = np.random.default_rng(abs(hash(r.caption_id)) % 2**32)
            shown = r.scene_id
            for k, (w, u) in enumerate(zip(r.words, r.upos)):
                rows.append({"lang": r.lang, "unit_id": r.caption_id, "word_idx": k, "word": w,
                             "upos": u, "s_U": 1.0 + k % 3, "s_P": rng.gamma(2.0),
                             "n_merged": 1, "image_id": shown})
        return pd.DataFrame(rows)

    monkeypatch.setattr(gt, "train_grounded_models", lambda *a, **k: Fake())
    monkeypatch.setattr(gt, "caption_word_table", fake_table)
    tiny = dict(n_scenes=60, n_stories=3, n_languages=2, train_steps=5, world_style="uid")
    on = ux.seed_claims(0, "on", stories=False, n_boot=10, **tiny)
    off = ux.seed_claims(0, "off", stories=False, n_boot=10, **tiny)
    for cid in ux.CAPTION_CLAIMS:
        assert cid in on and "manipulation:" + cid in on and "balance:" + cid in on
    assert on["known:uid-v-lower-with-image"] == 1.0 and off["known:uid-v-lower-with-image"] == 0
    assert on["known:uid-v-lower-pooled"] < 0 and off["known:uid-v-lower-pooled"] == 0
    assert on["balance:uid-v-lower-with-image"] == off["balance:uid-v-lower-with-image"]
    # each language's Δ% beside the share claims, and the share is the fallen languages' share
    for d in (on, off):
        for cid in ("uid-v-lower-with-image", "uid-lv-lower-with-image",
                    "cv-agree-in-direction"):
            deltas = [v for k, v in d.items() if k.startswith(f"language:{cid}:")]
            assert len(deltas) == 2
            assert d[cid] == np.mean(np.asarray(deltas) < 0)


def test_language_table_lists_the_pairs_each_share_claim_counts_and_those_that_did_not_fall():
    rows = [{"seed": s, "mechanism": m, "claim_id": f"language:{cid}:{lang}",
             "value": (2.5 if (s, lang, cid, m) == (4, "cit", "uid-v-lower-with-image", "on")
                       else -10.0 - s)}
            for s in (4, 0) for m in ("on", "off") for lang in ("cit", "aru")
            for cid in ("discourse-smooths", "uid-v-lower-with-image")]
    rows.append({"seed": 0, "mechanism": "on", "claim_id": "uid-v-lower-with-image",
                 "value": 1.0})
    table = ux.language_table(pd.DataFrame(rows))
    assert list(table.index) == ["uid-v-lower-with-image", "discourse-smooths"]   # book order
    assert table.loc["uid-v-lower-with-image", "pairs"] == 4
    assert table.loc["uid-v-lower-with-image", "fell"] == 3
    assert table.loc["uid-v-lower-with-image", "largest Δ%"] == 2.5
    assert table.loc["uid-v-lower-with-image", "did not fall"] == "cit: root seed 4 (+2.5%)"
    assert table.loc["discourse-smooths", "fell"] == 4
    assert table.loc["discourse-smooths", "did not fall"] == ""
    assert table.loc["discourse-smooths", "largest Δ%"] == -10.0
    cv = [{"seed": s, "mechanism": "on", "claim_id": f"language:cv-agree-in-direction:{lang}",
           "value": v} for s, lang, v in ((5, "cit", 13.8), (0, "cit", 31.3), (1, "aru", 0.0),
                                          (2, "aru", -1.0), (3, "bek", 2.2), (4, "cit", 20.0))]
    grouped = ux.language_table(pd.DataFrame(rows + cv)).loc["cv-agree-in-direction"]
    assert (grouped["pairs"], grouped["fell"]) == (6, 1)     # Δ% = 0 did not fall
    assert grouped["did not fall"] == ("cit: root seeds 0, 4, 5 (+13.8% to +31.3%); "
                                       "aru: root seed 1 (+0.0%); bek: root seed 3 (+2.2%)")
    off = ux.language_table(pd.DataFrame(rows), mechanism="off")
    assert (off["fell"] == 4).all()
    with pytest.raises(ValueError, match="per-language entries"):
        ux.language_table(pd.DataFrame(rows[-1:]))


def test_known_vs_trained_pairs_each_language_and_metric_side_by_side():
    exact = pd.DataFrame({"lang": ["a", "a", "b", "b", "a"],
                          "metric": ["uid_v", "uid_lv", "uid_v", "uid_lv", "cv_local"],
                          "delta_pct": [-50.0, -40.0, -30.0, -20.0, 99.0]})
    trained = exact.assign(delta_pct=exact["delta_pct"] / 2).iloc[::-1]   # other row order
    t = ux.known_vs_trained(exact, trained, metrics=("uid_v", "uid_lv"))
    assert list(t.index) == ["a", "b"]
    assert set(t.columns) == {"uid_v exact", "uid_v trained", "uid_lv exact", "uid_lv trained"}
    assert t.loc["b", "uid_lv exact"] == -20.0 and t.loc["b", "uid_lv trained"] == -10.0
    with pytest.raises(ValueError, match="delta_pct"):
        ux.known_vs_trained(exact.drop(columns="delta_pct"), trained)


def test_wrong_about_the_picture_counts_only_the_depicted_classes_per_language():
    words = pd.DataFrame({"lang": ["a", "a", "a", "b", "b"],
                          "upos": ["NOUN", "ADJ", "VERB", "NOUN", "NOUN"],
                          "s_U": [1.0, 1.0, 1.0, 5.0, 1.0],
                          "s_P": [2.0, 0.5, 9.0, 4.0, 3.5]})
    t = ux.wrong_about_the_picture(words)
    assert t.loc["a", "raised"] == 0.5 and t.loc["a", "above_3_nats"] == 0.0   # VERB ignored
    assert t.loc["b", "raised"] == 0.5 and t.loc["b", "above_3_nats"] == 1.0
    assert list(ux.wrong_about_the_picture(words, high=4.5).columns) == ["raised",
                                                                          "above_4.5_nats"]


def test_grounding_by_class_compares_the_trained_gain_with_the_exact_one_per_language():
    exact = pd.DataFrame({"lang": ["a", "a", "a", "a", "b", "b"],
                          "upos": ["NOUN", "NOUN", "ADJ", "VERB", "NOUN", "ADJ"],
                          "s_U": [2.0, 3.0, 2.0, 1.0, 2.0, 2.0],
                          "s_P": [1.0, 1.0, 1.0, 1.0, 0.0, 0.0]})
    trained = exact.assign(s_P=[1.5, 2.5, 2.0, 0.5, 1.0, 2.5])
    t = ux.grounding_by_class(exact, trained)
    assert ("a", "VERB") not in t.index   # the image does not inform it in the exact answer
    assert t.loc[("a", "NOUN"), "exact"] == 1.5 and t.loc[("a", "NOUN"), "trained"] == 0.5
    assert t.loc[("a", "NOUN"), "recovered"] == pytest.approx(1 / 3)
    assert t.loc[("a", "ADJ"), "recovered"] == 0.0                 # not grounded at all
    assert t.loc[("b", "ADJ"), "recovered"] == pytest.approx(-0.25)  # wrong about the picture
    with pytest.raises(ValueError, match="s_P"):
        ux.grounding_by_class(exact, trained.drop(columns="s_P"))


def test_story_contexts_by_class_compares_the_same_words_context_by_context():
    keys = dict(lang="a", story_id=0, word_idx=[0, 1, 2, 0])
    exact = pd.DataFrame({**keys, "sent_idx": [1, 1, 1, 2], "word": ["x", "y", "z", "x"],
                          "upos": ["NOUN", "VERB", "DET", "NOUN"],
                          "s_U": [3.0, 2.0, 0.5, 3.0], "s_P": [2.0, 2.0, 0.5, 1.0],
                          "s_D": [1.0, 2.0, 0.5, 2.0], "s_PD": [1.0, 1.0, 0.5, 1.0]})
    # the pair also scores the story's first sentence, which the generator does not
    first = pd.DataFrame({"lang": "a", "story_id": 0, "sent_idx": 0, "word_idx": [0],
                          "word": ["w"], "upos": ["NOUN"], "s_U": [9.0], "s_P": [0.0],
                          "s_D": [9.0], "s_D_other": [9.0], "s_PD": [0.0]})
    trained = pd.concat([exact.assign(s_P=[3.0, 2.0, 0.5, 2.0], s_D_other=[2.0, 2.0, 0.5, 2.5],
                                      s_D=[1.0, 2.0, 0.5, 2.5], s_PD=[1.0, 2.0, 0.5, 2.5]),
                         first], ignore_index=True)
    t = ux.story_contexts_by_class(exact, trained)
    assert list(t.index) == ["NOUN", "VERB"]      # DET: no context informs it (min_gain)
    assert t.loc["NOUN", ("words", "")] == 2      # the first sentence dropped out
    image, pages, given = ux.ONSET_CONTEXTS
    assert t.loc["NOUN", (image, "generator")] == 1.5 and t.loc["NOUN", (image, "pipeline")] == 0.5
    # for the generator another story's pages tell nothing: s_D_other is its s_U
    assert t.loc["NOUN", (pages, "generator")] == 1.5
    assert t.loc["NOUN", (pages, "pipeline")] == 0.5
    assert t.loc["VERB", (given, "generator")] == 1.0 and t.loc["VERB", (given, "pipeline")] == 0.0
    with pytest.raises(ValueError, match="not the same story words"):
        ux.story_contexts_by_class(exact, trained.assign(word="q"))
    with pytest.raises(ValueError, match="s_D_other"):
        ux.story_contexts_by_class(exact, trained.drop(columns="s_D_other"))


def test_discourse_claim_reads_what_the_pages_say_not_that_there_are_pages(monkeypatch):
    """The tiny discourse claim compares the story's own pages with another story's (D vs
    D_other): a context effect that any pages give (the stub's first word of a later sentence
    is a peak that any pages level: the sentence's place in the story) cancels, and only what the own pages say (a further 2 nats on the peaks,
    nouns and adjectives) counts. Under the shuffle null both contexts are other stories': no effect,
    though D vs U would still show one."""

    class Fake:
        captioner_dir = text_lm_dir = "fake"

    def fake_stories(stories, *, previous=None, other_previous=None, **kw):
        rows = []
        for r in stories.itertuples():
            own = previous is None
            for k, (w, u) in enumerate(zip(r.words, r.upos)):
                later, peak = r.sent_idx > 0, u in ("NOUN", "ADJ")   # the peaks: content words
                s_u = (4.0 if peak else 1.5) + 2.0 * (k == 0) + 0.1 * (k % 3)

                def after_pages(own_pages):   # position: any pages; content: only its own
                    return s_u - 2.0 * (k == 0) - 2.0 * (own_pages and peak) if later \
                        else np.nan
                s_d, s_d_other = after_pages(own), after_pages(False)
                rows.append({"lang": r.lang, "story_id": r.story_id, "sent_idx": r.sent_idx,
                             "word_idx": k, "word": w, "upos": u, "n_sents": r.n_sents,
                             "para_idx": r.para_idx, "s_U": s_u, "s_P": s_u - 0.1,
                             "s_D": s_d, "s_PD": s_d - 0.1, "s_D_other": s_d_other,
                             "s_PD_other": s_d_other - 0.1, "n_merged": 1})
        table = pd.DataFrame(rows)
        return table if other_previous is not None else table.drop(
            columns=["s_D_other", "s_PD_other"])

    monkeypatch.setattr(gt, "train_grounded_models", lambda *a, **k: Fake())
    monkeypatch.setattr(gt, "story_word_table", fake_stories)
    monkeypatch.setattr(ux, "caption_comparison", lambda *a, **k: pd.DataFrame(
        {"lang": ["a"], "metric": ["uid_v"], "delta_pct": [-1.0], "q": [0.01]}))
    monkeypatch.setattr(gt, "caption_words", lambda *a, **k: pd.DataFrame(
        {"upos": ["NOUN"], "s_U": [2.0], "s_P": [1.0]}))
    monkeypatch.setattr(gt, "reference_caption_words", lambda *a, **k: None)
    tiny = dict(n_scenes=12, n_stories=40, n_languages=2, train_steps=5, world_style="uid")
    on = ux.seed_claims(0, "on", n_boot=10, **tiny)
    off = ux.seed_claims(0, "off", n_boot=10, **tiny)
    assert on["discourse-smooths"] == 1.0 and off["discourse-smooths"] == 0.0
    own = [v for k, v in on.items() if k.startswith("language:discourse-smooths:")]
    assert len(own) == 2 and max(own) < 0       # each language's D vs D_other Δ%
    assert on["manipulation:discourse-smooths"] > 0.5       # own pages beyond another story's
    assert off["manipulation:discourse-smooths"] == 0.0     # another story's vs another's
    assert on["known:discourse-smooths"] == 1.0 and off["known:discourse-smooths"] == 0.0
    pd_claim = "image-plus-discourse-smooths-further"   # with the image, the same contrast
    assert on[pd_claim] == 1.0 and off[pd_claim] == 0.0
    assert on["manipulation:" + pd_claim] > 0.5 and off["manipulation:" + pd_claim] == 0.0
    # the pooled twins: the mean Δ%(UID_v) over languages of the same contrasts, with the
    # share claims' checks (another story's pages against another's change nothing: 0 off)
    for share in ("discourse-smooths", pd_claim):
        pooled = share + "-pooled"
        assert on[pooled] < -10 and off[pooled] == pytest.approx(0.0, abs=1e-9)
        for d in (on, off):
            assert d["manipulation:" + pooled] == d["manipulation:" + share]
    assert on["known:discourse-smooths-pooled"] < -10
    assert off["known:discourse-smooths-pooled"] == pytest.approx(0.0, abs=1e-9)
    # the generator's answer with the page's picture: P+D against the picture alone
    assert on["known:" + pd_claim] == 1.0 and off["known:" + pd_claim] == 0.0
    assert on["known:" + pd_claim + "-pooled"] < -10
    assert off["known:" + pd_claim + "-pooled"] == pytest.approx(0.0, abs=1e-9)
    # ... and where the reductions fall: defined on, undefined off (nothing is reduced)
    assert 0 < on["known:reductions-at-onsets"] < 1
    assert not np.isfinite(off["known:reductions-at-onsets"])
    assert on["onset:image (s_U − s_P), generator"] > 0.3
    assert off["onset:image (s_U − s_P), generator"] == 0.0
    # the onset check: the smallest of the three, here the stub's image (0.1), not the pages
    assert on["manipulation:reductions-at-onsets"] == pytest.approx(0.1)
    # the onset table's entries: the three contexts, and where the own pages' content falls
    assert [on["onset:" + n] for n in ux.ONSET_CONTEXTS] == pytest.approx([0.1, 2.0, 0.1])
    assert off["onset:own pages (s_D_other − s_D)"] == pytest.approx(0.0)
    assert np.isfinite(on["onset:E, own pages"])
    assert np.isfinite(on["onset:E, own pages, generator"])
    assert not np.isfinite(off["onset:E, own pages"])     # another story's against another's
    # the claim's own δ_D (s_U − s_D): the stub's any-pages effect on the first word, on and off
    assert on["onset:E, δ_D"] > 1 and off["onset:E, δ_D"] > 1
    sw = gt.story_words(0, gt.TinyParams.from_mapping(tiny), "off")
    assert {"s_D_other", "s_PD_other"} <= set(sw.columns)
    measures = uid.story_unit_measures(sw, min_words=3).table
    d_vs_u = ux.story_comparison(measures, metrics=("uid_v",), n_boot=10)
    assert ux.share_lower(d_vs_u, "uid_v", contrast="D vs U") > 0   # what D vs U would say
