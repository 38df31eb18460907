"""Collectives over an ordered group of chips (Topology, kind, chips, bytes -> cycles, bytes each member
sends, the links it holds): all-reduce, reduce-scatter and all-gather by ring or tree, and the
hierarchical form NCCL uses on two-level machines.

The link model (hw/topology.py): a transfer costs its route's latency plus bytes over bandwidth. An
algorithm is a list of steps; in a step every member sends its flows at once, so the step lasts the
slowest flow's latency plus the bytes on its busiest link over that link's bandwidth (two flows
through one switch port take twice as long). Hence the closed forms, with n members, S bytes, link
bandwidth B and latency a:
  ring all-reduce      2(n-1) steps of S/n:   2(n-1)/n * S/B + 2(n-1) a   (busbw = algbw * 2(n-1)/n = B)
  ring reduce-scatter  n-1 steps of S/n:      (n-1)/n * S/B + (n-1) a; all-gather alike
  tree all-reduce      a binary tree in member order (member i's parent is (i-1)//2): S reduced up one
                       level per step, then broadcast down one level per step, not pipelined:
                       2 floor(log2 n) steps of S, so 2 floor(log2 n) a plus up to 2 S/B per level on a
                       switch (a parent's port carries both children). It wins on latency (small
                       messages), the ring on bandwidth (large ones).
  hierarchical         on a two-level machine, when the members fill k >= 2 chips in each of m >= 2 nodes
                       (NCCL's scheme): all-reduce = ring reduce-scatter inside every node (S -> S/k),
                       all-reduce of S/k across nodes among the members of equal rank in their node (k
                       "rails" at once, by ring or tree), ring all-gather inside every node; reduce-scatter
                       and all-gather do the inside and across parts as reduce-scatters or all-gathers.
Tree is for all-reduce only; reduce-scatter and all-gather always run as rings (as NCCL's do).
Members that share a chip exchange nothing (no links, no latency). A collective holds every link any of
its flows crosses, for its whole duration: the scheduler books them, the validator checks them and the
simulator replays them (links_of_schedule).
"""
from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass
from fractions import Fraction
from functools import lru_cache
from typing import Callable, Sequence

from accelsim.errors import ScheduleError
from accelsim.hw.topology import Link, Topology
from accelsim.schedule.kinds import TASK_KINDS, Holds
from accelsim.schedule.plan import COLLECTIVE, COLLECTIVE_TREE, Schedule

ALGORITHMS = ("ring", "tree")
CHOICES = (*ALGORITHMS, "auto")
RESOURCE_OF = {"ring": COLLECTIVE, "tree": COLLECTIVE_TREE}
"""The resource a collective's members run on names its algorithm, so a schedule records which one ran."""
ALGORITHM_OF = {r: a for a, r in RESOURCE_OF.items()}

Flow = tuple[int, int, Fraction]
"""(sending member, receiving member, bytes): indices into the group's members."""


@dataclass(frozen=True, slots=True)
class Step:
    """Flows that run at once, `repeat` times in a row (a ring's n - 1 rounds are one Step)."""

    repeat: int
    flows: tuple[Flow, ...]


def ring(members: Sequence[int], chunk: Fraction, rounds: int) -> list[Step]:
    """`rounds` rounds in which every member sends `chunk` bytes to the next one (the last to the first)."""
    n = len(members)
    if n < 2 or rounds < 1:
        return []
    return [Step(rounds, tuple((members[i], members[(i + 1) % n], chunk) for i in range(n)))]


def _depth(i: int) -> int:
    return (i + 1).bit_length() - 1


