"""fused_elementwise (one node running a program of elementwise ops) and the fuse_elementwise pass:
the op's shapes, FLOPs, bytes and refusals, its kernels against the numpy reference, its gradient,
and the pass on hand-built graphs and zoo models (same numbers, fewer nodes and bytes, equal FLOPs)."""
from fractions import Fraction

import numpy as np
import pytest

import accelsim as A
from accelsim import ops as F
from accelsim.compare import first_mismatch, max_rel_err
from accelsim.cost.model import best_cost
from accelsim.gradcheck import finite_difference_grads
from accelsim.graph.verify import verify
from accelsim.kernels import get_kernel
from accelsim.models.sizes import SMALL
from accelsim.ops import OPS
from accelsim.ops.fused import INSTRUCTIONS, MAX_SLOTS, SEED_PROGRAM, fused_elementwise, render_program
from accelsim.passes import PassDef, inference_graph, optimize, optimize_with_log
from accelsim.passes.fuse_elementwise import fuse_elementwise, run

FUSE = PassDef("fuse_elementwise", run, ("inference", "training"), "elementwise trees -> one fused node", sited=True)
TOL = {"float32": 1e-4, "float64": 1e-10}
POSITIVE = {"log", "sqrt", "pow"}  # instruction ops whose reference needs positive inputs


def _seed(n: int = 6, dtype: str = "float64") -> A.Graph:
    """The seed's E = D + (A + B) * C on vectors of n elements."""
    g = A.Graph("seed", dtype=dtype)
    a, b, c, d = (g.input(name, (n,)) for name in "ABCD")
    g.output("E", d + (a + b) * c)
    return g


def _compute(g: A.Graph) -> list:
    return [n for n in g.nodes if not n.is_leaf]


def _elems(g: A.Graph, node) -> tuple[int, int, int]:
    """(flops, elements read, elements written) of a node, from its registry entry."""
    op, ins = OPS[node.op], tuple(g.nodes[i].shape for i in node.inputs)
    return (op.flops(node.shape, *ins, **node.attrs), op.read_elems(node.shape, *ins, **node.attrs),
            op.written_elems(node.shape, *ins, **node.attrs))


def _intensity(g: A.Graph, node) -> Fraction:
    """Arithmetic intensity in ops per element moved."""
    flops, read, written = _elems(g, node)
    return Fraction(flops, read + written)


# ---- the seed's worked example ---------------------------------------------------------------

def test_seed_example_fusion_raises_arithmetic_intensity_from_one_third_to_three_fifths():
    n = 1000
    g = _seed(n)
    unfused = _compute(g)
    assert [node.op for node in unfused] == ["add", "mul", "add"]
    assert all(_intensity(g, node) == Fraction(1, 3) for node in unfused)
    fused_graph = fuse_elementwise(g)
    (fused,) = _compute(fused_graph)
    assert fused.op == "fused_elementwise"
    assert _intensity(fused_graph, fused) == Fraction(3, 5)
    assert _elems(fused_graph, fused) == (3 * n, 4 * n, n)  # the chain's 3n FLOPs, 5n elements instead of 9n
    assert sum(sum(_elems(g, node)[1:]) for node in unfused) == 9 * n
    np.testing.assert_array_equal(A.evaluate(fused_graph)["E"], A.evaluate(g)["E"])


def test_seed_example_on_a_vector_unit_moves_fewer_bytes_for_the_same_flops():
    hw = A.load_hw("groq_like")
    g = _seed(4096, dtype="float32")
    chain = [best_cost(hw, g, node) for node in _compute(g)]
    fused_graph = fuse_elementwise(g)
    (fused,) = [best_cost(hw, fused_graph, node) for node in _compute(fused_graph)]
    elem = hw.elem_bytes("float32")
    assert fused.flops == sum(c.flops for c in chain)
    assert fused.bytes_read + fused.bytes_written == 5 * 4096 * elem
    assert sum(c.bytes_read + c.bytes_written for c in chain) == 9 * 4096 * elem
    assert all(c.arithmetic_intensity == pytest.approx(1 / (3 * elem)) for c in chain)
    assert fused.arithmetic_intensity == pytest.approx(3 / (5 * elem))


