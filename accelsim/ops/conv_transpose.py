"""Transposed 2-D convolution (PyTorch's ConvTranspose2d, no bias): the adjoint of conv2d.

conv_transpose2d(x, w) with output shape S is exactly conv2d_grad_input(x, w, input_shape=S): the gradient of
a conv2d of an S-shaped tensor by w, with x as that conv2d's output gradient. So its reference, cost, GEMM view
and kernels are conv2d_grad_input's, and its own gradients are conv2d's: dx = conv2d(g, w) and
dw = conv2d_grad_weight(g, x) (<g, conv_transpose(x, w)> = <x, conv2d(g, w)>). The weight is torch's layout,
(C_in, C_out // groups, KH, KW); output_shape carries the output padding torch adds.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from accelsim.ops.conv import _conv_shape
from accelsim.ops.registry import OPS, Example, OpDef, Shape, Split, apply, register

__all__ = ["conv_transpose2d"]

Pair = tuple[int, int]


def conv_transpose2d(x: Any, w: Any, output_shape: Shape, stride: Pair = (1, 1), padding: Pair = (0, 0),
                     dilation: Pair = (1, 1), groups: int = 1) -> Any:
    """The transposed convolution of x (N, C_in, H, W) by w (C_in, C_out // groups, KH, KW) to output_shape."""
    return apply("conv_transpose2d", x, w, output_shape=tuple(int(d) for d in output_shape), stride=tuple(stride),
                 padding=tuple(padding), dilation=tuple(dilation), groups=int(groups))


def _adjoint(attrs: dict[str, Any]) -> dict[str, Any]:
    """conv_transpose2d's attrs as conv2d_grad_input's."""
    out = dict(attrs)
    out["input_shape"] = out.pop("output_shape")
    return out


def _grad(g: Any, out: Any, x: Any, w: Any, output_shape: Shape, **geo: Any) -> tuple[Any, Any]:
    return (apply("conv2d", g, w, **geo), apply("conv2d_grad_weight", g, x, weight_shape=w.shape, **geo))


def _examples(rng: np.random.Generator) -> list[Example]:
    cases: list[tuple[Shape, Shape, dict[str, Any]]] = [  # (output shape, w shape, geometry)
        ((2, 3, 6, 6), (4, 3, 2, 2), {"stride": (2, 2), "padding": (0, 0), "dilation": (1, 1), "groups": 1}),
        ((1, 4, 7, 8), (6, 2, 3, 2), {"stride": (2, 1), "padding": (1, 0), "dilation": (1, 1), "groups": 2}),
        ((1, 2, 9, 9), (3, 2, 3, 3), {"stride": (2, 2), "padding": (1, 1), "dilation": (1, 1), "groups": 1}),
    ]
    return [((rng.normal(size=_conv_shape(s, ws, **a)), rng.normal(size=ws)), {"output_shape": s, **a})
            for s, ws, a in cases]


def _splits(out: Shape, x: Shape, w: Shape, groups: int, **a: Any) -> tuple[Split, ...]:
    """Images from x's images; with one group, output channel c from the filters' axis-1 slice c."""
    batch = Split("batch", 0, (0, None), "output_shape")
    return (batch, Split("out_channels", 1, (None, 1), "output_shape")) if groups == 1 else (batch,)


_GI = OPS["conv2d_grad_input"]
register(OpDef(
    "conv_transpose2d", "tensor", splits=_splits, infer=lambda x, w, **a: _GI.infer(x, w, **_adjoint(a)),
    ref=lambda x, w, **a: _GI.ref(x, w, **_adjoint(a)), grad=_grad, examples=_examples,
    flops=lambda out, x, w, **a: _GI.flops(out, x, w, **_adjoint(a)),
    gemm=lambda out, x, w, **a: _GI.gemm(out, x, w, **_adjoint(a)),
    features=lambda out, x, w, **a: _GI.features(out, x, w, **_adjoint(a)),
    doc="transposed convolution (ConvTranspose2d, no bias): conv2d_grad_input with x as the output gradient"))
