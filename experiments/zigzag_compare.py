"""accelsim against ZigZag on ZigZag's own example: its tpu_like chip (experiments/hw/zigzag_tpu_like.yaml)
and its resnet18.onnx workload (batch 1, 3x224x224, inference), layer by layer: ZigZag's saved answer
(tests/data/zigzag_tpu_like_resnet18.json, made by experiments/zigzag_reference.py) -> ratio table.

Each of ResNet-18's 21 array layers (20 convolutions, the classifier's GEMM) is mapped by accelsim's mapper
(the unit's `mapping: search`, dataflows ws and os, objective latency) and costed by its mapping cost model
(accelsim/mapping/cost.py); latency is its cycles, energy its pJ. Two comparisons:
- accelsim's own choice: the mapper unconstrained;
- accelsim's mapper under ZigZag's spatial constraints: ZigZag's input is the chip *and* a mapping file, and
  tpu_like's fixes D1 <- K, D2 <- C for every layer. The same choice is given to accelsim as one partial
  mapping entry per layer (zigzag_spatial_entries: rows <- C, cols <- K; a GEMM's K and N), the loop order
  left to the search, as a mapping file would (`--mapping`, A.compile(..., mapping=...)). accelsim's mapping
  language expresses it whole: ZigZag unrolls min(C, 32) of C and keeps the rest temporal, which is
  accelsim's row folds (C=3: 3 of 32 rows; C=64: two folds), and K=1000 is 32 column folds as ZigZag's
  padded 4 x 4 x 2 temporal K loops.
Latency is compared two ways. accelsim's layer run alone (MappingCost.isolated_cycles) against ZigZag's total
(latency_total2: compute with stalls, plus on-loading, off-loading and the systolic drain): both load, before
the first MAC, what the mapping keeps resident above the array. accelsim derives it from its own mapping
(mapping/onload.py): an operand re-read by every iteration of a fold loop that does not index it is held
across that loop, so its footprint under that loop loads first (ws with the column folds outermost: the
whole input, re-read by every fold of K; the weights change every fold, so only the first 32 x 32 tile); a
layer run alone takes latency + max(on-loading + compute, its memory traffic). And accelsim's scheduled cost
(MappingCost.cycles, what a schedule charges: a node's first loads overlap its predecessors) against ZigZag's
latency without on- and off-loading (latency_total0). The mapper ranks mappings by the scheduled cost, as
before. ZigZag's energy is the MACs plus every memory level. A layer is within tolerance when
|accelsim / ZigZag - 1| <= 20%.
Run: python experiments/zigzag_compare.py   (needs onnx; prints both tables, their counts, the whole-network
ratios, the first convolution under both mappings, the DRAM-bound layers against ZigZag's port, and the CPU
seconds).

Measured (zigzag-dse 3.9.1), with conv2d reading only the input pixels its windows touch (ops/conv.py):
- Own choice: latency within 20% on 19 of 21 layers against ZigZag's total (issue 31's count), the scheduled
  cost on 17 of 21 against ZigZag's latency without on- and off-loading; energy on 21 of 21; both on 19 of 21.
  Whole-network energy 0.924 of ZigZag's 1.871e9 pJ; latency of the layers run alone 0.715 of its 3.865e6
  cycles (scheduled cost 0.659; the first convolution is most of the gap). Compiled and simulated as a whole
  (the vector unit's adds, ReLUs and pooling included, which ZigZag leaves out): makespan 0.779 of ZigZag's
  summed latency; energy from the timeline 1.143 of ZigZag's, 1.053 without the DRAM background (static)
  power accelsim derives from the DRAM's capacity (hw/tech.py), which ZigZag does not model and accelsim's
  hardware language has no key to set.
  layer (own choice)         ZigZag   alone  on-load  ratio | sched  w/o ld   mapping
  conv1 (7x7, C=3)        1,248,163 144,478  18,944   0.12  | 125,534  0.10   rows<-C*FY*FX, [cols, rows]
  layer1 convs (x4)         138,048 138,206  25,216   1.00  | 112,990  1.00   idem
  layer2.0 conv1             81,600  81,758  25,216   1.00  |  56,542  1.00   idem
  layer2 other convs (x3)   125,504 125,662  12,672   1.00  | 112,990  1.00   idem
  layer2.0 downsample        18,879  19,840   6,400   1.05  |  19,840  3.16   rows<-C, [cols, rows]
  layer3.0 conv1             69,056  69,214  12,672   1.00  |  56,542  1.00   rows<-C*FY*FX, [cols, rows]
  layer3 other convs (x3)   123,934 119,390   6,400   0.96  | 112,990  0.96   idem
  layer3.0 downsample        10,431  13,504   3,264   1.29  |  13,504  2.15   rows<-C, [cols, rows]
  layer4.0 conv1            153,135 156,864   6,400   1.02  | 156,864  1.09   rows<-C*FY*FX, [cols, rows]
  layer4 other convs (x3)   299,983 301,184   3,264   1.00  | 301,184  1.03   idem
  layer4.0 downsample        19,583  21,088   1,696   1.08  |  21,088  3.36   rows<-C, [cols, rows]
  fc (GEMM)                  63,739  64,189     192   1.01  |  64,189  1.15   rows<-K cols<-N, [cols, rows]
- Under ZigZag's spatial constraints: latency on 19 of 21 (18 against ZigZag's without on- and off-loading),
  energy on 21 of 21, both on 19 of 21. Only the first conv's cycles change: the mapper's own choice for the
  3x3 convs flattens C x FY x FX onto the rows too, but with C a multiple of 32 that is the same folds and
  cycles as rows <- C with the taps temporal (the 1x1 downsamples and the GEMM already choose ZigZag's). The
  mapper, ranking by the scheduled cost (which no loop order changes on this chip), keeps the filter taps
  outermost ([FY, FX, cols, rows]), so only one tap's pixels are resident: layer2.0's first conv is 0.77
  (on-loading 6,182 cycles against ZigZag's 25,088; ZigZag's LOMA keeps the taps inside, under its SRAM)
  and layer3.0's 0.86. Whole-network latency of the layers run alone 0.985 (scheduled cost 0.945), energy
  0.924; compiled and simulated, makespan 1.064 of ZigZag's summed latency.
Why the layers differ:
- The first convolution (C=3, 7x7, K=64): 0.12 of ZigZag's latency under accelsim's own choice, 0.99 under
  ZigZag's constraint (1,233,919 cycles run alone against 1,248,163; ZigZag's temporal cycles are 1,229,312).
  The effect is the mapping, not the chip: rows <- C keeps 3 of 32 rows busy and runs the 49 filter taps as
  temporal loops (98 folds of 12,544 pixels, 9.4% of the array busy); lifting the constraint, the mapper
  flattens C x FY x FX = 147 onto the rows (im2col: 5 row folds of 32, 10 folds, 91.8% busy). Its energy is
  0.82 of ZigZag's under either mapping: the PE registers are charged per MAC and the DRAM bytes do not
  depend on the mapping; accelsim leaves out the SRAM's 18.7e6 pJ (inputs re-read for each of the 98 folds)
  and charges the 802,816 output bytes at the DRAM's read energy (87.5 against 93.75 pJ/B: 5.0e6 pJ).
- On-loading (the 3x3 convs): ZigZag, without its inter-layer data-locality stage, loads a layer's whole
  input from DRAM into the SRAM before the first MAC (layer2.0's first conv: 200,704 bytes / 8 = 25,088
  cycles, a third of its compute). accelsim's own mapping re-reads the whole input in every fold of K, so it
  holds and on-loads it too: its on-loading is ZigZag's plus the first 32 x 32 weight tile (128 cycles),
  which ZigZag overlaps with the input on its port. That brings layer2.0's first conv from 0.69 (scheduled
  cost against ZigZag's total, before the on-loading was modelled) to 1.00, and layer1's four convs and
  layer3.0's first from 0.82 to 1.00. The DRAM-bound layers (the downsamples, layer4, the GEMM) do not move:
  the on-loaded bytes are part of the traffic that already sets their time.
- The three 1x1 stride-2 downsample convolutions: 1.05, 1.29 and 1.08 of ZigZag's total latency, 0.91,
  0.92 and 0.96 of its energy, under both mappings. They are bound by the DRAM, which in ZigZag's tpu_like
  file has a single read-write port (rw_port_1, 64 bits per cycle) serving every operand's reads and writes;
  accelsim's `bandwidth_bytes_per_cycle: 8` is that port, so its cycles are the bytes / 8: layer3.0's
  (25,088 input + 32,768 weight + 50,176 output bytes) / 8 = 13,504. These are the bytes ZigZag itself
  charges to its DRAM (its DRAM energy / 700 or 750 pJ per 64-bit access: zigzag_dram_port_cycles), and
  ZigZag reports 10,431 cycles, 0.77 of what its one port needs to move them (layer2.0's 0.95, layer4.0's
  0.93): its latency model combines each port's transfers by adding only their stalls and letting one
  operand's slack absorb another's (cost_model.py, combine_data_transfer_rate_per_physical_port), so the
  weight on-loading and the output writes overlap on a port that cannot do both. Not an accelsim gap: a
  port that overlapped reads and writes would be a second port, which this chip does not have.
- Energy on every layer: accelsim does not charge the 2 MB SRAM on the array's layers (the hardware file
  says why: accelsim has no level between a unit and its memory other than operand buffers, whose
  SCALE-Sim traffic model does not describe this chip), 3-15% of ZigZag's energy on most layers (inputs
  read once per fold of K over the 32 columns, partial sums leaving the PEs), and charges DRAM writes at
  the read energy.
"""
from __future__ import annotations

