"""numba CPU kernels for conv2d (NCHW, groups) and its input and weight adjoints, as im2col + GEMM.

One image at a time: im2col lays the image's windows out as cols (C*KH*KW, Ho*Wo), rows in
(channel, kernel row, kernel column) order, so per group the convolution is the GEMM
w (O/G, C/G*KH*KW) @ cols, written straight into the output's (O, Ho*Wo) layout by the numba
GEMM of matmul.py. The adjoints reuse the same GEMM and col2im, the adjoint of im2col.
"""
from __future__ import annotations

from typing import Sequence

import numba
import numpy as np

from accelsim.kernels.cpu.matmul import FASTMATH, PAD, TILE_COLS, cdiv, gemm, multiply_panel
from accelsim.kernels.registry import kernel
from accelsim.ops.window import out_size, pair


@numba.njit(cache=True)
def _valid_cols(w_in, wo, sw, offset):
    """[lo, hi): the output columns ow whose input column ow * sw + offset lies in [0, w_in)."""
    lo = 0 if offset >= 0 else (-offset + sw - 1) // sw
    hi = 0 if offset >= w_in else min(wo, (w_in - 1 - offset) // sw + 1)
    return lo, max(lo, hi)


@numba.njit(cache=True)
def _window_row(x, geo, r, oh0, oh1, out):
    """out[(oh - oh0) * wo + ow] = x[c, oh*sh - ph + i*dh, ow*sw - pw + j*dw] (0 outside x) for
    the im2col row r = (c, i, j) and the output rows oh in [oh0, oh1).

    Column indices are unsigned, so numba adds no negative-index wraparound to every element
    and LLVM turns the copies into vector loads and stores.
    """
    kh, kw, sh, sw, ph, pw, dh, dw, ho, wo = geo
    h_in, w_in = x.shape[1], x.shape[2]
    c, i, j = r // (kh * kw), (r // kw) % kh, r % kw
    offset = j * dw - pw
    lo, hi = _valid_cols(w_in, wo, sw, offset)
    u_lo, u_hi, u_wo, u_sw = np.uint64(lo), np.uint64(hi), np.uint64(wo), np.uint64(sw)
    src0 = np.uint64(lo * sw + offset)  # >= 0: lo is the first column inside x
    for oh in range(oh0, oh1):
        base = np.uint64((oh - oh0) * wo)
        h = oh * sh - ph + i * dh
        if h < 0 or h >= h_in:
            for q in range(u_wo):
                out[base + q] = 0
            continue
        src = x[c, h]
        for q in range(u_lo):
            out[base + q] = 0
        if sw == 1:
            for q in range(u_hi - u_lo):
                out[base + u_lo + q] = src[src0 + q]
        else:
            for q in range(u_hi - u_lo):
                out[base + u_lo + q] = src[src0 + q * u_sw]
        for q in range(u_hi, u_wo):
            out[base + q] = 0


@numba.njit(parallel=True, cache=True)
def _im2col(x, geo, cols):
    """cols[(c, i, j), (oh, ow)] = x[c, oh*sh - ph + i*dh, ow*sw - pw + j*dw], 0 outside x."""
    for r in numba.prange(cols.shape[0]):
        _window_row(x, geo, r, 0, geo[8], cols[r])


@numba.njit(parallel=True, cache=True)
def _col2im(cols, geo, dx):
    """dx[c, h, w] += every cols entry that im2col read from x[c, h, w]; one channel per task."""
    kh, kw, sh, sw, ph, pw, dh, dw, ho, wo = geo
    c_in, h_in, w_in = dx.shape
    for c in numba.prange(c_in):
        for i in range(kh):
            for j in range(kw):
                r = (c * kh + i) * kw + j
                offset = j * dw - pw
                lo, hi = _valid_cols(w_in, wo, sw, offset)
                for oh in range(ho):
                    h = oh * sh - ph + i * dh
                    if 0 <= h < h_in:
                        for ow in range(lo, hi):
                            dx[c, h, ow * sw + offset] += cols[r, oh * wo + ow]


@numba.njit(cache=True)
def _fill_slab(x, geo, oh0, slab):
    """slab[c, t, phase, q] = xp[c, oh0*sh + t, q*sw + phase], xp being x zero-padded by (ph, pw).

    Splitting columns by phase makes every kernel tap (i, j) read its slice of a slab row as one
    contiguous run: input column ow*sw + j*dw is slab column ow + (j*dw) // sw of phase (j*dw) % sw.
    """
    sh, sw, ph, pw = geo[2], geo[3], geo[4], geo[5]
    c_in, h_in, w_in = x.shape
    rows, wq = slab.shape[1], slab.shape[3]
    for c in range(c_in):
        for t in range(rows):
            h = oh0 * sh - ph + t
            for phase in range(sw):
                dst = slab[c, t, phase]
                for q in range(wq):
                    col = q * sw + phase - pw
                    dst[q] = x[c, h, col] if 0 <= h < h_in and 0 <= col < w_in else 0


@numba.njit(parallel=True, cache=True)
def _conv(x, w3, geo, workers, y4):
    """y4 (N, G, O/G, Ho, Wo) = w3 (G, O/G, K/G) @ im2col(x[n]) per image and group.

    A task is one image's band of output rows. Its input rows, padded, go to a slab (see
    _fill_slab); the band's im2col panel (K, band rows * wq) then takes one contiguous copy per
    tap and band row, and multiply_panel multiplies it by every output channel. Each band row
    carries wq - wo >= 0 extra columns (few: the padding's), computed and dropped, which is what
    lets the panel be built without a bounds check per element. Panel and tile stay in L2.
    """
    kh, kw, sh, sw, dh, dw, ho, wo = geo[0], geo[1], geo[2], geo[3], geo[6], geo[7], geo[8], geo[9]
    n_img, groups, per_group = y4.shape[0], y4.shape[1], y4.shape[2]
    c_in = x.shape[1]
    wq = cdiv(x.shape[3] + 2 * geo[5], sw)
    band = min(ho, max(1, TILE_COLS // wq))
    bands = cdiv(ho, band)
    slab_rows = (band - 1) * sh + (kh - 1) * dh + 1
    slab_size = c_in * slab_rows * sw * wq
    stride = band * wq + PAD
    workers = min(workers, n_img * bands)
    for worker in numba.prange(workers):
        # slack past the slab: a tap's run in the last row may overhang by (j*dw) // sw dropped columns
        flat = np.zeros(slab_size + (kw - 1) * dw // sw + 1, dtype=x.dtype)
        slab = flat[:slab_size].reshape(c_in, slab_rows, sw, wq)
        panel = np.empty((groups, w3.shape[2], stride), dtype=x.dtype)
        rows = panel.reshape(-1, stride)
        tile = np.empty((groups, per_group, stride), dtype=y4.dtype)
        for task in range(worker, n_img * bands, workers):
            n, oh0 = task // bands, task % bands * band
            height = min(band, ho - oh0)
            _fill_slab(x[n], geo, oh0, slab)
            for r in range(rows.shape[0]):
                c, i, j = r // (kh * kw), (r // kw) % kh, r % kw
                for t in range(height):
                    src = flat[((c * slab_rows + t * sh + i * dh) * sw + j * dw % sw) * wq + j * dw // sw:]
                    dst = rows[r, t * wq:]
                    for q in range(wq):
                        dst[q] = src[q]
            tile[:] = 0
            for g in range(groups):
                multiply_panel(w3[g], 0, per_group, panel[g], height * wq, tile[g])
            for g in range(groups):
                for o in range(per_group):
                    for t in range(height):
                        dst, src = y4[n, g, o, oh0 + t], tile[g, o, t * wq:]
                        for q in range(wo):
                            dst[q] = src[q]


# ---- Winograd F(2x2, 3x3): 3x3 stride-1 convolutions with 16 multiplies per 2x2 outputs, not 36 ----
# Per 4x4 input tile d and channel, V = B^T d B; per weight, U = G w G^T; per output tile,
# y = A^T (sum over channels of U * V) A. The channel sums are 16 GEMMs U[k] (O, C) @ V[k] (C, tiles).

WINOGRAD_TILES = 128  # tiles per task: V and M, (16, C, tiles) each, stay in L2


@numba.njit(cache=True)
def _winograd_weights(w4, u):
    """u[g, 3*4*xi... ] : u[g, 4*xi + nu, o, c] = (G w[g, o, c] G^T)[xi, nu] for w4 (G, O/G, C/G, 3, 3)."""
    groups, per_group, cg = w4.shape[0], w4.shape[1], w4.shape[2]
    for g in range(groups):
        for o in range(per_group):
            for c in range(cg):
                k = w4[g, o, c]
                gk = np.empty((4, 3))  # G k: rows (k0, (k0+k1+k2)/2, (k0-k1+k2)/2, k2)
                for s in range(3):
                    gk[0, s] = k[0, s]
                    gk[1, s] = (k[0, s] + k[1, s] + k[2, s]) / 2
                    gk[2, s] = (k[0, s] - k[1, s] + k[2, s]) / 2
                    gk[3, s] = k[2, s]
                for xi in range(4):
                    u[g, 4 * xi, o, c] = gk[xi, 0]
                    u[g, 4 * xi + 1, o, c] = (gk[xi, 0] + gk[xi, 1] + gk[xi, 2]) / 2
                    u[g, 4 * xi + 2, o, c] = (gk[xi, 0] - gk[xi, 1] + gk[xi, 2]) / 2
                    u[g, 4 * xi + 3, o, c] = gk[xi, 2]


@numba.njit(fastmath=FASTMATH, cache=True)
def _winograd_inputs(slab, tile_rows, tiles_wide, v):
    """v[g, 4*xi + nu, c, t] = (B^T d B)[xi, nu] for tile t's 4x4 window d of slab[g*Cg + c, :, 0].

    Tile (ty, tx) reads slab rows 2ty..2ty+3, columns 2tx..2tx+3. Tile indices are unsigned so
    the loop over tx vectorizes (no negative-index wraparound).
    """
    groups, cg = v.shape[0], v.shape[2]
    u_wide = np.uint64(tiles_wide)
    for g in range(groups):
        for c in range(cg):
            plane = slab[g * cg + c]
            for ty in range(tile_rows):
                r0, r1, r2, r3 = plane[2 * ty, 0], plane[2 * ty + 1, 0], plane[2 * ty + 2, 0], plane[2 * ty + 3, 0]
                vt = v[g, :, c, ty * tiles_wide:]
                for tx in range(u_wide):
                    q = tx * np.uint64(2)
                    # B^T d: rows 0 - 2, 1 + 2, 2 - 1, 1 - 3, one per column s of the window
                    a0, a1, a2, a3 = r0[q] - r2[q], r1[q] + r2[q], r2[q] - r1[q], r1[q] - r3[q]
                    b0, b1, b2, b3 = (r0[q + 1] - r2[q + 1], r1[q + 1] + r2[q + 1], r2[q + 1] - r1[q + 1],
                                      r1[q + 1] - r3[q + 1])
                    c0, c1, c2, c3 = (r0[q + 2] - r2[q + 2], r1[q + 2] + r2[q + 2], r2[q + 2] - r1[q + 2],
                                      r1[q + 2] - r3[q + 2])
                    d0, d1, d2, d3 = (r0[q + 3] - r2[q + 3], r1[q + 3] + r2[q + 3], r2[q + 3] - r1[q + 3],
                                      r1[q + 3] - r3[q + 3])
                    # (B^T d) B: the same combinations across the columns a, b, c, d
                    vt[0, tx], vt[1, tx], vt[2, tx], vt[3, tx] = a0 - c0, b0 + c0, c0 - b0, b0 - d0
                    vt[4, tx], vt[5, tx], vt[6, tx], vt[7, tx] = a1 - c1, b1 + c1, c1 - b1, b1 - d1
                    vt[8, tx], vt[9, tx], vt[10, tx], vt[11, tx] = a2 - c2, b2 + c2, c2 - b2, b2 - d2
                    vt[12, tx], vt[13, tx], vt[14, tx], vt[15, tx] = a3 - c3, b3 + c3, c3 - b3, b3 - d3


@numba.njit(fastmath=FASTMATH, cache=True)
def _winograd_outputs(m, tile_rows, tiles_wide, out):
    """out[g, o, 2ty + a, 2tx + b] = (A^T M A)[a, b] for M[xi, nu] = m[g, 4*xi + nu, o, t]."""
    groups, per_group = m.shape[0], m.shape[2]
    u_wide = np.uint64(tiles_wide)
    for g in range(groups):
        for o in range(per_group):
            for ty in range(tile_rows):
                mt = m[g, :, o, ty * tiles_wide:]
                top, bottom = out[g, o, 2 * ty], out[g, o, 2 * ty + 1]
                for tx in range(u_wide):
                    # A^T M: rows 0 + 1 + 2 and 1 - 2 - 3, per column of M
                    s0 = mt[0, tx] + mt[4, tx] + mt[8, tx]
                    s1 = mt[1, tx] + mt[5, tx] + mt[9, tx]
                    s2 = mt[2, tx] + mt[6, tx] + mt[10, tx]
                    s3 = mt[3, tx] + mt[7, tx] + mt[11, tx]
                    e0 = mt[4, tx] - mt[8, tx] - mt[12, tx]
                    e1 = mt[5, tx] - mt[9, tx] - mt[13, tx]
                    e2 = mt[6, tx] - mt[10, tx] - mt[14, tx]
                    e3 = mt[7, tx] - mt[11, tx] - mt[15, tx]
                    q = tx * np.uint64(2)
                    top[q], top[q + 1] = s0 + s1 + s2, s1 - s2 - s3
                    bottom[q], bottom[q + 1] = e0 + e1 + e2, e1 - e2 - e3


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
        v = np.empty((groups, 16, cg, stride), dtype=x.dtype)
        m = np.empty((groups, 16, per_group, stride), dtype=x.dtype)
        out = np.empty((groups, per_group, 2 * band, 2 * tiles_wide), dtype=x.dtype)
        for task in range(worker, n_img * bands, workers):
            n, ty0 = task // bands, task % bands * band
            rows = min(band, tiles_high - ty0)
            _fill_slab(x[n], geo, 2 * ty0, slab)
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


@numba.njit(cache=True)
def _conv_grad_input(g4, w3t, geo, workers, dx):
    """dx (N, C, H, W), zeroed, += col2im(w3t (G, K/G, O/G) @ g4[n] (G, O/G, Ho*Wo)) per image."""
    n_img, groups, _, pixels = g4.shape
    dcols = np.empty((dx.shape[1] * geo[0] * geo[1], pixels), dtype=dx.dtype)
    dcols3 = dcols.reshape(groups, -1, pixels)
    for n in range(n_img):
        dcols[:] = 0
        gemm(w3t, g4[n], dcols3, workers)
        _col2im(dcols, geo, dx[n])


@numba.njit(cache=True)
def _conv_grad_weight(x, g4, geo, workers, dw3):
    """dw3 (G, O/G, K/G), zeroed, += g4[n] (G, O/G, Ho*Wo) @ im2col(x[n])^T summed over images."""
    n_img, groups, _, pixels = g4.shape
    cols = np.empty((x.shape[1] * geo[0] * geo[1], pixels), dtype=x.dtype)
    cols3_t = cols.reshape(groups, -1, pixels).transpose(0, 2, 1)  # packed by gemm from its strides
    for n in range(n_img):
        _im2col(x[n], geo, cols)
        gemm(g4[n], cols3_t, dw3, workers)


def _geometry(x_shape: Sequence[int], w_shape: Sequence[int], stride: Sequence[int], padding: Sequence[int],
              dilation: Sequence[int]) -> tuple[int, ...]:
    """(kh, kw, sh, sw, ph, pw, dh, dw, ho, wo): the kernels' geometry, from the op's attributes."""
    kh, kw = int(w_shape[2]), int(w_shape[3])
    (sh, sw), (ph, pw), (dh, dw) = pair(stride, "stride"), pair(padding, "padding"), pair(dilation, "dilation")
    ho, wo = out_size(int(x_shape[2]), kh, sh, ph, dh), out_size(int(x_shape[3]), kw, sw, pw, dw)
    return (kh, kw, sh, sw, ph, pw, dh, dw, ho, wo)


@kernel("conv2d", "numba")
def conv2d(x: np.ndarray, w: np.ndarray, stride: Sequence[int], padding: Sequence[int],
           dilation: Sequence[int], groups: int) -> np.ndarray:
    x = np.ascontiguousarray(x)
    w = np.ascontiguousarray(w, dtype=x.dtype)
    groups, n, o = int(groups), x.shape[0], w.shape[0]
    geo = _geometry(x.shape, w.shape, stride, padding, dilation)
    y = np.empty((n, o) + geo[-2:], dtype=x.dtype)
    y5 = y.reshape((n, groups, o // groups) + geo[-2:])
    if geo[:4] == (3, 3, 1, 1) and geo[6:8] == (1, 1):  # 3x3, stride 1, no dilation
        u = np.empty((groups, 16, o // groups, w.shape[1]), dtype=x.dtype)
        _winograd_weights(w.reshape((groups, o // groups) + w.shape[1:]), u)
        _conv_winograd(x, u, geo, numba.get_num_threads(), y5)
    else:
        _conv(x, w.reshape(groups, o // groups, -1), geo, numba.get_num_threads(), y5)
    return y


@kernel("conv2d_grad_input", "numba")
def conv2d_grad_input(g: np.ndarray, w: np.ndarray, input_shape: Sequence[int], stride: Sequence[int],
                      padding: Sequence[int], dilation: Sequence[int], groups: int) -> np.ndarray:
    g = np.ascontiguousarray(g)
    w = np.ascontiguousarray(w, dtype=g.dtype)
    groups, n, o = int(groups), g.shape[0], g.shape[1]
    dx = np.zeros(tuple(int(d) for d in input_shape), dtype=g.dtype)
    geo = _geometry(dx.shape, w.shape, stride, padding, dilation)
    w3t = np.swapaxes(w.reshape(groups, o // groups, -1), 1, 2)  # the GEMM reads its left operand by strides
    _conv_grad_input(g.reshape(n, groups, o // groups, -1), w3t, geo, numba.get_num_threads(), dx)
    return dx


@kernel("conv2d_grad_weight", "numba")
def conv2d_grad_weight(x: np.ndarray, g: np.ndarray, weight_shape: Sequence[int], stride: Sequence[int],
                       padding: Sequence[int], dilation: Sequence[int], groups: int) -> np.ndarray:
    x = np.ascontiguousarray(x)
    g = np.ascontiguousarray(g, dtype=x.dtype)
    groups, n, o = int(groups), g.shape[0], g.shape[1]
    dw = np.zeros(tuple(int(d) for d in weight_shape), dtype=x.dtype)
    geo = _geometry(x.shape, dw.shape, stride, padding, dilation)
    _conv_grad_weight(x, g.reshape(n, groups, o // groups, -1), geo, numba.get_num_threads(),
                      dw.reshape(groups, o // groups, -1))
    return dw
