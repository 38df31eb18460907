"""Data-movement ops: reshape, transpose, concat, slice (they move bytes, compute nothing)."""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from accelsim.errors import ShapeError
from accelsim.ops.registry import Example, OpDef, Shape, apply, numel, register


def reshape(x: Any, shape: Sequence[int]) -> Any:
    """Reshape; one dimension may be -1."""
    shape = tuple(int(d) for d in shape)
    if shape.count(-1) > 1:
        raise ShapeError(f"reshape of %{x.id}: at most one -1 in {shape}")
    if -1 in shape:
        known = int(np.prod([d for d in shape if d != -1]))
        if known == 0 or numel(x.shape) % known:
            raise ShapeError(f"reshape of %{x.id}: cannot reshape {x.shape} to {shape}")
        shape = tuple(numel(x.shape) // known if d == -1 else d for d in shape)
    return x if shape == x.shape else apply("reshape", x, shape=shape)


def transpose(x: Any, axes: Sequence[int] | None = None) -> Any:
    """Permute axes (numpy's transpose); default reverses them."""
    axes = tuple(reversed(range(x.ndim))) if axes is None else tuple(int(a) % max(x.ndim, 1) for a in axes)
    return apply("transpose", x, axes=axes)


def concat(xs: Sequence[Any], axis: int = 0) -> Any:
    ndim = xs[0].ndim
    return apply("concat", *xs, axis=int(axis) % max(ndim, 1))


def slice(x: Any, starts: Sequence[int], stops: Sequence[int]) -> Any:  # noqa: A001
    """x[starts[0]:stops[0], starts[1]:stops[1], ...] over the leading len(starts) axes."""
    return apply("slice", x, starts=tuple(int(s) for s in starts), stops=tuple(int(s) for s in stops))


def _reshape_infer(x: Shape, shape: Shape) -> Shape:
    if numel(x) != numel(shape) or any(d < 0 for d in shape):
        raise ShapeError(f"cannot reshape {x} ({numel(x)} elements) to {tuple(shape)}")
    return tuple(shape)


def _transpose_infer(x: Shape, axes: Shape) -> Shape:
    if sorted(axes) != list(range(len(x))):
        raise ShapeError(f"axes {tuple(axes)} are not a permutation of the {len(x)} axes of {x}")
    return tuple(x[a] for a in axes)


def _concat_infer(*shapes: Shape, axis: int) -> Shape:
    first = shapes[0]
    if not 0 <= axis < len(first):
        raise ShapeError(f"axis {axis} out of range for rank {len(first)}")
    for s in shapes[1:]:
        if len(s) != len(first) or any(a != b for i, (a, b) in enumerate(zip(s, first)) if i != axis):
            raise ShapeError(f"concat along axis {axis} needs equal other dimensions, got {list(shapes)}")
    return tuple(sum(s[axis] for s in shapes) if i == axis else d for i, d in enumerate(first))


def _concat_grad(g: Any, out: Any, *xs: Any, axis: int) -> tuple[Any, ...]:
    grads, offset = [], 0
    for x in xs:
        starts = [0] * (axis + 1)
        stops = list(g.shape[: axis + 1])
        starts[axis], stops[axis] = offset, offset + x.shape[axis]
        grads.append(slice(g, starts, stops))
        offset += x.shape[axis]
    return tuple(grads)


def _slice_infer(x: Shape, starts: Shape, stops: Shape) -> Shape:
    if len(starts) != len(stops) or len(starts) > len(x):
        raise ShapeError(f"starts {tuple(starts)} and stops {tuple(stops)} do not fit a tensor of shape {x}")
    for a, (s, e) in enumerate(zip(starts, stops)):
        if not 0 <= s < e <= x[a]:
            raise ShapeError(f"slice [{s}:{e}] out of range for axis {a} of size {x[a]}")
    return tuple(e - s for s, e in zip(starts, stops)) + tuple(x[len(starts):])


def _index(starts: Shape, stops: Shape) -> tuple:
    return tuple(np.s_[s:e] for s, e in zip(starts, stops))


def _slice_grad_ref(g: np.ndarray, input_shape: Shape, starts: Shape, stops: Shape) -> np.ndarray:
    out = np.zeros(input_shape, dtype=g.dtype)
    out[_index(starts, stops)] = g
    return out


register(OpDef(
    "reshape", "data_movement", infer=_reshape_infer, ref=lambda x, shape: np.reshape(x, shape),
    grad=lambda g, out, x, shape: (reshape(g, x.shape),),
    examples=lambda rng: [((rng.normal(size=(2, 6)),), {"shape": (3, 4)}),
                          ((rng.normal(size=(2, 3, 4)),), {"shape": (6, 4)})]))
register(OpDef(
    "transpose", "data_movement", infer=_transpose_infer,
    ref=lambda x, axes: np.ascontiguousarray(np.transpose(x, axes)),
    grad=lambda g, out, x, axes: (transpose(g, tuple(np.argsort(axes))),),
    examples=lambda rng: [((rng.normal(size=(2, 3, 4)),), {"axes": (2, 0, 1)}),
                          ((rng.normal(size=(3, 5)),), {"axes": (1, 0)})]))
register(OpDef(
    "concat", "data_movement", infer=_concat_infer,
    ref=lambda *xs, axis: np.concatenate(xs, axis=axis), grad=_concat_grad,
    examples=lambda rng: [((rng.normal(size=(2, 3)), rng.normal(size=(2, 4))), {"axis": 1}),
                          ((rng.normal(size=(1, 3)), rng.normal(size=(2, 3)), rng.normal(size=(3, 3))),
                           {"axis": 0})]))
register(OpDef(
    "slice", "data_movement", infer=_slice_infer,
    ref=lambda x, starts, stops: np.ascontiguousarray(x[_index(starts, stops)]),
    # a slice reads its window alone (a fused tile's band of rows), not the whole input
    read_elems=lambda out, x, **a: numel(out), input_reads=lambda out, x, **a: (numel(out),),
    grad=lambda g, out, x, starts, stops: (
        apply("slice_grad", g, input_shape=x.shape, starts=starts, stops=stops),),
    examples=lambda rng: [((rng.normal(size=(4, 5)),), {"starts": (1, 0), "stops": (3, 4)}),
                          ((rng.normal(size=(3, 4, 2)),), {"starts": (2,), "stops": (3,)})]))
register(OpDef(
    "slice_grad", "data_movement",
    infer=lambda g, input_shape, starts, stops: tuple(input_shape), ref=_slice_grad_ref,
    written_elems=lambda out, g, **a: numel(out), backward_only=True,
    examples=lambda rng: [((rng.normal(size=(2, 4)),), {"input_shape": (4, 5), "starts": (1, 0),
                                                          "stops": (3, 4)})],
    doc="zeros of input_shape with g written into the sliced window (slice's adjoint)"))
