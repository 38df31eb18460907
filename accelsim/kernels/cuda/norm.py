"""Batch norm and layer norm as row kernels: a row holds the elements that share statistics.

Layer norm's rows are x reshaped to (rows, D); batch norm's are channels, after the host moves
axis 1 first (C, N*H*W...) and the copy kernel moves the result back. Statistics are two-pass
(mean, then the biased variance around it), as the numpy reference computes them.
"""
from __future__ import annotations

import math

import numpy as np
from numba import cuda

from accelsim.kernels.cuda.launch import (MAX_BLOCK, device_empty, inline_device, launch_1d, ptx_cases, row_launch,
                                          to_device, to_host)
from accelsim.kernels.cuda.reduce import lane_sum, row_of_thread, row_total
from accelsim.kernels.cuda.shape import unpermute
from accelsim.kernels.registry import kernel


@inline_device
def row_moments(scratch, x, r, live, eps):
    """(mean, 1 / sqrt(biased variance + eps)) of row r of x."""
    count = x.dtype.type(x.shape[1])
    mean = row_total(scratch, x, r, live) / count
    acc = x.dtype.type(0)
    if live:
        for c in range(cuda.threadIdx.x, x.shape[1], cuda.blockDim.x):
            d = x[r, c] - mean
            acc += d * d
    var = lane_sum(scratch, acc) / count
    return mean, x.dtype.type(1) / math.sqrt(var + eps)


@inline_device
def _grad_input_row(scratch, g, x, dx, r, live, scale, eps, per_column):
    """dx = rstd * (dxhat - mean(dxhat) - xhat * mean(dxhat * xhat)) with dxhat = g * gamma, on row r;
    gamma is per row (batch norm) or per column (layer norm)."""
    mean, rstd = row_moments(scratch, x, r, live, eps)
    s1 = x.dtype.type(0)
    s2 = x.dtype.type(0)
    if live:
        for c in range(cuda.threadIdx.x, x.shape[1], cuda.blockDim.x):
            d = g[r, c] * scale[c if per_column else r]
            s1 += d
            s2 += d * (x[r, c] - mean) * rstd
    count = x.dtype.type(x.shape[1])
    mean_d = lane_sum(scratch, s1) / count
    mean_dx = lane_sum(scratch, s2) / count
    if live:
        for c in range(cuda.threadIdx.x, x.shape[1], cuda.blockDim.x):
            d = g[r, c] * scale[c if per_column else r]
            dx[r, c] = rstd * (d - mean_d - (x[r, c] - mean) * rstd * mean_dx)


@cuda.jit
def _batch_norm_rows(x, gamma, beta, eps, out):
    scratch = cuda.shared.array(MAX_BLOCK, x.dtype)
    r, live = row_of_thread(x.shape[0])
    mean, rstd = row_moments(scratch, x, r, live, eps)
    if live:
        for c in range(cuda.threadIdx.x, x.shape[1], cuda.blockDim.x):
            out[r, c] = (x[r, c] - mean) * rstd * gamma[r] + beta[r]


@cuda.jit
def _layer_norm_rows(x, gamma, beta, eps, out):
    scratch = cuda.shared.array(MAX_BLOCK, x.dtype)
    r, live = row_of_thread(x.shape[0])
    mean, rstd = row_moments(scratch, x, r, live, eps)
    if live:
        for c in range(cuda.threadIdx.x, x.shape[1], cuda.blockDim.x):
            out[r, c] = (x[r, c] - mean) * rstd * gamma[c] + beta[c]


@cuda.jit
def _batch_norm_grad_input_rows(g, x, gamma, eps, dx):
    scratch = cuda.shared.array(MAX_BLOCK, x.dtype)
    r, live = row_of_thread(x.shape[0])
    _grad_input_row(scratch, g, x, dx, r, live, gamma, eps, False)


@cuda.jit
def _layer_norm_grad_input_rows(g, x, gamma, eps, dx):
    scratch = cuda.shared.array(MAX_BLOCK, x.dtype)
    r, live = row_of_thread(x.shape[0])
    _grad_input_row(scratch, g, x, dx, r, live, gamma, eps, True)


