"""The authors' own memorisation maps (Dankers, Titov & Hupkes 2023), read and analysed.

The authors publish no data deposit (method notes §6.3): their pipeline writes pickles that they
share on request, and a public demo shows their maps as Plotly pages. This module reads both,
into one *map table* per map — one row per sentence pair (or per phrase) with ``source, target,
tm, gs, cm`` — and runs the chapter's map-level analyses on them, with verdicts.

**(a) The pickled maps** (``analysis/compute_memorisation.py``, notes §6.2):
``memorisation_pickled/en-<lang>/counterfactual_memorisation_{ref,hyp}.pickle``, each a tuple
``(cm, train_scores, test_scores)`` of dicts keyed by ``(src_bpe, trg_bpe)`` (subword-nmt BPE,
``@@ `` continuation marks). ``ref``: per-token geometric-mean probability of the reference
(0-1); ``hyp``: BLEU of the greedy hypothesis (0-100, divided by 100 here so both maps share the
0-1 axes). TM = ``train_scores``, GS = ``test_scores``, CM = ``cm`` (= TM − GS, checked). The
files are read with a restricted unpickler that builds only tuples, dicts, strings and numbers:
a pickle that asks for anything else is refused (unpickling can run code).

**(b) The demo's Plotly pages** (``memorisation-mt-demo.github.io/memorisation-mt-demo``,
repository ``memorisation-mt-demo/memorisation-mt-demo``): each page embeds one
``Plotly.newPlot(div_id, traces, layout, config)`` call; the traces are read as JSON.

* Phrase maps (2025, EN-NL: ``figures/nl_idioms.html``, ``nl_proverbs.html``,
  ``nl_non-comp_compounds.html``): one scatter trace per phrase and translation type, named
  ``"<phrase>, <type>"``; ``x`` = mean TM, ``y`` = mean GS of the training pairs containing the
  phrase; ``customdata`` = ``[[phrase, "SRC: <example source>...", "TRG: <example target>..."]]``;
  ``hovertemplate`` = ``"<group>=%{customdata[0]}<br>symbol=<type>…size=%{marker.size}…"``
  (``group``: idioms, proverbs, …; ``type``: word-for-word or paraphrase); ``marker.size`` grows
  with the number of pairs (in the published pages every size is the square root of a whole
  number, so ``n_pairs`` = size², rounded; our reading). Rows: ``group, phrase, translation, tm,
  gs, cm, marker_size, n_pairs, source, target`` (the example pair, cut at ~100 characters by
  the demo).
* Per-language maps (``figures/<lang>_hypothesis-based={False,True}.html``, 10k random pairs
  each): scatter traces with ``x`` = TM, ``y`` = GS and, per point, the pair's source and target
  — in ``customdata`` fields named in the ``hovertemplate`` (a name that is or holds the word
  ``src``/``source``/``example_src``, and ``trg``/``tgt``/``target``/``translation``/
  ``example_trg``) or in ``text``/``hovertext`` as ``"SRC: …<br>TRG: …"``; ``x``/``y`` as JSON
  lists or plotly.py 6's typed arrays (``{"dtype", "bdata"}``).
  These pages are larger than the stored copies we could inspect, so this layout is the phrase
  pages' convention applied per point; a page in another layout gets an error naming what was
  expected.

All map values are on the 0-1 scale of the authors' axes (probabilities, or BLEU / 100).
"""

from __future__ import annotations

import base64
import html
import io
import json
import pickle
import re
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np
import pandas as pd

from tokenbook.claims import Claim
from tokenbook.minsizes import counts_note, shortfall
from tokenbook.seeds import derive_seed
from tokenbook.memorisation_cartography.crosslingual import cross_language_correlations
from tokenbook.memorisation_cartography.estimator import map_regions
from tokenbook.memorisation_cartography.features import (FEATURES, reference_languages,
                                                         surface_features)
from tokenbook.memorisation_cartography.predict import feature_correlations, fit_map_predictor

__all__ = ["MapFormatError", "ReleasedMaps", "read_pickled_map", "read_demo_page", "load_maps",
           "map_features", "predictor_comparison", "phrase_groups", "crosslingual_maps",
           "released_claims", "PUBLISHED_PHRASE_MEANS", "MAP_COLUMNS", "regions_table",
           "shared_sources", "analyse"]

MAP_COLUMNS = ["source", "target", "tm", "gs", "cm"]
_CM_TOL = 1e-6
_NEWPLOT = "Plotly.newPlot("

