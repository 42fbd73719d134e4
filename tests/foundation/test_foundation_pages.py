"""What a chapter page shows: cell tags, cleaned outputs, offline MathJax, .ipynb downloads."""

from __future__ import annotations

import re

import nbformat
import pytest

from tokenbook.book.pages import (CSS, HIDE_INPUT, chapter_download, clean_outputs, clean_text,
                                  collapse_progress, is_setup_cell, mathjax_source, reads_chapter,
                                  stage_static)

CHAPTER = '''# %% [markdown]
# # Title

# %% tags=["parameters"]
seed: int = 0  # the seed

# %%
import numpy as np
from tokenbook.provenance import show_versions
from tokenbook.plotting import use_book_style

use_book_style()
show_versions()

# %%
import numpy as np
x = np.arange(seed)
'''


def test_reader_hides_the_code_of_parameters_and_setup_cells_only():
    nb = reads_chapter(CHAPTER)
    code = [c for c in nb.cells if c.cell_type == "code"]
    assert [HIDE_INPUT in c.metadata.get("tags", []) for c in code] == [True, True, False]
    assert "parameters" in code[0].metadata["tags"]  # papermill's tag stays
    assert is_setup_cell("import os\nwarnings.filterwarnings('ignore')")
    assert not is_setup_cell("show_versions()")  # no import: not a set-up cell
    assert not is_setup_cell("import os\nos.remove('x')")
    assert not is_setup_cell("def f(:")


def test_clean_outputs_drops_stray_values_and_machine_details(tmp_path):
    root = tmp_path / "book"
    outs = [
        {"output_type": "execute_result", "data": {
            "text/plain": f"FigurePath('{root}/_build/runs/c/20261123T195140.256205Z-7b32/"
                          f"figures/a.png')"}, "metadata": {}, "execution_count": 1},
        {"output_type": "execute_result", "data": {"text/plain": "PosixPath('/x/y.png')"},
         "metadata": {}, "execution_count": 1},
        {"output_type": "execute_result", "data": {
            "text/plain": "[<matplotlib.lines.Line2D at 0x7f3a2c1d5e10>]"}, "metadata": {}},
        {"output_type": "execute_result", "data": {"text/plain": "Text(0.5, 1.0, 'a title')"},
         "metadata": {}},
        {"output_type": "execute_result", "data": {"text/plain": "<Axes: xlabel='x'>"},
         "metadata": {}},
        {"output_type": "execute_result", "data": {"text/plain": "0.25"}, "metadata": {}},
        {"output_type": "display_data", "data": {"image/png": "iVBOR", "text/plain":
                                                 "<Figure size 640x480 with 1 Axes>"},
         "metadata": {}},
        {"output_type": "stream", "name": "stdout",
         "text": f"saved to {root}/_build/runs/c/20261123T195140.256205Z-7b32/claims.json\n"},
    ]
    kept = clean_outputs(outs, root)
    assert [o["output_type"] for o in kept] == ["execute_result", "display_data", "stream"]
    assert kept[0]["data"]["text/plain"] == "0.25"  # a value someone meant to show stays
    assert "image/png" in kept[1]["data"]  # figures stay
    assert kept[2]["text"] == "saved to _build/runs/c/<run id>/claims.json\n"
    assert clean_text(f"{root}", root) == "."


def test_missing_table_values_show_as_a_dash_and_real_words_stay():
    import pandas as pd

    frame = pd.DataFrame({"lang": ["aru", "bek"], "DET": [0.02, float("nan")],
                          "note": ["Nancy", None]})
    out = {"output_type": "execute_result", "metadata": {},
           "data": {"text/html": frame.to_html(), "text/plain": repr(frame)}}
    (kept,) = clean_outputs([out])
    cells = re.findall(r"<td>(.*?)</td>", kept["data"]["text/html"])
    assert cells == ["aru", "0.02", "Nancy", "bek", "—", "—"]


def test_progress_bars_of_one_loop_collapse_to_the_last_line():
    bars = "\n".join(f"epoch {i}/40: 100%|██████████| 30/30 [00:01<00:00, 25.{i}it/s]"
                     for i in range(1, 41))
    text = "start\n" + bars + "\nscoring: 100%|█████| 9/9 [00:02<00:00, 4.1it/s]\ndone\n"
    out = collapse_progress(text).split("\n")
    assert out == ["start", "epoch 40/40: 100%|██████████| 30/30",
                   "scoring: 100%|█████| 9/9", "done", ""]
    # one bar per loop even when other bars interleave; loading bars and timings left out
    raw = "\n".join(
        f"Loading weights: 100%|#####| 27/27 [00:00<00:00, 900.1it/s]\n"
        f"GRPO seed {k}: 100%|#####| 16/16 [01:0{k}<00:00, 4.0s/it]" for k in range(5))
    raw += ("\nWriting model shards: 100%|#####| 1/1 [00:00<00:00, 3.1it/s]"
            "\nseeds × mechanism: 100%|#####| 10/10 [27:38<00:00, 165.86s/it]\nok")
    assert collapse_progress(raw).split("\n") == [
        "GRPO seed 4: 100%|#####| 16/16", "seeds × mechanism: 100%|#####| 10/10", "ok"]


