"""The ONNX importer: torch.onnx.export'ed models (MLP, torchvision's ResNet-18, a 2-layer transformer encoder)
compute what onnxruntime computes, train with PyTorch's gradients, compile, simulate and check; single-op models
cover the op table; hostile files get one-paragraph errors naming the file and the culprit."""
from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")  # the `onnx` extra; everything below needs it

import onnxruntime as ort  # noqa: E402  (part of the same extra)
import torch  # noqa: E402  (the oracle of the gradient tests)
from filelock import FileLock  # noqa: E402  (a torch dependency)
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

import accelsim as A  # noqa: E402
from accelsim.errors import AccelsimError, FrontendError  # noqa: E402
from accelsim.frontends.onnx_import import ReadLimits, from_onnx, initializer_feeds, load_onnx  # noqa: E402
from torch_models import resnet18  # noqa: E402  (torchvision's ResNet, module names kept)

REPO = Path(__file__).resolve().parents[1]


# ---- exported models: each exported once per session, shared by the xdist workers -------------------

def _mlp() -> torch.nn.Module:
    return torch.nn.Sequential(torch.nn.Linear(12, 16), torch.nn.ReLU(), torch.nn.Linear(16, 5))


def _encoder() -> torch.nn.Module:
    layer = torch.nn.TransformerEncoderLayer(32, 4, 64, dropout=0.0, batch_first=True, activation="gelu")
    return torch.nn.TransformerEncoder(layer, 2, enable_nested_tensor=False)


def _randomize_batchnorm(module: torch.nn.Module) -> torch.nn.Module:
    """Non-trivial running statistics and affine parameters, so batch norm's import is exercised."""
    g = torch.Generator().manual_seed(1)
    for m in module.modules():
        if isinstance(m, torch.nn.BatchNorm2d):
            m.running_mean.copy_(torch.rand(m.num_features, generator=g) - 0.5)
            m.running_var.copy_(torch.rand(m.num_features, generator=g) + 0.5)
            m.weight.data.copy_(torch.rand(m.num_features, generator=g) + 0.5)
            m.bias.data.copy_(torch.rand(m.num_features, generator=g) - 0.5)
    return module


MODELS = {  # name: (module factory, example input shape, torch.onnx.export keywords)
    "mlp": (_mlp, (4, 12), {}),
    # optimize=False keeps BatchNormalization (the exporter's optimizer folds it into the convolutions, which
    # the MLP's and encoder's default exports and the Conv-with-bias op test cover) and the names of every
    # torch parameter and buffer, which the gradient test loads into the torch module
    "resnet18_bn": (lambda: _randomize_batchnorm(resnet18(num_classes=10)), (2, 3, 32, 32), {"optimize": False}),
    "encoder": (_encoder, (2, 5, 32), {}),
}


@pytest.fixture(scope="session")
def exported(tmp_path_factory, worker_id):
    """name -> path of the model exported with torch.onnx.export's default (dynamo) exporter. The first worker
    to ask exports them all (the exporter's warm-up is paid once); the other waits on the lock."""
    root = tmp_path_factory.getbasetemp()
    root = root.parent if worker_id != "master" else root  # shared by this session's workers
    with FileLock(str(root / "onnx_exports.lock")):
        if not (root / "onnx_exports.done").exists():
            threads = torch.get_num_threads()
            torch.set_num_threads(1)  # the other worker keeps running tests on the second core
            try:
                for name, (factory, shape, kwargs) in MODELS.items():
                    torch.manual_seed(0)
                    module = factory().eval()
                    torch.onnx.export(module, (torch.randn(shape),), str(root / f"{name}.onnx"), dynamo=True,
                                      **kwargs)
            finally:
                torch.set_num_threads(threads)
            (root / "onnx_exports.done").write_text("ok")
    return lambda name: root / f"{name}.onnx"


def _input(graph: A.Graph, name: str, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).normal(size=graph.by_name(name).shape).astype(np.float32)


