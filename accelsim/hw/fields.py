"""The physical range of every kind of number in a hardware description (RANGES) and the pydantic field
types that enforce them and describe them in the JSON Schema (hw/schema.py), plus Spec, the frozen,
unknown-key-refusing base of every description class.
Shared by hw/spec.py and hw/compute.py (the compute models), so that compute.py need not import spec.py,
which imports it.
"""
from __future__ import annotations

from typing import Annotated, Any

from pydantic import BaseModel, BeforeValidator, ConfigDict, WithJsonSchema

from accelsim.hw.quantity import (HZ_UNIT, MAX_QUANTITY_CHARS, SIZE_UNIT, parse_bandwidth, parse_bytes, parse_hz,
                                  pattern)
from accelsim.hw.ranges import Range, in_range


# One row per kind of quantity: inclusive bounds and why they are where they are. Bounds are generous
# (real machines sit orders of magnitude inside them); they exist to refuse values that are not physical.
RANGES: dict[str, Range] = {
    "clock_hz": Range(1e3, 1e11, "Hz", why=(
        "1 kHz (slower clocked logic is not worth simulating) to 100 GHz (beyond any CMOS chip); time is "
        "counted in whole cycles of this clock, so a 1e-300 Hz clock makes every duration infinite")),
    "bytes_per_cycle": Range(1e-3, 1e9, "bytes per cycle", why=(
        "one byte per thousand cycles (a slow serial link at a fast clock) to 1 GB per cycle (10^4 x the "
        "widest on-chip fabric: 80 TB/s at 1 GHz is 8e4); a denormal such as 1e-320 divides to inf")),
    "bytes_per_s": Range(1e3, 1e18, "bytes/s", why=(
        "1 kB/s to 1 EB/s; converted with the clock, the result must also lie in bytes_per_cycle's range")),
    "capacity_bytes": Range(1, 2**60, "bytes", integer=True, why=(
        "1 byte to 1 EiB (2^60), above any single memory; offsets are whole bytes")),
    "latency_cycles": Range(0, 10**9, "cycles", integer=True, why=(
        "0 to 1e9 cycles, one second at 1 GHz (a datacenter round trip is ~1e4 cycles)")),
    "unit_count": Range(1, 4096, "instances", integer=True, why=(
        "1 to 4096 identical instances of one unit kind (an A100 has 432 Tensor Cores); the scheduler "
        "tracks every instance")),
    "unit_instances_per_chip": Range(1, 16384, "unit instances per chip", integer=True, why=(
        "all unit kinds of a chip together, 4x a count of 4096")),
    "chip_count": Range(1, 4096, "chips", integer=True, why=(
        "1 to 4096 copies of one chip description (a pod-scale machine: Megatron-LM's 1T model ran on "
        "3,072 A100s, `--hw a100_superpod --hw-set chips.0.count=3072`)")),
    "total_chips": Range(1, 4096, "chips", integer=True, why=(
        "the machine as a whole; collectives and transfers are planned per chip")),
    "chips_per_node": Range(1, 1024, "chips per node", integer=True, why=(
        "the chips inside one node of a two-level machine (8 in a DGX A100), at most the whole machine")),
    "array_dim": Range(1, 65536, "rows or columns", integer=True, why=(
        "a systolic array side; TPUs use 128-256, 65536 is far beyond any die")),
    "lanes": Range(1, 65536, "lanes", integer=True, why="a vector unit's width, as an array side"),
    "preload_rows_per_cycle": Range(1, 65536, "rows per cycle", integer=True, why=(
        "a stationary tile's install rate: 1 (a shift chain) up to a whole array side per cycle")),
    "ops_per_lane_per_cycle": Range(1e-3, 1024, "ops per lane per cycle", why=(
        "from one op per thousand cycles (a multi-cycle divider) to 1024 (a deep ALU cluster per lane; "
        "Groq's VXM has 16)")),
    "cycles_per_element": Range(1e-6, 1e6, "cycles per element", why=(
        "a million elements per cycle to a million cycles per element")),
    "bytes_per_element": Range(1, 16, "bytes", integer=True, why=(
        "int8 (1) to a complex128 or fp128 (16) storage format")),
    "energy_pj": Range(0, 1e6, "pJ", min_nonzero=1e-6, why=(
        "0 to 1 uJ per byte or op, 4 orders of magnitude above an off-chip access (~100 pJ/byte); a nonzero "
        "energy below 1e-6 pJ (300x the Landauer limit per bit) is a typo or a denormal")),
    "area_mm2": Range(0, 1e5, "mm^2", min_nonzero=1e-9, why=(
        "0 (nothing on the die) to 1e5 mm^2, 100x a wafer-scale engine's 46,225 mm^2; a nonzero area below "
        "1e-9 mm^2 (1e-3 um^2, smaller than one transistor) is a typo or a denormal")),
}


