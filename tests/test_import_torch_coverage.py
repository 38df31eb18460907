"""PyTorch import coverage: models that compute their loss inside `forward` (cross-entropy, MSE) and use masks,
clamps, hardswish, GroupNorm and upsampling import, and their loss and every parameter gradient match torch
autograd in float64; the comparison and where ops agree with numpy at ties on every backend."""
from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

import accelsim as A
from accelsim.compare import max_rel_err
from accelsim.errors import FrontendError
from accelsim.kernels import get_kernel

torch = pytest.importorskip("torch")
import torch_coverage_models as cm  # noqa: E402  (needs torch)
from accelsim.frontends.torch_values import module_feeds  # noqa: E402

pytestmark = pytest.mark.torch
TOL = 1e-9


def _labels(n: int, classes: int) -> "torch.Tensor":
    """Every class present, so the graph's labels input (drawn from [0, max + 1)) spans the classes."""
    return torch.arange(n) % classes


def _compare_loss_in_forward(module, inputs: tuple) -> A.Graph:
    """Import `module` (its forward returns the loss), run the training graph and torch on the module's
    parameters and the same inputs; the loss and every parameter's gradient must match."""
    graph = A.frontends.from_torch(module, inputs, loss="output")
    train = A.training_graph(graph)
    names = [n.name for n in graph.inputs]
    feeds = {**module_feeds(module, graph), **{k: t.numpy() for k, t in zip(names, inputs)}}
    out = A.evaluate(train, feeds=feeds)
    module.zero_grad()
    loss = module(*inputs)
    loss.backward()
    assert max_rel_err(out["loss"], loss.detach().numpy()) < TOL
    params = dict(module.named_parameters())
    assert {p.name for p in graph.params if p.trainable} == set(params)
    for name, p in params.items():
        assert max_rel_err(out[f"{name}.grad"], p.grad.numpy()) < 1e-8, f"d loss / d {name}"
    return graph


def test_frontends_is_an_attribute_of_the_package_without_importing_torch_first():
    code = ("import sys, accelsim as A; assert 'torch' not in sys.modules; "
            "assert 'accelsim.frontends' not in sys.modules; f = A.frontends.from_torch; "
            "assert 'torch' not in sys.modules; print(f.__module__)")
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert run.stdout.strip() == "accelsim.frontends"


def test_cross_entropy_inside_forward_imports_as_softmax_cross_entropy_and_trains():
    torch.manual_seed(0)
    net = cm.InvertedResidual().double()
    x = torch.randn(3, 4, 5, 5, dtype=torch.float64)
    graph = _compare_loss_in_forward(net, (x, _labels(3, 3)))
    ops = [n.op for n in graph.nodes]
    assert ops.count("softmax_cross_entropy") == 1 and graph.nodes[graph.loss].op == "softmax_cross_entropy"
    assert ops.count("where") == 4  # two ReLU6 clamps, two wheres each
    assert sum(n.op == "conv2d" and n.attrs["groups"] == 12 for n in graph.nodes) == 1  # the depthwise conv


def test_squeeze_excite_with_hardswish_matches_torch():
    torch.manual_seed(0)
    x = torch.randn(2, 3, 4, 4, dtype=torch.float64) * 3.0  # both clamp bounds of hardswish are reached
    graph = _compare_loss_in_forward(cm.SqueezeExcite().double(), (x, _labels(2, 3)))
    assert {"where", "lt", "gt"} <= {n.op for n in graph.nodes}


def test_causal_attention_with_a_masked_fill_mask_matches_torch():
    """The mask reads no input: the importer evaluates it and the graph holds it as a constant."""
    torch.manual_seed(0)
    x = torch.randn(2, 4, 8, dtype=torch.float64)
    graph = _compare_loss_in_forward(cm.CausalSelfAttention().double(), (x, _labels(2, 3)))
    wheres = [n for n in graph.nodes if n.op == "where"]
    assert len(wheres) == 1
    mask = graph.nodes[wheres[0].inputs[0]]
    assert mask.op == "const" and np.array_equal(graph.leaf_value(mask.id).reshape(4, 4),
                                                 1.0 - np.tril(np.ones((4, 4))))