def test_the_rewrite_line_names_the_root_and_shows_the_expression():
    g = _seed()
    rw = run(g)
    root = g.outputs["E"]
    (line,) = rw.rewrites
    assert line.startswith(f"%{root} add ")
    assert line.endswith("%3 + (%0 + %1) * %2")  # D + (A + B) * C with the inputs' source ids
    assert rw.sites == (root,)
    assert render_program(SEED_PROGRAM) == "%0 + (%1 + %2) * %3"


# ---- the op ----------------------------------------------------------------------------------

def test_inputs_broadcast_numpy_style_and_each_input_is_read_once():
    g = A.Graph("b", dtype="float64")
    x, col, s = g.input("x", (3, 4)), g.input("col", (3, 1)), g.input("s", ())
    y = fused_elementwise(x, col, s, program=(("mul", 0, 2), ("add", 3, 1), ("tanh", 4)))
    assert y.shape == (3, 4) and y.dtype == "float64"
    assert _elems(g, y.node) == (3 * 12, 12 + 3 + 1, 12)
    g.output("y", y)
    vals = {n.name: g.leaf_value(n.id) for n in g.inputs}
    np.testing.assert_array_equal(A.evaluate(g)["y"], np.tanh(vals["x"] * vals["s"] + vals["col"]))


def test_a_fused_instruction_counts_the_flops_of_its_op():
    out = (2, 5)
    for name, spec in INSTRUCTIONS.items():
        params = (2.5,) if spec.params else ()
        program = ((name, *range(spec.arity), *params),)
        ins = (out,) * spec.arity
        expected = OPS[name].flops(out, *ins, **dict(zip(spec.params, params)))
        assert OPS["fused_elementwise"].flops(out, *ins, program=program) == expected, name


def test_lists_and_numpy_numbers_are_made_canonical_by_the_builder():
    g = A.Graph("c")
    x, y = g.input("x", (3,)), g.input("y", (3,))
    v = fused_elementwise(x, y, program=[["add", np.int64(0), 1], ["pow", 2, np.float32(3)]])
    assert v.node.attrs["program"] == (("add", 0, 1), ("pow", 2, 3.0))
    assert type(v.node.attrs["program"][1][1]) is int and type(v.node.attrs["program"][1][2]) is float


HOSTILE = [
    ((("exp", 0), ("foo", 2)), "instruction 1 ('foo', 2): unknown op 'foo'"),
    ((("add", 0, 5),), "slot 5 is not an earlier slot"),
    ((("add", 0, 1), ("mul", 2, 3)), "instruction 1 ('mul', 2, 3): slot 3 is not an earlier slot"),
    ((("add", 0, -1),), "slot -1 is not an earlier slot"),
    ((("add", 0),), "add takes 2 operand slot(s), got 1 item(s)"),
    ((("exp", 0, 1),), "exp takes 1 operand slot(s), got 2 item(s)"),
    ((("pow", 0),), "pow takes 1 operand slot(s) then exponent"),
    ((("pow", 0, float("nan")), ("add", 2, 1)), "exponent must be a finite number, got nan"),
    ((("pow", 0, float("inf")), ("add", 2, 1)), "exponent must be a finite number, got inf"),
    ((("pow", 0, "2"), ("add", 2, 1)), "exponent must be a finite number, got '2'"),
    ((("pow", 0, True), ("add", 2, 1)), "exponent must be a finite number, got True"),
    ((), "program is empty"),
    ((("exp", 0),), "never reads slot 1 (input 1)"),
    ((("exp", 0), ("add", 0, 1)), "never reads slot 2 (the result of instruction 0 ('exp', 0))"),
    (tuple(("neg", 0) for _ in range(10**6)), f"uses 1000002 slots; at most {MAX_SLOTS}"),
    ((("add", 0, True),), "slot True is not an int"),
    ((("add", 0, 1.0),), "slot 1.0 is not an int"),
    (((1, 0, 1),), "unknown op 1"),
    (("add",), "instruction 0 must be a non-empty tuple"),
    (((),), "instruction 0 must be a non-empty tuple"),
    ("add", "program must be a tuple of instruction tuples, got str"),
    (None, "program must be a tuple of instruction tuples, got NoneType"),
    ({"add": (0, 1)}, "program must be a tuple of instruction tuples, got dict"),
]


