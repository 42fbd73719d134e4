"""papermill as its users expect: committed .ipynb twins of the chapters, in sync with the .py,
runnable by plain papermill (-p, -f) into a run folder of their own, parameters with types."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

from tokenbook.book import interactive
from tokenbook.book.ipynb import SETUP_TAG, chapter_sources, repository_url
from tokenbook.book.notebooks import sync
from tokenbook.book.runner import read_parameters

REPO = Path(__file__).resolve().parents[2]
PAPERMILL = [sys.executable, "-m", "papermill"]
CHAPTERS = [p.stem for p in chapter_sources(REPO)]

TYPED_PARAMETERS = '''# %% tags=["parameters"]
seed: int = 0  # seeds the sample
n: int = 200  # sample size
scale: str = "tiny"  # "tiny" or "paper"
shift: float = 0.5  # mean of the sample (a.u.)
fail: bool = False  # raise in a cell (tests the failure path)
pause: float = 0.0  # seconds to sleep
note: "Optional[str]" = None  # free text, or None
'''


def _plain_env() -> dict[str, str]:
    """The environment of a user's shell: no run folder handed down by a runner."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("TOKENBOOK_RUN_DIR", "TOKENBOOK_CHAPTER", "TOKENBOOK_ROOT")}
    env.update(HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", MPLBACKEND="module://"
               "matplotlib_inline.backend_inline")
    return env


def _help(notebook: Path) -> dict[str, str]:
    """``papermill --help-notebook``: {parameter: inferred type}."""
    res = subprocess.run([*PAPERMILL, "--help-notebook", str(notebook)], capture_output=True,
                         text=True, timeout=120)
    assert res.returncode == 0, res.stderr[-2000:]
    return dict(re.findall(r"^  (\w+): (.+?) \(default ", res.stdout, flags=re.M))


@pytest.mark.parametrize("chapter", CHAPTERS)
def test_ipynb_twin_is_in_sync_with_its_py(chapter):
    twin = REPO / "notebooks" / f"{chapter}.ipynb"
    assert twin.exists(), f"{twin.name} is missing: run `make notebooks` and commit it"
    stale = [p.name for p in sync(REPO, check=True)]
    assert twin.name not in stale, (f"notebooks/{twin.name} differs from notebooks/{chapter}.py"
                                    f": run `make notebooks` and commit it")


@pytest.mark.slow
@pytest.mark.parametrize("chapter", CHAPTERS)
def test_papermill_help_lists_every_chapter_parameter_with_a_type(chapter):
    """Every parameter of the .py is read by papermill from the .ipynb, each with a type
    (write them `name: type = literal  # help`; no '=' in the help; None defaults as
    `name: "Optional[str]" = None`)."""
    twin = REPO / "notebooks" / f"{chapter}.ipynb"
    shown = _help(twin)
    expected = read_parameters(REPO / "notebooks" / f"{chapter}.py")
    missing = sorted(set(expected) - set(shown))
    assert not missing, f"{chapter}: papermill --help-notebook cannot read {missing}"
    untyped = sorted(k for k, t in shown.items() if t == "Unknown type")
    assert not untyped, f"{chapter}: parameters without a type annotation: {untyped}"


def test_setup_cell_installs_from_the_configured_repository():
    url = repository_url(REPO)
    assert url.startswith("https://") and not url.endswith("/")
    for chapter in CHAPTERS:
        nb = nbformat.read(REPO / "notebooks" / f"{chapter}.ipynb", as_version=4)
        setup = [c for c in nb.cells if SETUP_TAG in c.metadata.get("tags", [])]
        assert len(setup) == 1 and url in setup[0].source
        assert f'interactive.start("{chapter}")' in setup[0].source
        code = [c for c in nb.cells if c.cell_type == "code"]
        assert code[0] is setup[0]  # before any chapter code
        assert all(not c.outputs for c in code)  # twins carry no outputs


def _typed_book(dummy_book: Path) -> Path:
    src = dummy_book / "notebooks" / "dummy.py"
    text = src.read_text()
    start = text.index('# %% tags=["parameters"]')
    end = text.index("# %%", start + 5)
    src.write_text(text[:start] + TYPED_PARAMETERS + "\n" + text[end:])
    assert sync(dummy_book) == [dummy_book / "notebooks" / "dummy.ipynb"]
    return dummy_book