@cuda.jit
def _grad_gamma_rows(g, x, eps, out):
    """out[r] = sum over row r of g * xhat (batch norm's rows are its channels)."""
    scratch = cuda.shared.array(MAX_BLOCK, x.dtype)
    r, live = row_of_thread(x.shape[0])
    mean, rstd = row_moments(scratch, x, r, live, eps)
    acc = x.dtype.type(0)
    if live:
        for c in range(cuda.threadIdx.x, x.shape[1], cuda.blockDim.x):
            acc += g[r, c] * (x[r, c] - mean) * rstd
    total = lane_sum(scratch, acc)
    if live and cuda.threadIdx.x == 0:
        out[r] = total


@cuda.jit
def _row_stats(x, eps, mean, rstd):
    scratch = cuda.shared.array(MAX_BLOCK, x.dtype)
    r, live = row_of_thread(x.shape[0])
    m, s = row_moments(scratch, x, r, live, eps)
    if live and cuda.threadIdx.x == 0:
        mean[r] = m
        rstd[r] = s


@cuda.jit
def _grad_gamma_columns(g, x, mean, rstd, out):
    """out[c] = sum over rows r of g[r, c] * xhat[r, c], one thread per column (coalesced across a warp)."""
    c = cuda.grid(1)
    if c < x.shape[1]:
        acc = x.dtype.type(0)
        for r in range(x.shape[0]):
            acc += g[r, c] * (x[r, c] - mean[r]) * rstd[r]
        out[c] = acc


