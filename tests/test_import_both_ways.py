"""Both importers accept the same models: each PyTorch test model (tests/torch_models.py,
tests/torch_coverage_models.py) imported with from_torch and, exported by torch.onnx.export, with from_onnx;
the two training graphs' losses and every parameter's gradient agree (float32, the module's weights)."""
from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("onnx")
pytest.importorskip("onnxscript")  # torch.onnx.export's dynamo exporter

import accelsim as A  # noqa: E402
import torch_coverage_models as cm  # noqa: E402
import torch_models as tm  # noqa: E402
from accelsim.compare import max_rel_err  # noqa: E402
from accelsim.frontends.onnx_import import from_onnx, initializer_feeds  # noqa: E402
from accelsim.frontends.torch_values import module_feeds  # noqa: E402

pytestmark = pytest.mark.torch


def _labels(n: int, classes: int) -> "torch.Tensor":
    return torch.arange(n) % classes


MODELS = {  # name: (module factory, example inputs factory, loss head: "output" where forward returns the loss)
    "inverted_residual": (cm.InvertedResidual, lambda: (torch.randn(3, 4, 5, 5), _labels(3, 3)), "output"),
    "squeeze_excite": (cm.SqueezeExcite, lambda: (torch.randn(2, 3, 6, 6), _labels(2, 3)), "output"),
    "mlp": (lambda: tm.MLP((48, 16, 5)), lambda: (torch.randn(2, 3, 4, 4),), "mse"),
    "superres_net": (lambda: tm.Net(2), lambda: (torch.randn(1, 1, 8, 8),), "mse"),
    "causal_attention": (cm.CausalSelfAttention, lambda: (torch.randn(2, 5, 8), _labels(2, 3)), "output"),
    "encoder": (lambda: tm.Encoder(vocab=20, seq=6, d_model=16, heads=2, layers=1),
                lambda: (torch.arange(12).reshape(2, 6) % 20,), "mse"),
    "resnet18": (lambda: tm.resnet18(num_classes=10), lambda: (torch.randn(1, 3, 32, 32),), "mse"),
    "mean": (tm.Mean, lambda: (torch.randn(3, 4),), "output"),
    **{f"unet_{mode}": (lambda mode=mode: cm.UNetBlock(mode=mode),
                        lambda: (torch.randn(2, 2, 8, 8), torch.randn(2, 2, 8, 8)), "output")
       for mode in ("nearest", "bilinear", "transposed")},
}


def _train_values(graph: A.Graph, feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    train = A.training_graph(graph)
    return A.evaluate(train, feeds=feeds)


@pytest.mark.parametrize("name", sorted(MODELS))
def test_torch_and_onnx_imports_agree_on_loss_and_gradients(name, tmp_path):
    factory, make_inputs, loss = MODELS[name]
    torch.manual_seed(0)
    module = factory().eval()
    inputs = make_inputs()
    from_torch_graph = A.frontends.from_torch(module, inputs, loss=loss)
    path = tmp_path / f"{name}.onnx"
    # optimize=False: the exporter's optimizer folds eval-mode batch norm into convolutions and transposed weights
    # into new initializers, so parameters the torch import trains would be gone or renamed
    torch.onnx.export(module, inputs, str(path), dynamo=True, optimize=False)
    from_onnx_graph = from_onnx(path, loss=loss)

    data = {n.name: t.numpy() for n, t in zip(from_torch_graph.inputs, inputs)}
    if loss == "mse":
        out_shape = from_torch_graph.by_name("target").shape
        data["target"] = np.random.default_rng(1).normal(size=out_shape).astype(np.float32)
    assert {n.name for n in from_onnx_graph.inputs} == set(data)
    got_torch = _train_values(from_torch_graph, {**module_feeds(module, from_torch_graph), **data})
    got_onnx = _train_values(from_onnx_graph, {**initializer_feeds(path, from_onnx_graph), **data})

    assert max_rel_err(got_onnx["loss"], got_torch["loss"]) < 1e-5
    trainable = {p.name for p in from_torch_graph.params if p.trainable}
    assert trainable == {p.name for p in from_onnx_graph.params if p.trainable}
    assert trainable or name == "mean"
    for p in sorted(trainable):
        assert max_rel_err(got_onnx[f"{p}.grad"], got_torch[f"{p}.grad"]) < 1e-4, f"d loss / d {p}"
