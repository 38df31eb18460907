"""Which list schedule of a Plan compile keeps: every priority rule, the shortest schedule."""
from __future__ import annotations

from accelsim.hw.spec import HwSpec
from accelsim.schedule.expand import Plan
from accelsim.schedule.list_sched import PRIORITIES, MemoryPlanner, Timed, list_schedule


def makespan_of(timed: list[Timed]) -> int:
    return max((x.end for x in timed), default=0)


def time_plan(plan: Plan, hw: HwSpec) -> tuple[list[Timed], MemoryPlanner]:
    """Both priorities, the shorter schedule (the first on a tie): which wins depends on the design."""
    runs = [list_schedule(plan, hw, priority) for priority in PRIORITIES]
    return min(runs, key=lambda run: makespan_of(run[0]))
