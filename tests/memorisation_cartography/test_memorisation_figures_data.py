"""The memorisation chapter's figures draw their input data (issue #32): on small hand-made
tables each plot_* is read back (scatter offsets, point and bar heights, error-bar extents,
heatmap arrays, density curves, tick labels) and compared with values computed here, so a
figure that plotted the wrong column, dropped a group or mis-ordered the categories fails.
(:func:`plot_removal_grid`, :func:`plot_specialised` and :func:`plot_seed_values` are read back
in test_memorisation_figures.py.)"""

import matplotlib

matplotlib.use("Agg")

import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import pytest  # noqa: E402
from matplotlib.collections import LineCollection, PathCollection  # noqa: E402
from matplotlib.colors import to_rgba  # noqa: E402

from tokenbook.memorisation_cartography import figures as F  # noqa: E402


def _ticks(ax, axis="x"):
    return [t.get_text() for t in (ax.get_xticklabels() if axis == "x" else ax.get_yticklabels())]


def _panels(fig):
    return [a for a in fig.axes if a.get_label() != "<colorbar>"]


def _same_colour(a, b):
    return np.allclose(to_rgba(a)[:3], to_rgba(b)[:3], atol=1e-3)


@pytest.fixture
def cm():
    tm = np.array([0.9, 0.8, 0.3, 0.6, 0.7, 0.2, 0.5])
    gs = np.array([0.1, 0.7, 0.2, 0.6, 0.2, 0.1, 0.45])
    kinds = ["idiom", "regular", "regular", "noisy", "idiom", "regular", "noisy"]
    return pd.DataFrame({"tm": tm, "gs": gs, "cm": tm - gs - 0.1, "phenomenon": kinds,
                         "other": gs[::-1]})


def test_map_points_colours_and_examples(cm):
    ex = cm.iloc[[0, 3]].assign(label=["memorised", "noisy"])
    fig = F.plot_map(cm, examples=ex)
    ax = fig.axes[0]
    (pts,) = [c for c in ax.collections if isinstance(c, PathCollection)]
    np.testing.assert_allclose(pts.get_offsets(), cm[["tm", "gs"]].to_numpy())  # x TM, y GS
    np.testing.assert_allclose(pts.get_array(), cm["cm"].clip(lower=0))       # colour CM ≥ 0
    assert pts.norm.vmin == 0 and pts.norm.vmax == pytest.approx(max(0.3, cm["cm"].max()))
    notes = {t.get_text(): t.xy for t in ax.texts}
    assert notes == {"memorised": (0.9, 0.1), "noisy": (0.6, 0.6)}


def test_phenomena_highlight_each_phenomenon_against_the_regular_pairs(cm):
    fig = F.plot_phenomena(cm)
    panels = [a for a in fig.axes if a.get_title()]
    assert [a.get_title() for a in panels] == ["idiom (2)", "noisy (2)"]     # first-seen order
    regular = cm[cm.phenomenon == "regular"][["tm", "gs"]].to_numpy()
    for ax, kind in zip(panels, ["idiom", "noisy"]):
        grey, mine = [c for c in ax.collections if isinstance(c, PathCollection)]
        np.testing.assert_allclose(grey.get_offsets(), regular)
        np.testing.assert_allclose(mine.get_offsets(),
                                   cm[cm.phenomenon == kind][["tm", "gs"]].to_numpy())
    fig = F.plot_phenomena(cm, order=["noisy"])
    (ax,) = [a for a in fig.axes if a.get_title()]
    mine = [c for c in ax.collections if isinstance(c, PathCollection)][1]
    np.testing.assert_allclose(mine.get_offsets(), cm.iloc[[3, 6]][["tm", "gs"]].to_numpy())


