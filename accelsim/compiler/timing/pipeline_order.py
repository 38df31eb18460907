"""The task-level list scheduler under a pipeline schedule (Plan, per-chip item order -> a class per task): a
task's class is the position of its work item (forward, backward or weight_grad of one micro-batch on one
chunk) in its pipeline chip's order, so the list scheduler takes a chip's items in the schedule's order
(GPipe, 1F1B, interleaved, ZB-H1 of compiler/hierarchy/schedules.py, which compile reads and hands over as
data) and task and stage granularity can be compared under the same schedule.
"""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Protocol, Sequence

from accelsim.errors import ScheduleError
from accelsim.compiler.planning.tasks import Plan, TaskSpec
from accelsim.schedule.plan import PER_STEP


class WorkItem(Protocol):
    """One item of a pipeline chip's order (hierarchy/schedules.Item has these fields)."""

    kind: str  # forward, backward or weight_grad
    microbatch: int
    chunk: int


ChipOrders = Sequence[Sequence[WorkItem]]
"""One sequence of items per pipeline chip (stage), chip 0 first, each in the order the chip runs them."""


def input_gradient_tasks(plan: Plan) -> list[bool]:
    """Per task: a backward task on whose output the gradient sent to an earlier stage for one micro-batch
    depends (ZB-H1's B); the other backward tasks of a stage compute only weight gradients (its W, which
    ZB-H1 defers). A per-step reader on an earlier stage (a tied weight's gradient, whose part computed here is
    accumulated over the micro-batches and sent once per step: planning/step_sums.py) is no micro-batch's
    input gradient, so that part and its accumulation stay W, as the stage level counts them
    (hierarchy/templates.weight_grad_nodes, accumulate_cycles). Ids are a topological order, so one pass
    from the last task decides every task from its readers."""
    readers: list[list[int]] = [[] for _ in plan.tasks]
    for t in plan.tasks:
        for d in set(t.deps):
            readers[d].append(t.id)
    feeds = [False] * len(plan.tasks)
    for t in reversed(plan.tasks):
        if t.phase != "backward":
            continue
        for r in (plan.tasks[i] for i in readers[t.id]):
            sent_back = r.stage < t.stage and r.microbatch != PER_STEP  # one micro-batch's input gradient
            if r.phase == "backward" and (sent_back or feeds[r.id]):
                feeds[t.id] = True
                break
    return feeds


def pipeline_classes(plan: Plan, orders: ChipOrders, splits_weight_grad: bool) -> list[int]:
    """Each task's class (lowest first): the position of its item in its stage's order. Per-step work
    that every micro-batch reads (forward phase) comes first; the rest of the per-step work (accumulated
    gradients' all-reduces, the update) after every item. ScheduleError when a task's item is missing from
    its stage's order (the order was made for other stages, chunks or micro-batches than the plan's)."""
    position = [{(it.kind, it.microbatch, it.chunk): i for i, it in enumerate(items)} for items in orders]
    weight_grad = [False] * len(plan.tasks)
    if splits_weight_grad:
        weight_grad = [t.phase == "backward" and not feeds for t, feeds in zip(plan.tasks, input_gradient_tasks(plan))]
    classes = []
    for t in plan.tasks:
        if t.stage >= len(position):
            raise ScheduleError(f"pipeline order: task {t.id} ({t.kind} %{t.node}) is on stage {t.stage}, but the "
                                f"order covers {len(position)} stage(s)")
        if t.microbatch == PER_STEP:
            classes.append(-1 if t.phase == "forward" else len(orders[t.stage]))
            continue
        classes.append(_position(t, position[t.stage], "weight_grad" if weight_grad[t.id] else
                                 "forward" if t.phase == "forward" else "backward"))
    return classes


def _position(t: TaskSpec, position: dict[tuple[str, int, int], int], kind: str) -> int:
    key = (kind, t.microbatch, t.stage)
    if key not in position:
        raise ScheduleError(f"pipeline order: no {kind} item for micro-batch {t.microbatch} on chunk {t.stage} "
                            f"(task {t.id}, {t.kind} %{t.node}); the order was made for another step")
    return position[key]


@dataclass(frozen=True)
class PipelineOrder:
    """A pipeline schedule's per-chip order, as the list scheduler follows it."""

    orders: ChipOrders
    splits_weight_grad: bool  # backward items are input gradients only, weight_grad items the rest (ZB-H1)

    def classes(self, plan: Plan) -> list[int]:
        return pipeline_classes(plan, self.orders, self.splits_weight_grad)


