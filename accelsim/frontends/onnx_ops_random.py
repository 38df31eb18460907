"""Converters of ONNX's dropout and random draws: Dropout (inference mode the identity, training mode a seeded
keep mask) and RandomUniformLike (a seeded uniform constant, which an exported in-place dropout's
`Less(RandomUniformLike(x), keep)` turns into the same keep mask) (ONNX node -> mul by a constant, or a value
known at import).

Masks are drawn by accelsim/ops/dropout_mask.py from (graph seed, the draw's ordinal in the graph), as the torch
importer draws them, so a model exported to ONNX imports with the masks its torch import holds. A Dropout's or
RandomUniformLike's own `seed` attribute is not used: the graph's seed decides every draw."""
from __future__ import annotations

import math

import numpy as np

from accelsim.frontends.onnx_context import ImportContext, Value
from accelsim.frontends.onnx_opdef import OnnxOpDef
from accelsim.ops.dropout_mask import check_dropout_p, dropout_mask, uniform_draw

DRAW_TYPES = {1: "float32", 11: "float64"}  # TensorProto.FLOAT, DOUBLE


def _scalar(ctx: ImportContext, i: int, what: str) -> float | bool:
    """Input `i`, a one-element constant (`what`), as a Python number."""
    value = np.asarray(ctx.static(i, what))
    if value.size != 1:
        raise ctx.unsupported(f"{what} (input {i}) has shape {list(value.shape)}; expected a scalar")
    return value.reshape(-1)[0].item()


def _passed_through(ctx: ImportContext) -> Value:
    value = ctx.values.get(ctx.name(0))
    return value if value is not None else ctx.tensor(0)


def _dropout(ctx: ImportContext) -> list[Value]:
    """Inference mode (training_mode absent or 0) or ratio 0: the identity, and a mask of ones when it is read.
    Training mode: x times dropout_mask (0 or 1/(1 - ratio)), its mask output the keep mask (a constant); a ratio
    that is NaN, negative or at least 1 is refused."""
    training = ctx.has(2) and bool(_scalar(ctx, 2, "training_mode"))
    ratio = _scalar(ctx, 1, "the ratio") if ctx.has(1) else 0.5
    mask_read = len(ctx.node.output) > 1 and bool(ctx.node.output[1])
    if not training or ratio == 0.0:  # inference mode ignores the ratio (ONNX)
        outs = [_passed_through(ctx)]
        if mask_read:
            outs.append(np.broadcast_to(np.True_, ctx.shape(0)))  # a view: checked against the limit before a copy
        return outs
    problem = check_dropout_p(ratio, "Dropout ratio")
    if problem is not None:
        raise ctx.unsupported(problem)
    x = ctx.tensor(0)
    mask = dropout_mask(ctx.graph.seed, len(ctx.graph.nodes), tuple(x.shape), float(ratio), x.dtype,
                        key=next(ctx.draws))
    outs = [x * ctx.graph.const(mask, x.dtype)]
    if mask_read:
        outs.append(mask != 0)
    return outs


def _random_uniform_like(ctx: ImportContext) -> list[Value]:
    """low + (high - low) * U[0, 1) of the input's shape, drawn from (graph seed, the draw's ordinal) at import: a
    constant (a random input to a graph would make each import and graph hash differ)."""
    to = ctx.attr("dtype")
    dtype = DRAW_TYPES.get(int(to)) if to is not None else ctx.graph.dtype
    if dtype is None:
        raise ctx.unsupported(f"dtype={to}: expected a float32 (1) or float64 (11) draw")
    low, high = float(ctx.attr("low", 0.0)), float(ctx.attr("high", 1.0))
    if not (math.isfinite(low) and math.isfinite(high) and low <= high):
        raise ctx.unsupported(f"low={low!r}, high={high!r}: expected finite bounds with low <= high")
    shape = ctx.shape(0)
    draw = uniform_draw(ctx.graph.seed, len(ctx.graph.nodes), shape, key=next(ctx.draws))
    return [(low + (high - low) * draw).astype(dtype)]


RANDOM_OPS: tuple[OnnxOpDef, ...] = (
    OnnxOpDef("Dropout", _dropout, "nothing in inference mode or at ratio 0 (a constant mask of ones when it is "
                                   "read); in training mode mul by a seeded keep mask / (1 - ratio), ratio in [0, 1)"),
    OnnxOpDef("RandomUniformLike", _random_uniform_like, "a seeded uniform constant of the input's shape"),
)
