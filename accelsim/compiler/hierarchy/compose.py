"""Compose a step from stage-level work (StepWork, pipeline schedule, HwSpec -> Composition): an event
simulation (SimPy) in which every pipeline chip runs its items in the schedule's order, each waiting for its
input to arrive; activation and gradient transfers and data-parallel gradient buckets hold the links they
cross (links.py), so bubbles, exposed communication and link contention come out of the simulation.

Replicas are identical: one replica's pipeline is simulated, with the all-reduces that span every replica's
chips. The t tensor-parallel ranks of a stage move together (their work is inside the chunk's cycles).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Generator

import simpy

from accelsim.compiler.hierarchy.check import check_work
from accelsim.compiler.hierarchy.links import Booking, LinkBook, allreduce_hold, transfer_hold
from accelsim.compiler.hierarchy.schedules import Item, Order, pipeline_schedule
from accelsim.compiler.hierarchy.work import StageSpan, StepWork
from accelsim.errors import ScheduleError
from accelsim.hw.spec import HwSpec
from accelsim.hw.topology import Topology, topology_of

SPAN_KINDS: tuple[str, ...] = ("forward", "backward", "weight_grad", "transfer", "allreduce", "update")
EXPOSED_KINDS: tuple[str, ...] = ("transfer", "allreduce")

DDP_BUCKET_BYTES = 25 * 2**20
"""Gradient bytes per all-reduce bucket: PyTorch DDP's default bucket_cap_mb=25 (Megatron's buckets are of
the same order)."""


@dataclass(frozen=True)
class Composition:
    """The composed step of one replica (all replicas run alike)."""

    schedule: str
    makespan_cycles: int
    """From the first item (cycle 0) to the end of the last stage's update."""
    spans: tuple[StageSpan, ...]
    """Sorted by (start, stage, kind, chunk, microbatch, end)."""
    bubble_fraction: float
    """Idle cycles of the p pipeline chips / (p * makespan): pipeline bubbles and exposed communication."""
    exposed_cycles: dict[str, int]
    """Per kind (transfer, allreduce): the cycles by which communication of that kind lengthens the step: on
    the step's critical path, the time work waits for it beyond when it could otherwise start (a transfer
    hidden behind other work, or waited for in a bubble off the critical path, counts nothing)."""
    busy_cycles: tuple[int, ...]
    """Per stage: its items' and update's cycles."""
    peak_stash_bytes: tuple[int, ...]
    """Per stage: the most activation bytes stashed at once (forward to last backward item)."""


@dataclass(frozen=True, slots=True)
class _Planned:
    """One item as the simulation runs it, everything about it looked up before the clock starts."""

    item: Item
    cycles: int
    needs: int | None
    """The key of its input from another chunk (None: its inputs are on its chip)."""
    gives: int | None
    """The key of the input it produces for another chunk (None: it produces none)."""
    transfer: Booking | None
    """How that input travels (None: it is there at once: the same chip, or no bytes)."""
    buckets: tuple[Booking, ...]
    """The gradient buckets this item completes (the chunk's last gradient-producing item), in order."""


def _key(kind: str, microbatch: int, chunk: int, M: int) -> int:
    """Which input of which item: the forward input or backward gradient of (microbatch, chunk)."""
    return 2 * (chunk * M + microbatch) + (kind != "forward")


def _plan(work: StepWork, order: Order, split: bool, transfers: dict[tuple[int, int, int], Booking],
          buckets: dict[tuple[int, int], list[Booking]]) -> list[list[_Planned]]:
    """Per stage, its items with their cycles, inputs, outputs, transfers and buckets."""
    p, M, last = work.pipeline_stages, work.microbatches, len(work.chunks) - 1
    producer = "weight_grad" if split else "backward"
    last_producer = {(s, it.chunk): it for s, items in enumerate(order) for it in items if it.kind == producer}
    plans = []
    for s, items in enumerate(order):
        plan = []
        for it in items:
            chunk, c, m = work.chunks[it.chunk], it.chunk, it.microbatch
            if it.kind == "forward":
                cycles = chunk.forward_cycles
                needs = _key("forward", m, c, M) if c > 0 else None
                to = c + 1 if c < last else None
            elif it.kind == "backward":
                cycles = chunk.backward_cycles - (chunk.weight_grad_cycles if split else 0)
                needs = _key("backward", m, c, M) if c < last else None
                to = c - 1 if c > 0 else None
            else:
                cycles, needs, to = chunk.weight_grad_cycles, None, None
            gives = transfer = None
            if to is not None:
                gives = _key(it.kind, m, to, M)
                transfer = transfers.get((s, to % p, work.chunks[min(c, to)].activation_bytes))
            mine = tuple(buckets.get((s, c), ())) if last_producer[(s, c)] == it else ()
            plan.append(_Planned(it, cycles, needs, gives, transfer, mine))
        plans.append(plan)
    return plans


