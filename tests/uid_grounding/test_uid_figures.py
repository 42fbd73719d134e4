"""The UID chapter's figures draw their input data (issue #32): on small hand-made tables each
plot_* of :mod:`tokenbook.uid_grounding.figures` is read back (scatter offsets, bar heights,
box medians, line data and bands, density curves, heatmap arrays, tick labels) and compared
with values computed here, so a figure that plotted the wrong column, dropped a group or
mis-ordered the categories fails."""

import matplotlib

matplotlib.use("Agg")

import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import pytest  # noqa: E402
from matplotlib.collections import PathCollection  # noqa: E402
from matplotlib.colors import to_rgba  # noqa: E402

from tokenbook.plotting import CONDITION_COLOURS  # noqa: E402
from tokenbook.uid_grounding import figures as fg  # noqa: E402
from tokenbook.uid_grounding.measures import reduction_density  # noqa: E402


def _ticks(ax, axis="x"):
    return [t.get_text() for t in (ax.get_xticklabels() if axis == "x" else ax.get_yticklabels())]


def _same_colour(a, b):
    return np.allclose(to_rgba(a)[:3], to_rgba(b)[:3], atol=1e-3)


def _legend_colours(ax):
    """``{label: face colour}`` of the axis' legend (seaborn desaturates bar and box colours,
    legend and artists alike)."""
    leg = ax.get_legend()
    return {t.get_text(): h.get_facecolor() for t, h in zip(leg.get_texts(), leg.legend_handles)}


def _bars_by_colour(ax, conds):
    """``{condition: [(x centre, height), ...]}`` of the bars, matched by the legend's colours."""
    colours = _legend_colours(ax)
    assert list(colours) == list(conds)
    out = {c: [] for c in conds}
    for p in ax.patches:
        if not hasattr(p, "get_height") or p.get_width() == 0:
            continue
        (c,) = [c for c in conds if _same_colour(p.get_facecolor(), colours[c])]
        out[c].append((p.get_x() + p.get_width() / 2, p.get_height()))
    return {c: sorted(v) for c, v in out.items()}


def test_language_scatter_points_are_u_against_p_per_metric():
    cmp_ = pd.DataFrame({"metric": ["uid_v", "uid_v", "uid_lv", "uid_lv", "uid_lv"],
                         "lang": ["en", "de", "en", "de", "fr"],
                         "mean_U": [2.0, 3.0, 1.0, 1.5, 2.5], "mean_P": [1.5, 3.5, 0.8, 1.2, 2.6],
                         "mean_D": 9.0, "q": [0.01, 0.2, 0.01, 0.04, 0.5]})
    fig = fg.plot_language_scatter(cmp_)
    for ax, m in zip(fig.axes, ["uid_v", "uid_lv"]):
        d = cmp_[cmp_.metric == m]
        pts = np.vstack([c.get_offsets() for c in ax.collections if isinstance(c, PathCollection)
                         and len(c.get_offsets())])
        want = d[["mean_U", "mean_P"]].to_numpy()                    # x = U, y = P
        assert sorted(map(tuple, pts)) == sorted(map(tuple, want))
        assert {t.get_text(): t.xy for t in ax.texts} == {
            lang: (u, p) for lang, u, p in zip(d["lang"], d["mean_U"], d["mean_P"])}
        (diag,) = [ln for ln in ax.lines if ln.get_linestyle() == "--"]
        assert list(diag.get_xdata()) == list(diag.get_ydata())     # y = x over the data
        lo, hi = np.r_[d.mean_U, d.mean_P].min(), np.r_[d.mean_U, d.mean_P].max()
        assert diag.get_xdata()[0] < lo and diag.get_xdata()[1] > hi


def test_measure_densities_are_each_conditions_kde():
    from scipy.stats import gaussian_kde

    rng = np.random.default_rng(1)
    m = pd.DataFrame({"condition": ["U"] * 30 + ["P"] * 20 + ["D"] * 10,
                      "uid_v": np.r_[rng.gamma(2, 1, 30), rng.gamma(4, 1, 20), rng.gamma(1, 1, 10)],
                      "uid_lv": np.r_[rng.uniform(0, 1, 30), rng.uniform(1, 3, 20),
                                      rng.uniform(0, 9, 10)]})
    fig = fg.plot_measure_densities(m, clip=0.9)
    for ax, col in zip(fig.axes, ["uid_v", "uid_lv"]):
        top = m[col].quantile(0.9)                      # clipped over all conditions
        legend = [t.get_text() for t in ax.get_legend().get_texts()]
        kept = {c: m[(m.condition == c) & (m[col] <= top)][col].to_numpy() for c in ("U", "P")}
        assert legend == [f"{c} (n={len(kept[c])})" for c in ("U", "P")]   # D not asked for
        curves = [ln for ln in ax.lines if len(ln.get_xdata()) > 2]
        assert len(curves) == 2
        for ln in curves:
            (c,) = [c for c in ("U", "P") if _same_colour(ln.get_color(), CONDITION_COLOURS[c])]
            x = np.asarray(ln.get_xdata(), float)
            assert x.min() == pytest.approx(kept[c].min()) and x.max() == pytest.approx(kept[c].max())
            np.testing.assert_allclose(ln.get_ydata(), gaussian_kde(kept[c])(x), rtol=1e-6)


