"""numba CPU kernels for elementwise ops: one parallel pass over the output, computing through the
scalar table (scalar.py).

add, sub, mul and div read each input through element strides that are 0 on broadcast axes, so a
broadcast operand (a bias, a scalar) is never materialised at the output's size. Every other op of the
opcode table takes same-shape operands and runs as one flat loop. error_model="numpy" keeps numpy's
IEEE results (x / 0 -> inf, log(0) -> -inf) instead of Python's exceptions.
"""
from __future__ import annotations

from typing import Any

import numba
import numpy as np

from accelsim.kernels.cpu import scalar
from accelsim.kernels.cpu.shape import broadcast_strides, collapse
from accelsim.kernels.registry import Kernel, kernel
from accelsim.ops.fused import INSTRUCTIONS, OPCODES, Opcode
from accelsim.ops.registry import get_op

_jit = scalar.jit(parallel=True)


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


_EQUAL = -1
"""Not an opcode: equal_mask's comparison, which only max's adjoint uses."""


@scalar.jit()
def _arith(op, x, y):
    if op == Opcode.ADD:
        return scalar.add(x, y)
    if op == Opcode.SUB:
        return scalar.sub(x, y)
    if op == Opcode.MUL:
        return scalar.mul(x, y)
    if op == Opcode.DIV:
        return scalar.div(x, y)
    # _EQUAL. Its float64 literals widen every op's result for float32 inputs: exactly, and LLVM
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
    return _binary(_EQUAL, x, y)


@kernel("add", "numba")
def add(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return _binary(OPCODES["add"], a, b)


@kernel("sub", "numba")
def sub(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return _binary(OPCODES["sub"], a, b)


@kernel("mul", "numba")
def mul(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return _binary(OPCODES["mul"], a, b)


@kernel("div", "numba")
def div(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return _binary(OPCODES["div"], a, b)


BROADCASTING = ("add", "sub", "mul", "div")
"""The ops of the opcode table whose operands broadcast (numpy's rules, as their registry entries)."""


# ---- every other op of the opcode table: same-shape operands, one flat loop ------------------

_BLOCK = 1 << 12  # elements per task; the opcode is dispatched once per block


@_jit
def _map_core(op, x, y, p, out):
    """out = the op on x (and y, of x's size), elementwise; p: pow's exponent."""
    for t in numba.prange((out.size + _BLOCK - 1) // _BLOCK):
        start = np.int64(t) * _BLOCK  # prange may hand out uint64, and uint64 op int64 is float64
        end = min(start + _BLOCK, out.size)
        scalar.apply_block(op, x[start:end], y[start:end], p, out[start:end], end - start)


def _mapped(name: str) -> Kernel:
    """The kernel of a same-shape op: its operands (the first's dtype, float64 unless floating), then its
    scalar parameters as node attributes."""
    op, spec = OPCODES[name], INSTRUCTIONS[name]

    def run(*arrays: np.ndarray, **attrs: Any) -> np.ndarray:
        x = _as_float(arrays[0])
        y = np.asarray(arrays[-1], x.dtype, order="C")  # a unary op's y is x
        out = np.empty(get_op(name).infer(*(np.shape(a) for a in arrays), **attrs), x.dtype)
        p = float(attrs[spec.params[0]]) if spec.params else 0.0
        if out.size:
            _map_core(op, x.reshape(-1), y.reshape(-1), p, out.reshape(-1))
        return out
    return run


for _name in OPCODES:
    if _name not in BROADCASTING:
        kernel(_name, "numba")(_mapped(_name))


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
