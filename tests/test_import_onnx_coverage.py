"""ONNX import coverage: the ops caffe2-era models use (variadic Sum, Clip, HardSwish, LRN, asymmetric pool
padding, count_include_pad=0, a read Dropout mask, lazy ConstantOfShape) against onnxruntime, their gradients
against torch autograd, and the 9 models bundled with the onnx package (onnx/backend/test/data/light: the
"real" set's data.json points at downloads, these ship on disk), tensor by tensor against onnxruntime."""
from __future__ import annotations

import tracemalloc
from pathlib import Path

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")

import onnxruntime as ort  # noqa: E402
import torch  # noqa: E402
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

import accelsim as A  # noqa: E402
from accelsim.errors import FrontendError  # noqa: E402
from accelsim.frontends.onnx_import import ReadLimits, from_onnx, initializer_feeds  # noqa: E402

LIGHT = Path(onnx.__file__).parent / "backend" / "test" / "data" / "light"
LIGHT_MODELS = ("bvlc_alexnet", "densenet121", "inception_v1", "inception_v2", "resnet50", "shufflenet",
                "squeezenet", "vgg19", "zfnet512")


def _model(nodes, inputs, inits=(), outputs=("y",), opset=17):
    """A model of `nodes` over float inputs {name: array}; outputs' shapes from ONNX shape inference."""
    graph = helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info(k, helper.np_dtype_to_tensor_dtype(v.dtype), v.shape)
                     for k, v in inputs.items()],
        [helper.make_tensor_value_info(n, TensorProto.UNDEFINED, None) for n in outputs],
        [numpy_helper.from_array(v, k) for k, v in dict(inits).items()])
    # IR 8 (onnx 1.10-1.13, opsets up to 18): an onnx newer than the installed onnxruntime writes an IR it
    # refuses by default (seen: onnx 1.23 beside onnxruntime 1.30, IR 14 against a maximum of 13)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], ir_version=8)
    inferred = onnx.shape_inference.infer_shapes(model)
    shapes = {vi.name: vi for vi in inferred.graph.value_info}
    for out in inferred.graph.output:
        if out.name in shapes:
            out.CopyFrom(shapes[out.name])
    return inferred


def _ort(model, feeds):
    so = ort.SessionOptions()
    so.log_severity_level = 3
    sess = ort.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"])
    names = {i.name for i in sess.get_inputs()}
    return dict(zip([o.name for o in sess.get_outputs()], sess.run(None, {k: v for k, v in feeds.items()
                                                                          if k in names})))


R = np.random.default_rng(11)


def _x(*shape):
    return R.normal(size=shape).astype(np.float32)


def _node(op, inputs, outputs=("y",), **attrs):
    return helper.make_node(op, list(inputs), list(outputs), name=f"{op.lower()}_node", **attrs)


def _scalar(v):
    return np.array(v, np.float32)


