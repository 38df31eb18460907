"""numba CPU kernels for conv2d (NCHW, groups) and its input and weight adjoints, on the numba GEMM.

conv2d: 3x3 stride-1 convolutions use Winograd F(2x2, 3x3) (winograd.py: 16 GEMMs over channels,
2.25x fewer multiplies); the others im2col one band of output rows at a time into an L2-sized
panel and multiply it by the weights. Either way a task is one image's band, read from a slab of
its padded input rows (slab.py), so nothing leaves cache. The adjoints go an image at a time: the
GEMM into a full im2col matrix, and col2im (im2col's adjoint) for the input gradient.
"""
from __future__ import annotations

from typing import Sequence

import numba
import numpy as np

from accelsim.kernels.cpu.matmul import PAD, TILE_COLS, cdiv, gemm, multiply_panel
from accelsim.kernels.cpu.slab import fill_slab, gather_row, valid_range
from accelsim.kernels.cpu.winograd import winograd_conv2d, winograd_fits
from accelsim.kernels.registry import kernel
from accelsim.ops.window import out_size, pair


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
            gather_row(x[c, h], j * dw - pw, sw, dst, wo)
        else:
            for q in range(wo):
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
                lo, hi = valid_range(w_in, wo, sw, offset)
                for oh in range(ho):
                    h = oh * sh - ph + i * dh
                    if 0 <= h < h_in:
                        for ow in range(lo, hi):
                            dx[c, h, ow * sw + offset] += cols[r, oh * wo + ow]


@numba.njit(parallel=True, cache=True)
def _conv(x, w3, geo, workers, y4):
    """y4 (N, G, O/G, Ho, Wo) = w3 (G, O/G, K/G) @ im2col(x[n]) per image and group.

    A task is one image's band of output rows. Its input rows, padded, go to a slab (see
    fill_slab); the band's im2col panel (K, band rows * wq) then takes one contiguous copy per
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
            fill_slab(x[n], oh0 * sh - geo[4], geo[5], slab)
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
    """Winograd where winograd_fits (3x3 stride-1 undilated, finite inputs), im2col bands otherwise."""
    x = np.ascontiguousarray(x)
    w = np.ascontiguousarray(w, dtype=x.dtype)
    groups, n, o = int(groups), x.shape[0], w.shape[0]
    geo = _geometry(x.shape, w.shape, stride, padding, dilation)
    y = np.empty((n, o) + geo[-2:], dtype=x.dtype)
    y5 = y.reshape((n, groups, o // groups) + geo[-2:])
    if winograd_fits(geo, x, w):
        winograd_conv2d(x, w, geo, groups, y5)
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
