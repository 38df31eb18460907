"""The numba CPU backend's scalar table: one jitted function per op of the opcode table (ops/fused.py),
each the formula of its op's numpy reference; `apply`, which runs one of them chosen by opcode on one
element, and `apply_block`, which does so over a stretch of elements. The elementwise,
fused_elementwise and epilogue kernels compute through these and nothing else, so a formula is written
once for this backend.

A float32 operand meets float64 literals (0.5, 1.0) here, so such formulas compute in float64 and the
kernels round once when they store, as the kernels always have. Kernels that call these functions are
jitted with `jit` below: their cache entries carry this file's stamp, so editing a formula or
renumbering the opcodes recompiles them instead of loading machine code built on the old version.
"""
from __future__ import annotations

import math
from pathlib import Path
from typing import Any, Callable

import numpy as np

from accelsim.kernels.cpu.jit_cache import stamp_of, stamped_njit
from accelsim.ops.elementwise import GELU_CUBIC, GELU_SQRT_2_OVER_PI
from accelsim.ops.fused import OPCODES, Opcode

STAMP = stamp_of(Path(__file__).read_bytes(), repr(sorted(OPCODES.items())), repr((GELU_SQRT_2_OVER_PI, GELU_CUBIC)))
"""What code built on this table depends on: this file, the opcode numbering, GELU's constants."""


def jit(**options: Any) -> Callable[[Callable], Any]:
    """numba.njit for code that calls this table: cached, with this table's stamp in the cache key."""
    return stamped_njit(STAMP, error_model="numpy", **options)


_scalar = jit()


# ---- one function per op: operands, then pow's exponent ---------------------------------------

@_scalar
def add(x, y):
    return x + y


@_scalar
def sub(x, y):
    return x - y


@_scalar
def mul(x, y):
    return x * y


@_scalar
def div(x, y):
    return x / y


@_scalar
def neg(x):
    return -x


@_scalar
def exp(x):
    return np.exp(x)


@_scalar
def log(x):
    return np.log(x)


@_scalar
def sin(x):
    return np.sin(x)


@_scalar
def cos(x):
    return np.cos(x)


@_scalar
def erf(x):
    return math.erf(x)  # libm's, as the reference's


@_scalar
def square(x):
    return x * x


@_scalar
def sqrt(x):
    return np.sqrt(x)


@_scalar
def pow_(x, exponent):
    return np.power(x, exponent)


@_scalar
def relu(x):
    return 0.0 if x < 0 else x  # NaN passes through, as with np.maximum


@_scalar
def sigmoid(x):
    return 0.5 * (np.tanh(0.5 * x) + 1.0)  # overflow-free, as the reference


@_scalar
def tanh(x):
    return np.tanh(x)


@_scalar
def _gelu_tanh(x):
    """tanh(sqrt(2/pi) (x + 0.044715 x^3)): the inner term gelu and gelu_grad share."""
    return np.tanh(GELU_SQRT_2_OVER_PI * (x + GELU_CUBIC * x * x * x))


@_scalar
def gelu(x):
    return 0.5 * x * (1.0 + _gelu_tanh(x))


@_scalar
def relu_grad(g, x):
    return g if x > 0 else 0.0


@_scalar
def sigmoid_grad(g, y):
    return g * y * (1.0 - y)


@_scalar
def tanh_grad(g, y):
    return g * (1.0 - y * y)


@_scalar
def gelu_grad(g, x):
    t = _gelu_tanh(x)
    dt = (1.0 - t * t) * GELU_SQRT_2_OVER_PI * (1.0 + 3 * GELU_CUBIC * x * x)
    return g * (0.5 * (1.0 + t) + 0.5 * x * dt)


SCALARS: dict[str, Any] = {
    "add": add, "sub": sub, "mul": mul, "div": div, "neg": neg, "exp": exp, "log": log, "sin": sin, "cos": cos,
    "erf": erf, "square": square, "sqrt": sqrt, "pow": pow_, "relu": relu, "sigmoid": sigmoid, "tanh": tanh,
    "gelu": gelu, "relu_grad": relu_grad, "sigmoid_grad": sigmoid_grad, "tanh_grad": tanh_grad,
    "gelu_grad": gelu_grad,
}
"""The table: op name -> its scalar function (callable from Python too, on numbers)."""
if set(SCALARS) != set(OPCODES):
    raise ImportError(f"kernels/cpu/scalar.py: the scalar table and the opcode table (ops/fused.py) differ: "
                      f"{sorted(set(SCALARS) ^ set(OPCODES))}")


