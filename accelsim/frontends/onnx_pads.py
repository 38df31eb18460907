"""The padding of ONNX's windowed ops (Conv, MaxPool, AveragePool, LRN) as the registry expresses it: the
registry's conv and pools pad both sides of an axis equally, so the part of an asymmetric padding beyond the
smaller side is explicit, a concat of constant blocks (pads + window -> padded Var + symmetric padding).
"""
from __future__ import annotations

import math
from typing import Sequence

import numpy as np

from accelsim import ops as F
from accelsim.frontends.onnx_context import ImportContext
from accelsim.graph.ir import Var


def window_pads(ctx: ImportContext, size: Sequence[int], kernel: Sequence[int], strides: Sequence[int],
                dilations: Sequence[int]) -> tuple[list[int], list[int]]:
    """(begin, end) padding per spatial axis from the node's pads or auto_pad attribute."""
    auto_pad = ctx.attr("auto_pad", "NOTSET")
    rank = len(size)
    if auto_pad in ("SAME_UPPER", "SAME_LOWER"):
        begin, end = [], []
        for n, k, s, d in zip(size, kernel, strides, dilations):
            total = max((math.ceil(n / s) - 1) * s + (k - 1) * d + 1 - n, 0)
            small, large = total // 2, total - total // 2
            begin.append(small if auto_pad == "SAME_UPPER" else large)
            end.append(large if auto_pad == "SAME_UPPER" else small)
    elif auto_pad == "VALID":
        begin, end = [0] * rank, [0] * rank
    elif auto_pad == "NOTSET":
        pads = [int(p) for p in ctx.attr("pads", [0] * (2 * rank))]
        if len(pads) != 2 * rank:
            raise ctx.unsupported(f"pads={pads}: expected {2 * rank} values for a {rank}-D window")
        begin, end = pads[:rank], pads[rank:]
    else:
        raise ctx.unsupported(f"auto_pad={auto_pad!r} (expected NOTSET, SAME_UPPER, SAME_LOWER or VALID)")
    if any(p < 0 for p in begin + end):
        raise ctx.unsupported(f"negative padding (begin {begin}, end {end})")
    return begin, end


def pad_extra(x: Var, begin: Sequence[int], end: Sequence[int], value: float) -> tuple[Var, tuple[int, ...]]:
    """x with the asymmetric part of (begin, end) on its trailing axes made explicit (blocks of `value`),
    and the symmetric padding left for the registry op: min(begin, end) per axis."""
    symmetric = tuple(min(b, e) for b, e in zip(begin, end))
    first = x.ndim - len(begin)
    for k, (b, e, s) in enumerate(zip(begin, end, symmetric)):
        axis = first + k
        parts = []
        for extra, at_start in ((b - s, True), (e - s, False)):
            if extra:
                shape = x.shape[:axis] + (extra,) + x.shape[axis + 1:]
                block = F.broadcast_to(x.graph.const(np.asarray(value)), shape)
                parts.append((at_start, block))
        if parts:
            pieces = [blk for start, blk in parts if start] + [x] + [blk for start, blk in parts if not start]
            x = F.concat(pieces, axis)
    return x, symmetric


def lowest(dtype: str) -> float:
    """The most negative finite value of `dtype`: max pooling's explicit padding never wins a window that
    holds one input element (every ONNX window does), and stays finite for `check`."""
    return float(-np.finfo(np.dtype(dtype)).max)


def window_counts(size: Sequence[int], kernel: Sequence[int], strides: Sequence[int], begin: Sequence[int],
                  end: Sequence[int]) -> np.ndarray:
    """How many input elements (not padding) each output window of a 2-D pool covers (out_h, out_w)."""
    inside = np.pad(np.ones(tuple(size)), list(zip(begin, end)))
    windows = np.lib.stride_tricks.sliding_window_view(inside, tuple(kernel))
    return windows[:: strides[0], :: strides[1]].sum(axis=(-2, -1))