def test_reliability_points_are_the_means_with_sd_bars():
    curve = pd.DataFrame({"half_size": [3, 3, 2, 2, 5], "rho": [0.5, 0.7, 0.3, 0.4, 0.9],
                          "projected": [0.6, 0.8, 0.45, 0.55, 0.95]})
    ax = F.plot_reliability(curve).axes[0]
    assert _ticks(ax) == ["2", "3", "5"]                                 # numeric order
    sizes = [2, 3, 5]
    for label, col in (("split-half", "rho"), ("Spearman–Brown", "projected")):
        (pts,) = [ln for ln in ax.lines if ln.get_label().startswith(label)]
        g = curve.groupby("half_size")[col]
        np.testing.assert_allclose(pts.get_xdata(), [0, 1, 2])
        np.testing.assert_allclose(pts.get_ydata(), g.mean().loc[sizes])
        colour = pts.get_color()
        bars = [ln for ln in ax.lines if ln.get_marker() in ("None", None, "")
                and len(ln.get_xdata()) == 2 and ln.get_xdata()[0] == ln.get_xdata()[1]
                and _same_colour(ln.get_color(), colour)]
        got = {int(ln.get_xdata()[0]): tuple(sorted(ln.get_ydata())) for ln in bars
               if np.isfinite(ln.get_ydata()).all()}
        want = {k: (g.mean()[s] - g.std()[s], g.mean()[s] + g.std()[s])
                for k, s in enumerate(sizes) if g.count()[s] > 1}
        assert set(got) == set(want) == {0, 1}
        for k in want:
            assert got[k] == pytest.approx(want[k])


def test_predictors_bars_are_the_means_and_points_the_splits():
    sc = pd.DataFrame({"inputs": ["f", "f", "f+s", "f+s", "f", "f", "f"],
                       "estimator": ["mlp", "linear", "mlp", "linear", "mlp", "linear", "mlp"],
                       "target": ["cm"] * 6 + ["tm"],
                       "pearson_r": [0.3, 0.5, 0.4, 0.6, 0.1, 0.2, -0.9]})
    ax = F.plot_predictors(sc).axes[0]
    d = sc[sc.target == "cm"]
    assert _ticks(ax) == ["f", "f+s"]
    legend = dict(zip([t.get_text() for t in ax.get_legend().get_texts()],
                      ax.get_legend().legend_handles))
    assert set(legend) == {"mlp", "linear"}
    heights = {}
    for c in ax.containers:
        (name,) = [n for n, h in legend.items()
                   if _same_colour(c.patches[0].get_facecolor(), h.get_facecolor())]
        heights[name] = [(round(p.get_x() + p.get_width() / 2), p.get_height()) for p in c.patches]
    for est in ("mlp", "linear"):
        want = d[d.estimator == est].groupby("inputs")["pearson_r"].mean().loc[["f", "f+s"]]
        assert heights[est] == [(0, pytest.approx(want["f"])), (1, pytest.approx(want["f+s"]))]
    pts = np.vstack([c.get_offsets() for c in ax.collections if isinstance(c, PathCollection)
                     and len(c.get_offsets())])
    assert sorted(pts[:, 1]) == pytest.approx(sorted(d["pearson_r"]))  # each split, cm only
    for x, y in pts:
        row = d[np.isclose(d["pearson_r"], y)].iloc[0]
        assert abs(x - ["f", "f+s"].index(row["inputs"])) < 0.5


def test_feature_correlations_heatmap_is_the_table():
    corr = pd.DataFrame({"tm": [0.5, -0.2, 0.0], "gs": [0.1, 0.3, -0.9], "cm": [0.4, -0.6, 0.7]},
                        index=["src_length", "confidence", "overlap"])
    ax = F.plot_feature_correlations(corr).axes[0]
    assert _ticks(ax) == ["TM", "GS", "CM"]
    assert _ticks(ax, "y") == ["src_length", "confidence", "overlap"]
    np.testing.assert_allclose(np.ma.asarray(ax.collections[0].get_array()).reshape(3, 3),
                               corr.to_numpy())
    assert [t.get_text() for t in ax.texts] == [f"{v:.2f}" for v in corr.to_numpy().ravel()]


