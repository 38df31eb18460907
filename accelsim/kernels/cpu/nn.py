"""numba CPU kernels for the softmax family, the losses and the embedding lookup and its adjoint.

Softmax views x as (outer, L, inner) with the softmax axis in the middle, so any axis is one
strided loop of length L per (outer, inner) pair. Sums accumulate in float64.
"""
from __future__ import annotations

from math import prod

import numba
import numpy as np

from accelsim.kernels.registry import kernel


@numba.njit(cache=True)
def _larger(m, v):
    """The max of two, NaN winning as it does in np.max."""
    return v if (v > m or v != v) else m


@numba.njit(cache=True)
def _line_max_and_sum(x, o, i):
    """(max, sum of exp(x - max)) along the middle axis of x (outer, L, inner) at (o, i)."""
    m = x[o, 0, i]
    for k in range(1, x.shape[1]):
        m = _larger(m, x[o, k, i])
    total = 0.0
    for k in range(x.shape[1]):
        total += np.exp(x[o, k, i] - m)
    return m, total


@numba.njit(parallel=True, cache=True, error_model="numpy")
def _softmax(x, out):
    outer, n, inner = x.shape
    for t in numba.prange(outer * inner):
        o, i = t // inner, t % inner
        m, total = _line_max_and_sum(x, o, i)
        for k in range(n):
            out[o, k, i] = np.exp(x[o, k, i] - m) / total


@numba.njit(parallel=True, cache=True, error_model="numpy")
def _log_softmax(x, out):
    outer, n, inner = x.shape
    for t in numba.prange(outer * inner):
        o, i = t // inner, t % inner
        m, total = _line_max_and_sum(x, o, i)
        log_total = np.log(total)
        for k in range(n):
            out[o, k, i] = (x[o, k, i] - m) - log_total


def _around_axis(x: np.ndarray, axis: int) -> np.ndarray:
    """Contiguous x as (outer, L, inner) with the softmax axis as L."""
    axis = int(axis)
    if not -x.ndim <= axis < x.ndim:
        raise ValueError(f"axis {axis} out of range for a tensor of rank {x.ndim}")
    axis %= x.ndim
    x = np.ascontiguousarray(x)
    return x.reshape(prod(x.shape[:axis]), x.shape[axis], prod(x.shape[axis + 1:]))


@kernel("softmax", "numba")
def softmax(x: np.ndarray, axis: int) -> np.ndarray:
    x3 = _around_axis(x, axis)
    out = np.empty_like(x3)
    if x3.size:
        _softmax(x3, out)
    return out.reshape(x.shape)


@kernel("log_softmax", "numba")
def log_softmax(x: np.ndarray, axis: int) -> np.ndarray:
    x3 = _around_axis(x, axis)
    out = np.empty_like(x3)
    if x3.size:
        _log_softmax(x3, out)
    return out.reshape(x.shape)


# ---- softmax cross-entropy -------------------------------------------------------------

@numba.njit(parallel=True, cache=True, error_model="numpy")
def _xent(logits, labels):
    """mean over rows of logsumexp(row) - row[label]."""
    rows = logits.shape[0]
    x = logits.reshape(rows, logits.shape[1], 1)
    loss = 0.0
    for r in numba.prange(rows):
        m, total = _line_max_and_sum(x, r, 0)
        loss += np.log(total) - (logits[r, labels[r]] - m)
    return loss / rows


@numba.njit(parallel=True, cache=True, error_model="numpy")
def _xent_grad(g, logits, labels, out):
    """out = g * (softmax(logits) - onehot(labels)) / N."""
    rows, n = logits.shape
    x = logits.reshape(rows, n, 1)
    scale = g / rows
    for r in numba.prange(rows):
        m, total = _line_max_and_sum(x, r, 0)
        for k in range(n):
            p = np.exp(logits[r, k] - m) / total
            out[r, k] = scale * (p - 1.0 if k == labels[r] else p)