@dataclass
class _Step:
    """The simulation's shared state: which inputs have arrived, who waits for them, the links' book, and
    what the stages did."""

    env: simpy.Environment
    book: LinkBook
    arrived: dict[int, tuple[int, int, int, int]] = field(default_factory=dict)
    """Input key -> (producer's stage, its index in the stage's trace, cycle it ended, cycle the input
    arrived)."""
    waiting: dict[int, simpy.Event] = field(default_factory=dict)
    spans: list[tuple[int, int, str, int, int, int]] = field(default_factory=list)
    """(start, stage, kind, chunk, microbatch, end)."""
    trace: list[list[tuple[int, int, tuple[int, int, int, int] | None]]] = field(default_factory=list)
    """Per stage, per item run: (start, end, its input as (producer stage, producer's index, cycle the
    producer ended, cycle the input arrived), or None)."""
    tail: dict[int, tuple[int, int]] = field(default_factory=dict)
    """Stage -> (cycle its last item ended, cycle its last gradient bucket was reduced)."""
    waits_for: dict[int, Item] = field(default_factory=dict)
    """Stage -> the item it waits to start (for the deadlock message)."""
    ends: dict[int, int] = field(default_factory=dict)
    """Stage -> the cycle its update ends."""


def _run_stage(step: _Step, stage: int, plan: list[_Planned], update_cycles: int) -> Generator:
    """One pipeline chip: each item once its input has arrived, handing its output on; the chunk's gradient
    buckets all-reduced as its last gradient-producing item completes them (bucket i of n after (i + 1)/n of
    the pass, as a backward pass produces gradients layer by layer); then, once every bucket is reduced, the
    update.

    The chip keeps its own `clock` and lets SimPy's time catch up only before it books links or waits for an
    input not yet produced, so links are booked in time order while items that touch no link cost no event.
    An input published early (its producer's end, its arrival) is only read once the consumer's clock is past
    the producer's start, so nothing is seen before it exists."""
    env, spans, arrived, book, waiting = step.env, step.spans, step.arrived, step.book, step.waiting
    trace = step.trace[stage]
    clock = reduced = 0
    for planned in plan:
        item, came = planned.item, None
        if planned.needs is not None:
            if planned.needs not in arrived and clock > env.now:
                yield env.timeout(clock - env.now)  # the input may be produced meanwhile
            if planned.needs not in arrived:
                step.waits_for[stage] = item
                event = waiting[planned.needs] = env.event()
                yield event
                del step.waits_for[stage]
            came = arrived.pop(planned.needs)
            clock = max(clock, came[3])
        start, cycles = clock, planned.cycles
        for i, bucket in enumerate(planned.buckets):
            ready = start + math.ceil((i + 1) * cycles / len(planned.buckets))
            if ready > env.now:
                yield env.timeout(ready - env.now)
            b_start, b_end = book.book(bucket, ready)
            spans.append((b_start, stage, "allreduce", item.chunk, -1, b_end))
            reduced = max(reduced, b_end)
        clock = start + cycles
        spans.append((start, stage, item.kind, item.chunk, item.microbatch, clock))
        trace.append((start, clock, came))
        if planned.gives is not None:
            arrival = clock
            if planned.transfer is not None:
                if clock > env.now:
                    yield env.timeout(clock - env.now)
                t_start, arrival = book.book(planned.transfer, clock)
                spans.append((t_start, stage, "transfer", item.chunk, item.microbatch, arrival))
            arrived[planned.gives] = (stage, len(trace) - 1, clock, arrival)
            if planned.gives in waiting:
                waiting.pop(planned.gives).succeed()
    step.tail[stage] = (clock, reduced)
    clock = max(clock, reduced)
    spans.append((clock, stage, "update", -1, -1, clock + update_cycles))
    step.ends[stage] = clock + update_cycles


def compose(work: StepWork, schedule: str, hw: HwSpec, bucket_bytes: int = DDP_BUCKET_BYTES) -> Composition:
    """Time one step of `work` under the pipeline schedule named `schedule` on `hw` (cycles)."""
    sched = pipeline_schedule(schedule)
    check_work(work, hw, bucket_bytes)
    p, v, M = work.pipeline_stages, work.virtual_stages, work.microbatches
    sched.check(p, v, M)
    order = sched.order(p, v, M)
    topo = topology_of(hw)
    split = sched.splits_weight_grad
    book = LinkBook()
    plans = _plan(work, order, split, _transfers(work, topo, book), _buckets(work, topo, bucket_bytes, book))
    step = _Step(simpy.Environment(), book, trace=[[] for _ in range(p)])
    stages = [step.env.process(_run_stage(step, s, plans[s], work.stages[s].update_cycles)) for s in range(p)]
    step.env.run()
    stuck = [f"stage {s} waits to start {step.waits_for[s]}" for s in range(p) if not stages[s].triggered]
    if stuck:
        raise ScheduleError(f"pipeline schedule {schedule!r} deadlocks: {'; '.join(stuck)}, whose input never "
                            f"comes (the schedule's orders of two stages contradict each other)")
    busy = [sum(pl.cycles for pl in plans[s]) + work.stages[s].update_cycles for s in range(p)]
    makespan = max(step.ends.values())
    spans = tuple(StageSpan(stage, kind, m, chunk, start, end)
                  for start, stage, kind, chunk, m, end in sorted(step.spans))
    idle = p * makespan - sum(busy)
    return Composition(schedule, makespan, spans, idle / (p * makespan) if makespan else 0.0, _exposed(step, makespan),
                       tuple(busy), _peak_stash(work, order, split))