#: the notes' means over the demo's EN-NL phrase maps (§3.3, derived from the pages: our
#: reading, not numbers printed in the paper): (group, translation) -> (phrases, TM, GS, CM)
PUBLISHED_PHRASE_MEANS = {("idioms", "word-for-word"): (75, 0.61, 0.28, 0.33),
                          ("idioms", "paraphrase"): (92, 0.50, 0.16, 0.34),
                          ("proverbs", "word-for-word"): (70, 0.62, 0.33, 0.29),
                          ("proverbs", "paraphrase"): (32, 0.35, 0.06, 0.28)}


class MapFormatError(ValueError):
    """A file is not in the format of the authors' pickles or the demo's Plotly pages."""


# --------------------------------------------------------------------------- (a) pickles
class _DataOnlyUnpickler(pickle.Unpickler):
    """Builds tuples, dicts, lists, strings and numbers only (numpy scalars allowed)."""

    _ALLOWED = {("numpy", "dtype"), ("numpy.core.multiarray", "scalar"),
                ("numpy._core.multiarray", "scalar")}

    def find_class(self, module, name):
        if (module, name) in self._ALLOWED:
            return super().find_class(module, name)
        raise pickle.UnpicklingError(
            f"the pickle asks for {module}.{name}; a map pickle holds only a tuple of dicts of "
            "numbers (refused: unpickling other objects can run code)")


def _debpe(text: str) -> str:
    """subword-nmt BPE → words (``"hel@@ lo"`` → ``"hello"``)."""
    return re.sub(r"@@( |$)", "", text)


def _lang_from_path(path: Path) -> str | None:
    for part in (path.parent.name, path.stem):
        m = re.fullmatch(r"en-([a-z]{2,3})", part)
        if m:
            return m.group(1)
    m = re.match(r"([a-z]{2,3})_", path.name)
    return m.group(1) if m else None


def read_pickled_map(path: str | Path, *, lang: str | None = None) -> pd.DataFrame:
    """One of the authors' ``counterfactual_memorisation_{ref,hyp}.pickle`` as a map table.

    Returns ``lang, metric ("ref"/"hyp"), pair_id, source_bpe, target_bpe, source, target, tm,
    gs, cm`` (0-1; ``hyp`` BLEU divided by 100), ``source``/``target`` with the BPE marks
    removed. ``lang``: the target language (default: from the folder ``en-<lang>``).
    """
    path = Path(path)
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise FileNotFoundError(f"map pickle {path} cannot be read ({exc.strerror}); get "
                                "counterfactual_memorisation_ref.pickle from the authors (see the "
                                "README)") from None
    try:
        obj = _DataOnlyUnpickler(io.BytesIO(raw)).load()
    except (pickle.UnpicklingError, EOFError, ValueError, TypeError, AttributeError) as exc:
        raise MapFormatError(f"{path}: not a map pickle ({exc})") from None
    expected = ("a tuple (cm, train_scores, test_scores) of dicts keyed by (src_bpe, trg_bpe), "
                "as compute_memorisation.py writes")
    if not isinstance(obj, tuple) or len(obj) != 3 or not all(isinstance(d, dict) for d in obj):
        raise MapFormatError(f"{path}: holds a {type(obj).__name__}; expected {expected}")
    cm, train, test = obj
    keys = list(cm)
    if not keys:
        raise MapFormatError(f"{path}: the cm dict is empty")
    bad = next((k for k in keys if not (isinstance(k, tuple) and len(k) == 2
                                        and all(isinstance(s, str) for s in k))), None)
    if bad is not None:
        raise MapFormatError(f"{path}: key {bad!r:.80} is not a (src_bpe, trg_bpe) pair of "
                             f"strings; expected {expected}")
    missing = [k for k in keys if k not in train or k not in test]
    if missing:
        raise MapFormatError(f"{path}: {len(missing)} pair(s) of cm lack a train or test score "
                             f"(first {missing[0]!r:.80}); expected the same keys in all three")
    metric = "hyp" if "hyp" in path.stem else "ref"
    scale = 100.0 if metric == "hyp" else 1.0
    try:
        vals = np.array([[cm[k], train[k], test[k]] for k in keys], dtype=float) / scale
    except (TypeError, ValueError):
        raise MapFormatError(f"{path}: scores must be numbers") from None
    if not np.isfinite(vals).all() or vals[:, 1:].min() < -_CM_TOL or \
            vals[:, 1:].max() > 1 + _CM_TOL:
        raise MapFormatError(f"{path}: train/test scores outside [0, {scale:g}] or not finite; "
                             f"expected {'BLEU (0-100)' if metric == 'hyp' else 'probabilities'}")
    gap = np.abs(vals[:, 0] - (vals[:, 1] - vals[:, 2]))
    if gap.max() > 1e-4:
        i = int(gap.argmax())
        raise MapFormatError(f"{path}: cm is not train − test for pair {keys[i]!r:.80} "
                             f"({vals[i, 0]:.4f} vs {vals[i, 1] - vals[i, 2]:.4f})")
    out = pd.DataFrame({
        "lang": lang or _lang_from_path(path) or "?", "metric": metric,
        "pair_id": np.arange(len(keys)),
        "source_bpe": [k[0] for k in keys], "target_bpe": [k[1] for k in keys],
        "source": [_debpe(k[0]) for k in keys], "target": [_debpe(k[1]) for k in keys],
        "tm": vals[:, 1], "gs": vals[:, 2], "cm": vals[:, 0]})
    out.attrs.update(kind="examples", origin=str(path))
    return out


