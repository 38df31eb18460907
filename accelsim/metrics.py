"""Metrics over timed work records (a Schedule's tasks or a simulation's spans), defined once so the
compiled summary and the simulated one cannot drift apart."""
from __future__ import annotations

from collections import defaultdict
from typing import Iterable, Mapping, Protocol

from accelsim.hw.spec import HwSpec
from accelsim.schedule.kinds import busy_kinds
from accelsim.schedule.levels import chip_list
from accelsim.schedule.plan import PER_STEP

BUSY_KINDS = busy_kinds()
"""Record kinds that occupy a unit (TaskKindDef.holds == "unit"); transfers and collectives do not."""


class Interval(Protocol):
    """What the metrics read from a record: schedule.plan.Task and sim.trace.Span both fit
    (read-only properties, since both are frozen)."""

    @property
    def kind(self) -> str: ...
    @property
    def resource(self) -> str: ...
    @property
    def microbatch(self) -> int: ...
    @property
    def replica(self) -> int: ...
    @property
    def start(self) -> int: ...
    @property
    def end(self) -> int: ...


def unit_instances(hw: HwSpec, chips_used: Iterable[int]) -> dict[str, int]:
    """Unit kind -> its instances over the chips in use (a gang of instances counts once)."""
    chips = chip_list(hw)
    out: dict[str, int] = defaultdict(int)
    for c in sorted(set(chips_used)):
        for u in chips[c].units:
            out[u.name] += 1 if u.gang else u.count
    return dict(out)


def utilization(records: Iterable[Interval], unit_instances: Mapping[str, int],
                makespan_cycles: int) -> dict[str, float]:
    """Busy fraction of each unit kind over the makespan, over all `unit_instances[kind]` instances."""
    busy: dict[str, int] = defaultdict(int)
    for r in records:
        if r.kind in BUSY_KINDS:
            busy[r.resource] += r.end - r.start
    return {u: busy.get(u, 0) / (n * makespan_cycles) if makespan_cycles else 0.0
            for u, n in sorted(unit_instances.items())}


def input_spans(records: Iterable[Interval]) -> dict[tuple[int, int], tuple[int, int]]:
    """(micro-batch, replica) -> (first start, last end): each input's time in the machine. Per-step
    work (the optimizer update) belongs to no input and is left out."""
    out: dict[tuple[int, int], list[int]] = {}
    for r in records:
        if r.microbatch == PER_STEP:
            continue
        lo_hi = out.setdefault((r.microbatch, r.replica), [r.start, r.end])
        lo_hi[0], lo_hi[1] = min(lo_hi[0], r.start), max(lo_hi[1], r.end)
    return {k: (v[0], v[1]) for k, v in out.items()}


def mean_latency_cycles(records: Iterable[Interval], makespan_cycles: int) -> float:
    """Mean over inputs of their span; the makespan when no record belongs to an input."""
    spans = input_spans(records)
    return sum(e - s for s, e in spans.values()) / len(spans) if spans else float(makespan_cycles)
