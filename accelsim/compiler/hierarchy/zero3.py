"""ZeRO stage 3 at stage granularity, measured from a template's task schedule (one micro-batch, one replica,
ZeRO off -> per chunk and pass, the parameter all-gathers it waits for; the update's share of one shard).

The task level (compiler/planning/zero.py) stores each trainable parameter whose update shards as rows parts
over the d replicas, all-gathers its working copy before the nodes of a micro-batch's forward pass read it, and
again before its backward pass does, each gather issued once the tasks one step before the reader's inputs
end (zero.PREFETCH = 1: just ahead of its reader, so the gathered copy is freed soon after), and updates only
its shard. Here each pass of a chunk carries its gathers as (bytes per rank, ready, need): `ready` is how far
into the pass (its busy cycles, as ChunkWork's passes count them) the gather may start, `need` how far until
its first reader starts; 0 ready means as soon as the chip is free for the pass (the reader's inputs come from
another chunk or from the micro-batch). compose.py books them on the replicas' links and holds the pass when a
reader would start before its parameter has arrived.
"""
from __future__ import annotations

from typing import Callable, Iterable

from accelsim.compiler.planning.node_costs import CostTable
from accelsim.compiler.planning.tasks import TaskSpec
from accelsim.compiler.planning.zero import Sharding, sharding
from accelsim.graph.ir import Graph
from accelsim.hw.precision import master_split, tensor_bytes
from accelsim.hw.spec import HwSpec
from accelsim.ops.registry import numel
from accelsim.schedule.split import rows_part

Gather = tuple[int, int, int]
"""(bytes per rank, ready, need): one parameter's all-gather before a pass (module docstring)."""


def zero3_sharding(graph: Graph, replicas: int) -> Sharding:
    """What the task level's ZeRO 3 shards of `graph` over `replicas` (zero.sharding)."""
    return sharding(graph, 3, replicas)


def gathered_bytes(graph: Graph, hw: HwSpec, shards: Sharding) -> dict[int, int]:
    """Trainable parameter -> the bytes of the working copy ZeRO 3 all-gathers (the parameters `shards` stores
    as shards; under mixed precision the working copy only, never the fp32 master)."""
    out = {}
    for i in sorted(shards.params):
        node = graph.nodes[i]
        split = master_split(graph, node, hw)
        out[i] = tensor_bytes(graph, node, hw) if split is None else numel(node.shape) * split[0]
    return out


def pass_gathers(tasks: Iterable[TaskSpec], starts: dict[int, int], ready_at: Callable[[TaskSpec], int],
                 busy_before: Callable[[int], int], params: dict[int, int]) -> tuple[Gather, ...]:
    """The gathers of one pass on one chip (`tasks`: the pass's compute tasks there, `starts`: task id -> start
    cycle), in the order their parameters are first read: each parameter of `params` (id -> bytes) its first
    reader reads, ready once `ready_at(reader)` (a cycle) has passed and needed when the reader starts, both as
    `busy_before` counts the pass's busy cycles before a cycle. Ready never decreases along the order, and is
    at most need (a gather is issued in order, and before its reader)."""
    first: dict[int, TaskSpec] = {}
    for task in sorted(tasks, key=lambda t: (starts[t.id], t.id)):
        for leaf, _ in task.reads:
            if leaf in params and leaf not in first:
                first[leaf] = task
    out: list[Gather] = []
    ready = 0
    for leaf, reader in sorted(first.items(), key=lambda kv: (starts[kv[1].id], kv[0])):
        need = busy_before(starts[reader.id])
        ready = min(need, max(ready, busy_before(ready_at(reader))))
        out.append((params[leaf], ready, need))
    return tuple(out)


def shard_update_share(graph: Graph, costs: CostTable, chip: int, updates: Iterable[TaskSpec],
                       shards: Sharding) -> tuple[int, int]:
    """(cycles of replica 0's rows parts, cycles of the whole nodes) of the update tasks `updates` on `chip`, the
    nodes `shards` cuts as parts over the replicas (the others run whole, as the task level runs them): the
    update of one shard costs the first's share of the second (a part pays a kernel's fixed costs too)."""
    sharded, replicas = shards.updates, shards.parts
    part = whole = 0
    for task in updates:
        cycles = min(c for _, _, c in costs.node(task.node, chip).options)
        whole += cycles
        if task.node in sharded:
            node = graph.nodes[task.node]
            cycles = min(c for _, _, c in costs.part(task.node, chip, rows_part(graph, node, 0, replicas)).costs.options)
        part += cycles
    return part, whole
