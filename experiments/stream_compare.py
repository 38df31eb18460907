"""accelsim against Stream on Stream's own example: its tpu_like_quad_core chip
(experiments/hw/stream_tpu_like_quad_core.yaml) and ResNet-18 (batch 1, 3x224x224, inference), whole network,
fusion off and on: Stream's saved answer (tests/data/stream_tpu_like_quad_core.json, made by
experiments/stream_reference.py) -> ratio table.

Stream's two modes are its layer-by-layer solve (one fusion group per layer) and its layer-fused solve (the
groups its mapping generator derives). accelsim's are fusion off (against layer-by-layer) and fusion auto and
a fixed tile count (against layer-fused). accelsim's latency is the simulated makespan; its energy is the
timeline's dynamic energy (arithmetic, SRAM, DRAM), without the DRAM background power accelsim derives from
the DRAM's capacity (hw/tech.py), which Stream does not model. Within tolerance: |accelsim / Stream - 1| <= 25%.
Run: python experiments/stream_compare.py [--tiles T]   (prints the table, the energy splits, the fusion groups
of auto and of Stream, the layer-by-layer cycles per op type and the CPU seconds; about 90 s of CPU, most of it
fusion auto's compiles).

Measured (stream-dse 2.1.1; accelsim as committed with this file; 90 s of CPU on a heavily shared machine):

  accelsim fusion      Stream    cycles       Stream cycles  ratio  energy pJ  Stream pJ  ratio  within 25%
  off                  layer     14,663,510   12,697,310     1.155  1.484e10   1.405e10   1.056  yes
  auto                 fused      8,807,750    7,739,942     1.138  8.935e9    9.749e9    0.917  yes
  8 tiles              fused     13,749,112    7,739,942     1.776  1.395e10   9.749e9    1.431  no
  auto, sram           fused      6,126,264    7,739,942     0.792  6.163e9    9.749e9    0.632  cycles only
  8 tiles, sram        fused     11,544,792    7,739,942     1.492  1.155e10   9.749e9    1.184  energy only

auto fuses five chains, each as Stream's layer-fused solve groups it: the stem with the max pool at 8 tiles, and
layer1.0, layer1.1, layer2.0 and layer2.1's residual blocks at 4 (the script prints both lists). layer2.1 was
dropped before (auto 9,338,694 cycles, 1.207 / 0.973, four chains), by a defect of fusion's estimate
(compiler/fusion_choice.py): it took the on-chip room for a group's values from where the unfused step placed
activations, none on this chip (its placement sends them to the DRAM), so every chain was charged its staged
weights re-read by every tile and its intermediates' DRAM round trips, though the planner keeps a group's
internal values in the SRAM (hw/placement.GROUP_INTERNAL); layer2.1, with 1.18 MB of weights at 32 bits, was
estimated slower fused (883,836 cycles against 835,932). With the room and the values' 32-bit width taken as the
planner places them, layer3's two blocks are estimated worth fusing too, and each shortens the step alone
(-248K and -271K cycles), but beside layer1-2's groups they lengthen it (12.7M cycles with all seven: layer3.0's
staged conv2 copy finds no room in the SRAM and is re-read from the DRAM by every tile), so compile keeps the five
(compiler/fusion.py adds each chain to the best candidate only where the step gets shorter). Stream fuses
layer3-4 in smaller groups (a block's first conv alone, its second conv with the add) that accelsim's chains,
whole residual blocks, do not cut.

The chip file says where Stream's bytes live and how wide they are (its placement, hw/placement.py):
- Activations in the DRAM. Stream's layer-by-layer solve is one fusion group per layer, and a group starts and
  ends in the off-chip core: every layer reads its input from the DRAM and writes its output back (the JSON's
  Transfer(...) nodes, source or target core 6). Its run is bound by that traffic: 97.8 MB at 125 pJ/B
  (1.222e10 pJ), and 97.8 MB / 8 B per cycle is 12.2M cycles, 0.96 of its latency.
- At 32 bits, weights too. Stream gives a tensor its ONNX element type (parser/onnx/utils.py: FLOAT -> f32)
  and moves bits = bitwidth x elements, though its array computes in int8: the first ReLU's group moves 8 B
  per element (4 in, 4 out), layer4.0's conv2 group 4.05 B per weight. So the file's placement stores
  parameters and activations at bytes_per_element 4 while the arithmetic stays int8 (bytes_per_element 1).
  Without the width, fusion off was 0.352 of Stream's cycles; without the DRAM placement, 0.205.
Fusion off is within 25%. What is left, term by term:
- Bias adds (+2.49M cycles, +2.48e9 pJ). accelsim's ONNX import makes a Conv with a bias a conv2d node and an
  add node; the add's input and output are activations, so each of the 20 convolutions' outputs crosses the
  DRAM twice more (9.93 MB written and read back, at one cycle per element). Stream's Conv adds its bias in
  the array. Without them accelsim would be 0.96 of Stream's cycles and 0.88 of its energy.
- The classifier's weights: Stream's Gemm group moves 2.07 B per weight (1.07 MB), accelsim 4 (Gemm cycles
  1.95x Stream's). The input image: a graph input is no placed class, so accelsim reads it at 1 B
  (0.15 MB against Stream's 0.6 MB).
- Energy split, accelsim | Stream: compute 2.46e8 | 7.3e7 (accelsim charges the PE's weight register per MAC
  in the unit's energy per op, ZigZag in its memory energy); on-chip memory 4.7e7 | 1.76e9 (ZigZag charges
  the 2 MB SRAM's accesses per fold, accelsim has no level between an array and its memory but operand
  buffers, as experiments/hw/zigzag_tpu_like.yaml explains); off chip 1.45e10 | 1.22e10 (the terms above).
- Core allocation: Stream splits each convolution over all four cores (inter-core tiling of K), accelsim runs
  it on one core (the cores are not a gang). Both are DRAM-bound, so neither split matters much: per op type
  (the last table) ReLU, Add and the pools are within 5% of Stream's cycles.
Layer-fused (Stream: 7,739,942 cycles, 9.749e9 pJ, 14 groups: the stem, one per residual block in layer1-2,
smaller groups in layer3-4). Latency and energy within 25% with auto (before a slice read only its window: 1.390x
and 1.107x; 8 tiles 2.981x and 2.396x). Why, and what is left:
- Where a fused group's activations live, as in Stream. Inside a group Stream keeps them in the cores' SRAM
  and only the group's inputs and outputs cross the DRAM (its transfer energy falls from 1.222e10 to 7.18e9
  pJ, 57.4 MB). accelsim does the same whatever the activations placement says: a value a fusion group both
  produces and consumes (its tiles' intermediates, fusion_groups.group_internal_nodes) is placed as without a
  placement, on chip at the activations' 32 bits (hw/placement.GROUP_INTERNAL); only a group's inputs (read
  by its tiles' slices) and its output (the concat of its tiles) follow the file's DRAM placement. Before
  that rule auto kept the unfused step (1.895x, 1.522x) and 8 tiles was 4.49x, 3.61x. With activations kept in
  SRAM everywhere (on_chip_activations; rows "sram") the group boundaries are left out too: 0.79 of Stream's
  cycles with auto and 0.63 of its energy (5.84e9 pJ off chip: little more than the weights).
- What still crosses the DRAM in accelsim's fused steps (8 tiles 108.5 MB, against Stream's 57.4; it was 142.6
  MB before the staged weights): the convolutions 74.5 MB (was 124.3: a fused tile reads its weights' staged copy
  on chip; the rest are the copies that found no room, read by every tile, and the layers 8 tiles do not fuse),
  the staging copies 15.7 MB, the tiles' slices 8.8 MB (a slice reads its window, its band of rows with the halo:
  OpDef.input_reads, schedule/traffic.read_bytes; when every task read its inputs whole they moved 49.8 MB), the
  groups' outputs (their concats) 3.6 MB, the add and relu tasks 3.7 MB, the classifier 2.05 MB.
- Weights: Stream reads a fused group's weights once, and so does accelsim where they fit. Stream's layer1.0
  group moves 2.44e6 pJ per iteration over 112 iterations, 2.19 MB in all at 125 pJ/B: about its input and output
  (0.80 MB each at 4 B) and its two convolutions' weights (0.29 MB) once; layer4.0's conv2 group moves 9.76 MB
  over 8 iterations, its 2.36M weights once. The weights stay on the cores across a group's tiles. accelsim's
  fusion pass reads each of a chain's weights through one copy made before the tiles need it (a staged weight,
  passes/fuse_layers.py), a value the group produces and consumes, so the memory planner keeps it in the SRAM
  where it has room: the weight crosses the DRAM once per group. Where it has none (with 8 tiles, 4.7 MB of the
  10.9 MB staged: the large layer3-4 weights beside the tiles' values) the copy goes to the DRAM and every tile
  reads it there, as before plus the copy. With 8 tiles the fused convolutions now move 74.5 MB through the DRAM
  (was 124.3), the staging copies 15.7 MB, and the copies hold the SIMD core 1.96M cycles (they are slices on
  it); 13.7M cycles against Stream's 7.7M. What is left: the spilled copies, the copies on the SIMD core beside
  ReLU and Add, and the chains 8 tiles cannot cut (layer3-4's 14 and 7 rows), which stay layer by layer.
- Core allocation: Stream splits each fused layer over the four cores and gives ReLU, Add and pooling their
  own cores; accelsim's list scheduler spreads the fused tiles over the four array instances where the DRAM
  port leaves room (tests/test_stream_compare.py checks it on a small chain on the file's chip).
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

import accelsim as A
from accelsim.compiler.fusion import step_graph
from accelsim.errors import AccelsimError
from accelsim.frontends import from_onnx
from accelsim.fusion_groups import fusion_groups
from accelsim.graph.ir import Graph
from accelsim.hw.spec import HwSpec

REPO = Path(__file__).resolve().parent.parent
ONNX_FILE = REPO / "tests" / "data" / "zigzag_resnet18.onnx"  # zigzag-dse's resnet18.onnx; ZigZag reads it too
REFERENCE = REPO / "tests" / "data" / "stream_tpu_like_quad_core.json"
HW_FILE = REPO / "experiments" / "hw" / "stream_tpu_like_quad_core.yaml"
TOLERANCE = 0.25
STREAM_MODE = {"off": "layer"}  # accelsim's fusion -> the Stream mode it is compared with (any tile count: fused)


def resnet18_graph() -> Graph:
    """ResNet-18 as Stream reads it (ONNX_FILE, shape-only: its weights imported as zeros, which no cost reads)."""
    return from_onnx(ONNX_FILE, name="resnet18", loss="none", external_data="zeros")


class StreamReferenceError(AccelsimError):
    """The saved Stream answer is missing or does not say what the comparison needs."""


@dataclass(frozen=True, slots=True)
class Figures:
    """One run's whole-network figures, split as Stream splits them."""

    cycles: float
    compute_pj: float  # arithmetic (accelsim: the units' ops; Stream: ZigZag's MAC energy)
    on_chip_pj: float  # on-chip memories
    off_chip_pj: float  # the DRAM
    links_pj: float  # core-to-core links and the bus (zero energy in Stream's file)

    @property
    def energy_pj(self) -> float:
        return self.compute_pj + self.on_chip_pj + self.off_chip_pj + self.links_pj


