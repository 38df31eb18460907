"""A node's cost on a unit that asks for mapping search (`mapping: search`): the mapper's best mapping in
cost/model.py's NodeCost, so the scheduler reads it as any other cost; every other unit is node_cost's.
The mapper costs operand-buffer traffic with the unit's "tile" model (cost/tile_traffic.py) for every
mapping, so its fixed point is node_cost's; a unit asking for "scalesim" traffic gets "tile" instead.
(HwSpec, Graph, Node, Unit) -> NodeCost.
"""
from __future__ import annotations

from accelsim.cost.model import NodeCost, node_cost
from accelsim.graph.ir import Graph, Node
from accelsim.hw.spec import Chip, HwSpec, Unit
from accelsim.mapping.cache import MappingCache
from accelsim.mapping.cost import MappingCost
from accelsim.mapping.dims import LayerDims, layer_dims
from accelsim.mapping.errors import MappingSpecError
from accelsim.mapping.mapper import MapperOptions
from accelsim.mapping.entry import LayerMapping


def unit_node_cost(hw: HwSpec, graph: Graph, node: Node, unit: Unit, chip: Chip | None = None,
                   cache: MappingCache | None = None) -> NodeCost:
    """node_cost, or for a `mapping: search` array unit the cost of the best mapping (latency objective,
    the mapper's default budget and seed); `cache` maps a network's repeated layers once."""
    return unit_node_mapping(hw, graph, node, unit, chip, cache)[0]


def unit_node_mapping(hw: HwSpec, graph: Graph, node: Node, unit: Unit, chip: Chip | None = None,
                      cache: MappingCache | None = None,
                      given: LayerMapping | None = None) -> tuple[NodeCost, LayerDims | None, MappingCost | None]:
    """unit_node_cost with the layer and the mapping chosen for it (None, None on a unit that is not searched);
    `given`: the user's choices for this layer on this unit (mapping/given.py). A mapping that does not fit
    is refused naming the node."""
    chip = chip or hw.chips[0]
    if unit.mapping != "search" or unit.array is None:
        return node_cost(hw, graph, node, unit, chip), None, None
    cache = cache if cache is not None else MappingCache()
    try:
        layer = layer_dims(graph, node)
        best = cache.best(hw, chip, unit, layer, MapperOptions(), given)
    except MappingSpecError as e:
        raise MappingSpecError(f"{node.op} node %{node.id} {node.name!r}: {e}") from None
    ways = unit.count if unit.gang else 1
    memory = best.traffic[-1]
    buffers = best.traffic[0].read_bytes if len(best.traffic) > 1 else 0
    peak = unit.model.peak_ops_per_cycle() * ways
    utilization = min(layer.flops / (best.cycles * peak), 1.0) if peak else best.compute_cycles / best.cycles
    bound = "compute" if best.compute_cycles >= best.memory_cycles and not best.channels_bound else "memory"
    cost = NodeCost(node.id, node.op, unit.name, layer.flops, memory.read_bytes, memory.written_bytes,
                    best.compute_cycles, best.memory_cycles, unit.latency_cycles, best.cycles, utilization, bound,
                    best.energy_pj, best.buffer_stall_cycles, buffers)
    return cost, layer, best
