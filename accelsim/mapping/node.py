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
from accelsim.mapping.dims import layer_dims
from accelsim.mapping.mapper import MapperOptions


def unit_node_cost(hw: HwSpec, graph: Graph, node: Node, unit: Unit, chip: Chip | None = None,
                   cache: MappingCache | None = None) -> NodeCost:
    """node_cost, or for a `mapping: search` array unit the cost of the best mapping (latency objective,
    the mapper's default budget and seed); `cache` maps a network's repeated layers once."""
    chip = chip or hw.chips[0]
    if unit.mapping != "search" or unit.array is None:
        return node_cost(hw, graph, node, unit, chip)
    cache = cache if cache is not None else MappingCache()
    layer = layer_dims(graph, node)
    best = cache.best(hw, chip, unit, layer, MapperOptions())
    ways = unit.count if unit.gang else 1
    memory = best.traffic[-1]
    buffers = best.traffic[0].read_bytes if len(best.traffic) > 1 else 0
    peak = unit.model.peak_ops_per_cycle() * ways
    utilization = min(layer.flops / (best.cycles * peak), 1.0) if peak else best.compute_cycles / best.cycles
    bound = "compute" if best.compute_cycles >= best.memory_cycles and not best.channels_bound else "memory"
    return NodeCost(node.id, node.op, unit.name, layer.flops, memory.read_bytes, memory.written_bytes,
                    best.compute_cycles, best.memory_cycles, unit.latency_cycles, best.cycles, utilization, bound,
                    best.energy_pj, best.buffer_stall_cycles, buffers)