import json
import time
from dataclasses import dataclass
from pathlib import Path

import accelsim as A
from accelsim.errors import AccelsimError
from accelsim.frontends import from_onnx
from accelsim.graph.ir import Graph, Node
from accelsim.hw.spec import HwSpec
from accelsim.mapping.cache import MappingCache
from accelsim.mapping.cost import MappingCost
from accelsim.mapping.dims import LayerDims, layer_dims
from accelsim.mapping.entry import LayerMapping
from accelsim.mapping.mapper import MapperOptions

REPO = Path(__file__).resolve().parent.parent
ONNX_FILE = REPO / "tests" / "data" / "zigzag_resnet18.onnx"  # zigzag-dse's resnet18.onnx; Stream reads it too
REFERENCE = REPO / "tests" / "data" / "zigzag_tpu_like_resnet18.json"
HW_FILE = REPO / "experiments" / "hw" / "zigzag_tpu_like.yaml"
TOLERANCE = 0.20
DRAM_PORT_BYTES_PER_CYCLE = 8  # ZigZag's tpu_like dram: one rw_port_1, bandwidth_max 64 bits, every operand
DRAM_PJ_PER_ACCESS = {"read": 700.0, "write": 750.0}  # its r_cost and w_cost per 64-bit access


class ZigZagReferenceError(AccelsimError):
    """The saved ZigZag answer does not describe the network being compared."""


