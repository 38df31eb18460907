"""CUDA kernels of the multi-tensor optimizer updates (ops/fused_optimizer.py): one launch per parameter,
one thread per element, writing its slot of the packed output (apex's multi_tensor_apply batches the
parameters into one launch; the numbers are the same). NVVM may contract a multiply and an add into one
fused multiply-add, so on a GPU an element may differ from the unfused step by that one rounding."""
from __future__ import annotations

import math

import numpy as np
from numba import cuda

from accelsim.kernels.cuda.launch import device_empty, launch_1d, ptx_cases, to_device, to_host
from accelsim.kernels.registry import kernel
from accelsim.ops.fused_optimizer import adam_constants


@cuda.jit
def _adam(w, dw, m, v, b1, omb1, b2, omb2, c1, c2, lr, eps, out, at):
    i = cuda.grid(1)
    n = w.size
    if i < n:
        m_new = m[i] * b1 + dw[i] * omb1
        v_new = v[i] * b2 + (dw[i] * dw[i]) * omb2
        out[at + i] = w[i] - ((m_new * c1) * lr) / (math.sqrt(v_new * c2) + eps)
        out[at + n + i] = m_new
        out[at + 2 * n + i] = v_new


@cuda.jit
def _sgd(w, dw, lr, out, at):
    i = cuda.grid(1)
    if i < w.size:
        out[at + i] = w[i] - dw[i] * lr


@cuda.jit
def _copy_part(packed, offset, out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = packed[offset + i]


_V = "{T}[::1]"
ptx_cases("fused_adam", _adam, f"void({_V}, {_V}, {_V}, {_V}, {', '.join(['{T}'] * 8)}, {_V}, int64)")
ptx_cases("fused_sgd", _sgd, f"void({_V}, {_V}, {{T}}, {_V}, int64)")
ptx_cases("multi_tensor_part", _copy_part, f"void({_V}, int64, {_V})")


def _flat(x: np.ndarray, dtype: np.dtype):
    return to_device(np.asarray(x, dtype=dtype).reshape(-1))


@kernel("fused_adam", "cuda")
def fused_adam(*xs: np.ndarray, lr: float, beta1: float, beta2: float, eps: float, step: int) -> np.ndarray:
    dtype = np.asarray(xs[0]).dtype
    consts = adam_constants(dtype, lr, beta1, beta2, eps, step)
    total = 3 * sum(np.size(xs[j]) for j in range(0, len(xs), 4))
    out = device_empty((max(total, 1),), dtype)
    at = 0
    for j in range(0, len(xs), 4):
        n = np.size(xs[j])
        launch_1d(_adam, n, *(_flat(x, dtype) for x in xs[j:j + 4]), *consts, out, at)
        at += 3 * n
    return to_host(out, (total,))


@kernel("fused_sgd", "cuda")
def fused_sgd(*xs: np.ndarray, lr: float) -> np.ndarray:
    dtype = np.asarray(xs[0]).dtype
    total = sum(np.size(xs[j]) for j in range(0, len(xs), 2))
    out = device_empty((max(total, 1),), dtype)
    at = 0
    for j in range(0, len(xs), 2):
        n = np.size(xs[j])
        launch_1d(_sgd, n, _flat(xs[j], dtype), _flat(xs[j + 1], dtype), np.dtype(dtype).type(lr), out, at)
        at += n
    return to_host(out, (total,))


@kernel("multi_tensor_part", "cuda")
def multi_tensor_part(packed: np.ndarray, offset: int, shape: tuple[int, ...]) -> np.ndarray:
    """A view of the packed buffer on a real device (no bytes move); here a copy, to check the offsets."""
    packed = np.asarray(packed)
    size = int(np.prod(shape, dtype=np.int64))
    out = device_empty((max(size, 1),), packed.dtype)
    launch_1d(_copy_part, size, to_device(packed.reshape(-1)), int(offset), out)
    return to_host(out, tuple(shape))
