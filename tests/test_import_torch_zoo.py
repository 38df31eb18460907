"""Whole zoo models import from PyTorch in training mode with their loss inside `forward` (MobileNetV2,
MobileNetV3-Small, EfficientNet-B0, a U-Net, ViT-B/16's structure, a GPT-2 LM), dropout included as a seeded
keep mask: the loss and every parameter gradient match torch autograd in float64 when torch's dropouts
multiply by the masks accelsim drew. Both ways: each model exported by torch.onnx.export (training mode) imports
through from_onnx with the same masks, and matches torch autograd and the torch import."""
from __future__ import annotations

import warnings
from dataclasses import dataclass
from importlib.util import find_spec
from typing import Any

import numpy as np
import pytest

import accelsim as A
from accelsim.compare import max_rel_err

torch = pytest.importorskip("torch")
import torch_zoo_models as zm  # noqa: E402  (needs torch)
from accelsim.frontends.torch_export import from_exported  # noqa: E402
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


@dataclass
class Zoo:
    """One zoo model imported both ways from one torch.export trace, and torch autograd's answer on the masks
    the torch import drew."""

    name: str
    module: "torch.nn.Module"  # its dropouts multiply by the torch import's masks
    inputs: tuple
    graph: A.Graph  # from_torch's forward graph
    out: dict[str, np.ndarray]  # its training graph's loss and gradients on the module's weights
    onnx: Any  # the onnx.ModelProto torch.onnx.export wrote (training mode, unoptimized); None without onnxscript
    loss: np.ndarray  # torch autograd's loss and parameter gradients, float64
    grads: dict[str, np.ndarray]

    @property
    def data(self) -> dict[str, np.ndarray]:
        return {n.name: t.numpy() for n, t in zip(self.graph.inputs, self.inputs)}


