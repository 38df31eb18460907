"""ResNet-18/ResNet-50's first convolution (C=3, 7x7 filters, stride 2, 64 filters, 112x112 outputs; the same
layer in both) on a 32x32 array and on tpu_v1_like's 256x256 MXU: the im2col mapping accelsim has always
used (rows <- C x FY x FX = 147) against a fixed spatial mapping like ZigZag's tpu_like (rows <- C = 3, FY
and FX left as loops over folds), and what the mapper picks.

Both arrays are tpu_v1_like's weight-stationary MXU (folds overlap, one row of weights installed per cycle);
the 32x32 one is that unit with its rows and cols overridden. The mapper is run twice: with the unit's one
dataflow (ws) and with `dataflows: [ws, os, is]`, objective latency.
Run: python experiments/mapping_first_conv.py   (prints the table, the explanation and the CPU seconds of
mapping all of ResNet-50's layers).
"""
from __future__ import annotations

import time

import accelsim as A
from accelsim.mapping.cache import MappingCache, map_graph
from accelsim.mapping.cost import MappingCost, mapping_cost
from accelsim.mapping.dims import layer_dims
from accelsim.mapping.fixed import im2col_mapping
from accelsim.mapping.mapper import MapperOptions, search_mapping
from accelsim.mapping.record import Mapping

ARRAYS = {"32x32": {"chips.0.units.mxu.array.rows": 32, "chips.0.units.mxu.array.cols": 32}, "256x256": {}}
ALL_DATAFLOWS = {"chips.0.units.mxu.dataflows": ["ws", "os", "is"]}
BUFFERS = {"chips.0.units.mxu.operand_buffers": {"input_bytes": "256 KiB", "weight_bytes": "64 KiB",
                                                 "output_bytes": "64 KiB", "bandwidth_bytes_per_cycle": 64}}


def only_c_on_rows(layer) -> Mapping:
    """ZigZag tpu_like's spatial choice: C on the rows, K on the columns; FY, FX become fold loops."""
    stream = tuple((d.name, d.size) for d in layer.of_role("m") if d.size > 1)
    return Mapping("ws", ("C",), ("K",), stream, ("FY", "FX", "cols"))


def _row(array: str, label: str, cost: MappingCost) -> str:
    return (f"{array:>8} | {label:<22} | {cost.mapping.describe():<66} | {cost.folds:>5} | {cost.temporal:>6} | "
            f"{cost.compute_cycles:>9,} | {cost.array_utilization:>6.1%}")


def main() -> None:
    graph = A.models.build("resnet50", batch=1)
    node = next(n for n in graph.nodes if n.op == "conv2d")
    layer = layer_dims(graph, node)
    print(f"layer: {layer.describe()}  ({layer.macs:,} MACs)\n")
    print(f"{'array':>8} | {'mapping':<22} | {'loop nest':<66} | {'folds':>5} | {'T':>6} | {'cycles':>9} | util")
    for array, overrides in ARRAYS.items():
        hw = A.load_hw("tpu_v1_like", overrides=overrides)
        chip, unit = hw.chips[0], hw.chips[0].units[0]
        print(_row(array, "im2col (today)", mapping_cost(hw, chip, unit, layer, im2col_mapping(layer, "ws"))))
        print(_row(array, "rows <- C (ZigZag-like)", mapping_cost(hw, chip, unit, layer, only_c_on_rows(layer))))
        print(_row(array, "mapper, ws", search_mapping(hw, chip, unit, layer, MapperOptions())))
        hw_all = A.load_hw("tpu_v1_like", overrides={**overrides, **ALL_DATAFLOWS})
        print(_row(array, "mapper, ws/os/is", search_mapping(hw_all, hw_all.chips[0], hw_all.chips[0].units[0],
                                                            layer, MapperOptions())))
    print(EXPLANATION)
    for label, overrides in (("tpu_v1_like", {}), ("tpu_v1_like, ws/os/is", ALL_DATAFLOWS),
                             ("tpu_v1_like, ws/os/is + operand buffers", {**ALL_DATAFLOWS, **BUFFERS})):
        hw = A.load_hw("tpu_v1_like", overrides=overrides)
        cache = MappingCache()
        start = time.process_time()
        result = map_graph(hw, graph, hw.chips[0].units[0], MapperOptions(), cache)
        cpu = time.process_time() - start
        print(f"ResNet-50 on {label}: {len(result)} layers, {cache.misses} searched ({cache.hits} cache hits), "
              f"{cpu:.2f} s CPU, {sum(c.cycles for c in result.values()):,} cycles")


EXPLANATION = """
Why. On a weight-stationary array each fold installs a rows x cols tile of weights and streams every output
pixel (T = 112 x 112 = 12,544) past it, so the cycles are about folds x T. im2col flattens C x FY x FX = 147
into the reduction the rows hold: ceil(147/32) = 5 row folds x 2 column folds = 10 folds on 32x32, with
147/160 of the rows busy. rows <- C puts only 3 of 32 rows to work and turns the 49 filter taps into fold
loops: 49 x 2 = 98 folds, ~9.8x the cycles. That is the 0.10 ratio issue 31 reports between accelsim's and
ZigZag's latency on this layer: the mapping, not the array, differs. On 256x256, im2col needs one row fold
(147 of 256 rows busy), rows <- C 49 folds with 3 of 256 rows busy. The mapper searches the row and
column sets (and, given operand buffers, stream tiles), starts from im2col and keeps it
unless something is faster: with ws only it keeps im2col on both arrays. With os and is allowed on 256x256
it picks input-stationary: the 12,544 output pixels are spread over 49 column folds of 256 and the 64
filters stream, each fold issuing every max(T = 64, install = 256) cycles under the MXU's fold overlap, a
little under im2col's one long fold. A row of the table per mapping; cycles are compute cycles
(cost/systolic.py's fold model), util = MACs / (cycles x PEs).
"""

if __name__ == "__main__":
    main()
