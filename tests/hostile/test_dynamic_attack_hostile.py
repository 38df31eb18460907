"""Hostile steps for the dynamic runtime (sim/dynamic.py, sim/space.py, sim/waits.py): a step whose micro-batches
over-fill memory once the work queue ignores the compiled in-flight window ends with one SimulationError whose
cycle paragraph stays short however many micro-batches the cycle runs through; tampered schedules and memories
too small for any output are refused before anything runs (AccelsimError from Python, exit 1 from the CLI)."""
from __future__ import annotations

import json

import pytest

import accelsim as A
from accelsim import ops as F
from accelsim.sim.waits import MAX_LISTED, explain_cycle

pytestmark = pytest.mark.timeout(300)  # a hang guard, not a speed limit: see tests/conftest.py

LEAF_BYTES = 256  # x: 64 float32 values


def _toy_hw(sram_bytes: int, units: int = 8) -> A.HwSpec:
    unit = {"name": "vpu", "categories": ["elementwise", "reduction", "data_movement", "tensor"], "count": units,
            "vector": {"lanes": 8}, "reads": ["sram"], "writes": ["sram"]}
    return A.hw.parse_hw({"name": "toy", "clock_hz": 1e9, "chips": [{"units": [unit], "memories": [
        {"name": "sram", "kind": "sram", "capacity_bytes": sram_bytes, "bandwidth_bytes_per_cycle": 64}]}]})


def _over_filled(microbatches: int) -> tuple[A.Graph, A.HwSpec, A.Schedule]:
    """relu -> exp on `microbatches` inputs whose leaves fill the SRAM exactly: compiled with one micro-batch in
    flight it fits; the work queue admits them all, so no relu has room for its output."""
    g = A.Graph("two_layers")
    F.exp(F.relu(g.input("x", (64,))))
    hw = _toy_hw(microbatches * LEAF_BYTES)
    return g, hw, A.compile(g, hw, microbatches=microbatches, max_in_flight=1)


def test_a_deadlock_through_many_micro_batches_is_one_bounded_paragraph(hostile):
    """The cycle paragraph listed every micro-batch the cycle touched (10 KB for 500 micro-batches, and explaining
    it scanned every task per blocked task: a minute of CPU); now it lists MAX_LISTED and counts the rest."""
    g, hw, schedule = _over_filled(40)
    message = hostile.refuses(lambda: A.simulate(schedule, hw, mode="dynamic", graph=g), "deadlocked", "Cycle of waits",
                              "spans 40 micro-batches", "and 32 more micro-batches", "in-flight window")
    header, why, *blocked = message.split("\n")
    assert header == "simulation of two_layers deadlocked with 80 task(s) blocked:"
    assert why.count("mb ") <= 3 * MAX_LISTED and len(why) < 2000, why
    assert len(blocked) == 13 and blocked[-1] == "  ... and 68 more"  # the blocked tasks were bounded already


def test_a_cycle_of_ten_thousand_tasks_is_told_in_a_few_of_them():
    cycle = [(t, f"waits for 8 B of space in chip0:sram, held by leaf %0 of mb {t + 1} until task {t + 1} reads it")
             for t in range(10_000)]
    spans = [f"mb {m}, replica 0" for m in range(10_000)]
    why = explain_cycle(cycle, lambda t: f"task {t}", spans)
    assert why.startswith("Cycle of waits: task 0 waits for 8 B") and "\n" not in why
    assert "; and 9,992 more tasks, the last of which waits for 8 B of space in chip0:sram, held by leaf %0 of " \
           "mb 10000 until task 10000 reads it; and so back to the first." in why
    assert "spans 10,000 micro-batches (mb 0, replica 0; " in why and "; and 9,992 more micro-batches)" in why
    assert "task 8 waits" not in why and len(why) < 2500


# -- `accelsim simulate FILE --dynamic` on tampered files and changed hardware -------------------------------------

