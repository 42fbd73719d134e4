"""The chapter's figures draw what they say: the map's axes, diagonal and colour; one panel per
claim; bad tables are refused."""

import matplotlib

matplotlib.use("Agg")

import numpy as np
import pandas as pd
import pytest

from tokenbook.memorisation_cartography import figures as F


@pytest.fixture
def cm():
    rng = np.random.default_rng(0)
    tm = rng.uniform(0.2, 1, 120)
    gs = tm * rng.uniform(0.2, 1, 120)
    kinds = np.array(["regular"] * 100 + ["idiom"] * 10 + ["noisy_copy"] * 10)
    return pd.DataFrame({"tm": tm, "gs": gs, "cm": tm - gs, "phenomenon": kinds})


def test_map_axes_diagonal_and_colour(cm):
    ex = cm.head(2).assign(label=["a", "b"])
    fig = F.plot_map(cm, examples=ex)
    ax = fig.axes[0]
    assert ax.get_xlabel().startswith("TM") and ax.get_ylabel().startswith("GS")
    diag = [l for l in ax.get_lines() if list(l.get_xdata()) == [0, 1] == list(l.get_ydata())]
    assert diag, "the diagonal TM = GS is drawn"
    coll = ax.collections[0]
    assert np.allclose(coll.get_array(), cm["cm"].clip(lower=0))     # colour = CM clipped at 0
    assert np.allclose(coll.get_offsets()[:, 0], cm["tm"])            # x = TM
    assert len(ax.texts) == 2
    with pytest.raises(ValueError):
        F.plot_map(cm.drop(columns=["gs"]))


def test_phenomena_and_seed_panels(cm):
    fig = F.plot_phenomena(cm)
    titled = [a.get_title() for a in fig.axes if a.get_title()]
    assert titled == ["idiom (10)", "noisy_copy (10)"]
    table = pd.DataFrame({"claim_id": ["a"] * 4 + ["b"] * 4, "mechanism": ["on", "off"] * 4,
                          "seed": [0, 0, 1, 1] * 2, "value": np.arange(8.0)})
    fig = F.plot_seed_values(table, thresholds={"a": 0.5, "b": 0.0})
    panels = [a for a in fig.axes if a.get_visible()]
    assert [a.get_title() for a in panels] == ["a", "b"]
    assert [[ln.get_ydata()[0] for ln in a.get_lines() if ln.get_linestyle() == "--"]
            for a in panels] == [[0.5], [0.0]]  # each claim's threshold
    assert sorted(y for c in panels[1].collections for _, y in c.get_offsets()) == [4, 5, 6, 7]
    fig = F.plot_seed_values(table.assign(claim_id="removal-memorised-bleu"))
    assert fig.axes[0].get_ylabel().replace("\n", " ") == "Δ corpus BLEU (points)"  # units


def test_reliability_and_predictors():
    curve = pd.DataFrame({"half_size": [2, 2, 3, 3], "rho": [0.3, 0.4, 0.5, 0.6],
                          "projected": [0.6, 0.7, 0.7, 0.8]})
    fig = F.plot_reliability(curve)
    assert "Spearman" in fig.axes[0].get_ylabel()
    sc = pd.DataFrame({"inputs": ["f", "f", "f+s", "f+s"], "estimator": ["mlp", "linear"] * 2,
                       "target": "cm", "pearson_r": [0.3, 0.5, 0.4, 0.6]})
    fig = F.plot_predictors(sc)
    assert "Pearson r" in fig.axes[0].get_ylabel()


def test_feature_heatmap():
    corr = pd.DataFrame({"tm": [0.5, -0.2], "gs": [0.1, 0.3], "cm": [0.4, -0.6]},
                        index=["src_length", "confidence"])
    fig = F.plot_feature_correlations(corr)
    labels = [t.get_text() for t in fig.axes[0].get_xticklabels()]
    assert labels == ["TM", "GS", "CM"]
    with pytest.raises(ValueError, match="non-empty"):
        F.plot_feature_correlations(pd.DataFrame())


