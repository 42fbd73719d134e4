"""The book's figure style: seaborn theme, readable text at page width, quiet savefig."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import json  # noqa: E402
import sys  # noqa: E402

import matplotlib.pyplot as plt  # noqa: E402
import pytest  # noqa: E402

from tokenbook import claims, plotting, run_folder  # noqa: E402
from tokenbook.book import interactive  # noqa: E402


@pytest.fixture(autouse=True)
def _restore_rc():
    with matplotlib.rc_context():
        yield
    plt.close("all")


def test_book_style_is_seaborn_with_readable_fonts():
    import seaborn as sns

    plotting.use_book_style()
    rc = matplotlib.rcParams
    assert rc["axes.facecolor"] == "white" and rc["axes.grid"]  # seaborn's whitegrid
    colours = [matplotlib.colors.to_hex(c["color"]) for c in rc["axes.prop_cycle"]]
    assert colours[:3] == [matplotlib.colors.to_hex(c) for c in sns.color_palette("colorblind")[:3]]
    sizes = [rc[k] for k in ("xtick.labelsize", "ytick.labelsize", "axes.labelsize",
                             "legend.fontsize", "axes.titlesize")]
    assert min(sizes) >= plotting.MIN_FONT_PT
    fig, ax = plt.subplots()
    ax.set_xlabel("x (nats)")
    assert fig.get_figwidth() == plotting.BASE_WIDTH_IN
    assert plotting.rendered_font_pt(fig) >= plotting.MIN_FONT_PT  # the default figure reads


def test_rendered_font_shrinks_with_wide_figures():
    plotting.use_book_style()
    narrow, ax = plt.subplots(figsize=(6, 3))
    ax.set_title("t", fontsize=10)
    ax.tick_params(labelsize=10)
    wide, ax2 = plt.subplots(figsize=(16, 3))
    ax2.tick_params(labelsize=10)
    assert plotting.rendered_font_pt(narrow) == pytest.approx(10.0)  # not enlarged
    expected = 10 * plotting.PAGE_WIDTH_PX / (16 * 96)
    assert plotting.rendered_font_pt(wide) == pytest.approx(expected)
    assert plotting.rendered_font_pt(plt.figure()) == float("inf")  # no text at all
    assert plotting.figsize(3, 2) == (plotting.BASE_WIDTH_IN, 6.4)
    with pytest.raises(ValueError, match="ncols"):
        plotting.figsize(0)


def test_savefig_writes_into_the_run_folder_and_displays_nothing(tmp_path, monkeypatch):
    monkeypatch.setenv("TOKENBOOK_RUN_DIR", str(tmp_path / "run"))
    plotting.use_book_style()
    fig, ax = plt.subplots()
    ax.plot([0, 1], [0, 1])
    ax.set_xlabel("x")
    path = plotting.savefig(fig, "a figure/1")
    assert path == tmp_path / "run" / "figures" / "a-figure-1.png" and path.exists()
    assert isinstance(path, plotting.FigurePath) and path._ipython_display_() is None
    from IPython.core.formatters import DisplayFormatter

    assert DisplayFormatter().format(path) == ({}, {})  # a cell ending in savefig shows nothing
    wide, ax = plt.subplots(figsize=(20, 3))
    ax.set_xlabel("tiny at page width")
    with pytest.warns(UserWarning, match="pt on the page"):
        plotting.savefig(wide, "wide")


def test_savefig_writes_into_the_run_folder_an_interactive_session_started(tmp_path,
                                                                            monkeypatch):
    """No runner (no TOKENBOOK_RUN_DIR): the folder interactive.start makes (papermill,
    Jupyter, Colab) gets the figures and claims.json, and each savefig records the chapter's
    parameters as the kernel holds them in its run.json; the science never imports the book."""
    monkeypatch.delenv("TOKENBOOK_RUN_DIR", raising=False)
    monkeypatch.setattr(interactive, "_started", None)
    monkeypatch.chdir(tmp_path)
    (tmp_path / "notebooks").mkdir()
    (tmp_path / "notebooks" / "demo.py").write_text(
        '# %% tags=["parameters"]\nseed = 0\nn = 10\n')
    monkeypatch.setattr(sys.modules["__main__"], "seed", 7, raising=False)
    monkeypatch.setattr(sys.modules["__main__"], "n", 3, raising=False)
    started = interactive.start("demo", root=tmp_path)
    assert run_folder.run_dir() == claims.run_dir() == started
    fig, ax = plt.subplots()
    ax.set_xlabel("x")
    path = plotting.savefig(fig, "after-start")
    assert path == started / "figures" / "after-start.png" and path.exists()
    run = json.loads((started / "run.json").read_text())
    assert run["parameters"] == {"seed": 7, "n": 3} and run["seed"] == 7
    assert not (tmp_path / run_folder.FALLBACK_RUN_DIR).exists()
    assert interactive.run_dir() == started  # the book's lookup is the same one


def test_without_a_runner_or_a_session_figures_and_claims_share_one_folder(tmp_path,
                                                                          monkeypatch):
    monkeypatch.delenv("TOKENBOOK_RUN_DIR", raising=False)
    monkeypatch.setattr(interactive, "_started", None)
    monkeypatch.chdir(tmp_path)
    fig, ax = plt.subplots()
    ax.set_xlabel("x")
    path = plotting.savefig(fig, "alone")
    assert path == tmp_path / run_folder.FALLBACK_RUN_DIR / "figures" / "alone.png"
    assert claims.run_dir() == path.parent.parent and path.exists()
