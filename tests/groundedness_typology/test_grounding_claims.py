"""The groundedness chapter's claims as library specs
(:mod:`tokenbook.groundedness_typology.claims`)."""

from __future__ import annotations

import pandas as pd
import pytest

from tokenbook.claims import qualified_name
from tokenbook.groundedness_typology import claims as typology_claims
from tokenbook.groundedness_typology import experiments as gx


def test_expectations_cover_every_claim():
    assert list(typology_claims.expectations()) == list(gx.CLAIMS)
    t = typology_claims.thresholds(0.8)
    assert t["lexical-gt-functional"] == 0.8 and t["rank-agreement"] == 0.05
    assert t["partly-concreteness"] == 0.1  # the lower end of "partly"


def test_specs_in_the_books_order_with_their_computing_function():
    specs = typology_claims.claim_specs()
    assert [s.id for s in specs] == list(gx.CLAIMS)
    for s in specs:
        text, statistic, paper = gx.CLAIMS[s.id]
        assert (s.claim, s.statistic, s.paper) == (text, statistic, paper)
        assert qualified_name(s.computed_by) == \
            "tokenbook.groundedness_typology.experiments:seed_claims"
        margin = {gx.NORMS_CLAIM: typology_claims.NORMS_MARGIN,
                  gx.AGREEMENT_CLAIM: typology_claims.SHARED_MARGIN}.get(
                      s.id, typology_claims.MANIPULATION_MARGIN)
        assert s.manipulation.threshold == margin
        assert s.known_answer_how  # every claim has its reference answer
    assert "another held-out scene's image" in specs[0].mechanism
    assert "retrained" in typology_claims.claim_specs(null="world")[0].mechanism


def test_tiny_claims_from_a_seed_table():
    rows = []
    for s in range(5):
        for mech in ("on", "off"):
            values = {"lexical-gt-functional": (1.0, 0.0), "functional-above-zero": (1.0, 0.0),
                      "cline-noun-adj-verb": (1.0, 0.0), "rank-agreement": (0.001, 0.5),
                      "partly-concreteness": (0.5, 0.0)}
            for cid, (on, off) in values.items():
                rows.append({"seed": s, "mechanism": mech, "claim_id": cid,
                             "value": (on if mech == "on" else off) + 0.001 * s})
    claims = {c.id: c for c in typology_claims.tiny_claims(pd.DataFrame(rows))}
    assert list(claims) == list(gx.CLAIMS)
    assert {c.verdict for c in claims.values()} == {"detected"}, \
        {k: c.verdict for k, c in claims.items()}
    assert claims["rank-agreement"].n_root_seeds == 5
    assert claims["partly-concreteness"].computed_by == \
        "tokenbook.groundedness_typology.experiments:seed_claims"


def _stub_words(seed, effect_scale, langs=("de", "fr", "ja")):
    """A caption word table with a clear shared order NOUN > ADJ > VERB > DET > ADP."""
    import numpy as np

    effects = {"NOUN": 2.0, "ADJ": 1.2, "VERB": 0.6, "DET": 0.3, "ADP": 0.2, "PUNCT": 0.0}
    rng = np.random.default_rng(seed)
    rows = []
    for lang in langs:
        for c in range(40):
            for i, upos in enumerate(effects):
                s_u = rng.uniform(2, 6)
                rows.append({"lang": lang, "unit_id": f"{lang}-{c}", "upos": upos,
                             "word": f"{upos.lower()}{c % 4}", "word_idx": i, "s_U": s_u,
                             "s_P": s_u - effect_scale * effects[upos] + rng.normal(0, 0.2),
                             "concreteness": 1.0 + effects[upos]})
    return pd.DataFrame(rows)


def test_independent_pos_systems_move_only_the_class_labels():
    """The rank-agreement claim's off world: per language a seeded permutation of the ranked
    classes; the words and their surprisals stay, each language's class means are the same
    numbers under other names, and the languages' class orders no longer agree."""
    from tokenbook.groundedness_typology import measures as gr

    words = gr.add_groundedness(_stub_words(1, 1.0, langs=("de", "fr", "ja", "sw", "tr")))
    words.loc[(words.lang == "de") & (words.upos == "ADP") & (words.unit_id < "de-30"),
              "upos"] = "X"        # ADP: under 20 tokens in one language, so not ranked
    systems = gx.independent_pos_systems(words, 3, min_class_tokens=20)
    assert systems == gx.independent_pos_systems(words, 3, min_class_tokens=20)   # seeded
    ranked = ["ADJ", "DET", "NOUN", "VERB"]
    for lang, system in systems.items():
        assert sorted(system) == ranked and sorted(system.values()) == ranked
    assert len({tuple(m.values()) for m in systems.values()}) > 1   # drawn per language
    moved = gx.with_pos_systems(words, systems)
    assert (moved.drop(columns="upos") == words.drop(columns="upos")).all().all()
    for lang in systems:
        before = words[words.lang == lang].groupby("upos")["groundedness"].mean()
        after = moved[moved.lang == lang].groupby("upos")["groundedness"].mean()
        assert sorted(before.round(12)) == sorted(after.round(12))
        for old, new in systems[lang].items():
            assert after[new] == pytest.approx(before[old])
    assert gx.shared_class_share({lang: {u: u for u in ranked} for lang in systems}) == 1.0
    assert gx.shared_class_share(systems) < 0.5