CASES = {  # id: (nodes, graph inputs, initializers, outputs)
    "sum_of_three_broadcast": ([_node("Sum", ["a", "b", "c"])], {"a": _x(2, 3), "b": _x(3), "c": _x(2, 1)}, {}),
    "sum_of_one": ([_node("Sum", ["a"])], {"a": _x(2, 3)}, {}),
    "clip_both": ([_node("Clip", ["x", "lo", "hi"])], {"x": _x(4, 5) * 3}, {"lo": _scalar(-1), "hi": _scalar(0.5)}),
    "clip_max_only": ([_node("Clip", ["x", "", "hi"])], {"x": _x(4, 5) * 3}, {"hi": _scalar(0.5)}),
    "hardswish": ([_node("HardSwish", ["x"])], {"x": _x(4, 5) * 4}, {}),
    "hardsigmoid": ([_node("HardSigmoid", ["x"], alpha=0.3, beta=0.4)], {"x": _x(4, 5) * 4}, {}),
    "lrn_odd": ([_node("LRN", ["x"], size=5, alpha=1e-2, beta=0.75, bias=2.0)], {"x": _x(2, 7, 3, 4)}, {}),
    "maxpool_asymmetric_pads": ([_node("MaxPool", ["x"], kernel_shape=[3, 3], strides=[2, 2], pads=[0, 0, 1, 1])],
                                {"x": _x(1, 2, 8, 8)}, {}),
    "maxpool_same_upper": ([_node("MaxPool", ["x"], kernel_shape=[2, 2], auto_pad="SAME_UPPER")],
                           {"x": _x(1, 2, 5, 5)}, {}),
    "avgpool_exclude_pad": ([_node("AveragePool", ["x"], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])],
                            {"x": _x(1, 3, 7, 7)}, {}),
    "avgpool_exclude_asymmetric_pad": ([_node("AveragePool", ["x"], kernel_shape=[3, 3], strides=[1, 2],
                                              pads=[0, 1, 2, 1])], {"x": _x(2, 2, 6, 7)}, {}),
    "avgpool_include_asymmetric_pad": ([_node("AveragePool", ["x"], kernel_shape=[2, 2], pads=[1, 0, 0, 1],
                                              count_include_pad=1)], {"x": _x(1, 2, 5, 5)}, {}),
    "conv_asymmetric_pads": ([_node("Conv", ["x", "w"], pads=[0, 1, 2, 0])], {"x": _x(1, 3, 6, 6)},
                             {"w": _x(4, 3, 3, 2)}),
    "conv_same_lower_even_kernel": ([_node("Conv", ["x", "w"], auto_pad="SAME_LOWER")], {"x": _x(1, 2, 5, 5)},
                                    {"w": _x(3, 2, 2, 2)}),
    "conv_transpose_strided_output_padding": ([_node("ConvTranspose", ["x", "w", "b"], strides=[2, 2],
                                                     pads=[1, 1, 1, 1], output_padding=[1, 0], group=2)],
                                              {"x": _x(1, 4, 3, 4)}, {"w": _x(4, 3, 3, 3), "b": _x(6)}),
    "instance_norm": ([_node("InstanceNormalization", ["x", "s", "b"], epsilon=1e-3)], {"x": _x(2, 3, 4, 5)},
                      {"s": _x(3), "b": _x(3)}),
    "resize_nearest_asymmetric_floor": ([_node("Resize", ["x", "", "sc"], mode="nearest",
                                               coordinate_transformation_mode="asymmetric", nearest_mode="floor")],
                                        {"x": _x(1, 2, 3, 4)}, {"sc": np.array([1, 1, 2, 2], np.float32)}),
    "resize_linear_half_pixel_sizes": ([_node("Resize", ["x", "", "", "sz"], mode="linear")], {"x": _x(1, 2, 3, 4)},
                                       {"sz": np.array([1, 2, 7, 5], np.int64)}),
    "resize_linear_align_corners": ([_node("Resize", ["x", "", "sc"], mode="linear",
                                           coordinate_transformation_mode="align_corners")], {"x": _x(2, 1, 4, 3)},
                                    {"sc": np.array([1, 1, 2, 3], np.float32)}),
    "resize_nearest_default": ([_node("Resize", ["x", "", "sc"])], {"x": _x(1, 2, 3, 3)},
                               {"sc": np.array([1, 1, 1.5, 2.5], np.float32)}),
    "dropout_mask_read": ([_node("Dropout", ["x"], ["y", "mask"]), _node("Cast", ["mask"], ["m"], to=1),
                           helper.make_node("Mul", ["y", "m"], ["z"])], {"x": _x(3, 4)}, {}, ("z",)),
    "constant_of_shape_small": ([_node("ConstantOfShape", ["s"], ["c"], value=numpy_helper.from_array(_scalar([2.5]))),
                                 helper.make_node("Add", ["x", "c"], ["y"])], {"x": _x(3, 4)},
                                {"s": np.array([3, 4], np.int64)}),
    "split_to_sequence_at": ([_node("SplitToSequence", ["x", "sp"], ["seq"], axis=1),
                              helper.make_node("SequenceAt", ["seq", "pos"], ["y"])], {"x": _x(2, 5, 3)},
                             {"sp": np.array([2, 3], np.int64), "pos": np.array(-1, np.int64)}),
    "softmax_cross_entropy_ignore_outside": ([_node("SoftmaxCrossEntropyLoss", ["s", "labels"], ignore_index=-100)],
                                             {"s": _x(4, 3), "labels": np.array([2, 0, 1, 2], np.int64)}, {}),
    "constant_of_shape_lazy": ([_node("ConstantOfShape", ["s"], ["w"], value=numpy_helper.from_array(_scalar([0.02]))),
                                helper.make_node("MatMul", ["x", "w"], ["y"])], {"x": _x(2, 100)},
                               {"s": np.array([100, 90], np.int64)}),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_op_matches_onnxruntime(case):
    nodes, inputs, inits, *outputs = CASES[case]
    model = _model(nodes, inputs, inits, outputs[0] if outputs else ("y",))
    g = from_onnx(model, loss="none")
    got = A.evaluate(g, feeds={**initializer_feeds(model, g), **inputs})
    want = _ort(model, inputs)
    assert set(got) == set(want)
    for name, ref in want.items():
        assert got[name].shape == ref.shape
        np.testing.assert_allclose(got[name], ref, rtol=1e-5, atol=1e-6, err_msg=name)


