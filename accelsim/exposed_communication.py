"""Exposed communication per collective kind (timed tasks -> ExposedCommunication per kind): the time a chip
computes nothing while communication it waits on is in flight, i.e. what overlapping failed to hide."""
from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from typing import Iterable, Protocol

from accelsim.schedule.kinds import TASK_KINDS, Holds

EXPOSED_COMMUNICATION_DEFINITION = (
    "per communication kind (all-reduce, tensor-parallel all-reduce, reduce-scatter, all-gather, transfer) and "
    "per chip: the cycles in which that kind's tasks the chip waits on are in flight (a collective's member on "
    "its chip; a transfer on its destination chip) and no unit of the chip is busy (no node or accumulate task "
    "runs on it); the step's figure for a kind is the largest over the chips (the chip that waits longest), with "
    "that chip and its cycles in flight. An idle instant with two kinds in flight counts for both; 0 means the "
    "kind is hidden behind computation on every chip")
"""How exposed communication is measured; run_summary returns it beside the figures."""


class Timed(Protocol):
    """What the measure reads: schedule.plan.Task fits (sim.trace.Span lacks out_chip)."""

    @property
    def kind(self) -> str: ...
    @property
    def chip(self) -> int: ...
    @property
    def out_chip(self) -> int: ...
    @property
    def start(self) -> int: ...
    @property
    def end(self) -> int: ...


@dataclass(frozen=True, slots=True)
class ExposedCommunication:
    """One communication kind: on chip `chip`, the one that waits longest on it, `exposed_cycles` of its
    `in_flight_cycles` had the chip's units idle (EXPOSED_COMMUNICATION_DEFINITION)."""

    kind: str
    label: str
    chip: int
    exposed_cycles: int
    in_flight_cycles: int

    @property
    def hidden_fraction(self) -> float:
        """The part of the kind's time in flight on that chip that computation hid (1.0 with none in flight)."""
        return 1.0 - self.exposed_cycles / self.in_flight_cycles if self.in_flight_cycles else 1.0


Spans = list[tuple[int, int]]


def _union(intervals: Iterable[tuple[int, int]]) -> Spans:
    """Sorted, disjoint, non-empty half-open intervals covering the same cycles."""
    out: Spans = []
    for s, e in sorted(i for i in intervals if i[1] > i[0]):
        if out and s <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], e))
        else:
            out.append((s, e))
    return out


def _length(spans: Spans) -> int:
    return sum(e - s for s, e in spans)


def _minus(spans: Spans, holes: Spans) -> Spans:
    """`spans` without the cycles of `holes` (both from _union)."""
    out: Spans = []
    j = 0
    for s, e in spans:
        while j < len(holes) and holes[j][1] <= s:
            j += 1
        k, cur = j, s
        while k < len(holes) and holes[k][0] < e:
            if holes[k][0] > cur:
                out.append((cur, holes[k][0]))
            cur = max(cur, holes[k][1])
            k += 1
        if cur < e:
            out.append((cur, e))
    return out


def waiting_chip(task: Timed) -> int:
    """The chip that waits on a communication task: a transfer's destination, a collective member's own chip."""
    return task.out_chip if TASK_KINDS[task.kind].holds is Holds.LINK else task.chip


def exposed_communication(tasks: Iterable[Timed]) -> tuple[ExposedCommunication, ...]:
    """Each communication kind the tasks hold (in TASK_KINDS' order) with its exposed cycles on the chip that
    waits longest on it (ties: the lowest chip) (EXPOSED_COMMUNICATION_DEFINITION)."""
    busy: dict[int, list[tuple[int, int]]] = defaultdict(list)
    comm: dict[str, dict[int, list[tuple[int, int]]]] = defaultdict(lambda: defaultdict(list))
    for t in tasks:
        kind = TASK_KINDS[t.kind]
        if kind.busy:
            busy[t.chip].append((t.start, t.end))
        else:
            comm[t.kind][waiting_chip(t)].append((t.start, t.end))
    busy_spans = {c: _union(v) for c, v in busy.items()}
    out = []
    for name in TASK_KINDS:
        if name not in comm:
            continue
        per_chip = []
        for chip in sorted(comm[name]):
            flight = _union(comm[name][chip])
            exposed = _length(_minus(flight, busy_spans.get(chip, [])))
            per_chip.append((exposed, -chip, _length(flight)))
        exposed, neg_chip, flight_cycles = max(per_chip)
        out.append(ExposedCommunication(name, TASK_KINDS[name].label, -neg_chip, exposed, flight_cycles))
    return tuple(out)
