"""2-D max and average pooling (NCHW, floor mode, PyTorch semantics) and their adjoints."""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from accelsim.errors import ShapeError
from accelsim.ops.registry import Example, OpDef, Shape, apply, numel, register
from accelsim.ops.window import Pair, out_size, pair, scatter_windows, windows

__all__ = ["max_pool2d", "avg_pool2d"]


def max_pool2d(x: Any, kernel: int | Sequence[int], stride: int | Sequence[int] | None = None,
               padding: int | Sequence[int] = 0) -> Any:
    """Max over each window; padding is -inf, so it never wins. stride defaults to kernel."""
    return apply("max_pool2d", x, **_attrs(kernel, stride, padding))


def avg_pool2d(x: Any, kernel: int | Sequence[int], stride: int | Sequence[int] | None = None,
               padding: int | Sequence[int] = 0) -> Any:
    """Mean over each window, zero padding counted (torch's count_include_pad=True)."""
    return apply("avg_pool2d", x, **_attrs(kernel, stride, padding))


def _attrs(kernel: int | Sequence[int], stride: int | Sequence[int] | None,
           padding: int | Sequence[int]) -> dict[str, Pair]:
    k = pair(kernel, "kernel")
    return {"kernel": k, "stride": k if stride is None else pair(stride, "stride"), "padding": pair(padding, "padding")}


# ---- shapes ----------------------------------------------------------------------------

def _pool_shape(x: Shape, kernel: Pair, stride: Pair, padding: Pair) -> Shape:
    where = f"x {x}, kernel={kernel}, stride={stride}, padding={padding}"
    if len(x) != 4:
        raise ShapeError(f"pooling needs x (N, C, H, W); got {where}")
    if min(kernel) < 1 or min(stride) < 1 or min(padding) < 0:
        raise ShapeError(f"kernel and stride must be >= 1 and padding >= 0; got {where}")
    if padding[0] > kernel[0] // 2 or padding[1] > kernel[1] // 2:
        # PyTorch's rule: larger padding would allow windows made only of padding
        raise ShapeError(f"padding must be at most half the kernel; got {where}")
    ho = out_size(x[2], kernel[0], stride[0], padding[0])
    wo = out_size(x[3], kernel[1], stride[1], padding[1])
    if ho <= 0 or wo <= 0:
        raise ShapeError(f"output size {ho}x{wo} <= 0: the kernel does not fit the padded input; got {where}")
    return (x[0], x[1], ho, wo)


def _check_grad(g: Shape, x: Shape, kernel: Pair, stride: Pair, padding: Pair) -> Shape:
    expected = _pool_shape(tuple(x), kernel, stride, padding)
    if tuple(g) != expected:
        raise ShapeError(f"output gradient has shape {g}, but pooling {tuple(x)} gives {expected}")
    return tuple(x)


# ---- numpy references ------------------------------------------------------------------

def _max_ref(x: np.ndarray, kernel: Pair, stride: Pair, padding: Pair) -> np.ndarray:
    return windows(x, kernel, stride, padding, fill=-np.inf).max(axis=(-2, -1))


def _max_grad_ref(g: np.ndarray, x: np.ndarray, kernel: Pair, stride: Pair, padding: Pair) -> np.ndarray:
    """Each window's adjoint goes to its first max in row-major order, as PyTorch's kernel does."""
    win = windows(x, kernel, stride, padding, fill=-np.inf)
    n, c, ho, wo, kh, kw = win.shape
    first = win.reshape(n, c, ho, wo, kh * kw).argmax(axis=-1)  # argmax returns the first of ties
    cols = np.where(first[..., None] == np.arange(kh * kw), g[..., None], 0.0).astype(g.dtype)
    return scatter_windows(cols.reshape(n, c, ho, wo, kh, kw), x.shape, stride, padding)


def _avg_ref(x: np.ndarray, kernel: Pair, stride: Pair, padding: Pair) -> np.ndarray:
    return windows(x, kernel, stride, padding).mean(axis=(-2, -1))


def _avg_grad_ref(g: np.ndarray, input_shape: Shape, kernel: Pair, stride: Pair, padding: Pair) -> np.ndarray:
    cols = np.broadcast_to((g / numel(kernel))[..., None, None], g.shape + tuple(kernel))
    return scatter_windows(cols, tuple(input_shape), stride, padding)


# ---- examples --------------------------------------------------------------------------

_CASES: list[tuple[Shape, dict[str, Pair]]] = [
    ((2, 3, 4, 4), {"kernel": (2, 2), "stride": (2, 2), "padding": (0, 0)}),
    ((1, 2, 7, 6), {"kernel": (3, 3), "stride": (2, 2), "padding": (1, 1)}),  # overlap + padding
    ((2, 2, 5, 7), {"kernel": (3, 2), "stride": (1, 2), "padding": (1, 0)}),  # last column unused
    ((1, 1, 6, 5), {"kernel": (2, 3), "stride": (1, 1), "padding": (0, 1)}),
]


def _distinct(rng: np.random.Generator, shape: Shape) -> np.ndarray:
    """Values at least ~0.09 apart, so finite differences never cross a tie."""
    return rng.permutation(numel(shape)).reshape(shape) * 0.1 + rng.uniform(0.0, 0.01, size=shape)


def _pool_examples(rng: np.random.Generator) -> list[Example]:
    return [((_distinct(rng, xs),), dict(a)) for xs, a in _CASES]


def _max_grad_examples(rng: np.random.Generator) -> list[Example]:
    return [((rng.normal(size=_pool_shape(xs, **a)), _distinct(rng, xs)), dict(a)) for xs, a in _CASES]


def _avg_grad_examples(rng: np.random.Generator) -> list[Example]:
    return [((rng.normal(size=_pool_shape(xs, **a)),), {"input_shape": xs, **a}) for xs, a in _CASES]


def _window_flops(out: Shape, x: Shape, kernel: Pair, **a: Any) -> int:
    return numel(out) * numel(kernel)


def _grad_flops(out: Shape, g: Shape, *rest: Shape, kernel: Pair, **a: Any) -> int:
    return numel(g) * numel(kernel)


register(OpDef(
    "max_pool2d", "reduction", infer=_pool_shape, ref=_max_ref, flops=_window_flops, examples=_pool_examples,
    grad=lambda g, out, x, kernel, stride, padding: (
        apply("max_pool2d_grad", g, x, kernel=kernel, stride=stride, padding=padding),),
    doc="max over KHxKW windows, -inf padding, floor mode"))
register(OpDef(
    "max_pool2d_grad", "reduction", infer=_check_grad, ref=_max_grad_ref, flops=_grad_flops,
    backward_only=True, examples=_max_grad_examples,
    doc="routes each window's adjoint to its first max (row-major), summing where windows overlap"))
register(OpDef(
    "avg_pool2d", "reduction", infer=_pool_shape, ref=_avg_ref, flops=_window_flops, examples=_pool_examples,
    grad=lambda g, out, x, kernel, stride, padding: (
        apply("avg_pool2d_grad", g, input_shape=x.shape, kernel=kernel, stride=stride, padding=padding),),
    doc="mean over KHxKW windows, zero padding counted in the divisor"))
register(OpDef(
    "avg_pool2d_grad", "reduction",
    infer=lambda g, input_shape, kernel, stride, padding: _check_grad(g, input_shape, kernel, stride, padding),
    ref=_avg_grad_ref, flops=_grad_flops, backward_only=True, examples=_avg_grad_examples,
    doc="spreads each window's adjoint evenly over its KH*KW positions"))
