"""The cancellation chapter's figures draw their input data (issue #32): on small hand-made
tables, every plot_* is read back (scatter offsets, line data, error-bar extents, step
heights, tick labels) and compared with values computed here independently, so a figure that
plotted the wrong column, dropped or mixed up a group, or mis-ordered the categories fails."""

import matplotlib
import numpy as np
import pandas as pd
import pytest
from matplotlib.colors import to_rgba

matplotlib.use("Agg")

from tokenbook.cancellation_hypothesis import figures as figs  # noqa: E402
from tokenbook.cancellation_hypothesis.gradients import GradientDump  # noqa: E402


def _ticks(ax, axis="x"):
    labels = ax.get_xticklabels() if axis == "x" else ax.get_yticklabels()
    return [t.get_text() for t in labels]


def _errorbars(ax):
    """``{label: (x, y, [(x0, x1) per point], [(y0, y1) per point])}`` of the axis' errorbars."""
    out = {}
    for c in ax.containers:
        line, _, bars = c.lines
        x, y = np.asarray(line.get_xdata(), float), np.asarray(line.get_ydata(), float)
        xs = ys = None
        for b in bars:
            seg = b.get_segments()
            span = [(float(s[:, 0].min()), float(s[:, 0].max()), float(s[:, 1].min()),
                     float(s[:, 1].max())) for s in seg]
            if c.has_xerr and all(abs(s[2] - s[3]) < 1e-12 for s in span):
                xs = [(s[0], s[1]) for s in span]
            if c.has_yerr and all(abs(s[0] - s[1]) < 1e-12 for s in span):
                ys = [(s[2], s[3]) for s in span]
        out[c.get_label()] = (x, y, xs, ys)
    return out


def _points(ax):
    """The offsets of every scatter/strip collection of ``ax`` (not error-bar lines)."""
    from matplotlib.collections import PathCollection

    pts = [c.get_offsets() for c in ax.collections
           if isinstance(c, PathCollection) and len(c.get_offsets())]
    return np.vstack(pts) if pts else np.empty((0, 2))


def _same_colour(a, b):
    return np.allclose(to_rgba(a)[:3], to_rgba(b)[:3], atol=1e-3)


def test_delta_by_sign_draws_each_rollouts_histogram_on_shared_bins():
    delta = np.array([0.55, 0.6, 0.62, 0.9, 0.1, -0.4, -0.8, -0.79])
    reward = np.array([1, 1, 1, 1, 1, 0, 0, 0], float)
    table = pd.DataFrame({"reward": reward, "delta": delta, "other": -delta})
    ax = figs.plot_delta_by_sign(table).axes[0]
    edges = np.histogram_bin_edges(delta, 40)  # bins=40, common to both rollouts
    centres = (edges[:-1] + edges[1:]) / 2
    legend = dict(zip([t.get_text() for t in ax.get_legend().get_texts()],
                      ax.get_legend().legend_handles))
    assert set(legend) == {"correct", "failed"}
    polys = ax.collections
    assert len(polys) == 2
    for name, sel in (("correct", reward > 0), ("failed", reward <= 0)):
        counts, _ = np.histogram(delta[sel], edges)
        mine = [p for p in polys if _same_colour(p.get_facecolor()[0], legend[name].get_facecolor())]
        assert len(mine) == 1, name
        path = mine[0].get_paths()[0]
        for xc, h in zip(centres, counts):   # the step outline has height = count in each bin
            if h:
                assert path.contains_point((xc, h - 0.5)), (name, xc, h)
            assert not path.contains_point((xc, h + 0.5)), (name, xc, h)


def _first_order_points(ax, fo):
    pts = ax.collections[0].get_offsets()
    np.testing.assert_allclose(pts, fo[["predicted", "actual"]].to_numpy())  # x pred, y actual
    lim = np.abs(fo[["predicted", "actual"]].to_numpy()).max()
    diag = [ln for ln in ax.lines if ln.get_linestyle() == "--"]
    assert len(diag) == 1
    np.testing.assert_allclose(diag[0].get_xdata(), [-lim, lim])
    np.testing.assert_allclose(diag[0].get_ydata(), [-lim, lim])


