"""The mappings a schedule records (NodeMapping): for each (node, unit) of a unit that searches mappings, the
mapping the compiler chose, as pure data (accelsim.mapping.record.Mapping's fields and the layer's loop bounds);
schedule/mapping_check.py validates them against the graph and hardware."""
from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from accelsim.graph.ir import Node
from accelsim.mapping.dims import LayerDims
from accelsim.mapping.entry import Dataflow, LayerMapping, Name
from accelsim.mapping.record import Mapping


class NodeMapping(BaseModel):
    """The mapping the compiler chose for node `node` (named `layer`) on unit `unit` of chip `chip` (the first
    chip of its kind; chips of one kind share it): the layer's loop bounds `dims` (name, extent, in the
    layer's order) and the mapping (accelsim.mapping.record.Mapping's fields)."""

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)

    node: int = Field(ge=0)
    layer: Name = Field(min_length=1)
    chip: int = Field(ge=0)
    unit: Name = Field(min_length=1)
    dims: tuple[tuple[Name, int], ...]
    dataflow: Dataflow
    rows: tuple[Name, ...]
    cols: tuple[Name, ...]
    stream: tuple[tuple[Name, int], ...]
    order: tuple[Name, ...]

    def as_given(self) -> LayerMapping:
        """This mapping as a complete user entry for its layer, unit and chip (what replays it)."""
        return LayerMapping(layer=self.layer, unit=self.unit, chip=self.chip, dataflow=self.dataflow, rows=self.rows,
                            cols=self.cols, stream=self.stream, order=self.order)


def node_mapping(node: Node, chip: int, unit: str, layer: LayerDims, mapping: Mapping) -> NodeMapping:
    """The schedule's record of `mapping`, chosen for `node` on `unit` of chip `chip`."""
    return NodeMapping(node=node.id, layer=node.name, chip=chip, unit=unit,
                       dims=tuple((d.name, d.size) for d in layer.dims), dataflow=mapping.dataflow,
                       rows=tuple(mapping.rows), cols=tuple(mapping.cols),
                       stream=tuple((d, int(t)) for d, t in mapping.stream), order=tuple(mapping.order))