def load_reference(path: Path = REFERENCE) -> dict:
    """Stream's saved answer, checked for the two modes and their whole-network figures."""
    path = Path(path)
    if not path.is_file():
        raise StreamReferenceError(f"{path}: no saved Stream answer; make it with experiments/stream_reference.py "
                                   "(needs stream-dse in its own Python 3.12 venv, see its docstring)")
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError) as e:
        raise StreamReferenceError(f"{path}: not readable JSON ({e})") from None
    modes = data.get("modes") if isinstance(data, dict) else None
    if not isinstance(modes, dict) or not modes:
        raise StreamReferenceError(f"{path}: key 'modes' missing or empty; expected 'layer' and 'fused' results")
    for mode, result in modes.items():
        for key in ("cycles", "energy_pj", "node_energy_pj", "transfer_energy_pj"):
            value = result.get(key) if isinstance(result, dict) else None
            if not isinstance(value, (int, float)) or not np.isfinite(value) or value <= 0:
                raise StreamReferenceError(f"{path}: modes.{mode}.{key} is {value!r}; expected a positive number")
    return data


def stream_figures(result: dict) -> Figures:
    """Stream's whole-network figures. Its energy comes in two parts: nodes on their cores (ZigZag's MACs and
    on-core memories) and transfers (DMA bits through the DRAM port, the bus and the links, whose energy is
    zero in Stream's file). Each group's node energy is split into MACs and on-core memories in the
    proportion of ZigZag's per-node costs on the cores Stream allocated."""
    compute_pj = 0.0
    for group in result["groups"]:
        energy = group.get("energy") or {}
        per_iteration = energy.get("per_iteration_pj") or 0.0
        node_share = energy.get("node_pj_per_iteration", 0.0) / per_iteration if per_iteration else 0.0
        node_pj = energy.get("total_pj", 0.0) * node_share
        mac = total = 0.0
        costs = group.get("node_costs", {})
        for name, node in group.get("nodes", {}).items():
            entries = costs.get(name, {})
            for core in _cores(node.get("resource_allocation")) or list(entries)[:1]:
                entry = entries.get(str(core))
                if entry is not None and entry.get("mac_energy_pj") is not None:
                    mac, total = mac + entry["mac_energy_pj"], total + entry["energy_pj"]
        compute_pj += node_pj * (mac / total if total else 0.0)
    node_pj = result["node_energy_pj"]
    return Figures(result["cycles"], compute_pj, node_pj - compute_pj, result["transfer_energy_pj"], 0.0)


