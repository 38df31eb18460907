"""Compose a step from stage-level work (StepWork, pipeline schedule, HwSpec -> Composition): an event
simulation (SimPy) in which every pipeline chip runs its items in the schedule's order, each waiting for its
input to arrive; activation and gradient transfers and data-parallel gradient buckets hold the links they
cross (links.py), so bubbles, exposed communication and link contention come out of the simulation.

Replicas are identical: one replica's pipeline is simulated, with the gradient collectives that span every
replica's chips. Other replicas' transfers are not booked: they cross their own chips' links, which a
collective shares with them at the same moments as replica 0's shares replica 0's. The t tensor-parallel ranks
of a stage move together (their work, all-reduces included, is inside the chunk's cycles).
"""
from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass, field
from functools import cached_property
from typing import Callable, Generator

import simpy

from accelsim.compiler.hierarchy.check import check_work
from accelsim.compiler.hierarchy.bookings import (bucket_bookings, gather_bookings, gradient_sender,
                                                  pass_gather_bookings, sent_bytes, transfer_bookings)
from accelsim.compiler.hierarchy.links import Booking, LinkBook
from accelsim.compiler.hierarchy.schedules import Item, Order, pipeline_schedule
from accelsim.compiler.hierarchy.sent_sums import sent_gradient_bytes, sent_reductions
from accelsim.compiler.hierarchy.work import StageSpan, StepWork
from accelsim.errors import ScheduleError
from accelsim.hw.spec import HwSpec
from accelsim.hw.topology import topology_of

EXPOSED_KINDS: tuple[str, ...] = ("transfer", "allreduce", "reduce_scatter", "all_gather")
"""Communication a step can wait on: pipeline transfers; gradient buckets, all-reduced (zero=0) or
reduce-scattered (ZeRO 1 to 3: each replica updates its shard); the updated parameters' all-gather (ZeRO 1
and 2), or each pass's parameters' (ZeRO 3)."""
SPAN_KINDS: tuple[str, ...] = ("forward", "backward", "weight_grad", "update") + EXPOSED_KINDS

DDP_BUCKET_BYTES = 25 * 2**20
"""Gradient bytes per all-reduce bucket: PyTorch DDP's default bucket_cap_mb=25 (Megatron's buckets are of
the same order)."""
AFTER_BACKWARD = "after-backward"
"""StepOptions.gradient_reduction's word for Megatron-LM 2021's all-reduce: megatron/training.py's train_step
calls each model chunk's allreduce_gradients() in turn once forward_backward_func has returned, and its local
DDP (megatron/model/distributed.py) all-reduces the chunk's whole contiguous gradient buffer at once; so here
each chunk's gradients are one collective, all of a stage's booked (chunk order) when its last item ends."""


@dataclass(frozen=True)
class Composition:
    """The composed step of one replica (all replicas run alike)."""

    schedule: str
    makespan_cycles: int
    """From the first item (cycle 0) to the end of the last stage's update (under ZeRO, of its parameters'
    all-gather)."""
    bubble_fraction: float
    """Idle cycles of the p pipeline chips / (p * makespan): pipeline bubbles and exposed communication."""
    exposed_cycles: dict[str, int]
    """Per kind (EXPOSED_KINDS): the cycles by which communication of that kind lengthens the step: on
    the step's critical path, the time work waits for it beyond when it could otherwise start (a transfer
    hidden behind other work, or waited for in a bubble off the critical path, counts nothing)."""
    busy_cycles: tuple[int, ...]
    """Per stage: its items' and update's cycles."""
    peak_stash_bytes: tuple[int, ...]
    """Per stage: the most activation bytes stashed at once (forward to last backward item)."""
    span_rows: tuple[tuple[int, int, str, int, int, int], ...] = field(repr=False)
    """The timeline as plain (start, stage, kind, chunk, microbatch, end) rows, sorted: `spans` makes records
    of them on first use (a 1,024-chip step has ~40,000, and making them costs as much as composing)."""

    peak_gathered_bytes: tuple[int, ...] = ()
    """ZeRO 3, per stage: the most all-gathered parameter bytes held at once, per rank: those one pass reads
    (ChunkWork.forward_gathers or backward_gathers, the most of its chunks'), which live during that item only;
    () without ZeRO 3."""

    @cached_property
    def spans(self) -> tuple[StageSpan, ...]:
        """The timeline, sorted by (start, stage, kind, chunk, microbatch, end)."""
        return tuple(StageSpan(stage, kind, m, chunk, start, end)
                     for start, stage, kind, chunk, m, end in self.span_rows)


