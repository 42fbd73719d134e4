"""The chapter's cross-lingual section: one map per language aligned on the shared sources,
the off world with the phenomena placed per language, the statistics' known answers on planted
maps, and a real (tiny) build that is cached per language and seed."""

import numpy as np
import pandas as pd
import pytest

from tokenbook.claims import MANIPULATION_PREFIX as M
from tokenbook.memorisation_cartography import experiments as E
from tokenbook.memorisation_cartography.claims import claim_specs
from tokenbook.memorisation_cartography.crosslingual import cross_language_correlations
from tokenbook.verdicts import judge
from tokenbook.worlds.translation import SOURCE_SIDE_PHENOMENA


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


def _planted_world(seed: int, *, shared_phenomena=True, langs=("de", "nl", "fr"), n=200,
                   n_phen=30, weight=1.0, noise=0.3):
    """Labelled maps of a multi-parallel world: ``n_phen`` phenomenon sentences whose metrics
    share a per-sentence component (weight ``weight``) across languages, at the same positions
    in every language (on) or at each language's own (off); regular sentences elsewhere with a
    shared component of their own, plus language noise; ``overlap`` carries CM."""
    rng = np.random.default_rng(seed)
    z_phen, z_reg = rng.normal(size=(n_phen, 3)) + 2.0, rng.normal(size=(n, 3))
    at = rng.permutation(n)[:n_phen]
    maps = {}
    for lang in langs:
        where = at if shared_phenomena else rng.permutation(n)[:n_phen]
        v = z_reg.copy()
        v[where] = weight * z_phen
        v = v + rng.normal(scale=noise, size=(n, 3))
        phen = np.array(["regular"] * n, dtype=object)
        phen[where] = ["idiom", "rare_word", "duplicate"] * (n_phen // 3)
        src = np.array([f"r{p} a b" for p in range(n)], dtype=object)
        src[where] = [f"p{k} a b c" for k in range(n_phen)]
        maps[lang] = pd.DataFrame({
            "pair_id": np.arange(n), "source": src, "phenomenon": phen,
            "tm": v[:, 0], "gs": v[:, 1], "cm": v[:, 2],
            "src_length": rng.integers(3, 12, n).astype(float),
            "overlap": v[:, 2] + rng.normal(scale=0.1, size=n), "char_similarity": rng.random(n)})
    return E.CrossLingual(seed, maps, {})


def test_multiparallel_off_world_moves_only_the_phenomena():
    on = E.multiparallel_corpora(2, ("de", "nl", "fr"), n_pairs=120)
    off = E.multiparallel_corpora(2, ("de", "nl", "fr"), n_pairs=120,
                                  world={"shared_phenomena": False})
    shared = set(SOURCE_SIDE_PHENOMENA)
    for lang in on:
        a, b = on[lang].pairs, off[lang].pairs
        assert a["phenomenon"].value_counts().to_dict() == b["phenomenon"].value_counts().to_dict()
        # the same phenomenon sentences, elsewhere
        assert (sorted(a.loc[a["phenomenon"].isin(shared), "source"])
                == sorted(b.loc[b["phenomenon"].isin(shared), "source"]))
        pd.testing.assert_frame_equal(on[lang].test, off[lang].test)
    pos = {lang: set(off[lang].pairs.index[off[lang].pairs["phenomenon"].isin(shared)])
           for lang in off}
    assert pos["de"] != pos["nl"] and len(pos["de"] & pos["nl"]) < len(pos["de"]) / 2
    # where both are regular, the languages share the sentence
    de, nl = off["de"].pairs, off["nl"].pairs
    both = ~de["phenomenon"].isin(shared) & ~nl["phenomenon"].isin(shared)
    assert (de.loc[both, "source"] == nl.loc[both, "source"]).all()


def test_statistics_known_answers_on_planted_maps():
    on_world, off_world = _planted_world(1), _planted_world(1, shared_phenomena=False)
    on = E.crosslingual_statistics(on_world, "on", n_boot=0)
    off = E.crosslingual_statistics(on_world, "off", off_world=off_world, n_boot=0)
    ids = set(E.CROSSLINGUAL_CLAIM_IDS)
    assert ids <= set(on) and ids <= set(off)
    # phenomenon component of variance 1, language noise 0.09: ρ ≈ 0.9 on; off the first
    # language's phenomenon pairs meet regular rows (ρ ≈ 0)
    for m in ("tm", "gs", "cm"):
        assert on[f"crosslingual-{m}"] > 0.7
        assert off[f"crosslingual-{m}"] < 0.3
        assert on[M + f"crosslingual-{m}"] == 1.0 > 0.5 > off[M + f"crosslingual-{m}"]
    assert on["crosslingual-transfer-cm"] > 0.6         # overlap carries CM in every language
    assert abs(off["crosslingual-transfer-cm"]) < 0.2
    unrelated = _planted_world(2, weight=0.0)           # no shared component: not detected
    assert E.crosslingual_statistics(unrelated, "on", n_boot=0)["crosslingual-cm"] < 0.3
    with pytest.raises(ValueError, match="off_world"):
        E.crosslingual_statistics(on_world, "off")
    with pytest.raises(ValueError):
        E.crosslingual_statistics(on_world, "sideways")


def test_paper_scale_statistic_is_the_lower_bound_over_all_sources():
    cl = _planted_world(3)
    for m in cl.maps.values():
        m["phenomenon"] = "unlabelled"
    got = E.crosslingual_statistics(cl, "on", n_boot=200)
    corr = cross_language_correlations({k: v[["pair_id", "tm", "gs", "cm"]]
                                        for k, v in cl.maps.items()}, n_boot=0)
    assert got["crosslingual-tm"] < corr.loc[corr["metric"] == "tm", "rho"].min()
    assert not any(k.startswith(M) for k in got)         # no planted labels: no checks
    with pytest.raises(ValueError, match="no off world"):
        E.crosslingual_statistics(cl, "off")


def test_claim_detected_on_planted_and_not_on_unrelated_maps(monkeypatch):
    stub = pd.DataFrame({"estimator": "linear", "train": ["de", "de"], "test": ["de", "nl"],
                         "target": "cm", "pearson_r": [0.5, 0.5]})
    monkeypatch.setattr(E, "crosslingual_transfer_table", lambda *a, **k: stub)  # fast
    spec = next(s for s in claim_specs() if s.id == "crosslingual-cm")

    def verdict(weight):
        on = {s: _planted_world(s, weight=weight) for s in range(5)}
        off = {s: _planted_world(s, weight=weight, shared_phenomena=False) for s in range(5)}
        table = E.crosslingual_seed_table(on, off_results=off, n_boot=0)
        v = E.claim_values(table, "crosslingual-cm")
        return table, judge(spec.expect, v["values_on"], v["values_off"])["verdict"]

    table, got = verdict(1.0)
    assert set(table["mechanism"]) == {"on", "off"} and got == "detected"
    assert verdict(0.0)[1] != "detected"
    with pytest.raises(ValueError, match="same root seeds"):
        E.crosslingual_seed_table({0: _planted_world(0)}, off_results={})
    on_only = E.crosslingual_seed_table({0: _planted_world(0)}, n_boot=0)
    assert set(on_only["mechanism"]) == {"on"}


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
