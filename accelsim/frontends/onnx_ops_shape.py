"""Converters of ONNX's data movement and shape ops: Reshape, Flatten, Transpose, Squeeze, Unsqueeze,
Concat, Slice, Split, Gather, Expand, Where, Shape, Identity, Cast, ConstantOfShape (ONNX node ->
registry ops, or a value known at import when only shapes are involved; a large float ConstantOfShape a lazy
leaf)."""
from __future__ import annotations

import math

import numpy as np

from accelsim import ops as F
from accelsim.frontends.onnx_context import ImportContext, Value
from accelsim.frontends.onnx_errors import fail
from accelsim.frontends.onnx_opdef import OnnxOpDef
from accelsim.graph.ir import Var
from accelsim.limits import ReadLimits

ONNX_FLOAT_TYPES = {1: "float32", 11: "float64"}


def _axis(ctx: ImportContext, axis: int, rank: int) -> int:
    if not -rank <= axis < max(rank, 1):
        raise ctx.unsupported(f"axis {axis} is out of range for rank {rank}")
    return axis % max(rank, 1)


def _reshape(ctx: ImportContext) -> list[Value]:
    x = ctx.tensor(0)
    shape = ctx.static_ints(1, "the target shape")
    if not ctx.attr("allowzero", 0):
        shape = [x.shape[i] if d == 0 and i < x.ndim else d for i, d in enumerate(shape)]
    return [F.reshape(x, tuple(shape))]


def _flatten(ctx: ImportContext) -> list[Value]:
    x = ctx.tensor(0)
    axis = int(ctx.attr("axis", 1))
    axis = axis + x.ndim if axis < 0 else axis
    return [F.reshape(x, (math.prod(x.shape[:axis]), math.prod(x.shape[axis:])))]


def _transpose(ctx: ImportContext) -> list[Value]:
    x = ctx.tensor(0)
    perm = ctx.attr("perm")
    return [F.transpose(x, tuple(perm) if perm is not None else None)]


def _squeeze(ctx: ImportContext) -> list[Value]:
    x = ctx.tensor(0)
    if ctx.has(1):
        axes = {_axis(ctx, a, x.ndim) for a in ctx.static_ints(1, "the axes")}
    else:
        axes = {i for i, d in enumerate(x.shape) if d == 1}
    if any(x.shape[a] != 1 for a in axes):
        raise ctx.unsupported(f"squeezes axes {sorted(axes)} of shape {x.shape}, not all of size 1")
    return [F.reshape(x, tuple(d for i, d in enumerate(x.shape) if i not in axes))]


def _unsqueeze(ctx: ImportContext) -> list[Value]:
    x = ctx.tensor(0)
    rank = x.ndim + len(ctx.static_ints(1, "the axes"))
    axes = sorted(_axis(ctx, a, rank) for a in ctx.static_ints(1, "the axes"))
    shape = list(x.shape)
    for a in axes:
        shape.insert(a, 1)
    return [F.reshape(x, tuple(shape))]


def _concat(ctx: ImportContext) -> list[Value]:
    xs = [ctx.tensor(i) for i in range(len(ctx.node.input)) if ctx.has(i)]
    return [F.concat(xs, _axis(ctx, int(ctx.attr("axis")), xs[0].ndim))]


def window_along(x: Var, axis: int, start: int, stop: int) -> Var:
    """x[..., start:stop, ...] along `axis` (the registry's slice cuts the leading axes)."""
    if (start, stop) == (0, x.shape[axis]):
        return x
    starts = [0] * (axis + 1)
    stops = list(x.shape[: axis + 1])
    starts[axis], stops[axis] = start, stop
    return F.slice(x, starts, stops)


def _slice(ctx: ImportContext) -> list[Value]:
    x = ctx.tensor(0)
    starts, ends = ctx.static_ints(1, "the starts"), ctx.static_ints(2, "the ends")
    axes = ctx.static_ints(3, "the axes") if ctx.has(3) else list(range(len(starts)))
    steps = ctx.static_ints(4, "the steps") if ctx.has(4) else [1] * len(starts)
    if any(s != 1 for s in steps):
        raise ctx.unsupported(f"steps {steps}; only step 1 is supported")
    y = x
    for start, end, axis in zip(starts, ends, axes):
        axis = _axis(ctx, axis, x.ndim)
        dim = x.shape[axis]
        start, end = (max(0, min(v + dim if v < 0 else v, dim)) for v in (start, end))
        if end <= start:
            raise ctx.unsupported(f"an empty slice [{start}:{end}] of axis {axis}")
        y = window_along(y, axis, start, end)
    return [y]


