"""Build helper for the CPU SIMT harness: compile tokenbook's CUDA kernels with g++ and simt.h into a
shared library and call them from numpy through ctypes.

Used by tests/scoring/test_kernels_*.py (loaded by path: the tests directory is not a package)::

    lib = load(tmp_dir)             # compiles once per source hash (build dir shared per session)
    m, s, u, b, xt = lib.row_state(logits, target, bow, block=128)

The library is keyed by a hash of simt.h, the driver, the kernel sources, the compiler version and
the flags, so a changed kernel is always rebuilt and an unchanged one never is.
"""

from __future__ import annotations

import ctypes
import hashlib
import os
import shutil
import subprocess
from importlib import resources
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
FLAGS = ["-std=c++20", "-O2", "-pthread", "-fPIC", "-shared"]


def kernels_dir() -> Path:
    """Folder of the shipped .cu sources (the package data ``tokenbook.kernels``)."""
    return Path(str(resources.files("tokenbook.kernels")))


def kernel_sources() -> list[Path]:
    return sorted(p for p in kernels_dir().iterdir() if p.suffix in {".cu", ".cuh"})


def compiler() -> str | None:
    """A C++ compiler that accepts -std=c++20 and has <bit>/std::atomic_ref, else None."""
    for cxx in [os.environ.get("CXX"), "g++", "c++", "clang++"]:
        if not cxx or shutil.which(cxx) is None:
            continue
        probe = "#include <bit>\n#include <atomic>\nint main(){float f=0;std::atomic_ref<float>(f).fetch_add(1.f);return std::bit_cast<int>(f)==0;}\n"
        r = subprocess.run([cxx, "-std=c++20", "-x", "c++", "-", "-o", os.devnull],
                           input=probe, text=True, capture_output=True)
        if r.returncode == 0:
            return cxx
    return None


def _source_hash(cxx: str, flags: list[str]) -> str:
    h = hashlib.sha256()
    version = subprocess.run([cxx, "--version"], capture_output=True, text=True).stdout
    h.update(version.encode())
    h.update(" ".join(flags).encode())
    for p in [HERE / "simt.h", HERE / "kernels_cpu.cpp", HERE / "harness_selftest.cu", *kernel_sources()]:
        h.update(p.name.encode())
        h.update(p.read_bytes())
    return h.hexdigest()[:16]


def build(build_root: Path, cxx: str | None = None, defines: tuple[str, ...] = ()) -> Path:
    """Compile (or reuse) the harness library under ``build_root``; returns the .so path.

    ``defines``: extra macros, e.g. ``("SIMT_UCONTEXT",)`` for the portable ucontext fibres.
    """
    cxx = cxx or compiler()
    if cxx is None:
        raise RuntimeError("no C++20 compiler (g++/clang++) found")
    flags = [*FLAGS, *(f"-D{d}" for d in defines)]
    out_dir = Path(build_root) / f"simt-{_source_hash(cxx, flags)}"
    so = out_dir / "tokenbook_kernels_cpu.so"
    if so.exists():
        return so
    out_dir.mkdir(parents=True, exist_ok=True)
    tmp = out_dir / f".{os.getpid()}.so"
    cmd = [cxx, *flags, "-include", str(HERE / "simt.h"), f"-I{kernels_dir()}", f"-I{HERE}",
           "-x", "c++", str(HERE / "kernels_cpu.cpp"), "-o", str(tmp)]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(f"compiling the SIMT harness failed:\n{' '.join(cmd)}\n{r.stderr[-4000:]}")
    os.replace(tmp, so)  # atomic: a concurrent build never sees a half-written library
    return so


_P = ctypes.c_void_p
_I64 = ctypes.c_longlong
_INT = ctypes.c_int


def _ptr(a: np.ndarray | None) -> int | None:
    return None if a is None else a.ctypes.data


def float_to_bf16_bits(x: np.ndarray) -> np.ndarray:
    """float32 -> bfloat16 bit patterns (uint16), round to nearest even (NaN kept)."""
    u = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32).astype(np.uint64)
    r = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)
    nan = np.isnan(x)
    r[nan] = ((u[nan] >> 16) | 0x40).astype(np.uint16)
    return r


def bf16_bits_to_float(b: np.ndarray) -> np.ndarray:
    return (np.asarray(b, dtype=np.uint16).astype(np.uint32) << 16).view(np.float32)