def test_pos_decomposition_heatmap_is_language_by_upos():
    dec = pd.DataFrame({"lang": ["fr", "en", "en", "fr", "de"],
                        "upos": ["NOUN", "ADJ", "NOUN", "VERB", "ADJ"],
                        "mean_dC": [0.5, -1.0, 2.0, 0.25, 0.1], "n": 9})
    ax = fg.plot_pos_decomposition(dec).axes[0]
    langs, upos = ["de", "en", "fr"], ["ADJ", "NOUN", "VERB"]        # sorted rows and columns
    assert _ticks(ax, "y") == langs and _ticks(ax) == upos
    want = dec.pivot(index="lang", columns="upos", values="mean_dC").loc[langs, upos]
    arr = np.ma.asarray(ax.collections[0].get_array()).reshape(3, 3)
    assert (np.ma.getmaskarray(arr) == want.isna().to_numpy()).all()  # too few words: grey
    np.testing.assert_allclose(arr.filled(np.nan), want.to_numpy())
    assert ax.collections[0].norm.vmax == -ax.collections[0].norm.vmin == 2.0


def _story_measures():
    rows = []
    vals = {("b", "U"): [4.0, 6.0], ("b", "P"): [2.0, 3.0, 7.0], ("a", "U"): [1.0, 3.0],
            ("a", "P"): [5.0, 5.5], ("a", "D"): [0.5, 1.5], ("b", "D"): [8.0, 9.0, 10.0]}
    for (lang, cond), vs in vals.items():
        for k, v in enumerate(vs):
            rows.append(dict(lang=lang, condition=cond, story_id=f"s{k}", uid_v=v,
                             cv_global=-v / 10, mean=99.0))
    return pd.DataFrame(rows), vals


def test_story_conditions_bars_are_each_language_and_conditions_mean():
    m, vals = _story_measures()
    fig = fg.plot_story_conditions(m)
    conds = ["U", "P", "D"]                                          # the conditions' order
    for ax, col, scale in zip(fig.axes, ["uid_v", "cv_global"], [1.0, -0.1]):
        assert _ticks(ax) == ["a", "b"]
        bars = _bars_by_colour(ax, conds)
        width = 0.8 / 3
        for j, c in enumerate(conds):
            want = [(k - 0.4 + width * (j + 0.5), scale * np.mean(vals[(lang, c)]))
                    for k, lang in enumerate(["a", "b"])]
            assert len(bars[c]) == 2
            for (x, h), (wx, wh) in zip(bars[c], want):
                assert x == pytest.approx(wx) and h == pytest.approx(wh), (col, c)
        assert [t.get_text() for t in ax.get_legend().get_texts()] == conds


def test_story_boxplots_medians_and_pooled_means():
    m, vals = _story_measures()
    ax = fg.plot_story_boxplots(m, conditions=("U", "P", "D", "PD")).axes[0]
    conds = ["U", "P", "D"]
    assert _ticks(ax) == ["a", "b"]
    colours = _legend_colours(ax)
    assert list(colours) == conds                                    # PD has no rows
    boxes = [c for c in ax.containers if hasattr(c, "medians")]
    assert len(boxes) == 3
    for box in boxes:
        (c,) = [c for c in conds if _same_colour(box.boxes[0].get_facecolor(), colours[c])]
        for k, (med, lang) in enumerate(zip(box.medians, ["a", "b"])):
            assert med.get_ydata()[0] == pytest.approx(np.median(vals[(lang, c)]))
            assert abs(np.mean(med.get_xdata()) - k) < 0.4
    dashed = {}
    for ln in ax.lines:
        if ln.get_linestyle() == "--" and len(ln.get_ydata()) == 2:
            (c,) = [c for c in conds if _same_colour(ln.get_color(), CONDITION_COLOURS[c])]
            dashed[c] = ln.get_ydata()[0]
    assert dashed == pytest.approx({c: m[m.condition == c].uid_v.mean() for c in conds})


