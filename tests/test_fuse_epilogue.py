"""Epilogue fusion (issue 14): the fused ops matmul_epilogue / conv2d_epilogue (shapes, FLOPs and bytes
against the unfused chain, hostile attributes, kernels, exact gradients) and the fuse_epilogue pass on
the zoo (same numbers, fewer nodes and bytes, the same GEMM on the matrix unit, `only=` subsets, end to
end on groq_like, skipped where no unit runs the fused op)."""
import numpy as np
import pytest

import accelsim as A
from accelsim import ops as F
from accelsim.compare import max_rel_err
from accelsim.cost.model import capable_units, node_cost
from accelsim.gradcheck import grad_report
from accelsim.kernels import get_kernel
from accelsim.limits import graph_flops
from accelsim.models.sizes import SMALL, TINY
from accelsim.ops import OPS
from accelsim.ops.epilogue import ACTIVATIONS, conv2d_epilogue, matmul_epilogue
from accelsim.passes import PassDef, freeze_batchnorm, inference_graph, optimize, optimize_with_log
from accelsim.passes.fuse_epilogue import find_places, fuse_epilogue, run
from accelsim.passes.manager import moved_bytes

FUSE = PassDef("fuse_epilogue", run, ("inference", "training"), "matmul/conv2d + bias + activation -> one op",
               sited=True)
FUSED_OPS = ("matmul_epilogue", "conv2d_epilogue")


def _count(g: A.Graph, *ops: str) -> int:
    return sum(n.op in ops for n in g.nodes)


def _chain(fused: bool, act: str = "gelu", conv: bool = False) -> A.Graph:
    """One GEMM + bias + activation, built unfused (as the zoo's layers build it) or as the fused op."""
    g = A.Graph("chain", dtype="float64")
    if conv:
        x, w, b = g.input("x", (2, 3, 6, 6)), g.param("w", (4, 3, 3, 3)), g.param("b", (4,))
        y = (conv2d_epilogue(x, w, b, padding=1, activation=act) if fused
             else F.conv2d(x, w, padding=1) + F.reshape(b, (1, 4, 1, 1)))
    else:
        x, w, b = g.input("x", (2, 3, 4)), g.param("w", (4, 5)), g.param("b", (5,))
        y = matmul_epilogue(x, w, b, activation=act) if fused else F.matmul(x, w) + b
    if not fused and act != "none":
        y = A.ops.apply(act, y)
    g.output("y", y)
    g.set_loss(F.sum(y * y))
    return g


# ---- the ops -------------------------------------------------------------------------------

def test_fused_ops_infer_the_base_op_shape_and_read_a_bias_vector_along_columns_or_channels():
    g = A.Graph("shapes")
    y = matmul_epilogue(g.input("a", (2, 4, 3)), g.input("b", (5, 4)), g.input("bias", (5,)), transpose_a=True,
                        transpose_b=True, activation="relu")
    z = conv2d_epilogue(g.input("x", (1, 4, 8, 8)), g.input("w", (6, 2, 3, 3)), g.input("c", (6,)), stride=2,
                        padding=1, groups=2, activation="tanh")
    assert y.shape == (2, 3, 5) and z.shape == (1, 6, 4, 4)
    assert matmul_epilogue(g.input("p", (3, 4)), g.input("q", (4, 2)), activation="sigmoid").shape == (3, 2)


@pytest.mark.parametrize("conv", [False, True], ids=["matmul", "conv2d"])
@pytest.mark.parametrize("act", sorted(ACTIVATIONS))
def test_fused_op_has_the_chain_s_flops_and_moves_fewer_bytes(act, conv):
    """The fused op does the chain's arithmetic but writes its output once: the chain also writes the
    GEMM's and the bias add's outputs and reads them back (4 x out elements without an activation's
    pair 2 x), and the conv layer's reshape of its bias reads and writes C elements."""
    chain, fused = _chain(False, act, conv), _chain(True, act, conv)
    out = next(n for n in fused.nodes if n.op in FUSED_OPS)
    elems = int(np.prod(out.shape)) * (4 if act != "none" else 2) + (2 * out.shape[1] if conv else 0)
    assert graph_flops(fused) == graph_flops(chain)
    assert moved_bytes(chain) - moved_bytes(fused) == elems * 8
    assert OPS[out.op].gemm(out.shape, *(fused.nodes[i].shape for i in out.inputs), **out.attrs) == \
        OPS["conv2d" if conv else "matmul"].gemm(out.shape, *(fused.nodes[i].shape for i in out.inputs[:2]),
                                                 **{k: v for k, v in out.attrs.items() if k != "activation"})
    np.testing.assert_allclose(A.evaluate(fused)["y"], A.evaluate(chain)["y"], rtol=1e-14, atol=1e-14)


