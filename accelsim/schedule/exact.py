"""Exact mode: the optimal makespan of an abstract DAG problem by OR-Tools CP-SAT (problem -> ExactResult).

One fixed-size interval per task, precedence with delays, one cumulative per unit kind (capacity = its
instance count); instances are assigned afterwards by interval colouring. OR-Tools is an optional extra,
imported only when this mode runs.
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from accelsim.errors import ScheduleError

MAX_EXACT_TASKS = 2_000
"""Tasks one exact solve accepts. CP-SAT's model grows linearly (one interval and two bounds per task, one
linear constraint per dependency), but its search does not: on the generated DAGs of
experiments/dag_problems.py it proves optimality within 10 s up to about a hundred tasks, and beyond a few
thousand it spends the whole budget in presolve and returns no better than the list schedule it was given.
2,000 keeps one model build under a second and its memory under ~100 MB while leaving room for steps of a
small model."""
MAX_EXACT_DEPS = 20_000
"""Dependencies one exact solve accepts: ten per task on average at the task limit, for the same reason."""


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


def _validate(problem: dict) -> None:
    """The scheduler's own validator when present (one definition of a valid problem), else minimal checks."""
    try:
        from accelsim.schedule.dag import validate_dag_problem
    except ImportError:
        _minimal_checks(problem)
        return
    validate_dag_problem(problem)


def _minimal_checks(problem: dict) -> None:
    """Shape checks this solver relies on; every problem found is reported at once."""
    if not isinstance(problem, dict) or not {"units", "tasks"} <= problem.keys():
        raise ScheduleError(f"problem must be a dict with 'units', 'tasks' and 'deps', got {type(problem).__name__}")
    units, errors, ids = problem["units"], [], set()
    for i, t in enumerate(problem["tasks"]):
        if t.get("kind") not in units:
            errors.append(f"tasks[{i}].kind: no unit {t.get('kind')!r} (known: {', '.join(sorted(units))})")
        if not isinstance(t.get("duration"), int) or t["duration"] < 0:
            errors.append(f"tasks[{i}].duration: must be an integer >= 0, got {t.get('duration')!r}")
        if t.get("id") in ids:
            errors.append(f"tasks[{i}].id: duplicate {t.get('id')!r}")
        ids.add(t.get("id"))
    for kind, count in units.items():
        if not isinstance(count, int) or count < 1:
            errors.append(f"units.{kind}: instance count must be an integer >= 1, got {count!r}")
    for i, dep in enumerate(problem.get("deps", [])):
        if len(dep) not in (2, 3) or dep[0] not in ids or dep[1] not in ids:
            errors.append(f"deps[{i}]: must be [a, b] or [a, b, delay] of known task ids, got {dep!r}")
        elif len(dep) == 3 and (not isinstance(dep[2], int) or dep[2] < 0):
            errors.append(f"deps[{i}].delay: must be an integer >= 0, got {dep[2]!r}")
    if errors:
        raise ScheduleError(f"invalid DAG problem: {len(errors)} problem(s)\n  " + "\n  ".join(errors))


def _check_size(problem: dict) -> None:
    n_tasks, n_deps = len(problem["tasks"]), len(problem.get("deps", []))
    if n_tasks > MAX_EXACT_TASKS or n_deps > MAX_EXACT_DEPS:
        raise ScheduleError(
            f"the exact mode is limited to {MAX_EXACT_TASKS} tasks and {MAX_EXACT_DEPS} dependencies; "
            f"this problem has {n_tasks} tasks and {n_deps} dependencies (use the list schedule)")


def _check_hint(problem: dict, hint: dict) -> None:
    """A hint must place exactly the problem's tasks: a partial one would silently steer the search."""
    ids = {t["id"] for t in problem["tasks"]}
    given = set(hint.get("tasks", {})) if isinstance(hint, dict) else set()
    if given != ids:
        missing, extra = sorted(ids - given)[:5], sorted(given - ids)[:5]
        raise ScheduleError(f"hint must be a schedule_dag result for this problem: missing tasks {missing}, "
                            f"unknown tasks {extra}")


