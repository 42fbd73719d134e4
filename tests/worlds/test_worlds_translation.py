"""The synthetic translation world: deterministic, planted phenomena at their rates and as defined."""

import pandas as pd
import pytest

from tokenbook.worlds.translation import PHENOMENA, make_translation_world


@pytest.fixture(scope="module")
def world():
    return make_translation_world(1000, n_test=100, seed=3)


def test_deterministic_and_seed_dependent(world):
    again = make_translation_world(1000, n_test=100, seed=3)
    pd.testing.assert_frame_equal(world.pairs, again.pairs)
    pd.testing.assert_frame_equal(world.test, again.test)
    other = make_translation_world(1000, n_test=100, seed=4)
    assert not world.pairs["source"].equals(other.pairs["source"])


def test_rates_match_parameters(world):
    r = world.rates()
    assert set(world.pairs["phenomenon"]) <= set(PHENOMENA)
    assert len(world.pairs) == 1000
    assert r["idiom"] == pytest.approx(0.05, abs=0.005)
    assert r["rare_word"] == pytest.approx(0.05, abs=0.005)
    assert r[["noisy_misaligned", "noisy_truncated", "noisy_copy"]].sum() == pytest.approx(0.06,
                                                                                         abs=0.005)
    assert r["regular"] > 0.7


def test_phenomena_are_what_they_say(world):
    p = world.pairs
    copy = p[p.phenomenon == "noisy_copy"]
    assert (copy.source == copy.target).all()
    mis = p[p.phenomenon == "noisy_misaligned"]
    reg_targets = set(p[p.phenomenon == "regular"].target)
    assert mis.target.isin(reg_targets).all()
    trunc = p[p.phenomenon == "noisy_truncated"]
    assert (trunc.target.str.split().str.len() < trunc.source.str.split().str.len()).all()
    dup = p[p.phenomenon == "duplicate"]
    assert (dup.groupby("group_id").size() == 2).all()
    alt = p[p.phenomenon == "alternative"]
    assert (alt.groupby("source").target.nunique() == 2).all()
    # non-duplicates have their own group
    assert p[p.phenomenon != "duplicate"].group_id.is_unique
    # rare words: each pair holds a source word that occurs in no other pair
    counts = pd.Series([w for s in p.source for w in set(s.split())]).value_counts()
    rare = p[p.phenomenon == "rare_word"]
    assert all(any(counts[w] == 1 for w in s.split()) for s in rare.source)
    # idioms: the same source phrase maps to the same unrelated target phrase, ≥ 2 times
    idi = world.lexicon[world.lexicon.kind == "idiom"]
    for phrase, tgt in zip(idi.source, idi.target):
        rows = p[(" " + p.source + " ").str.contains(f" {phrase} ", regex=False)]
        assert len(rows) >= 2 and (rows.phenomenon == "idiom").all()
        assert (" " + rows.target + " ").str.contains(f" {tgt} ", regex=False).all()


def test_regular_pairs_follow_the_transduction(world):
    """Lexical mapping + reordering: the verb comes last, with number agreement."""
    p = world.pairs[world.pairs.phenomenon == "regular"]
    verbs = set(world.lexicon[(world.lexicon.pos == "VERB")].target)
    last = p.target.str.split().str[-1]
    assert last.map(lambda w: (w.endswith("ano") and w[:-3] in verbs)
                    or (w.endswith("a") and w[:-1] in verbs)).all()


def test_test_set_is_held_out(world):
    assert not set(world.test.source) & set(world.pairs.source)


def test_bad_rates_rejected():
    with pytest.raises(ValueError, match="noise_rate"):
        make_translation_world(100, noise_rate=1.5)
    with pytest.raises(ValueError, match="sum"):
        make_translation_world(100, noise_rate=0.5, idiom_rate=0.5)


def test_literal_idiom_control_lacks_only_the_non_compositional_translation():
    """The control of the idiom claims: repeated fixed phrases, translated literally. Fails if
    a control pair got an idiom's unrelated target (the mechanism would be back)."""
    w = make_translation_world(600, n_test=40, seed=5, idiom_literal_rate=0.05,
                               test_idiom_share=0.25)
    p = w.pairs
    lit, idi = p[p.phenomenon == "idiom_literal"], p[p.phenomenon == "idiom"]
    assert len(lit) == len(idi) > 0
    verbs = set(w.lexicon[w.lexicon.pos == "VERB"].target)
    last = lit.target.str.split().str[-1]      # compositional: the verb comes last, agreeing
    assert last.map(lambda x: (x.endswith("ano") and x[:-3] in verbs)
                    or (x.endswith("a") and x[:-1] in verbs)).all()
    idiom_targets = w.lexicon[w.lexicon.kind == "idiom"].target
    assert not any(t in tg for t in idiom_targets for tg in lit.target)
    # the test set: the requested share uses a training idiom, translated by its fixed target
    assert w.test.uses_idiom.mean() == pytest.approx(0.25)
    used = w.test[w.test.uses_idiom]
    assert all(any(t in tg for t in idiom_targets) for tg in used.target)
    assert not any(any(t in tg for t in idiom_targets) for tg in w.test[~w.test.uses_idiom].target)


def test_switched_off_phenomena_are_absent():
    w = make_translation_world(300, n_test=20, seed=2, idiom_rate=0.0, noise_rate=0.0,
                               rare_rate=0.0)
    assert set(w.pairs.phenomenon) <= {"regular", "alternative", "duplicate"}
    assert not w.test.uses_idiom.any()
    with pytest.raises(ValueError, match="test_idiom_share"):
        make_translation_world(300, idiom_rate=0.0, test_idiom_share=0.2)
