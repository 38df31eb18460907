"""The best array shape for ResNet-50 (batch 1, inference) on a shipped chip, tpu_v1_like, with its fixed
weight-stationary im2col mapping against the mapper (`mapping: search`, dataflows ws/os/is, latency): does the
mapper change the answer?

Every shape keeps the MXU's 65,536 PEs (rows x cols), everything else is tpu_v1_like's. For each shape and each
way of costing, the step is compiled (A.compile) and its makespan reported; the sum of the array's layer
cycles is shown beside it. The mapper maps each distinct layer shape once per hardware (its cache), and the
CPU seconds of mapping all 54 layers are printed per shape (issue 31: under 10 s).
Run: python experiments/mapping_array_sweep.py  [--quick: three shapes]
"""
from __future__ import annotations

import sys
import time

import accelsim as A
from accelsim.cost.model import node_cost
from accelsim.mapping.cache import MappingCache, map_graph
from accelsim.mapping.mapper import MapperOptions

PES = 256 * 256
SHAPES = ((64, 1024), (128, 512), (256, 256), (512, 128), (1024, 64))
QUICK = ((128, 512), (256, 256), (512, 128))
SEARCH = {"chips.0.units.mxu.mapping": "search", "chips.0.units.mxu.dataflows": ["ws", "os", "is"]}


def _hw(rows: int, cols: int, search: bool) -> A.HwSpec:
    shape = {"chips.0.units.mxu.array.rows": rows, "chips.0.units.mxu.array.cols": cols}
    return A.load_hw("tpu_v1_like", overrides={**shape, **(SEARCH if search else {})})


def _array_cycles(hw: A.HwSpec, graph: A.Graph, search: bool) -> tuple[int, float, int, int]:
    """Sum of the MXU's layer cycles, the CPU seconds of mapping them, searches run and cache hits."""
    unit = hw.chips[0].units[0]
    if not search:
        from accelsim.cost.model import can_run

        return sum(node_cost(hw, graph, n, unit).cycles for n in graph.nodes
                   if not n.is_leaf and can_run(unit, graph, n)), 0.0, 0, 0
    cache = MappingCache()
    start = time.process_time()
    costs = map_graph(hw, graph, unit, MapperOptions(), cache)
    return sum(c.cycles for c in costs.values()), time.process_time() - start, cache.misses, cache.hits


def main(shapes: tuple[tuple[int, int], ...]) -> None:
    graph = A.models.build("resnet50", batch=1)
    print(f"ResNet-50 batch 1 inference on tpu_v1_like, MXU reshaped to {PES:,} PEs; makespan from A.compile\n")
    print(f"{'array':>9} | {'fixed ws: makespan':>18} | {'MXU cycles':>10} | {'mapper: makespan':>16} | "
          f"{'MXU cycles':>10} | {'gain':>5} | mapping CPU")
    best: dict[str, tuple[int, str]] = {}
    for rows, cols in shapes:
        label = f"{rows}x{cols}"
        row = []
        for search in (False, True):
            hw = _hw(rows, cols, search)
            makespan = A.compile(graph, hw).makespan_cycles
            cycles, cpu, misses, hits = _array_cycles(hw, graph, search)
            row.append((makespan, cycles, cpu, misses, hits))
            key = "mapper" if search else "fixed ws"
            best[key] = min(best.get(key, (makespan, label)), (makespan, label))
        (fm, fc, *_), (sm, sc, cpu, misses, hits) = row
        print(f"{label:>9} | {fm:>18,} | {fc:>10,} | {sm:>16,} | {sc:>10,} | {fm / sm:>4.2f}x | {cpu:.2f} s "
              f"({misses} searched, {hits} cache hits)")
    print()
    for key, (makespan, label) in best.items():
        print(f"best shape with {key}: {label} ({makespan:,} cycles)")
    if best["fixed ws"][1] != best["mapper"][1]:
        print("The mapper changes the answer: with a free choice of dataflow and spatial dimensions per layer, a "
              "different shape is best.")
    else:
        print("The mapper keeps the answer: the same shape is best either way (see the gains per shape).")


if __name__ == "__main__":
    main(QUICK if "--quick" in sys.argv[1:] else SHAPES)
