"""validate_schedule on hand-built schedules, and schedule files: round trip, stale and malformed files."""
import json
from pathlib import Path

import pytest

import accelsim as A
from accelsim.errors import ScheduleError
from accelsim.schedule.io import save_schedule
from accelsim.api import load_schedule
from accelsim.schedule.plan import (Bounds, Candidate, MemoryUse, Schedule, Task, Tensor, graph_hash,
                                    hw_hash)
from accelsim.schedule.options import StepOptions
from accelsim.api import validate_schedule

SRAM = "chip0:sram"


def tiny_graph(extra_node: bool = False) -> A.Graph:
    """x -> relu -> exp, and x -> sin on the side."""
    g = A.Graph("tiny")
    x = g.input("x", (4,))
    y = A.ops.relu(x)
    A.ops.exp(y)
    A.ops.sin(x)
    if extra_node:
        A.ops.neg(y)
    return g


def task(id, node, op, start, end, deps=(), instance=0, reads=()) -> Task:
    return Task(id=id, kind="node", node=node, op=op, phase="forward", microbatch=0, replica=0, stage=0, chip=0,
                out_chip=0, resource="vpu", instance=instance, start=start, end=end, deps=deps, candidates=0,
                reads=reads, out_bytes=16, port="sram")


def tensor(node, task, offset, start, end) -> Tensor:
    return Tensor(node=node, microbatch=0, replica=0, task=task, chip=0, memory="sram", offset=offset,
                  size_bytes=64, start=start, end=end)


def tiny_schedule(graph: A.Graph) -> Schedule:
    """relu [0,10) then exp [10,20) on vpu[0]; sin [0,10) on vpu[1]; exp reuses sin's bytes once sin is dead."""
    tasks = (task(0, 1, "relu", 0, 10, reads=((0, 0),)), task(1, 2, "exp", 10, 20, deps=(0,)),
             task(2, 3, "sin", 0, 10, instance=1, reads=((0, 0),)))
    tensors = (tensor(0, -1, 0, 0, 20), tensor(1, 0, 64, 0, 20), tensor(2, 1, 128, 10, 20), tensor(3, 2, 128, 0, 10))
    return Schedule(graph_name=graph.name, graph_hash=graph_hash(graph), hw_name="toy", hw_hash="toy-hash",
                    clock_hz=1e9, options=StepOptions(), training=False, samples_per_step=1,
                    candidates=((Candidate(resource="vpu", instances=4, cycles=10),),), tasks=tasks,
                    tensors=tensors, memories=(MemoryUse(chip=0, memory="sram", capacity_bytes=1024, peak_bytes=192),),
                    makespan_cycles=20,
                    bounds=Bounds(critical_path_cycles=20, resource_cycles=15, resource="vpu", bound_cycles=20))


def with_task(s: Schedule, i: int, **changes) -> Schedule:
    tasks = list(s.tasks)
    tasks[i] = tasks[i].model_copy(update=changes)
    return s.model_copy(update={"tasks": tuple(tasks)})


def with_tensor(s: Schedule, i: int, **changes) -> Schedule:
    tensors = list(s.tensors)
    tensors[i] = tensors[i].model_copy(update=changes)
    return s.model_copy(update={"tensors": tuple(tensors)})


def problems(s: Schedule, graph: A.Graph | None = None) -> str:
    with pytest.raises(ScheduleError) as err:
        validate_schedule(s, graph)
    return str(err.value)


@pytest.fixture
def graph():
    return tiny_graph()


@pytest.fixture
def sched(graph):
    return tiny_schedule(graph)


def test_hand_built_schedule_is_valid_with_and_without_its_graph(sched, graph):
    validate_schedule(sched)
    validate_schedule(sched, graph)


def test_task_starting_before_its_dependence_ends_is_reported(sched, graph):
    msg = problems(with_task(sched, 1, start=5, instance=2), graph)
    assert "task 1 (node exp %2 'exp2', mb 0, replica 0) starts at 5 before its dependence " \
           "task 0 (node relu %1 'relu1', mb 0, replica 0) ends at 10" in msg


