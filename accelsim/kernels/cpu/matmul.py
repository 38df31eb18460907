"""numba CPU GEMM: a cache-blocked, multithreaded matmul built on one vectorized micro-kernel.

The micro-kernel updates an 8-row strip of C, c[i:i+8, :n] += a[i:i+8, k:k+4] @ b[k:k+4, :n]:
32 scalars of a are held while the loop over the contiguous columns j reads 4 rows of b, and
LLVM vectorizes that loop (32 FMAs per 8 loads and 8 stores of c). b is first packed into
row-major column panels with padded rows; a is read in place by strides, so a transposed or
broadcast a costs nothing. Tasks own (row tile, panel) pairs of C and walk k in blocks, so a
block of the panel stays in L2 while every 8-row strip of the tile passes over it.
"""
from __future__ import annotations

import numba
import numpy as np

from accelsim.kernels.registry import kernel

# Contraction chains reassociate, which the vectorized loop needs; no NaN/inf assumptions.
FASTMATH = {"contract", "reassoc"}
ROWS, DEPTH = 8, 4       # micro-kernel: rows of c per strip, k steps per pass over the strip
TILE_COLS = 512          # columns per task: an 8-row strip of c (16 KiB in float32) stays in L1
TILE_ROWS = 128          # rows per task: each panel block in L2 serves 16 strips
K_BLOCK = 256            # k per block: (K_BLOCK, TILE_COLS) of a packed panel stays in L2
PAD = 16                 # elements added to each packed row, so rows are never a multiple of 4 KiB
                         # apart: such rows share cache sets and stall loads on 4K aliasing


@numba.njit(cache=True)
def cdiv(a, b):
    """ceil(a / b) for positive ints."""
    return (a + b - 1) // b


@numba.njit(fastmath=FASTMATH, cache=True)
def _strip(a, b, c, ia, ic, k0, k1, n):
    """c[ic:ic+8, :n] += a[ia:ia+8, k0:k1] @ b[k0:k1, :n]; k1 - k0 is a multiple of DEPTH.

    n is unsigned, so numba emits no negative-index wraparound for j, which would keep LLVM
    from vectorizing the loop over j.
    """
    for k in range(k0, k1, DEPTH):
        w00, w01, w02, w03 = a[ia, k], a[ia, k + 1], a[ia, k + 2], a[ia, k + 3]
        w10, w11, w12, w13 = a[ia + 1, k], a[ia + 1, k + 1], a[ia + 1, k + 2], a[ia + 1, k + 3]
        w20, w21, w22, w23 = a[ia + 2, k], a[ia + 2, k + 1], a[ia + 2, k + 2], a[ia + 2, k + 3]
        w30, w31, w32, w33 = a[ia + 3, k], a[ia + 3, k + 1], a[ia + 3, k + 2], a[ia + 3, k + 3]
        w40, w41, w42, w43 = a[ia + 4, k], a[ia + 4, k + 1], a[ia + 4, k + 2], a[ia + 4, k + 3]
        w50, w51, w52, w53 = a[ia + 5, k], a[ia + 5, k + 1], a[ia + 5, k + 2], a[ia + 5, k + 3]
        w60, w61, w62, w63 = a[ia + 6, k], a[ia + 6, k + 1], a[ia + 6, k + 2], a[ia + 6, k + 3]
        w70, w71, w72, w73 = a[ia + 7, k], a[ia + 7, k + 1], a[ia + 7, k + 2], a[ia + 7, k + 3]
        for j in range(n):
            x0, x1, x2, x3 = b[k, j], b[k + 1, j], b[k + 2, j], b[k + 3, j]
            c[ic, j] += w00 * x0 + w01 * x1 + w02 * x2 + w03 * x3
            c[ic + 1, j] += w10 * x0 + w11 * x1 + w12 * x2 + w13 * x3
            c[ic + 2, j] += w20 * x0 + w21 * x1 + w22 * x2 + w23 * x3
            c[ic + 3, j] += w30 * x0 + w31 * x1 + w32 * x2 + w33 * x3
            c[ic + 4, j] += w40 * x0 + w41 * x1 + w42 * x2 + w43 * x3
            c[ic + 5, j] += w50 * x0 + w51 * x1 + w52 * x2 + w53 * x3
            c[ic + 6, j] += w60 * x0 + w61 * x1 + w62 * x2 + w63 * x3
            c[ic + 7, j] += w70 * x0 + w71 * x1 + w72 * x2 + w73 * x3


@numba.njit(fastmath=FASTMATH, cache=True)
def _row(a, b, c, ia, ic, k0, k1, n):
    """One row of _strip: c[ic, :n] += a[ia, k0:k1] @ b[k0:k1, :n]; k1 - k0 a multiple of DEPTH."""
    for k in range(k0, k1, DEPTH):
        w0, w1, w2, w3 = a[ia, k], a[ia, k + 1], a[ia, k + 2], a[ia, k + 3]
        for j in range(n):
            c[ic, j] += w0 * b[k, j] + w1 * b[k + 1, j] + w2 * b[k + 2, j] + w3 * b[k + 3, j]


@numba.njit(fastmath=FASTMATH, cache=True)
def _edge(a, b, c, ia0, ia1, ic0, k0, k1, n):
    """c[ic0:, :n] += a[ia0:ia1, k0:k1] @ b[k0:k1, :n] one row and one k at a time (k1 - k0 < DEPTH)."""
    for r in range(ia1 - ia0):
        for k in range(k0, k1):
            w = a[ia0 + r, k]
            for j in range(n):
                c[ic0 + r, j] += w * b[k, j]


