"""What a chunk's backward pass sends to earlier chunks, and when, read from the one-micro-batch task schedule
templates.py measures (plan, task times, weight-gradient nodes -> one BackwardSends per chunk).

A backward pass sends two kinds of values back. Its input gradient is what the previous chunk's backward pass
starts from: the composition hands it on as soon as it is computed, not at the pass's end. A weight
gradient of a parameter another stage holds (gpt2's tied embedding: the LM head on the last stage computes
the vocabulary matrix's gradient, the embedding's stage adds it to its own and updates it) is read only by
that stage's weight gradients and update: it waits for nothing but the pass's end, and nothing but that
stage's update waits for it (gpt2-2 on two A100s: 77 MB of the 79 MB sent back per micro-batch).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from accelsim.compiler.planning.tasks import Plan
from accelsim.compiler.timing.list_sched import Timed

TRANSFER = "transfer"


@dataclass(frozen=True, slots=True)
class BackwardSends:
    """One chunk's backward values for earlier chunks, per micro-batch."""

    input_grad_after: int
    """Busy cycles of the chunk's backward pass until the last input gradient it sends back is computed; -1
    when it sends none."""
    update_sends: tuple[tuple[int, int], ...]
    """(destination chunk, bytes) of the weight gradients it sends to the chunks holding their parameters,
    by destination."""

    @property
    def update_bytes(self) -> int:
        return sum(n for _, n in self.update_sends)


def backward_sends(plan: Plan, timed: Sequence[Timed], chunk_of_chip: dict[int, int], n_chunks: int,
                   weight_grad: frozenset[int], filler: frozenset[int]) -> list[BackwardSends]:
    """Per chunk (0 .. n_chunks - 1), its BackwardSends in the measured schedule (`timed[i]` times
    `plan.tasks[i]`; `weight_grad`: the weight-gradient nodes, templates.weight_grad_nodes; `filler`: nodes
    that read no micro-batch's data, templates.filler_nodes, no part of a backward pass). A backward transfer
    to an earlier chunk carries a weight gradient when every task reading it there is an update or computes a
    weight-gradient node; otherwise an input gradient. The input gradient is computed after as many cycles of
    the chunk's backward pass as its chip (its busiest rank's) spent on backward work before then: the
    composition runs a pass as one busy interval, its input gradient that far into it."""
    tasks = plan.tasks
    handed = input_grad_transfers(plan, chunk_of_chip, weight_grad)
    computed = [-1] * n_chunks  # when each chunk's last input gradient sent back is computed
    updates: list[dict[int, int]] = [{} for _ in range(n_chunks)]
    for task, x in zip(tasks, timed):
        if task.kind != TRANSFER or task.phase != "backward":
            continue
        src, dst = chunk_of_chip[task.chip], chunk_of_chip[task.out_chip]
        if dst >= src:
            continue
        if task.id not in handed:
            updates[src][dst] = updates[src].get(dst, 0) + task.out_bytes
        else:
            computed[src] = max(computed[src], max((timed[d].end for d in task.deps), default=x.start))
    before: dict[int, list[tuple[int, int]]] = {}  # chip -> its backward work's intervals up to its gradient
    for task, x in zip(tasks, timed):
        c = chunk_of_chip[task.chip]
        if task.kind != TRANSFER and task.phase == "backward" and task.node not in filler and x.start < computed[c]:
            before.setdefault(task.chip, []).append((x.start, min(x.end, computed[c])))
    after = [max((_covered(before.get(chip, [])) for chip, c in chunk_of_chip.items() if c == chunk), default=0)
             if computed[chunk] >= 0 else -1 for chunk in range(n_chunks)]
    return [BackwardSends(after[c], tuple(sorted(updates[c].items()))) for c in range(n_chunks)]


def input_grad_transfers(plan: Plan, chunk_of_chip: dict[int, int], weight_grad: frozenset[int]) -> frozenset[int]:
    """The ids of the backward transfers to an earlier chunk that carry an input gradient: some task reading it
    there is neither an update nor computes a weight-gradient node (the others carry weight gradients to the
    stage that updates them)."""
    tasks = plan.tasks
    readers: dict[int, list[int]] = {}
    for task in tasks:
        for d in task.deps:
            readers.setdefault(d, []).append(task.id)
    return frozenset(
        task.id for task in tasks
        if task.kind == TRANSFER and task.phase == "backward" and chunk_of_chip[task.out_chip] < chunk_of_chip[task.chip]
        and not all(tasks[r].phase == "update" or tasks[r].node in weight_grad for r in readers.get(task.id, ())))


def _covered(intervals: list[tuple[int, int]]) -> int:
    """Cycles covered by at least one of `intervals` (start, end)."""
    total = reach = 0
    for start, end in sorted(intervals):
        if end > reach:
            total += end - max(start, reach)
            reach = end
    return total