HOSTILE = [
    (lambda g, a, b, c: matmul_epilogue(a, b, c, activation="swish"), A.GraphError, r"activation must be one of"),
    (lambda g, a, b, c: matmul_epilogue(a, b, c, activation=3), A.GraphError, r"activation must be one of.*got 3"),
    (lambda g, a, b, c: matmul_epilogue(a, b, activation=None), A.GraphError, r"activation must be one of"),
    (lambda g, a, b, c: matmul_epilogue(a, b, g.input("d", (4,))), A.ShapeError, r"bias \(4,\) must be a vector"),
    (lambda g, a, b, c: matmul_epilogue(a, b, g.input("d", (1, 5))), A.ShapeError, r"bias \(1, 5\)"),
    (lambda g, a, b, c: matmul_epilogue(a, b, g.input("d", (3, 5))), A.ShapeError, r"columns"),
    (lambda g, a, b, c: A.ops.apply("matmul_epilogue", a, b, c, c, transpose_a=False, transpose_b=False,
                                    activation="relu"), A.ShapeError, r"2 or 3 inputs\), got 4"),
    (lambda g, a, b, c: A.ops.apply("matmul_epilogue", a, b, transpose_a="yes", transpose_b=False,
                                    activation="relu"), A.GraphError, r"transpose_a must be True or False"),
    (lambda g, a, b, c: A.ops.apply("matmul_epilogue", a, b, transpose_a=False, transpose_b=False),
     A.GraphError, r"missing \['activation'\]"),
    (lambda g, a, b, c: A.ops.apply("matmul_epilogue", a, b, transpose_a=False, transpose_b=False,
                                    activation="relu", alpha=2.0), A.GraphError, r"unknown \['alpha'\]"),
    (lambda g, a, b, c: conv2d_epilogue(g.input("x", (1, 2, 5, 5)), g.input("w", (3, 2, 3, 3)),
                                        g.input("d", (1, 3, 1, 1))), A.ShapeError, r"output channels"),
    (lambda g, a, b, c: A.ops.apply("conv2d_epilogue", g.input("x", (1, 2, 5, 5)), g.input("w", (3, 2, 3, 3)),
                                    stride=(1, 1), padding=1, dilation=(1, 1), groups=1, activation="none"),
     A.GraphError, r"padding must be a pair of ints, got 1"),
]


@pytest.mark.parametrize("build,error,match", HOSTILE, ids=[f"hostile{i}" for i in range(len(HOSTILE))])
def test_bad_attributes_and_bias_shapes_are_refused_naming_the_node(build, error, match):
    g = A.Graph("hostile")
    a, b, c = g.input("a", (3, 4)), g.input("b", (4, 5)), g.input("c", (5,))
    with pytest.raises(error, match=match) as info:
        build(g, a, b, c)
    assert "_epilogue node %" in str(info.value) and len(g) == len({n.id for n in g.nodes})


@pytest.mark.parametrize("act", sorted(ACTIVATIONS))
def test_numba_kernels_match_the_reference_across_gemm_tiles(act):
    """Shapes that cross the numba GEMM's 128-row tiles, 512-column panels and 256-deep k blocks."""
    rng = np.random.default_rng(0)
    a, b, bias = rng.normal(size=(2, 130, 300)), rng.normal(size=(300, 530)) / 10, rng.normal(size=(530,))
    x, w, c = rng.normal(size=(2, 3, 9, 9)), rng.normal(size=(5, 3, 3, 3)), rng.normal(size=(5,))
    for dtype, tol in (("float64", 1e-12), ("float32", 1e-5)):
        cases = [("matmul_epilogue", (a, b, bias), {"transpose_a": False, "transpose_b": False}),
                 ("conv2d_epilogue", (x, w, c), {"stride": (1, 1), "padding": (1, 1), "dilation": (1, 1), "groups": 1}),
                 ("conv2d_epilogue", (x, w), {"stride": (2, 2), "padding": (0, 0), "dilation": (1, 1), "groups": 1})]
        for op, arrays, attrs in cases:
            attrs = {**attrs, "activation": act}
            got = get_kernel(op, "numba")(*(arr.astype(dtype) for arr in arrays), **attrs)
            assert got.dtype == np.dtype(dtype)
            assert max_rel_err(got, OPS[op].ref(*arrays, **attrs)) < tol, (op, dtype)


