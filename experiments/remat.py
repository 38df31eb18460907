"""Rematerialization on a GPT-2 training step: peak memory, makespan and recomputed FLOPs of each policy on
groq_like and a100_like, with ratios against `none` measured in the same run.

Peak memory is the compiled schedule's (Schedule.peak_memory_bytes, summed over the chip's memories, in the
hardware's bytes, leaves included); "estimate" is the policy's own figure (accelsim.remat.memory: liveness
in topological order, computed tensors only, numpy bytes). Recomputed FLOPs: the rematerialized step's
FLOPs less the original's (the registry's counts). The budget policy is given half the estimate of `none`.
Run: python experiments/remat.py [--layers 4] [--seq 128]
"""
from __future__ import annotations

import argparse
import time

import accelsim as A
from accelsim.limits import graph_flops
from accelsim.remat import activation_peak_bytes, layer_count

HWS = ("groq_like", "a100_like")


def step(layers: int, seq: int) -> A.Graph:
    """A GPT-2 training step whose activations dwarf its parameters (batch 4, width 64, vocab 64)."""
    return A.training_graph(A.models.build("gpt2", batch=4, seq=seq, layers=layers, d_model=64, heads=4, vocab=64))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--seq", type=int, default=128)
    args = parser.parse_args()
    graph = step(args.layers, args.seq)
    base_estimate = activation_peak_bytes(graph)
    policies = ["none", "sqrt", "every:1", "every:2", f"budget:{base_estimate // 2}"]
    print(f"gpt2 step: {args.layers} blocks ({layer_count(graph)} layers for every:K), batch 4, seq {args.seq}, "
          f"d_model 64; {len(graph.nodes)} nodes, {graph_flops(graph) / 1e9:.3f} GFLOP")
    graphs = {p: A.rematerialize(graph, p) for p in policies}
    header = (f"{'hw':10s} {'policy':16s} {'estimate MiB':>12s} {'peak MiB':>9s} {'x none':>7s} {'makespan':>9s} "
              f"{'x none':>7s} {'recomputed GFLOP':>16s} {'x step':>7s} {'compile s':>9s}")
    print(header)
    for hw_name in HWS:
        hw = A.load_hw(hw_name)
        base = None
        for policy, g in graphs.items():
            start = time.perf_counter()
            sched = A.compile(g, hw)
            seconds = time.perf_counter() - start
            peak = sum(sched.peak_memory_bytes.values())
            base = base or (peak, sched.makespan_cycles)
            extra = graph_flops(g) - graph_flops(graph)
            print(f"{hw_name:10s} {policy:16s} {activation_peak_bytes(g) / 2**20:12.3f} {peak / 2**20:9.3f} "
                  f"{peak / base[0]:7.3f} {sched.makespan_cycles:9d} {sched.makespan_cycles / base[1]:7.3f} "
                  f"{extra / 1e9:16.4f} {extra / graph_flops(graph):7.3f} {seconds:9.2f}")


if __name__ == "__main__":
    main()
