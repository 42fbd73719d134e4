"""The Monte-Carlo token value against its known answer: the exact success probability of a
partial solution in a small arithmetic world, summed over every continuation the policy can
write (:func:`tokenbook.cancellation_hypothesis.value.exact_values`)."""

import numpy as np
import pytest

from tokenbook.models.policy import build_policy, char_tokenizer, sft
import pandas as pd

from tokenbook.cancellation_hypothesis import verdicts as V
from tokenbook.cancellation_hypothesis.value import (exact_values, mc_values, oracle_values,
                                                     path_breakdown)
from tokenbook.worlds.arithmetic import (make_problems, on_solution_path, verify,
                                         worked_solution)


def _reward(text, problem):
    return verify(text, problem.answer)


@pytest.fixture(scope="module")
def small_world():
    """A one-layer policy briefly SFT'd on one-digit two-term problems: confident template,
    uncertain sums, so partial solutions have success probabilities strictly inside (0, 1)."""
    tok = char_tokenizer()
    model = build_policy(tok, hidden_size=32, num_layers=1, num_heads=2, seed=0)
    train = make_problems(400, seed=1, n_terms=(2, 2), digits=(1, 1))
    sft(model, tok, [p.prompt for p in train], [worked_solution(p) for p in train], steps=60,
        lr=3e-3, seed=0, progress=False)
    probs = make_problems(3, seed=7, n_terms=(2, 2), digits=(1, 1))
    return model, tok, probs


class _Roll:
    """The two fields of a rollout batch :func:`mc_values` reads."""

    def __init__(self, prompt_ids, tokens):
        self.prompt_ids, self.tokens = np.asarray(prompt_ids), tokens


def _cases(tok, probs, back):
    """Partial solutions ending ``back`` tokens before the end of each worked solution (the
    token at the cut included) and the one token shorter: heads, prompts + heads, problems,
    (row, pos) pairs and each solution's tokens."""
    heads, prefixes, cases, rows, tokens = [], [], [], [], []
    for i, p in enumerate(probs):
        toks = tok.convert_ids_to_tokens(tok(worked_solution(p), add_special_tokens=False)
                                         .input_ids)
        tokens.append(toks)
        cut = len(toks) - back
        for pos in (cut - 1, cut):
            rows.append((i, pos))
            heads.append("".join(toks[:pos + 1]))
            prefixes.append(p.prompt + heads[-1])
            cases.append(p)
    return heads, prefixes, cases, rows, tokens


def test_enumeration_is_a_distribution_and_bounds_shrink(small_world):
    model, tok, probs = small_world
    heads, prefixes, cases, _, _ = _cases(tok, probs, 2)
    coarse = exact_values(model, tok, prefixes, heads, cases, _reward, max_new_tokens=4,
                          min_prob=1e-2)
    fine = exact_values(model, tok, prefixes, heads, cases, _reward, max_new_tokens=4,
                        min_prob=1e-4)
    assert np.all(coarse["lower"] <= fine["lower"] + 1e-12)
    assert np.all(fine["upper"] <= coarse["upper"] + 1e-12)
    # the policy's float32 softmax sums to 1 only up to its rounding: 1.9e-7 off with one torch
    # thread on an Intel Xeon (30 Nov 2026), within 1e-9 with two
    float32_mass = 1e-6
    assert np.all((fine["lower"] >= 0) & (fine["upper"] <= 1 + float32_mass))
    # a reward of 1 everywhere: the enumerated mass plus the pruned mass is 1
    ones = exact_values(model, tok, prefixes, heads, cases, lambda t, p: 1.0,
                        max_new_tokens=4, min_prob=1e-4)
    np.testing.assert_allclose(ones["upper"], 1.0, atol=float32_mass)
    with pytest.raises(ValueError, match="one of each"):
        exact_values(model, tok, prefixes, heads[:1], cases, _reward)


@pytest.mark.slow
def test_mc_value_matches_the_exact_success_probability(small_world):
    """Partial solutions cut before the answer's last digits (continuations of at most
    ``max_new`` tokens, for MC and the exact sum alike): the Monte-Carlo value of many
    continuations lies in the binomial interval around the exact probability, and the token's
    own inclusion matters (V(y≤t) is not V(y<t))."""
    model, tok, probs = small_world
    n_mc, max_new = 300, 4
    heads, prefixes, cases, rows, tokens = _cases(tok, probs, 2)
    exact = exact_values(model, tok, prefixes, heads, cases, _reward, max_new_tokens=max_new,
                         min_prob=1e-6)
    assert float(exact["pruned"].max()) < 0.05          # the interval is narrow
    roll = _Roll(range(len(probs)), tokens)
    by_id = dict(enumerate(probs))
    mc = mc_values(model, tok, roll, by_id, rows, _reward, n_continuations=n_mc,
                   max_new_tokens=max_new, seed=3)
    mid = 0.5 * (exact["lower"] + exact["upper"]).to_numpy()
    half = 0.5 * exact["pruned"].to_numpy()
    se = np.sqrt(np.clip(mid * (1 - mid), 0.01, None) / n_mc)
    assert np.all(np.abs(mc - mid) <= 4 * se + half), (mc, mid)
    # the values are informative: some partial solutions are neither sure nor hopeless
    assert np.any((mid > 0.05) & (mid < 0.95)), mid
    # without the token (V(y<t)) the estimate is the previous prefix's value
    before = mc_values(model, tok, roll, by_id, rows[1::2], _reward, n_continuations=n_mc,
                       max_new_tokens=max_new + 1, include_token=False, seed=4)
    longer = exact_values(model, tok, prefixes[0::2], heads[0::2], cases[0::2], _reward,
                          max_new_tokens=max_new + 1, min_prob=1e-6)
    mid0 = 0.5 * (longer["lower"] + longer["upper"]).to_numpy()
    np.testing.assert_allclose(before, mid0, atol=float(4 * se.max() + longer["pruned"].max()))


