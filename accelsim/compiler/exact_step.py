"""The exact mode of `compile`: CP-SAT on a step's task DAG, seeded with its list schedule, then timed
again by the list scheduler in CP-SAT's order (Plan + list schedule -> a schedule no longer, and a proof).

CP-SAT sees a relaxation of the step: tasks, their candidate resources and cycles, dependences with
their lags, unit instances, each chip pair's link and each chip's collectives, but not memory capacity,
spills, memory-port bandwidth, or the physical links transfers and collectives share (hw/topology.py:
two transfers into one switch port, a ring's multi-hop route). So its bound holds for the real step,
while its schedule is only an order: the list scheduler re-times the plan in that order, honoring
everything, and the shorter of that and the seed is kept.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, replace
from numbers import Real

from accelsim.errors import AccelsimError, MemoryFitError, ScheduleError
from accelsim.graph.ir import Graph
from accelsim.hw.spec import HwSpec
from accelsim.limits import estimate_tasks
from accelsim.compiler.timing.bounds import lower_bounds
from accelsim.compiler.exact import (MAX_EXACT_TASKS, Option, Placement, check_exact_size, import_cp_model,
                                     placement_choices, solve_tasks_exact)
from accelsim.compiler.planning.expand import expand
from accelsim.compiler.planning.tasks import Plan
from accelsim.compiler.timing.improve import makespan_of
from accelsim.compiler.timing.list_sched import Timed, list_schedule
from accelsim.compiler.timing.memory_planner import MemoryPlanner
from accelsim.schedule.plan import COLLECTIVE, LINK, ExactReport
from accelsim.schedule.options import DEFAULT_EXACT_SECONDS, MAX_EXACT_SECONDS, StepOptions

REMEDY = ("compile it without the exact mode (the list schedule), or with fewer micro-batches, replicas or "
          "layers")


def exact_seconds(exact: object) -> float | None:
    """compile's `exact` as CP-SAT's budget in seconds: None when off (False), DEFAULT_EXACT_SECONDS for
    True, else the positive finite number given (at most MAX_EXACT_SECONDS)."""
    if exact is False:
        return None
    if exact is True:
        return DEFAULT_EXACT_SECONDS
    if isinstance(exact, Real) and not isinstance(exact, bool):
        value = float(exact)
        if math.isfinite(value) and 0 < value <= MAX_EXACT_SECONDS:
            return value
    raise AccelsimError(f"exact must be False (list scheduling only), True (CP-SAT for "
                        f"{DEFAULT_EXACT_SECONDS:g} s) or a number of seconds above 0 and at most "
                        f"{MAX_EXACT_SECONDS:g}, got {exact!r:.60}")


def _refuse_tasks(n_tasks: int) -> None:
    if n_tasks > MAX_EXACT_TASKS:
        raise ScheduleError(f"the exact mode solves steps of at most {MAX_EXACT_TASKS:,} tasks, and this step "
                            f"has {n_tasks:,} tasks (at that size CP-SAT ends its budget still at the list "
                            f"schedule it was seeded with); {REMEDY}")


def check_exact_step(graph: Graph, hw: HwSpec, options: StepOptions) -> None:
    """Refuse, before the step is list-scheduled, the exact mode without OR-Tools or for a step too large:
    the task estimate is an upper bound (exact without pipeline stages), so only a step estimated above
    the limit is expanded to count its tasks (the count does not depend on the micro-batches in flight)."""
    import_cp_model()
    o = options
    if estimate_tasks(graph, o.microbatches, o.data_parallel, o.pipeline_stages, o.zero) > MAX_EXACT_TASKS:
        _refuse_tasks(len(expand(graph, hw, o).tasks))


@dataclass(frozen=True)
class _Jobs:
    """The step as CP-SAT tasks ("jobs"): one per plan task, except that the members of one collective
    on one chip share a job (they hold that chip's collective together, see list_sched.schedule_group)."""

    options: list[tuple[Option, ...]]
    deps: list[tuple[int, int, int]]
    together: list[list[int]]  # jobs of one collective on different chips: one start
    job_of: list[int]  # plan task -> job


def _resource_key(chip: int, out_chip: int, resource: str) -> tuple:
    """What one resource instance set is: a unit kind or collective per chip, a link per chip pair."""
    return (chip, resource, out_chip) if resource == LINK else (chip, resource)


def _jobs(plan: Plan) -> _Jobs:
    options: list[tuple[Option, ...]] = []
    job_of: list[int] = []
    collective_job: dict[tuple[int, int], int] = {}  # (group, chip) -> job
    together: dict[int, list[int]] = {}
    first_member: dict[int, int] = {}
    for t in plan.tasks:
        if t.group >= 0:
            lead = plan.tasks[first_member.setdefault(t.group, t.id)]
            key = (t.group, t.chip)
            if key not in collective_job:  # a collective lasts its first member's cycles (schedule_group)
                _, _, cycles = lead.options[0]
                collective_job[key] = len(options)
                options.append(((_resource_key(t.chip, t.out_chip, COLLECTIVE), 1, cycles),))
                together.setdefault(t.group, []).append(collective_job[key])
            job_of.append(collective_job[key])
            continue
        job_of.append(len(options))
        options.append(tuple((_resource_key(t.chip, t.out_chip, r), n, c) for r, n, c in t.options))
    delay: dict[tuple[int, int], int] = {}
    for t in plan.tasks:
        for d in t.preds:
            a, b = job_of[d], job_of[t.id]
            if a != b:
                delay[(a, b)] = max(delay.get((a, b), 0), t.lag.get(d, 0))
    deps = [(a, b, w) for (a, b), w in sorted(delay.items())]
    return _Jobs(options, deps, [m for _, m in sorted(together.items()) if len(m) > 1], job_of)


def _hint(plan: Plan, jobs: _Jobs, timed: list[Timed]) -> list[Placement]:
    """The list schedule as CP-SAT placements: feasible there, since CP-SAT's tasks last no longer than
    the list schedule's (which add spills) and it has fewer constraints."""
    hint: list[Placement | None] = [None] * len(jobs.options)
    for t, x in zip(plan.tasks, timed):
        j = jobs.job_of[t.id]
        if t.group >= 0:  # a collective's job has one option and one instance
            hint[j] = hint[j] or Placement(0, 0, x.start)
        else:
            hint[j] = Placement(next(o for o, (r, _, _) in enumerate(t.options) if r == x.resource), x.instance,
                                x.start)
    return hint


def _retimed(plan: Plan, hw: HwSpec, order: list[float]) -> tuple[list[Timed], MemoryPlanner] | None:
    """The list schedule of `plan` taking tasks in `order`; None when its tensors do not fit that way."""
    try:
        return list_schedule(plan, hw, "rank", order=order)
    except MemoryFitError:
        return None


def solve_step(plan: Plan, hw: HwSpec, seed: tuple[list[Timed], MemoryPlanner],
               time_limit_s: float) -> tuple[list[Timed], MemoryPlanner, ExactReport]:
    """CP-SAT on `plan` for time_limit_s (deterministic) seconds, seeded with its list schedule `seed`.
    Returns the shorter of the seed and the plan re-timed in CP-SAT's order (the seed on a tie), and the
    report: the proved lower bound and the gap."""
    _refuse_tasks(len(plan.tasks))
    jobs = _jobs(plan)
    check_exact_size(len(jobs.options), len(jobs.deps), placement_choices(jobs.options), "this step", REMEDY)
    timed, mem = seed
    solution = solve_tasks_exact(jobs.options, jobs.deps, jobs.together, time_limit_s,
                                 _hint(plan, jobs, timed), deterministic=True)
    runs = [seed]
    if solution.placements is not None:
        order = [float(solution.placements[j].start) for j in jobs.job_of]
        runs.append(_retimed(plan, hw, order))
        if any(len(t.options) > 1 for t in plan.tasks):  # also on the resources CP-SAT chose
            chosen = replace(plan, tasks=[
                t if t.group >= 0 else replace(t, options=(t.options[solution.placements[jobs.job_of[t.id]].option],))
                for t in plan.tasks])
            runs.append(_retimed(chosen, hw, order))
    timed, mem = min((r for r in runs if r is not None), key=lambda r: makespan_of(r[0]))  # first on a tie
    makespan = makespan_of(timed)
    bound = max(solution.lower_bound, lower_bounds(plan, hw).bound_cycles)
    if bound > makespan:
        raise ScheduleError(f"internal: the exact mode's bound {bound} exceeds the schedule's makespan {makespan}")
    report = ExactReport(status="optimal" if bound == makespan else "feasible", bound_cycles=bound,
                         gap=0.0 if makespan == 0 else (makespan - bound) / makespan,
                         list_makespan_cycles=makespan_of(seed[0]), time_limit_s=float(time_limit_s))
    return timed, mem, report
