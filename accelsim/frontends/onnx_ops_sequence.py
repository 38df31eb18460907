"""Converters of the ONNX sequence ops an unoptimized torch export emits for `split`: SplitToSequence, then
SequenceAt at constant positions (ONNX node -> slices). A sequence is a tuple of Vars during import only."""
from __future__ import annotations

import numpy as np

from accelsim import ops as F
from accelsim.frontends.onnx_context import ImportContext, Value
from accelsim.frontends.onnx_opdef import OnnxOpDef
from accelsim.frontends.onnx_ops_shape import window_along


def _split_to_sequence(ctx: ImportContext) -> list[Value]:
    x = ctx.tensor(0)
    axis = int(ctx.attr("axis", 0))
    if not -x.ndim <= axis < x.ndim:
        raise ctx.unsupported(f"axis {axis} is out of range for rank {x.ndim}")
    axis %= x.ndim
    dim = x.shape[axis]
    if ctx.has(1):
        split = np.asarray(ctx.static(1, "the split sizes")).astype(np.int64)
        if split.ndim == 0:  # one chunk size: the last chunk takes what is left
            step = int(split)
            if step < 1:
                raise ctx.unsupported(f"split size {step}; expected a positive size")
            sizes = [min(step, dim - k) for k in range(0, dim, step)]
        else:
            sizes = [int(s) for s in split]
        keep = True
    else:
        sizes, keep = [1] * dim, bool(ctx.attr("keepdims", 1))
    if sum(sizes) != dim or any(s < 1 for s in sizes):
        raise ctx.unsupported(f"split sizes {sizes} do not cut axis {axis} of size {dim} into non-empty parts")
    bounds = np.concatenate([[0], np.cumsum(sizes)])
    parts = [window_along(x, axis, int(a), int(b)) for a, b in zip(bounds[:-1], bounds[1:])]
    if not keep:
        parts = [F.reshape(p, x.shape[:axis] + x.shape[axis + 1:]) for p in parts]
    return [tuple(parts)]


def _sequence_at(ctx: ImportContext) -> list[Value]:
    seq = ctx.values.get(ctx.name(0))
    if not isinstance(seq, tuple):
        raise ctx.unsupported(f"input 0 ({ctx.name(0)!r}) is not a sequence made by SplitToSequence")
    position = ctx.static_ints(1, "the position")
    if len(position) != 1 or not -len(seq) <= position[0] < len(seq):
        raise ctx.unsupported(f"position {position} outside a sequence of {len(seq)} tensors")
    return [seq[position[0]]]


SEQUENCE_OPS: tuple[OnnxOpDef, ...] = (
    OnnxOpDef("SplitToSequence", _split_to_sequence, "one slice per part (a sequence held at import only)"),
    OnnxOpDef("SequenceAt", _sequence_at, "the part at a constant position"),
)
