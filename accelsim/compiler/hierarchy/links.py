"""Stage-level communication on the machine's links (Topology -> Hold, LinkBook): what a stage-to-stage
transfer or a bucket's collective of all t tensor-parallel ranks costs and which links it holds,
and a book that queues holders on shared links.

The link model is hw/topology.py's and schedule/collectives.py's: a transfer lasts its route's latency plus
bytes over bandwidth, a collective costs what collective_cost says, and either holds every link it crosses
for its whole duration, so two holders of one link run one after the other, except that a transfer passes
collectives queued on its links (LinkBook).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable, Sequence

from accelsim.hw.topology import SWITCH, Link, Topology
from accelsim.schedule.collectives import collective_cost


@dataclass(frozen=True, slots=True)
class Hold:
    """One stage-level communication: the links it holds and for how many cycles."""

    links: tuple[Link, ...]
    cycles: int


def transfer_hold(topo: Topology, src_chips: Sequence[int], dst_chips: Sequence[int], nbytes: int) -> Hold:
    """The t ranks of one stage each send `nbytes` to the same rank of another stage, at once: latency plus the
    busiest link's bytes over its bandwidth (ranks whose routes share a link, as through one NIC per node, add
    up on it). One rank's transfer is exactly its route's cost."""
    load: dict[Link, int] = {}
    latency = 0
    for a, b in zip(src_chips, dst_chips):
        route = topo.route(a, b)
        if not route.links:
            continue
        latency = max(latency, route.latency_cycles)
        for link in route.links:
            load[link] = load.get(link, 0) + nbytes
    if not load:
        return Hold((), 0)
    busiest = max(math.ceil(n / topo.bandwidth(link)) for link, n in load.items())
    return Hold(tuple(sorted(load)), max(1, busiest + latency))


def collective_hold(topo: Topology, kind: str, groups: Sequence[Sequence[int]], nbytes: int) -> Hold:
    """One collective of `kind` (allreduce, reduce_scatter, all_gather) of `nbytes` per rank (a gradient
    bucket, a parameter bucket), run by each rank's group of replicas' chips at once: the slowest group's cost
    when the groups' links are disjoint, else their costs one after another (they queue on the links they
    share)."""
    costs = [_collective(topo, kind, tuple(g), nbytes) for g in groups]
    links: set[Link] = set()
    disjoint = True
    for cycles, group_links in costs:
        disjoint = disjoint and links.isdisjoint(group_links)
        links.update(group_links)
    if not links:
        return Hold((), 0)
    cycles = max(c for c, _ in costs) if disjoint else sum(c for c, _ in costs)
    return Hold(tuple(sorted(links)), cycles)


def _collective(topo: Topology, kind: str, chips: tuple[int, ...], nbytes: int) -> tuple[int, tuple[Link, ...]]:
    """collective_cost's cycles and links of a collective over `chips`, computed once per shape: the group is
    costed as its canonical twin (shape_of) and the twin's links are mapped back onto the group's chips."""
    twin, to_chip, to_node = shape_of(topo, chips)
    cost = collective_cost(topo, kind, twin, nbytes)
    per_node_nics = topo.nics == "per_node"

    def end(net: str, x: int) -> int:
        if x == SWITCH:
            return x
        return to_node[x] if net == "scale_out" and per_node_nics else to_chip(x)

    return cost.cycles, tuple(Link(link.net, end(link.net, link.src), end(link.net, link.dst)) for link in cost.links)


def shape_of(topo: Topology, chips: tuple[int, ...]) -> tuple[tuple[int, ...], Callable[[int], int], dict[int, int]]:
    """A canonical twin of the group on `chips` that every collective costs alike: its nodes renumbered 0, 1,
    ... in order of first member, each node's chips rotated so that its first member is the node's chip 0.
    Both are symmetries of the link model (a ring inside a node is rotation-invariant, a switch any
    permutation's; nodes meet at one switch), so groups of the same shape (every stage's and every rank's
    replicas) share one costing. Returns the twin, the map of its chips back to the group's, and of its
    nodes."""
    k = topo.chips_per_node
    node_of: dict[int, int] = {}
    offset: dict[int, int] = {}
    twin = []
    for chip in chips:
        node = chip // k
        if node not in node_of:
            node_of[node], offset[node] = len(node_of), chip % k
        twin.append(node_of[node] * k + (chip % k - offset[node]) % k)
    to_node = {twin_node: node for node, twin_node in node_of.items()}

    def to_chip(x: int) -> int:
        node = to_node[x // k]
        return node * k + (x % k + offset[node]) % k

    return tuple(twin), to_chip, to_node


@dataclass(frozen=True, slots=True)
class Booking:
    """A hold as the book keeps it: its links as the book's link numbers."""

    links: tuple[int, ...]
    cycles: int


class LinkBook:
    """When each link is next free, for two classes of holders: point-to-point transfers (a stage's activation
    or gradient to another stage, a weight gradient sent to the stage that updates it) and collectives
    (gradient buckets, parameter all-gathers). Holders are booked in the order they ask (the simulation asks in
    time order).

    A collective starts when it is ready and its links are free of every holder. A transfer waits only for
    the transfers before it on its links: NCCL cuts a collective into small chunks that a link interleaves
    with other traffic, so a pipeline send queued behind a stage's gradient buckets waits for about one chunk,
    not for the whole queue (holding its links for the queue made the cool-down's gradient sends of GPT-3 175B
    on 1,024 A100s wait up to 124M cycles behind 60 buckets). The collective it passes yields it the links:
    the collectives in progress or queued on them end its cycles later (their bookings already made keep their
    ends; later ones start that much later)."""

    def __init__(self) -> None:
        self._number: dict[Link, int] = {}
        self._free_at: list[int] = []
        """Per link: when every holder booked so far has ended."""
        self._transfers_free_at: list[int] = []
        """Per link: when the transfers booked so far have ended."""

    def booking(self, hold: Hold) -> Booking:
        """`hold` in the book's terms (links numbered once, so booking is cheap however often it repeats)."""
        for link in hold.links:
            if link not in self._number:
                self._number[link] = len(self._free_at)
                self._free_at.append(0)
                self._transfers_free_at.append(0)
        return Booking(tuple(self._number[link] for link in hold.links), hold.cycles)

    def crossing(self, hold: Hold | None) -> Booking | None:
        """`hold`'s booking where it crosses links; None where it crosses none (the same chip, no bytes, or a
        chip without links), or where there is no hold: nothing to wait for on the book."""
        return self.booking(hold) if hold is not None and hold.links else None

    def book(self, booking: Booking, ready: int) -> tuple[int, int]:
        """(start, end) cycles of the transfer `booking`, ready at cycle `ready`: after the transfers before it
        on its links; collectives on them yield it their links."""
        free_at, transfers_free_at = self._free_at, self._transfers_free_at
        start = max(ready, max(map(transfers_free_at.__getitem__, booking.links), default=0))
        end = start + booking.cycles
        for link in booking.links:
            transfers_free_at[link] = end
            free_at[link] = free_at[link] + booking.cycles if free_at[link] > start else end
        return start, end

    def book_collective(self, booking: Booking, ready: int) -> tuple[int, int]:
        """(start, end) cycles of the collective `booking`, ready at cycle `ready`: after every holder before
        it on its links, which it holds until its end."""
        free_at = self._free_at
        start = max(ready, max(map(free_at.__getitem__, booking.links), default=0))
        end = start + booking.cycles
        for link in booking.links:
            free_at[link] = end
        return start, end