@dataclass(slots=True)
class _Planned:
    """One item as the simulation runs it, everything about it looked up before the clock starts (not frozen:
    a frozen record costs a setattr call per field, and a step has tens of thousands of these)."""

    item: Item
    cycles: int
    needs: int | None
    """The key of its input from another chunk (None: its inputs are on its chip)."""
    gives: int | None
    """The key of the input it produces for another chunk (None: it produces none)."""
    gives_after: int
    """Cycles from the item's start until that input is computed: a whole backward pass computes its input
    gradient first and its weight gradients after (the part of it ZB-H1 defers as W), so the gradient leaves
    before the pass ends; anything else gives its output at its end."""
    transfer: Booking | None
    """How that input travels (None: it is there at once: the same chip, or no bytes)."""
    buckets: tuple[tuple[int, Booking], ...]
    """(bytes, collective) of the gradient buckets this item completes (the chunk's last gradient-producing
    item), in order."""
    update_sends: tuple[tuple[int, Booking | None], ...] = ()
    """(destination stage, how it travels: None when it needs no link) of the weight gradients it sends,
    `sends_after` cycles into it, to the stages holding their parameters (ChunkWork.update_sends), whose
    updates wait for them.
    Only the chunk's last item computing them sends them (its last backward item; under ZB-H1 its last W item
    when they are W: ChunkWork.sends_after_weight_grad): its stage sums them over the micro-batches, as it does
    its own weight gradients, and sends the sum once (Megatron-LM all-reduces the tied embedding's gradient
    between the first and last stages once per step). Sent per micro-batch, Megatron's 1T model on 3,072
    A100s sent 2.6 GB per rank 512 times through the last stage's links, which then held its input
    gradients back."""
    sends_after: int = 0
    """Cycles from the item's start until the weight gradients of update_sends are computed and leave
    (ChunkWork.update_send_after, update_send_after_split; its end where not measured)."""
    gathers: tuple[tuple[int, int, int, Booking, int], ...] = ()
    """ZeRO 3: (ready, need, slack, all-gather or transfer, source chunk or -1) of the parameters the item reads
    (ChunkWork.forward_gathers, backward_gathers, bounded by its cycles; those crossing links): each all-gather is
    booked once the item has run `ready` of its cycles (0: once its chip is free for it, before its input
    arrives; -1: once the item before it on the chip started); a parameter the source chunk gathered first in
    the pass comes from its item of the same micro-batch, which sends it (`copies`). The item stops at `need` of
    its cycles until the gather or copy has ended, less the `slack` cycles of its work that do not wait for it."""
    copies: tuple[tuple[tuple[int, str, int, int], Booking], ...] = ()
    """ZeRO 3: ((chunk, kind, micro-batch, index into its gathers) of a later reader, transfer) of the parameters
    this item gathered first in its pass that later chunks on other chips read: sent as it ends (the task level
    sends the gathered copy, once per micro-batch and pass, as soon as the link takes it)."""
    final: bool = True
    """Its buckets are the last of the step for their gradients (the chunk's last gradient-producing item):
    the update's parts wait for them. Under ZeRO 3 every such item reduce-scatters its micro-batch's
    gradients; only the last one's hold the update."""


def _key(kind: str, microbatch: int, chunk: int, M: int) -> int:
    """Which input of which item: the forward input or backward gradient of (microbatch, chunk)."""
    return 2 * (chunk * M + microbatch) + (kind != "forward")


