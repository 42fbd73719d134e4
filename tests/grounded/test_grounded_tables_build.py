"""Word surprisal pivot tables built with tiny random models of the real architectures."""

import numpy as np
import pandas as pd
import pytest
from PIL import Image

from tokenbook import scoring
from tokenbook.grounded import tables as stab
from tokenbook.scoring import _tiny


@pytest.fixture(scope="module")
def models():
    cap, proc = _tiny.tiny_paligemma(seed=0, image_size=16, patch=8)
    tok = proc.tokenizer
    lm = _tiny.tiny_causal("gemma", vocab_size=len(tok), seed=1, max_position_embeddings=128)
    cap.config._name_or_path = "tiny-captioner-test"
    lm.config._name_or_path = "tiny-lm-test"
    return (cap, proc), (lm, tok)


def _image(image_id: str):
    rng = np.random.default_rng(abs(hash(image_id)) % 2**32)
    return Image.fromarray(rng.integers(0, 255, (16, 16, 3), dtype=np.uint8))


CAPTIONS = pd.DataFrame({
    "caption_id": ["a", "b", "c"], "image_id": ["i0", "i1", "i0"], "lang": ["en", "en", "de"],
    "text": ["the dog runs in the park", "a small cat sleeps", "two birds sing"],
    "words": [["the", "dog", "runs", "in", "the", "park"], ["a", "small", "cat", "sleeps"],
              ["two", "birds", "sing"]],
    "upos": [["DET", "NOUN", "VERB", "ADP", "DET", "NOUN"], ["DET", "ADJ", "NOUN", "VERB"],
             ["NUM", "NOUN", "VERB"]],
})


def counting(pair, calls, name):
    def load():
        calls.append(name)
        return pair
    load.model_id = pair[0].config._name_or_path
    return load


def test_caption_table_schema_values_and_cache(models, tmp_path, monkeypatch):
    monkeypatch.setenv("TOKENBOOK_CACHE", str(tmp_path))
    calls = []
    kw = dict(image_fn=_image, captioner=counting(models[0], calls, "cap"),
              text_lm=counting(models[1], calls, "lm"), progress=False)
    t = stab.caption_word_table(CAPTIONS, **kw)
    assert calls == ["lm", "cap"]
    assert list(t.columns[:len(stab.CAPTION_COLUMNS)]) == stab.CAPTION_COLUMNS
    assert len(t) == 13 and t.groupby("unit_id").word_idx.max().to_dict() == {"a": 5, "b": 3, "c": 2}
    assert t.upos.tolist()[:3] == ["DET", "NOUN", "VERB"]
    assert np.isfinite(t.s_U).all() and np.isfinite(t.s_P).all()
    # s_U equals the scoring engine on the same input with the caption prefix
    lm, tok = models[1]
    tokens = scoring.score_texts(lm, tok, ["the dog runs in the park"], prefixes=["caption en\n"],
                                 progress=False)
    ref = scoring.word_surprisals(tokens, ["the dog runs in the park"])
    np.testing.assert_allclose(t.s_U.iloc[:6], ref.surprisal, rtol=1e-5)
    # P: PaliGemma's processor appends the newline itself ("<bos>caption en\n" + caption)
    cap, proc = models[0]
    img = [_image("i0")]
    ptok = scoring.score_image_texts(cap, proc, img, ["the dog runs in the park"],
                                     prefixes=["caption en"], progress=False)
    pref = scoring.word_surprisals(ptok, ["the dog runs in the park"])
    np.testing.assert_allclose(t.s_P.iloc[:6], pref.surprisal, rtol=1e-5)
    # P sees the image: same caption on another image changes s_P but not s_U
    other = CAPTIONS.assign(image_id=["i9", "i1", "i0"], caption_id=["a2", "b", "c"])
    t2 = stab.caption_word_table(other, **kw)
    assert calls == ["lm", "cap", "lm", "cap"]
    np.testing.assert_allclose(t2.s_U.iloc[:6], t.s_U.iloc[:6], rtol=1e-5)
    assert np.abs(t2.s_P.iloc[:6].to_numpy() - t.s_P.iloc[:6].to_numpy()).max() > 1e-4
    # a rerun hits the cache: no model is loaded
    again = stab.caption_word_table(CAPTIONS, **kw)
    assert calls == ["lm", "cap", "lm", "cap"]
    pd.testing.assert_frame_equal(again, t)


def test_segmenter_path_and_errors(models, tmp_path, monkeypatch):
    monkeypatch.setenv("TOKENBOOK_CACHE", str(tmp_path))

    def seg(text, lang):
        out, pos = [], 0
        for w in text.split():
            a = text.index(w, pos)
            out.append((w, "X", a, a + len(w)))
            pos = a + len(w)
        return out

    plain = CAPTIONS.drop(columns=["words", "upos"])
    t = stab.caption_word_table(plain, image_fn=_image, captioner=models[0], text_lm=models[1],
                                segmenter=seg, segmenter_id="ws", progress=False, cache=False)
    assert (t.upos == "X").all() and len(t) == 13
    with pytest.raises(ValueError, match="segmenter"):
        stab.caption_word_table(plain, image_fn=_image, captioner=models[0], text_lm=models[1],
                                progress=False, cache=False)
    with pytest.raises(ValueError, match="missing column"):
        stab.caption_word_table(plain.drop(columns="text"), image_fn=_image,
                                captioner=models[0], text_lm=models[1], progress=False)


