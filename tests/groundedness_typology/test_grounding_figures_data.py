"""The groundedness chapter's figures draw their input data (issue #32): on small hand-made
tables each plot_* is read back (violin extents, mean markers, error bars, heatmap arrays,
scatter offsets, the OLS line, tick labels) and compared with values computed here, so a
figure that plotted the wrong column, dropped a class or language, or mis-ordered the
categories fails."""

import matplotlib

matplotlib.use("Agg")

import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import pytest  # noqa: E402
from matplotlib.collections import PathCollection, PolyCollection  # noqa: E402
from matplotlib.colors import to_rgba  # noqa: E402

from tokenbook.groundedness_typology import figures as figs  # noqa: E402


def _ticks(ax, axis="x"):
    return [t.get_text() for t in (ax.get_xticklabels() if axis == "x" else ax.get_yticklabels())]


def _word_table():
    """Two languages; G = s_U − s_P per word set by hand. Class means over the languages:
    NOUN 2.5, VERB 1.0, DET −0.5 (so the x order is NOUN, VERB, DET); "X" is not analysed and
    "ADV" in lang b has too few tokens (1 < min_count 2)."""
    g = {("a", "NOUN"): [2.0, 3.0, 4.0], ("a", "VERB"): [0.5, 1.5], ("a", "DET"): [-1.0, 0.0],
         ("a", "X"): [9.0, 9.0], ("b", "NOUN"): [1.0, 2.0], ("b", "VERB"): [1.0, 1.0, 1.0],
         ("b", "DET"): [-0.5, -0.5], ("b", "ADV"): [7.0]}
    rows = [dict(lang=lang, unit_id=f"{lang}{k}", word=f"w{k}", upos=u, s_U=5.0 + v, s_P=5.0,
                 s_other=-v)
            for (lang, u), vs in g.items() for k, v in enumerate(vs)]
    return pd.DataFrame(rows), g


def test_violins_span_each_classes_values_with_its_mean_marked():
    words, g = _word_table()
    fig = figs.plot_class_violins(words, min_count=2)
    order = ["NOUN", "VERB", "DET"]
    panels = [ax for ax in fig.axes if ax.get_visible()]
    assert [ax.get_title() for ax in panels] == ["a", "b"]
    for ax in panels:
        lang = ax.get_title()
        assert _ticks(ax) == order                        # same order in every panel, no X/ADV
        violins = [c for c in ax.collections if isinstance(c, PolyCollection)]
        got = {}
        for c in violins:
            v = np.vstack([p.vertices for p in c.get_paths()])
            pos = int(round((v[:, 0].min() + v[:, 0].max()) / 2))
            got[order[pos]] = (v[:, 1].min(), v[:, 1].max())
        want = {u: (min(g[(lang, u)]), max(g[(lang, u)])) for u in order
                if len(set(g[(lang, u)])) > 1}                 # a constant class has no density
        assert set(got) == set(want)
        for u in want:                                          # cut=0: from min to max value
            assert got[u] == pytest.approx(want[u], abs=1e-6), (lang, u)
        means = [c for c in ax.collections if isinstance(c, PathCollection)]
        assert len(means) == 1
        np.testing.assert_allclose(means[0].get_offsets(),
                                   [[k, np.mean(g[(lang, u)])] for k, u in enumerate(order)])


