"""The claims as a page shows them: one flat row per claim, verdict badges, the chapter's
summary box, the compact claims table and its tidy DataFrame.

A claim is a :class:`tokenbook.claims.Claim` or a row of a ``claims.json`` (either schema);
:func:`claim_row` flattens both. :class:`ClaimsTable` is what :func:`tokenbook.claims.report`
returns at the end of a chapter; the book's scorecard page (:mod:`tokenbook.book.build`) uses the
same rows and tables. A claim's ``computed_by`` (``module:qualname``) links to that function's
entry in the API reference (:func:`api_pages`, :func:`api_link`).

>>> takeaway({"detected": 2, "not detected": 0, "not specific": 0, "not testable": 0}) != ""
True
"""

from __future__ import annotations

import json
import re
from html import escape as html_escape
from pathlib import Path
from typing import Any, Iterable, Mapping

import pandas as pd

from tokenbook.verdicts import MOST_SEEDS_SEARCHED, REPLICATION_TARGET

__all__ = ["claim_row", "verdict_counts", "takeaway", "verdict_badge", "claims_table_html",
           "summary_table_html", "counts_text", "summary_html", "claims_frame", "ClaimsTable",
           "api_pages", "api_link", "CHAPTER_API_BASE"]

#: verdicts in the order a summary counts them
TINY_ORDER = ("detected", "not detected", "not specific", "not testable")
PAPER_ORDER = ("holds", "does not hold", "not testable")
#: badge colours (background, text): the verdict is written out, so no emoji font is needed
VERDICT_STYLE = {"detected": ("#d9f2d9", "#14532d"), "holds": ("#d9f2d9", "#14532d"),
                 "not detected": ("#f8d7da", "#7f1d1d"), "does not hold": ("#f8d7da", "#7f1d1d"),
                 "not specific": ("#fff3cd", "#713f12"), "not testable": ("#e5e7eb", "#374151")}
#: the compact table's layout: fixed columns that fit the page's content column at 1280 px
TABLE_STYLE = ("width:100%;max-width:100%;table-layout:fixed;border-collapse:collapse;"
               "font-size:0.9em")
CELL_STYLE = "padding:0.3em 0.45em;vertical-align:top;text-align:left;overflow-wrap:anywhere"
#: the API reference's pages in this checkout (``book/api/*.md``, one per part of the library)
API_DIR = Path(__file__).resolve().parents[2] / "book" / "api"
#: from a chapter page (``notebooks/<chapter>.html``) to the API pages (``book/api/<part>.html``)
CHAPTER_API_BASE = "../book/api/"
#: a module documented with its members: ``.. automodule:: <name>`` and its ``:members:`` option
AUTOMODULE = re.compile(r"^\.\. automodule:: (tokenbook[\w.]*)[ \t]*\n((?:[ \t]+:[\w-]+:.*\n?)*)",
                        re.M)


def api_pages(base: str = CHAPTER_API_BASE, folder: str | Path | None = None) -> dict[str, str]:
    """``{module: address of its API page}`` for every module whose members the API reference
    documents (an ``automodule`` with ``:members:`` in ``<folder>/*.md``; default: this
    checkout's ``book/api``); the address is ``<base><page>.html``, relative to the page that
    links. Empty without the folder."""
    folder = Path(folder) if folder is not None else API_DIR
    pages = sorted(folder.glob("*.md")) if folder.is_dir() else []
    return {m[1]: f"{base}{page.stem}.html" for page in pages
            for m in AUTOMODULE.finditer(page.read_text()) if ":members:" in m[2]}


def api_link(computed_by: str, pages: Mapping[str, str]) -> str:
    """The address of ``computed_by``'s entry (``module:qualname``) in the API reference: its
    module's page (``pages``, :func:`api_pages`) and Sphinx's anchor ``#module.qualname``;
    ``""`` when the module has no page or the name is not a documented function's.

    >>> api_link("tokenbook.x:f", {"tokenbook.x": "api/x.html"})
    'api/x.html#tokenbook.x.f'
    """
    module, _, qualname = str(computed_by).partition(":")
    if not qualname or module not in pages or not re.fullmatch(r"[A-Za-z]\w*(\.\w+)*", qualname):
        return ""
    return f"{pages[module]}#{module}.{qualname}"


