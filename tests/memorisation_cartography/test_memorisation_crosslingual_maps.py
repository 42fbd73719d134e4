"""The chapter's cross-lingual section: one map per language aligned on the shared sources,
the pairing-permuted control, the statistics' known answers on planted maps, and a real
(tiny) build that is cached per language and seed."""

import numpy as np
import pandas as pd
import pytest

from tokenbook.memorisation_cartography import experiments as E
from tokenbook.memorisation_cartography.crosslingual import cross_language_correlations
from tokenbook.verdicts import Expect, judge


def _planted(seed: int, *, langs=("de", "nl", "fr"), n=200, shared=1.0, noise=0.3):
    """Maps whose TM/GS/CM share a per-source component (weight ``shared``) plus language
    noise, and two features that carry the shared component (so a predictor can transfer)."""
    rng = np.random.default_rng(seed)
    z = rng.normal(size=(n, 3))
    length = rng.integers(3, 12, n).astype(float)
    maps = {}
    for lang in langs:
        e = rng.normal(scale=noise, size=(n, 3))
        v = shared * z + e
        maps[lang] = pd.DataFrame({
            "pair_id": np.arange(n), "tm": v[:, 0], "gs": v[:, 1],
            "cm": v[:, 2] + shared * 0.1 * length,
            "src_length": length, "overlap": z[:, 2] + rng.normal(scale=0.1, size=n),
            "char_similarity": rng.random(n)})
    return E.CrossLingual(seed, maps, {})


def test_multiparallel_corpora_share_sources_and_ids():
    c = E.multiparallel_corpora(3, ("de", "nl", "fr"), n_pairs=60)
    assert list(c) == ["de", "nl", "fr"]
    src = c["de"].pairs["source"].tolist()
    for lang, corpus in c.items():
        assert corpus.pairs["source"].tolist() == src
        assert corpus.pairs["pair_id"].tolist() == list(range(60))
        assert corpus.key["world"]["language"] == lang and corpus.labelled
    assert c["de"].pairs["target"].tolist() != c["nl"].pairs["target"].tolist()
    again = E.multiparallel_corpora(3, ("de", "nl", "fr"), n_pairs=60)
    pd.testing.assert_frame_equal(again["fr"].pairs, c["fr"].pairs)     # seeded


def test_multiparallel_corpora_from_files(tmp_path):
    en = tmp_path / "c.en"
    en.write_text("a b\nc d\ne f\n")
    for lang, lines in (("de", "x y\nz w\nv u\n"), ("nl", "p q\nr s\nt o\n")):
        (tmp_path / f"c.{lang}").write_text(lines)
    specs = [{"source_path": str(en), "target_path": str(tmp_path / f"c.{lang}")}
             for lang in ("de", "nl")]
    c = E.multiparallel_corpora(0, ("de", "nl"), corpora=specs)
    assert c["nl"].pairs["target"].tolist() == ["p q", "r s", "t o"]
    assert c["de"].pairs["pair_id"].tolist() == [0, 1, 2] and not c["de"].labelled
    with pytest.raises(ValueError, match="one corpus spec per language"):
        E.multiparallel_corpora(0, ("de", "nl", "fr"), corpora=specs)
    other = tmp_path / "o.en"
    other.write_text("a b\nc d\nX\n")
    with pytest.raises(ValueError, match="same source lines"):
        E.multiparallel_corpora(0, ("de", "nl"), corpora=[
            specs[0], {"source_path": str(other), "target_path": specs[1]["target_path"]}])


def test_permute_pairing_keeps_rows_and_breaks_the_match():
    """Fails if the control left the pairing in place (ρ would stay 1)."""
    cl = _planted(0, shared=1.0, noise=0.0)
    perm = E.permute_pairing(cl.maps, seed=4)
    pd.testing.assert_frame_equal(perm["de"], cl.maps["de"])                # first untouched
    for lang in ("nl", "fr"):
        assert sorted(perm[lang]["pair_id"]) == list(range(200))            # a permutation
        pd.testing.assert_frame_equal(perm[lang].drop(columns="pair_id"),
                                      cl.maps[lang].drop(columns="pair_id"))  # rows intact
    on = cross_language_correlations(cl.maps, n_boot=0)
    off = cross_language_correlations(perm, n_boot=0)
    assert on["rho"].min() == pytest.approx(1.0)
    assert off["rho"].abs().max() < 0.25


def test_statistics_known_answers_on_planted_maps():
    cl = _planted(1)
    on = E.crosslingual_statistics(cl, "on", n_boot=200)
    off = E.crosslingual_statistics(cl, "off", n_boot=200)
    assert set(on) == set(off) == set(E.CROSSLINGUAL_CLAIM_IDS)
    # shared component of variance 1, language noise 0.09: ρ ≈ 0.9, lower bounds well above 0
    for m in ("tm", "gs", "cm"):
        assert on[f"crosslingual-{m}"] > 0.7
        assert off[f"crosslingual-{m}"] < 0.0
    assert on["crosslingual-transfer-cm"] > 0.6         # overlap carries CM in every language
    assert abs(off["crosslingual-transfer-cm"]) < 0.2
    unrelated = _planted(2, shared=0.0)                  # nothing shared: not detected
    assert E.crosslingual_statistics(unrelated, "on", n_boot=200)["crosslingual-cm"] < 0.0
    with pytest.raises(ValueError):
        E.crosslingual_statistics(cl, "sideways")


