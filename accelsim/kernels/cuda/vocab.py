"""CUDA kernels of the vocabulary-parallel ops (ops/vocab.py): one thread per output element for the
lookups and adjoints, one thread per row for the per-row log-sum-exp and the ranks' combination (rows are
many and the ranks few; the reductions run in the reference's order, so they round as it does)."""
from __future__ import annotations

import math

import numpy as np
from numba import cuda

from accelsim.kernels.cuda.launch import device_empty, launch_1d, ptx_cases, to_device, to_host
from accelsim.kernels.registry import kernel


@cuda.jit
def _vocab_embedding(ids, table, start, out):
    """out[i, d] = table[ids[i] - start, d] for held ids, else 0; one thread per output element."""
    e = cuda.grid(1)
    if e < out.size:
        i, d = e // table.shape[1], e % table.shape[1]
        r = ids[i] - start
        out[i, d] = table[r, d] if 0 <= r < table.shape[0] else 0.0


@cuda.jit
def _vocab_embedding_grad(g, ids, start, out):
    """out[ids[i] - start, d] += g[i, d] for held ids; one thread per column, walking ids in order, so
    repeated ids add in the reference's order."""
    d = cuda.grid(1)
    if d < g.shape[1]:
        for i in range(g.shape[0]):
            r = ids[i] - start
            if 0 <= r < out.shape[0]:
                out[r, d] += g[i, d]


@cuda.jit
def _xent_rows(logits, labels, start, c, out):
    r = cuda.grid(1)
    if r < logits.shape[0]:
        top = logits[r, 0]
        for k in range(1, c):
            top = max(top, logits[r, k])
        total = 0.0
        for k in range(c):
            total += math.exp(logits[r, k] - top)
        out[r, 0] = top + math.log(total)
        col = labels[r] - start
        out[r, 1] = logits[r, col] if 0 <= col < c else 0.0


@cuda.jit
def _xent_grad(g, logits, labels, partial, start, c, out):
    """One thread per element: g0 * exp(z - lse), plus g1 at the label's column; 0 in padding columns."""
    e = cuda.grid(1)
    if e < out.size:
        width = logits.shape[1]
        r, k = e // width, e % width
        v = g[r, 0] * math.exp(logits[r, k] - partial[r, 0]) if k < c else 0.0
        if labels[r] - start == k and k < c:
            v += g[r, 1]
        out[r, k] = v


@cuda.jit
def _combine_rows(stacked, out):
    r = cuda.grid(1)
    if r < out.shape[0]:
        ranks = stacked.shape[0]
        top = stacked[0, r, 0]
        for k in range(1, ranks):
            top = max(top, stacked[k, r, 0])
        total = 0.0
        picked = stacked[0, r, 1]
        for k in range(ranks):
            total += math.exp(stacked[k, r, 0] - top)
            if k > 0:
                picked += stacked[k, r, 1]
        out[r, 0] = top + math.log(total)
        out[r, 1] = picked


@cuda.jit
def _combine_grad(g, partial, total, out):
    r = cuda.grid(1)
    if r < out.shape[0]:
        out[r, 0] = g[r, 0] * math.exp(partial[r, 0] - total[r, 0])
        out[r, 1] = g[r, 1]


_M = "{T}[:, ::1]"
ptx_cases("vocab_embedding", _vocab_embedding, f"void(int64[::1], {_M}, int64, {_M})")
ptx_cases("vocab_embedding_grad", _vocab_embedding_grad, f"void({_M}, int64[::1], int64, {_M})")
ptx_cases("vocab_parallel_xent", _xent_rows, f"void({_M}, int64[::1], int64, int64, {_M})")
ptx_cases("vocab_parallel_xent_grad", _xent_grad, f"void({_M}, {_M}, int64[::1], {_M}, int64, int64, {_M})")
ptx_cases("tp_allreduce_xent", _combine_rows, "void({T}[:, :, ::1], {T}[:, ::1])")
ptx_cases("tp_allreduce_xent_grad", _combine_grad, f"void({_M}, {_M}, {_M}, {_M})")


def _ids(ids: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(np.asarray(ids).astype(np.int64).reshape(-1))


@kernel("vocab_embedding", "cuda")
def vocab_embedding(ids: np.ndarray, table: np.ndarray, start: int) -> np.ndarray:
    table = np.asarray(table)
    flat = _ids(ids)
    out = device_empty((max(flat.size, 1), table.shape[1]), table.dtype)
    launch_1d(_vocab_embedding, flat.size * table.shape[1], to_device(flat), to_device(table), int(start), out)
    return to_host(out, np.shape(ids) + table.shape[1:])


@kernel("vocab_embedding_grad", "cuda")
def vocab_embedding_grad(g: np.ndarray, ids: np.ndarray, start: int, num_embeddings: int) -> np.ndarray:
    g = np.asarray(g)
    flat = _ids(ids)
    out = to_device(np.zeros((int(num_embeddings), g.shape[-1]), dtype=g.dtype))
    launch_1d(_vocab_embedding_grad, g.shape[-1], to_device(g.reshape(flat.size, g.shape[-1])), to_device(flat),
              int(start), out)
    return to_host(out, (int(num_embeddings), g.shape[-1]))


@kernel("vocab_parallel_xent", "cuda")
def vocab_parallel_xent(logits: np.ndarray, labels: np.ndarray, start: int, valid: int) -> np.ndarray:
    logits = np.asarray(logits)
    out = device_empty((max(logits.shape[0], 1), 2), logits.dtype)
    launch_1d(_xent_rows, logits.shape[0], to_device(logits), to_device(_ids(labels)), int(start), int(valid), out)
    return to_host(out, (logits.shape[0], 2))


@kernel("vocab_parallel_xent_grad", "cuda")
def vocab_parallel_xent_grad(g: np.ndarray, logits: np.ndarray, labels: np.ndarray, partial: np.ndarray,
                             start: int, valid: int) -> np.ndarray:
    g, logits = np.asarray(g), np.asarray(logits)
    out = device_empty((max(logits.shape[0], 1), logits.shape[1]), g.dtype)
    launch_1d(_xent_grad, logits.size, to_device(g), to_device(logits, g.dtype), to_device(_ids(labels)),
              to_device(partial, g.dtype), int(start), int(valid), out)
    return to_host(out, logits.shape)


@kernel("tp_allreduce_xent", "cuda")
def tp_allreduce_xent(*partials: np.ndarray) -> np.ndarray:
    stacked = np.stack([np.asarray(p) for p in partials])
    out = device_empty((max(stacked.shape[1], 1), 2), stacked.dtype)
    launch_1d(_combine_rows, stacked.shape[1], to_device(stacked), out)
    return to_host(out, stacked.shape[1:])


@kernel("tp_allreduce_xent_grad", "cuda")
def tp_allreduce_xent_grad(g: np.ndarray, partial: np.ndarray, total: np.ndarray) -> np.ndarray:
    g = np.asarray(g)
    out = device_empty((max(g.shape[0], 1), 2), g.dtype)
    launch_1d(_combine_grad, g.shape[0], to_device(g), to_device(partial, g.dtype), to_device(total, g.dtype), out)
    return to_host(out, g.shape)