def test_assignment_points_and_intervals():
    t = pd.DataFrame({"assignment": ["grouped", "grouped", "line", "line"],
                      "phenomenon": ["duplicate", "regular"] * 2,
                      "mean_cm": [0.5, 0.3, 0.1, 0.3], "ci_low": [0.4, 0.25, 0.0, 0.25],
                      "ci_high": [0.6, 0.35, 0.2, 0.35]})
    fig = F.plot_assignment(t)
    ax = fig.axes[0]
    assert "CM" in ax.get_ylabel()
    assert [x.get_text() for x in ax.get_xticklabels()] == ["duplicate", "regular"]
    points = [line for line in ax.get_lines() if line.get_marker() == "o"]
    ys = sorted(float(y) for line in points for y in line.get_ydata())
    assert ys == sorted(t["mean_cm"])                                  # one point per row
    assert [x.get_text() for x in ax.get_legend().get_texts()] == ["grouped", "line"]
    with pytest.raises(ValueError):
        F.plot_assignment(t.drop(columns=["ci_low"]))


# --------------------------------------------------------------------------- §6.1, §6.2
REGION_METRICS = ("test_logprob", "bleu", "hallucination_rate")


@pytest.fixture
def grid_diff():
    """Grid size 3 (6 cells), three metrics, known diffs; every other cell's CI excludes 0."""
    from tokenbook.memorisation_cartography.regions import grid_centres

    cells = grid_centres(3)
    rows = []
    for k, m in enumerate(REGION_METRICS):
        for c, cell in enumerate(cells.itertuples(index=False)):
            diff = (c - 2.5) * 10 ** (k - 1)          # −/+ values, a different scale per metric
            excl = c % 2 == 0
            rows.append(dict(condition=cell.cell, metric=m, mean=diff, control_mean=0.0,
                             diff=diff, ci_low=diff - (0.1 if excl else 9),
                             ci_high=diff + (0.1 if excl else 9), n_seeds=3,
                             excludes_zero=excl, i=cell.i, j=cell.j, tm=cell.tm, gs=cell.gs))
    return pd.DataFrame(rows)


def _panels(fig):
    return [a for a in fig.axes if a.get_label() != "<colorbar>"]


def test_removal_grid_heatmaps(grid_diff):
    from tokenbook import plotting

    fig = F.plot_removal_grid(grid_diff)
    axes = _panels(fig)
    assert len(axes) == len(REGION_METRICS)                              # one panel per metric
    for ax, m in zip(axes, REGION_METRICS):
        d = grid_diff[grid_diff["metric"] == m]
        assert ax.get_xlabel().startswith("cell centre TM") and "GS" in ax.get_ylabel()
        assert [t.get_text() for t in ax.get_xticklabels()] == ["0.33", "0.67", "1.00"]
        want = {F._diff_text(r.diff, m, r.excludes_zero) for r in d.itertuples()}
        texts = [t.get_text() for t in ax.texts]
        assert len(texts) == 6 and set(texts) == want                    # the diffs, formatted
        assert sum(t.endswith("*") for t in texts) == int(d["excludes_zero"].sum()) == 3
        assert all(t.get_fontweight() == "bold" for t in ax.texts if t.get_text().endswith("*"))
        mesh = ax.collections[0]
        arr = np.ma.asarray(mesh.get_array()).reshape(3, 3)             # rows GS, columns TM
        jj, ii = np.meshgrid([1, 2, 3], [1, 2, 3], indexing="ij")
        assert (np.ma.getmaskarray(arr) == (jj > ii)).all()             # blank above the diagonal
        for r in d.itertuples():
            assert arr[r.j - 1, r.i - 1] == pytest.approx(r.diff)      # colour = diff of the cell
        assert mesh.norm.vmin == -mesh.norm.vmax == -np.abs(d["diff"]).max()  # centred on 0
        # GS grows upwards, as on the map: row 0 (GS = 1/3) at the bottom
        assert not ax.yaxis_inverted()
        assert [t.get_text() for t in ax.get_yticklabels()] == ["0.33", "0.67", "1.00"]
        assert list(ax.get_yticks()) == [0.5, 1.5, 2.5]
    titles = [a.get_title() for a in axes]
    assert titles[0] == "Δ test log-probability (nats/token) vs random removal"
    assert "Δ BLEU (points)" in titles[1] and "Δ hallucination rate (share)" in titles[2]
    assert fig.get_figwidth() <= plotting.BASE_WIDTH_IN
    assert plotting.rendered_font_pt(fig) >= plotting.MIN_FONT_PT
    assert F._diff_text(-0.123, "test_logprob", True) == "-0.12*"
    assert F._diff_text(1.26, "bleu", False) == "+1.3"


