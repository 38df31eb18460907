"""Dropout in training mode imports as x times a seeded keep mask / (1 - p): the mask is drawn from (graph seed,
node) so every import, evaluate and backend sees the same one; eval mode and p = 0 are the identity; p = 1, NaN
and p outside [0, 1] are refused by name."""
from __future__ import annotations

import numpy as np
import pytest

import accelsim as A
from accelsim.compare import max_rel_err
from accelsim.errors import FrontendError, GraphError
from accelsim.schedule.plan import graph_hash
from accelsim.ops.dropout_mask import dropout_mask, keep_mask

torch = pytest.importorskip("torch")
from accelsim.frontends.torch_values import module_feeds  # noqa: E402

pytestmark = pytest.mark.torch


class Dropped(torch.nn.Module):
    """A linear layer then dropout (p, training) then a sum: the loss reads the mask directly."""

    def __init__(self, p: float, training: bool = True) -> None:
        super().__init__()
        self.p, self.dropout_training = p, training
        self.fc = torch.nn.Linear(6, 50)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.nn.functional.dropout(self.fc(x), self.p, self.dropout_training).sum()


def _import(p: float, training: bool = True) -> tuple[A.Graph, "torch.nn.Module", "torch.Tensor"]:
    torch.manual_seed(0)
    module = Dropped(p, training).double()
    x = torch.randn(4, 6, dtype=torch.float64)
    return A.frontends.from_torch(module, (x,), loss="output"), module, x


def _mask(graph: A.Graph) -> np.ndarray:
    consts = [graph.leaf_value(n.id) for n in graph.nodes if n.op == "const" and n.shape != ()]
    assert len(consts) == 1
    return consts[0]


def test_the_same_seed_and_node_draw_the_same_mask_and_another_seed_another():
    a = dropout_mask(0, 7, (64, 64), 0.25, "float64")
    assert np.array_equal(a, dropout_mask(0, 7, (64, 64), 0.25, "float64"))
    assert not np.array_equal(a, dropout_mask(1, 7, (64, 64), 0.25, "float64"))
    assert not np.array_equal(a, dropout_mask(0, 8, (64, 64), 0.25, "float64"))
    assert set(np.unique(a)) == {0.0, 1 / 0.75} and 0.2 < np.mean(a == 0) < 0.3
    assert np.array_equal(a, keep_mask(0, 7, (64, 64), 0.75, "float64") / 0.75)


def test_two_imports_of_a_training_mode_dropout_hold_the_same_mask():
    first, second = _import(0.5)[0], _import(0.5)[0]
    assert graph_hash(first) == graph_hash(second)
    mask = _mask(first)
    assert mask.shape == (4, 50) and set(np.unique(mask)) == {0.0, 2.0}


def test_the_gradient_flows_through_the_mask_as_torch_with_that_mask_computes():
    graph, module, x = _import(0.5)
    mask = _mask(graph)
    out = A.evaluate(A.training_graph(graph), feeds={**module_feeds(module, graph), "x": x.numpy()})
    loss = (module.fc(x) * torch.from_numpy(mask)).sum()
    loss.backward()
    assert max_rel_err(out["loss"], loss.detach().numpy()) < 1e-12
    assert max_rel_err(out["fc.bias.grad"], module.fc.bias.grad.numpy()) < 1e-12
    dropped = (mask == 0).all(axis=0)  # features dropped in every row: no gradient reaches their bias
    assert dropped.any() and np.all(out["fc.bias.grad"][dropped] == 0) and np.all(out["fc.bias.grad"][~dropped] != 0)


@pytest.mark.parametrize("p,training", [(0.0, True), (0.5, False)])
def test_p_zero_and_eval_mode_are_the_identity(p, training):
    graph, module, x = _import(p, training)
    assert not [n for n in graph.nodes if n.op == "const" and n.shape != ()]
    out = A.evaluate(graph, feeds={**module_feeds(module, graph), "x": x.numpy()})
    assert max_rel_err(out["loss"], module.fc(x).sum().detach().numpy()) < 1e-12


@pytest.mark.parametrize("p,message", [
    (1.0, r"aten.native_dropout.default \(dropout p=1 in training mode zeroes its input.*expected p < 1\)"),
    (float("nan"), r"aten.native_dropout.default \(dropout p=nan: expected a probability in \[0, 1\)\)"),
])
def test_p_one_and_nan_in_training_mode_are_refused_naming_the_op(p, message):
    with pytest.raises(FrontendError, match=message):
        _import(p)


@pytest.mark.parametrize("p", [-0.1, 1.5, float("nan"), 1.0])
def test_a_mask_outside_the_probability_range_is_refused_with_the_value(p):
    with pytest.raises(GraphError, match=r"dropout mask %3: dropout p=.*expected"):
        dropout_mask(0, 3, (2,), p, "float64")


def test_torch_refuses_p_outside_zero_one_before_the_importer_sees_it():
    with pytest.raises(FrontendError, match=r"could not trace.*dropout probability has to be between 0 and 1"):
        _import(1.5)


class Attention(torch.nn.Module):
    """Causal scaled_dot_product_attention with attention dropout (nanoGPT's flash path), summed."""

    def __init__(self, p: float) -> None:
        super().__init__()
        self.p = p
        self.qkv = torch.nn.Linear(8, 24)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        q, k, v = (z.view(2, 5, 2, 4).transpose(1, 2) for z in self.qkv(x).split(8, dim=2))
        return torch.nn.functional.scaled_dot_product_attention(q, k, v, dropout_p=self.p, is_causal=True).sum()


def test_attention_dropout_multiplies_the_probabilities_by_a_seeded_mask_as_torch_math_does():
    torch.manual_seed(0)
    module, x = Attention(0.3).double(), torch.randn(2, 5, 8, dtype=torch.float64)
    graph = A.frontends.from_torch(module, (x,), loss="output")
    mask = _mask(graph)
    assert mask.shape == (2, 2, 5, 5) and set(np.unique(mask)) == {0.0, 1 / 0.7}
    out = A.evaluate(A.training_graph(graph), feeds={**module_feeds(module, graph), "x": x.numpy()})
    q, k, v = (z.view(2, 5, 2, 4).transpose(1, 2) for z in module.qkv(x).split(8, dim=2))
    scores = (q @ k.transpose(-2, -1) / 2.0).masked_fill(torch.triu(torch.ones(5, 5), 1) == 1, float("-inf"))
    loss = ((torch.softmax(scores, -1) * torch.from_numpy(mask)) @ v).sum()
    loss.backward()
    assert max_rel_err(out["loss"], loss.detach().numpy()) < 1e-12
    assert max_rel_err(out["qkv.weight.grad"], module.qkv.weight.grad.numpy()) < 1e-10


def test_attention_dropout_of_nan_is_refused_naming_the_op():
    with pytest.raises(FrontendError, match=r"aten.scaled_dot_product_attention.default \(attention dropout p=nan"):
        A.frontends.from_torch(Attention(float("nan")).double(), (torch.randn(2, 5, 8, dtype=torch.float64),),
                               loss="output")


def test_a_mask_too_large_for_a_graph_constant_is_refused_before_it_is_drawn():
    with pytest.raises(GraphError, match=r"keep mask %5 of shape \(4096, 8192\): 33554432 elements, more than"):
        dropout_mask(0, 5, (4096, 8192), 0.1, "float32")
