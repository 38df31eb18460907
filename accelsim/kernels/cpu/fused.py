"""numba CPU kernel for fused_elementwise: the whole program in one parallel pass over the output.

An interpreter over an int opcode array. Each task takes a stretch of one output row; it loads its
inputs through broadcast strides (0 on broadcast axes, so a bias is never materialised) into a small
scratch of slots x _BLOCK elements, runs every instruction over the block (the opcode is fixed for
the inner loop, so the dispatch is paid once per block, not per element), and writes the last slot
out. Intermediates never leave the scratch. error_model="numpy" keeps numpy's IEEE results.
"""
from __future__ import annotations

import numba
import numpy as np

from accelsim.kernels.cpu.shape import broadcast_strides, collapse
from accelsim.kernels.registry import kernel
from accelsim.ops.elementwise import GELU_CUBIC, GELU_SQRT_2_OVER_PI
from accelsim.ops.fused import MAX_SLOTS, OPCODES, Program, encode

# This file's own opcodes (numba's cache sees only edits to this file, not to ops/fused.py's
# numbering), checked against the registry's below.
(_ADD, _SUB, _MUL, _DIV, _NEG, _EXP, _LOG, _SIN, _COS, _SQUARE, _SQRT, _POW, _RELU, _SIGMOID, _TANH, _GELU,
 _RELU_GRAD, _SIGMOID_GRAD, _TANH_GRAD, _GELU_GRAD) = range(20)
_NAMES = ("add", "sub", "mul", "div", "neg", "exp", "log", "sin", "cos", "square", "sqrt", "pow", "relu", "sigmoid",
          "tanh", "gelu", "relu_grad", "sigmoid_grad", "tanh_grad", "gelu_grad")
if dict(zip(_NAMES, range(len(_NAMES)))) != OPCODES:
    raise ImportError("kernels/cpu/fused.py: its opcodes differ from accelsim.ops.fused.OPCODES; update both")

_BLOCK = 128  # elements per block: slots x _BLOCK scratch stays in L1/L2 for programs of any allowed size
_CHUNK = 1 << 14  # elements per task: a row longer than this is split, so one long row uses every thread


_njit = numba.njit(cache=True, error_model="numpy")


@_njit
def _gelu_inner(x):
    return np.tanh(GELU_SQRT_2_OVER_PI * (x + GELU_CUBIC * x * x * x))


# One function per instruction, all of (x, y, p): x and y its operands (y = x for a unary op), p pow's
# exponent. The same formulas as the registry's references (the tests check each op against them).
@_njit
def _add(x, y, p):
    return x + y


@_njit
def _sub(x, y, p):
    return x - y


@_njit
def _mul(x, y, p):
    return x * y


@_njit
def _div(x, y, p):
    return x / y


@_njit
def _neg(x, y, p):
    return -x


@_njit
def _exp(x, y, p):
    return np.exp(x)


@_njit
def _log(x, y, p):
    return np.log(x)


@_njit
def _sin(x, y, p):
    return np.sin(x)


@_njit
def _cos(x, y, p):
    return np.cos(x)


@_njit
def _square(x, y, p):
    return x * x


@_njit
def _sqrt(x, y, p):
    return np.sqrt(x)


@_njit
def _pow(x, y, p):
    return np.power(x, p)


@_njit
def _relu(x, y, p):
    return 0.0 if x < 0 else x  # NaN passes through, as with np.maximum


@_njit
def _sigmoid(x, y, p):
    return 0.5 * (np.tanh(0.5 * x) + 1.0)  # overflow-free, as the reference


@_njit
def _tanh(x, y, p):
    return np.tanh(x)


@_njit
def _gelu(x, y, p):
    return 0.5 * x * (1.0 + _gelu_inner(x))


@_njit
def _relu_grad(g, x, p):
    return g if x > 0 else 0.0


@_njit
def _sigmoid_grad(g, y, p):
    return g * y * (1.0 - y)


@_njit
def _tanh_grad(g, y, p):
    return g * (1.0 - y * y)


@_njit
def _gelu_grad(g, x, p):
    t = _gelu_inner(x)
    dt = (1.0 - t * t) * GELU_SQRT_2_OVER_PI * (1.0 + 3 * GELU_CUBIC * x * x)
    return g * (0.5 * (1.0 + t) + 0.5 * x * dt)


