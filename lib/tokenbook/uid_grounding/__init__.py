"""The UID chapter (Gay, Haley, Giulianelli & Ponti, EACL 2026): UID under grounding.

* :mod:`~tokenbook.uid_grounding.measures` — UID measures over word-surprisal profiles
  (UID_v, UID_lv, CV; positive reductions, onset enrichment), per-unit analyses.
* :mod:`~tokenbook.uid_grounding.experiments` — the chapter's tiny-scale experiments, one
  call each.
* :mod:`~tokenbook.uid_grounding.claims` — its claim specs and tiny-scale verdicts.
* :mod:`~tokenbook.uid_grounding.figures` — its figures.
* :mod:`~tokenbook.uid_grounding.exercises` — the exercise page's answer checks and toy data.

The tiny world, models and word tables it shares with the groundedness chapter live in
:mod:`tokenbook.grounded`.
"""