@pytest.mark.parametrize("program,expected", HOSTILE, ids=[f"hostile{k}" for k in range(len(HOSTILE))])
def test_a_hostile_program_is_refused_in_one_paragraph_naming_the_node_and_the_problem(program, expected):
    g = A.Graph("h")
    x, y = g.input("x", (3,)), g.input("y", (3,))
    with pytest.raises(A.ShapeError) as e:
        F.apply("fused_elementwise", x, y, program=program)
    msg = str(e.value)
    assert msg.startswith("fused_elementwise node %2: program") and expected in msg, msg
    assert "\n" not in msg and len(msg) < 400
    assert len(g) == 2  # nothing was added


@pytest.mark.parametrize("program,expected", [
    ([["foo", 0]], "unknown op 'foo'"), ([[["exp"], 0]], "unknown op ['exp']"),
    ([("exp", 0), 7], "instruction 1 must be a non-empty tuple")])
def test_the_builder_refuses_what_apply_refuses(program, expected):
    g = A.Graph("h")
    x = g.input("x", (3,))
    with pytest.raises(A.ShapeError) as e:
        fused_elementwise(x, program=program)
    assert expected in str(e.value)


def test_instruction_shapes_come_from_each_ops_own_inference():
    g = A.Graph("s")
    x, y = g.input("x", (3,)), g.input("y", (4,))
    with pytest.raises(A.ShapeError, match=r"instruction 0 \('add', 0, 1\): shapes \(3,\) and \(4,\) do not broadcast"):
        fused_elementwise(x, y, program=(("add", 0, 1),))
    z = g.input("z", (2, 1))
    with pytest.raises(A.ShapeError, match=r"instruction 0 \('relu_grad', 0, 1\): inputs must have the same shape"):
        fused_elementwise(x, z, program=(("relu_grad", 0, 1),))


def test_missing_or_extra_attributes_are_graph_errors_naming_the_node():
    g = A.Graph("a")
    x = g.input("x", (3,))
    with pytest.raises(A.GraphError, match=r"fused_elementwise node %1: bad attributes .*program"):
        F.apply("fused_elementwise", x)
    with pytest.raises(A.GraphError, match=r"fused_elementwise node %1: bad attributes .*scale"):
        F.apply("fused_elementwise", x, program=(("exp", 0),), scale=2.0)


def test_verify_refuses_a_fused_node_whose_program_was_tampered_with():
    from dataclasses import replace

    g = _seed()
    fused = fuse_elementwise(g)
    node = fused.nodes[-1]
    fused.nodes[-1] = replace(node, attrs={"program": (("add", 1, 2), ("mul", 4, 9), ("add", 0, 5))})
    with pytest.raises(A.GraphError, match=r"slot 9 is not an earlier slot"):
        verify(fused)


def test_a_gradient_through_an_instruction_without_a_gradient_rule_is_refused_by_name():
    g = A.Graph("ng", dtype="float64")
    gin, x = g.input("g", (3,)), g.param("x", (3,))
    y = fused_elementwise(gin, x, program=(("mul", 0, 1), ("relu_grad", 2, 1)))
    g.set_loss(F.sum(y))
    with pytest.raises(A.GraphError) as e:
        A.gradients(g, g.loss, [x.id])
    msg = str(e.value)
    assert msg.startswith(f"fused_elementwise node %{y.id} ")
    assert "instruction 1 ('relu_grad', 2, 1), but relu_grad has no gradient rule" in msg


# ---- kernels ----------------------------------------------------------------------------------

