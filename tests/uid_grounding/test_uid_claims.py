"""The UID chapter's claims as library specs (:mod:`tokenbook.uid_grounding.claims`)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from tokenbook.claims import qualified_name
from tokenbook.uid_grounding import claims as uid_claims
from tokenbook.uid_grounding import experiments as ux


def test_expectations_cover_every_claim():
    assert set(uid_claims.expectations()) == set(ux.CLAIMS)
    assert uid_claims.thresholds(0.9)["uid-v-lower-with-image"] == 0.9


def test_specs_in_the_books_order_with_their_computing_function():
    specs = uid_claims.claim_specs()
    assert [s.id for s in specs] == list(ux.CLAIMS)
    for s in specs:
        text, statistic, paper = ux.CLAIMS[s.id]
        assert (s.claim, s.statistic, s.paper) == (text, statistic, paper)
        assert qualified_name(s.computed_by) == "tokenbook.uid_grounding.experiments:seed_claims"
    assert "another held-out scene's image" in specs[0].mechanism
    assert "retrained" in uid_claims.claim_specs(null="world")[0].mechanism


def test_tiny_claims_from_a_seed_table():
    rows = []
    for s in range(5):
        for mech, v in (("on", 1.0), ("off", 0.0)):
            for cid in ux.CLAIMS:
                rows.append({"seed": s, "mechanism": mech, "claim_id": cid,
                             "value": v if cid != "reductions-at-onsets" else 1 + v})
    claims = {c.id: c for c in uid_claims.tiny_claims(pd.DataFrame(rows))}
    assert claims["uid-v-lower-with-image"].verdict == "detected"
    assert claims["uid-lower-significant"].verdict == "detected"
    assert claims["reductions-at-onsets"].verdict == "detected"
    assert claims["uid-v-lower-with-image"].n_root_seeds == 5
    assert claims["uid-v-lower-with-image"].computed_by == \
        "tokenbook.uid_grounding.experiments:seed_claims"


def _seed_table(n_seeds: int, languages: list[str]) -> pd.DataFrame:
    """Every claim 1 on and 0 off, with the per-language entries of the share claims."""
    rows = []
    for s in range(n_seeds):
        for mech, v in (("on", 1.0), ("off", 0.0)):
            for cid in ux.CLAIMS:
                value = -v if cid in ux.POOLED_CLAIMS else v
                rows.append({"seed": s, "mechanism": mech, "claim_id": cid,
                             "value": value if cid != "reductions-at-onsets" else 1 + v})
            for lang in languages:
                rows.append({"seed": s, "mechanism": mech, "value": -1.0 if v else 1.0,
                             "claim_id": f"{ux.LANGUAGE_PREFIX}uid-v-lower-with-image:{lang}"})
    return pd.DataFrame(rows)


def test_share_claims_count_the_languages_of_the_seed_table():
    """With four languages a root seed, six root seeds hold 24 (root seed, language) pairs,
    too few to establish a share ≥ 0.9 (35 needed): the share claims are not testable, and
    say why, while their pooled twins and the share with a 0.5 threshold are judged; with ten
    languages the same values are detected."""
    four = _seed_table(6, ["aru", "bek", "cit", "dov"])
    assert uid_claims.languages_per_seed(four) == 4
    claims = {c.id: c for c in uid_claims.tiny_claims(four)}
    for cid in ("uid-v-lower-with-image", "uid-lv-lower-with-image", "cv-agree-in-direction",
                "discourse-smooths", "image-plus-discourse-smooths-further"):
        assert claims[cid].verdict == "not testable", cid
        assert "24 (root seed, language) pairs" in claims[cid].note
    assert claims["uid-lower-significant"].verdict == "detected"
    assert claims["uid-v-lower-pooled"].verdict == "detected"
    ten = _seed_table(6, [f"l{i}" for i in range(10)])
    assert {c.id: c.verdict for c in uid_claims.tiny_claims(ten)}["uid-v-lower-with-image"] \
        == "detected"
    assert set(uid_claims.SHARE_CLAIMS) <= set(ux.CLAIMS)
    assert uid_claims.expectations(0.9, 4)["uid-v-lower-pooled"].units is None


def test_specs_carry_balance_and_known_answers():
    specs = {s.id: s for s in uid_claims.claim_specs()}
    assert set(specs) == set(ux.CLAIMS)
    for cid, spec in specs.items():
        assert spec.balance_tolerance == uid_claims.BALANCE_TOLERANCE and spec.balance_what
        assert spec.known_answer_how      # every claim: the generator's answer
        assert spec.manipulation is not None and spec.manipulation_what
    assert "exact" in specs["uid-v-lower-with-image"].known_answer_how
    assert "exact_story_words" in specs["discourse-smooths"].known_answer_how
    for cid in ("image-plus-discourse-smooths-further", "reductions-at-onsets"):
        assert "picture read by its objects" in specs[cid].known_answer_how
    typology = {s.id: s for s in uid_claims.claim_specs(world_style="typology")}
    assert "count models" in typology["uid-v-lower-with-image"].known_answer_how
    assert not typology["discourse-smooths"].known_answer_how   # no oracle for those stories
    assert specs["uid-v-lower-pooled"].expect.threshold == 0.0
    assert specs["discourse-smooths"].manipulation.threshold == uid_claims.MANIPULATION_MARGIN


def test_pooled_discourse_twins_share_their_share_claims_checks():
    """Each pooled twin is judged on the mean Δ% over languages (< 0) and checked exactly as
    the share claim it pools: same mechanism check, same known-answer source."""
    specs = {s.id: s for s in uid_claims.claim_specs()}
    for share, pooled in (("discourse-smooths", "discourse-smooths-pooled"),
                          ("image-plus-discourse-smooths-further",
                           "image-plus-discourse-smooths-further-pooled")):
        assert pooled in ux.STORY_CLAIMS and pooled in ux.POOLED_CLAIMS
        assert specs[pooled].expect.holds(-1.0) and not specs[pooled].expect.holds(0.0)
        assert specs[pooled].manipulation_what == specs[share].manipulation_what
        assert specs[pooled].known_answer_how == specs[share].known_answer_how


def test_onset_contexts_read_each_context_from_its_own_columns():
    """Each of the three reductions moves with its own pair of columns only, and the check is
    the smallest of them (a wrong pairing, e.g. s_U − s_PD for the image given the pages,
    would move with the image's columns too)."""
    words = pd.DataFrame({"upos": ["NOUN", "ADJ", "VERB"], "s_U": [3.0, 2.0, 1.0],
                          "s_P": [1.0, 1.0, 1.0], "s_D": [2.0, 1.0, 0.5],
                          "s_D_other": [3.0, 2.0, 1.0], "s_PD": [0.5, 0.5, 0.5]})
    gains = ux.onset_contexts(words)
    assert list(gains) == list(ux.ONSET_CONTEXTS)
    assert list(gains.values()) == [1.5, 1.0, 1.0]     # VERB rows are not determined words
    no_image_given_pages = ux.onset_contexts(words.assign(s_PD=words["s_D"]))
    assert list(no_image_given_pages.values()) == [1.5, 1.0, 0.0]
    assert ux.onset_manipulation(words.assign(s_PD=words["s_D"])) == 0.0
    no_image = ux.onset_contexts(words.assign(s_P=words["s_U"]))
    assert list(no_image.values()) == [0.0, 1.0, 1.0]


def test_onset_context_table_reads_each_root_seeds_own_entries_by_mechanism():
    """One column per root seed, one row per entry of :data:`ONSET_ROWS` in its order, each
    read from that seed's entry under the row's mechanism; claims are not read."""
    names = [n for n, _ in ux.ONSET_ROWS]
    rows = [{"seed": seed, "mechanism": mech, "claim_id": ux.ONSET_PREFIX + name,
             "value": 10.0 * seed + i + (0.5 if mech == "off" else 0.0)}
            for seed in (7, 4) for mech in ("on", "off")
            for i, name in enumerate(dict.fromkeys(names))]
    rows += [{"seed": 4, "mechanism": "on", "claim_id": "reductions-at-onsets", "value": 9.0}]
    table = ux.onset_context_table(pd.DataFrame(rows))
    assert table.columns.name == "root seed" and list(table.columns) == [4, 7]
    assert list(table.index) == list(ux.ONSET_ROWS.values())
    assert list(table.index[:6:2]) == [f"{n}, nats (pipeline)" for n in ux.ONSET_CONTEXTS]
    assert list(table.index[1:6:2]) == [f"{n}, nats (generator)" for n in ux.ONSET_CONTEXTS]
    # on rows: each entry's own value; the last row is δ_D's entry with the mechanism off
    assert list(table[4]) == [40.0 + i for i in range(len(ux.ONSET_ROWS) - 1)] + [48.5]
    assert list(table.iloc[0]) == [40.0, 70.0]
    with pytest.raises(ValueError, match="no onset entries"):
        ux.onset_context_table(pd.DataFrame(rows[-1:]))


def test_onset_enrichment_of_weighs_each_words_reduction_by_its_place_in_the_sentence():
    """E moves with where the reductions fall, not how large they are: the same reductions
    on the sentence's first word and on its last give E of 1/share-of-onset-words and 0."""
    words = pd.DataFrame({"lang": "x", "story_id": 0, "sent_idx": [1] * 5 + [2] * 5,
                          "word_idx": list(range(5)) * 2, "s_B": 1.0})
    first = words.assign(s_A=np.where(words["word_idx"] == 0, 3.0, 1.0))
    last = words.assign(s_A=np.where(words["word_idx"] == 4, 3.0, 1.0))
    assert ux.onset_enrichment_of(first, "s_A", "s_B") == pytest.approx(5.0)
    assert ux.onset_enrichment_of(last, "s_A", "s_B") == 0.0
    assert ux.onset_enrichment_of(first.assign(s_A=np.nan), "s_A", "s_B") != \
        ux.onset_enrichment_of(first.assign(s_A=np.nan), "s_A", "s_B")   # nothing reduced: NaN
    negative = words.assign(s_A=np.where(words["word_idx"] == 0, 0.0, 2.0))
    assert ux.onset_enrichment_of(negative, "s_A", "s_B") == 0.0   # only positive parts count
    # an unscored first word keeps the others' places: word 1 is still at 1/5, not the onset
    second = words.assign(s_A=np.where(words["word_idx"] == 1, 3.0, 1.0))
    second.loc[(second["word_idx"] == 0) & (second["sent_idx"] == 1), "s_A"] = np.nan
    assert ux.onset_enrichment_of(second, "s_A", "s_B") == 0.0


def test_onset_check_fails_when_any_context_informs_nothing():
    words = pd.DataFrame({"upos": ["NOUN", "ADJ", "VERB"], "s_U": [3.0, 2.0, 1.0],
                          "s_P": [1.0, 1.0, 1.0], "s_D": [2.0, 1.0, 0.5],
                          "s_D_other": [3.0, 2.0, 1.0], "s_PD": [0.5, 0.5, 0.5]})
    assert ux.onset_manipulation(words) == 1.0          # min(1.5, 1.0, 1.0): every context informs
    spec = {s.id: s for s in uid_claims.claim_specs()}["reductions-at-onsets"]
    assert spec.manipulation.holds(ux.onset_manipulation(words))
    shuffled = words.assign(s_D_other=words["s_D"])     # pages that tell no more than any pages
    assert ux.onset_manipulation(shuffled) == 0.0
    assert not spec.manipulation.holds(ux.onset_manipulation(shuffled))


def test_the_onset_claim_is_judged_in_its_own_world_and_every_other_in_the_chapters():
    """``with_onset_world`` takes every onset entry (statistic, check, known answer, the onset
    table's rows) from the onset world's table and nothing else: a chapter world whose onset
    statistic sits below 1 and an onset world whose other claims fail give the chapter's
    verdicts for those and the onset world's for the onset claim, whose mechanism names it."""
    book = _seed_table(6, [f"l{i}" for i in range(6)])
    at_onset = book["claim_id"] == ux.ONSET_CLAIM
    book.loc[at_onset, "value"] = 0.3                     # nothing front-loaded, on and off
    book = pd.concat([book, book[at_onset].assign(claim_id="onset:image (s_U − s_P)",
                                                  value=0.02),
                      book[at_onset].assign(claim_id="manipulation:" + ux.ONSET_CLAIM,
                                            value=0.02)], ignore_index=True)   # check fails
    own = _seed_table(6, [f"l{i}" for i in range(6)])
    own.loc[own["claim_id"] != ux.ONSET_CLAIM, "value"] = 0.0   # its other claims: no effect
    checks = pd.DataFrame([{"seed": s, "mechanism": m, "claim_id": "manipulation:"
                            + ux.ONSET_CLAIM, "value": v}
                           for s in range(6) for m, v in (("on", 0.2), ("off", 0.0))]
                          + [{"seed": s, "mechanism": "on", "claim_id":
                              "onset:image (s_U − s_P)", "value": 0.3} for s in range(6)])
    own = pd.concat([own, checks], ignore_index=True)
    combined = ux.with_onset_world(book, own)
    world = ux.onset_world(ux.gt.TinyParams(world_style="uid"),
                           "subject first, bare, protagonist 0.5", n_stories=600,
                           train_steps=4000)
    plain = {c.id: c for c in uid_claims.tiny_claims(book)}
    claims = {c.id: c for c in uid_claims.tiny_claims(combined, onset_world=world)}
    assert plain[ux.ONSET_CLAIM].verdict == "not testable"
    assert claims[ux.ONSET_CLAIM].verdict == "detected"
    assert claims[ux.ONSET_CLAIM].manipulation["passed"]
    for cid in ux.CLAIMS:
        if cid != ux.ONSET_CLAIM:
            assert claims[cid].verdict == plain[cid].verdict == "detected", cid
    assert "'subject first, bare, protagonist 0.5'" in claims[ux.ONSET_CLAIM].mechanism
    assert "600 stories and 4000 fine-tuning steps" in claims[ux.ONSET_CLAIM].mechanism
    assert "world of its own" not in claims["discourse-smooths"].mechanism
    # the onset table's rows come from the onset world only
    assert ux.onset_context_table(combined).loc["image (s_U − s_P), nats (pipeline)"].tolist() \
        == [0.3] * 6
    with pytest.raises(ValueError, match="no 'reductions-at-onsets' entries"):
        ux.with_onset_world(book, own[own["claim_id"] != ux.ONSET_CLAIM])


def test_the_onset_world_is_the_chapters_sizes_in_another_register():
    tiny = ux.gt.TinyParams(world_style="uid", n_languages=6, n_stories=200, train_steps=2000)
    assert ux.onset_world(tiny, "book", n_stories=600, train_steps=4000) is None
    told = ux.gt.TinyParams(world_style="uid", register="subject first, bare, protagonist 0.5")
    assert ux.onset_world(told, told.register, n_stories=told.n_stories,
                          train_steps=told.train_steps) is None   # the chapter's world already
    world = ux.onset_world(tiny, told.register, n_stories=600, train_steps=4000)
    assert world.key() != tiny.key() and world.n_languages == 6
    with pytest.raises(ValueError, match="register"):
        ux.onset_world(tiny, "whisper", n_stories=600, train_steps=4000)
    with pytest.raises(ValueError, match="n_stories"):
        ux.onset_world(tiny, told.register, n_stories=0, train_steps=4000)


def test_the_onset_worlds_table_trains_its_own_pairs_before_its_sweep(monkeypatch):
    """``onset_world_table`` trains the onset world's pairs (not the chapter's) on every root
    seed, then sweeps that world with the chapter's statistics parameters; no world, no run."""
    calls = []
    monkeypatch.setattr(ux.gt, "train_tiny_models",
                        lambda seeds, params, **kw: calls.append(("train", list(seeds), params,
                                                                  kw["n_workers"])))

    def sweep(seeds, *, params, n_workers, progress):
        calls.append(("sweep", list(seeds), dict(params), n_workers))
        return pd.DataFrame({"seed": [0], "mechanism": ["on"],
                             "claim_id": [ux.ONSET_CLAIM], "value": [1.1]})

    monkeypatch.setattr(ux, "run_seeds", sweep)
    tiny = ux.gt.TinyParams(world_style="uid", n_stories=200, train_steps=2000)
    world = ux.onset_world(tiny, "subject first, bare, protagonist 0.5", n_stories=600,
                           train_steps=4000)
    table = ux.onset_world_table(np.int64([3, 4]), world, boot_seed=7, min_words=5,
                                 n_workers=2, progress=False)
    assert [c[0] for c in calls] == ["train", "sweep"]
    assert calls[0][1:] == ([3, 4], world, 2)
    assert calls[1][1] == [3, 4] and calls[1][3] == 2
    assert calls[1][2] == {"boot_seed": 7, "min_words": 5, **world.key()}
    assert calls[1][2]["n_stories"] == 600 and calls[1][2]["train_steps"] == 4000
    assert list(table["value"]) == [1.1]
    with pytest.raises(TypeError, match="onset_world"):
        ux.onset_world_table([0], None)
