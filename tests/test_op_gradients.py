"""Every differentiable op's gradient rule against central finite differences (float64)."""
import math
import re

import numpy as np
import pytest

import accelsim as A
from accelsim import ops as F
from accelsim.cli import main
from accelsim.compare import first_mismatch, max_rel_err
from accelsim.gradcheck import finite_difference_grads, grad_report
from accelsim.ops import OPS

DIFFERENTIABLE = sorted(name for name, op in OPS.items() if op.grad is not None)
NEEDS_EXAMPLES = sorted(name for name, op in OPS.items() if op.category != "leaf")


def _op_graph(name, arrays, attrs, rng):
    """loss = sum(op(inputs) * R): a scalar whose gradient exercises every output element."""
    op = OPS[name]
    g = A.Graph(f"check_{name}", dtype="float64")
    feeds, ins = {}, []
    for k, arr in enumerate(arrays):
        dtype = "int64" if k in op.integer_inputs else "float64"
        ins.append(g.input(f"in{k}", np.shape(arr), dtype=dtype))
        feeds[f"in{k}"] = np.asarray(arr, dtype=dtype)
    out = A.ops.apply(name, *ins, **attrs)
    weight = g.input("weight", out.shape)
    feeds["weight"] = rng.normal(size=out.shape)
    g.set_loss(A.ops.sum(out * weight))
    return g, ins, feeds


@pytest.mark.parametrize("name", NEEDS_EXAMPLES)
def test_every_op_has_examples_and_reference_matching_inferred_shape(name):
    op = OPS[name]
    assert op.examples is not None, f"op {name} has no examples"
    for arrays, attrs in op.examples(np.random.default_rng(0)):
        out = op.ref(*arrays, **attrs)
        shapes = [np.shape(a) for a in arrays]
        assert tuple(np.shape(out)) == tuple(op.infer(*shapes, **attrs))
        assert op.flops(tuple(np.shape(out)), *shapes, **attrs) >= 0


@pytest.mark.parametrize("name", DIFFERENTIABLE)
def test_gradient_rule_matches_central_finite_differences(name):
    rng = np.random.default_rng(1)
    for arrays, attrs in OPS[name].examples(rng):
        g, ins, feeds = _op_graph(name, arrays, attrs, rng)
        wrt = [x for k, x in enumerate(ins) if k not in OPS[name].integer_inputs]
        grads = A.gradients(g, g.loss, [x.id for x in wrt])
        for x in wrt:
            if x.id in grads:
                g.output(f"{x.node.name}.grad", grads[x.id])
        got = A.evaluate(g, feeds)
        fd = finite_difference_grads(g, "loss", [x.node.name for x in wrt], feeds, max_coords=60)
        for x in wrt:
            idx, expected = fd[x.node.name]
            actual = got[f"{x.node.name}.grad"].reshape(-1)[idx] if x.id in grads else np.zeros(idx.size)
            err = max_rel_err(actual, expected)
            assert err < 1e-6, (f"{name} {attrs}: d/d{x.node.name} rel err {err:.2e}, first bad: "
                                f"{first_mismatch(actual, expected, 1e-6)}")


@pytest.mark.parametrize("name", sorted(n for n, op in OPS.items() if op.gemm is not None))
def test_gemm_view_accounts_for_every_flop(name):
    """A tensor op's GEMM (batch, m, k, n) does exactly its multiply-adds: 2*b*m*k*n == flops. A fused
    epilogue op (ops/epilogue.py) also counts its bias add and activation per output element, so its
    GEMM does exactly its base op's flops and the rest is the epilogue's."""
    from accelsim.ops.epilogue import BASES
    op = OPS[name]
    for arrays, attrs in op.examples(np.random.default_rng(0)):
        shapes = [np.shape(a) for a in arrays]
        out = tuple(op.infer(*shapes, **attrs))
        b, m, k, n = op.gemm(out, *shapes, **attrs)
        if name not in BASES:
            assert 2 * b * m * k * n == op.flops(out, *shapes, **attrs)
            continue
        spec = BASES[name]
        base_flops = OPS[spec.base].flops(out, *shapes[:2], **{a.name: attrs[a.name] for a in spec.attrs})
        assert 2 * b * m * k * n == base_flops
        act = attrs.get("activation", "none")
        per_elem = (len(shapes) == 3) + (OPS[act].flops((1,), (1,)) if act != "none" else 0)
        assert op.flops(out, *shapes, **attrs) - base_flops == per_elem * int(np.prod(out))