@pytest.fixture(scope="module")
def saved(tmp_path_factory) -> dict:
    """A small step on groq_like, as the JSON `accelsim compile` writes."""
    graph = A.training_graph(A.models.build("mlp", batch=2, sizes=(16, 8, 4)), optimizer="sgd", lr=0.01)
    path = tmp_path_factory.mktemp("saved") / "s.json"
    A.save_schedule(A.compile(graph, A.load_hw("groq_like")), path)
    return json.loads(path.read_text())


def _middle(d: dict) -> dict:
    return d["tasks"][len(d["tasks"]) // 2]


def _set(key, value):
    return lambda d: _middle(d).update({key: value})


def _cycle(d: dict) -> None:
    a, b = _middle(d), d["tasks"][len(d["tasks"]) // 2 + 1]
    a["deps"] = sorted({*a["deps"], b["id"]})
    b["deps"] = sorted({*b["deps"], a["id"]})


TAMPERED = {  # name: (edit, words the refusal names)
    "out_bytes_negative": (_set("out_bytes", -1), ["out_bytes", "-1", "greater than or equal to 0"]),
    "out_bytes_huge": (_set("out_bytes", 10**30), ["writes 1000000000000000000000000000000"]),
    "start_nan": (_set("start", float("nan")), ["NaN is not allowed"]),
    "start_after_end": (_set("start", 10**30), ["need start < end"]),
    "cyclic_deps": (_cycle, ["depends on task", "dependences must be earlier tasks"]),
    "memory_unknown": (lambda d: d["tensors"][0].update(memory="nowhere"), ["chip0:nowhere", "not in the schedule's"]),
    "memory_zero_capacity": (lambda d: d["memories"][0].update(capacity_bytes=0), ["capacity_bytes", "(got 0)"]),
}


@pytest.mark.parametrize("case", sorted(TAMPERED))
def test_a_tampered_schedule_is_refused_by_simulate_dynamic_before_it_runs(hostile, saved, case):
    edit, words = TAMPERED[case]
    data = json.loads(json.dumps(saved))
    edit(data)
    path = hostile.write("tampered.json", json.dumps(data, allow_nan=True))
    hostile.cli_refuses(["simulate", path, "--dynamic", "--out", hostile.tmp / "plots"], str(path), *words,
                        codes=(1,))
    assert not (hostile.tmp / "plots").exists()


def test_hw_set_without_hw_is_refused_not_ignored(hostile, saved):
    """`simulate FILE --hw-set chips.0.memories.0.capacity_bytes=1` replayed the file on its own 220 MiB memory
    and exited 0: the user's hardware change was dropped without a word."""
    path = hostile.write("s.json", json.dumps(saved))
    for command in (["simulate", path, "--dynamic", "--out", hostile.tmp / "plots"], ["check", path]):
        hostile.cli_refuses([*command, "--hw-set", "chips.0.memories.0.capacity_bytes=1"],
                            "--hw-set chips.0.memories.0.capacity_bytes=1", "without --hw", "recompile", codes=(1,))
    assert not (hostile.tmp / "plots").exists()


def test_dynamic_at_stage_granularity_is_refused_not_ignored(hostile):
    """`run --granularity stage --dynamic` printed the stage-level figures and exited 0, as if they answered it."""
    hostile.cli_refuses(["run", "--hw", "groq_like", "--model", "mlp", "--batch", "2", "--set", "sizes=16,8,4",
                         "--granularity", "stage", "--dynamic", "--out", hostile.tmp / "plots"],
                        "--dynamic", "stage granularity", "--granularity task", codes=(1,))


def test_port_contention_off_in_dynamic_mode_is_refused_not_ignored(hostile):
    """A.simulate(s, hw, mode="dynamic", port_contention=False) returned the contended work-queue run: the
    option is the static replay's."""
    g = A.Graph("two_layers")
    F.exp(F.relu(g.input("x", (64,))))
    hw = _toy_hw(1 << 16)
    schedule = A.compile(g, hw)
    hostile.refuses(lambda: A.simulate(schedule, hw, mode="dynamic", graph=g, port_contention=False),
                    "port_contention=False", "dynamic", "mode='static'")
    assert A.simulate(schedule, hw, mode="static", graph=g, port_contention=False).makespan_cycles > 0
