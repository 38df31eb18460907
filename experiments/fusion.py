"""Layer fusion off vs on (compile's `fusion` step option) on a chip with little SRAM: TPU v1's shape with its
24 MiB Unified Buffer cut to 1 MiB (an hw override), so whole activations spill to DRAM while fused tiles stay on
chip. Per tile count: the makespan, the DRAM bytes the step moves (compiler/fusion.dram_bytes), the FLOPs with
the halo rows recomputed, and what `fusion=auto` keeps; then `check` on the fused superres step.

Depth-first tiling as in Alwani et al., "Fused-layer CNN accelerators" (MICRO 2016) and Stream (Symons et al.).
Run: nice python experiments/fusion.py [--quick]

Measured on the h6-fusion branch (2 heavily shared cores), tpu_v1_like with
chips.0.memories.unified_buffer.capacity_bytes = 1 MiB (makespan cycles / DRAM bytes; FLOPs grow by the recomputed
halo). Fused tiles run depth-first (tile t waits for tile t-2: compiler/planning/tile_order.py), a fused chain
stages each weight once for its tiles (a copy the memory planner keeps on chip where it has room:
passes/fuse_layers.py), and auto chooses per chain (compiler/fusion_choice.py) and prints each chain's estimates.
In brackets the figures before weights were staged (each tile read its weights from the weight DRAM):
  superres 128x128:      off 353,019 / 10.17 MB; T=2 391,113 / 12.25 MB [405,417 / 12.82]; T=4 268,899 / 3.19 MB
                         [263,048 / 4.96]; T=8 257,834 / 0.21 MB [258,565 / 4.87]; auto keeps T=8 (as before):
                         -27% makespan, -98% DRAM bytes; check of the fused step passes (6.9e-7, tolerance 1e-4).
  resnet50 stem 224x224: off 65,180 / 1.87 MB; T=2 72,056 / 1.83 MB [71,982 / 1.95]; T=4 43,502 / 0.21 MB
                         [43,784 / 0.46]; T=8 46,538 / 0.21 MB [48,141 / 0.73]; auto keeps T=4 (as before): -33%.
  resnet50 stem+layer1:  off 451,720 / 16.4 MB; T=2 576,320 / 20.4 MB [568,445 / 22.3]; T=4 513,706 / 19.3 MB
                         [the same]: staged, its tensors fit the buffer in total but do not pack into it
                         (MemoryFitError), so compile falls back to every tile reading the weights itself
                         (compiler/fusion.py; the schedule's source and `step_graph` say "weights re-read per tile:
                         staged copies did not fit"); T=8 433,553 / 9.8 MB [504,612 / 19.3];
                         auto now keeps the stem at T=8 and layer1.0 at T=4: 418,541 / 12.8 MB, -7.3% makespan
                         [the stem alone at T=4: 428,560 / 15.0 MB, -5.1%]. layer1.1 and 1.2 stay unfused: every
                         tile's slices and the concat are copies on the activation unit that also runs batch norm,
                         relu and add.
  resnet50 224x224:      off 1,150,246 / 47.8 MB; T=4 for every chain 3,090,634 / 129.5 MB [2,844,833 / 127.0];
                         auto estimates 5 chains worth fusing (the stem at T=8, layer1.0 at T=4, layer2.1-2.3 at 2)
                         and keeps the stem alone at T=4 (as before): 1,130,128 / 46.1 MB, -1.7% [1,130,410 / 46.4].
On the full 24 MiB buffer every activation stays on chip and fusion only adds the weights' staging copies and
the halo: auto keeps the unfused step (tests/test_compile_fusion.py). Whole run: 154 s CPU on the loaded
machine (127 s before auto also tried adding each chosen chain to its shortest step, compiler/fusion.py: every
row is unchanged by it, ResNet-50's auto compiles 78 s instead of 50 and still keeps the stem alone).
"""
from __future__ import annotations

import sys
import time