def _horizon(problem: dict) -> int:
    """A feasible upper bound on the makespan: all tasks in a row, each after its largest incoming delay."""
    max_delay: dict[str, int] = {}
    for dep in problem.get("deps", []):
        delay = dep[2] if len(dep) == 3 else 0
        max_delay[dep[1]] = max(max_delay.get(dep[1], 0), delay)
    return sum(t["duration"] for t in problem["tasks"]) + sum(max_delay.values())


def assign_instances(problem: dict, starts: dict[str, int]) -> dict[str, dict[str, Any]]:
    """Per kind, give each task (by start, then id) the lowest-numbered instance free at its start.

    Greedy colouring of intervals is exact: when at most `count` tasks of a kind overlap at any time, an
    instance is always free, so a cumulative-feasible schedule always gets instances.
    """
    free_at = {kind: [0] * count for kind, count in problem["units"].items()}
    out: dict[str, dict[str, Any]] = {}
    for t in sorted(problem["tasks"], key=lambda t: (starts[t["id"]], t["id"])):
        start, lanes = starts[t["id"]], free_at[t["kind"]]
        free = [i for i, f in enumerate(lanes) if f <= start]
        # a zero-duration task occupies nothing; it may share the instance that frees first
        instance = free[0] if free else min(range(len(lanes)), key=lambda i: (lanes[i], i))
        assert free or t["duration"] == 0, f"cumulative let {t['kind']} overbook at {start}"
        lanes[instance] = max(lanes[instance], start + t["duration"])
        out[t["id"]] = {"start": start, "unit": t["kind"], "instance": instance}
    return out


def solve_dag_exact(problem: dict, time_limit_s: float = 10.0, hint: dict | None = None) -> ExactResult:
    """The minimum makespan (cycles) of `problem`, or the best found and CP-SAT's bound within time_limit_s.

    hint: a schedule_dag result for the same problem; the search starts from it, and it is returned when
    CP-SAT finds nothing better in time. One search worker with a fixed seed, so a solve that finishes
    within the limit gives the same schedule every run (several workers race and are not reproducible).
    """
    cp_model = _import_cp_model()
    _validate(problem)
    _check_size(problem)
    if hint is not None:
        _check_hint(problem, hint)
    if not time_limit_s > 0:
        raise ScheduleError(f"time_limit_s must be a positive number of seconds, got {time_limit_s!r}")

    tasks, horizon = problem["tasks"], _horizon(problem)
    model = cp_model.CpModel()
    start_var, end_var, by_kind = {}, {}, {kind: [] for kind in problem["units"]}
    for t in tasks:
        s = model.NewIntVar(0, horizon, f"start_{t['id']}")
        interval = model.NewFixedSizeIntervalVar(s, t["duration"], f"run_{t['id']}")
        start_var[t["id"]], end_var[t["id"]] = s, s + t["duration"]
        by_kind[t["kind"]].append(interval)
    for dep in problem.get("deps", []):
        delay = dep[2] if len(dep) == 3 else 0
        model.Add(start_var[dep[1]] >= end_var[dep[0]] + delay)
    for kind, intervals in by_kind.items():
        count = problem["units"][kind]
        if len(intervals) > count:  # with fewer tasks than instances the kind never binds
            model.AddCumulative(intervals, [1] * len(intervals), count)
    makespan = model.NewIntVar(0, horizon, "makespan")
    model.AddMaxEquality(makespan, [end_var[t["id"]] for t in tasks] or [0])
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
    bound = int(solver.BestObjectiveBound()) if status != cp_model.UNKNOWN else 0
    if status in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        found = int(solver.ObjectiveValue())
        if hint is None or found <= hint["makespan"]:
            starts = {t["id"]: int(solver.Value(start_var[t["id"]])) for t in tasks}
            return ExactResult(found, found if status == cp_model.OPTIMAL else bound,
                               status == cp_model.OPTIMAL, seconds, assign_instances(problem, starts))
    if hint is None:
        raise ScheduleError(f"CP-SAT found no schedule within {time_limit_s} s ({len(tasks)} tasks); "
                            "raise time_limit_s or pass the list schedule as hint")
    return ExactResult(int(hint["makespan"]), min(bound, int(hint["makespan"])), False, seconds,
                       {k: dict(v) for k, v in hint["tasks"].items()})
