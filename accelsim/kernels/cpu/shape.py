"""numba CPU kernels for data movement: reshape, transpose, concat, slice(_grad), pixel (un)shuffle.

Each is one strided copy. The output is walked row by row (a row: every axis but the last); each
row's start in the source comes from element strides, and the row is copied at the last stride.
"""
from __future__ import annotations

from typing import Sequence

import numba
import numpy as np

from accelsim.kernels.registry import kernel
from accelsim.ops.registry import get_op

Shape = tuple[int, ...]


def contiguous_strides(shape: Sequence[int]) -> Shape:
    """Row-major strides in elements, not bytes."""
    strides, step = [], 1
    for d in reversed(tuple(shape)):
        strides.append(step)
        step *= int(d)
    return tuple(reversed(strides))


def broadcast_strides(shape: Shape, out_shape: Shape) -> Shape:
    """Element strides that read a contiguous `shape` array as if broadcast to `out_shape`."""
    padded = (1,) * (len(out_shape) - len(shape)) + tuple(shape)
    return tuple(0 if d == 1 else s for d, s in zip(padded, contiguous_strides(padded)))


def collapse(shape: Shape, *strides: Shape) -> tuple[np.ndarray, ...]:
    """Drop size-1 axes and merge neighbours every view walks as one, so rows are long.

    Returns int64 arrays (shape, *strides) of rank >= 1 that address the same elements.
    """
    merged: list[tuple[int, list[int]]] = []
    for k, d in enumerate(shape):
        if d == 1:
            continue
        st = [int(s[k]) for s in strides]
        if merged and all(p == q * d for p, q in zip(merged[-1][1], st)):
            merged[-1] = (merged[-1][0] * int(d), st)
        else:
            merged.append((int(d), st))
    merged = merged or [(1, [0] * len(strides))]
    return (np.array([d for d, _ in merged], np.int64),
            *(np.array([st[i] for _, st in merged], np.int64) for i in range(len(strides))))


_CHUNK = 1 << 14  # elements per task: a row longer than this is split, so one long row uses every thread


@numba.njit(cache=True)
def _task(t: int, shape: np.ndarray, strides: np.ndarray, chunks: int) -> tuple[int, int, int, int]:
    """Task t -> (output offset of its row, source offset of its row, first, end) along the row."""
    t = np.int64(t)  # prange may hand out uint64, and uint64 op int64 is float64
    row, first = t // chunks, (t % chunks) * _CHUNK
    out_start, start = row * shape[-1], 0
    for k in range(shape.size - 2, -1, -1):
        start += (row % shape[k]) * strides[k]
        row //= shape[k]
    return out_start, start, first, min(shape[-1], first + _CHUNK)


