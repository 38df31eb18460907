"""Exact mode: the optimal makespan of an abstract DAG problem by OR-Tools CP-SAT (problem -> ExactResult).

A start per task, precedence with delays, and per unit kind a NoOverlap per instance of optional intervals
(plus a redundant cumulative); minimize the makespan. OR-Tools is an optional extra, imported only here.
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from accelsim.errors import ScheduleError
from accelsim.schedule.dag import validate_dag_problem

MAX_EXACT_TASKS = 2_000
"""Tasks one exact solve accepts. The model grows linearly, but CP-SAT's search does not: with one worker
it proves most optima of 10-60 tasks within seconds, while on training steps of ~200 tasks and more
(measured: 220, 990 and 1,980 tasks) it ends 10 s still at the list schedule it was seeded with and with a
bound below half of it. So a larger step could only cost time: 1,980 tasks already take ~250 MB, and the
size a model build may reach is kept well under a second."""
MAX_EXACT_DEPS = 20_000
"""Dependencies one exact solve accepts: ten per task on average at the task limit, for the same reason."""
MAX_EXACT_PLACEMENTS = 20_000
"""Task x instance choices one solve accepts (tasks of a kind times its instance count, over the kinds whose
tasks outnumber their instances): each is a Boolean and an optional interval, so 2,000 tasks on up to ten
instances each."""


@dataclass(frozen=True, slots=True)
class ExactResult:
    """CP-SAT's best schedule and its proof: optimal is True only when makespan == lower_bound was proved."""

    makespan: int
    lower_bound: int
    optimal: bool
    seconds: float
    tasks: dict[str, dict[str, Any]]

    @property
    def gap(self) -> float:
        """(makespan - lower_bound) / makespan: 0.0 when proved optimal."""
        return 0.0 if self.makespan == 0 else (self.makespan - self.lower_bound) / self.makespan


def _import_cp_model():
    """The cp_model module, or a ScheduleError that says how to install it."""
    try:
        from ortools.sat.python import cp_model
    except ImportError as exc:
        raise ScheduleError("the exact mode needs OR-Tools: pip install accelsim[exact] "
                            f"(import failed: {exc})") from None
    return cp_model


def _check_size(problem: dict) -> None:
    """Refuse before building: the estimate is what the model would hold (see the limits above)."""
    n_tasks, n_deps = len(problem["tasks"]), len(problem.get("deps", []))
    per_kind = {kind: 0 for kind in problem["units"]}
    for t in problem["tasks"]:
        per_kind[t["kind"]] += 1
    placements = sum(n * count for kind, n in per_kind.items() if n > (count := problem["units"][kind]) > 1)
    if n_tasks > MAX_EXACT_TASKS or n_deps > MAX_EXACT_DEPS or placements > MAX_EXACT_PLACEMENTS:
        raise ScheduleError(
            f"the exact mode is limited to {MAX_EXACT_TASKS:,} tasks, {MAX_EXACT_DEPS:,} dependencies and "
            f"{MAX_EXACT_PLACEMENTS:,} task-instance choices; this problem has {n_tasks:,} tasks, {n_deps:,} "
            f"dependencies and {placements:,} choices (use the list schedule, or solve a smaller step)")


def _check_hint(problem: dict, hint: object) -> None:
    """A hint must place exactly the problem's tasks with integer times: a partial one would silently
    steer the search. It is only a starting point, so its feasibility is left to the solver."""
    ids = {t["id"] for t in problem["tasks"]}
    placed = hint.get("tasks") if isinstance(hint, dict) else None
    given = set(placed) if isinstance(placed, dict) else set()
    if given != ids:
        missing, extra = sorted(ids - given)[:5], sorted(map(str, given - ids))[:5]
        raise ScheduleError(f"hint must be a schedule_dag result for this problem: missing tasks {missing}, "
                            f"unknown tasks {extra}")
    bad = [tid for tid, p in placed.items() if not isinstance(p, dict)
           or not all(isinstance(p.get(k), int) and not isinstance(p.get(k), bool) for k in ("start", "instance"))]
    if bad or not isinstance(hint.get("makespan"), int):
        raise ScheduleError(f"hint: makespan and each task's start and instance must be integers "
                            f"(makespan {hint.get('makespan')!r:.40}, bad tasks {bad[:5]})")


def _horizon(problem: dict) -> int:
    """A feasible upper bound on the makespan: all tasks in a row, each after its largest incoming delay."""
    max_delay: dict[str, int] = {}
    for dep in problem.get("deps", []):
        delay = dep[2] if len(dep) == 3 else 0
        max_delay[dep[1]] = max(max_delay.get(dep[1], 0), delay)
    return sum(t["duration"] for t in problem["tasks"]) + sum(max_delay.values())