def tree(members: Sequence[int], nbytes: Fraction) -> list[Step]:
    """Reduce up a binary tree in member order (member i's parent is (i-1)//2), level by level, then
    broadcast down it: 2 floor(log2 n) steps of `nbytes`."""
    n = len(members)
    levels = range(1, _depth(n - 1) + 1)

    def level(d: int, up: bool) -> Step:
        pairs = [(members[i], members[(i - 1) // 2]) for i in range(1, n) if _depth(i) == d]
        return Step(1, tuple((a, b, nbytes) if up else (b, a, nbytes) for a, b in pairs))

    return [level(d, True) for d in reversed(levels)] + [level(d, False) for d in levels]


def side_by_side(step_lists: Sequence[list[Step]]) -> list[Step]:
    """Step lists of one shape (the same algorithm on equal groups) run at once: their i-th steps merged."""
    lists = [s for s in step_lists if s]
    merged = []
    for steps in zip(*lists):
        assert len({s.repeat for s in steps}) == 1, "side_by_side needs step lists of one shape"
        merged.append(Step(steps[0].repeat, tuple(f for s in steps for f in s.flows)))
    return merged


FlatSteps = Callable[[Sequence[int], Fraction, str], list[Step]]
"""(members in ring order, bytes, algorithm) -> steps."""


def _allreduce(members: Sequence[int], nbytes: Fraction, algorithm: str) -> list[Step]:
    n = len(members)
    return tree(members, nbytes) if algorithm == "tree" else ring(members, nbytes / n, 2 * (n - 1))


def _scatter_or_gather(members: Sequence[int], nbytes: Fraction, algorithm: str) -> list[Step]:
    n = len(members)
    return ring(members, nbytes / n, n - 1)


def _inside(nodes: list[list[int]], nbytes: Fraction) -> list[Step]:
    """A ring reduce-scatter (or all-gather: the same traffic) of `nbytes` inside every node at once."""
    k = len(nodes[0])
    return side_by_side([ring(node, nbytes / k, k - 1) for node in nodes])


def _across(nodes: list[list[int]], flat: FlatSteps, nbytes: Fraction, algorithm: str) -> list[Step]:
    """`flat` over each rail (the members of equal rank in their nodes) at once, `nbytes` per rail."""
    rails = [list(rail) for rail in zip(*nodes)]
    return side_by_side([flat(rail, nbytes, algorithm) for rail in rails])


Hierarchical = Callable[[list[list[int]], Fraction, str], list[Step]]
"""(members grouped by node, k per node, bytes, algorithm across nodes) -> steps."""


def _allreduce_hierarchical(nodes: list[list[int]], nbytes: Fraction, algorithm: str) -> list[Step]:
    k = len(nodes[0])
    return _inside(nodes, nbytes) + _across(nodes, _allreduce, nbytes / k, algorithm) + _inside(nodes, nbytes)


def _reduce_scatter_hierarchical(nodes: list[list[int]], nbytes: Fraction, algorithm: str) -> list[Step]:
    return _inside(nodes, nbytes) + _across(nodes, _scatter_or_gather, nbytes / len(nodes[0]), "ring")


def _all_gather_hierarchical(nodes: list[list[int]], nbytes: Fraction, algorithm: str) -> list[Step]:
    return _across(nodes, _scatter_or_gather, nbytes / len(nodes[0]), "ring") + _inside(nodes, nbytes)


@dataclass(frozen=True)
class CollectiveKindDef:
    """One collective: its steps on one network (flat) and on a two-level machine (hierarchical), and the
    algorithms it has. `nbytes` is always the whole tensor's size (a reduce-scatter's input, an
    all-gather's output)."""

    name: str
    algorithms: tuple[str, ...]
    flat: FlatSteps
    hierarchical: Hierarchical


COLLECTIVE_KINDS: dict[str, CollectiveKindDef] = {k.name: k for k in (
    CollectiveKindDef("allreduce", ("ring", "tree"), _allreduce, _allreduce_hierarchical),
    CollectiveKindDef("reduce_scatter", ("ring",), _scatter_or_gather, _reduce_scatter_hierarchical),
    CollectiveKindDef("all_gather", ("ring",), _scatter_or_gather, _all_gather_hierarchical),
)}


@dataclass(frozen=True, slots=True)
class CollectiveCost:
    """One collective by one algorithm: `cycles` in all (`latency_cycles` of them latency), the bytes each
    member sends over links (in member order), and every link it holds (sorted)."""

    kind: str
    algorithm: str
    hierarchical: bool
    cycles: int
    latency_cycles: int
    sent_bytes: tuple[int, ...]
    links: tuple[Link, ...]

    @property
    def resource(self) -> str:
        """What its members run on (plan.COLLECTIVE for a ring, COLLECTIVE_TREE for a tree)."""
        return RESOURCE_OF[self.algorithm]


def nodes_of(topo: Topology, chips: Sequence[int]) -> list[list[int]] | None:
    """Member indices grouped by node (nodes in order of first member) when the hierarchical form applies:
    a two-level machine, two or more nodes, the same number k >= 2 of members in each. None otherwise."""
    if topo.inter is None:
        return None
    by_node: dict[int, list[int]] = {}
    for i, chip in enumerate(chips):
        by_node.setdefault(topo.node(chip), []).append(i)
    nodes = list(by_node.values())
    if len(nodes) < 2 or len({len(n) for n in nodes}) != 1 or len(nodes[0]) < 2:
        return None
    return nodes


def _evaluate(topo: Topology, chips: Sequence[int], steps: list[Step]) -> tuple[int, int, tuple[int, ...],
                                                                                   tuple[Link, ...]]:
    """(cycles, latency cycles, bytes sent per member, links) of `steps` over `chips`. Bytes are exact
    fractions; each bandwidth's bytes are divided once, so a single-bandwidth ring is exactly
    ceil(total bytes / B) + latency."""
    latency = 0
    per_bandwidth: dict[float, Fraction] = defaultdict(Fraction)
    sent = [Fraction(0)] * len(chips)
    held: set[Link] = set()
    for step in steps:
        load: dict[Link, Fraction] = defaultdict(Fraction)
        slowest = 0
        for src, dst, nbytes in step.flows:
            route = topo.route(chips[src], chips[dst])
            if not route.links:
                continue  # members on one chip: nothing crosses a link
            slowest = max(slowest, route.latency_cycles)
            sent[src] += step.repeat * nbytes
            for link in route.links:
                load[link] += nbytes
        if not load:
            continue
        held.update(load)
        busiest = max(load, key=lambda x: (load[x] / Fraction(topo.bandwidth(x)), x))
        per_bandwidth[topo.bandwidth(busiest)] += step.repeat * load[busiest]
        latency += step.repeat * slowest
    bytes_cycles = sum(float(b) / bw for bw, b in sorted(per_bandwidth.items()))
    return (math.ceil(bytes_cycles) + latency, latency, tuple(math.ceil(s) for s in sent), tuple(sorted(held)))


@lru_cache(maxsize=4096)
def _cost(topo: Topology, kind: str, chips: tuple[int, ...], nbytes: int, algorithm: str) -> CollectiveCost:
    k = COLLECTIVE_KINDS[kind]
    nodes = nodes_of(topo, chips)
    size = Fraction(nbytes)
    steps = k.flat(range(len(chips)), size, algorithm) if nodes is None else k.hierarchical(nodes, size, algorithm)
    cycles, latency, sent, links = _evaluate(topo, chips, steps)
    return CollectiveCost(kind, algorithm, nodes is not None, cycles, latency, sent, links)


def collective_cost(topo: Topology, kind: str, chips: Sequence[int], nbytes: int,
                    algorithm: str = "auto") -> CollectiveCost:
    """A collective of `kind` (a key of COLLECTIVE_KINDS) of `nbytes` (the whole tensor) over the members
    on `chips`, in ring order. `algorithm`: "ring", "tree" or "auto" (the one with fewer cycles, the ring
    on a tie); a kind without a tree runs as a ring whatever is asked."""
    if kind not in COLLECTIVE_KINDS:
        raise ScheduleError(f"unknown collective {kind!r}; expected one of {', '.join(COLLECTIVE_KINDS)}")
    if algorithm not in CHOICES:
        raise ScheduleError(f"unknown collective algorithm {algorithm!r}; expected one of {', '.join(CHOICES)}")
    if not chips or nbytes < 0 or any(not 0 <= c < topo.n_chips for c in chips):
        raise ScheduleError(f"a {kind} needs members on chips 0..{topo.n_chips - 1} and bytes >= 0, got chips "
                            f"{list(chips)[:8]} and {nbytes} bytes")
    known = COLLECTIVE_KINDS[kind].algorithms
    tries = known if algorithm == "auto" else ((algorithm,) if algorithm in known else known[:1])
    costs = [_cost(topo, kind, tuple(chips), int(nbytes), a) for a in tries]
    return min(costs, key=lambda c: c.cycles)  # the first (the ring) on a tie


def collective_links(topo: Topology, resource: str, chips: Sequence[int]) -> tuple[Link, ...]:
    """The links a collective run on `resource` (its algorithm) over `chips` holds: the same for every kind,
    since reduce-scatters and all-gathers cross the rings' links in other amounts only."""
    return _cost(topo, "allreduce", tuple(chips), 1, ALGORITHM_OF[resource]).links


@dataclass(frozen=True, slots=True)
class Holder:
    """Tasks that hold `links` together: one transfer, or every member of one collective."""

    tasks: tuple[int, ...]
    links: tuple[Link, ...]


def links_of_schedule(schedule: Schedule, topo: Topology | None) -> list[Holder]:
    """Every transfer and every collective of `schedule` that holds links, with them; collectives in the
    order of their first member. A collective's members are in ring order by task id. Nothing without a
    topology (one chip), and nothing for tasks naming chips the topology lacks (the validator reports them)."""
    if topo is None:
        return []
    in_range = all(t.chip < topo.n_chips and t.out_chip < topo.n_chips for t in schedule.tasks)
    if not in_range:
        return []
    holders = []
    members: dict[int, list] = defaultdict(list)
    for t in schedule.tasks:
        holds = TASK_KINDS[t.kind].holds
        if holds is Holds.LINK:
            holders.append(Holder((t.id,), topo.route(t.chip, t.out_chip).links))
        elif holds is Holds.COLLECTIVE:
            members[t.group].append(t)
    for ts in members.values():
        if ts[0].resource in ALGORITHM_OF:  # a collective on another resource is reported by the validator
            holders.append(Holder(tuple(t.id for t in ts), collective_links(topo, ts[0].resource,
                                                                           [t.chip for t in ts])))
    return [h for h in holders if h.links]
