"""The list scheduler against exact optima on generated DAG problems (layered DAGs and training steps).

For each problem: the heuristic (schedule_dag: every priority rule, the best kept, as compile does), plain
HEFT (priority="rank") and CP-SAT seeded with the heuristic (solve_dag_exact). Prints one row per problem
and a summary against the targets of issue 11 (median <= 1.01x, max <= 1.05x optimal, never worse than
HEFT, >= 90% proved optimal). Needs OR-Tools: pip install accelsim[exact].
Run: python experiments/bench_scheduler.py [--problems 40] [--time-limit 10] [--seed 0]
"""
from __future__ import annotations

import argparse
import statistics

from dag_problems import problems

from accelsim.schedule import schedule_dag
from accelsim.schedule.exact import solve_dag_exact


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--problems", type=int, default=40)
    parser.add_argument("--time-limit", type=float, default=10.0, help="CP-SAT seconds per problem")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    print(f"{'problem':24} {'tasks':>5} {'heur':>6} {'HEFT':>6} {'opt/best':>8} {'bound':>6} {'proved':>6} "
          f"{'heur/opt':>8} {'HEFT/opt':>8} {'CP-SAT s':>8}")
    heur_ratios, worse_than_heft, proved = [], [], 0
    for name, problem in problems(args.problems, args.seed):
        heur = schedule_dag(problem)
        heft = schedule_dag(problem, priority="rank")
        exact = solve_dag_exact(problem, time_limit_s=args.time_limit, hint=heur)
        # unproved rows compare against the best schedule found, so their ratio is a lower estimate (*)
        best = min(exact.makespan, heur["makespan"], heft["makespan"])
        heur_ratio, heft_ratio = heur["makespan"] / best, heft["makespan"] / best
        heur_ratios.append(heur_ratio)
        proved += exact.optimal
        if heur["makespan"] > heft["makespan"]:
            worse_than_heft.append(name)
        mark = "" if exact.optimal else "*"
        print(f"{name:24} {len(problem['tasks']):5d} {heur['makespan']:6d} {heft['makespan']:6d} {best:8d} "
              f"{exact.lower_bound:6d} {'yes' if exact.optimal else 'no':>6} {heur_ratio:7.3f}{mark:1} "
              f"{heft_ratio:7.3f}{mark:1} {exact.seconds:8.2f}")

    n = len(heur_ratios)
    print(f"\nsummary over {n} problems (* = not proved in {args.time_limit:g} s: ratio to the best found)")
    print(f"  heuristic / optimum: median {statistics.median(heur_ratios):.3f}, max {max(heur_ratios):.3f}"
          f"   (targets: median <= 1.010, max <= 1.050)")
    print(f"  heuristic worse than plain HEFT: {len(worse_than_heft)} {' '.join(worse_than_heft)}  (target: 0)")
    print(f"  proved optimal within {args.time_limit:g} s: {proved}/{n} = {proved / n:.0%}   (target: >= 90%)")


if __name__ == "__main__":
    main()
