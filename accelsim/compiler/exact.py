"""Exact mode: optimal makespans by OR-Tools CP-SAT (tasks with candidate resources -> ExactSolution; an
abstract DAG problem -> ExactResult).

A start per task, a choice of resource where it has several, precedence with delays, and per resource a
NoOverlap per instance of optional intervals (plus a redundant cumulative); minimize the makespan. OR-Tools
is an optional extra, imported only here.
"""
from __future__ import annotations

import math
import time
from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from typing import Any

from accelsim.errors import ScheduleError
from accelsim.compiler.dag import validate_dag_problem

MAX_EXACT_TASKS = 2_000
"""Tasks one exact solve accepts. The model grows linearly, but CP-SAT's search does not: with one worker
it proves most optima of 10-60 tasks within seconds, while on training steps of ~200 tasks and more
(measured: 220, 990 and 1,980 tasks) it ends 10 s still at the list schedule it was seeded with and with a
bound below half of it. So a larger step could only cost time: 1,980 tasks already take ~250 MB, and the
size a model build may reach is kept well under a second."""
MAX_EXACT_DEPS = 20_000
"""Dependencies one exact solve accepts: ten per task on average at the task limit, for the same reason."""
MAX_EXACT_PLACEMENTS = 20_000
"""Task x instance choices one solve accepts (the tasks that may use a resource times its instance count,
over the resources whose would-be users outnumber their instances): each is a Boolean and an optional
interval, so 2,000 tasks on up to ten instances each."""
WALL_CAP_FACTOR = 10.0
WALL_CAP_EXTRA_S = 10.0
"""A deterministic solve (see solve_tasks_exact) is also stopped after WALL_CAP_FACTOR x its budget plus
WALL_CAP_EXTRA_S wall seconds: a safety net for a machine far slower than CP-SAT's calibration, not the
usual stop (measured on a 2-core machine, training steps of 21-576 tasks: 1.5 to 6.6 wall seconds per
deterministic one)."""

Option = tuple[Hashable, int, int]
"""(resource, instances, cycles): a resource a task may run on, its interchangeable instances, and the
task's cycles there. Tasks naming the same resource key share its instances."""


@dataclass(frozen=True, slots=True)
class Placement:
    """Where and when one task runs: an index into its options, an instance of that resource, a start."""

    option: int
    instance: int
    start: int


@dataclass(frozen=True, slots=True)
class ExactSolution:
    """CP-SAT's best schedule (None when it found none in time) and its proved lower bound (cycles)."""

    makespan: int | None
    lower_bound: int
    optimal: bool
    seconds: float
    placements: tuple[Placement, ...] | None


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


def import_cp_model():
    """The cp_model module, or a ScheduleError that says how to install it (callers check early with
    it, before work the exact mode would waste)."""
    try:
        from ortools.sat.python import cp_model
    except ImportError as exc:
        raise ScheduleError("the exact mode needs OR-Tools: pip install accelsim[exact] "
                            f"(import failed: {exc})") from None
    return cp_model


def placement_choices(options: Sequence[Sequence[Option]]) -> int:
    """Task x instance Booleans the model would hold: for each resource whose would-be users outnumber
    its instances (and that has more than one), users x instances (see _book)."""
    users: dict[Hashable, int] = {}
    count: dict[Hashable, int] = {}
    for opts in options:
        for key, instances, _ in opts:
            users[key] = users.get(key, 0) + 1
            count[key] = instances
    return sum(n * count[key] for key, n in users.items() if n > count[key] > 1)


def check_exact_size(n_tasks: int, n_deps: int, n_choices: int, what: str = "this problem",
                     remedy: str = "use the list schedule, or solve a smaller step") -> None:
    """Refuse before building: the estimate is what the model would hold (see the limits above)."""
    if n_tasks > MAX_EXACT_TASKS or n_deps > MAX_EXACT_DEPS or n_choices > MAX_EXACT_PLACEMENTS:
        raise ScheduleError(
            f"the exact mode is limited to {MAX_EXACT_TASKS:,} tasks, {MAX_EXACT_DEPS:,} dependencies and "
            f"{MAX_EXACT_PLACEMENTS:,} task-instance choices; {what} has {n_tasks:,} tasks, {n_deps:,} "
            f"dependencies and {n_choices:,} choices ({remedy})")


