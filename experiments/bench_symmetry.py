"""Compile + simulate time of the largest configurations of the scaling table (GPT-2 small training, seq 1024,
2 micro-batches, Adam, on a100_x8: 43K tasks each), against the same compile with symmetry switched off
(compiler/timing/symmetry.py: every task list-scheduled, the baseline), measured in the same run.

Quotes the median of --repeats runs of the symmetric compile + simulate and one baseline run per
configuration (the baseline takes minutes), the ratio between them, and whether the median meets the
issue's < 30 s. Makespans must be no longer with symmetry than without.

Run: python experiments/bench_symmetry.py [--configs "4,1,2;2,1,4;8,1,1"] [--repeats 3] [--no-baseline]
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time

import accelsim as A
from accelsim.compiler.timing import search

TARGET_S = 30.0


def build(t: int) -> A.Graph:
    opts = dict(batch=1, seq=1024, layers=12, d_model=768, heads=12, vocab=50257)
    if t > 1:
        opts["tensor_parallel"] = t
    return A.training_graph(A.models.build("gpt2", **opts), optimizer="adam")


def timed(step: A.Graph, hw: A.HwSpec, d: int, p: int) -> tuple[float, float, int, int]:
    """(compile s, simulate s, tasks, makespan) of one compile + simulate."""
    start = time.perf_counter()
    sched = A.compile(step, hw, data_parallel=d, pipeline_stages=p, microbatches=2, split=False)
    compiled = time.perf_counter()
    result = A.simulate(sched, graph=step, hw=hw)
    assert result.makespan_cycles == sched.makespan_cycles
    return compiled - start, time.perf_counter() - compiled, len(sched.tasks), sched.makespan_cycles


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--hw", default="hwconfigs/a100_x8.yaml")
    ap.add_argument("--configs", default="4,1,2;2,1,4;8,1,1", help="d,p,t;d,p,t;...")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--no-baseline", action="store_true", help="skip the whole-plan baseline (minutes each)")
    args = ap.parse_args()
    hw = A.load_hw(args.hw)
    worst = 0.0
    for text in args.configs.split(";"):
        d, p, t = (int(v) for v in text.split(","))
        step = build(t)
        runs = [timed(step, hw, d, p) for _ in range(args.repeats)]
        total = statistics.median(c + s for c, s, _, _ in runs)
        worst = max(worst, total)
        _, _, tasks, makespan = runs[0]
        line = (f"d={d} p={p} t={t}: {tasks:,} tasks, makespan {makespan:,} cycles; compile + simulate median "
                f"{total:.1f} s over {args.repeats} (compile {statistics.median(c for c, *_ in runs):.1f} s, "
                f"simulate {statistics.median(s for _, s, *_ in runs):.1f} s)")
        if not args.no_baseline:
            compile_module = sys.modules["accelsim.compiler.compile"]  # `A.compile` names the function
            reduce = search.reduce
            search.reduce = compile_module.reduce = lambda plan: None  # every task list-scheduled: no symmetry
            try:
                c, s, _, whole = timed(step, hw, d, p)
            finally:
                search.reduce = compile_module.reduce = reduce
            assert makespan <= whole, f"symmetric makespan {makespan} above the whole plan's {whole}"
            line += f"; without symmetry {c + s:.1f} s (x{(c + s) / total:.1f}), makespan {whole:,}"
        print(line, flush=True)
    print(f"largest configurations: worst median {worst:.1f} s (target < {TARGET_S:.0f} s: "
          f"{'met' if worst < TARGET_S else 'MISSED'})")


if __name__ == "__main__":
    main()
