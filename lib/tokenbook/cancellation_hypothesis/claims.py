"""The cancellation chapter's claims (Cheng et al. 2026) as library specs.

:func:`claim_specs` declares every claim once (:class:`tokenbook.claims.ClaimSpec`: wording,
source, statistic, expectation, the per-seed function that computes it, the mechanism and its
off world, the known answer where the generator or a closed form gives one);
:func:`tiny_claims` judges them at the tiny scale from the seed sweep
(:func:`tokenbook.cancellation_hypothesis.experiments.run_seeds`) and the size sweep
(:func:`tokenbook.cancellation_hypothesis.experiments.scale_sweep`), with the paired on − off rule of
:mod:`tokenbook.verdicts`. The claims a tiny run cannot resolve are *not testable* with the
numbers that say why (the probe's and the learning curves' power tables).
"""

from __future__ import annotations

from typing import Mapping, Sequence

import numpy as np
import pandas as pd

from tokenbook.claims import Claim, ClaimSpec, judge_claims
from tokenbook.verdicts import Expect
from tokenbook.cancellation_hypothesis.experiments import FLIP_HEAD, scale_sweep, seed_claims

__all__ = ["MECHANISMS", "COUPLING_DOMINANCE_FLOOR", "TEMPLATE_ENTROPY_FLOOR", "claim_specs", "size_table", "tiny_claims"]

PAPER = "Cheng et al. 2026"

#: what each claim's *on* plants and its *off* removes
MECHANISMS = {
    "flip": ("on: one full-batch GRPO SGD step (every token's change holds its own term, its "
             "rollout's and the other rollouts'); off: the isolated control, every rollout "
             "updated alone from the same policy with its self term unchanged "
             "(token_dynamics_isolated), compared with itself: the excess is 0 by "
             "construction. The off world differs from on only in the cross-rollout coupling "
             "(same policy, batch, advantages, step size per token, within-rollout terms)"),
    "flip-head": ("on: one full-batch GRPO SGD step of the output layer alone; off: the "
                  "isolated control of the same output-layer step, every rollout updated alone "
                  "(token_dynamics_isolated(head_only=True)), compared with itself: 0 by "
                  "construction. With the body frozen the hidden states stay fixed, so the "
                  "coupling between tokens is exactly the paper's φ_jk (h_j·h_k); the off world "
                  "differs from on only in the cross-rollout terms"),
    "template": ("on: the world's token classes; off: class labels permuted over tokens "
                 "(template indistinguishable)"),
    "value": ("on: boosted/suppressed from the real Δ; off: direction labels permuted within "
              "each rollout sign"),
    "probe": "on: the probe's peer buckets; off: bucket labels permuted within each target",
}

_FLIP_CLAIM = ("Positive and negative rollouts exhibit remarkably similar proportions of tokens "
               "whose probabilities are boosted or suppressed — tokens flip against their own "
               "rollout's advantage — because of coupling between rollouts (our reading: the "
               "flips the full batch adds over every rollout updated alone)")
_FLIP_STAT = ("min over the advantage signs of the flip ratio of the full-batch step − that of "
              "the isolated control (Pr(Δ<0 | A>0), Pr(Δ>0 | A<0), loss tokens with A ≠ 0; a "
              "difference of shares)")
_FLIP_KNOWN = ("the same statistic on the exact first-order Δ of the same full-model SGD step on "
               "the same batch: η ∇log π_j · (1/N) Σ_k A_k ∇log π_k over all loss tokens vs over "
               "the token's own rollout (dynamics.first_order_full, autograd Jacobian-vector "
               "products; no step taken). With the output layer alone it equals the "
               "linear-softmax closed form (η/N) Σ_k A_k φ_jk (h_j·h_k) (a test checks both)")
_FLIP_HEAD_CLAIM = ("Positive and negative rollouts exhibit remarkably similar proportions of "
                    "tokens whose probabilities are boosted or suppressed — tokens flip against "
                    "their own rollout's advantage — because of coupling between rollouts (our "
                    "reading, in the paper's own frame: the flips the full batch adds over every "
                    "rollout updated alone, for a step of the output layer, where the coupling "
                    "is the linear-softmax kernel φ_jk (h_j·h_k) of §3)")
_FLIP_HEAD_STAT = ("min over the advantage signs of the flip ratio of the full-batch "
                   "output-layer step − that of its isolated control (loss tokens with A ≠ 0; "
                   "a difference of shares)")
_FLIP_HEAD_KNOWN = ("the same statistic on the closed-form first-order Δ of an output-layer "
                    "step on the same batch, (η/N) Σ_k A_k φ_jk (h_j·h_k) over all loss tokens "
                    "vs over the token's own rollout (dynamics.first_order_prediction: the "
                    "policy's logits and hidden states only, no step taken)")
