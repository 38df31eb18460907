"""The exact mode (CP-SAT) on hand-checkable DAG problems, and against the list scheduler."""
from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

from accelsim.errors import ScheduleError
from accelsim.compiler import schedule_dag
from accelsim.compiler.exact import MAX_EXACT_TASKS, solve_dag_exact

needs_ortools = pytest.mark.skipif(importlib.util.find_spec("ortools") is None,
                                   reason="OR-Tools not installed (pip install accelsim[exact])")


def _generated(n: int) -> list[tuple[str, dict]]:
    """The benchmark's own generator, loaded from experiments/ (not a package)."""
    path = Path(__file__).resolve().parents[1] / "experiments" / "dag_problems.py"
    spec = importlib.util.spec_from_file_location("dag_problems", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.problems(n, seed=1, max_tasks=24)


def _assert_valid(problem: dict, tasks: dict, makespan: int) -> None:
    """Every dependency and delay respected, instances in range and never double-booked."""
    duration = {t["id"]: t["duration"] for t in problem["tasks"]}
    end = {tid: p["start"] + duration[tid] for tid, p in tasks.items()}
    assert set(tasks) == set(duration)
    assert makespan == max(end.values())
    for a, b, *delay in problem["deps"]:
        assert tasks[b]["start"] >= end[a] + (delay[0] if delay else 0), (a, b)
    booked: dict[tuple[str, int], list[tuple[int, int]]] = {}
    for t in problem["tasks"]:
        p = tasks[t["id"]]
        assert p["unit"] == t["kind"] and 0 <= p["instance"] < problem["units"][t["kind"]]
        booked.setdefault((p["unit"], p["instance"]), []).append((p["start"], end[t["id"]]))
    for spans in booked.values():
        spans.sort()
        assert all(e0 <= s1 for (_, e0), (s1, _) in zip(spans, spans[1:])), spans


def _two_tasks(instances: int) -> dict:
    return {"units": {"mxu": instances}, "deps": [],
            "tasks": [{"id": "a", "kind": "mxu", "duration": 5}, {"id": "b", "kind": "mxu", "duration": 5}]}


@needs_ortools
@pytest.mark.parametrize(("instances", "optimum"), [(1, 10), (2, 5)])
def test_two_independent_tasks_share_one_instance_or_run_side_by_side(instances, optimum):
    result = solve_dag_exact(_two_tasks(instances))
    assert (result.makespan, result.lower_bound, result.optimal) == (optimum, optimum, True)
    _assert_valid(_two_tasks(instances), result.tasks, result.makespan)


@needs_ortools
def test_a_chain_takes_its_durations_plus_its_delay():
    problem = {"units": {"mxu": 2, "vpu": 1},
               "tasks": [{"id": "x", "kind": "mxu", "duration": 3}, {"id": "y", "kind": "vpu", "duration": 4},
                         {"id": "z", "kind": "mxu", "duration": 2}],
               "deps": [["x", "y", 7], ["y", "z"]]}
    result = solve_dag_exact(problem)
    assert (result.makespan, result.optimal) == (3 + 7 + 4 + 2, True)
    assert result.tasks["y"]["start"] == 10
    _assert_valid(problem, result.tasks, result.makespan)


@needs_ortools
@pytest.mark.parametrize(("instances", "optimum"), [(1, 1 + 4 + 6 + 1), (2, 1 + 6 + 1)])
def test_a_diamond_runs_its_branches_side_by_side_only_on_two_instances(instances, optimum):
    problem = {"units": {"mxu": instances},
               "tasks": [{"id": i, "kind": "mxu", "duration": d} for i, d in [("s", 1), ("l", 4), ("r", 6), ("t", 1)]],
               "deps": [["s", "l"], ["s", "r"], ["l", "t"], ["r", "t"]]}
    result = solve_dag_exact(problem)
    assert (result.makespan, result.optimal) == (optimum, True)
    _assert_valid(problem, result.tasks, result.makespan)


@needs_ortools
@pytest.mark.parametrize(("name", "problem"), _generated(5))
def test_list_schedule_is_never_below_the_proved_optimum(name, problem):
    heuristic = schedule_dag(problem)
    result = solve_dag_exact(problem, time_limit_s=5.0, hint=heuristic)
    _assert_valid(problem, result.tasks, result.makespan)
    assert result.lower_bound <= result.makespan <= heuristic["makespan"]
    if result.optimal:
        assert result.lower_bound == result.makespan


@needs_ortools
def test_a_rerun_gives_the_same_schedule():
    _, problem = _generated(1)[0]
    hint = schedule_dag(problem)
    first, second = solve_dag_exact(problem, hint=hint), solve_dag_exact(problem, hint=hint)
    assert first.optimal and (first.makespan, first.tasks) == (second.makespan, second.tasks)


@needs_ortools
def test_a_problem_above_the_task_limit_is_refused_naming_size_and_limit():
    n = MAX_EXACT_TASKS + 1
    problem = {"units": {"mxu": 1}, "deps": [],
               "tasks": [{"id": f"t{i}", "kind": "mxu", "duration": 1} for i in range(n)]}
    with pytest.raises(ScheduleError, match=f"{MAX_EXACT_TASKS:,} tasks.*{n:,} tasks"):
        solve_dag_exact(problem)


@needs_ortools
def test_a_hint_missing_tasks_is_refused():
    with pytest.raises(ScheduleError, match=r"missing tasks \['b'\]"):
        solve_dag_exact(_two_tasks(1), hint={"makespan": 5, "tasks": {"a": {"start": 0, "unit": "mxu",
                                                                            "instance": 0}}})


def test_without_ortools_the_exact_mode_says_how_to_install_it(monkeypatch):
    for name in ("ortools", "ortools.sat", "ortools.sat.python", "ortools.sat.python.cp_model"):
        monkeypatch.setitem(sys.modules, name, None)  # None in sys.modules makes the import fail
    with pytest.raises(ScheduleError, match=r"needs OR-Tools: pip install accelsim\[exact\]"):
        solve_dag_exact(_two_tasks(1))


def test_without_ortools_compile_exact_says_how_to_install_it(monkeypatch):
    import accelsim as A

    for name in ("ortools", "ortools.sat", "ortools.sat.python", "ortools.sat.python.cp_model"):
        monkeypatch.setitem(sys.modules, name, None)
    graph = A.training_graph(A.models.build("mlp", batch=2, sizes=(16, 8, 4)))
    with pytest.raises(ScheduleError, match=r"needs OR-Tools: pip install accelsim\[exact\]"):
        A.compile(graph, "groq_like", exact=True)
