"""numba CPU kernels for batch norm (training, inference, backward) and layer norm (forward, backward).

Batch norm views x (N, C, ...) as (N, C, S) and gives each channel to one task; layer norm views
x (..., D) as rows (R, D) and gives rows to tasks. Statistics are two-pass (mean, then biased
variance, as np.var) and accumulate in float64; outputs keep the input's dtype.
"""
from __future__ import annotations

import numba
import numpy as np

from accelsim.kernels.registry import kernel


# ---- batch norm: x as (N, C, S), one channel per task ----------------------------------

@numba.njit(cache=True)
def _channel_stats(x, ch, eps):
    """(mean, 1 / sqrt(var + eps)) of channel ch of x (N, C, S)."""
    n, _, s = x.shape
    total = 0.0
    for i in range(n):
        for k in range(s):
            total += x[i, ch, k]
    mean = total / (n * s)
    sq = 0.0
    for i in range(n):
        for k in range(s):
            d = x[i, ch, k] - mean
            sq += d * d
    return mean, 1.0 / np.sqrt(sq / (n * s) + eps)


@numba.njit(parallel=True, cache=True)
def _bn_forward(x, gamma, beta, eps, out):
    n, c, s = x.shape
    for ch in numba.prange(c):
        mean, inv_std = _channel_stats(x, ch, eps)
        scale = inv_std * gamma[ch]
        for i in range(n):
            for k in range(s):
                out[i, ch, k] = (x[i, ch, k] - mean) * scale + beta[ch]


@numba.njit(cache=True)
def _channel_g_sums(g, x, ch, mean, inv_std):
    """(sum g, sum g * xhat) over channel ch."""
    n, _, s = x.shape
    sum_g = 0.0
    sum_gx = 0.0
    for i in range(n):
        for k in range(s):
            sum_g += g[i, ch, k]
            sum_gx += g[i, ch, k] * ((x[i, ch, k] - mean) * inv_std)
    return sum_g, sum_gx


@numba.njit(parallel=True, cache=True)
def _bn_grad_input(g, x, gamma, eps, out):
    """dx = inv_std * (dxhat - mean(dxhat) - xhat * mean(dxhat * xhat)), dxhat = g * gamma."""
    n, c, s = x.shape
    m = n * s
    for ch in numba.prange(c):
        mean, inv_std = _channel_stats(x, ch, eps)
        sum_g, sum_gx = _channel_g_sums(g, x, ch, mean, inv_std)
        gam = gamma[ch]
        mean_dxhat = gam * sum_g / m
        mean_dxhat_xhat = gam * sum_gx / m
        for i in range(n):
            for k in range(s):
                xhat = (x[i, ch, k] - mean) * inv_std
                out[i, ch, k] = inv_std * (g[i, ch, k] * gam - mean_dxhat - xhat * mean_dxhat_xhat)


@numba.njit(parallel=True, cache=True)
def _bn_grad_gamma(g, x, eps, out):
    c = x.shape[1]
    for ch in numba.prange(c):
        mean, inv_std = _channel_stats(x, ch, eps)
        out[ch] = _channel_g_sums(g, x, ch, mean, inv_std)[1]


@numba.njit(parallel=True, cache=True)
def _bn_inference(x, gamma, beta, mean, var, eps, out):
    n, c, s = x.shape
    for t in numba.prange(n * c):
        i, ch = t // c, t % c
        scale = gamma[ch] / np.sqrt(var[ch] + eps)
        for k in range(s):
            out[i, ch, k] = (x[i, ch, k] - mean[ch]) * scale + beta[ch]


def _as_ncs(x: np.ndarray) -> np.ndarray:
    """x (N, C, ...) as a contiguous (N, C, S) view; S is 1 for a 2-D x."""
    x = np.ascontiguousarray(x)
    return x.reshape(x.shape[0], x.shape[1], -1)


@kernel("batch_norm", "numba")
def batch_norm(x: np.ndarray, gamma: np.ndarray, beta: np.ndarray, eps: float) -> np.ndarray:
    x3 = _as_ncs(x)
    out = np.empty_like(x3)
    _bn_forward(x3, np.ascontiguousarray(gamma), np.ascontiguousarray(beta), float(eps), out)
    return out.reshape(x.shape)


@kernel("batch_norm_grad_input", "numba")
def batch_norm_grad_input(g: np.ndarray, x: np.ndarray, gamma: np.ndarray, eps: float) -> np.ndarray:
    x3 = _as_ncs(x)
    out = np.empty(x3.shape, dtype=g.dtype)
    _bn_grad_input(_as_ncs(g), x3, np.ascontiguousarray(gamma), float(eps), out)
    return out.reshape(x.shape)


