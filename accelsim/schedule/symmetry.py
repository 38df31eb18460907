"""Replica symmetry: time one data-parallel replica and stamp the others (Plan -> a smaller Plan, and its
schedule -> the whole step's).

Data-parallel replicas run the same tasks on their own chips with the same costs; they meet only in the
gradient all-reduces, whose members start and end together. So a list schedule of replica 0 alone, its
all-reduces kept with their whole group's cost and links, is a schedule of every replica: replica r's
tasks take replica 0's times on chips shifted by r x (chips per replica). Timing d replicas then costs
what timing one does (d = 8 on GPT-2 small: 42K tasks scheduled as 5.3K), and the search (improve.py)
gets d times the budget per replica.

`reduce` refuses (None) wherever the stamped step could differ from a real timing of it: ZeRO (replicas
own different shards), replicas sharing chips, chips of other kinds or other costs per replica, edges
between replicas other than an all-reduce's, and links one replica's transfers share with another's
(a ring whose routes cross a neighbour's chips, one NIC per node shared by several replicas). `stamp`
re-checks the links of the stamped step and refuses too if any overlap, so a caller falls back to
timing the whole plan.
"""
from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, replace

from accelsim.hw.spec import HwSpec
from accelsim.hw.topology import topology_of
from accelsim.schedule.collectives import collective_links
from accelsim.schedule.expand import Plan, TaskSpec
from accelsim.schedule.kinds import TASK_KINDS
from accelsim.schedule.list_sched import MemoryPlanner, Timed
from accelsim.schedule.memory import Block
from accelsim.schedule.plan import COLLECTIVES

Signature = tuple
"""What a task is within its replica: kind, node, micro-batch, stage, part and chips relative to the
replica's first chip. Twins (the same task in two replicas) have equal signatures."""


@dataclass(frozen=True)
class Replicas:
    """A plan cut to replica 0 (`reduced`) and how to stamp its schedule: `twins[i]` are the ids, one per
    replica in replica order, of the whole plan's tasks that are reduced task i; `span` chips per
    replica."""

    plan: Plan
    reduced: Plan
    twins: list[list[int]]
    replicas: int
    span: int


def _signature(t: TaskSpec, base: int) -> Signature:
    part = None if t.part is None else (t.part.split, t.part.index, t.part.parts)
    return (t.kind, t.node, t.op, t.phase, t.microbatch, t.stage, t.chip - base, t.out_chip - base, part)


def _layout(plan: Plan) -> tuple[int, int] | None:
    """(replicas, chips per replica) when replica r's chips are replica 0's shifted by r x span, all
    distinct and of the same kinds; None otherwise."""
    keys = plan.chip_of
    d = 1 + max(r for r, _, _ in keys)
    per = [sorted(c for (r, _, _), c in keys.items() if r == q) for q in range(d)]
    span = len(per[0])
    chips = [c for row in per for c in row]
    if d < 2 or len(set(chips)) != len(chips) or per[0] != list(range(span)):
        return None
    for (r, s, k), c in keys.items():
        if c != keys[(0, s, k)] + r * span or plan.chips[c] is not plan.chips[keys[(0, s, k)]]:
            return None
    return d, span


