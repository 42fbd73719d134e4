"""benchmarks/gpu_checks.sh, the one command a GPU session runs, runs every test marked ``gpu``:
a new GPU test file that the script does not list would never run anywhere."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
MARKED = re.compile(r"^(pytestmark = pytest\.mark\.gpu|@pytest\.mark\.gpu)\b", re.MULTILINE)


def gpu_test_files() -> list[str]:
    return sorted(str(p.relative_to(ROOT)) for p in (ROOT / "tests").rglob("test_*.py")
                  if MARKED.search(p.read_text(encoding="utf-8")))


def test_the_gpu_script_runs_every_gpu_test_file():
    script = (ROOT / "benchmarks" / "gpu_checks.sh").read_text(encoding="utf-8")
    files = gpu_test_files()
    assert "tests/scoring/test_kernels_gpu.py" in files          # the scan finds the markers
    missing = [f for f in files if f not in script]
    assert not missing, f"benchmarks/gpu_checks.sh does not run {missing}: add them to gpu_tests"