def test_claim_detected_on_planted_and_not_on_unrelated_maps(monkeypatch):
    stub = pd.DataFrame({"estimator": "linear", "train": ["de", "de"], "test": ["de", "nl"],
                         "target": "cm", "pearson_r": [0.5, 0.5]})
    monkeypatch.setattr(E, "crosslingual_transfer_table", lambda *a, **k: stub)  # fast
    table = E.crosslingual_seed_table({s: _planted(s) for s in range(5)}, n_boot=100)
    assert set(table["mechanism"]) == {"on", "off"} and len(table) == 5 * 2 * 4
    v = E.claim_values(table, "crosslingual-cm")
    assert judge(Expect.greater(0.0), v["values_on"], v["values_off"])[
        "verdict"] == "detected"
    flat = E.crosslingual_seed_table({s: _planted(s, shared=0.0) for s in range(5)}, n_boot=100)
    v = E.claim_values(flat, "crosslingual-cm")
    assert judge(Expect.greater(0.0), v["values_on"], v["values_off"])[
        "verdict"] != "detected"


def test_transfer_score_and_inputs():
    t = pd.DataFrame({"estimator": ["mlp"] * 4 + ["linear"] * 4,
                      "train": ["a", "a", "b", "b"] * 2, "test": ["a", "b", "a", "b"] * 2,
                      "target": "cm", "pearson_r": [0.9, 0.2, 0.4, 0.9, 0.1, 0.5, 0.7, 0.1]})
    assert E.transfer_score(t) == pytest.approx(0.6)     # linear: mean(0.5, 0.7) > mlp 0.3
    assert np.isnan(E.transfer_score(t, target="tm"))
    cl = _planted(0)
    cl.maps["nl"]["char_similarity"] = 1.0               # constant in one language: dropped
    assert E.transfer_inputs(cl.maps) == ["src_length", "overlap"]
    tab = E.crosslingual_transfer_table(cl.maps, seed=0)
    assert set(tab["estimator"]) == {"mlp", "linear"}
    assert len(tab) == 2 * 3 * 3 * 3                    # estimators × train × test × targets


def test_build_is_cached_per_language_and_seed(tmp_path, monkeypatch):
    import tokenbook.memorisation_cartography.ensemble as ensemble
    import tokenbook.models.marian as marian

    monkeypatch.setenv("TOKENBOOK_CACHE", str(tmp_path))
    calls = []
    real = marian.train_marian
    monkeypatch.setattr(ensemble, "train_marian",   # the name the ensemble members call
                        lambda *a, **k: (calls.append(1), real(*a, **k))[1])
    d = E.Design(n_models=2, epochs=1, vocab_size=120, batch_size=32)
    out, sec = E.crosslingual_build([0], d, languages=("de", "nl"), n_pairs=40, n_workers=0,
                                    progress=False)
    assert len(calls) == 2 * 2 and sec > 0               # 2 languages × 2 models, no dynamics
    maps = out[0].maps
    assert list(maps) == ["de", "nl"]
    assert maps["de"]["pair_id"].tolist() == maps["nl"]["pair_id"].tolist() == list(range(40))
    assert maps["de"]["source"].tolist() == maps["nl"]["source"].tolist()
    assert {"tm", "gs", "cm", "src_length", "phenomenon"} <= set(maps["de"].columns)
    assert "cm_bleu" not in maps["de"].columns
    # the same subsets in both languages (the seeded split of a line-aligned corpus)
    assert (out[0].arts["de"].ws.masks() == out[0].arts["nl"].ws.masks()).all()
    calls.clear()
    again, sec = E.crosslingual_build([0], d, languages=("de", "nl"), n_pairs=40, n_workers=0,
                                      progress=False)
    assert calls == [] and sec == 0.0                   # every map from the cache
    pd.testing.assert_frame_equal(again[0].maps["nl"], maps["nl"])


def test_bleu_agreement_per_decoded_language():
    cl = _planted(0)
    de = cl.maps["de"]
    cl.maps["de"] = de.assign(tm_bleu=de["tm"] * 2, gs_bleu=-de["gs"], cm_bleu=de["cm"] + 1)
    out = E.bleu_agreement(cl, n_boot=50)
    assert list(out.columns) == ["language", "metric", "rho", "ci_low", "ci_high", "n"]
    assert set(out["language"]) == {"de"}                          # only the decoded language
    rho = out.set_index("metric")["rho"]
    assert rho["tm"] == pytest.approx(1.0) and rho["gs"] == pytest.approx(-1.0)
    assert rho["cm"] == pytest.approx(1.0)
    assert E.bleu_agreement(_planted(1), n_boot=0).empty
