"""Expand a graph into the task DAG a step executes: node tasks per (micro-batch, replica), gradient
accumulation over micro-batches, all-reduce over replicas, transfers between chips, with every
task's candidate resources and their costs (Graph, HwSpec, options -> Plan). The costs come from
node_costs.py, the chips from chip_map.py, the bytes each tensor is stored as and the prefetches and
write-backs of streamed classes from prefetch.py, ZeRO's tasks from zero.py, the step sums of tied
gradients from step_sums.py; fused tiles are ordered afterwards (tile_order.py)."""
from __future__ import annotations

from accelsim.compiler.planning.chip_map import chip_map
from accelsim.compiler.planning.gradient_reduction import order_gradient_reduction
from accelsim.compiler.planning.node_costs import CostTable
from accelsim.compiler.planning.prefetch import Prefetcher, streaming
from accelsim.compiler.planning.stages import partition
from accelsim.compiler.planning.step_sums import StepSums
from accelsim.compiler.planning.tasks import Plan, TaskSpec
from accelsim.compiler.planning.tile_order import order_fused_tiles
from accelsim.compiler.planning.zero import ZeroSteps
from accelsim.cost.energy import link_pj_per_byte
from accelsim.errors import ScheduleError
from accelsim.graph.ir import Graph, Node
from accelsim.hw.spec import HwSpec
from accelsim.hw.topology import Route, topology_of
from accelsim.limits import check_tensor_parallel
from accelsim.ops.registry import get_op, numel
from accelsim.schedule.collectives import collective_cost
from accelsim.schedule.levels import chip_list, is_result
from accelsim.schedule.options import StepOptions
from accelsim.schedule.plan import COLLECTIVE, LINK, PER_STEP


