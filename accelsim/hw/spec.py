"""Hardware description (pydantic v2, strict): chips of functional units and memories, an interconnect.

Quantities carry their unit in the field name (`capacity_bytes`, `clock_hz`, `bandwidth_bytes_per_cycle`)
and accept readable strings ("24 MiB", "700 MHz", "34 GB/s") where the unit is per second.
"""
from __future__ import annotations

import difflib
from typing import Annotated, Any, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, model_validator

from accelsim.graph.ir import NUMPY_BYTES
from accelsim.hw.quantity import parse_bandwidth, parse_bytes, parse_hz
from accelsim.ops.registry import CATEGORIES, OPS

Bytes = Annotated[float, BeforeValidator(parse_bytes), Field(gt=0)]
BytesPerSecond = Annotated[float, BeforeValidator(parse_bandwidth), Field(gt=0)]
Hertz = Annotated[float, BeforeValidator(parse_hz), Field(gt=0)]
PositiveInt = Annotated[int, Field(gt=0)]
Cycles = Annotated[int, Field(ge=0)]
PositiveFloat = Annotated[float, Field(gt=0)]
Energy = Annotated[float, Field(ge=0)]
DATAFLOWS = ("os", "ws", "is")
UNIT_CATEGORIES = tuple(c for c in CATEGORIES if c != "leaf")


