"""Neural-network ops: softmax family and losses as row kernels; embedding lookup; the causal mask.

Softmax rows are the softmax axis, moved last on the host and back by the copy kernel. Losses
reduce each row, then the rows' mean is one more row reduction on the device.
"""
from __future__ import annotations

import math

import numpy as np
from numba import cuda

from accelsim.kernels.cuda.launch import (MAX_BLOCK, device_empty, inline_device, launch_1d, ptx_cases, row_launch,
                                          to_device, to_host)
from accelsim.kernels.cuda.reduce import lane_max, lane_sum, mean_rows, reduce_rows, row_of_thread, rows_last
from accelsim.kernels.cuda.shape import unpermute, zeros
from accelsim.kernels.registry import kernel


@inline_device
def row_logsumexp(scratch, x, r, live):
    """(max, log(sum(exp(x - max)))) of row r of x: the stable log-sum-exp, split."""
    top = x.dtype.type(-math.inf)
    if live:
        for c in range(cuda.threadIdx.x, x.shape[1], cuda.blockDim.x):
            top = max(top, x[r, c])
    top = lane_max(scratch, top)
    acc = x.dtype.type(0)
    if live:
        for c in range(cuda.threadIdx.x, x.shape[1], cuda.blockDim.x):
            acc += math.exp(x[r, c] - top)
    total = lane_sum(scratch, acc)
    return top, math.log(total) if live else total  # a row past the end has no log to take


@cuda.jit
def _softmax_rows(x, out):
    scratch = cuda.shared.array(MAX_BLOCK, x.dtype)
    r, live = row_of_thread(x.shape[0])
    top, lse = row_logsumexp(scratch, x, r, live)
    if live:
        for c in range(cuda.threadIdx.x, x.shape[1], cuda.blockDim.x):
            out[r, c] = math.exp(x[r, c] - top - lse)


@cuda.jit
def _log_softmax_rows(x, out):
    scratch = cuda.shared.array(MAX_BLOCK, x.dtype)
    r, live = row_of_thread(x.shape[0])
    top, lse = row_logsumexp(scratch, x, r, live)
    if live:
        for c in range(cuda.threadIdx.x, x.shape[1], cuda.blockDim.x):
            out[r, c] = x[r, c] - top - lse


@cuda.jit
def _cross_entropy_rows(logits, labels, out):
    """out[0, r] = -log softmax(logits[r])[labels[r]]: the rows' losses, laid out as one row."""
    scratch = cuda.shared.array(MAX_BLOCK, logits.dtype)
    r, live = row_of_thread(logits.shape[0])
    top, lse = row_logsumexp(scratch, logits, r, live)
    if live and cuda.threadIdx.x == 0:
        out[0, r] = top + lse - logits[r, labels[r]]


@cuda.jit
def _cross_entropy_grad_rows(g, logits, labels, out):
    """out[r, c] = g * (softmax(logits[r])[c] - (c == labels[r])) / rows."""
    scratch = cuda.shared.array(MAX_BLOCK, logits.dtype)
    r, live = row_of_thread(logits.shape[0])
    top, lse = row_logsumexp(scratch, logits, r, live)
    if live:
        for c in range(cuda.threadIdx.x, logits.shape[1], cuda.blockDim.x):
            d = math.exp(logits[r, c] - top - lse)
            if c == labels[r]:
                d -= logits.dtype.type(1)
            out[r, c] = g[0] * d / logits.dtype.type(logits.shape[0])


@cuda.jit
def _squared_error_mean(pred, target, out):
    """out[0] = mean((pred - target)^2) of two (1, n) rows."""
    scratch = cuda.shared.array(MAX_BLOCK, pred.dtype)
    acc = pred.dtype.type(0)
    for c in range(cuda.threadIdx.x, pred.shape[1], cuda.blockDim.x):
        d = pred[0, c] - target[0, c]
        acc += d * d
    total = lane_sum(scratch, acc)
    if cuda.threadIdx.x == 0:
        out[0] = total / pred.dtype.type(pred.shape[1])


@cuda.jit
def _embedding(ids, table, out):
    """out[i, d] = table[ids[i], d], one thread per output element."""
    e = cuda.grid(1)
    if e < out.size:
        i, d = e // table.shape[1], e % table.shape[1]
        out[i, d] = table[ids[i], d]


@cuda.jit
def _embedding_grad(g, ids, out):
    """out[ids[i], d] += g[i, d]; repeated ids meet in atomic adds."""
    e = cuda.grid(1)
    if e < g.size:
        i, d = e // g.shape[1], e % g.shape[1]
        cuda.atomic.add(out, (ids[i], d), g[i, d])