# --------------------------------------------------------------------------- (b) demo pages
def _read_text(source: str | Path) -> str:
    src = str(source)
    if "://" in src:
        try:
            with urllib.request.urlopen(src, timeout=60) as resp:  # noqa: S310 (user's URL)
                return resp.read().decode("utf-8")
        except Exception as exc:
            raise MapFormatError(f"{src}: cannot be downloaded ({type(exc).__name__}: "
                                 f"{str(exc)[:200]}); download it and pass the file") from None
    try:
        return Path(src).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise FileNotFoundError(f"demo page {src!r} not found; save the page from the authors' "
                                "demo (see the README) and pass its path") from None
    except UnicodeDecodeError as exc:
        raise MapFormatError(f"{src}: not UTF-8 text (byte {exc.start}); expected the demo's "
                             "HTML page") from None


def _plotly_traces(text: str, where: str) -> list[dict]:
    """The traces (second argument) of the page's ``Plotly.newPlot`` call."""
    at = text.find(_NEWPLOT)
    if at < 0:
        raise MapFormatError(f"{where}: no {_NEWPLOT}…) call; expected a Plotly HTML page of "
                             "the authors' demo (plotly.js with one newPlot(div, traces, layout, "
                             "config) call)")
    dec = json.JSONDecoder()
    pos = at + len(_NEWPLOT)
    try:
        pos = _skip(text, pos)
        _, pos = dec.raw_decode(text, pos)  # the div id
        pos = _skip(text, pos, ",")
        traces, _ = dec.raw_decode(text, pos)
    except (json.JSONDecodeError, ValueError) as exc:
        raise MapFormatError(f"{where}: the {_NEWPLOT}…) arguments are not (\"div-id\", [traces "
                             f"as JSON], …) ({exc})") from None
    if not isinstance(traces, list) or not traces or not all(isinstance(t, dict)
                                                             for t in traces):
        raise MapFormatError(f"{where}: the second argument of {_NEWPLOT}…) is not a list of "
                             "trace objects")
    return traces


def _skip(text: str, pos: int, sep: str = "") -> int:
    while pos < len(text) and text[pos].isspace():
        pos += 1
    if sep:
        if text[pos:pos + 1] != sep:
            raise ValueError(f"expected {sep!r} at character {pos}")
        pos += 1
        while pos < len(text) and text[pos].isspace():
            pos += 1
    return pos


_FIELD = re.compile(r"([^=<>]+)=%\{customdata\[(\d+)\]\}")
_CONST = re.compile(r"(?:^|<br>)([^=<>%]+)=([^%<>{}]+?)(?=<br>|<extra>|$)")
_SOURCE_NAMES = ("example_src", "src", "source")
_TARGET_NAMES = ("example_trg", "trg", "tgt", "target", "translation")


def _is_field(name: str, names: Sequence[str]) -> bool:
    """``name`` names a source (target) field: one of ``names`` or a word of it is
    (``"source sentence"``, ``"example_trg"``)."""
    words = re.split(r"[\s_]+", name.strip().lower())
    return name.strip().lower() in names or any(w in names for w in words)


def _strip_prefix(text: Any, prefix: str) -> str:
    s = "" if text is None else str(text)
    return s[len(prefix):].strip() if s.startswith(prefix) else s.strip()


def _trace_fields(trace: dict) -> tuple[dict[str, int], dict[str, str]]:
    tmpl = str(trace.get("hovertemplate", ""))
    fields = {name.strip().lstrip(">"): int(i) for name, i in _FIELD.findall(tmpl)}
    consts = {k.strip(): v.strip() for k, v in _CONST.findall(tmpl) if "%{" not in v}
    return fields, consts


def _numbers(value: Any) -> np.ndarray:
    """A Plotly number array: a JSON list, or plotly.py ≥ 6's typed array
    ``{"dtype": "f8", "bdata": "<base64>"}``."""
    if isinstance(value, dict) and "bdata" in value:
        return np.frombuffer(base64.b64decode(value["bdata"]),
                             dtype=np.dtype(value.get("dtype", "f8"))).astype(float)
    return np.asarray(value, dtype=float)


