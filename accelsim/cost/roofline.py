"""Roofline facts of a hardware description (seed 001): peak ops/s, memory bandwidths, ridge points."""
from __future__ import annotations

from dataclasses import dataclass

from accelsim.cost.model import NodeCost, peak_ops_per_cycle
from accelsim.hw.spec import Chip, HwSpec, Unit


def unit_peak_ops_per_s(hw: HwSpec, unit: Unit) -> float:
    """All instances of a unit kind together."""
    return peak_ops_per_cycle(unit) * unit.count * hw.clock_hz


def chip_peak_ops_per_s(hw: HwSpec, chip: Chip | None = None) -> float:
    """T_peak of one chip: the sum over its arithmetic units (arrays and vector units)."""
    return sum(unit_peak_ops_per_s(hw, u) for u in (chip or hw.chips[0]).units)


@dataclass(frozen=True)
class Roof:
    memory: str
    bandwidth_bytes_per_s: float
    ridge_ops_per_byte: float  # below this arithmetic intensity a node is memory-bound


def roofs(hw: HwSpec, chip: Chip | None = None) -> list[Roof]:
    """One roof per memory level: P = min(T_peak, beta * I), ridge at I = T_peak / beta."""
    chip = chip or hw.chips[0]
    peak = chip_peak_ops_per_s(hw, chip)
    out = []
    for m in chip.memories:
        beta = m.bytes_per_cycle(hw.clock_hz) * hw.clock_hz
        out.append(Roof(m.name, beta, peak / beta))
    return out


@dataclass(frozen=True)
class UnitRoof:
    """The compute roof of one unit kind of a chip: `node_peak_ops_per_s` is what one node can reach on it
    (one instance, or the whole gang of a gang unit: cost.model.node_cost's peak), `peak_ops_per_s` what all
    `instances` together can (unit_peak_ops_per_s)."""

    unit: str
    compute_model: str
    instances: int
    node_peak_ops_per_s: float
    peak_ops_per_s: float


def unit_roofs(hw: HwSpec, chip: Chip | None = None) -> list[UnitRoof]:
    """One roof per unit kind of `chip` (default: the first) with an arithmetic peak (arrays and vector
    units; stream and per-element units have none), in the order of the hardware file."""
    out = []
    for u in (chip or hw.chips[0]).units:
        per_instance = peak_ops_per_cycle(u) * hw.clock_hz
        if per_instance > 0:
            out.append(UnitRoof(u.name, u.compute_model, u.count, per_instance * (u.count if u.gang else 1),
                                unit_peak_ops_per_s(hw, u)))
    return out


def achieved_ops_per_s(hw: HwSpec, cost: NodeCost) -> float:
    return cost.flops / (cost.cycles / hw.clock_hz)
