"""The im2col mapping in the unit's own dataflow is today's fixed-dataflow model: same compute cycles as
cost/systolic.py (through cost/model.node_cost) for every conv and matmul of resnet50 and gpt2."""
from __future__ import annotations

import functools

import pytest

import accelsim as A
from accelsim.cost.model import can_run, node_cost
from accelsim.mapping.cost import mapping_cost
from accelsim.mapping.dims import layer_dims
from accelsim.mapping.fixed import im2col_mapping

HW = ("groq_like", "tpu_v1_like", "a100_like")


@functools.cache
def _graph(model: str):
    return A.models.build(model, batch=1)


def _array_unit(hw):
    return next(u for u in hw.chips[0].units if u.array is not None)


@pytest.mark.parametrize("hw_name", HW)
@pytest.mark.parametrize("model", ["resnet50", "gpt2"])
def test_im2col_mapping_gives_todays_compute_cycles_for_every_conv_and_matmul(model, hw_name):
    hw = A.load_hw(hw_name)
    chip, unit = hw.chips[0], _array_unit(hw)
    graph = _graph(model)
    nodes = [n for n in graph.nodes if n.op in ("conv2d", "matmul") and can_run(unit, graph, n)]
    assert len(nodes) >= 50  # resnet50's 53 convs + fc, gpt2's 97 matmuls
    for node in nodes:
        layer = layer_dims(graph, node)
        cost = mapping_cost(hw, chip, unit, layer, im2col_mapping(layer, unit.array.dataflow))
        today = node_cost(hw, graph, node, unit, chip)
        assert cost.compute_cycles == today.compute_cycles, (node.id, layer.describe())
        assert cost.cycles == today.cycles, (node.id, layer.describe())


def test_training_graph_gradient_convs_keep_their_gemm_view():
    """conv2d_grad_input/weight are mapped by their GEMM view (B, M, K, N) and still give today's cycles."""
    hw = A.load_hw("tpu_v1_like")
    chip, unit = hw.chips[0], _array_unit(hw)
    graph = A.training_graph(A.models.build("resnet_block", batch=2), optimizer="sgd", lr=0.01)
    grads = [n for n in graph.nodes if n.op.startswith("conv2d_grad") and can_run(unit, graph, n)]
    assert grads
    for node in grads:
        layer = layer_dims(graph, node)
        assert [d.name for d in layer.dims] == ["B", "M", "K", "N"]
        cost = mapping_cost(hw, chip, unit, layer, im2col_mapping(layer, unit.array.dataflow))
        assert cost.compute_cycles == node_cost(hw, graph, node, unit, chip).compute_cycles
