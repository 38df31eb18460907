"""Placement of gradients, activations and step results (issue 28; hw/placement.py): the superres training step
on bespoke_superres (16 MiB SRAM, 4 GiB DRAM) with each class resident in the other memory than by default, and
activations streamed from the DRAM through a DMA engine (at the DRAM's 25.6 GB/s, 4 tiles of 16 KiB, into a
64 KiB buffer added for it), and its makespan, DRAM bytes and energy against the default placement.
Run: python experiments/placement_outputs.py [--batch 1] [--microbatches 2]   (about 7 s of CPU)

Measured (batch 1, 2 micro-batches): makespan cycles, DRAM MB, energy uJ
  default                  365,114    0.88   7,142.9
  activations in DRAM    3,038,700   75.73  41,143.9
  gradients in DRAM        400,322    2.32   7,699.5
  step results in SRAM     355,898    0.00   6,873.0
  activations streamed   3,036,786   75.73  41,366.1
Streamed activations move the same DRAM bytes as resident ones (each value written back once, read by each
reader: its head by the prefetches, the rest by the reader) plus the buffer's bytes; the write-backs run on
the DMA engine, so a producer no longer waits for the DRAM write, but the readers still wait for the DRAM.
"""
from __future__ import annotations

import argparse
import copy

import yaml

import accelsim as A
from accelsim.hw.load import bundled_path

PLACEMENTS = {"default": {}, "activations in DRAM": {"activations": {"memory": "dram"}},
              "gradients in DRAM": {"gradients": {"memory": "dram"}},
              "step results in SRAM": {"step_results": {"memory": "sram"}},
              "activations streamed": {"activations": {"memory": "dram", "stream": {
                  "buffer": "dma_buffer", "bandwidth_bytes_per_s": "25.6 GB/s", "prefetch_depth": 4,
                  "tile_bytes": "16 KiB"}}}}
BUFFER = {"name": "dma_buffer", "kind": "sram", "capacity_bytes": "64 KiB", "bandwidth_bytes_per_cycle": 64}
"""The streamed row's prefetch buffer (a stream's buffer holds its prefetches only)."""


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--microbatches", type=int, default=2)
    args = ap.parse_args()
    base = yaml.safe_load(bundled_path("bespoke_superres").read_text())
    g = A.training_graph(A.models.build("superres", batch=args.batch), optimizer="sgd", lr=0.01)
    print(f"{'placement':<22} {'makespan':>10} {'DRAM MB':>8} {'DRAM uJ':>8} {'energy uJ':>9} {'static uJ':>9}")
    for name, extra in PLACEMENTS.items():
        d = copy.deepcopy(base)
        if extra:
            d["chips"][0]["placement"] = copy.deepcopy(extra)
        if any(w.get("stream") for w in extra.values()):
            d["chips"][0]["memories"].append(dict(BUFFER))
        hw = A.load_hw(d)
        s = A.compile(g, hw, microbatches=args.microbatches)
        e = A.simulate(s, hw, graph=g).energy
        dram = [i for i in e.items if i.name == "chip0:dram" and i.kind.startswith("memory_")]
        print(f"{name:<22} {s.makespan_cycles:>10} {sum(i.quantity for i in dram) / 1e6:>8.2f} "
              f"{sum(i.energy_pj for i in dram) / 1e6:>8.1f} {e.total_pj / 1e6:>9.1f} {e.static_pj / 1e6:>9.1f}")


if __name__ == "__main__":
    main()
