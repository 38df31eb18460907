"""numba CPU kernels for conv2d (NCHW, groups) and its input and weight adjoints, on the numba GEMM.

conv2d: 3x3 stride-1 convolutions use Winograd F(2x2, 3x3) (16 GEMMs over channels, 2.25x fewer
multiplies); the others im2col one band of output rows at a time into an L2-sized panel and
multiply it by the weights. Either way a task is one image's band, so nothing leaves cache.
The adjoints go an image at a time: the GEMM into a full im2col matrix, and col2im (im2col's
adjoint) for the input gradient. Column indices are often unsigned (np.uint64): numba then
adds no negative-index wraparound, which would keep LLVM from vectorizing the loop.
"""
from __future__ import annotations

from typing import Sequence

import numba
import numpy as np

from accelsim.kernels.cpu.matmul import FASTMATH, PAD, TILE_COLS, cdiv, gemm, multiply_panel
from accelsim.kernels.registry import kernel
from accelsim.ops.window import out_size, pair


@numba.njit(cache=True)
def _valid_range(length, n, step, offset):
    """[lo, hi): the q in [0, n) whose q * step + offset lies in [0, length)."""
    lo = 0 if offset >= 0 else (-offset + step - 1) // step
    hi = 0 if offset >= length else min(n, (length - 1 - offset) // step + 1)
    return lo, max(lo, hi)


@numba.njit(cache=True)
def _gather_row(src, offset, step, dst, n):
    """dst[q] = src[q * step + offset] for q < n, and 0 where that index falls outside src."""
    lo, hi = _valid_range(src.shape[0], n, step, offset)
    u_lo, u_hi, u_n, u_step = np.uint64(lo), np.uint64(hi), np.uint64(n), np.uint64(step)
    first = np.uint64(lo * step + offset)  # >= 0: lo is the first q inside src
    for q in range(u_lo):
        dst[q] = 0
    if step == 1:
        for q in range(u_hi - u_lo):
            dst[u_lo + q] = src[first + q]
    else:
        for q in range(u_hi - u_lo):
            dst[u_lo + q] = src[first + q * u_step]
    for q in range(u_hi, u_n):
        dst[q] = 0


@numba.njit(cache=True)
def _window_row(x, geo, r, out):
    """out[oh * wo + ow] = x[c, oh*sh - ph + i*dh, ow*sw - pw + j*dw] (0 outside x) for the
    im2col row r = (c, i, j)."""
    kh, kw, sh, sw, ph, pw, dh, dw, ho, wo = geo
    c, i, j = r // (kh * kw), (r // kw) % kh, r % kw
    for oh in range(ho):
        dst = out[oh * wo:]
        h = oh * sh - ph + i * dh
        if 0 <= h < x.shape[1]:
            _gather_row(x[c, h], j * dw - pw, sw, dst, wo)
        else:
            for q in range(wo):
                dst[q] = 0


@numba.njit(cache=True)
def _fill_slab(x, h0, pw, slab):
    """slab[c, t, phase, q] = x[c, h0 + t, q * phases + phase - pw], 0 outside x: the rows of x from
    h0 on, zero-padded by pw columns on the left and split into `phases` interleaved column sets.

    With stride sw as the phase count, every kernel tap (i, j) reads its part of a slab row as one
    contiguous run: input column ow*sw + j*dw is slab column ow + (j*dw) // sw of phase (j*dw) % sw.
    """
    phases, wq = slab.shape[2], slab.shape[3]
    for c in range(slab.shape[0]):
        for t in range(slab.shape[1]):
            h = h0 + t
            for phase in range(phases):
                dst = slab[c, t, phase]
                if 0 <= h < x.shape[1]:
                    _gather_row(x[c, h], phase - pw, phases, dst, wq)
                else:
                    for q in range(wq):
                        dst[q] = 0


@numba.njit(parallel=True, cache=True)
def _im2col(x, geo, cols):
    """cols[(c, i, j), (oh, ow)] = x[c, oh*sh - ph + i*dh, ow*sw - pw + j*dw], 0 outside x."""
    for r in numba.prange(cols.shape[0]):
        _window_row(x, geo, r, cols[r])


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
                lo, hi = _valid_range(w_in, wo, sw, offset)
                for oh in range(ho):
                    h = oh * sh - ph + i * dh
                    if 0 <= h < h_in:
                        for ow in range(lo, hi):
                            dx[c, h, ow * sw + offset] += cols[r, oh * wo + ow]


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
            _fill_slab(x[n], oh0 * sh - geo[4], geo[5], slab)
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
            _fill_slab(x[n], 2 * ty0 - geo[4], geo[5], slab)
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
    """Winograd for 3x3 stride-1 undilated kernels, im2col bands for every other geometry.

    Winograd's transforms subtract inputs, so an inf would give NaN where the direct sum gives
    inf: inputs whose sums are not finite take the direct path (a finite overflow only costs speed).
    """
    x = np.ascontiguousarray(x)
    w = np.ascontiguousarray(w, dtype=x.dtype)
    groups, n, o = int(groups), x.shape[0], w.shape[0]
    geo = _geometry(x.shape, w.shape, stride, padding, dilation)
    y = np.empty((n, o) + geo[-2:], dtype=x.dtype)
    y5 = y.reshape((n, groups, o // groups) + geo[-2:])
    if geo[:4] == (3, 3, 1, 1) and geo[6:8] == (1, 1) and np.isfinite(x.sum()) and np.isfinite(w.sum()):
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