def _one_instruction_case(name: str, shape: tuple, rng: np.random.Generator) -> tuple:
    spec = INSTRUCTIONS[name]
    low = 0.5 if name in POSITIVE else -2.0
    # a binary op broadcasts its second operand along the rows (relu_grad and friends take equal shapes)
    shapes = [shape] if spec.arity == 1 else [shape, shape if name.endswith("_grad") else shape[-1:]]
    arrays = tuple(rng.uniform(low, 2.0, size=s) for s in shapes)
    program = ((name, *range(spec.arity), *((1.5,) if spec.params else ())),)
    return arrays, program


def _check_kernel(backend: str, arrays: tuple, program: tuple) -> None:
    kern = get_kernel("fused_elementwise", backend)
    expected = OPS["fused_elementwise"].ref(*arrays, program=program)
    for dtype in ("float64", "float32"):
        got = kern(*(np.asarray(a, dtype) for a in arrays), program=program)
        assert got.shape == expected.shape and got.dtype == np.dtype(dtype)
        err = max_rel_err(got, expected)
        assert err < TOL[dtype], f"{backend} {dtype} {program}: {err:.2e} {first_mismatch(got, expected, TOL[dtype])}"


@pytest.mark.parametrize("backend,shape", [("numba", (3, 7)), ("cuda", (2, 3))])
@pytest.mark.parametrize("name", sorted(INSTRUCTIONS))
def test_each_instruction_on_each_backend_matches_its_ops_reference(name, backend, shape):
    arrays, program = _one_instruction_case(name, shape, np.random.default_rng(3))
    _check_kernel(backend, arrays, program)


BACKWARD_PROGRAM = (("mul", 0, 1), ("relu_grad", 3, 2), ("tanh", 2), ("tanh_grad", 4, 5), ("sigmoid", 2),
                    ("sigmoid_grad", 6, 7), ("gelu_grad", 8, 2))


@pytest.mark.parametrize("backend", ["numba", "cuda"])
def test_a_program_with_backward_instructions_and_shared_slots_matches_the_reference(backend):
    rng = np.random.default_rng(4)
    arrays = (rng.normal(size=(2, 3)), rng.normal(size=(2, 3)), rng.normal(size=(2, 3)))
    _check_kernel(backend, arrays, BACKWARD_PROGRAM)


@pytest.mark.parametrize("backend", ["numba", "cuda"])
def test_scalar_and_empty_outputs(backend):
    _check_kernel(backend, (np.array(1.5), np.array(-0.5)), (("mul", 0, 1), ("exp", 2)))
    _check_kernel(backend, (np.zeros((0, 3)), np.ones(3)), (("add", 0, 1),))


def test_numba_kernel_on_long_broadcast_rows_crosses_block_and_task_boundaries():
    rng = np.random.default_rng(5)
    x, bias, col = rng.normal(size=(3, 40_000)), rng.normal(size=40_000), rng.normal(size=(3, 1))
    _check_kernel("numba", (x, bias, col), (("add", 0, 1), ("gelu", 3), ("mul", 4, 2), ("sub", 5, 0)))
    _check_kernel("numba", (bias[:257], x[:, :257].copy()), (("sub", 1, 0), ("square", 2)))


def test_nonfinite_values_follow_numpy():
    x = np.array([0.0, -1.0, np.inf, np.nan, 1.0])
    got = get_kernel("fused_elementwise", "numba")(x, program=(("log", 0), ("div", 1, 0), ("neg", 2)))
    with np.errstate(all="ignore"):
        expected = OPS["fused_elementwise"].ref(x, program=(("log", 0), ("div", 1, 0), ("neg", 2)))
    np.testing.assert_array_equal(got, expected)


# ---- gradients ---------------------------------------------------------------------------------