def reduce(plan: Plan) -> Replicas | None:
    """Replica 0's part of `plan` with its all-reduces spanning every replica, or None where replicas are
    not exact copies of each other (see the module docstring)."""
    layout = _layout(plan)
    if layout is None or plan.shards:
        return None
    d, span = layout
    tasks = plan.tasks
    replica_of = []
    for t in tasks:
        r = t.chip // span
        if not (0 <= t.chip < d * span) or t.out_chip // span != r or t.replica != r:
            return None
        replica_of.append(r)
    by_sig: list[dict[Signature, int]] = [{} for _ in range(d)]
    for t, r in zip(tasks, replica_of):
        sig = _signature(t, r * span)
        if sig in by_sig[r]:
            return None
        by_sig[r][sig] = t.id
    if any(by_sig[r].keys() != by_sig[0].keys() for r in range(1, d)):
        return None
    keep = [t.id for t, r in zip(tasks, replica_of) if r == 0]
    new_id = {old: i for i, old in enumerate(keep)}
    twins = [[by_sig[r][_signature(tasks[old], 0)] for r in range(d)] for old in keep]
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
        across = len({replica_of[m.id] for m in members}) > 1
        if not _same_in_every_replica(tasks, twins[i], twin_of, replica_of, across):
            return None
        deps = sorted({twin_of[x] for x in t.deps})
        after = sorted({twin_of[x] for x in t.after})
        lag = {twin_of[x]: c for x, c in t.lag.items()}
        group = -1
        if t.group >= 0:
            group = min(new_id[m.id] for m in members if m.id in new_id)
        reduced.append(replace(t, id=i, deps=deps, after=after, lag=lag, group=group,
                               span=tuple(m.chip for m in members) if across else ()))
    if any(d_ >= x.id for x in reduced for d_ in x.preds):
        return None  # not a topological order once cut (cannot happen for the planner's plans)
    chip_of = {k: c for k, c in plan.chip_of.items() if k[0] == 0}
    cut = replace(plan, tasks=reduced, chip_of=chip_of)
    return Replicas(plan, cut, twins, d, span)


def _same_in_every_replica(tasks: list[TaskSpec], row: list[int], twin_of: dict[int, int], replica_of: list[int],
                           across: bool) -> bool:
    """Whether the twins in `row` cost the same and wait for twins of the same tasks, each in its own
    replica; an all-reduce member (`across`) waits for every replica's input, so its edges are compared as
    sets of twins."""
    def cost(t: TaskSpec) -> tuple:
        # an all-reduce's members may send different bytes (a tree's root and leaves) in the same time;
        # a collective streams through no memory port, so only its time and output matter here
        return (t.options, t.out_bytes, None if across else t.port_bytes, t.keep, sorted(t.reads), t.flops)

    first = tasks[row[0]]
    want = cost(first)
    edges = ({twin_of[x] for x in first.deps}, {twin_of[x] for x in first.after},
             {twin_of[x]: c for x, c in first.lag.items()})
    for r, old in enumerate(row):
        t = tasks[old]
        if not across and any(replica_of[x] != r for x in t.preds):
            return False
        if cost(t) != want:
            return False
        if ({twin_of[x] for x in t.deps}, {twin_of[x] for x in t.after},
                {twin_of[x]: c for x, c in t.lag.items()}) != edges:
            return False
    return True


def stamp(rep: Replicas, hw: HwSpec, timed: list[Timed], mem: MemoryPlanner) \
        -> tuple[list[Timed], MemoryPlanner] | None:
    """The whole plan's schedule from replica 0's: every twin at its reduced task's time and instance,
    every tensor block copied to the twin chip at the same offset and lifetime. None when two tasks of
    the stamped step would hold one physical link at once (replicas sharing links after all)."""
    plan, d, span = rep.plan, rep.replicas, rep.span
    full: list[Timed | None] = [None] * len(plan.tasks)
    for i, row in enumerate(rep.twins):
        x = timed[i]
        for old in row:
            full[old] = Timed(x.resource, x.instance, x.start, x.end)
    if not _links_free(plan, hw, full):
        return None
    whole = MemoryPlanner(hw, plan)
    for (chip, memory), arena in mem.arenas.items():
        if chip >= span:
            continue
        for block in arena.blocks:
            for r in range(d):
                key = _twin_key(block.key, r, span, rep.twins)
                into = whole.arenas[(chip + r * span, memory)]
                copy = Block(key, block.offset, block.size_bytes, block.start, block.end, seq=len(into.blocks))
                into.blocks.append(copy)
                whole.home[key], whole.where[key] = copy, into.name
    return full, whole  # type: ignore[return-value]


def _twin_key(key: tuple, r: int, span: int, twins: list[list[int]]) -> tuple:
    """A tensor's key in replica r: an output names its twin task, a leaf its replica and chip."""
    if key[0] == "out":
        return ("out", twins[key[1]][r])
    _, node, mb, _replica, chip = key
    return ("leaf", node, mb, r, chip + r * span)


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
        if TASK_KINDS[t.kind].holds == "link":
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
