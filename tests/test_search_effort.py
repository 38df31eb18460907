"""The list-scheduling search spends its budget where it pays: the `effort` option scales it, and a plan
within GAP_STOP of its lower bound stops searching (issue 27)."""
from __future__ import annotations

import pytest

import accelsim as A
from accelsim.compiler.planning.expand import expand
from accelsim.compiler.timing import improve
from accelsim.compiler.timing.bounds import lower_bounds
from accelsim.compiler.timing.search import EFFORT_BUDGETS, GAP_STOP, THOROUGH_FACTOR, effort_budget
from accelsim.errors import ScheduleError
from accelsim.passes import inference_graph
from accelsim.schedule.options import EFFORTS, StepOptions

BEFORE = {
    ("superres", "bespoke_superres", True, 1): 264232,
    ("superres", "groq_like", True, 1): 44338,
    ("mlp", "a100_like", True, 1): 1894,
    ("transformer_block", "a100_like", True, 1): 33712,
    ("superres", "bespoke_superres", False, 2): 168752,
    ("superres", "bespoke_superres", True, 2): 365114,
    ("superres", "bespoke_superres", False, 4): 245900,
}
"""(model, hardware, training, M) -> the makespan (cycles) that compile produced at commit c5dcbb4, before
efforts, the gap stop, the stale stop and accumulations first existed (that search's budget is today's
default). Recorded once from that commit's code, not from this one's, so the test compares with the past."""


def _hw_as_recorded(name: str) -> A.HwSpec:
    """The hardware the BEFORE makespans were recorded on: a100_like had no GPU overheads then (issue 28 added
    launch and tail latency, HBM efficiency and one compute stream) and no GEMM tiles (gpu_gemm, issue 27),
    so its cases drop both keys."""
    data = A.load_hw(name).model_dump()
    for chip in data["chips"]:
        chip.pop("gpu_overheads", None)
        chip.pop("gpu_gemm", None)
    return A.hw.parse_hw(data, f"{name} as recorded")


def _graph(model: str, training: bool):
    fwd = A.models.build(model)
    return A.training_graph(fwd) if training else inference_graph(fwd)


def _count_runs(monkeypatch) -> list[str]:
    calls: list[str] = []
    real = improve.list_schedule
    monkeypatch.setattr(improve, "list_schedule", lambda *a, **k: calls.append(a[2]) or real(*a, **k))
    return calls


@pytest.mark.parametrize("case", sorted(BEFORE), ids=lambda c: f"{c[0]}-{c[1]}-{'train' if c[2] else 'infer'}-M{c[3]}")
def test_the_default_effort_is_never_longer_than_the_search_before_it(case):
    model, hw, training, m = case
    sched = A.compile(_graph(model, training), _hw_as_recorded(hw), microbatches=m)
    assert sched.options.effort == "default"
    assert sched.makespan_cycles <= BEFORE[case]


def test_fast_effort_runs_only_the_two_rules_compile_always_ran(monkeypatch):
    graph = _graph("mlp", True)
    calls = _count_runs(monkeypatch)
    fast = A.compile(graph, "a100_like", split=False, effort="fast")
    assert calls == list(improve.ALWAYS)
    calls.clear()
    default = A.compile(graph, "a100_like", split=False)
    assert len(calls) > len(improve.ALWAYS)  # the default searched further, and found no longer schedule
    assert default.makespan_cycles <= fast.makespan_cycles


def test_thorough_effort_searches_more_and_finds_no_longer_schedule(monkeypatch):
    graph = _graph("superres", False)
    calls = _count_runs(monkeypatch)
    default = A.compile(graph, "bespoke_superres", microbatches=2, split=False)
    default_runs = len(calls)
    calls.clear()
    thorough = A.compile(graph, "bespoke_superres", microbatches=2, split=False, effort="thorough")
    assert len(calls) > default_runs
    assert thorough.makespan_cycles <= default.makespan_cycles


def test_a_plan_within_the_gap_of_its_bound_stops_after_the_always_rules(monkeypatch):
    hw = A.load_hw("a100_like")
    plan = expand(_graph("mlp", True), hw, StepOptions())
    rules = improve.distinct_rules(plan)
    first = min(improve.makespan_of(improve.list_schedule(plan, hw, r)[0]) for r in improve.ALWAYS if r in rules)
    gap = first / lower_bounds(plan, hw).bound_cycles - 1  # the ALWAYS rules' schedule is exactly this far off
    calls = _count_runs(monkeypatch)
    improve.improve(plan, hw, improve.Budget(gap_stop=gap))
    assert calls == [r for r in rules if r in improve.ALWAYS]
    calls.clear()
    improve.improve(plan, hw, improve.Budget(gap_stop=gap * 0.99))  # just outside the gap: it searches on
    assert len(calls) > len([r for r in rules if r in improve.ALWAYS])


def test_every_effort_has_a_budget_and_the_gap_stop_and_thorough_scales_the_default():
    assert tuple(EFFORT_BUDGETS) == EFFORTS
    assert all(b.gap_stop == GAP_STOP == 0.01 for b in EFFORT_BUDGETS.values())
    default, thorough = EFFORT_BUDGETS["default"], EFFORT_BUDGETS["thorough"]
    assert (default.work_tasks, default.max_runs) == (improve.BUDGET.work_tasks, improve.BUDGET.max_runs)
    assert thorough.work_tasks == THOROUGH_FACTOR * default.work_tasks > default.work_tasks
    assert thorough.patience_tasks == THOROUGH_FACTOR * default.patience_tasks
    assert EFFORT_BUDGETS["fast"].work_tasks == 0
    assert improve.BUDGET.gap_stop == 0  # schedule_dag, the benchmarked search, goes on to the bound
    with pytest.raises(ScheduleError, match="fast, default, thorough"):
        effort_budget("quick")