@pytest.mark.parametrize("mode", ["nearest", "bilinear", "transposed"])
def test_unet_block_with_group_norm_upsampling_and_skip_concat_matches_torch(mode):
    torch.manual_seed(0)
    x = torch.randn(2, 2, 4, 4, dtype=torch.float64)
    target = torch.randn(2, 2, 4, 4, dtype=torch.float64)
    graph = _compare_loss_in_forward(cm.UNetBlock(mode=mode).double(), (x, target))
    ops = [n.op for n in graph.nodes]
    assert ops.count("layer_norm") == 3 and "concat" in ops


@pytest.mark.parametrize("size,factor", [((3, 5), (2.0, 3.0)), ((4, 2), (3.0, 1.0))])
def test_bilinear_upsampling_matches_torch_forward(size, factor):
    class Up(torch.nn.Module):
        def forward(self, x):
            return torch.nn.functional.interpolate(x, scale_factor=factor, mode="bilinear", align_corners=False)

    x = torch.randn(1, 2, *size, dtype=torch.float64)
    graph = A.frontends.from_torch(Up(), (x,), loss="none")
    out = A.evaluate(graph, feeds={"x": x.numpy()})
    assert max_rel_err(out["y"], Up()(x).numpy()) < TOL


def test_transposed_convolution_with_output_padding_and_groups_matches_torch():
    torch.manual_seed(0)

    class Up(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.convt = torch.nn.ConvTranspose2d(4, 6, 3, stride=2, padding=1, output_padding=1, groups=2)

        def forward(self, x, target):
            return torch.nn.functional.mse_loss(self.convt(x), target)

    x = torch.randn(2, 4, 3, 3, dtype=torch.float64)
    graph = _compare_loss_in_forward(Up().double(), (x, torch.randn(2, 6, 6, 6, dtype=torch.float64)))
    assert [n.attrs["output_shape"] for n in graph.nodes if n.op == "conv_transpose2d"] == [(2, 6, 6, 6)]


def test_clamp_relatives_match_torch_forward_at_and_beyond_the_bounds():
    class Clamps(torch.nn.Module):
        def forward(self, x):
            F = torch.nn.functional
            return torch.stack([F.relu6(x), F.hardtanh(x, -1.5, 2.0), F.hardswish(x), F.hardsigmoid(x),
                                x.clamp(min=-0.5), x.clamp(max=0.5)])

    x = torch.tensor([-7.0, -3.0, -1.5, -0.5, 0.0, 0.5, 2.0, 3.0, 6.0, 8.0], dtype=torch.float64)
    graph = A.frontends.from_torch(Clamps(), (x,), loss="none")
    out = A.evaluate(graph, feeds={"x": x.numpy()})
    assert np.array_equal(out["y"], Clamps()(x).numpy())


def test_a_cross_entropy_ignore_index_inside_the_class_range_is_refused_naming_it():
    class Ignoring(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = torch.nn.Linear(4, 3)

        def forward(self, x, y):
            return torch.nn.functional.cross_entropy(self.fc(x), y, ignore_index=1)

    with pytest.raises(FrontendError, match="ignore_index=1 inside the class range"):
        A.frontends.from_torch(Ignoring().double(), (torch.randn(2, 4, dtype=torch.float64), _labels(2, 3)),
                               loss="output")


@pytest.mark.parametrize("backend", ["numba", "cuda"])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_comparisons_and_where_match_numpy_at_ties(backend, dtype):
    a = np.array([[-1.0, 0.0, 0.5], [2.0, 0.5, -1.0]], dtype)
    b = np.array([0.5, 0.0, -1.0], dtype)
    for name in ("eq", "ne", "lt", "le", "gt", "ge"):
        got = get_kernel(name, backend)(a, b)
        assert got.dtype == a.dtype and np.array_equal(got, A.ops.OPS[name].ref(a, b)), name
    cond = A.ops.OPS["eq"].ref(a, b)
    got = get_kernel("where", backend)(cond, a, np.asarray(7.0, dtype))
    assert np.array_equal(got, np.where(cond != 0, a, 7.0))
