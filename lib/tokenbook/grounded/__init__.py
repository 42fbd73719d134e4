"""What the two grounded chapters (UID, groundedness) share.

* :mod:`~tokenbook.grounded.tiny` — the tiny setting: one root seed's world, captioner + text
  LM, and scored word tables, mechanism on and off.
* :mod:`~tokenbook.grounded.tables` — word-surprisal pivot tables of captions and story
  sentences (s_U, s_P, s_D, s_PD; nats), for tiny models and the real checkpoints alike.
"""
