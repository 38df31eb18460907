"""conv2d, pooling and pixel (un)shuffle: forward values and gradients against PyTorch in float64."""
from typing import Any, Callable

import numpy as np
import pytest

import accelsim
from accelsim import ops as F
from accelsim.compare import max_rel_err

torch = pytest.importorskip("torch")
TF = torch.nn.functional
pytestmark = pytest.mark.torch


def _compare(shapes: dict[str, tuple[int, ...]], ours: Callable[..., Any], theirs: Callable[..., Any],
             arrays: dict[str, np.ndarray] | None = None) -> None:
    """loss = sum(op(inputs) * R) built in both; the op's output and every input's gradient must agree."""
    rng = np.random.default_rng(0)
    arrays = arrays or {k: rng.normal(size=s) for k, s in shapes.items()}
    g = accelsim.Graph("t", dtype="float64")
    vs = {k: (g.input(k, s) if k == "x" else g.param(k, s)) for k, s in shapes.items()}
    out = ours(**vs)
    weight = g.input("weight", out.shape)
    g.set_loss(F.sum(out * weight))
    g.output("out", out)
    grads = accelsim.gradients(g, g.loss, [v.id for v in vs.values()])
    for k, v in vs.items():
        g.output(f"{k}.grad", grads[v.id])
    feeds = {**arrays, "weight": rng.normal(size=out.shape)}
    got = accelsim.evaluate(g, feeds)

    ts = {k: torch.tensor(a, dtype=torch.float64, requires_grad=True) for k, a in arrays.items()}
    t_out = theirs(**ts)
    (t_out * torch.tensor(feeds["weight"])).sum().backward()

    assert got["out"].shape == tuple(t_out.shape)
    assert max_rel_err(got["out"], t_out.detach().numpy()) < 1e-6
    for k, t in ts.items():
        err = max_rel_err(got[f"{k}.grad"], t.grad.numpy())
        assert err < 1e-6, f"d/d{k}: rel err {err:.2e}"


CONV_CASES = [
    # x shape, w shape, stride, padding, dilation, groups
    ((2, 3, 8, 8), (4, 3, 3, 3), 1, 1, 1, 1),
    ((2, 4, 9, 7), (6, 4, 3, 3), 2, 1, 1, 1),            # odd sizes: last row/col never read
    ((1, 4, 10, 11), (6, 2, 3, 2), (2, 3), (1, 0), 1, 2),  # grouped, rectangular kernel
    ((2, 6, 9, 9), (6, 1, 3, 3), 2, 1, 1, 6),            # depthwise
    ((1, 6, 12, 10), (9, 2, 3, 3), (3, 2), (2, 1), (2, 3), 3),
    ((1, 3, 5, 5), (2, 3, 5, 5), 1, 0, 1, 1),            # kernel covers the whole input
    ((1, 2, 7, 7), (3, 2, 1, 1), 3, 0, 1, 1),            # 1x1, stride > kernel: skipped pixels
]


@pytest.mark.parametrize("xs,ws,stride,padding,dilation,groups", CONV_CASES)
def test_conv2d_forward_and_gradients_match_torch(xs, ws, stride, padding, dilation, groups):
    _compare({"x": xs, "w": ws},
             lambda x, w: F.conv2d(x, w, stride, padding, dilation, groups),
             lambda x, w: TF.conv2d(x, w, stride=stride, padding=padding, dilation=dilation, groups=groups))


POOL_CASES = [
    # x shape, kernel, stride, padding
    ((2, 3, 8, 8), 2, None, 0),
    ((1, 2, 7, 9), 3, 2, 1),                 # overlapping windows, padding
    ((2, 2, 7, 6), (3, 2), (1, 2), (1, 0)),  # rectangular, dense in H
    ((1, 1, 5, 5), 3, 1, 1),
]


def _distinct(shape: tuple[int, ...]) -> np.ndarray:
    rng = np.random.default_rng(1)
    return rng.permutation(int(np.prod(shape))).reshape(shape) * 0.1 - 1.0


@pytest.mark.parametrize("xs,kernel,stride,padding", POOL_CASES)
def test_max_pool2d_forward_and_gradient_match_torch(xs, kernel, stride, padding):
    _compare({"x": xs}, lambda x: F.max_pool2d(x, kernel, stride, padding),
             lambda x: TF.max_pool2d(x, kernel, stride=stride, padding=padding), {"x": _distinct(xs)})


def test_max_pool2d_ties_route_gradient_to_first_max_like_torch():
    rng = np.random.default_rng(2)
    xs = (2, 2, 7, 7)
    x = rng.integers(0, 3, size=xs).astype(np.float64)  # many ties inside each window
    _compare({"x": xs}, lambda x: F.max_pool2d(x, 3, 2, 1),
             lambda x: TF.max_pool2d(x, 3, stride=2, padding=1), {"x": x})


@pytest.mark.parametrize("xs,kernel,stride,padding", POOL_CASES)
def test_avg_pool2d_forward_and_gradient_match_torch(xs, kernel, stride, padding):
    _compare({"x": xs}, lambda x: F.avg_pool2d(x, kernel, stride, padding),
             lambda x: TF.avg_pool2d(x, kernel, stride=stride, padding=padding, count_include_pad=True))


@pytest.mark.parametrize("xs,r", [((2, 8, 3, 4), 2), ((1, 18, 2, 3), 3), ((4, 3, 5), 2)])
def test_pixel_shuffle_forward_and_gradient_match_torch(xs, r):
    _compare({"x": xs}, lambda x: F.pixel_shuffle(x, r), lambda x: TF.pixel_shuffle(x, r))


@pytest.mark.parametrize("xs,r", [((2, 2, 6, 4), 2), ((1, 3, 6, 9), 3), ((3, 4, 6), 2)])
def test_pixel_unshuffle_forward_and_gradient_match_torch(xs, r):
    _compare({"x": xs}, lambda x: F.pixel_unshuffle(x, r), lambda x: TF.pixel_unshuffle(x, r))


def test_conv2d_channel_mismatch_names_op_node_and_shapes():
    g = accelsim.Graph("t", dtype="float64")
    x = g.input("x", (2, 3, 8, 8))
    w = g.param("w", (4, 5, 3, 3))
    with pytest.raises(accelsim.ShapeError) as err:
        F.conv2d(x, w, padding=1)
    msg = str(err.value)
    for part in ("conv2d node %2", "(2, 3, 8, 8)", "(4, 5, 3, 3)", "channel"):
        assert part in msg, f"{part!r} missing from: {msg}"


@pytest.mark.parametrize("xs,ws,attrs,reason", [
    ((1, 4, 8, 8), (6, 2, 3, 3), {"groups": 3}, "groups=3 must divide"),
    ((1, 3, 4, 4), (2, 3, 5, 5), {}, "output size"),
    ((1, 3, 4, 4), (2, 3, 3, 3), {"dilation": 2}, "output size"),
])
def test_conv2d_rejects_bad_geometry_with_the_reason(xs, ws, attrs, reason):
    g = accelsim.Graph("t", dtype="float64")
    with pytest.raises(accelsim.ShapeError, match=reason):
        F.conv2d(g.input("x", xs), g.param("w", ws), **attrs)
