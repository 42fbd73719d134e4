"""Word surprisal pivot tables of the grounded chapters (captions and story sentences).

One row per word of a unit, surprisals in **nats** (beginning-of-word corrected, summed over the
word's tokens; :func:`tokenbook.scoring.words.word_surprisals`), one column per condition:

=================  =====================================================================
``lang``           language code
``dataset``        data set name (``"tiny"``, ``"xm3600"``, ``"bloom-vist"``, ``"xm"`` …)
``unit_kind``      ``"caption"`` or ``"sentence"``
``unit_id``        unique id of the unit (caption id; ``<story>-<sentence>`` for stories)
``image_id``       the image the unit describes (scene id / XM3600 image id)
``word_idx``       0-based word position inside the unit
``word``           the word (gold word or the segmenter's word), ``char_start, char_end``
``upos``           UD UPOS tag (gold or tagger); ``concreteness`` (1–5, NaN if unknown)
``s_U``            text-only LM, prefix ``caption {lang}\\n`` (no image, no discourse)
``s_P``            captioner with the image, same prefix (PaliGemma's processor supplies the
                   newline: ``<image>… <bos>caption {lang}\\n`` + caption)
``s_D``            (stories) text-only LM given the preceding sentences of the story
``s_PD``           (stories) captioner with the image *and* the preceding sentences
``n_merged``       1, or the number of words merged into this segment (straddling tokens)
``story_id`` …     (stories) position fields ``story_id, sent_idx, n_sents``
=================  =====================================================================

For the first sentence of a story there is no discourse, so ``s_D``/``s_PD`` are NaN there, as in
Gay et al.'s Bloom files (their D/DP columns are empty for the first paragraph).

A token that straddles a word boundary (BPE merges across gold words in a language written
without spaces; a tagger's split inside a token) leaves both words without a surprisal of their
own. By default (``straddle="merge"``) each run of such words becomes one segment, tagged with
its parts' tags joined by ``+`` and ``n_merged`` > 1, whose surprisal is well defined (the sum
of its tokens, corrected). ``straddle="nan"`` leaves them NaN (their units are then dropped),
``straddle="split"`` shares each run's surprisal over its words in proportion to their length.
``table.attrs["n_straddling"]`` counts the affected words.

Every table is cached with :func:`tokenbook.cache.cached_table` under a key made of the data
(a hash of the unit texts, ids and segmentation), the models (their ids/folders), the prefix
template and :data:`CODE_VERSION`, so the UID and groundedness chapters never score the same
captions twice and a rerun recomputes nothing.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np
import pandas as pd

from tokenbook import scoring
from tokenbook.cache import cached_table
from tokenbook.data.crossmodal import crossmodal_image, load_crossmodal
from tokenbook.data.tagging import GoldSegmenter, StanzaSegmenter, spans_from_words
from tokenbook.models import paligemma as pg
from tokenbook.validation import check_table

__all__ = ["drop_unscorable", "CODE_VERSION", "PREFIX", "CAPTION_COLUMNS", "STORY_COLUMNS", "model_id",
           "caption_word_table", "story_word_table", "load_model", "lazy_model", "score_tokens", "merge_straddling",
           "discourse_prefix", "image_prefix", "open_image", "crossmodal_units", "bloom_units",
           "tiny_caption_words", "crossmodal_caption_words"]

#: bump when the computation of the tables changes (part of every cache key)
CODE_VERSION = "surprisal-tables-v4"
#: PaliGemma's captioning task prefix, as in Haley et al. / Gay et al.
PREFIX = "caption {lang}\n"
CAPTION_COLUMNS = ["lang", "dataset", "unit_kind", "unit_id", "image_id", "word_idx", "word",
                   "char_start", "char_end", "upos", "concreteness", "s_U", "s_P", "n_merged"]
STORY_COLUMNS = CAPTION_COLUMNS + ["s_D", "s_PD", "story_id", "sent_idx", "n_sents"]

Segment = tuple[str, str, int, int]


# ----------------------------------------------------------------------------- model handles
def model_id(handle: Any) -> str:
    """A stable identity for a model handle, for cache keys.

    ``handle`` is a hub id or folder (str/Path), a loaded ``(model, processor_or_tokenizer)``
    pair (its ``config._name_or_path`` is used: the folder it was loaded from), or a loader
    callable carrying a ``model_id`` string attribute.
    """
    explicit = getattr(handle, "model_id", None)
    if isinstance(explicit, str):
        return explicit
    if isinstance(handle, (str, Path)):
        p = Path(handle)
        return str(p.resolve()) if p.exists() else str(handle)
    model = handle[0] if isinstance(handle, (tuple, list)) else handle
    name = getattr(getattr(model, "config", None), "_name_or_path", "") or \
        getattr(model, "name_or_path", "")
    if not name:
        raise ValueError("cannot identify the model for the cache key: pass its folder/hub id "
                         "(or load it with from_pretrained so config._name_or_path is set)")
    p = Path(name)
    return str(p.resolve()) if p.exists() else str(name)


def load_model(handle: Any, kind: str, *, device=None, tokenizer: str | None = None,
               dtype: str = "auto") -> tuple[Any, Any]:
    """A loaded ``(model, processor or tokenizer)`` from a handle, on ``device``.

    ``handle``: a loaded pair, a zero-argument loader, a folder written by ``save_pretrained``
    (the tiny models: :func:`tokenbook.models.paligemma.load_captioner` / ``load_text_lm``) or a
    Hugging Face hub id (``AutoModelForImageTextToText`` + ``AutoProcessor`` for
    ``kind="captioner"``, ``AutoModelForCausalLM`` + ``AutoTokenizer`` for ``"text_lm"``).
    ``tokenizer`` overrides the tokenizer (the authors' text LM
    ``chaley22/pali-captioning-lm-nolora`` uses ``google/gemma-2b``'s). ``dtype="auto"``:
    bfloat16 on CUDA, float32 elsewhere.
    """
    import torch

    if kind not in ("captioner", "text_lm"):
        raise ValueError(f"kind must be 'captioner' or 'text_lm', got {kind!r}")
    if isinstance(handle, (tuple, list)) and len(handle) == 2:
        model, proc = handle
    elif callable(handle) and not isinstance(handle, (str, Path)) and \
            not hasattr(handle, "config"):
        model, proc = handle()
    else:
        path = str(handle)
        if (Path(path) / "config.json").exists():
            model, proc = (pg.load_captioner if kind == "captioner" else pg.load_text_lm)(path)
        else:
            import transformers as tf

            cuda = device is not None and str(device).startswith("cuda")
            torch_dtype = (torch.bfloat16 if cuda else torch.float32) if dtype == "auto" \
                else getattr(torch, dtype)
            try:
                if kind == "captioner":
                    proc = tf.AutoProcessor.from_pretrained(path)
                    model = tf.AutoModelForImageTextToText.from_pretrained(path,
                                                                           dtype=torch_dtype)
                else:
                    model = tf.AutoModelForCausalLM.from_pretrained(path, dtype=torch_dtype)
                    proc = None if tokenizer else tf.AutoTokenizer.from_pretrained(path)
            except OSError as err:
                raise OSError(
                    f"cannot load the {kind} {path!r}: {err}. It is neither a local folder with a "
                    "config.json nor reachable on the Hugging Face hub (gated models need "
                    "`huggingface-cli login` and accepting the licence; offline runs need the "
                    "model in the local cache)") from None
            model.eval()
    if tokenizer:
        import transformers as tf

        proc = tf.AutoTokenizer.from_pretrained(tokenizer)
    if device is not None:
        model = model.to(device)
    return model, proc


def lazy_model(handle: Any, kind: str, *, device=None, tokenizer: str | None = None
               ) -> Callable[[], tuple[Any, Any]]:
    """A memoised zero-argument loader for ``handle``, usable as a builder's model handle.

    The model is loaded (with :func:`load_model`) the first time a builder misses its cache and
    then kept, so scoring data set parts one by one (e.g. one cached table per language, which
    makes an interrupted paper-scale run resume where it stopped) loads each checkpoint once.
    The loader carries ``model_id`` for the cache keys.
    """
    box: list = []

    def load() -> tuple[Any, Any]:
        if not box:
            box.append(load_model(handle, kind, device=device, tokenizer=tokenizer))
        return box[0]

    load.model_id = model_id(handle) + (f"|tokenizer={tokenizer}" if tokenizer else "")
    return load


def _load(handle: Any, kind: str, device=None, tokenizer: str | None = None):
    return load_model(handle, kind, device=device, tokenizer=tokenizer)


# ----------------------------------------------------------------------------- segmentation
def _segments(frame: pd.DataFrame, segmenter: Callable[[str, str], list[Segment]] | None,
              progress: bool) -> list[list[Segment]]:
    """Per-row (word, upos, start, end) segments: gold list columns or the segmenter."""
    from tqdm.auto import tqdm

    out: list[list[Segment]] = []
    if segmenter is None:
        if "words" not in frame:
            raise ValueError("units have no gold 'words' column: pass a segmenter "
                             "(e.g. tokenbook.data.tagging.StanzaSegmenter)")

        upos_col = frame["upos"] if "upos" in frame else [None] * len(frame)
        spans_col = frame["word_spans"] if "word_spans" in frame else [None] * len(frame)
        for text, words, upos, spans in zip(frame["text"], frame["words"], upos_col, spans_col):
            words = list(words)
            upos = list(upos) if upos is not None else ["X"] * len(words)
            spans = [tuple(s) for s in spans] if spans is not None else \
                spans_from_words(text, words)
            out.append([(w, u, int(a), int(b)) for w, u, (a, b) in zip(words, upos, spans)])
        return out

    for text, lang in tqdm(list(zip(frame["text"], frame["lang"])), desc="segmenting",
                           disable=not progress):
        out.append([(str(w), str(u), int(a), int(b)) for w, u, a, b in segmenter(text, lang)])
    return out


def _data_key(frame: pd.DataFrame, cols: Sequence[str], segs: list[list[Segment]]) -> str:
    h = hashlib.sha256()
    for row in frame[list(cols)].astype(str).itertuples(index=False):
        h.update("\x1f".join(row).encode())
        h.update(b"\x1e")
    for s in segs:
        h.update(repr(s).encode())
    return h.hexdigest()[:20]


# ----------------------------------------------------------------------------- scoring
def score_tokens(texts: Sequence[str], *, model, processor, prefixes: Sequence[str],
                 images: Sequence[Any] | None = None, batch_size: int = 16, device=None,
                 progress: bool = True, desc: str = "") -> pd.DataFrame:
    """Token table of ``texts`` under one condition (text LM if ``images`` is None, else the
    captioner), through :func:`tokenbook.scoring.engine.score_texts` / ``score_image_texts``; nats."""
    if desc and progress:
        print(f"scoring {len(texts)} units: {desc}")
    if images is None:
        return scoring.score_texts(model, processor, list(texts), prefixes=list(prefixes),
                                   batch_size=batch_size, device=device, progress=progress)
    return scoring.score_image_texts(model, processor, list(images), list(texts),
                                     prefixes=list(prefixes), batch_size=batch_size,
                                     device=device, progress=progress)


def _words(tokens: pd.DataFrame, texts: Sequence[str],
           segs: Sequence[Sequence[Segment]]) -> tuple[np.ndarray, np.ndarray]:
    """Flat (surprisal, straddles) over all words of all texts, in segment order."""
    if not len(texts):
        return np.zeros(0), np.zeros(0, dtype=bool)
    spans = [[(a, b) for _, _, a, b in s] for s in segs]
    words = scoring.word_surprisals(tokens, list(texts), words=spans)
    words = words.sort_values(["seq_id", "word_idx"], kind="stable")
    expected = sum(len(s) for s in segs)
    if len(words) != expected:
        raise RuntimeError(f"word alignment lost words: {len(words)} scored vs {expected} "
                           "segmented (a text with no tokens?)")
    return words["surprisal"].to_numpy(float), words["straddles"].to_numpy(bool)


def merge_straddling(texts: Sequence[str], segs: Sequence[Sequence[Segment]],
                     conc: Sequence[Sequence[float]], flags: np.ndarray
                     ) -> tuple[list[list[Segment]], list[list[float]], list[list[int]]]:
    """Merge each maximal run of consecutive straddled words into one segment.

    A token that runs across a word boundary (BPE merges across gold word boundaries in a
    language written without spaces, or across a tagger's split) makes the surprisal of either
    word undefined; the run of words it (and its neighbours) touch has a well-defined
    surprisal. The merged segment is ``text[start:end]`` tagged with its parts' tags joined by
    ``+`` (``"NOUN+ADP"``, outside every analysed class, like the tagger's multi-word tokens);
    its concreteness is NaN. Returns (segments, concreteness, number of words merged into each
    segment).
    """
    out_s, out_c, out_n = [], [], []
    k = 0
    for text, seg, cc in zip(texts, segs, conc):
        f = flags[k:k + len(seg)]
        k += len(seg)
        ns, nc, nn = [], [], []
        i = 0
        while i < len(seg):
            if not f[i]:
                ns.append(seg[i]); nc.append(cc[i]); nn.append(1)
                i += 1
                continue
            j = i
            while j + 1 < len(seg) and f[j + 1]:
                j += 1
            a, b = seg[i][2], seg[j][3]
            tags = "+".join(dict.fromkeys(u for _, u, _, _ in seg[i:j + 1]))
            ns.append((text[a:b], tags, a, b)); nc.append(float("nan")); nn.append(j - i + 1)
            i = j + 1
        out_s.append(ns); out_c.append(nc); out_n.append(nn)
    return out_s, out_c, out_n


def _concreteness(frame: pd.DataFrame, segs: list[list[Segment]]) -> list[list[float]]:
    conc = frame["concreteness"] if "concreteness" in frame else None
    out = []
    for i, s in enumerate(segs):
        c = list(conc.iloc[i]) if conc is not None and conc.iloc[i] is not None else []
        out.append([float(x) for x in c] if len(c) == len(s) else [float("nan")] * len(s))
    return out


def _word_frame(frame: pd.DataFrame, segs: list[list[Segment]], conc: list[list[float]],
                n_merged: list[list[int]], *, dataset: str, unit_kind: str,
                unit_ids: Sequence[str]) -> tuple[pd.DataFrame, np.ndarray]:
    n = [len(s) for s in segs]
    rep = np.repeat(np.arange(len(frame)), n)
    image = frame["image_id"] if "image_id" in frame else frame.get("scene_id")
    out = pd.DataFrame({
        "lang": frame["lang"].astype(str).to_numpy()[rep],
        "dataset": dataset,
        "unit_kind": unit_kind,
        "unit_id": np.asarray(unit_ids, dtype=object)[rep],
        "image_id": (np.asarray(image.astype(str))[rep] if image is not None else ""),
        "word_idx": np.concatenate([np.arange(k) for k in n]).astype(np.int64) if n else [],
        "word": [w for s in segs for w, _, _, _ in s],
        "char_start": np.asarray([a for s in segs for _, _, a, _ in s], dtype=np.int64),
        "char_end": np.asarray([b for s in segs for _, _, _, b in s], dtype=np.int64),
        "upos": [u for s in segs for _, u, _, _ in s],
        "concreteness": np.asarray([c for cc in conc for c in cc], dtype=float),
        "n_merged": np.asarray([m for mm in n_merged for m in mm], dtype=np.int64),
    })
    return out, rep


def _check_frame(frame: pd.DataFrame, cols: Sequence[str], what: str) -> None:
    check_table(frame, what, columns=cols, min_rows=1)


def _images(frame: pd.DataFrame, image_fn: Callable[[str], Any]) -> list:
    """One image per row, each image id loaded once: rows of one image share the object
    (the scorer then processes it once per prefix; the images are only read)."""
    col = "image_id" if "image_id" in frame else "scene_id"
    loaded: dict[Any, Any] = {}
    for i in pd.unique(frame[col]):
        loaded[i] = image_fn(i)
    return [loaded[i] for i in frame[col]]


def _finish(token_sets: list[tuple[str, pd.DataFrame, np.ndarray]],
            frame: pd.DataFrame, segs, conc, straddle: str, *, dataset, unit_kind, unit_ids):
    """Word surprisals for every condition from its token table, merging straddled runs.

    ``token_sets``: (column, token table, row selection into ``frame``) per condition.
    """
    texts = frame["text"].tolist()
    flags = np.zeros(sum(len(s) for s in segs), dtype=bool)
    starts = np.r_[0, np.cumsum([len(s) for s in segs])]
    for _, tokens, sel in token_sets:
        _, st = _words(tokens, [texts[i] for i in sel], [segs[i] for i in sel])
        idx = np.concatenate([np.arange(starts[i], starts[i + 1]) for i in sel]) if len(sel) \
            else np.zeros(0, dtype=int)
        flags[idx] |= st
    n_straddling = int(flags.sum())
    if straddle in ("merge", "split") and n_straddling:
        m_segs, m_conc, m_merged = merge_straddling(texts, segs, conc, flags)
    else:
        m_segs, m_conc, m_merged = segs, conc, [[1] * len(s) for s in segs]
    if straddle == "split":   # score the merged runs, then share each run over its words
        words, rep = _word_frame(frame, segs, conc, _run_sizes(m_merged), dataset=dataset,
                                 unit_kind=unit_kind, unit_ids=unit_ids)
        shares, owner = _split_shares(segs, m_merged)
    else:
        words, rep = _word_frame(frame, m_segs, m_conc, m_merged, dataset=dataset,
                                 unit_kind=unit_kind, unit_ids=unit_ids)
    m_starts = np.r_[0, np.cumsum([len(s) for s in m_segs])]
    for col, tokens, sel in token_sets:
        s, _ = _words(tokens, [texts[i] for i in sel], [m_segs[i] for i in sel])
        if straddle == "split":
            seg_values = np.full(int(m_starts[-1]), np.nan)
            idx = np.concatenate([np.arange(m_starts[i], m_starts[i + 1]) for i in sel]) \
                if len(sel) else np.zeros(0, dtype=int)
            seg_values[idx] = s
            values = seg_values[owner] * shares
        else:
            values = np.full(len(words), np.nan)
            values[np.isin(rep, sel)] = s
        words[col] = values
    words.attrs["n_straddling"] = n_straddling
    return words, rep


def _run_sizes(n_merged: list[list[int]]) -> list[list[int]]:
    """Per original word: the size of the merged run it belongs to (1 = not merged)."""
    return [[k for k in nn for _ in range(k)] for nn in n_merged]


def _split_shares(segs: Sequence[Sequence[Segment]], n_merged: list[list[int]]
                  ) -> tuple[np.ndarray, np.ndarray]:
    """For :func:`split_merged`: each original word's share of its merged run (∝ characters)
    and the flat index of that run among all merged segments."""
    shares, owner, k = [], [], 0
    for seg, nn in zip(segs, n_merged):
        i = 0
        for size in nn:
            lengths = np.array([max(b - a, 1) for _, _, a, b in seg[i:i + size]], dtype=float)
            shares.extend(lengths / lengths.sum())
            owner.extend([k] * size)
            k += 1
            i += size
    return np.asarray(shares, dtype=float), np.asarray(owner, dtype=np.int64)


_STRADDLE = ("merge", "nan", "split")


def _n_straddling(table: pd.DataFrame, straddle: str = "merge") -> int:
    """Words that had a straddling token: merged words, split words, or (straddle="nan") NaN
    words."""
    big = table["n_merged"] > 1
    merged = int(big.sum()) if straddle == "split" else int(table.loc[big, "n_merged"].sum())
    nan = int((~np.isfinite(table[["s_U", "s_P"]].to_numpy(float))).any(axis=1).sum())
    return merged + nan


def caption_word_table(captions: pd.DataFrame, *, image_fn: Callable[[str], Any], captioner: Any,
                       text_lm: Any, prefix: str = PREFIX,
                       segmenter: Callable[[str, str], list[Segment]] | None = None,
                       segmenter_id: str = "", dataset: str = "tiny", straddle: str = "merge",
                       text_lm_tokenizer: str | None = None, batch_size: int = 16,
                       device=None, progress: bool = True, cache: bool = True,
                       refresh: bool = False) -> pd.DataFrame:
    """The caption word surprisal table: s_U (text LM) and s_P (captioner with the image).

    Parameters
    ----------
    captions : one row per caption with ``caption_id, lang, text`` and ``image_id`` (or
        ``scene_id``); optional gold list columns ``words, upos, word_spans, concreteness``
        (the tiny world's ``world.captions``; XM3600 rows from ``tokenbook.data.crossmodal``).
    image_fn : image id → PIL image (``world.image``, or the XM3600 loader's image opener).
    captioner, text_lm : model handles — a loaded ``(model, processor)`` / ``(model, tokenizer)``
        pair, a zero-argument loader, or a folder/hub id loaded with
        ``tokenbook.models.paligemma.load_captioner`` / ``load_text_lm`` on a cache miss
        (e.g. ``google/paligemma-3b-ft-coco35l-224`` and ``chaley22/pali-captioning-lm-nolora``).
    prefix : task prefix template, formatted with ``lang`` (``"caption {lang}\\n"``).
    segmenter : ``segmenter(text, lang) -> [(word, upos, start, end)]`` when the captions have
        no gold words (paper scale: ``tokenbook.data.tagging.StanzaSegmenter``); its identity
        for the cache key is ``segmenter_id`` (the words themselves enter the key too).
    text_lm_tokenizer : tokenizer id/folder for the text LM when its own folder has none
        (``google/gemma-2b`` for ``chaley22/pali-captioning-lm-nolora``).
    straddle : ``"merge"`` (default): words joined by a token that straddles their boundary
        become one segment (:func:`merge_straddling`; ``n_merged`` > 1); ``"nan"``: keep the
        words with NaN surprisal (drop their units with :func:`drop_unscorable`);
        ``"split"``: keep every word, each getting a share of its merged run's surprisal in
        proportion to its length in characters (``n_merged`` = the run's size; the run's sum is
        exact, the split between its words is an approximation).

    Returns
    -------
    pandas.DataFrame
        The pivot table (:data:`CAPTION_COLUMNS` + ``n_merged``), nats;
        ``attrs["n_straddling"]`` counts the words that had a straddling token.
    """
    _check_frame(captions, ["caption_id", "lang", "text"], "captions")
    if "image_id" not in captions and "scene_id" not in captions:
        raise ValueError("captions need an 'image_id' (or 'scene_id') column naming their image")
    if straddle not in _STRADDLE:
        raise ValueError(f"straddle must be one of {_STRADDLE}, got {straddle!r}")
    captions = captions.reset_index(drop=True)
    segs = _segments(captions, segmenter, progress)
    img_col = "image_id" if "image_id" in captions else "scene_id"
    params = {"kind": "captions", "data": _data_key(captions, ["caption_id", img_col, "lang",
                                                              "text"], segs),
              "n": len(captions), "dataset": dataset, "captioner": model_id(captioner),
              "text_lm": model_id(text_lm), "text_lm_tokenizer": text_lm_tokenizer or "",
              "prefix": prefix, "segmenter": segmenter_id,
              "straddle": straddle, "code": CODE_VERSION}

    def compute() -> pd.DataFrame:
        texts = captions["text"].tolist()
        prefixes = [prefix.format(lang=lang) for lang in captions["lang"]]
        everything = np.arange(len(captions))
        lm, tok = _load(text_lm, "text_lm", device, text_lm_tokenizer)
        tok_u = score_tokens(texts, model=lm, processor=tok, prefixes=prefixes,
                             batch_size=batch_size, device=device, progress=progress,
                             desc="U (text-only LM)")
        del lm
        cap, proc = _load(captioner, "captioner", device)
        tok_p = score_tokens(texts, model=cap, processor=proc,
                             prefixes=[image_prefix(p) for p in prefixes],
                             images=_images(captions, image_fn), batch_size=batch_size,
                             device=device, progress=progress, desc="P (captioner + image)")
        del cap
        words, _ = _finish([("s_U", tok_u, everything), ("s_P", tok_p, everything)],
                           captions, segs, _concreteness(captions, segs), straddle,
                           dataset=dataset, unit_kind="caption",
                           unit_ids=captions["caption_id"].astype(str).to_numpy())
        return words[CAPTION_COLUMNS]

    table = cached_table("word-surprisal", params, compute, refresh=refresh) if cache \
        else compute()
    table.attrs["n_straddling"] = _n_straddling(table, straddle)
    return table


def discourse_prefix(template: str, lang: str, previous: Sequence[str]) -> str:
    """Text before a story sentence in the discourse conditions (D, P+D).

    The task prefix, then each preceding sentence followed by a newline:
    ``"caption {lang}\\n" + "".join(f"{c}\\n" for c in previous)`` — the layout the tiny models
    are trained on (:func:`tokenbook.models.paligemma.text_prefix`). The newline ends the
    prefix, so no token straddles the seam with the scored sentence.
    """
    head = template.format(lang=lang)
    if not head.endswith("\n"):
        head += "\n"
    return head + "".join(f"{c}\n" for c in previous)


def image_prefix(text_prefix: str) -> str:
    """The captioner's prefix for a text prefix: without its final newline.

    PaliGemma's processor builds ``<image>… <bos> prefix "\\n" caption``, appending the newline
    itself; the text LM gets the same characters as ``prefix + "\\n"`` explicitly.
    """
    return text_prefix[:-1] if text_prefix.endswith("\n") else text_prefix


def _discourse_override(contexts: Sequence[Sequence[str]] | None, n_rows: int,
                        name: str) -> list[list[str]] | None:
    """``contexts`` as lists of str, checked to hold one list per story row (None: None)."""
    if contexts is None:
        return None
    contexts = [list(map(str, c)) for c in contexts]
    if len(contexts) != n_rows:
        raise ValueError(f"{name}: needs one list of sentences per story row ({n_rows}), got "
                         f"{len(contexts)}")
    return contexts


def story_word_table(stories: pd.DataFrame, *, image_fn: Callable[[str], Any], captioner: Any,
                     text_lm: Any, prefix: str = PREFIX,
                     context_prefix: Callable[[str, str, Sequence[str]], str] | None = None,
                     segmenter: Callable[[str, str], list[Segment]] | None = None,
                     segmenter_id: str = "", dataset: str = "tiny", straddle: str = "merge",
                     text_lm_tokenizer: str | None = None, batch_size: int = 16,
                     device=None, progress: bool = True, cache: bool = True,
                     refresh: bool = False,
                     previous: Sequence[Sequence[str]] | None = None,
                     other_previous: Sequence[Sequence[str]] | None = None) -> pd.DataFrame:
    """The story word surprisal table: s_U, s_P, s_D, s_PD for every sentence of every story.

    ``stories``: one row per (story, sentence, language) with ``story_id, sent_idx, lang, text``
    and ``image_id``/``scene_id`` (the sentence's picture); optional ``n_sents``, ``para_idx``
    (the page, for paragraph-level measures; passed through) and gold
    ``words, upos, word_spans, concreteness`` (``world.stories``). Conditions:

    * U — text LM, ``prefix`` only;  P — captioner, current image, ``prefix``;
    * D — text LM, prefix + the story's preceding sentences (same language);
    * P+D — captioner, current image, prefix + the preceding sentences.

    ``context_prefix(template, lang, previous_sentences) -> str`` builds the discourse prefix
    (default :func:`discourse_prefix`). D/P+D are NaN for the first sentence of each story.
    Models, straddling tokens and caching as in :func:`caption_word_table`.
    ``previous`` overrides the discourse: one list of preceding sentences per row of
    ``stories`` sorted by (lang, story_id, sent_idx) — e.g. another story's sentences for a
    shuffled-discourse null (:func:`tokenbook.grounded.tiny.shuffled_contexts`); an empty list
    leaves D/P+D undefined for that row. ``other_previous`` (the same form) adds a second
    discourse, scored as D and P+D into the columns ``s_D_other`` and ``s_PD_other`` with the
    same models and images (U and P are scored once): the reference discourse the tiny chapter's
    discourse claims compare against.
    """
    _check_frame(stories, ["story_id", "sent_idx", "lang", "text"], "stories")
    if "image_id" not in stories and "scene_id" not in stories:
        raise ValueError("stories need an 'image_id' (or 'scene_id') column naming each "
                         "sentence's picture")
    if straddle not in _STRADDLE:
        raise ValueError(f"straddle must be one of {_STRADDLE}, got {straddle!r}")
    ctx_fn = context_prefix or discourse_prefix
    stories = stories.sort_values(["lang", "story_id", "sent_idx"], kind="mergesort")
    stories = stories.reset_index(drop=True)
    if "n_sents" not in stories:
        stories["n_sents"] = stories.groupby(["lang", "story_id"]).sent_idx.transform("size")
    segs = _segments(stories, segmenter, progress)
    img_col = "image_id" if "image_id" in stories else "scene_id"
    ctx_name = getattr(ctx_fn, "__qualname__", repr(ctx_fn))
    override = _discourse_override(previous, len(stories), "previous")
    other = _discourse_override(other_previous, len(stories), "other_previous")
    if override is not None:
        ctx_name += "|previous=" + hashlib.sha256(repr(override).encode()).hexdigest()[:16]
    if other is not None:
        ctx_name += "|other=" + hashlib.sha256(repr(other).encode()).hexdigest()[:16]
    params = {"kind": "stories", "data": _data_key(stories, ["story_id", "sent_idx", img_col,
                                                            "lang", "text"], segs),
              "n": len(stories), "dataset": dataset, "captioner": model_id(captioner),
              "text_lm": model_id(text_lm), "text_lm_tokenizer": text_lm_tokenizer or "",
              "prefix": prefix, "context": ctx_name,
              "segmenter": segmenter_id, "straddle": straddle, "code": CODE_VERSION}

    def compute() -> pd.DataFrame:
        texts = stories["text"].tolist()
        plain = [prefix.format(lang=lang) for lang in stories["lang"]]
        previous: list[list[str]] = []
        for _, g in stories.groupby(["lang", "story_id"], sort=False):
            sents = g["text"].tolist()
            previous.extend(sents[:k] for k in range(len(sents)))
        if override is not None:
            previous = override
        # each discourse: (its suffix, the rows it defines D for, their prefixes)
        discourses = []
        for suffix, contexts in [("", previous)] + ([("_other", other)] if other else []):
            sel = np.flatnonzero([len(p) > 0 for p in contexts])
            discourses.append((suffix, sel, [ctx_fn(prefix, stories["lang"].iat[i], contexts[i])
                                             for i in sel]))
        everything = np.arange(len(stories))

        def score(model, proc, rows, prefixes, desc, images=None):
            return score_tokens([texts[i] for i in rows], model=model, processor=proc,
                                prefixes=prefixes, images=images, batch_size=batch_size,
                                device=device, progress=progress, desc=desc)

        lm, tok = _load(text_lm, "text_lm", device, text_lm_tokenizer)
        token_sets = [("s_U", score(lm, tok, everything, plain, "U (text only)"), everything)]
        for suffix, sel, ctx in discourses:
            token_sets.append((f"s_D{suffix}", score(lm, tok, sel, ctx,
                                                    f"D{suffix} (text + discourse)"), sel))
        del lm
        cap, proc = _load(captioner, "captioner", device)
        images = _images(stories, image_fn)
        token_sets.append(("s_P", score(cap, proc, everything, [image_prefix(p) for p in plain],
                                        "P (image)", images), everything))
        for suffix, sel, ctx in discourses:
            token_sets.append((f"s_PD{suffix}",
                               score(cap, proc, sel, [image_prefix(c) for c in ctx],
                                     f"P+D{suffix} (image + discourse)",
                                     [images[i] for i in sel]), sel))
        del cap
        unit_ids = (stories["story_id"].astype(str) + "-" + stories["sent_idx"].astype(str))
        words, rep = _finish(token_sets, stories, segs, _concreteness(stories, segs), straddle,
                             dataset=dataset, unit_kind="sentence",
                             unit_ids=unit_ids.to_numpy())
        extra = ["para_idx"] if "para_idx" in stories else []
        for c in ["story_id", "sent_idx", "n_sents"] + extra:
            words[c] = stories[c].to_numpy()[rep]
        words["sent_idx"] = words["sent_idx"].astype(np.int64)
        words["n_sents"] = words["n_sents"].astype(np.int64)
        return words[STORY_COLUMNS + (["s_D_other", "s_PD_other"] if other else []) + extra]

    table = cached_table("word-surprisal", params, compute, refresh=refresh) if cache \
        else compute()
    table.attrs["n_straddling"] = _n_straddling(table, straddle)
    return table


# ----------------------------------------------------------------------------- real data
def open_image(path: str) -> Any:
    """Open an image file as RGB (PIL) — the ``image_fn`` for real data sets (ids are paths)."""
    return crossmodal_image(path)


def crossmodal_units(frame: pd.DataFrame) -> pd.DataFrame:
    """Captions of :func:`tokenbook.data.crossmodal.load_crossmodal` as builder input.

    Adds ``caption_id = <image_key>-<lang>-<caption_idx>`` and ``image_id`` = the image path
    (use :func:`open_image` as ``image_fn``).
    """
    _check_frame(frame, ["image_key", "lang", "caption_idx", "text", "image_path"],
                 "Crossmodal-3600 captions")
    out = frame.copy()
    out["caption_id"] = (out["image_key"].astype(str) + "-" + out["lang"].astype(str) + "-"
                         + out["caption_idx"].astype(str))
    out["image_id"] = out["image_path"].astype(str)
    return out


def bloom_units(sentences: pd.DataFrame) -> pd.DataFrame:
    """Sentences of ``bloom_sentences(load_bloom_vist(...))`` as :func:`story_word_table` input.

    ``para_idx`` = the page (``page_idx``), ``image_id`` = the page's image path (pages need
    ``image_path``: load with ``images_dir``), ``n_sents`` per story.
    """
    _check_frame(sentences, ["lang", "story_id", "page_idx", "sent_idx", "text", "image_path"],
                 "Bloom-VIST sentences")
    if sentences["image_path"].isna().any():
        raise ValueError("Bloom-VIST pages have no image files: pass images_dir= to "
                         "load_bloom_vist (the P and P+D conditions need each page's picture)")
    out = sentences.copy()
    out["para_idx"] = out["page_idx"].astype(np.int64)
    out["image_id"] = out["image_path"].astype(str)
    out["n_sents"] = out.groupby(["lang", "story_id"])["sent_idx"].transform("size")
    return out


# ----------------------------------------------------------------------------- chapter entry points
def tiny_caption_words(world, models, splits: Sequence[str], *, batch_size: int = 32,
                       device=None, progress: bool = True) -> pd.DataFrame:
    """Caption word table of the tiny world's ``splits``, scored with its trained models.

    One cached :func:`caption_word_table` entry per split with the world's gold words and UPOS,
    so the UID and groundedness chapters share every entry (the key depends on the data and the
    models, not on ``batch_size`` or ``device``).
    """
    gold = GoldSegmenter.from_frame(world.captions)
    unknown = sorted(set(splits) - set(world.captions["split"]))
    if unknown:
        raise ValueError(f"unknown caption split(s) {unknown}; the world has "
                         f"{sorted(world.captions['split'].unique())}")
    return pd.concat([
        caption_word_table(world.captions[world.captions["split"] == split],
                           image_fn=world.image, captioner=models.captioner_dir,
                           text_lm=models.text_lm_dir, segmenter=gold, dataset="tiny",
                           batch_size=batch_size, device=device, progress=progress)
        for split in splits], ignore_index=True)


def crossmodal_caption_words(crossmodal_dir: str, *, langs: Sequence[str] | None,
                             captioner: Any, text_lm: Any, text_lm_tokenizer: str | None = None,
                             batch_size: int = 16, device=None,
                             progress: bool = True) -> pd.DataFrame:
    """Caption word table of Crossmodal-3600 (paper scale), words and UPOS from Stanza.

    Models are loaded lazily (only on a cache miss) and each language is its own cache entry,
    so an interrupted run resumes at the next language; both grounded chapters share them.
    """
    xm = crossmodal_units(load_crossmodal(crossmodal_dir, langs=list(langs) if langs else None))
    cap_model = lazy_model(captioner, "captioner", device=device)
    lm_model = lazy_model(text_lm, "text_lm", device=device, tokenizer=text_lm_tokenizer or None)
    segmenter = StanzaSegmenter(mwt="join", use_gpu=str(device).startswith("cuda"))
    return pd.concat([
        caption_word_table(xm[xm["lang"] == lang], image_fn=open_image, captioner=cap_model,
                           text_lm=lm_model, segmenter=segmenter,
                           segmenter_id=segmenter.id, dataset="xm3600",
                           batch_size=batch_size, device=device, progress=progress)
        for lang in sorted(xm["lang"].unique())], ignore_index=True)


def drop_unscorable(table: pd.DataFrame, columns: Sequence[str] = ("s_U", "s_P"), *,
                    unit: Sequence[str] = ("lang", "unit_id")) -> tuple[pd.DataFrame, int]:
    """Drop every unit that has a non-finite surprisal in any of ``columns``; count them.

    A NaN word surprisal comes from a token straddling two words (see the
    module docstring); dropping only the word would splice its neighbours
    together and fake a successive difference, so the whole unit goes.
    """
    unit = list(unit)
    check_table(table, "word surprisal table", columns=unit + list(columns), min_rows=0)
    bad = ~np.isfinite(table[list(columns)].to_numpy(float)).all(axis=1)
    if not bad.any():
        return table, 0
    key = pd.MultiIndex.from_frame(table[unit])
    bad_units = key[bad].unique()
    keep = ~key.isin(bad_units)
    return table.loc[keep], int(len(bad_units))
