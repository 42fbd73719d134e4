"""tokenbook.rl — critic-free RL and its token-level dynamics (the cancellation chapter).

* :mod:`~tokenbook.rl.grpo` — ``GRPOConfig``, ``advantages``, ``policy_loss``, ``collect``,
  ``update``, ``train``, ``evaluate`` (a readable GRPO loop with PSR / posonly baselines).
* :mod:`~tokenbook.rl.batching` — ``minibatch_indices`` (prompt / round-robin / random orders)
  and ``RewardBalancedBuffer``.
* :mod:`~tokenbook.rl.dynamics` — the token dynamics table, flip ratios, φ coupling, the
  first-order prediction, the peer-masking probe, update-mass shares.
* :mod:`~tokenbook.rl.gradients` — gradient dumps of the positive- and negative-advantage
  groups and their cancellation on shared tokens.
* :mod:`~tokenbook.rl.coupling` — coupling by pair bucket with prompt-clustered CIs, the
  anti-coupling of different low-confidence tokens included.
* :mod:`~tokenbook.rl.value` — Monte-Carlo token values.
* :mod:`~tokenbook.rl.experiments` — the chapter's setups, learning curves and summaries.
"""