def _num(x: Any) -> float | None:
    try:
        v = float(x)
    except (TypeError, ValueError):
        return None
    return v if v == v and v not in (float("inf"), float("-inf")) else None


def _g(x: Any, digits: int = 3) -> str:
    v = _num(x)
    return "—" if v is None else f"{v:.{digits}g}"


def _ci(ci: Any) -> str:
    if not isinstance(ci, (list, tuple)) or len(ci) != 2:
        return ""
    lo, hi = _num(ci[0]), _num(ci[1])
    return "" if lo is None or hi is None else f" [{lo:.3g}, {hi:.3g}]"


def claim_row(claim: Any) -> dict:
    """One claim (a :class:`tokenbook.claims.Claim` or a ``claims.json`` row) as a flat dict
    of what the pages show, tolerant of both schemas: the current one (``on_value``,
    ``paired_effect``, ``n_root_seeds``, ``known_answer``, ``manipulation``, ``balance``,
    ``replication``,
    ``computed_by``) and the earlier one (``effect``, ``effect_ci``, ``effect_off``,
    ``n_seeds``); a missing key reads as None."""
    d = claim.to_dict() if hasattr(claim, "to_dict") else dict(claim)
    d = {k: None if isinstance(v, float) and v != v else v for k, v in d.items()}  # NaN: none
    get = d.get
    tiny = get("scale") == "tiny" or get("verdict") in ("detected", "not detected",
                                                        "not specific")
    n = get("n_root_seeds", get("n_seeds", get("n")))  # get("n"): an already flat row
    on = get("on_value", get("effect"))
    off = get("off_value", get("effect_off"))
    paired = get("paired_effect")
    if paired is None and _num(on) is not None and _num(off) is not None:
        paired = float(on) - float(off)  # earlier runs: the mean of the same seeds' differences
    return {
        "id": str(get("id", "")), "claim": str(get("claim", "") or ""),
        "paper": str(get("paper", "") or ""), "statistic": str(get("statistic", "") or ""),
        "expected": str(get("expected", "") or ""), "verdict": str(get("verdict", "") or ""),
        "note": str(get("note", "") or ""), "mechanism": str(get("mechanism", "") or ""),
        "scale": "tiny" if tiny else (get("scale") or "paper"),
        "n": int(n) if _num(n) is not None else None,
        "share_on": _num(get("share_on")), "share_off": _num(get("share_off")),
        "share_on_ci": get("share_on_ci"), "share_off_ci": get("share_off_ci"),
        "on_value": on, "on_ci": get("on_ci", get("effect_ci")),
        "off_value": off, "off_ci": get("off_ci"),
        "paired_effect": paired, "paired_ci": get("paired_ci"),
        "known_answer": get("known_answer"), "manipulation": get("manipulation"),
        "balance": get("balance"),
        "replication": _num(get("replication")), "seeds_needed": _num(get("seeds_needed")),
        "computed_by": str(get("computed_by") or ""),
        "value": get("value"), "published": get("published"),
        "chapter": str(get("chapter", "") or ""),
    }


def verdict_counts(rows: Iterable[dict]) -> dict[str, int]:
    """``{verdict: count}`` over ``rows`` (:func:`claim_row` dicts), every verdict of the
    scales present listed (0 where none)."""
    rows = list(rows)
    counts: dict[str, int] = {}
    if any(r["scale"] == "tiny" for r in rows):
        counts.update({v: 0 for v in TINY_ORDER})
    if any(r["scale"] != "tiny" for r in rows):
        counts.update({v: 0 for v in PAPER_ORDER})
    for r in rows:
        counts[r["verdict"]] = counts.get(r["verdict"], 0) + 1
    return counts


