"""Which list schedule of a Plan compile keeps (Plan, HwSpec -> timed tasks and placed tensors): the search
of improve.py, the same one schedule_dag runs and experiments/bench_scheduler.py measures against optima,
under the budget the step's `effort` option names."""
from __future__ import annotations

from dataclasses import replace

from accelsim.errors import ScheduleError
from accelsim.hw.spec import HwSpec
from accelsim.compiler.planning.tasks import Plan
from accelsim.compiler.timing.improve import BUDGET, Budget, improve
from accelsim.compiler.timing.list_sched import Timed
from accelsim.compiler.timing.memory_planner import MemoryPlanner
from accelsim.compiler.timing.pipeline_order import PipelineOrder
from accelsim.compiler.timing.symmetry import reduce, stamp
from accelsim.schedule.options import EFFORTS

GAP_STOP = 0.01
"""A compile whose best schedule is within 1% of its lower bound stops searching (issue 27): at any effort.
schedule_dag keeps the search's own default (on to the bound): on the scheduler benchmark (200 problems,
experiments/bench_scheduler.py, measured against proved optima) 6 problems within 1% of their bound went on
to reach it, and that benchmark measures the search, not the stopping rule."""
THOROUGH_FACTOR = 4
"""effort=thorough: this many times the default's work, runs, patience and stale runs."""

COMPILE_BUDGET = replace(BUDGET, gap_stop=GAP_STOP)
EFFORT_BUDGETS: dict[str, Budget] = {
    "fast": replace(COMPILE_BUDGET, work_tasks=0),  # the two ALWAYS rules (RESCUE only where they do not fit)
    "default": COMPILE_BUDGET,  # the search's budget as before efforts existed, with the gap stop
    "thorough": COMPILE_BUDGET.scaled(THOROUGH_FACTOR),
}
"""The search budget of each `effort` (StepOptions.effort)."""
assert tuple(EFFORT_BUDGETS) == EFFORTS, "one budget per effort of schedule/options.py"


def effort_budget(effort: str) -> Budget:
    """The budget of `effort` (fast, default or thorough); ScheduleError naming them otherwise."""
    if effort not in EFFORT_BUDGETS:
        raise ScheduleError(f"effort must be one of {', '.join(EFFORT_BUDGETS)}, got {effort!r}")
    return EFFORT_BUDGETS[effort]


def time_plan(plan: Plan, hw: HwSpec, budget: Budget = BUDGET,
              pipeline: PipelineOrder | None = None) -> tuple[list[Timed], MemoryPlanner]:
    """The shortest schedule the search finds within `budget` (task-schedulings, so deterministic):
    which priority rule wins depends on the design, and the improvement passes close what none does.
    Data-parallel replicas that are exact copies of each other are timed as one (symmetry.py).
    `pipeline`: each pipeline chip takes its work items in that schedule's order."""
    replicas = reduce(plan)
    if replicas is not None:
        stamped = stamp(replicas, hw, *improve(replicas.reduced, hw, budget, pipeline))
        if stamped is not None:
            return stamped
    return improve(plan, hw, budget, pipeline)