def test_oracle_values_label_each_token_by_the_solution_path():
    """The value claim's known answer on a hand-built table: a correct rollout is on the path
    throughout; an incorrect one until its first wrong character; the end-of-sequence token
    is left out, a zero first-order Δ is neither boosted nor suppressed."""
    p = make_problems(1, seed=2, n_terms=(2, 2))[0]
    good = worked_solution(p)[:12]
    bad = good[:9] + ("0" if good[9] != "0" else "1") + good[10:]
    rows = []
    for r, (text, reward) in enumerate(((good, 1.0), (bad, 0.0))):
        for pos, ch in enumerate(list(text) + [""]):
            rows.append({"row": r, "pos": pos, "prompt_id": p.id, "token": ch,
                         "reward": reward})
    table = pd.DataFrame(rows)
    full = np.where(table["pos"] % 2 == 0, 0.1, -0.1)
    full[3] = 0.0
    first = table[["row", "pos"]].assign(full=full)
    out = oracle_values(table, first, {p.id: p}, on_solution_path)
    assert len(out) == len(table) - 2 - 1                 # two EOS tokens, one Δ = 0
    v = out.set_index(["row", "pos"])["value"]
    assert v.loc[0].eq(1.0).all()
    assert v.loc[1].loc[:8].eq(1.0).all() and v.loc[1].loc[9:].eq(0.0).all()
    assert set(out["direction"]) == {"boosted", "suppressed"}
    m = out.groupby(["rollout", "direction"])["value"].mean()
    incorrect_gap = m["incorrect", "boosted"] - m["incorrect", "suppressed"]
    assert m["correct"].eq(1.0).all() and incorrect_gap != 0
    assert V.value_gap(out) == pytest.approx(min(0.0, incorrect_gap))
    with pytest.raises(ValueError, match="order"):
        oracle_values(table, first.iloc[::-1], {p.id: p}, on_solution_path)


def _oracle(directions_on, directions_off, lucky=False):
    """An :func:`oracle_values`-shaped table: one failed rollout whose tokens before its
    mistake (value 1) and after it (value 0) have the given directions, and one correct
    rollout on the path throughout (or, ``lucky``, leaving it for its last token)."""
    rows = [("incorrect", d, 1.0) for d in directions_on]
    rows += [("incorrect", d, 0.0) for d in directions_off]
    failed = pd.DataFrame(rows, columns=["rollout", "direction", "value"]).assign(row=0)
    correct = pd.DataFrame({"rollout": "correct", "direction": ["boosted", "suppressed"],
                            "value": [1.0, 0.0 if lucky else 1.0], "row": 1})
    return pd.concat([failed, correct], ignore_index=True)


def test_path_breakdown_tells_a_step_that_separates_the_mistake_from_one_that_does_not():
    """Cancellation as the claim needs it (tokens before a failed rollout's mistake boosted,
    after it suppressed) gives boosted shares 1 and 0 on and off the path and a positive
    value gap there; a step blind to the mistake gives equal shares and no gap."""
    separating = _oracle(["boosted"] * 3, ["suppressed"] * 3)
    b = path_breakdown(separating)
    assert b.loc["incorrect", "boosted_on_path"] == 1.0
    assert b.loc["incorrect", "boosted_off_path"] == 0.0
    assert b.loc["incorrect", "on_path"] == 0.5 and b.loc["incorrect", "left_path"] == 1.0
    assert b.loc["correct", "left_path"] == 0.0
    assert np.isnan(b.loc["correct", "boosted_off_path"])          # no token off the path
    gaps = separating.groupby(["rollout", "direction"])["value"].mean()
    assert gaps["incorrect", "boosted"] - gaps["incorrect", "suppressed"] == 1.0
    blind = _oracle(["boosted", "suppressed"] * 2, ["boosted", "suppressed"] * 2, lucky=True)
    b = path_breakdown(blind)
    assert b.loc["incorrect", "boosted_on_path"] == b.loc["incorrect", "boosted_off_path"]
    assert b.loc["correct", "left_path"] == 1.0                   # right answer, wrong path
    assert list(b.index) == ["correct", "incorrect"]
    assert b.loc["incorrect", "rollouts"] == 1 and b.loc["incorrect", "tokens"] == 8
    with pytest.raises(ValueError, match="direction"):
        path_breakdown(blind.drop(columns="direction"))