def test_prefix_helpers_match_the_models_layout():
    from tokenbook.models import paligemma as pg

    ctx = ["a dog runs", "the dog sleeps"]
    assert stab.discourse_prefix(stab.PREFIX, "en", ctx) == pg.text_prefix("en", ctx)
    assert stab.image_prefix(stab.discourse_prefix(stab.PREFIX, "en", ctx)) == \
        pg.image_prefix("en", ctx)
    assert stab.image_prefix(stab.PREFIX.format(lang="de")) == pg.image_prefix("de")


def _two_stories() -> pd.DataFrame:
    """Two English stories (3 and 2 sentences), one picture per sentence, gold words."""
    stories = pd.DataFrame({
        "story_id": ["s0"] * 3 + ["s1"] * 2, "sent_idx": [0, 1, 2, 0, 1],
        "scene_id": ["s0-0", "s0-1", "s0-2", "s1-0", "s1-1"], "lang": "en",
        "text": ["a dog runs", "the dog sleeps", "a cat sings", "two birds sing", "the birds play"],
    })
    stories["words"] = stories.text.str.split()
    stories["upos"] = stories.words.map(lambda w: ["X"] * len(w))
    return stories


def test_story_table_conditions(models, tmp_path, monkeypatch):
    monkeypatch.setenv("TOKENBOOK_CACHE", str(tmp_path))
    stories = _two_stories()
    t = stab.story_word_table(stories, image_fn=_image, captioner=models[0], text_lm=models[1],
                              progress=False)
    assert set(stab.STORY_COLUMNS) <= set(t.columns)
    first = t.sent_idx == 0
    assert t.loc[first, ["s_D", "s_PD"]].isna().all().all()
    assert np.isfinite(t.loc[~first, ["s_U", "s_P", "s_D", "s_PD"]]).all().all()
    assert (t.n_sents.to_numpy() == np.where(t.story_id == "s0", 3, 2)).all()
    # D = text LM after the preceding sentences
    lm, tok = models[1]
    text = "a cat sings"
    prefix = "caption en\na dog runs\nthe dog sleeps\n"
    ref = scoring.word_surprisals(scoring.score_texts(lm, tok, [text], prefixes=[prefix],
                                                      progress=False), [text])
    got = t[(t.story_id == "s0") & (t.sent_idx == 2)].s_D
    np.testing.assert_allclose(got, ref.surprisal, rtol=1e-5)
    assert not np.allclose(got, t[(t.story_id == "s0") & (t.sent_idx == 2)].s_U)


def test_story_table_scores_a_second_discourse_once(models, tmp_path, monkeypatch):
    """``other_previous`` adds s_D_other/s_PD_other: the D and P+D of a separate call with that
    discourse as ``previous``, while U and P (scored once) and the own discourse stay as they were."""
    monkeypatch.setenv("TOKENBOOK_CACHE", str(tmp_path))
    stories = _two_stories()
    other = [[], ["two birds sing"], ["two birds sing", "the birds play"], [], ["a dog runs"]]
    kw = dict(image_fn=_image, captioner=models[0], text_lm=models[1], progress=False)
    both = stab.story_word_table(stories, other_previous=other, **kw)
    own = stab.story_word_table(stories, **kw)
    swapped = stab.story_word_table(stories, previous=other, **kw)
    for col in ["s_U", "s_P", "s_D", "s_PD"]:
        np.testing.assert_allclose(both[col], own[col], rtol=1e-6)
    np.testing.assert_allclose(both["s_D_other"], swapped["s_D"], rtol=1e-6)
    np.testing.assert_allclose(both["s_PD_other"], swapped["s_PD"], rtol=1e-6)
    later = both.sent_idx > 0
    assert not np.allclose(both.loc[later, "s_D_other"], both.loc[later, "s_D"])
    assert "s_D_other" not in own
    with pytest.raises(ValueError, match="other_previous: needs one list"):
        stab.story_word_table(stories, other_previous=other[:2], **kw)

def test_merge_straddling_pure():
    segs = [[("a", "DET", 0, 1), ("bc", "NOUN", 2, 4), ("d", "ADP", 4, 5), ("e", "NOUN", 6, 7)]]
    merged, conc, n = stab.merge_straddling(["a bcd e"], segs, [[1.0, 2.0, 3.0, 4.0]],
                                            np.array([False, True, True, False]))
    assert merged == [[("a", "DET", 0, 1), ("bcd", "NOUN+ADP", 2, 5), ("e", "NOUN", 6, 7)]]
    assert n == [[1, 2, 1]] and conc[0][0] == 1.0 and np.isnan(conc[0][1])