def _run_ort(model, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
    source = str(model) if isinstance(model, Path) else model.SerializeToString()
    return ort.InferenceSession(source, providers=["CPUExecutionProvider"]).run(None, feeds)


def _load_into(module: torch.nn.Module, feeds: dict[str, np.ndarray]) -> None:
    """The file's initializers into the module's parameters and buffers of the same names."""
    tensors = {**dict(module.named_parameters()), **dict(module.named_buffers())}
    with torch.no_grad():
        for name, value in feeds.items():
            tensors[name].copy_(torch.from_numpy(np.array(value)))


# ---- single-op models against onnxruntime ---------------------------------------------------------

def _f32(rng, *shape, low=None):
    x = rng.normal(size=shape).astype(np.float32)
    return np.abs(x) + np.float32(low) if low is not None else x


def _i64(*values):
    return np.array(values, dtype=np.int64)


def _causal(t):
    return np.triu(np.ones((t, t), dtype=bool), k=1)


R = np.random.default_rng(7)
OP_CASES = {  # id: (op, {graph input: value}, {initializer: value}, attrs, number of outputs, opset)
    "conv_bias_stride_group": ("Conv", {"x": _f32(R, 2, 4, 9, 9)}, {"w": _f32(R, 6, 2, 3, 3), "b": _f32(R, 6)},
                               {"strides": [2, 2], "pads": [1, 1, 1, 1], "group": 2}, 1, 18),
    "conv_same_upper_strided": ("Conv", {"x": _f32(R, 1, 3, 9, 9)}, {"w": _f32(R, 2, 3, 3, 3)},
                                {"auto_pad": "SAME_UPPER", "strides": [2, 2]}, 1, 18),
    "conv_dilated": ("Conv", {"x": _f32(R, 1, 3, 8, 8)}, {"w": _f32(R, 2, 3, 3, 3)},
                     {"dilations": [2, 2], "pads": [2, 2, 2, 2]}, 1, 18),
    "maxpool": ("MaxPool", {"x": _f32(R, 2, 3, 9, 9)}, {}, {"kernel_shape": [3, 3], "strides": [2, 2],
                                                         "pads": [1, 1, 1, 1]}, 1, 18),
    "avgpool": ("AveragePool", {"x": _f32(R, 2, 3, 8, 8)}, {}, {"kernel_shape": [2, 2], "strides": [2, 2]}, 1, 18),
    "global_avgpool": ("GlobalAveragePool", {"x": _f32(R, 2, 3, 5, 5)}, {}, {}, 1, 18),
    "batchnorm": ("BatchNormalization", {"x": _f32(R, 2, 3, 4, 4)},
                  {"s": _f32(R, 3), "b": _f32(R, 3), "m": _f32(R, 3), "v": _f32(R, 3, low=0.5)},
                  {"epsilon": 1e-3}, 1, 18),
    "gemm_trans_alpha_beta": ("Gemm", {"a": _f32(R, 5, 3)}, {"b": _f32(R, 4, 5), "c": _f32(R, 4)},
                              {"transA": 1, "transB": 1, "alpha": 0.5, "beta": 2.0}, 1, 18),
    "matmul_batch_broadcast": ("MatMul", {"a": _f32(R, 2, 1, 3, 4)}, {"b": _f32(R, 5, 4, 6)}, {}, 1, 18),
    "matmul_vector": ("MatMul", {"a": _f32(R, 3, 4)}, {"b": _f32(R, 4)}, {}, 1, 18),
    "softmax_axis1": ("Softmax", {"x": _f32(R, 2, 3, 4)}, {}, {"axis": 1}, 1, 18),
    "logsoftmax": ("LogSoftmax", {"x": _f32(R, 2, 5)}, {}, {}, 1, 18),
    "layernorm_two_axes": ("LayerNormalization", {"x": _f32(R, 2, 3, 4)}, {"s": _f32(R, 3, 4), "b": _f32(R, 3, 4)},
                           {"axis": -2}, 1, 18),
    "gelu_exact": ("Gelu", {"x": _f32(R, 4, 6) * 3}, {}, {}, 1, 20),
    "gelu_tanh": ("Gelu", {"x": _f32(R, 4, 6) * 3}, {}, {"approximate": "tanh"}, 1, 20),
    "erf": ("Erf", {"x": _f32(R, 50) * 2}, {}, {}, 1, 18),
    "pow_scalar": ("Pow", {"x": _f32(R, 3, 4)}, {"p": np.array(3.0, np.float32)}, {}, 1, 18),
    "sqrt": ("Sqrt", {"x": _f32(R, 3, 4, low=0.1)}, {}, {}, 1, 18),
    "div": ("Div", {"x": _f32(R, 3, 4)}, {"y": _f32(R, 4, low=0.5)}, {}, 1, 18),
    "sub_broadcast": ("Sub", {"x": _f32(R, 3, 1)}, {"y": _f32(R, 4)}, {}, 1, 18),
    "sigmoid": ("Sigmoid", {"x": _f32(R, 3, 4)}, {}, {}, 1, 18),
    "tanh": ("Tanh", {"x": _f32(R, 3, 4)}, {}, {}, 1, 18),
    "abs": ("Abs", {"x": _f32(R, 3, 4)}, {}, {}, 1, 18),
    "reciprocal": ("Reciprocal", {"x": _f32(R, 3, 4, low=0.5)}, {}, {}, 1, 18),
    "reduce_mean_axes_input": ("ReduceMean", {"x": _f32(R, 2, 3, 4)}, {"axes": _i64(1, -1)}, {"keepdims": 0}, 1, 18),
    "reduce_sum_keepdims": ("ReduceSum", {"x": _f32(R, 2, 3, 4)}, {"axes": _i64(0)}, {}, 1, 18),
    "reshape_zero_and_minus_one": ("Reshape", {"x": _f32(R, 2, 3, 4)}, {"s": _i64(0, -1)}, {}, 1, 18),
    "flatten_axis2": ("Flatten", {"x": _f32(R, 2, 3, 4, 5)}, {}, {"axis": 2}, 1, 18),
    "transpose": ("Transpose", {"x": _f32(R, 2, 3, 4)}, {}, {"perm": [2, 0, 1]}, 1, 18),
    "squeeze": ("Squeeze", {"x": _f32(R, 2, 1, 4, 1)}, {"axes": _i64(1, -1)}, {}, 1, 18),
    "unsqueeze": ("Unsqueeze", {"x": _f32(R, 2, 4)}, {"axes": _i64(0, -1)}, {}, 1, 18),
    "concat_with_weight": ("Concat", {"x": _f32(R, 2, 3)}, {"w": _f32(R, 2, 5)}, {"axis": -1}, 1, 18),
    "slice_negative": ("Slice", {"x": _f32(R, 5, 6, 7)}, {"st": _i64(-4, 1), "en": _i64(-1, 100), "ax": _i64(2, 0)},
                       {}, 1, 18),
    "split_sizes": ("Split", {"x": _f32(R, 2, 6)}, {"sp": _i64(2, 4)}, {"axis": 1}, 2, 18),
    "split_num_outputs": ("Split", {"x": _f32(R, 7, 2)}, {}, {"num_outputs": 3}, 3, 18),
    "gather_scalar_index": ("Gather", {"x": _f32(R, 2, 3, 4)}, {"i": np.array(-1, np.int64)}, {"axis": 1}, 1, 18),
    "gather_embedding": ("Gather", {"ids": _i64(3, 0, 2, 3)}, {"table": _f32(R, 4, 5)}, {}, 1, 18),
    "expand": ("Expand", {"x": _f32(R, 3, 1)}, {"s": _i64(2, 3, 4)}, {}, 1, 18),
    "where_causal_mask": ("Where", {"x": _f32(R, 2, 4, 4)},
                          {"c": _causal(4), "fill": np.array(-np.inf, np.float32)}, {}, 1, 18),
    "depth_to_space_dcr": ("DepthToSpace", {"x": _f32(R, 1, 8, 2, 3)}, {}, {"blocksize": 2}, 1, 18),
    "depth_to_space_crd": ("DepthToSpace", {"x": _f32(R, 1, 8, 2, 3)}, {}, {"blocksize": 2, "mode": "CRD"}, 1, 18),
    "space_to_depth": ("SpaceToDepth", {"x": _f32(R, 1, 2, 4, 6)}, {}, {"blocksize": 2}, 1, 18),
    "dropout_inference": ("Dropout", {"x": _f32(R, 3, 4)}, {}, {}, 1, 18),
    "identity": ("Identity", {"x": _f32(R, 3, 4)}, {}, {}, 1, 18),
}
INPUT_ORDER = {"Where": ["c", "fill", "x"], "Slice": ["x", "st", "en", "ax"], "Gather": None}


def _single_op_model(op, inputs, inits, attrs, n_out, opset, name="single_op"):
    order = INPUT_ORDER.get(op) or (["table", "ids"] if "ids" in inputs else [*inputs, *inits])
    node = helper.make_node(op, order, [f"y{k}" for k in range(n_out)], name=f"{op.lower()}_node", **attrs)
    graph = helper.make_graph(
        [node], name,
        [helper.make_tensor_value_info(k, helper.np_dtype_to_tensor_dtype(v.dtype), v.shape) for k, v in inputs.items()],
        [helper.make_tensor_value_info(f"y{k}", TensorProto.FLOAT, None) for k in range(n_out)],
        [numpy_helper.from_array(v, k) for k, v in inits.items()])
    # the outputs' shapes come from ONNX's own shape inference (a graph output must declare one)
    return onnx.shape_inference.infer_shapes(helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)]))