def test_rank_agreement_is_judged_against_independent_class_systems(monkeypatch):
    """On: the shared classes' order agrees across languages (p < .05) and the manipulation
    check reads 1; off: the same words under independent class systems — the check falls
    below its margin, the text-only surprisal (balance) does not move, and the known answer
    is computed with the same systems."""
    from tokenbook.claims import BALANCE_PREFIX, KNOWN_PREFIX, MANIPULATION_PREFIX
    from tokenbook.grounded import tiny as gt

    langs = ("de", "fr", "ja", "sw", "tr", "fi")
    monkeypatch.setattr(gt, "caption_words", lambda seed, params, mech: _stub_words(1, 0.2,
                                                                                    langs))
    monkeypatch.setattr(gt, "reference_caption_words",
                        lambda seed, params, mech: _stub_words(2, 1.0, langs))
    norms = _stub_words(3, 1.0)[["lang", "word", "concreteness"]].drop_duplicates(
        ["lang", "word"])
    monkeypatch.setattr(gt, "tiny_norms", lambda seed, params, mech: norms.assign(
        depicted=norms["concreteness"] > 2, concept=norms["word"]))
    cid = gx.AGREEMENT_CLAIM
    on, off = (gx.seed_claims(0, mech, n_boot=20, n_perm=200) for mech in ("on", "off"))
    assert on[cid] < 0.05 and on[KNOWN_PREFIX + cid] < 0.05
    assert on[MANIPULATION_PREFIX + cid] == 1.0
    assert off[MANIPULATION_PREFIX + cid] < typology_claims.SHARED_MARGIN
    assert off[cid] > 0.05 and off[KNOWN_PREFIX + cid] > 0.05
    assert on[BALANCE_PREFIX + cid] == off[BALANCE_PREFIX + cid]


def test_seed_claims_give_every_claim_its_reference_answer(monkeypatch):
    """seed_claims writes ``known:<id>`` for every claim: the same statistic on the count
    models' table (stubbed here: a table with a clear noun > adj > verb > det effect), for the
    mechanism's own setting (the reference is asked for with the same mechanism)."""
    from tokenbook.claims import KNOWN_PREFIX
    from tokenbook.grounded import tiny as gt

    asked = []
    monkeypatch.setattr(gt, "caption_words", lambda seed, params, mech: _stub_words(1, 0.2))
    monkeypatch.setattr(gt, "reference_caption_words",
                        lambda seed, params, mech: asked.append(mech) or _stub_words(2, 1.0))
    norms = _stub_words(3, 1.0)[["lang", "word", "concreteness"]].drop_duplicates(["lang", "word"])
    monkeypatch.setattr(gt, "tiny_norms", lambda seed, params, mech: norms.assign(
        depicted=norms["concreteness"] > 2, concept=norms["word"]))
    out = gx.seed_claims(0, "off", n_boot=20, n_perm=50)
    for cid in gx.CLAIMS:
        assert KNOWN_PREFIX + cid in out, cid
    assert asked[0] == "off"                      # the reference of the same mechanism
    assert out[KNOWN_PREFIX + "cline-noun-adj-verb"] == 1.0       # the stub's clear cline
    assert out[KNOWN_PREFIX + "lexical-gt-functional"] == 1.0
    # balance: the caption claims carry the scored words' mean text-only surprisal
    from tokenbook.claims import BALANCE_PREFIX
    for cid in gx.CLAIMS:
        if cid != gx.NORMS_CLAIM:
            assert out[BALANCE_PREFIX + cid] == pytest.approx(_stub_words(1, 0.2)["s_U"].mean())
    # the norms claim carries the mean rating over (language, concept) pairs
    assert out[BALANCE_PREFIX + gx.NORMS_CLAIM] == pytest.approx(norms["concreteness"].mean())


def test_the_balance_check_flags_an_off_world_whose_text_moved():
    """The caption claims' balance check: s_U may move by at most BALANCE_TOLERANCE nats
    between on and off (the shuffle null keeps it exactly; a retrained off world must too)."""
    from tokenbook.claims import BALANCE_PREFIX

    spec = typology_claims.claim_specs()[0]
    assert spec.balance_tolerance == typology_claims.BALANCE_TOLERANCE
    rows = []
    for s in range(6):
        for mech, shift in (("on", 0.0), ("off", 0.2)):
            rows += [{"seed": s, "mechanism": mech, "claim_id": spec.id,
                      "value": 1.0 if mech == "on" else 0.0},
                     {"seed": s, "mechanism": mech, "claim_id": BALANCE_PREFIX + spec.id,
                      "value": 3.0 + shift}]
    (claim,) = typology_claims.tiny_claims(pd.DataFrame(rows))[:1]
    assert "balance check failed" in claim.note

