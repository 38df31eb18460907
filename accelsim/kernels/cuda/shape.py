"""Data movement: one strided-copy kernel moves every element of a view to another view.

A view is described by a `Layout` (shape, strides and offset in elements) that the host reads off
numpy's view of a same-shaped placeholder array: metadata only, the data never leaves the device.
transpose, broadcast_to, slice, concat, pixel (un)shuffle and reshape are each one or two copies.
"""
from __future__ import annotations

from typing import Callable, NamedTuple, Sequence

import numpy as np
from numba import cuda

from accelsim.kernels.cuda.launch import device_empty, launch_1d, ptx_cases, to_device, to_host
from accelsim.kernels.registry import kernel

View = Callable[[np.ndarray], np.ndarray]


class Layout(NamedTuple):
    """Where the elements of a view sit in a flat C-contiguous buffer, in elements."""
    shape: tuple[int, ...]
    strides: tuple[int, ...]
    offset: int


def contiguous(shape: Sequence[int]) -> Layout:
    return strided(shape, lambda a: a)


def strided(shape: Sequence[int], view: View) -> Layout:
    """The layout of view(a) for a C-contiguous a of `shape`; view must not copy."""
    base = np.empty(tuple(shape), np.uint8)  # one byte per element: strides come out in elements
    v = view(base)
    if v.size and not np.may_share_memory(v, base):
        raise AssertionError("a layout's view must not copy")
    offset = v.__array_interface__["data"][0] - base.__array_interface__["data"][0] if v.size else 0
    return Layout(tuple(v.shape), tuple(v.strides), offset)


@cuda.jit
def _copy(src, src_offset, dst, dst_offset, geometry):
    """dst[view] = src[view] for each index of the iteration shape geometry[0];
    geometry[1] and geometry[2] are the source and destination strides."""
    ndim = geometry.shape[1]
    n = 1
    for d in range(ndim):
        n *= geometry[0, d]
    i = cuda.grid(1)
    if i < n:
        s = src_offset
        t = dst_offset
        for d in range(ndim - 1, -1, -1):
            coord = i % geometry[0, d]
            i //= geometry[0, d]
            s += coord * geometry[1, d]
            t += coord * geometry[2, d]
        dst[t] = src[s]


@cuda.jit
def _fill(out, value):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = value


def copy(d_src, src: Layout, d_dst, dst: Layout) -> None:
    """Copy between two views of flat device arrays with the same iteration shape."""
    if src.shape != dst.shape:
        raise AssertionError(f"copy between views of shapes {src.shape} and {dst.shape}")
    shape = src.shape or (1,)
    geometry = np.array([shape, src.strides or (0,), dst.strides or (0,)], dtype=np.int64)
    launch_1d(_copy, int(np.prod(shape)), d_src, src.offset, d_dst, dst.offset, to_device(geometry))


def zeros(n: int, dtype: np.dtype):
    """A flat device array of n zeros, filled on the device."""
    d = device_empty(max(n, 1), dtype)
    launch_1d(_fill, n, d, dtype.type(0))
    return d


def gather(x: np.ndarray, view: View) -> np.ndarray:
    """view(x) as a new C-contiguous array, moved by the copy kernel."""
    x = np.asarray(x)
    src = strided(x.shape, view)
    out = device_empty(max(int(np.prod(src.shape)), 1), x.dtype)
    copy(to_device(x.reshape(-1)), src, out, contiguous(src.shape))
    return to_host(out, src.shape)


def unpermute(d_rows, shape: Sequence[int], perm: Sequence[int], dtype: np.dtype) -> np.ndarray:
    """An array of `shape` from a flat device array holding its transpose(perm) in C order."""
    shape = tuple(shape)
    if tuple(perm) == tuple(range(len(shape))):
        return to_host(d_rows, shape)
    dst = strided(shape, lambda a: a.transpose(perm))
    out = device_empty(max(int(np.prod(shape)), 1), dtype)
    copy(d_rows, contiguous(dst.shape), out, dst)
    return to_host(out, shape)


