"""Mixed precision as a step option: tensor bytes and unit rates by precision, ZeRO's coefficients, refusals,
and `check` emulating the storage format's rounding."""
import argparse

import numpy as np
import pytest

import accelsim as A
from accelsim.cli.step_flags import add_step_flags, step_options
from accelsim.execute import check
from accelsim.execute.check import tolerance
from accelsim.execute.rounding import UNIT_ROUNDOFF, round_to
from accelsim.hw.peaks import STEP_PRECISIONS
from accelsim.hw.precision import at_precision, tensor_bytes
from accelsim.model_states import ModelStateBytes, model_state_kinds
from accelsim.models.sizes import SMALL
from accelsim.schedule.options import StepOptions


def _adam_step(model: str = "mlp") -> A.Graph:
    return A.training_graph(A.models.build(model, **SMALL[model]), optimizer="adam", lr=0.01)


# ---- options and flags -----------------------------------------------------------------------------


def test_a_bad_precision_word_is_refused_naming_the_value_and_the_choices():
    with pytest.raises(A.ScheduleError) as e:
        StepOptions.of(precision="bf15")
    assert "bf15" in str(e.value) and all(p in str(e.value) for p in STEP_PRECISIONS)


def test_the_precision_flag_sets_the_option_and_refuses_other_words(capsys):
    p = argparse.ArgumentParser()
    add_step_flags(p)
    assert step_options(p.parse_args(["--precision", "bf16"])).precision == "bf16"
    assert step_options(p.parse_args([])).precision is None
    with pytest.raises(SystemExit):
        p.parse_args(["--precision", "int4"])
    err = capsys.readouterr().err
    assert "int4" in err and "fp8" in err


def test_the_default_precision_is_left_out_of_a_schedules_options():
    assert "precision" not in StepOptions().model_dump()
    assert StepOptions.of(precision="bf16").model_dump()["precision"] == "bf16"


# ---- bytes -----------------------------------------------------------------------------------------


def test_bf16_halves_activation_and_gradient_bytes_but_not_optimizer_state():
    graph = _adam_step()
    hw = A.load_hw("a100_like")
    fp32, bf16 = at_precision(hw, "fp32"), at_precision(hw, "bf16")
    kinds = model_state_kinds(graph)
    activations = [n for n in graph.nodes if n.phase == "forward" and not n.is_leaf]
    states = [graph.nodes[i] for i, k in kinds.items() if k == "optimizer_state"]
    grads = [graph.nodes[i] for i, k in kinds.items() if k == "gradient"]
    weights = [graph.nodes[i] for i, k in kinds.items() if k == "param"]
    assert activations and states and grads and weights
    for n in activations + grads:
        assert tensor_bytes(graph, n, bf16) * 2 == tensor_bytes(graph, n, fp32)
    for n in states:
        assert tensor_bytes(graph, n, bf16) == tensor_bytes(graph, n, fp32) == 4 * n_elems(n)
    for n in weights:  # the fp32 master and its bf16 working copy
        assert tensor_bytes(graph, n, bf16) == (4 + 2) * n_elems(n)
        assert tensor_bytes(graph, n, fp32) == 4 * n_elems(n)


def n_elems(node) -> int:
    return int(np.prod(node.shape))


def test_a_compiled_bf16_step_places_activations_in_half_the_bytes_and_optimizer_state_in_the_same():
    graph = A.training_graph(A.models.build("mlp", batch=64, sizes=(256, 256, 16)), optimizer="adam", lr=0.01)
    hw = A.load_hw("a100_like")
    sizes = {}
    for p in ("fp32", "bf16"):
        sched = A.compile(graph, hw, precision=p)
        assert sched.options.precision == p
        sizes[p] = {(t.node, t.microbatch, t.replica): t.size_bytes for t in sched.tensors}
    kinds = model_state_kinds(graph)
    hidden = next(n.id for n in graph.nodes if n.phase == "forward" and n.shape == (64, 256) and not n.is_leaf)
    state = next(i for i, k in kinds.items() if k == "optimizer_state" and graph.nodes[i].shape == (256, 256))
    [(hid_key, hid_fp32)] = [(k, v) for k, v in sizes["fp32"].items() if k[0] == hidden][:1]
    assert sizes["bf16"][hid_key] * 2 == hid_fp32
    state_sizes = {p: [v for k, v in s.items() if k[0] == state] for p, s in sizes.items()}
    assert state_sizes["fp32"] and state_sizes["fp32"] == state_sizes["bf16"]


