"""Effective energy figures of a hardware description: pJ per op of each unit, pJ per byte of each memory,
buffer and link; an explicit figure in the file wins, else it is derived from the chip's `technology_nm`
through the published table and scaling rule of hw/tech.py, else there is none (None).

Derivations:
- unit: one multiply and one add per MAC at the precision the step computes in (op_precision: a step
  precision's table figures, tech.STEP_DATAPATH, fp32 for update nodes under mixed precision; without a
  step precision, the unit's own, HwSpec.precision), and the cost model counts a MAC as 2 ops (OpDef.flops),
  so an op costs (mult + add) / 2. Vector and per-element units are
  charged the same per op. A unit whose compute model has no arithmetic datapath (a stream unit) costs
  0 pJ per op (its bytes are charged at the memories). An int8 array's wider (32-bit) accumulation adds
  are not in Horowitz's int8 MAC and are not counted.
- SRAM and cache: a 64-bit access of an array of the memory's capacity (tech.sram_pj_per_64b) / 8 per byte.
- DRAM and HBM: the device's published energy per bit (not scaled with the chip's node).
- operand buffers: an SRAM access at the three buffers' mean capacity (the traffic models count their
  accesses together).
- input/output buffers: only an explicit figure (they have no capacity to derive one from): 0 otherwise.
- links: an assumed SerDes figure (tech.SERIAL_LINK_PJ_PER_BIT) when every chip has a technology_nm.
- static power (chip_static_power): each component's modelled area (cost/area.py) at tech's leakage per mm^2
  of logic (a unit's datapath) or SRAM (memories, operand buffers), and DRAM and HBM at tech's background
  power per GiB; a component of unknown area has none. sim/energy.py charges it over the makespan.
Clocks, control and wires are not counted.
"""
from __future__ import annotations

from dataclasses import dataclass

from accelsim.cost.area import chip_items
from accelsim.hw import tech
from accelsim.hw.peaks import MASTER_BYTES, STORAGE_BYTES
from accelsim.hw.spec import Chip, HwSpec, Memory, OperandBuffers, Unit


@dataclass(frozen=True, slots=True)
class StaticPower:
    """The leakage (or DRAM background) power of one component of one copy of a chip: `component` is
    "unit", "operand_buffers" or "memory" (cost/area.py's AreaItem.component), `name` the unit's or memory's."""

    component: str
    name: str
    power_w: float


def op_precision(hw: HwSpec, unit: Unit, phase: str = "forward") -> str | None:
    """The step precision an op of `phase` on `unit` computes in (hw/precision.py): none without a step
    precision (the unit's own datapath then), fp32 for an update node under mixed precision (the optimizer's
    arithmetic runs on the fp32 master) and for a tf32 step's work outside GEMM units (TF32 is a Tensor Core
    input format: elementwise work computes in fp32), the step's precision for the rest."""
    p = hw.step_precision
    if p is None:
        return None
    if phase == "update" and STORAGE_BYTES[p] < MASTER_BYTES:
        return "fp32"
    if p == "tf32" and not unit.model.gemm_only:
        return "fp32"
    return p


def unit_pj_per_op(hw: HwSpec, chip: Chip, unit: Unit, phase: str = "forward") -> float | None:
    """Energy of one op of `phase` on `unit` of `chip`, pJ, at the precision the step computes in
    (op_precision; the unit's own without a step precision); None without an explicit figure or a
    technology node."""
    if unit.energy_pj_per_op is not None:
        return unit.energy_pj_per_op
    if chip.technology_nm is None:
        return None
    if not unit.model.has_datapath:
        return 0.0
    step = op_precision(hw, unit, phase)
    if step is not None:
        return tech.step_mac_energy_pj(step, chip.technology_nm) / 2
    return tech.mac_energy_pj(hw.precision(unit), chip.technology_nm) / 2


def memory_pj_per_byte(chip: Chip, memory: Memory) -> float | None:
    """Energy of one byte read or written in `memory`, pJ."""
    if memory.energy_pj_per_byte is not None:
        return memory.energy_pj_per_byte
    if memory.kind in ("dram", "hbm"):
        return tech.dram_pj_per_byte(memory.kind) if chip.technology_nm is not None else None
    if chip.technology_nm is None:
        return None
    return tech.sram_pj_per_byte(memory.capacity_bytes, chip.technology_nm)


def operand_buffers_pj_per_byte(chip: Chip, buffers: OperandBuffers) -> float | None:
    """Energy of one byte moved between an array and its operand SRAMs, pJ."""
    if buffers.energy_pj_per_byte is not None:
        return buffers.energy_pj_per_byte
    if chip.technology_nm is None:
        return None
    mean = (buffers.input_bytes + buffers.weight_bytes + buffers.output_bytes) // 3
    return tech.sram_pj_per_byte(max(mean, 1), chip.technology_nm)


def link_pj_per_byte(hw: HwSpec) -> float | None:
    """Energy of one byte over one link between chips, pJ; None without an interconnect or figures."""
    ic = hw.interconnect
    if ic is None:
        return None
    if ic.energy_pj_per_byte is not None:
        return ic.energy_pj_per_byte
    if all(c.technology_nm is not None for c in hw.chips):
        return tech.link_pj_per_byte()
    return None


def node_energy_pj(hw: HwSpec, chip: Chip, unit: Unit, flops: int, bytes_read: int, bytes_written: int,
                   buffer_bytes: int, phase: str = "forward") -> float | None:
    """flops x pJ/op + each byte at its memory's (and buffer's) pJ/byte; None when the unit has no figure.
    Operands come from the unit's first `reads` memory and results go to its first `writes` memory, as
    the cost model streams them: a per-node estimate for the scheduler. A step's energy charges each byte
    where the placement put it instead (sim/energy.py), and takes from this only what stays inside the unit."""
    per_op = unit_pj_per_op(hw, chip, unit, phase)
    if per_op is None:
        return None
    energy = flops * per_op
    for name, buffer, nbytes in ((unit.reads[0], unit.input_buffer, bytes_read),
                                 (unit.writes[0], unit.output_buffer, bytes_written)):
        energy += nbytes * (memory_pj_per_byte(chip, chip.memory(name)) or 0.0)
        if buffer is not None:
            energy += nbytes * (buffer.energy_pj_per_byte or 0.0)
    if unit.operand_buffers is not None:
        energy += buffer_bytes * (operand_buffers_pj_per_byte(chip, unit.operand_buffers) or 0.0)
    return energy


def chip_static_power(hw: HwSpec, chip: Chip) -> tuple[StaticPower, ...]:
    """Static power of each component of one copy of `chip`, W, in cost/area.py's order (units with their
    operand buffers, then memories); components of unknown area are left out."""
    out = []
    kinds = {m.name: m.kind for m in chip.memories}
    for item in chip_items(hw, chip):
        if item.component == "memory" and kinds[item.name] in ("dram", "hbm"):  # another die: by capacity
            watts = tech.dram_static_w(chip.memory(item.name).capacity_bytes)
        elif item.total_mm2 is None:
            continue
        elif item.component == "unit":
            watts = tech.logic_static_w(item.total_mm2)
        else:
            watts = tech.sram_static_w(item.total_mm2)
        out.append(StaticPower(item.component, item.name, watts))
    return tuple(out)
