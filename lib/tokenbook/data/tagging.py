"""Word segmentation and UPOS tagging of captions: the tagger adapter of the grounded chapters.

Every segmenter is a callable ``segmenter(text, lang) -> list[(word, upos, char_start, char_end)]``
whose spans are character offsets into ``text`` (``text[char_start:char_end] == word``), in text
order and non-overlapping. The scoring engine aligns model tokens to these spans by character
offsets (``tokenbook.scoring.word_surprisals(..., words=spans)``), so a word is *the tagger's
word*, not a whitespace word — which matters for languages written without spaces.

Two segmenters:

* :class:`GoldSegmenter` (tiny world): looks up the world's gold words and UPOS tags of a caption.
* :class:`StanzaSegmenter` (paper scale): Stanza's UD pipelines ``tokenize,mwt,pos``
  {cite}`qi2020stanza`, falling back to ``tokenize,pos`` for languages without a multi-word-token
  model, as the authors' pipeline does.

**Multi-word tokens.** UD splits some surface tokens into several syntactic words (French
"du" → "de le", Spanish "al" → "a el", German "zum" → "zu dem"). The syntactic words have no
character offsets of their own, so their surprisal cannot be separated. ``mwt="join"`` (default)
keeps the surface token as one segment tagged with the parts' tags joined by ``+``
(``"ADP+DET"``): it keeps its characters (so caption-level measures such as UID see every
character) but falls outside every analysed UPOS class. ``mwt="skip"`` tags it ``"SKIP"``, the
authors' convention (their ``POS='SKIP'``). Either way no multi-word token is counted as a NOUN,
DET, etc. Stanza is imported lazily; it is only needed at paper scale.
"""

from __future__ import annotations

from typing import Any, Callable, Iterable, Mapping, Sequence


Segment = tuple[str, str, int, int]
Segmenter = Callable[[str, str], list[Segment]]

#: XM3600 / ISO 639-1 codes whose Stanza model is registered under another code
STANZA_LANG_CODES = {"zh": "zh-hans", "no": "nb"}

MWT_POLICIES = ("join", "skip")


def spans_from_words(text: str, words: Sequence[str]) -> list[tuple[int, int]]:
    """Character spans of ``words`` found in order in ``text`` (whitespace between them optional).

    Works for languages written without spaces (the words are simply adjacent). Raises
    ``ValueError`` naming the word when a word is not where the sequence says it should be.
    """
    spans: list[tuple[int, int]] = []
    pos = 0
    for i, word in enumerate(words):
        if not word:
            raise ValueError(f"word #{i} is empty in {text!r}")
        while pos < len(text) and text[pos].isspace():
            pos += 1
        if text.startswith(word, pos):
            start = pos
        else:  # tolerate unexpected characters before the word (punctuation the tagger dropped)
            start = text.find(word, pos)
            if start < 0:
                raise ValueError(f"word #{i} {word!r} not found in {text!r} after offset {pos}; "
                                 "the segmentation does not match the text")
        spans.append((start, start + len(word)))
        pos = start + len(word)
    return spans


def check_segments(text: str, segments: Sequence[Segment]) -> list[Segment]:
    """Validate a segmentation: spans inside ``text``, matching their words, ordered, disjoint."""
    last_end = 0
    out = []
    for i, seg in enumerate(segments):
        if len(seg) != 4:
            raise ValueError(f"segment #{i} must be (word, upos, char_start, char_end), got {seg!r}")
        word, upos, start, end = seg
        start, end = int(start), int(end)
        if not (0 <= start < end <= len(text)):
            raise ValueError(f"segment #{i} {word!r} has span ({start}, {end}) outside the text "
                             f"of length {len(text)}")
        if text[start:end] != word:
            raise ValueError(f"segment #{i}: text[{start}:{end}] is {text[start:end]!r}, "
                             f"not the word {word!r}")
        if start < last_end:
            raise ValueError(f"segment #{i} {word!r} overlaps or precedes the previous segment")
        last_end = end
        out.append((str(word), str(upos), start, end))
    return out


# --------------------------------------------------------------------------------------------
# Gold words (tiny world)
# --------------------------------------------------------------------------------------------

