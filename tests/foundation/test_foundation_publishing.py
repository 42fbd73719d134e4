"""Publishing: one repository address, CITATION.cff, Binder, the GitHub Pages workflow."""

from __future__ import annotations

import os
import re
import subprocess
import tomllib
from pathlib import Path

import yaml

from tokenbook import __version__
from tokenbook.book.ipynb import repository_url
from tokenbook.book.pages import citation_markdown

REPO = Path(__file__).resolve().parents[2]


def test_citation_cff_is_valid_and_uses_the_one_repository_address():
    cff = yaml.safe_load((REPO / "CITATION.cff").read_text())
    for key in ("cff-version", "message", "title", "authors"):  # required by CFF 1.2.0
        assert cff.get(key), key
    assert cff["cff-version"] == "1.2.0" and all(a.get("name") or a.get("family-names")
                                                 for a in cff["authors"])
    assert cff["repository-code"] == repository_url(REPO)
    assert cff["version"] == __version__
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    assert cff["license"] == project["license"]
    text = citation_markdown(REPO)
    assert "@software{tokenbook," in text and repository_url(REPO) in text
    assert f"version = {{{__version__}}}" in text


def test_repository_address_is_written_once():
    """The library and the pages' sources read it from _config.yml; the README and
    CITATION.cff name it for people, and must name the same one."""
    url = repository_url(REPO)
    holders = []
    for path in [REPO / "book" / "intro.md", REPO / "binder" / "postBuild",
                 *(REPO / "lib" / "tokenbook").rglob("*.py")]:
        if url in path.read_text():
            holders.append(path.relative_to(REPO))
    assert holders == [], f"write {url} only in _config.yml (and CITATION.cff): {holders}"
    # the README also links the papers' authors' repositories: compare the ones named like
    # this project's
    named = {u for u in re.findall(r"https://github\.com/[\w.-]+/[\w.-]+",
                                   (REPO / "README.md").read_text())
             if u.rsplit("/", 1)[-1] == url.rsplit("/", 1)[-1]}
    assert named == {url}, f"the README names {sorted(named)}; _config.yml says {url}"
    cff = yaml.safe_load((REPO / "CITATION.cff").read_text())
    assert cff["repository-code"] == url


def test_binder_is_a_slim_runtime_environment_with_cpu_torch_and_widgets():
    from tokenbook.book.binder import lock_pins, runtime_requirements

    req = (REPO / "binder" / "requirements.txt").read_text()
    assert req == runtime_requirements(REPO), "run `python -m tokenbook.book.binder` and commit"
    pins = [ln for ln in req.splitlines() if ln and not ln.startswith(("#", "-"))]
    lock = lock_pins(REPO)
    names = {re.split(r"[=<>~!]", p, maxsplit=1)[0].lower().replace("_", "-") for p in pins}
    for pin in pins:  # the lock's versions, except the widgets Binder adds
        name = pin.split("==")[0].lower().replace("_", "-")
        assert name == "ipywidgets" or lock[name] == pin, pin
    assert {"torch", "transformers", "pandas", "seaborn", "dask", "ipywidgets"} <= names
    assert not names & {"jupyter-book", "sphinx", "pytest", "nbval", "cupy-cuda12x",
                        "hypothesis", "coverage", "trl", "minicons", "myst-nb"}
    assert "-r" not in req and len(pins) < len(lock)  # not the whole lock
    assert "download.pytorch.org/whl/cpu" in req  # no multi-GB CUDA torch on a GPU-less Binder
    from tokenbook.book.costs import load, substitutions

    peak = substitutions(load(REPO))["costs_peak_memory"]  # the expected memory, documented
    assert f"peaks at {peak}" in req and f"peaks at {peak}" in (REPO / "README.md").read_text()
    post = REPO / "binder" / "postBuild"
    assert os.access(post, os.X_OK) and "pip install --no-deps -e ." in post.read_text()
    env = yaml.safe_load((REPO / "environment.yml").read_text())
    python = next(d for d in env["dependencies"] if isinstance(d, str) and
                  d.startswith("python="))
    assert (REPO / "binder" / "runtime.txt").read_text().strip() == \
        "python-" + python.split("=")[1]


def _toc_pages() -> list[str]:
    from tokenbook.book.build import _toc_files

    return list(_toc_files(yaml.safe_load((REPO / "_toc.yml").read_text())))


def test_every_launch_target_is_a_notebook_the_repository_holds():
    """sphinx-book-theme launches ``<page>.ipynb`` when it sits beside a page's source: every
    executed page (.py) must have one, committed (not ignored), and an exercise page's is the
    student edition."""
    import nbformat

    pages = [p for p in _toc_pages() if (REPO / f"{p}.py").exists()]
    assert len(pages) == 8  # four chapters, four exercise pages
    for page in pages:
        target = REPO / f"{page}.ipynb"
        assert target.exists(), f"{page}: no {target.name} beside it: run `make notebooks`"
        ignored = subprocess.run(["git", "-C", str(REPO), "check-ignore", "-q",
                                  f"{page}.ipynb"]).returncode == 0
        assert not ignored, f"{page}.ipynb is git-ignored: the launch button would 404"
        nb = nbformat.read(target, as_version=4)
        if page.startswith("notebooks/exercises/"):
            assert nb.metadata["tokenbook"]["edition"] == "student"
            code = "\n".join(c.source for c in nb.cells if c.cell_type == "code")
            assert "NotImplementedError" in code and "# Hint:" not in code


