"""Expand a graph into the task DAG a step executes: node tasks per (micro-batch, replica), gradient
accumulation over micro-batches, all-reduce over replicas, transfers between chips, with every
task's candidate resources and their costs (Graph, HwSpec, options -> Plan)."""
from __future__ import annotations

from dataclasses import dataclass

from accelsim.cost.energy import link_pj_per_byte
from accelsim.cost.model import capable_units
from accelsim.errors import ScheduleError
from accelsim.graph.ir import Graph, Node
from accelsim.hw.placement import placement_of
from accelsim.hw.precision import compute_elem_bytes, tensor_bytes
from accelsim.hw.spec import Chip, HwSpec
from accelsim.limits import check_tensor_parallel
from accelsim.mapping.by_node import GivenMappings
from accelsim.mapping.cache import MappingCache
from accelsim.mapping.node import unit_node_mapping
from accelsim.hw.topology import Route, topology_of
from accelsim.ops import add
from accelsim.ops.registry import get_op
from accelsim.ops.registry import numel
from accelsim.schedule.collectives import collective_cost
from accelsim.schedule.kinds import TASK_KINDS
from accelsim.schedule.levels import chip_list, is_result
from accelsim.schedule.plan import COLLECTIVE, LINK, PER_STEP
from accelsim.mapping.entry import LayerMapping
from accelsim.schedule.mappings import NodeMapping, node_mapping
from accelsim.schedule.options import StepOptions
from accelsim.compiler.planning.prefetch import Prefetcher
from accelsim.compiler.planning.rank_twins import rank_twins
from accelsim.schedule.split import MAX_PARTS, Part, part_graph, splits_of
from accelsim.compiler.planning.stages import partition
from accelsim.compiler.planning.gradient_reduction import order_gradient_reduction
from accelsim.compiler.planning.tile_order import order_fused_tiles
from accelsim.compiler.planning.step_sums import step_summed_gradients
from accelsim.compiler.planning.tasks import Option, Plan, TaskSpec
from accelsim.compiler.planning.zero import ZeroSteps

def chip_map(n_chips: int, options: StepOptions) -> dict[tuple[int, int, int], int]:
    """(replica, stage, rank) -> chip, as Megatron-LM orders a d x p x t job: the tensor-parallel ranks
    of a stage on consecutive chips (one node's fastest links carry the most frequent collectives), a
    replica's stages next, replicas outermost. With more replicas than chips allow (and no pipeline or
    tensor parallelism), replicas share the chips' units."""
    d, p, t = options.data_parallel, options.pipeline_stages, options.tensor_parallel
    tp = f" x tensor_parallel={t}" if t > 1 else ""
    if p * t > n_chips:
        raise ScheduleError(f"pipeline_stages={p}{tp} needs {p * t} chips, but the hardware has {n_chips}")
    if (p > 1 or t > 1) and d * p * t > n_chips:
        raise ScheduleError(f"data_parallel={d} x pipeline_stages={p}{tp} needs {d * p * t} chips, the hardware "
                            f"has {n_chips}")
    return {(r, s, k): ((r * p + s) * t + k) % n_chips for r in range(d) for s in range(p) for k in range(t)}


@dataclass(frozen=True)
class NodeCosts:
    """A node on one chip: where it may run and its cycles there, the energy on the fastest unit, and
    the bytes it streams through its unit's memory port and its FLOPs (the same on every unit)."""

    options: tuple[Option, ...]
    energy_pj: float | None
    port_bytes: int
    flops: int = 0


@dataclass(frozen=True)
class PartCosts:
    """One part of a split node on one chip: its costs as a NodeCosts, and its output's bytes."""

    part: Part
    costs: NodeCosts
    out_bytes: int