def test_a_huge_float_constant_of_shape_stays_lazy():
    """A 2**28-element fill (1 GiB as float32) imports without being allocated: it is a leaf drawn as its value."""
    shape = np.array([2**14, 2**14], np.int64)
    model = _model([_node("ConstantOfShape", ["s"], ["w"], value=numpy_helper.from_array(_scalar([0.5]))),
                    helper.make_node("MatMul", ["x", "w"], ["y"])], {"x": _x(1, 2**14)}, {"s": shape})
    tracemalloc.start()
    try:
        g = from_onnx(model, loss="none")
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 64 * 2**20  # far below the 1 GiB the constant would take
    leaf = g.by_name("w")
    assert (leaf.op, leaf.shape, leaf.trainable, leaf.attrs["init"], leaf.attrs["value"]) == \
        ("param", (2**14, 2**14), False, "full", 0.5)


@pytest.mark.parametrize("dtype, limits, words", [  # a float one is a lazy leaf, bounded as any tensor
    (np.float32, ReadLimits(max_tensor_elements=5000), ["ConstantOfShape", "[80, 80]", "6,400 elements",
                                                        "max_tensor_elements"]),
    (np.int64, ReadLimits(max_folded_elements=5000), ["ConstantOfShape", "[80, 80]", "6,400 elements",
                                                      "max-folded-elements"]),
])
def test_a_constant_of_shape_over_the_limit_is_refused_before_allocating(dtype, limits, words):
    value = numpy_helper.from_array(np.array([1], dtype))
    model = _model([_node("ConstantOfShape", ["s"], ["c"], value=value), helper.make_node("Identity", ["c"], ["y"])],
                   {"x": _x(2)}, {"s": np.array([80, 80], np.int64)})
    with pytest.raises(FrontendError) as e:
        from_onnx(model, loss="none", limits=limits)
    assert "\n" not in str(e.value) and all(w in str(e.value) for w in words), str(e.value)


def test_an_old_opset_model_is_converted_and_imported():
    """Opset 9: Softmax flattens from axis 1 (the converter rewrites it for opset 13's single axis)."""
    nodes = [_node("Relu", ["x"], ["r"]), _node("Softmax", ["r"])]
    model = _model(nodes, {"x": _x(2, 3, 4)}, opset=9)
    g = from_onnx(model, loss="none")
    x = _x(2, 3, 4)
    np.testing.assert_allclose(A.evaluate(g, feeds={"x": x})["y"], _ort(model, {"x": x})["y"], rtol=1e-5,
                               atol=1e-7)