def test_missing_graph_dependence_is_reported_only_when_the_graph_is_given(sched, graph):
    broken = with_task(sched, 1, deps=())
    validate_schedule(broken)
    msg = problems(broken, graph)
    assert "task 1 (node exp %2 'exp2', mb 0, replica 0) needs relu %1 'relu1'" in msg


def test_schedule_checked_against_another_graph_is_reported(sched):
    msg = problems(sched, tiny_graph(extra_node=True))
    assert "compiled for graph 'tiny'" in msg


def test_two_tasks_on_one_unit_instance_must_not_overlap(sched):
    msg = problems(with_task(sched, 2, instance=0))
    assert "chip0 vpu[0]" in msg
    assert "'sin'" not in msg  # without the graph, nodes are named by op and id
    assert "node sin %3" in msg and "node relu %1" in msg


def test_overlapping_tasks_on_different_unit_instances_are_fine(sched):
    assert sched.tasks[0].start == sched.tasks[2].start
    validate_schedule(with_task(sched, 2, instance=3))


def test_memory_over_capacity_is_reported(sched, graph):
    small = sched.model_copy(update={"memories": (MemoryUse(chip=0, memory="sram", capacity_bytes=160,
                                                            peak_bytes=192),)})
    msg = problems(small, graph)
    assert "tensor of exp %2 'exp2' (mb 0, replica 0, task 1) in chip0:sram at [128, 192)" in msg
    assert "ends past the capacity of chip0:sram (160 bytes)" in msg


def test_tensors_overlapping_in_time_and_address_are_reported(sched, graph):
    msg = problems(with_tensor(sched, 2, offset=96), graph)
    assert "tensor of exp %2 'exp2'" in msg and "overlaps tensor of relu %1 'relu1'" in msg


def test_tensors_sharing_addresses_at_different_times_are_fine(sched, graph):
    exp_tensor, sin_tensor = sched.tensors[2], sched.tensors[3]
    assert exp_tensor.offset == sin_tensor.offset and sin_tensor.end == exp_tensor.start
    validate_schedule(sched, graph)


def test_tensor_freed_before_its_reader_ends_is_reported(sched, graph):
    msg = problems(with_tensor(sched, 1, end=15), graph)
    assert "tensor of relu %1 'relu1' (mb 0, replica 0, task 0) in chip0:sram at [64, 128) live [0, 15) must be " \
           "live over [0, 20): from its producer's start to its last reader's end" in msg


def test_wrong_peak_memory_is_reported(sched):
    msg = problems(sched.model_copy(update={"memories": (MemoryUse(chip=0, memory="sram", capacity_bytes=1024,
                                                                    peak_bytes=40),)}))
    assert "the peak of chip0:sram is recorded as 40 bytes but the tensors placed there peak at 192 bytes" in msg


def test_wrong_makespan_is_reported(sched):
    msg = problems(sched.model_copy(update={"makespan_cycles": 25}))
    assert "makespan_cycles is 25 but the last task ends at 20" in msg


def test_inconsistent_bounds_are_reported(sched):
    bounds = sched.bounds.model_copy(update={"bound_cycles": 30})
    msg = problems(sched.model_copy(update={"bounds": bounds}))
    assert "bounds.bound_cycles is 30" in msg and "beats the lower bound 30" in msg


def test_task_ids_out_of_order_are_reported(sched):
    msg = problems(sched.model_copy(update={"tasks": tuple(reversed(sched.tasks))}))
    assert "task 2 (node sin %3, mb 0, replica 0) is at position 0" in msg


def test_a_schedule_without_tasks_or_with_a_self_dependence_is_refused(sched):
    assert "no tasks" in problems(sched.model_copy(update={"tasks": (), "tensors": (), "makespan_cycles": 0,
                                                          "bounds": sched.bounds.model_copy(update={
                                                              "critical_path_cycles": 0, "resource_cycles": 0,
                                                              "bound_cycles": 0})}))
    assert "dependences must be earlier tasks" in problems(with_task(sched, 1, deps=(1,)))


def test_a_task_on_a_resource_outside_its_candidates_or_instances_is_refused(sched):
    assert "not one of its candidates" in problems(with_task(sched, 2, resource="mxm"))
    assert "instance 7 of 'vpu', which has 4" in problems(with_task(sched, 2, instance=7))


