"""numba CPU Winograd F(2x2, 3x3) conv2d: 3x3 stride-1 kernels at 16 multiplies per 2x2 outputs, not 36.

Per 4x4 input tile d and channel, V = B^T d B; per weight, U = G w G^T; per output tile,
y = A^T (sum over channels of U * V) A. The channel sums are 16 GEMMs U[k] (O, C) @ V[k] (C, tiles)
on the numba GEMM's panel multiply. conv.py takes this path where winograd_fits allows it.
"""
from __future__ import annotations

import numba
import numpy as np

from accelsim.kernels.cpu.matmul import FASTMATH, PAD, cdiv, multiply_panel
from accelsim.kernels.cpu.slab import fill_slab

WINOGRAD_TILES = 128  # tiles per task: V and M, (16, C, tiles) each, stay in L2
WINOGRAD_CHUNK = 32   # tiles transformed at a time through a staging buffer


@numba.njit(cache=True)
def _winograd_weights(w5, u):
    """u[g, 4*xi + nu, o, c] = (G k G^T)[xi, nu] for each 3x3 kernel k = w5[g, o, c] of w5 (G, O/G, C/G, 3, 3)."""
    groups, per_group, cg = w5.shape[0], w5.shape[1], w5.shape[2]
    gk = np.empty((4, 3))  # G k: rows k0, (k0 + k1 + k2) / 2, (k0 - k1 + k2) / 2, k2
    for g in range(groups):
        for o in range(per_group):
            for c in range(cg):
                k = w5[g, o, c]
                for s in range(3):
                    gk[0, s] = k[0, s]
                    gk[1, s] = (k[0, s] + k[1, s] + k[2, s]) / 2
                    gk[2, s] = (k[0, s] - k[1, s] + k[2, s]) / 2
                    gk[3, s] = k[2, s]
                for xi in range(4):  # (G k) G^T: the same combinations along each row
                    u[g, 4 * xi, o, c] = gk[xi, 0]
                    u[g, 4 * xi + 1, o, c] = (gk[xi, 0] + gk[xi, 1] + gk[xi, 2]) / 2
                    u[g, 4 * xi + 2, o, c] = (gk[xi, 0] - gk[xi, 1] + gk[xi, 2]) / 2
                    u[g, 4 * xi + 3, o, c] = gk[xi, 2]


@numba.njit(cache=True)
def _bt(d0, d1, d2, d3):
    """B^T applied to a 4-vector: the input transform along one axis."""
    return d0 - d2, d1 + d2, d2 - d1, d1 - d3


@numba.njit(cache=True)
def _at(m0, m1, m2, m3):
    """A^T applied to a 4-vector: the output transform along one axis."""
    return m0 + m1 + m2, m1 - m2 - m3


@numba.njit(fastmath=FASTMATH, cache=True)
def _winograd_inputs(slab, tile_rows, tiles_wide, v):
    """v[g, 4*xi + nu, c, t] = (B^T d B)[xi, nu] for tile t's 4x4 window d of slab[g*Cg + c, :, 0].

    Tile t = (ty, tx) reads slab rows 2ty..2ty+3, columns 2tx..2tx+3. A chunk of tiles goes to a
    staging buffer first: its 16 rows lie at constant distances, which LLVM needs to vectorize
    the loop over tiles (16 rows of v, at run-time distances, need too many overlap checks).
    """
    groups = v.shape[0]
    cg = slab.shape[0] // groups
    stage = np.empty((16, WINOGRAD_CHUNK), dtype=v.dtype)
    u1, u2, u3 = np.uint64(1), np.uint64(2), np.uint64(3)  # uint64 + int would be int64, signed again
    for g in range(groups):
        for c in range(cg):
            for ty in range(tile_rows):
                plane = slab[g * cg + c]
                r0, r1, r2, r3 = plane[2 * ty, 0], plane[2 * ty + 1, 0], plane[2 * ty + 2, 0], plane[2 * ty + 3, 0]
                for t0 in range(0, tiles_wide, WINOGRAD_CHUNK):
                    n, q0 = min(WINOGRAD_CHUNK, tiles_wide - t0), np.uint64(2 * t0)
                    for tx in range(np.uint64(n)):
                        q = q0 + tx * u2
                        # B^T d: one transformed column per window column
                        c0 = _bt(r0[q], r1[q], r2[q], r3[q])
                        c1 = _bt(r0[q + u1], r1[q + u1], r2[q + u1], r3[q + u1])
                        c2 = _bt(r0[q + u2], r1[q + u2], r2[q + u2], r3[q + u2])
                        c3 = _bt(r0[q + u3], r1[q + u3], r2[q + u3], r3[q + u3])
                        # (B^T d) B: the same transform along each row
                        stage[0, tx], stage[1, tx], stage[2, tx], stage[3, tx] = _bt(c0[0], c1[0], c2[0], c3[0])
                        stage[4, tx], stage[5, tx], stage[6, tx], stage[7, tx] = _bt(c0[1], c1[1], c2[1], c3[1])
                        stage[8, tx], stage[9, tx], stage[10, tx], stage[11, tx] = _bt(c0[2], c1[2], c2[2], c3[2])
                        stage[12, tx], stage[13, tx], stage[14, tx], stage[15, tx] = _bt(c0[3], c1[3], c2[3], c3[3])
                    for k in range(16):
                        dst, src = v[g, k, c, ty * tiles_wide + t0:], stage[k]
                        for j in range(n):
                            dst[j] = src[j]