# ---- gradients of the lowerings, against torch autograd in float64 ------------------------------------

def _grad_case(nodes, x, inits=()):
    """d(sum(y * u))/dx of the imported model, in float64, for a fixed random u."""
    model = _model(nodes, {"x": x.astype(np.float32)}, inits)
    g = from_onnx(model, loss="none")
    u = np.random.default_rng(5).normal(size=g.var(g.outputs["y"]).shape).astype(np.float32).astype(np.float64)
    y = g.var(g.outputs["y"])
    loss = (y * g.const(u)).sum()
    g.set_loss(loss)
    x_id = g.by_name("x").id
    g.output("dx", A.gradients(g, g.loss, [x_id])[x_id])
    got = A.evaluate(g, feeds={**initializer_feeds(model, g), "x": x}, dtype="float64")
    return got["y"], got["dx"], u


def _torch_grad(fn, x, u):
    xt = torch.from_numpy(x).requires_grad_(True)
    y = fn(xt)
    (y * torch.from_numpy(u)).sum().backward()
    return y.detach().numpy(), xt.grad.numpy()


F_ = torch.nn.functional
GRAD_CASES = {  # id: (nodes, x shape, initializers, the same function in torch)
    "lrn": ([_node("LRN", ["x"], size=3, alpha=0.5, beta=0.75, bias=1.5)], (2, 5, 3, 3), {},
            lambda x: F_.local_response_norm(x, 3, alpha=0.5, beta=0.75, k=1.5)),
    "clip": ([_node("Clip", ["x", "lo", "hi"])], (4, 6), {"lo": _scalar(-0.5), "hi": _scalar(0.7)},
             lambda x: torch.clamp(x, -0.5, 0.7)),
    "hardswish": ([_node("HardSwish", ["x"])], (4, 6), {}, lambda x: F_.hardswish(x * 1.0)),
    "avgpool_exclude_pad": ([_node("AveragePool", ["x"], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])],
                            (1, 2, 7, 7), {}, lambda x: F_.avg_pool2d(x, 3, 2, 1, count_include_pad=False)),
    "maxpool_asymmetric_pads": ([_node("MaxPool", ["x"], kernel_shape=[3, 3], strides=[2, 2], pads=[0, 0, 1, 1])],
                                (1, 2, 8, 8), {}, lambda x: F_.max_pool2d(F_.pad(x, (0, 1, 0, 1), value=-1e30), 3, 2)),
    "sum": ([_node("Sum", ["x", "x", "c"])], (3, 4), {"c": _scalar(1.5)}, lambda x: x + x + 1.5),
}


@pytest.mark.torch
@pytest.mark.parametrize("case", sorted(GRAD_CASES))
def test_lowering_gradient_matches_torch_autograd(case):
    nodes, shape, inits, fn = GRAD_CASES[case]
    x = (np.random.default_rng(3).normal(size=shape) * 2).astype(np.float32).astype(np.float64)  # the graph's
    # leaves are float32 (evaluate's float64 computes on their exact values); clamp and hardswish see both bounds
    y, dx, u = _grad_case(nodes, x, inits)
    y_ref, dx_ref = _torch_grad(fn, x, u)
    # float64 throughout; the lowerings' constants (1/6, bounds) are the graph's float32 numbers
    np.testing.assert_allclose(y, y_ref, rtol=1e-6, atol=1e-9)
    np.testing.assert_allclose(dx, dx_ref, rtol=1e-6, atol=1e-9)


# ---- the onnx package's bundled models ------------------------------------------------------------------

def _light_model(name: str):
    path = LIGHT / f"light_{name}.onnx"
    if not path.exists():
        pytest.skip(f"the installed onnx package does not ship {path.name}")
    return path