def test_coupling_and_first_order_draw_the_points_and_bucket_means():
    fo = pd.DataFrame({"predicted": [0.1, -0.2, 0.3, 0.05], "actual": [0.2, -0.1, -0.7, 0.0]})
    coup = pd.DataFrame({"bucket": ["same", "diff", "same", "diff", "other"],
                         "K": [1.0, 2.0, 3.0, 6.0, -1.0]})
    fig = figs.plot_coupling(fo, coup)
    _first_order_points(fig.axes[0], fo)
    ax = fig.axes[1]
    assert _ticks(ax, "y") == ["same", "diff", "other"]          # buckets in table order
    means = [ln for ln in ax.lines if ln.get_marker() == "o"][0]
    np.testing.assert_allclose(means.get_xdata(), [2.0, 4.0, -1.0])  # mean K per bucket (x)
    np.testing.assert_allclose(means.get_ydata(), [0, 1, 2])
    # a bucket of two values: the bootstrap means are min, mid or max, so the 95% CI is [min, max]
    cis = {float(ln.get_ydata()[0]): sorted(ln.get_xdata()) for ln in ax.lines
           if ln.get_marker() in ("None", "", None) and len(ln.get_xdata()) == 2
           and ln.get_ydata()[0] == ln.get_ydata()[1] and np.isfinite(ln.get_xdata()).all()
           and ln.get_xdata()[0] != ln.get_xdata()[1]}
    assert cis == {0.0: [1.0, 3.0], 1.0: [2.0, 6.0]}                # one value ("other"): none
    _first_order_points(figs.plot_first_order(fo).axes[0], fo)


def test_dual_update_points_and_their_rollout_colours():
    dual = pd.DataFrame({"delta_head": [0.1, -0.3, 0.7, 0.2], "delta_full": [1.0, 2.0, -3.0, 0.5],
                         "reward": [1, 0, 0, 2], "other": 9.0})
    ax = figs.plot_dual_update(dual).axes[0]
    coll = ax.collections[0]
    np.testing.assert_allclose(coll.get_offsets(), dual[["delta_head", "delta_full"]].to_numpy())
    handle = {ln.get_label(): ln.get_color() for ln in ax.lines if ln.get_marker() == "o"}
    want = [handle["correct" if r > 0 else "incorrect"] for r in dual["reward"]]
    assert not _same_colour(handle["correct"], handle["incorrect"])
    for face, colour in zip(coll.get_facecolors(), want):
        assert _same_colour(face, colour)


def test_coupling_buckets_draw_means_intervals_and_the_shaded_bucket():
    cis = pd.DataFrame({
        "bucket": ["same", "same", "same", "diff-low", "diff-low", "diff-low"],
        "statistic": ["K", "abs_K", "anti"] * 2,
        "mean": [5.0, 6.0, 0.2, -2.0, 3.0, 0.7],
        "lo": [4.0, 5.5, 0.1, -3.0, np.nan, 0.6],
        "hi": [7.0, 6.5, 0.3, -1.0, 4.0, 0.9],
        "anti_coupling": [False, False, False, True, True, True]})
    fig = figs.plot_coupling_buckets(cis)
    left, right = fig.axes
    assert _ticks(left, "y") == ["same", "diff-low"]
    assert left.yaxis_inverted()
    bars = _errorbars(left)
    assert set(bars) == {"signed", "absolute"}
    x, y, xs, _ = bars["signed"]
    np.testing.assert_allclose(x, [5.0, -2.0])
    np.testing.assert_allclose(y, [0 - 0.15, 1 - 0.15])
    np.testing.assert_allclose(xs, [(4.0, 7.0), (-3.0, -1.0)])
    x, y, xs, _ = bars["absolute"]
    np.testing.assert_allclose(x, [6.0, 3.0])
    np.testing.assert_allclose(y, [0.15, 1.15])
    np.testing.assert_allclose(xs, [(5.5, 6.5), (3.0, 4.0)])          # missing lo: no lower bar
    x, y, xs, _ = _errorbars(right)["K < 0"]
    np.testing.assert_allclose(x, [0.2, 0.7])
    np.testing.assert_allclose(y, [0, 1])
    np.testing.assert_allclose(xs, [(0.1, 0.3), (0.6, 0.9)])
    for ax in (left, right):       # the anti-coupling bucket (row 1) shaded, only it
        spans = [(p.get_y(), p.get_y() + p.get_height()) for p in ax.patches
                 if hasattr(p, "get_y")]
        assert np.allclose(spans, [(0.55, 1.45)])