class Planner:
    """Builds a Plan task by task. State: the tasks so far, which task produces each (node, micro-batch,
    replica) value, and the transfers already made, so a value crosses a link once per destination."""

    def __init__(self, graph: Graph, hw: HwSpec, options: StepOptions, costs: CostTable | None = None) -> None:
        """`costs`: a CostTable of the same graph and hardware to reuse (compile expands one step for
        several windows; pricing every node again each time was a tenth of a large step's compile)."""
        self.graph, self.hw, self.options = graph, hw, options
        self.chips = chip_list(hw)
        self.chip_of = chip_map(len(self.chips), options)
        if costs is not None and (costs.graph is not graph or costs.hw is not hw or costs.given != options.mapping):
            raise ValueError("internal: a CostTable is reused only for its own graph, hardware and given mappings")
        self.costs = costs if costs is not None else CostTable(graph, hw, self.chips, options.mapping)
        self.link_energy = False  # a transfer or collective priced its energy: the step's energy is known
        ic = hw.interconnect
        self.topology = topology_of(hw)  # routes and links (hw/topology.py); None on one chip
        self.collective_algorithm = ic.collective_algorithm if ic else "ring"
        self.link_pj_per_byte = link_pj_per_byte(hw)
        self.compute = [n for n in graph.nodes if not n.is_leaf]
        # the options' degree must be the graph's (a schedule file's options may say otherwise)
        self.ranks = check_tensor_parallel(graph, options.tensor_parallel)
        serial = {n.id: 0 if get_op(n.op).collective else min(c for _, _, c in self.costs.node(n.id, 0).options)
                  for n in self.compute}
        self.partition = partition(graph, serial, options, hw, [self.chips[self.chip_of[(0, s, 0)]]
                                                                for s in range(options.pipeline_stages)])
        self.stage = list(self.partition.stage_of)
        self.grad_nodes = graph.gradient_nodes()
        # partial values a collective sums whole (a tensor-parallel all-reduce reads each rank's one task)
        self.collective_inputs = {i for n in self.compute if get_op(n.op).collective for i in n.inputs}
        self.results = set(graph.outputs.values())
        # gradients summed from several stages' contributions, each contribution summed over micro-batches
        # on its own stage first (step_sums.py; set by plan)
        self.step_sums = StepSums({}, frozenset())
        self.tasks: list[TaskSpec] = []
        # (node, micro-batch, replica, rank) -> the task holding the value on that rank's chip, or its parts
        # in part order; a rank's own value is under its rank only, a replicated one under every rank
        self.producer: dict[tuple[int, int, int, int], list[int]] = {}
        self.transfers: dict[tuple[int, int], int] = {}
        self.prefetcher = Prefetcher(graph, hw, self.chips)  # streamed placement classes (hw/placement.py)

    def nbytes(self, node: Node) -> int:
        """Bytes of a node's whole tensor at the width it is stored in (prefetch.Prefetcher.nbytes)."""
        return self.prefetcher.nbytes(node)

    def new(self, **fields) -> TaskSpec:
        t = TaskSpec(id=len(self.tasks), **fields)
        self.tasks.append(t)
        return t

    def link_energy_pj(self, nbytes: int) -> float:
        """Energy of `nbytes` over the links (0 without a figure); a figure makes the step's energy known."""
        if self.link_pj_per_byte is None:
            return 0.0
        self.link_energy = True
        return nbytes * self.link_pj_per_byte

    def route(self, a: int, b: int) -> Route:
        if self.topology is None:
            raise ScheduleError(f"a transfer from chip{a} to chip{b} needs an interconnect")
        return self.topology.route(a, b)

    def on_chip(self, src: int, chip: int) -> int:
        """The task whose output is task `src`'s tensor on `chip` (a transfer if it lives elsewhere): it
        holds every link of its route (hw/topology.py) for the route's latency plus bytes over bandwidth."""
        t = self.tasks[src]
        if t.out_chip == chip:
            return src
        if (src, chip) not in self.transfers:
            nb = t.out_bytes
            cycles = self.route(t.out_chip, chip).cycles(nb)
            tr = self.new(kind="transfer", node=t.node, op="transfer", phase=t.phase, microbatch=t.microbatch,
                          replica=t.replica, stage=t.stage, chip=t.out_chip, out_chip=chip, deps=[src],
                          options=((LINK, 1, cycles),), out_bytes=nb, port_bytes=nb, part=t.part,
                          energy_pj=self.link_energy_pj(nb))
            self.transfers[(src, chip)] = tr.id
        return self.transfers[(src, chip)]

    def only(self, node_id: int, mb: int, replica: int, rank: int) -> int:
        """The one task holding a value that is never split (a gradient, a reduced gradient)."""
        (task,) = self.producer[(node_id, mb, replica, rank)]
        return task

    def ranks_of(self, n: Node) -> range:
        """The tensor-parallel ranks that compute node `n`: its own, or all of them for a replicated node."""
        return range(n.rank, n.rank + 1) if n.rank >= 0 else range(self.ranks)

    def value(self, node_id: int, mb: int, replica: int, rank: int) -> list[int]:
        """The tasks holding a value for a reader on `rank`: the rank's own copy of a replicated value,
        or the value of the one rank that computes it."""
        src = self.graph.nodes[node_id]
        return self.producer[(node_id, mb, replica, rank if src.rank < 0 else src.rank)]

    def splits(self, n: Node) -> bool:
        """Whether node `n` may be cut into parts: a forward or backward value that is neither a result
        of the step (whose value the step reports whole) nor a gradient (which is accumulated and
        reduced whole)."""
        return (self.options.split and n.phase in ("forward", "backward") and n.id not in self.results
                and n.id not in self.grad_nodes and n.id not in self.collective_inputs
                and n.id not in self.step_sums.inputs)

    def node_task(self, n: Node, mb: int, replica: int) -> list[TaskSpec]:
        """Node `n` for micro-batch `mb` (PER_STEP for an update) of `replica` on each rank that computes
        it, reading its inputs' values of the same micro-batch; an update reads the step's reduced
        gradients, its own per-step values, and the last micro-batch's forward values. A collective op
        becomes one collective (tensor_collective); any other node one task per rank, or one per part
        and rank when the node is split (every part reads every input part it depends on). ZeRO changes
        sharded update nodes and readers of sharded parameters (zero.ZeroSteps.node_task)."""
        zero = getattr(self, "zero", None)
        if zero is not None and (tasks := zero.node_task(n, mb, replica)) is not None:
            return tasks
        if get_op(n.op).collective:
            return self.tensor_collective(n, mb, replica)
        tasks: list[TaskSpec] = []
        for rank in self.ranks_of(n):
            tasks += self.rank_task(n, mb, replica, rank)
        return tasks

    def rank_task(self, n: Node, mb: int, replica: int, rank: int, gathered: frozenset[int] = frozenset()
                  ) -> list[TaskSpec]:
        """`gathered`: leaves it reads all-gathered from their ZeRO shards (zero.py adds those dependences),
        not from memory (so no prefetch streams them either)."""
        chip = self.chip_of[(replica, self.stage[n.id], rank)]
        deps, reads = [], []
        for i in n.inputs:
            src = self.graph.nodes[i]
            if src.is_leaf:
                if i not in gathered:
                    reads.append((i, mb if src.op == "input" else PER_STEP))
                continue
            deps += [self.on_chip(p, chip) for p in self.value(i, self.source_mb(src, mb), replica, rank)]
        deps = sorted(set(deps))
        common = dict(kind="node", node=n.id, op=n.op, phase=n.phase, microbatch=mb, replica=replica,
                      stage=self.stage[n.id], chip=chip, out_chip=chip,
                      keep=n.id in self.results and n.phase != "backward")
        # a streamed output (hw/placement.py) is written back whole by its class's DMA engine: never split
        placed = self.prefetcher  # widths, prefetches and write-backs of the placement classes (prefetch.py)
        streamed = placed.out_stream(chip, n.id, is_result(common["keep"], n.phase)) if placed.out_classes else None
        parts = self.costs.split(n.id, chip) if self.splits(n) and streamed is None else ()
        if parts:
            tasks = []
            for p in parts:  # every part reads the whole leaf: each streams it
                staged, stream, values = placed.stage(self.new, self.tasks, reads, common, deps)
                held = max(values, stream if placed.streams_slower(chip, reads) else 0)
                tasks.append(self.new(**common, deps=list(deps), after=staged, reads=list(reads),
                                      options=streaming(p.costs.options, held), port_bytes=p.costs.port_bytes,
                                      out_bytes=placed.stored_bytes(chip, n, common["keep"], p.out_bytes),
                                      energy_pj=p.costs.energy_pj or 0.0, flops=p.costs.flops, part=p.part,
                                      stream_cycles=stream))
        else:
            costs = self.costs.node(n.id, chip)
            staged, stream, values = placed.stage(self.new, self.tasks, reads, common, deps)
            # a leaf's DMA engine slower than its memory holds the reader past the memory's read time, which the
            # validator and the simulators charge from the candidates: they carry the stream then
            held = max(values, stream if placed.streams_slower(chip, reads) else 0)
            tasks = [self.new(**common, deps=deps, after=staged, reads=reads, options=streaming(costs.options, held),
                              out_bytes=placed.stored_bytes(chip, n, common["keep"]), port_bytes=costs.port_bytes,
                              energy_pj=costs.energy_pj or 0.0, flops=costs.flops, stream_cycles=stream,
                              partial_reads=self.partial_reads(n))]
        if streamed is not None:
            tasks = [placed.write_back(self.new, t, streamed) for t in tasks]
        self.producer[(n.id, mb, replica, rank)] = [t.id for t in tasks]
        return tasks

    def partial_reads(self, n: Node) -> tuple[tuple[int, int, int], ...]:
        """(input node, elements read, elements of it) for each input node `n` reads only part of where it is
        placed (OpDef.input_reads: a slice's window); () when it reads every input whole."""
        op = get_op(n.op)
        if op.input_reads is None:
            return ()
        shapes = [self.graph.nodes[i].shape for i in n.inputs]
        read = op.input_reads(n.shape, *shapes, **n.attrs)
        return tuple((i, r, numel(s)) for i, r, s in zip(n.inputs, read, shapes) if r < numel(s))

    def tensor_collective(self, n: Node, mb: int, replica: int) -> list[TaskSpec]:
        """A tp_allreduce node: input k is rank k's partial value; one member task per rank, on the chip
        holding that rank's partial, all starting and ending together; each member's output is the sum
        on its chip, the replicated value every rank's readers then read."""
        ranks = [self.graph.nodes[i].rank for i in n.inputs]
        if sorted(ranks) != list(range(self.ranks)):
            raise ScheduleError(f"{n.op} node %{n.id} ({n.name!r}) must sum one partial value from each of the "
                                f"{self.ranks} tensor-parallel ranks in rank order, but its inputs are on ranks "
                                f"{ranks}")
        sources = [self.only(i, self.source_mb(self.graph.nodes[i], mb), replica, r)
                   for i, r in zip(n.inputs, ranks)]
        chips = [self.tasks[src].out_chip for src in sources]
        if len(set(chips)) < len(chips):
            raise ScheduleError(f"{n.op} node %{n.id} ({n.name!r}): tensor-parallel ranks share a chip "
                                f"({chips}); give each rank its own chip")
        keep = n.id in self.results and n.phase != "backward"
        nbytes = self.prefetcher.stored_bytes(chips[0], n, keep)
        members = self.collective("allreduce", n.id, sources, nbytes, n.phase, microbatch=mb,
                                  replicas=[replica] * len(sources), task_kind="tp_allreduce", op=n.op, keep=keep)
        for rank, member in zip(ranks, members):
            self.producer[(n.id, mb, replica, rank)] = [member]
        return [self.tasks[m] for m in members]

    def source_mb(self, src: Node, mb: int) -> int:
        if mb != PER_STEP:
            return mb
        if src.phase == "update" or src.id in self.grad_nodes or src.id in self.step_sums.inputs:
            return PER_STEP
        return self.options.microbatches - 1

    def micro_batches(self, replica: int, window: int) -> None:
        """Forward and backward tasks of every micro-batch; micro-batch mb's first tasks wait for
        micro-batch mb - window to end, so at most `window` are in flight."""
        sinks: dict[int, list[int]] = {}
        for mb in range(self.options.microbatches):
            first = len(self.tasks)
            for n in self.compute:
                if n.phase == "update" or n.id in self.step_sums.gradients:
                    continue
                for t in self.node_task(n, mb, replica):
                    if not t.deps and mb >= window:  # (its prefetches, if any, are ordering edges already)
                        t.after = sorted(t.after + sinks[mb - window])
            has_succ = {d for t in self.tasks[first:] for d in t.preds}
            sinks[mb] = [t.id for t in self.tasks[first:] if t.id not in has_succ and t.microbatch == mb]

    def accumulate(self, g: int, replica: int, rank: int) -> int:
        """Sum gradient node `g` over micro-batches on its replica's chip of `rank`; the last sum's task id."""
        gn = self.graph.nodes[g]
        last = self.only(g, 0, replica, rank)
        chip = self.tasks[last].out_chip
        for mb in range(1, self.options.microbatches):
            costs = self.costs.add(gn.shape, gn.dtype, chip)
            acc = self.new(kind="accumulate", node=g, op="accumulate", phase="backward", microbatch=mb,
                           replica=replica, stage=self.stage[g], chip=chip, out_chip=chip,
                           deps=[last, self.only(g, mb, replica, rank)], options=costs.options,
                           out_bytes=self.prefetcher.stored_bytes(chip, gn, False), port_bytes=3 * self.nbytes(gn),
                           energy_pj=costs.energy_pj or 0.0, flops=costs.flops)
            last = acc.id
        return last

    def allreduce(self, g: int, finals: list[int], rank: int) -> None:
        """Sum gradient `g` of tensor-parallel `rank` across replicas (`finals`: each replica's last sum,
        in replica order): one collective (see collective), member r for replica r."""
        nbytes = self.prefetcher.stored_bytes(self.tasks[finals[0]].out_chip, self.graph.nodes[g], False)
        members = self.collective("allreduce", g, finals, nbytes, "backward",
                                  deps=sorted(finals), replicas=list(range(len(finals))))
        for r, member in enumerate(members):
            self.producer[(g, PER_STEP, r, rank)] = [member]

    def collective(self, kind: str, node: int, sources: list[int], nbytes: int, phase: str, *,
                   microbatch: int = PER_STEP, replicas: list[int] | None = None, deps: list[int] | None = None,
                   out_bytes: int | None = None, op: str | None = None, keep: bool = False,
                   task_kind: str | None = None) -> list[int]:
        """One collective of `kind` (a key of collectives.COLLECTIVE_KINDS, also its members' task kind)
        over graph node `node`'s `nbytes` (the whole tensor): one member task per source (the task holding
        that member's input), on the source's chip, in ring order; all in one group, each waiting for
        `deps` (default: every source). Across chips it costs what collectives.collective_cost says for the
        hardware's collective_algorithm, each member carrying the bytes it sends and their energy; when all
        members share one chip a reduction is d - 1 on-chip additions of the node (a gather: nothing), each
        member carrying 1/d of their energy. `replicas`: each member's replica (default: the sources');
        `out_bytes`: each member's output (default: nbytes); `task_kind`: the members' task kind
        when it is not `kind` (a tensor-parallel all-reduce's tp_allreduce). Returns the member task ids."""
        chips = [self.tasks[s].out_chip for s in sources]
        d, gn = len(sources), self.graph.nodes[node]
        if len(set(chips)) == 1:
            resource, moved = COLLECTIVE, [0] * d
            if kind == "all_gather":
                cycles, energy = 0, [0.0] * d
            else:
                adds = self.costs.add(gn.shape, gn.dtype, chips[0])
                cycles = (d - 1) * min(c for _, _, c in adds.options)
                moved = [3 * (d - 1) * nbytes] * d  # through the adder's memory port
                energy = [(d - 1) / d * (adds.energy_pj or 0.0)] * d
        else:
            cost = collective_cost(self.topology, kind, chips, nbytes, self.collective_algorithm)
            resource, cycles, moved = cost.resource, cost.cycles, list(cost.sent_bytes)
            energy = [self.link_energy_pj(b) for b in moved]
        group = len(self.tasks)
        replicas = replicas if replicas is not None else [self.tasks[s].replica for s in sources]
        members = []
        for i, (src, chip) in enumerate(zip(sources, chips)):
            t = self.new(kind=task_kind or kind, node=node, op=op or kind, phase=phase, microbatch=microbatch,
                         replica=replicas[i], stage=self.stage[node], chip=chip, out_chip=chip,
                         deps=list(sources if deps is None else deps), options=((resource, 1, max(1, cycles)),),
                         out_bytes=nbytes if out_bytes is None else out_bytes, port_bytes=moved[i], group=group,
                         energy_pj=energy[i], keep=keep)
            members.append(t.id)
        return members

    def plan(self, window: int | None) -> Plan:
        d, m = self.options.data_parallel, self.options.microbatches
        window = max(1, window or m)
        self.zero = ZeroSteps.of(self)
        if self.zero is not None:
            self.prefetcher.refuse_widths_under_zero(self.options.zero)
        self.step_sums = StepSums.of(self.graph, self.stage, m, self.zero is not None)
        if self.zero is None or not self.zero.micro_batches(window):
            for r in range(d):
                self.micro_batches(r, window)
        reduced = self.zero.reduce_gradients() if self.zero is not None else set()
        for g in self.grad_nodes:
            if g in reduced:
                continue
            for rank in self.ranks_of(self.graph.nodes[g]):  # each rank reduces its own copy or shard
                if g in self.step_sums.gradients:
                    finals = [self.step_sums.sum(self, g, r, rank) for r in range(d)]
                else:
                    finals = [self.accumulate(g, r, rank) for r in range(d)]
                if d > 1:
                    self.allreduce(g, finals, rank)
                else:
                    self.producer[(g, PER_STEP, 0, rank)] = [finals[0]]
        for r in range(d):
            for n in self.compute:
                if n.phase == "update":
                    self.node_task(n, PER_STEP, r)
        if self.zero is not None:
            self.zero.gather_updates()
        leaf_bytes = {n.id: self.prefetcher.placed_leaf_bytes(n) for n in self.graph.nodes if n.is_leaf}
        return Plan(self.tasks, self.chips, self.stage, self.chip_of, leaf_bytes,
                    [n.name for n in self.graph.nodes], self.costs.has_energy or self.link_energy,
                    shards=self.zero.leaf_shards() if self.zero is not None else {},
                    masters=self.zero.master_shards() if self.zero is not None else {},
                    rank_twins=self.costs.rank_twins if self.ranks > 1 else (),
                    leaf_class=self.prefetcher.classes if self.prefetcher.any else {},
                    out_class=self.prefetcher.out_classes)


def expand(graph: Graph, hw: HwSpec, options: StepOptions, window: int | None = None,
           costs: CostTable | None = None) -> Plan:
    """`window`: the most micro-batches of a replica in flight at once (None: all of them). `costs`: the
    prices of an earlier expansion of the same graph on the same hardware, reused."""
    plan = Planner(graph, hw, options, costs).plan(window)
    order_fused_tiles(graph, plan.tasks)  # fused tiles run depth-first (tile_order.py)
    order_gradient_reduction(graph, options, plan.tasks)  # all-reduces after the backward pass, if asked
    return plan
