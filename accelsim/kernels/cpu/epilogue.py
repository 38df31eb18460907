"""numba CPU kernels for the fused epilogue ops (matmul_epilogue, conv2d_epilogue): the numba GEMM or
convolution, then bias and activation in one parallel pass over its output, in place.

Not the fused store of cuda/epilogue.py: the CPU GEMM and convolution drivers (matmul.py, conv.py,
winograd.py) write their tiles in loops of their own, so the epilogue follows as one extra pass over
the finished output, while it is warm in cache, and no intermediate tensor is allocated.
"""
from __future__ import annotations

from typing import Sequence

import numba
import numpy as np

from accelsim.kernels.cpu import scalar
from accelsim.kernels.cpu.conv import conv2d
from accelsim.kernels.cpu.matmul import matmul
from accelsim.kernels.registry import kernel
from accelsim.ops.epilogue import ACTIVATIONS, NO_ACTIVATION

_jit = scalar.jit(parallel=True)


@scalar.jit()
def _act(code, v):
    """The activation whose opcode is `code` (NO_ACTIVATION: none), by the scalar table, on one element:
    per element rather than scalar.apply_block's loop per opcode, which would compile every opcode's
    vectorized loop into both kernels for the few activations."""
    if code == NO_ACTIVATION:
        return v
    return scalar.apply(code, v, v, 0.0)


@_jit
def _columns(y, bias, has_bias, code):
    """y (rows, n) = act(y + bias[None, :]) in place."""
    for r in numba.prange(y.shape[0]):
        for j in range(y.shape[1]):
            y[r, j] = _act(code, y[r, j] + bias[j] if has_bias else y[r, j])


@_jit
def _channels(y, bias, has_bias, code):
    """y (N, C, pixels) = act(y + bias[None, :, None]) in place; one (image, channel) plane per task."""
    planes, pixels = y.shape[0] * y.shape[1], y.shape[2]
    for t in numba.prange(planes):
        n, c = np.int64(t) // y.shape[1], np.int64(t) % y.shape[1]  # prange may hand out uint64
        b = bias[c] if has_bias else 0.0
        for q in range(pixels):
            y[n, c, q] = _act(code, y[n, c, q] + b)


def _epilogue(core, view: np.ndarray, bias: tuple[np.ndarray, ...], activation: str) -> None:
    """Run `core` on `view` of the output (skipped when empty); bias: () or the bias vector."""
    if view.size:
        vector = np.ascontiguousarray(bias[0], dtype=view.dtype) if bias else np.zeros(1, view.dtype)
        core(view, vector, bool(bias), ACTIVATIONS[activation].opcode)


@kernel("matmul_epilogue", "numba")
def matmul_epilogue(a: np.ndarray, b: np.ndarray, *bias: np.ndarray, transpose_a: bool, transpose_b: bool,
                    activation: str) -> np.ndarray:
    y = matmul(a, b, transpose_a, transpose_b)  # contiguous, of a's dtype
    _epilogue(_columns, y.reshape(-1, y.shape[-1]) if y.size else y, bias, activation)
    return y


@kernel("conv2d_epilogue", "numba")
def conv2d_epilogue(x: np.ndarray, w: np.ndarray, *bias: np.ndarray, stride: Sequence[int],
                    padding: Sequence[int], dilation: Sequence[int], groups: int, activation: str) -> np.ndarray:
    y = conv2d(x, w, stride, padding, dilation, groups)  # contiguous (N, O, Ho, Wo)
    _epilogue(_channels, y.reshape(y.shape[0], y.shape[1], -1) if y.size else y, bias, activation)
    return y
