"""What a training-systems user reads of a compiled training step: model and hardware FLOPs against the GPT
formulas (Korthikanti et al.'s 72 and Megatron-LM's 96 B s l h^2), TFLOP/s per chip and MFU, peak memory per
chip split into parameters, gradients, optimizer state and activations (the parts add up to the peak), and
exposed communication per kind (zero where computation hides it)."""
from __future__ import annotations

import json
from dataclasses import dataclass

import numpy as np
import pytest

import accelsim as A
from accelsim.cli import main
from accelsim.errors import AccelsimError, ModelError, ScheduleError
from accelsim.exposed_communication import exposed_communication
from accelsim.memory_split import CATEGORIES, node_categories
from accelsim.model_states import model_state_kinds
from accelsim.ops.registry import get_op
from accelsim.schedule.kinds import TASK_KINDS
from accelsim.schedule.plan import peak_bytes
from accelsim.step_flops import gpt_model_flops, megatron_flops

TINY = {"seq": 8, "layers": 2, "d_model": 16, "heads": 2, "vocab": 32}


def gpt2_step(hw: str = "a100_x8", batch: int = 1, tensor_parallel: int = 1, remat: str | None = None,
              optimizer: str = "adam", **options):
    """A compiled gpt2 training step of the TINY sizes; returns (schedule, hw, training graph)."""
    spec = A.load_hw(hw)
    graph = A.training_graph(A.models.build("gpt2", batch=batch, tensor_parallel=tensor_parallel, **TINY),
                             optimizer=optimizer)
    if remat is not None:
        graph = A.rematerialize(graph, remat)
    return A.compile(graph, spec, **options), spec, graph


@pytest.fixture(scope="module")
def pipelined():
    """Two micro-batches, two replicas, two stages of gpt2 with Adam on a100_x8."""
    return gpt2_step(microbatches=2, data_parallel=2, pipeline_stages=2)


# ---- FLOPs: the GPT formulas ----------------------------------------------------------------------------------

def test_the_formulas_in_integers_match_their_papers_written_forms():
    b, s, l, h, v = 4, 2048, 24, 2048, 51200
    assert gpt_model_flops(b, s, l, h, v) == pytest.approx(72 * b * s * l * h * h * (1 + s / (6 * h) + v / (12 * l * h)))
    assert megatron_flops(b, s, l, h, v) == pytest.approx(96 * b * s * l * h * h * (1 + s / (6 * h) + v / (16 * l * h)))


@pytest.mark.parametrize("layers, microbatches, data_parallel, stages", [(2, 1, 1, 1), (2, 2, 2, 2), (3, 3, 1, 1)])
def test_model_flops_are_the_gpt_formula(layers, microbatches, data_parallel, stages):
    spec = A.load_hw("a100_x8")
    sizes = {**TINY, "layers": layers}
    graph = A.training_graph(A.models.build("gpt2", batch=2, **sizes), optimizer="sgd")
    schedule = A.compile(graph, spec, microbatches=microbatches, data_parallel=data_parallel,
                         pipeline_stages=stages)
    s = A.run_summary(schedule, spec, graph)
    batch = 2 * microbatches * data_parallel  # the step's global batch
    assert s.model_flops_per_step == gpt_model_flops(batch, sizes["seq"], layers, sizes["d_model"], sizes["vocab"])
    assert s.hardware_flops_per_step == s.model_flops_per_step  # no recomputation, no replicated node


def test_a_first_layer_without_an_input_gradient_runs_fewer_flops_than_the_model_counts():
    """mlp 32 -> 16 -> 4, batch 4, 2 micro-batches: the model counts 3 x forward; the first matmul's input (the
    data) needs no gradient, so the hardware runs its forward and its weight gradient only."""
    hw = A.load_hw("groq_like")
    graph = A.training_graph(A.models.build("mlp", batch=4, sizes=(32, 16, 4)))
    s = A.run_summary(A.compile(graph, hw, microbatches=2), hw, graph)
    first, second = 2 * 4 * 32 * 16, 2 * 4 * 16 * 4  # forward FLOPs per micro-batch
    assert s.model_flops_per_step == 2 * 3 * (first + second)
    assert s.hardware_flops_per_step == 2 * (2 * first + 3 * second)