import accelsim as A
from accelsim.compiler.fusion import chain_choices, dram_bytes, step_graph
from accelsim.limits import graph_flops
from accelsim.passes import freeze_batchnorm, inference_graph, prune_to_outputs

SMALL_SRAM = {"chips.0.memories.unified_buffer.capacity_bytes": 1 << 20}


def _row(label: str, graph: A.Graph, hw, fusion) -> A.Schedule | None:
    start = time.process_time()
    try:
        s = A.compile(graph, hw, fusion=fusion)
    except A.AccelsimError as e:
        print(f"  {label:>7}: {type(e).__name__}: {str(e)[:120]}")
        return None
    fused, _ = step_graph(graph, s)
    print(f"  {label:>7}: makespan {s.makespan_cycles:>10,} cycles  DRAM {dram_bytes(s, hw):>12,} B  "
          f"FLOPs {graph_flops(fused):>14,}  tasks {len(s.tasks):>5}  kept fusion={s.options.fusion}  "
          f"({time.process_time() - start:.1f} s CPU)", flush=True)
    return s


def _compare(title: str, graph: A.Graph, hw, counts) -> A.Schedule | None:
    """Rows for fusion off, each tile count of `counts` for every chain, and auto; then auto's per-chain
    estimates (from the unfused schedule) and the chains it kept."""
    print(title)
    kept, unfused = None, None
    for fusion in ["off", *counts, "auto"]:
        s = _row(str(fusion), graph, hw, fusion)
        if fusion == "off":
            unfused = s
        if fusion == "auto":
            kept = s
    if unfused is not None:
        start = time.process_time()
        for choice in chain_choices(graph, hw, unfused.options, unfused):
            print(f"    {choice.describe()}")
        print(f"    (estimates: {time.process_time() - start:.1f} s CPU)")
    if kept is not None:
        chains = kept.options.fusion_chains or ()
        print(f"    auto kept: fusion={kept.options.fusion}" + (f", chains {list(chains)}" if chains else ""))
    return kept


def _resnet50_head(size: int, upto: str) -> A.Graph:
    """resnet50 at inference up to the last node of layers named `upto`* (the stem: "stem"; stage 1:
    "layer1."), batch norm frozen on its own input (a serving graph)."""
    g = freeze_batchnorm(inference_graph(A.models.build("resnet50", size=size)))
    last = max(n.id for n in g.nodes if n.layer.startswith(upto))
    g.outputs = {**g.outputs, upto: last}
    return prune_to_outputs(g, [upto], name=f"resnet50.{upto.rstrip('.')}")


def main(quick: bool) -> None:
    hw = A.load_hw("tpu_v1_like", SMALL_SRAM)
    size = 64 if quick else 128
    sr = inference_graph(A.models.build("superres", size=size))
    kept = _compare(f"superres {size}x{size} inference on tpu_v1_like, 1 MiB unified buffer", sr, hw, (2, 4, 8))
    if kept is not None and kept.options.fusion != "off":
        start = time.process_time()
        report = A.check(kept, backend="numpy")
        worst = max(report.entries, key=lambda e: e.max_rel_err)
        print(f"  check of the fused step (numpy kernels): {worst.name} relative error {worst.max_rel_err:.2e} "
              f"of tolerance {worst.tolerance:g} ({time.process_time() - start:.1f} s CPU)")
    if not quick:
        for upto, what in (("stem", "stem (7x7 conv s2, batch norm, relu, 3x3 max pool s2)"),
                           ("layer1.", "stem + layer1")):
            _compare(f"resnet50 {what}, 224x224 inference (frozen batch norm) on tpu_v1_like, 1 MiB unified "
                     "buffer", _resnet50_head(224, upto), hw, (2, 4, 8))
        whole = freeze_batchnorm(inference_graph(A.models.build("resnet50", size=224)))
        _compare("resnet50, 224x224 inference (frozen batch norm) on tpu_v1_like, 1 MiB unified buffer", whole, hw,
                 (4,))


if __name__ == "__main__":
    main("--quick" in sys.argv[1:])