def _xy(trace: dict, where: str, k: int) -> tuple[np.ndarray, np.ndarray]:
    try:
        x = _numbers(trace["x"])
        y = _numbers(trace["y"])
    except KeyError as exc:
        raise MapFormatError(f"{where}: trace {k} has no {exc.args[0]!r} array; expected x = "
                             "training memorisation, y = generalisation score") from None
    except (TypeError, ValueError):
        raise MapFormatError(f"{where}: trace {k}: x/y are not numbers or Plotly typed "
                             "arrays") from None
    if x.shape != y.shape:
        raise MapFormatError(f"{where}: trace {k}: {x.size} x values but {y.size} y values")
    return x, y


def read_demo_page(source: str | Path) -> pd.DataFrame:
    """One of the demo's Plotly pages as a map table (``attrs["kind"]``: ``"phrases"`` or
    ``"examples"``; see the module docstring for both layouts)."""
    where = str(source)
    traces = [t for t in _plotly_traces(_read_text(source), where)
              if t.get("type", "scatter") in ("scatter", "scattergl")]
    if not traces:
        raise MapFormatError(f"{where}: no scatter trace; expected the demo's TM/GS scatter")
    fields, consts = _trace_fields(traces[0])
    group = next((f for f, i in fields.items() if i == 0
                  and not _is_field(f, (*_SOURCE_NAMES, *_TARGET_NAMES))), None)
    if group is not None and "symbol" in consts:
        table = _phrase_rows(traces, where, group)
    else:
        table = _example_rows(traces, where)
    m = re.match(r"([a-z]{2,3})_(.*)\.html?$", Path(where.split("?")[0]).name)
    table.insert(0, "lang", m.group(1) if m else "?")
    table.insert(1, "metric", "hyp" if m and "hypothesis-based=True" in m.group(2) else "ref")
    table.insert(2, "pair_id", np.arange(len(table)))
    table["cm"] = table["tm"] - table["gs"]
    table.attrs.update(kind="phrases" if "phrase" in table else "examples", origin=where)
    return table


def _phrase_rows(traces: list[dict], where: str, group: str) -> pd.DataFrame:
    rows = []
    for k, t in enumerate(traces):
        fields, consts = _trace_fields(t)
        if fields.get(group) != 0 or "symbol" not in consts:
            raise MapFormatError(f"{where}: trace {k} is not a phrase trace like the first "
                                 f"({group}=%{{customdata[0]}}<br>symbol=…); a page mixes "
                                 "layouts")
        x, y = _xy(t, where, k)
        custom = t.get("customdata")
        if not isinstance(custom, list) or len(custom) != x.size:
            raise MapFormatError(f"{where}: trace {k}: customdata must hold one row per point "
                                 f"([phrase, example_src, example_trg]); found {custom!r:.80}")
        size = (t.get("marker") or {}).get("size", np.nan)
        sizes = np.broadcast_to(np.asarray(size, dtype=float), x.shape)
        src_i, trg_i = fields.get("example_src"), fields.get("example_trg")
        for j in range(x.size):
            row = custom[j] if isinstance(custom[j], list) else [custom[j]]
            rows.append({"group": group, "phrase": str(row[0]),
                         "translation": consts["symbol"], "tm": x[j], "gs": y[j],
                         "marker_size": sizes[j], "n_pairs": float(np.round(sizes[j] ** 2)),
                         "source": html.unescape(_strip_prefix(
                             row[src_i] if src_i is not None and src_i < len(row) else "",
                             "SRC:")),
                         "target": html.unescape(_strip_prefix(
                             row[trg_i] if trg_i is not None and trg_i < len(row) else "",
                             "TRG:"))})
    return pd.DataFrame(rows)


def _example_rows(traces: list[dict], where: str) -> pd.DataFrame:
    parts = []
    for k, t in enumerate(traces):
        x, y = _xy(t, where, k)
        fields, _ = _trace_fields(t)
        src_i = next((i for n, i in fields.items() if _is_field(n, _SOURCE_NAMES)), None)
        trg_i = next((i for n, i in fields.items() if _is_field(n, _TARGET_NAMES)), None)
        custom = t.get("customdata")
        if src_i is not None and trg_i is not None and isinstance(custom, list) \
                and len(custom) == x.size:
            src = [_strip_prefix(r[src_i], "SRC:") for r in custom]
            trg = [_strip_prefix(r[trg_i], "TRG:") for r in custom]
        else:
            text = t.get("hovertext", t.get("text"))
            if not isinstance(text, list) or len(text) != x.size:
                raise MapFormatError(
                    f"{where}: trace {k} has no per-point source and target; expected "
                    "customdata fields named src/trg (or source/target, example_src/example_trg) "
                    "in the hovertemplate, or text/hovertext \"SRC: …<br>TRG: …\" per point")
            src, trg = [], []
            for s in text:
                m = re.search(r"SRC:\s*(.*?)\s*<br>\s*TRG:\s*(.*)", str(s), flags=re.S)
                if not m:
                    raise MapFormatError(f"{where}: trace {k}: hover text {str(s)[:60]!r} is not "
                                         "\"SRC: …<br>TRG: …\"")
                src.append(m.group(1))
                trg.append(re.split(r"<br>", m.group(2))[0])
        parts.append(pd.DataFrame({"source": [html.unescape(s) for s in src],
                                   "target": [html.unescape(s) for s in trg],
                                   "tm": x, "gs": y}))
    return pd.concat(parts, ignore_index=True)


