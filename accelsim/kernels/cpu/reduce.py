"""numba CPU kernels for reductions (sum, mean, max, max_grad, sum_to) and broadcast_to.

No reduction transposes its input. Size-1 axes are dropped and neighbouring axes of one kind
(reduced or kept) merged; each block of reduced axes is then one pass over a contiguous
(outer, reduced, inner) view, last block first. Every pass splits the reduced extent into chunks
whose partial results are combined at the end, so even a full reduction uses every thread.
"""
from __future__ import annotations

from math import prod

import numba
import numpy as np

from accelsim.kernels.cpu.elementwise import div, equal_mask, mul
from accelsim.kernels.cpu.shape import broadcast_strides, gather
from accelsim.kernels.registry import kernel
from accelsim.ops.reduce import normalize_axes
from accelsim.ops.registry import get_op

Shape = tuple[int, ...]
_INNER = 1024  # inner elements per task: a contiguous, vectorizable run
_TASKS = 64  # the reduced extent is split until there are this many tasks: enough for any CPU, and
# fixed, not the thread count, so the rounding of a sum does not depend on the machine


@numba.njit(cache=True)
def _larger(m, v):
    """The max of two, NaN winning as it does in np.max."""
    return v if (v > m or v != v) else m


@numba.njit(cache=True)
def _chunks(no: int, nr: int, ni: int) -> tuple[int, int, int]:
    """(reduced extent per task, reduced chunks, inner chunks) for an (no, nr, ni) pass."""
    ichunks = (ni + _INNER - 1) // _INNER
    rchunks = min(nr, max(1, (_TASKS + no * ichunks - 1) // (no * ichunks)))
    rstep = (nr + rchunks - 1) // rchunks
    return rstep, (nr + rstep - 1) // rstep, ichunks


@numba.njit(cache=True)
def _split(t: int, rchunks: int, ichunks: int, nr: int, ni: int, rstep: int):
    """Task t -> (outer index, reduced chunk, first/end reduced, first/end inner)."""
    t = np.int64(t)  # prange may hand out uint64, and uint64 op int64 is float64
    o, rc, ic = t // (rchunks * ichunks), (t // ichunks) % rchunks, t % ichunks
    return o, rc, rc * rstep, min(nr, (rc + 1) * rstep), ic * _INNER, min(ni, (ic + 1) * _INNER)


@numba.njit(parallel=True, cache=True, error_model="numpy", fastmath={"reassoc"})
def _sum_pass(x, count, out):
    """out[o, i] = sum_r x[o, r, i] / count, accumulated in float64 so float32 does not drift.

    reassoc lets LLVM vectorize the inner == 1 case (a row sum) with several accumulators.
    """
    no, nr, ni = x.shape
    rstep, rchunks, ichunks = _chunks(no, nr, ni)
    part = np.zeros((no, rchunks, ni))
    for t in numba.prange(no * rchunks * ichunks):
        o, rc, r0, r1, i0, i1 = _split(t, rchunks, ichunks, nr, ni, rstep)
        if ni == 1:
            acc = 0.0
            for r in range(r0, r1):
                acc += x[o, r, 0]
            part[o, rc, 0] = acc
        else:
            for r in range(r0, r1):
                for i in range(i0, i1):
                    part[o, rc, i] += x[o, r, i]
    for t in numba.prange(no * ni):
        o, i = np.int64(t) // ni, np.int64(t) % ni
        acc = 0.0
        for c in range(rchunks):
            acc += part[o, c, i]
        out[o, i] = acc / count


@numba.njit(parallel=True, cache=True)
def _max_pass(x, out):
    """out[o, i] = max_r x[o, r, i]; the reduced extent is non-empty."""
    no, nr, ni = x.shape
    rstep, rchunks, ichunks = _chunks(no, nr, ni)
    part = np.empty((no, rchunks, ni), x.dtype)
    for t in numba.prange(no * rchunks * ichunks):
        o, rc, r0, r1, i0, i1 = _split(t, rchunks, ichunks, nr, ni, rstep)
        for i in range(i0, i1):
            part[o, rc, i] = x[o, r0, i]
        for r in range(r0 + 1, r1):
            for i in range(i0, i1):
                part[o, rc, i] = _larger(part[o, rc, i], x[o, r, i])
    for t in numba.prange(no * ni):
        o, i = np.int64(t) // ni, np.int64(t) % ni
        m = part[o, 0, i]
        for c in range(1, rchunks):
            m = _larger(m, part[o, c, i])
        out[o, i] = m


def _passes(shape: Shape, axes: Shape) -> list[tuple[int, int, int]]:
    """(outer, reduced, inner) extents of each pass: one per block of reduced axes, last first."""
    blocks: list[list] = []  # [extent, reduced?] with neighbours of one kind merged
    for i, d in enumerate(shape):
        if d != 1 and blocks and blocks[-1][1] == (i in axes):
            blocks[-1][0] *= d
        elif d != 1:
            blocks.append([d, i in axes])
    passes = []
    while any(red for _, red in blocks):
        k = max(i for i, (_, red) in enumerate(blocks) if red)
        passes.append((prod(d for d, _ in blocks[:k]), blocks[k][0], prod(d for d, _ in blocks[k + 1:])))
        del blocks[k]
    return passes or [(1, 1, prod(shape))]  # nothing to reduce: one pass that copies


def _reduce(x: np.ndarray, axes: Shape, keepdims: bool, kind: str) -> np.ndarray:
    """kind: "sum", "mean" or "max"; the output takes x's dtype."""
    x = np.asarray(x, order="C")
    axes = normalize_axes(axes, x.ndim)
    if keepdims:
        shape = tuple(1 if i in axes else d for i, d in enumerate(x.shape))
    else:
        shape = tuple(d for i, d in enumerate(x.shape) if i not in axes)
    count = prod(x.shape[a] for a in axes)
    if x.size == 0:
        if kind == "max" and prod(shape):
            raise ValueError(f"max over axes {axes} of a tensor of shape {x.shape}: the reduced axes are empty")
        return np.full(shape, np.nan if kind == "mean" else 0.0, x.dtype)  # as numpy: 0/0 is nan
    y, passes = x, _passes(x.shape, axes)
    for k, (no, nr, ni) in enumerate(passes):
        last = k == len(passes) - 1
        # partial sums between passes stay float64; a max is exact in any dtype
        out = np.empty((no, ni), x.dtype if last or kind == "max" else np.float64)
        if kind == "max":
            _max_pass(y.reshape(no, nr, ni), out)
        else:
            _sum_pass(y.reshape(no, nr, ni), float(count) if last and kind == "mean" else 1.0, out)
        y = out
    return y.reshape(shape)


@kernel("sum", "numba")
def sum_(x: np.ndarray, axes: Shape, keepdims: bool) -> np.ndarray:
    return _reduce(x, axes, keepdims, "sum")


@kernel("mean", "numba")
def mean(x: np.ndarray, axes: Shape, keepdims: bool) -> np.ndarray:
    return _reduce(x, axes, keepdims, "mean")


@kernel("max", "numba")
def max_(x: np.ndarray, axes: Shape, keepdims: bool) -> np.ndarray:
    return _reduce(x, axes, keepdims, "max")


@kernel("max_grad", "numba")
def max_grad(g: np.ndarray, x: np.ndarray, y: np.ndarray, axes: Shape, keepdims: bool) -> np.ndarray:
    """g / ties at the positions where x equals its max y, else 0; the output takes x's dtype."""
    x = np.asarray(x)
    axes = normalize_axes(axes, x.ndim)
    kept = tuple(1 if i in axes else d for i, d in enumerate(x.shape))
    mask = equal_mask(x, np.reshape(y, kept))
    ties = _reduce(mask, axes, True, "sum")
    share = div(np.asarray(g, x.dtype).reshape(kept), np.maximum(ties, 1))  # ties == 0: y is no max of x
    return mul(mask, share)  # share finite, so 0 off the arg-max (as the reference's where)


@kernel("broadcast_to", "numba")
def broadcast_to(x: np.ndarray, shape: Shape) -> np.ndarray:
    """A contiguous copy; repeated axes are read with stride 0."""
    x = np.asarray(x)
    shape = get_op("broadcast_to").infer(x.shape, tuple(int(d) for d in shape))
    return gather(x, 0, broadcast_strides(x.shape, shape), shape)


@kernel("sum_to", "numba")
def sum_to(x: np.ndarray, shape: Shape) -> np.ndarray:
    """Sum x down to `shape`: over its extra leading axes and the axes `shape` has as 1."""
    x = np.asarray(x)
    shape = get_op("sum_to").infer(x.shape, tuple(int(d) for d in shape))
    lead = x.ndim - len(shape)
    axes = tuple(range(lead)) + tuple(lead + i for i, d in enumerate(shape) if d == 1 and x.shape[lead + i] != 1)
    return _reduce(x, axes, True, "sum").reshape(shape)
