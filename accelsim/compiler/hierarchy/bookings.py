"""The link bookings a composed step holds (StepWork, Topology, LinkBook -> Bookings keyed by what they carry):
activation and gradient transfers between two stages' chips, weight gradients sent to the stage that updates them,
data-parallel gradient buckets and ZeRO's parameter all-gathers. compose.py's event simulation holds them when its
items run; each distinct shape is booked once (links.LinkBook), so identical transfers share one hold's costing.
"""
from __future__ import annotations

from typing import Callable

from accelsim.compiler.hierarchy.links import Booking, LinkBook, collective_hold, transfer_hold
from accelsim.compiler.hierarchy.work import StepWork
from accelsim.hw.topology import Topology


def transfer_bookings(work: StepWork, topo: Topology | None, book: LinkBook) -> dict[tuple[int, int, int], Booking]:
    """(from stage, to stage, bytes) -> the booking of every transfer the step makes between two stages' chips
    (none without bytes or links)."""
    p, holds = work.pipeline_stages, {}
    if topo is None:
        return holds
    for c in range(len(work.chunks) - 1):
        for src_chunk, dst_chunk in ((c, c + 1), (c + 1, c)):
            src, dst, nbytes = src_chunk % p, dst_chunk % p, sent_bytes(work, src_chunk, dst_chunk)
            if src == dst or nbytes == 0 or (src, dst, nbytes) in holds:
                continue
            booking = book.crossing(transfer_hold(topo, work.stages[src].chips, work.stages[dst].chips, nbytes))
            if booking is not None:
                holds[(src, dst, nbytes)] = booking
    return holds


def gradient_sender(work: StepWork, topo: Topology | None, book: LinkBook) -> Callable[[int, int, int], Booking | None]:
    """(from stage, to stage, bytes) -> the booking of a weight gradient sent between two stages' chips (None:
    the same chip, no bytes or no links), each shape booked once."""
    holds: dict[tuple[int, int, int], Booking | None] = {}

    def send(src: int, dst: int, nbytes: int) -> Booking | None:
        if (src, dst, nbytes) not in holds:
            hold = None
            if topo is not None and src != dst and nbytes:
                hold = transfer_hold(topo, work.stages[src].chips, work.stages[dst].chips, nbytes)
            holds[(src, dst, nbytes)] = book.crossing(hold)
        return holds[(src, dst, nbytes)]

    return send


def sent_bytes(work: StepWork, c: int, to: int) -> int:
    """Bytes chunk `c` sends to its neighbour `to` per micro-batch: its activation forward; backward, the
    gradients it measured sending (ChunkWork.backward_bytes) less the weight gradients it sends to the stages
    that update them (ChunkWork.update_sends), else the activation that crossed that boundary forward (the
    previous chunk's)."""
    if to > c:
        return work.chunks[c].activation_bytes
    chunk = work.chunks[c]
    if chunk.backward_bytes < 0:
        return work.chunks[to].activation_bytes
    return max(0, chunk.backward_bytes - sum(n for _, n in chunk.update_sends))


def bucket_bookings(work: StepWork, topo: Topology | None, kind: str, bucket_bytes: int | None,
             book: LinkBook, sent: dict[int, int]) -> dict[tuple[int, int], list[tuple[int, Booking]]]:
    """Per (stage, chunk): (bytes, collective of `kind`) of its gradient buckets. A stage's gradient bytes, less
    those of the sums of gradients other stages send it (`sent`: sent_sums.py, reduced after them), are
    split evenly over its v chunks, each cut into buckets of `bucket_bytes` (the last one smaller; None: one
    bucket of the chunk's whole gradients)."""
    p, d, v = work.pipeline_stages, work.data_parallel, work.virtual_stages
    out: dict[tuple[int, int], list[tuple[int, Booking]]] = {}
    if d == 1 or topo is None:
        return out
    for stage in work.stages:
        groups = work.replica_groups(stage.stage)
        bookings: dict[int, Booking | None] = {}  # bucket bytes -> its all-reduce (None: no links)
        own = stage.gradient_bytes - sent.get(stage.stage, 0)
        for j in range(v):
            nbytes = own // v + (own % v if j == 0 else 0)
            cap = bucket_bytes or max(1, nbytes)
            sizes = [cap] * (nbytes // cap) + ([nbytes % cap] if nbytes % cap else [])
            for n in sizes:
                if n not in bookings:
                    bookings[n] = book.crossing(collective_hold(topo, kind, groups, n))
            out[(stage.stage, stage.stage + j * p)] = [(n, bookings[n]) for n in sizes if bookings[n] is not None]
    return out


def gather_bookings(work: StepWork, topo: Topology | None, bucket_bytes: int, book: LinkBook) -> dict[int, list[Booking]]:
    """Per stage: the all-gathers of its updated parameters (parameter_bytes per rank) over the replicas, in
    buckets of `bucket_bytes`."""
    out: dict[int, list[Booking]] = {}
    if work.data_parallel == 1 or topo is None:
        return out
    for stage in work.stages:
        groups = work.replica_groups(stage.stage)
        n, rest = divmod(stage.parameter_bytes, bucket_bytes)
        bookings = [book.crossing(collective_hold(topo, "all_gather", groups, size))
                    for size in [bucket_bytes] * n + [rest] if size]
        out[stage.stage] = [b for b in bookings if b is not None]
    return out


def pass_gather_bookings(work: StepWork, topo: Topology | None, book: LinkBook
                         ) -> dict[tuple[int, str], tuple[tuple[int, int, int, Booking, int], ...]]:
    """ZeRO 3: (chunk, "forward" or "backward") -> (ready, need, slack, booking, source) of each parameter gather
    of that pass (ChunkWork.forward_gathers, backward_gathers) that crosses links: an all-gather over the
    replicas (source -1), or where chunk `source` gathered the parameter first in the pass, a transfer of its
    copy from that chunk's stage (none where both chunks are on one chip). Each shape is booked once."""
    out: dict[tuple[int, str], tuple[tuple[int, int, int, Booking, int], ...]] = {}
    if work.data_parallel == 1 or topo is None:
        return out
    p = work.pipeline_stages
    holds: dict[tuple[int, int, int], Booking | None] = {}  # (stage, source stage or -1, bytes) -> its booking
    for chunk in work.chunks:
        stage = chunk.chunk % p
        for kind, gathers in (("forward", chunk.forward_gathers), ("backward", chunk.backward_gathers)):
            held = []
            for nbytes, ready, need, slack, source in gathers:
                key = (stage, -1 if source < 0 else source % p, nbytes)
                if key not in holds:
                    if source < 0:
                        hold = collective_hold(topo, "all_gather", work.replica_groups(stage), nbytes)
                    else:
                        hold = transfer_hold(topo, work.stages[source % p].chips, work.stages[stage].chips, nbytes)
                    holds[key] = book.crossing(hold)
                if holds[key] is not None:
                    held.append((ready, need, slack, holds[key], source))
            if held:
                out[(chunk.chunk, kind)] = tuple(held)
    return out