_TEMPLATE_CLAIM = ("Compared with training on only positive rollouts, critic-free RL shifts "
                   "updates from template and formatting tokens toward reasoning tokens")
_TEMPLATE_STAT = "template share of Σ|Δ|: GRPO − positive-only (PSR)"
#: the template claim's manipulation check (on only): mean entropy (nats) of the policy at
#: the template tokens of the analysis batch, before the update, at least this. One fixed
#: template leaves 0.03–0.04 nats after the SFT (mean p 0.986–0.996, root seeds 0–3): too
#: certain for an update to shift; the "variants" world's equivalent formats leave 0.12–0.15
TEMPLATE_ENTROPY_FLOOR = 0.1
#: the output-layer flip excess's manipulation check: the cross-rollout term must outweigh
#: the own rollout's for at least this share of the scored tokens (0.91–0.93 measured at root
#: seeds 0–3 with the chapter's defaults; 0 in the isolated control by construction)
COUPLING_DOMINANCE_FLOOR = 0.5
#: the label-permutation claims' manipulation check: Cohen's κ of the labels the statistic
#: reads with the tokens' own (verdicts.label_agreement) above this on (1), not off (about 0)
LABEL_AGREEMENT_FLOOR = 0.5


def _label_check(labels: str, whose: str, permutation: str) -> dict:
    """The manipulation fields of a claim whose off control permutes ``labels``
    (:func:`~tokenbook.cancellation_hypothesis.verdicts.label_agreement`)."""
    return dict(manipulation=Expect.greater(LABEL_AGREEMENT_FLOOR),
                manipulation_what=(f"Cohen's κ of the {labels} the gap reads with the {whose} "
                                   f"own (verdicts.label_agreement) > {LABEL_AGREEMENT_FLOOR:g} "
                                   f"on, not off (the permutation {permutation} breaks them)"))


_TEMPLATE_CHECK = dict(
    manipulation=Expect.greater(TEMPLATE_ENTROPY_FLOOR), manipulation_on_only=True,
    manipulation_what=(f"mean template-token entropy before the update (nats) > "
                       f"{TEMPLATE_ENTROPY_FLOOR:g}: the template can move (on only: the off "
                       f"world permutes labels of the same tokens)"),
    balance_what="template share of the tokens (a label permutation keeps it)",
    balance_tolerance=0.0,
    known_answer_how=("the same statistic on the exact first-order Δs of the same two SGD "
                      "steps on the same batch, GRPO and positive-only: η ∇log π_j · (1/N) "
                      "Σ_k A_k ∇log π_k with each estimator's advantages "
                      "(dynamics.first_order_full; no step taken); off: the same permuted "
                      "labels"))