def takeaway(counts: dict[str, int]) -> str:
    """One line on what a chapter shows, from its verdict counts."""
    total = sum(counts.values())
    untestable = counts.get("not testable", 0)
    testable = total - untestable
    if total == 0:
        return "No claims were checked."
    if testable == 0:
        return "No claim is testable at this scale: each claim's note says why."
    found = counts.get("detected", 0) + counts.get("holds", 0)
    tiny = any(v in counts for v in TINY_ORDER[:3])
    word = "detected" if tiny else "hold"
    if found == testable and testable == 1:
        text = ("The pipeline detects the one testable effect where it is planted, and not "
                "where it is switched off." if tiny else "The one testable claim holds.")
    elif found == testable:
        text = (f"The pipeline detects all {testable} testable effects where they are planted, "
                f"and not where they are switched off." if tiny else
                f"All {testable} testable claims hold.")
    else:
        parts = [f"{found} of {testable} testable claim{'s' * (testable != 1)} "
                 f"{word if testable != 1 or tiny else 'holds'}"]
        if counts.get("not specific"):
            parts.append(f"{counts['not specific']} also show with the mechanism off "
                         f"(not specific)")
        missed = counts.get("not detected", 0) + counts.get("does not hold", 0)
        if missed:
            parts.append(f"{missed} " + ("not detected" if tiny else "does not hold"
                                         if missed == 1 else "do not hold"))
        text = "; ".join(parts) + "."
    if untestable:
        text += (f" {untestable} {'is' if untestable == 1 else 'are'} not testable at this "
                 f"scale.")
    return text


def _seeds_needed(r: dict, target: float = REPLICATION_TARGET) -> str:
    """How many root seeds a claim below ``target`` would need for two seed sets to agree that
    often (:func:`tokenbook.verdicts.seeds_for_agreement`), in words; empty above it."""
    if r.get("replication") is None or r["replication"] >= target:
        return ""
    n = r.get("seeds_needed")
    if n is None:                       # a run from before the field
        return ""
    return (f"{target:.0%} from {int(n)} root seeds" if n <= MOST_SEEDS_SEARCHED
            else f"not {target:.0%} even at {MOST_SEEDS_SEARCHED} root seeds")


def replication_text(rows: Iterable[dict], target: float = REPLICATION_TARGET) -> str:
    """One sentence on how many judged tiny claims (:func:`claim_row` dicts with a
    ``replication``) would get the same verdict on a new set of root seeds with at least
    ``target`` chance, naming those below it; empty when no row has a replication chance."""
    judged = [r for r in rows if r["scale"] == "tiny" and r["replication"] is not None]
    if not judged:
        return ""
    below = sorted((r for r in judged if r["replication"] < target),
                   key=lambda r: r["replication"])
    text = (f"Replication: {len(judged) - len(below)} of {len(judged)} judged tiny claims "
            f"would get the same verdict on a new set of root seeds with at least "
            f"{target:.0%} chance (each claim's chance from a bootstrap over its root seeds: "
            f"with few seeds an upper bound, since a resample shows no value no seed showed).")
    if below:
        names = ", ".join(f"`{r['id']}` ("
                          + "; ".join(filter(None, (f"{r['replication']:.0%}",
                                                    _seeds_needed(r, target))))
                          + ")" for r in below)
        text += (f" Below it, on the verdict rule's boundary, where another seed set can give "
                 f"another verdict: {names}. (The second number: how many root seeds two "
                 f"sets would need to agree that often, simulated from a normal fitted to the "
                 f"claim's own seeds, `verdicts.seeds_for_agreement`.)")
    return text


def _esc(x: Any) -> str:
    return html_escape(str(x), quote=True)


def verdict_badge(verdict: str) -> str:
    """The verdict as a coloured badge (text, not an icon)."""
    bg, fg = VERDICT_STYLE.get(verdict, ("#e5e7eb", "#374151"))
    return (f'<span class="tb-verdict" style="background:{bg};color:{fg};padding:0.05em 0.4em;'
            f'border-radius:0.3em;white-space:nowrap">{_esc(verdict)}</span>')


def _seeds(share: float | None, n: int | None) -> str:
    if share is None or not n:
        return "—"
    return f"{round(share * n)}/{n}"


def _on_alone(alone: Any) -> str:
    """What a known answer without off values says by its on values alone (empty if none)."""
    if not isinstance(alone, dict) or alone.get("ci") is None:
        return ""
    low, high = alone["ci"]
    return (f"; its on values alone {'meet' if alone.get('meets') else 'do not meet'} the "
            f"expectation ({_g(alone.get('mean'))} [{_g(low)}, {_g(high)}])")


def _json_short(x: Any, limit: int = 120) -> str:
    text = x if isinstance(x, str) else json.dumps(x, ensure_ascii=False, default=str)
    return text if len(text) <= limit else text[:limit - 1] + "…"


