"""The authors' own memorisation maps: their pickles (``counterfactual_memorisation_{ref,hyp}
.pickle``: a tuple (cm, train_scores, test_scores) of dicts keyed by (src_bpe, trg_bpe)) and the
public demo's Plotly pages (phrase maps as published in memorisation-mt-demo/figures/nl_*.html),
on fixtures written here in those exact formats; then the chapter's map-level analyses and
verdicts on them."""

import json
import pickle
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from tokenbook.memorisation_cartography import released as rel

COMMON = ["the", "house", "is", "red", "we", "see", "a", "man", "with", "dog", "in", "city",
          "old", "car", "new", "day"]
RARE = ["axolotl", "quixotic", "obfuscate", "sesquipedalian", "defenestrate", "zeugma",
        "petrichor", "susurrus"]


def map_rows(n, seed=0):
    """Sentence pairs whose CM grows with rare words and length (a known relation)."""
    rng = np.random.default_rng(seed)
    rows = []
    for i in range(n):
        length = int(rng.integers(3, 12))
        n_rare = int(rng.integers(0, 3))
        words = list(rng.choice(COMMON, length)) + list(rng.choice(RARE, n_rare))
        rng.shuffle(words)
        source = " ".join(words)
        gs = float(np.clip(0.7 - 0.12 * n_rare - 0.01 * length + rng.normal(0, 0.03), 0.02, 0.9))
        cm = float(np.clip(0.05 + 0.15 * n_rare + 0.015 * length + rng.normal(0, 0.03), 0, 0.9))
        tm = min(gs + cm, 0.99)
        rows.append((source, " ".join(reversed(words)), tm, gs))
    return rows


def bpe(text):
    """subword-nmt style: long words split with @@ continuation marks."""
    return " ".join(w if len(w) <= 5 else f"{w[:4]}@@ {w[4:]}" for w in text.split())


def write_pickle(path, rows, *, hyp=False):
    cm, train, test = {}, {}, {}
    scale = 100.0 if hyp else 1.0
    for src, trg, tm, gs in rows:
        key = (bpe(src), bpe(trg))
        train[key], test[key] = tm * scale, gs * scale
        cm[key] = train[key] - test[key]
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "wb") as f:
        pickle.dump((cm, train, test), f)


def _hover(group, symbol):
    return (f"{group}=%{{customdata[0]}}<br>symbol={symbol}<br>training memorisation=%{{x}}"
            "<br>generalisation score=%{y}<br>size=%{marker.size}<br>example_src=%{customdata[1]}"
            "<br>example_trg=%{customdata[2]}<extra></extra>")


def page(traces):
    """A Plotly page as the demo's (plotly.js inlined before the newPlot call)."""
    layout = {"xaxis": {"title": {"text": "training memorisation"}},
              "yaxis": {"title": {"text": "generalisation score"}}}
    return ("<html>\n<head><meta charset=\"utf-8\" /></head>\n<body>\n    <div>"
            "<script type=\"text/javascript\">/** plotly.js v2.25.2 (elided) */</script>"
            "<div id=\"e3ed\" class=\"plotly-graph-div\"></div><script type=\"text/javascript\">"
            "window.PLOTLYENV=window.PLOTLYENV || {}; if (document.getElementById(\"e3ed\")) {"
            "                    Plotly.newPlot(                        \"e3ed\",                "
            f"        {json.dumps(traces)},                        {json.dumps(layout)},"
            "                        {\"responsive\": true}                    )"
            "                };</script></div>\n</body>\n</html>")


def phrase_page(path, group, phrases):
    """``phrases``: (phrase, type, tm, gs, n_pairs, example source, example target)."""
    traces = []
    for phrase, kind, tm, gs, n, src, trg in phrases:
        traces.append({"customdata": [[phrase, f"SRC: {src}...", f"TRG: {trg}..."]],
                       "hovertemplate": _hover(group, kind), "legendgroup": f"{phrase}, {kind}",
                       "marker": {"color": "#636efa", "size": [float(np.sqrt(n))],
                                  "sizemode": "area", "sizeref": 0.09,
                                  "symbol": "circle" if kind == "word-for-word" else "diamond"},
                       "mode": "markers", "name": f"{phrase}, {kind}", "orientation": "v",
                       "showlegend": True, "x": [tm], "xaxis": "x", "y": [gs], "yaxis": "y",
                       "type": "scatter"})
    path.write_text(page(traces), encoding="utf-8")


