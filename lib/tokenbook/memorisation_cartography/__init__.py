"""tokenbook.memorisation_cartography: counterfactual memorisation maps (Dankers, Titov & Hupkes 2023).

Pipeline (each a module): ``estimator`` (subset masks, TM/GS/CM with standard errors, stability,
AUROC), ``ensemble`` (workspaces, Dask fan-out with atomic per-model score files and resume),
``signals`` (training dynamics of one full-data run), ``features`` (surface features),
``predict`` (the MLP and permutation importance), ``removal`` (retraining without a map region),
``regions`` (the §6.1 removal grid and §6.2 specialised corpora), ``mapfeatures`` (feature
and map-agreement analyses), ``crosslingual`` (correlations
of the maps across target languages and cross-lingual predictor transfer), ``experiments`` (the
chapter's steps), ``checks`` (per-seed manipulation checks and known answers), ``claims`` (the
claim specs), ``figures``, ``exercises`` (the exercise page's answer checks and toy data).
"""

from tokenbook.memorisation_cartography.estimator import (cm_stability,
                                                          counterfactual_memorisation,
                                                          map_regions, phenomenon_auroc,
                                                          subset_masks)

__all__ = ["subset_masks", "counterfactual_memorisation", "cm_stability", "map_regions",
           "phenomenon_auroc"]
