"""Published energy and area figures (arithmetic, SRAM, DRAM, links) and the rule that carries them from the
node they were measured at to another: the table cost/energy.py and cost/area.py derive every figure from.

Every row names its source. "(recalled, not rechecked)" marks a figure taken from memory of the cited work
that could not be checked against a copy of it here; "verified via ..." names what it was checked against;
"assumption:" marks a number no publication gives. A figure is never tuned to a result.

Scaling rule (from the 45 nm, 0.9 V of Horowitz's table to a node of L nm at supply V(L), NODES below):
- Logic area scales with the square of the feature size: A(L) = A45 * (L / 45)^2. Justification: Dennard
  scaling of both layout dimensions. Limits: below ~16 nm "node names" stopped being gate lengths and
  logic density grew less (or more) than (45/L)^2, so areas at 7 and 5 nm are indicative only.
- Dynamic energy is C V^2 per transition with switched capacitance C proportional to L:
  E(L) = E45 * (L / 45) * (V(L) / 0.9)^2. Limits: it ignores leakage (static power has its own figures,
  below), wire capacitance that scales worse than L, and voltages that vary by product.
- SRAM area is read from the bit-cell table at the node itself (published high-density 6T cells; no
  scaling), divided by SRAM_ARRAY_EFFICIENCY for the macro's periphery. A node not in NODES is refused with
  the list of known ones rather than interpolated: cell sizes do not follow any smooth rule between nodes.
- SRAM access energy comes from Horowitz's 64-bit reads of 8 KB, 32 KB and 1 MB arrays, interpolated
  log-log in capacity; smaller arrays cost the 8 KB figure (the table has nothing cheaper) and larger
  ones are taken as banks of 1 MiB, so one access costs the 1 MB figure. It is then scaled by node like
  logic (it is charging of bit lines and wires, C V^2).
- DRAM and HBM access energy is the memory device's own (its process and interface), so it does not scale
  with the logic node of the chip that reads it.
- Static (leakage) power is per mm^2 of modelled silicon (logic datapaths, SRAM arrays) and per GiB of DRAM
  or HBM (precharge-standby background power), the same at every node: finer nodes pack more transistors per
  mm^2 but FinFETs leak less per transistor, and no publication at hand gives a per-node rule. The DRAM
  figure is a DDR4 data sheet's IDD2N; the logic and SRAM figures are assumptions (STATIC_POWER below, each
  saying what was searched); a sweep compares designs by them, it does not predict a chip's idle power.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal, get_args

Precision = Literal["int8", "int16", "int32", "fp16", "fp32"]
PRECISIONS: tuple[str, ...] = get_args(Precision)
BASE_NM = 45
BASE_VDD_V = 0.9

HOROWITZ = ('M. Horowitz, "Computing\'s energy problem (and what we can do about it)", ISSCC 2014, '
            "45 nm, 0.9 V")


@dataclass(frozen=True)
class Figure:
    """One number with its unit and where it comes from."""

    value: float
    unit: str
    source: str


@dataclass(frozen=True)
class OpFigure:
    """One arithmetic operation at 45 nm, 0.9 V: its energy and the area of the circuit doing it."""

    precision: str
    op: Literal["add", "mult"]
    energy_pj: float
    area_um2: float
    source: str


_CHECKED_E = (" (energy verified via the TPU paper's ratios, int8 vs fp16: 'six times less' multiply, "
              "'thirteen times less' add, and secondary tables quoting Horowitz; area recalled, not rechecked)")
_CHECKED_32 = (" (energy verified via a table quoting Horowitz, PMC8934428 Table 3; area recalled, not "
               "rechecked)")
_RECALLED = " (recalled, not rechecked)"
ARITHMETIC_45NM: dict[tuple[str, str], OpFigure] = {(f.precision, f.op): f for f in (
    OpFigure("int8", "add", 0.03, 36, HOROWITZ + _CHECKED_E),
    OpFigure("int16", "add", 0.05, 67, HOROWITZ + _RECALLED),
    OpFigure("int32", "add", 0.1, 137, HOROWITZ + _CHECKED_32),
    OpFigure("fp16", "add", 0.4, 1360, HOROWITZ + _CHECKED_E),
    OpFigure("fp32", "add", 0.9, 4184, HOROWITZ + _CHECKED_32),
    OpFigure("int8", "mult", 0.2, 282, HOROWITZ + _CHECKED_E),
    # Horowitz gives no 16-bit integer multiply: the geometric mean of his 8- and 32-bit ones, i.e. log-log
    # interpolation at 16 bits (a multiplier grows roughly with the square of its width: 4x the 8-bit one)
    OpFigure("int16", "mult", round(math.sqrt(0.2 * 3.1), 3), round(math.sqrt(282 * 3495)),
             "interpolated, not published: geometric mean of Horowitz's 8b and 32b integer multiply"),
    OpFigure("int32", "mult", 3.1, 3495, HOROWITZ + _CHECKED_32),
    OpFigure("fp16", "mult", 1.1, 1640, HOROWITZ + _CHECKED_E),
    OpFigure("fp32", "mult", 3.7, 7700, HOROWITZ + _CHECKED_32),
)}


@dataclass(frozen=True)
class SramAccess:
    """A 64-bit read of an SRAM array of `capacity_bytes` at 45 nm, 0.9 V."""

    capacity_bytes: int
    energy_pj_per_64b: float
    source: str


SRAM_ACCESS_45NM: tuple[SramAccess, ...] = (  # ascending capacity
    SramAccess(8 * 2**10, 10.0, HOROWITZ + " (verified via PMC8934428 Table 3: '8 kB 64-bit wide cache access')"),
    SramAccess(32 * 2**10, 20.0, HOROWITZ + _RECALLED),
    SramAccess(2**20, 100.0, HOROWITZ + _RECALLED),
)
SRAM_BANK_BYTES = SRAM_ACCESS_45NM[-1].capacity_bytes
"""An SRAM larger than this is taken as banks of this size: one access reads one bank."""


@dataclass(frozen=True)
class DramAccess:
    """Energy per bit read or written of an off-chip memory device (not scaled by the logic node)."""

    device: str
    energy_pj_per_bit: float
    source: str


DRAM_ACCESS: dict[str, DramAccess] = {d.device: d for d in (
    # Horowitz gives 1.3-2.6 nJ per 64-bit DRAM access (DDR3-class, incl. the interface): the midpoint
    DramAccess("dram", (1300 + 2600) / 2 / 64, HOROWITZ + ": DRAM 1.3-2.6 nJ per 64-bit access, the midpoint"
               + _RECALLED),
    DramAccess("hbm", 3.9, "M. O'Connor et al., \"Fine-Grained DRAM: Energy-Efficient DRAM for Extreme "
               "Bandwidth Systems\", MICRO 2017: HBM2 ~3.9 pJ/bit (recalled, not rechecked against the paper; "
               "the same figure is quoted widely in secondary tables)"),
    DramAccess("gddr5", 14.0, "O'Connor et al., MICRO 2017: GDDR5 ~14 pJ/bit (recalled, not rechecked; no memory "
               "kind uses it yet: give energy_pj_per_byte for a GDDR part)"),
)}


@dataclass(frozen=True)
class SramBitcell:
    """A published high-density 6T SRAM bit cell."""

    node_nm: int
    process: str
    area_um2: float
    source: str


BITCELLS: tuple[SramBitcell, ...] = (
    SramBitcell(45, "Intel 45 nm", 0.346, "K. Mistry et al., IEDM 2007" + _RECALLED),
    SramBitcell(28, "TSMC 28 nm", 0.127, "TSMC 28 nm HD cell (verified via WikiChip's 28 nm table: 0.127 um^2)"),
    SramBitcell(22, "Intel 22 nm", 0.092, "C. Auth et al., IEDM 2012 (verified via EE Times coverage of Intel's "
                                          "14 nm: '0.092um2' at 22 nm)"),
    SramBitcell(16, "TSMC 16 nm", 0.07, "S.-Y. Wu et al., IEDM 2013" + _RECALLED),
    SramBitcell(14, "Intel 14 nm", 0.0588, "S. Natarajan et al., IEDM 2014 (verified via EE Times coverage)"),
    SramBitcell(14, "Samsung / GlobalFoundries 14 nm", 0.064, "Samsung 14LPE/GF 14LPP HD cell" + _RECALLED),
    SramBitcell(7, "TSMC 7 nm", 0.027, "S.-Y. Wu et al., IEDM 2016" + _RECALLED),
    SramBitcell(5, "TSMC 5 nm", 0.021, "G. Yeap et al., IEDM 2019 (verified via IEDM 2022 coverage: N3E's cell "
                                       "'0.021 um^2, exactly the same bitcell size as their N5')"),
)


@dataclass(frozen=True)
class TechNode:
    """A technology node: its nominal core supply (for the energy rule) and the bit cell used for SRAM area."""

    nm: int
    vdd_v: float
    vdd_source: str
    bitcell: SramBitcell


def _cell(process: str) -> SramBitcell:
    return next(c for c in BITCELLS if c.process == process)


_VDD = "typical nominal core supply of the node" + _RECALLED
NODES: dict[int, TechNode] = {n.nm: n for n in (
    TechNode(45, BASE_VDD_V, "Horowitz's table is at 0.9 V (verified via PMC8934428: '45 nm at 0.9 V')",
             _cell("Intel 45 nm")),
    TechNode(28, 0.9, _VDD, _cell("TSMC 28 nm")),
    TechNode(22, 0.8, _VDD, _cell("Intel 22 nm")),
    TechNode(16, 0.8, _VDD, _cell("TSMC 16 nm")),
    # 14 nm: the GlobalFoundries/Samsung cell, the process of the one shipped 14 nm design (Groq's TSP, GF 14 nm)
    TechNode(14, 0.8, _VDD, _cell("Samsung / GlobalFoundries 14 nm")),
    TechNode(7, 0.75, _VDD, _cell("TSMC 7 nm")),
    TechNode(5, 0.7, _VDD, _cell("TSMC 5 nm")),
)}

SRAM_ARRAY_EFFICIENCY = Figure(0.7, "bit-cell area / SRAM macro area", (
    "assumption: a commonly quoted array efficiency for large SRAM macros (sense amplifiers, decoders, "
    "redundancy and power gating take the rest); no single publication is cited"))
SERIAL_LINK_PJ_PER_BIT = Figure(5.0, "pJ/bit", (
    "assumption: a cabled ~30 Gb/s chip-to-chip SerDes link, transmitter, receiver and clocking together; "
    "a 14 nm receiver data path alone is 0.8 pJ/b at 30 Gb/s (L. Kull et al., 'A 30Gb/s 0.8pJ/b 14nm FinFET "
    "receiver data path', ISSCC 2017), equalization and clock recovery for a cabled channel add several times that"))
LOGIC_LEAKAGE_W_PER_MM2 = Figure(0.05, "W/mm^2", (
    "assumption: leakage of high-performance logic taken as ~10-25% of an active datapath's 0.2-0.5 W/mm^2; not "
    "scaled by node. Searched (pages corpus: 'leakage power density W/mm2 FinFET logic', 'McPAT leakage per "
    "core area', 'accelerator leakage fraction of total power 28nm'): no published per-mm^2 leakage of a logic "
    "process or a measured accelerator's leakage per area was found, only fractions of total power"))
SRAM_LEAKAGE_W_PER_MM2 = Figure(0.01, "W/mm^2", (
    "assumption: large SRAM macros leak less per mm^2 than logic (high-threshold bit cells, periphery "
    "power-gated between accesses); not scaled by node. Per bit, with the bit cells of BITCELLS over "
    "SRAM_ARRAY_EFFICIENCY, it is ~1.8 nW/bit at 28 nm and ~0.39 nW/bit at 7 nm. Searched (pages corpus: 'SRAM "
    "macro leakage per bit 7nm 16nm', 'FinFET SRAM standby leakage uA/Mb', 'SRAM array leakage per megabit "
    "14nm 22nm'): the one measured macro figure found, Y. Wang et al. (Intel), 'A 1.1 GHz 12 uA/Mb-leakage "
    "SRAM design in 65 nm ultra-low-power CMOS technology with integrated leakage reduction for mobile "
    "applications' (ISSCC 2007 / JSSC 2008): 12 uA/Mb at its 0.5 V retention voltage, ~2 pA/bit in the array "
    "(~6 pW/bit), is an ultra-low-power part in retention with leakage reduction, not the nominal-voltage "
    "leakage of a high-performance accelerator's SRAM, so it is not used"))
DRAM_BACKGROUND_W_PER_GIB = Figure(round(0.612 / 18 * 1.2 + 0.054 / 18 * 2.5, 4), "W/GiB", (
    "Micron, '16GB (x72, ECC, DR) 260-Pin DDR4 SODIMM' data sheet MTA18ASF2G72HZ (asf18c2gx72hz.pdf, Rev. F "
    "8/16), Table 15, values of the MT40A1G8 8 Gb DDR4 SDRAM (JEDEC JESD79-4 compliant) at DDR4-2400: "
    "precharge standby current IDD2N 612 mA and active standby IPP current IPP3N 54 mA (the IPP figure that "
    "applies to every IDD2x condition), all 18 dies of the module in that condition. Per 8 Gb (1 GiB) die: "
    "34 mA x VDD 1.2 V + 3 mA x VPP 2.5 V = 40.8 + 7.5 = 48.3 mW, i.e. 0.0483 W/GiB (verified via the data "
    "sheet's table as published online). Precharge standby: banks idle, clock running, not powered down. "
    "Refresh is not included (it adds a few mW per GiB). Used for HBM stacks too: searched (pages corpus: "
    "'HBM2 standby power per stack') for an HBM2 IDD2N-like figure and found none (JESD235 leaves IDD "
    "limits to vendors)"))
STATIC_POWER: tuple[Figure, ...] = (LOGIC_LEAKAGE_W_PER_MM2, SRAM_LEAKAGE_W_PER_MM2, DRAM_BACKGROUND_W_PER_GIB)
STEP_DATAPATH: dict[str, tuple[str, str, str]] = {
    "fp32": ("fp32", "fp32", "Horowitz's fp32 multiply and add"),
    "tf32": ("fp16", "fp32", "TF32 multiplies 11-bit significands, fp16's multiplier width, and adds in fp32 (NVIDIA "
                             "A100 Tensor Core GPU Architecture whitepaper, 2020: TF32 has FP16's 10-bit mantissa "
                             "and accumulates in FP32); Horowitz's fp16 multiply, fp32 add"),
    "bf16": ("fp16", "fp16", "Horowitz has no bf16: his fp16 (16-bit) figures stand for it, an upper bound since "
                             "bf16's 8-bit significand multiplier is smaller than fp16's 11-bit one"),
    "fp16": ("fp16", "fp16", "Horowitz's fp16 multiply and add"),
    "fp8": ("int8", "int8", "assumption: Horowitz has no fp8; his int8 figures, the table's 8-bit datapath, stand "
                            "for it (an fp8 multiplier is narrower, its adder needs alignment shifts)"),
}
"""Per step precision (hw/peaks.STEP_PRECISIONS): the table's (multiply, add) precisions its arithmetic is
charged at, and why (cost/energy.unit_pj_per_op)."""
PRECISION_OF_BYTES: dict[int, str] = {1: "int8", 2: "fp16", 4: "fp32"}
"""The datapath a unit is assumed to have when it names no `precision`: from the bytes the hardware stores a
float32 in (hw.bytes_per_element["float32"]): int8 arrays quantize, 2-byte machines compute in fp16."""


def node(nm: int) -> TechNode:
    """The node's row; a ValueError naming the known nodes if there is none."""
    if nm not in NODES:
        raise ValueError(f"no technology node of {nm} nm in the table (known: {known_nodes()} nm)")
    return NODES[nm]