def test_link_check_finds_launch_links_that_lead_nowhere(tmp_path):
    from tokenbook.book.pagecheck import launch_links, link_problems

    html = tmp_path / "html"
    (html / "notebooks" / "exercises").mkdir(parents=True)
    (html / "_sources" / "notebooks").mkdir(parents=True)
    (html / "_sources" / "notebooks" / "uid_grounding.ipynb").write_text("{}")
    colab = "https://colab.research.google.com/github/{}/blob/main/{}"
    binder = "https://mybinder.org/v2/gh/{}/main?urlpath=lab/tree/{}"
    good = [colab.format("tokenbook/tokenbook", "notebooks/uid_grounding.ipynb"),
            binder.format("tokenbook/tokenbook", "notebooks/exercises/uid_grounding.ipynb"),
            "../_sources/notebooks/uid_grounding.ipynb"]
    bad = [colab.format("someone/else", "notebooks/uid_grounding.ipynb"),
           binder.format("tokenbook/tokenbook", "notebooks/exercises/uid_grounding.py"),
           colab.format("tokenbook/tokenbook", "notebooks/missing.ipynb"),
           "../_sources/notebooks/missing.ipynb"]
    for name, links in (("good", good), ("bad", bad)):
        (html / "notebooks" / f"{name}.html").write_text(
            "".join(f'<a href="{link}">x</a>' for link in links))
    assert len(launch_links(html)) == 7
    problems = link_problems(html, REPO)
    assert not [p for p in problems if p.startswith("notebooks/good.html")], problems
    bad_found = [p for p in problems if p.startswith("notebooks/bad.html")]
    assert len(bad_found) == 4, bad_found
    assert "not tokenbook/tokenbook" in bad_found[0] and "not a notebook" in bad_found[1]


def test_colab_setup_installs_tokenbook_without_replacing_colabs_torch(tmp_path, monkeypatch):
    """The chapters' setup cell, run where tokenbook is missing and torch is installed (Colab):
    no torch in any pip command; tokenbook itself with --no-deps."""
    import importlib.util
    import subprocess as sp

    from tokenbook.book.ipynb import SETUP_SOURCE

    cell = SETUP_SOURCE.format(chapter="uid_grounding", repo_url=repository_url(REPO))
    cell = cell.split("os.environ.setdefault")[0]  # the install part
    assert "torch==" not in cell
    checkout = tmp_path / "tokenbook"
    checkout.mkdir()
    (checkout / "pyproject.toml").write_text((REPO / "pyproject.toml").read_text())
    calls = []
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == "tokenbook" else real(name, *a))
    monkeypatch.setattr(sp, "run", lambda cmd, **kw: calls.append(cmd))
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr("sys.path", list(__import__("sys").path))
    exec(compile(cell, "setup-cell", "exec"), {"__name__": "__main__"})
    pips = [c for c in calls if "pip" in c]
    assert len(pips) == 2 and not any(a.startswith("torch") for c in pips for a in c)
    assert "transformers>=5.0,<6" in pips[0]  # the other dependencies
    assert pips[1][-3:] == ["--no-deps", "-e", str(checkout)]


def test_pages_workflow_builds_checks_and_deploys_the_book():
    wf = yaml.safe_load((REPO / ".github" / "workflows" / "book.yml").read_text())
    on = wf.get("on", wf.get(True))  # YAML 1.1 reads the key `on` as True
    assert "push" in on and wf["permissions"]["pages"] == "write"
    steps = wf["jobs"]["build"]["steps"]
    runs = "\n".join(s.get("run", "") for s in steps)
    assert runs.index("make venv") < runs.index("tokenbook.book.notebooks --check") \
        < runs.index("make book") < runs.index("tokenbook.book.pagecheck _build/html")
    upload = next(s for s in steps if "upload-pages-artifact" in s.get("uses", ""))
    assert upload["with"]["path"] == "_build/html"
    deploy = wf["jobs"]["deploy"]
    assert deploy["needs"] == "build" and "deploy-pages" in deploy["steps"][0]["uses"]
    readme = (REPO / "README.md").read_text()
    assert ".github/workflows/book.yml" in readme and "GitHub Pages" in readme


def test_api_reference_has_one_page_per_part_and_documents_every_module():
    pages = sorted((REPO / "book" / "api").glob("*.md"))
    listed = [p for p in _toc_pages() if p.startswith("book/api/")]
    assert len(pages) >= 8 and set(listed) == {f"book/api/{p.stem}" for p in pages}
    documented = [m for p in pages for m in re.findall(r"automodule:: (tokenbook[\w.]*)",
                                                       p.read_text())]
    assert len(documented) == len(set(documented)), "a module documented twice"
    lib = REPO / "lib" / "tokenbook"
    modules = {"tokenbook." + ".".join(p.relative_to(lib).with_suffix("").parts)
               .removesuffix(".__init__") for p in lib.rglob("*.py")
               if not p.name.startswith("_") or p.name == "__init__.py"}
    modules = {m.removesuffix(".__init__") for m in modules} - {"tokenbook"}
    missing = sorted(m for m in modules - set(documented)
                     if "__main__" not in m)
    assert not missing, f"modules without a page in book/api/: {missing}"
