"""Provenance: versions and the commit that produced a result."""

from __future__ import annotations

import re
import subprocess

from tokenbook import __version__
from tokenbook.provenance import (git_commit, show_versions, versions, versions_frame,
                                  versions_table)


def test_versions_has_the_key_packages(repo_root):
    v = versions()
    for key in ("python", "torch", "transformers", "numpy", "pandas", "tokenbook", "git_commit"):
        assert key in v
    assert v["tokenbook"] == __version__
    assert re.match(r"\d+\.\d+", v["python"]) and re.match(r"\d+\.\d+", v["numpy"])
    frame = versions_frame()
    assert list(frame.columns) == ["package", "version"] and len(frame) == len(v)


def test_git_commit(repo_root, tmp_path):
    sha = git_commit(repo_root)
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=repo_root, capture_output=True,
                          text=True).stdout.strip()
    if head:
        assert sha is not None and sha.split("+")[0] == head
        assert re.fullmatch(r"[0-9a-f]{40}(\+dirty)?", sha)
        assert len(git_commit(repo_root, short=True).split("+")[0]) == 12
    assert git_commit(tmp_path) is None  # not a checkout


def test_versions_table_renders_a_captioned_table():
    html = versions_table().to_html()
    assert "Versions used for this run" in html and "torch" in html and "seaborn" in html


def test_show_versions_displays_itself_anywhere_in_a_cell(monkeypatch, capsys):
    """Not only as a cell's last expression: it displays through IPython and returns None
    (so a last-line call is not shown twice); outside IPython it prints."""
    import IPython
    import IPython.display

    assert show_versions() is None  # no IPython shell here: printed
    assert "Versions used for this run" in capsys.readouterr().out
    shown = []
    monkeypatch.setattr(IPython, "get_ipython", lambda: object())
    monkeypatch.setattr(IPython.display, "display", shown.append)
    assert show_versions() is None
    assert len(shown) == 1 and "Versions used for this run" in shown[0].to_html()
