"""2-D convolution (NCHW, no bias) and its two backward-only adjoints.

The numpy references are im2col: a strided window view of the padded input, then one
batched matmul per group, so real layers evaluate at BLAS speed.
"""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from accelsim.errors import ShapeError
from accelsim.ops.registry import Example, OpDef, Shape, Split, apply, numel, register
from accelsim.ops.window import Pair, out_size, pair, scatter_windows, windows

__all__ = ["conv2d"]

# ---- builder ---------------------------------------------------------------------------

def conv2d(x: Any, w: Any, stride: int | Sequence[int] = 1, padding: int | Sequence[int] = 0,
           dilation: int | Sequence[int] = 1, groups: int = 1) -> Any:
    """Cross-correlation of x (N, C, H, W) with w (O, C // groups, KH, KW), as torch's conv2d."""
    return apply("conv2d", x, w, stride=pair(stride, "stride"), padding=pair(padding, "padding"),
                 dilation=pair(dilation, "dilation"), groups=int(groups))


# ---- shapes ----------------------------------------------------------------------------

def _conv_shape(x: Shape, w: Shape, stride: Pair, padding: Pair, dilation: Pair, groups: int) -> Shape:
    where = f"x {x}, w {w}, stride={stride}, padding={padding}, dilation={dilation}, groups={groups}"
    if len(x) != 4 or len(w) != 4:
        raise ShapeError(f"conv2d needs x (N, C, H, W) and w (O, C//groups, KH, KW); got {where}")
    if groups < 1 or min(stride) < 1 or min(dilation) < 1 or min(padding) < 0:
        raise ShapeError(f"groups, stride and dilation must be >= 1 and padding >= 0; got {where}")
    n, c, h, wd = x
    o, cg, kh, kw = w
    if c % groups or o % groups:
        raise ShapeError(f"groups={groups} must divide both in-channels C={c} and out-channels O={o}; got {where}")
    if cg * groups != c:
        raise ShapeError(f"channel mismatch: x has C={c} channels but w expects "
                         f"{cg} per group x {groups} groups = {cg * groups}; got {where}")
    ho = out_size(h, kh, stride[0], padding[0], dilation[0])
    wo = out_size(wd, kw, stride[1], padding[1], dilation[1])
    if ho <= 0 or wo <= 0:
        raise ShapeError(f"output size {ho}x{wo} <= 0: the dilated kernel does not fit the padded input; got {where}")
    return (n, o, ho, wo)


def _grad_input_shape(g: Shape, w: Shape, input_shape: Shape, stride: Pair, padding: Pair,
                      dilation: Pair, groups: int) -> Shape:
    expected = _conv_shape(tuple(input_shape), w, stride, padding, dilation, groups)
    if tuple(g) != expected:
        raise ShapeError(f"output gradient has shape {g}, but conv2d of {tuple(input_shape)} by {w} gives {expected}")
    return tuple(input_shape)


def _grad_weight_shape(x: Shape, g: Shape, weight_shape: Shape, stride: Pair, padding: Pair,
                       dilation: Pair, groups: int) -> Shape:
    expected = _conv_shape(x, tuple(weight_shape), stride, padding, dilation, groups)
    if tuple(g) != expected:
        raise ShapeError(f"output gradient has shape {g}, but conv2d of {x} by {tuple(weight_shape)} gives {expected}")
    return tuple(weight_shape)


# ---- numpy references: im2col + one matmul per group -----------------------------------

