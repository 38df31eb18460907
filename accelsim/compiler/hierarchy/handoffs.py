"""When a chunk's pass lets its neighbour's pass start, read from the one-micro-batch task schedule templates.py
measures (plan, task times -> one Handoff per chunk).

A chunk's forward pass hands several tensors to the next chunk (a transformer block cut mid-way sends its
residual and the branch it is computing), each as soon as it is computed, and the next chunk starts on the
first to arrive (transformer_block on four A100s: chunk 1 starts 16,127 cycles into a 70,500-cycle chunk 0).
The composition runs a pass as one busy interval, so what it needs is the lag: how far into the producer's
pass the consumer's pass may start and still find every tensor it reads computed when it reaches the task that
reads it, as in the measured schedule. For each tensor crossing the boundary that is the producer's busy
cycles of the pass until the tensor is computed, less the consumer's busy cycles of its own pass before the
task reading it starts; the lag is the largest of these. The same holds for the gradients a backward pass
sends to the previous chunk's backward pass (weight gradients sent to the stage that updates them are not
handed on: backward_sends.py).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from accelsim.compiler.planning.tasks import Plan
from accelsim.compiler.timing.list_sched import Timed

TRANSFER = "transfer"
PASSES = ("forward", "backward")


@dataclass(frozen=True, slots=True)
class Handoff:
    """One chunk's lags per micro-batch: busy cycles of its pass after which the neighbour's pass may start
    (-1: it hands nothing on in that pass)."""

    forward_after: int
    """Into its forward pass, for the next chunk's forward pass."""
    backward_after: int
    """Into its backward pass, for the previous chunk's backward pass."""


def handoffs(plan: Plan, timed: Sequence[Timed], chunk_of_chip: dict[int, int], n_chunks: int,
             handed: frozenset[int], filler: frozenset[int]) -> list[Handoff]:
    """Per chunk (0 .. n_chunks - 1), its Handoff in the measured schedule (`timed[i]` times `plan.tasks[i]`;
    `handed`: the ids of the backward transfers that carry an input gradient, backward_sends.input_grad_transfers;
    `filler`: nodes that read no micro-batch's data, no part of a pass). Busy cycles are counted per chip (a
    tensor-parallel rank sends to its twin)."""
    tasks = plan.tasks
    work: dict[tuple[int, str], list[tuple[int, int]]] = {}  # (chip, pass) -> its intervals
    for task, x in zip(tasks, timed):
        if task.kind != TRANSFER and task.phase in PASSES and task.node not in filler:
            work.setdefault((task.chip, task.phase), []).append((x.start, x.end))
    busy = {key: _Busy(intervals) for key, intervals in work.items()}
    readers: dict[int, list[int]] = {}
    for task in tasks:
        for d in task.deps:
            readers.setdefault(d, []).append(task.id)
    lag: dict[tuple[int, str], int] = {}  # (chunk, pass) -> its lag so far
    for task in tasks:
        if task.kind != TRANSFER or task.phase not in PASSES:
            continue
        src, dst = chunk_of_chip[task.chip], chunk_of_chip[task.out_chip]
        if task.phase == "forward" and dst <= src or task.phase == "backward" and task.id not in handed:
            continue
        produced = max((timed[d].end for d in task.deps if tasks[d].kind != TRANSFER), default=timed[task.id].start)
        given = busy[(task.chip, task.phase)].before(produced) if (task.chip, task.phase) in busy else 0
        for r in readers.get(task.id, ()):
            reader = tasks[r]
            if reader.kind == TRANSFER or reader.phase != task.phase or reader.node in filler:
                continue
            waited = busy[(reader.chip, reader.phase)].before(timed[r].start)
            lag[(src, task.phase)] = max(lag.get((src, task.phase), given - waited), given - waited)
    return [Handoff(*(max(0, lag[(c, phase)]) if (c, phase) in lag else -1 for phase in PASSES))
            for c in range(n_chunks)]


class _Busy:
    """A chip's busy cycles in one pass before a given cycle (its intervals merged)."""

    def __init__(self, intervals: list[tuple[int, int]]) -> None:
        merged: list[list[int]] = []
        for start, end in sorted(intervals):
            if merged and start <= merged[-1][1]:
                merged[-1][1] = max(merged[-1][1], end)
            else:
                merged.append([start, end])
        self.merged = merged

    def before(self, at: int) -> int:
        """Busy cycles in [0, at)."""
        return sum(min(end, at) - start for start, end in self.merged if start < at)
