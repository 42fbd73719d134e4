"""The tiny-scale verdict rule: paired on − off effects with intervals over root seeds."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from tokenbook.claims import (BALANCE_PREFIX, Claim, ClaimSpec, KNOWN_PREFIX,
                             MANIPULATION_PREFIX, judge_claims)
from tokenbook.verdicts import (DEFAULT_ROOT_SEEDS, REPLICATION_TARGET, Expect, judge,
                                mean_interval, operating_characteristics, pairs_needed,
                                replication_chance, seeds_for_agreement, wilson_interval)

UP = [0.30, 0.40, 0.20, 0.50, 0.10, 0.35, 0.25, 0.45]
DOWN = [-0.10, 0.05, -0.20, 0.00, -0.10, 0.02, -0.05, 0.10]


def test_pairs_needed_is_the_first_count_whose_best_wilson_interval_meets_the_expectation():
    for expect in (Expect.at_least(0.9), Expect.at_least(0.8), Expect.greater(0.5),
                   Expect.at_most(0.1)):
        need = pairs_needed(expect)
        best = (lambda n: wilson_interval(n, n)) if expect.direction > 0 else \
            (lambda n: wilson_interval(0, n))
        assert expect.holds_for_interval(*best(need)), expect.text
        assert not expect.holds_for_interval(*best(need - 1)), expect.text
    # rule of three: 0 misses in n put the miss rate's bound near 3/n, so ≥ 0.9 needs ~30+
    assert 30 <= pairs_needed(Expect.at_least(0.9)) <= 40
    assert pairs_needed(Expect.at_least(1.0)) is None          # a Wilson bound never reaches 1


def test_a_share_of_too_few_units_is_not_testable_whatever_its_values():
    """Four languages in each of six root seeds: all 24 pairs falling cannot establish a share
    ≥ 0.9, where the t interval over seeds (zero width when every seed is 1) called it
    detected, and one pair short called it not detected."""
    share = Expect.at_least(0.9).share_of(4, "language")
    for on in ([1.0] * 6, [1.0] * 5 + [0.75]):
        r = judge(share, on, [0.0] * 6)
        assert r["verdict"] == "not testable", r["reason"]
        assert "24 (root seed, language) pairs" in r["reason"]
        assert f"≥ {pairs_needed(share)} pairs" in r["reason"]
        assert np.isnan(replication_chance(share, on, [0.0] * 6, n_sim=50))
    assert judge(Expect.at_least(0.9), [1.0] * 6, [0.0] * 6)["verdict"] == "detected"
    assert judge(Expect.at_least(0.9), [1.0] * 5 + [0.75], [0.0] * 6)["verdict"] == \
        "not detected"
    # enough pairs: the usual rule judges (10 languages × 6 root seeds = 60 ≥ 35)
    wide = Expect.at_least(0.9).share_of(10, "language")
    assert judge(wide, [1.0] * 6, [0.0] * 6)["verdict"] == "detected"
    assert judge(wide, [0.8] * 6, [0.0] * 6)["verdict"] == "not detected"
    # a share that should be low: the best outcome is no unit meeting the criterion
    low = Expect.at_most(0.1).share_of(4)
    assert judge(low, [0.0] * 6, [1.0] * 6)["verdict"] == "not testable"
    assert judge(Expect.at_most(0.1).share_of(10), [0.0] * 6, [1.0] * 6)["verdict"] == \
        "detected"


@pytest.mark.parametrize("units", [0, -1, 2.5, True, "4"])
def test_share_of_needs_a_whole_number_of_units(units):
    with pytest.raises(ValueError, match="whole number of units"):
        Expect.at_least(0.9).share_of(units)


def test_share_of_is_for_one_sided_expectations():
    with pytest.raises(ValueError, match="one-sided"):
        Expect.between(0.2, 0.8).share_of(4)


def test_detected_needs_on_meeting_a_paired_effect_and_off_failing():
    r = judge(Expect.greater(0.0), UP, DOWN)
    assert r["verdict"] == "detected", r["reason"]
    assert r["on_ci"][0] > 0 and r["paired_ci"][0] > 0 and r["off_value"] <= 0
    assert r["paired_effect"] == pytest.approx(np.mean(np.subtract(UP, DOWN)))


def test_off_world_meeting_the_expectation_is_not_specific():
    shifted = [v + 0.3 for v in DOWN]           # off mean 0.29 > 0: holds without the mechanism
    r = judge(Expect.greater(0.0), UP, shifted)
    assert r["verdict"] == "not specific" and "off mean" in r["reason"]
    r = judge(Expect.greater(0.0), UP, UP)       # no paired effect at all
    assert r["verdict"] == "not specific"


def test_an_off_world_on_the_threshold_is_judged_by_its_interval():
    # off sits on 0 by construction; its mean falls a hair below 0 by noise
    on = [-30.0, -25.0, -28.0, -33.0, -22.0, -27.0]
    off = [-2.0, 1.5, -1.0, 0.5, -2.5, -0.8]
    assert np.mean(off) < 0
    assert judge(Expect.less(0.0), on, off)["verdict"] == "not specific"   # a coin flip
    r = judge(Expect.less(0.0).at_null(), on, off)
    assert r["verdict"] == "detected" and "off interval" in r["reason"], r["reason"]
    # an off world whose whole interval meets the expectation is still not specific
    r = judge(Expect.less(0.0).at_null(), on, [v - 5.0 for v in off])
    assert r["verdict"] == "not specific" and "off interval" in r["reason"], r["reason"]
    with pytest.raises(ValueError, match="strict"):
        Expect.at_least(0.9).at_null()


def test_reading_an_off_world_on_the_threshold_by_its_interval_keeps_the_verdict_stable():
    # on 3 sd above the threshold, off on it: read by its mean, the off world "meets" the
    # expectation whenever its noise is positive, so the verdict is a coin flip between
    # detected and not specific however strong the effect; read by its interval, it is stable
    point = operating_characteristics(3.0, 0.0, n_sim=2000, seed=3)
    interval = operating_characteristics(3.0, 0.0, n_sim=2000, seed=3, off_at_threshold=True)
    assert point["p_detected"] < 0.55 and point["p_same_verdict"] < 0.55, point
    assert interval["p_detected"] >= 0.95 and interval["p_same_verdict"] >= 0.9, interval
    for on_mean in (0.0, 0.5):   # a null effect is still called detected ≤ 5% of the time
        oc = operating_characteristics(on_mean, on_mean, n_sim=4000, seed=1,
                                       off_at_threshold=True)
        assert oc["p_detected"] <= 0.05, oc


def test_a_paired_effect_in_the_wrong_direction_is_not_detected_as_the_claim():
    # the claim says "lower"; on is below the threshold but off is lower still
    on = [-0.2, -0.3, -0.25, -0.22, -0.28, -0.3, -0.21, -0.26]
    off = [v - 0.5 for v in on]
    assert Expect.less(0).direction == -1
    r = judge(Expect.less(0.0), on, off)
    assert r["verdict"] == "not specific" and r["paired_ci"][0] > 0


def test_not_detected_when_the_on_interval_crosses_the_threshold():
    on = [0.3, -0.1, 0.2, -0.5, 0.1, 0.0, 0.4, -0.2]
    r = judge(Expect.greater(0.0), on, [-1.0] * 8)
    assert r["verdict"] == "not detected" and r["on_ci"][0] < 0 < r["on_ci"][1]
    # the share of seeds holding is reported but decides nothing: 5/8 hold on here
    assert r["share_on"] == pytest.approx(4 / 8)


def test_undefined_seeds_drop_out_and_too_few_is_not_testable():
    on = UP[:5] + [np.nan] * 3
    r = judge(Expect.greater(0.0), on, DOWN)
    assert r["n_root_seeds"] == 5 and r["verdict"] == "detected"
    r = judge(Expect.greater(0.0), UP[:3] + [np.nan] * 5, DOWN)
    assert r["verdict"] == "not testable" and "3 of 8" in r["reason"]


def test_bad_input_is_named():
    with pytest.raises(ValueError, match="paired by root seed"):
        judge(Expect.greater(0), UP, DOWN[:3])
    with pytest.raises(ValueError, match="level"):
        judge(Expect.greater(0), UP, DOWN, level=1.5)
    with pytest.raises(ValueError, match="empty"):
        judge(Expect.greater(0), [], [])
    with pytest.raises(ValueError, match="finite"):
        Expect.greater(float("nan"))


def test_mean_interval_is_the_student_t_interval():
    x = [1.0, 2.0, 3.0, 4.0, 5.0]
    mean, (lo, hi) = mean_interval(x)
    se = np.std(x, ddof=1) / np.sqrt(5)
    assert mean == 3.0 and hi - 3.0 == pytest.approx(2.776445 * se, rel=1e-5)   # t_{0.975, 4}
    assert np.isnan(mean_interval([1.0])[1][0]) and mean_interval([2.0, 2.0]) == (2.0, (2.0, 2.0))


def test_wilson_interval_matches_the_formula():
    lo, hi = wilson_interval(4, 5)
    z, p, n = 1.959964, 0.8, 5
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z / (1 + z * z / n) * np.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    assert (lo, hi) == pytest.approx((centre - half, centre + half), abs=1e-5)


def test_expectations_and_directions():
    assert Expect.less(0).holds(-1) and not Expect.less(0).holds(0)
    assert Expect.at_least(0.5).holds(0.5) and not Expect.greater(0.5).holds(0.5)
    assert Expect.between(0, 1).holds(1) and not Expect.between(0, 1).holds(1.01)
    assert Expect.greater(0).holds(float("nan")) is None
    assert Expect.between(0.1, 0.9).direction == 1
    assert Expect.between(0.1, 0.9, up=False).direction == -1
    assert Expect.at_most(0).holds_for_interval(-2, -1) and not Expect.at_most(0).holds_for_interval(-1, 1)
    with pytest.raises(ValueError):
        Expect.between(1, 0)


# ------------------------------------------------------------------ the rule's stability
@pytest.mark.parametrize("on_mean", [-0.5, 0.0, 0.5, 1.0, 2.0])
def test_a_null_effect_is_called_detected_at_most_5_percent_of_the_time(on_mean):
    oc = operating_characteristics(on_mean, on_mean, n_seeds=DEFAULT_ROOT_SEEDS, n_sim=4000, seed=1)
    assert oc["p_detected"] <= 0.05, oc


def test_more_root_seeds_give_the_same_verdict_on_a_second_set_more_often():
    # An effect that puts the on mean 1.5 sd above the threshold and the off mean 1 sd below it
    # (d_z = 2.5 with on/off correlation 0.5): with the book's default of 6 root seeds (8 until
    # 30 Nov 2026) a second seed set gets the same verdict about 71% of the time, with 8 ≥ 90%,
    # with 5 about 56%
    assert DEFAULT_ROOT_SEEDS == 6
    same = {n: operating_characteristics(1.5, -1.0, n_seeds=n, n_sim=4000, seed=2)
            for n in (5, DEFAULT_ROOT_SEEDS, 8)}
    assert same[8]["p_same_verdict"] >= 0.90 and same[8]["p_detected"] >= 0.90, same[8]
    assert 0.62 < same[6]["p_same_verdict"] < 0.80 and same[6]["p_detected"] > 0.75, same[6]
    assert same[5]["p_same_verdict"] < same[6]["p_same_verdict"] < same[8]["p_same_verdict"]
    # and an effect on the edge of the rule (off mean at the threshold) is a coin flip, which
    # the per-claim replication chance reports
    edge = operating_characteristics(2.0, 0.0, n_seeds=DEFAULT_ROOT_SEEDS, n_sim=4000, seed=3)
    assert 0.3 < edge["p_detected"] < 0.7


def test_replication_chance_is_high_for_a_clear_effect_and_low_at_the_edge():
    e = Expect.greater(0.0)
    clear_off = [v - 0.1 for v in DOWN]        # off mean −0.135, on mean +0.32
    assert replication_chance(e, UP, clear_off, n_sim=500) > 0.9
    edge_off = [v + 0.03 for v in DOWN]        # off mean −0.005: right at the threshold
    chance = replication_chance(e, UP, edge_off, n_sim=500)
    assert 0.2 < chance < 0.9
    assert np.isnan(replication_chance(e, UP[:3], DOWN[:3]))   # not testable: no verdict


def test_seeds_for_agreement_grows_as_the_effect_nears_the_boundary():
    """A clear effect agrees from the rule's fewest seeds; one near the boundary needs more, and
    at that number the normal model of operating_characteristics agrees about 90% of the time
    while a third fewer seeds fall short; an off mean on the threshold never settles."""
    e = Expect.greater(0.0)
    rng = np.random.default_rng(7)
    z = rng.standard_normal(6)
    z = (z - z.mean()) / z.std(ddof=1)                   # exactly mean 0, sd 1
    off = list(-1.0 + 0.0 * z)                            # off fixed well below the threshold
    assert seeds_for_agreement(e, list(3.0 + z), off) == 5
    n = seeds_for_agreement(e, list(0.6 + z), off)       # on 0.6 sd above the threshold
    assert 15 < n < 80
    at = operating_characteristics(0.6, -1.0, n_seeds=n, sd=1.0, corr=0.0, n_sim=4000, seed=1)
    fewer = operating_characteristics(0.6, -1.0, n_seeds=int(n * 0.67), sd=1.0, corr=0.0,
                                      n_sim=4000, seed=1)
    assert at["p_same_verdict"] >= 0.87 and fewer["p_same_verdict"] < 0.9
    # an off mean on the threshold: whether it "meets" > 0 stays a coin flip at any number
    assert seeds_for_agreement(e, list(3.0 + z), list(0.5 * z), most=40) == 41
    assert seeds_for_agreement(e, [1.0, 2.0], [0.0, 0.0]) is None        # too few pairs
    assert seeds_for_agreement(e, list(0.6 + z), off, target=0.95) > n
    with pytest.raises(ValueError, match="target"):
        seeds_for_agreement(e, list(0.6 + z), off, target=1.5)


def test_a_claim_below_the_replication_target_says_how_many_seeds_it_needs():
    clear = Claim.over_seeds("c", "C", statistic="s", expect=Expect.greater(0.0),
                             values_on=UP, values_off=[v - 0.1 for v in DOWN], mechanism="m")
    assert clear.replication >= REPLICATION_TARGET and clear.seeds_needed is None
    edge = Claim.over_seeds("e", "E", statistic="s", expect=Expect.greater(0.0),
                            values_on=[v - 0.22 for v in UP], values_off=[v - 0.1 for v in DOWN],
                            mechanism="m")
    assert edge.replication < REPLICATION_TARGET and edge.seeds_needed > len(UP)
    assert edge.to_dict()["seeds_needed"] == edge.seeds_needed


# ------------------------------------------------------------------ claim specs
def _table(values: dict[str, tuple[list[float], list[float]]]) -> pd.DataFrame:
    rows = [{"seed": s, "mechanism": m, "claim_id": cid, "value": v}
            for cid, (on, off) in values.items()
            for m, vals in (("on", on), ("off", off)) for s, v in enumerate(vals)]
    return pd.DataFrame(rows)


SPEC = ClaimSpec("x-up", "X rises", "P §1", "Δ (nats)", Expect.greater(0.0),
                 computed_by="tokenbook.somewhere:seed_claims", mechanism="on: X; off: no X",
                 manipulation=Expect.greater(0.1), manipulation_what="X strength (nats)",
                 known_answer_how="exact, from the generator")


def test_a_spec_reads_its_statistic_manipulation_and_known_answer():
    table = _table({"x-up": (UP, DOWN),
                    MANIPULATION_PREFIX + "x-up": ([0.5] * 8, [0.0] * 8),
                    KNOWN_PREFIX + "x-up": ([0.3] * 8, [0.0] * 8)})
    (c,) = judge_claims([SPEC], table)
    assert c.verdict == "detected" and c.computed_by == "tokenbook.somewhere:seed_claims"
    assert c.manipulation["passed"] and c.known_answer == {"on": 0.3, "off": 0.0,
                                                           "how": "exact, from the generator",
                                                           "verdict": "detected"}
    assert "does not recover" not in c.note


def test_the_known_answer_is_judged_by_the_same_rule_and_a_mismatch_is_said():
    """The per-seed known answers get their own verdict (what the pipeline should recover);
    a pipeline verdict that differs from it is named in the note, and seeds failing the
    manipulation check are left out of both."""
    table = _table({"x-up": (UP, DOWN), KNOWN_PREFIX + "x-up": (DOWN, DOWN)})
    (c,) = judge_claims([SPEC], table)
    assert c.verdict == "detected" and c.known_answer["verdict"] == "not detected"
    assert "judged by the same rule, is not detected" in c.note
    assert "values_on" not in c.known_answer                 # means and verdict only
    manip_on = [0.5] * 5 + [0.0] * 3
    known_on = UP[:5] + [-5.0] * 3                            # the failed seeds would sink it
    table = _table({"x-up": (UP, DOWN), MANIPULATION_PREFIX + "x-up": (manip_on, [0.0] * 8),
                    KNOWN_PREFIX + "x-up": (known_on, DOWN)})
    (c,) = judge_claims([SPEC], table)
    assert c.n_root_seeds == 5 and c.known_answer["verdict"] == c.verdict == "detected"


def test_a_known_answer_without_an_off_world_is_read_by_its_on_values_alone():
    """A known answer with nothing to pair with off (the onset claim's: nothing is reduced
    there, E undefined) cannot be judged by the paired rule; the note says instead whether its
    on values alone meet the expectation, and whether the pipeline's verdict agrees."""
    nan = [float("nan")] * 8
    table = _table({"x-up": (UP, DOWN), KNOWN_PREFIX + "x-up": ([0.3 + 0.01 * i for i in
                                                                 range(8)], nan)})
    (c,) = judge_claims([SPEC], table)
    assert c.verdict == "detected" and c.known_answer["verdict"] == "not testable"
    assert c.known_answer["on_alone"]["meets"] is True
    assert "alone meet > 0 with their interval" in c.note and "the pipeline agrees" in c.note
    assert "does not recover" not in c.note
    table = _table({"x-up": (UP, DOWN), KNOWN_PREFIX + "x-up": ([-0.3] * 4 + [0.1] * 4, nan)})
    (c,) = judge_claims([SPEC], table)
    assert c.known_answer["on_alone"]["meets"] is False
    assert "alone do not meet > 0" in c.note and "does not recover it" in c.note
    # a pipeline that cannot be judged (its check fails in too many seeds) is not compared
    manip_on = [0.5] * 3 + [0.0] * 5
    table = _table({"x-up": (UP, DOWN), MANIPULATION_PREFIX + "x-up": (manip_on, [0.0] * 8),
                    KNOWN_PREFIX + "x-up": ([-0.3] * 8, nan)})
    (c,) = judge_claims([SPEC], table)
    assert c.verdict == "not testable" and "on values alone" not in c.note
    # a known answer with an off world keeps the paired rule (no on_alone)
    table = _table({"x-up": (UP, DOWN), KNOWN_PREFIX + "x-up": (UP, DOWN)})
    (c,) = judge_claims([SPEC], table)
    assert "on_alone" not in c.known_answer and c.known_answer["verdict"] == "detected"


