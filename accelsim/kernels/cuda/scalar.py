"""The CUDA backend's scalar table: one inlined device function per op of the opcode table (ops/fused.py),
each the formula of its op's numpy reference, and `apply`, which runs one of them chosen by opcode. The
elementwise, fused_elementwise and epilogue kernels compute through these and nothing else, so a formula
is written once for this backend.

Each function takes its operands, pow also its exponent, then T, the operands' scalar type: constants
are written T(0.5), since a bare 0.5 is a float64 and would turn float32 math into float64 math.
"""
from __future__ import annotations

import math
from typing import Any

from accelsim.kernels.cuda.launch import inline_device
from accelsim.ops.elementwise import GELU_CUBIC, GELU_SQRT_2_OVER_PI
from accelsim.ops.fused import OPCODES, Opcode


@inline_device
def add(x, y, T):
    return x + y


@inline_device
def sub(x, y, T):
    return x - y


@inline_device
def mul(x, y, T):
    return x * y


@inline_device
def div(x, y, T):
    return x / y


@inline_device
def neg(x, T):
    return -x


@inline_device
def exp(x, T):
    return math.exp(x)


@inline_device
def log(x, T):
    return math.log(x)


@inline_device
def sin(x, T):
    return math.sin(x)


@inline_device
def cos(x, T):
    return math.cos(x)


@inline_device
def erf(x, T):
    return math.erf(x)


@inline_device
def square(x, T):
    return x * x


@inline_device
def sqrt(x, T):
    return math.sqrt(x)


@inline_device
def pow_(x, exponent, T):
    return x ** exponent


@inline_device
def relu(x, T):
    return x if x > 0 else T(0)


@inline_device
def sigmoid(x, T):
    return T(0.5) * (math.tanh(T(0.5) * x) + T(1))  # overflow-free, as the reference


@inline_device
def tanh(x, T):
    return math.tanh(x)


@inline_device
def _gelu_tanh(x, T):
    """tanh(sqrt(2/pi) (x + 0.044715 x^3)): the inner term gelu and gelu_grad share."""
    return math.tanh(T(GELU_SQRT_2_OVER_PI) * (x + T(GELU_CUBIC) * x * x * x))


@inline_device
def gelu(x, T):
    return T(0.5) * x * (T(1) + _gelu_tanh(x, T))


@inline_device
def relu_grad(g, x, T):
    return g if x > 0 else T(0)


@inline_device
def sigmoid_grad(g, y, T):
    return g * y * (T(1) - y)


@inline_device
def tanh_grad(g, y, T):
    return g * (T(1) - y * y)


@inline_device
def gelu_grad(g, x, T):
    t = _gelu_tanh(x, T)
    dt = (T(1) - t * t) * T(GELU_SQRT_2_OVER_PI) * (T(1) + T(3 * GELU_CUBIC) * x * x)
    return g * (T(0.5) * (T(1) + t) + T(0.5) * x * dt)


SCALARS: dict[str, Any] = {
    "add": add, "sub": sub, "mul": mul, "div": div, "neg": neg, "exp": exp, "log": log, "sin": sin, "cos": cos,
    "erf": erf, "square": square, "sqrt": sqrt, "pow": pow_, "relu": relu, "sigmoid": sigmoid, "tanh": tanh,
    "gelu": gelu, "relu_grad": relu_grad, "sigmoid_grad": sigmoid_grad, "tanh_grad": tanh_grad,
    "gelu_grad": gelu_grad,
}
"""The table: op name -> its device function."""
if set(SCALARS) != set(OPCODES):
    raise ImportError(f"kernels/cuda/scalar.py: the scalar table and the opcode table (ops/fused.py) differ: "
                      f"{sorted(set(SCALARS) ^ set(OPCODES))}")


@inline_device
def apply(op, x, y, p, T):
    """The op on x (and y; a unary op ignores it), p: pow's exponent in T. An opcode without a branch
    gives NaN, which every kernel test sees."""
    if op == Opcode.ADD:
        return add(x, y, T)
    if op == Opcode.SUB:
        return sub(x, y, T)
    if op == Opcode.MUL:
        return mul(x, y, T)
    if op == Opcode.DIV:
        return div(x, y, T)
    if op == Opcode.NEG:
        return neg(x, T)
    if op == Opcode.EXP:
        return exp(x, T)
    if op == Opcode.LOG:
        return log(x, T)
    if op == Opcode.SIN:
        return sin(x, T)
    if op == Opcode.COS:
        return cos(x, T)
    if op == Opcode.ERF:
        return erf(x, T)
    if op == Opcode.SQUARE:
        return square(x, T)
    if op == Opcode.SQRT:
        return sqrt(x, T)
    if op == Opcode.POW:
        return pow_(x, p, T)
    if op == Opcode.RELU:
        return relu(x, T)
    if op == Opcode.SIGMOID:
        return sigmoid(x, T)
    if op == Opcode.TANH:
        return tanh(x, T)
    if op == Opcode.GELU:
        return gelu(x, T)
    if op == Opcode.RELU_GRAD:
        return relu_grad(x, y, T)
    if op == Opcode.SIGMOID_GRAD:
        return sigmoid_grad(x, y, T)
    if op == Opcode.TANH_GRAD:
        return tanh_grad(x, y, T)
    if op == Opcode.GELU_GRAD:
        return gelu_grad(x, y, T)
    return T(math.nan)
