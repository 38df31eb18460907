"""Multi-tensor optimizer updates (fused_adam, fused_sgd) and the fuse_optimizer pass.

Oracle: training_graph's unfused update. The fused references and the numba kernels compute its
expression tree operation by operation in the graph's dtype, so a fused step equals the unfused one to
the last bit (float64 and float32); a CUDA kernel may contract a multiply-add on a GPU (one rounding),
so it is held to a few units in the last place.
"""
from __future__ import annotations

import numpy as np
import pytest

import accelsim as A
from accelsim.evaluate import evaluate
from accelsim.kernels import get_kernel
from accelsim.ops import OPS
from accelsim.passes.fuse_optimizer import run as fuse_optimizer

X4 = "hwconfigs/groq_like_x4.yaml"


def gpt2_step(optimizer: str, dtype: str = "float64"):
    return A.training_graph(A.models.build("gpt2", **{**A.models.sizes.SMALL["gpt2"], "dtype": dtype}),
                            optimizer=optimizer)


def adam_inputs(rng: np.random.Generator, dtype: str, shapes=((3, 4), (7,), (2, 2, 2))) -> list[np.ndarray]:
    out = []
    for s in shapes:
        out += [rng.normal(size=s), rng.normal(size=s), rng.normal(size=s) * 0.1, np.abs(rng.normal(size=s)) * 0.01]
    return [a.astype(dtype) for a in out]


HYPER = {"lr": 3e-4, "beta1": 0.9, "beta2": 0.95, "eps": 1e-8, "step": 3}


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_fused_adam_equals_the_unfused_update_bit_for_bit_at_any_step_and_betas(dtype):
    """The unfused update as evaluate runs it (one registry ref per node, constants in the graph dtype)."""
    model = A.models.build("mlp", **{**A.models.sizes.SMALL["mlp"], "dtype": dtype})
    step = A.training_graph(model, optimizer="adam", **HYPER)
    fused = fuse_optimizer(step).graph
    assert any(n.op == "fused_adam" for n in fused.nodes)
    before, after = evaluate(step), evaluate(fused)
    for name in before:
        assert np.array_equal(before[name], after[name]), name


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("name", ["fused_adam", "fused_sgd"])
def test_cpu_kernel_equals_the_reference_bit_for_bit(name, dtype):
    rng = np.random.default_rng(1)
    xs = adam_inputs(rng, dtype) if name == "fused_adam" else [rng.normal(size=(5, 3)).astype(dtype)
                                                                 for _ in range(4)]
    attrs = HYPER if name == "fused_adam" else {"lr": 0.01}
    got = get_kernel(name, "numba")(*xs, **attrs)
    assert got.dtype == np.dtype(dtype) and np.array_equal(got, OPS[name].ref(*xs, **attrs))


@pytest.mark.parametrize("name", ["fused_adam", "fused_sgd", "multi_tensor_part"])
def test_cuda_kernel_is_within_one_fused_multiply_add_of_the_reference(name):
    rng = np.random.default_rng(2)
    if name == "multi_tensor_part":
        xs, attrs = [rng.normal(size=(12,))], {"offset": 5, "shape": (2, 3)}
    elif name == "fused_adam":
        xs, attrs = adam_inputs(rng, "float64", ((4,), (3,))), HYPER
    else:
        xs, attrs = [rng.normal(size=(6,)) for _ in range(2)], {"lr": 0.1}
    got, want = get_kernel(name, "cuda")(*xs, **attrs), OPS[name].ref(*xs, **attrs)
    eps = np.finfo(np.float64).eps
    np.testing.assert_allclose(got, want, rtol=4 * eps, atol=4 * eps * np.abs(want).max())


def test_fused_adam_is_costed_as_one_read_of_w_g_m_v_and_one_write_of_w_m_v():
    shapes = [(3, 4)] * 4 + [(7,)] * 4
    out = OPS["fused_adam"].infer(*shapes, **HYPER)
    assert out == (3 * 19,)
    assert OPS["fused_adam"].read_elems(out, *shapes, **HYPER) == 4 * 19
    assert OPS["fused_adam"].written_elems(out, *shapes, **HYPER) == 3 * 19
    part = OPS["multi_tensor_part"]
    assert part.read_elems((2, 3), out, offset=0, shape=(2, 3)) == 0 == part.written_elems((2, 3), out, offset=0,
                                                                                            shape=(2, 3))


@pytest.mark.parametrize("optimizer, ops_per_param", [("adam", 14), ("sgd", 2)])
def test_pass_fuses_each_layer_update_and_keeps_every_output_bit_for_bit(optimizer, ops_per_param):
    step = gpt2_step(optimizer)
    result = fuse_optimizer(step)
    fused = result.graph
    params = [p for p in step.params if p.attrs.get("trainable", True)]
    layers = {p.name.split(".")[0] for p in params}
    update_ops = [n.op for n in fused.nodes if n.phase == "update" and n.op != "param"]
    assert update_ops.count(f"fused_{optimizer}") == len(layers)
    assert set(update_ops) == {f"fused_{optimizer}", "multi_tensor_part"}
    removed = sum(1 for n in step.nodes if n.phase == "update" and n.op not in ("param", "const"))
    assert removed == ops_per_param * len(params)
    assert len(result.rewrites) == len(params) * (3 if optimizer == "adam" else 1)
    before, after = evaluate(step), evaluate(fused)
    assert before.keys() == after.keys()
    for name in before:
        assert np.array_equal(before[name], after[name]), name


def test_pass_through_optimize_then_compile_and_check_with_numba():
    step = gpt2_step("adam", "float32")
    fused = A.optimize(step, ["fuse_optimizer"])
    sched = A.compile(fused, X4, data_parallel=2, microbatches=2)
    updates = [t for t in sched.tasks if t.kind == "node" and t.phase == "update"]
    assert {t.op for t in updates} == {"fused_adam", "multi_tensor_part"}
    result = A.check(sched)
    assert result.passed, result


def test_pass_leaves_momentum_and_hand_built_updates_alone():
    step = gpt2_step("momentum")
    assert fuse_optimizer(step).rewrites == ()
    g = A.Graph("hand")
    w = g.param("w", (3,))
    g.output("w.new", w * 2.0)
    assert fuse_optimizer(g).rewrites == ()