def known_nodes() -> str:
    return ", ".join(str(n) for n in sorted(NODES))


def area_scale(nm: int) -> float:
    """Logic area at `nm` relative to 45 nm: (L / 45)^2."""
    return (node(nm).nm / BASE_NM) ** 2


def energy_scale(nm: int) -> float:
    """Dynamic energy at `nm` relative to 45 nm, 0.9 V: (L / 45) * (V(L) / 0.9)^2."""
    n = node(nm)
    return (n.nm / BASE_NM) * (n.vdd_v / BASE_VDD_V) ** 2


def mac_energy_pj(precision: str, nm: int) -> float:
    """One multiply and one add at `precision` on node `nm`, pJ."""
    return (ARITHMETIC_45NM[(precision, "mult")].energy_pj + ARITHMETIC_45NM[(precision, "add")].energy_pj) \
        * energy_scale(nm)


def step_mac_energy_pj(step_precision: str, nm: int) -> float:
    """One multiply and one add of a step computing at `step_precision` (STEP_DATAPATH) on node `nm`, pJ."""
    mult, add, _ = STEP_DATAPATH[step_precision]
    return (ARITHMETIC_45NM[(mult, "mult")].energy_pj + ARITHMETIC_45NM[(add, "add")].energy_pj) * energy_scale(nm)


