"""numba CPU kernels for 2-D max and average pooling (NCHW, floor mode) and their adjoints.

Every kernel runs one (n, c) plane per task: planes never share an output element, so the
adjoints' overlapping windows accumulate without races.
"""
from __future__ import annotations

from typing import Sequence

import numba
import numpy as np

from accelsim.kernels.registry import kernel
from accelsim.ops.window import out_size, pair


@numba.njit(cache=True)
def _first_max(plane, r0, c0, kh, kw):
    """(value, window position) of the first max of the window at (r0, c0), row-major.

    Out-of-range positions read -inf; a NaN wins at its first position, as np.argmax does.
    """
    h, w = plane.shape
    best = -np.inf
    best_at = 0
    for i in range(kh):
        r = r0 + i
        for j in range(kw):
            col = c0 + j
            v = plane[r, col] if 0 <= r < h and 0 <= col < w else -np.inf
            if best != best:
                return best, best_at
            if v > best or v != v:
                best, best_at = v, i * kw + j
    return best, best_at


@numba.njit(parallel=True, cache=True)
def _max_pool(x, kh, kw, sh, sw, ph, pw, out):
    n, c, ho, wo = out.shape
    for t in numba.prange(n * c):
        plane, dst = x[t // c, t % c], out[t // c, t % c]
        for i in range(ho):
            for j in range(wo):
                dst[i, j] = _first_max(plane, i * sh - ph, j * sw - pw, kh, kw)[0]


@numba.njit(parallel=True, cache=True)
def _max_pool_grad(g, x, kh, kw, sh, sw, ph, pw, out):
    """out (zeroed) += each window's adjoint at its first max; a max in the padding is dropped."""
    n, c, ho, wo = g.shape
    h, w = out.shape[2], out.shape[3]
    for t in numba.prange(n * c):
        plane, gp, dst = x[t // c, t % c], g[t // c, t % c], out[t // c, t % c]
        for i in range(ho):
            for j in range(wo):
                r0, c0 = i * sh - ph, j * sw - pw
                at = _first_max(plane, r0, c0, kh, kw)[1]
                r, col = r0 + at // kw, c0 + at % kw
                if 0 <= r < h and 0 <= col < w:
                    dst[r, col] += gp[i, j]


@numba.njit(parallel=True, cache=True)
def _avg_pool(x, kh, kw, sh, sw, ph, pw, out):
    """Window sums over in-range positions divided by kh * kw (padding counts as zeros)."""
    n, c, ho, wo = out.shape
    h, w = x.shape[2], x.shape[3]
    for t in numba.prange(n * c):
        plane, dst = x[t // c, t % c], out[t // c, t % c]
        for i in range(ho):
            r_lo, r_hi = max(i * sh - ph, 0), min(i * sh - ph + kh, h)
            for j in range(wo):
                c_lo, c_hi = max(j * sw - pw, 0), min(j * sw - pw + kw, w)
                acc = 0.0
                for r in range(r_lo, r_hi):
                    for col in range(c_lo, c_hi):
                        acc += plane[r, col]
                dst[i, j] = acc / (kh * kw)


@numba.njit(parallel=True, cache=True)
def _avg_pool_grad(g, kh, kw, sh, sw, ph, pw, out):
    """out (zeroed) += g / (kh * kw) over each window's in-range positions."""
    n, c, ho, wo = g.shape
    h, w = out.shape[2], out.shape[3]
    for t in numba.prange(n * c):
        gp, dst = g[t // c, t % c], out[t // c, t % c]
        for i in range(ho):
            r_lo, r_hi = max(i * sh - ph, 0), min(i * sh - ph + kh, h)
            for j in range(wo):
                c_lo, c_hi = max(j * sw - pw, 0), min(j * sw - pw + kw, w)
                share = gp[i, j] / (kh * kw)
                for r in range(r_lo, r_hi):
                    for col in range(c_lo, c_hi):
                        dst[r, col] += share


def _geometry(kernel_hw: Sequence[int], stride: Sequence[int], padding: Sequence[int]) -> tuple[int, ...]:
    """(kh, kw, sh, sw, ph, pw) from the op's pair attributes."""
    return pair(kernel_hw, "kernel") + pair(stride, "stride") + pair(padding, "padding")


def _out_shape(x_shape: Sequence[int], geo: tuple[int, ...]) -> tuple[int, int, int, int]:
    kh, kw, sh, sw, ph, pw = geo
    return (x_shape[0], x_shape[1], out_size(x_shape[2], kh, sh, ph), out_size(x_shape[3], kw, sw, pw))


@kernel("max_pool2d", "numba")
def max_pool2d(x: np.ndarray, kernel: Sequence[int], stride: Sequence[int], padding: Sequence[int]) -> np.ndarray:
    x = np.ascontiguousarray(x)
    geo = _geometry(kernel, stride, padding)
    out = np.empty(_out_shape(x.shape, geo), dtype=x.dtype)
    _max_pool(x, *geo, out)
    return out


@kernel("max_pool2d_grad", "numba")
def max_pool2d_grad(g: np.ndarray, x: np.ndarray, kernel: Sequence[int], stride: Sequence[int],
                    padding: Sequence[int]) -> np.ndarray:
    g, x = np.ascontiguousarray(g), np.ascontiguousarray(x)
    out = np.zeros(x.shape, dtype=g.dtype)
    _max_pool_grad(g, x, *_geometry(kernel, stride, padding), out)
    return out


@kernel("avg_pool2d", "numba")
def avg_pool2d(x: np.ndarray, kernel: Sequence[int], stride: Sequence[int], padding: Sequence[int]) -> np.ndarray:
    x = np.ascontiguousarray(x)
    geo = _geometry(kernel, stride, padding)
    out = np.empty(_out_shape(x.shape, geo), dtype=x.dtype)
    _avg_pool(x, *geo, out)
    return out


@kernel("avg_pool2d_grad", "numba")
def avg_pool2d_grad(g: np.ndarray, input_shape: Sequence[int], kernel: Sequence[int], stride: Sequence[int],
                    padding: Sequence[int]) -> np.ndarray:
    g = np.ascontiguousarray(g)
    out = np.zeros(tuple(int(d) for d in input_shape), dtype=g.dtype)
    _avg_pool_grad(g, *_geometry(kernel, stride, padding), out)
    return out
