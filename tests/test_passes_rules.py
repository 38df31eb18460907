"""Each rewrite rule on small hand-built graphs: what it matches, what it leaves alone, and values
checked against formulas worked out here."""
import numpy as np
import pytest

import accelsim as A
from accelsim import ops as F
from accelsim.models.sizes import SMALL
from accelsim.passes import freeze_batchnorm, inference_graph
from accelsim.passes.constant_fold import constant_fold
from accelsim.passes.cse import cse
from accelsim.passes.fold_batchnorm import fold_batchnorm
from accelsim.passes.merge_parallel import merge_parallel_convs, merge_qkv
from accelsim.passes.simplify import simplify


def _ops(g: A.Graph) -> list[str]:
    return [n.op for n in g.nodes]


def _same_outputs(a: A.Graph, b: A.Graph) -> None:
    ea, eb = A.evaluate(a), A.evaluate(b)
    assert set(ea) == set(eb)
    for k in ea:
        np.testing.assert_allclose(eb[k], ea[k], rtol=1e-12, atol=1e-12, err_msg=k)


def _conv_bn(bias: bool, extra_reader: bool = False) -> A.Graph:
    g = A.Graph("conv_bn", dtype="float64")
    x = g.input("x", (2, 3, 5, 5))
    w = g.param("w", (4, 3, 3, 3))
    y = F.conv2d(x, w, padding=1)
    if bias:
        y = y + F.reshape(g.param("b", (4,)), (1, 4, 1, 1))
    stats = [g.param("gamma", (4,), init="uniform", low=0.5, high=1.5), g.param("beta", (4,)),
             g.param("mean", (4,)), g.param("var", (4,), init="uniform", low=0.5, high=2.0)]
    g.output("out", F.relu(F.batch_norm_inference(y, *stats, eps=1e-3)))
    if extra_reader:
        g.output("pre_bn", y)
    return g


@pytest.mark.parametrize("bias", [False, True])
def test_fold_batchnorm_gives_the_formula_weights_and_bias(bias):
    g = _conv_bn(bias)
    out = fold_batchnorm(g)
    assert _ops(out) == ["input", "const", "const", "conv2d", "add", "relu"]
    value = {n.name: g.leaf_value(n.id) for n in g.params}
    s = value["gamma"] / np.sqrt(value["var"] + 1e-3)
    b = value["b"] if bias else 0.0
    w_folded, b_folded = (out.leaf_value(n.id) for n in out.nodes if n.op == "const")
    np.testing.assert_allclose(w_folded, value["w"] * s[:, None, None, None], rtol=1e-15)
    np.testing.assert_allclose(b_folded.reshape(4), (b - value["mean"]) * s + value["beta"], rtol=1e-14)
    _same_outputs(g, out)


def test_fold_batchnorm_leaves_a_conv_whose_output_is_read_elsewhere():
    g = _conv_bn(bias=True, extra_reader=True)
    assert fold_batchnorm(g).dump() == g.dump()


def test_simplify_removes_every_identity_down_to_the_input():
    g = A.Graph("ids", dtype="float64")
    x = g.input("x", (2, 3, 4))
    y = ((x * 1.0) + 0.0 - 0.0) / 1.0
    y = F.neg(F.neg(F.pow(y, 1.0)))
    y = F.transpose(F.transpose(y, (2, 0, 1)), (1, 2, 0))  # inverse permutations
    y = F.reshape(F.reshape(y, (6, 4)), (2, 3, 4))
    y = F.sum_to(F.broadcast_to(y, (2, 3, 4)), (2, 3, 4))
    y = F.concat([F.slice(y, (0, 0, 0), (2, 3, 4))], axis=0)
    g.output("y", F.relu(y))
    out = simplify(g)
    assert _ops(out) == ["input", "relu"]
    _same_outputs(g, out)


def test_simplify_composes_chains_it_cannot_remove():
    g = A.Graph("chains", dtype="float64")
    x = g.input("x", (2, 3, 4))
    g.output("t", F.transpose(F.transpose(x, (1, 0, 2)), (0, 2, 1)))
    g.output("r", F.reshape(F.reshape(x, (6, 4)), (4, 6)))
    out = simplify(g)
    assert _ops(out) == ["input", "transpose", "reshape"]
    _same_outputs(g, out)


def test_simplify_keeps_what_is_not_an_exact_identity():
    g = A.Graph("kept", dtype="float64")
    x = g.input("x", (3,))
    g.output("broadcasting", x * g.const(np.ones((2, 3))))  # x*1 that broadcasts x to (2, 3)
    g.output("times_zero", x * 0.0)  # inf * 0 is nan, not 0
    g.output("self_minus", x - x)
    g.output("almost_one", x * 1.0000001)
    assert simplify(g).dump() == g.dump()


def test_simplify_never_turns_an_output_into_a_leaf():
    g = A.Graph("out_leaf", dtype="float64")
    x = g.input("x", (3,))
    g.output("y", x * 1.0)
    assert simplify(g).dump() == g.dump()


def test_cse_merges_duplicates_and_equal_constants_but_not_parameters():
    g = A.Graph("dups", dtype="float64")
    x = g.input("x", (4, 4))
    w1, w2 = g.param("w1", (4, 4), init="zeros"), g.param("w2", (4, 4), init="zeros")
    a, b = F.matmul(x, w1), F.matmul(x, w1)  # the same node twice
    c = F.matmul(x, w2)  # equal values, another parameter
    d = F.matmul(x, w1, transpose_b=True)  # other attributes
    g.output("y", (a * 2.0) + (b * 2.0) + c + d)
    out = cse(g)
    assert _ops(out).count("matmul") == 3 and _ops(out).count("const") == 1 and _ops(out).count("mul") == 1
    _same_outputs(g, out)


