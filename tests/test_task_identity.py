"""A task's identity (schedule/identity.py) is declared once: the schedule's Task and the trace's Span inherit
it, the planner's TaskSpec declares the same fields, and every copy between them carries all of them."""
from __future__ import annotations

from dataclasses import fields

import pytest

import accelsim as A
from accelsim.api import validate_schedule
from accelsim.compiler.planning.expand import expand
from accelsim.compiler.planning.tasks import TaskSpec
from accelsim.errors import ScheduleError
from accelsim.models.sizes import SMALL
from accelsim.schedule.identity import IDENTITY_FIELDS, TaskIdentity, identity_of
from accelsim.schedule.plan import Task
from accelsim.sim import Span, simulate


@pytest.fixture(scope="module")
def step():
    """mlp training over two replicas of two pipeline stages: node, accumulate, transfer and all-reduce tasks."""
    hw = A.load_hw("groq_like_x4")
    graph = A.training_graph(A.models.build("mlp", **SMALL["mlp"]))
    return hw, graph, A.compile(graph, hw, microbatches=2, data_parallel=2, pipeline_stages=2)


def test_the_planners_task_declares_the_identity_in_order_with_the_same_types():
    declared = {f.name: f.type for f in fields(TaskSpec) if f.name in IDENTITY_FIELDS}
    assert list(declared) == list(IDENTITY_FIELDS)
    assert declared == {f.name: f.type for f in fields(TaskIdentity)}


def test_the_schedules_task_and_the_traces_span_inherit_the_identity():
    assert issubclass(Task, TaskIdentity) and issubclass(Span, TaskIdentity)
    assert set(IDENTITY_FIELDS) <= set(Task.model_fields)


def test_every_task_has_its_plans_identity(step):
    hw, graph, sched = step
    plan = expand(graph, hw, sched.options, sched.options.max_in_flight)
    assert [identity_of(s) for s in plan.tasks] == [identity_of(t) for t in sched.tasks]


@pytest.mark.parametrize("mode", ["static", "dynamic"])
def test_every_span_carries_its_tasks_identity(step, mode):
    hw, _, sched = step
    result = simulate(sched, hw, mode)
    assert sorted(s.task for s in result.spans) == [t.id for t in sched.tasks]
    assert all(identity_of(s) == identity_of(sched.tasks[s.task]) for s in result.spans)
    assert {s.stage for s in result.spans} == {0, 1}
    assert {"node", "accumulate", "transfer", "allreduce"} <= {s.kind for s in result.spans}


def test_a_task_whose_identity_is_not_the_plans_is_refused_naming_the_field(step):
    hw, graph, sched = step
    t = next(t for t in sched.tasks if t.kind == "node" and t.stage == 0)
    tasks = list(sched.tasks)
    tasks[t.id] = t.model_copy(update={"stage": 1})
    with pytest.raises(ScheduleError, match=f"task {t.id} .* is not the task the compiler plans: stage 1 "
                                            r"\(expected 0\)"):
        validate_schedule(sched.model_copy(update={"tasks": tuple(tasks)}), graph, hw)
