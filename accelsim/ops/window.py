"""Sliding-window geometry shared by convolution and pooling: windows and their adjoint."""
from __future__ import annotations

from typing import Sequence

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from accelsim.errors import ShapeError
from accelsim.ops.registry import Shape

Pair = tuple[int, int]


def pair(v: int | Sequence[int], what: str) -> Pair:
    """An int or a 2-sequence as (height, width)."""
    if isinstance(v, (int, np.integer)) and not isinstance(v, bool):
        return (int(v), int(v))
    if not isinstance(v, (tuple, list)) or len(v) != 2 or not all(
            isinstance(d, (int, np.integer)) and not isinstance(d, bool) for d in v):
        raise ShapeError(f"{what} must be an int or a pair of ints, got {v!r}")
    t = tuple(int(d) for d in v)
    return t  # type: ignore[return-value]


def out_size(size: int, kernel: int, stride: int, padding: int, dilation: int = 1) -> int:
    """Output length along one axis (floor mode); <= 0 when the kernel does not fit."""
    return (size + 2 * padding - dilation * (kernel - 1) - 1) // stride + 1


def windows(x: np.ndarray, kernel: Pair, stride: Pair, padding: Pair, dilation: Pair = (1, 1),
            fill: float = 0.0) -> np.ndarray:
    """(N, C, Ho, Wo, KH, KW) view: every window of x padded with `fill` (no copy past the pad)."""
    (kh, kw), (sh, sw), (ph, pw), (dh, dw) = kernel, stride, padding, dilation
    xp = np.pad(x, ((0, 0), (0, 0), (ph, ph), (pw, pw)), constant_values=fill)
    span = (dh * (kh - 1) + 1, dw * (kw - 1) + 1)
    return sliding_window_view(xp, span, axis=(2, 3))[:, :, ::sh, ::sw, ::dh, ::dw]


def scatter_windows(cols: np.ndarray, input_shape: Shape, stride: Pair, padding: Pair,
                    dilation: Pair = (1, 1)) -> np.ndarray:
    """The adjoint of `windows`: add each window's values back onto the input; pad dropped.

    Input rows/cols that no window covers (stride not dividing the span) stay 0.
    """
    n, c, h, w = input_shape
    ho, wo, kh, kw = cols.shape[2:]
    (sh, sw), (ph, pw), (dh, dw) = stride, padding, dilation
    xp = np.zeros((n, c, h + 2 * ph, w + 2 * pw), dtype=cols.dtype)
    for i in range(kh):
        for j in range(kw):
            r, s = i * dh, j * dw
            xp[:, :, r:r + sh * (ho - 1) + 1:sh, s:s + sw * (wo - 1) + 1:sw] += cols[:, :, :, :, i, j]
    return np.ascontiguousarray(xp[:, :, ph:ph + h, pw:pw + w])
