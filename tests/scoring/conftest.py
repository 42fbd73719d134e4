"""Fixtures shared by the kernel tests: the CPU SIMT harness (tests/scoring/simt/), built once
per session from the same kernels/*.cu sources the GPU compiles."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

_BUILD = Path(__file__).resolve().parent / "simt" / "build.py"


def _build_module():
    name = "tokenbook_simt_build"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, _BUILD)
        mod = importlib.util.module_from_spec(spec)
        sys.modules[name] = mod
        spec.loader.exec_module(mod)
    return sys.modules[name]


@pytest.fixture(scope="session")
def simt_build():
    """tests/scoring/simt/build.py as a module (compiler lookup, bf16 helpers, ``load``)."""
    return _build_module()


@pytest.fixture(scope="session")
def simt(simt_build, tmp_path_factory):
    """The kernels compiled for the CPU with the SIMT harness (skips without a C++20 compiler)."""
    if simt_build.compiler() is None:
        pytest.skip("no C++20 compiler (g++ >= 10 or clang++ with <bit> and std::atomic_ref) on PATH")
    return simt_build.load(tmp_path_factory.getbasetemp() / "simt")