def test_a_missing_or_resized_output_tensor_is_refused(sched, graph):
    assert "has 0 output tensors placed" in problems(sched.model_copy(update={"tensors": sched.tensors[:3]}), graph)
    assert "has 1 bytes but task 0" in problems(with_tensor(sched, 1, size_bytes=1))


def test_many_problems_are_capped_with_a_count_of_the_rest(sched):
    tasks = tuple(task(i, 1, "relu", 0, 10, instance=9) for i in range(30))
    msg = problems(sched.model_copy(update={"tasks": tasks, "makespan_cycles": 10, "tensors": ()}))
    assert "... and " in msg and "more" in msg
    assert len(msg.splitlines()) == 1 + 20 + 1


def test_save_then_load_round_trips_byte_for_byte(sched, graph, tmp_path):
    first, second = tmp_path / "a" / "s.json", tmp_path / "b.json"
    save_schedule(sched, first)
    loaded = load_schedule(first, graph)
    save_schedule(loaded, second)
    assert loaded == sched
    assert first.read_bytes() == second.read_bytes()


def test_loading_for_another_graph_is_refused(sched, tmp_path):
    save_schedule(sched, tmp_path / "s.json")
    with pytest.raises(ScheduleError, match=r"compiled for graph 'tiny' .* recompile with `accelsim compile`"):
        load_schedule(tmp_path / "s.json", graph=tiny_graph(extra_node=True))


def test_loading_for_other_hardware_is_refused_and_matching_hardware_accepted(sched, tmp_path):
    hw = A.load_hw("groq_like")
    save_schedule(sched, tmp_path / "s.json")
    with pytest.raises(ScheduleError, match=r"hardware 'toy' .* 'groq_like' .* `accelsim compile`"):
        load_schedule(tmp_path / "s.json", hw=hw)
    graph = A.training_graph(A.models.build("mlp", batch=2, sizes=(16, 8, 4)))
    save_schedule(A.compile(graph, hw), tmp_path / "ok.json")
    assert load_schedule(tmp_path / "ok.json", graph, hw).hw_hash == hw_hash(hw)


def test_corrupted_json_names_the_file(sched, tmp_path):
    path = tmp_path / "s.json"
    save_schedule(sched, path)
    path.write_text(path.read_text()[:50])
    with pytest.raises(ScheduleError, match=r"s\.json: not valid JSON"):
        load_schedule(path)


def test_wrong_field_names_the_file_and_field_path(sched, tmp_path):
    path = tmp_path / "s.json"
    data = sched.model_dump(mode="json")
    data["tasks"][1]["start"] = "soon"
    del data["makespan_cycles"]
    path.write_text(json.dumps(data))
    with pytest.raises(ScheduleError) as err:
        load_schedule(path)
    msg = str(err.value)
    assert "s.json: not a valid schedule: 2 problem(s)" in msg
    assert "tasks[1].start: Input should be a valid integer" in msg and "soon" in msg
    assert "makespan_cycles: Field required" in msg


def test_missing_file_names_the_file(tmp_path):
    with pytest.raises(ScheduleError, match=r"nope\.json: no such schedule file"):
        load_schedule(tmp_path / "nope.json")


def test_tasks_asking_a_memory_port_for_more_bandwidth_than_it_has_are_reported():
    """multicore_cpu's cores share one DRAM port: the compiled schedule books it within capacity; a task
    claiming to stream 100x its bytes over-asks it, and a slower DRAM is other hardware (refused by hash)."""
    hw = A.load_hw("multicore_cpu")
    graph = A.training_graph(A.models.build("mlp", batch=64, sizes=(784, 256, 10)))  # compute-bound GEMMs
    sched = A.compile(graph, hw, microbatches=2)
    validate_schedule(sched, graph, hw)
    t = next(t for t in sched.tasks if t.bytes_moved and any(
        u.id != t.id and u.port == t.port and u.bytes_moved and u.start < t.end and t.start < u.end for u in sched.tasks))
    greedy = with_task(sched, t.id, bytes_moved=100 * t.bytes_moved)
    with pytest.raises(ScheduleError, match=r"port chip0:dram is asked for [\d.]+ B/cycle at cycle \d+, more than"):
        validate_schedule(greedy, graph, hw)
