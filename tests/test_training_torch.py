"""One full training step (loss, gradients, updated parameters) against the same step in PyTorch.

mlp and superres are written out as ordinary torch modules (the seed's `Net`), with torch.optim doing
the update; transformer_block goes through the graph-to-torch translator with torch.optim.Adam.
"""
import numpy as np
import pytest

import accelsim as A
from accelsim.compare import NEGLIGIBLE, max_abs_err, max_rel_err, scale

torch = pytest.importorskip("torch")
nn = torch.nn
pytestmark = pytest.mark.torch

TOL = 1e-6


def _t(graph, name):
    return torch.tensor(graph.leaf_value(graph.by_name(name).id))


def _assign(module_param, graph, name):
    with torch.no_grad():
        module_param.copy_(_t(graph, name))


def _compare_step(train, out, loss, named_params, optimizer):
    """named_params: accelsim name -> torch Parameter (already holding the graph's initial values)."""
    optimizer.zero_grad()
    loss.backward()
    assert max_rel_err(out["loss"], loss.detach().numpy()) < TOL
    grads = {k: p.grad.detach().numpy().copy() for k, p in named_params.items()}
    optimizer.step()
    for k, p in named_params.items():
        assert max_rel_err(out[f"{k}.grad"], grads[k]) < TOL, f"d loss / d {k}"
        assert max_rel_err(out[f"{k}.new"], p.detach().numpy()) < TOL, f"{k} after the update"


def test_mlp_sgd_step_matches_torch():
    fwd = A.models.build("mlp", batch=16, dtype="float64")
    train = A.training_graph(fwd, optimizer="sgd", lr=0.1)
    out = A.evaluate(train)
    fc1, fc2 = nn.Linear(784, 100, dtype=torch.float64), nn.Linear(100, 10, dtype=torch.float64)
    for lin, name in ((fc1, "fc1"), (fc2, "fc2")):
        with torch.no_grad():  # accelsim stores W as (in, out) for x @ W; torch as (out, in)
            lin.weight.copy_(_t(fwd, f"{name}.w").T)
        _assign(lin.bias, fwd, f"{name}.b")
    x, labels = _t(fwd, "x"), _t(fwd, "labels")
    loss = nn.functional.cross_entropy(fc2(torch.relu(fc1(x))), labels)
    params = {"fc1.b": fc1.bias, "fc2.b": fc2.bias}
    opt = torch.optim.SGD([fc1.weight, fc1.bias, fc2.weight, fc2.bias], lr=0.1)
    opt.zero_grad()
    loss.backward()
    assert max_rel_err(out["loss"], loss.detach().numpy()) < TOL
    for name, lin in (("fc1", fc1), ("fc2", fc2)):
        assert max_rel_err(out[f"{name}.w.grad"], lin.weight.grad.numpy().T) < TOL
    grads_b = {k: p.grad.numpy().copy() for k, p in params.items()}
    opt.step()
    for name, lin in (("fc1", fc1), ("fc2", fc2)):
        assert max_rel_err(out[f"{name}.w.new"], lin.weight.detach().numpy().T) < TOL
    for k, p in params.items():
        assert max_rel_err(out[f"{k}.grad"], grads_b[k]) < TOL
        assert max_rel_err(out[f"{k}.new"], p.detach().numpy()) < TOL


class SuperRes(nn.Module):
    """Seed 001's Net, verbatim in structure."""

    def __init__(self, upscale):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 64, (5, 5), (1, 1), (2, 2), dtype=torch.float64)
        self.conv2 = nn.Conv2d(64, 64, (3, 3), (1, 1), (1, 1), dtype=torch.float64)
        self.conv3 = nn.Conv2d(64, 32, (3, 3), (1, 1), (1, 1), dtype=torch.float64)
        self.conv4 = nn.Conv2d(32, upscale**2, (3, 3), (1, 1), (1, 1), dtype=torch.float64)
        self.pixel_shuffle = nn.PixelShuffle(upscale)

    def forward(self, x):
        x = torch.relu(self.conv1(x))
        x = torch.relu(self.conv2(x))
        x = torch.relu(self.conv3(x))
        return self.pixel_shuffle(self.conv4(x))


def test_superres_momentum_step_matches_torch():
    fwd = A.models.build("superres", batch=2, size=12, dtype="float64")
    train = A.training_graph(fwd, optimizer="momentum", lr=0.05, momentum=0.9)
    out = A.evaluate(train)
    net = SuperRes(3)
    named = {}
    for layer in ("conv1", "conv2", "conv3", "conv4"):
        conv = getattr(net, layer)
        _assign(conv.weight, fwd, f"{layer}.w")
        _assign(conv.bias, fwd, f"{layer}.b")
        named[f"{layer}.w"], named[f"{layer}.b"] = conv.weight, conv.bias
    loss = nn.functional.mse_loss(net(_t(fwd, "x")), _t(fwd, "target"))
    _compare_step(train, out, loss, named, torch.optim.SGD(net.parameters(), lr=0.05, momentum=0.9))


def test_transformer_block_adam_step_matches_torch():
    from accelsim.torch_oracle import torch_gradients

    fwd = A.models.build("transformer_block", batch=2, seq=6, d_model=16, heads=4, dtype="float64")
    train = A.training_graph(fwd, optimizer="adam", lr=1e-2)
    out = A.evaluate(train)
    names = [p.name for p in fwd.params if p.trainable]
    feeds = {n.name: fwd.leaf_value(n.id) for n in fwd.nodes if n.op in ("input", "param")}
    t_out, t_grads = torch_gradients(fwd, feeds, names)
    assert max_rel_err(out["loss"], t_out["loss"]) < TOL
    params = {k: torch.nn.Parameter(torch.tensor(feeds[k])) for k in names}
    for k, p in params.items():
        p.grad = torch.tensor(t_grads[k])
    torch.optim.Adam(params.values(), lr=1e-2, betas=(0.9, 0.999), eps=1e-8).step()
    largest = scale(*t_grads.values())
    for k in names:
        assert max_rel_err(out[f"{k}.grad"], t_grads[k], NEGLIGIBLE * largest) < TOL, k
        if max_abs_err(t_grads[k], np.zeros_like(t_grads[k])) < 1e-9 * largest:
            # The key bias: softmax ignores it, so its gradient is rounding noise that Adam
            # normalizes to +-lr in either direction. Both steps must stay within lr.
            assert max_abs_err(out[f"{k}.new"], feeds[k]) <= 1e-2 * (1 + 1e-6), k
            continue
        assert max_rel_err(out[f"{k}.new"], params[k].detach().numpy()) < TOL, k