def test_cuda_kernel_adds_each_column_s_bias_across_blocks():
    """20 columns span two 16-wide tiles: the second block must read bias[16:20] (simulator, tiny)."""
    rng = np.random.default_rng(1)
    a, b, bias = rng.normal(size=(3, 4)), rng.normal(size=(4, 20)), rng.normal(size=(20,))
    attrs = {"transpose_a": False, "transpose_b": False, "activation": "gelu"}
    got = get_kernel("matmul_epilogue", "cuda")(a, b, bias, **attrs)
    assert max_rel_err(got, OPS["matmul_epilogue"].ref(a, b, bias, **attrs)) < 1e-12


# ---- gradients ------------------------------------------------------------------------------

@pytest.mark.parametrize("model", ["mlp", "superres", "transformer_block"])
def test_training_a_fused_forward_graph_gives_the_unfused_gradients(model):
    """Fuse first, then differentiate: the fused ops' gradient rules (relu from the output, gelu from a
    rematerialized pre-activation, the bias summed over its broadcast axes) give the same gradients."""
    fwd = A.models.build(model, **{**SMALL[model], "dtype": "float64"})
    fused = optimize(fwd, [FUSE])
    assert _count(fused, *FUSED_OPS) > 0
    before, after = A.evaluate(A.training_graph(fwd)), A.evaluate(A.training_graph(fused))
    assert set(before) == set(after)
    for k, v in before.items():
        np.testing.assert_allclose(after[k], v, rtol=1e-9, atol=1e-12 * max(1.0, np.abs(v).max()), err_msg=k)


def test_gelu_gradient_rematerializes_the_pre_activation_and_matches_finite_differences():
    fused = fuse_epilogue(A.models.build("transformer_block", **{**TINY["transformer_block"], "dtype": "float64"}))
    (fc,) = [n for n in fused.nodes if n.op == "matmul_epilogue" and n.attrs["activation"] == "gelu"]
    train = A.training_graph(fused)
    remat = [n for n in train.nodes if n.phase == "backward" and n.op == "matmul_epilogue"]
    assert [(n.inputs, n.attrs["activation"]) for n in remat] == [(fc.inputs, "none")]
    report = grad_report(fused, fd_coords=6, use_torch=False)
    assert report["fd_max_rel_err"] < 1e-6 and report["nonfinite"] == []


# ---- the pass on the zoo ------------------------------------------------------------------

def _zoo(model: str, kind: str) -> A.Graph:
    fwd = A.models.build(model, **{**SMALL[model], "dtype": "float64"})
    if kind == "train":
        return A.training_graph(fwd)
    g = freeze_batchnorm(inference_graph(fwd))
    return optimize(g, ["fold_batchnorm"]) if model.startswith("resnet") else g


# (model, kind, nodes removed, fused nodes), counted from the builders: a fused place drops its GEMM, bias
# add and activation but for one node, and the conv layer's reshape of its bias (the fused op reads the
# (C,) parameter). In a training graph relu's and gelu's pre-activation is read by their backward rules,
# so those places stop at the bias.
ZOO = [
    ("superres", "inf", 3 * 3 + 2, 4),  # conv1-3 + reshape(b) + add + relu; conv4 + reshape(b) + add
    ("superres", "train", 4 * 2, 4),  # conv + reshape(b) + add, four times
    ("resnet_block", "inf", 2 + 1, 2),  # folded conv1 + bias + relu (a (C,) const replaces the (1,C,1,1)); conv2 + bias
    ("transformer_block", "inf", 6 + 1, 6),  # q, k, v, proj, fc, mlp_proj + bias; fc's gelu
    ("transformer_block", "train", 6, 6),
    ("gpt2", "inf", SMALL["gpt2"]["layers"] * 7, SMALL["gpt2"]["layers"] * 6),
    ("gpt2", "train", SMALL["gpt2"]["layers"] * 6, SMALL["gpt2"]["layers"] * 6),
    ("mlp", "inf", 2 + 1, 2),
]