def test_seeds_failing_the_manipulation_check_are_reported_and_not_judged():
    manip_on = [0.5] * 5 + [0.0] * 3            # the mechanism missing at seeds 5, 6, 7
    table = _table({"x-up": (UP, DOWN), MANIPULATION_PREFIX + "x-up": (manip_on, [0.0] * 8)})
    (c,) = judge_claims([SPEC], table)
    assert c.manipulation["failed_seeds"] == [5, 6, 7] and not c.manipulation["passed"]
    assert c.n_root_seeds == 5 and "5, 6, 7" in c.note
    # an off world that still has the mechanism fails the check too
    table = _table({"x-up": (UP, DOWN), MANIPULATION_PREFIX + "x-up": ([0.5] * 8, [0.5] * 8)})
    (c,) = judge_claims([SPEC], table)
    assert c.verdict == "not testable" and len(c.manipulation["failed_seeds"]) == 8
    assert c.known_answer is not None and c.known_answer["on"] is None   # how, no values


def test_a_claim_no_seed_can_judge_still_shows_its_known_answer():
    """Every seed failing the manipulation check: not testable, and the known answer's means
    are still shown (its verdict: not testable too; the no-effect note where it applies)."""
    table = _table({"x-up": (UP, DOWN), MANIPULATION_PREFIX + "x-up": ([0.0] * 8, [0.0] * 8),
                    KNOWN_PREFIX + "x-up": ([-0.2] * 8, [0.0] * 8)})
    (c,) = judge_claims([SPEC], table)
    assert c.verdict == "not testable" and c.known_answer["verdict"] == "not testable"
    assert c.known_answer["on"] == pytest.approx(-0.2) and c.known_answer["off"] == 0.0
    assert "does not plant the mechanism" in c.note and "not judged" in c.note
    # what the world holds is still judged over every root seed, and said
    assert c.known_answer["verdict_all_seeds"] == "not detected"
    assert "known answer over all 8 root seeds is not detected" in c.note
    table = _table({"x-up": (UP, DOWN), MANIPULATION_PREFIX + "x-up": ([0.0] * 8, [0.0] * 8),
                    KNOWN_PREFIX + "x-up": (UP, DOWN)})
    (c,) = judge_claims([SPEC], table)
    assert c.verdict == "not testable" and c.known_answer["verdict_all_seeds"] == "detected"


