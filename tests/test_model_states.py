"""ZeRO's model-state accounting: the formula, the seed's table, coefficients of accelsim training graphs,
and the split of a compiled schedule's live bytes into model states and everything else."""
import math

import numpy as np
import pytest

import accelsim as A
from accelsim.schedule.levels import ALIGN_BYTES
from accelsim.model_states import (STAGES, ModelStateBytes, model_state_kinds, schedule_model_states,
                                            trainable_elements, zero_bytes, zero_table)

ADAM = ModelStateBytes.mixed_precision_adam()


def placed(nbytes: int) -> int:
    """A tensor's placed size: whole ALIGN_BYTES blocks, at least one."""
    return max(1, math.ceil(nbytes / ALIGN_BYTES)) * ALIGN_BYTES


def mlp_train(optimizer: str = "adam") -> A.Graph:
    return A.training_graph(A.models.build("mlp", batch=4, sizes=(16, 8, 4)), optimizer=optimizer)


# ---- the formula ----------------------------------------------------------------------------------


def test_each_stage_shards_one_more_state_by_hand():
    """Psi = 100, N_d = 4, 2 + 2 + 12: 1600; 200 + 200 + 300; 200 + 350; 400."""
    assert [zero_bytes(ADAM, 100, 4, s) for s in range(4)] == [1600, 700, 550, 400]


def test_one_replica_shards_nothing():
    assert {zero_bytes(ADAM, 12345, 1, s) for s in range(4)} == {16 * 12345}


def test_uneven_shards_round_up_to_a_whole_byte():
    assert zero_bytes(ADAM, 1, 3, 3) == 6  # 16 / 3 = 5.33 bytes
    assert zero_bytes(ModelStateBytes(0.5, 0.5, 1), 3, 1, 0) == 6


def test_the_seed_table_comes_out_of_the_model():
    """Seed 004 (ZeRO's Figure 1): Psi = 7.5B, K = 12, N_d = 64 -> 120 / 31.4 / 16.6 / 1.9 GB. The table
    rounds to 0.1 decimal GB (1.875 -> 1.9)."""
    rows = zero_table(ADAM, 7_500_000_000, 64)
    assert [r.name for r in rows] == ["baseline", "P_os", "P_os+g", "P_os+g+p"] == list(STAGES)
    assert [r.formula for r in rows] == ["(2 + 2 + K) * Psi", "2Psi + 2Psi + K * Psi / N_d",
                                         "2Psi + (2 + K) * Psi / N_d", "(2 + 2 + K) * Psi / N_d"]
    assert [round(r.gb, 1) for r in rows] == [120.0, 31.4, 16.6, 1.9]
    assert [r.bytes_per_device for r in rows] == [120_000_000_000, 31_406_250_000, 16_640_625_000, 1_875_000_000]


@pytest.mark.parametrize("psi, n_d, stage, match", [
    (-1, 4, 0, "psi=-1 is invalid"), (1.5, 4, 0, "psi=1.5 is invalid"), (7.5e9, 4, 0, r"int\(7.5e9\)"),
    (True, 4, 0, "psi=True is invalid"), ("100", 4, 0, "psi='100' is invalid"),
    (100, 0, 1, "n_d=0 is invalid; expected an integer >= 1"), (100, -2, 1, "n_d=-2 is invalid"),
    (100, True, 1, "n_d=True is invalid"), (100, 2.0, 1, "n_d=2.0 is invalid"),
    (100, 4, 4, "stage=4 is invalid; expected 0 .baseline."), (100, 4, -1, "stage=-1 is invalid"),
    (100, 4, True, "stage=True is invalid"), (100, 4, 1.0, "stage=1.0 is invalid"),
])
def test_bad_psi_replicas_or_stage_are_refused_naming_the_value(psi, n_d, stage, match):
    with pytest.raises(A.ScheduleError, match=match):
        zero_bytes(ADAM, psi, n_d, stage)


