"""UID measures: hand-computed values, invariances, exclusion counts, vectorised == reference."""

import numpy as np
import pandas as pd
import pytest

from tokenbook.uid_grounding import measures as uid


def test_hand_computed_values():
    s = np.array([1.0, 3.0, 2.0, 6.0])
    m = uid.profile_measures(s, mu_lang=2.0, power_ks=(2.0,), knorm_ks=(1.25,))
    assert m["mean"] == pytest.approx(3.0)
    assert m["uid_v"] == pytest.approx((4 + 0 + 1 + 9) / 4)            # 3.5, ddof 0
    assert m["uid_lv"] == pytest.approx((4 + 1 + 16) / 3)              # 7.0, N-1 diffs
    assert m["local_abs"] == pytest.approx((2 + 1 + 4) / 3)
    assert m["cv_global"] == pytest.approx(np.sqrt(14 / 3) / 3)         # ddof 1
    assert m["cv_local"] == pytest.approx(np.sqrt(7.0) / 3)
    assert m["uid_v_lang"] == pytest.approx((1 + 1 + 0 + 16) / 4)
    assert m["max"] == 6.0
    assert m["power_2"] == pytest.approx((1 + 9 + 4 + 36) / 4)
    assert m["knorm_1p25"] == pytest.approx((1 + 3 ** 1.25 + 2 ** 1.25 + 6 ** 1.25) ** 0.8)


def test_invariances():
    rng = np.random.default_rng(0)
    s = rng.gamma(2, 2, size=12)
    base = uid.profile_measures(s)
    shifted = uid.profile_measures(s + 5.0)
    assert shifted["uid_v"] == pytest.approx(base["uid_v"])      # shift invariance
    assert shifted["uid_lv"] == pytest.approx(base["uid_lv"])
    assert shifted["cv_global"] < base["cv_global"]               # CV is not shift invariant
    scaled = uid.profile_measures(3 * s)
    assert scaled["uid_v"] == pytest.approx(9 * base["uid_v"])
    assert scaled["cv_global"] == pytest.approx(base["cv_global"])  # CV is scale free
    const = uid.profile_measures(np.full(7, 2.5))
    assert const["uid_v"] == 0 and const["uid_lv"] == 0 and const["local_abs"] == 0
    assert const["cv_global"] == 0
    # reordering keeps global variance but changes local variance
    perm = uid.profile_measures(np.sort(s))
    assert perm["uid_v"] == pytest.approx(base["uid_v"])
    assert perm["uid_lv"] < base["uid_lv"]


def _table(profiles, lang="xx"):
    rows = []
    for uid_, (su, sp) in enumerate(profiles):
        for i, (a, b) in enumerate(zip(su, sp)):
            rows.append({"lang": lang, "unit_id": uid_, "word_idx": i, "s_U": a, "s_P": b})
    return pd.DataFrame(rows)


def test_table_measures_match_reference_and_count_short_units():
    rng = np.random.default_rng(1)
    profiles = [(rng.gamma(2, 2, n), rng.gamma(2, 1.5, n)) for n in (5, 2, 8, 1, 3, 6)]
    t = pd.concat([_table(profiles, "aa"), _table(profiles[:3], "bb")], ignore_index=True)
    t = t.sample(frac=1.0, random_state=0)  # row order must not matter
    res = uid.unit_measures(t)
    assert res.n_excluded == 2 + 1 and res.n_units == 4 + 2
    assert set(res.table.condition) == {"U", "P"}
    assert len(res.table) == 2 * 6
    mu_aa = np.concatenate([p[0] for p in profiles]).mean()
    for _, row in res.table[res.table.lang == "aa"].iterrows():
        su, sp = profiles[row.unit_id]
        s = su if row.condition == "U" else sp
        mu = mu_aa if row.condition == "U" else np.concatenate([p[1] for p in profiles]).mean()
        ref = uid.profile_measures(s, mu_lang=mu)
        for k, v in ref.items():
            assert row[k] == pytest.approx(v), k


def test_min_words_and_bad_input():
    t = _table([(np.ones(3), np.ones(3)), (np.ones(4), np.ones(4))])
    assert uid.unit_measures(t, min_words=4).n_excluded == 1
    with pytest.raises(ValueError, match="missing column"):
        uid.unit_measures(t.drop(columns="word_idx"))
    t.loc[0, "s_P"] = np.nan
    with pytest.raises(ValueError, match="non-finite"):
        uid.unit_measures(t)


def test_variance_contributions_sum_to_uid_v():
    rng = np.random.default_rng(2)
    t = _table([(rng.gamma(2, 2, n), rng.gamma(2, 2, n)) for n in (4, 7)])
    c = uid.variance_contributions(t, "s_U")
    sums = pd.Series(c).groupby(t.unit_id.to_numpy()).sum()
    m = uid.unit_measures(t).table.query("condition == 'U'").set_index("unit_id").uid_v
    np.testing.assert_allclose(sums.to_numpy(), m.loc[sums.index].to_numpy())


def test_boundary_jumps_hand_computed():
    t = pd.DataFrame({"story_id": 0, "sent_idx": [0, 0, 0, 1, 1, 1, 2, 2],
                      "word_idx": [0, 1, 2, 0, 1, 2, 0, 1],
                      "s": [1.0, 2.0, 3.0, 9.0, 5.0, 1.0, 4.0, 4.0]})
    j = uid.boundary_jumps(t.sample(frac=1, random_state=1), "s")
    d = j.set_index(["unit_k", "w"]).delta
    assert d[(0, 1)] == pytest.approx(3 - 9)
    assert d[(0, 2)] == pytest.approx(2.5 - 7)
    assert d[(0, 3)] == pytest.approx(2 - 5)
    assert d[(1, 1)] == pytest.approx(1 - 4)
    assert (1, 3) not in d.index  # last unit has only 2 words


def test_reductions_density_and_onset():
    t = pd.DataFrame({"s_U": [5.0, 3.0, 2.0], "s_P": [2.0, 4.0, 1.0], "s_D": [4.0, 3.0, 2.0],
                      "s_PD": [1.0, 3.0, 2.5]})
    r = uid.positive_reductions(t)
    np.testing.assert_allclose(r.delta_P, [3, 0, 1])
    np.testing.assert_allclose(r.delta_D, [1, 0, 0])
    np.testing.assert_allclose(r.delta_DP, [3, 0, 0])
    rng = np.random.default_rng(0)
    pos = rng.uniform(0, 1, 2000)
    front = np.exp(-5 * pos)
    x, dens = uid.reduction_density(pos, front)
    assert dens.size >= 10 and np.sum(dens) * (x[1] - x[0]) == pytest.approx(1.0)
    assert dens[0] > dens[-1] * 3
    assert uid.onset_enrichment(pos, front) > 1.5
    assert uid.onset_enrichment(pos, np.ones_like(pos)) == pytest.approx(1.0)
    with pytest.raises(ValueError, match="no positive"):
        uid.reduction_density(pos, np.zeros_like(pos))