def test_cse_keeps_phases_apart():
    g = A.Graph("phases", dtype="float64")
    x = g.input("x", (3,))
    y = F.exp(x)
    with g.phase("backward"):
        z = F.exp(x)
    g.output("y", y)
    g.output("z", z)
    assert cse(g).dump() == g.dump()


def test_constant_fold_folds_constants_but_not_parameters_or_growing_broadcasts():
    g = A.Graph("consts", dtype="float64")
    x = g.input("x", (50, 50))
    p = g.param("p", ())
    k = g.const(2.0) * g.const(3.0) + 1.0  # -> 7
    g.output("y", x * k + x * (p * 2.0) + F.broadcast_to(g.const(1.5), (50, 50)))
    out = constant_fold(g)
    consts = [out.leaf_value(n.id) for n in out.nodes if n.op == "const"]
    assert 7.0 in [float(c) for c in consts if c.size == 1]
    assert "broadcast_to" in _ops(out) and _ops(out).count("mul") == 3  # x*7, p*2, x*(p*2)
    _same_outputs(g, out)


def test_merge_qkv_merges_transposed_weights_and_leaves_other_operands_alone():
    g = A.Graph("qkv", dtype="float64")
    x = g.input("x", (5, 8))
    wq, wk = g.param("wq", (6, 8)), g.param("wk", (3, 8))  # (n, k): used transposed
    act = F.relu(x)
    g.output("q", F.matmul(x, wq, transpose_b=True))
    g.output("k", F.matmul(x, wk, transpose_b=True))
    g.output("a", F.matmul(x, F.transpose(act, (1, 0))))  # right operand not a weight
    out = merge_qkv(g)
    assert _ops(out).count("matmul") == 2 and _ops(out).count("slice") == 2
    (cat,) = [n for n in out.nodes if n.op == "concat"]
    assert cat.attrs["axis"] == 0 and cat.shape == (9, 8)
    _same_outputs(g, out)


def test_merge_parallel_convs_needs_equal_stride_and_kernel():
    g = A.Graph("convs", dtype="float64")
    x = g.input("x", (1, 3, 6, 6))
    g.output("a", F.conv2d(x, g.param("wa", (4, 3, 1, 1))))
    g.output("b", F.conv2d(x, g.param("wb", (2, 3, 1, 1))))
    g.output("strided", F.conv2d(x, g.param("wc", (2, 3, 1, 1)), stride=2))
    g.output("three", F.conv2d(x, g.param("wd", (2, 3, 3, 3)), padding=1))
    out = merge_parallel_convs(g)
    assert _ops(out).count("conv2d") == 3 and _ops(out).count("slice") == 2
    (merged,) = [n for n in out.nodes if n.op == "conv2d" and n.shape[1] == 6]
    assert [out.nodes[i].op for i in merged.inputs] == ["input", "concat"]
    _same_outputs(g, out)


def test_freeze_batchnorm_matches_on_its_calibration_batch_only():
    g = inference_graph(A.models.build("resnet_block", **{**SMALL["resnet_block"], "dtype": "float64"}))
    frozen = freeze_batchnorm(g)
    assert _ops(frozen).count("batch_norm") == 0 and _ops(frozen).count("batch_norm_inference") == 2
    _same_outputs(g, frozen)  # the graph's own inputs: its calibration batch
    other = {"x": g.input_value(g.by_name("x").id, sample=1)}
    assert not np.allclose(A.evaluate(frozen, feeds=other)["y"], A.evaluate(g, feeds=other)["y"])
    assert frozen.source is None


def _two_qkv_groups() -> A.Graph:
    """Two inputs, each read by two matmuls against weights: two places merge_qkv rewrites."""
    g = A.Graph("two", dtype="float64")
    for name in ("a", "b"):
        x = g.input(name, (3, 4))
        g.output(f"{name}q", F.matmul(x, g.param(f"{name}wq", (4, 2))))
        g.output(f"{name}k", F.matmul(x, g.param(f"{name}wk", (4, 5))))
    return g


def test_a_sited_merge_reports_its_anchors_and_merges_only_where_told():
    from accelsim.passes.merge_parallel import run_qkv

    g = _two_qkv_groups()
    everywhere = run_qkv(g)
    anchors = [n.id for n in g.nodes if n.op == "matmul"][::2]  # the first matmul of each pair
    assert everywhere.sites == tuple(anchors) and _ops(everywhere.graph).count("concat") == 2
    for anchor in anchors:
        one = run_qkv(g, only=frozenset({anchor}))
        assert one.sites == (anchor,) and _ops(one.graph).count("concat") == 1
        assert all(f"%{anchor} " in line or "one matmul with" in line for line in one.rewrites)
        _same_outputs(g, one.graph)
    nowhere = run_qkv(g, only=frozenset({0}))  # an input is no anchor
    assert nowhere.sites == () and nowhere.rewrites == ()


def test_merge_passes_are_sited_in_the_table():
    from accelsim.passes import PASSES

    assert PASSES["merge_qkv"].sited and PASSES["merge_parallel_convs"].sited
    assert not PASSES["cse"].sited


def test_an_anchor_that_is_no_place_of_the_pass_is_refused_by_the_manager():
    from accelsim.passes import AppliedPass

    g = _two_qkv_groups()
    with pytest.raises(A.GraphError, match=r"restricted to anchors %0 .* rewrote at none of them"):
        A.optimize(g, [AppliedPass("merge_qkv", (0,))])
    with pytest.raises(A.GraphError, match="only a sited pass takes anchor ids"):
        A.optimize(g, [AppliedPass("cse", (0,))])
    with pytest.raises(A.GraphError, match="non-empty set of node ids"):
        AppliedPass("merge_qkv", ())
