"""erf in fusion: exact GELU as the importers build it, x * 0.5 * (erf(x * (1/sqrt 2)) + 1), becomes one
fused_elementwise node; the fused kernels (numba CPU, CUDA under the simulator) give the unfused numpy
reference's numbers, and gradients through the fused node are the unfused graph's. A GEMM followed by erf
fuses into the epilogue op. (tests/test_cuda_ptx.py compiles the fused and erf kernels for cc 9.0.)"""
import math

import numpy as np
import pytest

import accelsim as A
from accelsim import ops as F
from accelsim.compare import first_mismatch, max_rel_err
from accelsim.kernels import get_kernel
from accelsim.passes import inference_graph, optimize
from accelsim.passes.fuse_elementwise import fuse_elementwise

TOL = {"float32": 1e-5, "float64": 1e-12}
COMPUTE = ("matmul", "add", "mul", "erf", "matmul_epilogue", "fused_elementwise")


def _exact_gelu(x: A.Var) -> A.Var:
    return x * 0.5 * (F.erf(x * (1.0 / math.sqrt(2.0))) + 1.0)


def _mlp_layer(dtype: str, m: int = 4, k: int = 6, n: int = 8) -> A.Graph:
    """exact_gelu(x @ w + b), as a BERT or ViT MLP layer imports."""
    g = A.Graph("erf_gelu", dtype=dtype)
    x, w, b = g.input("x", (m, k)), g.param("w", (k, n)), g.param("b", (n,))
    g.output("y", _exact_gelu(x @ w + b))
    return g


def _ops(g: A.Graph) -> list[str]:
    return [n.op for n in g.nodes if not n.is_leaf]


def _run_kernels(g: A.Graph, backend: str) -> dict[str, np.ndarray]:
    """Every output of `g`, each node computed by `backend`'s kernel from its inputs' kernel results."""
    values: dict[int, np.ndarray] = {}
    for node in g.nodes:
        if node.is_leaf:
            values[node.id] = g.leaf_value(node.id)
        else:
            values[node.id] = get_kernel(node.op, backend)(*(values[i] for i in node.inputs), **node.attrs)
    return {name: values[i] for name, i in g.outputs.items()}


def test_exact_gelu_fuses_into_one_node_that_runs_erf():
    g = _mlp_layer("float64")
    fused = fuse_elementwise(g)
    assert _ops(g) == ["matmul", "add", "mul", "mul", "erf", "add", "mul"]
    # the bias add joins too: it has the GELU's shape and no other reader
    assert _ops(fused) == ["matmul", "fused_elementwise"]
    (node,) = [n for n in fused.nodes if n.op == "fused_elementwise"]
    assert [ins[0] for ins in node.attrs["program"]] == ["add", "mul", "mul", "erf", "add", "mul"]
    np.testing.assert_allclose(A.evaluate(fused)["y"], A.evaluate(g)["y"], rtol=1e-15, atol=0)


def test_after_epilogue_fusion_the_bias_goes_to_the_gemm_and_the_exact_gelu_to_one_fused_node():
    """The GEMM's output is read twice by exact GELU (x * 0.5 and x / sqrt 2), so the epilogue takes the
    bias only and the rest fuses elementwise."""
    g = inference_graph(_mlp_layer("float64"))
    fused = optimize(g, ["fuse_epilogue", "fuse_elementwise"])
    assert _ops(fused) == ["matmul_epilogue", "fused_elementwise"]
    (gemm,) = [n for n in fused.nodes if n.op == "matmul_epilogue"]
    assert gemm.attrs["activation"] == "none" and len(gemm.inputs) == 3


@pytest.mark.parametrize("backend", ["numba", "cuda"])
@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_fused_exact_gelu_on_each_backend_matches_the_unfused_reference(backend, dtype):
    g = inference_graph(_mlp_layer(dtype))
    fused = optimize(g, ["fuse_epilogue", "fuse_elementwise"])
    assert "erf" in {ins[0] for n in fused.nodes if n.op == "fused_elementwise" for ins in n.attrs["program"]}
    # the leaves' values are the same in both graphs (a pass keeps them), so the reference sees the same inputs
    expected = A.evaluate(g, dtype="float64")["y"]
    got = _run_kernels(fused, backend)["y"]
    assert got.dtype == np.dtype(dtype) and got.shape == expected.shape
    err = max_rel_err(got, expected)
    assert err < TOL[dtype], f"{backend} {dtype}: {err:.2e} {first_mismatch(got, expected, TOL[dtype])}"


def test_the_fused_kernels_follow_erf_to_its_saturation_and_through_nonfinite_inputs():
    x = np.array([-40.0, -6.0, -1e-300, 0.0, 1e-8, 0.5, 6.0, 40.0, np.inf, -np.inf, np.nan])
    program = (("erf", 0),)
    expected = A.ops.OPS["fused_elementwise"].ref(x, program=program)
    got = get_kernel("fused_elementwise", "numba")(x, program=program)
    np.testing.assert_array_equal(got, expected)
    assert list(expected[[0, 7, 8, 9]]) == [-1.0, 1.0, 1.0, -1.0]


def test_training_through_a_fused_exact_gelu_gives_the_unfused_gradients():
    fwd = _mlp_layer("float64")
    fwd.set_loss(F.sum(fwd.var(fwd.outputs["y"]) * fwd.var(fwd.outputs["y"])))
    fused_fwd = fuse_elementwise(fwd)
    assert "erf" not in _ops(fused_fwd)
    before, after = A.evaluate(A.training_graph(fwd)), A.evaluate(A.training_graph(fused_fwd))
    assert set(before) == set(after)
    for k, v in before.items():
        np.testing.assert_allclose(after[k], v, rtol=1e-12, atol=1e-14 * max(1.0, np.abs(v).max()), err_msg=k)


def test_a_gemm_then_bias_then_erf_fuses_into_the_epilogue_and_matches_on_numba():
    g = A.Graph("gemm_erf", dtype="float64")
    x, w, b = g.input("x", (5, 3)), g.param("w", (3, 7)), g.param("b", (7,))
    g.output("y", F.erf(x @ w + b))
    fused = optimize(inference_graph(g), ["fuse_epilogue"])
    assert _ops(fused) == ["matmul_epilogue"]
    assert fused.nodes[-1].attrs["activation"] == "erf"
    expected = A.evaluate(g)["y"]
    assert max_rel_err(_run_kernels(fused, "numba")["y"], expected) < TOL["float64"]