@pytest.mark.parametrize("case", sorted(OP_CASES))
def test_single_op_matches_onnxruntime(case):
    op, inputs, inits, attrs, n_out, opset = OP_CASES[case]
    model = _single_op_model(op, inputs, inits, attrs, n_out, opset)
    g = from_onnx(model, loss="none")
    got = A.evaluate(g, feeds={**initializer_feeds(model, g), **inputs})
    want = _run_ort(model, inputs)
    assert len(got) == n_out
    for value, ref in zip(got.values(), want):
        assert value.shape == ref.shape
        np.testing.assert_allclose(value, ref, rtol=1e-5, atol=1e-6)


def test_exact_gelu_and_its_gradient_match_pytorch():
    """The Erf lowering of Gelu(approximate='none'): values and d/dx against torch's exact GELU."""
    model = _single_op_model("Gelu", {"x": np.zeros((3, 7), np.float32)}, {}, {}, 1, 20)
    g = from_onnx(model, loss="mse")
    x_id = g.by_name("x").id
    g.output("dx", A.gradients(g, g.loss, [x_id])[x_id])
    x = np.linspace(-4, 4, 21, dtype=np.float32).reshape(3, 7)
    target = np.full_like(x, 0.25)
    got = A.evaluate(g, feeds={"x": x, "target": target})
    xt = torch.from_numpy(x).requires_grad_(True)
    y = torch.nn.functional.gelu(xt)
    torch.nn.functional.mse_loss(y, torch.from_numpy(target)).backward()
    np.testing.assert_allclose(got["y0"], y.detach().numpy(), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(got["dx"], xt.grad.numpy(), rtol=1e-4, atol=1e-6)


# ---- the public surface: lazy import, options -------------------------------------------------------

def test_onnx_is_imported_lazily_and_its_absence_names_the_extra(tmp_path):
    script = textwrap.dedent("""
        import sys
        import accelsim
        import accelsim.frontends.onnx_import as m
        assert "onnx" not in sys.modules, "importing accelsim loaded onnx"
        sys.modules["onnx"] = None  # as if the extra were not installed
        try:
            m.from_onnx("model.onnx")
        except accelsim.AccelsimError as e:
            print(type(e).__name__, e)
    """)
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=REPO,
                         timeout=600)  # a hang guard: importing accelsim takes seconds, more on a busy machine
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("FrontendError") and "pip install 'accelsim[onnx]'" in out.stdout