def _exposed(step: _Step, makespan: int) -> dict[str, int]:
    """Communication on the critical path, walked back from the stage that ends last (the lowest on a tie):
    an update waits for its last bucket beyond its stage's last item (allreduce); an item waits for its input
    beyond both its chip's previous item and the input's producer (transfer), and the path goes on through
    whichever of those two ended later (its own chip on a tie)."""
    exposed = dict.fromkeys(EXPOSED_KINDS, 0)
    stage = min(s for s, end in step.ends.items() if end == makespan)
    items_end, reduced = step.tail[stage]
    exposed["allreduce"] += max(0, reduced - items_end)
    index = len(step.trace[stage]) - 1
    while index >= 0:
        came = step.trace[stage][index][2]
        before = step.trace[stage][index - 1][1] if index else 0
        if came is None or came[3] <= before:
            index -= 1
            continue
        p_stage, p_index, produced, arrival = came
        exposed["transfer"] += arrival - max(before, produced)
        if produced > before:
            stage, index = p_stage, p_index
        else:
            index -= 1
    return exposed


def _transfers(work: StepWork, topo: Topology | None, book: LinkBook) -> dict[tuple[int, int, int], Booking]:
    """(from stage, to stage, bytes) -> the booking of every transfer the step makes between two stages' chips
    (none without bytes or links)."""
    p, holds = work.pipeline_stages, {}
    if topo is None:
        return holds
    for c, chunk in enumerate(work.chunks[:-1]):
        a, b = c % p, (c + 1) % p
        if a == b or chunk.activation_bytes == 0 or (a, b, chunk.activation_bytes) in holds:
            continue
        for src, dst in ((a, b), (b, a)):
            hold = transfer_hold(topo, work.stages[src].chips, work.stages[dst].chips, chunk.activation_bytes)
            if hold.links:
                holds[(src, dst, chunk.activation_bytes)] = book.booking(hold)
    return holds


def _buckets(work: StepWork, topo: Topology | None, bucket_bytes: int,
             book: LinkBook) -> dict[tuple[int, int], list[Booking]]:
    """Per (stage, chunk): the all-reduce holds of its gradient buckets. A stage's gradient bytes are split
    evenly over its v chunks, each cut into buckets of `bucket_bytes` (the last one smaller)."""
    p, t, d, v = work.pipeline_stages, work.tensor_parallel, work.data_parallel, work.virtual_stages
    out: dict[tuple[int, int], list[Booking]] = {}
    if d == 1 or topo is None:
        return out
    for stage in work.stages:
        groups = [[chip + r * p * t for r in range(d)] for chip in stage.chips]
        bookings: dict[int, Booking | None] = {}  # bucket bytes -> its all-reduce (None: no links)
        for j in range(v):
            nbytes = stage.gradient_bytes // v + (stage.gradient_bytes % v if j == 0 else 0)
            sizes = [bucket_bytes] * (nbytes // bucket_bytes) + ([nbytes % bucket_bytes] if nbytes % bucket_bytes
                                                                 else [])
            for n in sizes:
                if n not in bookings:
                    hold = allreduce_hold(topo, groups, n)
                    bookings[n] = book.booking(hold) if hold.links else None
            out[(stage.stage, stage.stage + j * p)] = [b for b in map(bookings.get, sizes) if b is not None]
    return out


def _peak_stash(work: StepWork, order, split: bool) -> tuple[int, ...]:
    """Per stage, the most activation bytes held at once: a chunk's stash_bytes from its forward to its last
    backward item (weight_grad where split)."""
    peaks = []
    last_kind = "weight_grad" if split else "backward"
    for items in order:
        held = peak = 0
        for it in items:
            if it.kind == "forward":
                held += work.chunks[it.chunk].stash_bytes
                peak = max(peak, held)
            elif it.kind == last_kind:
                held -= work.chunks[it.chunk].stash_bytes
        peaks.append(peak)
    return tuple(peaks)
