"""Converters of ONNX's image ops: Conv, pooling, BatchNormalization, DepthToSpace and SpaceToDepth
(ONNX node -> registry ops, NCHW, 2-D only)."""
from __future__ import annotations

import math

import numpy as np

from accelsim import ops as F
from accelsim.frontends.onnx_context import ImportContext, Value
from accelsim.frontends.onnx_opdef import OnnxOpDef
from accelsim.graph.ir import Var


def _image(ctx: ImportContext, x: Var) -> None:
    if x.ndim != 4:
        raise ctx.unsupported(f"input of shape {x.shape}: only 2-D (N, C, H, W) images are supported")


def _symmetric_pads(ctx: ImportContext, size: tuple[int, int], kernel: tuple[int, int],
                    strides: tuple[int, int], dilations: tuple[int, int]) -> tuple[int, int]:
    """(pad_h, pad_w) from pads or auto_pad; the registry pads both sides equally."""
    auto_pad = ctx.attr("auto_pad", "NOTSET")
    if auto_pad in ("SAME_UPPER", "SAME_LOWER"):
        pads = []
        for n, k, s, d in zip(size, kernel, strides, dilations):
            total = max((math.ceil(n / s) - 1) * s + (k - 1) * d + 1 - n, 0)
            small, large = total // 2, total - total // 2
            pads.append((small, large) if auto_pad == "SAME_UPPER" else (large, small))
        begin, end = [p[0] for p in pads], [p[1] for p in pads]
    elif auto_pad == "VALID":
        begin, end = [0, 0], [0, 0]
    elif auto_pad == "NOTSET":
        pads = list(ctx.attr("pads", [0, 0, 0, 0]))
        begin, end = pads[:2], pads[2:]
    else:
        raise ctx.unsupported(f"auto_pad={auto_pad!r}")
    if begin != end:
        raise ctx.unsupported(f"asymmetric padding (begin {begin}, end {end}); the registry pads both sides "
                              "equally")
    return int(begin[0]), int(begin[1])


def _pair_attr(ctx: ImportContext, name: str, default: int) -> tuple[int, int]:
    value = list(ctx.attr(name, [default, default]))
    if len(value) != 2:
        raise ctx.unsupported(f"{name}={value}: only 2-D windows are supported")
    return int(value[0]), int(value[1])


def _conv(ctx: ImportContext) -> list[Value]:
    x, w = ctx.tensor(0), ctx.tensor(1)
    _image(ctx, x)
    kernel = tuple(w.shape[2:])
    strides, dilations = _pair_attr(ctx, "strides", 1), _pair_attr(ctx, "dilations", 1)
    padding = _symmetric_pads(ctx, x.shape[2:], kernel, strides, dilations)
    y = F.conv2d(x, w, stride=strides, padding=padding, dilation=dilations, groups=int(ctx.attr("group", 1)))
    if ctx.has(2):
        if ctx.is_static(2) and not np.any(ctx.static(2, "the bias")):
            return [y]  # an exporter's zero bias (torch's bias=False): nothing to add
        y = y + F.reshape(ctx.tensor(2), (1, w.shape[0], 1, 1))
    return [y]