def _check_tasks(options: Sequence[Sequence[Option]], deps: Sequence[tuple[int, int, int]],
                 together: Sequence[Sequence[int]], hint: Sequence[Placement] | None) -> None:
    """The shape solve_tasks_exact relies on; its callers build these lists, so a failure names the
    first broken entry for whoever wires a new caller."""
    n, instances = len(options), {}
    for i, opts in enumerate(options):
        if not opts:
            raise ScheduleError(f"exact: task {i} has no resource to run on")
        for key, count, cycles in opts:
            if not (isinstance(count, int) and count >= 1 and isinstance(cycles, int) and cycles >= 1):
                raise ScheduleError(f"exact: task {i} option {key!r:.40} needs instances >= 1 and cycles >= 1, "
                                    f"got {count!r:.20} and {cycles!r:.20}")
            if instances.setdefault(key, count) != count:
                raise ScheduleError(f"exact: resource {key!r:.40} has {instances[key]} instances for one task "
                                    f"and {count} for task {i}")
    for a, b, delay in deps:
        if not (0 <= a < n and 0 <= b < n and a != b and delay >= 0):
            raise ScheduleError(f"exact: dependence ({a}, {b}, {delay}) must join two different tasks of "
                                f"0..{n - 1} with a delay >= 0")
    if any(not 0 <= m < n for members in together for m in members):
        raise ScheduleError(f"exact: a group names a task outside 0..{n - 1}")
    if hint is not None and (len(hint) != n or any(not 0 <= p.option < len(opts) or p.start < 0
                                                   for p, opts in zip(hint, options))):
        raise ScheduleError(f"exact: the hint must place each of the {n} tasks with one of its options")


def _horizon(options: Sequence[Sequence[Option]], deps: Sequence[tuple[int, int, int]]) -> int:
    """A feasible upper bound on the makespan: all tasks in a row, each at its longest option and after
    its largest incoming delay."""
    max_delay: dict[int, int] = {}
    for _, b, delay in deps:
        max_delay[b] = max(max_delay.get(b, 0), delay)
    return sum(max(c for _, _, c in opts) for opts in options) + sum(max_delay.values())


@dataclass(frozen=True, slots=True)
class _Use:
    """One task's option on one resource: the interval it would occupy, present when `chosen` (None:
    its only option, always present)."""

    task: int
    option: int
    cycles: int
    chosen: object | None


def _interval(model, start_var: list, use: _Use, literal: object | None, name: str):
    if literal is None:
        return model.NewFixedSizeIntervalVar(start_var[use.task], use.cycles, name)
    return model.NewOptionalFixedSizeIntervalVar(start_var[use.task], use.cycles, literal, name)


def _book(model, uses: list[_Use], count: int, start_var: list,
          hint: Sequence[Placement] | None) -> dict[tuple[int, int], object]:
    """Keep `count` instances of one resource from overlapping; returns (task, option) -> its instance (an
    int when fixed, else one Boolean per instance, exactly one true when the option is chosen).

    Each instance gets a NoOverlap of optional intervals, plus a redundant cumulative of capacity `count`
    over the resource: on the benchmark's 40 problems (seed 0, when this was chosen) it proved 39 optima in
    10 s, against 37 for the cumulative alone with instances coloured afterwards (its bound is weak where
    2-3 instances share a long chain of work) and 38 for the optional intervals alone.
    """
    if count >= len(uses):  # the resource never binds: every user can have an instance of its own
        return {(u.task, u.option): i for i, u in enumerate(uses)}
    if count == 1:
        model.AddNoOverlap([_interval(model, start_var, u, u.chosen, f"run_{u.task}_{u.option}") for u in uses])
        return {(u.task, u.option): 0 for u in uses}
    lanes: list[list] = [[] for _ in range(count)]
    chosen = {}
    for u in uses:
        picks = [model.NewBoolVar(f"on_{u.task}_{u.option}_{i}") for i in range(count)]
        if u.chosen is None:
            model.AddExactlyOne(picks)
        else:
            model.Add(sum(picks) == u.chosen)
        for i, pick in enumerate(picks):
            lanes[i].append(_interval(model, start_var, u, pick, f"run_{u.task}_{u.option}_{i}"))
            if hint is not None:
                p = hint[u.task]
                model.AddHint(pick, p.option == u.option and p.instance == i)
        chosen[(u.task, u.option)] = picks
    for lane in lanes:
        model.AddNoOverlap(lane)
    model.AddCumulative([_interval(model, start_var, u, u.chosen, f"use_{u.task}_{u.option}") for u in uses],
                        [1] * len(uses), count)
    return chosen