def _plan(work: StepWork, order: Order, split: bool, transfers: dict[tuple[int, int, int], Booking],
          buckets: dict[tuple[int, int], list[tuple[int, Booking]]], send: Callable[[int, int, int], Booking | None],
          gathers: dict[tuple[int, str], tuple[tuple[int, int, int, Booking, int], ...]] | None = None,
          per_microbatch: bool = False, sends_per_microbatch: bool = False) -> list[list[_Planned]]:
    """Per stage, its items with their cycles, inputs, outputs, transfers, buckets and weight gradients
    sent to other stages (`send`: from stage, to stage, bytes -> its booking); under ZeRO 3 the parameter
    gathers of each (chunk, kind) (`gathers`: bookings.pass_gather_bookings); every gradient-producing item's
    buckets (`per_microbatch`: ZeRO 2 and 3 reduce-scatter each micro-batch's gradients), and its weight
    gradients sent to other stages (`sends_per_microbatch`: the task level sums no gradient over the step under
    ZeRO, planning/step_sums.py), not only the chunk's last one's."""
    gathers = gathers or {}
    # (source chunk, kind) -> (reading chunk, index into its gathers, transfer) of the copies it sends
    copies: dict[tuple[int, str], list[tuple[int, int, Booking]]] = {}
    for (c, kind), held in sorted(gathers.items()):
        for j, (_, _, _, booking, source) in enumerate(held):
            if source >= 0:
                copies.setdefault((source, kind), []).append((c, j, booking))
    p, M, last = work.pipeline_stages, work.microbatches, len(work.chunks) - 1
    producer = "weight_grad" if split else "backward"
    last_producer = {(s, it.chunk): it for s, items in enumerate(order) for it in items if it.kind == producer}
    last_backward = {(s, it.chunk): it for s, items in enumerate(order) for it in items if it.kind == "backward"}
    # the item after which a chunk's weight gradients for other stages are complete (ChunkWork.update_sends)
    last_sender = {key: last_producer[key] if split and work.chunks[key[1]].sends_after_weight_grad else it
                   for key, it in last_backward.items()}
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
            gives_after, sends, sends_after = cycles, (), cycles
            if it.kind == "forward" and chunk.output_after >= 0:
                gives_after = min(cycles, max(1, chunk.output_after))
            if it.kind == "backward":
                if chunk.input_grad_after >= 0:
                    gives_after = min(cycles, max(1, chunk.input_grad_after))
                elif not split:
                    gives_after = max(1, cycles - chunk.weight_grad_cycles)
            if last_sender[(s, c)] is it or (sends_per_microbatch and it.kind == last_sender[(s, c)].kind):
                sends = tuple((dest % p, send(s, dest % p, nbytes)) for dest, nbytes in chunk.update_sends)
                lag = chunk.update_send_after_split if split else chunk.update_send_after
                sends_after = cycles if lag < 0 else min(cycles, lag)
            gives = transfer = None
            if to is not None:
                gives = _key(it.kind, m, to, M)
                transfer = transfers.get((s, to % p, sent_bytes(work, c, to)))
            final = last_producer[(s, c)] is it
            mine = tuple(buckets.get((s, c), ())) if final or (per_microbatch and it.kind == producer) else ()
            held = tuple((min(ready, cycles), min(need, cycles), slack, b, source)
                         for ready, need, slack, b, source in gathers.get((c, it.kind), ()))
            sent = tuple(((to, it.kind, m, j), b) for to, j, b in copies.get((c, it.kind), ()))
            plan.append(_Planned(it, cycles, needs, gives, gives_after, transfer, mine, sends, sends_after, held,
                                 copies=sent, final=final))
        plans.append(plan)
    return plans


