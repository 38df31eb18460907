"""The task-level list scheduler follows a pipeline schedule's per-chip order (options.pipeline_schedule)."""
from __future__ import annotations

import pytest

import accelsim as A
from accelsim.compiler.hierarchy.schedules import pipeline_schedule
from accelsim.schedule.plan import PER_STEP

P, M = 2, 4


@pytest.fixture(scope="module")
def graph():
    return A.training_graph(A.models.build("mlp"))


def _compile(graph, schedule):
    return A.compile(graph, "groq_like_x4", microbatches=M, pipeline_stages=P, pipeline_schedule=schedule,
                     split=False)


def _first_starts(sched, stage: int) -> dict[tuple[str, int], int]:
    """(forward|backward, micro-batch) -> the first start of any of its tasks on `stage`."""
    first: dict[tuple[str, int], int] = {}
    for t in sched.tasks:
        if t.stage == stage and t.microbatch != PER_STEP and t.phase in ("forward", "backward"):
            key = (t.phase, t.microbatch)
            first[key] = min(first.get(key, t.start), t.start)
    return first


@pytest.mark.parametrize("name", ["gpipe", "1f1b", "zb-h1"])
def test_every_stage_starts_its_items_in_the_schedules_order(graph, name):
    """ZB-H1's weight_grad items follow their own backward item, so forward and backward items suffice."""
    sched = _compile(graph, name)
    order = pipeline_schedule(name).order(P, 1, M)
    for stage in range(P):
        first = _first_starts(sched, stage)
        items = [(it.kind, it.microbatch) for it in order[stage] if it.kind != "weight_grad"]
        starts = [first[item] for item in items]
        assert starts == sorted(starts), (name, stage, list(zip(items, starts)))


def test_gpipe_starts_no_backward_before_every_forward_of_its_stage_started(graph):
    gpipe = _compile(graph, "gpipe")
    for stage in range(P):
        first = _first_starts(gpipe, stage)
        assert max(first[("forward", m)] for m in range(M)) <= min(first[("backward", m)] for m in range(M))
    # the list scheduler's own order runs the last stage's backward of micro-batch 0 before its later forwards
    own = _first_starts(_compile(graph, None), P - 1)
    assert own[("backward", 0)] < own[("forward", M - 1)]


def test_1f1b_stashes_p_micro_batches_where_gpipe_stashes_all(graph):
    assert _compile(graph, "1f1b").options.max_in_flight == P
    assert _compile(graph, "gpipe").options.max_in_flight == M


def test_interleaved_at_task_granularity_is_refused_with_what_to_do(graph):
    with pytest.raises(A.AccelsimError, match="stage granularity"):
        A.compile(graph, "groq_like_x4", microbatches=M, pipeline_stages=P, pipeline_schedule="interleaved",
                  virtual_stages=2)


def test_zb_h1_splits_a_stages_backward_into_input_gradients_and_weight_gradients(graph):
    """B: the backward tasks the previous stage's gradient depends on; W: the rest (weight gradients only)."""
    from accelsim.compiler.planning.expand import expand
    from accelsim.compiler.timing.pipeline_order import input_gradient_tasks
    from accelsim.schedule.options import StepOptions

    hw = A.load_hw("groq_like_x4")
    plan = expand(graph, hw, StepOptions(microbatches=1, pipeline_stages=P, split=False))
    feeds = input_gradient_tasks(plan)
    backward = [t for t in plan.tasks if t.phase == "backward"]
    sent_back = [t for t in backward if t.stage == 1 and plan.tasks[t.id].out_chip != plan.tasks[t.id].chip]
    assert sent_back and all(feeds[t.id] for t in sent_back)  # the gradient sent to stage 0 is B
    assert any(not feeds[t.id] for t in backward if t.stage == 1)  # stage 1's weight gradients are W
    assert not any(feeds[t.id] for t in backward if t.stage == 0)  # nothing earlier needs stage 0's gradient
    assert not any(feeds[t.id] for t in plan.tasks if t.phase != "backward")


@pytest.mark.parametrize("p", [2, 4])
def test_zb_h1_counts_a_tied_gradients_step_summed_part_and_its_accumulation_as_w_at_both_levels(p):
    """Small gpt2 (tied embedding), M=2: the LM head's part of the vocabulary matrix's gradient is summed over
    the step on the last stage and sent to stage 0 once (planning/step_sums.py). It and its accumulation are W
    (no micro-batch's input gradient waits for them), and the task level's B/W split of every backward task
    on stages past the first (stage 0's B feeds no earlier stage: all W at task level) is the stage level's
    (hierarchy/templates.weight_grad_nodes), which times the accumulation as W (templates.accumulate_cycles)."""
    from accelsim.compiler.hierarchy.templates import weight_grad_nodes
    from accelsim.compiler.planning.expand import expand
    from accelsim.compiler.planning.step_sums import step_summed_parts
    from accelsim.compiler.timing.pipeline_order import input_gradient_tasks
    from accelsim.models.sizes import SMALL
    from accelsim.schedule.options import StepOptions

    graph = A.training_graph(A.models.build("gpt2", **SMALL["gpt2"]), optimizer="sgd")
    plan = expand(graph, A.load_hw("a100_x8"), StepOptions(microbatches=2, pipeline_stages=p))
    feeds = input_gradient_tasks(plan)
    parts = step_summed_parts(graph, plan.stage_of_node)
    assert len(parts) == 1 and all(plan.stage_of_node[i] == p - 1 for i in parts)
    summed = [t for t in plan.tasks if t.node in parts and t.kind in ("node", "accumulate") and t.phase == "backward"]
    assert sorted(t.kind for t in summed) == ["accumulate", "node", "node"]
    assert not any(feeds[t.id] for t in summed)
    wgrad = weight_grad_nodes(graph, plan.stage_of_node, parts)
    backward = [t for t in plan.tasks if t.phase == "backward" and t.kind in ("node", "accumulate") and t.stage > 0]
    assert any(feeds[t.id] for t in backward)
    assert [t.id for t in backward if feeds[t.id] == (t.node in wgrad)] == []


