"""Elementwise ops: host arrays -> one thread per output element of a flat device array.

Each op is a small inlined device function; `_map1`/`_map2` build one kernel per op around it,
so the op is a compile-time choice. The functions also get T, the input's scalar type, and write
constants as T(0.5): a bare 0.5 is a float64 and would turn float32 math into float64 math.
Binary inputs are broadcast to the output shape on the host.
"""
from __future__ import annotations

import math
from typing import Any, Callable

import numpy as np
from numba import cuda

from accelsim.kernels.cuda.launch import device_empty, inline_device, launch_1d, ptx_cases, to_device, to_host
from accelsim.kernels.registry import kernel
from accelsim.ops.elementwise import GELU_CUBIC, GELU_SQRT_2_OVER_PI



def _map1(f: Callable) -> Any:
    def map1(x, out):
        i = cuda.grid(1)
        if i < out.size:
            out[i] = f(x[i], x.dtype.type)
    return cuda.jit(map1)


def _map2(f: Callable) -> Any:
    def map2(a, b, out):
        i = cuda.grid(1)
        if i < out.size:
            out[i] = f(a[i], b[i], a.dtype.type)
    return cuda.jit(map2)


def _launch(kern: Any, *arrays: np.ndarray) -> np.ndarray:
    """kern(*flat inputs, out) over the broadcast shape; the output takes the first input's dtype."""
    dtype = np.asarray(arrays[0]).dtype
    shape = np.broadcast_shapes(*(np.shape(a) for a in arrays))
    n = int(np.prod(shape))
    ins = [to_device(np.broadcast_to(np.asarray(a, dtype), shape).reshape(-1)) for a in arrays]
    out = device_empty(max(n, 1), dtype)
    launch_1d(kern, n, *ins, out)
    return to_host(out, shape)


def _register(name: str, f: Callable, arity: int) -> None:
    kern = (_map1 if arity == 1 else _map2)(f)
    ptx_cases(name, kern, "void(" + ", ".join(["{T}[::1]"] * (arity + 1)) + ")", name=f"map_{name}")

    @kernel(name, "cuda")
    def run(*arrays: np.ndarray) -> np.ndarray:
        return _launch(kern, *arrays)


# ---- the ops, as scalar device functions of (inputs..., T) ---------------------------------

@inline_device
def _sigmoid(x, T):
    return T(0.5) * (math.tanh(T(0.5) * x) + T(1))  # overflow-free, as the reference


@inline_device
def _gelu_inner(x, T):
    return math.tanh(T(GELU_SQRT_2_OVER_PI) * (x + T(GELU_CUBIC) * x * x * x))


@inline_device
def _gelu(x, T):
    return T(0.5) * x * (T(1) + _gelu_inner(x, T))


@inline_device
def _gelu_grad(g, x, T):
    t = _gelu_inner(x, T)
    dt = (T(1) - t * t) * T(GELU_SQRT_2_OVER_PI) * (T(1) + T(3 * GELU_CUBIC) * x * x)
    return g * (T(0.5) * (T(1) + t) + T(0.5) * x * dt)


_UNARY = {
    "neg": inline_device(lambda x, T: -x),
    "exp": inline_device(lambda x, T: math.exp(x)),
    "log": inline_device(lambda x, T: math.log(x)),
    "sin": inline_device(lambda x, T: math.sin(x)),
    "cos": inline_device(lambda x, T: math.cos(x)),
    "erf": inline_device(lambda x, T: math.erf(x)),
    "square": inline_device(lambda x, T: x * x),
    "sqrt": inline_device(lambda x, T: math.sqrt(x)),
    "relu": inline_device(lambda x, T: x if x > 0 else T(0)),
    "sigmoid": _sigmoid,
    "tanh": inline_device(lambda x, T: math.tanh(x)),
    "gelu": _gelu,
}
_BINARY = {
    "add": inline_device(lambda a, b, T: a + b),
    "sub": inline_device(lambda a, b, T: a - b),
    "mul": inline_device(lambda a, b, T: a * b),
    "div": inline_device(lambda a, b, T: a / b),
    "relu_grad": inline_device(lambda g, x, T: g if x > 0 else T(0)),
    "sigmoid_grad": inline_device(lambda g, y, T: g * y * (T(1) - y)),
    "tanh_grad": inline_device(lambda g, y, T: g * (T(1) - y * y)),
    "gelu_grad": _gelu_grad,
}
for _name, _f in _UNARY.items():
    _register(_name, _f, 1)
for _name, _f in _BINARY.items():
    _register(_name, _f, 2)


# ---- pow: the exponent is a node attribute, passed in the input's dtype -----------------

@cuda.jit
def _pow(x, exponent, out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = x[i] ** exponent


ptx_cases("pow", _pow, "void({T}[::1], {T}, {T}[::1])")


@kernel("pow", "cuda")
def pow_(x: np.ndarray, exponent: float) -> np.ndarray:
    x = np.asarray(x)
    n = x.size
    out = device_empty(max(n, 1), x.dtype)
    launch_1d(_pow, n, to_device(x.reshape(-1)), x.dtype.type(exponent), out)
    return to_host(out, x.shape)
