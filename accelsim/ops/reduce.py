"""Reductions over axes, and the broadcast/unbroadcast pair that autodiff needs."""
from __future__ import annotations

from typing import Any

import numpy as np

from accelsim.errors import ShapeError
from accelsim.ops.registry import Example, OpDef, Shape, apply, numel, register


def normalize_axes(axes: int | tuple[int, ...] | list[int] | None, ndim: int) -> tuple[int, ...]:
    """Axes as a sorted tuple of non-negative ints; None means every axis."""
    if axes is None:
        return tuple(range(ndim))
    if isinstance(axes, (int, np.integer)):
        axes = (int(axes),)
    out = []
    for a in axes:
        if not -ndim <= a < ndim:
            raise ShapeError(f"axis {a} out of range for a tensor of rank {ndim}")
        out.append(int(a) % ndim if ndim else 0)
    if len(set(out)) != len(out):
        raise ShapeError(f"repeated axis in {tuple(axes)}")
    return tuple(sorted(out))


def _reduced_shape(x: Shape, axes: tuple[int, ...], keepdims: bool) -> Shape:
    for a in axes:
        if not 0 <= a < len(x):
            raise ShapeError(f"axis {a} out of range for a tensor of rank {len(x)}")
    if keepdims:
        return tuple(1 if i in axes else d for i, d in enumerate(x))
    return tuple(d for i, d in enumerate(x) if i not in axes)


def _expand_back(g: Any, x_shape: Shape, axes: tuple[int, ...], keepdims: bool) -> Any:
    """Broadcast a reduction's adjoint back to the input's shape."""
    if not keepdims:
        g = reshape(g, _reduced_shape(x_shape, axes, True))
    return broadcast_to(g, x_shape)


def _reduce_examples(rng: np.random.Generator) -> list[Example]:
    x = rng.normal(size=(3, 4, 5))
    return [((x,), {"axes": (1,), "keepdims": False}), ((x,), {"axes": (0, 2), "keepdims": True}),
            ((x,), {"axes": (0, 1, 2), "keepdims": False})]


def _reduce_flops(out: Shape, x: Shape, **attrs: Any) -> int:
    return numel(x)


def sum(x: Any, axes: int | tuple[int, ...] | None = None, keepdims: bool = False) -> Any:  # noqa: A001
    return apply("sum", x, axes=normalize_axes(axes, x.ndim), keepdims=bool(keepdims))


def mean(x: Any, axes: int | tuple[int, ...] | None = None, keepdims: bool = False) -> Any:
    return apply("mean", x, axes=normalize_axes(axes, x.ndim), keepdims=bool(keepdims))


def max(x: Any, axes: int | tuple[int, ...] | None = None, keepdims: bool = False) -> Any:  # noqa: A001
    return apply("max", x, axes=normalize_axes(axes, x.ndim), keepdims=bool(keepdims))


def broadcast_to(x: Any, shape: Shape) -> Any:
    shape = tuple(int(d) for d in shape)
    return x if x.shape == shape else apply("broadcast_to", x, shape=shape)


def sum_to(x: Any, shape: Shape) -> Any:
    """Sum x down to `shape` (the adjoint of broadcasting `shape` to x.shape)."""
    shape = tuple(int(d) for d in shape)
    return x if x.shape == shape else apply("sum_to", x, shape=shape)


def reshape(x: Any, shape: Shape) -> Any:
    from accelsim.ops.shape import reshape as _reshape
    return _reshape(x, shape)


def _count(x: Shape, axes: tuple[int, ...]) -> int:
    return int(np.prod([x[a] for a in axes])) if axes else 1


register(OpDef(
    "sum", "reduction", infer=lambda x, axes, keepdims: _reduced_shape(x, axes, keepdims),
    ref=lambda x, axes, keepdims: np.sum(x, axis=axes, keepdims=keepdims),
    flops=_reduce_flops, examples=_reduce_examples,
    grad=lambda g, out, x, axes, keepdims: (_expand_back(g, x.shape, axes, keepdims),)))
register(OpDef(
    "mean", "reduction", infer=lambda x, axes, keepdims: _reduced_shape(x, axes, keepdims),
    ref=lambda x, axes, keepdims: np.mean(x, axis=axes, keepdims=keepdims),
    flops=lambda out, x, **a: numel(x) + numel(out), examples=_reduce_examples,
    grad=lambda g, out, x, axes, keepdims: (
        _expand_back(g * (1.0 / _count(x.shape, axes)), x.shape, axes, keepdims),)))
register(OpDef(
    "max", "reduction", infer=lambda x, axes, keepdims: _reduced_shape(x, axes, keepdims),
    ref=lambda x, axes, keepdims: np.max(x, axis=axes, keepdims=keepdims),
    flops=_reduce_flops, examples=_reduce_examples,
    grad=lambda g, out, x, axes, keepdims: (apply("max_grad", g, x, out, axes=axes, keepdims=keepdims),)))


def _max_grad_ref(g: np.ndarray, x: np.ndarray, y: np.ndarray, axes: tuple[int, ...], keepdims: bool):
    """Ties share the adjoint equally, as PyTorch's amax does."""
    shape = _reduced_shape(x.shape, axes, True)
    mask = x == y.reshape(shape)
    return np.where(mask, g.reshape(shape) / mask.sum(axis=axes, keepdims=True), 0.0).astype(x.dtype)


def _max_grad_examples(rng: np.random.Generator) -> list[Example]:
    x = rng.normal(size=(3, 4))
    return [((rng.normal(size=(3,)), x, x.max(axis=1)), {"axes": (1,), "keepdims": False})]


register(OpDef(
    "max_grad", "reduction", infer=lambda g, x, y, axes, keepdims: x, ref=_max_grad_ref,
    flops=lambda out, g, x, y, **a: 2 * numel(x), backward_only=True, examples=_max_grad_examples,
    dtype_from=1, doc="routes max's adjoint to the arg-max positions (ties split evenly)"))


def _broadcast_infer(x: Shape, shape: Shape) -> Shape:
    try:
        if tuple(np.broadcast_shapes(x, shape)) != tuple(shape):
            raise ValueError
    except ValueError:
        raise ShapeError(f"cannot broadcast {x} to {tuple(shape)}") from None
    return tuple(shape)


def _sum_to_infer(x: Shape, shape: Shape) -> Shape:
    _broadcast_infer(tuple(shape), x)
    return tuple(shape)


def _sum_to_ref(x: np.ndarray, shape: Shape) -> np.ndarray:
    lead = x.ndim - len(shape)
    axes = tuple(range(lead)) + tuple(lead + i for i, d in enumerate(shape) if d == 1 and x.shape[lead + i] != 1)
    return np.sum(x, axis=axes, keepdims=True).reshape(shape)


register(OpDef(
    "broadcast_to", "data_movement", infer=_broadcast_infer,
    ref=lambda x, shape: np.ascontiguousarray(np.broadcast_to(x, shape)),
    grad=lambda g, out, x, shape: (sum_to(g, x.shape),),
    examples=lambda rng: [((rng.normal(size=(4,)),), {"shape": (3, 4)}),
                          ((rng.normal(size=(3, 1)),), {"shape": (2, 3, 5)})]))
register(OpDef(
    "sum_to", "reduction", infer=_sum_to_infer, ref=_sum_to_ref, flops=_reduce_flops,
    grad=lambda g, out, x, shape: (broadcast_to(g, x.shape),),
    examples=lambda rng: [((rng.normal(size=(3, 4)),), {"shape": (4,)}),
                          ((rng.normal(size=(2, 3, 5)),), {"shape": (3, 1)})]))