def phrase_rows(n, seed=1):
    rng = np.random.default_rng(seed)
    out = []
    for i in range(n):
        kind = "word-for-word" if i % 2 else "paraphrase"
        words = list(rng.choice(COMMON, int(rng.integers(4, 14)))) + \
            list(rng.choice(RARE, int(rng.integers(0, 3))))
        n_rare = sum(w in RARE for w in words)
        gs = float(np.clip((0.3 if kind == "word-for-word" else 0.15) - 0.05 * n_rare
                           + rng.normal(0, 0.02), 0.01, 0.9))
        tm = float(min(gs + 0.25 + 0.1 * n_rare + 0.01 * len(words), 0.95))
        out.append((f"phrase {i}", kind, tm, gs, int(rng.integers(1, 40)), " ".join(words),
                    " ".join(reversed(words))))
    return out


def example_page(path, rows):
    """A per-language map in the layout the loader documents (customdata src/trg)."""
    trace = {"customdata": [[s, t] for s, t, _, _ in rows],
             "hovertemplate": "training memorisation=%{x}<br>generalisation score=%{y}"
                              "<br>src=%{customdata[0]}<br>trg=%{customdata[1]}<extra></extra>",
             "mode": "markers", "x": [r[2] for r in rows], "y": [r[3] for r in rows],
             "type": "scattergl"}
    path.write_text(page([trace]), encoding="utf-8")


def write_fixture(folder, n=300):
    """The authors' layout: memorisation_pickled/en-<lang>/… (two languages sharing their
    sources) and the demo's EN-NL idiom page."""
    rows = map_rows(n)
    write_pickle(folder / "memorisation_pickled" / "en-nl" /
                 "counterfactual_memorisation_ref.pickle", rows)
    rng = np.random.default_rng(5)
    de = [(s, t + " de", float(np.clip(tm + rng.normal(0, 0.02), 0, 1)),
           float(np.clip(gs + rng.normal(0, 0.02), 0, 1))) for s, t, tm, gs in rows]
    de = [(s, t, max(tm, gs), gs) for s, t, tm, gs in de]
    write_pickle(folder / "memorisation_pickled" / "en-de" /
                 "counterfactual_memorisation_ref.pickle", de)
    write_pickle(folder / "memorisation_pickled" / "en-de" /
                 "counterfactual_memorisation_hyp.pickle", de, hyp=True)
    (folder / "figures").mkdir(parents=True, exist_ok=True)
    phrase_page(folder / "figures" / "nl_idioms.html", "idioms", phrase_rows(120))
    return folder


# --------------------------------------------------------------------------- loaders
def test_pickle_round_trip_debpe_and_hyp_scale(tmp_path):
    rows = [("the quixotic man", "de man", 0.9, 0.2), ("a dog", "een hond", 0.8, 0.75)]
    p = tmp_path / "en-nl" / "counterfactual_memorisation_ref.pickle"
    write_pickle(p, rows)
    t = rel.read_pickled_map(p)
    assert t["lang"].unique().tolist() == ["nl"] and t["metric"].iloc[0] == "ref"
    assert t["source"].tolist() == ["the quixotic man", "a dog"]
    assert t["source_bpe"].iloc[0] == "the quix@@ otic man"
    assert t["cm"].tolist() == pytest.approx([0.7, 0.05])
    h = tmp_path / "en-nl" / "counterfactual_memorisation_hyp.pickle"
    write_pickle(h, rows, hyp=True)  # BLEU 0-100 in the file
    assert rel.read_pickled_map(h)["tm"].tolist() == pytest.approx([0.9, 0.8])