# --------------------------------------------------------------------------- all maps
@dataclass
class ReleasedMaps:
    """The maps found at ``maps``: ``examples[(lang, metric)]`` per-pair maps (pickles or
    per-language pages), ``phrases`` the phrase maps stacked (empty without any), ``files``."""

    examples: dict[tuple[str, str], pd.DataFrame] = field(default_factory=dict)
    phrases: pd.DataFrame = field(default_factory=pd.DataFrame)
    files: list[str] = field(default_factory=list)

    def summary(self) -> pd.DataFrame:
        rows = [{"map": f"{lang} ({metric})", "kind": "pairs", "rows": len(t),
                 "origin": Path(str(t.attrs.get("origin", ""))).name}
                for (lang, metric), t in self.examples.items()]
        if len(self.phrases):
            for (lang, g), t in self.phrases.groupby(["lang", "group"]):
                rows.append({"map": f"{lang} {g}", "kind": "phrases", "rows": len(t),
                             "origin": ", ".join(sorted({Path(str(o)).name
                                                         for o in t["origin"]}))})
        return pd.DataFrame(rows, columns=["map", "kind", "rows", "origin"])


def load_maps(spec: str | Path | Sequence[str | Path]) -> ReleasedMaps:
    """Every map at ``spec``: a pickle, a demo page (path or URL), a folder (searched
    recursively for ``*.pickle`` and ``*.html``) or a list of these."""
    items = [spec] if isinstance(spec, (str, Path)) else list(spec)
    files: list[str] = []
    for item in items:
        s = str(item)
        if "://" in s:
            files.append(s)
            continue
        p = Path(s)
        if not p.exists():
            raise FileNotFoundError(f"maps: {s!r} does not exist; give the authors' map pickles "
                                    "or the demo's saved pages (a file, folder or URL; see the "
                                    "README)")
        if p.is_dir():
            found = sorted([*p.rglob("*.pickle"), *p.rglob("*.html")])
            if not found:
                raise MapFormatError(f"maps: folder {s} holds no *.pickle or *.html file")
            files += [str(f) for f in found]
        else:
            files.append(s)
    out = ReleasedMaps(files=files)
    phrase_parts = []
    for f in files:
        table = read_pickled_map(f) if f.endswith(".pickle") else read_demo_page(f)
        if table.attrs["kind"] == "phrases":
            phrase_parts.append(table.assign(origin=f))
        else:
            key = (str(table["lang"].iloc[0]), str(table["metric"].iloc[0]))
            if key in out.examples:
                raise MapFormatError(f"maps: two maps for {key[0]} ({key[1]}): "
                                     f"{out.examples[key].attrs['origin']} and {f}; keep one")
            out.examples[key] = table
    if phrase_parts:
        out.phrases = pd.concat(phrase_parts, ignore_index=True)
    return out


# --------------------------------------------------------------------------- analyses
def map_features(table: pd.DataFrame, *, tgt_lang: str | None = None,
                 src_lang: str = "en") -> tuple[pd.DataFrame, list[str]]:
    """The map table joined with :func:`tokenbook.memorisation_cartography.features.surface_features` of its
    source/target (rarity from wordfreq for ``src_lang``/``tgt_lang`` when wordfreq knows them,
    else from the map's own pairs; no tokenizer, so the tokenised features are left out), and
    the feature names that vary."""
    known = reference_languages()
    t = table[(table["source"].str.strip() != "") & (table["target"].str.strip() != "")]
    feats = surface_features(t["source"], t["target"],
                             src_lang=src_lang if src_lang in known else None,
                             tgt_lang=tgt_lang if tgt_lang in known else None)
    data = pd.concat([t.reset_index(drop=True), feats], axis=1)
    names = [f for f in FEATURES if data[f].notna().all() and data[f].nunique() > 1]
    return data, names