def test_a_known_answer_without_an_effect_says_the_world_does_not_plant_it():
    table = _table({"x-up": (UP, DOWN), KNOWN_PREFIX + "x-up": ([0.0] * 8, [0.0] * 8)})
    (c,) = judge_claims([SPEC], table)
    assert "does not plant the mechanism" in c.note


def test_a_not_testable_spec_says_why():
    spec = ClaimSpec("y", "Y", "P §2", "ρ", Expect.greater(0), not_testable="the world fixes ρ")
    (c,) = judge_claims([spec], _table({"x-up": (UP, DOWN)}))
    assert c.verdict == "not testable" and c.note == "the world fixes ρ"


def test_a_spec_without_known_values_says_how_and_claims_nothing():
    (c,) = judge_claims([SPEC], _table({"x-up": (UP, DOWN)}))
    assert c.known_answer == {"on": None, "off": None, "how": "exact, from the generator"}
    assert "does not plant" not in c.note


def test_an_on_only_manipulation_check_lets_the_off_world_share_the_precondition():
    spec = ClaimSpec("x-up", "X rises", "P §1", "Δ (nats)", Expect.greater(0.0),
                     manipulation=Expect.greater(0.1), manipulation_what="entropy (nats)",
                     manipulation_on_only=True)
    both = _table({"x-up": (UP, DOWN), MANIPULATION_PREFIX + "x-up": ([0.5] * 8, [0.5] * 8)})
    (c,) = judge_claims([spec], both)
    assert c.manipulation["passed"] and c.verdict == "detected"
    assert c.manipulation["expected"] == "on > 0.1"
    (c,) = judge_claims([SPEC], both)          # the default: off must fail it
    assert not c.manipulation["passed"]
    low_on = _table({"x-up": (UP, DOWN), MANIPULATION_PREFIX + "x-up": ([0.0] * 8, [0.5] * 8)})
    (c,) = judge_claims([spec], low_on)
    assert c.verdict == "not testable" and len(c.manipulation["failed_seeds"]) == 8


