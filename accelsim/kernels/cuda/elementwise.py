"""Elementwise ops: host arrays -> one thread per output element of a flat device array.

Every op of the opcode table gets one kernel built around its scalar function (scalar.py), inlined, so
the op is a compile-time choice; the function also gets T, the input's scalar type. Inputs are broadcast
to the output shape on the host; a scalar parameter (pow's exponent) is passed in the input's dtype.
"""
from __future__ import annotations

from typing import Any, Callable

import numpy as np
from numba import cuda

from accelsim.kernels.cuda.launch import device_empty, launch_1d, ptx_cases, to_device, to_host
from accelsim.kernels.cuda.scalar import SCALARS
from accelsim.kernels.registry import kernel
from accelsim.ops.fused import INSTRUCTIONS, Instruction


def _map1(f: Callable) -> Any:
    def map1(x, out):
        i = cuda.grid(1)
        if i < out.size:
            out[i] = f(x[i], x.dtype.type)
    return cuda.jit(map1)


def _map1p(f: Callable) -> Any:
    def map1p(x, p, out):
        i = cuda.grid(1)
        if i < out.size:
            out[i] = f(x[i], p, x.dtype.type)
    return cuda.jit(map1p)


def _map2(f: Callable) -> Any:
    def map2(a, b, out):
        i = cuda.grid(1)
        if i < out.size:
            out[i] = f(a[i], b[i], a.dtype.type)
    return cuda.jit(map2)


def _launch(kern: Any, arrays: tuple[np.ndarray, ...], params: tuple[float, ...]) -> np.ndarray:
    """kern(*flat inputs, *params, out) over the broadcast shape; the output and the params take the first
    input's dtype."""
    dtype = np.asarray(arrays[0]).dtype
    shape = np.broadcast_shapes(*(np.shape(a) for a in arrays))
    n = int(np.prod(shape))
    ins = [to_device(np.broadcast_to(np.asarray(a, dtype), shape).reshape(-1)) for a in arrays]
    out = device_empty(max(n, 1), dtype)
    launch_1d(kern, n, *ins, *(dtype.type(p) for p in params), out)
    return to_host(out, shape)


def _register(spec: Instruction, f: Callable) -> None:
    if spec.params:
        if spec.arity != 1 or len(spec.params) != 1:
            raise ImportError(f"kernels/cuda/elementwise.py: no kernel shape for {spec.op} ({spec.arity} operands, "
                              f"parameters {spec.params}); only one operand and one parameter (pow)")
        kern, signature = _map1p(f), "void({T}[::1], {T}, {T}[::1])"
    else:
        kern = (_map1 if spec.arity == 1 else _map2)(f)
        signature = "void(" + ", ".join(["{T}[::1]"] * (spec.arity + 1)) + ")"
    ptx_cases(spec.op, kern, signature, name=f"map_{spec.op}")

    @kernel(spec.op, "cuda")
    def run(*arrays: np.ndarray, **attrs: Any) -> np.ndarray:
        return _launch(kern, arrays, tuple(attrs[name] for name in spec.params))


for _spec in INSTRUCTIONS.values():
    _register(_spec, SCALARS[_spec.op])