class SimtKernels:
    """numpy front end of the CPU-compiled kernels (same argument conventions as on the GPU)."""

    def __init__(self, so: Path):
        self.lib = ctypes.CDLL(str(so))
        self.lib.simt_last_error.restype = ctypes.c_char_p
        self.lib.tb_row_state.argtypes = [_INT, _P, _I64, _I64, _I64, _P, _P, _P, _P, _P, _P, _P, _INT, _INT]
        self.lib.tb_merge_states.argtypes = [_I64] + [_P] * 15 + [_INT, _INT]
        self.lib.tb_softmax_dots.argtypes = [_INT, _P, _I64, _I64, _I64, _P, _I64, _P, _P, _P, _INT, _INT]
        self.lib.simt_selftest.argtypes = [_INT, _P, _P, _INT, _INT]
        self.lib.simt_indices.argtypes = [_INT] * 6 + [_P]

    def _check(self, rc: int) -> None:
        if rc != 0:
            raise RuntimeError(f"kernel error: {self.lib.simt_last_error().decode()}")

    @staticmethod
    def _logits(logits: np.ndarray) -> tuple[int, np.ndarray, int]:
        """(is_bf16, array, row stride): float32 rows, or uint16 bf16 bit patterns; column stride 1."""
        if logits.ndim != 2:
            raise ValueError("logits must be 2-D [rows, columns]")
        if logits.dtype == np.uint16:
            bf16 = 1
        elif logits.dtype == np.float32:
            bf16 = 0
        else:
            raise TypeError("logits must be float32 or uint16 (bfloat16 bits)")
        if logits.strides[1] != logits.itemsize:
            logits = np.ascontiguousarray(logits)
        return bf16, logits, logits.strides[0] // logits.itemsize

    def row_state(self, logits: np.ndarray, target: np.ndarray | None = None,
                  bow: np.ndarray | None = None, *, block: int = 128, grid: int = 0):
        bf16, x, ld = self._logits(logits)
        n, c = x.shape
        outs = [np.full(n, np.nan, np.float32) for _ in range(5)]
        t = None if target is None else np.ascontiguousarray(target, dtype=np.int64)
        bw = None if bow is None else np.ascontiguousarray(bow, dtype=np.uint8)
        self._check(self.lib.tb_row_state(bf16, _ptr(x), n, c, ld, _ptr(t), _ptr(bw),
                                          *[_ptr(o) for o in outs], block, grid))
        return tuple(outs)

    def merge_states(self, a, c, *, block: int = 64, grid: int = 2):
        n = len(a[0])
        a = [np.ascontiguousarray(v, dtype=np.float32) for v in a]
        c = [np.ascontiguousarray(v, dtype=np.float32) for v in c]
        outs = [np.full(n, np.nan, np.float32) for _ in range(5)]
        self._check(self.lib.tb_merge_states(n, *[_ptr(v) for v in a], *[_ptr(v) for v in c],
                                             *[_ptr(o) for o in outs], block, grid))
        return tuple(outs)

    def softmax_dots(self, logits: np.ndarray, pairs: np.ndarray, m: np.ndarray | None = None,
                     s: np.ndarray | None = None, *, block: int = 128, grid: int = 0) -> np.ndarray:
        """<softmax(l_j), softmax(l_k)> per pair; (m, s) from row_state unless given."""
        bf16, x, ld = self._logits(logits)
        n, c = x.shape
        if m is None or s is None:
            m, s = self.row_state(logits, block=block)[:2]
        p = np.ascontiguousarray(pairs, dtype=np.int64).reshape(-1, 2)
        out = np.full(len(p), -1.0, np.float32)
        if len(p):
            self._check(self.lib.tb_softmax_dots(bf16, _ptr(x), n, c, ld, _ptr(p), len(p),
                                                 _ptr(np.ascontiguousarray(m, np.float32)),
                                                 _ptr(np.ascontiguousarray(s, np.float32)),
                                                 _ptr(out), block, grid))
        return out

    def selftest(self, which: int, values: np.ndarray, *, block: int, grid: int) -> np.ndarray:
        v = np.ascontiguousarray(values, dtype=np.int32)
        out = np.zeros(len(v), np.int32)
        self._check(self.lib.simt_selftest(which, _ptr(v), _ptr(out), block, grid))
        return out


    def indices(self, grid: tuple[int, int, int], block: tuple[int, int, int]) -> np.ndarray:
        """[blocks * threads, 6] rows (threadIdx.xyz, blockIdx.xyz) at each thread's linear index."""
        n = int(np.prod(grid)) * int(np.prod(block))
        out = np.full((n, 6), -1, np.int32)
        self._check(self.lib.simt_indices(*grid, *block, _ptr(out)))
        return out


def load(build_root: Path, defines: tuple[str, ...] = ()) -> SimtKernels:
    return SimtKernels(build(build_root, defines=defines))
