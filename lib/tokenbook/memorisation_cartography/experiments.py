"""The memorisation chapter's experiments, one call each (the notebook stays thin).

* :func:`make_corpus` — the training corpus of one root seed: the tiny translation world (with
  its planted phenomena and their controls) or a real parallel corpus (paper scale).
* :func:`build` — every model the chapter needs, for a list of root seeds, in two flat Dask
  fan-outs through one context-managed client: per seed the CM ensemble (``n_models`` models on
  subsets) and the full-data run whose training dynamics give the signals; then the §6.1
  retrainings without the memorised region and without random pairs. Every model writes its
  output atomically into a workspace keyed by the library (:func:`tokenbook.cache.cache_key` of
  the corpus and design), so a killed run resumes and every claim shares the same models.
* :func:`seed_claims` — one root seed's statistic for every tiny-scale claim, with the
  mechanism ``on`` or ``off`` (a planted control or a null that needs no retraining), for
  :func:`tokenbook.robustness.over_seeds`.
* :func:`run_seeds` — all of the above for the chapter: models for every seed, then the per-seed
  table (cached by seed, mechanism and library source hash).

Seeds. A root seed ``s`` derives the world (``derive_seed(s, "world")``), the subset masks
(``"subsets"``), the model initialisations (``"models"``) and the removal selection
(``"removal"``); the analysis draws (bootstrap, predictor splits, nulls) come from
``derive_seed(boot_seed, "analysis", s)``. ``boot_seed`` is not part of any model's cache key,
so changing it trains nothing.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field
from dataclasses import replace
from functools import partial
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np
import pandas as pd

from tokenbook.cache import cache_key, cache_root, without_later_defaults
from tokenbook.claims import BALANCE_PREFIX, KNOWN_PREFIX, MANIPULATION_PREFIX, qualified_name
from tokenbook.data.parallel import load_corpus
from tokenbook.memorisation_cartography.checks import (NOISY_KINDS, crosslingual_checks,
                                                       oracle_map, oracle_scores, seed_checks,
                                                       world_lexicon)
from tokenbook.memorisation_cartography.crosslingual import (cross_language_correlations,
                                                             cross_lingual_transfer,
                                                             mean_phenomenon_agreement)
from tokenbook.memorisation_cartography.ensemble import (Job, Workspace, ensemble_jobs, fan_out,
                                                         load_scores)
from tokenbook.memorisation_cartography.estimator import (cm_stability,
                                                          counterfactual_memorisation,
                                                          phenomenon_auroc, pivot_scores,
                                                          split_half_spearman, subset_masks)
from tokenbook.memorisation_cartography.features import FEATURES, surface_features
from tokenbook.memorisation_cartography.mapfeatures import map_agreement
from tokenbook.memorisation_cartography.predict import feature_correlations, fit_map_predictor
from tokenbook.memorisation_cartography.regions import (POLYGONS, grid_centres, in_polygon,
                                                        paired_differences, permute_positions,
                                                        predict_map, seed_differences,
                                                        specialised_corpus)
from tokenbook.memorisation_cartography.removal import (source_token_counts, load_removal_results,
                                                        perturb_sources, region_centres,
                                                        removal_jobs, select_random,
                                                        select_region)
from tokenbook.memorisation_cartography.signals import (SIGNALS, compute_signals,
                                                        train_with_dynamics)
from tokenbook.parallel import dask_client
from tokenbook.robustness import over_seeds, values_by_claim
from tokenbook.seeds import derive_seed
from tokenbook.stats import bootstrap_ci, spearman_rho
from tokenbook.validation import check_choice, check_positive_int, check_share, check_table
from tokenbook.worlds.translation import make_multiparallel_world, make_translation_world

#: the version of the models' training recipe in the workspace keys (bump to retrain)
ENSEMBLE_VERSION = "memcart-v3"   # v3: member seeds derive_seed(model seed, "model", i)

#: the tiny world: small lexicon, planted phenomena and the literal-idiom control
TINY_WORLD = dict(n_pairs=300, n_test=60, n_nouns=20, n_verbs=8, n_adjectives=6,
                  idiom_rate=0.06, idiom_literal_rate=0.06, noise_rate=0.06, rare_rate=0.05,
                  alternative_rate=0.0, duplicate_rate=0.04, test_idiom_share=0.3)

CLAIM_IDS = ("idiom-high-cm", "rare-high-cm", "noisy-unlearnt", "cm-stable",
             "features-predict-cm", "signals-predict-cm", "signals-add",
             "removal-memorised-logprob", "removal-memorised-bleu")


# --------------------------------------------------------------------------- corpus
@dataclass
class Corpus:
    """Training pairs (``pair_id, source, target, phenomenon, group_id``), test pairs
    (``source, target``, tiny: ``uses_idiom``) and the key that identifies them."""

    pairs: pd.DataFrame
    test: pd.DataFrame
    key: dict
    labelled: bool


def make_corpus(seed: int = 0, *, corpus: Any = None, test_corpus: Any = None,
                world: dict | None = None) -> Corpus:
    """The corpus of root seed ``seed``: the tiny world (``world`` overrides
    :data:`TINY_WORLD`), or, with ``corpus``/``test_corpus`` specs for
    :func:`tokenbook.data.parallel.load_corpus`, a real corpus (no planted labels)."""
    if corpus is None:
        params = {**TINY_WORLD, **(world or {})}
        w = make_translation_world(seed=derive_seed(seed, "world"), **params)
        return Corpus(w.pairs, w.test, {"world": w.params}, True)

    if test_corpus is None:
        raise ValueError("a real corpus needs test_corpus too (e.g. FLORES dev); pass its spec")
    pairs = load_corpus(corpus)
    pairs["phenomenon"] = "unlabelled"
    pairs["group_id"] = pairs.groupby(["source", "target"], sort=False).ngroup()
    test = load_corpus(test_corpus)[["source", "target"]]
    return Corpus(pairs, test, {"corpus": corpus, "test_corpus": test_corpus,
                                "n_pairs": len(pairs)}, False)


# --------------------------------------------------------------------------- design
#: how pairs are assigned to the ensemble's training subsets (see :class:`Design`)
ASSIGNMENTS = ("grouped", "line")


@dataclass
class Design:
    """How the models are trained (every field enters the workspace key)."""

    n_models: int = 8
    design: str = "balanced"
    subset_ratio: float = 0.5
    vocab_size: int = 250
    preset: str = "tiny"
    epochs: int = 20
    dynamics_epochs: int = 20
    removal_epochs: int = 20
    batch_size: int = 16
    learning_rate: float = 3e-3
    removal_token_share: float = 0.08
    bleu: bool = False
    #: subset membership per duplicate group (``grouped``: all copies in or out together, the
    #: book's default) or per corpus line (``line``: the authors' split, copies may fall on
    #: both sides of a model; see :func:`duplicate_leakage`)
    assignment: str = "grouped"

    def __post_init__(self) -> None:
        check_positive_int(self.n_models, "n_models", minimum=2)
        check_choice(self.design, "design", ("random", "balanced"))
        check_choice(self.assignment, "assignment", ASSIGNMENTS)
        check_share(self.subset_ratio, "subset_ratio", open_low=True)
        check_share(self.removal_token_share, "removal_token_share", open_low=True)
        for name in ("vocab_size", "epochs", "dynamics_epochs", "removal_epochs", "batch_size"):
            check_positive_int(getattr(self, name), name)

    def train_kwargs(self, which: str = "ensemble") -> dict:
        epochs = {"ensemble": self.epochs, "dynamics": self.dynamics_epochs,
                  "removal": self.removal_epochs}[which]
        return dict(epochs=epochs, batch_size=self.batch_size, lr=self.learning_rate)


@dataclass
class Artefacts:
    """The trained outputs of one root seed (paths into its workspace)."""

    seed: int
    corpus: Corpus
    design: Design
    ws: Workspace
    dynamics_path: Path
    removal_paths: dict = field(default_factory=dict)

    def scores(self) -> pd.DataFrame:
        return load_scores(self.ws)

    def cm(self) -> pd.DataFrame:
        """TM, GS, CM per pair, with the corpus columns."""
        return counterfactual_memorisation(self.scores()).merge(self.corpus.pairs, on="pair_id")

    def dynamics(self) -> pd.DataFrame:
        return pd.read_parquet(self.dynamics_path)

    def removal(self) -> pd.DataFrame:
        return load_removal_results(list(self.removal_paths.values()))


def prepare(seed: int, corpus: Corpus, design: Design) -> tuple[Artefacts, list[Job]]:
    """Create (or reopen) the workspace of root seed ``seed``; return its artefacts and the
    jobs still to run for the ensemble and the dynamics run."""
    # the default assignment stays out of the key (workspaces made before it existed still match)
    design_key = {k: v for k, v in asdict(design).items()
                  if k not in ("removal_epochs", "removal_token_share")}
    params = dict(version=ENSEMBLE_VERSION, corpus=corpus.key, seed=int(seed),
                  design=without_later_defaults(design_key, {"assignment": "grouped"}))
    ws = Workspace.create(cache_root() / cache_key("memorisation-ws", params),
                          corpus.pairs["source"].tolist(), corpus.pairs["target"].tolist(),
                          vocab_size=design.vocab_size, params=params)
    groups = corpus.pairs["group_id"].to_numpy() if design.assignment == "grouped" else None
    masks = subset_masks(len(corpus.pairs), design.n_models, design=design.design,
                         ratio=design.subset_ratio, groups=groups,
                         seed=derive_seed(seed, "subsets"))
    ws.set_masks(masks)
    model_seed = derive_seed(seed, "models")
    jobs = ensemble_jobs(ws, preset=design.preset, train_kwargs=design.train_kwargs(),
                         seed=model_seed, bleu=design.bleu)
    dyn_kwargs = design.train_kwargs("dynamics")
    dyn_path = ws.root / f"dynamics-{cache_key('dyn', dyn_kwargs)}.parquet"
    jobs.append(Job(f"dynamics-{seed}", train_with_dynamics,
                    dict(root=str(ws.root), out_path=str(dyn_path), preset=design.preset,
                         train_kwargs=dyn_kwargs, seed=model_seed), dyn_path))
    for j in jobs:
        j.name = f"s{seed}-{j.name}"
    return Artefacts(int(seed), corpus, design, ws, dyn_path), jobs


def _removal_selections(art: Artefacts, cm: pd.DataFrame,
                        coordinates: Mapping[str, tuple[float, float]]) -> dict[str, np.ndarray]:
    """pair_ids removed around each named (TM, GS) coordinate of the map ``cm`` (nearest
    first, up to the design's ``removal_token_share`` of source tokens, duplicates together)
    and by the ``random`` control with the same budget, all from the root seed's removal
    stream."""
    pairs = art.corpus.pairs
    sources = pairs["source"].tolist()
    groups = pairs["group_id"].to_numpy()
    budget = int(art.design.removal_token_share * sum(len(s.split()) for s in sources))
    rseed = derive_seed(art.seed, "removal")
    conds = {name: select_region(cm, sources, coordinate=xy, token_budget=budget,
                                 groups=groups, seed=rseed)
             for name, xy in coordinates.items()}
    conds["random"] = select_random(len(pairs), sources, token_budget=budget, groups=groups,
                                    seed=rseed)
    return conds


def removal_conditions(art: Artefacts) -> dict[str, np.ndarray]:
    """pair_ids removed per condition: ``memorised`` (nearest to the centre of the top 5% CM
    pairs on the map, §6.1) and ``random``, with the same source-token budget."""
    cm = art.cm()
    return _removal_selections(art, cm, {"memorised": region_centres(cm, share=0.05)
                                         ["memorised"]})


def removal_jobs_for(art: Artefacts, conditions: dict[str, np.ndarray]) -> list[Job]:
    """One retraining per condition (the model seed of the root seed), outputs keyed by the
    removed ids and training recipe."""
    test = art.corpus.test
    rm_kwargs = art.design.train_kwargs("removal")
    tag = cache_key("removal", dict(ids={k: [int(i) for i in v] for k, v in conditions.items()},
                                    train=rm_kwargs, test=len(test)))
    perturbed = perturb_sources(test["source"].tolist(), seed=derive_seed(art.seed, "perturb"))
    regular = (~test["uses_idiom"].to_numpy(bool)).tolist() if "uses_idiom" in test else None
    jobs = removal_jobs(art.ws, conditions, [derive_seed(art.seed, "removal") % 100_000],
                        test_sources=test["source"], test_targets=test["target"],
                        perturbed_sources=perturbed, tag=tag, preset=art.design.preset,
                        train_kwargs=rm_kwargs, regular_test=regular)
    for j in jobs:
        j.name = f"s{art.seed}-{j.name}"
        art.removal_paths[j.kwargs["condition"]] = j.out_path
    return jobs


def build(seeds: Sequence[int], design: Design, *, corpus_fn=make_corpus, client=None,
          removal: bool = True, progress: bool = True) -> dict[int, Artefacts]:
    """Train (or find in the cache) every model of every root seed; return their artefacts.

    Two flat fan-outs over ``client`` (None: in this process): all ensembles and dynamics runs,
    then all removal retrainings (they need the map)."""
    arts, jobs = {}, []
    for s in seeds:
        arts[int(s)], j = prepare(int(s), corpus_fn(int(s)), design)
        jobs += j
    fan_out(jobs, client=client, n_workers=0, progress=progress, desc="ensembles")
    if removal:
        rjobs = [j for a in arts.values() for j in removal_jobs_for(a, removal_conditions(a))]
        fan_out(rjobs, client=client, n_workers=0, progress=progress, desc="removal")
    return arts


#: the rare-word claim's nulls: ``world`` — the rare-but-derivable off world (its own
#: ensemble; :func:`rare_off_artefacts`), ``shuffle`` — the rare-word labels permuted
RARE_NULLS = ("world", "shuffle")


def rare_off_artefacts(seed: int, design: Design, world: dict | None = None
                       ) -> tuple[Artefacts, list[Job]]:
    """The off world of ``rare-high-cm`` for root seed ``seed``: the same world with
    ``rare_derivable=True`` (every pair but the rare-word ones identical; the rare words are
    hyphenated compounds of ordinary nouns translated part by part), its ensemble only (no
    dynamics run, no removal): the artefacts and the ensemble jobs still to run."""
    corpus = make_corpus(seed, world={**(world or {}), "rare_derivable": True})
    art, jobs = prepare(seed, corpus, design)
    return art, [j for j in jobs if "cm-model-" in j.name]


# --------------------------------------------------------------------------- §6.1 grid, §6.2
#: tiny-scale claims judged on the region experiments (training seeds of the first root seed)
REGION_CLAIM_IDS = ("removal-grid-lowgs-logprob", "specialised-bleu-hal-bleu",
                    "specialised-logprob-logprob")

#: the §6.2 claims' polygon (:data:`~tokenbook.memorisation_cartography.regions.POLYGONS`)
SPECIALISED_POLYGON = {"specialised-bleu-hal-bleu": "bleu_hal",
                       "specialised-logprob-logprob": "log_probability"}

#: the region experiments' metrics: nats/token, BLEU points, share of adequate sentences
REGION_METRICS = ("test_logprob", "bleu", "hallucination_rate")


@dataclass
class RegionResults:
    """The §6.1 removal grid and the §6.2 specialised corpora of one or more root seeds.

    ``grid``: one row per (``condition``, ``seed``; ``root_seed`` the map's) — a grid cell (``cell``, its centre ``tm``,
    ``gs``) or the ``random`` control — with the test metrics (``test_logprob`` nats/token,
    ``bleu`` beam-search BLEU, ``bleu_greedy``, ``hallucination_rate``, their ``_regular``
    variants on the test sentences without idioms) and the removed pairs' mean true ``removed_tm``,
    ``removed_gs``, ``removed_cm``. ``grid_diff``: :func:`~tokenbook.memorisation_cartography.regions.paired_differences`
    of every cell to the control, with the cell centres. ``specialised`` / ``specialised_diff``:
    the same for the corpora (``condition`` = polygon name or ``random``). ``corpora``: per
    corpus its size, source tokens, share of tokens inside its polygon, mean predicted and true
    TM/GS/CM, per ``root_seed``. ``predictor``: the §6.2 MLP's held-out metrics per root
    seed. ``seconds``: wall time of the
    fan-out (0 when everything was cached); ``n_runs``: retrainings in it. ``kept``: per root
    seed, the pair_ids each §6.2 corpus keeps (``condition`` → sorted ids; the claims' known
    answers and manipulation checks read them).
    """

    grid: pd.DataFrame
    grid_diff: pd.DataFrame
    specialised: pd.DataFrame
    specialised_diff: pd.DataFrame
    corpora: pd.DataFrame
    predictor: pd.DataFrame
    seconds: float
    n_runs: int
    kept: dict[int, dict[str, np.ndarray]] = field(default_factory=dict)


def region_train_seeds(seed: int, n: int) -> list[int]:
    """The ``n`` model seeds of the region experiments of root seed ``seed`` (≥ 3 asked)."""
    check_positive_int(n, "n_train_seeds")
    return [derive_seed(seed, "region-train", k) % 100_000 for k in range(n)]


def grid_conditions(art: Artefacts, grid_size: int) -> tuple[dict[str, np.ndarray], pd.DataFrame]:
    """pair_ids removed per grid cell (nearest to its centre on the map, up to the design's
    ``removal_token_share`` of source tokens, duplicates together) and by the ``random``
    control (same budget); and the cells' table (:func:`~tokenbook.memorisation_cartography.regions.grid_centres`)."""
    cells = grid_centres(grid_size)
    conds = _removal_selections(art, art.cm(), {c: (t, g) for c, t, g in
                                                zip(cells["cell"], cells["tm"], cells["gs"])})
    return conds, cells


#: suffix of a §6.2 corpus selected on the permuted predicted map (the specialised claims' null)
PERMUTED = "_permuted"


def specialised_conditions(art: Artefacts, *, token_share: float, train_share: float = 0.2
                           ) -> tuple[dict[str, np.ndarray], pd.DataFrame, pd.DataFrame]:
    """The §6.2 corpora of one root seed, as the pair_ids each *keeps*: one per polygon of
    :data:`~tokenbook.memorisation_cartography.regions.POLYGONS` (pairs by MLP-predicted position, surface
    features only, the MLP fitted on ``train_share`` of the map), the same polygon on the
    predicted positions *permuted across pairs* (``<polygon>_permuted``: the claims' null
    control — selection by a map that says nothing about the pair), and ``random``, each with
    ``token_share`` of the corpus' source tokens. Returns (kept ids, corpus table, the MLP's
    held-out metrics). Selection, permutation and MLP seeds derive from the root seed (they
    decide what is trained), never from the analysis seed."""
    check_share(token_share, "specialised_token_share", open_low=True)
    pairs = art.corpus.pairs
    sources = pairs["source"].tolist()
    groups = pairs["group_id"].to_numpy()
    tok = source_token_counts(sources)
    budget = int(token_share * tok.sum())
    data = analysis_table(art)
    feats = [f for f in FEATURES if f in data.columns]
    sseed = derive_seed(art.seed, "specialised")
    pred, metrics = predict_map(data, feats, train_share=train_share, seed=sseed)
    keep, rows = {}, []
    table = pred.merge(data[["pair_id", "tm", "gs", "cm"]], on="pair_id")
    for name in POLYGONS:
        ids, info = specialised_corpus(pred, sources, polygon=name, token_budget=budget,
                                       groups=groups, seed=sseed)
        keep[name] = ids
        rows.append(dict(condition=name, **info))
    permuted = permute_positions(pred, seed=derive_seed(art.seed, "specialised", "permuted"))
    for name in POLYGONS:
        ids, info = specialised_corpus(permuted, sources, polygon=name, token_budget=budget,
                                       groups=groups, seed=sseed)
        keep[f"{name}{PERMUTED}"] = ids
        rows.append(dict(condition=f"{name}{PERMUTED}", **info))
    keep["random"] = select_random(len(pairs), sources, token_budget=budget, groups=groups,
                                   seed=sseed)
    rnd = keep["random"]
    rnd_inside = {n: float(tok[rnd][in_polygon(table.set_index("pair_id").loc[rnd, ["tm_pred",
                                                                                   "gs_pred"]],
                                                 v)].sum() / tok[rnd].sum())
                  for n, v in POLYGONS.items()}
    rows.append(dict(condition="random", inside_token_share=float("nan"), n_inside=0,
                     n_pairs=len(rnd), src_tokens=int(tok[rnd].sum()),
                     **{f"random_in_{n}": v for n, v in rnd_inside.items()}))
    corpora = pd.DataFrame(rows)
    t = table.set_index("pair_id")
    for col in ("tm_pred", "gs_pred", "tm", "gs", "cm"):
        corpora[f"mean_{col}"] = [float(t.loc[keep[c], col].mean()) for c in corpora["condition"]]
    return keep, corpora, metrics


def _region_jobs(art: Artefacts, removed: dict[str, np.ndarray], seeds: Sequence[int], *,
                 kind: str, num_beams: int) -> tuple[list[Job], dict[tuple[str, int], Path]]:
    """One retraining job per (condition, seed), each keyed on its own removed ids, recipe,
    test set and decoding, so a changed grid retrains only its new cells."""
    test = art.corpus.test
    rm_kwargs = art.design.train_kwargs("removal")
    perturbed = perturb_sources(test["source"].tolist(), seed=derive_seed(art.seed, "perturb"))
    regular = (~test["uses_idiom"].to_numpy(bool)).tolist() if "uses_idiom" in test else None
    jobs, paths = [], {}
    for name, ids in removed.items():
        tag = cache_key(kind, dict(ids=[int(i) for i in ids], train=rm_kwargs,
                                   test=[len(test), int(derive_seed(art.seed, "perturb"))],
                                   beams=int(num_beams), version=ENSEMBLE_VERSION))
        for j in removal_jobs(art.ws, {name: ids}, seeds, test_sources=test["source"],
                              test_targets=test["target"], perturbed_sources=perturbed,
                              tag=tag, preset=art.design.preset, train_kwargs=rm_kwargs,
                              regular_test=regular, num_beams=num_beams, details=True):
            j.name = f"s{art.seed}-{kind}-{j.name}"
            jobs.append(j)
            paths[(name, j.kwargs["seed"])] = j.out_path
    return jobs, paths


def region_experiments(arts: "Artefacts | Sequence[Artefacts]", *, grid_size: int = 3,
                       n_train_seeds: int = 1, specialised_token_share: float = 0.5,
                       num_beams: int = 5, scheduler_address: str | None = None,
                       n_workers: int = 2, progress: bool = True) -> RegionResults:
    """The §6.1 removal grid and the §6.2 specialised corpora on each root seed's own map.

    ``arts``: the artefacts of one root seed or several (each an independent replicate: its
    own world, ensemble, map and §6.2 predictor). Grid: ``grid_size``·(``grid_size`` + 1)/2
    cells (10: the paper's 55), each removing the pairs nearest its centre up to the design's
    ``removal_token_share`` of source tokens, plus random removal of the same budget.
    Specialised: one corpus per polygon of MLP-predicted positions and a random corpus, each
    ``specialised_token_share`` of the source tokens. Every condition is retrained with the
    design's removal recipe for each of ``n_train_seeds`` model seeds per root seed
    (:func:`region_train_seeds`) and evaluated on that root seed's test set (BLEU from
    ``num_beams``-beam search). The tables carry ``root_seed``; the seed-paired differences
    pair every condition with random removal at the same model seed. All retrainings go out in
    one Dask fan-out (``scheduler_address`` or a LocalCluster of ``n_workers``); each writes
    its record atomically into its workspace, so a killed run resumes and a rerun trains
    nothing.
    """
    arts = [arts] if isinstance(arts, Artefacts) else list(arts)
    if not arts:
        raise ValueError("region_experiments: give the artefacts of at least one root seed")
    check_positive_int(n_train_seeds, "n_train_seeds")
    check_positive_int(num_beams, "num_beams")
    plans, jobs = [], []
    for art in arts:
        seeds = region_train_seeds(art.seed, n_train_seeds)
        grid_removed, cells = grid_conditions(art, grid_size)
        spec_keep, corpora, predictor = specialised_conditions(
            art, token_share=specialised_token_share)
        all_ids = art.corpus.pairs["pair_id"].to_numpy()
        spec_removed = {k: np.setdiff1d(all_ids, v) for k, v in spec_keep.items()}
        gjobs, gpaths = _region_jobs(art, grid_removed, seeds, kind="grid", num_beams=num_beams)
        sjobs, spaths = _region_jobs(art, spec_removed, seeds, kind="specialised",
                                     num_beams=num_beams)
        jobs += gjobs + sjobs
        plans.append((art, grid_removed, cells, corpora, predictor, gpaths, spaths, spec_keep))
    todo = [j for j in jobs if not j.done()]
    t0 = time.perf_counter()
    fan_out(jobs, scheduler_address=scheduler_address, n_workers=n_workers,
            progress=progress, desc="region retrainings")
    seconds = time.perf_counter() - t0 if todo else 0.0

    grids, specs, all_corpora, predictors = [], [], [], []
    for art, grid_removed, cells, corpora, predictor, gpaths, spaths, _ in plans:
        cm = art.cm().set_index("pair_id")
        grid = load_removal_results([gpaths[k] for k in sorted(gpaths)])
        for col in ("tm", "gs", "cm"):
            means = {c: float(cm.loc[ids, col].mean()) for c, ids in grid_removed.items()}
            grid[f"removed_{col}"] = grid["condition"].map(means)
        grid = grid.merge(cells.rename(columns={"cell": "condition"})[["condition", "tm", "gs"]],
                          on="condition", how="left")
        grids.append(grid.assign(root_seed=art.seed))
        spec = load_removal_results([spaths[k] for k in sorted(spaths)])
        specs.append(spec.assign(root_seed=art.seed))
        all_corpora.append(corpora.assign(root_seed=art.seed))
        predictors.append(predictor.assign(root_seed=art.seed))
    grid, spec = pd.concat(grids, ignore_index=True), pd.concat(specs, ignore_index=True)
    for name, table in (("grid", grid), ("specialised", spec)):
        if table.duplicated(["condition", "seed"]).any():
            raise RuntimeError(f"region_experiments: two root seeds drew the same model seed in "
                               f"the {name} table; use other root seeds")
    cells = plans[0][2]
    grid_diff = paired_differences(grid, metrics=_metrics(grid)).merge(
        cells.rename(columns={"cell": "condition"})[["condition", "i", "j", "tm", "gs"]],
        on="condition", how="left")
    spec_diff = paired_differences(spec, metrics=_metrics(spec))
    return RegionResults(grid, grid_diff, spec, spec_diff,
                         pd.concat(all_corpora, ignore_index=True),
                         pd.concat(predictors, ignore_index=True), seconds, len(todo),
                         kept={p[0].seed: p[-1] for p in plans})


def _metrics(results: pd.DataFrame) -> list[str]:
    extra = [m for m in ("bleu_greedy", "test_logprob_regular", "bleu_regular")
             if m in results.columns]
    return list(REGION_METRICS) + extra


#: the grid cells of ``removal-grid-lowgs-logprob``: GS at most this (the log_probability band)
LOW_GS = 0.4


def region_claim_values(results: RegionResults, claim_id: str, *, low_gs: float = LOW_GS
                        ) -> dict[str, list[float]]:
    """``{"values_on": [...], "values_off": [...]}`` per training seed for one claim of
    :data:`REGION_CLAIM_IDS`.

    * ``removal-grid-lowgs-logprob``: mean over the grid cells with GS ≤ ``low_gs`` (the
      ``log_probability`` band) of Δ test log-probability (nats/token) vs random removal;
      *on*: the whole test set (30% of its sentences use a training idiom), *off*: its
      regular sentences only (nothing memorised is needed);
    * ``specialised-bleu-hal-bleu``: Δ BLEU, ``bleu_hal`` corpus − random corpus;
    * ``specialised-logprob-logprob``: Δ test log-probability, ``log_probability`` corpus −
      random corpus; for both, *on*: the corpus selected on the predicted map, *off*: the
      corpus the same polygon selects on the predicted positions permuted across pairs
      (``<polygon>_permuted`` of :func:`specialised_conditions`), same test set and metric.
    """
    def per_seed(table, conds, metric):
        seeds = [sorted(set(table.loc[table["condition"] == c, "seed"])
                        & set(table.loc[table["condition"] == "random", "seed"])) for c in conds]
        if any(s != seeds[0] for s in seeds):
            raise ValueError(f"the conditions {list(conds)} were not all run with the same seeds "
                             f"({dict(zip(conds, seeds))}); rerun region_experiments")
        vals = np.array([seed_differences(table, c, metric) for c in conds], dtype=float)
        return [float(v) for v in vals.mean(axis=0)]

    computed_by = qualified_name(region_experiments)

    def both(table, conds, metric):
        off = f"{metric}_regular" if f"{metric}_regular" in table.columns else None
        return {"values_on": per_seed(table, conds, metric),
                "values_off": per_seed(table, conds, off) if off else [],
                "computed_by": computed_by}

    if claim_id == "removal-grid-lowgs-logprob":
        g = results.grid
        cells = sorted(set(g.loc[g["gs"] <= low_gs + 1e-9, "condition"]))
        if not cells:
            raise ValueError(f"the grid has no cell with GS ≤ {low_gs}")
        return both(g, cells, "test_logprob")
    def selected(table, polygon, metric):
        off = f"{polygon}{PERMUTED}"
        return {"values_on": per_seed(table, [polygon], metric),
                "values_off": (per_seed(table, [off], metric)
                               if off in set(table["condition"]) else []),
                "computed_by": computed_by}

    if claim_id == "specialised-bleu-hal-bleu":
        return selected(results.specialised, SPECIALISED_POLYGON[claim_id], "bleu")
    if claim_id == "specialised-logprob-logprob":
        return selected(results.specialised, SPECIALISED_POLYGON[claim_id], "test_logprob")
    raise ValueError(f"unknown region claim {claim_id!r}; choose one of {REGION_CLAIM_IDS}")


# --------------------------------------------------------------------------- assignment
def duplicate_leakage(masks: np.ndarray, groups: Sequence[int]) -> np.ndarray:
    """Per pair, the share of the models holding it out that trained on another copy of it.

    ``masks``: bool (n_models, n_pairs) training membership; ``groups``: (n_pairs,) group ids
    (copies of a pair share one). A pair without copies, or one whose copies are always assigned
    together (the grouped design), scores 0; under the authors' line-level split a duplicate's
    held-out models often saw its twin, so its GS is measured on a model that learnt it.
    Returns float (n_pairs,), NaN where a pair is never held out."""
    masks = np.asarray(masks, dtype=bool)
    groups = np.asarray(groups)
    if masks.ndim != 2 or groups.shape != (masks.shape[1],):
        raise ValueError(f"duplicate_leakage: masks must be (n_models, n_pairs) and groups "
                         f"(n_pairs,), got {masks.shape} and {groups.shape}")
    _, group_of = np.unique(groups, return_inverse=True)
    # per model and group: how many copies are in training; minus the pair itself if it is in
    in_group = np.zeros((masks.shape[0], group_of.max() + 1), dtype=int)
    for m in range(masks.shape[0]):
        np.add.at(in_group[m], group_of, masks[m].astype(int))
    others_in = in_group[:, group_of] - masks.astype(int)
    held_out = ~masks
    n_out = held_out.sum(axis=0)
    leaky = (held_out & (others_in > 0)).sum(axis=0)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(n_out > 0, leaky / np.maximum(n_out, 1), np.nan)


def cm_by_assignment(cm_tables: dict[str, pd.DataFrame], *, phenomena: Sequence[str] = (
        "duplicate", "regular"), n_boot: int = 2000, seed: int = 0) -> pd.DataFrame:
    """Mean CM of each phenomenon under each subset assignment, with a seeded percentile
    bootstrap 95% CI over pairs (:func:`tokenbook.stats.bootstrap_ci`).

    ``cm_tables``: assignment name → :meth:`Artefacts.cm` table (``cm``, ``phenomenon``,
    optionally ``leakage``). Returns ``assignment, phenomenon, n, mean_cm, ci_low, ci_high,
    leakage`` (the mean share of leaky held-out models; NaN without the column)."""
    rows = []
    for name, table in cm_tables.items():
        check_table(table, f"CM table {name!r}", columns=["cm", "phenomenon"])
        for ph in phenomena:
            cm = table.loc[table["phenomenon"] == ph, "cm"].to_numpy(float)
            cm = cm[np.isfinite(cm)]
            lo = hi = float("nan")
            if len(cm) >= 2 and np.ptp(cm) > 0:
                lo, hi = bootstrap_ci(cm, np.mean, n_boot=n_boot, seed=seed)
            leak = (float(table.loc[table["phenomenon"] == ph, "leakage"].mean())
                    if "leakage" in table else float("nan"))
            rows.append(dict(assignment=name, phenomenon=ph, n=len(cm),
                             mean_cm=float(cm.mean()) if len(cm) else float("nan"),
                             ci_low=lo, ci_high=hi, leakage=leak))
    return pd.DataFrame(rows)


def assignment_comparison(art: Artefacts, *, scheduler_address: str | None = None,
                          n_workers: int = 2, n_boot: int = 2000, boot_seed: int = 0,
                          progress: bool = True) -> tuple[pd.DataFrame, dict[str, pd.DataFrame]]:
    """The book's grouped subsets against the authors' line-level split, on one root seed.

    Trains (or finds in the cache) a second ensemble of ``art``'s design with
    ``assignment="line"`` on the same corpus and seed, then compares duplicates' and regular
    pairs' CM under both (:func:`cm_by_assignment`). Returns that table and the two CM tables
    (with a ``leakage`` column, :func:`duplicate_leakage`)."""
    other = "line" if art.design.assignment == "grouped" else "grouped"
    twin, jobs = prepare(art.seed, art.corpus, replace(art.design, assignment=other))
    ensemble = [j for j in jobs if "cm-model-" in j.name]
    fan_out(ensemble, scheduler_address=scheduler_address, n_workers=n_workers,
            progress=progress, desc=f"{other}-level ensemble")
    groups = art.corpus.pairs["group_id"].to_numpy()
    tables = {}
    for a in (art, twin):
        cm = a.cm()
        leak = pd.DataFrame({"pair_id": np.arange(len(groups)),
                             "leakage": duplicate_leakage(a.ws.masks(), groups)})
        tables[a.design.assignment] = cm.merge(leak, on="pair_id", how="left")
    tables = {k: tables[k] for k in ASSIGNMENTS}
    seed = derive_seed(boot_seed, "analysis", art.seed)
    return cm_by_assignment(tables, n_boot=n_boot, seed=seed), tables


# --------------------------------------------------------------------------- statistics
def permuted_label_null(table: pd.DataFrame, positive: str | Sequence[str], *,
                        label: str = "phenomenon", negative: str = "regular",
                        seed: int = 0, null_label: str = "_null_positive") -> pd.DataFrame:
    """The labels-permuted control: as many *negative* rows as there are ``positive`` rows
    get the label ``null_label`` (a seeded random choice), the positive rows are dropped.

    Any statistic comparing ``null_label`` rows with the remaining negatives then compares two
    random groups of the same pairs: an AUROC centred on 0.5."""
    check_table(table, "table", columns=[label])
    pos = [positive] if isinstance(positive, str) else list(positive)
    n_pos = int(table[label].isin(pos).sum())
    neg = np.flatnonzero((table[label] == negative).to_numpy())
    if n_pos == 0 or len(neg) <= n_pos:
        raise ValueError(f"permuted_label_null: need positive rows and more {negative!r} rows "
                         f"than positive ones (got {n_pos} and {len(neg)})")
    out = table[~table[label].isin(pos)].copy()
    pick = np.random.default_rng(seed).choice(neg, size=n_pos, replace=False)
    lab = table[label].to_numpy(dtype=object).copy()
    lab[pick] = null_label
    out[label] = lab[~table[label].isin(pos).to_numpy()]
    return out


def random_masks_null(scores: pd.DataFrame, *, seed: int = 0) -> pd.DataFrame:
    """The random-subset-masks control for CM: each model's ``in_train`` column replaced by
    a random permutation of itself across pairs (same subset size, independent of what the
    model trained on), so the resulting "CM" carries no memorisation."""
    check_table(scores, "scores", columns=["model", "pair_id", "in_train"])
    rng = np.random.default_rng(seed)
    out = scores.sort_values(["model", "pair_id"]).copy()
    out["in_train"] = np.concatenate([rng.permutation(g.to_numpy())
                                      for _, g in out.groupby("model", sort=True)["in_train"]])
    return out


def permute_columns(frame: pd.DataFrame, columns: Sequence[str], *, seed: int = 0
                    ) -> pd.DataFrame:
    """The labels-permuted control for predictors: ``columns`` shuffled *together* across rows
    (seeded), every other column left in place, so each row keeps its inputs but gets another
    row's targets (or signals): any association between the two is destroyed."""
    check_table(frame, "frame", columns=list(columns))
    out = frame.copy()
    perm = np.random.default_rng(seed).permutation(len(frame))
    out[list(columns)] = frame[list(columns)].to_numpy()[perm]
    return out


def split_half_reliability(scores: pd.DataFrame, *, repeats: int = 20, seed: int = 0
                           ) -> dict[str, float]:
    """Split-half reliability of CM: the ensemble's models are split into two disjoint halves
    (seeded, ``repeats`` times), CM is computed from each half and the halves' CMs are
    correlated (Spearman ρ, over pairs defined in both). Returns the mean ``rho_half``, its
    Spearman–Brown projection to the full ensemble ``reliability`` = 2ρ/(1+ρ), and
    ``n_models``. The halves are those of :func:`cm_stability` (its ``"split-half"`` rows,
    the same ``seed``); repeats with an undefined ρ are left out of the mean."""
    halves = cm_stability(scores, fractions=(), repeats=repeats, seed=seed)
    M = int(scores["model"].nunique())
    if M < 4:
        raise ValueError(f"split-half reliability needs at least 4 models, got {M}")
    rhos = halves["spearman"].to_numpy(float)
    rho = float(np.nanmean(rhos)) if (~np.isnan(rhos)).any() else float("nan")
    return dict(rho_half=rho, reliability=spearman_brown(rho, 2.0), n_models=M)


def spearman_brown(rho: float, factor: float) -> float:
    """Spearman–Brown prophecy: reliability of a test ``factor`` times as long as one with
    reliability ``rho``: factor·ρ / (1 + (factor − 1)·ρ)."""
    if not np.isfinite(rho):
        return float("nan")
    return float(factor * rho / (1.0 + (factor - 1.0) * rho))


def predictor_scores(data: pd.DataFrame, inputs: Sequence[str], *, target: str = "cm",
                     seeds: Sequence[int], test_size: float = 0.3) -> pd.DataFrame:
    """Held-out Pearson r and MAE of the MLP (100, 100) and of a linear baseline (ordinary
    least squares), both on standardised inputs, predicting [TM, GS, CM] jointly as the
    authors do, over several seeded 70/30 splits. Rows ``estimator, split_seed, target,
    pearson_r, mae``."""
    rows = []
    for s in seeds:
        for est in ("mlp", "linear"):
            p = fit_map_predictor(data, list(inputs), seed=int(s), test_size=test_size,
                                  estimator=est, importance_for=())
            m = p.metrics.assign(estimator=est, split_seed=int(s))
            rows.append(m)
    out = pd.concat(rows, ignore_index=True)
    return out[["estimator", "split_seed", "target", "pearson_r", "mae"]]


def best_estimator(scores: pd.DataFrame, target: str = "cm") -> tuple[str, float]:
    """(estimator, mean Pearson r) of the estimator with the higher mean held-out r for
    ``target`` over the splits (the claims are judged on the better one)."""
    m = scores[scores["target"] == target].groupby("estimator")["pearson_r"].mean()
    if m.isna().all():
        return "none", float("nan")
    return str(m.idxmax()), float(m.max())


# --------------------------------------------------------------------------- per-seed claims
def analysis_table(art: Artefacts) -> pd.DataFrame:
    """One row per pair: TM, GS, CM, the corpus columns, the surface features (constant ones
    dropped) and the training signals of the full-data run."""
    cm = art.cm()
    feats = surface_features(art.corpus.pairs["source"], art.corpus.pairs["target"],
                             art.ws.tokenizer())
    feats["pair_id"] = art.corpus.pairs["pair_id"].to_numpy()
    sig = compute_signals(art.dynamics())
    data = cm.merge(feats, on="pair_id").merge(sig, on="pair_id")
    return data.drop(columns=[c for c in FEATURES if data[c].nunique() <= 1])


def seed_statistics(art: Artefacts, mechanism: str, *, boot_seed: int = 0, n_splits: int = 5,
                    n_boot: int = 500, rare_art: Artefacts | None = None) -> dict[str, float]:
    """Every claim's statistic for one root seed (see :func:`seed_claims`); ``rare_art``: the
    rare-but-derivable off world's ensemble (:func:`rare_off_artefacts`), read for
    ``rare-high-cm`` when ``mechanism`` is off (None: the labels-permuted null)."""
    check_choice(mechanism, "mechanism", ("on", "off"))
    on = mechanism == "on"
    a = derive_seed(boot_seed, "analysis", art.seed)
    data = analysis_table(art)
    out: dict[str, float] = {}
    if art.corpus.labelled:
        # idioms: the planted idioms, or the literal-idiom control (repeated, but literal)
        out["idiom-high-cm"] = phenomenon_auroc(
            data, "idiom" if on else "idiom_literal", n_boot=n_boot,
            seed=derive_seed(a, "boot", "idiom"))["ci_low"]
        world_null = not on and rare_art is not None
        if on or world_null:   # the rare words (off: the derivable ones of the off world)
            rare, positive = (data if on else rare_art.cm()), "rare_word"
        else:
            rare = permuted_label_null(data, "rare_word", seed=derive_seed(a, "null", "rare"))
            positive = "_null_positive"
        out["rare-high-cm"] = phenomenon_auroc(rare, positive, n_boot=n_boot,
                                               seed=derive_seed(a, "boot", "rare"))["ci_low"]
        # noisy pairs are unlearnt: every noisy kind has lower TM than regular pairs (the
        # smallest, over kinds, lower bound of the AUROC of −TM; off: per kind, labels permuted)
        out["noisy-unlearnt"] = noisy_unlearnt(data, on=on, analysis_seed=a, n_boot=n_boot)
    scores = art.scores()
    # the generator's map (checks.oracle_scores, checks.oracle_map): the known answers of
    # cm-stable and of the predictor claims are their statistics on it, under the same nulls
    oracle = oracle_scores(scores, art.corpus.pairs) if art.corpus.labelled else None
    if not on:
        scores = random_masks_null(scores, seed=derive_seed(a, "null", "masks"))
        if oracle is not None:
            oracle = random_masks_null(oracle, seed=derive_seed(a, "null", "masks"))
    if art.corpus.labelled:
        out.update(seed_checks(art.corpus.pairs, world_lexicon(art.corpus.key), mechanism,
                               analysis_seed=a, test=art.corpus.test, scores=scores,
                               rare_pairs=(rare_art.corpus.pairs
                                           if not on and rare_art is not None else None),
                               removed=removal_conditions(art) if art.removal_paths else None))
    out["cm-stable"] = split_half_reliability(scores, seed=derive_seed(a, "split-half"))[
        "reliability"]
    if oracle is not None:
        out[KNOWN_PREFIX + "cm-stable"] = split_half_reliability(
            oracle, seed=derive_seed(a, "split-half"))["reliability"]
    # predictors: MLP and linear over n_splits split seeds, judged on the better estimator
    feats = [f for f in FEATURES if f in data.columns]
    sigs = [s for s in SIGNALS if s in data.columns and data[s].nunique() > 1]
    split_seeds = [derive_seed(a, "split", k) for k in range(n_splits)]
    out.update(predictor_statistics(data, feats, sigs, split_seeds, on=on, analysis_seed=a,
                                    checks=art.corpus.labelled))
    if art.corpus.labelled:
        odata = data.drop(columns=["tm", "gs", "cm"]).merge(oracle_map(art.corpus.pairs),
                                                            on="pair_id", how="left")
        out.update({KNOWN_PREFIX + k: v for k, v in predictor_statistics(
            odata, feats, sigs, split_seeds, on=on, analysis_seed=a).items()})
    if art.removal_paths:
        rm = art.removal()
        test = art.corpus.test
        out.update(removal_effects(rm, on=on, has_idioms="uses_idiom" in test.columns))
    return out


def predictor_statistics(data: pd.DataFrame, feats: Sequence[str], sigs: Sequence[str],
                         split_seeds: Sequence[int], *, on: bool, analysis_seed: int,
                         checks: bool = False) -> dict[str, float]:
    """The predictor claims' statistics on one map (``data``: ``tm, gs, cm`` with the features
    ``feats`` and training signals ``sigs``): ``features-predict-cm`` and
    ``signals-predict-cm`` (held-out Pearson r for CM of the better of MLP and linear over
    ``split_seeds``) and ``signals-add`` (features + signals − features alone, both on the
    map as it is). Off: the map permuted across pairs for the first two, the signals
    permuted for the third (seeds from ``analysis_seed``). :func:`seed_statistics` calls it
    on the measured map and on the generator's (their known answers).

    ``checks``: also the claims' manipulation checks — Spearman ρ over pairs between the CM
    the predictors are fitted to and the map's own (1 on; the permutation destroys it off),
    and for ``signals-add`` the same for the training signals (mean over signals) — and
    balance checks (pairs in the predictor table, the same on and off)."""
    def r(table: pd.DataFrame, inputs: Sequence[str]) -> float:
        return best_estimator(predictor_scores(table, list(inputs), seeds=split_seeds))[1]

    f_true = r(data, feats)
    if on:
        f, fs = f_true, r(data, [*feats, *sigs])
        fs_add = fs
    else:
        pdata = permute_columns(data, ["tm", "gs", "cm"],
                                seed=derive_seed(analysis_seed, "null", "map"))
        f, fs = r(pdata, feats), r(pdata, [*feats, *sigs])
        sdata = permute_columns(data, list(sigs),
                                seed=derive_seed(analysis_seed, "null", "signals"))
        fs_add = r(sdata, [*feats, *sigs])
    out = {"features-predict-cm": f, "signals-predict-cm": fs, "signals-add": fs_add - f_true}
    if checks:
        mapped = data if on else pdata
        signals = data if on else sdata
        kept_map = spearman_rho(mapped["cm"], data["cm"])[0]
        kept_signals = (float(np.mean([spearman_rho(signals[c], data[c])[0] for c in sigs]))
                        if sigs else float("nan"))
        for cid, kept in (("features-predict-cm", kept_map), ("signals-predict-cm", kept_map),
                          ("signals-add", kept_signals)):
            out[MANIPULATION_PREFIX + cid] = kept
            out[BALANCE_PREFIX + cid] = float(len(data))
    return out


def noisy_unlearnt(data: pd.DataFrame, *, on: bool, analysis_seed: int, n_boot: int = 500
                   ) -> float:
    """The ``noisy-unlearnt`` statistic: per noisy kind present (misaligned, truncated, copied),
    the lower 95% bootstrap bound of the AUROC of −TM, that kind vs regular pairs; the smallest
    over kinds (every kind the paper names must sit bottom left). Off: per kind, as many random
    regular pairs relabelled (:func:`permuted_label_null`)."""
    kinds = [k for k in NOISY_KINDS if (data["phenomenon"] == k).any()]
    if not kinds:
        return float("nan")
    values = []
    for k in kinds:
        others = [o for o in NOISY_KINDS if o != k]
        d = data[~data["phenomenon"].isin(others)]
        if not on:
            d = permuted_label_null(d, k, seed=derive_seed(analysis_seed, "null", "noisy", k))
        d = d.assign(neg_tm=-d["tm"])
        values.append(phenomenon_auroc(d, k if on else "_null_positive", value="neg_tm",
                                       n_boot=n_boot,
                                       seed=derive_seed(analysis_seed, "boot", "noisy", k))[
            "ci_low"])
    return float(min(values))


def removal_effects(removal: pd.DataFrame, *, on: bool, has_idioms: bool) -> dict[str, float]:
    """Δ test log-probability (nats/token) and Δ BLEU, memorised − random removal, on the
    whole test set (``on``: its idiom share needs what the memorised pairs taught) or on its
    regular part only (``off``: the test set needs nothing memorised)."""
    check_table(removal, "removal", columns=["condition"])
    suffix = "" if on or not has_idioms else "_regular"
    r = removal.set_index("condition")
    if not {"memorised", "random"} <= set(r.index):
        raise ValueError("removal results need the conditions 'memorised' and 'random'")
    return {"removal-memorised-logprob": float(r.loc["memorised", f"test_logprob{suffix}"]
                                               - r.loc["random", f"test_logprob{suffix}"]),
            "removal-memorised-bleu": float(r.loc["memorised", f"bleu{suffix}"]
                                            - r.loc["random", f"bleu{suffix}"])}


def seed_claims(seed: int, mechanism: str, *, design: dict, world: dict | None = None,
                corpus: Any = None, test_corpus: Any = None, boot_seed: int = 0,
                n_splits: int = 5, rare_null: str = "world") -> dict[str, float]:
    """One root seed's statistic for every tiny-scale claim, mechanism ``on`` or ``off``.

    The models come from the cache (:func:`build` trains them first; here a missing model is
    trained in this process). Controls (*off*):

    * ``idiom-high-cm``: the literal-idiom control pairs of the same world instead of idioms;
    * ``rare-high-cm``: ``rare_null="world"``: the rare-but-derivable off world
      (:func:`rare_off_artefacts`, its own ensemble); ``"shuffle"``: labels permuted;
    * ``noisy-unlearnt``: per noisy kind, labels permuted (random regular pairs);
    * ``cm-stable``: random-subset masks (membership independent of training);
    * ``features-predict-cm``, ``signals-predict-cm``: TM/GS/CM permuted across pairs;
    * ``signals-add``: the signals permuted across pairs;
    * ``removal-*``: the regular part of the test set, which needs nothing memorised.
    """
    check_choice(rare_null, "rare_null", RARE_NULLS)
    d = Design(**design)
    arts = build([seed], d, corpus_fn=partial(make_corpus, world=world, corpus=corpus,
                                              test_corpus=test_corpus), progress=False)
    rare_art = None
    if mechanism == "off" and rare_null == "world" and corpus is None:
        rare_art, jobs = rare_off_artefacts(int(seed), d, world)
        fan_out(jobs, client=None, n_workers=0, progress=False, desc="rare off world")
    return seed_statistics(arts[int(seed)], mechanism, boot_seed=boot_seed, n_splits=n_splits,
                           rare_art=rare_art)


def run_seeds(seeds: Sequence[int], *, design: dict, world: dict | None = None,
              corpus: Any = None, test_corpus: Any = None, boot_seed: int = 0,
              n_splits: int = 5, scheduler_address: str | None = None, n_workers: int = 2,
              rare_null: str = "world", progress: bool = True) -> tuple[dict[int, Artefacts], pd.DataFrame, dict]:
    """The chapter's heavy step: models for every root seed (Dask), then the per-seed claims
    table (``seed, mechanism, claim_id, value``; cached per seed and mechanism, keyed by the
    library's source hash). A real corpus (paper scale) has no planted mechanism: only
    ``on`` is computed. Returns the artefacts, the table and the wall seconds of each phase
    (``training_s``: every model; ``analysis_s``: statistics and controls of every seed)."""
    d = Design(**design)
    seeds = [int(s) for s in seeds]
    corpus_fn = partial(make_corpus, world=world, corpus=corpus, test_corpus=test_corpus)
    t0 = time.perf_counter()
    with dask_client(scheduler_address, n_workers) as client:
        arts = build(seeds, d, corpus_fn=corpus_fn, client=client, progress=progress)
        if corpus is None and rare_null == "world":   # the rare-word off world's ensembles
            fan_out([j for s in seeds for j in rare_off_artefacts(s, d, world)[1]],
                    client=client, n_workers=0, progress=progress, desc="rare off world")
        t1 = time.perf_counter()
        task = partial(seed_claims, design=asdict(d), world=world, corpus=corpus,
                       test_corpus=test_corpus, boot_seed=boot_seed, n_splits=n_splits,
                       rare_null=rare_null)
        table = over_seeds(task, seeds, kind="memorisation-seed",
                           params=dict(design=asdict(d), world=world or {}, corpus=corpus,
                                       test_corpus=test_corpus, boot_seed=boot_seed,
                                       n_splits=n_splits, version=ENSEMBLE_VERSION,
                                       rare_null=rare_null),
                           mechanisms=("on", "off") if corpus is None else ("on",),
                           client=client, progress=progress)
    t2 = time.perf_counter()
    return arts, table, {"training_s": t1 - t0, "analysis_s": t2 - t1}


# --------------------------------------------------------------------------- chapter tables
def claim_values(table: pd.DataFrame, claim_id: str) -> dict[str, Any]:
    """``{"values_on": [...], "values_off": [...], "computed_by": ...}`` of one claim, for
    ``Claim.over_seeds`` (``computed_by``: :func:`crosslingual_statistics` for the
    ``crosslingual-*`` claims, else :func:`seed_statistics`)."""
    on, off = values_by_claim(table, claim_id)
    fn = crosslingual_statistics if claim_id.startswith("crosslingual-") else seed_statistics
    return {"values_on": on, "values_off": off, "computed_by": qualified_name(fn)}


def seed_value(table: pd.DataFrame, claim_id: str, seed: int) -> float:
    """One claim's statistic at one root seed with the mechanism on (paper scale)."""
    rows = table[(table["claim_id"] == claim_id) & (table["mechanism"] == "on")
                 & (table["seed"] == seed)]
    return float(rows["value"].iloc[0]) if len(rows) else float("nan")


def reliability_curve(scores: pd.DataFrame, *, repeats: int = 10, seed: int = 0
                      ) -> pd.DataFrame:
    """Split-half reliability of CM by the number of models: for k = 2 … M/2, two disjoint
    sets of k models (seeded, ``repeats`` times); ``rho`` = Spearman ρ of their CMs,
    ``projected`` = the Spearman–Brown projection to all M models (factor M / k;
    :func:`tokenbook.memorisation_cartography.estimator.split_half_spearman`)."""
    _, _, S, mask = pivot_scores(scores)
    M = S.shape[0]
    rng = np.random.default_rng(seed)
    rows = []
    for k in range(2, M // 2 + 1):
        for r in range(repeats):
            rho, n_pairs = split_half_spearman(S, mask, k, rng)
            rows.append((k, r, rho, spearman_brown(rho, M / k), n_pairs))
    return pd.DataFrame(rows, columns=["half_size", "repeat", "rho", "projected", "n_pairs"])


def predictor_table(art: Artefacts, *, boot_seed: int = 0, n_splits: int = 5) -> pd.DataFrame:
    """Held-out Pearson r and MAE for TM, GS and CM of the MLP and the linear baseline, with
    surface features and with features + training signals, over ``n_splits`` split seeds
    (the same splits as the claims). Column ``inputs`` names the input set."""
    data = analysis_table(art)
    a = derive_seed(boot_seed, "analysis", art.seed)
    split_seeds = [derive_seed(a, "split", k) for k in range(n_splits)]
    feats = [f for f in FEATURES if f in data.columns]
    sigs = [s for s in SIGNALS if s in data.columns and data[s].nunique() > 1]
    return pd.concat([predictor_scores(data, feats, seeds=split_seeds).assign(inputs="features"),
                      predictor_scores(data, feats + sigs, seeds=split_seeds)
                      .assign(inputs="features + signals")], ignore_index=True)


def feature_spearman(art: Artefacts) -> pd.DataFrame:
    """Spearman ρ of every (non-constant) surface feature and training signal with TM, GS and
    CM, CM clipped at 0 as the authors do in this analysis (rows: inputs; columns: tm, gs, cm)."""
    data = analysis_table(art)
    data["cm"] = data["cm"].clip(lower=0)
    inputs = [c for c in FEATURES + SIGNALS if c in data.columns and data[c].nunique() > 1]
    return feature_correlations(data, inputs)


def region_examples(cm: pd.DataFrame, *, per_region: int = 2) -> pd.DataFrame:
    """The most typical pairs of each region (``region`` column): highest CM for memorised,
    highest GS for generalised, lowest TM for unlearnt, median CM for in-between; with a short
    ``label`` (region and the pair's first words) for the map."""
    check_table(cm, "cm", columns=["region", "tm", "gs", "cm", "source", "target"])
    parts = []
    for region, g in cm.groupby("region"):
        if region == "memorised":
            g = g.nlargest(per_region, "cm")
        elif region == "generalised":
            g = g.nlargest(per_region, "gs")
        elif region == "unlearnt":
            g = g.nsmallest(per_region, "tm")
        else:
            g = g.iloc[(g["cm"] - g["cm"].median()).abs().argsort()[:per_region]]
        parts.append(g)
    out = pd.concat(parts) if parts else cm.head(0)
    out = out.assign(label=[f"{r}: {' '.join(s.split()[:3])}…"
                            for r, s in zip(out["region"], out["source"])])
    cols = ["region", "label", "tm", "gs", "cm", "source", "target"]
    return out[[c for c in cols + ["phenomenon"] if c in out.columns]].reset_index(drop=True)


# --------------------------------------------------------------------------- cross-lingual
#: the cross-lingual claims (tiny scale), judged over root seeds with the pairing on or off
CROSSLINGUAL_CLAIM_IDS = ("crosslingual-tm", "crosslingual-gs", "crosslingual-cm",
                          "crosslingual-transfer-cm")

#: the small multi-parallel world of the cross-lingual section (the first phenomena of
#: :data:`TINY_WORLD`; half of the idiom phrases idiomatic in each language)
CROSSLINGUAL_WORLD = dict(n_test=20, n_nouns=20, n_verbs=8, n_adjectives=6, idiom_rate=0.06,
                          noise_rate=0.06, rare_rate=0.05, alternative_rate=0.0,
                          duplicate_rate=0.04, idiomatic_share=0.5)


def multiparallel_corpora(seed: int, languages: Sequence[str] = ("de", "nl", "fr"), *,
                          n_pairs: int = 150, world: dict | None = None,
                          corpora: Sequence[dict] | None = None) -> dict[str, Corpus]:
    """One :class:`Corpus` per target language, all with the same sources and ``pair_id``.

    Tiny scale (``corpora`` None): the worlds of
    :func:`tokenbook.worlds.translation.make_multiparallel_world` for root seed ``seed``
    (``derive_seed(seed, "crosslingual-world")``; ``world`` overrides
    :data:`CROSSLINGUAL_WORLD`). Paper scale: one spec for
    :func:`tokenbook.data.parallel.load_corpus` per language (the authors' shared English file
    with one target file per pair); lines are matched by position, so every corpus must have
    the same number of lines with the same source on each line. No test set is needed (the
    section only maps the training pairs)."""
    languages = list(languages)
    if corpora is None:
        params = {**CROSSLINGUAL_WORLD, **(world or {})}
        worlds = make_multiparallel_world(n_pairs=n_pairs, targets=languages,
                                          seed=derive_seed(seed, "crosslingual-world"), **params)
        return {lang: Corpus(w.pairs, w.test, {"world": w.params, "multiparallel": True}, True)
                for lang, w in worlds.items()}

    corpora = list(corpora)
    if len(corpora) != len(languages):
        raise ValueError(f"need one corpus spec per language: {len(languages)} languages "
                         f"{languages}, {len(corpora)} specs")
    out, first = {}, None
    for lang, spec in zip(languages, corpora):
        pairs = load_corpus(spec).reset_index(drop=True)
        if first is None:
            first = pairs["source"].tolist()
        elif pairs["source"].tolist() != first:
            raise ValueError(f"the {lang!r} corpus does not have the same source lines as the "
                             f"{languages[0]!r} corpus; a multi-parallel corpus shares its source "
                             "side line by line")
        pairs["pair_id"] = np.arange(len(pairs))
        pairs["phenomenon"] = "unlabelled"
        pairs["group_id"] = pairs.groupby(["source", "target"], sort=False).ngroup()
        test = pd.DataFrame({"source": pd.Series(dtype=str), "target": pd.Series(dtype=str)})
        out[lang] = Corpus(pairs, test, {"corpus": spec, "n_pairs": len(pairs),
                                         "multiparallel": True}, False)
    return out


@dataclass
class CrossLingual:
    """The maps of one root seed in several target languages (:func:`crosslingual_build`).

    ``maps[lang]``: one row per training pair, the same ``pair_id`` in every language, with
    ``tm, gs, cm`` (per-token geometric-mean probabilities; ``tm_bleu, gs_bleu, cm_bleu`` in
    BLEU/100 where the BLEU variant was decoded), the corpus columns and the surface features
    of ``tokenbook.memorisation_cartography.features.FEATURES``."""

    seed: int
    maps: dict
    arts: dict


def crosslingual_build(seeds: Sequence[int], design: Design, *,
                       languages: Sequence[str] = ("de", "nl", "fr"), n_pairs: int = 150,
                       world: dict | None = None, corpora: Sequence[dict] | None = None,
                       bleu_seeds: Sequence[int] = (), scheduler_address: str | None = None,
                       n_workers: int = 2, progress: bool = True
                       ) -> tuple[dict[int, CrossLingual], float]:
    """The TM/GS/CM map of every root seed in every target language, aligned on the sources.

    For each seed, :func:`multiparallel_corpora` gives one corpus per language; each gets the
    ensemble of ``design`` (``n_models`` models, no dynamics run, no removal) in its own
    workspace keyed by that corpus, the design and the seed (:func:`prepare`), so every
    (language, seed) map is cached and a killed run resumes. The subset masks derive from the
    seed and the duplicate groups only, so a pair is in the same models' training halves in
    every language, as with the authors' ``subsample.py`` seeded on a line-aligned corpus.
    Seeds in ``bleu_seeds`` also decode every pair greedily (the BLEU-based map, ~2× the cost).
    All models go out in one Dask fan-out. Returns ``{seed: CrossLingual}`` and the wall
    seconds of the fan-out (0 when every model was cached)."""

    seeds = [int(s) for s in seeds]
    bleu_seeds = {int(s) for s in bleu_seeds}
    arts, jobs = {}, []
    for s in seeds:
        d = replace(design, bleu=design.bleu or s in bleu_seeds)
        arts[s] = {}
        for lang, corpus in multiparallel_corpora(s, languages, n_pairs=n_pairs, world=world,
                                                  corpora=corpora).items():
            art, js = prepare(s, corpus, d)
            arts[s][lang] = art
            for j in js:
                if "cm-model-" in j.name:
                    j.name = f"{lang}-{j.name}"
                    jobs.append(j)
    todo = [j for j in jobs if not j.done()]
    t0 = time.perf_counter()
    fan_out(jobs, scheduler_address=scheduler_address, n_workers=n_workers, progress=progress,
            desc="cross-lingual ensembles")
    seconds = time.perf_counter() - t0 if todo else 0.0
    out = {}
    for s, per_lang in arts.items():
        maps = {}
        for lang, art in per_lang.items():
            scores = art.scores()
            m = counterfactual_memorisation(scores)[["pair_id", "tm", "gs", "cm"]]
            if "bleu" in scores.columns:
                b = counterfactual_memorisation(scores, value="bleu")
                b = b.assign(tm=b["tm"] / 100, gs=b["gs"] / 100, cm=b["cm"] / 100)
                m = m.merge(b[["pair_id", "tm", "gs", "cm"]].rename(
                    columns={"tm": "tm_bleu", "gs": "gs_bleu", "cm": "cm_bleu"}), on="pair_id")
            pairs = art.corpus.pairs
            feats = surface_features(pairs["source"], pairs["target"], art.ws.tokenizer())
            feats["pair_id"] = pairs["pair_id"].to_numpy()
            maps[lang] = (m.merge(pairs, on="pair_id").merge(feats[["pair_id", *FEATURES]],
                                                               on="pair_id")
                          .sort_values("pair_id", ignore_index=True))
        out[s] = CrossLingual(s, maps, per_lang)
    return out, seconds


def transfer_inputs(maps: dict[str, pd.DataFrame]) -> list[str]:
    """The surface features that vary in every language's map (the transfer's inputs)."""
    return [f for f in FEATURES if all(f in m.columns and m[f].nunique() > 1
                                       for m in maps.values())]


def crosslingual_transfer_table(maps: dict[str, pd.DataFrame], *, seed: int = 0,
                                test_size: float = 0.3) -> pd.DataFrame:
    """Train on each language, test on each, [TM, GS, CM] jointly from the surface features
    (:func:`~tokenbook.memorisation_cartography.crosslingual.cross_lingual_transfer`), for the MLP
    (100, 100) and the linear baseline: rows ``estimator, train, test, target, pearson_r, mae,
    n``."""
    inputs = transfer_inputs(maps)
    return pd.concat([cross_lingual_transfer(maps, inputs, target=("tm", "gs", "cm"),
                                             test_size=test_size, seed=seed, estimator=est)
                      .assign(estimator=est) for est in ("mlp", "linear")], ignore_index=True)[
        ["estimator", "train", "test", "target", "pearson_r", "mae", "n"]]


def _labelled(cl: CrossLingual) -> bool:
    """Do the maps carry a world's planted phenomenon labels (tiny scale)?"""
    return all("phenomenon" in m.columns and not (m["phenomenon"] == "unlabelled").all()
               for m in cl.maps.values())


def crosslingual_statistics(cl: CrossLingual, mechanism: str, *,
                            off_world: CrossLingual | None = None, boot_seed: int = 0,
                            n_boot: int = 500) -> dict[str, float]:
    """One root seed's statistic for each of :data:`CROSSLINGUAL_CLAIM_IDS`.

    * ``crosslingual-tm``/``-gs``/``-cm``, tiny scale (maps with planted labels): the mean over
      ordered language pairs of the Spearman ρ of that metric over the first language's
      source-side phenomenon pairs
      (:func:`~tokenbook.memorisation_cartography.crosslingual.phenomenon_agreement`); *on*:
      ``cl``, the world whose phenomena sit on the shared sources; *off*: ``off_world``, the
      same root seed's world with the phenomena drawn per language
      (:func:`crosslingual_build` with ``world={"shared_phenomena": False}``; its own
      ensembles). The manipulation, known-answer and balance rows of
      :func:`~tokenbook.memorisation_cartography.checks.crosslingual_checks` come with them.
      Paper scale (unlabelled maps, *on* only): the lowest, over language pairs, lower 95%
      bootstrap bound of the Spearman ρ over all shared sources
      (:func:`~tokenbook.memorisation_cartography.crosslingual.cross_language_correlations`);
    * ``crosslingual-transfer-cm``: the mean over train ≠ test cells of the Pearson r for CM
      of the predictor trained on one language, the better of MLP and linear, on ``cl``'s
      maps; *off*: every language's TM/GS/CM permuted across its pairs
      (:func:`permute_columns`, independently per language), so no feature–map relation
      exists to learn or to transfer.
    """
    check_choice(mechanism, "mechanism", ("on", "off"))
    a = derive_seed(boot_seed, "analysis", "crosslingual", cl.seed)
    out: dict[str, float] = {}
    if _labelled(cl):
        world = cl if mechanism == "on" else off_world
        if world is None:
            raise ValueError("crosslingual_statistics(..., 'off') needs off_world: the same root "
                             "seed's maps built with crosslingual_build(..., world="
                             "{'shared_phenomena': False})")
        out.update({f"crosslingual-{m}": v
                    for m, v in mean_phenomenon_agreement(world.maps).items()})
        out.update(crosslingual_checks(world.maps))
    else:
        if mechanism == "off":
            raise ValueError("maps without planted labels (paper scale) have no off world; "
                             "judge them with mechanism 'on' only")
        maps = {k: v[["pair_id", "tm", "gs", "cm"]] for k, v in cl.maps.items()}
        corr = cross_language_correlations(maps, n_boot=n_boot, seed=derive_seed(a, "boot"))
        out.update({f"crosslingual-{m}": float(corr.loc[corr["metric"] == m, "ci_low"].min())
                    for m in ("tm", "gs", "cm")})
    def transfer(maps: dict[str, pd.DataFrame]) -> tuple[float, dict[str, pd.DataFrame]]:
        """The transfer statistic on these maps (off: each language's map permuted), and
        the maps it read."""
        if mechanism == "off":
            maps = {lang: permute_columns(m, ["tm", "gs", "cm"],
                                          seed=derive_seed(a, "null", "transfer", k))
                    for k, (lang, m) in enumerate(maps.items())}
        return (transfer_score(crosslingual_transfer_table(maps, seed=derive_seed(a, "split"))),
                maps)

    cid = "crosslingual-transfer-cm"
    out[cid], read = transfer(cl.maps)
    if _labelled(cl):     # tiny scale: the checks and the known answer
        # manipulation check: the CM the predictors read is each pair's own (on), not off;
        # balance: the pairs mapped per language, the same both ways
        out[MANIPULATION_PREFIX + cid] = float(np.nanmean(
            [spearman_rho(read[lang]["cm"], m["cm"])[0] for lang, m in cl.maps.items()]))
        out[BALANCE_PREFIX + cid] = float(np.mean([len(m) for m in read.values()]))
        # known answer: the same transfer on the generator's maps
        out[KNOWN_PREFIX + cid] = transfer(
            {lang: m.drop(columns=["tm", "gs", "cm"]).merge(oracle_map(m), on="pair_id",
                                                            how="left")
             for lang, m in cl.maps.items()})[0]
    return out


def transfer_score(transfer: pd.DataFrame, target: str = "cm") -> float:
    """Mean Pearson r for ``target`` over the train ≠ test cells of a transfer table, of the
    estimator with the higher such mean."""
    t = transfer[(transfer["target"] == target) & (transfer["train"] != transfer["test"])]
    m = t.groupby("estimator")["pearson_r"].mean()
    return float(m.max()) if m.notna().any() else float("nan")


def crosslingual_seed_table(results: dict[int, CrossLingual], *,
                            off_results: dict[int, CrossLingual] | None = None,
                            boot_seed: int = 0, n_boot: int = 500) -> pd.DataFrame:
    """The tidy table ``seed, mechanism, claim_id, value`` of :func:`crosslingual_statistics`
    for every root seed (for :func:`claim_values`): mechanism on, and off where
    ``off_results`` (the same seeds' per-language-phenomena worlds) is given."""
    if off_results is not None and set(off_results) != set(results):
        raise ValueError(f"off_results must hold the same root seeds as results: "
                         f"{sorted(results)} vs {sorted(off_results)}")
    rows = []
    for s, cl in results.items():
        for mech in ("on", "off") if off_results is not None else ("on",):
            off = off_results[s] if off_results is not None else None
            for cid, v in crosslingual_statistics(cl, mech, off_world=off, boot_seed=boot_seed,
                                                  n_boot=n_boot).items():
                rows.append((int(s), mech, cid, float(v)))
    return pd.DataFrame(rows, columns=["seed", "mechanism", "claim_id", "value"])


def bleu_agreement(cl: CrossLingual, *, n_boot: int = 1000, seed: int = 0) -> pd.DataFrame:
    """The likelihood-based against the BLEU-based map in each language of ``cl`` that was
    decoded (``bleu_seeds`` of :func:`crosslingual_build`):
    :func:`~tokenbook.memorisation_cartography.mapfeatures.map_agreement` per language, rows ``language,
    metric, rho, ci_low, ci_high, n``; empty when no language has a BLEU map."""
    parts = []
    for lang, m in cl.maps.items():
        if "cm_bleu" not in m.columns:
            continue
        bleu = m[["pair_id", "tm_bleu", "gs_bleu", "cm_bleu"]].rename(
            columns={"tm_bleu": "tm", "gs_bleu": "gs", "cm_bleu": "cm"})
        parts.append(map_agreement(m[["pair_id", "tm", "gs", "cm"]], bleu, n_boot=n_boot,
                                   seed=seed).assign(language=lang))
    cols = ["language", "metric", "rho", "ci_low", "ci_high", "n"]
    return pd.concat(parts, ignore_index=True)[cols] if parts else pd.DataFrame(columns=cols)
