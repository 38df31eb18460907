"""Compile time vs graph size (training graphs on a100_like, the shipped config with room for GPT-2).

Prints nodes, edges, tasks, the median compile time (list scheduling + memory placement +
validation), the median time of the simpler baseline that only expands the step and costs every
node (no scheduling), their ratio, the time per (V + E) log2 V (flat if compile is O((V+E) log V)),
and makespan / bound. Then GPT-2 small's training step alone (exact mode off): the median CPU time of
compile against the issue's 2 s target, and against one list-schedule run of the same plan in the same
process (the search of improve.py runs several under its work budget).
Run: python experiments/bench_compile.py [--repeat 3] [--gpt2-repeat 5]
"""
from __future__ import annotations

import argparse
import math
import statistics
import time

import accelsim as A
from accelsim.compiler.planning.expand import expand
from accelsim.compiler.timing.improve import BUDGET, distinct_rules
from accelsim.compiler.timing.list_sched import list_schedule
from accelsim.schedule.options import StepOptions

CASES = [
    ("superres", {}), ("mlp", {}), ("resnet_block", {}), ("transformer_block", {}),
    ("gpt2", {"layers": 1}), ("gpt2", {"layers": 2}), ("gpt2", {"layers": 4}), ("gpt2", {"layers": 12}),
]


def _median_seconds(fn, repeat: int) -> tuple[float, object]:
    times, out = [], None
    for _ in range(repeat):
        start = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times), out


def _median_cpu_seconds(fn, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        start = time.process_time()
        fn()
        times.append(time.process_time() - start)
    return statistics.median(times)


def gpt2_small(hw: A.HwSpec, repeat: int) -> None:
    """GPT-2 small training, one micro-batch: compile (exact mode off) vs one list-schedule run."""
    graph = A.training_graph(A.models.build("gpt2"))
    plan = expand(graph, hw, StepOptions())
    compile_s = _median_cpu_seconds(lambda: A.compile(graph, hw), repeat)
    run_s = _median_cpu_seconds(lambda: list_schedule(plan, hw, "rank"), repeat)
    rules = distinct_rules(plan)
    print(f"\nGPT-2 small training on {hw.name}: {len(plan.tasks)} tasks; CPU medians of {repeat}")
    print(f"  compile (exact off): {compile_s:.3f} s   (target: < 2 s)")
    print(f"  one list-schedule run: {run_s:.3f} s; compile / run = {compile_s / run_s:.1f}")
    print(f"  search budget {BUDGET.work_tasks:,} task-schedulings = {BUDGET.work_tasks / len(plan.tasks):.1f} runs "
          f"of this plan; distinct rules: {', '.join(rules)}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--hw", default="a100_like")
    parser.add_argument("--gpt2-repeat", type=int, default=5)
    args = parser.parse_args()
    hw = A.load_hw(args.hw)
    print(f"hardware {hw.name}; medians of {args.repeat} runs")
    header = f"{'graph':28s} {'nodes':>6s} {'edges':>6s} {'tasks':>6s} {'compile s':>9s} {'cost-only s':>11s} " \
             f"{'ratio':>6s} {'us/(V+E)logV':>12s} {'makespan/bound':>14s}"
    print(header)
    print("-" * len(header))
    for name, opts in CASES:
        graph = A.training_graph(A.models.build(name, **opts))
        v, e = len(graph.nodes), sum(len(n.inputs) for n in graph.nodes)
        base_s, _ = _median_seconds(lambda: expand(graph, hw, StepOptions()), args.repeat)
        comp_s, sched = _median_seconds(lambda: A.compile(graph, hw), args.repeat)
        label = name + "".join(f" {k}={v}" for k, v in opts.items())
        per = comp_s / ((v + e) * math.log2(v)) * 1e6
        print(f"{label:28s} {v:6d} {e:6d} {len(sched.tasks):6d} {comp_s:9.3f} {base_s:11.3f} "
              f"{comp_s / base_s:6.2f} {per:12.2f} {sched.bound_ratio:14.3f}")
    gpt2_small(hw, args.gpt2_repeat)


if __name__ == "__main__":
    main()