@cuda.jit
def _batch_norm_inference(x, gamma, beta, mean, var, eps, inner, out):
    """Flat x (N, C, inner...): channel of element i is (i // inner) % C."""
    i = cuda.grid(1)
    if i < out.size:
        ch = (i // inner) % gamma.size
        scale = gamma[ch] / math.sqrt(var[ch] + eps)
        out[i] = (x[i] - mean[ch]) * scale + beta[ch]


_M, _V = "{T}[:, ::1]", "{T}[::1]"
ptx_cases("batch_norm", _batch_norm_rows, f"void({_M}, {_V}, {_V}, {{T}}, {_M})")
ptx_cases("layer_norm", _layer_norm_rows, f"void({_M}, {_V}, {_V}, {{T}}, {_M})")
ptx_cases("batch_norm_grad_input", _batch_norm_grad_input_rows, f"void({_M}, {_M}, {_V}, {{T}}, {_M})")
ptx_cases("layer_norm_grad_input", _layer_norm_grad_input_rows, f"void({_M}, {_M}, {_V}, {{T}}, {_M})")
ptx_cases("batch_norm_grad_gamma", _grad_gamma_rows, f"void({_M}, {_M}, {{T}}, {_V})")
ptx_cases("layer_norm_grad_gamma", _row_stats, f"void({_M}, {{T}}, {_V}, {_V})")
ptx_cases("layer_norm_grad_gamma", _grad_gamma_columns, f"void({_M}, {_M}, {_V}, {_V}, {_V})")
ptx_cases("batch_norm_inference", _batch_norm_inference,
          f"void({_V}, {_V}, {_V}, {_V}, {_V}, {{T}}, int64, {_V})")


# ---- host side ---------------------------------------------------------------------------

def _channel_rows(x: np.ndarray) -> tuple[np.ndarray, tuple[int, ...]]:
    """x (N, C, ...) as C-contiguous channel rows (C, N*...), and the permutation that made them."""
    perm = (1, 0) + tuple(range(2, x.ndim))
    return np.ascontiguousarray(x.transpose(perm)).reshape(x.shape[1], -1), perm


def _run_rows(kern, x2: np.ndarray, *args) -> object:
    """kern(*args, out) over the rows of x2; the (rows, cols) device result."""
    out = device_empty(x2.shape, x2.dtype)
    blocks, threads = row_launch(*x2.shape)
    kern[blocks, threads](*args, out)
    return out


@kernel("batch_norm", "cuda")
def batch_norm(x: np.ndarray, gamma: np.ndarray, beta: np.ndarray, eps: float) -> np.ndarray:
    x = np.asarray(x)
    x2, perm = _channel_rows(x)
    out = _run_rows(_batch_norm_rows, x2, to_device(x2), to_device(gamma, x.dtype), to_device(beta, x.dtype),
                    x.dtype.type(eps))
    return unpermute(out.reshape(x.size), x.shape, perm, x.dtype)


@kernel("batch_norm_grad_input", "cuda")
def batch_norm_grad_input(g: np.ndarray, x: np.ndarray, gamma: np.ndarray, eps: float) -> np.ndarray:
    x = np.asarray(x)
    x2, perm = _channel_rows(x)
    g2, _ = _channel_rows(np.asarray(g, x.dtype))
    out = _run_rows(_batch_norm_grad_input_rows, x2, to_device(g2), to_device(x2), to_device(gamma, x.dtype),
                    x.dtype.type(eps))
    return unpermute(out.reshape(x.size), x.shape, perm, x.dtype)


@kernel("batch_norm_grad_gamma", "cuda")
def batch_norm_grad_gamma(g: np.ndarray, x: np.ndarray, eps: float) -> np.ndarray:
    g = np.asarray(g)
    x2, _ = _channel_rows(np.asarray(x, g.dtype))
    g2, _ = _channel_rows(g)
    out = device_empty(x2.shape[0], g.dtype)
    blocks, threads = row_launch(*x2.shape)
    _grad_gamma_rows[blocks, threads](to_device(g2), to_device(x2), g.dtype.type(eps), out)
    return to_host(out, (x2.shape[0],))


@kernel("batch_norm_inference", "cuda")
def batch_norm_inference(x: np.ndarray, gamma: np.ndarray, beta: np.ndarray, mean: np.ndarray, var: np.ndarray,
                         eps: float) -> np.ndarray:
    x = np.asarray(x)
    vectors = [to_device(v, x.dtype) for v in (gamma, beta, mean, var)]
    inner = int(np.prod(x.shape[2:]))
    out = device_empty(x.size, x.dtype)
    launch_1d(_batch_norm_inference, x.size, to_device(x.reshape(-1)), *vectors, x.dtype.type(eps), inner, out)
    return to_host(out, x.shape)


@kernel("layer_norm", "cuda")
def layer_norm(x: np.ndarray, gamma: np.ndarray, beta: np.ndarray, eps: float) -> np.ndarray:
    x = np.asarray(x)
    x2 = x.reshape(-1, x.shape[-1])
    out = _run_rows(_layer_norm_rows, x2, to_device(x2), to_device(gamma, x.dtype), to_device(beta, x.dtype),
                    x.dtype.type(eps))
    return to_host(out, x.shape)


@kernel("layer_norm_grad_input", "cuda")
def layer_norm_grad_input(g: np.ndarray, x: np.ndarray, gamma: np.ndarray, eps: float) -> np.ndarray:
    x = np.asarray(x)
    x2 = x.reshape(-1, x.shape[-1])
    out = _run_rows(_layer_norm_grad_input_rows, x2, to_device(np.reshape(g, x2.shape), x.dtype), to_device(x2),
                    to_device(gamma, x.dtype), x.dtype.type(eps))
    return to_host(out, x.shape)


@kernel("layer_norm_grad_gamma", "cuda")
def layer_norm_grad_gamma(g: np.ndarray, x: np.ndarray, eps: float) -> np.ndarray:
    g = np.asarray(g)
    rows, d = int(np.prod(g.shape[:-1])), g.shape[-1]
    d_x = to_device(np.reshape(x, (rows, d)), g.dtype)
    mean, rstd = device_empty(rows, g.dtype), device_empty(rows, g.dtype)
    blocks, threads = row_launch(rows, d)
    _row_stats[blocks, threads](d_x, g.dtype.type(eps), mean, rstd)
    out = device_empty(d, g.dtype)
    launch_1d(_grad_gamma_columns, d, to_device(g.reshape(rows, d)), d_x, mean, rstd, out)
    return to_host(out, (d,))