def _book_kind(model, tasks: list[dict], count: int, start_var: dict, hint: dict | None) -> dict[str, object]:
    """Keep `count` instances of one kind from overlapping; returns task id -> its instance (an int when
    fixed, else one Boolean per instance, exactly one true).

    Each instance gets a NoOverlap of optional intervals, plus a redundant cumulative of capacity `count`
    over the kind: on the benchmark's 40 problems (seed 0, when this was chosen) it proved 39 optima in 10 s,
    against 37 for the cumulative alone with instances coloured afterwards (its bound is weak where 2-3
    instances share a long chain of work) and 38 for the optional intervals alone.
    """
    if count >= len(tasks):  # the kind never binds: every task can have an instance of its own
        return {t["id"]: i for i, t in enumerate(tasks)}
    if count == 1:
        model.AddNoOverlap([model.NewFixedSizeIntervalVar(start_var[t["id"]], t["duration"], f"run_{t['id']}")
                            for t in tasks])
        return {t["id"]: 0 for t in tasks}
    lanes: list[list] = [[] for _ in range(count)]
    chosen = {}
    for t in tasks:
        tid, picks = t["id"], [model.NewBoolVar(f"on_{t['id']}_{i}") for i in range(count)]
        model.AddExactlyOne(picks)
        for i, pick in enumerate(picks):
            lanes[i].append(model.NewOptionalFixedSizeIntervalVar(start_var[tid], t["duration"], pick,
                                                                  f"run_{tid}_{i}"))
            if hint is not None:
                model.AddHint(pick, hint["tasks"][tid]["instance"] == i)
        chosen[tid] = picks
    for lane in lanes:
        model.AddNoOverlap(lane)
    model.AddCumulative([model.NewFixedSizeIntervalVar(start_var[t["id"]], t["duration"], f"run_{t['id']}")
                         for t in tasks], [1] * len(tasks), count)
    return chosen


def _instance(solver, on: object) -> int:
    """The instance a solved task runs on (see _book_kind)."""
    if isinstance(on, int):
        return on
    return next(i for i, pick in enumerate(on) if solver.BooleanValue(pick))


def solve_dag_exact(problem: dict, time_limit_s: float = 10.0, hint: dict | None = None) -> ExactResult:
    """The minimum makespan (cycles) of `problem`, or the best found and CP-SAT's bound within time_limit_s.

    hint: a schedule_dag result for the same problem; CP-SAT takes a complete, valid hint as its first
    solution, so a timed-out solve returns no worse. One search worker with a fixed seed: a solve that ends
    within the limit gives the same schedule every run (several workers race and are not reproducible).
    """
    cp_model = _import_cp_model()
    validate_dag_problem(problem)  # the scheduler's own rules: one definition of a valid problem
    _check_size(problem)
    if hint is not None:
        _check_hint(problem, hint)
    if not time_limit_s > 0:
        raise ScheduleError(f"time_limit_s must be a positive number of seconds, got {time_limit_s!r}")

    tasks, horizon = problem["tasks"], _horizon(problem)
    model = cp_model.CpModel()
    start_var = {t["id"]: model.NewIntVar(0, horizon, f"start_{t['id']}") for t in tasks}
    end_var = {t["id"]: start_var[t["id"]] + t["duration"] for t in tasks}
    for dep in problem.get("deps", []):
        delay = dep[2] if len(dep) == 3 else 0
        model.Add(start_var[dep[1]] >= end_var[dep[0]] + delay)
    on_instance = {}
    for kind, count in problem["units"].items():
        on_instance.update(_book_kind(model, [t for t in tasks if t["kind"] == kind], count, start_var, hint))
    makespan = model.NewIntVar(0, horizon, "makespan")
    model.AddMaxEquality(makespan, list(end_var.values()))
    model.Minimize(makespan)
    if hint is not None:
        for t in tasks:
            model.AddHint(start_var[t["id"]], hint["tasks"][t["id"]]["start"])
        model.AddHint(makespan, hint["makespan"])

    solver = cp_model.CpSolver()
    solver.parameters.max_time_in_seconds = float(time_limit_s)
    solver.parameters.num_workers = 1
    solver.parameters.random_seed = 0
    began = time.perf_counter()
    status = solver.Solve(model)
    seconds = time.perf_counter() - began

    if status == cp_model.INFEASIBLE or status == cp_model.MODEL_INVALID:
        raise ScheduleError(f"CP-SAT found the problem infeasible ({solver.StatusName(status)}): "
                            "a dependency cycle or a task kind with no instance")
    if status not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        raise ScheduleError(f"CP-SAT found no schedule within {time_limit_s} s ({len(tasks)} tasks, status "
                            f"{solver.StatusName(status)}); raise time_limit_s or pass the list schedule as hint")
    found, optimal = int(solver.ObjectiveValue()), status == cp_model.OPTIMAL
    placed = {t["id"]: {"start": int(solver.Value(start_var[t["id"]])), "unit": t["kind"],
                        "instance": _instance(solver, on_instance[t["id"]])} for t in tasks}
    return ExactResult(found, found if optimal else int(solver.BestObjectiveBound()), optimal, seconds, placed)