def test_position_profile_lines_and_bands():
    prof = pd.DataFrame({"condition": ["P", "P", "P", "U", "U", "U"],
                         "sent_idx": [2, 0, 1, 0, 1, 2],
                         "mean": [3.0, 1.0, 2.0, 5.0, 4.0, 6.0],
                         "low": [2.5, 0.5, 1.0, 4.0, 3.5, 5.0],
                         "high": [3.5, 1.5, 2.5, 6.0, 4.5, 6.5]})
    ax = fg.plot_position_profile(prof).axes[0]
    for c in ("U", "P"):
        p = prof[prof.condition == c].sort_values("sent_idx")
        (ln,) = [ln for ln in ax.lines if len(ln.get_xdata()) == 3
                 and _same_colour(ln.get_color(), CONDITION_COLOURS[c])]
        np.testing.assert_allclose(ln.get_xdata(), p["sent_idx"])
        np.testing.assert_allclose(ln.get_ydata(), p["mean"])
        (band,) = [b for b in ax.collections if _same_colour(b.get_facecolor()[0],
                                                             CONDITION_COLOURS[c])]
        v = band.get_paths()[0].vertices
        for x, lo, hi in zip(p["sent_idx"], p["low"], p["high"]):
            ys = v[np.isclose(v[:, 0], x), 1]
            assert ys.min() == pytest.approx(lo) and ys.max() == pytest.approx(hi)


def test_boundary_jumps_bars_per_level_window_and_condition():
    s = pd.DataFrame({"level": ["sentence"] * 4 + ["paragraph"] * 4,
                      "condition": ["U", "P", "U", "P"] * 2, "w": [1, 1, 3, 3] * 2,
                      "delta": [-1.0, -0.5, -0.8, -0.2, -2.0, 1.0, 0.5, -1.5], "n_pairs": 5})
    fig = fg.plot_boundary_jumps(s)
    assert [ax.get_title() for ax in fig.axes] == ["sentence boundaries",
                                                   "paragraph boundaries"]
    for ax, level in zip(fig.axes, ["sentence", "paragraph"]):
        assert _ticks(ax) == ["1", "3"]
        bars = _bars_by_colour(ax, ["U", "P"])
        for c in ("U", "P"):
            want = s[(s.level == level) & (s.condition == c)].sort_values("w")["delta"]
            assert [h for _, h in bars[c]] == pytest.approx(list(want))
            assert [round(x) for x, _ in bars[c]] == [0, 1]


def test_reduction_densities_draw_each_reduction_of_each_group():
    rng = np.random.default_rng(2)
    n = 40
    red = pd.DataFrame({"lang": np.repeat(["b", "a"], n // 2), "pos": rng.uniform(0, 1, n),
                        "delta_P": rng.exponential(1, n), "delta_D": 0.0,
                        "delta_DP": rng.exponential(2, n)})
    red.loc[red.lang == "a", "delta_D"] = rng.exponential(1, n // 2)   # b: no D reduction
    fig = fg.plot_reduction_densities(red, by="lang")
    axes = fig.axes
    assert ["(a)" in ax.get_ylabel() for ax in axes] == [True, False]    # rows sorted by group
    colour = {"P": CONDITION_COLOURS["P"], "D": CONDITION_COLOURS["D"],
              "DP": CONDITION_COLOURS["PD"]}
    for ax, lang in zip(axes, ["a", "b"]):
        g = red[red.lang == lang]
        drawn = set()
        for ln in ax.lines:
            if ln.get_linestyle() == ":":
                x, d = reduction_density(g["pos"], np.ones(len(g)))      # word positions
            else:
                (name,) = [k for k, c in colour.items() if _same_colour(ln.get_color(), c)]
                x, d = reduction_density(g["pos"], g[f"delta_{name}"])
                drawn.add(name)
            np.testing.assert_allclose(ln.get_xdata(), x)
            np.testing.assert_allclose(ln.get_ydata(), d)
        assert drawn == ({"P", "D", "DP"} if lang == "a" else {"P", "DP"})
        assert sum(ln.get_linestyle() == ":" for ln in ax.lines) == 1


def test_seed_statistics_put_each_seeds_value_on_its_mechanism():
    t = pd.DataFrame({"seed": [0, 1, 2, 0, 1, 2], "mechanism": ["off", "on", "on", "on", "off",
                                                                  "off"],
                      "claim_id": "c", "value": [1.0, 2.0, 3.0, 4.0, 5.0, 6.0]})
    ax = [a for a in fg.plot_seed_statistics(t).axes if a.get_visible()][0]
    assert _ticks(ax) == ["on", "off"]
    pts = np.vstack([c.get_offsets() for c in ax.collections if isinstance(c, PathCollection)
                     and len(c.get_offsets())])
    got = {m: sorted(pts[np.abs(pts[:, 0] - k) < 0.5, 1]) for k, m in enumerate(["on", "off"])}
    assert got == {"on": [2.0, 3.0, 4.0], "off": [1.0, 5.0, 6.0]}