@pytest.mark.parametrize("kwargs, match", [
    ({"loss": "hinge"}, "loss must be one of"),
    ({"batch_norm": "frozen"}, "batch_norm must be one of"),
    ({"loss": "cross_entropy"}, r"\(N, C\) logits"),  # the encoder's output is (2, 5, 32)
])
def test_bad_options_are_refused_in_one_paragraph(exported, kwargs, match):
    with pytest.raises(FrontendError, match=match) as e:
        load_onnx(exported("encoder"), **kwargs)
    assert "\n" not in str(e.value)


# ---- hostile and unsupported files --------------------------------------------------------------------

def _relu_model(**overrides):
    node = helper.make_node("Relu", ["x"], ["y"], name="relu_node")
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", overrides.get("opset", 18))])


def _training_dropout_opset6():
    """Dropout-6 with is_test=0: onnx.version_converter has no adapter for training-mode dropout."""
    node = helper.make_node("Dropout", ["x"], ["y"], name="drop", is_test=0)
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 6)])


def _save(model, path: Path) -> Path:
    path.write_bytes(model.SerializeToString())
    return path


def _graph_model(nodes, inputs, inits=(), outputs=("y",)):
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info(n, TensorProto.FLOAT, [2, 3]) for n in inputs],
                              [helper.make_tensor_value_info(n, TensorProto.FLOAT, [2, 3]) for n in outputs],
                              list(inits))
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])


