"""Tagger words → model tokens by character offsets → groundedness, on hand-made token tables:
a French multi-word token ("du" = "de le") and Chinese (no spaces, a token across two words)."""

from types import SimpleNamespace as NS

import numpy as np
import pandas as pd
import pytest

from tokenbook.groundedness_typology import measures as gr
from tokenbook.data import tagging as tg
from tokenbook.scoring import word_surprisals


def token_table(pieces, logprobs, bow_logmass):
    """pieces: (text_piece, start, end, is_bow); the last piece should be the EOS row."""
    return pd.DataFrame({"seq_id": 0, "token_idx": np.arange(len(pieces)),
                         "token_id": np.arange(len(pieces)),
                         "token": [p[0] for p in pieces],
                         "char_start": [p[1] for p in pieces], "char_end": [p[2] for p in pieces],
                         "logprob": logprobs, "entropy": 0.0, "bow_logmass": bow_logmass,
                         "is_bow": [p[3] for p in pieces]})


def words_frame(segments, text, table_u, table_p, lang):
    """What the pivot table builder does: segments → spans → word surprisals under U and P."""
    spans = [(a, b) for _, _, a, b in segments]
    su = word_surprisals(table_u, [text], words=[spans])
    sp = word_surprisals(table_p, [text], words=[spans])
    assert list(su["word"]) == [s[0] for s in segments]  # one row per tagger word, same order
    return pd.DataFrame({"lang": lang, "unit_id": "c0", "word_idx": su["word_idx"],
                         "word": su["word"], "upos": [s[1] for s in segments],
                         "s_U": su["surprisal"], "s_P": sp["surprisal"]})


FR = "Le chat du voisin dort."
FR_DOC = NS(sentences=[NS(tokens=[
    NS(text="Le", start_char=0, end_char=2, words=[NS(text="Le", upos="DET")]),
    NS(text="chat", start_char=3, end_char=7, words=[NS(text="chat", upos="NOUN")]),
    NS(text="du", start_char=8, end_char=10,
       words=[NS(text="de", upos="ADP"), NS(text="le", upos="DET")]),
    NS(text="voisin", start_char=11, end_char=17, words=[NS(text="voisin", upos="NOUN")]),
    NS(text="dort", start_char=18, end_char=22, words=[NS(text="dort", upos="VERB")]),
    NS(text=".", start_char=22, end_char=23, words=[NS(text=".", upos="PUNCT")])])])
# SentencePiece-like tokens with offsets that include the leading space
FR_PIECES = [("Le", 0, 2, False), ("▁chat", 2, 7, True), ("▁du", 7, 10, True),
             ("▁vois", 10, 15, True), ("in", 15, 17, False), ("▁dort", 17, 22, True),
             (".", 22, 23, False), ("<eos>", 23, 23, True)]


def test_mwt_word_gets_its_own_surprisal_and_no_class():
    segs = tg.segments_from_document(FR_DOC, FR)
    lp_u = np.log([0.2, 0.01, 0.1, 0.02, 0.5, 0.05, 0.3, 0.9])
    lp_p = np.log([0.3, 0.5, 0.2, 0.02, 0.5, 0.2, 0.3, 0.9])
    bow = np.log([1.0, 0.9, 0.8, 0.7, 0.6, 0.85, 0.5, 0.75])
    w = words_frame(segs, FR, token_table(FR_PIECES, lp_u, bow), token_table(FR_PIECES, lp_p, bow),
                    "fr")
    # "du" is rows 2 (its token) with boundary terms of rows 2 and 3
    du = w[w["word"] == "du"].iloc[0]
    assert du["upos"] == "ADP+DET"
    assert du["s_U"] == pytest.approx(-lp_u[2] + bow[2] - bow[3])
    # "voisin" spans two tokens; its end-of-word term comes from "▁dort"
    vo = w[w["word"] == "voisin"].iloc[0]
    assert vo["s_U"] == pytest.approx(-(lp_u[3] + lp_u[4]) + bow[3] - bow[5])
    g = gr.add_groundedness(w)
    assert g.set_index("word").loc["chat", "groundedness"] == pytest.approx(
        np.log(0.5) - np.log(0.01))  # the image made "chat" 50× more likely: +3.9 nats
    classes = set(gr.analysed(g)["upos"])
    assert "ADP+DET" not in classes and {"NOUN", "DET", "VERB"} <= classes


def test_no_spaces_language_and_straddling_token():
    zh = "一只猫在睡觉。"
    gold = tg.GoldSegmenter({("zh", zh): (["一", "只", "猫", "在", "睡觉", "。"],
                                          ["NUM", "NOUN", "NOUN", "ADV", "VERB", "PUNCT"])})
    segs = gold(zh, "zh")
    # "只猫" is one model token over two tagger words; "睡觉" is two tokens of one word
    pieces = [("一", 0, 1, False), ("只猫", 1, 3, False), ("在", 3, 4, False),
              ("睡", 4, 5, False), ("觉", 5, 6, False), ("。", 6, 7, False),
              ("<eos>", 7, 7, True)]
    lp_u = np.log([0.1, 0.01, 0.2, 0.05, 0.9, 0.5, 0.9])
    lp_p = np.log([0.2, 0.3, 0.2, 0.4, 0.9, 0.5, 0.9])
    bow = np.zeros(len(pieces))
    w = words_frame(segs, zh, token_table(pieces, lp_u, bow), token_table(pieces, lp_p, bow), "zh")
    # the straddled words get no surprisal (NaN) rather than a wrong one, and are dropped
    assert w.set_index("word").loc[["只", "猫"], "s_U"].isna().all()
    g = gr.add_groundedness(w)
    assert "猫" not in set(g["word"]) and "只" not in set(g["word"])
    sj = g.set_index("word").loc["睡觉"]
    assert sj["s_U"] == pytest.approx(-(np.log(0.05) + np.log(0.9)))
    assert sj["groundedness"] == pytest.approx(np.log(0.4) - np.log(0.05))