class CostTable:
    """Candidate resources and costs of graph nodes, their parts and accumulations per chip, computed once each."""

    def __init__(self, graph: Graph, hw: HwSpec, chips: list[Chip],
                 given: tuple[LayerMapping, ...] | None = None) -> None:
        """`given`: the user's mappings (StepOptions.mapping), applied to whole nodes (a split node's parts
        are searched)."""
        self.graph, self.hw, self.chips, self.given = graph, hw, chips, given
        self._node: dict[tuple[int, int], NodeCosts] = {}
        self._add: dict[tuple[tuple[int, ...], str, int], NodeCosts] = {}
        self._split: dict[tuple[int, int], tuple[PartCosts, ...]] = {}
        self._part: dict[tuple, NodeCosts] = {}
        self.has_energy = False
        self.mappings = MappingCache()  # units with `mapping: search` map each distinct layer once
        self.chosen: dict[tuple[int, int, str], NodeMapping] = {}  # (node, chip kind, unit): its whole mapping
        # costs depend on the chip's kind, not on which instance: every chip of a kind is priced once
        # (a d x p x t job on 8 identical chips would otherwise price every node eight times)
        first = {id(c): i for i, c in reversed(list(enumerate(chips)))}
        self.kind = [first[id(c)] for c in chips]
        self._given = GivenMappings(graph, chips, given)
        self._rank_twins: tuple[dict[int, int], ...] | None = None

    def recorded(self) -> tuple[NodeMapping, ...] | None:
        """The mappings chosen for whole nodes, by (node, chip, unit); None where no unit searched one."""
        return tuple(self.chosen[k] for k in sorted(self.chosen)) or None

    @property
    def rank_twins(self) -> tuple[dict[int, int], ...]:
        """The graph's rank twins (rank_twins.py), found once for every expansion sharing this table."""
        if self._rank_twins is None:
            self._rank_twins = rank_twins(self.graph)
        return self._rank_twins

    def _costs(self, graph: Graph, node: Node, chip: int, whole: bool = False) -> NodeCosts:
        costs = []
        for u in capable_units(self.hw, graph, node, self.chips[chip]):
            given = self._given.for_node(node.id, u.name, chip, self.kind) if whole else None
            cost, layer, best = unit_node_mapping(self.hw, graph, node, u, self.chips[chip], self.mappings, given)
            if whole and best is not None:
                self.chosen[(node.id, chip, u.name)] = node_mapping(node, chip, u.name, layer, best.mapping)
            costs.append(cost)
        units = {u.name: u for u in self.chips[chip].units}
        # energy of the cheapest unit: what the step costs if each node runs where it is fastest
        best = min(costs, key=lambda c: c.cycles)
        self.has_energy |= best.energy_pj is not None
        return NodeCosts(options=tuple((c.unit, 1 if units[c.unit].gang else units[c.unit].count, c.cycles)
                                       for c in costs),
                         energy_pj=best.energy_pj, port_bytes=costs[0].bytes_read + costs[0].bytes_written,
                         flops=costs[0].flops)

    def node(self, node_id: int, chip: int) -> NodeCosts:
        key = (node_id, self.kind[chip])
        if key not in self._node:
            self._node[key] = self._costs(self.graph, self.graph.nodes[node_id], key[1], whole=True)
        return self._node[key]

    def part(self, node_id: int, chip: int, part: Part) -> PartCosts:
        """A part's costs; parts of equal shapes (all but the longer runs of an uneven cut) are priced once."""
        g, node = part_graph(self.graph, self.graph.nodes[node_id], part)
        key = (node.op, tuple((n.shape, n.dtype) for n in g.nodes[:-1]), node.dtype,
               repr(sorted(node.attrs.items())), self.kind[chip])
        if key not in self._part:
            self._part[key] = self._costs(g, node, self.kind[chip])
        return PartCosts(part, self._part[key], numel(node.shape) * compute_elem_bytes(self.hw, node))

    def split(self, node_id: int, chip: int) -> tuple[PartCosts, ...]:
        """The node cut over the instances of its fastest unit kind along whichever of its op's splits
        makes the slowest part shortest, if that part is shorter than the whole node; () otherwise (a
        unit with one instance, a gang unit, an op that never splits, parts that are no faster)."""
        key = (node_id, self.kind[chip])
        if key not in self._split:
            node = self.graph.nodes[node_id]
            _, instances, whole = min(self.node(node_id, chip).options, key=lambda o: o[2])
            best: tuple[PartCosts, ...] = ()
            slowest_best = whole
            for index, split in enumerate(splits_of(self.graph, node) if instances > 1 else ()):
                n = min(instances, MAX_PARTS, node.shape[split.out_axis])
                if n < 2:
                    continue
                parts = tuple(self.part(node_id, chip, Part(index, i, n)) for i in range(n))
                slowest = max(min(c for _, _, c in p.costs.options) for p in parts)
                if slowest < slowest_best:
                    best, slowest_best = parts, slowest
            self._split[key] = best
        return self._split[key]

    def add(self, shape: tuple[int, ...], dtype: str, chip: int) -> NodeCosts:
        """An elementwise add of two tensors of `shape` on `chip` (an accumulation, an on-chip reduction)."""
        key = (shape, dtype, self.kind[chip])
        if key not in self._add:
            g = Graph("accumulate", dtype="float64" if dtype == "float64" else "float32")
            s = add(g.input("a", shape), g.input("b", shape))
            self._add[key] = self._costs(g, s.node, key[2])
        return self._add[key]


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
        self.link_bytes_per_cycle = ic.bytes_per_cycle(hw.clock_hz) if ic else 0.0
        self.link_latency = ic.link_latency_cycles if ic else 0
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
        # on its own stage first (step_sums.py; set by plan): gradient -> its inputs, and those inputs
        self.step_sums: dict[int, tuple[int, ...]] = {}
        self.summed_inputs: set[int] = set()
        self.tasks: list[TaskSpec] = []
        # (node, micro-batch, replica, rank) -> the task holding the value on that rank's chip, or its parts
        # in part order; a rank's own value is under its rank only, a replicated one under every rank
        self.producer: dict[tuple[int, int, int, int], list[int]] = {}
        self.transfers: dict[tuple[int, int], int] = {}
        self.prefetcher = Prefetcher(graph, hw, self.chips)  # streamed placement classes (hw/placement.py)

    def nbytes(self, node: Node) -> int:
        """Bytes of a node's whole tensor: at the step's width, a leaf at its placement class's (prefetch.py)."""
        nbytes = tensor_bytes(self.graph, node, self.hw)
        if node.is_leaf and self.prefetcher.leaf_widths:
            return self.prefetcher.leaf_bytes(node, nbytes)
        return nbytes

    def stored_bytes(self, n: Node, chip: int, keep: bool, nbytes: int | None = None) -> int:
        """Bytes of a task output holding node `n`'s value on `chip` (`nbytes`: of a part of it at the step's
        width; None: the whole tensor) at the width its placement class stores it in (hw/placement.py)."""
        nbytes = self.nbytes(n) if nbytes is None else nbytes
        if not self.prefetcher.out_classes:
            return nbytes
        return self.prefetcher.stored_bytes(chip, n, is_result(keep, n.phase), nbytes)

    def widths_without_zero(self) -> None:
        """ZeRO cuts its shards of gradients, parameters and optimizer state at the step's width: a placement's
        storage width for those classes is refused under it."""
        widths = {(c.name, cls): w for c in self.chips for cls in ("gradients", "parameters", "optimizer_state")
                  if (w := getattr(placement_of(c).get(cls), "bytes_per_element", None)) is not None}
        if widths:
            said = ", ".join(f"{cls} {w} on {chip}" for (chip, cls), w in sorted(widths.items()))
            raise ScheduleError(f"ZeRO stage {self.options.zero} shards gradients, parameters and optimizer state "
                                f"at the step's width, but the placement stores them at bytes_per_element ({said});"
                                f" expected zero 0, or no bytes_per_element on those classes")

    def leaf_nbytes(self, leaf: Node) -> int:
        """Bytes a leaf occupies where it is placed (a streamed class may keep it as whole tiles: prefetch.py)."""
        return self.prefetcher.tiled_leaf_bytes(leaf, self.nbytes(leaf))

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

    def hops(self, a: int, b: int) -> int:
        """Link latencies a transfer from chip `a` to chip `b` pays: the hops round a ring, else one (a
        fully connected pair, a switch, the scale-out network); 0 on one chip."""
        route, topo = self.route(a, b), self.topology
        round_a_ring = topo.intra.topology == "ring" and topo.node(a) == topo.node(b)
        return len(route.links) if round_a_ring else int(a != b)

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
                and n.id not in self.summed_inputs)

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
        streamed = self.prefetcher.out_stream(chip, n.id, is_result(common["keep"], n.phase)) if (
            self.prefetcher.out_classes) else None
        parts = self.costs.split(n.id, chip) if self.splits(n) and streamed is None else ()
        if parts:
            tasks = []
            for p in parts:  # every part reads the whole leaf: each streams it
                staged, stream, values = self.prefetch(reads, common, deps)
                tasks.append(self.new(**common, deps=list(deps), after=staged, reads=list(reads),
                                      options=streaming(p.costs.options, values), port_bytes=p.costs.port_bytes,
                                      out_bytes=self.stored_bytes(n, chip, common["keep"], p.out_bytes),
                                      energy_pj=p.costs.energy_pj or 0.0, flops=p.costs.flops, part=p.part,
                                      stream_cycles=stream))
        else:
            costs = self.costs.node(n.id, chip)
            staged, stream, values = self.prefetch(reads, common, deps)
            tasks = [self.new(**common, deps=deps, after=staged, reads=reads, options=streaming(costs.options, values),
                              out_bytes=self.stored_bytes(n, chip, common["keep"]), port_bytes=costs.port_bytes,
                              energy_pj=costs.energy_pj or 0.0, flops=costs.flops, stream_cycles=stream,
                              partial_reads=self.partial_reads(n))]
        if streamed is not None:
            tasks = [self.prefetcher.write_back(self.new, t, streamed) for t in tasks]
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

    def prefetch(self, reads: list[tuple[int, int]], common: dict, deps: list[int] = ()
                 ) -> tuple[list[int], int, int]:
        """Prefetch tasks of the streamed leaves a node task reads and of the streamed outputs among its
        dependences `deps` (write-backs: prefetch.Prefetcher.stage): their ids (the reader's ordering edges: it
        waits for them, and its value is computed from the leaf or the write-back's copy itself, so the executor
        reads no staged copy) and the cycles the reader needs at least to stream the rest: of the leaves, and of
        the outputs."""
        if not self.prefetcher.any:
            return [], 0, 0
        values = tuple(self.tasks[d] for d in deps if TASK_KINDS[self.tasks[d].kind].writes_back)
        return self.prefetcher.stage(self.new, reads, {i: self.leaf_nbytes(self.graph.nodes[i]) for i, _ in reads},
                                     common, values)

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
        members = self.collective("allreduce", n.id, sources, self.stored_bytes(n, chips[0], keep), n.phase,
                                  microbatch=mb, replicas=[replica] * len(sources), task_kind="tp_allreduce",
                                  op=n.op, keep=keep)
        for rank, member in zip(ranks, members):
            self.producer[(n.id, mb, replica, rank)] = [member]
        return [self.tasks[m] for m in members]

    def source_mb(self, src: Node, mb: int) -> int:
        if mb != PER_STEP:
            return mb
        if src.phase == "update" or src.id in self.grad_nodes or src.id in self.summed_inputs:
            return PER_STEP
        return self.options.microbatches - 1

    def micro_batches(self, replica: int, window: int) -> None:
        """Forward and backward tasks of every micro-batch; micro-batch mb's first tasks wait for
        micro-batch mb - window to end, so at most `window` are in flight."""
        sinks: dict[int, list[int]] = {}
        for mb in range(self.options.microbatches):
            first = len(self.tasks)
            for n in self.compute:
                if n.phase == "update" or n.id in self.step_sums:
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
                           out_bytes=self.stored_bytes(gn, chip, False), port_bytes=3 * self.nbytes(gn),
                           energy_pj=costs.energy_pj or 0.0, flops=costs.flops)
            last = acc.id
        return last

    def step_sum(self, g: int, replica: int, rank: int) -> int:
        """Gradient `g` of a step-summed gradient (step_sums.py): each input summed over micro-batches on its
        own chip, then `g` once, on its chip, from those sums (one transfer per input on another chip)."""
        for i in self.step_sums[g]:
            self.producer[(i, PER_STEP, replica, rank)] = [self.accumulate(i, replica, rank)]
        (task,) = self.rank_task(self.graph.nodes[g], PER_STEP, replica, rank)
        return task.id

    def allreduce(self, g: int, finals: list[int], rank: int) -> None:
        """Sum gradient `g` of tensor-parallel `rank` across replicas (`finals`: each replica's last sum,
        in replica order): one collective (see collective), member r for replica r."""
        nbytes = self.stored_bytes(self.graph.nodes[g], self.tasks[finals[0]].out_chip, False)
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
            self.widths_without_zero()
        if self.zero is None and m > 1:  # ZeRO reduces every gradient per micro-batch or at the boundary itself
            self.step_sums = step_summed_gradients(self.graph, self.stage)
            self.summed_inputs = {i for inputs in self.step_sums.values() for i in inputs}
        if self.zero is None or not self.zero.micro_batches(window):
            for r in range(d):
                self.micro_batches(r, window)
        reduced = self.zero.reduce_gradients() if self.zero is not None else set()
        for g in self.grad_nodes:
            if g in reduced:
                continue
            for rank in self.ranks_of(self.graph.nodes[g]):  # each rank reduces its own copy or shard
                sums = self.step_sum if g in self.step_sums else self.accumulate
                finals = [sums(g, r, rank) for r in range(d)]
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
        leaf_bytes = {n.id: self.leaf_nbytes(n) for n in self.graph.nodes if n.is_leaf}
        return Plan(self.tasks, self.chips, self.stage, self.chip_of, leaf_bytes,
                    [n.name for n in self.graph.nodes], self.costs.has_energy or self.link_energy,
                    shards=self.zero.leaf_shards() if self.zero is not None else {},
                    masters=self.zero.master_shards() if self.zero is not None else {},
                    rank_twins=self.costs.rank_twins if self.ranks > 1 else (),
                    leaf_class=self.prefetcher.classes if self.prefetcher.any else {},
                    out_class=self.prefetcher.out_classes)


def streaming(options: tuple, cycles: int) -> tuple:
    """A reader's candidates lasting at least `cycles`, the streaming of the rest of the outputs it reads
    through their DMA engines (hw/placement.py): it holds its unit until they have arrived, so a late prefetch
    stalls it, and the schedule's candidates say so (the validator and the simulators replay them)."""
    return options if not cycles else tuple((r, n, max(c, cycles)) for r, n, c in options)


def expand(graph: Graph, hw: HwSpec, options: StepOptions, window: int | None = None,
           costs: CostTable | None = None) -> Plan:
    """`window`: the most micro-batches of a replica in flight at once (None: all of them). `costs`: the
    prices of an earlier expansion of the same graph on the same hardware, reused."""
    plan = Planner(graph, hw, options, costs).plan(window)
    order_fused_tiles(graph, plan.tasks)  # fused tiles run depth-first (tile_order.py)
    order_gradient_reduction(graph, options, plan.tasks)  # all-reduces after the backward pass, if asked
    return plan
