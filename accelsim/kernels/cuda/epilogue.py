"""CUDA kernels for the fused epilogue ops (matmul_epilogue, conv2d_epilogue): the tiled GEMM of
matmul.py and the implicit-GEMM convolution of conv.py, with the epilogue in the store.

`tiled_gemm` takes the function that stores each finished output element; these kernels hand it one
that adds the bias and applies the activation first, so the pre-activation only ever lives in a
register (cuBLASLt's BIAS / RELU_BIAS / GELU_BIAS epilogues do the same). The operand and dimension
functions are matmul.py's and conv.py's own. The kernels' fourth argument is a tuple (ints, bias):
ints ends with (activation opcode, has bias) after the geometry conv.py reads at its start; bias is
the bias vector (one unused element without one). The activation is a runtime opcode of the scalar
table rather than one kernel per activation: it is read once per output element, not per multiply-add,
and the branch is the same for every thread.
"""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from accelsim.kernels.cuda.conv import _fwd_a, _fwd_b, _fwd_dims, _fwd_put
from accelsim.kernels.cuda.launch import device_empty, inline_device, ptx_cases, to_device, to_host
from accelsim.kernels.cuda.matmul import _mm_a, _mm_b, _mm_dims, _mm_put, gemm_launch, gemm_operands, tiled_gemm
from accelsim.kernels.cuda.scalar import apply
from accelsim.kernels.registry import kernel
from accelsim.ops.epilogue import ACTIVATIONS, NO_ACTIVATION
from accelsim.ops.window import out_size

_SIGNATURE = "void({A}, {A}, {A}, Tuple((int64[::1], {T}[::1])))"


@inline_device
def _act(code, v, T):
    """The activation whose opcode is `code` (NO_ACTIVATION: none), by the scalar table."""
    if code == NO_ACTIVATION:
        return v
    return apply(code, v, v, T(0), T)


@inline_device
def _epilogue(v, ep, channel, T):
    """act(v + bias[channel]) with ep = (ints ending in (activation code, has bias), bias)."""
    ints, bias = ep
    last = ints.shape[0] - 1
    if ints[last] != 0:
        v += bias[channel]
    return _act(ints[last - 1], v, T)


# ---- matmul: p = a (B|1, m, k), q = b (B|1, k, n), out (B, m, n); the bias runs along columns c ---

@inline_device
def _mm_store(a, b, out, ep, z, r, c, v):
    _mm_put(a, b, out, ep, z, r, c, _epilogue(v, ep, c, out.dtype.type))


_matmul_epilogue = tiled_gemm(_mm_dims, _mm_a, _mm_b, _mm_store)


# ---- conv2d: p = x, q = w, out = y; ep[0] starts with conv.py's geometry; the bias runs along channels ---

@inline_device
def _cv_dims(x, wt, y, ep):
    return _fwd_dims(x, wt, y, ep[0])


@inline_device
def _cv_a(x, wt, y, ep, grp, m, kk):
    return _fwd_a(x, wt, y, ep[0], grp, m, kk)


@inline_device
def _cv_b(x, wt, y, ep, grp, kk, o):
    return _fwd_b(x, wt, y, ep[0], grp, kk, o)


@inline_device
def _cv_store(x, wt, y, ep, grp, m, o, v):
    channel = grp * (wt.shape[0] // ep[0][6]) + o
    _fwd_put(x, wt, y, ep[0], grp, m, o, _epilogue(v, ep, channel, y.dtype.type))


_conv_epilogue = tiled_gemm(_cv_dims, _cv_a, _cv_b, _cv_store)

ptx_cases("matmul_epilogue", _matmul_epilogue, _SIGNATURE.replace("{A}", "{T}[:, :, ::1]"),
          name="tiled_gemm_matmul_epilogue")
ptx_cases("conv2d_epilogue", _conv_epilogue, _SIGNATURE.replace("{A}", "{T}[:, :, :, ::1]"),
          name="implicit_gemm_conv2d_epilogue")


# ---- host side ---------------------------------------------------------------------------

def _ep(geometry: Sequence[int], bias: tuple[np.ndarray, ...], activation: str, dtype: Any) -> tuple[Any, Any]:
    ints = np.array([*geometry, ACTIVATIONS[activation].opcode, 1 if bias else 0], dtype=np.int64)
    vector = np.asarray(bias[0], dtype=dtype) if bias else np.zeros(1, dtype)
    return to_device(ints), to_device(vector)


@kernel("matmul_epilogue", "cuda")
def matmul_epilogue(a: np.ndarray, b: np.ndarray, *bias: np.ndarray, transpose_a: bool, transpose_b: bool,
                    activation: str) -> np.ndarray:
    a3, b3, batch_shape, m, n, batches = gemm_operands(a, b, transpose_a, transpose_b)
    out = device_empty((batches, m, n), a3.dtype)
    grid, block = gemm_launch(m, n, batches)
    _matmul_epilogue[grid, block](to_device(a3), to_device(b3, a3.dtype), out,
                                  _ep((), bias, activation, a3.dtype))
    return to_host(out, (*batch_shape, m, n))


@kernel("conv2d_epilogue", "cuda")
def conv2d_epilogue(x: np.ndarray, w: np.ndarray, *bias: np.ndarray, stride: Sequence[int],
                    padding: Sequence[int], dilation: Sequence[int], groups: int, activation: str) -> np.ndarray:
    x = np.asarray(x)
    (n, _, h, wd), (o, _, kh, kw) = x.shape, np.shape(w)
    ho = out_size(h, kh, stride[0], padding[0], dilation[0])
    wo = out_size(wd, kw, stride[1], padding[1], dilation[1])
    y = device_empty((n, o, ho, wo), x.dtype)
    grid, block = gemm_launch(n * ho * wo, o // groups, groups)
    ep = _ep((*stride, *padding, *dilation, groups), bias, activation, x.dtype)
    _conv_epilogue[grid, block](to_device(x), to_device(w, x.dtype), y, ep)
    return to_host(y, (n, o, ho, wo))