def test_gradients_of_a_pass_built_program_match_central_finite_differences():
    g = A.Graph("fd", dtype="float64")
    x, w, b = g.input("x", (3, 4)), g.param("w", (3, 4)), g.param("b", (4,))
    y = F.gelu(x * w + b) * F.tanh(w) - F.sigmoid(x) / F.exp(b)
    g.set_loss(F.sum(y * y))
    fused = fuse_elementwise(g)
    assert sum(n.op == "fused_elementwise" for n in fused.nodes) == 1
    assert len(fused) < len(g)
    grads = A.gradients(fused, fused.loss, [fused.by_name("w").id, fused.by_name("b").id])
    for name in ("w", "b"):
        fused.output(f"d{name}", grads[fused.by_name(name).id])
    feeds = {n.name: fused.leaf_value(n.id) for n in fused.nodes if n.op in ("input", "param")}
    got = A.evaluate(fused, feeds)
    fd = finite_difference_grads(fused, "loss", ["w", "b"], feeds)
    for name in ("w", "b"):
        idx, expected = fd[name]
        assert max_rel_err(got[f"d{name}"].reshape(-1)[idx], expected) < 1e-6, name


@pytest.mark.parametrize("model", ["transformer_block", "superres"])
def test_training_a_fused_forward_graph_gives_the_unfused_gradients_and_updates(model):
    fwd = A.models.build(model, **{**SMALL[model], "dtype": "float64"})
    fused_fwd = optimize(fwd, [FUSE])
    assert any(n.op == "fused_elementwise" for n in fused_fwd.nodes)
    before, after = A.evaluate(A.training_graph(fwd)), A.evaluate(A.training_graph(fused_fwd))
    assert set(before) == set(after)
    for k, v in before.items():
        np.testing.assert_allclose(after[k], v, rtol=1e-12, atol=1e-14 * max(1.0, np.abs(v).max()), err_msg=k)


# ---- the pass -----------------------------------------------------------------------------------

def _zoo(model: str, kind: str) -> A.Graph:
    fwd = A.models.build(model, **{**SMALL[model], "dtype": "float64"})
    return inference_graph(fwd) if kind == "inf" else A.training_graph(fwd)


ZOO = [("transformer_block", "inf"), ("transformer_block", "train"), ("gpt2", "train"), ("superres", "inf"),
       ("superres", "train"), ("resnet_block", "train")]


@pytest.mark.parametrize("model,kind", ZOO, ids=[f"{m}-{k}" for m, k in ZOO])
def test_pass_on_zoo_graphs_keeps_results_and_flops_with_fewer_nodes_and_bytes(model, kind):
    g = _zoo(model, kind)
    out, log = optimize_with_log(g, [FUSE, FUSE])  # verify=True: every output to 1e-9 relative in float64
    first, second = log.records
    assert first.status == "applied" and first.max_error_ratio is not None and first.max_error_ratio <= 1.0
    fused = [n for n in out.nodes if n.op == "fused_elementwise"]
    assert len(fused) == len(first.rewrites)
    assert first.nodes_after < first.nodes_before
    assert first.bytes_after < first.bytes_before
    assert first.flops_after == first.flops_before
    assert all(len(n.inputs) + len(n.attrs["program"]) <= MAX_SLOTS for n in fused)
    assert second.status == "unchanged"  # the groups were maximal


def test_only_fuses_the_groups_whose_roots_it_names():
    g = _zoo("transformer_block", "train")
    full = run(g)
    assert len(full.sites) == len(full.rewrites) >= 3
    pick = frozenset(full.sites[1:3])
    part = run(g, only=pick)
    assert part.sites == tuple(sorted(pick)) and len(part.rewrites) == 2
    assert all(line.startswith(tuple(f"%{i} " for i in pick)) for line in part.rewrites)
    assert run(g, only=frozenset()).rewrites == ()
    assert run(g, only=frozenset(full.sites)).graph.dump() == full.graph.dump()
    some = PassDef("fuse_some", lambda graph: run(graph, only=pick), ("inference", "training"), "test only")
    out, log = optimize_with_log(g, [some])
    assert log.records[0].status == "applied" and sum(n.op == "fused_elementwise" for n in out.nodes) == 2


def test_only_must_be_a_set_of_node_ids():
    with pytest.raises(A.GraphError, match="only must be a frozenset of node ids"):
        run(_seed(), only=[3])


