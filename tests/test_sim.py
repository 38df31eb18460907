"""SimPy simulation: exact replays, contention with attributed stalls, dynamic runtime, deadlocks."""
import time
from pathlib import Path

import pytest

import accelsim as A
from accelsim import ops as F
from accelsim.passes import inference_graph
from accelsim.sim import SimulationError, simulate

SCHEDULES = Path(__file__).resolve().parent.parent / "schedules"
HWCONFIGS = sorted(p.stem for p in (SCHEDULES.parent / "hwconfigs").glob("*.yaml"))


def toy_hw(n_units=1, sram_bytes=1 << 20):
    return A.hw.parse_hw({"name": "toy", "clock_hz": 1e9, "chips": [{"units": [
        {"name": "vpu", "categories": ["elementwise", "reduction", "data_movement", "tensor"], "count": n_units,
         "vector": {"lanes": 8}, "reads": ["sram"], "writes": ["sram"]}],
        "memories": [{"name": "sram", "kind": "sram", "capacity_bytes": sram_bytes, "bandwidth_bytes_per_cycle": 64}]}]})


def test_a_tiny_diamond_replays_exactly():
    """relu [0, 8) then exp and sin on two units [8, 16): each streams 512 B in 8 cycles = 64 B/cycle,
    the whole port, so with contention they take turns: sin waits 8 cycles for the port, and the add
    (12 cycles) follows at 24."""
    g = A.Graph("diamond")
    a = F.relu(g.input("x", (64,)))
    F.exp(a) + F.sin(a)
    hw = toy_hw(2)
    sched = A.compile(g, hw)
    exact = simulate(sched, hw, port_contention=False)
    assert [(s.op, s.start, s.end) for s in exact.spans] == [("relu", 0, 8), ("exp", 8, 16), ("sin", 8, 16),
                                                               ("add", 16, 28)]
    shared = simulate(sched, hw)
    assert [(s.op, s.start, s.end) for s in shared.spans] == [("relu", 0, 8), ("exp", 8, 16), ("sin", 16, 24),
                                                                ("add", 24, 36)]
    sin = shared.spans[2]
    assert dict(sin.stalls) == {"memory_port": 8}
    assert dict(shared.spans[3].stalls) == {"data": 8}


@pytest.mark.parametrize("hw_name", HWCONFIGS)
def test_static_replay_equals_the_compiled_schedule_when_ports_are_modelled_as_the_scheduler_does(hw_name):
    hw = A.load_hw(hw_name)
    sched = A.load_schedule(SCHEDULES / f"superres_train_{hw_name}.json", hw=hw)
    result = simulate(sched, hw, port_contention=False)
    assert result.makespan_cycles == sched.makespan_cycles
    assert [(s.start, s.end) for s in result.spans] == [(t.start, t.end) for t in sched.tasks]
    assert sum(result.stall_cycles().values()) == 0


def test_bespoke_superres_has_no_unmodelled_contention_so_the_full_simulation_is_exact():
    hw = A.load_hw("bespoke_superres")
    sched = A.load_schedule(SCHEDULES / "superres_train_bespoke_superres.json", hw=hw)
    assert simulate(sched, hw).makespan_cycles == sched.makespan_cycles


def test_shared_dram_bandwidth_slows_the_cpu_and_every_delay_has_a_cause():
    """8 cores share 20 GB/s of DRAM; the scheduler gives each node the full bandwidth."""
    hw = A.load_hw("multicore_cpu")
    sched = A.load_schedule(SCHEDULES / "superres_train_multicore_cpu.json", hw=hw)
    result = simulate(sched, hw)
    assert result.makespan_cycles > sched.makespan_cycles
    stalls = result.stall_cycles()
    assert stalls["memory_port"] > 0
    for span, task in zip(result.spans, sched.tasks):
        assert span.start - task.start == sum(c for _, c in span.stalls)


def test_dynamic_scheduling_loses_to_static_on_the_bespoke_pipeline_but_not_everywhere():
    bespoke = A.load_hw("bespoke_superres")
    g = inference_graph(A.models.build("superres"))
    sched = A.compile(g, bespoke, microbatches=8)
    static, dynamic = simulate(sched, bespoke), simulate(sched, bespoke, "dynamic", graph=g)
    assert dynamic.makespan_cycles > static.makespan_cycles
    cpu = A.load_hw("multicore_cpu")
    sched = A.load_schedule(SCHEDULES / "superres_train_multicore_cpu.json", hw=cpu)
    assert simulate(sched, cpu, "dynamic").makespan_cycles <= simulate(sched, cpu).makespan_cycles


def test_littles_law_holds_in_the_simulated_pipeline():
    hw = A.load_hw("bespoke_superres")
    result = simulate(A.compile(inference_graph(A.models.build("superres")), hw, microbatches=8), hw)
    law = result.littles_law()
    assert law["in_flight"] == pytest.approx(law["throughput_per_cycle"] * law["latency_cycles"], rel=0.01)
    assert law["in_flight"] > 1.5  # inputs really overlap in the pipeline


def test_buffers_too_small_for_the_work_in_flight_deadlock_with_a_named_error_quickly():
    """Dynamic runtime, 8 inputs, 8 units, memory for 8 tensors: the 8 relus take it all, no exp can
    start, and no relu output is freed before its exp has read it. The static schedule fits."""
    g = A.Graph("two_layers")
    F.exp(F.relu(g.input("x", (64,))))
    hw = toy_hw(8, sram_bytes=8 * 256)
    sched = A.compile(g, hw, microbatches=8, max_in_flight=1)
    start = time.perf_counter()
    with pytest.raises(SimulationError) as e:
        simulate(sched, hw, "dynamic", graph=g)
    assert time.perf_counter() - start < 5
    assert "deadlocked" in str(e.value) and "space in chip0:sram" in str(e.value)


def test_occupancy_and_port_bytes_are_reported():
    hw = A.load_hw("groq_like")
    sched = A.load_schedule(SCHEDULES / "superres_train_groq_like.json", hw=hw)
    result = simulate(sched, hw)
    peak = result.peak_occupancy_bytes()["chip0:mem"]
    assert 0 < peak <= sched.memory_capacity_bytes["chip0:mem"]
    assert result.port_bytes["chip0:mem"] == sum(t.bytes_moved for t in sched.tasks if t.port == "chip0:mem")
    assert 0 < result.utilization()["mxm"] <= 1