def _huge_declared(path: Path) -> Path:
    t = numpy_helper.from_array(np.ones(3, np.float32), "w")
    del t.dims[:]
    t.dims.extend([2**20, 2**20])
    model = _graph_model([helper.make_node("Add", ["x", "w"], ["y"])], ["x"], [t])
    return _save(model, path)


def _short_raw_data(path: Path) -> Path:
    t = numpy_helper.from_array(np.ones(3, np.float32), "w")
    t.dims[0] = 1000
    return _save(_graph_model([helper.make_node("Add", ["x", "w"], ["y"])], ["x"], [t]), path)


def _nan_weight(path: Path) -> Path:
    w = np.ones((2, 3), np.float32)
    w[1, 2] = np.nan
    return _save(_graph_model([helper.make_node("Add", ["x", "w"], ["y"])], ["x"],
                              [numpy_helper.from_array(w, "w")]), path)


def _cycle(path: Path) -> Path:
    nodes = [helper.make_node("Add", ["x", "b"], ["a"], name="first"), helper.make_node("Relu", ["a"], ["b"], name="second"),
             helper.make_node("Relu", ["a"], ["y"], name="out")]
    return _save(_graph_model(nodes, ["x"]), path)


def _dangling(path: Path) -> Path:
    return _save(_graph_model([helper.make_node("Add", ["x", "ghost"], ["y"], name="adder")], ["x"]), path)


def _dynamic(path: Path) -> Path:
    node = helper.make_node("Relu", ["x"], ["y"])
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 3])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 3])])
    return _save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)]), path)


def _escaping_external_data(path: Path) -> Path:
    t = numpy_helper.from_array(np.ones((2, 3), np.float32), "w")
    t.ClearField("raw_data")
    t.data_location = TensorProto.EXTERNAL
    for k, v in (("location", "../../etc/passwd"), ("offset", "0"), ("length", "24")):
        t.external_data.add(key=k, value=v)
    return _save(_graph_model([helper.make_node("Add", ["x", "w"], ["y"])], ["x"], [t]), path)


HOSTILE = {  # id: (make the file under tmp_path -> path, words the one-paragraph error must contain, limits)
    "not_protobuf": (lambda p: (p.write_bytes(b"GIF89a\x00\xff this is not an onnx model \xfe"), p)[1],
                     ["not an ONNX model"], None),
    "truncated": (lambda p: (p.write_bytes(_relu_model().SerializeToString()[:37]), p)[1], ["truncated"], None),
    "empty": (lambda p: (p.write_bytes(b""), p)[1], ["empty"], None),
    "huge_declared_size": (_huge_declared, ["initializer 'w'", "1099511627776 elements"], None),
    "dims_disagree_with_bytes": (_short_raw_data, ["initializer 'w'", "holds 12 bytes"], None),
    "cycle": (_cycle, ["cycle", "'first'", "'second'"], None),
    "dangling_input": (_dangling, ["node 'adder'", "'ghost'", "dangling"], None),
    "nan_initializer": (_nan_weight, ["initializer 'w'", "non-finite", "(1, 2)"], None),
    "old_opset_without_an_adapter": (lambda p: _save(_training_dropout_opset6(), p),
                                     ["opset 6", "node 'drop' (Dropout)", "is_test", "re-export"], None),
    "future_opset": (lambda p: _save(_relu_model(opset=99), p), ["opset 99"], None),
    "directory": (lambda p: (p.mkdir(), p)[1], ["is a directory"], None),
    "missing_file": (lambda p: p, ["no such file"], None),
    "over_size_limit": (lambda p: _save(_relu_model(), p), ["above the 64-byte limit"], ReadLimits(max_file_bytes=64)),
    "dynamic_dimension": (_dynamic, ["input 'x'", "axis 0", "'batch'", "fixed shapes"], None),
    "external_data_outside_the_model_directory": (_escaping_external_data, ["initializer 'w'", "not a file inside"],
                                                  None),
}