@pytest.mark.parametrize("model,kind,removed,fused", ZOO, ids=[f"{m}-{k}" for m, k, _, _ in ZOO])
def test_pass_fuses_zoo_models_keeping_every_output_with_fewer_nodes_and_bytes(model, kind, removed, fused):
    g = _zoo(model, kind)
    out, log = optimize_with_log(g, [FUSE])  # refuses any output off by more than 1e-9 relative
    (rec,) = log.records
    assert rec.status == "applied" and rec.max_error_ratio is not None and rec.max_error_ratio <= 1.0
    assert len(out) == len(g) - removed and _count(out, *FUSED_OPS) == fused == len(rec.rewrites)
    assert rec.bytes_after < rec.bytes_before and rec.flops_after == rec.flops_before
    assert all(" -> " in line and line.startswith("%") for line in rec.rewrites)
    if kind == "train":  # gradients and updates element by element, not only the outputs the check compares
        before, after = A.evaluate(g), A.evaluate(out)
        for k, v in before.items():
            np.testing.assert_allclose(after[k], v, rtol=1e-9, atol=1e-12 * max(1.0, np.abs(v).max()), err_msg=k)


def test_a_training_graph_without_biases_between_gemm_and_activation_is_unchanged():
    g = _zoo("resnet_block", "train")  # conv (no bias) -> batch norm -> relu
    out, log = optimize_with_log(g, [FUSE])
    assert log.records[0].status == "unchanged" and out.dump() == g.dump()


@pytest.mark.parametrize("model", ["superres", "transformer_block"])
def test_the_matrix_unit_costs_the_fused_gemm_as_the_gemm_it_replaces(model):
    """Same compute cycles on groq_like's MXM; the fused op reads the bias besides and writes the same."""
    hw = A.load_hw("groq_like")
    g = A.models.build(model, **SMALL[model])
    out = fuse_epilogue(g)
    for place in find_places(g):
        fused = next(n for n in out.nodes if n.op in FUSED_OPS and n.name == place.gemm.name)
        (mxm,) = [u for u in capable_units(hw, g, place.gemm) if u.array is not None]
        assert mxm in capable_units(hw, out, fused)
        before, after = node_cost(hw, g, place.gemm, mxm), node_cost(hw, out, fused, mxm)
        bias_bytes = fused.shape[1 if fused.op == "conv2d_epilogue" else -1] * hw.elem_bytes(fused.dtype)
        assert after.compute_cycles == before.compute_cycles and after.flops > before.flops
        assert (after.bytes_read, after.bytes_written) == (before.bytes_read + bias_bytes, before.bytes_written)


@pytest.mark.parametrize("traffic", ["tile", "scalesim"])
def test_operand_buffers_stall_a_fused_matmul_as_the_plain_one(traffic):
    hw = A.load_hw({"name": "buffered", "clock_hz": "1 GHz", "chips": [{"name": "chip", "units": [
        {"name": "mxu", "categories": ["tensor"], "array": {"rows": 8, "cols": 8, "dataflow": "ws"},
         "operand_buffers": {"input_bytes": 512, "weight_bytes": 512, "output_bytes": 512,
                             "bandwidth_bytes_per_cycle": 4, "traffic": traffic},
         "reads": ["sram"], "writes": ["sram"]}],
        "memories": [{"name": "sram", "kind": "sram", "capacity_bytes": "1 MiB", "bandwidth_bytes_per_cycle": 64}]}]})
    g = A.Graph("mm")
    a, w, b = g.input("a", (40, 24)), g.param("w", (24, 20)), g.param("b", (20,))
    plain, fused = F.matmul(a, w), matmul_epilogue(a, w, b, activation="relu")
    mxu = hw.chips[0].units[0]
    before, after = node_cost(hw, g, plain.node, mxu), node_cost(hw, g, fused.node, mxu)
    assert (after.compute_cycles, after.stall_cycles, after.buffer_bytes) == (
        before.compute_cycles, before.stall_cycles, before.buffer_bytes)
    assert before.stall_cycles > 0  # the small buffers make the traffic model matter


# ---- sites, `only`, refusals -------------------------------------------------------------

def test_sites_are_the_gemms_and_only_fuses_the_chosen_ones():
    g = _zoo("transformer_block", "inf")
    whole = run(g)
    gemms = [p.gemm.id for p in find_places(g)]
    assert whole.sites == tuple(gemms) and len(gemms) == 6
    some = run(g, only=frozenset(gemms[::2]))
    assert some.sites == tuple(gemms[::2]) and len(some.rewrites) == 3
    assert _count(some.graph, "matmul_epilogue") == 3 and _count(some.graph, "matmul") == _count(g, "matmul") - 3
    none = run(g, only=frozenset())
    assert none.rewrites == () and none.graph.dump() == g.dump()
    assert run(g).graph.dump() == whole.graph.dump()  # deterministic