def _flat_ids(ids: np.ndarray, count: int, what: str) -> np.ndarray:
    """Flat int64 indices into `count` items (negatives wrapped, as numpy indexing does); out-of-range ones raise."""
    flat = np.asarray(ids).astype(np.int64).reshape(-1)
    if flat.size and (flat.min() < -count or flat.max() >= count):
        bad = flat[(flat < -count) | (flat >= count)][0]
        raise IndexError(f"index {bad} is out of range for {count} {what}")
    return np.ascontiguousarray(np.where(flat < 0, flat + count, flat))


@kernel("softmax_cross_entropy", "numba")
def softmax_cross_entropy(logits: np.ndarray, labels: np.ndarray) -> np.ndarray:
    logits = np.ascontiguousarray(logits)
    if logits.shape[0] == 0:
        return np.asarray(np.nan, dtype=logits.dtype)  # the mean of no rows, as np.mean gives
    return np.asarray(_xent(logits, _flat_ids(labels, logits.shape[1], "classes")), dtype=logits.dtype)


@kernel("softmax_cross_entropy_grad", "numba")
def softmax_cross_entropy_grad(g: np.ndarray, logits: np.ndarray, labels: np.ndarray) -> np.ndarray:
    g = np.asarray(g)
    logits = np.ascontiguousarray(logits)
    out = np.empty(logits.shape, dtype=g.dtype)
    if logits.size:
        _xent_grad(float(g), logits, _flat_ids(labels, logits.shape[1], "classes"), out)
    return out


# ---- mse loss --------------------------------------------------------------------------

@numba.njit(parallel=True, cache=True)
def _sum_squared_diff(pred, target):
    total = 0.0
    for k in numba.prange(pred.shape[0]):
        d = pred[k] - target[k]
        total += d * d
    return total


@kernel("mse_loss", "numba")
def mse_loss(pred: np.ndarray, target: np.ndarray) -> np.ndarray:
    pred, target = np.asarray(pred), np.asarray(target)
    if pred.shape != target.shape:
        raise ValueError(f"pred {pred.shape} and target {target.shape} must have the same shape")
    if pred.size == 0:
        return np.asarray(np.nan, dtype=pred.dtype)  # the mean of nothing, as np.mean gives
    total = _sum_squared_diff(np.ascontiguousarray(pred).reshape(-1), np.ascontiguousarray(target).reshape(-1))
    return np.asarray(total / pred.size, dtype=pred.dtype)


# ---- embedding -------------------------------------------------------------------------

@numba.njit(parallel=True, cache=True)
def _gather_rows(ids, table, out):
    for t in numba.prange(ids.shape[0]):
        out[t, :] = table[ids[t], :]


_COLS_PER_TASK = 64


@numba.njit(parallel=True, cache=True)
def _scatter_add_rows(g, ids, out):
    """out[ids[t]] += g[t]; tasks own column blocks, so repeated ids never race."""
    n, d = g.shape
    blocks = (d + _COLS_PER_TASK - 1) // _COLS_PER_TASK
    for b in numba.prange(blocks):
        lo, hi = b * _COLS_PER_TASK, min(d, (b + 1) * _COLS_PER_TASK)
        for t in range(n):
            row = ids[t]
            for k in range(lo, hi):
                out[row, k] += g[t, k]


@kernel("embedding", "numba")
def embedding(ids: np.ndarray, table: np.ndarray) -> np.ndarray:
    ids = np.asarray(ids)
    table = np.ascontiguousarray(table)
    flat = _flat_ids(ids, table.shape[0], "table rows")
    out = np.empty((flat.shape[0], table.shape[1]), dtype=table.dtype)
    _gather_rows(flat, table, out)
    return out.reshape(ids.shape + table.shape[1:])


@kernel("embedding_grad", "numba")
def embedding_grad(g: np.ndarray, ids: np.ndarray, num_embeddings: int) -> np.ndarray:
    g = np.ascontiguousarray(g)
    flat = _flat_ids(ids, int(num_embeddings), "table rows")
    out = np.zeros((int(num_embeddings), g.shape[-1]), dtype=g.dtype)
    _scatter_add_rows(g.reshape(flat.shape[0], g.shape[-1]), flat, out)
    return out
