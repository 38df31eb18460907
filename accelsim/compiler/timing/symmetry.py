"""Symmetry: time one copy of a step and stamp the others (Plan -> a smaller Plan, and its schedule -> the
whole step's).

Data-parallel replicas run the same tasks on their own chips with the same costs, and so do the
tensor-parallel ranks of a Megatron-style graph (rank k's nodes are rank 0's built on other weight shards,
rank_twins.py); they meet only in collectives (gradient all-reduces across replicas, tensor-parallel
all-reduces across ranks), whose members start and end together. So a list schedule of one copy, replica 0
rank 0, with its collectives kept at their whole group's cost and links, is a schedule of every copy:
copy (r, k) takes copy (0, 0)'s times on its own chips (stage s on chip_of[(r, s, k)]). Timing d x t copies
then costs what timing one does (GPT-2 small, d = 4 and t = 2: 43K tasks scheduled as 5.4K), and the search
(improve.py) gets d x t times the budget per copy.

`reduce` refuses (None) wherever the stamped step could differ from a real timing of it: ZeRO (replicas own
different shards), copies sharing chips, chips of other kinds or other costs per copy, edges between copies
other than a collective's, and ranks that are not copies of each other (then only replicas are copies).
`stamp` checks the physical links of the stamped step and refuses if two tasks would hold one at once (a
ring whose routes cross a neighbour's chips, one NIC per node shared by several copies), so a caller falls
back to timing the whole plan.
"""
from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, replace

from accelsim.hw.spec import HwSpec
from accelsim.hw.topology import topology_of
from accelsim.schedule.collectives import collective_links
from accelsim.compiler.planning.tasks import Plan, TaskSpec
from accelsim.schedule.kinds import TASK_KINDS, Holds
from accelsim.compiler.timing.list_sched import Timed
from accelsim.compiler.timing.memory_planner import MemoryPlanner
from accelsim.compiler.timing.memory import Block
from accelsim.schedule.plan import COLLECTIVES

Signature = tuple
"""What a task is within its copy: kind, its node's rank-0 twin, micro-batch, stage, part and its chips'
places in the copy. Twins (the same task in two copies) have equal signatures."""


@dataclass(frozen=True)
class Copies:
    """How the whole plan's chips split into copies: `chips[u]` are copy u's chips in local order (copy 0
    first), `rank[u]` the tensor-parallel rank whose nodes copy u computes (-1: copies are whole replicas)
    and `replica[u]` its replica."""

    chips: list[list[int]]
    rank: list[int]
    replica: list[int]

    def locate(self) -> dict[int, tuple[int, int]]:
        """chip -> (copy, place in the copy)."""
        return {c: (u, i) for u, row in enumerate(self.chips) for i, c in enumerate(row)}


@dataclass(frozen=True)
class Replicas:
    """A plan cut to copy 0 (`reduced`) and how to stamp its schedule: `twins[i]` are the ids, one per copy in
    copy order, of the whole plan's tasks that are reduced task i."""

    plan: Plan
    reduced: Plan
    twins: list[list[int]]
    copies: Copies

    @property
    def count(self) -> int:
        return len(self.copies.chips)


def _copies(plan: Plan) -> Copies | None:
    """The copies of `plan`: (replica, rank) pairs when the ranks are copies of rank 0 (plan.rank_twins),
    else replicas; None for one copy, or copies sharing chips or of other chip kinds than copy 0."""
    keys = plan.chip_of
    d = 1 + max(r for r, _, _ in keys)
    p = 1 + max(s for _, s, _ in keys)
    t = 1 + max(k for _, _, k in keys)
    by_rank = bool(plan.rank_twins) and len(plan.rank_twins) == t
    if by_rank:
        units = [(r, k) for r in range(d) for k in range(t)]
        chips = [[keys[(r, s, k)] for s in range(p)] for r, k in units]
        copies = Copies(chips, [k for _, k in units], [r for r, _ in units])
    else:
        chips = [[keys[(r, s, k)] for s in range(p) for k in range(t)] for r in range(d)]
        copies = Copies(chips, [-1] * d, list(range(d)))
    flat = [c for row in chips for c in row]
    if len(chips) < 2 or len(set(flat)) != len(flat):
        return None
    if any(plan.chips[c] is not plan.chips[c0] for row in chips for c, c0 in zip(row, chips[0])):
        return None
    return copies


