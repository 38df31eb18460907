"""CUDA kernel for fused_elementwise: one thread per output element interprets the whole program.

The inputs are packed into one flat device array (so one kernel serves every arity) and each thread
reads its elements through broadcast strides; its slots live in a per-thread local array of
MAX_SLOTS, which is why infer refuses longer programs. One kernel per float dtype: a local array's
type is fixed at compile time, and constants are written T(0.5) so float32 math stays float32.
"""
from __future__ import annotations

import math

import numpy as np
from numba import cuda, float32, float64

from accelsim.kernels.cuda.launch import device_empty, inline_device, launch_1d, to_device, to_host
from accelsim.kernels.registry import kernel, ptx_case
from accelsim.ops.elementwise import GELU_CUBIC, GELU_SQRT_2_OVER_PI
from accelsim.ops.fused import MAX_SLOTS, OPCODES, Program, encode

(_ADD, _SUB, _MUL, _DIV, _NEG, _EXP, _LOG, _SIN, _COS, _SQUARE, _SQRT, _POW, _RELU, _SIGMOID, _TANH, _GELU,
 _RELU_GRAD, _SIGMOID_GRAD, _TANH_GRAD, _GELU_GRAD) = range(20)
_NAMES = ("add", "sub", "mul", "div", "neg", "exp", "log", "sin", "cos", "square", "sqrt", "pow", "relu", "sigmoid",
          "tanh", "gelu", "relu_grad", "sigmoid_grad", "tanh_grad", "gelu_grad")
if dict(zip(_NAMES, range(len(_NAMES)))) != OPCODES:
    raise ImportError("kernels/cuda/fused.py: its opcodes differ from accelsim.ops.fused.OPCODES; update both")


@inline_device
def _gelu_inner(x, T):
    return math.tanh(T(GELU_SQRT_2_OVER_PI) * (x + T(GELU_CUBIC) * x * x * x))


@inline_device
def _apply(op, x, y, p, T):
    """One instruction on one element (y = x for a unary op; p: pow's exponent), as the registry's refs."""
    if op == _ADD:
        return x + y
    if op == _SUB:
        return x - y
    if op == _MUL:
        return x * y
    if op == _DIV:
        return x / y
    if op == _NEG:
        return -x
    if op == _EXP:
        return math.exp(x)
    if op == _LOG:
        return math.log(x)
    if op == _SIN:
        return math.sin(x)
    if op == _COS:
        return math.cos(x)
    if op == _SQUARE:
        return x * x
    if op == _SQRT:
        return math.sqrt(x)
    if op == _POW:
        return x ** p
    if op == _RELU:
        return x if x > 0 else T(0)
    if op == _SIGMOID:
        return T(0.5) * (math.tanh(T(0.5) * x) + T(1))  # overflow-free, as the reference
    if op == _TANH:
        return math.tanh(x)
    if op == _GELU:
        return T(0.5) * x * (T(1) + _gelu_inner(x, T))
    if op == _RELU_GRAD:
        return x if y > 0 else T(0)
    if op == _SIGMOID_GRAD:
        return x * y * (T(1) - y)
    if op == _TANH_GRAD:
        return x * (T(1) - y * y)
    t = _gelu_inner(y, T)  # _GELU_GRAD: x the incoming gradient, y gelu's input
    dt = (T(1) - t * t) * T(GELU_SQRT_2_OVER_PI) * (T(1) + T(3 * GELU_CUBIC) * y * y)
    return x * (T(0.5) * (T(1) + t) + T(0.5) * y * dt)


def _make(T):
    def fused(packed, bases, strides, shape, code, params, out):
        """out[i] = the program at output element i; input k's element at bases[k] + index . strides[k]."""
        i = cuda.grid(1)
        if i >= out.size:
            return
        slots = cuda.local.array(MAX_SLOTS, T)
        n_in = bases.size
        for k in range(n_in):
            offset, r = bases[k], i
            for d in range(shape.size - 1, -1, -1):
                offset += (r % shape[d]) * strides[k, d]
                r //= shape[d]
            slots[k] = packed[offset]
        n = code.shape[0]
        for s in range(n):
            slots[n_in + s] = _apply(code[s, 0], slots[code[s, 1]], slots[code[s, 2]], params[s], T)
        out[i] = slots[n_in + n - 1]
    return cuda.jit(fused)


_KERNELS = {"float32": _make(float32), "float64": _make(float64)}
for _t, _kern in _KERNELS.items():
    ptx_case(f"fused_elementwise:fused[{_t}]", _kern.py_func,
             f"void({_t}[::1], int64[::1], int64[:, ::1], int64[::1], int64[:, ::1], {_t}[::1], {_t}[::1])")


@kernel("fused_elementwise", "cuda")
def fused_elementwise(*arrays: np.ndarray, program: Program) -> np.ndarray:
    """The output takes the first input's dtype (the others are cast to it), as the graph's nodes do."""
    first = np.asarray(arrays[0])
    dtype = first.dtype if first.dtype.kind == "f" else np.dtype(np.float64)
    ins = [np.asarray(a, dtype=dtype, order="C") for a in arrays]
    code, params = encode(program, len(ins))
    shape = np.broadcast_shapes(*(a.shape for a in ins))  # the output reads every input (see kernels/cpu/fused.py)
    n = math.prod(shape)
    # shape as int64 with at least one axis (a 0-d output is one element)
    dims = np.array(shape or (1,), np.int64)
    # element strides of each input viewed at the output's shape: numpy's, 0 on broadcast axes
    strides = np.array([tuple(s // dtype.itemsize for s in np.broadcast_to(a, shape).strides) or (0,) for a in ins],
                       np.int64)
    bases = np.cumsum([0] + [a.size for a in ins[:-1]]).astype(np.int64)
    packed = np.concatenate([a.reshape(-1) for a in ins] + [np.zeros(1, dtype)])  # never empty
    out = device_empty(max(n, 1), dtype)
    if n:
        launch_1d(_KERNELS[dtype.name], n, to_device(packed), to_device(bases), to_device(strides), to_device(dims),
                  to_device(code), to_device(params.astype(dtype)), out)
    return to_host(out, shape)
