"""Placement of task outputs (hw/placement.py): gradients, activations and step results resident in a memory the
hardware file names. The bytes land there, producers write and consumers read them at that memory's bandwidth
and energy, the simulator and check follow, and bad placements are refused in one paragraph."""
from __future__ import annotations

import copy

import pytest
import yaml

import accelsim as A
from accelsim.compiler.planning.prefetch import output_classes
from accelsim.hw.load import bundled_path
from accelsim.passes import inference_graph
from accelsim.report import run_summary
from accelsim.schedule.levels import is_result

DRAM, UB = "weight_dram", "unified_buffer"
"""tpu_v1_like's DDR3 and its Unified Buffer, where its units write."""
PLACEMENTS = {"base": {}, "activations": {"activations": {"memory": DRAM}},
              "gradients": {"gradients": {"memory": DRAM}}, "step_results": {"step_results": {"memory": UB}}}


def tpu_with(extra: dict) -> A.HwSpec:
    """tpu_v1_like (weights streamed from DDR3, as shipped) with `extra` classes added to its placement."""
    d = yaml.safe_load(bundled_path("tpu_v1_like").read_text())
    d["chips"][0]["placement"].update(copy.deepcopy(extra))
    return A.load_hw(d)


def train_graph():
    return A.training_graph(A.models.build("mlp", batch=8, sizes=(64, 128, 32)), optimizer="sgd", lr=0.01)


@pytest.fixture(scope="module")
def runs():
    g = train_graph()
    out = {}
    for name, extra in PLACEMENTS.items():
        hw = tpu_with(extra)
        s = A.compile(g, hw, microbatches=2, effort="fast")
        out[name] = (hw, s, A.simulate(s, hw, graph=g))
    return g, out


def class_tensors(g, s, cls: str) -> list:
    """The tensors a placement of `cls` covers (hw/placement.py's module docstring)."""
    classes = output_classes(g)
    out = []
    for x in s.tensors:
        if x.task < 0:
            continue
        t = s.tasks[x.task]
        result = is_result(t.keep, t.phase)
        if (cls == "step_results" and result) or (not result and classes.get(t.node) == cls):
            out.append(x)
    return out


def dram_bytes(res) -> float:
    return sum(i.quantity for i in res.energy.items if i.name == f"chip0:{DRAM}" and i.kind.startswith("memory_"))


# --- where the bytes land --------------------------------------------------------------------------------------

@pytest.mark.parametrize("cls, memory, before", [("activations", DRAM, UB), ("gradients", DRAM, UB),
                                                 ("step_results", UB, DRAM)])
def test_a_placed_class_lives_in_its_memory_and_only_it_moves(runs, cls, memory, before):
    g, r = runs
    placed, base = r[cls][1], r["base"][1]
    tensors = class_tensors(g, placed, cls)
    assert tensors and {x.memory for x in tensors} == {memory}
    assert {x.memory for x in class_tensors(g, base, cls)} == {before}
    others = {(x.task, x.memory) for x in placed.tensors if x.task >= 0 and x not in tensors
              and placed.tasks[x.task].kind != "prefetch"}
    assert {m for _, m in others} <= {UB, DRAM}
    # the memory plan's peak of the named memory holds them
    peaks = {(m.chip, m.memory): m.peak_bytes for m in run_summary(placed, r[cls][0], g).memories}
    assert peaks[(0, memory)] >= max(x.size_bytes for x in tensors)


def test_classes_cover_every_forward_and_backward_node_once():
    g = train_graph()
    classes = output_classes(g)
    assert set(classes.values()) == {"activations", "gradients"}
    assert {i for i, c in classes.items() if c == "gradients"} == set(g.gradient_nodes())
    assert all(not g.nodes[i].is_leaf and g.nodes[i].phase != "update" for i in classes)
    fwd = inference_graph(A.models.build("mlp", batch=8, sizes=(64, 128, 32)))
    assert set(output_classes(fwd).values()) == {"activations"}