def test_gradient_cancellation_draws_units_means_and_prompts():
    units = pd.DataFrame({"params": ["authors' set"] * 5 + ["output layer"],
                          "class": ["template", "reasoning", "template", "answer", "reasoning",
                                    "template"],
                          "cos": [-0.9, -0.2, -0.7, 0.3, -0.4, 0.99],
                          "prompt_id": [0, 0, 1, 1, 2, 2]})
    prompts = pd.DataFrame({"params": ["authors' set", "output layer", "authors' set",
                                       "output layer", "authors' set"],
                            "tokens": ["shared", "shared", "group-specific", "group-specific",
                                       "shared"],
                            "cancelled": [0.5, 0.4, -0.1, 0.05, 0.9],
                            "norm_pos": [1.0, 1.0, 1.0, 1.0, 0.0], "norm_neg": 1.0})
    summary = pd.DataFrame({"tokens": "shared", "level": ["per token"] * 3 + ["per prompt"],
                            "class": ["template", "reasoning", "answer", "template"],
                            "cos": [-0.8, -0.3, 0.3, 0.0], "cos_lo": [-0.95, -0.4, np.nan, -1],
                            "cos_hi": [-0.7, -0.1, np.nan, 1]})
    fig = figs.plot_gradient_cancellation(GradientDump(units, prompts, prompts, "prompt_token"),
                                          summary)
    left, right = fig.axes[:2]
    classes = ["answer", "reasoning", "template"]                     # sorted
    assert _ticks(left, "y") == classes
    mine = units[units["params"] == "authors' set"]
    pts = _points(left)
    assert sorted(pts[:, 0]) == pytest.approx(sorted(mine["cos"]))   # the set's tokens only
    for x, y in pts:                                                 # each at its class row
        cls = mine.loc[np.isclose(mine["cos"], x), "class"].iloc[0]
        assert abs(y - classes.index(cls)) <= 0.3
    x, y, xs, _ = _errorbars(left)["mean (95% CI)"]
    np.testing.assert_allclose(x, [0.3, -0.3, -0.8])                 # per-token means, by class
    np.testing.assert_allclose(y, [0, 1, 2])
    np.testing.assert_allclose(xs, [(0.3, 0.3), (-0.4, -0.1), (-0.95, -0.7)])
    assert _ticks(right, "y") == ["shared", "group-specific"]
    kept = prompts[(prompts["norm_pos"] > 0) & (prompts["norm_neg"] > 0)]
    pts = _points(right)
    assert sorted(pts[:, 0]) == pytest.approx(sorted(kept["cancelled"]))  # zero-norm prompt out
    row = {"shared": 0, "group-specific": 1}
    for x, y in pts:
        tokens = kept.loc[np.isclose(kept["cancelled"], x), "tokens"].iloc[0]
        assert abs(y - row[tokens]) < 0.5


def test_probe_draws_bucket_means_per_advantage_sign():
    rows = []
    rng = np.random.default_rng(0)
    for same in (True, False):
        for high in (True, False):
            for adv in ("positive", "negative"):
                for _ in range(3):
                    rows.append(dict(same_token=same, high_entropy=high, peer_adv=adv,
                                     tau=float(rng.uniform(0.01, 2.0))
                                     * (1 if adv == "positive" else -1)))
    probe = pd.DataFrame(rows)
    fig = figs.plot_probe(probe, n_boot=200)
    ax = fig.axes[0]
    order = [f"{a}, {b}" for a in ("same token", "different token")
             for b in ("high entropy", "low entropy")]
    assert _ticks(ax, "y") == order
    bars = _errorbars(ax)
    assert set(bars) == {"positive advantage, random sets", "negative advantage, random sets"}
    probe = probe.assign(bucket=np.where(probe["same_token"], "same token", "different token")
                         + ", " + np.where(probe["high_entropy"], "high entropy", "low entropy"))
    for k, adv in enumerate(("positive", "negative")):
        x, y, xs, _ = bars[f"{adv} advantage, random sets"]
        sub = probe[probe["peer_adv"] == adv]
        pos = np.round(y + (-0.5 + k) * -0.16).astype(int)             # undo the dodge
        assert np.allclose(y - pos, (k - 0.5) * 0.16)
        want = sub.groupby("bucket")["tau"]
        for xi, p, (lo, hi) in zip(x, pos, xs):
            taus = want.get_group(order[p])
            assert xi == pytest.approx(taus.mean())                       # the bucket's mean τ
            assert taus.min() - 1e-9 <= lo <= xi <= hi <= taus.max() + 1e-9
        assert sorted(pos) == [0, 1, 2, 3]                                # every bucket


