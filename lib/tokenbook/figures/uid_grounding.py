"""Figures of the UID chapter (Gay et al. 2026): ``plot_*`` functions on the library's tables.

The measure-level plots are drawn by :mod:`tokenbook.uid` (re-exported here so the chapter
takes every figure from one module); :func:`plot_seed_statistics` shows the tiny-scale
verdicts' per-seed statistics with the mechanism on and off (seaborn).
"""

from __future__ import annotations

from ..uid import (plot_boundary_jumps, plot_language_scatter, plot_measure_densities,
                   plot_pos_decomposition, plot_position_profile, plot_reduction_densities,
                   plot_story_conditions)
from ._seeds import plot_seed_statistics

__all__ = ["plot_language_scatter", "plot_measure_densities", "plot_pos_decomposition",
           "plot_story_conditions", "plot_position_profile", "plot_boundary_jumps",
           "plot_reduction_densities", "plot_seed_statistics"]
