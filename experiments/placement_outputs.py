"""Placement of gradients, activations and step results (issue 28; hw/placement.py): the superres training step
on bespoke_superres (16 MiB SRAM, 4 GiB DRAM) with each class resident in the other memory than by default,
and its makespan, DRAM bytes and energy against the default placement.
Run: python experiments/placement_outputs.py [--batch 1] [--microbatches 2]
"""
from __future__ import annotations

import argparse
import copy

import yaml

import accelsim as A
from accelsim.hw.load import bundled_path

PLACEMENTS = {"default": {}, "activations in DRAM": {"activations": {"memory": "dram"}},
              "gradients in DRAM": {"gradients": {"memory": "dram"}},
              "step results in SRAM": {"step_results": {"memory": "sram"}}}


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
            d["chips"][0]["placement"] = extra
        hw = A.load_hw(d)
        s = A.compile(g, hw, microbatches=args.microbatches)
        e = A.simulate(s, hw, graph=g).energy
        dram = [i for i in e.items if i.name == "chip0:dram" and i.kind.startswith("memory_")]
        print(f"{name:<22} {s.makespan_cycles:>10} {sum(i.quantity for i in dram) / 1e6:>8.2f} "
              f"{sum(i.energy_pj for i in dram) / 1e6:>8.1f} {e.total_pj / 1e6:>9.1f} {e.static_pj / 1e6:>9.1f}")


if __name__ == "__main__":
    main()
