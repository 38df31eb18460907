"""Launch plumbing shared by the CUDA kernels: grid sizes, host <-> device copies, PTX cases.

Device helpers are `inline_device` functions: numba inlines them into each kernel's IR, so
`compile_ptx` needs no GPU (a separately compiled device function asks the driver for the
current device's compute capability) and the kernels carry no call overhead.
"""
from __future__ import annotations

from functools import partial
from typing import Any, Iterable

import numpy as np
from numba import cuda

from accelsim.kernels.registry import ptx_case

THREADS = 256
"""Threads per block of a one-thread-per-element kernel."""
MAX_BLOCK = 256
"""Most threads of a block that reduces rows in shared memory (the size of its shared scratch)."""
FLOATS = ("float32", "float64")

inline_device = partial(cuda.jit, device=True, inline="always")


def ptx_cases(ops: str | Iterable[str], kern: Any, signature: str, name: str | None = None) -> None:
    """Record `kern` for the PTX test once per float dtype; `{T}` in signature is the dtype.

    Case names are "<op>:<kernel name>[<dtype>]", so the test can check that every op has one;
    `name` defaults to the kernel function's (pass one for kernels built by a factory).
    """
    name = name or kern.py_func.__name__
    for op in (ops,) if isinstance(ops, str) else ops:
        for t in FLOATS:
            ptx_case(f"{op}:{name}[{t}]", kern.py_func, signature.format(T=t))


def grid_1d(n: int) -> tuple[int, int]:
    """(blocks, threads) covering n elements with one thread each."""
    threads = max(1, min(THREADS, n))
    return (n + threads - 1) // threads, threads


def launch_1d(kern: Any, n: int, *args: Any) -> None:
    """Run kern with one thread per element of an n-element range (nothing when n == 0)."""
    if n > 0:
        blocks, threads = grid_1d(n)
        kern[blocks, threads](*args)


def row_launch(rows: int, cols: int) -> tuple[int, tuple[int, int]]:
    """(blocks, (lanes, rows per block)) for a kernel that reduces each row of a (rows, cols) array.

    A row is shared by `lanes` threads along x (a power of two, so a tree reduction halves it
    evenly); short rows pack several to a block along y, so no block is mostly idle.
    """
    lanes = 1
    while lanes < min(cols, MAX_BLOCK):
        lanes *= 2
    per_block = max(1, min(MAX_BLOCK // lanes, rows))
    return (rows + per_block - 1) // per_block, (lanes, per_block)


def to_device(a: Any, dtype: Any = None) -> Any:
    """A C-contiguous device copy of a (0-d arrays become 1-element vectors)."""
    a = np.ascontiguousarray(a, dtype=dtype)
    return cuda.to_device(a.reshape(1) if a.ndim == 0 else a)


def device_empty(shape: tuple[int, ...], dtype: Any) -> Any:
    return cuda.device_array(shape, dtype=dtype)


def to_host(d: Any, shape: tuple[int, ...]) -> np.ndarray:
    """The device array d copied back as an array of `shape` (() gives a 0-d array).

    d may hold one spare element: empty results are allocated with one, as devices need."""
    return d.copy_to_host().reshape(-1)[: int(np.prod(shape))].reshape(shape)
