"""numba CPU kernels of the vocabulary-parallel ops (ops/vocab.py): a shard's embedding lookup and its
adjoint, a shard's per-row log-sum-exp and label logit and their adjoint, and the ranks' combination."""
from __future__ import annotations

import numba
import numpy as np

from accelsim.kernels.registry import kernel


@numba.njit(parallel=True, cache=True)
def _gather_held_rows(ids, table, start, out):
    rows = table.shape[0]
    for t in numba.prange(ids.shape[0]):
        r = ids[t] - start
        if 0 <= r < rows:
            out[t, :] = table[r, :]
        else:
            out[t, :] = 0.0


@numba.njit(parallel=True, cache=True)
def _scatter_add_held_rows(g, ids, start, out):
    """out[ids[t] - start] += g[t] for held ids, in id order; tasks own columns, so repeated ids never race."""
    rows = out.shape[0]
    for k in numba.prange(g.shape[1]):
        for t in range(g.shape[0]):
            r = ids[t] - start
            if 0 <= r < rows:
                out[r, k] += g[t, k]


@kernel("vocab_embedding", "numba")
def vocab_embedding(ids: np.ndarray, table: np.ndarray, start: int) -> np.ndarray:
    ids = np.asarray(ids)
    table = np.ascontiguousarray(table)
    flat = np.ascontiguousarray(ids.astype(np.int64).reshape(-1))
    out = np.empty((flat.shape[0], table.shape[1]), dtype=table.dtype)
    _gather_held_rows(flat, table, int(start), out)
    return out.reshape(ids.shape + table.shape[1:])


@kernel("vocab_embedding_grad", "numba")
def vocab_embedding_grad(g: np.ndarray, ids: np.ndarray, start: int, num_embeddings: int) -> np.ndarray:
    g = np.ascontiguousarray(g)
    flat = np.ascontiguousarray(np.asarray(ids).astype(np.int64).reshape(-1))
    out = np.zeros((int(num_embeddings), g.shape[-1]), dtype=g.dtype)
    _scatter_add_held_rows(g.reshape(flat.shape[0], g.shape[-1]), flat, int(start), out)
    return out


@numba.njit(parallel=True, cache=True)
def _xent_rows(logits, labels, start, c, out):
    n = logits.shape[0]
    for r in numba.prange(n):
        top = logits[r, 0]
        for k in range(1, c):
            top = max(top, logits[r, k])
        total = 0.0
        for k in range(c):
            total += np.exp(logits[r, k] - top)
        out[r, 0] = top + np.log(total)
        col = labels[r] - start
        out[r, 1] = logits[r, col] if 0 <= col < c else 0.0


@numba.njit(parallel=True, cache=True)
def _xent_grad_rows(g, logits, labels, partial, start, c, out):
    n, width = logits.shape
    for r in numba.prange(n):
        for k in range(width):
            out[r, k] = g[r, 0] * np.exp(logits[r, k] - partial[r, 0]) if k < c else 0.0
        col = labels[r] - start
        if 0 <= col < c:
            out[r, col] += g[r, 1]


@kernel("vocab_parallel_xent", "numba")
def vocab_parallel_xent(logits: np.ndarray, labels: np.ndarray, start: int, valid: int) -> np.ndarray:
    logits = np.ascontiguousarray(logits)
    out = np.empty((logits.shape[0], 2), dtype=logits.dtype)
    _xent_rows(logits, np.ascontiguousarray(np.asarray(labels).astype(np.int64)), int(start), int(valid), out)
    return out


@kernel("vocab_parallel_xent_grad", "numba")
def vocab_parallel_xent_grad(g: np.ndarray, logits: np.ndarray, labels: np.ndarray, partial: np.ndarray,
                             start: int, valid: int) -> np.ndarray:
    g = np.ascontiguousarray(g)
    out = np.empty(np.shape(logits), dtype=g.dtype)
    _xent_grad_rows(g, np.ascontiguousarray(logits), np.ascontiguousarray(np.asarray(labels).astype(np.int64)),
                    np.ascontiguousarray(partial), int(start), int(valid), out)
    return out


@numba.njit(parallel=True, cache=True)
def _combine_rows(stacked, out):
    """stacked (ranks, N, 2): out[r] = [log sum_k exp(lse_k), sum_k picked_k], sums in rank order."""
    ranks, n, _ = stacked.shape
    for r in numba.prange(n):
        top = stacked[0, r, 0]
        for k in range(1, ranks):
            top = max(top, stacked[k, r, 0])
        total = 0.0
        picked = stacked[0, r, 1]
        for k in range(ranks):
            total += np.exp(stacked[k, r, 0] - top)
            if k > 0:
                picked += stacked[k, r, 1]
        out[r, 0] = top + np.log(total)
        out[r, 1] = picked


@kernel("tp_allreduce_xent", "numba")
def tp_allreduce_xent(*partials: np.ndarray) -> np.ndarray:
    stacked = np.ascontiguousarray(np.stack([np.asarray(p) for p in partials]))
    out = np.empty(stacked.shape[1:], dtype=stacked.dtype)
    _combine_rows(stacked, out)
    return out


@numba.njit(cache=True)
def _combine_grad_rows(g, partial, total, out):
    for r in range(g.shape[0]):
        out[r, 0] = g[r, 0] * np.exp(partial[r, 0] - total[r, 0])
        out[r, 1] = g[r, 1]


@kernel("tp_allreduce_xent_grad", "numba")
def tp_allreduce_xent_grad(g: np.ndarray, partial: np.ndarray, total: np.ndarray) -> np.ndarray:
    g = np.ascontiguousarray(g)
    out = np.empty(g.shape, dtype=g.dtype)
    _combine_grad_rows(g, np.ascontiguousarray(partial), np.ascontiguousarray(total), out)
    return out
