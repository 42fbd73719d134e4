"""From any claim on a page one link leads to its computing function's API entry (issue #32).

A claim's ``computed_by`` (``module:qualname``) is shown as a link to Sphinx autodoc's entry of
that function: the page of ``book/api/`` that documents the module with its members, anchored at
``#module.qualname``. The chapter pages (``notebooks/<chapter>.html``, the table of
``claims.report``) and the front page's scorecard (``book/intro.html``) link with addresses
relative to themselves.
"""

from __future__ import annotations

import importlib
import inspect
import posixpath
import re
from pathlib import Path
from types import SimpleNamespace

import pandas as pd
import pytest
import yaml
from sphinx.util.nodes import make_id

from tokenbook.book import build
from tokenbook.cancellation_hypothesis import claims as cancellation_claims
from tokenbook.claims import qualified_name
from tokenbook.groundedness_typology import claims as typology_claims
from tokenbook.memorisation_cartography import claims as memorisation_claims
from tokenbook.scorecard import (API_DIR, CHAPTER_API_BASE, ClaimsTable, api_link, api_pages,
                                 claim_row, claims_table_html)
from tokenbook.uid_grounding import claims as uid_claims

REPO = Path(__file__).resolve().parents[2]
SEED_CLAIMS = "tokenbook.uid_grounding.experiments:seed_claims"
ROW = {"id": "uid-v-lower-with-image", "claim": "UID_v is lower with the image", "paper": "§5",
       "statistic": "share of languages", "expected": "≥ 0.9", "verdict": "detected",
       "scale": "tiny", "share_on": 1.0, "share_off": 0.0, "n_root_seeds": 5,
       "computed_by": SEED_CLAIMS}
ALL_SPECS = [*uid_claims.claim_specs(), *typology_claims.claim_specs(),
             *memorisation_claims.claim_specs(),
             *cancellation_claims.claim_specs(sizes=("32×2",))]


def _hrefs(html: str) -> list[str]:
    return re.findall(r'<a class="tb-computed-by" href="([^"]+)">', html)


def _sphinx_anchor(fullname: str) -> str:
    """The id Sphinx's Python domain gives the entry of ``fullname`` (a fresh document)."""
    document = SimpleNamespace(ids={}, settings=SimpleNamespace(id_prefix=""))
    return make_id(None, document, "", fullname)


def _documented_with_members(page: Path, module: str) -> bool:
    text = page.read_text()
    m = re.search(rf"^\.\. automodule:: {re.escape(module)}[ \t]*\n((?:[ \t]+:[\w-]+:.*\n?)*)",
                  text, re.M)
    return m is not None and ":members:" in m[1]


def _toc_pages() -> set[str]:
    def files(node):
        if isinstance(node, dict):
            if isinstance(node.get("file"), str):
                yield node["file"]
            for v in node.values():
                yield from files(v)
        elif isinstance(node, list):
            for item in node:
                yield from files(item)
    return set(files(yaml.safe_load((REPO / "_toc.yml").read_text())))


def test_api_pages_name_the_page_documenting_each_module():
    pages = api_pages("api/")
    assert pages["tokenbook.uid_grounding.experiments"] == "api/uid_grounding.html"
    assert pages["tokenbook.uid_grounding.claims"] == "api/uid_grounding.html"
    assert pages["tokenbook.groundedness_typology.claims"] == "api/groundedness_typology.html"
    assert "tokenbook.grounded" not in pages  # documented without its members: no entries
    assert api_pages(folder=REPO / "no-such-folder") == {}
    assert api_link(SEED_CLAIMS, pages) == \
        "api/uid_grounding.html#tokenbook.uid_grounding.experiments.seed_claims"
    for name in ("tokenbook.nowhere:f", "tokenbook.uid_grounding.experiments",
                 "tokenbook.uid_grounding.experiments:f.<locals>.g",
                 "tokenbook.uid_grounding.experiments:_private"):
        assert api_link(name, pages) == "", name


