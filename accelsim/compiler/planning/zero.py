"""ZeRO (Rajbhandari et al., SC'20) in the planner: what a stage shards over the data-parallel replicas
and the reduce-scatters and all-gathers that move the shards (Graph, stage, replicas -> Sharding; the
ZeroSteps hooks that expand.Planner calls).

Every shard is a rows part (split.rows_part): replica r owns rows part r of d of each sharded value, as
DeepSpeed gives rank r the r-th slice of every flat buffer. The optimizer's update is elementwise, so
replica r computes rows part r of every update node from rows part r of its inputs (no replica computes
what another does). By stage:
  1 (P_os)      optimizer state (the leaves only the update reads) stored as shards, and under mixed
                precision each trainable parameter's fp32 master too (ZeRO's K = 12 counts it): replica r
                holds the whole low-precision working copy and rows part r of the master. Each replica
                accumulates its full gradients and, once all are computed (DeepSpeed's reduction at the
                accumulation boundary), reduce-scatters them: the same bytes as the all-reduce's
                reduce-scatter half, and all it needs for its part of the update. The updated parameter
                parts are then all-gathered (the all-reduce's other half), so every replica holds the
                whole new parameter (its working copy only: the new master parts stay where they were
                computed, as DeepSpeed all-gathers the fp16 parameters).
  2 (P_os+g)    as 1, but each micro-batch's gradient is reduce-scattered as soon as every replica has it
                (DeepSpeed's reduction during backward) and the shards accumulated, so only 1/d of the
                gradient outlives its reduction.
  3 (P_os+g+p)  as 2, and trainable parameters stored as shards: before the nodes of a micro-batch's
                forward (and again its backward) read a parameter, it is all-gathered from the shards
                (once the reader's other inputs are computed, so it is freed soon after), and the update
                writes only the shard: no all-gather after it. An all-gather of a parameter moves its
                working copy only, never the master.
A parameter whose update cannot be cut this way (fewer rows than replicas, a non-elementwise update, an
update reading a forward value) is left unsharded: all-reduced and updated whole, as without ZeRO.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from accelsim.compiler.planning.tasks import PlannerView, TaskSpec
from accelsim.errors import ScheduleError
from accelsim.graph.ir import Graph, Node
from accelsim.hw.precision import master_split, tensor_elem_bytes
from accelsim.ops.registry import numel
from accelsim.schedule.collectives import CollectiveCost, collective_cost
from accelsim.schedule.plan import PER_STEP
from accelsim.schedule.split import computes_rows, rows_part, rows_shape, rows_split


PREFETCH = 1
"""Stage 3: a parameter's all-gather starts once the tasks this many steps before its reader's inputs
end (0: when the reader's inputs are ready), so gathering overlaps the layer before (DeepSpeed's
prefetch) while few gathered parameters are live at once."""


@dataclass(frozen=True)
class Sharding:
    """What a ZeRO stage shards over `parts` replicas (node ids; each set empty below its stage)."""

    stage: int
    parts: int
    updates: frozenset[int]  # update nodes computed as rows parts, part r on replica r
    gradients: frozenset[int]  # gradients reduce-scattered instead of all-reduced
    leaves: frozenset[int]  # leaves stored as shards: optimizer state, and at stage 3 trainable parameters
    gathered: tuple[int, ...]  # stages 1-2: updated parameters (`<param>.new`) all-gathered after the update
    params: frozenset[int]  # stage 3: trainable parameters all-gathered before forward and backward read them
    masters: frozenset[int] = frozenset()  # stages 1-2: trainable parameters whose update is sharded (their
    # fp32 master, where the step's precision keeps one, is stored as shards beside the whole working copy)


def _components(graph: Graph) -> list[list[int]]:
    """The update's connected pieces (non-leaf update nodes joined by the values they pass), each one
    parameter's update in a training graph; ascending ids, ordered by their first node."""
    parent = {n.id: n.id for n in graph.nodes if n.phase == "update" and not n.is_leaf}

    def root(x: int) -> int:
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    for n in graph.nodes:
        if n.id in parent:
            for i in n.inputs:
                if i in parent:
                    parent[root(i)] = root(n.id)
    pieces: dict[int, list[int]] = {}
    for node_id in sorted(parent):
        pieces.setdefault(root(node_id), []).append(node_id)
    return sorted(pieces.values())