def test_megatron_s_96_is_the_model_flops_plus_one_more_forward_of_every_layer(pipelined):
    """Megatron's formula counts full recomputation: model FLOPs + the layers' forward FLOPs, the LM head's
    forward (2 B s h V, once) not recomputed."""
    schedule, hw, graph = pipelined
    s = A.run_summary(schedule, hw, graph)
    b, (seq, layers, h, vocab) = 4, (TINY[k] for k in ("seq", "layers", "d_model", "vocab"))
    forward = s.model_flops_per_step // 3
    assert megatron_flops(b, seq, layers, h, vocab) == s.model_flops_per_step + forward - 2 * b * seq * h * vocab


def test_tensor_parallel_counts_each_rank_s_share_once():
    # Megatron's layers: every matmul of a tensor-parallel gpt2 is split over the ranks, the LM head over the
    # vocabulary too (models/parallel_layers.py), so no rank repeats another's FLOPs: hardware = model
    assert TINY["vocab"] % 2 == 0  # no padded rows (they would add hardware FLOPs)
    schedule, hw, graph = gpt2_step(tensor_parallel=2, microbatches=2)
    s = A.run_summary(schedule, hw, graph)
    b, seq, h, vocab = 2, TINY["seq"], TINY["d_model"], TINY["vocab"]  # batch 1 x 2 micro-batches
    assert s.model_flops_per_step == gpt_model_flops(b, seq, TINY["layers"], h, vocab)
    assert s.hardware_flops_per_step == s.model_flops_per_step


def test_recomputation_adds_hardware_flops_only():
    base, hw, _ = gpt2_step(optimizer="sgd")
    remat, _, graph = gpt2_step(optimizer="sgd", remat="every:1")
    s = A.run_summary(remat, hw, graph)
    recomputed = sum(t.flops for t in remat.tasks if t.kind == "node" and t.phase == "backward"
                     and get_op(t.op).category == "tensor" and "recompute" in graph.nodes[t.node].name)
    assert s.model_flops_per_step == A.run_summary(base, hw).model_flops_per_step
    assert recomputed > 0
    assert s.hardware_flops_per_step == s.model_flops_per_step + recomputed
    assert s.hardware_flops_per_step <= megatron_flops(1, TINY["seq"], TINY["layers"], TINY["d_model"], TINY["vocab"])


def test_tflops_per_chip_and_mfu_against_the_hardware_file(pipelined):
    schedule, hw, graph = pipelined
    s = A.run_summary(schedule, hw, graph)
    chips = len({t.chip for t in schedule.tasks})
    tensor_core = next(u for u in hw.chips[0].units if u.name == "tensor_core")
    peak = tensor_core.count * tensor_core.array.rows * tensor_core.array.cols * 2 * hw.clock_hz  # per chip
    assert s.peak_tflops_per_chip == pytest.approx(peak / 1e12)
    assert s.model_tflops_per_chip == pytest.approx(s.model_flops_per_step / s.makespan_s / chips / 1e12)
    assert s.hardware_tflops_per_chip == pytest.approx(s.hardware_flops_per_step / s.makespan_s / chips / 1e12)
    assert s.mfu == pytest.approx(s.model_tflops_per_chip / s.peak_tflops_per_chip)


def test_gpt_formulas_refuse_what_is_not_a_positive_integer():
    with pytest.raises(ModelError, match=r"layers=0 is invalid; expected an integer >= 1"):
        gpt_model_flops(1, 8, 0, 16, 32)
    with pytest.raises(ModelError, match=r"hidden=16.0"):
        megatron_flops(1, 8, 2, 16.0, 32)