@dataclass(frozen=True, slots=True)
class LayerRow:
    """One layer's figures from both tools."""

    name: str
    loops: str
    zigzag_cycles: float
    zigzag_energy_pj: float
    zigzag_overlapped_cycles: float  # ZigZag's latency_total0: compute and stalls, no on- or off-loading
    accelsim: MappingCost

    @property
    def latency_ratio(self) -> float:
        """accelsim's layer run alone (its on-loading first: mapping/onload.py) against ZigZag's total."""
        return self.accelsim.isolated_cycles / self.zigzag_cycles

    @property
    def energy_ratio(self) -> float:
        return self.accelsim.energy_pj / self.zigzag_energy_pj

    @property
    def overlapped_ratio(self) -> float:
        """accelsim's cycles against ZigZag's latency without on- and off-loading, accelsim's convention (a
        node's first loads and last stores overlap its neighbours)."""
        return self.accelsim.cycles / self.zigzag_overlapped_cycles


def within(ratio: float) -> bool:
    return abs(ratio - 1) <= TOLERANCE


def load_reference(path: Path = REFERENCE) -> dict:
    """ZigZag's saved answer (its "layers" in ZigZag's order)."""
    path = Path(path)
    if not path.is_file():
        raise ZigZagReferenceError(f"{path}: no saved ZigZag answer; make it with experiments/zigzag_reference.py "
                                   f"(needs zigzag-dse, see its docstring)")
    return json.loads(path.read_text())