def test_pickle_errors_and_refused_objects(tmp_path):
    p = tmp_path / "x.pickle"
    with open(p, "wb") as f:
        pickle.dump({"a": 1}, f)
    with pytest.raises(rel.MapFormatError, match=r"expected a tuple \(cm, train_scores"):
        rel.read_pickled_map(p)
    with open(p, "wb") as f:
        pickle.dump((pd.DataFrame(), {}, {}), f)  # asks for pandas classes: refused
    with pytest.raises(rel.MapFormatError, match="refused"):
        rel.read_pickled_map(p)
    key = ("a b", "c d")
    with open(p, "wb") as f:
        pickle.dump(({key: 0.5}, {key: 0.9}, {key: 0.1}), f)
    with pytest.raises(rel.MapFormatError, match="cm is not train − test"):
        rel.read_pickled_map(p)


def test_phrase_page_in_the_demo_layout(tmp_path):
    path = tmp_path / "nl_idioms.html"
    phrase_page(path, "idioms", [
        ("jump through hoops", "word-for-word", 0.786, 0.104, 20, "We jump &apos; through",
         "Wij springen"),
        ("call it a day", "paraphrase", 0.069, 0.017, 8, "Let us call it a day", "Genoeg")])
    t = rel.read_demo_page(path)
    assert t.attrs["kind"] == "phrases"
    assert t["group"].tolist() == ["idioms", "idioms"]
    assert t["translation"].tolist() == ["word-for-word", "paraphrase"]
    assert t["cm"].tolist() == pytest.approx([0.682, 0.052])
    assert t["n_pairs"].tolist() == [20, 8]  # marker size = √(pairs)
    assert t["source"].iloc[0] == "We jump ' through..."  # prefix gone, entity decoded
    assert t["lang"].iloc[0] == "nl"


def test_example_page_and_pages_of_another_structure(tmp_path):
    path = tmp_path / "de_hypothesis-based=False.html"
    example_page(path, map_rows(5))
    t = rel.read_demo_page(path)
    assert t.attrs["kind"] == "examples" and len(t) == 5 and t["lang"].iloc[0] == "de"
    assert t["metric"].iloc[0] == "ref"
    bad = tmp_path / "nl_other.html"
    bad.write_text("<html><script>Plotly.react('x', [])</script></html>")
    with pytest.raises(rel.MapFormatError, match=r"no Plotly.newPlot\(…\) call; expected"):
        rel.read_demo_page(bad)
    bad.write_text(page([{"x": [0.5], "y": [0.2], "type": "scatter"}]))
    with pytest.raises(rel.MapFormatError, match="no per-point source and target; expected"):
        rel.read_demo_page(bad)


def test_example_page_variants_typed_arrays_hover_text(tmp_path):
    import base64

    rows = map_rows(4)
    x = np.array([r[2] for r in rows])
    trace = {"customdata": [[s, t] for s, t, _, _ in rows],
             "hovertemplate": "source sentence=%{customdata[0]}<br>translation="
                              "%{customdata[1]}<extra></extra>",
             "x": {"dtype": "f8", "bdata": base64.b64encode(x.tobytes()).decode()},
             "y": [r[3] for r in rows], "type": "scatter"}
    path = tmp_path / "fr_hypothesis-based=True.html"
    path.write_text(page([trace]))
    t = rel.read_demo_page(path)
    assert t["tm"].to_numpy() == pytest.approx(x) and t["metric"].iloc[0] == "hyp"
    assert t["source"].tolist() == [r[0] for r in rows]
    assert t["target"].tolist() == [r[1] for r in rows]
    trace = {"text": [f"SRC: {s}<br>TRG: {t}" for s, t, _, _ in rows],
             "x": [r[2] for r in rows], "y": [r[3] for r in rows], "type": "scatter"}
    path.write_text(page([trace]))
    assert rel.read_demo_page(path)["target"].tolist() == [r[1] for r in rows]


