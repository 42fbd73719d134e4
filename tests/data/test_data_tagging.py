"""The tagger adapter: gold words, a hand-built Stanza-like Document with multi-word tokens,
a language without spaces, and the lazy Stanza import."""

import builtins
from types import SimpleNamespace as NS

import pytest

from tokenbook.data import tagging as tg


def word(text, upos):
    return NS(text=text, upos=upos)


def token(text, start, end, *words):
    return NS(text=text, start_char=start, end_char=end, words=list(words))


def doc(*sentences):
    return NS(sentences=[NS(tokens=list(toks)) for toks in sentences])


FR = "Le chat du voisin dort."
FR_DOC = doc([token("Le", 0, 2, word("Le", "DET")), token("chat", 3, 7, word("chat", "NOUN")),
              token("du", 8, 10, word("de", "ADP"), word("le", "DET")),
              token("voisin", 11, 17, word("voisin", "NOUN")),
              token("dort", 18, 22, word("dort", "VERB")), token(".", 22, 23, word(".", "PUNCT"))])


def test_mwt_join_keeps_the_surface_span():
    segs = tg.segments_from_document(FR_DOC, FR)
    assert segs[2] == ("du", "ADP+DET", 8, 10)
    assert [s[1] for s in segs] == ["DET", "NOUN", "ADP+DET", "NOUN", "VERB", "PUNCT"]
    for w, _, a, b in segs:
        assert FR[a:b] == w


def test_mwt_skip_is_the_authors_convention():
    segs = tg.segments_from_document(FR_DOC, FR, mwt="skip")
    assert segs[2] == ("du", "SKIP", 8, 10)
    with pytest.raises(ValueError, match="mwt must be"):
        tg.segments_from_document(FR_DOC, FR, mwt="split")


def test_spanish_al_without_offsets_is_located_by_search():
    es = "Voy al parque al lado"
    # Stanza words inside an MWT carry no offsets; here even the tokens lack them
    d = doc([token("Voy", None, None, word("Voy", "VERB")),
             token("al", None, None, word("a", "ADP"), word("el", "DET")),
             token("parque", None, None, word("parque", "NOUN")),
             token("al", None, None, word("a", "ADP"), word("el", "DET")),
             token("lado", None, None, word("lado", "NOUN"))])
    segs = tg.segments_from_document(d, es)
    assert [(s[0], s[2]) for s in segs] == [("Voy", 0), ("al", 4), ("parque", 7), ("al", 14),
                                            ("lado", 17)]  # the second "al" is not the first
    assert segs[1][1] == segs[3][1] == "ADP+DET"


def test_wrong_offsets_are_repaired_and_changed_text_is_an_error():
    text = "a dog"
    d = doc([token("a", 0, 1, word("a", "DET")), token("dog", 5, 8, word("dog", "NOUN"))])
    assert tg.segments_from_document(d, text)[1] == ("dog", "NOUN", 2, 5)
    bad = doc([token("a", 0, 1, word("a", "DET")), token("cat", 2, 5, word("cat", "NOUN"))])
    with pytest.raises(ValueError, match="changed the text"):
        tg.segments_from_document(bad, text)


def test_language_without_spaces():
    zh = "一只猫在睡觉。"
    d = doc([token("一", 0, 1, word("一", "NUM")), token("只", 1, 2, word("只", "NOUN")),
             token("猫", 2, 3, word("猫", "NOUN")), token("在", 3, 4, word("在", "ADV")),
             token("睡觉", 4, 6, word("睡觉", "VERB")), token("。", 6, 7, word("。", "PUNCT"))])
    segs = tg.segments_from_document(d, zh)
    assert [s[0] for s in segs] == ["一", "只", "猫", "在", "睡觉", "。"]
    assert [(s[2], s[3]) for s in segs] == [(0, 1), (1, 2), (2, 3), (3, 4), (4, 6), (6, 7)]
    gold = tg.GoldSegmenter({("zh", zh): (["一", "只", "猫", "在", "睡觉", "。"],
                                          ["NUM", "NOUN", "NOUN", "ADV", "VERB", "PUNCT"])})
    assert gold(zh, "zh") == segs


def test_gold_segmenter_spans_and_errors():
    g = tg.GoldSegmenter([("en", "a red ball .", ["a", "red", "ball", "."],
                           ["DET", "ADJ", "NOUN", "PUNCT"])])
    assert g("a red ball .", "en") == [("a", "DET", 0, 1), ("red", "ADJ", 2, 5),
                                       ("ball", "NOUN", 6, 10), (".", "PUNCT", 11, 12)]
    with pytest.raises(KeyError, match="no gold analysis"):
        g("a blue ball .", "en")
    with pytest.raises(ValueError, match="3 words but 2"):
        tg.GoldSegmenter([("en", "a b c", ["a", "b", "c"], ["X", "X"])])
    with pytest.raises(ValueError, match="not found"):
        tg.GoldSegmenter([("en", "a b c", ["a", "d"], ["X", "X"])])


def test_gold_segmenter_repeated_words_get_their_own_spans():
    g = tg.GoldSegmenter([("en", "the dog saw the dog", ["the", "dog", "saw", "the", "dog"],
                           ["DET", "NOUN", "VERB", "DET", "NOUN"])])
    assert [s[2] for s in g("the dog saw the dog", "en")] == [0, 4, 8, 12, 16]


def test_check_segments_rejects_overlap():
    with pytest.raises(ValueError, match="overlaps"):
        tg.check_segments("abc", [("ab", "X", 0, 2), ("bc", "X", 1, 3)])
    with pytest.raises(ValueError, match="not the word"):
        tg.check_segments("abc", [("ab", "X", 0, 1)])


def test_stanza_segmenter_with_fake_pipelines_and_mwt_fallback():
    calls = []

    def factory(lang, processors):
        calls.append((lang, processors))
        if "mwt" in processors and lang == "ja":
            raise ValueError("no mwt model for ja")
        return lambda text: FR_DOC

    seg = tg.StanzaSegmenter(pipeline_factory=factory)
    assert seg(FR, "fr")[2] == ("du", "ADP+DET", 8, 10)
    seg(FR, "fr")
    assert calls == [("fr", "tokenize,mwt,pos")]  # pipeline cached
    seg(FR, "ja")
    assert calls[-1] == ("ja", "tokenize,pos")
    assert seg("   ", "fr") == []


def test_missing_stanza_names_the_install_command(monkeypatch):
    real_import = builtins.__import__

    def fake_import(name, *a, **k):
        if name == "stanza":
            raise ImportError("No module named 'stanza'")
        return real_import(name, *a, **k)

    monkeypatch.setattr(builtins, "__import__", fake_import)
    with pytest.raises(ImportError, match=r"pip install stanza.*stanza\.download"):
        tg.StanzaSegmenter()("Le chat.", "fr")


def test_prefetch_tags_in_bulk_and_memoises():
    calls = {"bulk": 0, "single": 0}

    class FakePipeline:
        def __call__(self, text):
            calls["single"] += 1
            return FR_DOC

        def bulk_process(self, texts):
            calls["bulk"] += 1
            return [FR_DOC for _ in texts]

    seg = tg.StanzaSegmenter(pipeline_factory=lambda lang, proc: FakePipeline())
    n = seg.prefetch([FR, FR, "   "], ["fr", "fr", "fr"], batch=2, progress=False)
    assert n == 1 and calls == {"bulk": 1, "single": 0}  # duplicates and blanks skipped
    assert seg(FR, "fr")[2] == ("du", "ADP+DET", 8, 10)
    assert calls["single"] == 0  # served from the memo