def resnet18_graph() -> Graph:
    """ResNet-18 as ZigZag reads it (ONNX_FILE, shape-only: its weights imported as zeros, which no cost reads)."""
    return from_onnx(ONNX_FILE, name="resnet18", loss="none", external_data="zeros")


def array_layers(graph: Graph) -> list[Node]:
    """The nodes ZigZag maps onto its array: convolutions and GEMMs, in graph order."""
    return [n for n in graph.nodes if n.op in ("conv2d", "matmul")]


def onnx_name(node: Node) -> str:
    """The ONNX node name the importer's node name starts with ("/conv1/Conv" of "/conv1/Conv/conv2d")."""
    return node.name.rsplit("/", 1)[0]


def _check_layer(layer: LayerDims, ref: dict, name: str) -> None:
    if layer.macs != ref["total_macs"]:
        raise ZigZagReferenceError(
            f"{REFERENCE.name}: layer {name!r} has {ref['total_macs']:,} MACs in ZigZag's answer "
            f"({ref['loop_sizes']}) and {layer.macs:,} in the imported graph ({layer.describe()}); expected the "
            f"same network: rerun experiments/zigzag_reference.py or pass the ONNX file it ran")


def compare(hw: HwSpec, graph: Graph, reference: dict, names: tuple[str, ...] | None = None,
            cache: MappingCache | None = None, given: dict[str, LayerMapping] | None = None) -> list[LayerRow]:
    """One row per array layer (only `names` when given), each mapped by accelsim's mapper; `given`: a user's
    (partial) mapping by node name, which limits the search for that layer (mapping/given.py)."""
    by_name = {layer["name"]: layer for layer in reference["layers"]}
    chip = hw.chips[0]
    unit = chip.units[0]
    cache = cache if cache is not None else MappingCache()
    rows = []
    for node in array_layers(graph):
        name = onnx_name(node)
        if names is not None and name not in names:
            continue
        ref = by_name.get(name)
        if ref is None:
            raise ZigZagReferenceError(f"{REFERENCE.name}: no layer {name!r} in ZigZag's answer (it has "
                                       f"{', '.join(sorted(by_name))}); expected one per array layer")
        layer = layer_dims(graph, node)
        _check_layer(layer, ref, name)
        cost = cache.best(hw, chip, unit, layer, MapperOptions(), None if given is None else given.get(node.name))
        rows.append(LayerRow(name, layer.describe(), ref["latency_cycles"], ref["energy_pj"],
                             ref["ideal_temporal_cycles"] + ref["stall_slack_cycles"], cost))
    return rows


def zigzag_spatial_entries(graph: Graph, unit: str = "mxu") -> tuple[LayerMapping, ...]:
    """ZigZag tpu_like's mapping file as accelsim mapping entries, one per array layer: its D1 <- K (output
    channels) and D2 <- C (input channels), in accelsim's terms rows <- the reduced channels and cols <- the
    output channels (a conv's C and K, a GEMM's K and N), which only the ws dataflow allows. Only the
    spatial choice is given: the filter taps and pixels stay temporal and the mapper orders the loops. ZigZag
    unrolls min(C, 32) and keeps the rest of C as a temporal loop; accelsim's row folds are the same thing."""
    entries = []
    for node in array_layers(graph):
        reduced, out = ("C", "K") if node.op == "conv2d" else ("K", "N")
        entries.append(LayerMapping(layer=node.name, unit=unit, rows=(reduced,), cols=(out,)))
    return tuple(entries)