def _cores(allocation: object) -> list[int]:
    """The compute-core ids in a node's resource_allocation as Stream's IR writes it."""
    out: list[int] = []
    stack = [allocation]
    while stack:
        item = stack.pop()
        if isinstance(item, (list, tuple)):
            stack.extend(item)
        elif isinstance(item, int):
            out.append(item)
        elif isinstance(item, str) and item.strip().lstrip("Core(").split(",")[0].isdigit():
            out.append(int(item.strip().lstrip("Core(").split(",")[0]))
    return sorted(set(out))


def accelsim_figures(graph: Graph, hw: HwSpec, fusion: str | int) -> tuple[Figures, str | int, tuple[str, ...]]:
    """accelsim's compiled and simulated step under `fusion`, the tile count it resolved to, and its fusion
    groups ("first .. last layer: T tiles")."""
    schedule = A.compile(graph, hw, fusion=fusion, effort="fast")
    fused = step_graph(graph, schedule)[0]
    groups = tuple(f"{g.label}: {len(g.tiles)} tiles" for g in fusion_groups(fused))
    result = A.simulate(schedule, graph=fused)
    compute = on_chip = off_chip = links = 0.0
    for item in result.energy.items:
        if item.kind == "static":
            continue
        if item.kind == "arithmetic":
            compute += item.energy_pj
        elif item.memory_kind == "dram":
            off_chip += item.energy_pj
        elif item.name.startswith("link"):
            links += item.energy_pj
        else:
            on_chip += item.energy_pj
    return Figures(float(result.makespan_cycles), compute, on_chip, off_chip, links), schedule.options.fusion, groups


