"""numba CPU kernels for elementwise ops: one parallel pass over the output.

Binary ops read each input through element strides that are 0 on broadcast axes, so a broadcast
operand (a bias, a scalar) is never materialised at the output's size. error_model="numpy" keeps
numpy's IEEE results (x / 0 -> inf, log(0) -> -inf) instead of Python's exceptions.
"""
from __future__ import annotations

import math

import numba
import numpy as np

from accelsim.kernels.cpu.shape import broadcast_strides, collapse
from accelsim.kernels.registry import kernel
from accelsim.ops.elementwise import GELU_CUBIC, GELU_SQRT_2_OVER_PI
from accelsim.ops.registry import get_op

_jit = numba.njit(parallel=True, cache=True, error_model="numpy")


def _as_float(x: np.ndarray) -> np.ndarray:
    """C-contiguous (0-d stays 0-d), and float64 unless already floating (the output takes this dtype)."""
    x = np.asarray(x, order="C")
    return x if x.dtype.kind == "f" else x.astype(np.float64)


# ---- binary ops with broadcasting ---------------------------------------------------------

_CHUNK = 1 << 14  # elements per task: a row longer than this is split, so one long row uses every thread


@numba.njit(cache=True)
def _task(t: int, shape: np.ndarray, sa: np.ndarray, sb: np.ndarray, chunks: int):
    """Task t -> (output offset of its row, offsets of that row in a and b, first, end) along the row.

    A copy of shape.py's, not an import: numba's cache misses edits to jitted code in other files.
    """
    t = np.int64(t)  # prange may hand out uint64, and uint64 op int64 is float64
    row, first = t // chunks, (t % chunks) * _CHUNK
    out_start, oa, ob = row * shape[-1], 0, 0
    for k in range(shape.size - 2, -1, -1):
        i = row % shape[k]
        oa, ob, row = oa + i * sa[k], ob + i * sb[k], row // shape[k]
    return out_start, oa, ob, first, min(shape[-1], first + _CHUNK)


