"""Candidate resources and their costs per chip (Graph, HwSpec -> NodeCosts of each node, part of a split node
and accumulation): what the planner (expand.py) prices each task with, each computed once per kind of chip."""
from __future__ import annotations

from dataclasses import dataclass

from accelsim.compiler.planning.rank_twins import rank_twins
from accelsim.compiler.planning.tasks import Option
from accelsim.cost.model import capable_units
from accelsim.graph.ir import Graph, Node
from accelsim.hw.precision import compute_elem_bytes
from accelsim.hw.spec import Chip, HwSpec
from accelsim.mapping.by_node import GivenMappings
from accelsim.mapping.cache import MappingCache
from accelsim.mapping.entry import LayerMapping
from accelsim.mapping.node import unit_node_mapping
from accelsim.ops import add
from accelsim.ops.registry import numel
from accelsim.schedule.mappings import NodeMapping, node_mapping
from accelsim.schedule.split import MAX_PARTS, Part, part_graph, splits_of


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
