"""verify(graph): every zoo graph and every transformation of it passes; hand-broken graphs are caught."""
from dataclasses import replace

import pytest

import accelsim as A
from accelsim.graph import verify
from accelsim.passes import inference_graph, prune_to_outputs
from accelsim.training import OPTIMIZERS


@pytest.fixture(scope="module", params=A.models.names())
def forward(request):
    return verify(A.models.build(request.param, **A.models.sizes.SMALL[request.param]))


@pytest.mark.parametrize("optimizer", OPTIMIZERS)
def test_every_zoo_training_graph_verifies(forward, optimizer):
    train = verify(A.training_graph(forward, optimizer=optimizer))
    assert train.optimizer.optimizer == optimizer and train.source == forward.source


def test_every_zoo_inference_graph_verifies(forward):
    infer = verify(inference_graph(forward))
    assert "loss" not in infer.outputs and infer.source == forward.source


def test_pruning_a_training_graph_to_its_loss_verifies(forward):
    pruned = verify(prune_to_outputs(A.training_graph(forward), ["loss"]))
    assert {n.phase for n in pruned.nodes} == {"forward"}


def test_default_size_gpt2_training_graph_verifies():
    verify(A.training_graph(A.models.build("gpt2"), optimizer="adam"))


def _chain() -> A.Graph:
    """%0 x, %1 w, %2 matmul, %3 relu, %4 sum (the loss)."""
    g = A.Graph("chain")
    x = g.input("x", (2, 3))
    w = g.param("w", (3, 4))
    g.set_loss(A.ops.sum(A.ops.relu(x @ w)))
    return g


def _broken(g: A.Graph, node_id: int, **changes) -> A.Graph:
    bad = g.copy()
    bad.nodes[node_id] = replace(bad.nodes[node_id], **changes)
    return bad


def test_the_hand_built_chain_verifies():
    assert verify(_chain()).loss == 4


@pytest.mark.parametrize("node_id, changes, message", [
    (2, {"shape": (2, 5)}, r"%2 matmul .*shape \(2, 5\) but the op registry infers \(2, 4\)"),
    (3, {"dtype": "float64"}, "%3 relu .*dtype float64 but the op registry infers float32"),
    (2, {"inputs": (0, 3)}, r"%2 matmul .*inputs \[3\] are not earlier nodes"),
    (2, {"inputs": (0, -1)}, r"%2 matmul .*inputs \[-1\] are not earlier nodes"),
    (3, {"phase": "sideways"}, "%3 relu .*phase 'sideways' is not one of"),
    (2, {"phase": "backward"}, "%3 relu .*a forward node reads backward node %2"),
    (1, {"id": 7}, "%1 param 'w': id 7 differs from its position 1"),
    (0, {"inputs": (1,)}, r"%0 input 'x': inputs \[1\] are not earlier"),
    (3, {"op": "softmax"}, "%3 softmax .*op registry refuses"),
    (3, {"op": "no_such_op"}, "unknown op 'no_such_op'"),
    (2, {"attrs": {"transpose_b": True}}, "%2 matmul"),
])
def test_verify_catches_a_hand_broken_node(node_id, changes, message):
    with pytest.raises(A.GraphError, match=message):
        verify(_broken(_chain(), node_id, **changes))


def test_a_leaf_with_inputs_is_caught():
    g = _chain()
    g.nodes.append(replace(g.nodes[0], id=5, inputs=(2,), name="x2"))
    with pytest.raises(A.GraphError, match=r"%5 input 'x2': a leaf reads inputs \[2\]"):
        verify(g)


def test_a_backward_node_reading_an_update_node_is_caught():
    train = A.training_graph(A.models.build("regression"))
    last = train.nodes[-1]  # w.new = w - (dw * lr): an update node reading an update node
    update = next(i for i in last.inputs if train.nodes[i].phase == "update")
    with pytest.raises(A.GraphError, match=f"a backward node reads update node %{update}"):
        verify(_broken(train, last.id, phase="backward"))


def test_outputs_and_loss_past_the_end_are_caught():
    g = _chain()
    g.outputs["y"] = 99
    g.loss = 3  # relu: not a scalar
    with pytest.raises(A.GraphError) as e:
        verify(g)
    assert "output 'y' refers to %99, not a node (ids 0..4)" in str(e.value)
    assert "loss %3 has shape (2, 4), not a scalar" in str(e.value)


def test_duplicate_leaf_names_are_caught():
    g = _chain()
    g.nodes[1] = replace(g.nodes[1], name="x")
    with pytest.raises(A.GraphError, match="%1 param 'x': name already used by %0"):
        verify(g)


def test_every_problem_is_listed_at_once():
    bad = _broken(_broken(_chain(), 2, shape=(9, 9)), 3, phase="later")
    with pytest.raises(A.GraphError, match=r"2 problem\(s\)") as e:
        verify(bad)
    assert "%2 matmul" in str(e.value) and "%3 relu" in str(e.value)


def test_a_graph_whose_nodes_are_not_nodes_is_caught():
    g = _chain()
    g.nodes[2] = "matmul"
    with pytest.raises(A.GraphError, match="position 2: str is not a Node"):
        verify(g)