def test_zero_coefficients_under_bf16_adam_are_the_papers_2_2_12():
    graph = _adam_step()
    hw = A.load_hw("a100_like")
    assert ModelStateBytes.of_training(graph, hw, "bf16") == ModelStateBytes.mixed_precision_adam()
    assert ModelStateBytes.of_training(graph, hw, "fp32") == ModelStateBytes(4, 4, 8)


def test_no_precision_keeps_the_hardwares_bytes_per_element():
    graph = _adam_step()
    hw = A.load_hw("a100_like")  # float32: 2 bytes, as the file says
    assert at_precision(hw, None) is hw
    assert ModelStateBytes.of_training(graph, hw) == ModelStateBytes(2, 2, 4)


# ---- unit rates and refusals -------------------------------------------------------------------------


def test_an_a100_step_is_faster_in_bf16_than_in_tf32_than_in_fp32():
    # large enough that its matmuls outlast a100_like's 10 us kernel launches (a launch-bound step runs as
    # long at any precision)
    graph = A.training_graph(A.models.build("mlp", batch=2048, sizes=(4096, 4096, 4096, 16)), optimizer="adam")
    hw = A.load_hw("a100_like")
    cycles = {p: A.simulate(A.compile(graph, hw, precision=p)).makespan_cycles for p in ("fp32", "tf32", "bf16")}
    assert cycles["bf16"] < cycles["tf32"] < cycles["fp32"]


@pytest.mark.parametrize("hw_name, precision, unit", [("a100_like", "fp8", "tensor_core"),
                                                      ("groq_like", "bf16", "mxm"),
                                                      ("tpu_v1_like", "fp32", "mxu")])
def test_a_unit_without_a_peak_for_the_precision_refuses_naming_it(hw_name, precision, unit):
    graph = _adam_step()
    with pytest.raises(A.AccelsimError) as e:
        A.compile(graph, A.load_hw(hw_name), precision=precision)
    assert f"'{unit}'" in str(e.value) and precision in str(e.value) and "peaks" in str(e.value)


def test_a_unit_runs_its_own_precision_without_declaring_peaks():
    graph = _adam_step()
    sched = A.compile(graph, A.load_hw("multicore_cpu"), precision="fp32")
    assert sched.options.precision == "fp32"


# ---- rounding and check ----------------------------------------------------------------------------


def test_bf16_rounds_to_nearest_with_ties_to_even():
    x = np.array([1 + 2.0 ** -8, 1 + 3 * 2.0 ** -8, 1 + 2.0 ** -7 + 2.0 ** -10, -2.5, np.inf, np.nan], np.float32)
    got = round_to(x, "bf16")
    assert got.dtype == np.float32
    assert got[:5].tolist() == [1.0, 1 + 2.0 ** -6, 1 + 2.0 ** -7, -2.5, np.inf] and np.isnan(got[5])


def test_fp16_and_fp8_round_as_their_formats_do():
    x = np.array([1 + 2.0 ** -12, 70000.0, 0.3, 500.0, -1e-4], np.float64)
    assert round_to(x, "fp16")[:2].tolist() == [1.0, np.inf]
    assert round_to(x, "fp8").tolist() == [1.0, 448.0, 0.3125, 448.0, 0.0]  # 1e-4 is below half the smallest subnormal (2^-9)
    assert round_to(np.arange(3), "bf16").tolist() == [0, 1, 2]  # integers are not rounded