def test_removal_grid_refuses_bad_tables(grid_diff):
    one = F.plot_removal_grid(grid_diff, metrics=["bleu"])
    assert len(_panels(one)) == 1
    with pytest.raises(ValueError, match="bleu_regular"):
        F.plot_removal_grid(grid_diff, metrics=["bleu", "bleu_regular"])
    with pytest.raises(ValueError, match="hallucination_rate"):
        F.plot_removal_grid(grid_diff[grid_diff["metric"] != "hallucination_rate"])
    with pytest.raises(ValueError, match="missing column"):
        F.plot_removal_grid(grid_diff.drop(columns=["i"]))
    with pytest.raises(ValueError, match="one row per"):
        F.plot_removal_grid(pd.concat([grid_diff, grid_diff.head(1)]))


def test_specialised_point_ranges():
    from tokenbook import plotting

    spec = pd.DataFrame({"condition": ["bleu_hal", "log_probability"] * 3,
                         "metric": np.repeat(REGION_METRICS, 2),
                         "diff": [-0.2, 0.1, -3.0, 1.5, 0.05, -0.02],
                         "ci_low": [-0.3, -0.1, -4.0, 1.0, 0.01, -0.2],
                         "ci_high": [-0.1, 0.4, -1.0, 2.5, 0.2, 0.1]})
    fig = F.plot_specialised(spec)
    axes = fig.axes
    assert len(axes) == 3
    for ax, m in zip(axes, REGION_METRICS):
        d = spec[spec["metric"] == m].reset_index(drop=True)
        assert [t.get_text() for t in ax.get_yticklabels()] == list(d["condition"])
        pts = [line for line in ax.get_lines() if line.get_marker() == "o"]
        assert len(pts) == len(d)                                       # one point per corpus
        assert [float(p.get_xdata()[0]) for p in pts] == pytest.approx(list(d["diff"]))
        bars = [seg for c in ax.collections for seg in c.get_segments()]
        spans = sorted((float(s[:, 0].min()), float(s[:, 0].max())) for s in bars)
        want = sorted(zip(d["ci_low"], d["ci_high"]))
        assert np.allclose(spans, want)                                 # the 95% CIs
        zero = [line for line in ax.get_lines() if list(line.get_xdata()) == [0, 0]]
        assert zero, "the zero line is drawn"
    assert "nats/token" in axes[0].get_xlabel() and "points" in axes[1].get_xlabel()
    assert "share" in axes[2].get_xlabel()
    assert plotting.rendered_font_pt(fig) >= plotting.MIN_FONT_PT
    with pytest.raises(ValueError, match="bleu_greedy"):
        F.plot_specialised(spec, metrics=["bleu_greedy"])
    with pytest.raises(ValueError, match="missing column"):
        F.plot_specialised(spec.drop(columns=["ci_high"]))


# ------------------------------------------------------------------ cross-lingual (#14 item 1)
def _xcorr(seeds=(0,)):
    rows = []
    for s in seeds:
        for a, b in (("de", "nl"), ("de", "fr"), ("nl", "fr")):
            for k, m in enumerate(("tm", "gs", "cm")):
                rho = 0.2 * k + 0.1 + 0.01 * s
                rows.append(dict(seed=s, lang_a=a, lang_b=b, metric=m, rho=rho,
                                 ci_low=rho - 0.1, ci_high=rho + 0.1, n=100))
    return pd.DataFrame(rows)