def on_chip_activations(hw: HwSpec) -> HwSpec:
    """The chip with every activation resident in the cores' SRAM (at the file's 32 bits), a fused group's
    inputs and outputs too; the file sends them through the DRAM, as between Stream's groups (a group's
    internal values stay on chip either way: hw/placement.GROUP_INTERNAL)."""
    data = hw.model_dump()
    data["chips"][0]["placement"]["activations"]["memory"] = "sram"
    return A.load_hw(data)


def compare(tiles: int) -> list[tuple[str, str, Figures, Figures, tuple[str, ...]]]:
    """(accelsim's fusion, Stream's mode, accelsim's figures, Stream's, accelsim's fusion groups) for fusion off,
    auto and `tiles` on the file's chip, and the fused two again with activations kept on chip
    (on_chip_activations, marked "sram")."""
    reference = load_reference()
    graph, hw = resnet18_graph(), A.load_hw(HW_FILE)
    rows = []
    for fusion, chip in (("off", hw), ("auto", hw), (tiles, hw), ("auto", None), (tiles, None)):
        mode = STREAM_MODE.get(str(fusion), "fused")
        if mode not in reference["modes"]:
            continue
        mine, resolved, groups = accelsim_figures(graph, chip or on_chip_activations(hw), fusion)
        label = f"{fusion} (-> {resolved}){'' if chip else ' sram'}"
        rows.append((label, mode, mine, stream_figures(reference["modes"][mode]), groups))
    return rows