def _softmax_resolvable(logits: np.ndarray) -> bool:
    """Whether float32 tells the logits apart: caffe2's light models fill every weight with 0.02, so some
    logits are ~1e10 and equal but for rounding, and softmax then amplifies ulp-level differences."""
    spread = np.ptp(logits, axis=-1)
    return bool(np.all(spread > 1e3 * np.spacing(np.abs(logits).max(axis=-1).astype(np.float32))))


def _assert_allclose(got: np.ndarray, want: np.ndarray, rtol: float, atol: float, err_msg: str) -> None:
    """np.testing.assert_allclose's verdict at a fraction of its cost on the models' 100M-element weights:
    |got - want| <= atol + rtol |want| (isclose's formula, in its dtypes) decides where every value is finite;
    anywhere else, and on any failure, assert_allclose itself decides and reports."""
    with np.errstate(invalid="ignore"):  # inf - inf is NaN, which fails the check below and defers to assert_allclose
        err = got - want
    np.abs(err, out=err)
    bound = np.abs(want)
    bound *= want.dtype.type(rtol)
    bound += want.dtype.type(atol)
    # bound >= 0, so its max is finite only where every value of want is; a NaN in err compares False
    if not (np.isfinite(bound.max()) and np.all(err <= bound)):
        np.testing.assert_allclose(got, want, rtol=rtol, atol=atol, err_msg=err_msg)


@pytest.mark.parametrize("got, want, passes", [
    ([1.0, np.inf, np.nan], [1.0, np.inf, np.nan], True),  # assert_allclose's equal_nan and equal infinities
    ([1.0, 5.0], [1.0, 4.0], True),  # 0.25 x 4 = 1 allowed
    ([1.0, 5.5], [1.0, 4.0], False),
    ([1.0, np.nan], [1.0, 2.0], False),
    ([1.0, -np.inf], [1.0, np.inf], False),
    ([1.0, np.inf], [1.0, np.inf], True),
    ([1.0, np.inf], [1.0, 4.0], False),
])
def test_the_fast_comparison_gives_assert_allcloses_verdict(got, want, passes):
    got, want = np.array(got, np.float32), np.array(want, np.float32)
    try:
        np.testing.assert_allclose(got, want, rtol=0.25, atol=0)
        expected = True
    except AssertionError:
        expected = False
    assert expected == passes
    if passes:
        _assert_allclose(got, want, rtol=0.25, atol=0, err_msg="t")
    else:
        with pytest.raises(AssertionError, match="t"):
            _assert_allclose(got, want, rtol=0.25, atol=0, err_msg="t")


SHRUNK = {"bvlc_alexnet": 99, "vgg19": 48, "zfnet512": 96}
"""Models compared value by value on smaller images (side in pixels; the last pooling leaves 2x2, 1x1 and 2x2):
at 224 their fc6 weights (38M, 103M and 75M elements) and convolutions took most of this file's CPU. Every op kind
of theirs still runs; at the shipped size their import is compared shape by shape with ONNX shape inference."""


def _shrunk(path: Path, side: int) -> onnx.ModelProto:
    """The model with side x side images: its data input's dims, and the flattened width in the Reshape's target
    and in fc6's weight shape, which caffe2 wrote as constants (initializers)."""
    model = onnx.load(str(path))
    dims = next(i for i in model.graph.input if i.name.endswith("data_0")).type.tensor_type.shape.dim
    dims[2].dim_value = dims[3].dim_value = side
    reshape = next(n for n in model.graph.node if n.op_type == "Reshape")
    fc6 = next(n for n in model.graph.node if n.op_type == "Gemm" and n.input[0] == reshape.output[0])
    fc6_shape = next(n for n in model.graph.node if n.output[0] == fc6.input[1] and n.op_type == "ConstantOfShape")
    shapes = {vi.name: vi for vi in onnx.shape_inference.infer_shapes(model).graph.value_info}
    flat = int(np.prod([d.dim_value for d in shapes[reshape.input[0]].type.tensor_type.shape.dim[1:]]))
    inits = {t.name: t for t in model.graph.initializer}
    for name, value in ((reshape.input[1], [1, flat]), (fc6_shape.input[0], [numpy_helper.to_array(
            inits[fc6_shape.input[0]])[0], flat])):
        old = numpy_helper.to_array(inits[name])
        inits[name].CopyFrom(numpy_helper.from_array(np.array(value, old.dtype), name))
    return model