@kernel("batch_norm_grad_gamma", "numba")
def batch_norm_grad_gamma(g: np.ndarray, x: np.ndarray, eps: float) -> np.ndarray:
    x3 = _as_ncs(x)
    out = np.empty(x3.shape[1], dtype=g.dtype)
    _bn_grad_gamma(_as_ncs(g), x3, float(eps), out)
    return out


@kernel("batch_norm_inference", "numba")
def batch_norm_inference(x: np.ndarray, gamma: np.ndarray, beta: np.ndarray, mean: np.ndarray,
                         var: np.ndarray, eps: float) -> np.ndarray:
    x3 = _as_ncs(x)
    out = np.empty_like(x3)
    vectors = (np.ascontiguousarray(v) for v in (gamma, beta, mean, var))
    _bn_inference(x3, *vectors, float(eps), out)
    return out.reshape(x.shape)


# ---- layer norm: x as rows (R, D), one row per task ------------------------------------

@numba.njit(cache=True)
def _row_stats(row, eps):
    """(mean, 1 / sqrt(var + eps)) of one row."""
    d = row.shape[0]
    total = 0.0
    for k in range(d):
        total += row[k]
    mean = total / d
    sq = 0.0
    for k in range(d):
        diff = row[k] - mean
        sq += diff * diff
    return mean, 1.0 / np.sqrt(sq / d + eps)


@numba.njit(parallel=True, cache=True)
def _ln_forward(x, gamma, beta, eps, out):
    rows, d = x.shape
    for r in numba.prange(rows):
        mean, inv_std = _row_stats(x[r], eps)
        for k in range(d):
            out[r, k] = (x[r, k] - mean) * inv_std * gamma[k] + beta[k]


@numba.njit(parallel=True, cache=True)
def _ln_grad_input(g, x, gamma, eps, out):
    rows, d = x.shape
    for r in numba.prange(rows):
        mean, inv_std = _row_stats(x[r], eps)
        sum_dxhat = 0.0
        sum_dxhat_xhat = 0.0
        for k in range(d):
            dxhat = g[r, k] * gamma[k]
            sum_dxhat += dxhat
            sum_dxhat_xhat += dxhat * ((x[r, k] - mean) * inv_std)
        for k in range(d):
            xhat = (x[r, k] - mean) * inv_std
            out[r, k] = inv_std * (g[r, k] * gamma[k] - sum_dxhat / d - xhat * sum_dxhat_xhat / d)


_COLS_PER_TASK = 64


@numba.njit(parallel=True, cache=True)
def _ln_grad_gamma(g, x, eps, out):
    """out[k] = sum over rows of g * xhat; the row statistics first, then column blocks per task."""
    rows, d = x.shape
    means = np.empty(rows)
    inv_stds = np.empty(rows)
    for r in numba.prange(rows):
        means[r], inv_stds[r] = _row_stats(x[r], eps)
    blocks = (d + _COLS_PER_TASK - 1) // _COLS_PER_TASK
    for b in numba.prange(blocks):
        lo, hi = b * _COLS_PER_TASK, min(d, (b + 1) * _COLS_PER_TASK)
        acc = np.zeros(hi - lo)
        for r in range(rows):
            for k in range(lo, hi):
                acc[k - lo] += g[r, k] * ((x[r, k] - means[r]) * inv_stds[r])
        for k in range(lo, hi):
            out[k] = acc[k - lo]


def _as_rows(x: np.ndarray) -> np.ndarray:
    x = np.ascontiguousarray(x)
    return x.reshape(-1, x.shape[-1])


@kernel("layer_norm", "numba")
def layer_norm(x: np.ndarray, gamma: np.ndarray, beta: np.ndarray, eps: float) -> np.ndarray:
    x2 = _as_rows(x)
    out = np.empty_like(x2)
    _ln_forward(x2, np.ascontiguousarray(gamma), np.ascontiguousarray(beta), float(eps), out)
    return out.reshape(x.shape)


@kernel("layer_norm_grad_input", "numba")
def layer_norm_grad_input(g: np.ndarray, x: np.ndarray, gamma: np.ndarray, eps: float) -> np.ndarray:
    x2 = _as_rows(x)
    out = np.empty(x2.shape, dtype=g.dtype)
    _ln_grad_input(_as_rows(g), x2, np.ascontiguousarray(gamma), float(eps), out)
    return out.reshape(x.shape)


@kernel("layer_norm_grad_gamma", "numba")
def layer_norm_grad_gamma(g: np.ndarray, x: np.ndarray, eps: float) -> np.ndarray:
    x2 = _as_rows(x)
    out = np.empty(x2.shape[1], dtype=g.dtype)
    _ln_grad_gamma(_as_rows(g), x2, float(eps), out)
    return out
