"""SimPy simulation: exact replays (with shared memory ports), attributed stalls, dynamic runtime, deadlocks."""
import subprocess
import sys
from pathlib import Path

import pytest

import accelsim as A
from accelsim import ops as F
from accelsim.models.sizes import SMALL
from accelsim.passes import inference_graph
from accelsim.schedule.kinds import TASK_KINDS, Holds
from accelsim.sim import SimulationError, simulate
from work_meter import WorkMeter

SCHEDULES = Path(__file__).resolve().parent.parent / "schedules"
HWCONFIGS = sorted(p.stem for p in (SCHEDULES.parent / "hwconfigs").glob("*.yaml"))


def toy_hw(n_units=1, sram_bytes=1 << 20, sram_bytes_per_cycle=64, energy_pj_per_op=None):
    unit = {"name": "vpu", "categories": ["elementwise", "reduction", "data_movement", "tensor"], "count": n_units,
            "vector": {"lanes": 8}, "reads": ["sram"], "writes": ["sram"]}
    if energy_pj_per_op is not None:
        unit["energy_pj_per_op"] = energy_pj_per_op
    return A.hw.parse_hw({"name": "toy", "clock_hz": 1e9, "chips": [{"units": [unit],
        "memories": [{"name": "sram", "kind": "sram", "capacity_bytes": sram_bytes,
                      "bandwidth_bytes_per_cycle": sram_bytes_per_cycle}]}]})


def diamond() -> A.Graph:
    g = A.Graph("diamond")
    a = F.relu(g.input("x", (64,)))
    F.exp(a) + F.sin(a)
    return g


def test_a_tiny_diamond_replays_exactly_and_stalls_on_a_slower_port():
    """Compiled for a 128 B/cycle SRAM: relu [0, 8), then exp and sin on two units [8, 16), each
    streaming 512 B in 8 cycles = 64 B/cycle, half the port; the add [16, 24). Replayed where the
    SRAM gives only 64 B/cycle, exp takes the whole port, sin waits 8 cycles for it, and the add
    follows at 24."""
    g = diamond()
    fast, slow = toy_hw(2, sram_bytes_per_cycle=128), toy_hw(2)
    sched = A.compile(g, fast)
    compiled = [("relu", 0, 8), ("exp", 8, 16), ("sin", 8, 16), ("add", 16, 24)]
    for hw, port_contention in ((fast, True), (fast, False), (slow, False)):
        result = simulate(sched, hw, port_contention=port_contention)
        assert [(s.op, s.start, s.end) for s in result.spans] == compiled
    shared = simulate(sched, slow)
    assert [(s.op, s.start, s.end) for s in shared.spans] == [("relu", 0, 8), ("exp", 8, 16), ("sin", 16, 24),
                                                                ("add", 24, 32)]
    assert dict(shared.spans[2].stalls) == {"memory_port": 8}
    assert dict(shared.spans[3].stalls) == {"data": 8}
    for span, task in zip(shared.spans, sched.tasks):
        assert span.start - task.start == sum(c for _, c in span.stalls)


@pytest.mark.parametrize("port_contention", [True, False])
@pytest.mark.parametrize("hw_name", HWCONFIGS)
def test_static_replay_of_a_shipped_schedule_equals_the_compiled_schedule(hw_name, port_contention):
    """The scheduler books memory-port bandwidth as the simulator meters it, so shared ports (8 CPU
    cores on one DRAM) delay nothing the schedule did not already plan for."""
    hw = A.load_hw(hw_name)
    sched = A.load_schedule(SCHEDULES / f"superres_train_{hw_name}.json", hw=hw)
    result = simulate(sched, hw, port_contention=port_contention)
    assert result.makespan_cycles == sched.makespan_cycles
    assert [(s.start, s.end) for s in result.spans] == [(t.start, t.end) for t in sched.tasks]
    assert sum(result.stall_cycles().values()) == 0


REPLAY_CASES = [(hw_name, model) for hw_name in HWCONFIGS for model in ("mlp", "resnet_block", "transformer_block")
                if hw_name != "bespoke_superres"] + [("bespoke_superres", "superres")]


@pytest.fixture(scope="module")
def small_training_step():
    """(hardware, schedule) of a SMALL model's training step on a shipped hardware config, compiled once per
    (hardware, model, step options) for the tests of this file that read the same step (they only read it)."""
    steps: dict[tuple, tuple] = {}

    def step(hw_name: str, model: str, **options):
        key = (hw_name, model, tuple(sorted(options.items())))
        if key not in steps:
            hw = A.load_hw(hw_name)
            steps[key] = hw, A.compile(A.training_graph(A.models.build(model, **SMALL[model])), hw, **options)
        return steps[key]

    return step