def _details(r: dict, api: Mapping[str, str] | None = None) -> str:
    """The long fields of a claim, folded under its id; ``computed_by`` links to its API
    entry where ``api`` (:func:`api_pages`) documents its module."""
    lines = [f"<strong>{_esc(r['claim'])}</strong>"
             + (f" <em>({_esc(r['paper'])})</em>" if r["paper"] else "")]
    if r["statistic"]:
        lines.append(f"Statistic: {_esc(r['statistic'])}; expected {_esc(r['expected'])}")
    if r["scale"] == "tiny":
        if r["on_value"] is not None or r["off_value"] is not None:
            text = (f"On: {_g(r['on_value'])}{_ci(r['on_ci'])}; "
                    f"off: {_g(r['off_value'])}{_ci(r['off_ci'])}")
            if r["paired_effect"] is not None:
                text += f"; on − off: {_g(r['paired_effect'])}{_ci(r['paired_ci'])}"
            lines.append(_esc(text) + (" (mean over root seeds, 95% CI)" if r["n"] else ""))
        if r["share_on"] is not None:
            lines.append(_esc(f"Seeds holding: on {_seeds(r['share_on'], r['n'])}"
                              f"{_ci(r['share_on_ci'])}, off {_seeds(r['share_off'], r['n'])}"
                              f"{_ci(r['share_off_ci'])} (Wilson 95% CI)"))
        ka = r["known_answer"]
        if isinstance(ka, dict):
            lines.append(_esc(f"Known answer: on {_g(ka.get('on'))}, off {_g(ka.get('off'))}"
                              + (f"; judged by the same rule: {ka['verdict']}"
                                 if ka.get("verdict") else "")
                              + _on_alone(ka.get("on_alone"))
                              + (f" ({ka['how']})" if ka.get("how") else "")))
        mc = r["manipulation"]
        if isinstance(mc, dict):
            passed = mc.get("passed")
            text = ("Manipulation check: " + ("passed" if passed else "failed" if passed
                                              is not None else "—"))
            if mc.get("what"):
                text += f": {mc['what']}"
            if mc.get("values") is not None:
                text += f" ({_json_short(mc['values'])})"
            lines.append(_esc(text))
        bc = r["balance"]
        if isinstance(bc, dict):
            text = "Balance check: " + ("passed" if bc.get("passed") else "failed")
            text += f": {bc.get('what', '')} moves by at most {_g(bc.get('max_abs_difference'))}"
            text += f" between on and off (tolerance {_g(bc.get('tolerance'))})"
            lines.append(_esc(text))
        if r["replication"] is not None:
            needed = _seeds_needed(r)
            lines.append(_esc(f"Replication: {r['replication']:.0%} chance of the same verdict "
                              f"on a new set of root seeds (simulated)"
                              + (f"; two sets agree {needed}" if needed else "")))
        if r["mechanism"]:
            lines.append("Mechanism: " + _esc(r["mechanism"]))
    elif r["published"] is not None:
        lines.append(_esc(f"Published: {_json_short(r['published'])}"))
    if r["note"]:
        lines.append("Note: " + _esc(r["note"]))
    if r["computed_by"]:
        name = f"<code>{_esc(r['computed_by'])}</code>"
        href = api_link(r["computed_by"], api or {})
        lines.append("Computed by " + (f'<a class="tb-computed-by" href="{_esc(href)}">{name}</a>'
                                       if href else name))
    return "".join(f'<div style="margin:0.2em 0">{ln}</div>' for ln in lines)


def _claim_cell(r: dict, api: Mapping[str, str] | None = None) -> str:
    return (f'<details class="tb-claim"><summary title="{_esc(r["claim"])}">'
            f'<code>{_esc(r["id"])}</code></summary>{_details(r, api)}</details>')


def _th(text: str, width: str) -> str:
    return f'<th style="{CELL_STYLE};width:{width}">{text}</th>'


def _td(text: str) -> str:
    return f'<td style="{CELL_STYLE}">{text}</td>'