def test_a_balance_check_names_the_seeds_where_more_than_the_mechanism_moved():
    spec = ClaimSpec("x-up", "X rises", "P §1", "Δ (nats)", Expect.greater(0.0),
                     balance_what="mean caption length (words)", balance_tolerance=0.2)
    lengths_off = [7.0] * 6 + [7.5, 8.0]           # seeds 6 and 7 drift
    table = _table({"x-up": (UP, DOWN), BALANCE_PREFIX + "x-up": ([7.0] * 8, lengths_off)})
    (c,) = judge_claims([spec], table)
    assert c.balance["failed_seeds"] == [6, 7] and not c.balance["passed"]
    assert c.balance["max_abs_difference"] == pytest.approx(1.0)
    assert "balance check failed at root seed(s) [6, 7]" in c.note
    assert c.n_root_seeds == 8                       # reported, still judged
    table = _table({"x-up": (UP, DOWN), BALANCE_PREFIX + "x-up": ([7.0] * 8, [7.1] * 8)})
    (c,) = judge_claims([spec], table)
    assert c.balance["passed"] and "balance" not in c.note
    with pytest.raises(ValueError, match="balance_what and balance_tolerance"):
        ClaimSpec("z", "Z", "P", "s", Expect.greater(0), balance_what="length")
