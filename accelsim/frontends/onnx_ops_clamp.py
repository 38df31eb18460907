"""Converters of ONNX's variadic sums and clamps: Sum, Clip, HardSigmoid, HardSwish and LRN (ONNX node ->
registry ops). A clamp is two `where`s on comparisons (the torch frontend's lowering too), so its gradient
is g where min <= x <= max; LRN is a channel-window average pool of x^2 (onnx_pads for its padding)."""
from __future__ import annotations


import numpy as np

from accelsim import ops as F
from accelsim.frontends.lowerings import clamp
from accelsim.frontends.onnx_context import ImportContext, Value
from accelsim.frontends.onnx_opdef import OnnxOpDef
from accelsim.frontends.onnx_pads import pad_extra
from accelsim.graph.ir import Var


def _sum(ctx: ImportContext) -> list[Value]:
    """Variadic Sum: a chain of adds, left to right as onnxruntime sums (numpy broadcasting)."""
    terms = [ctx.tensor(i) for i in range(len(ctx.node.input)) if ctx.has(i)]
    y = terms[0]
    for t in terms[1:]:
        y = F.add(y, t)
    return [y]


def _bound(ctx: ImportContext, i: int, what: str) -> float | None:
    if not ctx.has(i):
        return None
    value = np.asarray(ctx.static(i, what))
    if value.size != 1:
        raise ctx.unsupported(f"{what} has shape {value.shape}; Clip's bounds are scalars")
    return float(value.reshape(-1)[0])


def _clip(ctx: ImportContext) -> list[Value]:
    lo, hi = _bound(ctx, 1, "the minimum"), _bound(ctx, 2, "the maximum")
    return [clamp(ctx.tensor(0), lo, hi)]


def _hard_sigmoid(x: Var, alpha: float, beta: float) -> Var:
    return clamp(x * alpha + beta, 0.0, 1.0)


def _lrn(ctx: ImportContext) -> list[Value]:
    """y = x / (bias + alpha/size * sum of x^2 over a window of `size` channels)^beta (ONNX's LRN), the
    window sum an average pool over the channel axis of x^2 viewed as (N, 1, C, H*W)."""
    x = ctx.tensor(0)
    if x.ndim < 3:
        raise ctx.unsupported(f"input of shape {x.shape}: LRN needs (N, C, ...)")
    size = int(ctx.attr("size"))
    if size < 1:
        raise ctx.unsupported(f"size={size} (expected a positive window of channels)")
    alpha, beta, bias = float(ctx.attr("alpha", 1e-4)), float(ctx.attr("beta", 0.75)), float(ctx.attr("bias", 1.0))
    n, c = x.shape[0], x.shape[1]
    pixels = int(np.prod(x.shape[2:]))
    squares = F.reshape(F.square(x), (n, 1, c, pixels))
    padded, padding = pad_extra(squares, [(size - 1) // 2, 0], [size // 2, 0], 0.0)
    window_mean = F.avg_pool2d(padded, (size, 1), (1, 1), padding)
    scale = F.reshape(window_mean * alpha + bias, x.shape)
    return [x * F.pow(scale, -beta)]


CLAMP_OPS: tuple[OnnxOpDef, ...] = (
    OnnxOpDef("Sum", _sum, "a chain of adds"),
    OnnxOpDef("Clip", _clip, "where(x < min, min, x), then where(y > max, max, y); constant scalar bounds"),
    OnnxOpDef("HardSigmoid", lambda ctx: [_hard_sigmoid(ctx.tensor(0), float(ctx.attr("alpha", 0.2)),
                                                        float(ctx.attr("beta", 0.5)))],
              "clamp(alpha x + beta, 0, 1)"),
    OnnxOpDef("HardSwish", lambda ctx: [ctx.tensor(0) * _hard_sigmoid(ctx.tensor(0), 1.0 / 6.0, 0.5)],
              "x * clamp(x / 6 + 1/2, 0, 1)"),
    OnnxOpDef("LRN", _lrn, "x * (bias + alpha * avg_pool over channels of x^2)^-beta"),
)
