"""In-order issue in the list scheduler (Plan -> the earliest start program order allows each task): the
rule of schedule/issue_order.py, kept while list_sched.py times tasks. On a plan with an in-order chip every
run takes tasks in program order (task id: the plan's ids are a topological order), so each task's start
need only be no earlier than the latest start issued on its chip so far."""
from __future__ import annotations

from accelsim.errors import ScheduleError
from accelsim.compiler.planning.tasks import Plan, TaskSpec
from accelsim.hw.spec import HwSpec
from accelsim.schedule.issue_order import in_order_chips, issues_in_order


def refuse_exact(hw: HwSpec) -> None:
    """The exact (CP-SAT) mode does not model in-order issue: refused on a machine with an in-order chip, naming it."""
    chips = [c.name for c in hw.chips if c.issue == "in_order"]
    if chips:
        raise ScheduleError(f"the exact mode does not model issue: in_order (chip(s) {', '.join(chips)}); "
                            "expected no --exact on this hardware, or issue: dataflow")


class IssueClock:
    """Per in-order chip, the start of the last task issued: the next one may not start before it."""

    def __init__(self, plan: Plan, classes: list[int] | None = None) -> None:
        self.chips = in_order_chips(plan.chips)
        if self.chips and (len(plan.chips) > 1 or classes is not None):
            raise ScheduleError(f"issue: in_order is modelled on a one-chip step (one instruction stream), got "
                                f"{len(plan.chips)} chip(s){' under a pipeline schedule' if classes else ''}; "
                                "expected one chip, or issue: dataflow")
        self.last: dict[int, int] = {}

    @property
    def active(self) -> bool:
        """Whether any chip of the plan issues in order."""
        return bool(self.chips)

    def priorities(self, tasks: list[TaskSpec]) -> list[tuple]:
        """Program order as list-scheduling priorities (lowest first): the task id."""
        return [(0, t.id) for t in tasks]

    def earliest(self, t: TaskSpec) -> int:
        """The first cycle program order lets `t` start at (0 off in-order chips)."""
        return self.last.get(t.chip, 0) if issues_in_order(t, self.chips) else 0

    def issued(self, t: TaskSpec, start: int) -> None:
        """Record that `t` starts at `start`."""
        if issues_in_order(t, self.chips):
            self.last[t.chip] = max(self.last.get(t.chip, 0), start)