def _task(tid: int, phase: str, deps: list[int], microbatch: int = 0):
    """A task on stage 0; a forward task reads its micro-batch's input (leaf node 99)."""
    from accelsim.compiler.planning.tasks import TaskSpec

    return TaskSpec(id=tid, kind="node", node=tid, op="reshape", phase=phase, microbatch=microbatch, replica=0,
                    stage=0, chip=0, out_chip=0, deps=deps, options=(("unit", 1, 10),), out_bytes=4,
                    reads=[(99, microbatch)] if phase == "forward" else [])


def test_a_weight_gradient_task_that_reads_only_forward_values_is_gated_as_its_b_pass():
    """ZB-H1 on one chip, items F0 (class 0), B0 (1), W0 (2), F1 (3). W0 holds a reshape of a stashed activation
    (reads F0 only), a transpose of that reshape, and the weight-gradient matmul (reads B0's gradient and the
    transpose). The reshape and the transpose pass B0's gate (F0 taken; no earlier than F0's start), not W0's;
    they start no item, so the matmul still waits for B0, and F1 for W0's matmul, as the order says."""
    from accelsim.compiler.timing.pipeline_order import ItemGates, free_weight_grad_tasks

    tasks = [_task(0, "forward", []), _task(1, "backward", [0]), _task(2, "backward", [0]),
             _task(3, "backward", [2]), _task(4, "backward", [1, 3]), _task(5, "forward", [], microbatch=1)]
    classes = [0, 1, 2, 2, 2, 3]
    assert free_weight_grad_tasks(tasks, classes) == {2: (0, 1), 3: (0, 1)}
    gates = ItemGates(tasks, classes)
    assert not gates.admit(2)  # B0's gate: F0 not taken yet
    assert gates.taken(0, 100) == [2]
    assert gates.earliest(2) == 100 and gates.admit(3) and gates.earliest(3) == 100
    assert gates.taken(2, 110) == [] and gates.taken(3, 120) == []  # no item started: W0 and F1 still wait
    assert not gates.admit(4) and not gates.admit(5)
    assert gates.taken(1, 500) == [4]
    assert gates.earliest(4) == 500
    assert gates.taken(4, 510) == [5]


def test_without_a_split_backward_pass_no_task_is_gated_as_another_item():
    """1F1B's backward item holds every backward task: the same tasks have no weight-gradient item to leave."""
    from accelsim.compiler.timing.pipeline_order import free_weight_grad_tasks

    tasks = [_task(0, "forward", []), _task(1, "backward", [0]), _task(2, "backward", [0]),
             _task(3, "backward", [1, 2])]
    assert free_weight_grad_tasks(tasks, [0, 1, 1, 1]) == {}


def test_a_task_that_reads_no_micro_batch_data_waits_for_no_item():
    """The last stage's loss seed (a scale, then a negation) for micro-batch 0 reads no micro-batch's data: it
    is the stage granularity's filler, run while the chip idles before F0, and starting it starts no item (B0
    still waits for F0). B0's gradient task, which reads the seed and F0's output, keeps B0's gate."""
    from accelsim.compiler.timing.pipeline_order import ItemGates, filler_tasks

    tasks = [_task(0, "forward", []), _task(1, "backward", []), _task(2, "backward", [1]), _task(3, "backward", [0, 2])]
    classes = [0, 1, 1, 1]
    assert filler_tasks(tasks) == [1, 2]
    gates = ItemGates(tasks, classes)
    assert gates.admit(1) and gates.earliest(1) == 0
    assert gates.taken(1, 0) == [] and gates.admit(2) and gates.taken(2, 10) == []
    assert not gates.admit(3)
    assert gates.taken(0, 100) == [3] and gates.earliest(3) == 100


def test_an_item_of_filler_alone_keeps_its_gate():
    """Where every task of an item reads no micro-batch's data, they stay the item's: its successors' gates
    wait for one of them, as before."""
    from accelsim.compiler.timing.pipeline_order import ItemGates

    tasks = [_task(0, "forward", []), _task(1, "backward", [])]
    gates = ItemGates(tasks, [0, 1])
    assert not gates.admit(1) and gates.taken(0, 5) == [1] and gates.earliest(1) == 5