@_njit
def _instruction(op, s, dst, a, b, p, n):
    """s[dst, :n] = the instruction on s[a, :n] and s[b, :n]. The opcode is tested once per block, and
    each branch is a plain loop that LLVM can vectorize (a function passed in as an argument would
    keep numba from caching the kernel)."""
    if op == _ADD:
        for j in range(n):
            s[dst, j] = _add(s[a, j], s[b, j], p)
    elif op == _SUB:
        for j in range(n):
            s[dst, j] = _sub(s[a, j], s[b, j], p)
    elif op == _MUL:
        for j in range(n):
            s[dst, j] = _mul(s[a, j], s[b, j], p)
    elif op == _DIV:
        for j in range(n):
            s[dst, j] = _div(s[a, j], s[b, j], p)
    elif op == _NEG:
        for j in range(n):
            s[dst, j] = _neg(s[a, j], s[b, j], p)
    elif op == _EXP:
        for j in range(n):
            s[dst, j] = _exp(s[a, j], s[b, j], p)
    elif op == _LOG:
        for j in range(n):
            s[dst, j] = _log(s[a, j], s[b, j], p)
    elif op == _SIN:
        for j in range(n):
            s[dst, j] = _sin(s[a, j], s[b, j], p)
    elif op == _COS:
        for j in range(n):
            s[dst, j] = _cos(s[a, j], s[b, j], p)
    elif op == _SQUARE:
        for j in range(n):
            s[dst, j] = _square(s[a, j], s[b, j], p)
    elif op == _SQRT:
        for j in range(n):
            s[dst, j] = _sqrt(s[a, j], s[b, j], p)
    elif op == _POW:
        for j in range(n):
            s[dst, j] = _pow(s[a, j], s[b, j], p)
    elif op == _RELU:
        for j in range(n):
            s[dst, j] = _relu(s[a, j], s[b, j], p)
    elif op == _SIGMOID:
        for j in range(n):
            s[dst, j] = _sigmoid(s[a, j], s[b, j], p)
    elif op == _TANH:
        for j in range(n):
            s[dst, j] = _tanh(s[a, j], s[b, j], p)
    elif op == _GELU:
        for j in range(n):
            s[dst, j] = _gelu(s[a, j], s[b, j], p)
    elif op == _RELU_GRAD:
        for j in range(n):
            s[dst, j] = _relu_grad(s[a, j], s[b, j], p)
    elif op == _SIGMOID_GRAD:
        for j in range(n):
            s[dst, j] = _sigmoid_grad(s[a, j], s[b, j], p)
    elif op == _TANH_GRAD:
        for j in range(n):
            s[dst, j] = _tanh_grad(s[a, j], s[b, j], p)
    else:  # _GELU_GRAD
        for j in range(n):
            s[dst, j] = _gelu_grad(s[a, j], s[b, j], p)


@numba.njit(parallel=True, cache=True, error_model="numpy")
def _run(ins, n_in, strides, shape, code, params, out):
    """out (flat, `shape` after collapse) = the program on the first n_in arrays of `ins` (flat
    arrays, each read at `strides[k]`: element strides over `shape`)."""
    n_slots = n_in + code.shape[0]
    row_len = shape[-1]
    chunks = (row_len + _CHUNK - 1) // _CHUNK
    for t in numba.prange(out.size // row_len * chunks):
        t = np.int64(t)  # prange may hand out uint64, and uint64 op int64 is float64
        row, first = t // chunks, (t % chunks) * _CHUNK
        end = min(row_len, first + _CHUNK)
        offsets = np.zeros(n_in, np.int64)  # each input's offset at the start of this row
        r = row
        for d in range(shape.size - 2, -1, -1):
            i = r % shape[d]
            for k in range(n_in):
                offsets[k] += i * strides[k, d]
            r //= shape[d]
        scratch = np.empty((n_slots, _BLOCK), out.dtype)
        for start in range(first, end, _BLOCK):
            n = min(_BLOCK, end - start)
            for k in range(n_in):
                x, step = ins[k], strides[k, -1]
                base = offsets[k] + start * step
                for j in range(n):
                    scratch[k, j] = x[base + j * step]
            for i in range(code.shape[0]):
                _instruction(code[i, 0], scratch, n_in + i, code[i, 1], code[i, 2], params[i], n)
            o = row * row_len + start
            for j in range(n):
                out[o + j] = scratch[n_slots - 1, j]


@kernel("fused_elementwise", "numba")
def fused_elementwise(*arrays: np.ndarray, program: Program) -> np.ndarray:
    """The output takes the first input's dtype (the others are cast to it), as the graph's nodes do."""
    first = np.asarray(arrays[0])
    dtype = first.dtype if first.dtype.kind == "f" else np.dtype(np.float64)
    ins = tuple(np.asarray(a, dtype=dtype, order="C") for a in arrays)  # 0-d stays 0-d
    code, params = encode(program, len(ins))
    # every slot's shape is its inputs' broadcast (each op broadcasts or keeps its operands' shape),
    # and the output reads every input
    out = np.empty(np.broadcast_shapes(*(a.shape for a in ins)), dtype)
    if out.size:
        dims, *strides = collapse(out.shape, *(broadcast_strides(a.shape, out.shape) for a in ins))
        # padded to MAX_SLOTS arrays: one compiled kernel per dtype, whatever the arity
        flat = tuple(a.reshape(-1) for a in ins) + (out.reshape(-1)[:1],) * (MAX_SLOTS - len(ins))
        _run(flat, len(ins), np.stack(strides), dims, code, params, out.reshape(-1))
    return out