# ---- by opcode -------------------------------------------------------------------------------

@_scalar
def apply(op, x, y, p):
    """The op on one element: x (and y; a unary op ignores it), p: pow's exponent. An opcode without a
    branch gives NaN, which every kernel test sees."""
    if op == Opcode.ADD:
        return add(x, y)
    if op == Opcode.SUB:
        return sub(x, y)
    if op == Opcode.MUL:
        return mul(x, y)
    if op == Opcode.DIV:
        return div(x, y)
    if op == Opcode.NEG:
        return neg(x)
    if op == Opcode.EXP:
        return exp(x)
    if op == Opcode.LOG:
        return log(x)
    if op == Opcode.SIN:
        return sin(x)
    if op == Opcode.COS:
        return cos(x)
    if op == Opcode.ERF:
        return erf(x)
    if op == Opcode.SQUARE:
        return square(x)
    if op == Opcode.SQRT:
        return sqrt(x)
    if op == Opcode.POW:
        return pow_(x, p)
    if op == Opcode.RELU:
        return relu(x)
    if op == Opcode.SIGMOID:
        return sigmoid(x)
    if op == Opcode.TANH:
        return tanh(x)
    if op == Opcode.GELU:
        return gelu(x)
    if op == Opcode.RELU_GRAD:
        return relu_grad(x, y)
    if op == Opcode.SIGMOID_GRAD:
        return sigmoid_grad(x, y)
    if op == Opcode.TANH_GRAD:
        return tanh_grad(x, y)
    if op == Opcode.GELU_GRAD:
        return gelu_grad(x, y)
    return np.nan


@_scalar
def apply_block(op, x, y, p, out, n):
    """out[j] = apply(op, x[j], y[j], p) for j < n, with the opcode tested once per call: each branch is
    a plain loop from 0, which LLVM vectorizes (an index it cannot prove non-negative keeps numba's
    negative-index wraparound in the loop, and a function passed in instead would keep numba from
    caching its callers). Pass slices to start elsewhere. The price is compiling every opcode's loop
    into each kernel that calls it."""
    if op == Opcode.ADD:
        for j in range(n):
            out[j] = add(x[j], y[j])
    elif op == Opcode.SUB:
        for j in range(n):
            out[j] = sub(x[j], y[j])
    elif op == Opcode.MUL:
        for j in range(n):
            out[j] = mul(x[j], y[j])
    elif op == Opcode.DIV:
        for j in range(n):
            out[j] = div(x[j], y[j])
    elif op == Opcode.NEG:
        for j in range(n):
            out[j] = neg(x[j])
    elif op == Opcode.EXP:
        for j in range(n):
            out[j] = exp(x[j])
    elif op == Opcode.LOG:
        for j in range(n):
            out[j] = log(x[j])
    elif op == Opcode.SIN:
        for j in range(n):
            out[j] = sin(x[j])
    elif op == Opcode.COS:
        for j in range(n):
            out[j] = cos(x[j])
    elif op == Opcode.ERF:
        for j in range(n):
            out[j] = erf(x[j])
    elif op == Opcode.SQUARE:
        for j in range(n):
            out[j] = square(x[j])
    elif op == Opcode.SQRT:
        for j in range(n):
            out[j] = sqrt(x[j])
    elif op == Opcode.POW:
        for j in range(n):
            out[j] = pow_(x[j], p)
    elif op == Opcode.RELU:
        for j in range(n):
            out[j] = relu(x[j])
    elif op == Opcode.SIGMOID:
        for j in range(n):
            out[j] = sigmoid(x[j])
    elif op == Opcode.TANH:
        for j in range(n):
            out[j] = tanh(x[j])
    elif op == Opcode.GELU:
        for j in range(n):
            out[j] = gelu(x[j])
    elif op == Opcode.RELU_GRAD:
        for j in range(n):
            out[j] = relu_grad(x[j], y[j])
    elif op == Opcode.SIGMOID_GRAD:
        for j in range(n):
            out[j] = sigmoid_grad(x[j], y[j])
    elif op == Opcode.TANH_GRAD:
        for j in range(n):
            out[j] = tanh_grad(x[j], y[j])
    elif op == Opcode.GELU_GRAD:
        for j in range(n):
            out[j] = gelu_grad(x[j], y[j])
    else:
        for j in range(n):
            out[j] = np.nan
