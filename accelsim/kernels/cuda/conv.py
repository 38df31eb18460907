"""conv2d and its two adjoints as implicit GEMMs: shared-memory tiles gathered straight from NCHW arrays.

Per group (blockIdx.z), each op is a GEMM whose operands are never materialized: matmul.py's
`tiled_gemm` runs the tiled loop, and four small inlined functions here say where its dimensions,
operand elements and results live in the NCHW / OIHW arrays.

    conv2d              y[(n,ho,wo), o] = sum over (c,i,j) of window(x)[(n,ho,wo), (c,i,j)] * w[o, (c,i,j)]
    conv2d_grad_weight  dw[o, (c,i,j)]  = sum over (n,ho,wo) of g[(n,ho,wo), o] * window(x)[(n,ho,wo), (c,i,j)]
    conv2d_grad_input   dx[(n,h,w), c]  = sum over (o,i,j) of g[output pixel whose tap (i,j) is (h,w), o]
                                                            * w[o, c, i, j]

geo holds (stride_h, stride_w, pad_h, pad_w, dilation_h, dilation_w, groups).
"""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from accelsim.kernels.cuda.launch import device_empty, inline_device, ptx_cases, to_device, to_host
from accelsim.kernels.cuda.matmul import gemm_launch, tiled_gemm
from accelsim.kernels.registry import kernel

_SIGNATURE = "void({T}[:, :, :, ::1], {T}[:, :, :, ::1], {T}[:, :, :, ::1], int64[::1])"


# ---- index helpers ---------------------------------------------------------------------

@inline_device
def _split3(flat, b, c):
    """(flat // (b*c), flat // c % b, flat % c): a flat index into (a, b, c)."""
    return flat // (b * c), (flat // c) % b, flat % c


@inline_device
def _window_value(x, geo, grp, w_shape, ho_size, wo_size, m, kk):
    """im2col: tap kk = (c, i, j) of output pixel m = (n, ho, wo); 0 in the padding."""
    n, ho, wo = _split3(m, ho_size, wo_size)
    c, i, j = _split3(kk, w_shape[2], w_shape[3])
    h = ho * geo[0] - geo[2] + i * geo[4]
    w = wo * geo[1] - geo[3] + j * geo[5]
    if 0 <= h < x.shape[2] and 0 <= w < x.shape[3]:
        return x[n, grp * w_shape[1] + c, h, w]
    return x.dtype.type(0)