def _check(kind: str, parse: Any = None) -> BeforeValidator:
    return BeforeValidator(in_range(RANGES[kind], parse))


def _schema(kind: str, written: tuple[str, str] | None = None) -> WithJsonSchema:
    """The JSON Schema of one kind of quantity (`accelsim hw schema`): a number in the kind's range, or a
    string: the number as text (YAML 1.1 reads `1e3` as one) or, with `written` (pattern, description),
    the number with a unit."""
    rng = RANGES[kind]
    number = {"type": "integer" if rng.integer else "number", "minimum": rng.lo, "maximum": rng.hi,
              "description": rng.describe().removeprefix("expected ")}
    regex, text = written or (pattern(), "the same number written as a string")
    string = {"type": "string", "pattern": regex, "maxLength": MAX_QUANTITY_CHARS, "description": text}
    return WithJsonSchema({"anyOf": [number, string]})


_SIZE = (pattern(SIZE_UNIT), "a size with its unit: '24 MiB', '1.5 GB'; B is a byte and b a bit, so '32 Mb' is "
                             "4,000,000 bytes; a plain number is bytes")
_RATE = (pattern(SIZE_UNIT, "/s"), "a bandwidth with its unit: '34 GB/s', '1.5 TiB/s'; B is a byte and b a bit, "
                                  "so '200 Gb/s' is 25e9 bytes/s; a plain number is bytes/s")
_FREQUENCY = (pattern(HZ_UNIT), "a frequency with its unit: '700 MHz', '1.25 GHz'; a plain number is Hz")

Hertz = Annotated[float, _check("clock_hz", parse_hz), _schema("clock_hz", _FREQUENCY)]
BytesPerCycle = Annotated[float, _check("bytes_per_cycle"), _schema("bytes_per_cycle")]
BytesPerSecond = Annotated[float, _check("bytes_per_s", parse_bandwidth), _schema("bytes_per_s", _RATE)]
CapacityBytes = Annotated[int, _check("capacity_bytes", parse_bytes), _schema("capacity_bytes", _SIZE)]
LatencyCycles = Annotated[int, _check("latency_cycles"), _schema("latency_cycles")]
UnitCount = Annotated[int, _check("unit_count"), _schema("unit_count")]
ChipCount = Annotated[int, _check("chip_count"), _schema("chip_count")]
ChipsPerNode = Annotated[int, _check("chips_per_node"), _schema("chips_per_node")]
ArrayDim = Annotated[int, _check("array_dim"), _schema("array_dim")]
Lanes = Annotated[int, _check("lanes"), _schema("lanes")]
PreloadRate = Annotated[int, _check("preload_rows_per_cycle"), _schema("preload_rows_per_cycle")]
OpsPerLane = Annotated[float, _check("ops_per_lane_per_cycle"), _schema("ops_per_lane_per_cycle")]
CyclesPerElement = Annotated[float, _check("cycles_per_element"), _schema("cycles_per_element")]
BytesPerElement = Annotated[int, _check("bytes_per_element"), _schema("bytes_per_element")]
Energy = Annotated[float, _check("energy_pj"), _schema("energy_pj")]
AreaMm2 = Annotated[float, _check("area_mm2"), _schema("area_mm2")]


class Spec(BaseModel):
    """Every class of a hardware description: frozen (a description is a value), unknown keys refused."""

    model_config = ConfigDict(extra="forbid", frozen=True)