def _node_twin(plan: Plan, rank: int, node: int) -> int:
    """Copy 0's node for `node` computed by a copy of `rank` (-1: replicas, the same node)."""
    return plan.rank_twins[rank].get(node, node) if rank >= 0 else node


def _signature(plan: Plan, t: TaskSpec, rank: int, place: dict[int, tuple[int, int]]) -> Signature:
    part = None if t.part is None else (t.part.split, t.part.index, t.part.parts)
    return (t.kind, _node_twin(plan, rank, t.node), t.op, t.phase, t.microbatch, t.stage, place[t.chip][1],
            place[t.out_chip][1], part)


def reduce(plan: Plan) -> Replicas | None:
    """Copy 0's part of `plan` with its collectives spanning every copy, or None where copies are not exact
    copies of each other (see the module docstring)."""
    copies = _copies(plan)
    if copies is None or plan.shards:
        return None
    place = copies.locate()
    tasks = plan.tasks
    copy_of = []
    for t in tasks:
        if t.chip not in place or t.out_chip not in place:
            return None
        u = place[t.chip][0]
        if place[t.out_chip][0] != u or t.replica != copies.replica[u]:
            return None
        copy_of.append(u)
    n = len(copies.chips)
    by_sig: list[dict[Signature, int]] = [{} for _ in range(n)]
    for t, u in zip(tasks, copy_of):
        sig = _signature(plan, t, copies.rank[u], place)
        if sig in by_sig[u]:
            return None
        by_sig[u][sig] = t.id
    if any(by_sig[u].keys() != by_sig[0].keys() for u in range(1, n)):
        return None
    keep = [t.id for t, u in zip(tasks, copy_of) if u == 0]
    new_id = {old: i for i, old in enumerate(keep)}
    twins = [[by_sig[u][_signature(plan, tasks[old], copies.rank[0], place)] for u in range(n)] for old in keep]
    twin_of = {}  # whole-plan id -> reduced id
    for i, row in enumerate(twins):
        for old in row:
            twin_of[old] = i
    groups: dict[int, list[TaskSpec]] = defaultdict(list)
    for t in tasks:
        if t.group >= 0:
            groups[t.group].append(t)
    reduced = []
    for i, old in enumerate(keep):
        t = tasks[old]
        members = groups.get(t.group, [t])
        across = len({copy_of[m.id] for m in members}) > 1
        if not _same_in_every_copy(plan, copies, twins[i], twin_of, copy_of, across):
            return None
        group = min(new_id[m.id] for m in members if m.id in new_id) if t.group >= 0 else -1
        reduced.append(replace(t, id=i, deps=sorted({twin_of[x] for x in t.deps}),
                               after=sorted({twin_of[x] for x in t.after}),
                               lag={twin_of[x]: c for x, c in t.lag.items()}, group=group,
                               span=tuple(m.chip for m in members) if across else ()))
    if any(d >= x.id for x in reduced for d in x.preds):
        return None  # not a topological order once cut (cannot happen for the planner's plans)
    cut = replace(plan, tasks=reduced, chip_of={k: c for k, c in plan.chip_of.items() if c in copies.chips[0]})
    return Replicas(plan, cut, twins, copies)


