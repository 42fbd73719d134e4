"""The cancellation chapter's claim specs: every claim declared once, judged from the seed and
size sweeps with its known answer, and not testable with the power numbers where the run is too
small."""

import numpy as np
import pandas as pd

from tokenbook.cancellation_hypothesis.claims import claim_specs, size_table, tiny_claims
from tokenbook.cancellation_hypothesis.experiments import KNOWN_FLIP


def _sweep(flip_on, known_on, seeds=range(8)):
    rng = np.random.default_rng(0)
    rows = []
    for s in seeds:
        vals = {"flip-excess": (flip_on + 0.01 * rng.standard_normal(), 0.0),
                KNOWN_FLIP: (known_on, 0.0),
                "flip-both-signs": (0.8, 0.8),
                "template-less-under-grpo": (0.01 * rng.standard_normal(),
                                             0.01 * rng.standard_normal()),
                "boosted-higher-value": (0.05 * rng.standard_normal(),
                                         0.05 * rng.standard_normal()),
                "peer-masking-same-high-entropy": (1e-4, -1e-4)}
        for cid, (on, off) in vals.items():
            rows += [dict(seed=s, mechanism="on", claim_id=cid, value=on),
                     dict(seed=s, mechanism="off", claim_id=cid, value=off)]
    return pd.DataFrame(rows)


def _by_id(claims):
    return {c.id: c for c in claims}


def test_every_spec_has_its_function_and_the_flip_claim_its_known_answer():
    specs = claim_specs(sizes=["32×2"])
    ids = [s.id for s in specs]
    assert ids[0] == "flip-excess" and "flip-excess@32×2" in ids
    assert "template-less-under-grpo@32×2" in ids and "flip-both-signs" not in ids
    for s in specs:
        assert s.computed_by or s.not_testable, s.id
        if s.id.startswith("flip-excess"):
            assert "first-order" in s.known_answer_how
            assert "0 by construction" in s.mechanism


def test_flip_excess_detected_with_its_known_answer_and_sizes():
    sweep = _sweep(0.10, 0.08)
    sizes = sweep[sweep["claim_id"].isin(["flip-excess", KNOWN_FLIP,
                                          "template-less-under-grpo"])].assign(
        size="32×2", n_params=1)
    claims = _by_id(tiny_claims(sweep, sizes))
    c = claims["flip-excess"]
    assert c.verdict == "detected"
    assert c.known_answer["on"] == 0.08 and c.known_answer["off"] == 0.0
    assert claims["flip-excess@32×2"].verdict == "detected"
    assert claims["flip-excess@32×2"].known_answer["on"] == 0.08
    assert claims["coupling-identical-low-conf"].verdict == "not testable"
    assert claims["query-preserved-helps"].verdict == "not testable"
    # a pipeline whose excess is nil: not detected, and the known answer is still shown
    flat = _by_id(tiny_claims(_sweep(0.0, 0.08)))["flip-excess"]
    assert flat.verdict == "not detected"


def test_probe_not_testable_with_the_power_numbers():
    power = pd.DataFrame({"name": ["same/high gap"], "n_needed": [916.0], "n_now": [476.0]})
    c = _by_id(tiny_claims(_sweep(0.1, 0.1), probe_power=power))
    assert c["peer-masking-same-high-entropy"].verdict == "not testable"
    assert "916" in c["peer-masking-same-high-entropy"].note
    assert "476" in c["peer-masking-same-high-entropy"].note
    enough = power.assign(n_now=1000.0)
    c = _by_id(tiny_claims(_sweep(0.1, 0.1), probe_power=enough))
    assert c["peer-masking-same-high-entropy"].verdict != "not testable"


def test_batching_reasons_carry_the_power_numbers():
    summary = pd.DataFrame({"condition": ["query-preserved"], "auc_diff": [0.004],
                            "diff_lo": [-0.01], "diff_hi": [0.02]}).set_index("condition")
    power = pd.DataFrame({"condition": ["query-preserved"], "mde_now": [0.03],
                          "seeds_needed": [25.0]}).set_index("condition")
    c = _by_id(tiny_claims(_sweep(0.1, 0.1), batching={
        "query-preserved-helps": (summary, power, "verl default (seqlen)")},
        n_seeds=8, rl_steps=16))["query-preserved-helps"]
    assert c.verdict == "not testable" and "25 seeds" in c.note and "0.030" in c.note


def test_size_table_names_claims_by_size():
    t = pd.DataFrame({"size": ["32×2"], "seed": [0], "mechanism": ["on"],
                      "claim_id": [KNOWN_FLIP], "value": [0.1]})
    assert size_table(t)["claim_id"].tolist() == ["known:flip-excess@32×2"]


def test_template_claim_is_judged_only_where_the_template_can_move():
    """The template claim's on-only manipulation check: a root seed whose template tokens
    have entropy below the floor (a template the SFT made certain) is not judged; above it
    on, the seed counts whatever the off world's value (off permutes labels of the same
    tokens). The balance rows (same token counts on and off) pass."""
    from tokenbook.cancellation_hypothesis.claims import TEMPLATE_ENTROPY_FLOOR
    from tokenbook.cancellation_hypothesis.experiments import (BALANCE_TEMPLATE,
                                                               MANIPULATION_TEMPLATE)

    sweep = _sweep(0.1, 0.1)
    rows = []
    for s in range(8):
        ent = TEMPLATE_ENTROPY_FLOOR * (0.4 if s == 3 else 1.5)
        for mech in ("on", "off"):
            rows += [dict(seed=s, mechanism=mech, claim_id=MANIPULATION_TEMPLATE, value=ent),
                     dict(seed=s, mechanism=mech, claim_id=BALANCE_TEMPLATE, value=0.6)]
    c = _by_id(tiny_claims(pd.concat([sweep, pd.DataFrame(rows)], ignore_index=True)))
    t = c["template-less-under-grpo"]
    assert t.manipulation["failed_seeds"] == [3]
    assert t.n_root_seeds == 7 and "manipulation check failed at root seed(s) [3]" in t.note
    assert t.balance is not None and not t.balance.get("failed_seeds")
    # every seed certain (the fixed template): nothing judged
    certain = pd.DataFrame(rows).assign(value=lambda d: np.where(
        d["claim_id"] == MANIPULATION_TEMPLATE, 0.5 * TEMPLATE_ENTROPY_FLOOR, d["value"]))
    c = _by_id(tiny_claims(pd.concat([sweep, certain], ignore_index=True)))
    assert c["template-less-under-grpo"].verdict == "not testable"
