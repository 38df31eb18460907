"""Static (compiled, replayed) vs dynamic (work queue, seed 001's runtime) scheduling.

Both are simulated with the same SimPy model of the machine; the static schedule keeps its compiled
order and placement, the dynamic runtime hands ready tasks to whichever capable unit is free.
Run: python experiments/static_vs_dynamic.py
"""
from __future__ import annotations

import accelsim as A
from accelsim.passes import inference_graph
from accelsim.sim import simulate

CASES = [  # (hw, model, options, inference, micro-batches)
    ("multicore_cpu", "superres", {}, False, 1), ("multicore_cpu", "resnet_block", {}, False, 2),
    ("multicore_cpu", "transformer_block", {}, True, 4), ("multicore_cpu", "mlp", {}, False, 4),
    ("groq_like", "superres", {}, False, 1), ("groq_like", "resnet50", {}, True, 1),
    ("groq_like", "transformer_block", {}, False, 2), ("groq_like", "mlp", {}, True, 8),
    ("bespoke_superres", "superres", {}, True, 8), ("bespoke_superres", "superres", {}, False, 4),
]


def main() -> None:
    header = f"{'hardware':17s} {'model':18s} {'step':9s} {'m':>2s} {'static cycles':>14s} {'dynamic cycles':>15s} " \
             f"{'dynamic/static':>15s}  winner"
    print(header)
    print("-" * len(header))
    for hw_name, model, opts, inference, m in CASES:
        hw = A.load_hw(hw_name)
        fwd = A.models.build(model, **opts)
        graph = inference_graph(fwd) if inference else A.training_graph(fwd)
        sched = A.compile(graph, hw, microbatches=m)
        static = simulate(sched, hw).makespan_cycles
        dynamic = simulate(sched, hw, "dynamic").makespan_cycles
        ratio = dynamic / static
        winner = "static" if ratio > 1.0005 else "dynamic" if ratio < 0.9995 else "tie"
        print(f"{hw_name:17s} {model:18s} {'inference' if inference else 'training':9s} {m:2d} {static:14d} "
              f"{dynamic:15d} {ratio:15.3f}  {winner}")


if __name__ == "__main__":
    main()
