"""Silicon area of a hardware description, component by component: HwSpec -> mm^2 per unit, operand
buffers, memory and link, per chip and for the whole machine. An explicit `area_mm2` wins; otherwise it
is derived from the chip's `technology_nm` through hw/tech.py's published figures; otherwise unknown (None).

What is derived:
- a unit's datapath, as MACs (one multiplier and one adder at its precision) times tech.mac_area_um2; its
  compute model counts them (hw/compute.py macs): an array has rows x cols MACs; a vector unit
  lanes x ops_per_lane_per_cycle / 2 (a MAC is 2 ops); a per-element unit one MAC per element per cycle
  (1 / cycles_per_element); a model without an arithmetic datapath (a stream unit: a switch, a DMA
  engine) gets 0.
- SRAM, caches and operand buffers: capacity in bits x the node's bit cell / the array efficiency.
- DRAM and HBM are other dies: 0 mm^2 on this one. Input/output buffers have no capacity: 0.
- links: 0 unless the interconnect gives area_mm2 (per link, both ends), counted once per link.
NOT counted anywhere: wiring and global interconnect, control and instruction logic, clock trees, I/O PHYs
(PCIe, DRAM interfaces, SerDes) unless given, PE pipeline registers and accumulators beyond the MAC's
adder, test and power-management logic, and the white space of a floor plan. A modelled area is a floor
of the die, not an estimate of it.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from accelsim.hw import tech
from accelsim.hw.spec import Chip, HwSpec, Memory, Unit

Source = Literal["explicit", "derived", "off-die", "none"]


@dataclass(frozen=True)
class AreaItem:
    """One component of a chip: `count` copies of `each_mm2` (None: unknown), and where the number comes from."""

    component: str  # "unit", "operand_buffers", "memory"
    name: str
    count: int
    each_mm2: float | None
    source: Source

    @property
    def total_mm2(self) -> float | None:
        return None if self.each_mm2 is None else self.each_mm2 * self.count


def unit_item(hw: HwSpec, chip: Chip, unit: Unit) -> AreaItem:
    if unit.area_mm2 is not None:
        return AreaItem("unit", unit.name, unit.count, unit.area_mm2, "explicit")
    if not unit.model.has_datapath:
        return AreaItem("unit", unit.name, unit.count, 0.0, "none")
    if chip.technology_nm is None:
        return AreaItem("unit", unit.name, unit.count, None, "none")
    each = unit.model.macs() * tech.mac_area_um2(hw.precision(unit), chip.technology_nm) * 1e-6
    return AreaItem("unit", unit.name, unit.count, each, "derived")


def operand_buffers_item(chip: Chip, unit: Unit) -> AreaItem | None:
    b = unit.operand_buffers
    if b is None:
        return None
    if b.area_mm2 is not None:
        return AreaItem("operand_buffers", unit.name, unit.count, b.area_mm2, "explicit")
    if chip.technology_nm is None:
        return AreaItem("operand_buffers", unit.name, unit.count, None, "none")
    capacity = b.input_bytes + b.weight_bytes + b.output_bytes
    return AreaItem("operand_buffers", unit.name, unit.count, tech.sram_area_mm2(capacity, chip.technology_nm),
                    "derived")


def memory_item(chip: Chip, memory: Memory) -> AreaItem:
    if memory.area_mm2 is not None:
        return AreaItem("memory", memory.name, 1, memory.area_mm2, "explicit")
    if memory.kind in ("dram", "hbm"):
        return AreaItem("memory", memory.name, 1, 0.0, "off-die")
    if chip.technology_nm is None:
        return AreaItem("memory", memory.name, 1, None, "none")
    return AreaItem("memory", memory.name, 1, tech.sram_area_mm2(memory.capacity_bytes, chip.technology_nm),
                    "derived")


def chip_items(hw: HwSpec, chip: Chip) -> list[AreaItem]:
    """Every component of one copy of `chip`: units (with their operand buffers), then memories."""
    items: list[AreaItem] = []
    for u in chip.units:
        items.append(unit_item(hw, chip, u))
        ob = operand_buffers_item(chip, u)
        if ob is not None:
            items.append(ob)
    return items + [memory_item(chip, m) for m in chip.memories]


def chip_area_mm2(hw: HwSpec, chip: Chip) -> float | None:
    """One copy of `chip`, mm^2; None if any component's area is unknown."""
    totals = [i.total_mm2 for i in chip_items(hw, chip)]
    return None if any(t is None for t in totals) else sum(totals)


def link_count(hw: HwSpec) -> int:
    """Links between the machine's chips: a ring of n has n (one for 2 chips), a fully connected set n(n-1)/2."""
    n = hw.n_chips
    if hw.interconnect is None or n < 2:
        return 0
    if hw.interconnect.topology == "fully_connected":
        return n * (n - 1) // 2
    return 1 if n == 2 else n


def machine_area_mm2(hw: HwSpec) -> float | None:
    """Every chip described (each copy, idle or not) plus the links' given areas, mm^2; None if unknown."""
    chips = [chip_area_mm2(hw, c) for c in hw.chips]
    if any(a is None for a in chips):
        return None
    links = link_count(hw) * ((hw.interconnect.area_mm2 or 0.0) if hw.interconnect is not None else 0.0)
    return sum(a * c.count for a, c in zip(chips, hw.chips)) + links