def test_download_is_the_runnable_twin_with_the_page_outputs(tmp_path):
    twin = nbformat.v4.new_notebook(cells=[
        nbformat.v4.new_markdown_cell("# T"),
        nbformat.v4.new_code_cell("setup()", metadata={"tags": ["tokenbook-setup"]}),
        nbformat.v4.new_code_cell("a = 1"), nbformat.v4.new_code_cell("a")])
    done = nbformat.v4.new_notebook(cells=[
        nbformat.v4.new_markdown_cell("# T"), nbformat.v4.new_code_cell("a = 1"),
        nbformat.v4.new_code_cell("a", outputs=[nbformat.v4.new_output(
            "execute_result", data={"text/plain": "1"}, execution_count=2)])])
    nbformat.write(twin, tmp_path / "t.ipynb")
    nbformat.write(done, tmp_path / "d.ipynb")
    nb = chapter_download(tmp_path / "t.ipynb", tmp_path / "d.ipynb")
    assert nb.cells[1].source == "setup()" and nb.cells[3].outputs[0]["data"] == {
        "text/plain": "1"}
    assert chapter_download(None, tmp_path / "d.ipynb").cells[1].source == "a = 1"
    twin.cells.append(nbformat.v4.new_code_cell("b"))  # out of step: the executed one
    nbformat.write(twin, tmp_path / "t.ipynb")
    assert len(chapter_download(tmp_path / "t.ipynb", tmp_path / "d.ipynb").cells) == 3


@pytest.mark.skipif(mathjax_source() is None, reason="django-static-mathjax not installed "
                    "(make venv installs the lock)")
def test_static_files_bundle_mathjax_and_the_table_css(tmp_path):
    folder = stage_static(tmp_path / "static")
    assert (folder / "tokenbook.css").read_text() == CSS and "overflow-x: auto" in CSS
    js = folder / "mathjax" / "tex-mml-chtml.js"
    assert js.stat().st_size > 500_000  # the real MathJax 3 bundle, not a stub
    assert 'VERSION="3.2' in js.read_text()
    fonts = list((folder / "mathjax" / "output" / "chtml" / "fonts").rglob("*.woff"))
    assert fonts  # CHTML fonts are loaded from beside the script, offline
    stage_static(folder)  # a second call keeps the copy
    assert js.exists()


def _cell_html(stdout: str, stderr: str = "") -> str:
    """A code cell as myst-nb writes it, with its merged stdout and stderr outputs."""
    import html

    out = "".join(f'<div class="output {kind} highlight-myst-ansi notranslate"><div '
                  f'class="highlight"><pre><span></span>{html.escape(text)}</pre></div></div>'
                  for kind, text in (("stream", stdout), ("stderr", stderr)) if text)
    return (f'<div class="cell tag_hide-input docutils container"><div class="cell_input">'
            f'</div><div class="cell_output docutils container">{out}</div></div>')


def test_page_check_fails_on_debris_in_stream_outputs():
    from tokenbook.book.pagecheck import MAX_STREAM_LINES, stream_outputs, stream_problems

    page = ("<html><body>" + _cell_html("done\n", "GRPO seed 1:  0%|    | 0/15\n")
            + _cell_html("a\n" * (MAX_STREAM_LINES + 1))
            + _cell_html("", "x: 100%|###| 10/10 [27:38<00:00, 165.86s/it]\n")
            + _cell_html("", "UserWarning: figure 'f': its smallest text appears at 6.0 pt "
                             "on the page (< 9 pt)\n")
            + _cell_html("fine\n", "loop: 100%|###| 3/3\n") + "</body></html>")
    streams = stream_outputs(page)
    assert len(streams) == 5 and streams[0] == "done\nGRPO seed 1:  0%|    | 0/15"
    found = [stream_problems(s) for s in streams]
    assert "half-finished progress bar: GRPO seed 1:  0%|    | 0/15" in found[0][0]
    assert f"{MAX_STREAM_LINES + 1} lines of stream output" in found[1][0]
    assert "build machine's timings: [27:38<00:00, 165.86s/it]" in found[2][0]
    assert "figure legibility warning" in found[3][0]
    assert found[4] == []  # a finished bar without timings and a line of text: clean
    # what the book's cleaning does to the same debris passes the check
    cleaned = collapse_progress("x: 100%|###| 10/10 [27:38<00:00, 165.86s/it]\n")
    assert stream_problems(cleaned) == []


def test_book_executions_switch_loading_bars_off(monkeypatch):
    import os

    from tokenbook.book.build import BOOK_ENV, quiet_loading_bars

    monkeypatch.delenv("HF_HUB_DISABLE_PROGRESS_BARS", raising=False)
    with quiet_loading_bars():  # what a chapter's kernel inherits while the book runs it
        assert os.environ["HF_HUB_DISABLE_PROGRESS_BARS"] == "1" == BOOK_ENV[
            "HF_HUB_DISABLE_PROGRESS_BARS"]
    assert "HF_HUB_DISABLE_PROGRESS_BARS" not in os.environ  # restored afterwards
