"""2-D max and average pooling (NCHW, floor mode) and their adjoints, one thread per output element.

The adjoints gather rather than scatter: a thread per input element visits the windows that cover
it, so overlapping windows need no atomics and the sums come out in a fixed order.
geo holds (kernel_h, kernel_w, stride_h, stride_w, pad_h, pad_w).
"""
from __future__ import annotations

import math
from typing import Sequence

import numpy as np
from numba import cuda

from accelsim.kernels.cuda.launch import device_empty, inline_device, launch_1d, ptx_cases, to_device, to_host
from accelsim.kernels.registry import kernel


@inline_device
def _unravel(i, shape):
    """(n, c, h, w) of flat index i into a 4-D shape."""
    w = i % shape[3]
    i //= shape[3]
    h = i % shape[2]
    i //= shape[2]
    return i // shape[1], i % shape[1], h, w


@inline_device
def _window_argmax(x, n, c, ho, wo, geo):
    """(i, j) of the first largest element of window (ho, wo) in row-major order; padding never wins."""
    best, bi, bj = x.dtype.type(-math.inf), -1, -1
    for i in range(geo[0]):
        h = ho * geo[2] - geo[4] + i
        for j in range(geo[1]):
            w = wo * geo[3] - geo[5] + j
            if 0 <= h < x.shape[2] and 0 <= w < x.shape[3] and x[n, c, h, w] > best:
                best, bi, bj = x[n, c, h, w], i, j
    return bi, bj


@inline_device
def _covering_window(pos, pad, tap, stride, size):
    """The window index whose tap `tap` lands on input position pos, or -1 if none."""
    shifted = pos + pad - tap
    if shifted < 0 or shifted % stride != 0 or shifted // stride >= size:
        return -1
    return shifted // stride


@cuda.jit
def _max_pool(x, out, geo):
    i = cuda.grid(1)
    if i < out.size:
        n, c, ho, wo = _unravel(i, out.shape)
        bi, bj = _window_argmax(x, n, c, ho, wo, geo)
        out[n, c, ho, wo] = x[n, c, ho * geo[2] - geo[4] + bi, wo * geo[3] - geo[5] + bj]


@cuda.jit
def _avg_pool(x, out, geo):
    """Zero padding counts in the divisor (count_include_pad)."""
    i = cuda.grid(1)
    if i < out.size:
        n, c, ho, wo = _unravel(i, out.shape)
        acc = x.dtype.type(0)
        for kh in range(geo[0]):
            h = ho * geo[2] - geo[4] + kh
            for kw in range(geo[1]):
                w = wo * geo[3] - geo[5] + kw
                if 0 <= h < x.shape[2] and 0 <= w < x.shape[3]:
                    acc += x[n, c, h, w]
        out[n, c, ho, wo] = acc / x.dtype.type(geo[0] * geo[1])


@cuda.jit
def _max_pool_grad(g, x, dx, geo):
    """dx[h, w] = sum of g over the windows whose first max is at (h, w)."""
    i = cuda.grid(1)
    if i < dx.size:
        n, c, h, w = _unravel(i, dx.shape)
        acc = x.dtype.type(0)
        for kh in range(geo[0]):
            ho = _covering_window(h, geo[4], kh, geo[2], g.shape[2])
            for kw in range(geo[1]):
                wo = _covering_window(w, geo[5], kw, geo[3], g.shape[3])
                if ho >= 0 and wo >= 0:
                    bi, bj = _window_argmax(x, n, c, ho, wo, geo)
                    if bi == kh and bj == kw:
                        acc += g[n, c, ho, wo]
        dx[n, c, h, w] = acc


@cuda.jit
def _avg_pool_grad(g, dx, geo):
    """dx[h, w] = sum of g over the windows covering (h, w), each shared by the window's KH*KW taps."""
    i = cuda.grid(1)
    if i < dx.size:
        n, c, h, w = _unravel(i, dx.shape)
        acc = g.dtype.type(0)
        for kh in range(geo[0]):
            ho = _covering_window(h, geo[4], kh, geo[2], g.shape[2])
            for kw in range(geo[1]):
                wo = _covering_window(w, geo[5], kw, geo[3], g.shape[3])
                if ho >= 0 and wo >= 0:
                    acc += g[n, c, ho, wo] / g.dtype.type(geo[0] * geo[1])
        dx[n, c, h, w] = acc


_NCHW = "{T}[:, :, :, ::1]"
ptx_cases("max_pool2d", _max_pool, f"void({_NCHW}, {_NCHW}, int64[::1])")
ptx_cases("avg_pool2d", _avg_pool, f"void({_NCHW}, {_NCHW}, int64[::1])")
ptx_cases("max_pool2d_grad", _max_pool_grad, f"void({_NCHW}, {_NCHW}, {_NCHW}, int64[::1])")
ptx_cases("avg_pool2d_grad", _avg_pool_grad, f"void({_NCHW}, {_NCHW}, int64[::1])")


# ---- host side ---------------------------------------------------------------------------

def _geo(kernel_hw: Sequence[int], stride: Sequence[int], padding: Sequence[int]):
    return to_device(np.array([*kernel_hw, *stride, *padding], dtype=np.int64))


def _pooled_shape(x_shape, kernel_hw, stride, padding) -> tuple[int, int, int, int]:
    n, c, h, w = x_shape
    return (n, c, (h + 2 * padding[0] - kernel_hw[0]) // stride[0] + 1,
            (w + 2 * padding[1] - kernel_hw[1]) // stride[1] + 1)


def _run(kern, out_shape, dtype, *arrays, geo) -> np.ndarray:
    out = device_empty(tuple(out_shape), dtype)
    launch_1d(kern, int(np.prod(out_shape)), *(to_device(a, dtype) for a in arrays), out, geo)
    return to_host(out, tuple(out_shape))


@kernel("max_pool2d", "cuda")
def max_pool2d(x: np.ndarray, kernel, stride, padding) -> np.ndarray:
    x = np.asarray(x)
    return _run(_max_pool, _pooled_shape(x.shape, kernel, stride, padding), x.dtype, x,
                geo=_geo(kernel, stride, padding))


@kernel("avg_pool2d", "cuda")
def avg_pool2d(x: np.ndarray, kernel, stride, padding) -> np.ndarray:
    x = np.asarray(x)
    return _run(_avg_pool, _pooled_shape(x.shape, kernel, stride, padding), x.dtype, x,
                geo=_geo(kernel, stride, padding))


@kernel("max_pool2d_grad", "cuda")
def max_pool2d_grad(g: np.ndarray, x: np.ndarray, kernel, stride, padding) -> np.ndarray:
    g = np.asarray(g)
    return _run(_max_pool_grad, np.shape(x), g.dtype, g, x, geo=_geo(kernel, stride, padding))


@kernel("avg_pool2d_grad", "cuda")
def avg_pool2d_grad(g: np.ndarray, input_shape, kernel, stride, padding) -> np.ndarray:
    g = np.asarray(g)
    return _run(_avg_pool_grad, input_shape, g.dtype, g, geo=_geo(kernel, stride, padding))
