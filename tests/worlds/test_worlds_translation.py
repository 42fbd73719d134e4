"""The synthetic translation world: deterministic, planted phenomena at their rates and as defined."""

import pandas as pd
import pytest

from tokenbook.worlds.translation import (PHENOMENA, make_multiparallel_world,
                                        make_translation_world)


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


# -- make_translation_world is unchanged by the multi-parallel world --------------------------

def _world_digest(w) -> str:
    import hashlib

    m = hashlib.sha256()
    for df in (w.pairs, w.test, w.lexicon):
        m.update(df.to_csv(index=False, lineterminator="\n").encode())
    m.update(repr(sorted(w.params.items())).encode())
    return m.hexdigest()


@pytest.mark.parametrize("kwargs, digest", [
    (dict(n_pairs=1000, n_test=100, seed=3),
     "d1a77fc5aad00ce66a57a39d133c98f736a407909ebbad4c64204a4f30fcc5ed"),
    (dict(n_pairs=600, n_test=40, seed=5, idiom_literal_rate=0.05, test_idiom_share=0.25),
     "02148968169e0dd6db723c4190121805486c1a74a25db4ba57913bcd4fcb4ea9"),
    (dict(n_pairs=300, n_test=20, seed=2, idiom_rate=0.0, noise_rate=0.0, rare_rate=0.0),
     "5e715857f9e8045725fb1bf38af0742cbfb5d6bc2a9530897ac3c565557d7df8"),
    (dict(n_pairs=60, n_test=5, seed=0),
     "9637c5c42fd98150ac277c6e448bbb4120b0cba0f629b892a23e176e389e00cd"),
], ids=["fixture", "literal-control", "switched-off", "tiny"])
def test_translation_world_byte_identical(kwargs, digest):
    """Digests of pairs, test, lexicon and params computed with the code before the
    multi-parallel world was added: every existing call must give the same world."""
    assert _world_digest(make_translation_world(**kwargs)) == digest


# -- the multi-parallel world -------------------------------------------------------------

MP = dict(n_test=40, seed=1, test_idiom_share=0.25, idiom_literal_rate=0.03)


@pytest.fixture(scope="module")
def multi():
    return make_multiparallel_world(400, targets=("de", "nl", "fr"), **MP)


def test_multiparallel_shares_the_source_side(multi):
    assert list(multi) == ["de", "nl", "fr"]
    de = multi["de"]
    assert len(de.pairs) == 400 and len(de.test) == 40
    for lang, w in multi.items():
        assert w.params["language"] == lang
        assert list(w.pairs.columns) == ["pair_id", "source", "target", "phenomenon", "group_id"]
        for col in ("pair_id", "source", "group_id"):
            pd.testing.assert_series_equal(w.pairs[col], de.pairs[col])
        pd.testing.assert_series_equal(w.test.source, de.test.source)
        assert not set(w.test.source) & set(w.pairs.source)
        # source-side phenomena are shared: same pairs labelled rare / duplicate / alternative
        for ph in ("rare_word", "duplicate", "alternative"):
            assert (w.pairs.phenomenon == ph).equals(de.pairs.phenomenon == ph)
        # group ids: identical (source, target) rows, and only those, share a group
        by_pair = w.pairs.groupby(["source", "target"], sort=False).ngroup()
        assert (by_pair.groupby(w.pairs.group_id).nunique() == 1).all()
        assert (w.pairs.groupby(by_pair).group_id.nunique() == 1).all()
    dup = de.pairs[de.pairs.phenomenon == "duplicate"]
    assert len(dup) > 0 and (dup.groupby("group_id").size() == 2).all()


def test_multiparallel_targets_and_grammars_differ(multi):
    langs = list(multi)
    variants = [tuple(multi[lang].params["variant"].values()) for lang in langs]
    assert len(set(variants)) == len(langs)
    for i, a in enumerate(langs):
        for b in langs[i + 1:]:
            same = multi[a].pairs.target == multi[b].pairs.target
            assert same.mean() < 0.02          # at most a copied source coincides
            va, vb = set(multi[a].lexicon.target), set(multi[b].lexicon.target)
            assert len(va & vb) < 0.05 * len(va)    # own vocabularies (a chance shared word)
            assert (multi[a].test.target != multi[b].test.target).all()
    for lang, w in multi.items():
        # each regular pair is translated by this language's grammar: a verb where the variant
        # puts it (final / initial), the verb a translation of the source's verb
        reg = w.pairs[w.pairs.phenomenon == "regular"].target.str.split()
        verbs = tuple(w.lexicon[w.lexicon.pos == "VERB"].target)
        pos = w.params["variant"]["verb_position"]
        if pos in ("final", "initial"):
            at = reg.str[-1] if pos == "final" else reg.str[0]
            assert at.map(lambda x: x.startswith(verbs)).all(), lang
        assert (reg.map(lambda ws: sum(x.startswith(verbs) for x in ws)) >= 1).all()