def _cols(x: np.ndarray, kernel: Pair, stride: Pair, padding: Pair, dilation: Pair, groups: int) -> np.ndarray:
    """im2col: (G, N*Ho*Wo, C/G*KH*KW), one row per output pixel and group."""
    win = windows(x, kernel, stride, padding, dilation)
    n, c, ho, wo, kh, kw = win.shape
    win = win.reshape(n, groups, c // groups, ho, wo, kh, kw).transpose(1, 0, 3, 4, 2, 5, 6)
    return win.reshape(groups, n * ho * wo, (c // groups) * kh * kw)


def _g_rows(g: np.ndarray, groups: int) -> np.ndarray:
    """Output gradient as (G, N*Ho*Wo, O/G), matching the rows of `_cols`."""
    n, o, ho, wo = g.shape
    return g.reshape(n, groups, o // groups, ho, wo).transpose(1, 0, 3, 4, 2).reshape(groups, n * ho * wo, o // groups)


def _conv_ref(x: np.ndarray, w: np.ndarray, stride: Pair, padding: Pair, dilation: Pair, groups: int) -> np.ndarray:
    o, cg, kh, kw = w.shape
    cols = _cols(x, (kh, kw), stride, padding, dilation, groups)
    wmat = w.reshape(groups, o // groups, cg * kh * kw).transpose(0, 2, 1)
    n, _, ho, wo = _conv_shape(x.shape, w.shape, stride, padding, dilation, groups)
    y = np.matmul(cols, wmat).reshape(groups, n, ho, wo, o // groups)
    return np.ascontiguousarray(y.transpose(1, 0, 4, 2, 3).reshape(n, o, ho, wo))


def _grad_input_ref(g: np.ndarray, w: np.ndarray, input_shape: Shape, stride: Pair, padding: Pair,
                    dilation: Pair, groups: int) -> np.ndarray:
    n, c, _, _ = input_shape
    o, cg, kh, kw = w.shape
    _, _, ho, wo = g.shape
    dcols = np.matmul(_g_rows(g, groups), w.reshape(groups, o // groups, cg * kh * kw))
    dcols = dcols.reshape(groups, n, ho, wo, cg, kh, kw).transpose(1, 0, 4, 2, 3, 5, 6).reshape(n, c, ho, wo, kh, kw)
    return scatter_windows(dcols, tuple(input_shape), stride, padding, dilation)


def _grad_weight_ref(x: np.ndarray, g: np.ndarray, weight_shape: Shape, stride: Pair, padding: Pair,
                     dilation: Pair, groups: int) -> np.ndarray:
    _, _, kh, kw = weight_shape
    cols = _cols(x, (kh, kw), stride, padding, dilation, groups)
    dw = np.matmul(_g_rows(g, groups).transpose(0, 2, 1), cols)
    return dw.reshape(tuple(weight_shape))


# ---- cost, gradient, examples ----------------------------------------------------------

def _layer(w: Shape) -> dict[str, Any]:
    """Facts of the conv layer a hardware unit may be dedicated to (`when:` in a hwconfig)."""
    return {"kernel": [w[2], w[3]], "out_channels": w[0], "in_channels_per_group": w[1]}


def _macs_per_output(w: Shape) -> int:
    return w[1] * w[2] * w[3]


def _grad(g: Any, out: Any, x: Any, w: Any, stride: Pair, padding: Pair, dilation: Pair,
          groups: int) -> tuple[Any, Any]:
    geo = {"stride": stride, "padding": padding, "dilation": dilation, "groups": groups}
    return (apply("conv2d_grad_input", g, w, input_shape=x.shape, **geo),
            apply("conv2d_grad_weight", x, g, weight_shape=w.shape, **geo))


_CASES: list[tuple[Shape, Shape, dict[str, Any]]] = [
    # (x shape, w shape, attrs); all but the first have (H + 2p - d(k-1) - 1) % stride != 0
    ((2, 3, 5, 5), (4, 3, 3, 3), {"stride": (1, 1), "padding": (0, 0), "dilation": (1, 1), "groups": 1}),
    ((1, 4, 8, 7), (6, 2, 3, 2), {"stride": (2, 1), "padding": (1, 0), "dilation": (1, 1), "groups": 2}),
    ((1, 2, 10, 9), (3, 2, 2, 3), {"stride": (2, 3), "padding": (1, 2), "dilation": (2, 1), "groups": 1}),
    ((2, 4, 6, 6), (4, 1, 3, 3), {"stride": (2, 2), "padding": (1, 1), "dilation": (1, 1), "groups": 4}),
    ((1, 6, 8, 8), (3, 2, 3, 3), {"stride": (3, 2), "padding": (2, 1), "dilation": (2, 2), "groups": 3}),
]


def _conv_examples(rng: np.random.Generator) -> list[Example]:
    return [((rng.normal(size=xs), rng.normal(size=ws)), dict(a)) for xs, ws, a in _CASES]


def _grad_input_examples(rng: np.random.Generator) -> list[Example]:
    cases = []
    for xs, ws, a in _CASES:
        gs = _conv_shape(xs, ws, **a)
        cases.append(((rng.normal(size=gs), rng.normal(size=ws)), {"input_shape": xs, **a}))
    return cases


def _grad_weight_examples(rng: np.random.Generator) -> list[Example]:
    cases = []
    for xs, ws, a in _CASES:
        gs = _conv_shape(xs, ws, **a)
        cases.append(((rng.normal(size=xs), rng.normal(size=gs)), {"weight_shape": ws, **a}))
    return cases


def _touched(size: int, out: int, kernel: int, stride: int, padding: int, dilation: int) -> int:
    """How many of an axis's `size` input positions some window reads: position i*stride - padding + j*dilation
    for output i < out and tap j < kernel, inside [0, size). Windows that overlap or abut (stride <= kernel, no
    dilation holes) read one contiguous run; otherwise (a stride-2 1x1 conv reads every other position) they
    are counted exactly with one mask of the axis (size is a dimension of a tensor the graph already holds)
    and one strided slice per tap."""
    if dilation == 1 and stride <= kernel:
        return max(0, min(size - 1, (out - 1) * stride - padding + kernel - 1) - max(0, -padding) + 1)
    touched = np.zeros(size, dtype=bool)
    for j in range(kernel):
        first = j * dilation - padding  # where output 0's tap j lands
        lo = max(0, (-first + stride - 1) // stride)  # the first output whose tap lands at >= 0
        hi = min(out, (size - 1 - first) // stride + 1)  # past the last output whose tap lands at < size
        if hi > lo:
            touched[first + lo * stride: first + (hi - 1) * stride + 1: stride] = True
    return int(touched.sum())


def _window_input_elems(x: Shape, out: Shape, kernel: Pair, stride: Pair, padding: Pair, dilation: Pair) -> int:
    """Elements of x (N, C, H, W) the windows read: all channels and images, the touched rows times the touched
    columns. Why: a conv whose stride exceeds its kernel (ResNet's 1x1 stride-2 downsample) reads a quarter of
    its input, and a dataflow accelerator fetches only those pixels (ZigZag counts them so:
    experiments/zigzag_compare.py). A layout that fetches whole bursts may move more; that is the memory's
    business, not the op's."""
    rows = _touched(x[2], out[2], kernel[0], stride[0], padding[0], dilation[0])
    cols = _touched(x[3], out[3], kernel[1], stride[1], padding[1], dilation[1])
    return x[0] * x[1] * rows * cols


def _conv_read(out: Shape, x: Shape, w: Shape, stride: Pair, padding: Pair, dilation: Pair, **a: Any) -> int:
    return _window_input_elems(x, out, (w[2], w[3]), stride, padding, dilation) + numel(w)


def _grad_weight_read(out: Shape, x: Shape, g: Shape, stride: Pair, padding: Pair, dilation: Pair, **a: Any) -> int:
    return _window_input_elems(x, g, (out[2], out[3]), stride, padding, dilation) + numel(g)


def _conv_splits(out: Shape, x: Shape, w: Shape, groups: int, **a: Any) -> tuple[Split, ...]:
    """Images from images; with one group, output channels from their filters."""
    batch = Split("batch", 0, (0, None))
    return (batch, Split("out_channels", 1, (None, 0))) if groups == 1 else (batch,)


def _grad_input_splits(out: Shape, g: Shape, w: Shape, groups: int, **a: Any) -> tuple[Split, ...]:
    """dx's images from g's images; with one group, dx's channel c from the filters' input channel c."""
    batch = Split("batch", 0, (0, None), "input_shape")
    return (batch, Split("in_channels", 1, (None, 1), "input_shape")) if groups == 1 else (batch,)


def _grad_weight_splits(out: Shape, x: Shape, g: Shape, groups: int, **a: Any) -> tuple[Split, ...]:
    """With one group, dW's filter o from g's channel o, and dW's input channel c from x's channel c."""
    if groups != 1:
        return ()
    return (Split("out_channels", 0, (None, 1), "weight_shape"), Split("in_channels", 1, (1, None), "weight_shape"))


register(OpDef(
    "conv2d", "tensor", splits=_conv_splits, infer=_conv_shape, ref=_conv_ref, grad=_grad, examples=_conv_examples,
    read_elems=_conv_read, flops=lambda out, x, w, **a: 2 * numel(out) * _macs_per_output(w),
    gemm=lambda out, x, w, groups, **a: (groups, out[0] * out[2] * out[3], _macs_per_output(w), out[1] // groups),
    features=lambda out, x, w, **a: _layer(w),
    doc="NCHW cross-correlation, no bias; weight (O, C//groups, KH, KW)"))
register(OpDef(
    "conv2d_grad_input", "tensor", splits=_grad_input_splits, infer=_grad_input_shape, ref=_grad_input_ref, backward_only=True,
    flops=lambda out, g, w, **a: 2 * numel(g) * _macs_per_output(w), examples=_grad_input_examples,
    # dcols = g (N*Ho*Wo, O/groups) @ w (O/groups, C/groups*KH*KW), then col2im adds the columns back.
    gemm=lambda out, g, w, groups, **a: (groups, g[0] * g[2] * g[3], g[1] // groups, _macs_per_output(w)),
    features=lambda out, g, w, **a: _layer(w),
    doc="d conv2d / d x: transposed convolution of the output gradient (col2im)"))
register(OpDef(
    "conv2d_grad_weight", "tensor", splits=_grad_weight_splits, infer=_grad_weight_shape, ref=_grad_weight_ref, backward_only=True,
    read_elems=_grad_weight_read,
    flops=lambda out, x, g, **a: 2 * numel(g) * _macs_per_output(out), examples=_grad_weight_examples,
    gemm=lambda out, x, g, groups, **a: (groups, out[0] // groups, g[0] * g[2] * g[3], _macs_per_output(out)),
    features=lambda out, x, g, **a: _layer(out),
    doc="d conv2d / d w: correlation of the input windows with the output gradient"))
