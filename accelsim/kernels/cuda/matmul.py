"""Tiled GEMM in shared memory, and batched matmul built on it (conv.py builds its implicit GEMMs on it too).

`tiled_gemm` makes a kernel from four inlined functions that say where the GEMM's dimensions,
A and B elements and results live, so operands are read in place (or gathered on the fly).
A block computes a (blockDim.y x blockDim.x) tile of the output, one element per thread, walking
the contraction TK at a time through shared memory; the host shapes the tile to the problem,
so skinny GEMMs (few output channels, a depthwise conv) do not idle most of each block.
"""
from __future__ import annotations

from typing import Any, Callable

import numpy as np
from numba import cuda

from accelsim.kernels.cuda.launch import device_empty, inline_device, ptx_cases, to_device, to_host
from accelsim.kernels.registry import kernel

TK = 16  # contraction step: columns of the A tile, rows of the B tile
MAX_TM = 256  # most output rows per block (the A tile's rows)
MAX_TN = 16  # most output columns per block (the B tile's columns)
BLOCK_THREADS = 256


def tiled_gemm(dims: Callable, a_at: Callable, b_at: Callable, put: Callable) -> Any:
    """A kernel (p, q, out, geo) computing out = A @ B for each batch or group z = blockIdx.z, with
    (rows, depth, cols) = dims(p, q, out, geo), A[r, k] = a_at(p, q, out, geo, z, r, k),
    B[k, c] = b_at(p, q, out, geo, z, k, c), and put(p, q, out, geo, z, r, c, value) storing out."""
    def tiled_gemm(p, q, out, geo):
        a_tile = cuda.shared.array((MAX_TM, TK), p.dtype)
        b_tile = cuda.shared.array((TK, MAX_TN), p.dtype)
        tile_m, tile_n = cuda.blockDim.y, cuda.blockDim.x
        tx, ty, z = cuda.threadIdx.x, cuda.threadIdx.y, cuda.blockIdx.z
        rows, depth, cols = dims(p, q, out, geo)
        row0, col0 = cuda.blockIdx.x * tile_m, cuda.blockIdx.y * tile_n  # rows on x: grid x has no 65535 cap
        tid, nthreads = ty * tile_n + tx, tile_m * tile_n
        zero = p.dtype.type(0)
        acc = zero
        for k0 in range(0, depth, TK):
            # the block stages both tiles cooperatively; zeros pad the ragged edges
            for e in range(tid, tile_m * TK, nthreads):
                r, k = row0 + e // TK, k0 + e % TK
                a_tile[e // TK, e % TK] = a_at(p, q, out, geo, z, r, k) if r < rows and k < depth else zero
            for e in range(tid, TK * tile_n, nthreads):
                k, c = k0 + e // tile_n, col0 + e % tile_n
                b_tile[e // tile_n, e % tile_n] = b_at(p, q, out, geo, z, k, c) if k < depth and c < cols else zero
            cuda.syncthreads()
            for k in range(TK):
                acc += a_tile[ty, k] * b_tile[k, tx]
            cuda.syncthreads()
        if row0 + ty < rows and col0 + tx < cols:
            put(p, q, out, geo, z, row0 + ty, col0 + tx, acc)
    return cuda.jit(tiled_gemm)


def _pow2_at_least(n: int, cap: int) -> int:
    p = 1
    while p < min(n, cap):
        p *= 2
    return p


def gemm_launch(rows: int, cols: int, batches: int) -> tuple[tuple[int, int, int], tuple[int, int]]:
    """(grid, block) for a tiled_gemm kernel: the tile is as wide as cols allows (up to MAX_TN), then
    as tall as fits BLOCK_THREADS, shrunk to the problem when it is small."""
    tile_n = _pow2_at_least(cols, MAX_TN)
    tile_m = _pow2_at_least(rows, min(MAX_TM, BLOCK_THREADS // tile_n))
    grid = ((rows + tile_m - 1) // tile_m, (cols + tile_n - 1) // tile_n, batches)
    return grid, (tile_n, tile_m)


# ---- matmul: p = a (B|1, m, k), q = b (B|1, k, n), out (B, m, n); geo unused --------------

@inline_device
def _mm_dims(a, b, out, geo):
    return a.shape[1], a.shape[2], b.shape[2]


@inline_device
def _mm_a(a, b, out, geo, z, r, k):
    return a[z if a.shape[0] > 1 else 0, r, k]


@inline_device
def _mm_b(a, b, out, geo, z, k, c):
    return b[z if b.shape[0] > 1 else 0, k, c]


@inline_device
def _mm_put(a, b, out, geo, z, r, c, v):
    out[z, r, c] = v


_matmul = tiled_gemm(_mm_dims, _mm_a, _mm_b, _mm_put)
ptx_cases("matmul", _matmul, "void({T}[:, :, ::1], {T}[:, :, ::1], {T}[:, :, ::1], int64[::1])",
          name="tiled_gemm_matmul")


def gemm_operands(a: np.ndarray, b: np.ndarray, transpose_a: bool, transpose_b: bool):
    """The host side every tiled-GEMM launch shares: (a as (batches, m, k), b as (batches, k, n), the
    output's batch shape, m, n, batches), transposes applied; the GEMM kernels take 3-d operands."""
    a, b = np.asarray(a), np.asarray(b)
    if transpose_a:
        a = np.swapaxes(a, -1, -2)
    if transpose_b:
        b = np.swapaxes(b, -1, -2)
    batch_shape = a.shape[:-2] or b.shape[:-2]
    (m, k), n = a.shape[-2:], b.shape[-1]
    a3, b3 = a.reshape(-1, m, k), b.reshape(-1, k, n)
    return a3, b3, batch_shape, m, n, max(a3.shape[0], b3.shape[0])


@kernel("matmul", "cuda")
def matmul(a: np.ndarray, b: np.ndarray, transpose_a: bool, transpose_b: bool) -> np.ndarray:
    a3, b3, batch_shape, m, n, batches = gemm_operands(a, b, transpose_a, transpose_b)
    out = device_empty((batches, m, n), a3.dtype)
    grid, block = gemm_launch(m, n, batches)
    _matmul[grid, block](to_device(a3), to_device(b3, a3.dtype), out, to_device(np.zeros(1, np.int64)))
    return to_host(out, (*batch_shape, m, n))