def reference_layer(reference: dict, name: str) -> dict:
    """ZigZag's answer for the layer named `name` (ZigZagReferenceError naming it when there is none)."""
    for layer in reference["layers"]:
        if layer["name"] == name:
            return layer
    raise ZigZagReferenceError(f"{REFERENCE.name}: no layer {name!r} in ZigZag's answer")


def zigzag_dram_port_cycles(ref: dict) -> float:
    """The cycles ZigZag's one 64-bit DRAM port needs to move the bytes ZigZag charges to the DRAM for a layer
    (its DRAM energy per operand / r_cost or w_cost per 64-bit access; outputs as writes, which can only
    undercount where partial sums are re-read at the cheaper r_cost): a lower bound on any latency of that
    layer on that port."""
    accesses = 0.0
    for operand, levels in ref["memory_energy_pj"].items():
        direction = "write" if operand == "O" else "read"
        accesses += levels.get("dram", 0.0) / DRAM_PJ_PER_ACCESS[direction]
    return accesses * 8 / DRAM_PORT_BYTES_PER_CYCLE


def simulated_network(hw: HwSpec, graph: Graph, given: tuple[LayerMapping, ...] | None = None
                      ) -> tuple[int, float, float]:
    """The whole network compiled and simulated (the vector unit's nodes included), under the `given` mapping
    entries if any: makespan cycles, the energy the timeline moved (pJ) and, of it, the static energy (pJ)."""
    from accelsim.report import run_summary

    summary = run_summary(A.compile(graph, hw, mapping=given), hw, graph)
    static = sum(item.energy_pj for item in summary.energy_breakdown.items if item.kind == "static")
    return round(summary.makespan_s * hw.clock_hz), summary.energy_j * 1e12, static


@dataclass(frozen=True, slots=True)
class Counts:
    """Layers within TOLERANCE of ZigZag, out of `layers`."""

    layers: int
    latency: int
    energy: int
    both: int
    overlapped: int  # latency against ZigZag's without on- and off-loading

    @classmethod
    def of(cls, rows: list[LayerRow]) -> "Counts":
        return cls(len(rows), sum(within(r.latency_ratio) for r in rows), sum(within(r.energy_ratio) for r in rows),
                   sum(within(r.latency_ratio) and within(r.energy_ratio) for r in rows),
                   sum(within(r.overlapped_ratio) for r in rows))

    def describe(self) -> str:
        n = self.layers
        return (f"latency {self.latency}/{n}, energy {self.energy}/{n}, both {self.both}/{n}; latency against "
                f"ZigZag's without on- and off-loading {self.overlapped}/{n}")


def _print_table(rows: list[LayerRow]) -> None:
    print(f"{'layer':<44} {'ZigZag cyc':>11} {'alone':>10} {'onload':>7} {'lat':>5} {'sched':>8} {'w/o ld':>6} | "
          f"{'ZigZag pJ':>10} {'accelsim':>10} {'energy':>6} | accelsim mapping")
    for r in rows:
        mark = lambda ok: " " if ok else "*"  # noqa: E731
        print(f"{r.name:<44} {r.zigzag_cycles:>11,.0f} {r.accelsim.isolated_cycles:>10,} "
              f"{r.accelsim.onload_cycles:>7,} {r.latency_ratio:>4.2f}{mark(within(r.latency_ratio))} "
              f"{r.accelsim.cycles:>8,} {r.overlapped_ratio:>5.2f}{mark(within(r.overlapped_ratio))} | "
              f"{r.zigzag_energy_pj:>10.3e} {r.accelsim.energy_pj:>10.3e} {r.energy_ratio:>5.2f}"
              f"{mark(within(r.energy_ratio))} | {r.accelsim.mapping.describe()}")


