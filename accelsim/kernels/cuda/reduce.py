"""Reductions: the host moves the reduced axes last, so every kernel reduces rows of a (rows, cols) array.

A row belongs to `lanes` threads along x that stride over its columns and then combine in shared
memory (`lane_sum`, `lane_max`); several short rows share a block along y. norm.py and nn.py
build their row kernels from the same pieces.
"""
from __future__ import annotations

import math
from typing import Sequence

import numpy as np
from numba import cuda

from accelsim.kernels.cuda.launch import (MAX_BLOCK, device_empty, inline_device, ptx_cases, row_launch, to_device,
                                          to_host)
from accelsim.kernels.cuda.shape import unpermute
from accelsim.kernels.registry import kernel


# ---- block-level pieces (every thread of the block must call a lane_* function) ---------

@inline_device
def lane_sum(scratch, v):
    """Sum of v over this row's lanes (threadIdx.x); every lane gets it. blockDim.x is a power of two."""
    lanes = cuda.blockDim.x
    base = cuda.threadIdx.y * lanes
    t = cuda.threadIdx.x
    scratch[base + t] = v
    cuda.syncthreads()
    step = lanes // 2
    while step > 0:
        if t < step:
            scratch[base + t] += scratch[base + t + step]
        cuda.syncthreads()
        step //= 2
    total = scratch[base]
    cuda.syncthreads()  # scratch is free again when this returns
    return total


@inline_device
def lane_max(scratch, v):
    """Max of v over this row's lanes, as lane_sum."""
    lanes = cuda.blockDim.x
    base = cuda.threadIdx.y * lanes
    t = cuda.threadIdx.x
    scratch[base + t] = v
    cuda.syncthreads()
    step = lanes // 2
    while step > 0:
        if t < step and scratch[base + t + step] > scratch[base + t]:
            scratch[base + t] = scratch[base + t + step]
        cuda.syncthreads()
        step //= 2
    total = scratch[base]
    cuda.syncthreads()
    return total


@inline_device
def row_of_thread(rows):
    """(this thread's row, whether it is a real row): blocks past the last row still join the reductions."""
    r = cuda.blockIdx.x * cuda.blockDim.y + cuda.threadIdx.y
    return r, r < rows


@inline_device
def row_total(scratch, x, r, live):
    """Sum of row r of the 2-D array x."""
    acc = x.dtype.type(0)
    if live:
        for c in range(cuda.threadIdx.x, x.shape[1], cuda.blockDim.x):
            acc += x[r, c]
    return lane_sum(scratch, acc)


# ---- kernels ---------------------------------------------------------------------------

@cuda.jit
def _sum_rows(x, out):
    scratch = cuda.shared.array(MAX_BLOCK, x.dtype)
    r, live = row_of_thread(x.shape[0])
    total = row_total(scratch, x, r, live)
    if live and cuda.threadIdx.x == 0:
        out[r] = total


@cuda.jit
def mean_rows(x, out):
    scratch = cuda.shared.array(MAX_BLOCK, x.dtype)
    r, live = row_of_thread(x.shape[0])
    total = row_total(scratch, x, r, live)
    if live and cuda.threadIdx.x == 0:
        out[r] = total / x.dtype.type(x.shape[1])


@cuda.jit
def _max_rows(x, out):
    scratch = cuda.shared.array(MAX_BLOCK, x.dtype)
    r, live = row_of_thread(x.shape[0])
    best = x.dtype.type(-math.inf)
    if live:
        for c in range(cuda.threadIdx.x, x.shape[1], cuda.blockDim.x):
            best = max(best, x[r, c])
    best = lane_max(scratch, best)
    if live and cuda.threadIdx.x == 0:
        out[r] = best