def _shardable(graph: Graph, piece: list[int], consumers: list[list[int]], grads: set[int], parts: int) -> bool:
    """Whether every node of an update piece can compute rows part r from rows part r of its inputs: all
    elementwise of one shape with at least `parts` rows, reading only each other, parameters and
    gradients of that shape, and constants; nothing outside the piece reads them."""
    members = set(piece)
    shape = graph.nodes[piece[0]].shape
    if not shape or shape[0] < parts:
        return False
    for node_id in piece:
        n = graph.nodes[node_id]
        if n.shape != shape or not computes_rows(graph, n) or any(c not in members for c in consumers[node_id]):
            return False
        for i, axis in zip(n.inputs, rows_split(graph, n).in_axes):
            src = graph.nodes[i]
            if i in members or (src.is_leaf and src.op != "param"):
                continue  # the piece's own values, or a constant read whole or cut
            if (src.op != "param" and i not in grads) or src.shape != shape or axis != 0:
                return False
            if any(c not in members and (graph.nodes[c].phase == "update" or src.op == "param" and not src.trainable)
                   for c in consumers[i]):
                return False  # read whole elsewhere: by another piece of the update, or optimizer state by the model
    return True


def sharding(graph: Graph, stage: int, parts: int) -> Sharding:
    """What ZeRO `stage` shards of training graph `graph` over `parts` replicas (see the module docstring)."""
    consumers = graph.consumers()
    grads = set(graph.gradient_nodes())
    new_of = {v: k[:-len(".new")] for k, v in graph.outputs.items() if k.endswith(".new")}
    updates: set[int] = set()
    gradients: set[int] = set()
    states: set[int] = set()
    params: set[int] = set()
    gathered: list[int] = []
    if stage >= 1 and parts > 1:
        for piece in _components(graph):
            if not _shardable(graph, piece, consumers, grads, parts):
                continue
            updates.update(piece)
            read = {i for node_id in piece for i in graph.nodes[node_id].inputs}
            gradients.update(read & grads)
            states.update(i for i in read if graph.nodes[i].op == "param" and not graph.nodes[i].trainable)
            trained = {i for i in read if graph.nodes[i].trainable}
            params.update(trained)
            gathered += [node_id for node_id in piece if new_of.get(node_id) in {graph.nodes[p].name for p in trained}]
    if stage < 3:
        return Sharding(stage, parts, frozenset(updates), frozenset(gradients), frozenset(states),
                        tuple(sorted(gathered)), frozenset(), frozenset(params))
    return Sharding(stage, parts, frozenset(updates), frozenset(gradients), frozenset(states | params), (),
                    frozenset(params))