def predictor_comparison(data: pd.DataFrame, inputs: list[str], *, seed: int = 0,
                         n_splits: int = 5) -> pd.DataFrame:
    """Held-out Pearson r and MAE of the MLP (100, 100) and the linear baseline for TM, GS and
    CM over ``n_splits`` seeded 70/30 splits: ``estimator, split, target, pearson_r, mae,
    n_test``."""
    rows = []
    for split in range(n_splits):
        for est in ("mlp", "linear"):
            p = fit_map_predictor(data, inputs, seed=derive_seed(seed, "split", split),
                                  estimator=est, importance_for=())
            rows.append(p.metrics.assign(estimator=est, split=split))
    return pd.concat(rows, ignore_index=True)[["estimator", "split", "target", "pearson_r",
                                               "mae", "n_test"]]


def phrase_groups(phrases: pd.DataFrame) -> pd.DataFrame:
    """Per (lang, group, translation): phrases, mean TM, GS, CM, and the notes' values beside
    them (:data:`PUBLISHED_PHRASE_MEANS`; NaN where the notes give none)."""
    g = (phrases.groupby(["lang", "group", "translation"])
         .agg(phrases=("phrase", "size"), tm=("tm", "mean"), gs=("gs", "mean"),
              cm=("cm", "mean")).reset_index())
    pub = [PUBLISHED_PHRASE_MEANS.get((r.group, r.translation), (np.nan,) * 4)
           for r in g.itertuples()]
    g[["phrases_notes", "tm_notes", "gs_notes", "cm_notes"]] = pd.DataFrame(pub, index=g.index)
    return g


def crosslingual_maps(examples: Mapping[tuple[str, str], pd.DataFrame], *, metric: str = "ref"
                      ) -> dict[str, pd.DataFrame]:
    """Per language, TM/GS/CM per *source sentence* (mean over its pairs), keyed by the source
    (``pair_id`` = the source text), for :func:`cross_language_correlations`."""
    out = {}
    for (lang, m), t in examples.items():
        if m == metric:
            out[lang] = (t.groupby("source", as_index=False)[["tm", "gs", "cm"]].mean()
                         .rename(columns={"source": "pair_id"}))
    return out


def shared_sources(maps: Mapping[str, pd.DataFrame]) -> int:
    """The smallest number of sources two of the maps share (0 with fewer than 2 maps)."""
    langs = list(maps)
    counts = [len(set(maps[a]["pair_id"]) & set(maps[b]["pair_id"]))
              for i, a in enumerate(langs) for b in langs[i + 1:]]
    return min(counts) if counts else 0


