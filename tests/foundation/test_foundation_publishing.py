"""Publishing: one repository address, CITATION.cff, Binder, the GitHub Pages workflow."""

from __future__ import annotations

import os
import re
import tomllib
from pathlib import Path

import yaml

from tokenbook import __version__
from tokenbook.ipynb import repository_url
from tokenbook.pages import citation_markdown

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
    url = repository_url(REPO)
    holders = []
    for path in [REPO / "README.md", REPO / "book" / "intro.md", REPO / "binder" / "postBuild",
                 *(REPO / "lib" / "tokenbook").rglob("*.py")]:
        if url in path.read_text():
            holders.append(path.relative_to(REPO))
    assert holders == [], f"write {url} only in _config.yml (and CITATION.cff): {holders}"


def test_binder_installs_the_lock_and_tokenbook():
    req = (REPO / "binder" / "requirements.txt").read_text()
    included = re.findall(r"^-r\s+(\S+)", req, flags=re.M)
    assert included == ["../requirements/lock.txt"]
    assert (REPO / "binder" / included[0]).resolve() == REPO / "requirements" / "lock.txt"
    assert "/whl/cpu" in req  # no multi-GB CUDA torch on a GPU-less Binder
    post = REPO / "binder" / "postBuild"
    assert os.access(post, os.X_OK) and "pip install --no-deps -e ." in post.read_text()
    env = yaml.safe_load((REPO / "environment.yml").read_text())
    python = next(d for d in env["dependencies"] if isinstance(d, str) and
                  d.startswith("python="))
    assert (REPO / "binder" / "runtime.txt").read_text().strip() == \
        "python-" + python.split("=")[1]


def test_pages_workflow_builds_checks_and_deploys_the_book():
    wf = yaml.safe_load((REPO / ".github" / "workflows" / "book.yml").read_text())
    on = wf.get("on", wf.get(True))  # YAML 1.1 reads the key `on` as True
    assert "push" in on and wf["permissions"]["pages"] == "write"
    steps = wf["jobs"]["build"]["steps"]
    runs = "\n".join(s.get("run", "") for s in steps)
    assert runs.index("make venv") < runs.index("tokenbook.ipynb --check") \
        < runs.index("make book") < runs.index("tokenbook.pagecheck _build/html")
    upload = next(s for s in steps if "upload-pages-artifact" in s.get("uses", ""))
    assert upload["with"]["path"] == "_build/html"
    deploy = wf["jobs"]["deploy"]
    assert deploy["needs"] == "build" and "deploy-pages" in deploy["steps"][0]["uses"]
    readme = (REPO / "README.md").read_text()
    assert ".github/workflows/book.yml" in readme and "GitHub Pages" in readme
