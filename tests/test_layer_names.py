"""Layer names flow from where a model is built to every node of its training step: the zoo's readable names,
PyTorch module paths, ONNX node names; a gradient or update node carries its layer's name."""
import numpy as np
import pytest

import accelsim as A
from accelsim.errors import GraphError
from accelsim.graph.ir import Graph
from accelsim.layer_names import layer_names
from accelsim.schedule.plan import graph_hash


def _consumer(graph: Graph, param: str, op: str) -> int:
    """The id of the `op` node that reads parameter `param`."""
    pid = graph.by_name(param).id
    return next(n.id for n in graph.nodes if n.op == op and pid in n.inputs)


def _update_of(graph: Graph, param: str) -> int:
    """The id of the node that computes parameter `param`'s new value (training_graph's output)."""
    return graph.outputs[f"{param}.new"]


def test_resnet50_nodes_gradients_and_updates_carry_their_layer_names():
    train = A.training_graph(A.models.build("resnet50", width=4, size=32))
    names = layer_names(train)
    conv = _consumer(train, "layer3.1.conv2.w", "conv2d")
    assert names[conv] == "layer3.1.conv2"
    grad_w = _consumer(train, "layer3.1.conv2.w", "conv2d_grad_input")  # the backward reads the forward weight
    assert train.nodes[grad_w].phase == "backward" and names[grad_w] == "layer3.1.conv2"
    update = _update_of(train, "layer3.1.conv2.w")
    assert train.nodes[update].phase == "update" and names[update] == "layer3.1.conv2"
    assert names[_consumer(train, "layer2.0.bn1.gamma", "batch_norm")] == "layer2.0.bn1"
    assert names[_consumer(train, "fc.w", "matmul")] == "fc"
    assert {"stem", "avgpool", "loss", "layer4.2"} <= set(names)


def test_every_backward_node_of_the_zoo_is_in_a_forward_layer():
    train = A.training_graph(A.models.build("mlp", batch=2, sizes=(16, 8, 4)), optimizer="adam")
    names = layer_names(train)
    forward = {names[n.id] for n in train.nodes if n.phase == "forward" and not n.is_leaf}
    later = {names[n.id] for n in train.nodes if n.phase != "forward" and not n.is_leaf}
    assert forward == {"fc1", "fc2", "loss"}
    assert later <= forward and {"fc1", "fc2"} <= later


def test_gpt2_names_attention_projections_mlp_and_the_tied_lm_head():
    g = A.models.build("gpt2", layers=2, d_model=32, heads=2, seq=8, vocab=64)
    names = layer_names(g)
    assert names[g.outputs["logits"]] == "lm_head"
    assert names[_consumer(g, "h1.attn.q.w", "matmul")] == "h1.attn.q"
    assert names[_consumer(g, "h0.fc.w", "matmul")] == "h0.fc"
    assert {"h0.attn", "h1.attn.proj", "h1.mlp_proj", "ln_f", "wte", "wpe", "loss"} <= set(names)


def test_tensor_parallel_shards_keep_their_layer_names():
    g = A.models.build("gpt2", layers=1, d_model=32, heads=2, seq=8, vocab=64, tensor_parallel=2)
    names = layer_names(g)
    for k in range(2):
        assert names[_consumer(g, f"h0.attn.q.w[{k}/2]", "matmul")] == "h0.attn.q"


def test_tensor_parallel_gpt2_names_its_split_embedding_lm_head_and_loss_as_the_unsplit_model_does():
    """The vocabulary-parallel embedding, LM head and cross-entropy (models/parallel_layers.py) were built outside
    any layer: the per-layer report showed the LM head's matmuls under ln_f and the loss under a node name."""
    def computed_names(tp: int) -> set[str]:
        train = A.training_graph(A.models.build("gpt2", layers=1, d_model=32, heads=2, seq=8, vocab=64,
                                                tensor_parallel=tp))
        names = layer_names(train)
        return {names[n.id] for n in train.nodes if not n.is_leaf and n.op != "const"}
    split = computed_names(2)
    assert split == computed_names(1)
    g = A.models.build("gpt2", layers=1, d_model=32, heads=2, seq=8, vocab=64, tensor_parallel=2)
    names = layer_names(g)
    assert [names[g.outputs[f"logits[{k}/2]"]] for k in range(2)] == ["lm_head", "lm_head"]
    assert names[g.loss] == "loss"
    assert names[_consumer(g, "wte[1/2]", "matmul")] == "lm_head"


