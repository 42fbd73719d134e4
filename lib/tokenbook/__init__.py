"""tokenbook: the shared library of *Token by Token*, an executable reproducibility book.

Pipeline shape shared by every chapter::

    world or real data -> models -> scores -> measures -> statistics -> figures -> claims

Three kinds of rooms. Who may import whom: the shared science imports neither a chapter nor
the book; a chapter imports only the shared science; the book imports anything. Every tokenbook
import sits at the top of its module, and there is no import circle
(``tests/foundation/test_foundation_imports.py`` checks all three, with no exception).

**The shared science** — what every chapter stands on: ``seeds`` (one way to derive seeds),
``validation`` (input checks), ``cache`` (content-addressed tables and model folders),
``run_folder`` (where a run's figures and claims are written), ``answers`` (exercise-answer
checks: results and comparisons),
``parallel`` (Dask fan-outs), ``provenance``, ``stats`` (tests, FDR, effect sizes, bootstrap,
power), ``plotting`` and ``seed_figures`` (the book's figure style and its per-seed figure),
``verdicts`` / ``claims`` / ``robustness`` / ``minsizes`` / ``scorecard`` (claims, the tiny
verdict rule, released and paper minimum sizes, claims as a page shows them), ``scoring``
(per-token log-probabilities, one engine for all chapters), ``worlds`` (tiny worlds with known
answers), ``models`` (tiny models of the real architectures), ``data`` (real loaders),
``grounded`` (what the two grounded chapters share: the tiny setting and the word-surprisal
tables).

**One package per chapter**, named as the chapter's notebook is:
``uid_grounding`` (Gay et al. 2026), ``groundedness_typology`` (Haley et al. 2025),
``memorisation_cartography`` (Dankers et al. 2023), ``cancellation_hypothesis`` (Cheng et al.
2026) — each holding that paper's measures, experiments, claim specs (``claims``), figures and
exercise checks (``exercises``).

**The book machinery** — :mod:`tokenbook.book`: running chapters into run folders, the command
line, building, checking and editing pages, the exercise editions.
"""

__version__ = "0.1.0"