def test_crosslingual_panels_points_and_intervals():
    corr = _xcorr().drop(columns="seed")
    fig = F.plot_crosslingual(corr)
    assert [a.get_title() for a in fig.axes] == ["TM", "GS", "CM"]
    assert "Spearman" in fig.axes[0].get_ylabel()
    assert [t.get_text() for t in fig.axes[0].get_xticklabels()] == ["DE–NL", "DE–FR", "NL–FR"]
    for ax, k in zip(fig.axes, range(3)):
        ys = [y for line in ax.get_lines() if line.get_marker() == "o" for y in line.get_ydata()]
        assert np.allclose(ys, [0.2 * k + 0.1] * 3)                # one point per language pair
    fig = F.plot_crosslingual(_xcorr(seeds=(0, 1, 2)))           # other seeds: grey dots behind
    assert len(fig.axes[0].collections) >= 1
    with pytest.raises(ValueError):
        F.plot_crosslingual(corr.drop(columns=["ci_low"]))


def test_transfer_heatmaps_show_the_values():
    rows = [dict(estimator=e, train=a, test=b, target=t, pearson_r=0.1 * i + (e == "linear"),
                 mae=0.05) for e in ("mlp", "linear") for i, (a, b) in enumerate(
                     [(a, b) for a in ("de", "nl") for b in ("de", "nl")])
            for t in ("tm", "cm")]
    t = pd.DataFrame(rows).assign(pearson_r=lambda d: d.pearson_r.clip(upper=0.99))
    fig = F.plot_transfer(t, target="cm")
    panels = _panels(fig)
    assert [a.get_title() for a in panels] == ["mlp", "linear"]
    ax = panels[0]
    assert ax.get_xlabel() == "test language" and ax.get_ylabel() == "train language"
    assert [x.get_text() for x in ax.texts] == ["0.00", "0.10", "0.20", "0.30"]
    assert [x.get_text() for x in ax.get_yticklabels()] == ["DE", "NL"]
    fig = F.plot_transfer(t, target="cm", value="mae")
    assert "absolute error" in fig.axes[-1].get_ylabel()
    with pytest.raises(ValueError, match="no rows for target"):
        F.plot_transfer(t, target="gs")


def test_feature_feature_lower_triangle_and_mask():
    names = ["a", "b", "c", "d"]
    rho = pd.DataFrame(np.eye(4), index=names, columns=names)
    rho.loc["b", "a"] = rho.loc["a", "b"] = 0.9
    rho.loc["d", "c"] = rho.loc["c", "d"] = -0.2
    from tokenbook.plotting import MIN_FONT_PT, rendered_font_pt

    fig = F.plot_feature_feature(rho)
    assert sorted(t.get_text() for t in fig.axes[0].texts) == [  # 4·3/2 cells below
        "-.2", ".0", ".0", ".0", ".0", ".9"]
    fig = F.plot_feature_feature(rho, mask_below=0.5)
    assert [t.get_text() for t in fig.axes[0].texts] == [".9"]     # abs(ρ) < 0.5 blanked
    big = pd.DataFrame(np.eye(16), index=[f"feature {i}" for i in range(16)],
                       columns=[f"feature {i}" for i in range(16)])
    assert rendered_font_pt(F.plot_feature_feature(big)) >= MIN_FONT_PT  # numbers readable
    with pytest.raises(ValueError, match="square"):
        F.plot_feature_feature(rho.iloc[:, :2])


def test_feature_kde_one_panel_per_feature_one_curve_per_region():
    rng = np.random.default_rng(0)
    long = pd.DataFrame({"region": np.repeat(["memorised", "generalised"], 60),
                         "feature": np.tile(np.repeat(["src_length", "overlap"], 30), 2),
                         "value": rng.normal(size=120)})
    long.loc[(long.region == "generalised") & (long.feature == "overlap"), "value"] = 0.0
    fig = F.plot_feature_kde(long, ["overlap", "src_length"])
    titled = [a for a in fig.axes if a.get_title()]
    assert [a.get_title() for a in titled] == ["overlap", "src_length"]
    assert len(titled[1].get_lines()) == 2                        # a KDE per region
    assert len(titled[0].get_lines()) == 1                        # constant region: rug only
    assert "density" in titled[0].get_ylabel()
    with pytest.raises(ValueError, match="no rows for feature"):
        F.plot_feature_kde(long, ["trg_length"])