def claim_specs(*, sizes: Sequence[str] = (), probe_why: str = "",
                batching_why: Mapping[str, str] | None = None) -> list[ClaimSpec]:
    """The chapter's claims in the book's order.

    ``sizes``: labels of the size sweep (:func:`tokenbook.cancellation_hypothesis.experiments.policy_sizes`); each
    gets ``flip-excess@<size>`` and ``template-less-under-grpo@<size>``. ``probe_why``: when
    not empty, the peer-masking claim is *not testable* with this reason (the probe's power
    table asks for more targets than the run has). ``batching_why``: the reason, with the
    power numbers, that each batching claim (``query-preserved-helps``,
    ``reward-balanced-helps``) is not testable; missing: "no learning curves in this run".
    """
    batching_why = dict(batching_why or {})
    flip = dict(expect=Expect.greater(0.0), mechanism=MECHANISMS["flip"],
                known_answer_how=_FLIP_KNOWN,
                manipulation=Expect.greater(COUPLING_DOMINANCE_FLOOR),
                manipulation_what=(f"share of scored tokens whose cross-rollout first-order "
                                   f"term (full batch − own rollout alone, every parameter "
                                   f"moving) outweighs their own rollout's (verdicts."
                                   f"coupling_dominance) > {COUPLING_DOMINANCE_FLOOR:g} on; "
                                   f"the isolated control has none"),
                balance_what="loss tokens with A ≠ 0 scored (the same batch on and off)",
                balance_tolerance=0.0)
    specs = [
        ClaimSpec("flip-excess", _FLIP_CLAIM, f"{PAPER}, abstract; §3", _FLIP_STAT,
                  computed_by=seed_claims, **flip),
        ClaimSpec(FLIP_HEAD, _FLIP_HEAD_CLAIM, f"{PAPER}, abstract; §3", _FLIP_HEAD_STAT,
                  Expect.greater(0.0), computed_by=seed_claims,
                  mechanism=MECHANISMS["flip-head"], known_answer_how=_FLIP_HEAD_KNOWN,
                  manipulation=Expect.greater(COUPLING_DOMINANCE_FLOOR),
                  manipulation_what=(f"share of scored tokens whose cross-rollout first-order "
                                     f"term outweighs their own rollout's (verdicts."
                                     f"coupling_dominance) > {COUPLING_DOMINANCE_FLOOR:g} on; "
                                     f"the isolated control has none"),
                  balance_what="loss tokens with A ≠ 0 scored (the same batch on and off)",
                  balance_tolerance=0.0,
                  note="the full-model step's flip excess (flip-excess) is the same statistic "
                       "with every parameter moving; its own known answer says whether this "
                       "world plants it there"),
        ClaimSpec("coupling-identical-low-conf", "Coupling effects occur primarily between "
                  "identical tokens that are both predicted with low confidence",
                  f"{PAPER}, abstract; §4", "mean K by pair bucket", Expect.greater(0.0),
                  not_testable="for identical tokens φ ≈ (1 − p_j)(1 − p_k) by the algebra of "
                  "the softmax gradient, so the bucket ordering is fixed by construction; the "
                  "causal test is the peer-masking probe"),
        ClaimSpec("peer-masking-same-high-entropy", "Masking same-token, high-entropy peers "
                  "changes a target's update most (the authors' probe hypothesis)",
                  "authors' causal probe (code, §2.3 of the notes)",
                  "mean over targets of mean |τ| (same token, high entropy) − max over the "
                  "other token × entropy buckets (nats)", Expect.greater(0.0),
                  computed_by=seed_claims, mechanism=MECHANISMS["probe"],
                  not_testable=probe_why,
                  **_label_check("buckets", "peer sets'", "within target"),
                  balance_what="share of random peer sets in the same-token, high-entropy "
                               "bucket (a permutation within target keeps it)",
                  balance_tolerance=0.0,
                  known_answer_how=("the same statistic on each probed set's τ to first "
                                    "order in the step, η ∇log π_t · [g/N − (g − g_S)/(N − m)] "
                                    "with g = Σ_k A_k ∇log π_k over the loss tokens and g_S "
                                    "over the m masked peers (the softmax-gradient algebra, "
                                    "no step taken: dynamics.peer_masking_probe's "
                                    "tau_first_order); off: the same permuted buckets"),
                  note="random sets only (the top-scored set shown apart); the softmax algebra "
                       "predicts the sign for identical low-confidence tokens"),
        ClaimSpec("template-less-under-grpo", _TEMPLATE_CLAIM,
                  f"{PAPER}, abstract (evidence 1)", _TEMPLATE_STAT, Expect.less(0.0),
                  computed_by=seed_claims, mechanism=MECHANISMS["template"],
                  note="template tokens' mean p and entropy before the update are described "
                       "in the seed table (describe:template-mean-p, describe:template-entropy)",
                  **_TEMPLATE_CHECK),
        ClaimSpec("boosted-higher-value", "Tokens boosted by critic-free RL consistently "
                  "demonstrate higher value than suppressed tokens, regardless of whether they "
                  "originate from positive or negative rollouts",
                  f"{PAPER}, abstract (evidence 2)",
                  "min over rollout signs of mean MC value boosted − suppressed",
                  Expect.greater(0.0), computed_by=seed_claims, mechanism=MECHANISMS["value"],
                  **_label_check("boosted/suppressed labels", "tokens'",
                                 "within rollout sign"),
                  balance_what="share of boosted among the valued tokens, mean over rollout "
                               "signs (a permutation within sign keeps it)",
                  balance_tolerance=0.0,
                  known_answer_how=("the same statistic over every token of the batch with "
                                    "the generator's value, 1 where the response through the "
                                    "token still starts one of the world's solutions of its "
                                    "problem (worlds.arithmetic.on_solution_path), and the "
                                    "direction from the sign of the exact first-order Δ "
                                    "(value.oracle_values; no sampling, no step); off: "
                                    "directions permuted within rollout sign. Our reading: a "
                                    "partial solution's value is whether it can still be "
                                    "completed correctly; the policy's exact success "
                                    "probability (value.exact_values) is out of reach at "
                                    "32 new tokens"),
                  note="our reading: value = MC success rate of continuations; value_per_cell "
                       "tokens per cell (≥ 120 for a 0.1 gap at the measured spread)"),
        ClaimSpec("query-preserved-helps", "Query-preserved mini-batching improves RLVR "
                  "training", f"{PAPER}, abstract (intervention 1)",
                  "paired AUC difference, query-preserved − verl's default seqlen-balanced "
                  "order (accuracy)", Expect.greater(0.0),
                  not_testable=batching_why.get("query-preserved-helps",
                                                "no learning curves in this run")),
        ClaimSpec("reward-balanced-helps", "Reward-balanced batching improves RLVR training",
                  f"{PAPER}, abstract (intervention 2)",
                  "paired AUC difference, reward-balanced − query-preserved (accuracy)",
                  Expect.greater(0.0),
                  not_testable=batching_why.get("reward-balanced-helps",
                                                "no learning curves in this run")),
    ]
    for size in sizes:
        specs.append(ClaimSpec(
            f"flip-excess@{size}", _FLIP_CLAIM + " — at every policy size (our reading of "
            "'across multiple model scales')", f"{PAPER}, abstract; §3", _FLIP_STAT,
            computed_by=scale_sweep, note=f"policy {size}", **flip))
    for size in sizes:
        specs.append(ClaimSpec(
            f"template-less-under-grpo@{size}", _TEMPLATE_CLAIM + ", at every policy size "
            "(our reading)", f"{PAPER}, abstract (evidence 1)", _TEMPLATE_STAT,
            Expect.less(0.0), computed_by=scale_sweep, mechanism=MECHANISMS["template"],
            note=f"policy {size}", **_TEMPLATE_CHECK))
    return specs


