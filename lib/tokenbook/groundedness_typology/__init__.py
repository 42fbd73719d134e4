"""The groundedness chapter (Haley, Goldwater & Ponti, NAACL 2025): a typology of groundedness.

* :mod:`~tokenbook.groundedness_typology.measures` — groundedness of words and the word-class
  analyses (class summaries, pairwise tests, lexical vs functional, the cline).
* :mod:`~tokenbook.groundedness_typology.experiments` — the chapter's experiments, one call
  each.
* :mod:`~tokenbook.groundedness_typology.claims` — its claim specs and tiny-scale verdicts.
* :mod:`~tokenbook.groundedness_typology.figures` — its figures.
* :mod:`~tokenbook.groundedness_typology.exercises` — the exercise page's answer checks and toy
  data.

The tiny world, models and word tables it shares with the UID chapter live in
:mod:`tokenbook.grounded`.
"""