def test_multiparallel_rates_per_language(multi):
    for w in multi.values():
        r = w.rates()
        assert r[["idiom", "idiom_literal"]].sum() == pytest.approx(0.05 + 0.03, abs=0.006)
        assert r["idiom"] > 0 and r["idiom_literal"] > 0
        assert r[["noisy_misaligned", "noisy_truncated", "noisy_copy"]].sum() == \
            pytest.approx(0.06, abs=0.005)
        assert r["rare_word"] == pytest.approx(0.05, abs=0.005)


def test_multiparallel_noise_is_drawn_per_language(multi):
    ph = pd.DataFrame({lang: w.pairs.phenomenon for lang, w in multi.items()})
    noisy = ph.apply(lambda c: c.str.startswith("noisy"))
    assert not noisy["de"].equals(noisy["nl"])
    # a pair noisy in one language is regular in a language where it is not noisy
    assert (ph[noisy["de"] & ~noisy["nl"]]["nl"] == "regular").all()
    for w in multi.values():
        p = w.pairs
        copy = p[p.phenomenon == "noisy_copy"]
        assert len(copy) > 0 and (copy.source == copy.target).all()
        mis = p[p.phenomenon == "noisy_misaligned"]
        assert mis.target.isin(set(p[p.phenomenon == "regular"].target)).all()
        trunc = p[p.phenomenon == "noisy_truncated"]
        assert (trunc.target.str.split().str.len() < trunc.source.str.split().str.len()).all()


def test_multiparallel_idiom_idiomatic_in_one_language_literal_in_another(multi):
    found = 0
    for a, wa in multi.items():
        for b, wb in multi.items():
            idi_a = wa.lexicon[wa.lexicon.kind == "idiom"]
            idi_b = set(wb.lexicon[wb.lexicon.kind == "idiom"].source)
            for phrase, tgt in zip(idi_a.source, idi_a.target):
                rows = (" " + wa.pairs.source + " ").str.contains(f" {phrase} ", regex=False)
                assert rows.sum() >= 2 and (wa.pairs.phenomenon[rows] == "idiom").all()
                assert (" " + wa.pairs.target[rows] + " ").str.contains(
                    f" {tgt} ", regex=False).all()
                if phrase in idi_b:
                    continue
                found += 1
                # literal in b: labelled idiom_literal, translated with b's verb, no fixed phrase
                assert (wb.pairs.phenomenon[rows] == "idiom_literal").all()
                lex_b = wb.lexicon
                verb_b = lex_b[(lex_b.source == phrase.split()[0]) & (lex_b.kind == "base")]
                assert wb.pairs.target[rows].map(
                    lambda t: any(x.startswith(verb_b.target.iloc[0]) for x in t.split())).all()
                assert not wb.pairs.target[rows].str.contains(tgt, regex=False).any()
    assert found > 0
    # the test set: uses_idiom where the source's phrase is idiomatic in that language
    uses = pd.DataFrame({lang: w.test.uses_idiom for lang, w in multi.items()})
    assert uses.any().all() and not uses.all(axis=1).equals(uses.any(axis=1))


def test_multiparallel_deterministic_and_per_language(multi):
    again = make_multiparallel_world(400, targets=("de", "nl", "fr"), **MP)
    for lang in multi:
        pd.testing.assert_frame_equal(multi[lang].pairs, again[lang].pairs)
        pd.testing.assert_frame_equal(multi[lang].test, again[lang].test)
        pd.testing.assert_frame_equal(multi[lang].lexicon, again[lang].lexicon)
    other = make_multiparallel_world(400, targets=("de", "nl", "fr"), **{**MP, "seed": 2})
    assert not other["de"].pairs.source.equals(multi["de"].pairs.source)
    # a language's world does not depend on which other targets are asked for, nor their order
    pair = make_multiparallel_world(400, targets=("it", "de"), **MP)
    assert list(pair) == ["it", "de"]
    pd.testing.assert_frame_equal(pair["de"].pairs, multi["de"].pairs)
    pd.testing.assert_frame_equal(pair["de"].test, multi["de"].test)


def test_multiparallel_bad_arguments_rejected():
    with pytest.raises(ValueError, match="unknown target"):
        make_multiparallel_world(100, targets=("de", "xx"))
    with pytest.raises(ValueError, match="repeated"):
        make_multiparallel_world(100, targets=("de", "nl", "de"))
    with pytest.raises(ValueError, match="at least 2"):
        make_multiparallel_world(100, targets=("de",))
    with pytest.raises(ValueError, match="not the string"):
        make_multiparallel_world(100, targets="de")
    with pytest.raises(ValueError, match="idiomatic_share"):
        make_multiparallel_world(100, idiomatic_share=1.5)
    with pytest.raises(ValueError, match="noise_rate"):
        make_multiparallel_world(100, noise_rate=1.5)
    with pytest.raises(ValueError, match="n_pairs"):
        make_multiparallel_world(10)
