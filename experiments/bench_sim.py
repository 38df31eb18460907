"""Simulation speed vs graph size (training steps on a100_like), against raw SimPy in the same run.

Raw SimPy: one process yielding `env.timeout(1)` in a loop, the cheapest event SimPy has; accelsim's
events carry dependences, unit turns, memory and port bookkeeping, so the ratio is the overhead.
Run: python experiments/bench_sim.py [--repeat 3]
"""
from __future__ import annotations

import argparse
import statistics
import time

import simpy

import accelsim as A
from accelsim.sim import simulate

CASES = [
    ("superres", {}), ("mlp", {}), ("resnet_block", {}), ("transformer_block", {}),
    ("gpt2", {"layers": 1}), ("gpt2", {"layers": 2}), ("gpt2", {"layers": 4}), ("gpt2", {"layers": 12}),
]


def raw_simpy_events_per_s(n: int = 200_000) -> float:
    env = simpy.Environment()

    def ticker():
        for _ in range(n):
            yield env.timeout(1)

    env.process(ticker())
    start = time.perf_counter()
    env.run()
    return n / (time.perf_counter() - start)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--hw", default="a100_like")
    args = parser.parse_args()
    hw = A.load_hw(args.hw)
    raw = statistics.median(raw_simpy_events_per_s() for _ in range(args.repeat))
    print(f"raw SimPy: {raw:,.0f} events/s (median of {args.repeat})")
    header = f"{'graph':22s} {'tasks':>6s} {'mode':8s} {'events':>8s} {'sim s':>7s} {'events/s':>10s} " \
             f"{'vs raw':>7s} {'sim/compiled makespan':>22s}"
    print(header)
    print("-" * len(header))
    for name, opts in CASES:
        graph = A.training_graph(A.models.build(name, **opts))
        sched = A.compile(graph, hw)
        label = name + "".join(f" {k}={v}" for k, v in opts.items())
        for mode in ("static", "dynamic"):
            times, result = [], None
            for _ in range(args.repeat):
                start = time.perf_counter()
                result = simulate(sched, hw, mode)
                times.append(time.perf_counter() - start)
            sec = statistics.median(times)
            rate = result.events / sec
            print(f"{label:22s} {len(sched.tasks):6d} {mode:8s} {result.events:8d} {sec:7.3f} {rate:10,.0f} "
                  f"{rate / raw:7.2f} {result.makespan_cycles / sched.makespan_cycles:22.3f}")


if __name__ == "__main__":
    main()