def claims_table_html(claims: Iterable[Any], *, by_chapter: bool = False,
                      api: Mapping[str, str] | None = None) -> str:
    """The compact claims table (HTML): one row per claim with its id (click it for the
    wording, statistic, values with intervals, known answer, checks and note), its verdict and,
    at tiny scale, the root seeds in which it holds with the mechanism on and off and the
    on − off effect; at paper scale the measured and the published value. Narrow enough for
    the page's content column at 1280 px (fixed layout, long ids wrap). Rows carry
    ``data-claim-id`` and ``data-verdict`` (read back by :func:`tokenbook.book.nbcheck`);
    ``by_chapter`` adds a heading row per chapter (rows need a ``chapter``). ``api``
    (:func:`api_pages`, with addresses relative to the page that shows the table): each
    claim's ``computed_by`` links to its function's API entry."""
    rows = [claim_row(c) for c in claims]
    out = []
    for scale in ("tiny", "paper"):
        part = [r for r in rows if (r["scale"] == "tiny") == (scale == "tiny")]
        if not part:
            continue
        if scale == "tiny":
            head = (_th("Claim", "44%") + _th("Verdict", "21%") + _th("Seeds, on", "11%")
                    + _th("Seeds, off", "11%") + _th("On − off", "13%"))
        else:
            head = (_th("Claim", "44%") + _th("Verdict", "21%") + _th("Measured", "17%")
                    + _th("Published", "18%"))
        body, chapter = [], None
        for r in part:
            if by_chapter and r["chapter"] != chapter:
                chapter = r["chapter"]
                body.append(f'<tr class="tb-chapter"><th colspan="5" style="{CELL_STYLE};'
                            f'border-bottom:1px solid #ccc">{_esc(chapter)}</th></tr>')
            cells = _td(_claim_cell(r, api)) + _td(verdict_badge(r["verdict"]))
            if scale == "tiny":
                cells += (_td(_seeds(r["share_on"], r["n"])) + _td(_seeds(r["share_off"], r["n"]))
                          + _td(_esc(_g(r["paired_effect"]))))
            else:
                measured = r["value"] if isinstance(r["value"], str) else _g(r["value"], 4)
                cells += _td(_esc(_json_short(measured, 40))) + _td(
                    _esc(_json_short(r["published"], 40)) if r["published"] is not None
                    else "—")
            body.append(f'<tr data-claim-id="{_esc(r["id"])}" data-verdict="{_esc(r["verdict"])}"'
                        f'>{cells}</tr>')
        out.append(f'<table class="tb-claims" style="{TABLE_STYLE}"><thead><tr>{head}</tr>'
                   f'</thead><tbody>{"".join(body)}</tbody></table>')
    return "".join(out)


def summary_table_html(summaries: Iterable[dict], links: dict[str, str] | None = None) -> str:
    """The per-chapter summary (HTML, fixed layout: it fits the column at 1280 px): chapter
    (linked where ``links`` has an ``href``), claims and the count of each verdict, with a
    row below saying what the chapter shows. ``summaries``:
    :func:`tokenbook.book.build.chapter_summaries`'s dicts."""
    summaries = list(summaries)
    verdicts = list(dict.fromkeys(v for s in summaries for v in s["counts"]))
    width = 60 // max(len(verdicts), 1)

    def th(text: str, pct: int) -> str:  # words wrap between, never inside
        return (f'<th style="{CELL_STYLE.replace("overflow-wrap:anywhere", "overflow-wrap:normal")}'
                f';width:{pct}%">{text}</th>')

    head = (th("Chapter", 28) + th("Claims", 100 - 28 - width * len(verdicts))
            + "".join(th(_esc(v.capitalize()), width) for v in verdicts))
    body = []
    for s in summaries:
        name = f"<code>{_esc(s['chapter'])}</code>"
        href = (links or {}).get(s["chapter"])
        cells = _td(f'<a href="{_esc(href)}">{name}</a>' if href else name) + _td(str(s["claims"]))
        cells += "".join(_td(str(s["counts"].get(v, 0))) for v in verdicts)
        body.append(f"<tr>{cells}</tr>")
        body.append(f'<tr class="tb-shows"><td colspan="{2 + len(verdicts)}" style="{CELL_STYLE};'
                    f'padding-top:0;border-bottom:1px solid #ddd"><em>What this chapter shows:'
                    f'</em> {_esc(s["shows"])}</td></tr>')
    return (f'<table class="tb-summary-table" style="{TABLE_STYLE}"><thead><tr>{head}</tr>'
            f'</thead><tbody>{"".join(body)}</tbody></table>')


