"""Converters of ONNX's image ops: Conv, pooling, BatchNormalization, DepthToSpace and SpaceToDepth
(ONNX node -> registry ops, NCHW, 2-D only)."""
from __future__ import annotations

import numpy as np

from accelsim import ops as F
from accelsim.frontends.onnx_context import ImportContext, Value
from accelsim.frontends.onnx_opdef import OnnxOpDef
from accelsim.frontends.onnx_pads import lowest, pad_extra, window_counts, window_pads
from accelsim.graph.ir import Var


def _image(ctx: ImportContext, x: Var) -> None:
    if x.ndim != 4:
        raise ctx.unsupported(f"input of shape {x.shape}: only 2-D (N, C, H, W) images are supported")


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
    begin, end = window_pads(ctx, x.shape[2:], kernel, strides, dilations)
    x, padding = pad_extra(x, begin, end, 0.0)
    y = F.conv2d(x, w, stride=strides, padding=padding, dilation=dilations, groups=int(ctx.attr("group", 1)))
    if ctx.has(2):
        if ctx.is_static(2) and not np.any(ctx.static(2, "the bias")):
            return [y]  # an exporter's zero bias (torch's bias=False): nothing to add
        y = y + F.reshape(ctx.tensor(2), (1, w.shape[0], 1, 1))
    return [y]


def _conv_transpose(ctx: ImportContext) -> list[Value]:
    """conv_transpose2d to the size ONNX gives (strides, dilations, output_padding, symmetric pads)."""
    x, w = ctx.tensor(0), ctx.tensor(1)
    _image(ctx, x)
    if ctx.attr("output_shape") is not None or ctx.attr("auto_pad", "NOTSET") not in ("NOTSET", "VALID"):
        raise ctx.unsupported("output_shape or auto_pad SAME_*; give pads and output_padding instead")
    strides, dilations = _pair_attr(ctx, "strides", 1), _pair_attr(ctx, "dilations", 1)
    extra = _pair_attr(ctx, "output_padding", 0)
    pads = [int(p) for p in ctx.attr("pads", [0, 0, 0, 0])]
    if len(pads) != 4 or pads[:2] != pads[2:] or any(p < 0 for p in pads):
        raise ctx.unsupported(f"pads={pads}; only symmetric, non-negative 2-D padding is supported")
    groups = int(ctx.attr("group", 1))
    kernel = w.shape[2:]
    size = tuple(s * (n - 1) + e + (k - 1) * d + 1 - 2 * p
                 for n, s, e, k, d, p in zip(x.shape[2:], strides, extra, kernel, dilations, pads[:2]))
    y = F.conv_transpose2d(x, w, (x.shape[0], w.shape[1] * groups) + size, strides, tuple(pads[:2]), dilations,
                           groups)
    if ctx.has(2):
        y = y + F.reshape(ctx.tensor(2), (1, w.shape[1] * groups, 1, 1))
    return [y]


def _instance_norm(ctx: ImportContext) -> list[Value]:
    """Each (sample, channel) normalized over its pixels: layer_norm of the (N, C, pixels) view, then the
    per-channel scale and bias (GroupNorm's export)."""
    x, scale, bias = ctx.tensor(0), ctx.tensor(1), ctx.tensor(2)
    if x.ndim < 3:
        raise ctx.unsupported(f"input of shape {x.shape}: InstanceNormalization needs (N, C, ...)")
    n, c = x.shape[:2]
    pixels = int(np.prod(x.shape[2:]))
    g = x.graph
    flat = F.layer_norm(F.reshape(x, (n, c, pixels)), g.const(np.ones(pixels)), g.const(np.zeros(pixels)),
                        float(ctx.attr("epsilon", 1e-5)))
    channel = (1, c) + (1,) * (x.ndim - 2)
    return [F.reshape(flat, x.shape) * F.reshape(scale, channel) + F.reshape(bias, channel)]


def _pool_window(ctx: ImportContext, x: Var) -> tuple[tuple[int, int], tuple[int, int], list[int], list[int]]:
    """(kernel, strides, begin pads, end pads) of a pooling node."""
    _image(ctx, x)
    kernel = _pair_attr(ctx, "kernel_shape", 1)
    strides, dilations = _pair_attr(ctx, "strides", 1), _pair_attr(ctx, "dilations", 1)
    if dilations != (1, 1):
        raise ctx.unsupported(f"dilations={list(dilations)}; pooling windows are not dilated in the registry")
    begin, end = window_pads(ctx, x.shape[2:], kernel, strides, dilations)
    if any(p >= k for p, k in zip(begin + end, kernel + kernel)):
        raise ctx.unsupported(f"padding (begin {begin}, end {end}) as wide as the kernel {list(kernel)}")
    if ctx.attr("ceil_mode", 0):
        sizes = [n + b + e - k for n, b, e, k in zip(x.shape[2:], begin, end, kernel)]
        if any(d % s for d, s in zip(sizes, strides)):
            raise ctx.unsupported("ceil_mode=1 changes the output size here; the registry pools in floor mode")
    return kernel, strides, begin, end


def _max_pool(ctx: ImportContext) -> list[Value]:
    if any(ctx.node.output[1:]):
        raise ctx.unsupported("its Indices output is used")
    if ctx.attr("storage_order", 0):
        raise ctx.unsupported("storage_order=1")
    x = ctx.tensor(0)
    kernel, strides, begin, end = _pool_window(ctx, x)
    x, padding = pad_extra(x, begin, end, lowest(x.dtype))
    return [F.max_pool2d(x, kernel, strides, padding)]


def _avg_pool(ctx: ImportContext) -> list[Value]:
    """avg_pool2d counts padding (count_include_pad=1); for 0 its windows are rescaled by
    kernel elements / covered input elements, a constant computed at import."""
    x = ctx.tensor(0)
    kernel, strides, begin, end = _pool_window(ctx, x)
    size = x.shape[2:]
    padded, padding = pad_extra(x, begin, end, 0.0)
    y = F.avg_pool2d(padded, kernel, strides, padding)
    if ctx.attr("count_include_pad", 0) or not any(begin + end):
        return [y]
    counts = window_counts(size, kernel, strides, begin, end)
    scale = (kernel[0] * kernel[1]) / counts
    return [y * x.graph.const(scale.reshape((1, 1) + scale.shape))]


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
    OnnxOpDef("Conv", _conv, "conv2d (+ add of the reshaped bias); asymmetric padding as a concat of zeros; 2-D only"),
    OnnxOpDef("ConvTranspose", _conv_transpose, "conv_transpose2d (+ add of the reshaped bias); symmetric pads"),
    OnnxOpDef("InstanceNormalization", _instance_norm, "layer_norm over each channel's pixels, then scale and bias"),
    OnnxOpDef("MaxPool", _max_pool, "max_pool2d; floor mode, no dilation, no Indices output"),
    OnnxOpDef("AveragePool", _avg_pool, "avg_pool2d; count_include_pad=0 as a rescale by covered elements"),
    OnnxOpDef("GlobalAveragePool", _global_pool(F.mean), "mean over the spatial axes, kept"),
    OnnxOpDef("GlobalMaxPool", _global_pool(F.max), "max over the spatial axes, kept"),
    OnnxOpDef("BatchNormalization", _batch_norm,
              "batch_norm_inference with the running statistics as frozen parameters (batch_norm with "
              "batch statistics when imported with batch_norm='training')"),
    OnnxOpDef("DepthToSpace", _depth_to_space, "pixel_shuffle (CRD); reshape-transpose-reshape (DCR)"),
    OnnxOpDef("SpaceToDepth", _space_to_depth, "reshape-transpose-reshape"),
)
