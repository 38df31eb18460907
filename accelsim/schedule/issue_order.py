"""In-order issue, a machine rule of the schedule (hardware chips, Schedule -> problems): a chip with
`issue: in_order` (hw/spec.Chip) runs one instruction stream, as TPU v1's CISC instructions go through a
4-stage in-order pipeline, so its tasks start in program order: the schedule's task order, which follows
the graph's node order (a prefetch just before its reader). A task stalled on its inputs holds back every
task behind it on the chip, its weight prefetches (Read_Weights) included; those ahead of it run on.
The scheduler (compiler/timing/issue_order.py), this validator and the dynamic runtime (sim/dynamic.py)
read the same rule from here."""
from __future__ import annotations

from collections.abc import Sequence

from accelsim.hw.spec import Chip
from accelsim.schedule.kinds import TASK_KINDS
from accelsim.schedule.plan import Task

IN_ORDER = "in_order"


def in_order_chips(chips: Sequence[Chip]) -> frozenset[int]:
    """Indices (in schedule/levels.chip_list order) of the chips that issue in order."""
    return frozenset(c for c, chip in enumerate(chips) if chip.issue == IN_ORDER)


def issues_in_order(task, chips: frozenset[int]) -> bool:
    """Whether `task` (a Task or the compiler's TaskSpec) is in its chip's instruction stream: a task run on
    one in-order chip (a unit's node task, a DMA engine's prefetch or write-back); a transfer between chips or a
    collective is not."""
    return task.chip in chips and task.out_chip == task.chip and not TASK_KINDS[task.kind].together


def issue_order_problems(tasks: Sequence[Task], chips: frozenset[int], label) -> list[str]:
    """Every task of an in-order chip that starts before the task ahead of it in program order (`label`:
    a task -> its readable name)."""
    problems = []
    ahead: dict[int, Task] = {}
    for t in tasks:
        if not issues_in_order(t, chips):
            continue
        prev = ahead.get(t.chip)
        if prev is not None and t.start < prev.start:
            problems.append(f"{label(t)} starts at cycle {t.start}, before {label(prev)} at {prev.start}, which is "
                            f"ahead of it in program order on in-order chip {t.chip} (issue: in_order)")
        ahead[t.chip] = t if prev is None or t.start >= prev.start else prev
    return problems