@dataclass
class _Step:
    """The simulation's shared state: which inputs have arrived, who waits for them, the links' book, and
    what the stages did."""

    env: simpy.Environment
    book: LinkBook
    reduce_kind: str
    """How gradient buckets are reduced: allreduce, or reduce_scatter under ZeRO."""
    gathers: dict[int, list[Booking]]
    """Stage -> the all-gathers of its updated parameters, in buckets, after its update (ZeRO; else none)."""
    deferred: dict[int, list[tuple[int, tuple[int, Booking]]]] = field(default_factory=dict)
    """Stage -> (chunk, (bytes, collective)) of its gradients reduced after its last item (AFTER_BACKWARD; else
    none)."""
    deferred_update: bool = False
    """AFTER_BACKWARD: a stage's whole update waits for the weight gradients other stages send it."""
    copies: dict[tuple[int, str, int, int], int] = field(default_factory=dict)
    """ZeRO 3: (chunk, kind, micro-batch, gather index) of a parameter copy sent (_Planned.copies) -> the cycle it
    arrived, until its reader takes it."""
    copy_waiting: dict[tuple[int, str, int, int], simpy.Event] = field(default_factory=dict)
    whole_reduction: bool = False
    """ZeRO: a stage's whole update waits for every bucket of its gradients and the reduction of the sums of
    those other stages send it (the task level's optimizer step on a replica's shards follows their whole
    reduction, as optimizer.step() follows backward: zero.update_part)."""
    every_stage: bool = False
    """ZeRO 1 and 2: a stage's update waits for every other stage's reductions too (zero.update_part waits for
    every reduced shard of its replica, whatever stage reduced it)."""
    boundary: bool = False
    """ZeRO 1: the deferred buckets are reduce-scattered once every stage's last item has ended (the task level
    reduces at the accumulation boundary: each reduce-scatter waits for every gradient's last accumulation,
    zero.reduce_gradients)."""
    barriers: dict[str, tuple[list[int], simpy.Event]] = field(default_factory=dict)
    """Name -> (the cycles the stages reached it at, the event that fires once every stage has)."""
    arrived: dict[int, tuple[int, int, int, int]] = field(default_factory=dict)
    """Input key -> (producer's stage, its index in the stage's trace, cycle it ended, cycle the input
    arrived)."""
    waiting: dict[int, simpy.Event] = field(default_factory=dict)
    spans: list[tuple[int, int, str, int, int, int]] = field(default_factory=list)
    """(start, stage, kind, chunk, microbatch, end)."""
    trace: list[list[tuple[int, int, tuple[int, int, int, int] | None, int]]] = field(default_factory=list)
    """Per stage, per item run: (start, end, its input as (producer stage, producer's index, cycle the
    producer ended, cycle the input arrived), or None, cycles it waited for its parameters' gathers (ZeRO 3))."""
    tail: dict[int, tuple[int, int, int]] = field(default_factory=dict)
    """Stage -> (cycles its update waited for gradient collectives (its buckets, the reduction of the sums of
    the gradients sent to it) beyond its last item and its update's earlier parts, cycles it waited beyond
    those for the weight gradients sent to it to arrive, cycle its update ended)."""
    waits_for: dict[int, Item] = field(default_factory=dict)
    """Stage -> the item it waits to start (for the deadlock message)."""
    ends: dict[int, int] = field(default_factory=dict)
    """Stage -> the cycle its update ends."""
    pending_sends: dict[int, int] = field(default_factory=dict)
    """Stage -> weight-gradient sends to it (ChunkWork.update_sends) not yet made; its update waits for them."""
    sends_in: dict[int, int] = field(default_factory=dict)
    """Stage -> the cycle the last weight gradient sent to it arrived."""
    sends_done: dict[int, simpy.Event] = field(default_factory=dict)
    """Stage -> the event its update waits on while sends to it are pending."""
    sent_reduce: dict[int, Booking] = field(default_factory=dict)
    """Stage -> the collective over the replicas of the sums of the gradients other stages send it
    (sent_sums.py), run once the sends have arrived and been added."""