def stream_groups(result: dict) -> list[str]:
    """Stream's fusion groups of more than one layer ("first .. last layer: N layers")."""
    return [f"{g['layers'][0]} .. {g['layers'][-1]}: {len(g['layers'])} layers" for g in result["groups"]
            if len(g.get("layers", ())) > 1]


def onnx_layer(name: str) -> str:
    """The ONNX node an imported node comes from ("/conv1/Conv" of "/conv1/Conv/conv2d" and of the bias add
    "/conv1/Conv_output_0")."""
    return name[: -len("_output_0")] if name.endswith("_output_0") else name.rsplit("/", 1)[0]


def cycles_by_kind(graph: Graph, hw: HwSpec, reference: dict) -> dict[str, tuple[float, float]]:
    """Layer by layer (accelsim's fusion off, Stream's one group per layer): per ONNX op type (the last part of
    a layer's name: Conv, Relu, Add, MaxPool, GlobalAveragePool, Gemm), accelsim's task cycles summed over
    the type's layers and Stream's group cycles summed likewise."""
    schedule = A.compile(graph, hw, effort="fast")
    names = {n.id: onnx_layer(n.name) for n in graph.nodes}
    kind = lambda layer: layer.rsplit("/", 1)[-1]  # noqa: E731
    mine: dict[str, float] = {}
    for t in schedule.tasks:
        if t.kind == "node":
            k = kind(names[t.node])
            mine[k] = mine.get(k, 0.0) + t.end - t.start
    theirs: dict[str, float] = {}
    for group in reference["modes"]["layer"]["groups"]:
        for layer in group["layers"][:1]:
            theirs[kind(layer)] = theirs.get(kind(layer), 0.0) + group["cycles"]
    return {k: (mine.get(k, 0.0), theirs.get(k, 0.0)) for k in sorted(set(mine) | set(theirs))}


def within(ratio: float) -> bool:
    return abs(ratio - 1) <= TOLERANCE


def _split(f: Figures) -> str:
    return f"{f.compute_pj:.3g} / {f.on_chip_pj:.3g} / {f.off_chip_pj:.3g} / {f.links_pj:.3g}"


def _ratio(a: float, b: float) -> str:
    return f"{a / b:.3f}" if b else "-"


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tiles", type=int, default=8,
                        help="the fixed tile count compared with Stream's fused run (8: its layer1 blocks "
                             "tile 56 rows by 7)")
    args = parser.parse_args(argv)
    start = time.process_time()
    rows = compare(args.tiles)
    print(f"{'accelsim fusion':<23}{'Stream':<8}{'cycles':>14}{'Stream cycles':>15}{'ratio':>7}"
          f"{'energy pJ':>12}{'Stream pJ':>12}{'ratio':>7}  within 25%")
    for fusion, mode, mine, theirs, _ in rows:
        ok = within(mine.cycles / theirs.cycles) and within(mine.energy_pj / theirs.energy_pj)
        print(f"{fusion:<23}{mode:<8}{mine.cycles:>14,.0f}{theirs.cycles:>15,.0f}"
              f"{_ratio(mine.cycles, theirs.cycles):>7}{mine.energy_pj:>12.4g}{theirs.energy_pj:>12.4g}"
              f"{_ratio(mine.energy_pj, theirs.energy_pj):>7}  {ok}")
    print("\nenergy split (pJ): compute / on-chip memory / off-chip / links, accelsim | Stream")
    for fusion, mode, mine, theirs, _ in rows:
        print(f"{fusion:<23}{_split(mine)}  |  {_split(theirs)}")
    print("\nfusion groups: accelsim's auto (chosen per chain, compiler/fusion_choice.py) | Stream's layer-fused solve")
    auto = next((groups for fusion, _, _, _, groups in rows if fusion.startswith("auto") and "sram" not in fusion), ())
    for line in auto:
        print(f"  accelsim  {line}")
    for line in stream_groups(load_reference()["modes"].get("fused", {"groups": []})):
        print(f"  Stream    {line}")
    print("\nlayer by layer, cycles per ONNX op type: accelsim (tasks) | Stream (groups) | ratio")
    for k, (mine, theirs) in cycles_by_kind(resnet18_graph(), A.load_hw(HW_FILE), load_reference()).items():
        print(f"{k:<20}{mine:>12,.0f}{theirs:>12,.0f}{_ratio(mine, theirs):>8}")
    print(f"\nCPU seconds: {time.process_time() - start:.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