@pytest.mark.parametrize("case", sorted(HOSTILE))
def test_hostile_file_gets_one_paragraph_naming_file_and_culprit(tmp_path, case):
    make, words, limits = HOSTILE[case]
    path = make(tmp_path / "model.onnx")
    with pytest.raises(FrontendError) as e:
        load_onnx(path, limits=limits or ReadLimits())
    message = str(e.value)
    assert isinstance(e.value, AccelsimError) and "\n" not in message and "Traceback" not in message
    assert message.startswith(str(path)), message
    for word in words:
        assert word in message, message


def test_every_unsupported_op_is_named_once_with_counts_and_a_node(tmp_path):
    nodes = [helper.make_node("Hardmax", ["x"], ["h1"], name="hm_a"), helper.make_node("Hardmax", ["h1"], ["h2"], name="hm_b"),
             helper.make_node("Celu", ["h2"], ["c"], name="celu_1"), helper.make_node("Relu", ["c"], ["r"]),
             helper.make_node("MyOp", ["r"], ["m"], name="custom", domain="com.example"),
             helper.make_node("MaxPool", ["x4"], ["p"], name="ceil_pool", kernel_shape=[2, 2], strides=[2, 2],
                               ceil_mode=1),
             helper.make_node("Add", ["m", "x"], ["y"])]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3]),
                                           helper.make_tensor_value_info("x4", TensorProto.FLOAT, [1, 1, 5, 5])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3]),
                               helper.make_tensor_value_info("p", TensorProto.FLOAT, [1, 1, 3, 3])])  # ceil mode
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18), helper.make_opsetid("com.example", 1)])
    path = _save(model, tmp_path / "unsupported.onnx")
    with pytest.raises(FrontendError) as e:
        load_onnx(path)
    message = str(e.value)
    assert "\n" not in message and message.startswith(str(path))
    assert "4 node(s) use 3 ONNX op type(s)" in message
    assert "Hardmax x2 (e.g. node 'hm_a')" in message and "Celu x1 (e.g. node 'celu_1')" in message
    assert "com.example::MyOp x1 (e.g. node 'custom')" in message
    assert "MaxPool node 'ceil_pool': ceil_mode=1" in message  # a supported op used in an unsupported way


# ---- whole models against onnxruntime and PyTorch (last: the other worker runs the tests above while the
# first one exports) --------------------------------------------------

@pytest.mark.parametrize("name", ["mlp", "resnet18_bn", "encoder"])
def test_imported_model_computes_what_onnxruntime_computes(exported, name):
    path = exported(name)
    g = load_onnx(path, loss="none")
    x_name = g.inputs[0].name
    x = _input(g, x_name)
    got = A.evaluate(g, feeds={**initializer_feeds(path, g), x_name: x})
    want = _run_ort(path, {x_name: x})
    assert list(got) == [o.name for o in onnx.load(str(path), load_external_data=False).graph.output]
    for (out, value), ref in zip(got.items(), want):
        assert value.shape == ref.shape and np.isfinite(value).all(), out
        np.testing.assert_allclose(value, ref, rtol=1e-4, atol=1e-5 * float(np.abs(ref).max()), err_msg=out)