# ---- memory per chip ------------------------------------------------------------------------------------------

@pytest.mark.parametrize("hw", ["a100_x8", "groq_like_x4"])
def test_the_parts_of_a_chip_s_peak_add_up_to_its_peak(hw):
    schedule, spec, graph = gpt2_step(hw=hw, microbatches=2, data_parallel=2)
    s = A.run_summary(schedule, spec, graph)
    assert [c.chip for c in s.chip_memory] == sorted({m.chip for m in schedule.memories})
    for c in s.chip_memory:
        assert sum(c.parts().values()) == c.peak_bytes
        on_chip = [(x.start, x.end, x.size_bytes) for x in schedule.tensors if x.chip == c.chip]
        assert c.peak_bytes == peak_bytes(on_chip)
        memories = [m for m in schedule.memories if m.chip == c.chip]
        if len(memories) == 1:  # one memory: the chip's peak is that memory's
            assert c.peak_bytes == memories[0].peak_bytes
        else:
            assert c.peak_bytes <= sum(m.peak_bytes for m in memories)


def test_parameters_live_all_step_are_in_the_parameter_part_of_every_peak(pipelined):
    schedule, hw, graph = pipelined
    s = A.run_summary(schedule, hw, graph)
    kinds = model_state_kinds(graph)
    for c in s.chip_memory:
        leaves = sum(x.size_bytes for x in schedule.tensors if x.chip == c.chip and x.task < 0
                     and kinds.get(x.node) == "param")
        assert c.parameter_bytes >= leaves
        if leaves:
            assert c.peak_bytes > c.parameter_bytes


def test_every_node_has_one_category_and_model_states_keep_theirs(pipelined):
    _, _, graph = pipelined
    cats = node_categories(graph)
    assert set(cats) == {n.id for n in graph.nodes} and set(cats.values()) <= set(CATEGORIES)
    want = {"param": "parameters", "gradient": "gradients", "optimizer_state": "optimizer_state"}
    assert all(cats[i] == want[k] for i, k in model_state_kinds(graph).items())
    assert cats[graph.outputs["wte.new"]] == "parameters" and cats[graph.outputs["wte.adam_m.new"]] == "optimizer_state"
    assert cats[graph.outputs["logits"]] == "activations"


def test_no_graph_no_split_and_another_graph_is_refused(pipelined):
    schedule, hw, graph = pipelined
    s = A.run_summary(schedule, hw)
    assert s.chip_memory is None and s.to_dict()["peak_memory_per_chip"] is None
    assert s.model_flops_per_step == A.run_summary(schedule, hw, graph).model_flops_per_step
    other = A.training_graph(A.models.build("gpt2", batch=1, **{**TINY, "vocab": 64}), optimizer="adam")
    with pytest.raises(ScheduleError, match="compiled for another graph"):
        A.run_summary(schedule, hw, other)
    with pytest.raises(AccelsimError, match="graph must be the Graph .* got str"):
        A.run_summary(schedule, hw, "gpt2")


# ---- exposed communication ------------------------------------------------------------------------------------

@dataclass(frozen=True)
class T:
    """A timed task as the measure reads it."""

    kind: str
    chip: int
    start: int
    end: int
    out_chip: int = -1

    def __post_init__(self) -> None:
        if self.out_chip < 0:
            object.__setattr__(self, "out_chip", self.chip)


def test_a_collective_hidden_behind_computation_is_not_exposed():
    tasks = [T("node", 0, 0, 100), T("allreduce", 0, 20, 80), T("node", 1, 0, 30), T("node", 1, 30, 100),
             T("allreduce", 1, 20, 80)]
    (e,) = exposed_communication(tasks)
    assert (e.kind, e.exposed_cycles, e.in_flight_cycles, e.hidden_fraction) == ("allreduce", 0, 60, 1.0)


