"""Shape-only ONNX files (weights named in a data file that is not shipped, or declared without values, as
ZigZag's and Stream's workloads are) import with external_data="zeros"; every hostile variant is refused in
one paragraph naming the initializer."""
from __future__ import annotations

import numpy as np
import pytest

from accelsim.errors import AccelsimError
from accelsim.frontends import from_onnx
from accelsim.limits import ReadLimits

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper  # noqa: E402


def _weight(name: str = "w", dims=(4, 3), data_type: int = TensorProto.FLOAT, how: str = "external"):
    t = TensorProto(name=name, data_type=data_type, dims=list(dims))
    if how == "external":
        t.data_location = TensorProto.EXTERNAL
        t.external_data.add(key="location", value="weights.bin")  # not shipped
    return t


def _model(*initializers, shape_input=None):
    """x (2, 4) @ w (4, 3) -> y, or a Reshape of x by the int64 initializer `shape_input`."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 4])
    if shape_input is not None:
        node = helper.make_node("Reshape", ["x", shape_input.name], ["y"])
        y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [4, 2])
    else:
        node = helper.make_node("MatMul", ["x", "w"], ["y"])
        y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])
    graph = helper.make_graph([node], "g", [x], [y], initializer=list(initializers))
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def _save(tmp_path, model) -> str:
    path = tmp_path / "shape_only.onnx"
    path.write_bytes(model.SerializeToString())
    return str(path)


@pytest.mark.parametrize("how", ["external", "absent"])
def test_a_shape_only_file_imports_its_float_weights_as_zeros(tmp_path, how):
    g = from_onnx(_save(tmp_path, _model(_weight(how=how))), loss="none", external_data="zeros")
    (w,) = [n for n in g.params if n.name == "w"]
    assert w.shape == (4, 3)
    assert [n.op for n in g.nodes if not n.is_leaf] == ["matmul"]


def test_reading_a_shape_only_file_names_the_missing_data_file_and_the_option(tmp_path):
    with pytest.raises(AccelsimError, match=r"initializer 'w'.*weights\.bin.*external_data='zeros'"):
        from_onnx(_save(tmp_path, _model(_weight())), loss="none")


def test_weights_the_file_holds_are_kept(tmp_path):
    """Only external or absent data becomes zeros: a weight with values is read as it is."""
    values = np.arange(12, dtype=np.float32).reshape(4, 3)
    w = onnx.numpy_helper.from_array(values, "w")
    from accelsim.frontends.onnx_import import initializer_feeds

    path = _save(tmp_path, _model(w))
    g = from_onnx(path, loss="none", external_data="zeros")
    np.testing.assert_array_equal(initializer_feeds(path, g)["w"], values)


@pytest.mark.parametrize("weight,match", [
    (_weight(dims=(4, -3)), r"initializer 'w'.*negative dimensions \[4, -3\]"),
    (_weight(dims=(2**20, 2**20)), r"initializer 'w'.*declares 1,099,511,627,776 elements.*limit"),
    (_weight(data_type=999), r"initializer 'w'.*element type 999"),
    (_weight(data_type=TensorProto.INT8), r"initializer 'w'.*element type int8.*only float32 and float64 weights"),
])
def test_a_tampered_shape_declaration_is_refused_before_anything_is_allocated(tmp_path, weight, match):
    with pytest.raises(AccelsimError, match=match):
        from_onnx(_save(tmp_path, _model(weight)), loss="none", external_data="zeros")


def test_zeros_count_against_the_byte_limit(tmp_path):
    with pytest.raises(AccelsimError, match=r"initializer 'w'.*zero weights to .*max_file_bytes"):
        from_onnx(_save(tmp_path, _model(_weight(dims=(4000, 3)))), loss="none", external_data="zeros",
                  limits=ReadLimits(max_file_bytes=10_000))


def test_an_integer_initializer_must_hold_its_values(tmp_path):
    """Shapes and axes are read at import: zeros would change the graph, so they are refused."""
    shape = _weight("shape", dims=(2,), data_type=TensorProto.INT64)
    with pytest.raises(AccelsimError, match=r"initializer 'shape'.*int64.*integer shapes and axes"):
        from_onnx(_save(tmp_path, _model(shape, shape_input=shape)), loss="none", external_data="zeros")


def test_a_truncated_shape_only_file_is_refused(tmp_path):
    path = tmp_path / "cut.onnx"
    data = _model(_weight()).SerializeToString()
    path.write_bytes(data[: len(data) // 2])
    with pytest.raises(AccelsimError, match=r"cut\.onnx.*(truncated|not an ONNX model)"):
        from_onnx(str(path), loss="none", external_data="zeros")


def test_an_unknown_mode_is_refused():
    with pytest.raises(AccelsimError, match=r"external_data must be one of 'read', 'zeros', got 'skip'"):
        from_onnx(_model(_weight()), loss="none", external_data="skip")