class GoldSegmenter:
    """Segment captions with known gold words and UPOS tags (the tiny world's captions).

    Parameters
    ----------
    entries : mapping ``(lang, text) -> (words, upos)``, or an iterable of
        ``(lang, text, words, upos)`` records. A text given twice must have the same analysis.
    """

    def __init__(self, entries: Mapping[tuple[str, str], tuple[Sequence[str], Sequence[str]]]
                 | Iterable[tuple[str, str, Sequence[str], Sequence[str]]]):
        items = entries.items() if isinstance(entries, Mapping) else \
            (((lang, text), (words, upos)) for lang, text, words, upos in entries)
        self._table: dict[tuple[str, str], list[Segment]] = {}
        for (lang, text), (words, upos) in items:
            words, upos = list(words), list(upos)
            if len(words) != len(upos):
                raise ValueError(f"{lang!r} caption {text!r}: {len(words)} words but "
                                 f"{len(upos)} UPOS tags")
            segs = [(w, u, s, e) for (w, u), (s, e) in zip(zip(words, upos),
                                                           spans_from_words(text, words))]
            key = (str(lang), str(text))
            if key in self._table and self._table[key] != segs:
                raise ValueError(f"{lang!r} caption {text!r} is given twice with different "
                                 "gold analyses")
            self._table[key] = segs

    @classmethod
    def from_frame(cls, frame, *, lang: str = "lang", text: str = "text", words: str = "words",
                   upos: str = "upos") -> "GoldSegmenter":
        """From a DataFrame with one row per caption and list-valued ``words``/``upos`` columns."""
        missing = [c for c in (lang, text, words, upos) if c not in frame.columns]
        if missing:
            raise ValueError(f"GoldSegmenter.from_frame: missing columns {missing}; "
                             f"found {list(frame.columns)}")
        return cls(zip(frame[lang], frame[text], frame[words], frame[upos]))

    def __len__(self) -> int:
        return len(self._table)

    def __call__(self, text: str, lang: str) -> list[Segment]:
        try:
            return list(self._table[(lang, text)])
        except KeyError:
            raise KeyError(f"no gold analysis for the {lang!r} caption {text!r}: the gold "
                           "segmenter only knows the world's own captions") from None


# --------------------------------------------------------------------------------------------
# Stanza (paper scale)
# --------------------------------------------------------------------------------------------

def _attr(obj: Any, name: str, default: Any = None) -> Any:
    return getattr(obj, name, default)


def segments_from_document(doc: Any, text: str, *, mwt: str = "join") -> list[Segment]:
    """Convert a Stanza ``Document`` (or any object shaped like one) into segments of ``text``.

    Reads ``doc.sentences[i].tokens[j]`` with ``.text``, ``.start_char``, ``.end_char`` and
    ``.words[k].upos``. A token with several words is a multi-word token, handled by ``mwt``
    (see the module docstring). When a token has no offsets, or its offsets do not reproduce its
    text, it is located by searching ``text`` from the end of the previous token.
    """
    if mwt not in MWT_POLICIES:
        raise ValueError(f"mwt must be one of {MWT_POLICIES}, got {mwt!r}")
    segments: list[Segment] = []
    pos = 0
    for sentence in _attr(doc, "sentences", None) or []:
        for token in _attr(sentence, "tokens", None) or []:
            surface = _attr(token, "text")
            words = list(_attr(token, "words", None) or [])
            if not surface or not words:
                raise ValueError(f"tagger token {token!r} has no text or no words")
            start, end = _attr(token, "start_char"), _attr(token, "end_char")
            if start is None or end is None or text[int(start):int(end)] != surface:
                found = text.find(surface, pos)
                if found < 0:
                    raise ValueError(f"tagger token {surface!r} not found in {text!r} after "
                                     f"offset {pos}: the tagger changed the text")
                start, end = found, found + len(surface)
            start, end = int(start), int(end)
            if len(words) == 1:
                upos = _attr(words[0], "upos") or "X"
            else:
                upos = "SKIP" if mwt == "skip" else "+".join(_attr(w, "upos") or "X" for w in words)
            segments.append((surface, upos, start, end))
            pos = end
    return check_segments(text, segments)


def _import_stanza():
    try:
        import stanza  # noqa: F401
    except ImportError as exc:
        raise ImportError("The paper-scale tagger needs Stanza: `pip install stanza`, then "
                          "download each language's models once with `python -c \"import "
                          "stanza; stanza.download('LANG')\"` (LANG e.g. 'de').") from exc
    return stanza


