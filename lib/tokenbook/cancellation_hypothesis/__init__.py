"""tokenbook.cancellation_hypothesis — critic-free RL and its token-level dynamics (the cancellation chapter).

* :mod:`~tokenbook.cancellation_hypothesis.grpo` — ``GRPOConfig``, ``advantages``, ``policy_loss``, ``collect``,
  ``update``, ``train``, ``evaluate`` (a readable GRPO loop with PSR / posonly baselines).
* :mod:`~tokenbook.cancellation_hypothesis.batching` — ``minibatch_indices`` (prompt / round-robin / random orders)
  and ``RewardBalancedBuffer``.
* :mod:`~tokenbook.cancellation_hypothesis.dynamics` — the token dynamics table, flip ratios, φ coupling, the
  first-order prediction, the peer-masking probe, update-mass shares.
* :mod:`~tokenbook.cancellation_hypothesis.gradients` — gradient dumps of the positive- and negative-advantage
  groups and their cancellation on shared tokens.
* :mod:`~tokenbook.cancellation_hypothesis.coupling` — coupling by pair bucket with prompt-clustered CIs, the
  anti-coupling of different low-confidence tokens included.
* :mod:`~tokenbook.cancellation_hypothesis.value` — Monte-Carlo token values.
* :mod:`~tokenbook.cancellation_hypothesis.experiments` — the chapter's setups, learning curves and summaries.
* :mod:`~tokenbook.cancellation_hypothesis.verdicts` — the per-seed statistics of the claims and their power.
* :mod:`~tokenbook.cancellation_hypothesis.claims` — the claim specs and tiny-scale verdicts.
* :mod:`~tokenbook.cancellation_hypothesis.figures` — its figures.
* :mod:`~tokenbook.cancellation_hypothesis.exercises` — the exercise page's answer checks and toy data.
"""
