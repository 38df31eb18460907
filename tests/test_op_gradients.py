"""Every differentiable op's gradient rule against central finite differences (float64)."""
import numpy as np
import pytest

import accelsim as A
from accelsim.gradcheck import finite_difference_grads, max_rel_err
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
            assert err < 1e-6, f"{name} {attrs}: d/d{x.node.name} rel err {err:.2e}"


@pytest.mark.parametrize("name", sorted(n for n, op in OPS.items() if op.gemm is not None))
def test_gemm_view_accounts_for_every_flop(name):
    """A tensor op's GEMM (batch, m, k, n) does exactly its multiply-adds: 2*b*m*k*n == flops."""
    op = OPS[name]
    for arrays, attrs in op.examples(np.random.default_rng(0)):
        shapes = [np.shape(a) for a in arrays]
        out = tuple(op.infer(*shapes, **attrs))
        b, m, k, n = op.gemm(out, *shapes, **attrs)
        assert 2 * b * m * k * n == op.flops(out, *shapes, **attrs)


def test_every_tensor_op_has_a_gemm_view():
    assert all(op.gemm is not None for op in OPS.values() if op.category == "tensor")