def mac_area_um2(precision: str, nm: int) -> float:
    """A multiplier and an adder at `precision` on node `nm`, um^2."""
    return (ARITHMETIC_45NM[(precision, "mult")].area_um2 + ARITHMETIC_45NM[(precision, "add")].area_um2) \
        * area_scale(nm)


def sram_pj_per_64b(capacity_bytes: int, nm: int) -> float:
    """One 64-bit access of an SRAM of `capacity_bytes` on node `nm`, pJ (log-log interpolation between
    Horowitz's arrays; clamped to the 8 KB figure below and to the 1 MB bank above)."""
    table = SRAM_ACCESS_45NM
    c = min(max(capacity_bytes, table[0].capacity_bytes), table[-1].capacity_bytes)
    lo = [r for r in table if r.capacity_bytes <= c][-1]
    hi = next(r for r in table if r.capacity_bytes >= c)
    if lo is hi:
        e45 = lo.energy_pj_per_64b
    else:
        t = math.log(c / lo.capacity_bytes) / math.log(hi.capacity_bytes / lo.capacity_bytes)
        e45 = math.exp(math.log(lo.energy_pj_per_64b) + t * math.log(hi.energy_pj_per_64b / lo.energy_pj_per_64b))
    return e45 * energy_scale(nm)


