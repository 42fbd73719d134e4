"""Figures of the groundedness chapter (Haley et al. 2025): ``plot_*`` functions.

Class violins, class means, the agreement heatmap and types against a norm are drawn by
:mod:`tokenbook.grounding` (re-exported here); :func:`plot_seed_statistics` shows the
tiny-scale verdicts' per-seed statistics with the mechanism on and off (seaborn).
"""

from __future__ import annotations

from ..grounding import (plot_agreement, plot_class_means, plot_class_violins,
                         plot_types_vs_norm)
from ._seeds import plot_seed_statistics

__all__ = ["plot_class_violins", "plot_class_means", "plot_agreement", "plot_types_vs_norm",
           "plot_seed_statistics"]