def test_imported_parameters_keep_their_onnx_names_and_roles(exported):
    path = exported("resnet18_bn")
    g = load_onnx(path, loss="cross_entropy")
    module = resnet18(num_classes=10)
    torch_params = {k for k, _ in module.named_parameters()}
    buffers = {k for k, b in module.named_buffers() if b.dtype.is_floating_point}
    assert {p.name for p in g.params if p.trainable} == torch_params
    assert {p.name for p in g.params if not p.trainable} == buffers  # running statistics are frozen
    assert [n.name for n in g.inputs] == ["x", "labels"]
    assert g.by_name("bn1.running_var").attrs["init"] == "ones"  # drawn values are usable statistics


def _torch_grads(module: torch.nn.Module, x: np.ndarray, labels: np.ndarray) -> dict[str, np.ndarray]:
    loss = torch.nn.functional.cross_entropy(module(torch.from_numpy(x)), torch.from_numpy(labels))
    module.zero_grad()
    loss.backward()
    return {"loss": loss.detach().numpy(), **{f"{k}.grad": p.grad.numpy() for k, p in module.named_parameters()}}


@pytest.mark.parametrize("name, factory, batch_norm", [
    ("mlp", _mlp, "inference"),
    ("resnet18_bn", lambda: resnet18(num_classes=10), "training"),  # batch statistics: torch's train mode
])
def test_training_gradients_match_pytorch_autograd(exported, name, factory, batch_norm):
    """Both sides in float64 on the file's float32 weights: batch norm over ResNet's last stage sees 2 values
    per channel at this batch, which float32 rounding would dominate on either side."""
    path = exported(name)
    forward = load_onnx(path, loss="cross_entropy", batch_norm=batch_norm)
    train = A.training_graph(forward)
    x_name = forward.inputs[0].name
    x = _input(forward, x_name, seed=3).astype(np.float64)
    classes = forward.nodes[forward.outputs[next(iter(forward.outputs))]].shape[1]
    labels = np.arange(x.shape[0], dtype=np.int64) % classes
    weights = initializer_feeds(path, train)
    got = A.evaluate(train, feeds={**weights, x_name: x, "labels": labels}, dtype="float64")

    module = factory().double()
    _load_into(module, weights)
    for m in module.modules():  # the file stores epsilon as float32 (1e-5 -> 9.99999975e-06); with 2 values
        if isinstance(m, torch.nn.BatchNorm2d):  # per channel, batch statistics feel the difference
            m.eps = float(np.float32(m.eps))
    module.train(batch_norm == "training")
    want = _torch_grads(module, x, labels)
    assert set(want) <= set(got) and len(want) > 2
    for key, ref in want.items():
        np.testing.assert_allclose(got[key], ref, rtol=1e-6, atol=1e-9 * max(float(np.abs(ref).max()), 1.0),
                                   err_msg=key)


def test_imported_mlp_compiles_simulates_and_checks_on_a_shipped_hwconfig(exported):
    train = A.training_graph(load_onnx(exported("mlp"), loss="cross_entropy"))
    sched = A.compile(train, A.load_hw("groq_like"), microbatches=2)
    result = A.simulate(sched, graph=train)
    assert result.makespan_cycles > 0
    report = A.check(sched, graph=train)
    assert report.passed, report.failures
    assert {"loss", "0.weight.grad", "2.bias.new"} <= {e.name for e in report.entries}


def test_imported_encoder_trains_with_its_default_mse_loss(exported):
    g = load_onnx(exported("encoder"))  # loss="mse", as the torch frontend's default
    assert g.by_name("target").shape == (2, 5, 32)
    train = A.training_graph(g)
    out = A.evaluate(train)
    assert np.isfinite(out["loss"]) and out["loss"] > 0
    trainable = {p.name for p in g.params if p.trainable}
    assert {k for k in out if k.endswith(".grad")} == {f"{p}.grad" for p in trainable}  # every weight trains
    assert "layers.0.linear2.bias" in trainable and all(np.isfinite(out[f"{p}.grad"]).all() for p in trainable)


def test_forward_graph_without_a_loss_refuses_training_by_name(exported):
    g = load_onnx(exported("mlp"), loss="none")
    with pytest.raises(AccelsimError, match="has no loss"):
        A.training_graph(g)