@pytest.mark.parametrize("field", ["param_bytes", "grad_bytes", "optimizer_bytes"])
@pytest.mark.parametrize("value", [math.nan, math.inf, -math.inf, -1, True, "2", None])
def test_bad_coefficients_are_refused_naming_the_field(field, value):
    with pytest.raises(A.ScheduleError, match=f"ModelStateBytes.{field}={value!r} is invalid; expected a finite"):
        ModelStateBytes(**{"param_bytes": 2, "grad_bytes": 2, "optimizer_bytes": 12, field: value})


def test_the_formula_needs_coefficients_not_a_tuple():
    with pytest.raises(A.ScheduleError, match="needs a ModelStateBytes, got tuple"):
        zero_bytes((2, 2, 12), 100, 4, 0)
    with pytest.raises(A.ScheduleError, match="needs a ModelStateBytes, got tuple"):
        zero_table((2, 2, 12), 100, 4)


# ---- coefficients of an accelsim training graph --------------------------------------------------


@pytest.mark.parametrize("hw_file", ["a100_like", "groq_like", "bespoke_superres"])
@pytest.mark.parametrize("optimizer, states", [("sgd", 0), ("momentum", 1), ("adam", 2)])
def test_coefficients_are_the_machines_bytes_per_element_times_the_state_tensors(hw_file, optimizer, states):
    hw = A.load_hw(f"hwconfigs/{hw_file}.yaml")
    b = hw.elem_bytes("float32")
    assert ModelStateBytes.of_training(mlp_train(optimizer), hw) == ModelStateBytes(b, b, states * b)


def test_fp32_adam_costs_4_4_8_on_a_4_byte_machine_and_2_2_4_on_a_bf16_one():
    """bespoke_superres stores float32 in 4 bytes, a100_like in 2 (bf16); neither keeps an fp32 master copy,
    so K is Adam's two state tensors, not ZeRO's 12."""
    g = mlp_train("adam")
    assert ModelStateBytes.of_training(g, A.load_hw("hwconfigs/bespoke_superres.yaml")) == ModelStateBytes(4, 4, 8)
    assert ModelStateBytes.of_training(g, A.load_hw("hwconfigs/a100_like.yaml")) == ModelStateBytes(2, 2, 4)


def test_psi_counts_trainable_elements_and_the_kinds_name_every_state():
    g = mlp_train("adam")
    assert trainable_elements(g) == 16 * 8 + 8 + 8 * 4 + 4
    kinds = model_state_kinds(g)
    names = lambda kind: sorted(g.nodes[i].name for i, k in kinds.items() if k == kind)  # noqa: E731
    assert names("param") == ["fc1.b", "fc1.w", "fc2.b", "fc2.w"]
    assert names("optimizer_state") == sorted(f"{p}.{s}" for p in names("param") for s in ("adam_m", "adam_v"))
    assert sorted(i for i, k in kinds.items() if k == "gradient") == sorted(g.outputs[f"{p}.grad"]
                                                                           for p in names("param"))


def test_a_forward_graph_has_no_model_states():
    with pytest.raises(A.GraphError, match="is not a training graph"):
        trainable_elements(A.models.build("mlp"))
    with pytest.raises(A.GraphError, match="expected a training Graph"):
        model_state_kinds("mlp")


def test_coefficients_need_a_hardware_spec():
    with pytest.raises(A.ScheduleError, match="needs a HwSpec"):
        ModelStateBytes.of_training(mlp_train(), "groq_like")


# ---- a compiled schedule's split ----------------------------------------------------------------


