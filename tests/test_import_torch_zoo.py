"""Whole zoo models import from PyTorch in training mode with their loss inside `forward` (MobileNetV2,
MobileNetV3-Small, EfficientNet-B0, a U-Net, ViT-B/16's structure, a GPT-2 LM), dropout included as a seeded
keep mask: the loss and every parameter gradient match torch autograd in float64 when torch's dropouts
multiply by the masks accelsim drew."""
from __future__ import annotations

import numpy as np
import pytest

import accelsim as A
from accelsim.compare import max_rel_err

torch = pytest.importorskip("torch")
import torch_zoo_models as zm  # noqa: E402  (needs torch)
from accelsim.frontends.torch_values import module_feeds  # noqa: E402

pytestmark = pytest.mark.torch
TOL = 1e-9
ZERO = 1e-12
"""A gradient below ZERO times the model's largest is zero in exact arithmetic (a bias followed by a
training-mode BatchNorm, which subtracts its batch mean back out): both sides hold rounding noise there."""


def _images(n: int = 2, size: int = 32) -> tuple:
    torch.manual_seed(1)
    return torch.randn(n, 3, size, size, dtype=torch.float64), torch.arange(n) % 10


def _unet_inputs() -> tuple:
    torch.manual_seed(1)
    return torch.randn(2, 3, 16, 16, dtype=torch.float64), torch.randn(2, 2, 16, 16, dtype=torch.float64)


def _tokens() -> tuple:
    g = torch.Generator().manual_seed(1)
    return torch.randint(0, 16, (2, 8), generator=g), torch.randint(0, 16, (2, 8), generator=g)


XENT, MSE = "softmax_cross_entropy", "mean"  # the loss node: F.cross_entropy; F.mse_loss (sub, square, mean)
MODELS = {  # name: (module factory, inputs factory, the loss node's op)
    "mobilenet_v2": (lambda: zm.MobileNetV2(dropout=0.2), _images, XENT),
    "mobilenet_v3_small": (lambda: zm.MobileNetV3(dropout=0.2), _images, XENT),
    "efficientnet_b0": (lambda: zm.EfficientNet(dropout=0.2), _images, XENT),
    "unet": (zm.UNet, _unet_inputs, MSE),
    "vit_b_16": (lambda: zm.VisionTransformer(dropout=0.1), _images, XENT),
    "gpt2": (lambda: zm.GPT(dropout=0.1), _tokens, XENT),
}


def _dropouts(module: "torch.nn.Module") -> dict[str, "torch.nn.Module"]:
    return {name: m for name, m in module.named_modules() if isinstance(m, torch.nn.Dropout) and m.p > 0}


def _masks(graph: A.Graph, module: "torch.nn.Module") -> dict[str, np.ndarray]:
    """Each dropout module's mask, scaled by 1/(1 - p): the one constant of more than one element among its
    layer's nodes (dropout's scaled mask, or the 0/1 mask of bernoulli that an in-place dropout becomes)."""
    masks = {}
    for name, m in _dropouts(module).items():
        consts = [n for n in graph.nodes if n.layer == name and n.op == "const" and n.shape != ()]
        assert len(consts) == 1, f"{name}: {consts}"
        value = graph.leaf_value(consts[0].id)
        masks[name] = value / (1.0 - m.p) if set(np.unique(value)) <= {0.0, 1.0} else value
    return masks


def _with_masks(module: "torch.nn.Module", masks: dict[str, np.ndarray]) -> None:
    """Make each nn.Dropout of `module` multiply by its mask from `masks` instead of drawing one."""
    for name, m in _dropouts(module).items():
        m.forward = (lambda x, mask=torch.from_numpy(masks[name]): x * mask)


def _compare(module: "torch.nn.Module", inputs: tuple) -> A.Graph:
    """Import `module` in training mode; the training graph's loss and every parameter gradient must equal
    torch's on the same parameters, inputs and dropout masks."""
    graph = A.frontends.from_torch(module, inputs, loss="output")
    train = A.training_graph(graph)
    names = [n.name for n in graph.inputs]
    feeds = {**module_feeds(module, graph), **{k: t.numpy() for k, t in zip(names, inputs)}}
    out = A.evaluate(train, feeds=feeds)
    masks = _masks(graph, module)
    assert all(0 < np.count_nonzero(k) < k.size for k in masks.values())  # some kept, some dropped
    _with_masks(module, masks)
    module.zero_grad()
    loss = module(*inputs)
    loss.backward()
    assert max_rel_err(out["loss"], loss.detach().numpy()) < TOL
    params = dict(module.named_parameters())
    assert {q.name for q in graph.params if q.trainable} == set(params)
    scale = max(float(q.grad.abs().max()) for q in params.values())
    for name, q in params.items():
        got, want = out[f"{name}.grad"], q.grad.numpy()
        if np.abs(want).max() < ZERO * scale:  # zero but for rounding: a bias a training-mode BatchNorm subtracts
            assert np.abs(got).max() < ZERO * scale, f"d loss / d {name}: {np.abs(got).max():.3g}, expected ~0"
        else:
            assert max_rel_err(got, want) < 1e-8, f"d loss / d {name}"
    return graph


@pytest.mark.parametrize("name", sorted(MODELS))
def test_zoo_model_in_training_mode_matches_torch_autograd_in_float64(name):
    factory, inputs, loss_op = MODELS[name]
    torch.manual_seed(0)
    module = factory().double().train()
    graph = _compare(module, inputs())
    assert graph.nodes[graph.loss].op == loss_op


def test_gpt2_causal_mask_from_masked_fill_is_a_constant_and_its_loss_is_cross_entropy():
    torch.manual_seed(0)
    graph = A.frontends.from_torch(zm.GPT(dropout=0.0).double(), _tokens(), loss="output")
    assert graph.nodes[graph.loss].op == "softmax_cross_entropy"
    wheres = [n for n in graph.nodes if n.op == "where"]
    assert len(wheres) == 1 and graph.nodes[wheres[0].inputs[0]].op == "eq"  # bias[:, :, :t, :t] == 0


def test_an_imported_zoo_model_with_dropout_compiles_and_checks_on_numba():
    torch.manual_seed(0)
    graph = A.frontends.from_torch(zm.GPT(dropout=0.1).double(), _tokens(), loss="output")
    train = A.training_graph(graph)
    sched = A.compile(train, A.load_hw("groq_like"))
    assert A.check(sched, backend="numba", graph=train, hw="groq_like").passed