def test_regions_of_a_known_map():
    t = pd.DataFrame({"tm": [0.9, 0.8, 0.7, 0.1, 0.5], "gs": [0.2, 0.1, 0.7, 0.05, 0.45]})
    t["cm"] = t["tm"] - t["gs"]
    r = rel.regions_table(t).set_index("region")
    assert r["rows"].to_dict() == {"generalised": 1, "in-between": 1, "memorised": 2,
                                   "unlearnt": 1}
    assert r.loc["memorised", "share"] == pytest.approx(0.4)


# --------------------------------------------------------------------------- analyses
@pytest.mark.slow
def test_analyses_and_verdicts_on_the_fixture(tmp_path):
    maps = rel.load_maps(write_fixture(tmp_path / "maps"))
    assert set(maps.examples) == {("nl", "ref"), ("de", "ref"), ("de", "hyp")}
    assert len(maps.phrases) == 120
    out = rel.analyse(maps, n_splits=2, n_boot=100)
    claims = {c.id: c for c in out["claims"]}
    assert claims["released-features-rank-cm"].verdict == "holds"
    assert claims["released-features-predict-cm"].verdict == "holds"
    assert claims["released-mlp-beats-linear"].verdict in ("holds", "does not hold")
    assert claims["released-idioms-high-cm"].verdict == "holds"
    assert claims["released-paraphrase-lower"].verdict == "holds"
    assert claims["released-crosslingual-tm"].verdict == "holds"
    assert out["n_shared"] == len(set(r[0] for r in map_rows(300)))
    assert claims["released-idioms-high-cm"].published == pytest.approx(0.335)
    # the same maps with the paper-scale minimum of shared sources: not testable, with counts
    small = rel.analyse(maps, n_splits=2, n_boot=100, min_shared_sources=10**6)
    c = {c.id: c for c in small["claims"]}["released-crosslingual-cm"]
    assert c.verdict == "not testable" and "shared sources" in c.note


def test_one_map_is_not_testable_across_languages(tmp_path):
    p = tmp_path / "en-nl" / "counterfactual_memorisation_ref.pickle"
    write_pickle(p, map_rows(50))
    out = rel.analyse(rel.load_maps(p), n_splits=1, n_boot=50)
    claims = {c.id: c for c in out["claims"]}
    assert claims["released-crosslingual-tm"].verdict == "not testable"
    assert claims["released-features-rank-cm"].verdict == "not testable"  # 50 < 100 rows
    assert "50" in claims["released-features-rank-cm"].note
    assert claims["released-idioms-high-cm"].verdict == "not testable"


@pytest.mark.slow
def test_chapter_runs_on_the_authors_maps_without_training(tmp_path):
    """`tokenbook run memorisation_cartography -f …/released.yaml -p maps <fixture>`: the tiny
    world is skipped, the page shows the real-data section and the verdicts on the maps."""
    from tokenbook.book.runner import load_param_file, run_chapter

    repo = Path(__file__).resolve().parents[2]
    params = load_param_file(repo / "params" / "memorisation_cartography" / "released.yaml")
    assert params["maps"] == "data/memorisation_maps"
    folder = write_fixture(tmp_path / "maps")
    res = run_chapter("memorisation_cartography", {**params, "maps": str(folder),
                                                   "n_splits": 2},
                      out=tmp_path / "runs", quiet=True, timeout_s=600)
    assert res.ok, res.error
    claims = {c["id"]: c for c in json.loads((res.run_dir / "claims.json").read_text())}
    assert set(claims) == {"released-features-rank-cm", "released-features-predict-cm",
                           "released-mlp-beats-linear", "released-idioms-high-cm",
                           "released-paraphrase-lower", "released-crosslingual-tm",
                           "released-crosslingual-gs", "released-crosslingual-cm"}
    assert claims["released-crosslingual-cm"]["verdict"] == "holds"
    figures = {p.name for p in (res.run_dir / "figures").iterdir()}
    assert figures == {"authors-map.png", "authors-feature-correlations.png",
                       "authors-predictors.png"}  # nothing of the tiny world ran
    page = (res.run_dir / "memorisation_cartography.ipynb").read_text()
    assert "nl idioms" in page and "counterfactual_memorisation_ref.pickle" in page
