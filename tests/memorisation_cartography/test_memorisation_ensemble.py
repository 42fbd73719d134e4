"""The ensemble: atomic per-model score files, resume after an interruption, the Dask path."""


import numpy as np
import pytest

from tokenbook.memorisation_cartography.ensemble import (Job, Workspace, ensemble_jobs, fan_out,
                                                         load_scores, run_ensemble)
from tokenbook.memorisation_cartography.estimator import counterfactual_memorisation, subset_masks
from tokenbook.worlds.translation import make_translation_world

TRAIN = dict(epochs=1, batch_size=32)


@pytest.fixture
def workspace(tmp_path):
    w = make_translation_world(60, n_test=5, seed=0)
    ws = Workspace.create(tmp_path / "ws", w.pairs.source.tolist(), w.pairs.target.tolist(),
                          vocab_size=200, params={"test": 1})
    return ws, w


def _boom(**_):
    raise RuntimeError("simulated crash")


def test_resume_after_interrupted_ensemble(workspace):
    ws, w = workspace
    masks = subset_masks(len(w.pairs), 4, groups=w.pairs.group_id, seed=0)
    ws.set_masks(masks)
    jobs = ensemble_jobs(ws, train_kwargs=TRAIN)
    # an "interrupted" run: models 0 and 1 finish, model 2's task crashes, model 3 never ran
    interrupted = jobs[:2] + [Job(jobs[2].name, _boom, {}, jobs[2].out_path)]
    with pytest.raises(RuntimeError, match="simulated crash"):
        fan_out(interrupted, n_workers=0, progress=False)
    done = {m: ws.score_path(m).stat().st_mtime_ns for m in (0, 1)}
    assert not ws.score_path(2).exists() and not ws.score_path(3).exists()
    assert not list(ws.scores_dir.glob(".*tmp*"))  # no half-written files
    with pytest.raises(FileNotFoundError, match="2 of 4 models"):
        load_scores(ws)
    # resume: the finished models are not retrained (their files are untouched)
    calls = []
    resumed = [Job(j.name, lambda _fn=j.fn, **kw: (calls.append(kw["model_idx"]), _fn(**kw)),
                   j.kwargs, j.out_path) for j in jobs]
    fan_out(resumed, n_workers=0, progress=False)
    assert sorted(calls) == [2, 3]
    assert {m: ws.score_path(m).stat().st_mtime_ns for m in (0, 1)} == done
    scores = load_scores(ws)
    assert len(scores) == 4 * len(w.pairs)
    assert ((scores.score > 0) & (scores.score < 1)).all()
    # the stored mask is the design's mask
    got = scores.pivot(index="model", columns="pair_id", values="in_train").to_numpy()
    assert (got == masks).all()
    # a rerun with everything present trains nothing
    calls.clear()
    fan_out(resumed, n_workers=0, progress=False)
    assert calls == []


def test_workspace_refuses_other_parameters(workspace, tmp_path):
    ws, w = workspace
    with pytest.raises(ValueError, match="other parameters"):
        Workspace.create(ws.root, w.pairs.source.tolist(), w.pairs.target.tolist(),
                         vocab_size=200, params={"test": 2})
    ws.set_masks(np.ones((2, len(w.pairs)), bool))
    with pytest.raises(ValueError, match="other subset masks"):
        ws.set_masks(np.zeros((2, len(w.pairs)), bool))


@pytest.mark.slow
def test_dask_two_worker_local_cluster_with_retry(workspace, tmp_path):
    """The real Dask path: 2 single-threaded worker processes; one task fails once and is retried."""
    ws, w = workspace
    masks = subset_masks(len(w.pairs), 4, design="balanced", groups=w.pairs.group_id, seed=1)
    marker = tmp_path / "failed-once"
    ws.set_masks(masks)
    jobs = ensemble_jobs(ws, train_kwargs=TRAIN)
    jobs[1].kwargs["fail_once_marker"] = str(marker)
    fan_out(jobs, n_workers=2, retries=1, progress=False)
    assert marker.exists()  # the injected failure happened, and the retry succeeded
    scores = run_ensemble(ws, masks, train_kwargs=TRAIN, n_workers=2, progress=False)  # resumes
    cm = counterfactual_memorisation(scores)
    assert (cm.n_in == 2).all() and (cm.n_out == 2).all()
    assert np.isfinite(cm.cm).all()
    # different models (seeds, subsets) give different scores
    per_model = scores.groupby("model").score.mean()
    assert per_model.nunique() == 4