def released_claims(*, features: Mapping[str, pd.DataFrame], correlations: Mapping[str,
                    pd.DataFrame], predictors: Mapping[str, pd.DataFrame],
                    phrase_table: pd.DataFrame | None, crosslingual: pd.DataFrame | None,
                    n_shared: int, min_map_rows: int = 100, min_phrases: int = 20,
                    min_languages: int = 2, min_shared_sources: int = 100,
                    cm_high: float = 0.25) -> list[Claim]:
    """The verdicts on the authors' maps (holds / does not hold / not testable).

    ``features[name]``: the map's feature table; ``correlations[name]``: its Spearman table
    (features × tm/gs/cm); ``predictors[name]``: :func:`predictor_comparison`;
    ``phrase_table``: :func:`phrase_groups`; ``crosslingual``: the output of
    :func:`cross_language_correlations` (or None), ``n_shared``: the sources two maps share;
    ``cm_high``: the CM of the memorised region (the idiom claim's threshold).
    A map with fewer than ``min_map_rows`` rows is not used; below any minimum the claim is not
    testable with the counts in its note.
    """
    claims: list[Claim] = []
    usable = {k: v for k, v in features.items() if len(v) >= min_map_rows}
    sizes = [("map(s) with enough rows", len(usable), 1)]
    size_note = (f"{len(features)} map(s); rows per map "
                 f"{', '.join(f'{k} {len(v)}' for k, v in features.items())} "
                 f"(≥ {min_map_rows} used)")
    text = ("Rare words and length go with higher CM (the surface features rank CM as the paper "
            "says)")
    stat = "Spearman ρ of src_rare_words and of src_length with CM > 0, in every usable map"
    if shortfall(sizes):
        claims.append(Claim.not_testable("released-features-rank-cm", text, statistic=stat,
                                         paper="§5 (notes §3.2: rare tokens, length up)",
                                         note=f"{shortfall(sizes)}; {size_note}"))
    else:
        checks = {f"{k}: {f}": bool(correlations[k].loc[f, "cm"] > 0)
                  for k in usable for f in ("src_rare_words", "src_length")
                  if f in correlations[k].index and np.isfinite(correlations[k].loc[f, "cm"])}
        claims.append(Claim.all_of("released-features-rank-cm", text, statistic=stat,
                                   values=checks, paper="§5 (notes §3.2: rare tokens, length "
                                   "up)", note=size_note))
    best, gap = {}, {}
    for k in usable:
        m = predictors[k][predictors[k]["target"] == "cm"].groupby("estimator")["pearson_r"].mean()
        best[k], gap[k] = float(m.max()), float(m.get("mlp", np.nan) - m.get("linear", np.nan))
    text = "Surface features predict CM on held-out pairs"
    stat = "held-out Pearson r for CM, better of MLP (100, 100) and linear, worst usable map"
    if shortfall(sizes):
        claims.append(Claim.not_testable("released-features-predict-cm", text, statistic=stat,
                                         paper="§5 (r axis 0.5–1)",
                                         note=f"{shortfall(sizes)}; {size_note}"))
        claims.append(Claim.not_testable(
            "released-mlp-beats-linear", "The MLP predicts CM at least as well as a linear "
            "model (our reading of the paper's choice of an MLP)", statistic="held-out r(MLP) "
            "− r(linear) for CM", paper="§5", note=f"{shortfall(sizes)}; {size_note}"))
    else:
        claims.append(Claim.at_least("released-features-predict-cm", text, statistic=stat,
                                     value=min(best.values()), threshold=0.5,
                                     paper="§5 (r axis 0.5–1)", note=size_note))
        claims.append(Claim.at_least(
            "released-mlp-beats-linear", "The MLP predicts CM at least as well as a linear "
            "model (our reading of the paper's choice of an MLP)",
            statistic="held-out r(MLP) − r(linear) for CM, worst usable map",
            value=min(gap.values()), threshold=0.0, paper="§5",
            note="; ".join(f"{k}: {v:+.3f}" for k, v in gap.items())))
    claims += _phrase_claims(phrase_table, min_phrases, cm_high)
    for metric in ("tm", "gs", "cm"):
        text = f"{metric.upper()} of the same source sentences agrees across target languages"
        stat = ("lowest, over language pairs, lower 95% bootstrap bound of the Spearman ρ of "
                f"{metric.upper()} over shared sources")
        n_lang = 0 if crosslingual is None else len(set(crosslingual["lang_a"])
                                                    | set(crosslingual["lang_b"]))
        need = [("language(s) with a map", n_lang, min_languages),
                ("shared sources (fewest of any two maps)", n_shared, min_shared_sources)]
        if crosslingual is None or shortfall(need):
            claims.append(Claim.not_testable(f"released-crosslingual-{metric}", text,
                                             statistic=stat, paper="§4 (cross-language "
                                             "heatmaps)", note=shortfall(need) or
                                             "fewer than 2 maps"))
            continue
        lows = crosslingual.loc[crosslingual["metric"] == metric, "ci_low"]
        claims.append(Claim.greater(f"released-crosslingual-{metric}", text, statistic=stat,
                                    value=float(lows.min()), threshold=0.0,
                                    paper="§4 (cross-language heatmaps)",
                                    note=counts_note(need)))
    return claims


def _phrase_claims(table: pd.DataFrame | None, min_phrases: int, cm_high: float) -> list[Claim]:
    out = []
    paper = "demo phrase maps, 2025 (notes §3.3; not in the 2023 paper)"
    text = ("Idioms sit in the memorised region: mean CM of the idiom phrases at least the "
            "memorised region's CM (cm_high)")
    stat = "mean CM of the idiom phrases (TM − GS, 0-1)"
    idioms = table[table["group"] == "idioms"] if table is not None and len(table) else None
    n = int(idioms["phrases"].sum()) if idioms is not None and len(idioms) else 0
    if shortfall([("idiom phrases", n, min_phrases)]):
        out.append(Claim.not_testable("released-idioms-high-cm", text, statistic=stat,
                                      paper=paper, note=shortfall([("idiom phrases", n,
                                                                    min_phrases)])))
    else:
        value = float((idioms["cm"] * idioms["phrases"]).sum() / n)
        out.append(Claim.at_least("released-idioms-high-cm", text, statistic=stat, value=value,
                                  threshold=cm_high, paper=paper, published=0.335,
                                  note=f"{n} idiom phrases; the notes' mean over the demo: 0.33 "
                                  "(word-for-word), 0.34 (paraphrase)"))
    text = "Paraphrased phrases sit lower on both axes than word-for-word ones"
    stat = "mean TM and mean GS, paraphrase < word-for-word, in every phrase group"
    checks, counts = {}, []
    if table is not None and len(table):
        for (lang, group), g in table.groupby(["lang", "group"]):
            g = g.set_index("translation")
            if {"paraphrase", "word-for-word"} <= set(g.index):
                counts.append((f"{group} phrases of the smaller type",
                               int(g.loc[["paraphrase", "word-for-word"], "phrases"].min()),
                               min_phrases))
                for axis in ("tm", "gs"):
                    checks[f"{group} {axis.upper()}"] = bool(g.loc["paraphrase", axis]
                                                             < g.loc["word-for-word", axis])
    short = shortfall(counts) if counts else "no phrase group with both translation types"
    if short:
        out.append(Claim.not_testable("released-paraphrase-lower", text, statistic=stat,
                                      paper=paper, note=short))
    else:
        out.append(Claim.all_of("released-paraphrase-lower", text, statistic=stat,
                                values=checks, paper=paper, note="notes: idioms TM 0.50 vs "
                                "0.61, GS 0.16 vs 0.28; proverbs TM 0.35 vs 0.62, GS 0.06 vs "
                                "0.33 (paraphrase vs word-for-word)"))
    return out


