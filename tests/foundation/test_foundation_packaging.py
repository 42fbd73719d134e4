"""Packaging and environment: the lock, environment.yml and pyproject agree with the tree."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def _lock_lines() -> list[str]:
    lines = (REPO / "requirements" / "lock.txt").read_text().splitlines()
    return [ln.strip() for ln in lines if ln.strip() and not ln.lstrip().startswith("#")]


def _pyproject() -> dict:
    return tomllib.loads((REPO / "pyproject.toml").read_text())


def test_lock_is_exact_and_torch_pinned():
    lines = _lock_lines()
    assert all(re.fullmatch(r"[A-Za-z0-9_.\-\[\]]+==[^=\s]+", ln) for ln in lines), \
        [ln for ln in lines if "==" not in ln]
    names = [ln.split("==")[0].lower().replace("_", "-") for ln in lines]
    assert len(names) == len(set(names)), "a package is pinned twice"
    assert "torch==2.13.0" in lines  # no +cpu local tag: resolves on every platform
    assert "torchvision" not in names and "tokenbook" not in names
    deps = _pyproject()["project"]["dependencies"]
    assert "torch==2.13.0" in deps  # pinned exactly: a range pulls a multi-GB CUDA build


def test_environment_yml_pip_section_is_the_lock():
    import yaml

    env = yaml.safe_load((REPO / "environment.yml").read_text())
    assert "python=3.11" in env["dependencies"]
    pip = [d["pip"] for d in env["dependencies"] if isinstance(d, dict) and "pip" in d]
    assert len(pip) == 1
    assert sorted(pip[0]) == sorted(_lock_lines())


def test_every_package_folder_is_listed():
    cfg = _pyproject()["tool"]["setuptools"]
    listed = set(cfg["packages"])
    found = set()
    lib = REPO / "lib"
    for folder in (lib / "tokenbook").rglob("*"):
        if folder.is_dir() and folder.name != "__pycache__" and any(folder.glob("*.py")):
            assert (folder / "__init__.py").exists(), f"{folder} has modules but no __init__.py"
            found.add(".".join(folder.relative_to(lib).parts))
    found.add("tokenbook")
    missing = found - listed
    assert not missing, f"pyproject.toml [tool.setuptools] packages lacks {sorted(missing)}"
    assert "tokenbook.kernels" in listed


def test_kernels_ship_as_package_data():
    cfg = _pyproject()["tool"]["setuptools"]
    assert cfg["package-dir"]["tokenbook.kernels"] == "kernels"
    patterns = cfg["package-data"]["tokenbook.kernels"]
    kernels = [p for p in (REPO / "kernels").iterdir() if p.suffix in (".cu", ".cuh", ".h")]
    for k in kernels:
        assert any(Path(k.name).match(p) for p in patterns), f"{k.name} not shipped"
    assert (REPO / "kernels" / "__init__.py").exists()
    from importlib import resources

    shipped = {p.name for p in resources.files("tokenbook.kernels").iterdir()}
    assert {k.name for k in kernels} <= shipped


@pytest.mark.slow
def test_wheel_contains_every_subpackage_and_the_kernels(tmp_path):
    src = tmp_path / "src"
    src.mkdir()
    for name in ("pyproject.toml", "README.md"):
        if (REPO / name).exists():
            shutil.copy(REPO / name, src / name)
    shutil.copytree(REPO / "lib", src / "lib",
                    ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
    shutil.copytree(REPO / "kernels", src / "kernels",
                    ignore=shutil.ignore_patterns("__pycache__"))
    code = ("import sys; from setuptools import build_meta as b; "
            "print(b.build_wheel(sys.argv[1]))")
    res = subprocess.run([sys.executable, "-c", code, str(tmp_path / "dist")], cwd=src,
                         capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr[-3000:]
    wheel = tmp_path / "dist" / res.stdout.strip().splitlines()[-1]
    names = zipfile.ZipFile(wheel).namelist()
    for pkg in _pyproject()["tool"]["setuptools"]["packages"]:
        assert f"{pkg.replace('.', '/')}/__init__.py" in names, pkg
    for k in (REPO / "kernels").glob("*.cu"):
        assert f"tokenbook/kernels/{k.name}" in names
    entry = [n for n in names if n.endswith("entry_points.txt")]
    assert entry and "tokenbook = tokenbook.book.cli:main" in zipfile.ZipFile(wheel).read(
        entry[0]).decode()


def test_only_generated_notebook_json_is_committed():
    # The chapters are jupytext .py files. The only committed .ipynb are generated: the chapters'
    # twins (notebooks/<chapter>.ipynb, `make notebooks`; a drift test keeps them in sync), the
    # exercise pages' student editions (notebooks/exercises/<chapter>.ipynb, the same command
    # and drift test) and the nbval references (tests/nbval/<chapter>.ipynb, `make nbval-refs`).
    res = subprocess.run(["git", "ls-files", "*.ipynb"], cwd=REPO, capture_output=True, text=True)
    if res.returncode != 0:
        pytest.skip("not a git checkout")
    chapters = {p.stem for p in (REPO / "notebooks").glob("*.py")}
    pages = {p.stem for p in (REPO / "notebooks" / "exercises").glob("*.py")}
    allowed = ({f"notebooks/{c}.ipynb" for c in chapters} | {f"tests/nbval/{c}.ipynb" for c in chapters}
               | {f"notebooks/exercises/{c}.ipynb" for c in pages})
    stray = sorted(set(res.stdout.split()) - allowed)
    assert stray == [], f"hand-made .ipynb committed (keep chapters as jupytext .py): {stray}"
