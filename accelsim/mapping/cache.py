"""Mapping a network's layers with a cache keyed by (layer shape, unit), so that repeated layers (ResNet's
blocks, a transformer's layers) are searched once: (HwSpec, Graph, Unit, MapperOptions) -> {node: MappingCost}.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from accelsim.cost.model import can_run
from accelsim.graph.ir import Graph
from accelsim.hw.spec import Chip, HwSpec, Unit
from accelsim.mapping.cost import MappingCost
from accelsim.mapping.dims import LayerDims, layer_dims
from accelsim.mapping.mapper import MapperOptions, search_mapping
from accelsim.mapping.entry import LayerMapping


def unit_key(hw: HwSpec, chip: Chip, unit: Unit) -> tuple:
    """Everything about a unit a mapping's cost reads: the unit, the memories it streams from and to, the
    clock, the storage bytes of each dtype and the chip's technology (energy)."""
    return (unit.model_dump_json(), chip.memory(unit.reads[0]).model_dump_json(),
            chip.memory(unit.writes[0]).model_dump_json(), hw.clock_hz, tuple(sorted(hw.bytes_per_element.items())),
            chip.technology_nm)


@dataclass
class MappingCache:
    """Best mappings by (layer, unit, options); counts hits and misses (searches run)."""

    entries: dict[tuple, MappingCost] = field(default_factory=dict)
    hits: int = 0
    misses: int = 0

    def best(self, hw: HwSpec, chip: Chip, unit: Unit, layer: LayerDims, options: MapperOptions,
             given: LayerMapping | None = None) -> MappingCost:
        """The best mapping of `layer` on `unit` under `options` (and a user's `given` choices), searched once."""
        choices = None if given is None else given.model_dump(exclude={"layer", "unit", "chip"})
        key = (layer, unit_key(hw, chip, unit), options, None if choices is None else repr(sorted(choices.items())))
        found = self.entries.get(key)
        if found is not None:
            self.hits += 1
            return found
        self.misses += 1
        found = self.entries[key] = search_mapping(hw, chip, unit, layer, options, given)
        return found


def map_graph(hw: HwSpec, graph: Graph, unit: Unit, options: MapperOptions | None = None,
              cache: MappingCache | None = None, chip: Chip | None = None) -> dict[int, MappingCost]:
    """The best mapping of every node `unit` can run, by node id in node order."""
    chip = chip or hw.chips[0]
    options = options or MapperOptions()
    cache = cache if cache is not None else MappingCache()
    return {node.id: cache.best(hw, chip, unit, layer_dims(graph, node), options)
            for node in graph.nodes if not node.is_leaf and can_run(unit, graph, node)}
