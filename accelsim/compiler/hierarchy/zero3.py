"""ZeRO stage 3 at stage granularity, measured from a template's task schedule (one micro-batch, one replica,
ZeRO off -> per chunk and pass, the parameter all-gathers it waits for; the update's share of one shard).

The task level (compiler/planning/zero.py) stores each trainable parameter whose update shards as rows parts
over the d replicas, all-gathers its working copy before the nodes of a micro-batch's forward pass read it, and
again before its backward pass does, each gather issued once the tasks one step before the reader's inputs
end (zero.PREFETCH = 1: just ahead of its reader, so the gathered copy is freed soon after), and updates only
its shard. Here each pass of a chunk carries its gathers as (bytes per rank, ready, need, slack, source): `ready`
is how far into the pass (its busy cycles, as ChunkWork's passes count them) the gather may start (0: as the
chip frees for the pass; -1: once it starts the item before), `need` how far until its first reader starts,
`slack` how much of the pass's later work needs neither the parameter nor anything computed from it, `source`
-1, or the chunk whose gathered copy it is sent (pass_gathers). compose.py books them on the replicas' links
(or, from a source chunk, the link between the two stages) and holds the pass when a reader would start, and
the slack has run out, before its parameter has arrived.
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

Gather = tuple[int, int, int, int, int]
"""(bytes per rank, ready, need, slack, source): one parameter's all-gather before a pass (module docstring,
pass_gathers)."""


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


def pass_gathers(tasks: list[TaskSpec], spans: dict[int, tuple[int, int]], ready_at: Callable[[TaskSpec], int | None],
                 busy_before: Callable[[int], int], busy: Callable[[list[tuple[int, int]]], int],
                 params: dict[int, int], sources: dict[int, int], no_slack: frozenset[int] = frozenset()
                 ) -> tuple[Gather, ...]:
    """The gathers of one pass on one chip (`tasks`: the pass's compute tasks there, `spans`: task id -> (start,
    end) cycles), in the order their parameters are first read, for each parameter of `params` (id -> bytes)
    the pass reads (module docstring's Gather):
    - need: the pass's busy cycles (`busy_before` a cycle) before its first reader starts;
    - ready: as many cycles before need as the task level issues the gather ahead of that reader
      (`ready_at(reader)`, a cycle; a gather whose reader's inputs come from an earlier pass, such as the LM
      head's backward reading the vocabulary matrix, is ready at 0, issued as the chip frees for the pass);
      -1 where the reader's inputs are the micro-batch's own (`ready_at` None): the task level issues it as
      soon as the links allow, so here once the chip starts the item before. Never decreasing, at most need;
    - slack: the busy cycles (`busy`: of (start, end) intervals) of the pass's work from the first reader's
      start on that reads neither the parameter nor any value computed from it (a layer's weight gradient
      beside the input gradient that waits for the next layer's weight): a list scheduler runs it while the
      reader waits; but no node of `no_slack` (a weight gradient sent to another stage's update, such as the
      LM head's part of the tied matrix's: off the critical path, the task level runs it after the chain);
    - source: -1, or for a parameter that another chunk reads first in the same pass (`sources`: parameter ->
      that chunk; gpt2's tied vocabulary matrix, read by the embedding, then by the LM head), that chunk: the
      task level gathers it once per micro-batch and pass, on the first reader's chip, and sends the copy on.
    """
    children: dict[int, list[int]] = {}
    mine = {t.id for t in tasks}
    for task in tasks:
        for d in task.deps:
            if d in mine:
                children.setdefault(d, []).append(task.id)
    readers: dict[int, list[TaskSpec]] = {}
    for task in sorted(tasks, key=lambda t: (spans[t.id][0], t.id)):
        for leaf, _ in task.reads:
            if leaf in params and task not in readers.get(leaf, ()):
                readers.setdefault(leaf, []).append(task)
    out: list[Gather] = []
    ready = -1
    for leaf, reading in sorted(readers.items(), key=lambda kv: (spans[kv[1][0].id][0], kv[0])):
        first = reading[0]
        at = spans[first.id][0]
        need = busy_before(at)
        issued = ready_at(first)
        ready = min(need, max(ready, -1 if issued is None else max(0, need - max(0, at - issued))))
        after = set()
        todo = [t.id for t in reading]
        while todo:
            x = todo.pop()
            if x not in after:
                after.add(x)
                todo.extend(children.get(x, ()))
        slack = busy([spans[t.id] for t in tasks
                      if t.id not in after and spans[t.id][0] >= at and t.node not in no_slack])
        out.append((params[leaf], ready, need, slack, sources.get(leaf, -1)))
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
            part_costs = costs.part(task.node, chip, rows_part(graph, node, 0, replicas)).costs
            cycles = min(c for _, _, c in part_costs.options)
        part += cycles
    return part, whole


def first_readers(tasks: Iterable[TaskSpec], chunk_of_chip: dict[int, int], params: dict[int, int]
                  ) -> dict[str, dict[int, int]]:
    """Pass ("forward", "backward") -> parameter -> the chunk that reads it first in that pass: the lowest in the
    forward pass, the highest in the backward pass (which visits the chunks in reverse)."""
    out: dict[str, dict[int, int]] = {"forward": {}, "backward": {}}
    for task in tasks:
        if task.phase not in out:
            continue
        chunk, firsts = chunk_of_chip[task.chip], out[task.phase]
        for leaf, _ in task.reads:
            if leaf in params:
                known = firsts.get(leaf)
                if known is None or (chunk < known if task.phase == "forward" else chunk > known):
                    firsts[leaf] = chunk
    return out