def size_table(sizes: pd.DataFrame) -> pd.DataFrame:
    """The size sweep's rows as a seed table whose claim ids carry the size
    (``flip-excess@32×2``, ``known:flip-excess@32×2``), for :func:`tokenbook.claims.judge_claims`."""
    cid = sizes["claim_id"].astype(str) + "@" + sizes["size"].astype(str)
    return sizes.assign(claim_id=cid)[["seed", "mechanism", "claim_id", "value"]]


def _batching_why(summary: pd.DataFrame, power: pd.DataFrame, condition: str,
                  reference: str, n_seeds: int, rl_steps: int) -> str:
    s, p = summary.loc[condition], power.loc[condition]
    return (f"mean AUC difference {condition} − {reference} {s['auc_diff']:+.3f} (95% CI "
            f"{s['diff_lo']:+.3f} to {s['diff_hi']:+.3f}) over {n_seeds} seeds × {rl_steps} "
            f"steps; these seeds detect only |Δ| ≥ {p['mde_now']:.3f}, a 2-point gain needs "
            f"{p['seeds_needed']:.0f} seeds")


def tiny_claims(sweep: pd.DataFrame, sizes: pd.DataFrame | None = None, *,
                probe_power: pd.DataFrame | None = None,
                batching: Mapping[str, tuple[pd.DataFrame, pd.DataFrame, str]] | None = None,
                n_seeds: int | None = None, rl_steps: int | None = None) -> list[Claim]:
    """The tiny-scale claims of the chapter.

    ``sweep``: :func:`~tokenbook.cancellation_hypothesis.experiments.run_seeds`'s table (with the
    ``known:flip-excess`` rows); ``sizes``: :func:`~tokenbook.cancellation_hypothesis.experiments.scale_sweep`'s
    (None: no size claims). ``probe_power``: :func:`tokenbook.cancellation_hypothesis.verdicts.probe_power`'s
    table: the peer-masking claim is judged when its ``same/high gap`` row has at least the
    targets it needs (``n_now ≥ n_needed``), else not testable with both numbers.
    ``batching``: ``{claim_id: (curve_summary indexed by condition, batching_power indexed by
    condition, reference condition)}`` for the two batching claims (not testable: the power
    numbers say why). ``n_seeds``/``rl_steps`` name the learning curves' size in the reasons.
    """
    probe_why = ""
    if probe_power is not None:
        gap = probe_power.set_index("name").reindex(["same/high gap"]).iloc[0]
        need, now = gap["n_needed"], gap["n_now"]
        if not (np.isfinite(need) and np.isfinite(now)) or need > now:
            probe_why = (f"the pooled per-target contrast needs {need:.0f} targets for 80% "
                         f"power (its spread and mean measured here), {now:.0f} are probed; "
                         f"beyond the chapter's budget at this scale")
    conditions = {"query-preserved-helps": "query-preserved",
                  "reward-balanced-helps": "reward-balanced"}
    why = {cid: _batching_why(summary, power, conditions[cid], ref, n_seeds or 0,
                              rl_steps or 0)
           for cid, (summary, power, ref) in (batching or {}).items()}
    labels = list(pd.unique(sizes["size"])) if sizes is not None else []
    table = sweep[["seed", "mechanism", "claim_id", "value"]]
    if sizes is not None:
        table = pd.concat([table, size_table(sizes)], ignore_index=True)
    return judge_claims(claim_specs(sizes=labels, probe_why=probe_why, batching_why=why),
                        table)