@cuda.jit
def _max_grad_rows(g, x, y, out):
    """out[r, c] = g[r] / (number of maxima of row r) where x[r, c] == y[r], else 0."""
    scratch = cuda.shared.array(MAX_BLOCK, x.dtype)
    r, live = row_of_thread(x.shape[0])
    ties = x.dtype.type(0)
    if live:
        for c in range(cuda.threadIdx.x, x.shape[1], cuda.blockDim.x):
            if x[r, c] == y[r]:
                ties += x.dtype.type(1)
    ties = lane_sum(scratch, ties)
    if live:
        for c in range(cuda.threadIdx.x, x.shape[1], cuda.blockDim.x):
            out[r, c] = g[r] / ties if x[r, c] == y[r] else x.dtype.type(0)


_ROWS = "void({T}[:, ::1], {T}[::1])"
ptx_cases(("sum", "sum_to"), _sum_rows, _ROWS)
ptx_cases(("mean", "softmax_cross_entropy"), mean_rows, _ROWS)
ptx_cases("max", _max_rows, _ROWS)
ptx_cases("max_grad", _max_grad_rows, "void({T}[::1], {T}[:, ::1], {T}[::1], {T}[:, ::1])")


# ---- host side ---------------------------------------------------------------------------

def rows_last(x: np.ndarray, axes: Sequence[int]) -> tuple[np.ndarray, tuple[int, ...]]:
    """(x with `axes` moved last, as a C-contiguous (rows, cols) array; the permutation used)."""
    x = np.asarray(x)
    axes = tuple(sorted(a % x.ndim for a in axes)) if x.ndim else ()
    perm = tuple(a for a in range(x.ndim) if a not in axes) + axes
    cols = int(np.prod([x.shape[a] for a in axes]))
    return np.ascontiguousarray(x.transpose(perm)).reshape(-1, cols), perm


def reduce_rows(kern, d_x2, rows: int, cols: int, dtype: np.dtype):
    """kern(d_x2, out) for a (rows, cols) device array: the rows' results as a flat device array."""
    out = device_empty(rows, dtype)
    blocks, threads = row_launch(rows, cols)
    kern[blocks, threads](d_x2, out)
    return out


def _reduce(kern, x: np.ndarray, axes: Sequence[int], keepdims: bool) -> np.ndarray:
    x = np.asarray(x)
    x2, _ = rows_last(x, axes)
    out = reduce_rows(kern, to_device(x2), x2.shape[0], x2.shape[1], x.dtype)
    if keepdims:
        return to_host(out, tuple(1 if a in axes else d for a, d in enumerate(x.shape)))
    return to_host(out, tuple(d for a, d in enumerate(x.shape) if a not in axes))


@kernel("sum", "cuda")
def sum_(x: np.ndarray, axes: Sequence[int], keepdims: bool) -> np.ndarray:
    return _reduce(_sum_rows, x, axes, keepdims)


@kernel("mean", "cuda")
def mean(x: np.ndarray, axes: Sequence[int], keepdims: bool) -> np.ndarray:
    return _reduce(mean_rows, x, axes, keepdims)


@kernel("max", "cuda")
def max_(x: np.ndarray, axes: Sequence[int], keepdims: bool) -> np.ndarray:
    return _reduce(_max_rows, x, axes, keepdims)


@kernel("sum_to", "cuda")
def sum_to(x: np.ndarray, shape: Sequence[int]) -> np.ndarray:
    x = np.asarray(x)
    lead = x.ndim - len(shape)
    axes = tuple(range(lead)) + tuple(lead + i for i, d in enumerate(shape) if d == 1 and x.shape[lead + i] != 1)
    return _reduce(_sum_rows, x, axes, True).reshape(tuple(shape))


@kernel("max_grad", "cuda")
def max_grad(g: np.ndarray, x: np.ndarray, y: np.ndarray, axes: Sequence[int], keepdims: bool) -> np.ndarray:
    x = np.asarray(x)
    x2, perm = rows_last(x, axes)
    rows, cols = x2.shape
    out = device_empty((rows, cols), x.dtype)
    blocks, threads = row_launch(rows, cols)
    _max_grad_rows[blocks, threads](to_device(np.reshape(g, -1), x.dtype), to_device(x2),
                                    to_device(np.reshape(y, -1), x.dtype), out)
    return unpermute(out.reshape(rows * cols), x.shape, perm, x.dtype)
