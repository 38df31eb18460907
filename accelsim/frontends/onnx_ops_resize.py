"""Converter of ONNX's Resize on (N, C, H, W) images, modes nearest and linear (ONNX node -> two matmuls with
constant interpolation matrices, y = A_h x A_w^T, built at import from ONNX's coordinate transforms: exact for
every scale, and its gradient is the transposed matrices')."""
from __future__ import annotations

import math

import numpy as np

from accelsim import ops as F
from accelsim.frontends.onnx_context import ImportContext, Value
from accelsim.frontends.onnx_opdef import OnnxOpDef

TRANSFORMS = ("half_pixel", "pytorch_half_pixel", "align_corners", "asymmetric")
NEAREST_MODES = ("round_prefer_floor", "round_prefer_ceil", "floor", "ceil")


def _source(out: int, size: int, scale: float, transform: str) -> np.ndarray:
    """The input coordinate each output position reads (ONNX's coordinate_transformation_mode)."""
    r = np.arange(out, dtype=np.float64)
    if transform == "half_pixel":
        return (r + 0.5) / scale - 0.5
    if transform == "pytorch_half_pixel":
        return (r + 0.5) / scale - 0.5 if out > 1 else np.zeros(out)
    if transform == "align_corners":
        return r * (size - 1) / (out - 1) if out > 1 else np.zeros(out)
    return r / scale


def _nearest(coords: np.ndarray, mode: str) -> np.ndarray:
    frac = coords - np.floor(coords)
    if mode == "floor":
        return np.floor(coords)
    if mode == "ceil":
        return np.ceil(coords)
    half = np.isclose(frac, 0.5)
    rounded = np.floor(coords + 0.5)
    return np.where(half, np.floor(coords) if mode == "round_prefer_floor" else np.ceil(coords), rounded)


def interpolation(out: int, size: int, scale: float, mode: str, transform: str, nearest_mode: str) -> np.ndarray:
    """The (out, size) matrix whose rows weigh the inputs each output position interpolates."""
    coords = _source(out, size, scale, transform)
    a = np.zeros((out, size))
    rows = np.arange(out)
    if mode == "nearest":
        a[rows, np.clip(_nearest(coords, nearest_mode), 0, size - 1).astype(np.int64)] = 1.0
        return a
    coords = np.clip(coords, 0, size - 1)
    low = np.floor(coords).astype(np.int64)
    high = np.minimum(low + 1, size - 1)
    weight = coords - low
    np.add.at(a, (rows, low), 1.0 - weight)
    np.add.at(a, (rows, high), weight)
    return a


def _resize(ctx: ImportContext) -> list[Value]:
    x = ctx.tensor(0)
    if x.ndim != 4:
        raise ctx.unsupported(f"input of shape {x.shape}: only (N, C, H, W) images are resized")
    mode = ctx.attr("mode", "nearest")
    transform = ctx.attr("coordinate_transformation_mode", "half_pixel")
    nearest_mode = ctx.attr("nearest_mode", "round_prefer_floor")
    if mode not in ("nearest", "linear") or transform not in TRANSFORMS or nearest_mode not in NEAREST_MODES:
        raise ctx.unsupported(f"mode={mode!r}, coordinate_transformation_mode={transform!r}, nearest_mode="
                              f"{nearest_mode!r} (supported: nearest or linear; {', '.join(TRANSFORMS)})")
    if ctx.attr("antialias", 0) or ctx.attr("exclude_outside", 0) or ctx.attr("axes") is not None:
        raise ctx.unsupported("antialias, exclude_outside or axes")
    if ctx.has(3):
        sizes = ctx.static_ints(3, "the output sizes")
        scales = [o / i for o, i in zip(sizes, x.shape)]
    elif ctx.has(2):
        scales = [float(s) for s in np.asarray(ctx.static(2, "the scales")).reshape(-1)]
        sizes = [int(math.floor(i * s)) for i, s in zip(x.shape, scales)]
    else:
        raise ctx.unsupported("neither scales nor sizes is given")
    if len(sizes) != 4 or list(sizes[:2]) != list(x.shape[:2]) or min(sizes[2:]) < 1:
        raise ctx.unsupported(f"output size {list(sizes)} from input {list(x.shape)}: only H and W are resized")
    g = x.graph
    a_h = interpolation(sizes[2], x.shape[2], scales[2], mode, transform, nearest_mode)
    a_w = interpolation(sizes[3], x.shape[3], scales[3], mode, transform, nearest_mode)
    y = F.matmul(x, g.const(a_w.T))  # (N, C, H, W_out)
    y = F.matmul(F.transpose(y, (0, 1, 3, 2)), g.const(a_h.T))  # (N, C, W_out, H_out)
    return [F.transpose(y, (0, 1, 3, 2))]


RESIZE_OPS: tuple[OnnxOpDef, ...] = (
    OnnxOpDef("Resize", _resize, "two matmuls with constant interpolation matrices (nearest, linear)"),
)
