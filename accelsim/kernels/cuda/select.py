"""CUDA kernels for comparisons and `where`: one thread per output element of a flat device array.

Inputs are broadcast to the output's shape on the host, as for the other elementwise kernels; the output
takes the dtype of the compared (or selected) values.
"""
from __future__ import annotations

from typing import Any, Callable

import numpy as np
from numba import cuda

from accelsim.kernels.cuda.launch import device_empty, inline_device, launch_1d, ptx_cases, to_device, to_host
from accelsim.kernels.registry import kernel
from accelsim.ops.select import COMPARISONS

_PREDICATES: dict[str, Callable] = {
    "eq": inline_device(lambda x, y: x == y), "ne": inline_device(lambda x, y: x != y),
    "lt": inline_device(lambda x, y: x < y), "le": inline_device(lambda x, y: x <= y),
    "gt": inline_device(lambda x, y: x > y), "ge": inline_device(lambda x, y: x >= y),
}
assert set(_PREDICATES) == set(COMPARISONS)


def _compare_kernel(predicate: Callable) -> Any:
    def compare(a, b, out):
        i = cuda.grid(1)
        if i < out.size:
            out[i] = out.dtype.type(1) if predicate(a[i], b[i]) else out.dtype.type(0)
    return cuda.jit(compare)


@cuda.jit
def _where(cond, a, b, out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = a[i] if cond[i] != 0 else b[i]


def _flat(x: np.ndarray, shape: tuple[int, ...], dtype: np.dtype) -> Any:
    return to_device(np.broadcast_to(np.asarray(x, dtype), shape).reshape(-1))


def _register(name: str, predicate: Callable) -> None:
    kern = _compare_kernel(predicate)
    ptx_cases(name, kern, "void({T}[::1], {T}[::1], {T}[::1])", name=f"compare_{name}")

    @kernel(name, "cuda")
    def run(a: np.ndarray, b: np.ndarray) -> np.ndarray:
        a = np.asarray(a)
        shape = np.broadcast_shapes(a.shape, np.shape(b))
        n = int(np.prod(shape))
        out = device_empty(max(n, 1), a.dtype)
        launch_1d(kern, n, _flat(a, shape, a.dtype), _flat(b, shape, a.dtype), out)
        return to_host(out, shape)


def _register_int(name: str, predicate: Callable) -> None:
    """int64 operands compared as integers on the device; the mask in `like`'s float dtype."""
    kern = _compare_kernel(predicate)
    ptx_cases(f"int_{name}", kern, "void(int64[::1], int64[::1], {T}[::1])", name=f"compare_int_{name}")

    @kernel(f"int_{name}", "cuda")
    def run(a: np.ndarray, b: np.ndarray, like: np.ndarray) -> np.ndarray:
        dtype = np.asarray(like).dtype
        shape = np.broadcast_shapes(np.shape(a), np.shape(b), np.shape(like))
        n = int(np.prod(shape))
        out = device_empty(max(n, 1), dtype)
        launch_1d(kern, n, _flat(a, shape, np.int64), _flat(b, shape, np.int64), out)
        return to_host(out, shape)


for _name, _predicate in _PREDICATES.items():
    _register(_name, _predicate)
    _register_int(_name, _predicate)

ptx_cases("where", _where, "void({T}[::1], {T}[::1], {T}[::1], {T}[::1])")


@kernel("where", "cuda")
def where(cond: np.ndarray, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """The mask is passed in the values' dtype (a graph's masks are float 0/1)."""
    a = np.asarray(a)
    shape = np.broadcast_shapes(np.shape(cond), a.shape, np.shape(b))
    n = int(np.prod(shape))
    out = device_empty(max(n, 1), a.dtype)
    launch_1d(_where, n, _flat(cond, shape, a.dtype), _flat(a, shape, a.dtype), _flat(b, shape, a.dtype), out)
    return to_host(out, shape)