def _same_in_every_copy(plan: Plan, copies: Copies, row: list[int], twin_of: dict[int, int], copy_of: list[int],
                        across: bool) -> bool:
    """Whether the twins in `row` cost the same, read the same leaves (as rank 0 names them) and wait for twins
    of the same tasks, each reading only its own copy's outputs; a collective's member (`across`) waits for
    every copy's input, and an ordering edge (the in-flight window: a micro-batch waits for the end of an
    earlier one on every rank of its replica) may reach the replica's other copies, whose twins end at the
    same times; so edges are compared as sets of twins."""
    def cost(t: TaskSpec, u: int) -> tuple:
        # a collective's members may send different bytes (a tree's root and leaves) in the same time;
        # a collective streams through no memory port, so only its time and output matter here
        reads = sorted((_node_twin(plan, copies.rank[u], node), mb) for node, mb in t.reads)
        return (t.options, t.out_bytes, None if across else t.port_bytes, t.keep, reads, t.flops)

    def edges(t: TaskSpec) -> tuple:
        return ({twin_of[x] for x in t.deps}, {twin_of[x] for x in t.after},
                {twin_of[x]: c for x, c in t.lag.items()})

    first = plan.tasks[row[0]]
    want, wait = cost(first, 0), edges(first)
    for u, old in enumerate(row):
        t = plan.tasks[old]
        if not across and any(copy_of[x] != u for x in t.deps):
            return False
        if any(copies.replica[copy_of[x]] != copies.replica[u] for x in t.after):
            return False
        if cost(t, u) != want or edges(t) != wait:
            return False
    return True


def stamp(rep: Replicas, hw: HwSpec, timed: list[Timed], mem: MemoryPlanner) \
        -> tuple[list[Timed], MemoryPlanner] | None:
    """The whole plan's schedule from copy 0's: every twin at its reduced task's time and instance, every
    tensor block copied to the twin chip at the same offset and lifetime. None when two tasks of the stamped
    step would hold one physical link at once (copies sharing links after all)."""
    plan, copies = rep.plan, rep.copies
    full: list[Timed | None] = [None] * len(plan.tasks)
    for i, row in enumerate(rep.twins):
        x = timed[i]
        for old in row:
            full[old] = Timed(x.resource, x.instance, x.start, x.end)
    if not _links_free(plan, hw, full):
        return None
    place = copies.locate()
    leaf_of = [{v: k for k, v in plan.rank_twins[r].items()} if r >= 0 else {} for r in copies.rank]
    whole = MemoryPlanner(hw, plan)
    for (chip, memory), arena in mem.arenas.items():
        if chip not in place or place[chip][0] != 0:
            continue
        local = place[chip][1]
        for block in arena.blocks:
            for u in range(rep.count):
                key = _twin_key(block.key, u, copies, local, rep.twins, leaf_of)
                into = whole.arenas[(copies.chips[u][local], memory)]
                copy = Block(key, block.offset, block.size_bytes, block.start, block.end, seq=len(into.blocks))
                into.blocks.append(copy)
                whole.home[key], whole.where[key] = copy, into.name
    return full, whole  # type: ignore[return-value]


def _twin_key(key: tuple, u: int, copies: Copies, local: int, twins: list[list[int]],
              leaf_of: list[dict[int, int]]) -> tuple:
    """A tensor's key in copy u: an output names its twin task, a leaf its rank's node, replica and chip."""
    if key[0] == "out":
        return ("out", twins[key[1]][u])
    _, node, mb, _replica, _chip = key
    return ("leaf", leaf_of[u].get(node, node), mb, copies.replica[u], copies.chips[u][local])


def _links_free(plan: Plan, hw: HwSpec, timed: list[Timed]) -> bool:
    """Whether no physical link is held by two tasks at once in the stamped step (list_sched's rule)."""
    topo = topology_of(hw)
    if topo is None:
        return True
    held: dict[object, list[tuple[int, int]]] = defaultdict(list)
    groups: dict[int, list[TaskSpec]] = defaultdict(list)
    for t in plan.tasks:
        if t.group >= 0:
            groups[t.group].append(t)
    for t in plan.tasks:
        if TASK_KINDS[t.kind].holds is Holds.LINK:
            links = topo.route(t.chip, t.out_chip).links
        elif t.group >= 0 and groups[t.group][0] is t and t.options[0][0] in COLLECTIVES:
            links = collective_links(topo, t.options[0][0], [m.chip for m in groups[t.group]])
        else:
            continue
        for link in links:
            held[link].append((timed[t.id].start, timed[t.id].end))
    for spans in held.values():
        spans.sort()
        if any(b[0] < a[1] for a, b in zip(spans, spans[1:])):
            return False
    return True