def sram_pj_per_byte(capacity_bytes: int, nm: int) -> float:
    return sram_pj_per_64b(capacity_bytes, nm) / 8


def sram_area_mm2(capacity_bytes: int, nm: int) -> float:
    """Bit cells at the node's published size over the array efficiency, mm^2."""
    return capacity_bytes * 8 * node(nm).bitcell.area_um2 / SRAM_ARRAY_EFFICIENCY.value * 1e-6


def dram_pj_per_byte(device: str) -> float:
    return DRAM_ACCESS[device].energy_pj_per_bit * 8


def link_pj_per_byte() -> float:
    return SERIAL_LINK_PJ_PER_BIT.value * 8


def logic_static_w(area_mm2: float) -> float:
    """Leakage of `area_mm2` of logic (a unit's datapath), W."""
    return area_mm2 * LOGIC_LEAKAGE_W_PER_MM2.value


def sram_static_w(area_mm2: float) -> float:
    """Leakage of `area_mm2` of SRAM arrays (a memory, operand buffers), W."""
    return area_mm2 * SRAM_LEAKAGE_W_PER_MM2.value


def dram_static_w(capacity_bytes: int) -> float:
    """Background (precharge standby) power of `capacity_bytes` of DRAM or HBM, W."""
    return capacity_bytes / 2**30 * DRAM_BACKGROUND_W_PER_GIB.value
