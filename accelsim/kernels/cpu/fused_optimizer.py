"""numba CPU kernels of the multi-tensor optimizer updates (ops/fused_optimizer.py): one pass per parameter
over w, dw (and m, v), writing its slot of the packed output. Each element is computed as training_graph's
expression tree computes it, operation by operation in the array's dtype (numba contracts no multiply-add
without fastmath), so the packed values equal the unfused step's to the last bit."""
from __future__ import annotations

import numba
import numpy as np

from accelsim.kernels.registry import kernel
from accelsim.ops.fused_optimizer import adam_constants


@numba.njit(parallel=True, cache=True)
def _adam(w, dw, m, v, b1, omb1, b2, omb2, c1, c2, lr, eps, out, at):
    n = w.size
    for i in numba.prange(n):
        m_new = m[i] * b1 + dw[i] * omb1
        v_new = v[i] * b2 + (dw[i] * dw[i]) * omb2
        out[at + i] = w[i] - ((m_new * c1) * lr) / (np.sqrt(v_new * c2) + eps)
        out[at + n + i] = m_new
        out[at + 2 * n + i] = v_new


@numba.njit(parallel=True, cache=True)
def _sgd(w, dw, lr, out, at):
    for i in numba.prange(w.size):
        out[at + i] = w[i] - dw[i] * lr


def _flat(x: np.ndarray, dtype: np.dtype) -> np.ndarray:
    return np.ascontiguousarray(np.asarray(x, dtype=dtype).reshape(-1))


@kernel("fused_adam", "numba")
def fused_adam(*xs: np.ndarray, lr: float, beta1: float, beta2: float, eps: float, step: int) -> np.ndarray:
    dtype = np.asarray(xs[0]).dtype
    consts = adam_constants(dtype, lr, beta1, beta2, eps, step)
    out = np.empty(3 * sum(np.size(xs[j]) for j in range(0, len(xs), 4)), dtype=dtype)
    at = 0
    for j in range(0, len(xs), 4):
        w, dw, m, v = (_flat(x, dtype) for x in xs[j:j + 4])
        _adam(w, dw, m, v, *consts, out, at)
        at += 3 * w.size
    return out


@kernel("fused_sgd", "numba")
def fused_sgd(*xs: np.ndarray, lr: float) -> np.ndarray:
    dtype = np.asarray(xs[0]).dtype
    out = np.empty(sum(np.size(xs[j]) for j in range(0, len(xs), 2)), dtype=dtype)
    at = 0
    for j in range(0, len(xs), 2):
        w, dw = _flat(xs[j], dtype), _flat(xs[j + 1], dtype)
        _sgd(w, dw, np.dtype(dtype).type(lr), out, at)
        at += w.size
    return out


@kernel("multi_tensor_part", "numba")
def multi_tensor_part(packed: np.ndarray, offset: int, shape: tuple[int, ...]) -> np.ndarray:
    size = int(np.prod(shape, dtype=np.int64))
    return np.array(np.asarray(packed)[int(offset):int(offset) + size].reshape(shape), copy=True)