class StanzaSegmenter:
    """Stanza UD tokenizer + MWT expander + UPOS tagger, one pipeline per language (lazy).

    Parameters
    ----------
    processors : Stanza processors; ``"tokenize,mwt,pos"`` as the authors, with an automatic
        fallback to ``"tokenize,pos"`` where a language has no MWT model.
    mwt : multi-word-token policy, ``"join"`` or ``"skip"`` (module docstring).
    use_gpu : passed to ``stanza.Pipeline``.
    pretokenized : treat whitespace as the only token boundary (``tokenize_pretokenized``).
    pipeline_factory : ``(lang, processors) -> pipeline`` for tests; default builds
        ``stanza.Pipeline`` with ``download_method=None`` (never downloads).
    """

    def __init__(self, *, processors: str = "tokenize,mwt,pos", mwt: str = "join",
                 use_gpu: bool = False, pretokenized: bool = False,
                 pipeline_factory: Callable[[str, str], Any] | None = None):
        if mwt not in MWT_POLICIES:
            raise ValueError(f"mwt must be one of {MWT_POLICIES}, got {mwt!r}")
        self.processors = processors
        self.mwt = mwt
        self.use_gpu = use_gpu
        self.pretokenized = pretokenized
        self._factory = pipeline_factory or self._stanza_pipeline
        self._pipelines: dict[str, Any] = {}
        self._memo: dict[tuple[str, str], list[Segment]] = {}

    @property
    def id(self) -> str:
        """The segmenter's identity for cache keys: ``"stanza:<processors>:<mwt policy>"``
        (plus ``":pretokenized"``), the one string every builder uses."""
        return f"stanza:{self.processors}:{self.mwt}" + (":pretokenized" if self.pretokenized
                                                          else "")

    def _stanza_pipeline(self, lang: str, processors: str):
        stanza = _import_stanza()
        code = STANZA_LANG_CODES.get(lang, lang)
        try:
            return stanza.Pipeline(code, processors=processors, use_gpu=self.use_gpu,
                                   tokenize_pretokenized=self.pretokenized,
                                   download_method=None, verbose=False)
        except Exception as exc:  # stanza raises several types for missing models
            raise RuntimeError(f"Stanza has no {processors!r} pipeline for {lang!r} (code "
                               f"{code!r}) on this machine: run `python -c \"import stanza; "
                               f"stanza.download('{code}')\"` first. Stanza said: {exc}") from exc

    def pipeline(self, lang: str):
        """The (cached) pipeline of ``lang``, with the MWT fallback."""
        if lang not in self._pipelines:
            try:
                self._pipelines[lang] = self._factory(lang, self.processors)
            except Exception:
                if "mwt" not in self.processors:
                    raise
                fallback = ",".join(p for p in self.processors.split(",") if p.strip() != "mwt")
                self._pipelines[lang] = self._factory(lang, fallback)
        return self._pipelines[lang]

    def __call__(self, text: str, lang: str) -> list[Segment]:
        if not isinstance(text, str):
            raise TypeError(f"text must be a str, got {type(text).__name__}")
        if not text.strip():
            return []
        if (lang, text) in self._memo:
            return list(self._memo[(lang, text)])
        doc = self.pipeline(lang)(text)
        return segments_from_document(doc, text, mwt=self.mwt)

    def prefetch(self, texts: Iterable[str], langs: Iterable[str], *, batch: int = 256,
                 progress: bool = True) -> int:
        """Tag many captions per language in batches (Stanza's ``bulk_process``) and memoise.

        Later calls with the same (text, lang) return the memoised segments. Batched tagging
        is much faster on a GPU; it may differ from one-by-one tagging only through floating
        point, but the segments enter the word tables' cache keys, so use the same mode in
        every chapter that shares those tables. Returns the number of captions tagged.
        """
        from tqdm.auto import tqdm

        by_lang: dict[str, list[str]] = {}
        for text, lang in zip(texts, langs):
            if isinstance(text, str) and text.strip() and (lang, text) not in self._memo:
                by_lang.setdefault(str(lang), []).append(text)
        done = 0
        for lang, items in by_lang.items():
            items = list(dict.fromkeys(items))
            pipe = self.pipeline(lang)
            for i in tqdm(range(0, len(items), batch), desc=f"tagging {lang}",
                          disable=not progress):
                chunk = items[i:i + batch]
                docs = pipe.bulk_process(chunk) if hasattr(pipe, "bulk_process") else \
                    [pipe(t) for t in chunk]
                for text, doc in zip(chunk, docs):
                    self._memo[(lang, text)] = segments_from_document(doc, text, mwt=self.mwt)
                done += len(chunk)
        return done
