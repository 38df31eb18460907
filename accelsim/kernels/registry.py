"""Kernel registry: real implementations of every op per backend, beside the op's numpy reference.

A kernel has the reference's signature: kernel(*arrays, **node_attrs) -> np.ndarray, on host
arrays, so any backend can stand in for another. Backends: "numpy" (OpDef.ref, the ground truth),
"numba" (CPU, @njit) and "cuda" (numba-cuda; on a GPU, or numba's simulator when
NUMBA_ENABLE_CUDASIM=1). CUDA is imported only when asked for.
"""
from __future__ import annotations

import functools
import importlib
import os
from typing import Callable

import numpy as np

from accelsim.errors import AccelsimError
from accelsim.ops.registry import OPS, get_op

BACKENDS = ("numpy", "numba", "cuda")
Kernel = Callable[..., np.ndarray]
KERNELS: dict[str, dict[str, Kernel]] = {"numba": {}, "cuda": {}}
_PACKAGES = {"numba": "accelsim.kernels.cpu", "cuda": "accelsim.kernels.cuda"}


class KernelError(AccelsimError):
    """A backend is unavailable or has no kernel for an op."""


def kernel(op: str, backend: str) -> Callable[[Kernel], Kernel]:
    """Register the decorated function as `backend`'s kernel for `op`."""
    if backend not in KERNELS:
        raise ValueError(f"backend {backend!r} takes no registered kernels (one of {tuple(KERNELS)})")

    def register(fn: Kernel) -> Kernel:
        if op not in OPS:
            raise ValueError(f"kernel for unknown op {op!r}")
        if op in KERNELS[backend]:
            raise ValueError(f"{backend} kernel for {op!r} registered twice")
        KERNELS[backend][op] = fn
        return fn
    return register


ENABLE_CUDA = ("To run the CUDA kernels on an NVIDIA GPU, install the CUDA toolkit with "
               "`pip install 'accelsim[cuda]'`; without a GPU, set NUMBA_ENABLE_CUDASIM=1 before starting to run "
               "them in numba's CUDA simulator (slow: small shapes only).")
"""How to get a usable cuda backend: the base install has numba-cuda but not the toolkit's wheels."""


def _probe_kernel(out):  # the smallest kernel: compiling it needs every part of the toolkit numba uses
    out[0] = 1.0


@functools.cache
def _toolkit_problem() -> str | None:
    """Why numba cannot compile a CUDA kernel here (NVVM or NVRTC not found), or None: once per process."""
    from numba import cuda

    try:
        # a fixed target, so no driver is asked; 7.5 is the oldest that CUDA 13 still compiles for
        cuda.compile_ptx(_probe_kernel, "void(float32[:])", cc=(7, 5))
    except Exception as e:  # numba-cuda raises several kinds here (library not found, NVVM/NVRTC errors)
        first_line = (str(e).strip().splitlines() or [type(e).__name__])[0]
        first_line = first_line if len(first_line) <= 200 else first_line[:197] + "..."
        if isinstance(e, _MISMATCH_ERRORS):  # Python-level: numba-cuda's own code broke, not a missing library
            return f"{_MISMATCH}{type(e).__name__}: {first_line}"
        return first_line
    return None


_MISMATCH_ERRORS = (AttributeError, ImportError, TypeError, NameError)
"""What numba-cuda raises when it cannot run beside the installed numpy or numba (seen on an H200 machine:
numba-cuda 0.30.4 with numpy 2.5 fails on the removed `np.row_stack`), as opposed to the toolkit's
library-not-found and NVVM/NVRTC errors."""
_MISMATCH = "numba-cuda's own code fails with the installed packages (a version mismatch, not the toolkit) "


def _versions() -> str:
    """numba-cuda, numba and numpy's versions, for a message about how they fit together."""
    from importlib import metadata

    found = []
    for name in ("numba-cuda", "numba", "numpy"):
        try:
            found.append(f"{name} {metadata.version(name)}")
        except metadata.PackageNotFoundError:
            found.append(f"{name} (not found)")
    return ", ".join(found)


def cuda_available() -> tuple[bool, str]:
    """(usable, why not in one paragraph): a GPU and the CUDA toolkit, or the simulator switched on before
    numba.cuda was imported."""
    if os.environ.get("NUMBA_ENABLE_CUDASIM") == "1":
        return True, "numba CUDA simulator"
    try:
        from numba import cuda
    except ImportError as e:  # pragma: no cover - numba-cuda is a dependency
        return False, f"numba-cuda is not installed ({e}). {ENABLE_CUDA}"
    if not cuda.is_available():
        return False, f"no CUDA GPU is available. {ENABLE_CUDA}"
    problem = _toolkit_problem()
    if problem is not None and problem.startswith(_MISMATCH):
        return False, (f"a CUDA GPU is present but numba-cuda cannot compile a kernel: {problem}; installed: "
                       f"{_versions()}. Install versions that work together: `pip install -U numba numba-cuda` lets pip "
                       f"pick a numpy that numba supports.")
    if problem is not None:
        return False, f"a CUDA GPU is present but the CUDA toolkit cannot be loaded ({problem}). {ENABLE_CUDA}"
    return True, "GPU"


def load_backend(backend: str) -> dict[str, Kernel]:
    """Import a backend's kernels (once) and return them by op name."""
    if backend not in BACKENDS:
        raise KernelError(f"backend must be one of {', '.join(BACKENDS)}, got {backend!r}")
    if backend == "numpy":
        return {name: op.ref for name, op in OPS.items()}
    if backend == "cuda":
        ok, why = cuda_available()
        if not ok:
            raise KernelError(f"the cuda backend cannot run: {why}")
    importlib.import_module(_PACKAGES[backend])
    return KERNELS[backend]


def get_kernel(op: str, backend: str) -> Kernel:
    kernels = load_backend(backend)
    get_op(op)
    if op not in kernels:
        raise KernelError(f"the {backend} backend has no kernel for op {op!r}")
    return kernels[op]


PTX_CASES: list[tuple[str, Callable, str]] = []
"""(name, python function of a @cuda.jit kernel, type signature): every CUDA kernel, so a test can
compile each to PTX for a current GPU (cc 9.0) even where the simulator would accept it."""


def ptx_case(name: str, py_func: Callable, signature: str) -> None:
    PTX_CASES.append((name, py_func, signature))