@pytest.mark.parametrize("only", [[1, 2], {"a"}, {True}, 3])
def test_only_must_be_a_set_of_node_ids(only):
    with pytest.raises(A.GraphError, match="only must be None or a set of node ids"):
        run(_chain(False), only=only)


def test_fusion_stops_before_an_intermediate_read_elsewhere():
    g = A.Graph("outputs", dtype="float64")
    x, w, b = g.input("x", (3, 4)), g.param("w", (4, 5)), g.param("b", (5,))
    pre = F.matmul(x, w) + b
    g.output("pre", pre)  # an output: the relu reads the fused node
    g.output("y", F.relu(pre))
    out = fuse_epilogue(g)
    (fused,) = [n for n in out.nodes if n.op == "matmul_epilogue"]
    assert fused.attrs["activation"] == "none" and len(fused.inputs) == 3
    assert out.nodes[out.outputs["y"]].op == "relu" and out.outputs["pre"] == fused.id


def test_per_channel_bias_forms_are_fused_and_others_are_not():
    g = A.Graph("forms", dtype="float64")
    x = g.input("x", (2, 3, 5, 5))
    convs = [F.conv2d(x, g.param("w1", (4, 3, 3, 3)), padding=1)]
    y = F.relu(convs[-1] + F.broadcast_to(F.reshape(g.param("b1", (4,)), (1, 4, 1, 1)), (2, 4, 5, 5)))
    convs.append(F.conv2d(y, g.param("w2", (4, 4, 3, 3)), padding=1))
    y = convs[-1] + g.param("b2", (1, 4, 1, 1))  # a (1, C, 1, 1) parameter: fed through a new reshape
    convs.append(F.conv2d(y, g.param("w3", (4, 4, 1, 1))))
    y = convs[-1] + g.param("b3", (5,))  # one value per column W, not per channel
    convs.append(F.conv2d(y, g.param("w4", (4, 4, 1, 1))))
    y = convs[-1] + F.exp(g.param("b4", (1, 4, 1, 1)))  # computed, not a leaf
    g.output("y", y)
    out, log = optimize_with_log(g, [FUSE])
    assert [n.name for n in out.nodes if n.op == "conv2d_epilogue"] == [c.node.name for c in convs[:2]]
    assert len(log.records[0].rewrites) == 2
    reshaped = [n for n in out.nodes if n.op == "reshape"]
    assert [(out.nodes[n.inputs[0]].name, n.shape) for n in reshaped] == [("b2", (4,))]


def test_a_fused_node_the_phase_rules_refuse_leaves_the_chain_as_it_was():
    g = A.Graph("phases", dtype="float64")
    x, w, b = g.input("x", (3, 4)), g.param("w", (4, 5)), g.param("b", (5,))
    y = F.relu(F.matmul(x, w) + b)
    with g.phase("update"):  # an update node reading a forward one: no node may take the relu's place
        g.output("z", y * 2.0)
    out, log = optimize_with_log(g, [FUSE])
    assert log.records[0].status == "unchanged" and out.dump() == g.dump()


# ---- end to end ----------------------------------------------------------------------------

@pytest.mark.parametrize("model,train", [("superres", False), ("transformer_block", True)])
def test_a_fused_graph_compiles_and_checks_on_groq_like(model, train):
    hw = A.load_hw("groq_like")
    g = A.models.build(model, **TINY[model])
    g = optimize(A.training_graph(g) if train else g, [FUSE], hw=hw)
    assert _count(g, *FUSED_OPS) > 0
    sched = A.compile(g, hw)
    assert any(t.kind == "node" and g.nodes[t.node].op in FUSED_OPS for t in sched.tasks)
    report = A.check(sched, graph=g, hw=hw)
    assert report.passed, report.failures


def test_the_pass_is_skipped_naming_the_op_where_no_unit_runs_it():
    """bespoke_superres lists conv2d by name for its conv units: no unit runs conv2d_epilogue."""
    g = A.models.build("superres", **TINY["superres"])
    out, log = optimize_with_log(g, [FUSE], hw="bespoke_superres")
    (rec,) = log.records
    assert rec.status == "skipped" and "bespoke_superres" in rec.reason and "conv2d_epilogue" in rec.reason
    assert out.dump() == g.dump()