@pytest.fixture(scope="module", params=sorted(MODELS))
def zoo(request) -> Zoo:
    """Trace once (torch.export), export that program to ONNX (training mode: dropout and batch statistics as
    the module runs them; optimize=False keeps the parameters' names), import it with from_torch's converter, and
    run torch autograd with the torch import's masks: each test of a model reads these."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # these models are small: torch's idle intra-op threads spin, costing CPU, not time
    try:
        return _zoo(request.param)
    finally:
        torch.set_num_threads(threads)


def _zoo(name: str) -> Zoo:
    factory, make_inputs, _ = MODELS[name]
    torch.manual_seed(0)
    module = factory().double().train()
    inputs = make_inputs()
    ep = torch.export.export(module, inputs)
    proto = None
    if find_spec("onnx") and find_spec("onnxscript"):  # torch.onnx.export's dynamo exporter
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # the exporter warns that torchvision's ops are not registered
            proto = torch.onnx.export(ep, inputs, dynamo=True, optimize=False, verbose=False).model_proto
    graph = from_exported(ep, name=type(module).__name__, loss="output", example_inputs=inputs)
    data = {n.name: t.numpy() for n, t in zip(graph.inputs, inputs)}
    out = A.evaluate(A.training_graph(graph), feeds={**module_feeds(module, graph), **data})
    masks = _masks(graph, module)
    assert all(0 < np.count_nonzero(k) < k.size for k in masks.values())  # some kept, some dropped
    _with_masks(module, masks)
    module.zero_grad()
    loss = module(*inputs)
    loss.backward()
    grads = {k: q.grad.numpy() for k, q in module.named_parameters()}
    return Zoo(name, module, inputs, graph, out, proto, loss.detach().numpy(), grads)


def _check_grads(zoo: Zoo, got: dict[str, np.ndarray], want: dict[str, np.ndarray], tol: float, what: str) -> None:
    """Every parameter gradient in `got` matches `want` within `tol`, except those zero in exact arithmetic (by
    torch's gradients), which must be ~0."""
    scale = max(float(np.abs(g).max()) for g in zoo.grads.values())
    for name, exact in zoo.grads.items():
        grad = got[f"{name}.grad"]
        if np.abs(exact).max() < ZERO * scale:  # zero but for rounding: a bias a training-mode BatchNorm subtracts
            assert np.abs(grad).max() < ZERO * scale, f"{what}: d loss / d {name}: {np.abs(grad).max():.3g}, ~0"
        else:
            assert max_rel_err(grad, want[name]) < tol, f"{what}: d loss / d {name}"


def test_zoo_model_in_training_mode_matches_torch_autograd_in_float64(zoo):
    """The torch import's training graph: loss and every parameter gradient equal torch's on the same
    parameters, inputs and dropout masks."""
    assert zoo.graph.nodes[zoo.graph.loss].op == MODELS[zoo.name][2]
    assert {q.name for q in zoo.graph.params if q.trainable} == set(zoo.grads)
    assert max_rel_err(zoo.out["loss"], zoo.loss) < TOL
    _check_grads(zoo, zoo.out, zoo.grads, 1e-8, "from_torch")


ONNX_TOL = 1e-7
"""The ONNX import against torch and against the torch import, in float64. ONNX holds float attributes in float32
and torch.onnx.export writes the dropout probability as a float32 constant, so the file's model differs from the
module by float32 roundings: BatchNormalization's and LayerNormalization's epsilon (1e-5 -> 1e-5 - 2.5e-14),
Dropout's ratio (1/(1 - float32(0.2)) = 1.25 * (1 + 3.7e-9)) and an in-place dropout's keep probability
(1/float32(0.8) = 1.25 * (1 - 1.5e-8)). Measured worst relative differences: 2.1e-8 (MobileNetV2, a BatchNorm
weight), 1.5e-8 (EfficientNet), 1.8e-9 (GPT-2); with the module's epsilons and probabilities rounded to float32 the
same way, they fall to <= 1e-11."""


def _dropout_keeps(graph: A.Graph) -> list[np.ndarray]:
    """Each dropout's keep pattern (mask != 0), in graph order: the float constants of more than one element that
    hold zeros and one other value (a 0/1 or a 0/(1/(1 - p)) mask)."""
    keeps = []
    for n in graph.nodes:
        if n.op == "const" and n.shape != () and n.dtype == graph.dtype:
            values = np.unique(graph.leaf_value(n.id))
            if len(values) == 2 and values[0] == 0.0 and values[1] >= 1.0:
                keeps.append(graph.leaf_value(n.id) != 0)
    return keeps


def test_zoo_model_exported_to_onnx_imports_and_matches_torch_autograd_and_the_torch_import(zoo):
    """torch.onnx.export of the training-mode module imports through from_onnx (batch statistics, the same seeded
    dropout masks as the torch import: the same keep patterns in the same order); its loss and every parameter
    gradient, on the file's weights, equal torch autograd's and the torch import's within ONNX_TOL."""
    pytest.importorskip("onnxscript")
    from accelsim.frontends.onnx_import import from_onnx, initializer_feeds

    graph = from_onnx(zoo.onnx, loss="output", batch_norm="training")
    assert [n.name for n in graph.inputs] == [n.name for n in zoo.graph.inputs]
    assert {q.name for q in graph.params if q.trainable} == set(zoo.grads)
    assert graph.nodes[graph.loss].op == MODELS[zoo.name][2]
    keeps, torch_keeps = _dropout_keeps(graph), _dropout_keeps(zoo.graph)
    assert len(keeps) == len(torch_keeps) == len(_dropouts(zoo.module))
    assert all(np.array_equal(a, b) for a, b in zip(keeps, torch_keeps))
    out = A.evaluate(A.training_graph(graph), feeds={**initializer_feeds(zoo.onnx, graph), **zoo.data})
    assert max_rel_err(out["loss"], zoo.loss) < ONNX_TOL
    assert max_rel_err(out["loss"], zoo.out["loss"]) < ONNX_TOL
    _check_grads(zoo, out, zoo.grads, ONNX_TOL, "from_onnx against torch")
    _check_grads(zoo, out, {k: zoo.out[f"{k}.grad"] for k in zoo.grads}, ONNX_TOL, "from_onnx against from_torch")


@pytest.mark.parametrize("zoo", ["mobilenet_v3_small"], indirect=True)
def test_both_imports_of_mobilenet_v3_are_off_by_the_same_float32_rounding(zoo):
    """Evaluated in float32, both imports' first-conv weight gradient is within 1e-6 of torch's float64 one
    (measured 6.4e-7 through from_torch, 6.9e-7 through from_onnx, 5.4e-7 between them; a 3.2e-2 gap reported
    for the torch import earlier does not reproduce with either dropout keying or in eval mode, nor for seeds
    1-5). The gradients float32 computes worst are BatchNorm weights, whose gradient sum(g * x_hat) over a
    channel cancels to a small value: features.2.block.0.1.weight is 2.4e-3 off through from_torch and 2.3e-3
    through from_onnx, the same loss of float32 digits on either side, not a difference between the imports."""
    pytest.importorskip("onnxscript")
    from accelsim.frontends.onnx_import import from_onnx, initializer_feeds

    graph = from_onnx(zoo.onnx, loss="output", batch_norm="training")
    onnx_feeds = {**initializer_feeds(zoo.onnx, graph), **zoo.data}
    by_onnx = A.evaluate(A.training_graph(graph), feeds=onnx_feeds, dtype="float32")
    by_torch = A.evaluate(A.training_graph(zoo.graph), feeds={**module_feeds(zoo.module, zoo.graph), **zoo.data},
                          dtype="float32")
    first = "features.0.0.weight"
    exact = zoo.grads[first]
    assert max_rel_err(by_torch[f"{first}.grad"], exact) < 1e-6
    assert max_rel_err(by_onnx[f"{first}.grad"], exact) < 1e-6
    scale = max(float(np.abs(g).max()) for g in zoo.grads.values())
    for name, want in zoo.grads.items():
        if np.abs(want).max() > 1e-6 * scale:
            errors = [max_rel_err(out[f"{name}.grad"], want) for out in (by_torch, by_onnx)]
            assert max(errors) < 1e-2, f"d loss / d {name}: float32 errors {errors}"


def test_gpt2_causal_mask_from_masked_fill_is_a_constant_and_its_loss_is_cross_entropy():
    torch.manual_seed(0)
    graph = A.frontends.from_torch(zm.GPT(dropout=0.0).double(), _tokens(), loss="output")
    assert graph.nodes[graph.loss].op == "softmax_cross_entropy"
    wheres = [n for n in graph.nodes if n.op == "where"]
    assert len(wheres) == 1 and graph.nodes[wheres[0].inputs[0]].op == "eq"  # bias[:, :, :t, :t] == 0


@pytest.mark.parametrize("zoo", ["gpt2"], indirect=True)
def test_an_imported_zoo_model_with_dropout_compiles_and_checks_on_numba(zoo):
    """The GPT-2 LM with dropout 0.1 as the fixture imported it (from_torch's own steps: torch.export.export, then
    from_exported), so it is traced once."""
    train = A.training_graph(zoo.graph)
    sched = A.compile(train, A.load_hw("groq_like"))
    assert A.check(sched, backend="numba", graph=train, hw="groq_like").passed