def test_straddling_tokens_are_merged_or_nan(models, tmp_path, monkeypatch):
    monkeypatch.setenv("TOKENBOOK_CACHE", str(tmp_path))
    text = "the dog runs in the park"
    cap = pd.DataFrame({"caption_id": ["x"], "image_id": ["i0"], "lang": ["en"], "text": [text],
                        "words": [["th", "e", "dog", "runs", "in", "the", "park"]],
                        "upos": [["A", "B", "NOUN", "VERB", "ADP", "DET", "NOUN"]],
                        "word_spans": [[(0, 2), (2, 3), (4, 7), (8, 12), (13, 15), (16, 19),
                                        (20, 24)]]})
    kw = dict(image_fn=_image, captioner=models[0], text_lm=models[1], progress=False)
    t = stab.caption_word_table(cap, **kw)
    assert t.word.tolist() == ["the", "dog", "runs", "in", "the", "park"]
    assert t.upos.iloc[0] == "A+B" and t.n_merged.tolist() == [2, 1, 1, 1, 1, 1]
    assert t.attrs["n_straddling"] == 2
    ref = stab.caption_word_table(CAPTIONS.iloc[:1], **kw)  # gold words: "the" is one word
    np.testing.assert_allclose(t.s_U, ref.s_U, rtol=1e-6)
    np.testing.assert_allclose(t.s_P, ref.s_P, rtol=1e-6)
    raw = stab.caption_word_table(cap, straddle="nan", **kw)
    assert len(raw) == 7 and raw.s_U.iloc[:2].isna().all() and np.isfinite(raw.s_U.iloc[2:]).all()


def test_load_model_from_folders_and_clear_hub_error(models, tmp_path):
    (cap, proc), (lm, tok) = models
    cap.save_pretrained(tmp_path / "cap")
    proc.save_pretrained(tmp_path / "cap")
    lm.save_pretrained(tmp_path / "lm")
    tok.save_pretrained(tmp_path / "lm")
    cap2, proc2 = stab.load_model(tmp_path / "cap", "captioner")
    lm2, tok2 = stab.load_model(str(tmp_path / "lm"), "text_lm", tokenizer=str(tmp_path / "lm"))
    text = ["a small cat sleeps"]
    a = scoring.score_texts(lm, tok, text, prefixes=["caption en\n"], progress=False)
    b = scoring.score_texts(lm2, tok2, text, prefixes=["caption en\n"], progress=False)
    np.testing.assert_allclose(a.logprob, b.logprob, rtol=1e-5)
    img = [_image("i3")]
    a = scoring.score_image_texts(cap, proc, img, text, prefixes=["caption en"], progress=False)
    b = scoring.score_image_texts(cap2, proc2, img, text, prefixes=["caption en"], progress=False)
    np.testing.assert_allclose(a.logprob, b.logprob, rtol=1e-5)
    assert stab.model_id(tmp_path / "cap") == str((tmp_path / "cap").resolve())
    with pytest.raises(OSError, match="huggingface-cli login"):
        stab.load_model("no-such-org/no-such-model-xyz", "text_lm")
    with pytest.raises(ValueError, match="kind"):
        stab.load_model(tmp_path / "cap", "vlm")


def test_lazy_model_loads_once_and_keys_by_id(models, tmp_path, monkeypatch):
    monkeypatch.setenv("TOKENBOOK_CACHE", str(tmp_path / "cache"))
    (cap, proc), (lm, tok) = models
    cap.save_pretrained(tmp_path / "cap"); proc.save_pretrained(tmp_path / "cap")
    lm.save_pretrained(tmp_path / "lm"); tok.save_pretrained(tmp_path / "lm")
    calls = []
    real = stab.load_model

    def spy(*a, **k):
        if not callable(a[0]):  # a real load (not the builder unwrapping the lazy handle)
            calls.append(a[1])
        return real(*a, **k)

    monkeypatch.setattr(stab, "load_model", spy)
    cap_h = stab.lazy_model(tmp_path / "cap", "captioner")
    lm_h = stab.lazy_model(tmp_path / "lm", "text_lm", tokenizer=str(tmp_path / "lm"))
    assert lm_h.model_id.endswith(f"|tokenizer={tmp_path / 'lm'}")
    for lang in ("en", "de"):
        stab.caption_word_table(CAPTIONS[CAPTIONS.lang == lang], image_fn=_image,
                                captioner=cap_h, text_lm=lm_h, progress=False)
    assert sorted(calls) == ["captioner", "text_lm"]


def test_rows_of_one_image_share_one_loaded_image():
    """Each image id is loaded once and its rows share the object (the scorer processes it
    once per prefix)."""
    calls = []

    def image_fn(image_id):
        calls.append(image_id)
        return object()

    frame = pd.DataFrame({"scene_id": ["a", "b", "a", "c", "b"]})
    images = stab._images(frame, image_fn)
    assert calls == ["a", "b", "c"]
    assert images[0] is images[2] and images[1] is images[4] and images[0] is not images[1]