def test_layer_names_do_not_change_the_graph_hash():
    """Schedules compiled before layers were named still match their graphs."""
    def build(named: bool) -> Graph:
        g = Graph("h")
        x = g.input("x", (2, 3))
        w = g.param("w", (3, 3))
        if named:
            with g.layer("proj"):
                y = A.ops.matmul(x, w)
        else:
            y = A.ops.matmul(x, w)
        g.set_loss(A.ops.sum(y))
        return g

    assert graph_hash(build(True)) == graph_hash(build(False))
    assert layer_names(build(True))[2] == "proj" and layer_names(build(False))[2] == "matmul2"


def test_a_node_built_outside_any_layer_takes_its_first_inputs_layer():
    g = Graph("h")
    x = g.input("x", (2, 3))
    with g.layer("fc"):
        y = A.ops.matmul(x, g.param("fc.w", (3, 3)))
    z = A.ops.relu(y)  # a rewrite pass's node, or a builder's that names none
    names = layer_names(g)
    assert names[z.id] == "fc" and names[x.id] == "x"


def test_a_layer_name_that_is_not_a_string_is_refused_by_name():
    g = Graph("h")
    with pytest.raises(GraphError, match=r"graph 'h': a layer name must be a string, got 3"):
        with g.layer(3):
            pass


def test_torch_module_paths_name_the_imported_nodes_and_their_training_nodes():
    torch = pytest.importorskip("torch")
    from tests.torch_models import resnet18
    from accelsim.frontends import from_torch

    torch.manual_seed(0)
    g = from_torch(resnet18(num_classes=10), (torch.randn(2, 3, 32, 32),), loss="cross_entropy")
    train = A.training_graph(g)
    names = layer_names(train)
    assert names[_consumer(train, "layer1.0.conv1.weight", "conv2d")] == "layer1.0.conv1"
    assert names[_update_of(train, "layer1.0.conv1.weight")] == "layer1.0.conv1"
    assert names[_update_of(train, "layer2.0.downsample.0.weight")] == "layer2.0.downsample.0"
    assert {"layer1.0.relu", "layer1.0", "fc", "maxpool", "loss"} <= set(names)


def test_onnx_node_names_name_the_imported_nodes():
    onnx = pytest.importorskip("onnx")
    from onnx import TensorProto, helper, numpy_helper
    from accelsim.frontends.onnx_import import from_onnx

    w1 = np.ones((6, 5), np.float32)
    w2 = np.ones((5, 3), np.float32)
    nodes = [helper.make_node("MatMul", ["x", "w1"], ["h"], name="/encoder/fc1/MatMul"),
             helper.make_node("Relu", ["h"], ["r"], name="/encoder/act/Relu"),
             helper.make_node("MatMul", ["r", "w2"], ["y"], name="/head/MatMul")]
    graph = helper.make_graph(nodes, "named", [helper.make_tensor_value_info("x", TensorProto.FLOAT, (4, 6))],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, (4, 3))],
                              [numpy_helper.from_array(w1, "w1"), numpy_helper.from_array(w2, "w2")])
    model = onnx.shape_inference.infer_shapes(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]))
    g = from_onnx(model, loss="mse")
    train = A.training_graph(g)
    names = layer_names(train)
    assert names[_consumer(train, "w1", "matmul")] == "/encoder/fc1/MatMul"
    assert names[_update_of(train, "w2")] == "/head/MatMul"
    assert "/encoder/act/Relu" in names and "loss" in names


def test_a_rewrite_passs_fused_nodes_keep_the_layer_they_stand_for():
    train = A.training_graph(A.models.build("gpt2", layers=1, d_model=32, heads=2, seq=8, vocab=64))
    fused = A.optimize(train, ["fuse_elementwise"])
    names = layer_names(fused)
    made = [n for n in fused.nodes if n.op == "fused_elementwise"]
    assert made and all(n.layer for n in made)
    assert {names[n.id] for n in made} <= set(layer_names(train))
    # the projections' bias adds fused with the residual adds of block h0 are the block's
    assert {names[n.id] for n in made if n.phase == "forward"} == {"h0"}