def test_assignment_points_sit_at_their_phenomenon_with_their_intervals():
    t = pd.DataFrame({"assignment": ["grouped", "grouped", "line", "line", "grouped"],
                      "phenomenon": ["duplicate", "regular", "regular", "duplicate", "idiom"],
                      "mean_cm": [0.5, 0.3, 0.2, 0.1, 0.7], "ci_low": [0.45, 0.2, 0.15, 0.0, 0.6],
                      "ci_high": [0.6, 0.35, 0.3, 0.3, 0.9]})
    ax = F.plot_assignment(t).axes[0]
    phen = ["duplicate", "regular", "idiom"]
    assert _ticks(ax) == phen
    for j, a in enumerate(["grouped", "line"]):
        (c,) = [c for c in ax.containers if c.get_label() == a]
        line, _, (bars,) = c.lines
        rows = t[t.assignment == a].set_index("phenomenon").reindex(phen)
        np.testing.assert_allclose(np.asarray(line.get_xdata(), float), np.arange(3) - 0.4 + 0.4 * (j + 0.5))
        np.testing.assert_allclose(np.asarray(line.get_ydata(), float), rows["mean_cm"])      # NaN: idiom, line
        segs = bars.get_segments()
        assert len(segs) == 3
        ok = rows["mean_cm"].notna().to_numpy()
        assert [len(s) > 0 for s in segs] == ok.tolist()          # no bar where no estimate
        spans = [(s[:, 1].min(), s[:, 1].max()) for s, o in zip(segs, ok) if o]
        np.testing.assert_allclose(spans, rows[["ci_low", "ci_high"]].to_numpy()[ok])
        np.testing.assert_allclose([s[0, 0] for s, o in zip(segs, ok) if o],
                                   (np.arange(3) - 0.4 + 0.4 * (j + 0.5))[ok])


def test_crosslingual_points_follow_their_pair_and_metric():
    rows = []
    for p, (a, b) in enumerate((("de", "nl"), ("de", "fr"), ("nl", "fr"))):
        for k, m in enumerate(("tm", "gs", "cm")):
            rho = 0.1 * p + 0.3 * k - 0.2
            rows.append(dict(lang_a=a, lang_b=b, metric=m, rho=rho, ci_low=rho - 0.05 * (p + 1),
                             ci_high=rho + 0.02 * (k + 1), n=50))
    corr = pd.DataFrame(rows)
    fig = F.plot_crosslingual(corr)
    for ax, m in zip(fig.axes, ["tm", "gs", "cm"]):
        d = corr[corr.metric == m]
        assert _ticks(ax) == ["DE–NL", "DE–FR", "NL–FR"]
        (c,) = ax.containers
        line, _, (bars,) = c.lines
        np.testing.assert_allclose(np.asarray(line.get_xdata(), float), [0, 1, 2])
        np.testing.assert_allclose(np.asarray(line.get_ydata(), float), d["rho"])
        spans = [(s[:, 1].min(), s[:, 1].max()) for s in bars.get_segments()]
        np.testing.assert_allclose(spans, d[["ci_low", "ci_high"]].to_numpy())
    seeds = pd.concat([corr.assign(seed=0), corr.assign(seed=1, rho=corr["rho"] + 0.05)])
    ax = F.plot_crosslingual(seeds).axes[0]
    np.testing.assert_allclose(np.asarray(ax.containers[0].lines[0].get_ydata(), float),
                               corr[corr.metric == "tm"]["rho"])          # the first seed
    grey = np.vstack([c.get_offsets() for c in ax.collections if isinstance(c, PathCollection)])
    assert sorted(grey[:, 1]) == pytest.approx(sorted(seeds[seeds.metric == "tm"]["rho"]))