@inline_device
def _weight(wt, geo, grp, o, kk):
    """w[grp's output channel o, tap kk = (c, i, j)]."""
    c, i, j = _split3(kk, wt.shape[2], wt.shape[3])
    return wt[grp * (wt.shape[0] // geo[6]) + o, c, i, j]


# ---- conv2d: p = x, q = w, out = y --------------------------------------------------------

@inline_device
def _fwd_dims(x, wt, y, geo):
    return y.shape[0] * y.shape[2] * y.shape[3], wt.shape[1] * wt.shape[2] * wt.shape[3], wt.shape[0] // geo[6]


@inline_device
def _fwd_a(x, wt, y, geo, grp, m, kk):
    return _window_value(x, geo, grp, wt.shape, y.shape[2], y.shape[3], m, kk)


@inline_device
def _fwd_b(x, wt, y, geo, grp, kk, o):
    return _weight(wt, geo, grp, o, kk)


@inline_device
def _fwd_put(x, wt, y, geo, grp, m, o, v):
    n, ho, wo = _split3(m, y.shape[2], y.shape[3])
    y[n, grp * (wt.shape[0] // geo[6]) + o, ho, wo] = v


_conv_fwd = tiled_gemm(_fwd_dims, _fwd_a, _fwd_b, _fwd_put)


# ---- conv2d_grad_weight: p = x, q = g, out = dw ---------------------------------------------

@inline_device
def _dw_dims(x, g, dw, geo):
    return dw.shape[0] // geo[6], g.shape[0] * g.shape[2] * g.shape[3], dw.shape[1] * dw.shape[2] * dw.shape[3]


@inline_device
def _dw_a(x, g, dw, geo, grp, o, m):
    n, ho, wo = _split3(m, g.shape[2], g.shape[3])
    return g[n, grp * (dw.shape[0] // geo[6]) + o, ho, wo]


@inline_device
def _dw_b(x, g, dw, geo, grp, m, kk):
    return _window_value(x, geo, grp, dw.shape, g.shape[2], g.shape[3], m, kk)


@inline_device
def _dw_put(x, g, dw, geo, grp, o, kk, v):
    c, i, j = _split3(kk, dw.shape[2], dw.shape[3])
    dw[grp * (dw.shape[0] // geo[6]) + o, c, i, j] = v


_conv_grad_weight = tiled_gemm(_dw_dims, _dw_a, _dw_b, _dw_put)


# ---- conv2d_grad_input: p = g, q = w, out = dx -----------------------------------------------

@inline_device
def _tap_source(pos, pad, tap, dilation, stride, size):
    """The output index whose window has input position pos at tap index `tap`, or -1 if none."""
    shifted = pos + pad - tap * dilation
    if shifted < 0 or shifted % stride != 0 or shifted // stride >= size:
        return -1
    return shifted // stride


@inline_device
def _dx_dims(g, wt, dx, geo):
    return dx.shape[0] * dx.shape[2] * dx.shape[3], (wt.shape[0] // geo[6]) * wt.shape[2] * wt.shape[3], wt.shape[1]


@inline_device
def _dx_a(g, wt, dx, geo, grp, m, kk):
    n, h, w = _split3(m, dx.shape[2], dx.shape[3])
    o, i, j = _split3(kk, wt.shape[2], wt.shape[3])
    ho = _tap_source(h, geo[2], i, geo[4], geo[0], g.shape[2])
    wo = _tap_source(w, geo[3], j, geo[5], geo[1], g.shape[3])
    if ho < 0 or wo < 0:
        return g.dtype.type(0)
    return g[n, grp * (wt.shape[0] // geo[6]) + o, ho, wo]


@inline_device
def _dx_b(g, wt, dx, geo, grp, kk, c):
    o, i, j = _split3(kk, wt.shape[2], wt.shape[3])
    return wt[grp * (wt.shape[0] // geo[6]) + o, c, i, j]


@inline_device
def _dx_put(g, wt, dx, geo, grp, m, c, v):
    n, h, w = _split3(m, dx.shape[2], dx.shape[3])
    dx[n, grp * wt.shape[1] + c, h, w] = v


_conv_grad_input = tiled_gemm(_dx_dims, _dx_a, _dx_b, _dx_put)

ptx_cases("conv2d", _conv_fwd, _SIGNATURE, name="implicit_gemm_conv2d")
ptx_cases("conv2d_grad_weight", _conv_grad_weight, _SIGNATURE, name="implicit_gemm_grad_weight")
ptx_cases("conv2d_grad_input", _conv_grad_input, _SIGNATURE, name="implicit_gemm_grad_input")


# ---- host side ---------------------------------------------------------------------------

def _out_size(size: int, k: int, stride: int, pad: int, dilation: int) -> int:
    return (size + 2 * pad - dilation * (k - 1) - 1) // stride + 1


def _launch(kern: Any, p: np.ndarray, q: np.ndarray, out_shape: Sequence[int], rows: int, cols: int,
            stride, padding, dilation, groups: int) -> np.ndarray:
    p = np.asarray(p)
    out = device_empty(tuple(out_shape), p.dtype)
    geo = np.array([*stride, *padding, *dilation, groups], dtype=np.int64)
    grid, block = gemm_launch(rows, cols, groups)
    kern[grid, block](to_device(p), to_device(q, p.dtype), out, to_device(geo))
    return to_host(out, tuple(out_shape))


@kernel("conv2d", "cuda")
def conv2d(x: np.ndarray, w: np.ndarray, stride, padding, dilation, groups: int) -> np.ndarray:
    (n, _, h, wd), (o, _, kh, kw) = np.shape(x), np.shape(w)
    ho = _out_size(h, kh, stride[0], padding[0], dilation[0])
    wo = _out_size(wd, kw, stride[1], padding[1], dilation[1])
    return _launch(_conv_fwd, x, w, (n, o, ho, wo), n * ho * wo, o // groups, stride, padding, dilation, groups)


@kernel("conv2d_grad_weight", "cuda")
def conv2d_grad_weight(x: np.ndarray, g: np.ndarray, weight_shape, stride, padding, dilation,
                       groups: int) -> np.ndarray:
    o, cg, kh, kw = weight_shape
    return _launch(_conv_grad_weight, x, g, weight_shape, o // groups, cg * kh * kw, stride, padding, dilation, groups)


@kernel("conv2d_grad_input", "cuda")
def conv2d_grad_input(g: np.ndarray, w: np.ndarray, input_shape, stride, padding, dilation,
                      groups: int) -> np.ndarray:
    n, _, h, wd = input_shape
    return _launch(_conv_grad_input, g, w, input_shape, n * h * wd, np.shape(w)[1], stride, padding, dilation, groups)