def regions_table(table: pd.DataFrame, **thresholds: float) -> pd.DataFrame:
    """Share of the map's rows in each region
    (:func:`tokenbook.memorisation_cartography.estimator.map_regions`) with the mean TM, GS, CM of each."""
    t = table.assign(region=map_regions(table, **thresholds))
    return (t.groupby("region").agg(rows=("cm", "size"), tm=("tm", "mean"), gs=("gs", "mean"),
                                    cm=("cm", "mean"))
            .assign(share=lambda d: d["rows"] / d["rows"].sum()).reset_index())



def analyse(maps: ReleasedMaps, *, seed: int = 0, n_splits: int = 5, n_boot: int = 1000,
            min_map_rows: int = 100, min_phrases: int = 20, min_languages: int = 2,
            min_shared_sources: int = 100, **thresholds: float) -> dict:
    """Every map-level analysis of the chapter on the authors' maps, and the claims.

    Maps analysed: each per-pair map of the likelihood metric (``ref``) and, with phrase maps,
    the phrase map of each language (one row per phrase, its example pair as the text).
    Returns ``tables`` (the analysed maps by name), ``regions`` (per map), ``features``,
    ``correlations`` (per map, features × TM/GS/CM), ``cm_correlations`` (features × maps, ρ
    with CM), ``predictors`` (per map with at least ``min_map_rows`` rows) and
    ``predictor_table`` (stacked, ``inputs`` = the map), ``phrase_groups``, ``crosslingual``
    (or None), ``n_shared`` and ``claims``. ``thresholds``: ``high, low, cm_high`` of the regions.
    """
    tables: dict[str, pd.DataFrame] = {f"{lang} pairs": t for (lang, m), t in
                                       maps.examples.items() if m == "ref"}
    if len(maps.phrases):
        for lang, t in maps.phrases.groupby("lang"):
            tables[f"{lang} phrases"] = t.reset_index(drop=True)
    regions = pd.concat([regions_table(t, **thresholds).assign(map=k)
                         for k, t in tables.items()], ignore_index=True) if tables else None
    features, correlations, predictors = {}, {}, {}
    for name, t in tables.items():
        data, names = map_features(t, tgt_lang=str(t["lang"].iloc[0]))
        data["pair_id"] = np.arange(len(data))
        features[name] = data
        correlations[name] = feature_correlations(data, names)
        if len(data) >= max(min_map_rows, 20) and names:
            predictors[name] = predictor_comparison(data, names, seed=seed, n_splits=n_splits)
    phrase_table = phrase_groups(maps.phrases) if len(maps.phrases) else None
    xmaps = crosslingual_maps(maps.examples)
    n_shared = shared_sources(xmaps)
    crosslingual = None
    if len(xmaps) >= 2 and n_shared >= 3:
        crosslingual = cross_language_correlations(xmaps, n_boot=n_boot, seed=seed)
    claims = released_claims(features=features, correlations=correlations,
                             predictors=predictors, phrase_table=phrase_table,
                             crosslingual=crosslingual, n_shared=n_shared,
                             min_map_rows=min_map_rows, min_phrases=min_phrases,
                             min_languages=min_languages, min_shared_sources=min_shared_sources,
                             cm_high=thresholds.get("cm_high", 0.25))
    predictor_table = pd.concat([p.assign(inputs=name) for name, p in predictors.items()],
                                ignore_index=True) if predictors else None
    cm_correlations = pd.concat({name: c["cm"] for name, c in correlations.items()},
                                axis=1) if correlations else None
    return {"tables": tables, "regions": regions, "features": features,
            "correlations": correlations, "cm_correlations": cm_correlations,
            "predictors": predictors, "predictor_table": predictor_table,
            "phrase_groups": phrase_table, "crosslingual": crosslingual,
            "n_shared": n_shared, "claims": claims}
