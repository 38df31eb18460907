"""Seed 001's timelines for the super-resolution CNN on its bespoke accelerator: serial, pipeline
parallelism, simple data parallelism and pipelined data parallelism, for inference and training.

Every configuration processes the same 4 inputs per step. Data parallelism needs independent
hardware, so its replicas run on a second copy of the bespoke chip (an assumed 16 GB/s link joins
them for the training all-reduce). Writes plots/seed_timelines/<step>_<config>.png and prints a
table: more parallelism buys throughput with more buffer memory and more units.
Run: python experiments/seed_timelines.py [--out plots/seed_timelines]
"""
from __future__ import annotations

import argparse
from pathlib import Path

import accelsim as A
from accelsim.hw.spec import Interconnect
from accelsim.metrics import BUSY_KINDS
from accelsim.passes import inference_graph
from accelsim.sim import simulate
from accelsim.viz import plot_timeline

# (name, micro-batches per replica, replicas, micro-batches in flight per replica)
CONFIGS = [("serial", 4, 1, 1), ("pipeline", 4, 1, None), ("simple_dp", 2, 2, 1), ("pipelined_dp", 2, 2, None)]


def two_chips(hw: A.HwSpec) -> A.HwSpec:
    """Two copies of the bespoke chip; the link is an assumption (16 GB/s, 500 ns), not a published figure."""
    link = Interconnect(topology="ring", bandwidth_bytes_per_s=16e9, link_latency_cycles=500)
    return hw.model_copy(update={"name": hw.name + "_x2", "chips": [hw.chips[0].model_copy(update={"count": 2})],
                                 "interconnect": link})


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="plots/seed_timelines")
    args = parser.parse_args()
    one = A.load_hw("bespoke_superres")
    two = two_chips(one)
    fwd = A.models.build("superres")
    header = f"{'step':9s} {'config':13s} {'samples/s':>10s} {'latency us':>11s} {'peak buffer MiB':>16s} " \
             f"{'units used':>10s} {'mean util':>9s} {'makespan':>9s}"
    print(header)
    print("-" * len(header))
    for step, graph in (("inference", inference_graph(fwd)), ("training", A.training_graph(fwd))):
        for name, m, d, window in CONFIGS:
            hw = one if d == 1 else two
            sched = A.compile(graph, hw, microbatches=m, data_parallel=d, max_in_flight=window)
            result = simulate(sched, hw)
            path = Path(args.out) / f"{step}_{name}.png"
            plot_timeline(result, path, title=f"{step}, {name.replace('_', ' ')}: {m * d} inputs on {hw.name}")
            used = {(s.chip, s.resource, s.instance) for s in result.spans if s.kind in BUSY_KINDS}
            util = [v for v in result.utilization().values() if v > 0]
            peak = sum(result.peak_occupancy_bytes().values())
            print(f"{step:9s} {name:13s} {result.throughput_samples_per_s:10.0f} "
                  f"{result.latency_cycles() / hw.clock_hz * 1e6:11.1f} {peak / 2**20:16.2f} {len(used):10d} "
                  f"{sum(util) / len(util):9.2f} {result.makespan_cycles:9d}", flush=True)
    print(f"timelines written to {args.out}/")


if __name__ == "__main__":
    main()