_COPY_OPS = ("reshape", "transpose", "broadcast_to", "slice", "slice_grad", "concat", "pixel_shuffle",
             "pixel_unshuffle")
ptx_cases(_COPY_OPS, _copy, "void({T}[::1], int64, {T}[::1], int64, int64[:, ::1])")
ptx_cases("slice_grad", _fill, "void({T}[::1], {T})")


# ---- the ops --------------------------------------------------------------------------

def _index(starts: Sequence[int], stops: Sequence[int]) -> tuple[slice, ...]:
    return tuple(np.s_[s:e] for s, e in zip(starts, stops))


@kernel("reshape", "cuda")
def reshape(x: np.ndarray, shape: Sequence[int]) -> np.ndarray:
    x = np.asarray(x)
    return gather(x.reshape(-1), lambda a: a).reshape(tuple(shape))


@kernel("transpose", "cuda")
def transpose(x: np.ndarray, axes: Sequence[int]) -> np.ndarray:
    return gather(x, lambda a: a.transpose(tuple(axes)))


@kernel("broadcast_to", "cuda")
def broadcast_to(x: np.ndarray, shape: Sequence[int]) -> np.ndarray:
    return gather(x, lambda a: np.broadcast_to(a, tuple(shape)))


@kernel("slice", "cuda")
def slice_(x: np.ndarray, starts: Sequence[int], stops: Sequence[int]) -> np.ndarray:
    return gather(x, lambda a: a[_index(starts, stops)])


@kernel("slice_grad", "cuda")
def slice_grad(g: np.ndarray, input_shape: Sequence[int], starts: Sequence[int],
               stops: Sequence[int]) -> np.ndarray:
    g = np.asarray(g)
    out = zeros(int(np.prod(input_shape)), g.dtype)
    copy(to_device(g.reshape(-1)), contiguous(g.shape), out, strided(input_shape, lambda a: a[_index(starts, stops)]))
    return to_host(out, tuple(input_shape))


@kernel("concat", "cuda")
def concat(*xs: np.ndarray, axis: int) -> np.ndarray:
    dtype = np.asarray(xs[0]).dtype
    xs = tuple(np.asarray(x, dtype) for x in xs)
    shape = list(xs[0].shape)
    shape[axis] = sum(x.shape[axis] for x in xs)
    out = device_empty(int(np.prod(shape)), dtype)
    offset = 0
    for x in xs:
        window = (np.s_[:],) * axis + (np.s_[offset:offset + x.shape[axis]],)
        copy(to_device(x.reshape(-1)), contiguous(x.shape), out, strided(shape, lambda a: a[window]))
        offset += x.shape[axis]
    return to_host(out, tuple(shape))


@kernel("pixel_shuffle", "cuda")
def pixel_shuffle(x: np.ndarray, upscale: int) -> np.ndarray:
    r, (*batch, c, h, w) = upscale, x.shape
    b = len(batch)

    def view(a: np.ndarray) -> np.ndarray:  # (*, C, H, r, W, r), as the reference
        return a.reshape(*batch, c // (r * r), r, r, h, w).transpose(*range(b), b, b + 3, b + 1, b + 4, b + 2)
    return gather(x, view).reshape(*batch, c // (r * r), h * r, w * r)


@kernel("pixel_unshuffle", "cuda")
def pixel_unshuffle(x: np.ndarray, downscale: int) -> np.ndarray:
    r, (*batch, c, h, w) = downscale, x.shape
    b = len(batch)

    def view(a: np.ndarray) -> np.ndarray:  # (*, C, r, r, H, W), as the reference
        return a.reshape(*batch, c, h // r, r, w // r, r).transpose(*range(b), b, b + 2, b + 4, b + 1, b + 3)
    return gather(x, view).reshape(*batch, c * r * r, h // r, w // r)