@pytest.mark.parametrize("name", sorted(SHRUNK))
def test_a_shrunk_bundled_model_imports_at_its_shipped_size_with_onnxs_shapes(name):
    """The shipped file as it is: every tensor ONNX shape inference names, and each output, has its shape."""
    path = _light_model(name)
    g = from_onnx(path, loss="none")
    model = onnx.shape_inference.infer_shapes(onnx.load(str(path)))
    nodes = {n.name: n for n in g.nodes}
    inner = [vi for vi in model.graph.value_info if vi.name in nodes]
    assert len(inner) > 10 and model.graph.output
    for vi in inner:
        assert nodes[vi.name].shape == tuple(d.dim_value for d in vi.type.tensor_type.shape.dim), vi.name
    for out in model.graph.output:
        assert g.var(g.outputs[out.name]).shape == tuple(d.dim_value for d in out.type.tensor_type.shape.dim)


@pytest.mark.parametrize("name", LIGHT_MODELS)
def test_bundled_model_matches_onnxruntime_tensor_by_tensor(name):
    """Opset 9 files, converted at import; every tensor ONNX shape inference names (each node's output) and
    each model output against onnxruntime on the same inputs and the file's initializers (SHRUNK's on smaller
    images)."""
    path = _light_model(name)
    source = _shrunk(path, SHRUNK[name]) if name in SHRUNK else path
    g = from_onnx(source, loss="none")
    model = onnx.shape_inference.infer_shapes(source if name in SHRUNK else onnx.load(str(path)))
    rng = np.random.default_rng(0)
    feeds = {n.name: rng.uniform(0.5, 1.5, n.shape).astype(np.float32) for n in g.inputs}
    ids = {n.name: n.id for n in g.nodes}
    inner = [vi for vi in model.graph.value_info if vi.name in ids]
    got = A.evaluate(g, feeds={**initializer_feeds(source, g), **feeds}, keep=[ids[vi.name] for vi in inner])
    outputs = [o.name for o in model.graph.output]
    model.graph.output.extend(inner)
    want = _ort(model, feeds)
    assert len(inner) > 10
    for vi in inner:
        value, ref = got[f"%{ids[vi.name]}"], want[vi.name]
        assert value.shape == ref.shape, vi.name
        _assert_allclose(value, ref, rtol=1e-4, atol=1e-4 * float(max(ref.max(), -ref.min())), err_msg=vi.name)
    softmax_inputs = {n.output[0]: n.input[0] for n in model.graph.node if n.op_type == "Softmax"}
    for name_out in outputs:
        logits = softmax_inputs.get(name_out)
        if logits is not None and not _softmax_resolvable(want[logits]):
            np.testing.assert_allclose(got[name_out].sum(axis=1), 1.0, rtol=1e-5)  # its logits were compared
            continue
        np.testing.assert_allclose(got[name_out], want[name_out], rtol=1e-4, atol=1e-6, err_msg=name_out)


@pytest.mark.parametrize("name", ["squeezenet", "densenet121"])
def test_fully_convolutional_bundled_model_trains_compiles_and_checks_at_small_size(name):
    """The models whose global pooling lets the input shrink (to 32x32) train: their biases and batch-norm
    scales are initializers (trainable); caffe2 filled every weight by ConstantOfShape (constants)."""
    model = onnx.load(str(_light_model(name)))
    for vi in model.graph.input:
        if vi.name == "data_0":
            vi.type.tensor_type.shape.dim[2].dim_value = vi.type.tensor_type.shape.dim[3].dim_value = 32
    train = A.training_graph(from_onnx(model, loss="mse"))
    sched = A.compile(train, A.load_hw("groq_like"))
    report = A.check(sched, graph=train)
    assert report.passed, report.failures
    trained = {p.name for p in train.params if p.trainable}
    assert trained and {f"{p}.new" for p in trained} <= {e.name for e in report.entries}