@dataclass
class ZeroSteps:
    """The ZeRO side of one expansion, called from expand.Planner's hooks: its state is the planner, what
    is sharded, and the parameter all-gathers made so far (stage 3) keyed (param, micro-batch, phase, rank)."""

    planner: PlannerView
    sharding: Sharding
    gathers: dict[tuple[int, int, str, int], list[int]] = field(default_factory=dict)
    # (replica, rank) -> the tasks holding its reduced gradient shards: its optimizer step waits for all
    reduced: dict[tuple[int, int], list[int]] = field(default_factory=dict)

    @classmethod
    def of(cls, planner: PlannerView) -> ZeroSteps | None:
        """The hooks for the planner's options; None without ZeRO or with one replica (a shard of 1 is the
        whole: zero=Z with data_parallel=1 plans exactly as zero=0)."""
        o = planner.options
        if not o.zero or o.data_parallel == 1:
            return None
        _own_chips(planner)
        return cls(planner, sharding(planner.graph, o.zero, o.data_parallel))

    @property
    def parts(self) -> int:
        return self.sharding.parts

    def part_bytes(self, node: Node, index: int) -> int:
        elem = tensor_elem_bytes(self.planner.graph, node, self.planner.hw)
        return numel(rows_shape(node.shape, index, self.parts)) * elem

    def leaf_shards(self) -> dict[int, tuple[int, ...]]:
        """Leaf node -> the bytes of each replica's shard (Plan.shards)."""
        nodes = self.planner.graph.nodes
        return {i: tuple(self.part_bytes(nodes[i], r) for r in range(self.parts)) for i in sorted(self.sharding.leaves)}

    def master_shards(self) -> dict[int, tuple[int, ...]]:
        """Stages 1-2 under mixed precision: trainable parameter -> the bytes each replica holds of it, the
        whole working copy and rows part r of the fp32 master (Plan.masters); {} where no master is kept."""
        p = self.planner
        out = {}
        for i in sorted(self.sharding.masters):
            node = p.graph.nodes[i]
            split = master_split(p.graph, node, p.hw)
            if split is not None:
                working, master = split
                out[i] = tuple(numel(node.shape) * working + numel(rows_shape(node.shape, r, self.parts)) * master
                               for r in range(self.parts))
        return out

    def gathered_bytes(self, node: Node) -> int:
        """Bytes of an all-gathered parameter: its working copy alone where it holds a master beside it."""
        split = master_split(self.planner.graph, node, self.planner.hw)
        return self.planner.nbytes(node) if split is None else numel(node.shape) * split[0]

    def cost(self, kind: str, chips: list[int], nbytes: int) -> CollectiveCost:
        """A reduce-scatter or all-gather of a whole tensor of `nbytes` over `chips`: what
        collectives.collective_cost prices on the hardware's links (a ring: (d-1)/d of the bytes sent by
        each member, d-1 link latencies on one network)."""
        p = self.planner
        return collective_cost(p.topology, kind, chips, nbytes, p.collective_algorithm)

    def members(self, kind: str, node: Node, chips: list[int], phase: str, microbatch: int, stage: int, *,
                deps: list[int], reads: list[tuple[int, int]] | None = None, after: list[int] | None = None,
                keep: bool = False) -> list[int]:
        """One collective of `kind` over `node`'s whole value: member r on chips[r] for replica r, all in one
        group waiting for the same tasks (the list scheduler starts a group once its first member is
        ready); a reduce-scatter member holds rows part r, an all-gather member the whole value."""
        p = self.planner
        whole = self.gathered_bytes(node) if kind == "all_gather" else p.nbytes(node)
        cost = self.cost(kind, chips, whole)
        group = len(p.tasks)
        ids = []
        for r, chip in enumerate(chips):
            scatter = kind == "reduce_scatter"
            t = p.new(kind=kind, node=node.id, op=kind, phase=phase, microbatch=microbatch, replica=r, stage=stage,
                      chip=chip, out_chip=chip, deps=list(deps), reads=list(reads or []),
                      options=((cost.resource, 1, max(1, cost.cycles)),),
                      out_bytes=self.part_bytes(node, r) if scatter else whole, port_bytes=cost.sent_bytes[r],
                      group=group, energy_pj=p.link_energy_pj(cost.sent_bytes[r]), keep=keep,
                      after=list(after or []),
                      part=rows_part(p.graph, node, r, self.parts) if scatter else None)
            ids.append(t.id)
        return ids

    # ---- forward and backward -----------------------------------------------------------------

    def micro_batches(self, window: int) -> bool:
        """Stage 3: forward and backward of every micro-batch, node by node across the replicas (so a
        parameter's all-gather can wait for every replica's reader inputs), with Planner.micro_batches'
        window. Returns False (nothing done) below stage 3."""
        p = self.planner
        if not self.sharding.params:
            return False
        d = self.parts
        sinks: dict[tuple[int, int], list[int]] = {}
        for mb in range(p.options.microbatches):
            first = len(p.tasks)
            for n in p.compute:
                if n.phase != "update":
                    for r in range(d):
                        p.node_task(n, mb, r)
            new = p.tasks[first:]
            if mb >= window:
                for t in new:
                    if not t.preds:
                        t.after = list(sinks[(t.replica, mb - window)])
            has_succ = {x for t in new for x in t.preds}
            for r in range(d):
                sinks[(r, mb)] = [t.id for t in new if t.id not in has_succ and t.microbatch == mb and t.replica == r]
        return True

    def node_task(self, n: Node, mb: int, replica: int) -> list[TaskSpec] | None:
        """Node `n`'s tasks when ZeRO changes them: a sharded update node's rows part, or (stage 3) a
        reader of sharded parameters reading their all-gathered copies. None: plan it as usual."""
        if n.id in self.sharding.updates:
            return [self.update_part(n, replica, rank) for rank in self.planner.ranks_of(n)]
        params = [i for i in dict.fromkeys(n.inputs) if i in self.sharding.params]
        if not params or n.phase == "update":
            return None
        p = self.planner
        tasks: list[TaskSpec] = []
        for rank in p.ranks_of(n):
            chip = p.chip_of[(replica, p.stage[n.id], rank)]
            local = {p.on_chip(self.gathered(i, n, mb, rank)[replica], chip) for i in params}
            for t in p.rank_task(n, mb, replica, rank, gathered=frozenset(params)):
                t.deps = sorted(set(t.deps) | local)
                tasks.append(t)
        return tasks

    def gathered(self, param: int, reader: Node, mb: int, rank: int) -> list[int]:
        """The all-gather of `param` that `reader`'s phase of micro-batch `mb` reads on `rank`, one member per
        replica (made at its first reader: each member reads its replica's shard on the reader's chip and
        waits for the reader's other inputs there)."""
        key = (param, mb, reader.phase, rank)
        if key not in self.gathers:
            p, g = self.planner, self.planner.graph
            chips = [p.chip_of[(r, p.stage[reader.id], rank)] for r in range(self.parts)]
            after = {t for i in reader.inputs if not g.nodes[i].is_leaf for r in range(self.parts)
                     for t in p.value(i, p.source_mb(g.nodes[i], mb), r, rank)}
            for _ in range(PREFETCH):
                after = {x for t in after for x in p.tasks[t].preds} or after
            after = sorted(after)
            self.gathers[key] = self.members("all_gather", g.nodes[param], chips, reader.phase, mb,
                                             p.stage[reader.id], deps=[], reads=[(param, PER_STEP)], after=after)
        return self.gathers[key]

    # ---- gradients and update -----------------------------------------------------------------

    def reduce_gradients(self) -> set[int]:
        """Reduce-scatter the sharded gradients (stage 1 at the boundary, stages 2-3 per micro-batch with
        the shards accumulated); producer[(g, PER_STEP, r, rank)] becomes replica r's reduced shard.
        Returns the gradients done, which the planner then leaves alone."""
        p, d = self.planner, self.parts
        done = {g for g in p.grad_nodes if g in self.sharding.gradients}
        boundary: list[tuple[Node, int, list[int]]] = []
        for g in sorted(done):
            gn = p.graph.nodes[g]
            for rank in p.ranks_of(gn):
                if self.sharding.stage == 1:
                    boundary.append((gn, rank, [p.accumulate(g, r, rank) for r in range(d)]))
                    continue
                last: list[int] = []
                for mb in range(p.options.microbatches):
                    sources = [p.only(g, mb, r, rank) for r in range(d)]
                    chips = [p.tasks[s].out_chip for s in sources]
                    shards = self.members("reduce_scatter", gn, chips, "backward", mb, p.stage[g], deps=sorted(sources))
                    last = shards if not last else [self.accumulate(gn, mb, r, last[r], shards[r]) for r in range(d)]
                for r in range(d):
                    p.producer[(g, PER_STEP, r, rank)] = [last[r]]
                    self.reduced.setdefault((r, rank), []).append(last[r])
        finals = sorted({x for _, _, own in boundary for x in own})
        for gn, rank, own in boundary:
            chips = [p.tasks[s].out_chip for s in own]
            after = [x for x in finals if x not in own]
            shards = self.members("reduce_scatter", gn, chips, "backward", PER_STEP, p.stage[gn.id],
                                  deps=sorted(own), after=after)
            for r in range(d):
                p.producer[(gn.id, PER_STEP, r, rank)] = [shards[r]]
                self.reduced.setdefault((r, rank), []).append(shards[r])
        return done

    def accumulate(self, gn: Node, mb: int, replica: int, last: int, new: int) -> int:
        """Add micro-batch `mb`'s reduced shard of gradient `gn` to the running sum of the earlier ones."""
        p = self.planner
        chip = p.tasks[last].out_chip
        nbytes = self.part_bytes(gn, replica)
        costs = p.costs.add(rows_shape(gn.shape, replica, self.parts), gn.dtype, chip)
        return p.new(kind="accumulate", node=gn.id, op="accumulate", phase="backward", microbatch=mb, replica=replica,
                     stage=p.stage[gn.id], chip=chip, out_chip=chip, deps=[last, new], options=costs.options,
                     out_bytes=nbytes, port_bytes=3 * nbytes, energy_pj=costs.energy_pj or 0.0, flops=costs.flops,
                     part=rows_part(p.graph, gn, replica, self.parts)).id

    def update_part(self, n: Node, replica: int, rank: int) -> TaskSpec:
        """Replica `replica`'s rows part of update node `n` on `rank`: it reads rows part `replica` of the
        other update nodes and of the reduced gradient, the shards of sharded leaves, and other leaves whole
        (slicing what it cuts). A result is kept unless it is all-gathered after the update. A node reading
        a gradient waits for every gradient shard of its replica: the optimizer step follows the whole
        reduction (as optimizer.step() follows backward), so the shards are all held at once, as ZeRO counts.
        A new parameter's part that holds a master is kept even where it is all-gathered: its master part is
        the next step's master shard."""
        p = self.planner
        chip = p.chip_of[(replica, p.stage[n.id], rank)]
        deps, reads = [], []
        for i in n.inputs:
            src = p.graph.nodes[i]
            if src.is_leaf:
                reads.append((i, PER_STEP))
            else:
                deps += [p.on_chip(x, chip) for x in p.value(i, p.source_mb(src, PER_STEP), replica, rank)]
        part = rows_part(p.graph, n, replica, self.parts)
        after = []
        if any(i in self.sharding.gradients for i in n.inputs):
            after = sorted(set(self.reduced.get((replica, rank), ())) - set(deps))
        costs = p.costs.part(n.id, chip, part)
        t = p.new(kind="node", node=n.id, op=n.op, phase=n.phase, microbatch=PER_STEP, replica=replica,
                  stage=p.stage[n.id], chip=chip, out_chip=chip, deps=sorted(set(deps)), reads=reads,
                  options=costs.costs.options, out_bytes=costs.out_bytes, port_bytes=costs.costs.port_bytes,
                  energy_pj=costs.costs.energy_pj or 0.0, flops=costs.costs.flops, part=part,
                  keep=n.id in p.results and (n.id not in self.sharding.gathered
                                              or master_split(p.graph, n, p.hw) is not None), after=after)
        p.producer[(n.id, PER_STEP, replica, rank)] = [t.id]
        return t

    def gather_updates(self) -> None:
        """Stages 1-2: all-gather each updated parameter from its parts, so every replica holds it whole."""
        p, d = self.planner, self.parts
        for q in self.sharding.gathered:
            qn = p.graph.nodes[q]
            for rank in p.ranks_of(qn):
                parts = [p.only(q, PER_STEP, r, rank) for r in range(d)]
                chips = [p.tasks[x].out_chip for x in parts]
                whole = self.members("all_gather", qn, chips, "update", PER_STEP, p.stage[q], deps=sorted(parts),
                                     keep=True)
                for r in range(d):
                    p.producer[(q, PER_STEP, r, rank)] = [whole[r]]


def _own_chips(planner: PlannerView) -> None:
    """ZeRO shards memory across replicas, so each replica of a stage and rank needs its own chip."""
    o = planner.options
    for (r, s, k), chip in sorted(planner.chip_of.items()):
        other = next((q for q in range(r) if planner.chip_of[(q, s, k)] == chip), None)
        if other is not None:
            raise ScheduleError(f"zero={o.zero} shards over the data-parallel replicas' chips, but data_parallel="
                                f"{o.data_parallel} on {len(planner.chips)} chip(s) puts replicas {other} and {r} on "
                                f"chip{chip}; use data_parallel <= {len(planner.chips) // max(1, o.pipeline_stages * o.tensor_parallel)} "
                                "or zero=0")