@pytest.mark.slow
def test_plain_papermill_runs_the_ipynb_into_a_run_folder_of_its_own(dummy_book, tmp_path):
    root = _typed_book(dummy_book)
    out = tmp_path / "out.ipynb"
    cmd = [*PAPERMILL, "notebooks/dummy.ipynb", str(out), "-p", "seed", "3",
           "-f", "params/dummy/tiny.yaml", "--no-progress-bar"]
    res = subprocess.run(cmd, cwd=root, env=_plain_env(), capture_output=True, text=True,
                         timeout=600)
    assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-3000:]
    done = nbformat.read(out, as_version=4)
    assert done.metadata.papermill.parameters == {"seed": 3, "n": 200}
    runs = list((root / "_build" / "runs" / "dummy").iterdir())
    assert len(runs) == 1, runs
    run = json.loads((runs[0] / "run.json").read_text())
    assert run["chapter"] == "dummy" and run["status"] == "ok" and run["wall_s"] > 0
    assert run["run_id"] == runs[0].name and run["versions"]["papermill"]
    assert run["parameters"]["seed"] == 3 and run["seed"] == 3  # as the kernel held them
    claims = json.loads((runs[0] / "claims.json").read_text())
    assert {c["id"] for c in claims} == {"mean-positive", "untestable"}
    assert (runs[0] / "figures" / "histogram.png").exists()
    assert not (root / "_build" / "runs" / "_interactive").exists()
    # a second execution, started from notebooks/, gets a new folder under the book's root
    cmd2 = [*PAPERMILL, "dummy.ipynb", str(out), "-p", "seed", "4", "--no-progress-bar"]
    res = subprocess.run(cmd2, cwd=root / "notebooks", env=_plain_env(), capture_output=True,
                         text=True, timeout=600)
    assert res.returncode == 0, res.stderr[-3000:]
    assert len(list((root / "_build" / "runs" / "dummy").iterdir())) == 2
    assert not (root / "notebooks" / "_build").exists()
    # and papermill reads the typed parameters cell completely
    assert _help(root / "notebooks" / "dummy.ipynb") == {
        "seed": "int", "n": "int", "scale": "str", "shift": "float", "fail": "bool",
        "pause": "float", "note": "Optional[str]"}


def test_sync_check_reports_drift_and_sync_repairs_it(dummy_book):
    assert sync(dummy_book, check=True) == [dummy_book / "notebooks" / "dummy.ipynb"]
    assert not (dummy_book / "notebooks" / "dummy.ipynb").exists()  # check writes nothing
    sync(dummy_book)
    before = (dummy_book / "notebooks" / "dummy.ipynb").read_text()
    assert sync(dummy_book, check=True) == []
    assert sync(dummy_book) == [] and (dummy_book / "notebooks" / "dummy.ipynb").read_text() \
        == before  # deterministic: an unchanged chapter changes no byte
    src = dummy_book / "notebooks" / "dummy.py"
    src.write_text(src.read_text().replace("n = 200", "n = 300"))
    assert sync(dummy_book, check=True) == [dummy_book / "notebooks" / "dummy.ipynb"]
    res = subprocess.run([sys.executable, "-m", "tokenbook.book.notebooks", "--root", str(dummy_book),
                          "--check"], capture_output=True, text=True, timeout=120)
    assert res.returncode == 1 and "notebooks/dummy.ipynb" in res.stdout
    assert "make notebooks" in res.stderr
    src.unlink()  # a generated twin whose chapter is gone is removed
    sync(dummy_book)
    assert not (dummy_book / "notebooks" / "dummy.ipynb").exists()


def test_interactive_start_makes_a_fresh_run_folder_unless_a_runner_gave_one(
        tmp_path, monkeypatch):
    monkeypatch.delenv("TOKENBOOK_RUN_DIR", raising=False)
    monkeypatch.setattr(interactive, "_started", None)
    first = interactive.start("some_chapter", root=tmp_path)
    assert first.parent == tmp_path / "_build" / "runs" / "some_chapter"
    info = json.loads((first / "run.json").read_text())
    assert info["status"] == "interactive" and info["run_id"] == first.name
    assert os.environ["TOKENBOOK_RUN_DIR"] == str(first)
    assert interactive.start("other") == first  # the process keeps its folder
    monkeypatch.setenv("TOKENBOOK_RUN_DIR", str(tmp_path / "given"))
    assert interactive.start("x") == tmp_path / "given"  # tokenbook run's folder wins
    monkeypatch.delenv("TOKENBOOK_RUN_DIR")
    with pytest.raises(ValueError, match="chapter="):
        interactive.start("../escape", root=tmp_path)


