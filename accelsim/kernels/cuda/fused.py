"""CUDA kernel for fused_elementwise: one thread per output element interprets the whole program.

The inputs are packed into one flat device array (so one kernel serves every arity) and each thread
reads its elements through broadcast strides; its slots live in a per-thread local array of
MAX_SLOTS, which is why infer refuses longer programs. One kernel per float dtype: a local array's
type is fixed at compile time. Each instruction is the scalar table's `apply` (scalar.py).
"""
from __future__ import annotations

import math

import numpy as np
from numba import cuda, float32, float64

from accelsim.kernels.cuda.launch import device_empty, launch_1d, to_device, to_host
from accelsim.kernels.cuda.scalar import apply
from accelsim.kernels.registry import kernel, ptx_case
from accelsim.ops.fused import MAX_SLOTS, Program, encode


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
            slots[n_in + s] = apply(code[s, 0], slots[code[s, 1]], slots[code[s, 2]], params[s], T)
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
