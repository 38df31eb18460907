"""ONNX Dropout in training mode imports as the torch importer's seeded keep mask (drawn from the graph seed and
the draw's ordinal), a read mask output as that keep mask, ratio 0 as the identity; NaN, negative and >= 1 ratios
are refused naming the node and the value. An exported in-place dropout (Less of a RandomUniformLike) draws the
same mask. int64 class labels reshaped on their way to the loss import, and a fed label outside [0, classes) is
refused naming the input, the value and the range."""
from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

import accelsim as A  # noqa: E402
from accelsim.errors import FrontendError, GraphError  # noqa: E402
from accelsim.frontends.onnx_import import from_onnx  # noqa: E402
from accelsim.ops.dropout_mask import dropout_mask, keep_mask  # noqa: E402

X = np.random.default_rng(3).normal(size=(4, 50))


def _model(nodes, outputs, inits=(), inputs=(("x", TensorProto.DOUBLE, (4, 50)),)):
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info(n, t, s) for n, t, s in inputs],
                              [helper.make_tensor_value_info(n, t, s) for n, t, s in outputs],
                              [numpy_helper.from_array(v, k) for k, v in dict(inits).items()])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


def _dropout(ratio, training=True, mask=False, name="drop", x="x", y="y"):
    """Dropout with Constant ratio and training_mode inputs (an initializer may not hold a NaN)."""
    consts = [helper.make_node("Constant", [], [f"{name}_{k}"], value=numpy_helper.from_array(np.array(v)))
              for k, v in (("ratio", np.float64(ratio)), ("train", np.bool_(training)))]
    node = helper.make_node("Dropout", [x, f"{name}_ratio", f"{name}_train"], [y] + ([f"{name}_mask"] if mask else []),
                            name=name)
    return consts + [node]


def _consts(graph):
    return [graph.leaf_value(n.id) for n in graph.nodes if n.op == "const" and n.shape != ()]


def test_training_mode_dropout_multiplies_by_the_seeded_mask_and_its_mask_output_is_the_keep_mask():
    cast = helper.make_node("Cast", ["drop_mask"], ["m"], to=TensorProto.DOUBLE)
    graph = from_onnx(_model(_dropout(0.25, mask=True) + [cast], [("y", TensorProto.DOUBLE, (4, 50)),
                                                                  ("m", TensorProto.DOUBLE, (4, 50))]), loss="none")
    want = dropout_mask(graph.seed, 0, (4, 50), 0.25, "float64", key=0)  # the first draw: the torch importer's too
    out = A.evaluate(graph, feeds={"x": X})
    assert np.array_equal(out["y"], X * want)
    assert np.array_equal(out["m"], (want != 0).astype(np.float64))
    assert 0.15 < np.mean(want == 0) < 0.35 and set(np.unique(want)) == {0.0, 1 / 0.75}


def test_two_dropouts_draw_different_masks_in_order():
    nodes = _dropout(0.5, name="d1", y="h") + _dropout(0.5, name="d2", x="h")
    graph = from_onnx(_model(nodes, [("y", TensorProto.DOUBLE, (4, 50))]), loss="none")
    masks = _consts(graph)
    assert len(masks) == 2 and not np.array_equal(*masks)
    for key, mask in enumerate(masks):
        assert np.array_equal(mask, dropout_mask(graph.seed, 0, (4, 50), 0.5, "float64", key=key))


@pytest.mark.parametrize("ratio,training", [(0.0, True), (0.5, False), (float("nan"), False)])
def test_ratio_zero_and_inference_mode_are_the_identity(ratio, training):
    cast = helper.make_node("Cast", ["drop_mask"], ["m"], to=TensorProto.DOUBLE)
    graph = from_onnx(_model(_dropout(ratio, training, mask=True) + [cast],
                             [("y", TensorProto.DOUBLE, (4, 50)), ("m", TensorProto.DOUBLE, (4, 50))]), loss="none")
    assert not [n for n in graph.nodes if n.layer == "drop"]  # the read mask of ones is the output's constant
    out = A.evaluate(graph, feeds={"x": X})
    assert np.array_equal(out["y"], X) and np.all(out["m"] == 1.0)


@pytest.mark.parametrize("ratio,expected", [(float("nan"), "ratio=nan: expected a probability in [0, 1)"),
                                            (-0.1, "ratio=-0.1: expected a probability in [0, 1)"),
                                            (1.5, "ratio=1.5: expected a probability in [0, 1)"),
                                            (1.0, "ratio=1 in training mode zeroes its input")])
def test_a_training_ratio_outside_zero_one_is_refused_naming_the_node_and_value(ratio, expected):
    with pytest.raises(FrontendError) as e:
        from_onnx(_model(_dropout(ratio), [("y", TensorProto.DOUBLE, (4, 50))]), loss="none")
    assert "Dropout node 'drop'" in str(e.value) and expected in str(e.value)


