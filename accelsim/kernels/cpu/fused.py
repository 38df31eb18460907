"""numba CPU kernel for fused_elementwise: the whole program in one parallel pass over the output.

An interpreter over an int opcode array. Each task takes a stretch of one output row; it loads its
inputs through broadcast strides (0 on broadcast axes, so a bias is never materialised) into a small
scratch of slots x _BLOCK elements, runs every instruction over the block with the scalar table's
apply_block (the opcode is fixed for the inner loop, so the dispatch is paid once per block, not per
element), and writes the last slot out. Intermediates never leave the scratch.
"""
from __future__ import annotations

import numba
import numpy as np

from accelsim.kernels.cpu import scalar
from accelsim.kernels.cpu.shape import broadcast_strides, collapse
from accelsim.kernels.registry import kernel
from accelsim.ops.fused import MAX_SLOTS, Program, encode

_BLOCK = 128  # elements per block: slots x _BLOCK scratch stays in L1/L2 for programs of any allowed size
_CHUNK = 1 << 14  # elements per task: a row longer than this is split, so one long row uses every thread


@scalar.jit(parallel=True)
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
                scalar.apply_block(code[i, 0], scratch[code[i, 1]], scratch[code[i, 2]], params[i],
                                   scratch[n_in + i], n)
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