# ---- hostile inputs: one paragraph each --------------------------------------------------------------------

def _hostile(node, inits=(), opset=17, xshape=(1, 2, 6, 6)):
    out = helper.make_tensor_value_info("y", TensorProto.FLOAT, [f"d{i}" for i in range(len(xshape))])
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(xshape))],
                              [out], list(inits))
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


_W = numpy_helper.from_array(np.ones((3, 2, 3, 3), np.float32), "w")
HOSTILE = {  # id: (model, words the error must hold)
    "conv_strides_floats": (_hostile(_node("Conv", ["x", "w"], strides=[1.5, 2.0]), [_W]),
                            ["conv_node", "strides", "INTS", "FLOATS"]),
    "maxpool_kernel_string": (_hostile(_node("MaxPool", ["x"], kernel_shape="33")), ["kernel_shape", "STRING"]),
    "lrn_size_float": (_hostile(_node("LRN", ["x"], size=3.0)), ["lrn_node", "size", "FLOAT"]),
    "lrn_size_missing": (_hostile(_node("LRN", ["x"])), ["lrn_node", "'size' is missing"]),
    "lrn_size_zero": (_hostile(_node("LRN", ["x"], size=0)), ["'lrn_node'", "size=0"]),
    "clip_bounds_vector": (_hostile(_node("Clip", ["x", "lo"]),
                                    [numpy_helper.from_array(np.zeros(3, np.float32), "lo")]),
                           ["'clip_node'", "shape (3,)", "scalars"]),
    "avgpool_pads_wider_than_kernel": (_hostile(_node("AveragePool", ["x"], kernel_shape=[2, 2], pads=[5, 5, 5, 5])),
                                       ["'averagepool_node'", "begin [5, 5]", "kernel [2, 2]"]),
    "constant_of_shape_of_floats": (_hostile(_node("ConstantOfShape", ["x"]), xshape=(2,)),
                                    ["ConstantOfShape", "shape inference"]),
    "sum_without_inputs": (_hostile(_node("Sum", [])), ["sum_node", "input size 0"]),
    "opset_zero": (_hostile(_node("Relu", ["x"]), opset=0), ["opset 0", "1..", "opset_version=17"]),
    "opset_far_future": (_hostile(_node("Relu", ["x"]), opset=10**6), ["opset 1000000", "1.."]),
    "old_opset_training_dropout": (_hostile(_node("Dropout", ["x"], is_test=0), opset=6),
                                   ["opset 6", "'dropout_node' (Dropout)", "is_test", "opset 17"]),
}


@pytest.mark.parametrize("case", sorted(HOSTILE))
def test_hostile_model_is_refused_in_one_paragraph_naming_the_culprit(case):
    model, words = HOSTILE[case]
    with pytest.raises(FrontendError) as e:
        from_onnx(model, loss="none")
    text = str(e.value)
    assert "\n" not in text and all(w in text for w in words), text


@pytest.mark.parametrize("damage", ["truncated", "tampered"])
def test_a_damaged_bundled_model_file_is_refused_in_one_paragraph(tmp_path, damage):
    data = bytearray(_light_model("squeezenet").read_bytes())
    if damage == "truncated":
        data = data[: len(data) // 2]
    else:  # overwrite a stretch in the middle (inside the nodes' protobuf fields)
        mid = len(data) // 2
        data[mid: mid + 64] = bytes(range(200, 256)) + bytes(8)
    path = tmp_path / "squeezenet.onnx"
    path.write_bytes(bytes(data))
    with pytest.raises(FrontendError) as e:
        from_onnx(path, loss="none")
    assert "\n" not in str(e.value) and str(path) in str(e.value)
