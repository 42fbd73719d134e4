"""Figures, one module per chapter, apart from the measures they draw (as scikit-learn keeps
its ``*Display`` objects apart from its estimators).

Each module has ``plot_*`` functions that take the library's tidy tables and return a
matplotlib Figure drawn with seaborn in the book's style (:mod:`tokenbook.plotting`).
"""