def test_an_exported_inplace_dropout_draws_the_same_keep_mask_from_random_uniform_like():
    """torch.onnx.export writes bernoulli(x, keep) (an in-place dropout) as Cast(Less(RandomUniformLike(x), keep))."""
    nodes = [helper.make_node("Constant", [], ["keep"], value=numpy_helper.from_array(np.array(0.75))),
             helper.make_node("RandomUniformLike", ["x"], ["u"], dtype=TensorProto.DOUBLE, name="rand"),
             helper.make_node("Less", ["u", "keep"], ["b"]),
             helper.make_node("Cast", ["b"], ["k"], to=TensorProto.DOUBLE),
             helper.make_node("Mul", ["x", "k"], ["y"])]
    graph = from_onnx(_model(nodes, [("y", TensorProto.DOUBLE, (4, 50))]), loss="none")
    (mask,) = _consts(graph)
    assert np.array_equal(mask, keep_mask(graph.seed, 0, (4, 50), 0.75, "float64", key=0))


def _labels_model():
    """scores (6, 5) against int64 targets (2, 3) flattened by a Reshape, as GPT-2's `targets.view(-1)` exports."""
    nodes = [helper.make_node("Reshape", ["targets", "flat"], ["t"]),
             helper.make_node("SoftmaxCrossEntropyLoss", ["scores", "t"], ["loss"])]
    return _model(nodes, [("loss", TensorProto.DOUBLE, ())], {"flat": np.array([-1], np.int64)},
                  inputs=(("scores", TensorProto.DOUBLE, (6, 5)), ("targets", TensorProto.INT64, (2, 3))))


def test_reshaped_int64_labels_import_drawn_over_the_classes_and_match_the_loss():
    graph = from_onnx(_labels_model(), loss="output")
    targets = graph.by_name("targets")
    assert targets.dtype == "int64" and targets.attrs["high"] == 5
    assert set(np.unique(graph.leaf_value(targets.id))) <= set(range(5))
    scores, labels = X[:3, :10].reshape(6, 5), np.array([[0, 4, 2], [1, 3, 4]])
    logp = scores - np.log(np.exp(scores).sum(1, keepdims=True))
    want = -np.mean(logp[np.arange(6), labels.reshape(-1)])
    assert np.isclose(A.evaluate(graph, feeds={"scores": scores, "targets": labels})["loss"], want, rtol=1e-12)


@pytest.mark.parametrize("bad", [5, -1])
def test_a_fed_label_outside_the_classes_is_refused_naming_the_input_value_and_range(bad):
    graph = from_onnx(_labels_model(), loss="output")
    labels = np.array([[0, 4, 2], [1, bad, 4]])
    with pytest.raises(GraphError, match=rf"feed 'targets': input %\d+ 'targets' holds {bad} at index \(1, 1\); "
                                         r"expected integers in \[0, 5\)"):
        A.evaluate(graph, feeds={"scores": X[:3, :10].reshape(6, 5), "targets": labels})


def test_an_int64_input_that_is_neither_ids_nor_labels_is_refused_by_name():
    model = _model([helper.make_node("Cast", ["n"], ["y"], to=TensorProto.DOUBLE)], [("y", TensorProto.DOUBLE, (3,))],
                   inputs=(("n", TensorProto.INT64, (3,)),))
    with pytest.raises(FrontendError, match=r"input 'n': is int64 but neither the indices of a Gather on a weight "
                                            r"table nor the class labels of a loss"):
        from_onnx(model, loss="none")


def test_a_float_initializer_only_compared_is_a_frozen_parameter_and_one_also_added_trains():
    """GPT-2's causal-mask buffer reaches only `bias[:t, :t] == 0`: no gradient can reach it, so it does not train
    (torch's import holds it as a buffer); the same tensor also added to x would train."""
    nodes = [helper.make_node("Slice", ["bias", "zero_i", "four_i"], ["b"]),
             helper.make_node("Equal", ["b", "zero"], ["c"]),
             helper.make_node("Where", ["c", "zero", "x"], ["y"])]
    inits = {"bias": np.tril(np.ones((4, 4))), "zero": np.array(0.0), "zero_i": np.array([0], np.int64),
             "four_i": np.array([4], np.int64)}
    model = _model(nodes, [("y", TensorProto.DOUBLE, (4, 4))], inits, inputs=(("x", TensorProto.DOUBLE, (4, 4)),))
    assert not from_onnx(model, loss="none").by_name("bias").attrs["trainable"]
    nodes.append(helper.make_node("Add", ["y", "bias"], ["z"]))
    model = _model(nodes, [("z", TensorProto.DOUBLE, (4, 4))], inits, inputs=(("x", TensorProto.DOUBLE, (4, 4)),))
    assert from_onnx(model, loss="none").by_name("bias").attrs["trainable"]


def test_a_fed_embedding_id_outside_the_table_is_refused_naming_the_input():
    model = _model([helper.make_node("Gather", ["table", "ids"], ["y"])], [("y", TensorProto.DOUBLE, (3, 2))],
                   {"table": X[:4, :2]}, inputs=(("ids", TensorProto.INT64, (3,)),))
    graph = from_onnx(model, loss="none")
    table = np.random.default_rng(5).normal(size=(4, 2))
    out = A.evaluate(graph, feeds={"ids": np.array([3, 0, 1]), "table": table})["y"]
    assert np.array_equal(out, table[[3, 0, 1]])
    with pytest.raises(GraphError, match=r"feed 'ids': input %0 'ids' holds 4 at index \(1,\); expected integers "
                                         r"in \[0, 4\)"):
        A.evaluate(graph, feeds={"ids": np.array([3, 4, 1]), "table": table})
