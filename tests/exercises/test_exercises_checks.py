"""Every check rejects a wrong answer (one per exercise), says what is off, and names the slip
when the wrong answer is a common one; bad answer types get a clear message."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from scipy import stats as st

from tokenbook.answers import CheckResult, WrongAnswer
from tokenbook.cancellation_hypothesis import exercises as rl_ex
from tokenbook.groundedness_typology import exercises as typology_ex
from tokenbook.groundedness_typology import measures as grounding
from tokenbook.memorisation_cartography import exercises as memorisation_ex
from tokenbook.uid_grounding import exercises as uid_ex

from .conftest import CHECK_MODULES


def _g(words):
    w = words.assign(g=words["s_U"] - words["s_P"])
    return w[w["upos"].isin(grounding.POS_FOR_ANALYSIS)]


def _softmax(z):
    e = np.exp(np.asarray(z, float) - np.max(z))
    return e / e.sum()


def _uid_v_ddof1(s):
    return float(np.var(s, ddof=1))


def _uid_lv_ok(s):
    return float(np.mean(np.diff(np.asarray(s, float)) ** 2))


def _bh_no_stepup(p):
    p = np.asarray(p, float)
    order = np.argsort(p)
    q = np.empty_like(p)
    q[order] = np.minimum(p[order] * p.size / np.arange(1, p.size + 1), 1)
    return q


def _onset_raw(position, s_u, s_p, onset=0.2):
    d = np.asarray(s_u) - np.asarray(s_p)
    at = np.asarray(position) < onset
    return (d[at].sum() / d.sum()) / at.mean()


def _class_means_flipped(words):
    w = words.assign(g=words["s_P"] - words["s_U"])
    w = w[w["upos"].isin(grounding.POS_FOR_ANALYSIS)]
    return w.groupby(["lang", "upos"])["g"].agg(n="size", mean="mean").reset_index()


def _lmf_num_lexical(words):
    w = _g(words)
    lex = w["upos"].isin(grounding.LEXICAL + ("NUM",))
    return w[lex].groupby("lang")["g"].mean() - w[~lex].groupby("lang")["g"].mean()


def _n_pairs_unadjusted(words, lang, alpha=0.05):
    import itertools
    w = _g(words[words["lang"] == lang])
    groups = {c: w.loc[w["upos"] == c, "g"].to_numpy() for c in grounding.POS_FOR_ANALYSIS}
    present = [c for c in grounding.POS_FOR_ANALYSIS if groups[c].size >= 2]
    p = [st.ttest_ind(groups[a], groups[b], equal_var=False).pvalue
         for a, b in itertools.combinations(present, 2)]
    return int((np.asarray(p) < alpha).sum())


def _cm_swapped(S, mask):
    tm = (S * ~mask).sum(0) / (~mask).sum(0)
    gs = (S * mask).sum(0) / mask.sum(0)
    return tm, gs, tm - gs


def _cm_se_ddof0(S, mask):
    ses = []
    for sel in (mask, ~mask):
        n = sel.sum(0)
        mean = (S * sel).sum(0) / n
        ses.append(np.sqrt((((S - mean) ** 2) * sel).sum(0) / n / n))
    return np.hypot(*ses)


def _grpo_pop_std(r, G):
    x = np.asarray(r, float).reshape(-1, G)
    return ((x - x.mean(1, keepdims=True)) / (x.std(1, keepdims=True) + 1e-4)).ravel()


def _phi_no_dot(zj, zk, aj, ak):
    return float(aj == ak) - _softmax(zj)[ak] - _softmax(zk)[aj]


def _first_order_diagonal(H, W, actions, A, lr):
    Z = np.asarray(H) @ np.asarray(W).T
    out = []
    for j in range(len(actions)):
        g = -_softmax(Z[j])
        g[actions[j]] += 1
        out.append(lr / len(actions) * A[j] * (g @ g) * (H[j] @ H[j]))
    return np.array(out)


#: check -> (wrong answer, a phrase the message must contain: the diagnosed slip or the key)
WRONG = {
    "check_uid_measures": ((_uid_v_ddof1, _uid_lv_ok), "ddof=1"),
    "check_scaling_verdicts": (({"uid_v": True, "uid_lv": True, "cv_global": True,
                                 "cv_local": True},), "cv_global"),
    "check_benjamini_hochberg": ((_bh_no_stepup,), "step-up"),
    "check_onset_enrichment": ((_onset_raw,), "positive part"),
    "check_onset_verdicts": (({"with_onset": True, "without_onset": True},), "without_onset"),
    "check_class_means": ((_class_means_flipped,), "sign is flipped"),
    "check_lexical_minus_functional": ((_lmf_num_lexical,), "NUM"),
    "check_upos_tau": ((grounding.label_list_tau,), "label lists"),
    "check_typology_verdicts": (({"cline": True, "lexical_gt_functional": True},), "cline"),
    "check_significant_pairs": ((_n_pairs_unadjusted,), "unadjusted"),
    "check_cm_estimator": ((_cm_swapped,), "swapped"),
    "check_cm_standard_error": ((_cm_se_ddof0,), "ddof=0"),
    "check_geometric_mean_probability": ((lambda lp: float(np.mean(np.exp(lp))),),
                                         "arithmetic mean"),
    "check_auroc": ((lambda p, n: float(np.mean(np.asarray(p)[:, None]
                                                > np.asarray(n)[None, :])),), "ties"),
    "check_memorisation_verdicts": (({"with_memorisation": True,
                                      "without_memorisation": True},), "without_memorisation"),
    "check_grpo_advantages": ((_grpo_pop_std,), "ddof=0"),
    "check_mixed_groups": ((lambda r, G: int((np.reshape(r, (-1, G)).sum(1) > 0).sum()),),
                           "at least one correct"),
    "check_phi": ((_phi_no_dot,), "⟨π_j, π_k⟩"),
    "check_first_order_delta": ((_first_order_diagonal,), "k = j"),
    "check_coupling_verdicts": (({"shared": 0.0, "orthogonal": 0.0},), "shared"),
}


#: check -> the chapter module that holds it
CHECKS = {n: m for m in CHECK_MODULES.values() for n in m.__all__ if n.startswith("check_")}


def test_every_check_has_a_wrong_answer_case():
    assert set(CHECKS) == set(WRONG), set(CHECKS) ^ set(WRONG)
    assert len(CHECKS) == sum(n.startswith("check_") for m in CHECK_MODULES.values()
                              for n in m.__all__), "a check name used by two chapters"


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(WRONG))
def test_check_rejects_a_wrong_answer(name):
    args, phrase = WRONG[name]
    check = getattr(CHECKS[name], name)
    res = check(*args, raise_on_wrong=False)
    assert isinstance(res, CheckResult) and not res.ok and not res
    assert phrase in res.message, res.message
    assert repr(res).startswith("❌")
    with pytest.raises(WrongAnswer, match="❌"):
        check(*args)


def test_bad_answers_get_clear_messages():
    res = uid_ex.check_benjamini_hochberg("not a function", raise_on_wrong=False)
    assert "must be a function" in res.message

    def broken(p):
        raise KeyError("oops")

    res = uid_ex.check_benjamini_hochberg(broken, raise_on_wrong=False)
    assert "raised KeyError" in res.message
    res = uid_ex.check_benjamini_hochberg(lambda p: None, raise_on_wrong=False)
    assert "forget the `return`" in res.message
    res = rl_ex.check_phi(lambda *a: "big", raise_on_wrong=False)
    assert "must be a number" in res.message
    res = rl_ex.check_coupling_verdicts({"shared": "a lot", "orthogonal": 0.0},
                                     raise_on_wrong=False)
    assert "must be a number" in res.message
    res = uid_ex.check_scaling_verdicts(["uid_v"], raise_on_wrong=False)
    assert "must be a dict" in res.message
    res = uid_ex.check_scaling_verdicts({"uid_v": True}, raise_on_wrong=False)
    assert "lacks keys" in res.message
    res = typology_ex.check_class_means(lambda w: w, raise_on_wrong=False)
    assert "lacks columns" in res.message
    res = memorisation_ex.check_cm_estimator(lambda S, m: S.mean(0), raise_on_wrong=False)
    assert "tuple (tm, gs, cm)" in res.message


def test_a_stub_error_passes_through_the_check():
    def stub(p):
        raise NotImplementedError("Exercise 3: hint")

    with pytest.raises(NotImplementedError, match="Exercise 3"):
        uid_ex.check_benjamini_hochberg(stub)


def test_toy_worlds_are_seeded_and_validate_arguments():
    pd.testing.assert_frame_equal(typology_ex.typology_world(3), typology_ex.typology_world(3))
    assert not typology_ex.typology_world(3).equals(typology_ex.typology_world(4))
    a, _ = memorisation_ex.memorisation_world(1)
    b, _ = memorisation_ex.memorisation_world(1)
    pd.testing.assert_frame_equal(a, b)
    np.testing.assert_array_equal(rl_ex.linear_head_batch(2)["H"],
                                  rl_ex.linear_head_batch(2)["H"])
    with pytest.raises(ValueError, match="factor"):
        uid_ex.scaled_captions(0, factor=1.5)
    with pytest.raises(ValueError, match="flatten"):
        uid_ex.scaled_captions(0, flatten=1.0)


def test_the_mechanisms_move_the_verdicts():
    """The "switch it off" exercises are only worth asking if switching it off changes the
    answer: the reference verdicts differ between the two worlds."""
    assert uid_ex._scaling_reference(uid_ex.scaled_captions(0))["cv_global"] is False
    assert uid_ex._scaling_reference(uid_ex.scaled_captions(0, flatten=0.3))["cv_global"] is True
    on = uid_ex._onset_claim(uid_ex.onset_world(0, onset_effect=True))
    off = uid_ex._onset_claim(uid_ex.onset_world(0, onset_effect=False))
    assert on["holds"] and not off["holds"] and on["E"] > 1.5
    typology = typology_ex._typology_reference
    assert typology(typology_ex.typology_world(0))["cline"] is True
    assert typology(typology_ex.typology_world(0, noun_grounding=0.3))["cline"] is False
    memorisation = memorisation_ex._memorisation_reference
    assert memorisation(0, True) and not memorisation(0, False)
    coupling = rl_ex._coupling_reference(0)
    assert coupling["shared"] > 0 and coupling["orthogonal"] == 0.0
