"""The chapter's figures draw what they say: the map's axes, diagonal and colour; one panel per
claim; bad tables are refused."""

import matplotlib

matplotlib.use("Agg")

import numpy as np
import pandas as pd
import pytest

from tokenbook.figures import memorisation_cartography as F


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
    fig = F.plot_seed_values(table, thresholds={"a": 0.5})
    assert [a.get_title() for a in fig.axes if a.get_title()] == ["a", "b"]


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
