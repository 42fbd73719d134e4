"""The chapter's figures: each plot_* draws from the library's tables, labels its axes with
units, and rejects a table without the columns it needs."""

import matplotlib
import numpy as np
import pandas as pd
import pytest

matplotlib.use("Agg")

from tokenbook.cancellation_hypothesis import figures as figs  # noqa: E402


def test_plots_draw_and_label():
    rng = np.random.default_rng(0)
    table = pd.DataFrame({"reward": rng.integers(0, 2, 50).astype(float),
                          "delta": rng.normal(0, 0.1, 50)})
    ax = figs.plot_delta_by_sign(table).axes[0]
    assert "nats" in ax.get_xlabel()
    fo = pd.DataFrame({"predicted": rng.normal(size=20), "actual": rng.normal(size=20)})
    coup = pd.DataFrame({"bucket": ["a", "b"] * 10, "K": rng.normal(size=20)})
    assert len(figs.plot_coupling(fo, coup).axes) == 2
    probe = pd.DataFrame({"same_token": [True, False] * 8, "high_entropy": [True] * 8 + [False] * 8,
                          "peer_adv": ["positive", "negative"] * 8, "tau": rng.normal(size=16)})
    fig = figs.plot_probe(probe)
    assert "nats" in fig.axes[0].get_xlabel()
    from tokenbook.plotting import MIN_FONT_PT, rendered_font_pt

    assert rendered_font_pt(fig) >= MIN_FONT_PT
    legend = fig.legends[0].get_window_extent(fig.canvas.get_renderer())
    label = fig.axes[0].xaxis.label.get_window_extent(fig.canvas.get_renderer())
    assert legend.y1 <= label.y0 + 1  # the legend below the axis label, not over it
    curves = pd.DataFrame({"condition": ["x"] * 6, "seed": [0, 0, 0, 1, 1, 1],
                           "step": [0, 5, 10] * 2, "accuracy": rng.random(6)})
    assert figs.plot_learning_curves(curves).axes[0].get_ylabel().startswith("greedy")
    sweep = pd.DataFrame({"seed": [0, 1] * 2, "mechanism": ["on", "on", "off", "off"],
                          "claim_id": "flip-both-signs", "value": [1.0, 2.0, 0.0, 0.1]})
    ax = figs.plot_seed_values(sweep).axes[0]
    assert "(ratio)" in ax.get_ylabel()  # units
    assert [ln.get_ydata()[0] for ln in ax.get_lines() if ln.get_linestyle() == "--"] == [0.5]
    assert sorted(y for c in ax.collections for _, y in c.get_offsets()) == [0.0, 0.1, 1.0, 2.0]
    with pytest.raises(ValueError, match="delta"):
        figs.plot_delta_by_sign(table.drop(columns="delta"))


def test_new_coupling_and_gradient_figures():
    from tokenbook.cancellation_hypothesis.coupling import coupling_bucket_cis
    from tokenbook.cancellation_hypothesis.gradients import GradientDump

    rng = np.random.default_rng(0)
    n = 120
    coup = pd.DataFrame({"prompt_id": rng.integers(0, 6, n), "same_token": rng.random(n) < 0.3,
                         "p_j": rng.random(n), "p_k": rng.random(n), "phi": rng.normal(size=n),
                         "K": rng.normal(size=n) * 5})
    fig = figs.plot_coupling_buckets(coupling_bucket_cis(coup, n_boot=50))
    assert len(fig.axes) == 2 and "K" in fig.axes[0].get_xlabel()
    fo = pd.DataFrame({"predicted": rng.normal(size=20), "actual": rng.normal(size=20)})
    assert "nats" in figs.plot_first_order(fo).axes[0].get_xlabel()
    units = pd.DataFrame({"params": "authors' set", "class": ["template", "reasoning"] * 5,
                          "cos": rng.uniform(-1, 0, 10), "prompt_id": np.arange(10) % 3})
    prompts = pd.DataFrame({"params": ["authors' set", "output layer"] * 4,
                            "tokens": ["shared"] * 4 + ["group-specific"] * 4,
                            "cancelled": rng.uniform(-1, 1, 8), "norm_pos": 1.0,
                            "norm_neg": 1.0})
    summary = pd.DataFrame({"tokens": "shared", "level": "per token",
                            "class": ["template", "reasoning"], "cos": [-0.9, -0.5],
                            "cos_lo": [-0.95, -0.7], "cos_hi": [-0.8, -0.3]})
    fig = figs.plot_gradient_cancellation(GradientDump(units, prompts, prompts, "prompt_token"),
                                          summary)
    assert fig.axes[0].get_xlabel().startswith("cos") and len(fig.axes) == 2
    with pytest.raises(ValueError, match="anti_coupling"):
        figs.plot_coupling_buckets(pd.DataFrame({"bucket": ["a"], "statistic": ["K"],
                                                 "mean": [1.0], "lo": [0.0], "hi": [2.0]}))


def test_dual_update_figure():
    rng = np.random.default_rng(0)
    dual = pd.DataFrame({"delta_head": rng.normal(size=50), "delta_full": rng.normal(size=50),
                         "reward": rng.integers(0, 2, 50)})
    fig = figs.plot_dual_update(dual)
    ax = fig.axes[0]
    assert "output layer" in ax.get_xlabel() and "nats" in ax.get_ylabel()
    assert len(ax.collections[0].get_offsets()) == 50
    with pytest.raises(ValueError):
        figs.plot_dual_update(dual.drop(columns="reward"))


def test_scale_sweep_figure():
    rows = [dict(size=lab, hidden_size=h, num_layers=2, model_id=None, n_params=n, seed=s,
                 mechanism=m, claim_id=c, value=0.1 * s + (m == "on"))
            for lab, h, n in (("64×2", 64, 139_000), ("32×2", 32, 37_000))
            for s in range(3) for m in ("on", "off")
            for c in ("flip-both-signs", "template-less-under-grpo")]
    fig = figs.plot_scale_sweep(pd.DataFrame(rows), expect={"flip-both-signs": (0.5, 1.0)})
    assert len(fig.axes) == 2
    ax = fig.axes[0]
    assert [t.get_text() for t in ax.get_xticklabels()] == ["32×2\n37k", "64×2\n139k"]
    assert "parameters" in ax.get_xlabel() and "ratio" in ax.get_ylabel()
    assert "share" in fig.axes[1].get_ylabel()
    paper = pd.DataFrame(rows).assign(hidden_size=None, num_layers=None)
    assert figs.plot_scale_sweep(paper).axes[0].get_xlabel() == "policy (parameters)"
    with pytest.raises(ValueError, match="n_params"):
        figs.plot_scale_sweep(pd.DataFrame(rows).drop(columns="n_params"))
