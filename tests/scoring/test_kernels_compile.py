"""Compile checks of kernels/*.cu without a GPU: nvcc -ptx for sm_80 and sm_90, NVRTC (what
cupy.RawModule runs on the GPU) with the options of tokenbook.scoring.cuda, g++ with the SIMT
harness; and tokenbook.scoring.cuda importing and refusing cleanly without CuPy or a GPU."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from importlib import resources
from pathlib import Path

import pytest

SIMT_H = Path(__file__).resolve().parent / "simt" / "simt.h"
KERNELS = Path(str(resources.files("tokenbook.kernels")))
SOURCES = sorted(p.name for p in KERNELS.glob("*.cu"))


def _entries(ptx: str) -> set[str]:
    return set(re.findall(r"\.entry\s+(\w+)", ptx))


def _expected_entries(name: str) -> set[str]:
    from tokenbook.scoring import cuda

    return {k for k, f in cuda._KERNELS.items() if f == name}


def test_every_kernel_file_is_used():
    from tokenbook.scoring import cuda

    assert SOURCES and set(SOURCES) == set(cuda._KERNELS.values())


@pytest.mark.slow
@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
@pytest.mark.parametrize("name", SOURCES)
def test_nvcc_ptx(tmp_path, name, arch):
    nvcc = shutil.which("nvcc")
    if nvcc is None:
        pytest.skip("nvcc is not on PATH")
    out = tmp_path / f"{name}.{arch}.ptx"
    r = subprocess.run([nvcc, "-ptx", f"-arch={arch}", f"-I{KERNELS}", "-o", str(out), str(KERNELS / name)],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert _entries(out.read_text()) == _expected_entries(name)


@pytest.mark.parametrize("arch", ["compute_90", "sm_80", "sm_90"])
@pytest.mark.parametrize("name", SOURCES)
def test_nvrtc(name, arch):
    """What cupy.RawModule does on the GPU: NVRTC with our options plus CuPy's -ftz=true and
    -arch=sm_XX (a cubin) where NVRTC supports the device, else -arch=compute_XX (PTX)."""
    try:
        from cupy.cuda import nvrtc

        nvrtc.getVersion()
    except Exception as exc:
        pytest.skip(f"NVRTC is not loadable ({type(exc).__name__}: {exc})")
    from tokenbook.scoring import cuda

    prog = nvrtc.createProgram(cuda.kernel_source(name), name, [], [])
    try:
        nvrtc.compileProgram(prog, [f"-arch={arch}", *cuda.compile_options(), "-ftz=true"])
    except Exception:
        pytest.fail(f"NVRTC rejected {name}:\n{nvrtc.getProgramLog(prog)}")
    log = nvrtc.getProgramLog(prog)
    log = log.decode() if isinstance(log, bytes) else log
    assert "warning" not in log.lower(), log
    ptx = nvrtc.getPTX(prog)
    ptx = ptx.decode() if isinstance(ptx, bytes) else ptx
    assert _entries(ptx) == _expected_entries(name)
    if arch.startswith("sm_"):
        cubin = nvrtc.getCUBIN(prog)
        assert all(k.encode() in cubin for k in _expected_entries(name))


@pytest.mark.slow
@pytest.mark.parametrize("name", SOURCES)
def test_gxx_compiles_the_same_source_with_the_harness(tmp_path, name):
    gxx = shutil.which("g++")
    if gxx is None:
        pytest.skip("g++ is not on PATH")
    r = subprocess.run([gxx, "-std=c++20", "-O0", "-pthread", "-fsyntax-only", "-include", str(SIMT_H),
                        f"-I{KERNELS}", "-x", "c++", str(KERNELS / name)], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr


def test_cuda_module_without_a_gpu():
    import torch

    from tokenbook.scoring import cuda

    assert cuda.cuda_available_for(torch.zeros(3)) is False
    assert cuda.cuda_available_for("not a tensor") is False
    src = cuda.kernel_source("row_state.cu")
    assert "row_state_f32" in src and "tb_merge(" in src  # the shared header is inlined
    assert "#include" not in src and "pragma once" not in src


@pytest.mark.slow
def test_cuda_module_imports_without_cupy():
    code = (
        "import sys; sys.modules['cupy'] = None\n"  # makes `import cupy` raise ImportError
        "import torch\n"
        "from tokenbook.scoring import cuda\n"
        "print(cuda.cuda_available_for(torch.zeros(1)), cuda._cupy())\n"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["False", "None"]
