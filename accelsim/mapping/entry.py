"""The mapping a user gives for one layer on one unit (LayerMapping): every choice optional, what is left out is
searched. Pure data (pydantic, as it comes from a file or the step options); mapping/given.py applies it to the
mapper, schedule/mapping_file.py reads and writes it."""
from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

Dataflow = Literal["os", "ws", "is"]
Name = str
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