@pytest.mark.parametrize("options", [{"microbatches": 3}, {"microbatches": 2, "data_parallel": 2}],
                         ids=["m3", "m2d2"])
@pytest.mark.parametrize("hw_name, model", REPLAY_CASES)
def test_static_replay_with_shared_ports_equals_the_compiled_training_step(hw_name, model, options,
                                                                           small_training_step):
    hw, sched = small_training_step(hw_name, model, **options)
    result = simulate(sched, hw)
    assert [(s.start, s.end) for s in result.spans] == [(t.start, t.end) for t in sched.tasks]


def test_static_replay_across_pipeline_stages_and_replicas_equals_the_compiled_step():
    hw = A.load_hw("groq_like_x4")
    sched = A.compile(A.training_graph(A.models.build("superres", **SMALL["superres"])), hw, microbatches=4,
                      data_parallel=2, pipeline_stages=2)
    assert {t.kind for t in sched.tasks} == {"node", "accumulate", "allreduce", "transfer"}
    result = simulate(sched, hw)
    assert [(s.start, s.end) for s in result.spans] == [(t.start, t.end) for t in sched.tasks]


@pytest.fixture(scope="module")
def superres_inference_8():
    """Superres inference, 8 micro-batches on bespoke_superres, compiled and replayed once for the tests
    that read it: (hardware, schedule, static replay)."""
    bespoke = A.load_hw("bespoke_superres")
    sched = A.compile(inference_graph(A.models.build("superres")), bespoke, microbatches=8)
    return bespoke, sched, simulate(sched, bespoke)


def test_the_dynamic_work_queue_loses_to_the_static_schedule_or_ties_it(superres_inference_8):
    bespoke, sched, static = superres_inference_8
    dynamic = simulate(sched, bespoke, "dynamic")
    assert dynamic.makespan_cycles > static.makespan_cycles
    # training 4 micro-batches, the work queue starts more than fit in SRAM and pays for DRAM spills
    g = A.training_graph(A.models.build("superres"))
    sched = A.compile(g, bespoke, microbatches=4)
    static, dynamic = simulate(sched, bespoke), simulate(sched, bespoke, "dynamic")
    assert dynamic.makespan_cycles > 1.1 * static.makespan_cycles
    # both write the step's results to DRAM (levels.first_memory); only the work queue spills activations too
    assert max(u for _, u in dynamic.occupancy["chip0:dram"]) > max(u for _, u in static.occupancy["chip0:dram"])
    # on the CPU's shared DRAM the rank-first list schedule interleaves micro-batches as the work
    # queue does, and compile keeps it: the two tie
    cpu = A.load_hw("multicore_cpu")
    g = inference_graph(A.models.build("transformer_block"))
    sched = A.compile(g, cpu, microbatches=4)
    assert simulate(sched, cpu, "dynamic").makespan_cycles == simulate(sched, cpu).makespan_cycles


def test_littles_law_holds_in_the_simulated_pipeline(superres_inference_8):
    _, _, result = superres_inference_8
    law = result.littles_law()
    assert law["in_flight"] == pytest.approx(law["throughput_per_cycle"] * law["latency_cycles"], rel=0.01)
    assert law["in_flight"] > 1.5  # inputs really overlap in the pipeline


def test_buffers_too_small_for_the_work_in_flight_deadlock_with_a_named_error_at_once():
    """Dynamic runtime, 8 inputs, 8 units, memory for 8 tensors: the 8 relus take it all, no exp can
    start, and no relu output is freed before its exp has read it. The static schedule fits."""
    g = A.Graph("two_layers")
    F.exp(F.relu(g.input("x", (64,))))
    hw = toy_hw(8, sram_bytes=8 * 256)
    sched = A.compile(g, hw, microbatches=8, max_in_flight=1)
    with WorkMeter(max_steps=200_000), pytest.raises(SimulationError) as e:  # ~8k Python steps: no spinning
        simulate(sched, hw, "dynamic")
    assert "deadlocked" in str(e.value) and "space in chip0:sram" in str(e.value)