@numba.njit(cache=True)
def multiply_panel(a, i0, i1, bp, width, cp):
    """cp[:i1-i0, :width] += a[i0:i1] @ bp[:, :width]: a any strides, bp and cp row-major."""
    depth = a.shape[1]
    rows = i1 - i0
    strips = rows // ROWS * ROWS
    n = np.uint64(width)
    for k0 in range(0, depth, K_BLOCK):
        k1 = min(k0 + K_BLOCK, depth)
        k_main = k0 + (k1 - k0) // DEPTH * DEPTH
        for s in range(0, strips, ROWS):
            _strip(a, bp, cp, i0 + s, s, k0, k_main, n)
        for s in range(strips, rows):
            _row(a, bp, cp, i0 + s, s, k0, k_main, n)
        _edge(a, bp, cp, i0, i1, 0, k_main, k1, n)


@numba.njit(parallel=True, cache=True)
def _pack_panels(b, bp):
    """bp[t, p, k, :w] = b[t, k, p*TILE_COLS : p*TILE_COLS + w]: column panels with padded rows.

    b may have any strides (a transposed view is packed straight from its source).
    """
    batch, depth, n = b.shape
    panels = bp.shape[1]
    for task in numba.prange(batch * panels * depth):
        t, p, k = task // (panels * depth), (task // depth) % panels, task % depth
        src, dst = b[t, k, p * TILE_COLS:], bp[t, p, k]
        for j in range(min(TILE_COLS, n - p * TILE_COLS)):
            dst[j] = src[j]


# a and b typed with any layout ('A'), so one compiled gemm per dtype serves every caller.
_GEMM_SIGNATURES = [f"void({t}[:, :, :], {t}[:, :, :], {t}[:, :, ::1], intp)" for t in ("float32", "float64")]


@numba.njit(_GEMM_SIGNATURES, parallel=True, cache=True)
def gemm(a, b, c, workers):
    """c[t] += a[t] @ b[t] for every matrix t of c (T, M, N), c contiguous.

    a (1 or T, M, K) and b (1 or T, K, N) with any strides; a leading 1 broadcasts. b is packed
    into column panels; a task multiplies one (row tile, panel) pair into the worker's padded
    scratch tile and adds that into c. `workers` is the number of threads to spread tasks over.
    """
    batch, m, n = c.shape
    depth = a.shape[2]
    tile_rows, tile_cols = min(TILE_ROWS, m), min(TILE_COLS, n)
    row_tiles, panels = cdiv(m, TILE_ROWS), cdiv(n, TILE_COLS)
    bp = np.empty((b.shape[0], panels, depth, tile_cols + PAD), dtype=c.dtype)
    _pack_panels(b, bp)
    tasks = batch * row_tiles * panels
    workers = min(workers, tasks)
    for worker in numba.prange(workers):
        cp = np.empty((tile_rows, tile_cols + PAD), dtype=c.dtype)
        for task in range(worker, tasks, workers):
            mat, i0, p = task // (row_tiles * panels), (task // panels) % row_tiles * TILE_ROWS, task % panels
            rows, width = min(TILE_ROWS, m - i0), min(TILE_COLS, n - p * TILE_COLS)
            cp[:] = 0
            multiply_panel(a[min(mat, a.shape[0] - 1)], i0, i0 + rows, bp[min(mat, bp.shape[0] - 1), p], width, cp)
            for r in range(rows):
                dst, src = c[mat, i0 + r, p * TILE_COLS:], cp[r]
                for j in range(width):
                    dst[j] += src[j]


def _stack(x: np.ndarray) -> np.ndarray:
    """x (..., R, S) as (T, R, S); a 2-D x becomes (1, R, S), which gemm broadcasts."""
    return x.reshape((-1,) + x.shape[-2:])


@kernel("matmul", "numba")
def matmul(a: np.ndarray, b: np.ndarray, transpose_a: bool = False, transpose_b: bool = False) -> np.ndarray:
    if a.dtype not in (np.float32, np.float64):
        raise TypeError(f"the numba matmul takes float32 or float64 operands, got {a.dtype}")
    if a.ndim < 2 or b.ndim < 2:
        raise ValueError(f"matmul needs operands of rank >= 2, got shapes {a.shape} and {b.shape}")
    if a.ndim > 2 and b.ndim > 2 and a.shape[:-2] != b.shape[:-2]:
        raise ValueError(f"batch dimensions differ: {a.shape[:-2]} vs {b.shape[:-2]}")
    batch = a.shape[:-2] if a.ndim > 2 else b.shape[:-2]
    a3, b3 = _stack(a), _stack(b).astype(a.dtype, copy=False)
    a3 = np.swapaxes(a3, 1, 2) if transpose_a else a3  # the GEMM reads a by strides
    b3 = np.swapaxes(b3, 1, 2) if transpose_b else b3  # and packs b from its strides
    if a3.shape[2] != b3.shape[1]:
        raise ValueError(f"contraction sizes differ: op(a) is {a3.shape[1:]}, op(b) is {b3.shape[1:]}")
    c = np.zeros((max(a3.shape[0], b3.shape[0]), a3.shape[1], b3.shape[2]), dtype=a.dtype)
    if c.size:
        gemm(a3, b3, c, numba.get_num_threads())
    return c.reshape(batch + c.shape[1:])