def _binary(op: int, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Broadcast a and b by strides; the output takes a's dtype (b is cast to it).

    After `collapse` each input's last stride is 1 or 0 (broadcast along the row); _binary_core has
    a loop for each case because LLVM vectorizes only loops with a unit stride it can see.
    """
    a = _as_float(a)
    b = np.asarray(b, a.dtype, order="C")
    out = np.empty(np.broadcast_shapes(a.shape, b.shape), a.dtype)
    if out.size:
        dims, sa, sb = collapse(out.shape, broadcast_strides(a.shape, out.shape),
                                broadcast_strides(b.shape, out.shape))
        assert sa[-1] in (0, 1) and sb[-1] in (0, 1), "inputs are contiguous, so the last stride is 1 or 0"
        _binary_core(a.reshape(-1), sa, b.reshape(-1), sb, dims, out.reshape(-1), op)
    return out


_ADD, _SUB, _MUL, _DIV, _EQ = range(5)


@numba.njit(cache=True)
def _arith(op: int, x, y):
    if op == _ADD:
        return x + y
    if op == _SUB:
        return x - y
    if op == _MUL:
        return x * y
    if op == _DIV:
        return x / y
    # _EQ. Its float64 literals widen every op's result for float32 inputs: exactly, and LLVM
    # narrows the arithmetic back to float32.
    return 1.0 if x == y else 0.0


@_jit
def _binary_core(a, sa, b, sb, shape, out, op):
    """out = a op b. `op` is loop-invariant, so LLVM unswitches it: each loop below becomes one
    vectorized loop per op."""
    chunks, ia, ib = (shape[-1] + _CHUNK - 1) // _CHUNK, sa[-1], sb[-1]
    for t in numba.prange(out.size // shape[-1] * chunks):
        o, oa, ob, first, end = _task(t, shape, sa, sb, chunks)
        if ia == 1 and ib == 1:
            for j in range(first, end):
                out[o + j] = _arith(op, a[oa + j], b[ob + j])
        elif ia == 1:
            for j in range(first, end):
                out[o + j] = _arith(op, a[oa + j], b[ob])
        elif ib == 1:
            for j in range(first, end):
                out[o + j] = _arith(op, a[oa], b[ob + j])
        else:
            for j in range(first, end):
                out[o + j] = _arith(op, a[oa], b[ob])


def equal_mask(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """1 where x == y (y broadcast), else 0, in x's dtype: how max's adjoint finds the arg-max."""
    return _binary(_EQ, x, y)


@kernel("add", "numba")
def add(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return _binary(_ADD, a, b)


@kernel("sub", "numba")
def sub(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return _binary(_SUB, a, b)


@kernel("mul", "numba")
def mul(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return _binary(_MUL, a, b)


@kernel("div", "numba")
def div(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return _binary(_DIV, a, b)


# ---- unary ops: one flat loop -------------------------------------------------------------

def _unary(core, x: np.ndarray, *params: float) -> np.ndarray:
    x = _as_float(x)
    out = np.empty(x.shape, x.dtype)
    core(x.reshape(-1), *params, out.reshape(-1))
    return out


@_jit
def _neg(x, out):
    for i in numba.prange(x.size):
        out[i] = -x[i]


@_jit
def _exp(x, out):
    for i in numba.prange(x.size):
        out[i] = np.exp(x[i])


@_jit
def _log(x, out):
    for i in numba.prange(x.size):
        out[i] = np.log(x[i])


@_jit
def _sin(x, out):
    for i in numba.prange(x.size):
        out[i] = np.sin(x[i])


@_jit
def _erf(x, out):
    for i in numba.prange(x.size):
        out[i] = math.erf(x[i])


@_jit
def _cos(x, out):
    for i in numba.prange(x.size):
        out[i] = np.cos(x[i])


@_jit
def _square(x, out):
    for i in numba.prange(x.size):
        out[i] = x[i] * x[i]


@_jit
def _pow(x, exponent, out):
    for i in numba.prange(x.size):
        out[i] = np.power(x[i], exponent)


@_jit
def _sqrt(x, out):
    for i in numba.prange(x.size):
        out[i] = np.sqrt(x[i])


@_jit
def _relu(x, out):
    for i in numba.prange(x.size):
        out[i] = 0.0 if x[i] < 0 else x[i]  # NaN passes through, as with np.maximum


@_jit
def _sigmoid(x, out):
    for i in numba.prange(x.size):
        out[i] = 0.5 * (np.tanh(0.5 * x[i]) + 1.0)  # overflow-free, as the reference


@_jit
def _tanh(x, out):
    for i in numba.prange(x.size):
        out[i] = np.tanh(x[i])


@_jit
def _gelu(x, out):
    for i in numba.prange(x.size):
        v = x[i]
        out[i] = 0.5 * v * (1.0 + np.tanh(GELU_SQRT_2_OVER_PI * (v + GELU_CUBIC * v * v * v)))


@kernel("neg", "numba")
def neg(x: np.ndarray) -> np.ndarray:
    return _unary(_neg, x)


@kernel("exp", "numba")
def exp(x: np.ndarray) -> np.ndarray:
    return _unary(_exp, x)


@kernel("log", "numba")
def log(x: np.ndarray) -> np.ndarray:
    return _unary(_log, x)


@kernel("sin", "numba")
def sin(x: np.ndarray) -> np.ndarray:
    return _unary(_sin, x)


@kernel("erf", "numba")
def erf(x: np.ndarray) -> np.ndarray:
    return _unary(_erf, x)


@kernel("cos", "numba")
def cos(x: np.ndarray) -> np.ndarray:
    return _unary(_cos, x)


@kernel("square", "numba")
def square(x: np.ndarray) -> np.ndarray:
    return _unary(_square, x)


@kernel("pow", "numba")
def pow_(x: np.ndarray, exponent: float) -> np.ndarray:
    return _unary(_pow, x, float(exponent))


@kernel("sqrt", "numba")
def sqrt(x: np.ndarray) -> np.ndarray:
    return _unary(_sqrt, x)


@kernel("relu", "numba")
def relu(x: np.ndarray) -> np.ndarray:
    return _unary(_relu, x)


@kernel("sigmoid", "numba")
def sigmoid(x: np.ndarray) -> np.ndarray:
    return _unary(_sigmoid, x)


@kernel("tanh", "numba")
def tanh(x: np.ndarray) -> np.ndarray:
    return _unary(_tanh, x)


@kernel("gelu", "numba")
def gelu(x: np.ndarray) -> np.ndarray:
    return _unary(_gelu, x)


# ---- backward helpers: (g, same-shape saved tensor) -> g times the local derivative --------

def _backward(op: str, core, g: np.ndarray, saved: np.ndarray) -> np.ndarray:
    g = _as_float(g)
    saved = np.asarray(saved, g.dtype, order="C")
    out = np.empty(get_op(op).infer(g.shape, saved.shape), g.dtype)
    core(g.reshape(-1), saved.reshape(-1), out.reshape(-1))
    return out


@_jit
def _relu_grad(g, x, out):
    for i in numba.prange(g.size):
        out[i] = g[i] if x[i] > 0 else 0.0


@_jit
def _sigmoid_grad(g, y, out):
    for i in numba.prange(g.size):
        out[i] = g[i] * y[i] * (1.0 - y[i])


@_jit
def _tanh_grad(g, y, out):
    for i in numba.prange(g.size):
        out[i] = g[i] * (1.0 - y[i] * y[i])


@_jit
def _gelu_grad(g, x, out):
    for i in numba.prange(g.size):
        v = x[i]
        t = np.tanh(GELU_SQRT_2_OVER_PI * (v + GELU_CUBIC * v * v * v))
        dt = (1.0 - t * t) * GELU_SQRT_2_OVER_PI * (1.0 + 3 * GELU_CUBIC * v * v)
        out[i] = g[i] * (0.5 * (1.0 + t) + 0.5 * v * dt)


@kernel("relu_grad", "numba")
def relu_grad(g: np.ndarray, x: np.ndarray) -> np.ndarray:
    return _backward("relu_grad", _relu_grad, g, x)


@kernel("sigmoid_grad", "numba")
def sigmoid_grad(g: np.ndarray, y: np.ndarray) -> np.ndarray:
    return _backward("sigmoid_grad", _sigmoid_grad, g, y)


@kernel("tanh_grad", "numba")
def tanh_grad(g: np.ndarray, y: np.ndarray) -> np.ndarray:
    return _backward("tanh_grad", _tanh_grad, g, y)


@kernel("gelu_grad", "numba")
def gelu_grad(g: np.ndarray, x: np.ndarray) -> np.ndarray:
    return _backward("gelu_grad", _gelu_grad, g, x)


# ---- causal_mask ----------------------------------------------------------------------------

@_jit
def _causal_mask(x, fill, out):
    """x, out: (rows, T) views of (..., T, T); row r is query r % T."""
    rows, t = x.shape
    for r in numba.prange(rows):
        q = np.int64(r) % t  # prange may hand out uint64, and uint64 op int64 is float64
        for j in range(t):
            out[r, j] = fill if j > q else x[r, j]


@kernel("causal_mask", "numba")
def causal_mask(x: np.ndarray, fill: float) -> np.ndarray:
    """Entries above the diagonal of the last two axes become fill."""
    x = _as_float(x)
    out = np.empty(get_op("causal_mask").infer(x.shape, fill), x.dtype)
    if out.size:
        t = x.shape[-1]
        _causal_mask(x.reshape(-1, t), x.dtype.type(fill), out.reshape(-1, t))
    return out