# --- time and energy move the way the memory does -----------------------------------------------------------------

@pytest.mark.parametrize("cls", ["activations", "gradients"])
def test_a_class_resident_in_ddr3_is_slower_and_charges_ddr3(runs, cls):
    _, r = runs
    base, placed = r["base"][2], r[cls][2]
    assert placed.makespan_cycles > base.makespan_cycles
    assert dram_bytes(placed) > dram_bytes(base)
    assert placed.energy.off_chip_pj > base.energy.off_chip_pj


def test_step_results_kept_on_chip_leave_ddr3_alone(runs):
    _, r = runs
    base, placed = r["base"][2], r["step_results"][2]
    assert placed.makespan_cycles <= base.makespan_cycles
    assert dram_bytes(placed) < dram_bytes(base)
    assert placed.energy.off_chip_pj < base.energy.off_chip_pj


@pytest.mark.parametrize("cls", ["activations", "step_results"])
def test_simulations_and_check_follow_the_placement(runs, cls):
    """The static replay is the compiled timeline; the dynamic runtime writes the class where the schedule did
    (so its DDR3 traffic moves as the compiled one's does); the numbers are unchanged."""
    g, r = runs
    hw, s, res = r[cls]
    assert res.makespan_cycles == s.makespan_cycles
    dyn = A.simulate(s, hw, mode="dynamic", graph=g)
    base_hw, base_s, _ = r["base"]
    base_dyn = A.simulate(base_s, base_hw, mode="dynamic", graph=g)
    if cls == "activations":
        assert dram_bytes(dyn) > dram_bytes(base_dyn)
    else:
        assert dram_bytes(dyn) < dram_bytes(base_dyn)
    assert A.check(s, backend="numpy", graph=g, hw=hw).passed


def test_a_placement_of_leaves_alone_dumps_as_before():
    chip = A.load_hw("tpu_v1_like").model_dump()["chips"][0]
    assert set(chip["placement"]) == {"parameters", "optimizer_state"}
    assert set(tpu_with(PLACEMENTS["activations"]).model_dump()["chips"][0]["placement"]) == {
        "parameters", "optimizer_state", "activations"}


# --- hostile values -------------------------------------------------------------------------------------------

STREAM = {"buffer": "weight_fifo", "bandwidth_bytes_per_s": "34 GB/s", "prefetch_depth": 1, "tile_bytes": "64 KiB"}


@pytest.mark.parametrize("extra, expected", [
    ({"activations": {"memory": "hbm"}}, "activations.memory: no memory 'hbm'"),
    ({"step_results": {"memory": DRAM, "stream": STREAM}}, "step_results.stream: step_results cannot be streamed"),
    ({"step_results": {"memory": "weight_fifo"}}, "step_results.memory: 'weight_fifo' is the prefetch buffer"),
    ({"activations": {"memory": 7}}, "activations.memory"),
    ({"activations": {"memory": DRAM, "bandwidth": 1}}, "activations.bandwidth"),
    ({"step_results": DRAM}, "step_results"),
])
def test_a_bad_output_placement_is_refused_in_one_paragraph(extra, expected):
    with pytest.raises(A.AccelsimError) as e:
        tpu_with(extra)
    message = str(e.value)
    assert expected in message and "chips[0].placement" in message
    assert "Traceback" not in message


def test_a_class_that_outgrows_its_memory_is_refused_naming_the_tensor():
    d = yaml.safe_load(bundled_path("tpu_v1_like").read_text())
    d["chips"][0]["memories"].append({"name": "tiny", "kind": "sram", "capacity_bytes": "1 KiB",
                                      "bandwidth_bytes_per_cycle": 64})
    d["chips"][0]["placement"]["activations"] = {"memory": "tiny"}
    hw = A.load_hw(d)
    with pytest.raises(A.AccelsimError, match=r"no memory can hold the output of .*chip0:tiny"):
        A.compile(train_graph(), hw, effort="fast")