@cuda.jit
def _causal_mask(x, fill, t, out):
    """Flat x (..., t, t): entries with column > row become fill."""
    i = cuda.grid(1)
    if i < out.size:
        col, row = i % t, (i // t) % t
        out[i] = fill if col > row else x[i]


_M, _V = "{T}[:, ::1]", "{T}[::1]"
ptx_cases("softmax", _softmax_rows, f"void({_M}, {_M})")
ptx_cases("log_softmax", _log_softmax_rows, f"void({_M}, {_M})")
ptx_cases("softmax_cross_entropy", _cross_entropy_rows, f"void({_M}, int64[::1], {_M})")
ptx_cases("softmax_cross_entropy_grad", _cross_entropy_grad_rows, f"void({_V}, {_M}, int64[::1], {_M})")
ptx_cases("mse_loss", _squared_error_mean, f"void({_M}, {_M}, {_V})")
ptx_cases("embedding", _embedding, f"void(int64[::1], {_M}, {_M})")
ptx_cases("embedding_grad", _embedding_grad, f"void({_M}, int64[::1], {_M})")
ptx_cases("causal_mask", _causal_mask, f"void({_V}, {{T}}, int64, {_V})")


# ---- host side ---------------------------------------------------------------------------

def _softmax_like(kern, x: np.ndarray, axis: int) -> np.ndarray:
    x = np.asarray(x)
    x2, perm = rows_last(x, (axis,))
    out = device_empty(x2.shape, x.dtype)
    blocks, threads = row_launch(*x2.shape)
    kern[blocks, threads](to_device(x2), out)
    return unpermute(out.reshape(x.size), x.shape, perm, x.dtype)


@kernel("softmax", "cuda")
def softmax(x: np.ndarray, axis: int) -> np.ndarray:
    return _softmax_like(_softmax_rows, x, axis)


@kernel("log_softmax", "cuda")
def log_softmax(x: np.ndarray, axis: int) -> np.ndarray:
    return _softmax_like(_log_softmax_rows, x, axis)


@kernel("softmax_cross_entropy", "cuda")
def softmax_cross_entropy(logits: np.ndarray, labels: np.ndarray) -> np.ndarray:
    logits = np.asarray(logits)
    rows, cols = logits.shape
    losses = device_empty((1, rows), logits.dtype)
    blocks, threads = row_launch(rows, cols)
    _cross_entropy_rows[blocks, threads](to_device(logits), to_device(labels, np.int64), losses)
    return to_host(reduce_rows(mean_rows, losses, 1, rows, logits.dtype), ())


@kernel("softmax_cross_entropy_grad", "cuda")
def softmax_cross_entropy_grad(g: np.ndarray, logits: np.ndarray, labels: np.ndarray) -> np.ndarray:
    logits = np.asarray(logits)
    out = device_empty(logits.shape, logits.dtype)
    blocks, threads = row_launch(*logits.shape)
    _cross_entropy_grad_rows[blocks, threads](to_device(g, logits.dtype), to_device(logits),
                                              to_device(labels, np.int64), out)
    return to_host(out, logits.shape)


@kernel("mse_loss", "cuda")
def mse_loss(pred: np.ndarray, target: np.ndarray) -> np.ndarray:
    pred = np.asarray(pred)
    n = max(pred.size, 1)
    out = device_empty(1, pred.dtype)
    _, (lanes, _) = row_launch(1, n)
    _squared_error_mean[1, (lanes, 1)](to_device(pred.reshape(1, n)), to_device(np.reshape(target, (1, n)), pred.dtype),
                                       out)
    return to_host(out, ())


@kernel("embedding", "cuda")
def embedding(ids: np.ndarray, table: np.ndarray) -> np.ndarray:
    table = np.asarray(table)
    ids = np.asarray(ids, np.int64)
    out = device_empty((ids.size, table.shape[1]), table.dtype)
    launch_1d(_embedding, ids.size * table.shape[1], to_device(ids.reshape(-1)), to_device(table), out)
    return to_host(out, (*ids.shape, table.shape[1]))


@kernel("embedding_grad", "cuda")
def embedding_grad(g: np.ndarray, ids: np.ndarray, num_embeddings: int) -> np.ndarray:
    g = np.asarray(g)
    dim = g.shape[-1]
    out = zeros(num_embeddings * dim, g.dtype)
    launch_1d(_embedding_grad, g.size, to_device(g.reshape(-1, dim)), to_device(np.reshape(ids, -1), np.int64),
              out.reshape(num_embeddings, dim))
    return to_host(out, (num_embeddings, dim))


@kernel("causal_mask", "cuda")
def causal_mask(x: np.ndarray, fill: float) -> np.ndarray:
    x = np.asarray(x)
    out = device_empty(x.size, x.dtype)
    launch_1d(_causal_mask, x.size, to_device(x.reshape(-1)), x.dtype.type(fill), x.shape[-1], out)
    return to_host(out, x.shape)