def test_the_tolerance_of_a_low_precision_step_follows_its_unit_roundoff():
    assert tolerance("float32", None) == tolerance("float32", "fp32") == tolerance("float32", "tf32") == 1e-4
    assert tolerance("float32", "bf16") == 16 * UNIT_ROUNDOFF["bf16"] > tolerance("float32", "fp16")


@pytest.mark.parametrize("model", ["mlp", "gpt2"])
def test_a_bf16_step_passes_check_at_bf16_tolerance(model):
    graph = _adam_step(model)
    hw = A.load_hw("a100_like")
    report = check(A.compile(graph, hw, precision="bf16", microbatches=2), "numba", graph=graph, hw=hw)
    assert report.passed, report.failures
    assert report.tolerance == 16 * UNIT_ROUNDOFF["bf16"]


def test_a_wrong_kernel_fails_the_bf16_check(monkeypatch):
    from accelsim.kernels.registry import KERNELS, load_backend

    load_backend("numba")
    graph = _adam_step("mlp")
    hw = A.load_hw("a100_like")
    sched = A.compile(graph, hw, precision="bf16")
    exact = A.ops.get_op("matmul").ref
    monkeypatch.setitem(KERNELS["numba"], "matmul", lambda a, b, **kw: (exact(a, b, **kw) * 1.1).astype(a.dtype))
    report = check(sched, "numba", graph=graph, hw=hw)
    assert not report.passed and "logits" in {e.name for e in report.entries if not e.passed}


def test_bf16_values_are_what_the_backend_computes_with():
    """The emulation is on: the executed logits of a bf16 step are bf16 values (no mantissa bits below 7)."""
    from accelsim.execute.run import execute

    graph = _adam_step("mlp")
    hw = A.load_hw("a100_like")
    ran = execute(A.compile(graph, hw, precision="bf16"), graph, hw, "numpy")
    logits = next(v for (name, _, _), v in ran.outputs.items() if name == "logits")
    assert (logits.astype(np.float32).view(np.uint32) & 0xFFFF == 0).all()


def test_a_saved_bf16_schedule_loads_simulates_and_checks_against_the_plain_hardware(tmp_path):
    from accelsim.api import load_schedule
    from accelsim.schedule.io import save_schedule

    graph = _adam_step()
    hw = A.load_hw("a100_like")
    sched = A.compile(graph, hw, precision="bf16")
    save_schedule(sched, tmp_path / "bf16.json")
    loaded = load_schedule(tmp_path / "bf16.json", graph, hw)
    assert loaded.options.precision == "bf16"
    assert A.simulate(loaded, hw).makespan_cycles == sched.makespan_cycles
    assert A.check(loaded, backend="numpy", graph=graph, hw=hw).passed


@pytest.mark.parametrize("step", [{"data_parallel": 2, "microbatches": 2}, {"data_parallel": 2, "zero": 3}])
def test_a_bf16_megatron_step_with_replicas_passes_check(step):
    graph = A.training_graph(A.models.build("gpt2", tensor_parallel=2, **SMALL["gpt2"]), optimizer="adam")
    hw = A.load_hw("a100_x8")
    report = check(A.compile(graph, hw, precision="bf16", **step), "numpy", graph=graph, hw=hw)
    assert report.passed, report.failures


def test_a_bf16_inference_step_keeps_its_weights_in_bf16_and_passes_check():
    from accelsim.passes import inference_graph

    graph = inference_graph(A.models.build("mlp", **SMALL["mlp"]))
    hw = at_precision(A.load_hw("a100_like"), "bf16")
    weight = next(n for n in graph.params if n.trainable)
    assert tensor_bytes(graph, weight, hw) == 2 * n_elems(weight)  # no optimizer: no master copy
    report = check(A.compile(graph, hw, precision="bf16", microbatches=2), "numpy", graph=graph, hw=hw)
    assert report.passed, report.failures