def test_the_part_of_a_collective_past_the_last_computation_is_exposed_on_the_worst_chip():
    tasks = [T("node", 0, 0, 100), T("allreduce", 0, 80, 150), T("node", 1, 0, 60), T("allreduce", 1, 80, 150),
             T("node", 1, 120, 130)]
    (e,) = exposed_communication(tasks)
    assert (e.chip, e.exposed_cycles, e.in_flight_cycles) == (1, 60, 70)  # chip 0: 50; chip 1: 80..120, 130..150


def test_a_transfer_is_waited_on_by_its_destination_and_kinds_are_measured_apart():
    tasks = [T("node", 0, 0, 10), T("transfer", 0, 10, 40, out_chip=1), T("node", 1, 0, 25), T("node", 1, 40, 50),
             T("reduce_scatter", 1, 30, 45), T("all_gather", 0, 45, 50)]
    got = {e.kind: (e.chip, e.exposed_cycles, e.in_flight_cycles) for e in exposed_communication(tasks)}
    assert got == {"transfer": (1, 15, 30), "reduce_scatter": (1, 10, 15), "all_gather": (0, 5, 5)}
    assert list(got) == [k for k in TASK_KINDS if k in got]  # in the table's order


def test_exposed_communication_of_a_compiled_step_matches_a_cycle_by_cycle_count(pipelined):
    schedule, hw, graph = pipelined
    s = A.run_summary(schedule, hw, graph)
    assert {e.kind for e in s.exposed_communication} == {"allreduce", "transfer"}
    chips = {t.chip for t in schedule.tasks} | {t.out_chip for t in schedule.tasks}
    for e in s.exposed_communication:
        worst = []
        for chip in sorted(chips):
            busy = np.zeros(schedule.makespan_cycles, bool)
            flight = np.zeros(schedule.makespan_cycles, bool)
            for t in schedule.tasks:
                kind = TASK_KINDS[t.kind]
                if kind.busy and t.chip == chip:
                    busy[t.start:t.end] = True
                elif t.kind == e.kind and (t.out_chip if t.kind == "transfer" else t.chip) == chip:
                    flight[t.start:t.end] = True
            worst.append((int((flight & ~busy).sum()), -chip, int(flight.sum())))
        exposed, chip, flight_cycles = max(worst)
        assert (e.exposed_cycles, e.chip, e.in_flight_cycles) == (exposed, -chip, flight_cycles)


# ---- JSON and the terminal ------------------------------------------------------------------------------------

def test_an_inference_step_has_no_training_figures():
    hw = A.load_hw("a100_x8")
    schedule = A.compile(A.models.build("gpt2", batch=1, **TINY), hw, pipeline_stages=2)
    d = A.run_summary(schedule, hw).to_dict()
    assert all(d[k] is None for k in ("model_flops_per_step", "hardware_flops_per_step", "mfu",
                                      "peak_memory_per_chip"))
    assert set(d["exposed_communication"]) == {"transfer"}


def test_run_prints_and_writes_the_training_figures(tmp_path, capsys):
    out = tmp_path / "run.json"
    argv = ["run", "--hw", "a100_x8", "--model", "gpt2", *(f"--set={k}={v}" for k, v in TINY.items()),
            "--training", "--optimizer", "adam", "--microbatches", "2", "--data-parallel", "2", "--no-sim",
            "--json", str(out)]
    assert main(argv) == 0
    text = capsys.readouterr().out
    d = json.loads(out.read_text())
    assert d["model_flops_per_step"] == gpt_model_flops(4, TINY["seq"], TINY["layers"], TINY["d_model"], TINY["vocab"])
    assert "FLOPs       model 1.376 MFLOP per step (3 x forward tensor-op FLOPs)" in text
    assert "MFU " in text and "peak memory per chip" in text and "exposed communication" in text
    assert "chip0-1" in text  # the two replicas' equal figures share a row
    parts = d["peak_memory_per_chip"]["chip0"]
    assert sum(parts[f"{c}_bytes"] for c in CATEGORIES) == parts["peak_bytes"]
