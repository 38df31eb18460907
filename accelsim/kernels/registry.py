"""Kernel registry: real implementations of every op per backend, beside the op's numpy reference.

A kernel has the reference's signature: kernel(*arrays, **node_attrs) -> np.ndarray, on host
arrays, so any backend can stand in for another. Backends: "numpy" (OpDef.ref, the ground truth),
"numba" (CPU, @njit) and "cuda" (numba-cuda; on a GPU, or numba's simulator when
NUMBA_ENABLE_CUDASIM=1). CUDA is imported only when asked for.
"""
from __future__ import annotations

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


def cuda_available() -> tuple[bool, str]:
    """(usable, why not): a GPU, or the simulator switched on before numba.cuda was imported."""
    if os.environ.get("NUMBA_ENABLE_CUDASIM") == "1":
        return True, "numba CUDA simulator"
    try:
        from numba import cuda
    except ImportError as e:  # pragma: no cover - numba-cuda is a dependency
        return False, f"numba-cuda is not installed ({e})"
    if cuda.is_available():
        return True, "GPU"
    return False, ("no CUDA GPU is available; set NUMBA_ENABLE_CUDASIM=1 before starting to run the CUDA "
                   "kernels in numba's simulator (slow: small shapes only)")


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