def expected_bytes(g: A.Graph, hw: A.HwSpec) -> dict[str, int]:
    """Each model state's placed bytes, from the graph's nodes by name: parameters, Adam state, and each
    parameter's gradient (the `<param>.grad` output)."""
    size = lambda n: placed(int(np.prod(n.shape)) * hw.elem_bytes(n.dtype))  # noqa: E731
    params = [n for n in g.params if n.trainable]
    return {"param": sum(size(n) for n in params),
            "optimizer_state": sum(size(g.by_name(f"{n.name}.{s}")) for n in params for s in ("adam_m", "adam_v")),
            "gradient": [size(g.nodes[g.outputs[f"{n.name}.grad"]]) for n in params]}


def test_model_state_peak_is_params_and_adam_state_plus_the_gradients_live_at_once():
    """Parameters and optimizer state are leaves live for the whole step; accelsim frees each gradient once
    its update has read it, so the gradients at the peak are at most all of them (ZeRO's 2 Psi)."""
    hw = A.load_hw("hwconfigs/groq_like.yaml")
    g = mlp_train("adam")
    sched = A.compile(g, hw)
    (chip,) = schedule_model_states(sched, g)
    want = expected_bytes(g, hw)
    assert chip.param_peak_bytes == want["param"]
    assert chip.optimizer_state_peak_bytes == want["optimizer_state"]
    assert max(want["gradient"]) <= chip.gradient_peak_bytes <= sum(want["gradient"])
    assert chip.model_state_peak_bytes == want["param"] + want["optimizer_state"] + chip.gradient_peak_bytes
    assert chip.peak_bytes == sched.memories[0].peak_bytes  # one memory: the chip's peak is the schedule's
    assert chip.model_state_at_peak_bytes <= chip.model_state_peak_bytes


def test_levels_are_the_live_bytes_the_peaks_come_from():
    g = mlp_train("momentum")
    (chip,) = schedule_model_states(A.compile(g, A.load_hw("hwconfigs/a100_like.yaml")), g)
    cycles = [c for c, _, _ in chip.levels]
    assert cycles == sorted(set(cycles))
    assert max(m for _, m, _ in chip.levels) == chip.model_state_peak_bytes
    assert max(m + o for _, m, o in chip.levels) == chip.peak_bytes
    assert chip.levels[-1][1:] == (0, 0)  # everything is freed at the step's end


def test_a_chip_with_two_memories_peaks_at_most_at_their_sum():
    g = mlp_train("adam")
    sched = A.compile(g, A.load_hw("hwconfigs/a100_like.yaml"))
    (chip,) = schedule_model_states(sched, g)
    peaks = [m.peak_bytes for m in sched.memories]
    assert len(peaks) == 2 and max(peaks) <= chip.peak_bytes <= sum(peaks)


def test_data_parallel_replicas_hold_the_same_model_states_on_each_chip():
    hw = A.load_hw("hwconfigs/groq_like_x4.yaml")
    g = mlp_train("adam")
    chips = schedule_model_states(A.compile(g, hw, data_parallel=2), g)
    assert [c.chip for c in chips] == [0, 1, 2, 3]
    want = expected_bytes(g, hw)
    for c in chips[:2]:
        assert (c.param_peak_bytes, c.optimizer_state_peak_bytes) == (want["param"], want["optimizer_state"])
        assert c.model_state_peak_bytes == want["param"] + want["optimizer_state"] + c.gradient_peak_bytes
    assert chips[0].model_state_peak_bytes == chips[1].model_state_peak_bytes
    assert chips[0].gradient_peak_bytes == chips[1].gradient_peak_bytes
    assert all(c.peak_bytes == 0 and c.levels == () for c in chips[2:])  # no replica there


def test_the_split_refuses_a_schedule_of_another_graph():
    hw = A.load_hw("hwconfigs/groq_like.yaml")
    sched = A.compile(mlp_train("adam"), hw)
    with pytest.raises(A.ScheduleError, match="compiled for another graph"):
        schedule_model_states(sched, mlp_train("sgd"))
    with pytest.raises(A.ScheduleError, match="needs a Schedule, got dict"):
        schedule_model_states({}, mlp_train("adam"))