@numba.njit(parallel=True, cache=True)
def _gather(src, base, strides, shape, out):
    """out (flat, `shape`) = src[base + index . strides]."""
    chunks, step = (shape[-1] + _CHUNK - 1) // _CHUNK, strides[-1]
    for t in numba.prange(out.size // shape[-1] * chunks):
        o, s, first, end = _task(t, shape, strides, chunks)
        s += base
        if step == 1:  # a separate unit-stride loop: LLVM vectorizes only that one
            for j in range(first, end):
                out[o + j] = src[s + j]
        else:
            for j in range(first, end):
                out[o + j] = src[s + j * step]


@numba.njit(parallel=True, cache=True)
def _scatter(src, dst, base, strides, shape):
    """dst[base + index . strides] = src (flat, `shape`); distinct indices never collide."""
    chunks, step = (shape[-1] + _CHUNK - 1) // _CHUNK, strides[-1]
    for t in numba.prange(src.size // shape[-1] * chunks):
        o, d, first, end = _task(t, shape, strides, chunks)
        d += base
        if step == 1:
            for j in range(first, end):
                dst[d + j] = src[o + j]
        else:
            for j in range(first, end):
                dst[d + j * step] = src[o + j]


def gather(x: np.ndarray, base: int, strides: Sequence[int], shape: Sequence[int]) -> np.ndarray:
    """A new contiguous `shape` array read from x; base and strides address x's row-major layout."""
    x = np.asarray(x, order="C")
    out = np.empty(tuple(shape), x.dtype)
    if out.size:
        dims, st = collapse(out.shape, tuple(strides))
        _gather(x.reshape(-1), base, st, dims, out.reshape(-1))
    return out


def scatter(src: np.ndarray, dst: np.ndarray, base: int, strides: Sequence[int]) -> None:
    """Write src into the contiguous dst at base + index . strides (dst's element strides)."""
    if src.size:
        dims, st = collapse(src.shape, tuple(strides))
        _scatter(np.asarray(src, dst.dtype, order="C").reshape(-1), dst.reshape(-1), base, st, dims)


@kernel("reshape", "numba")
def reshape(x: np.ndarray, shape: Shape) -> np.ndarray:
    x = np.asarray(x)
    shape = get_op("reshape").infer(x.shape, tuple(shape))
    return gather(x, 0, contiguous_strides(shape), shape)  # row-major order is kept: a flat copy


@kernel("transpose", "numba")
def transpose(x: np.ndarray, axes: Shape) -> np.ndarray:
    x = np.asarray(x)
    shape = get_op("transpose").infer(x.shape, tuple(axes))
    strides = contiguous_strides(x.shape)
    return gather(x, 0, [strides[a] for a in axes], shape)


@kernel("concat", "numba")
def concat(*xs: np.ndarray, axis: int) -> np.ndarray:
    """Each input is scattered into its window of the output along `axis`."""
    xs = tuple(np.asarray(x) for x in xs)
    out = np.empty(get_op("concat").infer(*(x.shape for x in xs), axis=axis), xs[0].dtype)
    strides = contiguous_strides(out.shape)
    offset = 0
    for x in xs:
        scatter(x, out, offset * strides[axis], strides)
        offset += x.shape[axis]
    return out


def _window_base(shape: Shape, starts: Shape) -> int:
    return sum(s * st for s, st in zip(starts, contiguous_strides(shape)))


@kernel("slice", "numba")
def slice_(x: np.ndarray, starts: Shape, stops: Shape) -> np.ndarray:
    x = np.asarray(x)
    shape = get_op("slice").infer(x.shape, tuple(starts), tuple(stops))
    return gather(x, _window_base(x.shape, starts), contiguous_strides(x.shape), shape)


@kernel("slice_grad", "numba")
def slice_grad(g: np.ndarray, input_shape: Shape, starts: Shape, stops: Shape) -> np.ndarray:
    g = np.asarray(g)
    input_shape = tuple(input_shape)
    window = get_op("slice").infer(input_shape, tuple(starts), tuple(stops))
    if g.shape != window:
        raise ValueError(f"slice_grad: g has shape {g.shape}, the window [{starts}:{stops}] is {window}")
    out = np.zeros(input_shape, g.dtype)
    scatter(g, out, _window_base(input_shape, starts), contiguous_strides(input_shape))
    return out


@kernel("pixel_shuffle", "numba")
def pixel_shuffle(x: np.ndarray, upscale: int) -> np.ndarray:
    """(*, C*r*r, H, W) -> (*, C, H*r, W*r): a transpose of the (*, C, r, r, H, W) view."""
    x = np.asarray(x)
    out_shape = get_op("pixel_shuffle").infer(x.shape, upscale)
    r, (*batch, c, h, w), b = upscale, x.shape, x.ndim - 3
    split = x.reshape(*batch, c // (r * r), r, r, h, w)
    return transpose(split, (*range(b), b, b + 3, b + 1, b + 4, b + 2)).reshape(out_shape)


@kernel("pixel_unshuffle", "numba")
def pixel_unshuffle(x: np.ndarray, downscale: int) -> np.ndarray:
    """(*, C, H*r, W*r) -> (*, C*r*r, H, W): a transpose of the (*, C, H, r, W, r) view."""
    x = np.asarray(x)
    out_shape = get_op("pixel_unshuffle").infer(x.shape, downscale)
    r, (*batch, c, h, w), b = downscale, x.shape, x.ndim - 3
    split = x.reshape(*batch, c, h // r, r, w // r, r)
    return transpose(split, (*range(b), b, b + 2, b + 4, b + 1, b + 3)).reshape(out_shape)