def test_learning_curves_draw_the_seed_mean_per_step_and_condition():
    curves = pd.DataFrame({"condition": ["grpo"] * 6 + ["psr"] * 6,
                           "seed": [0, 0, 0, 1, 1, 1] * 2,
                           "step": [0, 5, 10] * 4,
                           "accuracy": [0.1, 0.3, 0.5, 0.3, 0.5, 0.9,
                                        0.0, 0.1, 0.2, 0.2, 0.1, 0.4]})
    ax = figs.plot_learning_curves(curves).axes[0]
    legend = [t.get_text() for t in ax.get_legend().get_texts()]
    assert legend == ["grpo", "psr"]
    data = [ln for ln in ax.lines if len(ln.get_xdata()) == 3]
    assert len(data) == 2
    for ln, cond in zip(data, ["grpo", "psr"]):
        want = curves[curves.condition == cond].groupby("step")["accuracy"]
        np.testing.assert_allclose(ln.get_xdata(), [0, 5, 10])
        np.testing.assert_allclose(ln.get_ydata(), want.mean().to_numpy())
    for band, cond in zip(ax.collections, ["grpo", "psr"]):          # the seed bands
        want = curves[curves.condition == cond].groupby("step")["accuracy"]
        v = band.get_paths()[0].vertices
        for step, lo, hi in zip([0, 5, 10], want.min(), want.max()):
            ys = v[np.isclose(v[:, 0], step), 1]
            assert ys.min() == pytest.approx(lo) and ys.max() == pytest.approx(hi)


def test_seed_values_put_each_value_on_its_mechanism():
    t = pd.DataFrame({"seed": [0, 1, 0, 1], "mechanism": ["on", "on", "off", "off"],
                      "claim_id": "flip-both-signs", "value": [1.0, 2.0, 0.0, 0.1]})
    ax = figs.plot_seed_values(t).axes[0]
    assert _ticks(ax) == ["on", "off"]
    pts = _points(ax)
    got = {m: sorted(pts[np.abs(pts[:, 0] - k) < 0.5, 1]) for k, m in enumerate(["on", "off"])}
    assert got == {"on": [1.0, 2.0], "off": [0.0, 0.1]}


def test_scale_sweep_points_and_means_per_size_and_mechanism():
    rows = [dict(size=lab, hidden_size=h, num_layers=2, model_id=None, n_params=n, seed=s,
                 mechanism=m, claim_id=c, value=v0 + 0.1 * s + (m == "on") + (c == "flip-excess"))
            for lab, h, n, v0 in (("64×2", 64, 139_000, 10.0), ("32×2", 32, 37_000, 20.0))
            for s in range(3) for m in ("on", "off") for c in ("flip-both-signs", "flip-excess")]
    table = pd.DataFrame(rows)
    fig = figs.plot_scale_sweep(table)
    order = ["32×2", "64×2"]                                         # by parameter count
    for ax, cid in zip(fig.axes, ["flip-both-signs", "flip-excess"]):
        assert ax.get_title() == cid
        sub = table[table.claim_id == cid]
        pts = _points(ax)
        assert len(pts) == len(sub)
        for k, size in enumerate(order):
            for side, mech in ((-1, "on"), (1, "off")):              # dodged: on left, off right
                sel = (np.abs(pts[:, 0] - k) < 0.5) & (np.sign(pts[:, 0] - k) == side)
                want = sub[(sub["size"] == size) & (sub.mechanism == mech)]["value"]
                assert sorted(pts[sel, 1]) == pytest.approx(sorted(want)), (cid, size, mech)
        means = [ln for ln in ax.lines if ln.get_marker() == "_"]
        got = sorted((round(float(x), 6), float(y)) for ln in means
                     for x, y in zip(ln.get_xdata(), ln.get_ydata()))
        want = []
        for k, size in enumerate(order):
            for side, mech in ((-1, "on"), (1, "off")):
                v = sub[(sub["size"] == size) & (sub.mechanism == mech)]["value"].mean()
                want.append((k, side, v))
        assert len(got) == 4
        for (x, y), (k, side, v) in zip(got, sorted(want, key=lambda w: (w[0], w[1]))):
            assert np.sign(x - k) == side and abs(x - k) < 0.5 and y == pytest.approx(v)
