"""The rare-but-derivable off world of the rare-word mechanism (``rare_derivable=True``)."""

import pytest

from tokenbook.worlds.translation import make_translation_world

PARAMS = dict(n_pairs=200, n_test=30, n_nouns=20, n_verbs=8, n_adjectives=6, rare_rate=0.05,
              alternative_rate=0.0)


@pytest.mark.parametrize("seed", [0, 5])
def test_rare_compounds_are_translated_part_by_part(seed):
    w = make_translation_world(seed=seed, rare_derivable=True, **PARAMS)
    lex = w.lexicon
    nouns = dict(zip(lex.loc[lex["kind"] == "base", "source"], lex.loc[lex["kind"] == "base",
                                                                       "target"]))
    gender = dict(zip(lex["source"], lex["gender"]))
    compounds = lex[lex["kind"] == "compound"]
    assert len(compounds) == int(PARAMS["rare_rate"] * PARAMS["n_pairs"])
    assert "rare" not in set(lex["kind"])
    for src, tgt, g in zip(compounds["source"], compounds["target"], compounds["gender"]):
        a, b = src.split("-")
        assert a != b and {a, b} <= set(nouns)
        assert tgt == f"{nouns[a]}-{nouns[b]}" and g == gender[b]
    # each compound is in exactly one (rare_word) pair, as a hapax is
    rare = w.pairs[w.pairs["phenomenon"] == "rare_word"]
    for src in compounds["source"]:
        holding = w.pairs[w.pairs["source"].str.split().apply(
            lambda ws: src in ws or src + "s" in ws)]
        assert len(holding) == 1 and holding.index[0] in rare.index


def test_only_the_rare_pairs_change_and_the_default_world_is_untouched():
    on = make_translation_world(seed=2, **PARAMS)
    off = make_translation_world(seed=2, rare_derivable=True, **PARAMS)
    same = (on.pairs["source"] == off.pairs["source"]) & (on.pairs["target"] == off.pairs["target"])
    assert set(on.pairs.loc[~same, "phenomenon"]) == {"rare_word"}
    assert (~same).sum() == (on.pairs["phenomenon"] == "rare_word").sum()
    assert on.test.equals(off.test)
    # the default world's parameters (its cache keys) do not name the option
    assert "rare_derivable" not in on.params and off.params["rare_derivable"] is True
    assert make_translation_world(seed=2, **PARAMS).pairs.equals(on.pairs)
