"""A synthetic translation world where the truth about every pair is known by construction.

A source language (SVO, adjectives before nouns, plural by a suffix ``-s``) is translated into a
target language by a *transduction*: a lexical mapping, reordering (SOV, adjectives after the
noun) and agreement morphology (gender/number suffixes on nouns and adjectives, agreeing
determiners, verb agreement with the subject's number). Words of both languages are generated
pseudo-words over disjoint letter inventories, so a copied (untranslated) source is visibly not
a translation.

Planted phenomena (labelled in ``pairs["phenomenon"]`` for *evaluation only*; no model or
feature may read the label):

``idiom``
    A fixed source phrase (verb + object noun, both ordinary words) whose target is an unrelated
    fixed phrase: a non-compositional translation. Each idiom occurs in ``idiom_repeats`` pairs.
``noisy_misaligned`` / ``noisy_truncated`` / ``noisy_copy``
    Another pair's target; the target cut to its first half; the source copied as its target.
``rare_word``
    One noun replaced by a hapax from a long-tailed lexicon (a word seen in exactly one pair).
``alternative``
    The same source twice, with two valid targets (a verb with two translations).
``duplicate``
    An exact duplicate: the same pair twice (both copies share a ``group_id``).
``idiom_literal``
    The *control* for idioms (mechanism off, planted at ``idiom_literal_rate``): a fixed source
    phrase repeated ``idiom_repeats`` times exactly like an idiom, but translated
    compositionally. It has an idiom's repetition and length and lacks only the
    non-compositional translation, so a statistic that separates idioms from regular pairs and
    also separates these is not measuring non-compositionality.
``regular``
    Everything else: compositional translations by the transduction.

Test set: ``n_test`` held-out regular pairs; with ``test_idiom_share > 0`` that share of them
uses a training idiom's source phrase (translated by the idiom's fixed target) in a new
sentence, so that translating the test set *needs* what was memorised (column
``uses_idiom``).

Everything is deterministic from ``seed``.

:func:`make_multiparallel_world` builds the multi-parallel variant (the paper's one English
source file with five targets): one shared source side translated into several target
languages, each with its own vocabulary, word order, agreement, idioms and noise, and its own
phenomenon labels.

Example
-------
>>> world = make_translation_world(n_pairs=200, seed=0)
>>> world.pairs.columns.tolist()
['pair_id', 'source', 'target', 'phenomenon', 'group_id']
>>> len(world.pairs)
200
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

PHENOMENA = ("regular", "idiom", "idiom_literal", "noisy_misaligned", "noisy_truncated",
             "noisy_copy", "rare_word", "alternative", "duplicate")
NOISY = ("noisy_misaligned", "noisy_truncated", "noisy_copy")
#: the phenomena a multi-parallel world plants on the shared source side (the noisy kinds are
#: drawn per language on regular sources): :func:`make_multiparallel_world`
SOURCE_SIDE_PHENOMENA = ("idiom", "idiom_literal", "rare_word", "alternative", "duplicate")

_SRC_C, _SRC_V = list("ptkbdgmnsl"), list("aeiou")
_TGT_C, _TGT_V = list("rvzfhjcwxq"), ["a", "o", "u", "ei", "ou", "ia"]


@dataclass
class TranslationWorld:
    """The generated corpus.

    Attributes
    ----------
    pairs : DataFrame, one row per training pair: ``pair_id`` (0..N-1), ``source``, ``target``
        (whitespace-tokenised strings), ``phenomenon`` (one of :data:`PHENOMENA`),
        ``group_id`` (identical (source, target) pairs share it).
    test : DataFrame of held-out pairs (``source``, ``target``, ``uses_idiom``) whose sources
        never occur in ``pairs``; regular, except the ``test_idiom_share`` that use an idiom.
    lexicon : DataFrame ``source, target, pos, gender, kind`` (kind: base/rare/idiom).
    params : the generation parameters.
    """

    pairs: pd.DataFrame
    test: pd.DataFrame
    lexicon: pd.DataFrame
    params: dict = field(default_factory=dict)

    def rates(self) -> pd.Series:
        """Share of pairs per planted phenomenon."""
        return self.pairs["phenomenon"].value_counts(normalize=True).reindex(PHENOMENA,
                                                                              fill_value=0.0)


def _words(rng: np.random.Generator, n: int, cons: list[str], vows: list[str], taken: set[str],
           syllables=(2, 3)) -> list[str]:
    out = []
    while len(out) < n:
        k = int(rng.integers(syllables[0], syllables[1] + 1))
        w = "".join(cons[rng.integers(len(cons))] + vows[rng.integers(len(vows))]
                    for _ in range(k))
        if w not in taken:
            taken.add(w)
            out.append(w)
    return out


class _Grammar:
    """Source generator and the source→target transduction."""

    def __init__(self, rng, n_nouns, n_verbs, n_adjectives, n_rare, zipf_a, with_target=True):
        taken_s, taken_t = set(), set()
        self.rng = rng
        self.nouns = _words(rng, n_nouns, _SRC_C, _SRC_V, taken_s)
        self.verbs = _words(rng, n_verbs, _SRC_C, _SRC_V, taken_s)
        self.adjs = _words(rng, n_adjectives, _SRC_C, _SRC_V, taken_s)
        self.rare = _words(rng, n_rare, _SRC_C, _SRC_V, taken_s, syllables=(3, 4))
        self.preps = _words(rng, 3, _SRC_C, _SRC_V, taken_s, syllables=(1, 1))
        self.dets_s = {"def": "ka", "indef": "mu"}
        taken_s.update(self.dets_s.values())
        w = 1.0 / np.arange(1, n_nouns + 1) ** zipf_a
        self.noun_p = w / w.sum()
        if not with_target:   # source side only (the multi-parallel world's targets: _Language)
            return
        # target lexicon (disjoint letters); verbs get two translations (for alternatives)
        self.t_noun = dict(zip(self.nouns, _words(rng, n_nouns, _TGT_C, _TGT_V, taken_t)))
        self.t_rare = dict(zip(self.rare, _words(rng, n_rare, _TGT_C, _TGT_V, taken_t, (3, 4))))
        self.t_verb = dict(zip(self.verbs, _words(rng, n_verbs, _TGT_C, _TGT_V, taken_t)))
        self.t_verb_alt = dict(zip(self.verbs, _words(rng, n_verbs, _TGT_C, _TGT_V, taken_t)))
        self.t_adj = dict(zip(self.adjs, _words(rng, n_adjectives, _TGT_C, _TGT_V, taken_t)))
        self.t_prep = dict(zip(self.preps, _words(rng, 3, _TGT_C, _TGT_V, taken_t, (1, 1))))
        self.gender = {n: ("m" if rng.random() < 0.5 else "f") for n in self.nouns + self.rare}
        self.taken_t = taken_t

    # -- source side -------------------------------------------------------------------
    def noun_phrase(self, noun=None):
        rng = self.rng
        return {"det": "def" if rng.random() < 0.6 else "indef",
                "adj": self.adjs[rng.integers(len(self.adjs))] if rng.random() < 0.4 else None,
                "noun": noun or self.nouns[rng.choice(len(self.nouns), p=self.noun_p)],
                "plural": bool(rng.random() < 0.3)}

    def sentence(self):
        rng = self.rng
        s = {"subj": self.noun_phrase(), "verb": self.verbs[rng.integers(len(self.verbs))],
             "obj": self.noun_phrase(), "pp": None}
        if rng.random() < 0.3:
            s["pp"] = (self.preps[rng.integers(len(self.preps))], self.noun_phrase())
        return s

    def src_np(self, np_):
        words = [self.dets_s[np_["det"]]]
        if np_["adj"]:
            words.append(np_["adj"])
        words.append(np_["noun"] + ("s" if np_["plural"] else ""))
        return words

    def source(self, s, idiom=None):
        words = self.src_np(s["subj"])
        words += idiom["src"] if idiom else [s["verb"], *self.src_np(s["obj"])]
        if s["pp"]:
            words += [s["pp"][0], *self.src_np(s["pp"][1])]
        return " ".join(words)

    # -- the transduction --------------------------------------------------------------
    def tgt_np(self, np_):
        g, pl = self.gender[np_["noun"]], np_["plural"]
        det = {("def", "m", False): "il", ("def", "f", False): "la", ("def", "m", True): "ilo",
               ("def", "f", True): "lae", ("indef", "m", False): "un",
               ("indef", "f", False): "una", ("indef", "m", True): "deo",
               ("indef", "f", True): "dae"}[(np_["det"], g, pl)]
        suffix = {("m", False): "", ("f", False): "a", ("m", True): "i", ("f", True): "e"}[(g, pl)]
        lex = self.t_rare if np_["noun"] in self.t_rare else self.t_noun
        words = [det, lex[np_["noun"]] + suffix]
        if np_["adj"]:
            words.append(self.t_adj[np_["adj"]] + suffix)
        return words

    def target(self, s, idiom=None, alt=False):
        words = self.tgt_np(s["subj"])
        if idiom:
            words += idiom["tgt"]
        else:
            words += self.tgt_np(s["obj"])
        if s["pp"]:
            words += [self.t_prep[s["pp"][0]], *self.tgt_np(s["pp"][1])]
        if not idiom:
            verb = (self.t_verb_alt if alt else self.t_verb)[s["verb"]]
            words.append(verb + ("ano" if s["subj"]["plural"] else "a"))
        return " ".join(words)


#: the tag of the random stream that draws the derivable rare compounds (``rare_derivable``)
_DERIVABLE_TAG = 7211


def _derivable_rare(g: "_Grammar", rng: np.random.Generator) -> None:
    """Replace the grammar's rare words by hyphenated compounds of two distinct ordinary nouns,
    each translated part by part (its gender the second part's), in place."""
    rare, t_rare, seen = [], {}, set()
    while len(rare) < len(g.rare):
        a, b = rng.choice(len(g.nouns), size=2, replace=False)
        word = f"{g.nouns[a]}-{g.nouns[b]}"
        if word in seen:
            continue
        seen.add(word)
        rare.append(word)
        t_rare[word] = f"{g.t_noun[g.nouns[a]]}-{g.t_noun[g.nouns[b]]}"
        g.gender[word] = g.gender[g.nouns[b]]
    g.rare, g.t_rare = rare, t_rare


def _check_rates(rates: dict, n_pairs: int, test_idiom_share: float) -> None:
    if not 0.0 <= test_idiom_share <= 1.0:
        raise ValueError(f"test_idiom_share must be in [0, 1], got {test_idiom_share}")
    if test_idiom_share > 0 and rates["idiom_rate"] == 0:
        raise ValueError("test_idiom_share > 0 needs idioms in training (idiom_rate > 0)")
    for k, v in rates.items():
        if not 0.0 <= v < 1.0:
            raise ValueError(f"{k} must be in [0, 1), got {v}")
    if sum(rates.values()) >= 0.9:
        raise ValueError(f"planted rates sum to {sum(rates.values()):.2f}; keep them below 0.9 "
                         "so that most pairs are regular")
    if n_pairs < 20:
        raise ValueError(f"n_pairs must be at least 20, got {n_pairs}")


def make_translation_world(n_pairs: int = 3000, *, n_test: int = 300, seed: int = 0,
                           n_nouns: int = 60, n_verbs: int = 20, n_adjectives: int = 15,
                           zipf_a: float = 1.0, idiom_rate: float = 0.05, idiom_repeats: int = 2,
                           noise_rate: float = 0.06, rare_rate: float = 0.05,
                           alternative_rate: float = 0.04, duplicate_rate: float = 0.04,
                           idiom_literal_rate: float = 0.0, test_idiom_share: float = 0.0,
                           rare_derivable: bool = False) -> TranslationWorld:
    """Generate the world: ``n_pairs`` training pairs with planted phenomena, ``n_test`` test pairs.

    Rates are shares of the ``n_pairs`` lines (each rounded down); ``noise_rate`` is split evenly
    over misaligned / truncated / copied targets; alternative and duplicate pairs come in twos.
    A rate of 0 switches a phenomenon off (it is then absent). ``idiom_literal_rate`` plants
    the literal-idiom control; ``test_idiom_share`` the share of test pairs using an idiom.

    ``rare_derivable=True`` is the off world of the rare-word mechanism: each ``rare_word`` pair
    holds, instead of a hapax with an unrelated translation, a hapax *compound* of two ordinary
    nouns joined by a hyphen (``a-b``, gender of ``b``) translated part by part (``t(a)-t(b)``),
    so the word is as rare but its translation is derivable from the regular pairs. The
    compounds are drawn from their own stream (``seed`` and a fixed tag): every other random
    choice, and so every other pair and the test set, is the same as with ``False``.
    """
    rates = dict(idiom_rate=idiom_rate, noise_rate=noise_rate, rare_rate=rare_rate,
                 alternative_rate=alternative_rate, duplicate_rate=duplicate_rate,
                 idiom_literal_rate=idiom_literal_rate)
    _check_rates(rates, n_pairs, test_idiom_share)
    rng = np.random.default_rng(seed)
    n_idiom_pairs = int(idiom_rate * n_pairs)
    n_idioms = max(1, n_idiom_pairs // max(1, idiom_repeats)) if n_idiom_pairs else 0
    n_rare = int(rare_rate * n_pairs)
    g = _Grammar(rng, n_nouns, n_verbs, n_adjectives, max(n_rare, 1), zipf_a)
    if rare_derivable:
        _derivable_rare(g, np.random.default_rng([int(seed), _DERIVABLE_TAG]))

    # idioms: a fixed (verb, object NP) source phrase -> an unrelated fixed target phrase
    idioms, phrases = [], set()
    while len(idioms) < n_idioms:
        obj = g.noun_phrase()
        obj["adj"] = None
        src = [g.verbs[rng.integers(len(g.verbs))], *g.src_np(obj)]
        if " ".join(src) in phrases:      # every idiom has its own source phrase
            continue
        phrases.add(" ".join(src))
        tgt = _words(rng, 2, _TGT_C, _TGT_V, g.taken_t)
        idioms.append({"src": src, "tgt": tgt})

    # literal-idiom controls: a fixed (verb, object NP) phrase, repeated, translated literally
    n_lit_pairs = int(idiom_literal_rate * n_pairs)
    n_literal = max(1, n_lit_pairs // max(1, idiom_repeats)) if n_lit_pairs else 0
    literals = []
    while len(literals) < n_literal:
        obj = g.noun_phrase()
        obj["adj"] = None
        verb = g.verbs[rng.integers(len(g.verbs))]
        phrase = " ".join([verb, *g.src_np(obj)])
        if phrase in phrases:             # never an idiom's (or another control's) phrase
            continue
        phrases.add(phrase)
        literals.append({"verb": verb, "obj": obj})

    rows: list[tuple[str, str, str]] = []
    seen_src: set[str] = set()

    idiom_phrases = [f" {' '.join(i['src'])} " for i in idioms]

    def fresh(idiom=None, rare=None):
        while True:
            s = g.sentence()
            if rare is not None:
                s["obj"]["noun"] = rare
            src = g.source(s, idiom)
            # an idiom's words in a non-idiom sentence would make the idiom compositional
            accidental = idiom is None and any(ph in f" {src} " for ph in idiom_phrases)
            if src not in seen_src and not accidental:
                seen_src.add(src)
                return s, src

    for k in range(n_idioms * idiom_repeats if n_idiom_pairs else 0):
        idi = idioms[k % n_idioms]
        s, src = fresh(idiom=idi)
        rows.append((src, g.target(s, idiom=idi), "idiom"))
    for k in range(n_literal * idiom_repeats if n_lit_pairs else 0):
        lit = literals[k % n_literal]
        while True:
            s, src = fresh()
            s["verb"], s["obj"] = lit["verb"], dict(lit["obj"])
            src = g.source(s)
            if src not in seen_src and not any(ph in f" {src} " for ph in idiom_phrases):
                seen_src.add(src)
                break
        rows.append((src, g.target(s), "idiom_literal"))
    for r in g.rare[:n_rare]:
        s, src = fresh(rare=r)
        rows.append((src, g.target(s), "rare_word"))
    for _ in range(int(alternative_rate * n_pairs) // 2):
        s, src = fresh()
        rows.append((src, g.target(s), "alternative"))
        rows.append((src, g.target(s, alt=True), "alternative"))
    for _ in range(int(duplicate_rate * n_pairs) // 2):
        s, src = fresh()
        tgt = g.target(s)
        rows += [(src, tgt, "duplicate")] * 2
    n_noise = int(noise_rate * n_pairs)
    noise_kinds = ["noisy_misaligned", "noisy_truncated", "noisy_copy"]
    noise_specs = [noise_kinds[i % 3] for i in range(n_noise)]
    n_regular = n_pairs - len(rows) - n_noise
    if n_regular < n_noise + 1:
        raise ValueError("too few regular pairs for the planted rates; lower the rates")
    regular = []
    for _ in range(n_regular):
        s, src = fresh()
        regular.append((src, g.target(s), "regular"))
    rows += regular
    donors = [t for _, t, _ in regular]
    for kind in noise_specs:
        s, src = fresh()
        tgt = g.target(s)
        if kind == "noisy_misaligned":
            tgt = donors[rng.integers(len(donors))]
        elif kind == "noisy_truncated":
            w = tgt.split()
            tgt = " ".join(w[: max(1, len(w) // 2)])
        else:
            tgt = src
        rows.append((src, tgt, kind))

    order = rng.permutation(len(rows))
    pairs = pd.DataFrame([rows[i] for i in order], columns=["source", "target", "phenomenon"])
    pairs.insert(0, "pair_id", np.arange(len(pairs)))
    pairs["group_id"] = pairs.groupby(["source", "target"], sort=False).ngroup()

    test_rows = []
    n_test_idiom = int(round(test_idiom_share * n_test))
    for k in range(n_test):
        if k < n_test_idiom:
            idi = idioms[k % n_idioms]
            s, src = fresh(idiom=idi)
            test_rows.append((src, g.target(s, idiom=idi), True))
        else:
            s, src = fresh()
            test_rows.append((src, g.target(s), False))
    test = pd.DataFrame(test_rows, columns=["source", "target", "uses_idiom"])

    lex = ([(s, t, "NOUN", g.gender[s], "base") for s, t in g.t_noun.items()]
           + [(s, t, "NOUN", g.gender[s], "compound" if rare_derivable else "rare")
              for s, t in list(g.t_rare.items())[:n_rare]]
           + [(s, t, "VERB", "", "base") for s, t in g.t_verb.items()]
           + [(s, t, "VERB", "", "alternative") for s, t in g.t_verb_alt.items()]
           + [(s, t, "ADJ", "", "base") for s, t in g.t_adj.items()]
           + [(" ".join(i["src"]), " ".join(i["tgt"]), "IDIOM", "", "idiom") for i in idioms])
    lexicon = pd.DataFrame(lex, columns=["source", "target", "pos", "gender", "kind"])
    params = dict(n_pairs=n_pairs, n_test=n_test, seed=seed, n_nouns=n_nouns, n_verbs=n_verbs,
                  n_adjectives=n_adjectives, zipf_a=zipf_a, idiom_repeats=idiom_repeats,
                  test_idiom_share=test_idiom_share, **rates)
    if rare_derivable:      # only then: the default world's parameters (and cache keys) stay
        params["rare_derivable"] = True
    return TranslationWorld(pairs=pairs, test=test, lexicon=lexicon, params=params)


# -- the multi-parallel world: one source side, several target languages ----------------------

LANGUAGES = ("de", "nl", "fr", "es", "it")
"""Target-language names :func:`make_multiparallel_world` accepts (the paper's five EN→X pairs).

The names are labels: each language's grammar is drawn from the seed, not modelled on the real
language."""

VERB_POSITIONS = ("final", "second", "initial")
_VARIANTS = [(v, a, gd) for v in VERB_POSITIONS for a in (True, False) for gd in (True, False)]
# seed streams: [seed, 99] the variants, [seed, 100] the shared source side, [seed, 101 + i] the
# i-th language of LANGUAGES
_VARIANT_STREAM, _SOURCE_STREAM = 99, 100


class _Language:
    """One target language of the multi-parallel world: its own lexicon and grammar variant.

    Variant: the verb's position (``final`` subject-object-verb, ``second`` subject-verb-object,
    ``initial`` verb-subject-object), adjectives before or after the noun, and agreement with
    gender (gender/number suffixes on nouns and adjectives, determiners by definiteness, gender
    and number) or without (a plural suffix on nouns only, determiners by definiteness and
    number). The verb agrees with the subject's number in every language.
    """

    def __init__(self, rng: np.random.Generator, g: _Grammar, variant: tuple):
        self.verb_position, self.adj_after, self.has_gender = variant
        taken: set[str] = set()
        genders = ("m", "f") if self.has_gender else ("",)
        keys = [(d, gg, pl) for d in ("def", "indef") for gg in genders for pl in (False, True)]
        self.dets = dict(zip(keys, _words(rng, len(keys), _TGT_C, _TGT_V, taken, (1, 1))))
        v = [_TGT_V[i] for i in rng.permutation(len(_TGT_V))]
        if self.has_gender:
            self.suffix = {("m", False): "", ("f", False): v[0], ("m", True): v[1],
                           ("f", True): v[2]}
        else:
            self.suffix = {("", False): "", ("", True): v[0]}
        self.verb_suffix = {False: v[3], True: v[3] + _TGT_C[int(rng.integers(len(_TGT_C)))] + v[4]}
        self.t_noun = dict(zip(g.nouns, _words(rng, len(g.nouns), _TGT_C, _TGT_V, taken)))
        self.t_rare = dict(zip(g.rare, _words(rng, len(g.rare), _TGT_C, _TGT_V, taken, (3, 4))))
        self.t_verb = dict(zip(g.verbs, _words(rng, len(g.verbs), _TGT_C, _TGT_V, taken)))
        self.t_verb_alt = dict(zip(g.verbs, _words(rng, len(g.verbs), _TGT_C, _TGT_V, taken)))
        self.t_adj = dict(zip(g.adjs, _words(rng, len(g.adjs), _TGT_C, _TGT_V, taken)))
        self.t_prep = dict(zip(g.preps, _words(rng, len(g.preps), _TGT_C, _TGT_V, taken, (1, 1))))
        self.gender = {n: (("m" if rng.random() < 0.5 else "f") if self.has_gender else "")
                       for n in g.nouns + g.rare}
        self.taken = taken

    def variant(self) -> dict:
        return {"verb_position": self.verb_position,
                "adjective": "after" if self.adj_after else "before",
                "gender_agreement": self.has_gender}

    def tgt_np(self, np_) -> list[str]:
        g, pl = self.gender[np_["noun"]], np_["plural"]
        suffix = self.suffix[(g, pl)]
        lex = self.t_rare if np_["noun"] in self.t_rare else self.t_noun
        noun = lex[np_["noun"]] + suffix
        if not np_["adj"]:
            return [self.dets[(np_["det"], g, pl)], noun]
        adj = self.t_adj[np_["adj"]] + (suffix if self.has_gender else "")
        return [self.dets[(np_["det"], g, pl)], *((noun, adj) if self.adj_after else (adj, noun))]

    def target(self, s, idiom_tgt=None, alt=False) -> str:
        subj = self.tgt_np(s["subj"])
        pp = [self.t_prep[s["pp"][0]], *self.tgt_np(s["pp"][1])] if s["pp"] else []
        if idiom_tgt is not None:       # the fixed phrase replaces the verb phrase
            vp = list(idiom_tgt)
            words = vp + subj + pp if self.verb_position == "initial" else subj + vp + pp
            return " ".join(words)
        verb = (self.t_verb_alt if alt else self.t_verb)[s["verb"]]
        verb += self.verb_suffix[s["subj"]["plural"]]
        obj = self.tgt_np(s["obj"])
        if self.verb_position == "final":
            words = subj + obj + pp + [verb]
        elif self.verb_position == "second":
            words = subj + [verb] + obj + pp
        else:
            words = [verb] + subj + obj + pp
        return " ".join(words)


def _group_ids(items) -> np.ndarray:
    """One id per item, shared by the items with the same source and translation choice
    (duplicates, and an alternative's two translations apart): the subsets' grouping."""
    return (pd.DataFrame({"source": [it[3] for it in items], "alt": [it[4] for it in items]})
            .groupby(["source", "alt"], sort=False).ngroup().to_numpy())


def _check_targets(targets) -> list[str]:
    if isinstance(targets, str):
        raise ValueError(f"targets must be a sequence of language names such as ('de', 'nl'), "
                         f"not the string {targets!r}")
    targets = list(targets)
    unknown = [t for t in targets if t not in LANGUAGES]
    if unknown:
        raise ValueError(f"unknown target language(s) {unknown}; choose from {list(LANGUAGES)}")
    repeated = sorted({t for t in targets if targets.count(t) > 1})
    if repeated:
        raise ValueError(f"target language(s) {repeated} repeated; name each language once")
    if len(targets) < 2:
        raise ValueError(f"a multi-parallel world needs at least 2 target languages, got "
                         f"{len(targets)}: {targets}")
    return targets


def make_multiparallel_world(n_pairs: int = 3000, *, targets=("de", "nl", "fr"),
                             n_test: int = 300, seed: int = 0, idiomatic_share: float = 0.5,
                             n_nouns: int = 60, n_verbs: int = 20, n_adjectives: int = 15,
                             zipf_a: float = 1.0, idiom_rate: float = 0.05,
                             idiom_repeats: int = 2, noise_rate: float = 0.06,
                             rare_rate: float = 0.05, alternative_rate: float = 0.04,
                             duplicate_rate: float = 0.04, idiom_literal_rate: float = 0.0,
                             test_idiom_share: float = 0.0, shared_phenomena: bool = True
                             ) -> dict[str, TranslationWorld]:
    """One shared source side translated into several target languages (a multi-parallel corpus).

    Returns ``{language: TranslationWorld}`` in the order of ``targets`` (names from
    :data:`LANGUAGES`, at least 2, each once). Every world has the same ``n_pairs`` sources
    in the same order, with the same ``pair_id`` and ``group_id``, and the same ``n_test`` test
    sources; only the targets, the phenomenon labels, the lexicon and the ``params`` differ.
    The other parameters are those of :func:`make_translation_world`, with the same meaning.

    Shared by construction (the source side, drawn once from ``seed``): rare source words
    (``rare_word`` in every language), exact duplicates (``duplicate``), alternatives (the
    same source twice; ``alternative``: each language translates the verb two ways), and the
    fixed idiom phrases with their ``idiom_repeats`` sentences each.

    Per language (drawn from the language's own seed stream, so one language's world does not
    depend on which other targets are asked for): the target vocabulary, the grammar variant
    (``params["variant"]``: verb position, adjective position, gender agreement or not; the
    five languages get five different variants of the twelve, permuted by ``seed``), which
    idiom phrases are idiomatic (``round(idiomatic_share × number of idioms)`` of them, chosen
    per language, each translated by its own unrelated fixed phrase and labelled ``idiom``; the
    others are translated literally and labelled ``idiom_literal``, as are the phrases planted
    by ``idiom_literal_rate``, which are literal everywhere), and the noisy pairs (a
    ``noise_rate`` share of the pairs, drawn among the regular sources of that language:
    misaligned, truncated or copied targets, labelled as in :data:`PHENOMENA`). A test pair's
    ``uses_idiom`` is true where its source uses an idiom phrase that is idiomatic in that
    language.

    ``shared_phenomena=False`` is the cross-lingual claims' off world: the same source-side
    phenomenon sentences (idiom and literal-idiom sentences, rare words, alternatives,
    duplicates: the very sentences of the shared world) sit at positions drawn per language from
    that language's own stream, and every other position holds the regular sentence that all
    languages share there. So each language's corpus has the same phenomena, counts and regular
    sentence distribution as with sharing on, but a source-side phenomenon of one language is
    matched, by ``pair_id``, to another source (mostly a regular one) in the others; ``group_id``
    is then each language's own. The shared world's draws are unchanged (the extra regular
    sentences are drawn after everything else).
    """
    targets = _check_targets(targets)
    if not 0.0 <= idiomatic_share <= 1.0:
        raise ValueError(f"idiomatic_share must be in [0, 1], got {idiomatic_share}")
    rates = dict(idiom_rate=idiom_rate, noise_rate=noise_rate, rare_rate=rare_rate,
                 alternative_rate=alternative_rate, duplicate_rate=duplicate_rate,
                 idiom_literal_rate=idiom_literal_rate)
    _check_rates(rates, n_pairs, test_idiom_share)

    # -- the shared source side ----------------------------------------------------------
    rs = np.random.default_rng([seed, _SOURCE_STREAM])
    n_idiom_pairs = int(idiom_rate * n_pairs)
    n_idioms = max(1, n_idiom_pairs // max(1, idiom_repeats)) if n_idiom_pairs else 0
    n_lit_pairs = int(idiom_literal_rate * n_pairs)
    n_literal = max(1, n_lit_pairs // max(1, idiom_repeats)) if n_lit_pairs else 0
    n_rare = int(rare_rate * n_pairs)
    g = _Grammar(rs, n_nouns, n_verbs, n_adjectives, max(n_rare, 1), zipf_a, with_target=False)

    texts: set[str] = set()

    def phrase():                         # a fixed (verb, object NP) source phrase
        while True:
            obj = g.noun_phrase()
            obj["adj"] = None
            verb = g.verbs[rs.integers(len(g.verbs))]
            text = " ".join([verb, *g.src_np(obj)])
            if text not in texts:
                texts.add(text)
                return {"verb": verb, "obj": obj, "text": text}

    idioms = [phrase() for _ in range(n_idioms)]
    controls = [phrase() for _ in range(n_literal)]
    fixed = [f" {p['text']} " for p in idioms + controls]
    seen_src: set[str] = set()

    def fresh(ph=None, rare=None):
        while True:
            s = g.sentence()
            if ph is not None:
                s["verb"], s["obj"] = ph["verb"], dict(ph["obj"])
            if rare is not None:
                s["obj"]["noun"] = rare
            src = g.source(s)
            # a fixed phrase outside its own sentences would change its repetition count
            accidental = ph is None and any(f in f" {src} " for f in fixed)
            if src not in seen_src and not accidental:
                seen_src.add(src)
                return s, src

    # items: (kind, idiom index or -1, sentence, source, alternative translation?)
    items = []
    for k in range(n_idioms * idiom_repeats if n_idiom_pairs else 0):
        items.append(("idiom", k % n_idioms, *fresh(idioms[k % n_idioms]), False))
    for k in range(n_literal * idiom_repeats if n_lit_pairs else 0):
        items.append(("control", -1, *fresh(controls[k % n_literal]), False))
    for r in g.rare[:n_rare]:
        items.append(("rare_word", -1, *fresh(rare=r), False))
    for _ in range(int(alternative_rate * n_pairs) // 2):
        s, src = fresh()
        items += [("alternative", -1, s, src, False), ("alternative", -1, s, src, True)]
    for _ in range(int(duplicate_rate * n_pairs) // 2):
        s, src = fresh()
        items += [("duplicate", -1, s, src, False)] * 2
    n_noise = int(noise_rate * n_pairs)
    n_regular = n_pairs - len(items)
    if n_regular < n_noise + 1:
        raise ValueError("too few regular pairs for the planted rates; lower the rates")
    for _ in range(n_regular):
        items.append(("regular", -1, *fresh(), False))
    items = [items[i] for i in rs.permutation(len(items))]
    group_id = _group_ids(items)
    n_test_idiom = int(round(test_idiom_share * n_test))
    test_items = [("idiom", k % n_idioms, *fresh(idioms[k % n_idioms])) if k < n_test_idiom
                  else ("regular", -1, *fresh()) for k in range(n_test)]
    noise_kinds = ["noisy_misaligned", "noisy_truncated", "noisy_copy"]
    if not shared_phenomena:
        # a regular sentence for every position: the shared world's where it has one there
        regular_at = [it if it[0] == "regular" else ("regular", -1, *fresh(), False)
                      for it in items]
        phenomena = [it for it in items if it[0] != "regular"]

    # -- one world per target language ---------------------------------------------------
    # every known language gets its own variant (of 12), whichever targets are asked for
    variant_of = np.random.default_rng([seed, _VARIANT_STREAM]).permutation(len(_VARIANTS))
    worlds = {}
    for lang in targets:
        rl = np.random.default_rng([seed, _SOURCE_STREAM + 1 + LANGUAGES.index(lang)])
        L = _Language(rl, g, _VARIANTS[variant_of[LANGUAGES.index(lang)]])
        lang_items, lang_group = items, group_id
        if not shared_phenomena:  # this language's own positions for the phenomena
            ro = np.random.default_rng([seed, _SOURCE_STREAM + 50 + LANGUAGES.index(lang)])
            where = ro.permutation(n_pairs)[: len(phenomena)]
            lang_items = list(regular_at)
            for pos, it in zip(where, phenomena):
                lang_items[int(pos)] = it
            lang_group = _group_ids(lang_items)
        regular_pos = np.array([p for p, it in enumerate(lang_items) if it[0] == "regular"])
        n_idiomatic = int(round(idiomatic_share * n_idioms))
        idiomatic = sorted(int(i) for i in rl.permutation(n_idioms)[:n_idiomatic])
        idiom_tgt = {i: _words(rl, 2, _TGT_C, _TGT_V, L.taken) for i in idiomatic}
        rows = []
        for kind, i, s, src, alt in lang_items:
            if kind == "idiom" and i in idiom_tgt:
                rows.append((src, L.target(s, idiom_tgt[i]), "idiom"))
            elif kind in ("idiom", "control"):
                rows.append((src, L.target(s), "idiom_literal"))
            else:
                rows.append((src, L.target(s, alt=alt), kind))
        noisy = rl.choice(regular_pos, size=n_noise, replace=False)
        noisy_set = set(int(p) for p in noisy)
        donors = [rows[p][1] for p in regular_pos if p not in noisy_set]
        for j, p in enumerate(noisy):
            src, tgt, _ = rows[p]
            kind = noise_kinds[j % 3]
            if kind == "noisy_misaligned":
                tgt = donors[rl.integers(len(donors))]
            elif kind == "noisy_truncated":
                w = tgt.split()
                tgt = " ".join(w[: max(1, len(w) // 2)])
            else:
                tgt = src
            rows[p] = (src, tgt, kind)
        pairs = pd.DataFrame(rows, columns=["source", "target", "phenomenon"])
        pairs.insert(0, "pair_id", np.arange(len(pairs)))
        pairs["group_id"] = lang_group
        test = pd.DataFrame(
            [(src, L.target(s, idiom_tgt[i]), True) if kind == "idiom" and i in idiom_tgt
             else (src, L.target(s), False) for kind, i, s, src in test_items],
            columns=["source", "target", "uses_idiom"])
        lex = ([(s, t, "NOUN", L.gender[s], "base") for s, t in L.t_noun.items()]
               + [(s, L.t_rare[s], "NOUN", L.gender[s], "rare") for s in g.rare[:n_rare]]
               + [(s, t, "VERB", "", "base") for s, t in L.t_verb.items()]
               + [(s, t, "VERB", "", "alternative") for s, t in L.t_verb_alt.items()]
               + [(s, t, "ADJ", "", "base") for s, t in L.t_adj.items()]
               + [(idioms[i]["text"], " ".join(idiom_tgt[i]), "IDIOM", "", "idiom")
                  for i in idiomatic])
        lexicon = pd.DataFrame(lex, columns=["source", "target", "pos", "gender", "kind"])
        params = dict(language=lang, targets=tuple(targets), variant=L.variant(),
                      n_pairs=n_pairs, n_test=n_test, seed=seed, idiomatic_share=idiomatic_share,
                      n_nouns=n_nouns, n_verbs=n_verbs, n_adjectives=n_adjectives, zipf_a=zipf_a,
                      idiom_repeats=idiom_repeats, test_idiom_share=test_idiom_share, **rates,
                      **({} if shared_phenomena else {"shared_phenomena": False}))
        worlds[lang] = TranslationWorld(pairs=pairs, test=test, lexicon=lexicon, params=params)
    return worlds