def _instance(solver, on: object) -> int:
    """The instance a solved task runs on (see _book)."""
    if isinstance(on, int):
        return on
    return next(i for i, pick in enumerate(on) if solver.BooleanValue(pick))


def solve_tasks_exact(options: Sequence[Sequence[Option]], deps: Sequence[tuple[int, int, int]] = (),
                      together: Sequence[Sequence[int]] = (), time_limit_s: float = 10.0,
                      hint: Sequence[Placement] | None = None, deterministic: bool = False) -> ExactSolution:
    """The minimum makespan (cycles) of tasks 0..n-1, or the best found and CP-SAT's bound.

    options[i]: where task i may run (Option); deps: (a, b, delay) with start(b) >= end(a) + delay;
    together: groups of tasks that start at the same cycle (a collective's shares on several chips).
    hint: a complete, valid schedule that CP-SAT takes as its first solution, so a stopped solve returns
    no worse. One search worker with a fixed seed. `deterministic`: time_limit_s is CP-SAT's deterministic
    time (work counted in its own units, calibrated near seconds), so a solve stopped by the limit still
    gives the same answer every run; else it is wall time, and only a solve that ends within it does.
    """
    cp_model = import_cp_model()
    if isinstance(time_limit_s, bool) or not isinstance(time_limit_s, (int, float)) \
            or not math.isfinite(time_limit_s) or not time_limit_s > 0:
        raise ScheduleError(f"time_limit_s must be a positive number of seconds, got {time_limit_s!r}")
    check_exact_size(len(options), len(deps), placement_choices(options))
    _check_tasks(options, deps, together, hint)

    horizon = _horizon(options, deps)
    model = cp_model.CpModel()
    start_var = [model.NewIntVar(0, horizon, f"start_{i}") for i in range(len(options))]
    picks: list[list | None] = []
    end_var = []
    uses: dict[Hashable, list[_Use]] = {}
    count: dict[Hashable, int] = {}
    for i, opts in enumerate(options):
        if len(opts) == 1:
            picks.append(None)
            end_var.append(start_var[i] + opts[0][2])
        else:
            lits = [model.NewBoolVar(f"pick_{i}_{o}") for o in range(len(opts))]
            model.AddExactlyOne(lits)
            end = model.NewIntVar(0, horizon, f"end_{i}")
            model.Add(end == start_var[i] + sum(lit * c for lit, (_, _, c) in zip(lits, opts)))
            picks.append(lits)
            end_var.append(end)
        for o, (key, instances, cycles) in enumerate(opts):
            uses.setdefault(key, []).append(_Use(i, o, cycles, None if len(opts) == 1 else picks[i][o]))
            count[key] = instances
    for a, b, delay in deps:
        model.Add(start_var[b] >= end_var[a] + delay)
    for members in together:
        for m in members[1:]:
            model.Add(start_var[m] == start_var[members[0]])
    on_instance = {}
    for key, key_uses in uses.items():
        on_instance.update(_book(model, key_uses, count[key], start_var, hint))
    makespan = model.NewIntVar(0, horizon, "makespan")
    model.AddMaxEquality(makespan, end_var)
    model.Minimize(makespan)
    if hint is not None:
        for i, p in enumerate(hint):
            model.AddHint(start_var[i], p.start)
            for o, lit in enumerate(picks[i] or []):
                model.AddHint(lit, o == p.option)
        model.AddHint(makespan, max(p.start + options[i][p.option][2] for i, p in enumerate(hint)))

    solver = cp_model.CpSolver()
    solver.parameters.num_workers = 1
    solver.parameters.random_seed = 0
    if deterministic:
        solver.parameters.max_deterministic_time = float(time_limit_s)
        solver.parameters.max_time_in_seconds = WALL_CAP_FACTOR * float(time_limit_s) + WALL_CAP_EXTRA_S
    else:
        solver.parameters.max_time_in_seconds = float(time_limit_s)
    began = time.perf_counter()
    status = solver.Solve(model)
    seconds = time.perf_counter() - began

    if status == cp_model.INFEASIBLE or status == cp_model.MODEL_INVALID:
        raise ScheduleError(f"CP-SAT found the problem infeasible ({solver.StatusName(status)}): "
                            "a dependency cycle or a task kind with no instance")
    if status not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        return ExactSolution(None, max(0, int(math.ceil(solver.BestObjectiveBound() - 1e-9))), False, seconds,
                             None)
    found, optimal = int(solver.ObjectiveValue()), status == cp_model.OPTIMAL

    def option_of(i: int) -> int:
        return 0 if picks[i] is None else next(o for o, lit in enumerate(picks[i]) if solver.BooleanValue(lit))

    placed = []
    for i in range(len(options)):
        o = option_of(i)
        placed.append(Placement(o, _instance(solver, on_instance[(i, o)]), int(solver.Value(start_var[i]))))
    bound = found if optimal else int(math.ceil(solver.BestObjectiveBound() - 1e-9))
    return ExactSolution(found, bound, optimal, seconds, tuple(placed))


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
           or not all(isinstance(p.get(k), int) and not isinstance(p.get(k), bool) for k in ("start", "instance"))
           or p["start"] < 0]
    if bad or not isinstance(hint.get("makespan"), int):
        raise ScheduleError(f"hint: makespan and each task's start and instance must be integers "
                            f"(makespan {hint.get('makespan')!r:.40}, bad tasks {bad[:5]})")


