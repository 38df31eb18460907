"""Mappings as data: the mapping a user gives for a layer on a unit (LayerMapping, every choice optional: what is
left out is searched) and the mapping a schedule records for each (node, unit) the mapper chose for
(NodeMapping). Pure data, so that the step options and the schedule can hold them; accelsim/mapping/ costs
and checks them against the layer and the unit (a mapping's meaning is accelsim.mapping.record's)."""
from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

Dataflow = Literal["os", "ws", "is"]
Name = str
StreamTiles = tuple[tuple[Name, int], ...]
MAX_TILE = 2**40
"""No layer dimension is near this; a larger stream tile is a typo, refused before any product is formed."""


class LayerMapping(BaseModel):
    """A mapping given for layer `layer` (a node's name) on unit `unit`: the fields given fix those choices,
    the rest (None) are searched. Given all of dataflow, rows, cols and stream (order optional), it is used
    as is. `chip`: only on that chip (None: every chip that has the unit)."""

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)

    layer: Name = Field(min_length=1)
    unit: Name = Field(min_length=1)
    chip: int | None = Field(default=None, ge=0)
    dataflow: Dataflow | None = None
    rows: tuple[Name, ...] | None = None
    cols: tuple[Name, ...] | None = None
    stream: tuple[tuple[Name, int], ...] | None = None
    order: tuple[Name, ...] | None = None

    @property
    def complete(self) -> bool:
        """Every choice given: the mapping is used as is (its order canonical where left out)."""
        return None not in (self.dataflow, self.rows, self.cols, self.stream)

    def given(self) -> tuple[str, ...]:
        """The choices this entry fixes, by field name."""
        return tuple(k for k in ("dataflow", "rows", "cols", "stream", "order") if getattr(self, k) is not None)


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