def test_occupancy_and_port_bytes_are_reported():
    hw = A.load_hw("groq_like")
    sched = A.load_schedule(SCHEDULES / "superres_train_groq_like.json", hw=hw)
    result = simulate(sched, hw)
    peak = result.peak_occupancy_bytes()["chip0:mem"]
    assert 0 < peak <= sched.memory_capacity_bytes["chip0:mem"]
    assert result.port_bytes["chip0:mem"] == sum(t.bytes_moved for t in sched.tasks if (t.chip, t.port) == (0, "mem"))
    assert 0 < result.utilization()["mxm"] <= 1


PLANNING = ("accelsim.models", "accelsim.compiler.planning.expand", "accelsim.compiler.timing.list_sched", "accelsim.compiler.timing.memory",
            "accelsim.compiler.compile", "accelsim.compiler.timing.bounds", "accelsim.compiler.planning.stages",
            "accelsim.schedule.validate", "accelsim.schedule.agreement", "accelsim.source")


def test_the_simulator_and_executor_import_nothing_of_the_planner_or_the_models():
    """Imported with the packages' __init__ files left out (they re-export the whole pipeline), the
    simulator and the executor pull in no planning module and no model builder."""
    root = Path(__file__).resolve().parent.parent
    stub = "; ".join(f"m = types.ModuleType({p!r}); m.__path__ = [{str(root / p.replace('.', '/'))!r}]; "
                     f"sys.modules[{p!r}] = m" for p in ("accelsim", "accelsim.execute", "accelsim.schedule",
                                                          "accelsim.hw"))
    code = (f"import sys, types; {stub}; import accelsim.sim, accelsim.execute.run, accelsim.execute.arena; "
            "print(' '.join(sorted(sys.modules)))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    assert "accelsim.sim.dynamic" in out and "accelsim.execute.run" in out
    assert not [m for m in out if m.startswith(PLANNING)]


@pytest.mark.parametrize("mode", ["static", "dynamic"])
def test_energy_is_the_sum_over_the_tasks_that_ran_and_none_without_energy_figures(mode):
    hw = toy_hw(2, energy_pj_per_op=2.0)
    sched = A.compile(diamond(), hw, microbatches=2)
    result = simulate(sched, hw, mode)
    assert sched.energy_pj > 0
    assert result.energy_pj == pytest.approx(sum(t.energy_pj for t in sched.tasks)) == result.summary()["energy_pj"]
    plain = toy_hw(2)
    assert simulate(A.compile(diamond(), plain), plain, mode).energy_pj is None


@pytest.mark.parametrize("mode", ["static", "dynamic"])
def test_transfers_run_on_their_link_shown_as_link_src_dst_and_count_its_bytes(mode, small_training_step):
    hw, sched = small_training_step("groq_like_x4", "mlp", microbatches=2, pipeline_stages=2)
    transfers = [t for t in sched.tasks if TASK_KINDS[t.kind].holds is Holds.LINK]
    assert transfers
    result = simulate(sched, hw, mode)
    links = {f"link:{t.chip}->{t.out_chip}" for t in transfers}
    assert {result.spans[t.id].resource for t in transfers} == links == {"link:0->1", "link:1->0"}
    for link in links:
        moved = sum(t.bytes_moved for t in transfers if f"link:{t.chip}->{t.out_chip}" == link)
        assert result.port_bytes[link] == moved and result.port_bandwidth[link] > 0


def test_the_dynamic_runtime_needs_nothing_but_the_schedule_and_the_hardware(small_training_step):
    """No graph is rebuilt: a schedule without its source runs, with every task's span."""
    hw, sched = small_training_step("groq_like_x4", "mlp", microbatches=2, data_parallel=2)
    result = simulate(sched.model_copy(update={"source": None}), hw, "dynamic")
    assert sorted(s.task for s in result.spans) == [t.id for t in sched.tasks]
    reduced = [s for s in result.spans if TASK_KINDS[s.kind].together]
    assert reduced and len({(s.start, s.end) for s in reduced if s.node == reduced[0].node}) == 1


def test_static_replay_frees_an_output_nobody_reads_once_written_as_the_scheduler_placed_it():
    """exp's outputs feed nothing: the scheduler frees each at its end and reuses the bytes for the
    next micro-batch, so a replay that held them would run out of the 4 tensors' room and deadlock."""
    g = A.Graph("dead_ends")
    F.exp(F.relu(g.input("x", (64,))))
    hw = toy_hw(2, sram_bytes=4 * 256)
    sched = A.compile(g, hw, microbatches=8, max_in_flight=1)
    result = simulate(sched, hw)
    assert result.makespan_cycles == sched.makespan_cycles
    assert result.peak_occupancy_bytes() == sched.peak_memory_bytes