def _print_totals(label: str, rows: list[LayerRow], hw: HwSpec, graph: Graph,
                  given: tuple[LayerMapping, ...] | None) -> None:
    zz_energy = sum(r.zigzag_energy_pj for r in rows)
    as_energy = sum(r.accelsim.energy_pj for r in rows)
    zz_cycles = sum(r.zigzag_cycles for r in rows)
    as_cycles = sum(r.accelsim.isolated_cycles for r in rows)
    as_scheduled = sum(r.accelsim.cycles for r in rows)
    print(f"\n{label}: within {TOLERANCE:.0%}: {Counts.of(rows).describe()}")
    print(f"whole network: energy {as_energy:.4e} / {zz_energy:.4e} pJ = {as_energy / zz_energy:.3f}; "
          f"latency (layers run alone) {as_cycles:,} / {zz_cycles:,.0f} cycles = {as_cycles / zz_cycles:.3f}; "
          f"scheduled cost (on-loading overlapped) {as_scheduled:,} = {as_scheduled / zz_cycles:.3f}")
    makespan, energy, static = simulated_network(hw, graph, given)
    print(f"whole network compiled and simulated: makespan {makespan:,} cycles ({makespan / zz_cycles:.3f}); "
          f"energy from the timeline {energy:.4e} pJ ({energy / zz_energy:.3f}), of which DRAM background "
          f"power {static:.3e} pJ (ZigZag has no static power): {(energy - static) / zz_energy:.3f} without it")


def main() -> None:
    start = time.process_time()
    reference = load_reference()
    hw = A.load_hw(HW_FILE)
    graph = resnet18_graph()
    import_s = time.process_time() - start
    cache = MappingCache()
    own = compare(hw, graph, reference, cache=cache)
    map_s = time.process_time() - start - import_s
    entries = zigzag_spatial_entries(graph)
    constrained = compare(hw, graph, reference, given={e.layer: e for e in entries})
    print(f"ZigZag {reference['zigzag_version']} ({reference['accelerator']}, {reference['workload']}) against "
          f"accelsim ({HW_FILE.relative_to(REPO)}); * outside {TOLERANCE:.0%}. alone: accelsim's layer run alone, its "
          f"on-loading first (lat: against ZigZag's total); sched: its scheduled cost, the on-loading overlapped "
          f"(w/o ld: against ZigZag's latency without on- and off-loading)")
    print("\naccelsim's own choice (its mapper, unconstrained):")
    _print_table(own)
    print("\naccelsim's mapper under ZigZag's spatial constraints (its mapping file's D1 <- K, D2 <- C: rows <- C, "
          "cols <- K; the loop order searched):")
    _print_table(constrained)
    _print_totals("own choice", own, hw, graph, None)
    _print_totals("under ZigZag's spatial constraints", constrained, hw, graph, entries)

    print(f"\nfirst convolution ({own[0].loops}); ZigZag's spatial mapping "
          f"{reference_layer(reference, own[0].name)['spatial_mapping']}")
    for label, r in (("accelsim's own choice", own[0]), ("under ZigZag's rows <- C", constrained[0])):
        print(f"  {label:<25} {r.accelsim.mapping.describe():<62} {r.accelsim.folds:>4} folds "
              f"{r.accelsim.isolated_cycles:>10,} cycles alone ({r.latency_ratio:.2f} of ZigZag's {r.zigzag_cycles:,.0f}), "
              f"{r.accelsim.energy_pj:.3e} pJ ({r.energy_ratio:.2f}), array utilization "
              f"{r.accelsim.array_utilization:.1%}")
    print("\nDRAM-bound layers: ZigZag's latency against the cycles its own 64-bit DRAM port needs for the bytes "
          "its energy charges there")
    for r in own:
        if "downsample" in r.name:
            bound = zigzag_dram_port_cycles(reference_layer(reference, r.name))
            print(f"  {r.name:<46} port {bound:>8,.0f} cycles; ZigZag {r.zigzag_cycles:>8,.0f} "
                  f"({r.zigzag_cycles / bound:.2f} of it); accelsim {r.accelsim.cycles:>8,} "
                  f"({r.accelsim.cycles / bound:.2f})")
    n = len(own)
    print(f"\nCPU: {import_s:.2f} s to import the ONNX file and load the chip, {map_s:.2f} s to map {n} layers "
          f"({cache.misses} searched, {cache.hits} from the cache); ZigZag took {reference['zigzag_cpu_s']} s")


if __name__ == "__main__":
    main()
