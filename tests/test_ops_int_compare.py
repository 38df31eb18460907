"""Comparisons of int64 tensors (token ids against a padding id, labels against ignore_index): exact integer
masks in the graph's float dtype from eq ... ge, against numbers too (x < 2.5 is x <= 2), refused against a
float tensor in one line; through the ONNX importer's Equal/Less/Where into a training step that checks.
(Kernels against the references and gradients: tests/test_kernels.py and test_op_gradients.py, from the registry.)
"""
from __future__ import annotations

import numpy as np
import pytest

import accelsim as A
from accelsim import ops as F
from accelsim.errors import ShapeError

NUMPY = {"eq": np.equal, "ne": np.not_equal, "lt": np.less, "le": np.less_equal, "gt": np.greater,
         "ge": np.greater_equal}
IDS = np.array([[-3, -1, 0, 2], [2, 3, 2**53 + 1, 2**53]], dtype=np.int64)  # 2**53 + 1 == 2**53 as floats


def _ids_graph(dtype: str = "float32"):
    g = A.Graph("ids", dtype=dtype)
    return g, g.input("ids", IDS.shape, dtype="int64", init="randint", high=3)


@pytest.mark.parametrize("name", sorted(NUMPY))
@pytest.mark.parametrize("other", [2, -1.0, 2.5, -0.5, 2**53, "tensor"])
def test_int64_comparison_is_exact_and_a_float_mask(name, other):
    g, ids = _ids_graph()
    rhs = np.array([[2, 2, 0, 2**53], [2, -1, 2**53, 2**53 + 1]], np.int64) if other == "tensor" else other
    b = g.input("b", rhs.shape, dtype="int64", init="randint", high=3) if other == "tensor" else other
    mask = getattr(F, name)(ids, b)
    flipped = getattr(F, name)(b, ids) if other != "tensor" else None  # a number on the left
    g.output("m", mask)
    feeds = {"ids": IDS, **({"b": rhs} if other == "tensor" else {})}
    if flipped is not None:
        g.output("flipped", flipped)
    got = A.evaluate(g, feeds=feeds)
    assert mask.dtype == "float32" and got["m"].dtype == np.float32
    want = NUMPY[name](IDS.astype(object), rhs if other == "tensor" else other)  # Python ints: exact
    np.testing.assert_array_equal(got["m"], want.astype(np.float32))
    if flipped is not None:
        np.testing.assert_array_equal(got["flipped"], NUMPY[name](other, IDS.astype(object)).astype(np.float32))


def test_int64_mask_selects_with_where_in_a_float64_graph():
    g, ids = _ids_graph("float64")
    x = g.input("x", IDS.shape)
    g.output("y", F.where(F.ne(ids, 2), x, 0.0))
    xv = np.arange(8.0).reshape(IDS.shape)
    np.testing.assert_array_equal(A.evaluate(g, feeds={"ids": IDS, "x": xv})["y"], np.where(IDS != 2, xv, 0.0))


@pytest.mark.parametrize("other, words", [
    ("float_tensor", ["lt", "int64 tensor", "float32 tensor", "'ids'", "'x'"]),
    (float("nan"), ["lt", "int64 tensor", "nan", "finite"]),
    (np.array([0.5, 1.0, 2.0, 3.0]), ["lt", "non-integer", "0.5"]),
])
def test_int64_comparison_with_what_it_cannot_compare_exactly_is_refused_in_one_line(other, words):
    g, ids = _ids_graph()
    b = g.input("x", IDS.shape) if isinstance(other, str) else other
    with pytest.raises(ShapeError) as e:
        F.lt(ids, b)
    assert "\n" not in str(e.value) and all(w in str(e.value) for w in words), str(e.value)


def test_onnx_padding_mask_on_token_ids_trains_and_checks():
    """Equal(ids, 0) on int64 graph inputs masks padded tokens' embeddings (Where), then a MatMul: forward
    against onnxruntime, and the compiled training step checks on numba."""
    pytest.importorskip("onnx")
    import onnxruntime as ort
    from onnx import TensorProto, helper, numpy_helper

    from accelsim.frontends.onnx_import import from_onnx, initializer_feeds

    rng = np.random.default_rng(0)
    table, w = rng.normal(size=(5, 4)).astype(np.float32), rng.normal(size=(4, 3)).astype(np.float32)
    nodes = [helper.make_node("Gather", ["table", "ids"], ["emb"]),
             helper.make_node("Equal", ["ids", "pad"], ["is_pad"]),
             helper.make_node("Unsqueeze", ["is_pad", "axis"], ["is_pad3"]),
             helper.make_node("Where", ["is_pad3", "zero", "emb"], ["masked"]),
             helper.make_node("MatMul", ["masked", "w"], ["y"])]
    inits = [numpy_helper.from_array(table, "table"), numpy_helper.from_array(w, "w"),
             numpy_helper.from_array(np.array(0, np.int64), "pad"),
             numpy_helper.from_array(np.array([-1], np.int64), "axis"),
             numpy_helper.from_array(np.array(0.0, np.float32), "zero")]
    graph = helper.make_graph(nodes, "padmask", [helper.make_tensor_value_info("ids", TensorProto.INT64, [2, 6])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 6, 3])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)  # any onnxruntime reads IR 8
    ids = np.array([[1, 0, 4, 0, 2, 3], [0, 0, 1, 1, 4, 2]], np.int64)
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    want = session.run(None, {"ids": ids})[0]
    g = from_onnx(model, loss="mse")
    got = A.evaluate(g, feeds={**initializer_feeds(model, g), "ids": ids}, outputs=["y"])["y"]
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)
    assert np.all(got[ids == 0] == 0)
    train = A.training_graph(g)
    report = A.check(A.compile(train, A.load_hw("groq_like")), graph=train)
    assert report.passed, report.failures
    assert {"table.new", "w.new"} <= {e.name for e in report.entries}