class Spec(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Bandwidth(Spec):
    """Give exactly one of bytes per cycle or bytes per second ("34 GB/s")."""

    bandwidth_bytes_per_cycle: PositiveFloat | None = None
    bandwidth_bytes_per_s: BytesPerSecond | None = None

    @model_validator(mode="after")
    def _exactly_one_bandwidth(self) -> "Bandwidth":
        if (self.bandwidth_bytes_per_cycle is None) == (self.bandwidth_bytes_per_s is None):
            raise ValueError("give exactly one of bandwidth_bytes_per_cycle and bandwidth_bytes_per_s")
        return self

    def bytes_per_cycle(self, clock_hz: float) -> float:
        if self.bandwidth_bytes_per_cycle is not None:
            return self.bandwidth_bytes_per_cycle
        return self.bandwidth_bytes_per_s / clock_hz


class Buffer(Bandwidth):
    """A unit's dedicated input or output buffer."""

    capacity_bytes: Bytes
    energy_pj_per_byte: Energy | None = None


class Memory(Bandwidth):
    """Shared storage on a chip: on-chip SRAM, a cache, or off-chip DRAM/HBM."""

    name: str
    kind: Literal["sram", "cache", "dram", "hbm"]
    capacity_bytes: Bytes
    latency_cycles: Cycles = 0
    energy_pj_per_byte: Energy | None = None


class SystolicArray(Spec):
    rows: PositiveInt
    cols: PositiveInt
    dataflow: Literal["os", "ws", "is"]


class VectorLanes(Spec):
    lanes: PositiveInt
    ops_per_lane_per_cycle: PositiveFloat = 1.0


class PerElement(Spec):
    cycles_per_element: PositiveFloat


class Stream(Spec):
    """Data movement at a fixed rate (a switch, DMA engine or shifter)."""

    bytes_per_cycle: PositiveFloat


class Unit(Spec):
    """A functional unit kind: what it runs (ops and/or categories, optionally only when node attributes
    match `when`), how fast (exactly one compute model), with `count` identical instances."""

    name: str
    ops: list[str] = []
    categories: list[Literal["elementwise", "tensor", "reduction", "data_movement"]] = []
    when: dict[str, Any] = {}
    count: PositiveInt = 1
    gang: bool = False  # instances work together on each node (intra-operator parallelism, e.g. a GPU's SMs)
    array: SystolicArray | None = None
    vector: VectorLanes | None = None
    per_element: PerElement | None = None
    stream: Stream | None = None
    latency_cycles: Cycles = 0
    reads: list[str]
    writes: list[str]
    input_buffer: Buffer | None = None
    output_buffer: Buffer | None = None
    energy_pj_per_op: Energy | None = None

    @model_validator(mode="after")
    def _check(self) -> "Unit":
        models = [k for k in ("array", "vector", "per_element", "stream") if getattr(self, k) is not None]
        if len(models) != 1:
            raise ValueError(f"unit {self.name!r}: give exactly one compute model of array, vector, "
                             f"per_element, stream (got {models or 'none'})")
        if not self.ops and not self.categories:
            raise ValueError(f"unit {self.name!r}: give the ops and/or op categories it executes")
        for op in self.ops:
            if op not in OPS or OPS[op].category == "leaf":
                close = difflib.get_close_matches(op, [o for o in OPS if OPS[o].category != "leaf"], n=3)
                hint = f"; did you mean {', '.join(close)}?" if close else ""
                raise ValueError(f"unit {self.name!r}: unknown op {op!r}{hint}")
        if not self.reads or not self.writes:
            raise ValueError(f"unit {self.name!r}: name the memories it reads and writes")
        return self

    @property
    def compute_model(self) -> str:
        return next(k for k in ("array", "vector", "per_element", "stream") if getattr(self, k) is not None)


class Link(Spec):
    """A direct path between two units or memories of a chip (e.g. one unit's output buffer
    feeding the next unit's input buffer in a bespoke pipeline)."""

    src: str
    dst: str
    bandwidth_bytes_per_cycle: PositiveFloat
    latency_cycles: Cycles = 0


class Chip(Spec):
    name: str = "chip"
    count: PositiveInt = 1
    units: list[Unit]
    memories: list[Memory]
    links: list[Link] = []

    @model_validator(mode="after")
    def _names_resolve(self) -> "Chip":
        _unique("unit", [u.name for u in self.units])
        _unique("memory", [m.name for m in self.memories])
        memories = {m.name for m in self.memories}
        for u in self.units:
            for m in (*u.reads, *u.writes):
                if m not in memories:
                    raise ValueError(f"unit {u.name!r} names memory {m!r}, which chip {self.name!r} does not "
                                     f"have (memories: {', '.join(sorted(memories))})")
        endpoints = memories | {u.name for u in self.units}
        for link in self.links:
            for end in (link.src, link.dst):
                if end not in endpoints:
                    raise ValueError(f"link {link.src}->{link.dst}: no unit or memory {end!r} on chip "
                                     f"{self.name!r} (known: {', '.join(sorted(endpoints))})")
        return self


class Interconnect(Bandwidth):
    """Links between chips; the bandwidth is per link and direction."""

    topology: Literal["ring", "fully_connected"]
    link_latency_cycles: Cycles = 0
    energy_pj_per_byte: Energy | None = None


class HwSpec(Spec):
    """A whole machine. `bytes_per_element` maps the graph's dtypes to the precision the hardware
    stores and computes in (e.g. float32 -> 1 for an int8 array)."""

    name: str
    description: str = ""
    clock_hz: Hertz
    bytes_per_element: dict[Literal["float32", "float64", "int64"], PositiveInt] = \
        dict(NUMPY_BYTES)
    chips: list[Chip] = Field(min_length=1)
    interconnect: Interconnect | None = None

    @model_validator(mode="after")
    def _interconnect_when_several_chips(self) -> "HwSpec":
        if self.n_chips > 1 and self.interconnect is None:
            raise ValueError(f"{self.n_chips} chips need an interconnect (topology, link bandwidth, latency)")
        return self

    @property
    def n_chips(self) -> int:
        return sum(c.count for c in self.chips)

    def elem_bytes(self, dtype: str) -> int:
        return self.bytes_per_element.get(dtype, NUMPY_BYTES[dtype])


def _unique(what: str, names: list[str]) -> None:
    seen = set()
    for n in names:
        if n in seen:
            raise ValueError(f"two {what}s are named {n!r}")
        seen.add(n)