class ItemGates:
    """A pipeline chip's work items started in the schedule's order during one list-scheduling run: a task
    of a chip's item is held back until a task of the chip's previous item has been taken, and starts no
    earlier than that item's first start. Priorities alone do not keep the order, because the list
    scheduler never leaves a unit idle for priority: a backward task that is ready fills the gap before a
    forward task whose input has not arrived. Items of one chip may still overlap on different units.

    A weight-gradient task that reads no backward task (ZB-H1's W; free_weight_grad_tasks: a reshape of a
    stashed activation) is gated as its micro-batch's B item and keeps W's priority: it fills the chip's idle
    time once B may start, as under 1F1B, and never starts an item, so it neither holds the B pass back nor
    delays the W pass beyond the gradients it waits for. A filler task (filler_tasks: it reads no micro-batch's
    data) passes no gate and starts no item, keeping its item's priority."""

    def __init__(self, tasks: list[TaskSpec], classes: list[int]) -> None:
        self.item: list[tuple[int, int] | None] = [
            (t.stage, c) if t.microbatch != PER_STEP else None for t, c in zip(tasks, classes)]
        present: dict[int, set[int]] = {}
        for key in self.item:
            if key is not None:
                present.setdefault(key[0], set()).add(key[1])
        self.prev: dict[tuple[int, int], tuple[int, int] | None] = {}
        for stage, positions in present.items():
            ordered = sorted(positions)
            for before, c in zip([None] + ordered[:-1], ordered):
                self.prev[(stage, c)] = None if before is None else (stage, before)
        # the item whose gate a task passes: its own, B's for a free W task, none for filler; an item keeps
        # the tasks that start it (where every task of an item is one of those, they all stay as they are)
        gate: dict[int, tuple[int, int] | None] = dict(free_weight_grad_tasks(tasks, classes))
        gate.update((tid, None) for tid in filler_tasks(tasks))
        starters = Counter(key for tid, key in enumerate(self.item) if key is not None and tid not in gate)
        self.gate = list(self.item)
        for tid, key in gate.items():
            if starters[self.item[tid]]:
                self.gate[tid], self.item[tid] = key, None
        self.first_start: dict[tuple[int, int], int] = {}
        self.held: dict[tuple[int, int], list[int]] = {}

    def admit(self, tid: int) -> bool:
        """True when task `tid` (its dependences taken) may be taken now; otherwise it is held."""
        key = self.gate[tid]
        before = None if key is None else self.prev[key]
        if before is None or before in self.first_start:
            return True
        self.held.setdefault(before, []).append(tid)
        return False

    def taken(self, tid: int, start: int) -> list[int]:
        """Record that `tid` starts at `start`; returns the held tasks this admits."""
        key = self.item[tid]
        if key is None or key in self.first_start:
            return []
        self.first_start[key] = start
        return self.held.pop(key, [])

    def earliest(self, tid: int) -> int:
        """The first cycle task `tid` may start: its chip's previous item's first start."""
        key = self.gate[tid]
        before = None if key is None else self.prev[key]
        return self.first_start.get(before, 0) if before is not None else 0

    def unblock(self) -> list[int]:
        """When nothing else is ready: the held tasks of the earliest item waited for (never reached in a
        deadlock-free order; it keeps a run from ending with tasks never taken)."""
        if not self.held:
            return []
        return self.held.pop(min(self.held))


def free_weight_grad_tasks(tasks: list[TaskSpec], classes: list[int]) -> dict[int, tuple[int, int]]:
    """Task id -> the (stage, class) of its micro-batch's B item, for every task of a weight-gradient item
    (a backward task whose class is later than its stage's first backward class for that micro-batch: ZB-H1's
    W) that reads, directly or through other such tasks, no backward task: its work needs only the forward
    pass's values, not the gradient B computes. Empty for schedules that do not split the backward pass."""
    first_backward: dict[tuple[int, int], int] = {}
    for t, c in zip(tasks, classes):
        if t.phase == "backward" and t.microbatch != PER_STEP:
            key = (t.stage, t.microbatch)
            first_backward[key] = min(first_backward.get(key, c), c)
    free: dict[int, tuple[int, int]] = {}
    for t, c in zip(tasks, classes):  # ids are a topological order: a task's inputs are decided before it
        if t.phase != "backward" or t.microbatch == PER_STEP:
            continue
        b_class = first_backward[(t.stage, t.microbatch)]
        if c > b_class and all(tasks[d].phase != "backward" or d in free for d in t.preds):
            free[t.id] = (t.stage, b_class)
    return free


def filler_tasks(tasks: list[TaskSpec]) -> list[int]:
    """Ids of the per-micro-batch node tasks that read no micro-batch's data, directly or through other such
    tasks (the last stage's loss seed: a scale, a broadcast, a negation per micro-batch). Their value is the
    same for every micro-batch, so, as the stage granularity's filler (hierarchy/templates.filler_nodes),
    they need wait for no item: they run wherever their chip is idle (the warm-up), not between a forward and
    a backward pass. Prefetches, transfers and collectives keep their items' gates."""
    filler: set[int] = set()
    for t in tasks:
        if t.kind == "node" and t.group < 0 and t.microbatch != PER_STEP and all(mb == PER_STEP for _, mb in t.reads) \
                and all(d in filler for d in t.preds):
            filler.add(t.id)
    return sorted(filler)