def test_outputs_and_values_read_elsewhere_stay_materialised():
    g = A.Graph("m", dtype="float64")
    x, w = g.input("x", (4,)), g.param("w", (4,))
    h = x * w  # relu's gradient reads it in the training graph
    shown = F.exp(h)  # a graph output
    g.output("shown", shown)
    g.set_loss(F.sum(F.relu(h) * shown))
    train = A.training_graph(g)
    out = fuse_elementwise(train)
    kept = {(n.op, n.phase) for n in out.nodes}
    assert ("mul", "forward") in kept and ("exp", "forward") in kept
    a, b = A.evaluate(train), A.evaluate(out)
    for k in a:
        np.testing.assert_allclose(b[k], a[k], rtol=1e-12, err_msg=k)


def test_a_broadcast_producer_stays_outside_so_nothing_is_recomputed():
    g = A.Graph("bc", dtype="float64")
    x, b = g.input("x", (3, 4)), g.param("b", (4,))
    g.output("y", F.exp(b) + x)
    assert run(g).rewrites == ()


def test_a_value_read_twice_inside_a_group_is_computed_once():
    g = A.Graph("dag", dtype="float64")
    x, y = g.input("x", (4,)), g.input("y", (4,))
    t = F.exp(x * y)
    g.output("z", t * t + F.sin(t) - y)
    out = fuse_elementwise(g)
    (node,) = _compute(out)
    assert [ins[0] for ins in node.attrs["program"]] == ["mul", "exp", "mul", "sin", "add", "sub"]
    np.testing.assert_array_equal(A.evaluate(out)["z"], A.evaluate(g)["z"])


def test_existing_fused_nodes_are_absorbed_and_flattened():
    g = A.Graph("nest", dtype="float64")
    x, y = g.input("x", (5,)), g.input("y", (5,))
    inner = fused_elementwise(x, y, program=(("mul", 0, 1), ("tanh", 2)))
    g.output("z", F.sqrt(F.square(inner) + 1.0) - x)
    out = fuse_elementwise(g)
    (node,) = _compute(out)
    assert node.op == "fused_elementwise"
    assert [ins[0] for ins in node.attrs["program"]] == ["mul", "tanh", "square", "add", "sqrt", "sub"]
    np.testing.assert_array_equal(A.evaluate(out)["z"], A.evaluate(g)["z"])


def test_a_long_chain_is_cut_into_groups_that_fit_the_kernels_scratch():
    g = A.Graph("long", dtype="float64")
    v = g.input("x", (8,))
    for k in range(150):
        v = F.sin(v) if k % 2 else v * 0.99
    g.output("y", v)
    out, log = optimize_with_log(g, [FUSE])
    assert log.records[0].status == "applied"
    fused = [n for n in out.nodes if n.op == "fused_elementwise"]
    assert len(fused) >= 3
    assert all(len(n.inputs) + len(n.attrs["program"]) <= MAX_SLOTS for n in fused)


def test_a_fused_graph_compiles_and_checks_end_to_end_on_groq_like():
    hw = A.load_hw("groq_like")
    fwd = A.models.build("mlp", **SMALL["mlp"])
    for g in (inference_graph(fwd), A.training_graph(fwd)):
        fused = optimize(g, [FUSE], hw=hw)
        assert any(n.op == "fused_elementwise" for n in fused.nodes)
        sched = A.compile(fused, hw)
        assert A.check(sched, graph=fused, hw=hw).passed


def test_on_a_machine_whose_units_list_ops_by_name_the_pass_is_skipped_with_the_reason():
    fwd = A.models.build("superres", **SMALL["superres"])
    g = A.training_graph(fwd)
    out, log = optimize_with_log(g, [FUSE], hw="bespoke_superres")
    (rec,) = log.records
    assert rec.status == "skipped" and rec.rewrites
    assert "no unit of bespoke_superres runs fused_elementwise node" in rec.reason
    assert out.dump() == g.dump()
