"""The book machinery: running chapters, building and checking pages, editing editions.

* :mod:`~tokenbook.book.runner` — discover chapters, validate parameters, execute a chapter
  into a run folder (papermill, watched by :mod:`~tokenbook.book.supervise`).
* :mod:`~tokenbook.book.cli` — the ``tokenbook`` command; :mod:`~tokenbook.book.paramtypes` —
  the types of the chapters' parameters; :mod:`~tokenbook.book.interactive` — run folders for
  chapters executed outside the runner.
* :mod:`~tokenbook.book.build` — build the book (a Sphinx extension too);
  :mod:`~tokenbook.book.pages` — what a page shows; :mod:`~tokenbook.book.pagecheck` and
  :mod:`~tokenbook.book.nbcheck` — checks of the built pages; :mod:`~tokenbook.book.ipynb` —
  the chapters' ``.ipynb`` twins; :mod:`~tokenbook.book.notebooks` — every twin in sync
  (``make notebooks``); :mod:`~tokenbook.book.binder` — Binder's requirements.
* :mod:`~tokenbook.book.costs` — what each page costs; :mod:`~tokenbook.book.agreement` — the
  tiny verdicts re-judged on held-out root seeds; :mod:`~tokenbook.book.exercises` — exercise
  checks and the student edition.

The science never imports this package; it imports the science.
"""
