"""numba CPU kernels for comparisons and `where`: one parallel pass over the flat output.

Inputs are broadcast to the output's shape on the host (np.broadcast_to, then a contiguous copy): masks and
selections are a small part of a step's work, so these kernels keep to the simplest correct loop.
"""
from __future__ import annotations

import numba
import numpy as np

from accelsim.kernels.registry import kernel
from accelsim.ops.select import COMPARISON_CODES

_jit = numba.njit(parallel=True, cache=True, error_model="numpy")
_EQ, _NE, _LT, _LE, _GT, _GE = range(6)
assert COMPARISON_CODES == {"eq": _EQ, "ne": _NE, "lt": _LT, "le": _LE, "gt": _GT, "ge": _GE}


def _flat(x: np.ndarray, shape: tuple[int, ...], dtype: np.dtype) -> np.ndarray:
    return np.ascontiguousarray(np.broadcast_to(np.asarray(x, dtype), shape)).reshape(-1)


@_jit
def _compare(code, a, b, out):
    for i in numba.prange(out.size):
        x, y = a[i], b[i]
        if code == _EQ:
            hit = x == y
        elif code == _NE:
            hit = x != y
        elif code == _LT:
            hit = x < y
        elif code == _LE:
            hit = x <= y
        elif code == _GT:
            hit = x > y
        else:
            hit = x >= y
        out[i] = 1 if hit else 0


@_jit
def _where(cond, a, b, out):
    for i in numba.prange(out.size):
        out[i] = a[i] if cond[i] != 0 else b[i]


def _comparison(code: int):
    def run(a: np.ndarray, b: np.ndarray) -> np.ndarray:
        a = np.asarray(a)
        shape = np.broadcast_shapes(a.shape, np.shape(b))
        out = np.empty(shape, a.dtype)
        _compare(code, _flat(a, shape, a.dtype), _flat(b, shape, a.dtype), out.reshape(-1))
        return out
    return run


def _int_comparison(code: int):
    """int64 operands compared as integers (never through a float); the mask takes `like`'s float dtype."""
    def run(a: np.ndarray, b: np.ndarray, like: np.ndarray) -> np.ndarray:
        shape = np.broadcast_shapes(np.shape(a), np.shape(b), np.shape(like))
        out = np.empty(shape, np.asarray(like).dtype)
        _compare(code, _flat(a, shape, np.int64), _flat(b, shape, np.int64), out.reshape(-1))
        return out
    return run


for _name, _code in COMPARISON_CODES.items():
    kernel(_name, "numba")(_comparison(_code))
    kernel(f"int_{_name}", "numba")(_int_comparison(_code))


@kernel("where", "numba")
def where(cond: np.ndarray, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    a = np.asarray(a)
    shape = np.broadcast_shapes(np.shape(cond), a.shape, np.shape(b))
    out = np.empty(shape, a.dtype)
    cond = np.asarray(cond)
    _where(_flat(cond, shape, cond.dtype), _flat(a, shape, a.dtype), _flat(b, shape, a.dtype), out.reshape(-1))
    return out