def _run_stage(step: _Step, stage: int, plan: list[_Planned], update_cycles: int, sent_update_cycles: int = -1,
               gradient_bytes: int = 0, sent_sum_cycles: int = 0) -> Generator:
    """One pipeline chip: each item once its input has arrived, handing its output on; the chunk's gradient
    buckets all-reduced as its last gradient-producing item completes them (bucket i of n after (i + 1)/n of
    the pass, as a backward pass produces gradients layer by layer); then the update (_update_parts): each
    bucket's share of it once that bucket is reduced, and its last `sent_update_cycles`
    (StageWork.sent_update_cycles; -1: all of it) once every bucket is reduced and the weight gradients other
    stages send have arrived; under ZeRO 1 and 2 the all-gather of the updated parameters, which the next step
    needs, each bucket once its share of the update has run. With a reduction of the sums of the gradients sent
    (step.sent_reduce), the first `sent_sum_cycles` of that part add them up as soon as they have arrived,
    cutting into the update's part running then (the task level's add is backward work, ahead of updates), the collective follows, and the rest waits for it.

    The chip keeps its own `clock` and lets SimPy's time catch up only before it books links (so links are
    booked in time order) or waits for an input not yet produced; items that touch no link cost no event. An
    output that crosses no link is published as soon as its end is known, ahead of SimPy's time: a consumer
    reads only that cycle, and starts no earlier."""
    env, spans, arrived, book, waiting = step.env, step.spans, step.arrived, step.book, step.waiting
    trace = step.trace[stage]
    clock = reduced = previous = 0  # previous: when the chip started its item before
    bucket_ends: list[tuple[int, int]] = []  # (cycle reduced, bytes) of each bucket reduced beside the items
    for planned in plan:
        item, came = planned.item, None
        gathers, ended = planned.gathers, {}  # ZeRO 3: gather -> the cycle it ends (a copy's: when it arrives)
        early = [j for j, g in enumerate(gathers) if g[0] <= 0 and g[4] < 0]
        if early:  # the gathers ready before the item starts go before its input is waited for
            if clock > env.now:
                yield env.timeout(clock - env.now)
            for j in early:
                ended[j] = yield from _gather(step, stage, item, gathers[j], previous if gathers[j][0] < 0 else clock)
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
        clock, previous = start + cycles, start
        trace.append((start, clock, came, 0))
        n = len(planned.buckets)
        # what the item hands on, in time order (links are booked in time order), as cycles into it: its
        # gradient buckets, as the pass produces them, and its output to another chunk once computed (index
        # n: after a bucket complete at the same cycle); under ZeRO 3 first its gathers' issues (-2) and waits
        # (-1) at each cycle, which hold the rest by `stall` cycles
        events = [(math.ceil((i + 1) * cycles / n), 0, i) for i in range(n)]
        if planned.gives is not None:
            events.append((planned.gives_after, 0, n))
        events += [(planned.sends_after, 0, n + 1 + j) for j in range(len(planned.update_sends))]
        events += [(gather[0], -2, j) for j, gather in enumerate(gathers) if j not in ended and gather[4] < 0]
        events += [(gather[1], -1, j) for j, gather in enumerate(gathers)]
        stall = 0
        for offset, kind, i in sorted(events):
            at = start + offset + stall
            if kind == -2:  # a gather, issued `ready` cycles into the item
                ended[i] = yield from _gather(step, stage, item, gathers[i], at)
                continue
            if kind == -1:  # its first reader: the item waits for the gather (or the copy sent) to end, doing
                if i not in ended:  # its slack meanwhile
                    key = (item.chunk, item.kind, item.microbatch, i)
                    if key not in step.copies:
                        step.waits_for[stage] = item
                        yield step.copy_waiting.setdefault(key, env.event())
                        del step.waits_for[stage]
                    ended[i] = step.copies.pop(key)
                stall += max(0, ended[i] - at - gathers[i][2])
                continue
            if i > n:  # a weight gradient for another stage's update (index n + 1 + j: after the rest at that cycle)
                to, booking = planned.update_sends[i - n - 1]
                arrival = at
                if booking is not None:
                    if at > env.now:
                        yield env.timeout(at - env.now)
                    t_start, arrival = book.book(booking, at)
                    spans.append((t_start, stage, "transfer", item.chunk, item.microbatch, arrival))
                step.sends_in[to] = max(step.sends_in.get(to, 0), arrival)
                step.pending_sends[to] -= 1
                if not step.pending_sends[to] and to in step.sends_done:
                    step.sends_done.pop(to).succeed()
                continue
            if i < n or planned.transfer is not None:
                if at > env.now:
                    yield env.timeout(at - env.now)
            if i < n:
                nbytes, booking = planned.buckets[i]
                b_start, b_end = book.book_collective(booking, at)
                spans.append((b_start, stage, step.reduce_kind, item.chunk, -1 if planned.final else item.microbatch,
                              b_end))
                if planned.final:
                    reduced = max(reduced, b_end)
                    bucket_ends.append((b_end, nbytes))
                continue
            arrival = at
            if planned.transfer is not None:
                t_start, arrival = book.book(planned.transfer, at)
                spans.append((t_start, stage, "transfer", item.chunk, item.microbatch, arrival))
            arrived[planned.gives] = (stage, len(trace) - 1, at, arrival)
            if planned.gives in waiting:
                waiting.pop(planned.gives).succeed()
        clock += stall
        trace[-1] = (start, clock, came, stall)
        spans.append((start, stage, item.kind, item.chunk, item.microbatch, clock))
        if planned.copies:  # ZeRO 3: the parameters it gathered first in its pass, sent on to later readers
            if clock > env.now:
                yield env.timeout(clock - env.now)
            for key, booking in planned.copies:
                t_start, arrival = book.book(booking, clock)
                spans.append((t_start, stage, "transfer", item.chunk, item.microbatch, arrival))
                step.copies[key] = arrival
                if key in step.copy_waiting:
                    step.copy_waiting.pop(key).succeed()
    if step.boundary:  # ZeRO 1: every stage's gradients are complete before any is reduced
        clock = yield from _barrier(step, "accumulated", clock)
    if step.deferred.get(stage):  # AFTER_BACKWARD (ZeRO 1): the whole gradients once its (every) last item ended
        if clock > env.now:
            yield env.timeout(clock - env.now)
        for chunk, (_, booking) in step.deferred[stage]:
            b_start, b_end = book.book_collective(booking, clock)
            spans.append((b_start, stage, step.reduce_kind, chunk, -1, b_end))
            reduced = max(reduced, b_end)
    if step.every_stage:  # ZeRO 1 and 2: the update waits for every stage's reductions
        reduced = yield from _barrier(step, "reduced", reduced)
    if step.pending_sends.get(stage):
        event = step.sends_done[stage] = env.event()
        yield event
    # AFTER_BACKWARD: Megatron-LM's optimizer step follows the embedding group's all-reduce, so all of it waits
    # ZeRO 3: all of it follows every reduction, the sums' included
    late = update_cycles if sent_update_cycles < 0 or step.deferred_update or step.whole_reduction else \
        min(sent_update_cycles, update_cycles)
    sums = step.sent_reduce.get(stage)  # the collective of the sums of the gradients sent to it (or None)
    summing = min(max(0, sent_sum_cycles), late) if sums is not None else 0
    sends_in = step.sends_in.get(stage, 0)
    own = deque() if step.whole_reduction else deque(_update_parts(update_cycles - late, gradient_bytes, bucket_ends))
    waited = [0, 0]  # for collectives, for the weight gradients sent
    first = None  # the update's span runs from its first part's start to its last part's end
    sums_reduced = 0
    while own or sums is not None:
        if sums is not None and (not own or max(clock, own[0][0]) >= sends_in):
            start = max(clock, sends_in)  # the sums, once their parts are here and the part before is done
            waited[1] += start - clock
            if first is None and summing:
                first = start
            clock = start + summing
            if clock > env.now:
                yield env.timeout(clock - env.now)
            b_start, sums_reduced = book.book_collective(sums, clock)
            spans.append((b_start, stage, step.reduce_kind, -1, -1, sums_reduced))
            sums = None
            continue
        ready, cycles = own.popleft()
        start = max(clock, ready)
        waited[0] += start - clock
        if sums is not None and start + cycles > sends_in:  # the sums go as their parts arrive, mid-part
            own.appendleft((0, start + cycles - sends_in))
            cycles = sends_in - start
        if first is None and cycles:
            first = start
        clock = start + cycles
    after_buckets = max(clock, reduced)  # the rest: once every bucket, the sends and their sums' reduction
    waited[0] += after_buckets - clock
    arrived = max(after_buckets, sends_in)
    waited[1] += arrived - after_buckets
    start = max(arrived, sums_reduced)
    waited[0] += start - arrived
    clock = start + late - summing
    updating = start if first is None else first
    spans.append((updating, stage, "update", -1, -1, clock))
    step.tail[stage] = (waited[0], waited[1], clock)
    n = len(step.gathers.get(stage, ()))
    for i, gather in enumerate(step.gathers.get(stage, ())):
        # ZeRO 1 and 2: a parameter is all-gathered as soon as its part is updated (zero.gather_updates): bucket i
        # of n once (i + 1)/n of the update has run, so only the last bucket's gather follows the update
        at = updating + math.ceil((i + 1) * (clock - updating) / n)
        if at > env.now:
            yield env.timeout(at - env.now)
        g_start, g_end = book.book_collective(gather, at)
        spans.append((g_start, stage, "all_gather", -1, -1, g_end))
        if i == n - 1:
            clock = max(clock, g_end)
    step.ends[stage] = clock


