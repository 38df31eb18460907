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