def _pool_window(ctx: ImportContext, x: Var) -> dict[str, tuple[int, int]]:
    _image(ctx, x)
    kernel = _pair_attr(ctx, "kernel_shape", 1)
    strides, dilations = _pair_attr(ctx, "strides", 1), _pair_attr(ctx, "dilations", 1)
    if dilations != (1, 1):
        raise ctx.unsupported(f"dilations={list(dilations)}; pooling windows are not dilated in the registry")
    padding = _symmetric_pads(ctx, x.shape[2:], kernel, strides, dilations)
    if ctx.attr("ceil_mode", 0):
        floor_out = [(n + 2 * p - k) // s + 1 for n, p, k, s in zip(x.shape[2:], padding, kernel, strides)]
        ceil_out = [-(-(n + 2 * p - k) // s) + 1 for n, p, k, s in zip(x.shape[2:], padding, kernel, strides)]
        if floor_out != ceil_out:
            raise ctx.unsupported("ceil_mode=1 changes the output size here; the registry pools in floor mode")
    return {"kernel": kernel, "stride": strides, "padding": padding}


def _max_pool(ctx: ImportContext) -> list[Value]:
    if any(ctx.node.output[1:]):
        raise ctx.unsupported("its Indices output is used")
    if ctx.attr("storage_order", 0):
        raise ctx.unsupported("storage_order=1")
    x = ctx.tensor(0)
    return [F.max_pool2d(x, **_pool_window(ctx, x))]


def _avg_pool(ctx: ImportContext) -> list[Value]:
    x = ctx.tensor(0)
    window = _pool_window(ctx, x)
    if any(window["padding"]) and not ctx.attr("count_include_pad", 0):
        raise ctx.unsupported("count_include_pad=0 with padding; the registry's avg_pool2d counts the padding "
                              "(torch's default count_include_pad=True exports as 1)")
    return [F.avg_pool2d(x, **window)]


def _global_pool(reduce_fn):
    def convert(ctx: ImportContext) -> list[Value]:
        x = ctx.tensor(0)
        return [reduce_fn(x, tuple(range(2, x.ndim)), True)]
    return convert


def _batch_norm(ctx: ImportContext) -> list[Value]:
    if ctx.attr("training_mode", 0) or any(ctx.node.output[1:]):
        raise ctx.unsupported("training_mode=1 (running-statistics outputs); export the model in eval mode")
    x, scale, bias = ctx.tensor(0), ctx.tensor(1), ctx.tensor(2)
    eps = float(ctx.attr("epsilon", 1e-5))
    if ctx.batch_norm == "training":
        return [F.batch_norm(x, scale, bias, eps)]  # batch statistics, as torch's train mode
    return [F.batch_norm_inference(x, scale, bias, ctx.tensor(3), ctx.tensor(4), eps)]


def _depth_to_space(ctx: ImportContext) -> list[Value]:
    x = ctx.tensor(0)
    _image(ctx, x)
    b = int(ctx.attr("blocksize"))
    if ctx.attr("mode", "DCR") == "CRD":
        return [F.pixel_shuffle(x, b)]  # CRD is torch's pixel_shuffle layout
    n, c, h, w = x.shape
    y = F.transpose(F.reshape(x, (n, b, b, c // (b * b), h, w)), (0, 3, 4, 1, 5, 2))
    return [F.reshape(y, (n, c // (b * b), h * b, w * b))]


def _space_to_depth(ctx: ImportContext) -> list[Value]:
    x = ctx.tensor(0)
    _image(ctx, x)
    b = int(ctx.attr("blocksize"))
    n, c, h, w = x.shape
    y = F.transpose(F.reshape(x, (n, c, h // b, b, w // b, b)), (0, 3, 5, 1, 2, 4))
    return [F.reshape(y, (n, c * b * b, h // b, w // b))]


CONV_OPS: tuple[OnnxOpDef, ...] = (
    OnnxOpDef("Conv", _conv, "conv2d (+ add of the reshaped bias); symmetric padding, 2-D only"),
    OnnxOpDef("MaxPool", _max_pool, "max_pool2d; floor mode, no dilation, no Indices output"),
    OnnxOpDef("AveragePool", _avg_pool, "avg_pool2d; padding only with count_include_pad=1"),
    OnnxOpDef("GlobalAveragePool", _global_pool(F.mean), "mean over the spatial axes, kept"),
    OnnxOpDef("GlobalMaxPool", _global_pool(F.max), "max over the spatial axes, kept"),
    OnnxOpDef("BatchNormalization", _batch_norm,
              "batch_norm_inference with the running statistics as frozen parameters (batch_norm with "
              "batch statistics when imported with batch_norm='training')"),
    OnnxOpDef("DepthToSpace", _depth_to_space, "pixel_shuffle (CRD); reshape-transpose-reshape (DCR)"),
    OnnxOpDef("SpaceToDepth", _space_to_depth, "reshape-transpose-reshape"),
)
