"""Which list schedule of a Plan compile keeps (Plan, HwSpec -> timed tasks and placed tensors): the search
of improve.py, the same one schedule_dag runs and experiments/bench_scheduler.py measures against optima."""
from __future__ import annotations

from accelsim.hw.spec import HwSpec
from accelsim.compiler.planning.tasks import Plan
from accelsim.compiler.timing.improve import BUDGET, Budget, improve
from accelsim.compiler.timing.list_sched import MemoryPlanner, Timed
from accelsim.compiler.timing.symmetry import reduce, stamp


def time_plan(plan: Plan, hw: HwSpec, budget: Budget = BUDGET) -> tuple[list[Timed], MemoryPlanner]:
    """The shortest schedule the search finds within `budget` (task-schedulings, so deterministic):
    which priority rule wins depends on the design, and the improvement passes close what none does.
    Data-parallel replicas that are exact copies of each other are timed as one (symmetry.py)."""
    replicas = reduce(plan)
    if replicas is not None:
        stamped = stamp(replicas, hw, *improve(replicas.reduced, hw, budget))
        if stamped is not None:
            return stamped
    return improve(plan, hw, budget)