def _barrier(step: _Step, name: str, cycle: int) -> Generator:
    """Wait until every pipeline stage has reached barrier `name` (this one at `cycle`); returns the latest
    cycle any reached it at."""
    reached, event = step.barriers.setdefault(name, ([], step.env.event()))
    reached.append(cycle)
    if len(reached) == len(step.trace):
        event.succeed()
    else:
        yield event
    return max(reached)


def _gather(step: _Step, stage: int, item: Item, gather: tuple[int, int, int, Booking, int], ready: int
            ) -> Generator:
    """Book one of an item's parameter all-gathers (_Planned.gathers), ready at cycle `ready`, once SimPy's time
    has caught up with it (an earlier `ready` is a prefetch the chip issued before); returns when it ends."""
    if ready > step.env.now:
        yield step.env.timeout(ready - step.env.now)
    start, end = step.book.book_collective(gather[3], ready)
    step.spans.append((start, stage, "all_gather", item.chunk, item.microbatch, end))
    return end


def _update_parts(cycles: int, gradient_bytes: int, bucket_ends: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """(cycle it may start, cycles) of the parts of a stage's update that need no weight gradient from another
    stage, in the order they run: each bucket's share of `cycles`, in proportion to its bytes of the stage's
    `gradient_bytes`, once that bucket is reduced (the task level updates each parameter once its own gradient
    is reduced, so the last buckets' reductions hide under the update of the parameters reduced before them),
    after the rest (parameters no booked bucket carries), which waits for nothing but the stage's items."""
    total = max(gradient_bytes, sum(n for _, n in bucket_ends))
    parts, done, shared = [], 0, 0
    for end, nbytes in sorted(bucket_ends):
        done += nbytes
        share = cycles * done // total - shared if total else 0
        parts.append((end, share))
        shared += share
    return [(0, cycles - shared)] + parts


def compose(work: StepWork, schedule: str, hw: HwSpec, bucket_bytes: int = DDP_BUCKET_BYTES,
            zero: int = 0, reduction: str = "overlap") -> Composition:
    """Time one step of `work` under the pipeline schedule named `schedule` on `hw` (cycles). `zero` is the
    ZeRO stage (0 to 3): from 1 on, gradient buckets are reduce-scattered over the replicas (the update's cycles
    are the shard's, as templates measure them), a weight gradient for another stage is sent every micro-batch,
    and the whole update waits for every reduction; at 1 and 2, as the task level plans them, every stage's
    update waits for every stage's reductions and each bucket of `bucket_bytes` of updated parameters is
    all-gathered once its share of the update has run; at 1 the buckets are reduce-scattered once every
    stage's last item has ended (the accumulation boundary), at 2 each micro-batch's as its backward pass
    completes them; at 3, as the task level plans it (hierarchy/zero3.py), no
    all-gather follows the update: each forward and backward item all-gathers the parameters it reads
    (ChunkWork.forward_gathers, backward_gathers) and waits for them, every micro-batch's gradients are
    reduce-scattered as its backward pass completes them, and the whole update waits for every reduction;
    with one replica it is ZeRO 0. `reduction` (StepOptions.gradient_reduction): "overlap" reduces the
    buckets as the backward pass completes them; AFTER_BACKWARD each chunk's whole gradients after the stage's
    last item, and the whole update waits for the weight gradients other stages send (ZeRO 0 only). Either way
    the sums of the gradients other stages send a stage (a tied embedding's: sent_sums.py) are reduced in a
    collective of their own once the sends have arrived and been added, as the task level reduces them."""
    sched = pipeline_schedule(schedule)
    check_work(work, hw, bucket_bytes, zero, reduction)
    zero = zero if work.data_parallel > 1 else 0  # one replica's shard is the whole: as the task level, no ZeRO
    p, v, M = work.pipeline_stages, work.virtual_stages, work.microbatches
    sched.check(p, v, M)
    order = sched.order(p, v, M)
    topo = topology_of(hw)
    split = sched.splits_weight_grad
    book = LinkBook()
    reduce_kind = "reduce_scatter" if zero else "allreduce"
    after = reduction == AFTER_BACKWARD
    sent = sent_gradient_bytes(work)  # reduced after the sends, in no bucket (nor, AFTER_BACKWARD, chunk's whole)
    buckets = bucket_bookings(work, topo, reduce_kind, None if after else bucket_bytes, book, sent)
    gathers = gather_bookings(work, topo, bucket_bytes, book) if zero in (1, 2) else {}
    plans = _plan(work, order, split, transfer_bookings(work, topo, book), {} if after or zero == 1 else buckets,
                  gradient_sender(work, topo, book), pass_gather_bookings(work, topo, book) if zero == 3 else None,
                  per_microbatch=zero in (2, 3), sends_per_microbatch=zero > 0)
    deferred: dict[int, list[tuple[int, tuple[int, Booking]]]] = {}
    for (s, c), bookings in (sorted(buckets.items()) if after or zero == 1 else ()):
        deferred.setdefault(s, []).extend((c, b) for b in bookings)
    step = _Step(simpy.Environment(), book, reduce_kind, gathers, deferred, after, trace=[[] for _ in range(p)],
                 sent_reduce=sent_reductions(work, topo, reduce_kind, sent, book), whole_reduction=zero > 0,
                 every_stage=zero in (1, 2), boundary=zero == 1)
    for plan in plans:
        for planned in plan:
            for to, _ in planned.update_sends:
                step.pending_sends[to] = step.pending_sends.get(to, 0) + 1
    stages = [step.env.process(_run_stage(step, s, plans[s], work.stages[s].update_cycles,
                                          work.stages[s].sent_update_cycles,
                                          work.stages[s].gradient_bytes - sent.get(s, 0),
                                          work.stages[s].sent_sum_cycles))
              for s in range(p)]
    step.env.run()
    stuck = [f"stage {s} waits to start {step.waits_for[s]}" if s in step.waits_for else
             f"stage {s} waits before its update for gradients other stages send or reduce"  # not for an item
             for s in range(p) if not stages[s].triggered]
    if stuck:
        raise ScheduleError(f"pipeline schedule {schedule!r} deadlocks: {'; '.join(stuck)}, whose input never "
                            f"comes (the schedule's orders of two stages contradict each other)")
    busy = [sum(pl.cycles for pl in plans[s]) + work.stages[s].update_cycles for s in range(p)]
    makespan = max(step.ends.values())
    idle = p * makespan - sum(busy)
    gathered = tuple(max((sum(g[0] for g in gathers) for c in work.chunks[s::p]
                          for gathers in (c.forward_gathers, c.backward_gathers)), default=0)
                     for s in range(p)) if zero == 3 else ()
    return Composition(schedule, makespan, idle / (p * makespan) if makespan else 0.0, _exposed(step, makespan),
                       tuple(busy), _peak_stash(work, order, split), tuple(sorted(step.spans)), gathered)


def _exposed(step: _Step, makespan: int) -> dict[str, int]:
    """Communication on the critical path, walked back from the stage that ends last (the lowest on a tie):
    an update's parts wait for their buckets beyond its stage's last item and the parts before them (allreduce
    or reduce_scatter), the step ends after the update's all-gathers, or an item on the path waits for its
    parameters' gathers (ZeRO 3) (all_gather); an update waits for weight
    gradients sent to it beyond both (transfer); an item waits for its input
    beyond both its chip's previous item and the input's producer (transfer), and the path goes on through
    whichever of those two ended later (its own chip on a tie)."""
    exposed = dict.fromkeys(EXPOSED_KINDS, 0)
    stage = min(s for s, end in step.ends.items() if end == makespan)
    bucket_wait, send_wait, updated = step.tail[stage]
    exposed[step.reduce_kind] += bucket_wait
    exposed["transfer"] += send_wait
    exposed["all_gather"] += makespan - updated
    index = len(step.trace[stage]) - 1
    while index >= 0:
        exposed["all_gather"] += step.trace[stage][index][3]  # ZeRO 3: the item waited for its parameters
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