def solve_dag_exact(problem: dict, time_limit_s: float = 10.0, hint: dict | None = None) -> ExactResult:
    """The minimum makespan (cycles) of `problem`, or the best found and CP-SAT's bound within time_limit_s.

    hint: a schedule_dag result for the same problem; CP-SAT takes a complete, valid hint as its first
    solution, so a timed-out solve returns no worse. One search worker with a fixed seed: a solve that ends
    within the limit gives the same schedule every run (several workers race and are not reproducible).
    """
    import_cp_model()
    validate_dag_problem(problem)  # the scheduler's own rules: one definition of a valid problem
    tasks, units = problem["tasks"], problem["units"]
    options = [((t["kind"], units[t["kind"]], t["duration"]),) for t in tasks]
    index = {t["id"]: i for i, t in enumerate(tasks)}
    deps = [(index[d[0]], index[d[1]], d[2] if len(d) == 3 else 0) for d in problem.get("deps", [])]
    check_exact_size(len(tasks), len(deps), placement_choices(options))
    placements = None
    if hint is not None:
        _check_hint(problem, hint)
        placements = [Placement(0, hint["tasks"][t["id"]]["instance"], hint["tasks"][t["id"]]["start"])
                      for t in tasks]
        if any(not 0 <= p.instance < units[t["kind"]] for p, t in zip(placements, tasks)):
            raise ScheduleError("hint: an instance is outside its unit kind's count")
    solution = solve_tasks_exact(options, deps, (), time_limit_s, placements)
    if solution.placements is None:
        raise ScheduleError(f"CP-SAT found no schedule within {time_limit_s} s ({len(tasks)} tasks); raise "
                            "time_limit_s or pass the list schedule as hint")
    placed = {t["id"]: {"start": p.start, "unit": t["kind"], "instance": p.instance}
              for t, p in zip(tasks, solution.placements)}
    return ExactResult(solution.makespan, solution.lower_bound, solution.optimal, solution.seconds, placed)