def test_transfer_heatmap_cells_are_train_by_test():
    rows = [dict(estimator=e, train=a, test=b, target=t,
                 pearson_r=0.1 * (3 * i + j) + 0.05 * (e == "linear") - (t == "tm"),
                 mae=0.01 * (3 * i + j + 1))
            for e in ("mlp", "linear") for i, a in enumerate(("nl", "de", "fr"))
            for j, b in enumerate(("nl", "de", "fr")) for t in ("tm", "cm")]
    t = pd.DataFrame(rows)
    for value in ("pearson_r", "mae"):
        panels = _panels(F.plot_transfer(t, target="cm", value=value))
        for ax, e in zip(panels, ["mlp", "linear"]):
            assert ax.get_title() == e
            assert _ticks(ax) == ["NL", "DE", "FR"] and _ticks(ax, "y") == ["NL", "DE", "FR"]
            want = (t[(t.estimator == e) & (t.target == "cm")]
                    .pivot(index="train", columns="test", values=value)
                    .loc[["nl", "de", "fr"], ["nl", "de", "fr"]])
            np.testing.assert_allclose(np.ma.asarray(ax.collections[0].get_array()).reshape(3, 3),
                                       want.to_numpy())


def test_feature_feature_draws_the_lower_triangle_values():
    names = ["a", "b", "c"]
    rho = pd.DataFrame([[1.0, 0.9, -0.3], [0.9, 1.0, 0.6], [-0.3, 0.6, 1.0]], index=names,
                       columns=names)
    ax = F.plot_feature_feature(rho, mask_below=0.5).axes[0]
    assert _ticks(ax) == names and _ticks(ax, "y") == names
    arr = np.ma.asarray(ax.collections[0].get_array()).reshape(3, 3)
    shown = ~np.ma.getmaskarray(arr)
    assert shown.tolist() == [[False, False, False], [True, False, False], [False, True, False]]
    np.testing.assert_allclose(arr[shown], [0.9, 0.6])                    # (b, a), (c, b)


def test_feature_kde_curves_are_each_regions_density():
    from scipy.stats import gaussian_kde

    long = pd.DataFrame({"region": ["memorised"] * 6 + ["generalised"] * 5 + ["noise"] * 2,
                         "feature": ["len"] * 3 + ["overlap"] * 3 + ["len"] * 3
                         + ["overlap"] * 2 + ["len", "overlap"],
                         "value": [1.0, 2.0, 4.0, 0.1, 0.2, 0.25, 6.0, 7.0, 9.0, 0.8, 0.8,
                                   3.0, 0.5]})
    fig = F.plot_feature_kde(long, ["len", "overlap"])
    legend = dict(zip([t.get_text() for t in fig.legends[0].get_texts()],
                      fig.legends[0].legend_handles))
    assert list(legend) == ["memorised", "generalised", "noise"]
    for ax in (a for a in fig.axes if a.get_title()):
        f = ax.get_title()
        d = long[long.feature == f]
        curves = [ln for ln in ax.lines if len(ln.get_xdata()) > 2]
        drawn = set()
        for ln in curves:
            (region,) = [r for r, h in legend.items() if _same_colour(ln.get_color(), h.get_color())]
            v = d[d.region == region]["value"].to_numpy()
            x = np.asarray(ln.get_xdata(), float)
            np.testing.assert_allclose(ln.get_ydata(), gaussian_kde(v)(x), rtol=1e-6)
            drawn.add(region)
        want = {r for r, g in d.groupby("region") if g["value"].nunique() >= 2}
        assert drawn == want, f
        rugs = [c for c in ax.collections if isinstance(c, LineCollection)]
        rug_x = sorted(float(s[0, 0]) for c in rugs for s in c.get_segments())
        want_rug = sorted(v for r, g in d.groupby("region") if g["value"].nunique() < 2
                          for v in g["value"])
        assert rug_x == pytest.approx(want_rug), f