def test_the_claims_table_links_computed_by_to_its_api_entry():
    table = claims_table_html([ROW], api=api_pages("api/"))
    assert (f'Computed by <a class="tb-computed-by" href="api/uid_grounding.html#'
            f'tokenbook.uid_grounding.experiments.seed_claims"><code>{SEED_CLAIMS}</code></a>'
            in table)
    assert _hrefs(claims_table_html([ROW])) == []  # no API pages given: the name, unlinked
    assert SEED_CLAIMS in claims_table_html([ROW])
    unknown = claims_table_html([{**ROW, "computed_by": "tokenbook.nowhere:f"}],
                                api=api_pages("api/"))
    assert _hrefs(unknown) == [] and "<code>tokenbook.nowhere:f</code>" in unknown
    assert "Computed by" not in claims_table_html([{**ROW, "computed_by": ""}],
                                                  api=api_pages("api/"))


def test_a_chapter_page_links_to_the_built_api_page_and_anchor():
    """``report(...)``'s table on ``notebooks/<chapter>.html`` reaches ``book/api/<part>.html``:
    a page of the toc whose source documents the module's members, at Sphinx's anchor."""
    assert API_DIR == REPO / "book" / "api"
    html = ClaimsTable([ROW])._repr_html_()
    assert str(REPO) not in html  # relative: no build machine's path on a page
    (href,) = _hrefs(html)
    assert href.startswith(CHAPTER_API_BASE)
    path, anchor = href.split("#")
    built = posixpath.normpath(posixpath.join("notebooks", path))  # from the chapter's page
    assert built == "book/api/uid_grounding.html"
    source = REPO / built.replace(".html", ".md")
    assert source.exists() and built.removesuffix(".html") in _toc_pages()
    assert _documented_with_members(source, "tokenbook.uid_grounding.experiments")
    assert anchor == _sphinx_anchor("tokenbook.uid_grounding.experiments.seed_claims")


def test_the_front_page_scorecard_links_each_claim(tmp_path, monkeypatch):
    """``write_scorecard`` links from ``book/intro.html`` (``api/<part>.html``) through the API
    pages of the book's root."""
    (tmp_path / "book" / "api").mkdir(parents=True)
    (tmp_path / "book" / "api" / "uid_grounding.md").write_text(
        (REPO / "book" / "api" / "uid_grounding.md").read_text())
    frame = pd.DataFrame([{**claim_row(ROW), "chapter": "uid_grounding", "run_id": "r"}])
    monkeypatch.setattr(build, "gather_scorecard", lambda *a, **k: frame)
    text = build.write_scorecard(tmp_path).read_text()
    (href,) = _hrefs(text)
    assert href == "api/uid_grounding.html#tokenbook.uid_grounding.experiments.seed_claims"
    assert posixpath.normpath(posixpath.join("book", href.split("#")[0])) == \
        "book/api/uid_grounding.html"
    assert _hrefs(build.scorecard_markdown(frame)) == []  # no API pages: no link


@pytest.mark.parametrize("spec", [s for s in ALL_SPECS if s.computed_by],
                         ids=lambda s: s.id)
def test_every_chapter_claim_links_to_a_documented_function(spec):
    """Each claim of the four chapters' specs reaches an entry autodoc writes: the module is
    documented with its members on the linked page, and the function is public, listed in the
    module's ``__all__`` (where it has one) and has a docstring."""
    name = qualified_name(spec.computed_by)
    link = api_link(name, api_pages())
    assert link, f"{spec.id}: {name} has no API page"
    module_name, qualname = name.split(":")
    page = REPO / posixpath.normpath(posixpath.join("notebooks", link.split("#")[0]))
    assert _documented_with_members(page.with_suffix(".md"), module_name)
    module = importlib.import_module(module_name)
    head = qualname.split(".")[0]
    assert head in getattr(module, "__all__", [head]), f"{name}: not in __all__"
    obj = module
    for part in qualname.split("."):
        obj = getattr(obj, part)
    assert inspect.getdoc(obj), f"{name}: autodoc skips a member without a docstring"
    assert link.endswith("#" + _sphinx_anchor(f"{module_name}.{qualname}"))