@numba.njit(fastmath=FASTMATH, cache=True)
def _winograd_outputs(m, tile_rows, tiles_wide, out):
    """out[g, o, 2ty + a, 2tx + b] = (A^T M A)[a, b] for M[xi, nu] = m[g, 4*xi + nu, o, t].

    Chunks of tiles are staged as in _winograd_inputs, for the same reason.
    """
    groups, per_group = out.shape[0], out.shape[1]
    stage = np.empty((16, WINOGRAD_CHUNK), dtype=m.dtype)
    u1, u2 = np.uint64(1), np.uint64(2)
    for g in range(groups):
        for o in range(per_group):
            for ty in range(tile_rows):
                for t0 in range(0, tiles_wide, WINOGRAD_CHUNK):
                    n = min(WINOGRAD_CHUNK, tiles_wide - t0)
                    for k in range(16):
                        dst, src = stage[k], m[g, k, o, ty * tiles_wide + t0:]
                        for j in range(n):
                            dst[j] = src[j]
                    top, bottom = out[g, o, 2 * ty, 2 * t0:], out[g, o, 2 * ty + 1, 2 * t0:]
                    for tx in range(np.uint64(n)):
                        # A^T M: two transformed rows (top, bottom) per column of M
                        top0, bottom0 = _at(stage[0, tx], stage[4, tx], stage[8, tx], stage[12, tx])
                        top1, bottom1 = _at(stage[1, tx], stage[5, tx], stage[9, tx], stage[13, tx])
                        top2, bottom2 = _at(stage[2, tx], stage[6, tx], stage[10, tx], stage[14, tx])
                        top3, bottom3 = _at(stage[3, tx], stage[7, tx], stage[11, tx], stage[15, tx])
                        # (A^T M) A: the same transform along each row
                        q = tx * u2
                        top[q], top[q + u1] = _at(top0, top1, top2, top3)
                        bottom[q], bottom[q + u1] = _at(bottom0, bottom1, bottom2, bottom3)


@numba.njit(parallel=True, cache=True)
def _conv_winograd(x, u, geo, workers, y4):
    """y4 (N, G, O/G, Ho, Wo) = the 3x3 stride-1 convolution of x by the weights u transforms.

    A task is a band of tile rows of one image: its padded input rows (a slab), their transforms
    V, the 16 GEMMs into M and the inverse transform all stay in the worker's own buffers.
    """
    n_img, groups, per_group, ho, wo = y4.shape
    c_in, cg = x.shape[1], u.shape[3]
    tiles_high, tiles_wide = cdiv(ho, 2), cdiv(wo, 2)
    band = min(tiles_high, max(1, WINOGRAD_TILES // tiles_wide))
    bands = cdiv(tiles_high, band)
    stride = band * tiles_wide + PAD
    workers = min(workers, n_img * bands)
    for worker in numba.prange(workers):
        slab = np.empty((c_in, 2 * band + 2, 1, 2 * tiles_wide + 2), dtype=x.dtype)
        # a spare row per transform component, so the 16 components' rows are never a multiple of
        # 4 KiB apart (the transforms touch all 16 at once; such rows would share cache sets)
        v = np.empty((groups, 16, cg + 1, stride), dtype=x.dtype)
        m = np.empty((groups, 16, per_group + 1, stride), dtype=x.dtype)
        out = np.empty((groups, per_group, 2 * band, 2 * tiles_wide), dtype=x.dtype)
        for task in range(worker, n_img * bands, workers):
            n, ty0 = task // bands, task % bands * band
            rows = min(band, tiles_high - ty0)
            fill_slab(x[n], 2 * ty0 - geo[4], geo[5], slab)
            _winograd_inputs(slab, rows, tiles_wide, v)
            m[:] = 0
            for g in range(groups):
                for k in range(16):
                    multiply_panel(u[g, k], 0, per_group, v[g, k], rows * tiles_wide, m[g, k])
            _winograd_outputs(m, rows, tiles_wide, out)
            for g in range(groups):
                for o in range(per_group):
                    for r in range(min(2 * rows, ho - 2 * ty0)):
                        dst, src = y4[n, g, o, 2 * ty0 + r], out[g, o, r]
                        for q in range(wo):
                            dst[q] = src[q]


def winograd_fits(geo: tuple[int, ...], x: np.ndarray, w: np.ndarray) -> bool:
    """Whether the Winograd path computes this conv2d: a 3x3 stride-1 undilated kernel (geo as in
    conv._geometry), and inputs whose sums are finite.

    Winograd's transforms subtract inputs, so an inf would give NaN where the direct sum gives
    inf: such inputs take the direct path (a finite overflow only costs speed).
    """
    return geo[:4] == (3, 3, 1, 1) and geo[6:8] == (1, 1) and bool(np.isfinite(x.sum()) and np.isfinite(w.sum()))


def winograd_conv2d(x: np.ndarray, w: np.ndarray, geo: tuple[int, ...], groups: int, y5: np.ndarray) -> None:
    """y5 (N, G, O/G, Ho, Wo) = conv2d of x (N, C, H, W) by w (O, C/G, 3, 3), both contiguous, same dtype."""
    o = w.shape[0]
    u = np.empty((groups, 16, o // groups, w.shape[1]), dtype=x.dtype)
    _winograd_weights(w.reshape((groups, o // groups) + w.shape[1:]), u)
    _conv_winograd(x, u, geo, numba.get_num_threads(), y5)
