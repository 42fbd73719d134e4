"""Every chapter is reproducible from an empty cache (issue #19, item 4).

Each chapter runs twice through the runner at a small setting, each time into its own empty
model cache (so model training is included), and the two runs must write byte-identical
``claims.json``. The groundedness chapter shares the UID chapter's pair of caches, as the book
shares one cache; its models are its own world's (not the UID world's), so its runs train them
too. The two runs
of a chapter go side by side as two ``tokenbook run`` processes with the same environment.
Bit-for-bit reproducibility is promised on one machine with one thread count; across machines
floats may differ (see README, "Reproducibility").
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

# Small settings: every model still trains, every analysis still runs, in about a minute each.
GROUNDED = dict(n_seeds=1, n_languages=2, n_scenes=80, n_stories=8, train_steps=40,
                text_steps=20, align_steps=20, vision_steps=20)
SMALL = {
    # the UID chapter's story stage too (its default, 2,000 steps on 640 stories, was most of
    # this test's time)
    "uid_grounding": {**GROUNDED, "story_steps": 20, "story_documents": 8},
    "groundedness_typology": {**GROUNDED, "n_boot": 50, "n_perm": 50},
    "memorisation_cartography": dict(n_seeds=1, n_pairs=120, n_test=24, n_models=4,
                                     epochs=3, dynamics_epochs=2, removal_epochs=2,
                                     vocab_size=120, n_workers=1, region_seeds=2, num_beams=2,
                                     crosslingual_pairs=40, crosslingual_models=2,
                                     crosslingual_epochs=2),
    "cancellation_hypothesis": dict(n_train=200, n_eval=16, sft_steps=40, analysis_prompts=4,
                                    probe_targets=2, value_per_cell=2, value_continuations=2,
                                    rl_steps=2, eval_every=2, n_seeds=2, prompts_per_step=2,
                                    scale_sizes=[[16, 1], [64, 2]]),
}
# The groundedness chapter shares the UID chapter's pair of caches, as in the book (one cache);
# its world's models differ from the UID world's, so it trains its own there.
CACHE_GROUP = {"groundedness_typology": "uid_grounding"}

pytestmark = [pytest.mark.slow]


@pytest.fixture(scope="module")
def caches(tmp_path_factory):
    return tmp_path_factory.mktemp("caches")


def _start_cold_run(chapter: str, cache: Path, out: Path) -> subprocess.Popen:
    """``tokenbook run CHAPTER`` at the small setting into its own cache, as a child process."""
    args = [sys.executable, "-m", "tokenbook", "run", chapter, "--out", str(out), "-q"]
    for name, value in SMALL[chapter].items():
        args += ["-p", name, json.dumps(value)]
    # one torch/BLAS thread each: two runs at two threads each on two cores spin-wait (many
    # times slower); the thread count is the same for both runs, so the claims still match
    env = dict(os.environ, TOKENBOOK_CACHE=str(cache), HF_HUB_OFFLINE="1", OMP_NUM_THREADS="1",
               MKL_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1")
    log = open(out.with_suffix(".log"), "w")
    return subprocess.Popen(args, cwd=REPO, env=env, stdout=log, stderr=subprocess.STDOUT)


@pytest.mark.parametrize("chapter", list(SMALL))
def test_two_cold_runs_write_identical_claims(chapter, caches, tmp_path):
    # the two runs go side by side (same machine, same thread settings): half the wall time
    group = CACHE_GROUP.get(chapter, chapter)
    outs = {attempt: tmp_path / f"runs-{attempt}" for attempt in ("first", "second")}
    procs = {attempt: _start_cold_run(chapter, caches / f"{group}-{attempt}", out)
             for attempt, out in outs.items()}
    claims = []
    for attempt, proc in procs.items():
        rc = proc.wait(timeout=1800)
        log = outs[attempt].with_suffix(".log").read_text()[-3000:]
        if rc != 0:  # what papermill printed (the kernel's own error): CI keeps no run folder
            for kept in sorted(outs[attempt].glob(f"{chapter}/*/papermill.log")):
                text = kept.read_text()  # the kernel's message comes before papermill's traceback
                log += f"\n--- {kept}:\n" + (text if len(text) <= 6000 else
                                               f"{text[:3000]}\n[…]\n{text[-2000:]}")
        assert rc == 0, f"{chapter} ({attempt} run) failed (exit {rc}):\n{log}"
        found = sorted(outs[attempt].glob(f"{chapter}/*/claims.json"))
        assert len(found) == 1, f"{chapter} ({attempt} run): expected one claims.json, got {found}"
        claims.append(found[0].read_bytes())
    assert claims[0] == claims[1], f"{chapter}: two cold runs at the same seed disagree"