def counts_text(counts: dict[str, int]) -> str:
    """``"3 detected, 1 not specific, 0 not detected, 2 not testable"``-style counts."""
    return ", ".join(f"{k} {v}" for v, k in counts.items())


def summary_html(claims: Iterable[Any], *, link: str | None = None) -> str:
    """A chapter's summary box: its claims counted by verdict and the one-line takeaway
    (:func:`takeaway`); ``link`` (an ``href``) points at the full claims table."""
    rows = [claim_row(c) for c in claims]
    counts = verdict_counts(rows)
    badges = " ".join(f"{verdict_badge(v)}&nbsp;{k}" for v, k in counts.items())
    more = f' <a href="{_esc(link)}">The claims table</a>.' if link else ""
    return ('<div class="tb-summary" style="border:1px solid #cbd5e1;border-left:4px solid '
            '#2563eb;border-radius:0.3em;padding:0.5em 0.8em;margin:0.8em 0">'
            f'<strong>At a glance: {len(rows)} claim{"s" * (len(rows) != 1)}</strong> '
            f'&nbsp;{badges}<div style="margin-top:0.3em">{_esc(takeaway(counts))}{more}</div>'
            '</div>')


class ClaimsTable:
    """What :func:`tokenbook.claims.report` shows: the summary box and the compact claims
    table as HTML (Jupyter, the book), a plain-text table elsewhere; ``frame`` is
    :func:`claims_frame` of the same claims. Each claim's ``computed_by`` links to its API
    entry as seen from a chapter page (:data:`CHAPTER_API_BASE`)."""

    def __init__(self, claims: Iterable[Any]) -> None:
        self.rows = [claim_row(c) for c in claims]

    @property
    def frame(self) -> pd.DataFrame:
        return claims_frame(self.rows)

    def _repr_html_(self) -> str:
        return summary_html(self.rows) + claims_table_html(self.rows, api=api_pages())

    def __repr__(self) -> str:
        counts = verdict_counts(self.rows)
        width = max([len(r["id"]) for r in self.rows] + [5])
        lines = [f"{len(self.rows)} claims: {counts_text(counts)}. {takeaway(counts)}"]
        for r in self.rows:
            extra = (f"on {_seeds(r['share_on'], r['n'])}, off {_seeds(r['share_off'], r['n'])}"
                     if r["scale"] == "tiny" else f"measured {_g(r['value'], 4)}")
            lines.append(f"{r['id']:<{width}}  {r['verdict']:<13}  {extra}")
        return "\n".join(lines)


def claims_frame(claims: Iterable[Any]) -> pd.DataFrame:
    """The claims (:class:`Claim` objects or ``claims.json`` rows, either schema) as a tidy
    pandas DataFrame, one row per claim (:class:`tokenbook.claims.Claim` objects or
    ``claims.json`` rows), the verdict second: id, verdict, then at tiny scale
    on / off (root seeds in which the claim holds with the mechanism on / off, k/n with the
    Wilson 95% interval), effect (on − off, paired over root seeds, with its 95% interval),
    on value, off value; at paper scale measured and published; then claim, paper, statistic,
    expected, note. The page shows the compact form of the same claims
    (:func:`claims_table_html`)."""
    rows = []
    for r in map(claim_row, claims):
        row = {"id": r["id"], "verdict": r["verdict"]}
        if r["scale"] == "tiny":
            row.update({"on": _seeds(r["share_on"], r["n"]) + _ci(r["share_on_ci"]),
                        "off": _seeds(r["share_off"], r["n"]) + _ci(r["share_off_ci"]),
                        "effect": _g(r["paired_effect"]) + _ci(r["paired_ci"]),
                        "on value": _g(r["on_value"]) + _ci(r["on_ci"]),
                        "off value": _g(r["off_value"]) + _ci(r["off_ci"])})
        else:
            value = r["value"]
            row.update({"measured": f"{value:.4g}" if isinstance(value, float) else value,
                        "published": "—" if r["published"] is None else r["published"]})
        row.update({"claim": r["claim"], "paper": r["paper"], "statistic": r["statistic"],
                    "expected": r["expected"], "note": r["note"]})
        rows.append(row)
    return pd.DataFrame(rows)