def test_class_means_draw_each_languages_points_intervals_and_the_overall_mean():
    summary = pd.DataFrame({
        "lang": ["a", "a", "a", "b", "b", "b"],
        "upos": ["VERB", "NOUN", "DET", "NOUN", "DET", "VERB"],
        "mean": [1.0, 3.0, -1.0, 2.0, 0.0, 0.5],
        "ci_low": [0.5, 2.5, -2.0, 1.9, -0.5, 0.1],          # asymmetric intervals
        "ci_high": [1.1, 4.0, -0.8, 2.5, 0.1, 1.0],
        "n": 10})
    ax = figs.plot_class_means(summary).axes[0]
    order = ["NOUN", "VERB", "DET"]                        # by mean over languages: 2.5, .75, −.5
    assert _ticks(ax) == order
    bars = {}
    for c in ax.containers:
        line, _, (barcol,) = c.lines
        segs = barcol.get_segments()
        bars[c.get_label()] = (np.asarray(line.get_xdata(), float),
                               np.asarray(line.get_ydata(), float),
                               [(s[:, 1].min(), s[:, 1].max()) for s in segs])
    assert set(bars) == {"a", "b"}
    width = 0.7 / 2
    for i, lang in enumerate(["a", "b"]):
        s = summary[summary.lang == lang].set_index("upos").loc[order]
        x, y, spans = bars[lang]
        np.testing.assert_allclose(x, np.arange(3) - 0.35 + width * (i + 0.5))
        np.testing.assert_allclose(y, s["mean"])
        np.testing.assert_allclose(spans, list(zip(s["ci_low"], s["ci_high"])))
    (diamonds,) = [c for c in ax.collections if isinstance(c, PathCollection)]
    np.testing.assert_allclose(diamonds.get_offsets(), [[0, 2.5], [1, 0.75], [2, -0.5]])


def _heat(ax):
    mesh = ax.collections[0]
    return np.ma.asarray(mesh.get_array())


def test_class_pair_matrix_colours_are_the_shares_in_percent():
    classes = ["NOUN", "ADJ", "DET"]                            # the matrix's order, kept
    m = pd.DataFrame([[np.nan, 0.5, 1.0], [0.25, np.nan, 0.75], [0.0, np.nan, np.nan]],
                     index=classes, columns=classes)
    ax = figs.plot_class_pair_matrix(m).axes[0]
    assert _ticks(ax) == classes and _ticks(ax, "y") == classes
    arr = _heat(ax).reshape(3, 3)
    assert (np.ma.getmaskarray(arr) == m.isna().to_numpy()).all()   # untested pairs blank
    np.testing.assert_allclose(arr.filled(np.nan), 100 * m.to_numpy())
    assert sorted(t.get_text() for t in ax.texts) == sorted(["50", "100", "25", "75", "0"])


def test_agreement_heatmap_is_the_matrix():
    langs = ["en", "de", "fr"]
    m = pd.DataFrame([[1.0, 0.2, -0.4], [0.2, 1.0, 0.6], [-0.4, 0.6, 1.0]], index=langs,
                     columns=langs)
    ax = figs.plot_agreement(m).axes[0]
    assert _ticks(ax) == langs and _ticks(ax, "y") == langs
    np.testing.assert_allclose(_heat(ax).reshape(3, 3), m.to_numpy())
    assert [t.get_text() for t in ax.texts] == [f"{v:.2f}" for v in m.to_numpy().ravel()]


def test_types_vs_norm_points_colours_and_ols_line():
    types = pd.DataFrame({"upos": ["NOUN", "ADJ", "DET", "ADP", "X", "VERB"],
                          "concreteness": [4.5, 3.0, 1.0, 2.0, 5.0, np.nan],
                          "imageability": [1.0, 2.0, 3.0, 4.0, 5.0, 6.0],
                          "groundedness": [2.0, 1.5, 0.1, 0.4, 9.0, 1.0]})
    ax = figs.plot_types_vs_norm(types, "concreteness").axes[0]
    keep = types.iloc[:4]                          # X is neither kind, VERB has no rating
    (pts,) = [c for c in ax.collections if isinstance(c, PathCollection)]
    np.testing.assert_allclose(pts.get_offsets(), keep[["concreteness", "groundedness"]])
    colours = [figs.KIND_COLOURS[k] for k in ("lexical", "lexical", "functional", "functional")]
    for face, colour in zip(pts.get_facecolors(), colours):
        assert np.allclose(face[:3], to_rgba(colour)[:3], atol=1e-3)
    slope, icept = np.polyfit(keep["concreteness"], keep["groundedness"], 1)
    (fit,) = [ln for ln in ax.lines if len(ln.get_xdata()) > 2]
    x = np.asarray(fit.get_xdata(), float)
    assert x.min() == pytest.approx(1.0) and x.max() == pytest.approx(4.5)
    np.testing.assert_allclose(fit.get_ydata(), icept + slope * x, atol=1e-9)
