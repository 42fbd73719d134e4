"""tokenbook/groundedness_typology/figures.py: seaborn figures of the grounding measures, readable at the
book's page width for the tiny world (4 languages) and for the paper's 30."""

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import pytest  # noqa: E402

from tokenbook.groundedness_typology import measures as gr  # noqa: E402
from tokenbook import plotting  # noqa: E402
from tokenbook.groundedness_typology import figures as figs  # noqa: E402

EFFECTS = {"NOUN": 2.0, "ADJ": 1.2, "VERB": 0.6, "DET": 0.2, "ADP": 0.1}


def words(langs, n_per=12, seed=0):
    rng = np.random.default_rng(seed)
    rows = [{"lang": lang, "unit_id": f"{lang}-{i % 5}", "word": f"{u.lower()}{i % 3}",
             "upos": u, "concreteness": 5.0 if u in ("NOUN", "ADJ") else 2.0,
             "s_U": 5.0, "s_P": 5.0 - eff - rng.normal(0, 0.3)}
            for lang in langs for u, eff in EFFECTS.items() for i in range(n_per)]
    return gr.add_groundedness(pd.DataFrame(rows))


@pytest.fixture(autouse=True)
def _style():
    with matplotlib.rc_context():
        plotting.use_book_style()
        yield
    plt.close("all")


def _texts(fig):
    fig.draw_without_rendering()
    return [t.get_text() for t in fig.findobj(matplotlib.text.Text) if t.get_visible()]


@pytest.mark.slow
@pytest.mark.parametrize("n_langs", [4, 30])
def test_violins_facet_every_language_readably(n_langs):
    langs = [f"l{i:02d}" for i in range(n_langs)]
    w = words(langs, n_per=8)
    fig = figs.plot_class_violins(w, min_count=3)
    panels = [ax for ax in fig.axes if ax.get_visible()]
    assert sorted(ax.get_title() for ax in panels) == langs  # every language, none left out
    assert fig.get_figwidth() <= plotting.BASE_WIDTH_IN  # grows by rows, never wider
    assert plotting.rendered_font_pt(fig) >= plotting.MIN_FONT_PT
    # the same class order in every panel, most grounded first
    orders = {tuple(t.get_text() for t in ax.get_xticklabels()) for ax in panels}
    assert orders == {("NOUN", "ADJ", "VERB", "DET", "ADP")}
    assert panels[0].get_ylabel() == "G (nats)"
    assert {"lexical", "functional"} <= set(_texts(fig))


def test_violins_leave_out_rare_classes_and_check_inputs():
    w = words(["aa", "bb"], n_per=6)
    w = w[~((w["lang"] == "bb") & (w["upos"] == "ADP"))]
    fig = figs.plot_class_violins(w, min_count=3, langs=["bb"])
    assert [ax.get_title() for ax in fig.axes] == ["bb"]
    assert "ADP" not in {t.get_text() for t in fig.axes[0].get_xticklabels()}
    with pytest.raises(ValueError, match="min_count"):
        figs.plot_class_violins(w, min_count=0)
    with pytest.raises(ValueError, match="missing column"):
        figs.plot_class_violins(w.drop(columns=["groundedness", "s_P"]))


@pytest.mark.slow
@pytest.mark.parametrize("n_langs", [4, 30])
def test_class_means_and_agreement_read_at_page_width(n_langs):
    w = words([f"l{i:02d}" for i in range(n_langs)], n_per=8)
    s = gr.class_summary(w, n_boot=20)
    fig = figs.plot_class_means(s)
    ax = fig.axes[0]
    assert "nats" in ax.get_ylabel() and ax.get_xlabel().startswith("UPOS")
    assert [t.get_text() for t in ax.get_xticklabels()] == list(EFFECTS)
    legend = [t.get_text() for t in ax.get_legend().get_texts()]
    assert "mean over languages" in legend
    assert len(legend) == (1 if n_langs > 8 else 1 + n_langs)  # 30 languages: no colour key
    heat = figs.plot_agreement(gr.agreement_matrix(gr.rank_agreement(gr.rank_vectors(s))))
    for f in (fig, heat):
        assert f.get_figwidth() <= plotting.BASE_WIDTH_IN
        assert plotting.rendered_font_pt(f) >= plotting.MIN_FONT_PT
    assert heat.axes[0].get_xlabel() == "language"
    assert "rank correlation" in [a.get_ylabel() for a in heat.axes]
    with pytest.raises(ValueError, match="missing column"):
        figs.plot_class_means(s.drop(columns="ci_low"))
    with pytest.raises(ValueError, match="square"):
        figs.plot_agreement(pd.DataFrame(np.zeros((2, 3))))


def test_types_vs_norm_has_units_and_the_ols_line():
    types = gr.type_table(words(["en"], n_per=20), min_tokens=3)
    fig = figs.plot_types_vs_norm(types, "concreteness", label="concreteness (1–5)")
    ax = fig.axes[0]
    assert ax.get_xlabel() == "concreteness (1–5)" and "nats" in ax.get_ylabel()
    assert any(t.startswith("OLS fit") for t in _texts(fig))
    assert plotting.rendered_font_pt(fig) >= plotting.MIN_FONT_PT
    with pytest.raises(ValueError, match="missing column"):
        figs.plot_types_vs_norm(types, "imageability")
