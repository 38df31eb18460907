"""Lower bounds on a step's makespan: the critical path and the busiest resource's total work."""
from __future__ import annotations

from collections import defaultdict

from accelsim.schedule.expand import TaskSpec
from accelsim.schedule.list_sched import upward_ranks
from accelsim.schedule.plan import Bounds


def lower_bounds(tasks: list[TaskSpec]) -> Bounds:
    """Critical path: the longest dependence chain at each task's cheapest cost. Resource bound: for
    each resource kind on each chip, the work of the tasks that can run only there divided by its
    instances (a collective counts once). No schedule can finish before either."""
    cp = max(upward_ranks(tasks), default=0)
    work: dict[tuple[int, str], float] = defaultdict(float)
    seen_groups = set()
    for t in tasks:
        if len({r for r, _, _ in t.options}) != 1:
            continue
        if t.group >= 0:
            if (t.group, t.chip) in seen_groups:
                continue
            seen_groups.add((t.group, t.chip))
        resource, instances, cycles = t.options[0]
        work[(t.chip, resource)] += cycles / instances
    (chip, resource), busiest = max(work.items(), key=lambda kv: (kv[1], kv[0]), default=((0, "-"), 0.0))
    res = int(-(-busiest // 1))
    return Bounds(critical_path_cycles=cp, resource_cycles=res, resource=f"chip{chip}:{resource}",
                  bound_cycles=max(cp, res))