def test_every_tensor_op_has_a_gemm_view():
    assert all(op.gemm is not None for op in OPS.values() if op.category == "tensor")


def _scaled_sum(w_init: dict) -> A.Graph:
    """loss = sum(x * w), so d loss / d w = x and d loss / d x = w."""
    g = A.Graph("scaled_sum", dtype="float64")
    x = g.input("x", (2, 3), init="uniform", low=0.5, high=1.5)
    w = g.param("w", (2, 3), **w_init)
    g.output("y", x * w)
    g.set_loss(F.sum(x * w))
    return g


def test_a_nan_leaf_makes_every_gradient_error_infinite_and_names_the_tensor():
    report = grad_report(_scaled_sum({"init": "full", "value": float("nan")}), fd_coords=4)
    assert report["fd_max_rel_err"] == math.inf
    line = next(line for line in report["nonfinite"] if line.startswith("d loss / d x (finite differences): "))
    assert re.search(r"non-finite: nan at index \([01], [012]\)", line), line  # an index of x's own (2, 3) shape
    if report["torch_max_rel_err"] is not None:
        assert report["torch_max_rel_err"] == math.inf


def test_a_finite_graph_has_no_nonfinite_report_lines():
    report = grad_report(_scaled_sum({"init": "normal"}), fd_coords=4, use_torch=False)
    assert report["fd_max_rel_err"] < 1e-8 and report["nonfinite"] == []


def test_a_nan_in_one_torch_gradient_is_an_infinite_torch_error_naming_tensor_and_index(monkeypatch):
    pytest.importorskip("torch")
    import accelsim.torch_oracle as oracle

    real = oracle.torch_gradients

    def nan_at_w_0_2(*args, **kwargs):
        outputs, grads = real(*args, **kwargs)
        grads["w"] = grads["w"].copy()
        grads["w"][0, 2] = np.nan
        return outputs, grads

    monkeypatch.setattr(oracle, "torch_gradients", nan_at_w_0_2)
    report = grad_report(_scaled_sum({"init": "normal"}), fd_coords=4)
    assert report["torch_max_rel_err"] == math.inf and report["fd_max_rel_err"] < 1e-8
    assert report["nonfinite"] == [line for line in report["nonfinite"] if "d loss / d w (PyTorch)" in line]
    assert "index (0, 2)" in report["nonfinite"][0] and "non-finite" in report["nonfinite"][0]


@pytest.mark.parametrize("coords", [-1, 2.5, True, "4"])
def test_finite_differences_refuse_a_coordinate_count_that_is_not_a_non_negative_int(coords):
    g = _scaled_sum({"init": "normal"})
    feeds = {"x": np.ones((2, 3)), "w": np.ones((2, 3))}
    with pytest.raises(A.GraphError, match="must be an integer >= 0"):
        finite_difference_grads(g, "loss", ["w"], feeds, max_coords=coords)
    assert finite_difference_grads(g, "loss", ["w"], feeds, max_coords=0)["w"][0].size == 0


def test_grad_cli_refuses_negative_fd_coords_without_a_traceback(capsys):
    try:
        code = main(["grad", "--model", "mlp", "--fd-coords", "-1", "--no-torch"])
    except SystemExit as e:  # refused by the argument parser: a usage error
        code = e.code
    err = capsys.readouterr().err
    assert code in (1, 2) and "--fd-coords" in err and "-1" in err and "Traceback" not in err