CHECKED_PARAMETERS = '''# %% tags=["parameters"]
from tokenbook.book.paramtypes import Count, Scale, SomeLanguages

langs: SomeLanguages = ["de"]  # languages
n: Count = 20  # sample size
scale: Scale = "tiny"  # "tiny" or "paper"
fail: bool = False  # raise in a cell (tests the failure path)

# %%
from tokenbook.book.interactive import check_parameters

check_parameters("dummy", globals())
assert isinstance(langs, list), langs
print("LANGS", langs, "N", n)

# %%
if fail:
    raise RuntimeError("dummy chapter asked to fail")
'''


def _checked_book(dummy_book: Path) -> Path:
    src = dummy_book / "notebooks" / "dummy.py"
    text = src.read_text()
    start = text.index('# %% tags=["parameters"]')
    src.write_text(text[:start] + CHECKED_PARAMETERS)
    (dummy_book / "params" / "dummy" / "tiny.yaml").write_text("n: 20\n")
    assert sync(dummy_book) == [dummy_book / "notebooks" / "dummy.ipynb"]
    return dummy_book


def _papermill(root: Path, out: Path, *args: str) -> tuple[subprocess.CompletedProcess, dict]:
    res = subprocess.run([*PAPERMILL, "notebooks/dummy.ipynb", str(out), *args,
                          "--no-progress-bar"], cwd=root, env=_plain_env(),
                         capture_output=True, text=True, timeout=300)
    runs = sorted((root / "_build" / "runs" / "dummy").iterdir())
    return res, {**json.loads((runs[-1] / "run.json").read_text()), "run_dir": runs[-1]}


@pytest.mark.slow
def test_plain_papermill_checks_parameters_as_the_runner_and_finalises_run_json(dummy_book,
                                                                                tmp_path):
    """papermill path = runner path (#31 item 4): list values given as text are parsed, bad
    and unknown values stop in the setup cell with the runner's one-line error, and run.json
    ends ok/failed with wall_s and the executed notebook copied in."""
    root = _checked_book(dummy_book)
    out = tmp_path / "out.ipynb"
    res, run = _papermill(root, out, "-p", "langs", "[de, nl, fr]", "-p", "n", "5")
    assert res.returncode == 0, res.stderr[-3000:]
    assert "LANGS ['de', 'nl', 'fr'] N 5" in json.dumps(nbformat.read(out, as_version=4).cells)
    assert run["status"] == "ok" and run["error"] is None and run["wall_s"] > 0
    assert run["parameters"]["langs"] == ["de", "nl", "fr"] and run["injected"] is True
    copied = nbformat.read(run["run_dir"] / "dummy.ipynb", as_version=4)
    assert "LANGS ['de', 'nl', 'fr']" in json.dumps(copied.cells)
    for args, says in [(("-p", "n", "abc"), "parameter 'n' expects int"),
                       (("-p", "n", "0"), "parameter 'n' must be >= 1"),
                       (("-p", "langs", "[]"), "parameter 'langs' must hold at least 1"),
                       (("-p", "scale", "papr"), "did you mean 'paper'"),
                       (("-p", "foo", "1"), "has no parameter 'foo'"),
                       (("-p", "fail", "True"), "dummy chapter asked to fail")]:
        res, run = _papermill(root, out, *args)
        assert res.returncode != 0
        assert says in res.stderr, res.stderr[-2000:]
        assert run["status"] == "failed" and says in run["error"], run
        assert run["wall_s"] is not None and (run["run_dir"] / "dummy.ipynb").exists()
        if "fail" not in args:  # stopped in the setup cell, before the work
            outputs = [c.get("outputs") for c in nbformat.read(out, as_version=4).cells]
            assert "SEEDS [" not in json.dumps(outputs)


def test_finalise_records_ok_or_failed_with_wall_time_once(tmp_path, monkeypatch):
    monkeypatch.delenv("TOKENBOOK_RUN_DIR", raising=False)
    monkeypatch.setattr(interactive, "_started", None)
    folder = interactive.start("some_chapter", root=tmp_path)
    monkeypatch.delenv("TOKENBOOK_RUN_DIR")
    interactive.finalise(folder, error="ValueError: boom", wall_s=1.234)
    info = json.loads((folder / "run.json").read_text())
    assert info["status"] == "failed" and info["error"] == "ValueError: boom"
    assert info["wall_s"] == 1.23 and info["finished"]
    interactive.finalise(folder, error=None, wall_s=5.0)  # a finished run is not rewritten
    assert json.loads((folder / "run.json").read_text())["status"] == "failed"
