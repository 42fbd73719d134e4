"""Synthetic languages generated from typological parameters, with gold UPOS on every word.

A :class:`Language` realises a language-independent *clause plan* (see :mod:`.scenes` and
:mod:`.stories`) as a list of :class:`Word` (surface form, UD UPOS tag, concept, concreteness).
The parameters are the ones the grounded-typology paper cares about:

* ``word_order``: ``"SVO"``, ``"SOV"`` or ``"VSO"`` (adpositions follow: prepositions for VO,
  postpositions for OV);
* ``adj_position``: adjectives ``"before"`` or ``"after"`` the noun;
* ``articles``: ``"none"``, ``"definite"`` (definite article only) or ``"both"`` (definite and
  indefinite);
* ``morphology`` of number and case on nouns and pronouns:
  ``"analytic"`` (a plural suffix, no case), ``"separate"`` (plural particle PART and case
  particles ADP as separate words), ``"fusional"`` (one unsegmentable ending per number+case and
  noun class) or ``"agglutinative"`` (stem + plural suffix + case suffix, each regular);
* ``spaces``: whether the script puts spaces between words (words are still given by the
  ``words`` / ``word_spans`` columns).

Lexicons are generated from a seed (CV(C) syllables over a per-language phoneme inventory); every
surface form is unique within a language and maps to exactly one UPOS tag.
Concreteness is on the 1-5 scale of concreteness norms (Brysbaert et al.; Glasgow norms use 1-7)
and is *derived from the generator*, not set by hand (:func:`generator_rating`): a concept is
concrete when the generator reads its value off the rendered objects (:data:`DEPICTED`: shapes,
colours, sizes, grid regions, spatial relations, counts), rating 5, and abstract otherwise,
rating 1, plus seeded rater noise (normal, sd :data:`RATER_SD`, per language and concept,
clipped to 1-5) standing in for the disagreement of human raters.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass, field

import numpy as np

__all__ = ["Typology", "Language", "Word", "DEFAULT_TYPOLOGIES", "CONCEPTS", "DEPICTED",
           "RATER_SD", "generator_rating", "make_languages", "rng_for"]

#: concept -> (UPOS, base concreteness on 1-5). Image-predictable concepts are concrete;
#: evaluative adverbs, connectives and function words are not.
CONCEPTS: dict[str, tuple[str, float]] = {
    # shapes (NOUN)
    "circle": ("NOUN", 4.85), "square": ("NOUN", 4.8), "triangle": ("NOUN", 4.75),
    "diamond": ("NOUN", 4.6), "cross": ("NOUN", 4.5),
    # regions (NOUN)
    "top": ("NOUN", 3.4), "bottom": ("NOUN", 3.5), "left": ("NOUN", 3.0), "right": ("NOUN", 2.9),
    "middle": ("NOUN", 3.1),
    # colours and sizes (ADJ)
    "red": ("ADJ", 4.3), "green": ("ADJ", 4.2), "blue": ("ADJ", 4.25), "yellow": ("ADJ", 4.2),
    "purple": ("ADJ", 4.0), "white": ("ADJ", 4.1),
    "big": ("ADJ", 3.5), "small": ("ADJ", 3.4),
    # numerals (NUM)
    "two": ("NUM", 3.0), "three": ("NUM", 2.9), "four": ("NUM", 2.9),
    # verbs: spatial relations (image-predictable), posture synonyms (not), story events
    "above": ("VERB", 3.2), "below": ("VERB", 3.2), "leftof": ("VERB", 3.0),
    "rightof": ("VERB", 3.0),
    "sit": ("VERB", 3.3), "rest": ("VERB", 2.7), "stay": ("VERB", 2.3), "lie": ("VERB", 3.0),
    "exist": ("VERB", 1.8),
    "move": ("VERB", 3.4), "turn": ("VERB", 2.8), "grow": ("VERB", 3.0), "shrink": ("VERB", 3.0),
    "appear": ("VERB", 2.9), "leave": ("VERB", 2.8),
    # copula (AUX)
    "be": ("AUX", 1.4),
    # adpositions (ADP)
    "at": ("ADP", 1.9), "towards": ("ADP", 2.2),
    # evaluative / discourse adverbs (ADV): the image cannot predict them
    "really": ("ADV", 1.6), "clearly": ("ADV", 1.8), "surely": ("ADV", 1.5),
    "oddly": ("ADV", 1.7), "then": ("ADV", 1.9), "also": ("ADV", 1.5), "next": ("ADV", 2.0),
    # connectives (CCONJ)
    "and": ("CCONJ", 1.3), "but": ("CCONJ", 1.3),
    # articles (DET)
    "def": ("DET", 1.5), "indef": ("DET", 1.4),
    # pronoun (PRON), 3rd person singular
    "it": ("PRON", 1.9),
    # grammatical particles of "separate" morphology
    "pl": ("PART", 1.3), "nom": ("ADP", 1.2), "acc": ("ADP", 1.2), "obl": ("ADP", 1.3),
}

#: concepts whose value the generator reads off the rendered scene (scenes.py: the object's
#: shape, colour and size; its grid region; relations between cells; counts of a shape)
DEPICTED = frozenset({"circle", "square", "triangle", "diamond", "cross", "top", "bottom", "left",
                      "right", "middle", "red", "green", "blue", "yellow", "purple", "white",
                      "big", "small", "two", "three", "four", "above", "below", "leftof",
                      "rightof"})
#: sd of the simulated raters' noise on the 1-5 concreteness scale
RATER_SD = 0.5

CASES = ("nom", "acc", "obl")


def generator_rating(concept: str, rng: np.random.Generator) -> float:
    """Concreteness rating of ``concept`` (1-5) derived from the generator: 1 + 4·[depicted]
    plus rater noise N(0, RATER_SD), clipped to [1, 5]."""
    if concept not in CONCEPTS:
        raise KeyError(f"unknown concept {concept!r}; known: {sorted(CONCEPTS)}")
    base = 5.0 if concept in DEPICTED else 1.0
    return float(np.clip(base + rng.normal(0.0, RATER_SD), 1.0, 5.0))
NUMBERS = ("sg", "pl")


def rng_for(seed: int, *keys) -> np.random.Generator:
    """A numpy Generator determined by ``seed`` and any ints/strings in ``keys``.

    Strings are hashed with CRC32 (never Python's salted ``hash``), so streams are identical
    across processes and machines.
    """
    ints = [int(seed)]
    for k in keys:
        ints.append(zlib.crc32(k.encode()) if isinstance(k, str) else int(k))
    return np.random.default_rng(np.random.SeedSequence(ints))


@dataclass(frozen=True)
class Typology:
    """Typological parameters of one synthetic language (see module docstring)."""

    code: str
    name: str
    word_order: str
    adj_position: str
    articles: str
    morphology: str
    spaces: bool = True

    def __post_init__(self):
        checks = {"word_order": ("SVO", "SOV", "VSO"), "adj_position": ("before", "after"),
                  "articles": ("none", "definite", "both"),
                  "morphology": ("analytic", "separate", "fusional", "agglutinative")}
        for attr, allowed in checks.items():
            if getattr(self, attr) not in allowed:
                raise ValueError(f"Typology {self.code!r}: {attr}={getattr(self, attr)!r}; "
                                 f"choose one of {allowed}")

    @property
    def adposition(self) -> str:
        """``"preposition"`` for VO orders, ``"postposition"`` for OV."""
        return "postposition" if self.word_order == "SOV" else "preposition"


#: the default languages: every value of every parameter occurs at least once.
DEFAULT_TYPOLOGIES: tuple[Typology, ...] = (
    Typology("aru", "Aru", "SVO", "before", "both", "analytic", True),
    Typology("bek", "Bek", "SOV", "before", "none", "agglutinative", True),
    Typology("cit", "Cit", "VSO", "after", "definite", "fusional", True),
    Typology("dov", "Dov", "SOV", "before", "none", "separate", False),
    Typology("eln", "Eln", "SVO", "after", "both", "fusional", True),
    Typology("fum", "Fum", "VSO", "before", "definite", "agglutinative", True),
    Typology("gis", "Gis", "SOV", "after", "definite", "separate", True),
    Typology("hol", "Hol", "SVO", "before", "none", "agglutinative", False),
)


@dataclass
class Word:
    """One surface word of a sentence."""

    form: str
    upos: str
    concept: str
    concreteness: float
    feats: str = ""


@dataclass
class Language:
    """A generated language: typology, lexicon and the grammar that realises clause plans."""

    typology: Typology
    seed: int
    stems: dict = field(default_factory=dict)        # concept -> stem
    affixes: dict = field(default_factory=dict)      # grammatical affixes
    noun_class: dict = field(default_factory=dict)   # noun concept -> 0/1 (fusional endings)
    concreteness: dict = field(default_factory=dict)  # concept -> rating in this language

    @property
    def code(self) -> str:
        return self.typology.code

    # ------------------------------------------------------------------ lexicon generation
    @classmethod
    def generate(cls, typology: Typology, seed: int) -> "Language":
        """Generate a lexicon whose surface forms are unique within the language."""
        for attempt in range(100):
            lang = cls(typology, seed)
            rng = rng_for(seed, "lexicon", typology.code, attempt)
            lang._draw(rng)
            if lang._forms_unique():
                return lang
        raise RuntimeError(f"could not draw a lexicon with unique forms for {typology.code}")

    def _draw(self, rng: np.random.Generator) -> None:
        cons = list("ptkbdgmnslrvzfh")
        vows = list("aeiou")
        C = sorted(rng.choice(cons, size=int(rng.integers(8, 12)), replace=False).tolist())
        V = sorted(rng.choice(vows, size=int(rng.integers(3, 6)), replace=False).tolist())
        codas = sorted(rng.choice(["n", "m", "s", "r", "l", "k"], size=2, replace=False).tolist())

        def syl(closed_p: float = 0.25) -> str:
            s = str(rng.choice(C)) + str(rng.choice(V))
            if rng.random() < closed_p:
                s += str(rng.choice(codas))
            return s

        used: set[str] = set()

        def fresh(n_syl: int, closed_p: float = 0.25) -> str:
            for _ in range(1000):
                w = "".join(syl(closed_p) for _ in range(n_syl))
                if w not in used:
                    used.add(w)
                    return w
            raise RuntimeError("lexicon space exhausted")

        for concept, (upos, base) in CONCEPTS.items():
            n_syl = 1 if upos in ("DET", "ADP", "PART", "AUX", "CCONJ", "PRON") else \
                (2 if upos != "NOUN" else int(rng.integers(2, 4)))
            self.stems[concept] = fresh(n_syl)
            self.concreteness[concept] = generator_rating(concept, rng)
        for concept, (upos, _) in CONCEPTS.items():
            if upos == "NOUN" or concept == "it":
                self.noun_class[concept] = int(rng.integers(0, 2))
        # affixes (vowel-initial or CV; unsegmentable endings for fusional)
        def affix() -> str:
            return str(rng.choice(V)) + str(rng.choice(C)) if rng.random() < 0.5 else \
                str(rng.choice(C)) + str(rng.choice(V))
        m = self.typology.morphology
        if m == "analytic":
            self.affixes["pl"] = affix()
        elif m == "agglutinative":
            self.affixes["pl"] = affix()
            self.affixes["acc"] = affix()
            self.affixes["obl"] = affix()
        elif m == "fusional":
            endings: set[str] = set()
            for klass in (0, 1):
                for num in NUMBERS:
                    for case in CASES:
                        if klass == 0 and num == "sg" and case == "nom":
                            self.affixes[(klass, num, case)] = ""
                            continue
                        for _ in range(100):
                            e = affix() + (str(rng.choice(V)) if rng.random() < 0.3 else "")
                            if e not in endings:
                                endings.add(e)
                                break
                        self.affixes[(klass, num, case)] = e

    def synonym(self, concept: str) -> str:
        """A second stem of ``concept`` (a synonym; the UID chapter's captions use them for
        shapes), drawn from its own stream (``"synonym"``), so the lexicon above is unchanged;
        unique among the language's forms and the other synonyms' stems."""
        cache = self.__dict__.setdefault("_synonyms", {})
        if concept not in cache:
            letters = sorted({ch for st in self.stems.values() for ch in st})
            vows = [ch for ch in letters if ch in "aeiou"]
            cons = [ch for ch in letters if ch not in "aeiou"]
            taken = {r["word"] for r in self.lexicon_rows()} | set(cache.values())
            rng = rng_for(self.seed, "synonym", self.code, concept)
            for _ in range(1000):
                w = "".join(str(rng.choice(cons)) + str(rng.choice(vows))
                            for _ in range(int(rng.integers(2, 4))))
                forms = {w} | {self.noun_form(concept, n, c, stem=w) for n in NUMBERS
                               for c in CASES}
                if not forms & taken and w != self.stems[concept]:
                    cache[concept] = w
                    break
            else:
                raise RuntimeError(f"could not draw a synonym of {concept!r} in {self.code}")
        return cache[concept]

    # ------------------------------------------------------------------ inflection
    def noun_form(self, concept: str, number: str = "sg", case: str = "nom",
                  stem: str | None = None) -> str:
        """Surface form of a noun or the pronoun in ``number`` and ``case`` (``stem``: another
        stem of the concept, e.g. :meth:`synonym`)."""
        stem = self.stems[concept] if stem is None else stem
        m = self.typology.morphology
        if m == "analytic":
            if concept == "it":  # pronoun keeps a nominative/oblique distinction, like English
                return stem if case == "nom" else stem + self.affixes["pl"][::-1]
            return stem + (self.affixes["pl"] if number == "pl" else "")
        if m == "separate":
            return stem
        if m == "agglutinative":
            return stem + (self.affixes["pl"] if number == "pl" else "") + \
                (self.affixes[case] if case != "nom" else "")
        return stem + self.affixes[(self.noun_class[concept], number, case)]

    def _forms_unique(self) -> bool:
        seen: dict[str, str] = {}
        for row in self.lexicon_rows():
            if row["word"] in seen and seen[row["word"]] != (row["concept"], row["upos"]):
                return False
            seen.setdefault(row["word"], (row["concept"], row["upos"]))
        return True

    def lexicon_rows(self) -> list[dict]:
        """One row per surface form: lang, word, lemma, concept, upos, feats, concreteness."""
        rows = []
        t = self.typology
        for concept, (upos, _) in CONCEPTS.items():
            if concept == "indef" and t.articles != "both":
                continue
            if concept == "def" and t.articles == "none":
                continue
            if concept in ("pl", "nom", "acc", "obl") and t.morphology != "separate":
                continue
            lemma = self.stems[concept]
            if upos == "NOUN" or concept == "it":
                forms = {}
                for num in NUMBERS:
                    if concept == "it" and num == "pl":
                        continue
                    for case in CASES:
                        forms.setdefault(self.noun_form(concept, num, case), []).append(
                            f"Number={num.capitalize()}|Case={case.capitalize()}")
                for form, feats in forms.items():
                    rows.append(dict(lang=t.code, word=form, lemma=lemma, concept=concept,
                                     upos=upos, feats=";".join(feats),
                                     concreteness=self.concreteness[concept]))
            else:
                rows.append(dict(lang=t.code, word=lemma, lemma=lemma, concept=concept,
                                 upos=upos, feats="", concreteness=self.concreteness[concept]))
        return rows

    # ------------------------------------------------------------------ realisation
    def word(self, concept: str, form: str | None = None, feats: str = "") -> Word:
        return Word(form or self.stems[concept], CONCEPTS[concept][0], concept,
                    self.concreteness[concept], feats)

    def np(self, spec: dict) -> list[Word]:
        """Realise a noun phrase.

        ``spec``: ``noun`` (concept), ``adjs`` (list of concepts, size before colour),
        ``definite`` (bool), ``number`` ("sg"/"pl"), ``num`` (numeral concept or None),
        ``case`` ("nom"/"acc"/"obl"), ``pronoun`` (bool), ``synonym`` (bool: the noun's
        :meth:`synonym`).
        """
        t = self.typology
        case, number = spec.get("case", "nom"), spec.get("number", "sg")
        feats = f"Number={number.capitalize()}|Case={case.capitalize()}"
        if spec.get("pronoun"):
            words = [self.word("it", self.noun_form("it", "sg", case), feats)]
        else:
            words = []
            if t.articles != "none" and spec.get("definite"):
                words.append(self.word("def"))
            elif t.articles == "both" and not spec.get("definite") and not spec.get("num"):
                words.append(self.word("indef"))
            if spec.get("num"):
                words.append(self.word(spec["num"]))
            adjs = [self.word(a) for a in spec.get("adjs", [])]
            stem = self.synonym(spec["noun"]) if spec.get("synonym") else None
            noun = self.word(spec["noun"], self.noun_form(spec["noun"], number, case, stem),
                             feats)
            if t.adj_position == "before":
                words += adjs + [noun]
            else:
                words += [noun] + adjs[::-1]
            if t.morphology == "separate" and number == "pl":
                words.append(self.word("pl"))
        if t.morphology == "separate":
            words.append(self.word(case))
        return words

    def coordinate(self, specs: list[dict]) -> list[Word]:
        """NP1 and NP2 (and NP3 ...)."""
        out: list[Word] = []
        for i, s in enumerate(specs):
            if i:
                out.append(self.word("and"))
            out += self.np(s)
        return out

    def pp(self, adp: str, spec: dict) -> list[Word]:
        """Adpositional phrase: preposition for VO languages, postposition for OV."""
        obj = self.np(dict(spec, case="obl"))
        a = [self.word(adp)]
        return obj + a if self.typology.adposition == "postposition" else a + obj

    def clause(self, plan: dict) -> list[Word]:
        """Realise one clause plan.

        ``plan``: ``kind`` in {"intr", "trans", "attr"}; ``subj`` (NP spec or list of specs,
        coordinated); ``verb`` (concept); ``obj`` (NP spec, trans); ``adj`` (concept, attr:
        predicative adjective after the copula, or the result of ``turn``); ``pp`` ((adp, NP
        spec) or None); ``adv`` (evaluative adverb concept placed before the verb, or None);
        ``conn`` (clause-initial connective concept or None).
        """
        subj_specs = plan["subj"] if isinstance(plan["subj"], list) else [plan["subj"]]
        S = self.coordinate([dict(s, case="nom") for s in subj_specs])
        kind = plan["kind"]
        verb_concept = "be" if kind == "attr" else plan["verb"]
        V = ([self.word(plan["adv"])] if plan.get("adv") else []) + [self.word(verb_concept)]
        rest: list[Word] = []
        O: list[Word] = []
        if kind == "trans":
            O = self.np(dict(plan["obj"], case="acc"))
        if plan.get("adj"):
            rest.append(self.word(plan["adj"]))
        if plan.get("pp"):
            rest += self.pp(*plan["pp"])
        order = self.typology.word_order
        if order == "SVO":
            body = S + V + O + rest
        elif order == "SOV":
            body = S + O + rest + V
        else:  # VSO
            body = V + S + O + rest
        conn = [self.word(plan["conn"])] if plan.get("conn") else []
        return conn + body

    def join(self, words: list[Word]) -> tuple[str, list[tuple[int, int]]]:
        """Text and character spans of ``words`` (no separator if the language has no spaces)."""
        sep = " " if self.typology.spaces else ""
        spans, pos = [], 0
        for i, w in enumerate(words):
            if i:
                pos += len(sep)
            spans.append((pos, pos + len(w.form)))
            pos += len(w.form)
        return sep.join(w.form for w in words), spans


def make_languages(seed: int, n_languages: int = 6,
                   typologies: tuple[Typology, ...] | None = None) -> list[Language]:
    """The first ``n_languages`` default typologies (or the given ones), lexicons from ``seed``."""
    typs = tuple(typologies) if typologies is not None else DEFAULT_TYPOLOGIES
    if not 1 <= n_languages <= len(typs):
        raise ValueError(f"n_languages must be in 1..{len(typs)}, got {n_languages}")
    codes = [t.code for t in typs[:n_languages]]
    if len(set(codes)) != len(codes):
        raise ValueError(f"language codes must be unique, got {codes}")
    return [Language.generate(t, seed) for t in typs[:n_languages]]