def _split(ctx: ImportContext) -> list[Value]:
    x = ctx.tensor(0)
    axis = _axis(ctx, int(ctx.attr("axis", 0)), x.ndim)
    n_out, dim = len(ctx.node.output), x.shape[axis]
    if ctx.has(1):
        sizes = ctx.static_ints(1, "the split sizes")
    elif ctx.attr("split") is not None:
        sizes = list(ctx.attr("split"))
    else:
        chunk = -(-dim // int(ctx.attr("num_outputs", n_out)))
        sizes = [min(chunk, dim - k * chunk) for k in range(n_out)]
    if sum(sizes) != dim or any(s < 1 for s in sizes):
        raise ctx.unsupported(f"split sizes {sizes} do not cut axis {axis} of size {dim} into non-empty parts")
    bounds = np.concatenate([[0], np.cumsum(sizes)])
    return [window_along(x, axis, int(a), int(b)) for a, b in zip(bounds[:-1], bounds[1:])]


def _gather(ctx: ImportContext) -> list[Value]:
    """Constant indices: slices; int64 ids into a weight table along axis 0: embedding."""
    axis = int(ctx.attr("axis", 0))
    if not ctx.is_static(1):
        if axis != 0 or len(ctx.shape(0)) != 2:
            raise ctx.unsupported("computed indices into anything but a (rows, width) table along axis 0")
        return [F.embedding(ctx.tensor(1), ctx.tensor(0))]
    x = ctx.tensor(0)
    axis = _axis(ctx, axis, x.ndim)
    idx = np.asarray(ctx.static(1, "the indices")).astype(np.int64)
    idx = np.where(idx < 0, idx + x.shape[axis], idx)
    flat = idx.reshape(-1)
    if flat.size == 0 or idx.ndim > 1 or np.any(np.diff(flat) != 1):
        raise ctx.unsupported(f"constant indices {idx.tolist()!r:.60} that are not one index or a contiguous range")
    y = window_along(x, axis, int(flat[0]), int(flat[-1]) + 1)
    if idx.ndim == 0:
        y = F.reshape(y, x.shape[:axis] + x.shape[axis + 1:])
    return [y]


def _expand(ctx: ImportContext) -> list[Value]:
    x = ctx.tensor(0)
    shape = ctx.static_ints(1, "the target shape")
    return [F.broadcast_to(x, tuple(np.broadcast_shapes(x.shape, tuple(shape))))]


def _is_causal(cond: np.ndarray, masked_above: bool) -> bool:
    """cond over its last two axes is the causal pattern: True above the diagonal (masked_above) or
    True on and below it, the same for every leading index."""
    if cond.ndim < 2 or cond.shape[-1] != cond.shape[-2]:
        return False
    t = cond.shape[-1]
    above = np.triu(np.ones((t, t), dtype=bool), k=1)
    return bool(np.all(cond == (above if masked_above else ~above)))


def _where(ctx: ImportContext) -> list[Value]:
    """A constant condition: one branch when it is uniform, the registry's causal_mask for an attention
    mask with a constant fill, else the blend c*x + (1-c)*y of two finite branches. A computed condition
    (a comparison's 0/1 mask): the registry's where."""
    if not ctx.is_static(0):
        return [F.where(ctx.tensor(0), ctx.tensor(1), ctx.tensor(2))]
    cond = np.asarray(ctx.static(0, "the condition")).astype(bool)
    out_shape = tuple(np.broadcast_shapes(cond.shape, ctx.shape(1), ctx.shape(2)))
    if cond.all() or not cond.any():
        return [F.broadcast_to(ctx.tensor(1 if cond.all() else 2), out_shape)]
    for fill_i, keep_i, masked_above in ((1, 2, True), (2, 1, False)):
        fill = ctx.known(fill_i)
        if fill is not None and fill.size == 1 and ctx.known(keep_i) is None:
            kept = ctx.tensor(keep_i)
            if kept.shape == out_shape and _is_causal(cond, masked_above):
                return [F.causal_mask(kept, float(fill.reshape(-1)[0]))]
    for i in (1, 2):
        value = ctx.known(i)
        if value is not None and not np.all(np.isfinite(value)):
            raise ctx.unsupported("a non-finite constant branch under a condition that is not a causal mask")
    c = ctx.graph.const(cond.astype(ctx.graph.dtype))
    x, y = ctx.tensor(1), ctx.tensor(2)
    return [F.broadcast_to(x * c + y * (1.0 - c), out_shape)]


def _shape(ctx: ImportContext) -> list[Value]:
    shape = ctx.shape(0)
    start, end = ctx.attr("start", 0), ctx.attr("end", None)
    return [np.asarray(shape[start:end], dtype=np.int64)]


def _size(ctx: ImportContext) -> list[Value]:
    return [np.asarray(math.prod(ctx.shape(0)), dtype=np.int64)]


def _identity(ctx: ImportContext) -> list[Value]:
    name = ctx.name(0)
    value = ctx.values.get(name)
    return [value if value is not None else ctx.tensor(0)]


LAZY_ABOVE_ELEMENTS = 4096
"""A float ConstantOfShape larger than this stays lazy (a leaf drawn as its fill value when the graph is
evaluated) instead of an array made at import: caffe2's exports fill whole weight tensors this way (VGG-19's
fc6 is 103M elements). Smaller ones are folded like any constant (shape arithmetic reads their values)."""


def _constant_of_shape(ctx: ImportContext) -> list[Value]:
    """np.full(shape, value) when small or integer, else a non-trainable parameter drawn as `value`; the
    size is bounded before anything is allocated."""
    from onnx import numpy_helper

    shape = tuple(ctx.static_ints(0, "the shape"))
    if any(d < 0 for d in shape):
        raise ctx.unsupported(f"a negative dimension in shape {list(shape)}")
    value = ctx.attr("value")
    fill = numpy_helper.to_array(value).reshape(-1) if value is not None else np.zeros(1, np.float32)
    if fill.size != 1:
        raise ctx.unsupported(f"value has {fill.size} elements; ConstantOfShape's value is one element")
    size = math.prod(shape)
    lazy = fill.dtype.kind == "f" and size > LAZY_ABOVE_ELEMENTS
    limit = ctx.limits.max_tensor_elements if lazy else ctx.limits.max_folded_elements
    knob = "max_tensor_elements" if lazy else "max_folded_elements"
    if size > limit:
        raise fail(ctx.where, f"would make a tensor of shape {list(shape)} ({size:,} elements), above the limit of "
                              f"{limit:,} elements; {ReadLimits.how_to_raise(knob)}")
    if not lazy:
        return [np.full(shape, fill[0])]
    return [ctx.graph.param(ctx.node.output[0], shape, init="full", value=float(fill[0]), trainable=False)]


def _cast_to(ctx: ImportContext, target: str) -> list[Value]:
    if ctx.is_static(0):
        return [np.asarray(ctx.static(0, "the input")).astype(target)]
    x = ctx.tensor(0)
    if x.dtype != target:
        raise ctx.unsupported(f"a cast of a {x.dtype} graph tensor to {target}; the graph computes in "
                              f"{ctx.graph.dtype} (and int64 indices)")
    return [x]


def _cast(ctx: ImportContext) -> list[Value]:
    to = int(ctx.attr("to"))
    target = {**ONNX_FLOAT_TYPES, 7: "int64", 6: "int32", 9: "bool"}.get(to)
    if target is None:
        raise ctx.unsupported(f"a cast to ONNX element type {to}")
    return _cast_to(ctx, target)


def _cast_like(ctx: ImportContext) -> list[Value]:
    like = ctx.values.get(ctx.name(1))
    if like is None:
        like = ctx.initializers[ctx.name(1)]
    return _cast_to(ctx, str(like.dtype))


SHAPE_OPS: tuple[OnnxOpDef, ...] = (
    OnnxOpDef("Reshape", _reshape, "reshape to a constant shape (0 copies a dimension unless allowzero)"),
    OnnxOpDef("Flatten", _flatten, "reshape to 2-D"),
    OnnxOpDef("Transpose", _transpose, "transpose"),
    OnnxOpDef("Squeeze", _squeeze, "reshape"),
    OnnxOpDef("Unsqueeze", _unsqueeze, "reshape"),
    OnnxOpDef("Concat", _concat, "concat"),
    OnnxOpDef("Slice", _slice, "slice per axis (constant starts/ends, step 1)"),
    OnnxOpDef("Split", _split, "one slice per output"),
    OnnxOpDef("Gather", _gather, "slice (+ reshape) for constant indices; embedding for ids into a table"),
    OnnxOpDef("Expand", _expand, "broadcast_to"),
    OnnxOpDef("Where", _where, "where on a computed mask; a constant condition: a branch, causal_mask, or a blend "
                               "of finite branches"),
    OnnxOpDef("Shape", _shape, "a constant (shapes are static)"),
    OnnxOpDef("Size", _size, "a constant (shapes are static)"),
    OnnxOpDef("Identity", _identity, "nothing: the input itself"),
    OnnxOpDef("ConstantOfShape", _constant_of_shape, "a constant; above 4096 float elements a lazy leaf of its value",
              before_folding=True),
    OnnxOpDef("Cast", _cast, "nothing when the type is already the graph's; constants cast at import"),
    OnnxOpDef("CastLike", _cast_like, "as Cast, to the second input's type"),
)
