"""The list scheduler against exact optima on generated DAG problems (layered DAGs and training steps).

For each problem: the heuristic (schedule_dag: compile's search of improve.py, every priority rule then
forward-backward and perturbed runs under a fixed work budget), plain HEFT (priority="rank"), each priority
rule alone, and CP-SAT seeded with the heuristic (solve_dag_exact). Prints one row per problem, then a summary
against the targets of issue 11 (median <= 1.01x, max <= 1.05x optimal, never worse than HEFT, >= 90% proved
optimal) and how often each rule was the best of the rules. Needs OR-Tools: pip install accelsim[exact].
Run: python experiments/bench_scheduler.py [--problems 40] [--time-limit 10] [--seed 0]
"""
from __future__ import annotations

import argparse
import statistics
import time

from dag_problems import problems

from accelsim.compiler import schedule_dag
from accelsim.compiler.exact import solve_dag_exact
from accelsim.compiler.timing.priorities import PRIORITIES


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--problems", type=int, default=40)
    parser.add_argument("--time-limit", type=float, default=10.0, help="CP-SAT seconds per problem")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    print(f"{'problem':24} {'tasks':>5} {'heur':>6} {'HEFT':>6} {'opt/best':>8} {'bound':>6} {'proved':>6} "
          f"{'heur/opt':>8} {'HEFT/opt':>8} {'heur ms':>7} {'CP-SAT s':>8}  best rule(s)")
    heur_ratios, worse_than_heft, proved, heur_seconds = [], [], 0, []
    ties = {r: 0 for r in PRIORITIES}  # best of the rules, alone or tied
    sole = {r: 0 for r in PRIORITIES}  # best of the rules, alone
    searched = []  # problems where the search beat every rule: (name, best rule / heuristic)
    for name, problem in problems(args.problems, args.seed):
        began = time.process_time()
        heur = schedule_dag(problem)
        heur_seconds.append(time.process_time() - began)
        by_rule = {r: schedule_dag(problem, priority=r)["makespan"] for r in PRIORITIES}
        heft = by_rule["rank"]
        exact = solve_dag_exact(problem, time_limit_s=args.time_limit, hint=heur)
        # unproved rows compare against the best schedule found, so their ratio is a lower estimate (*)
        best = min(exact.makespan, heur["makespan"], heft)
        heur_ratio, heft_ratio = heur["makespan"] / best, heft / best
        heur_ratios.append(heur_ratio)
        proved += exact.optimal
        if heur["makespan"] > heft:
            worse_than_heft.append(name)
        rule_best = min(by_rule.values())
        winners = [r for r in PRIORITIES if by_rule[r] == rule_best]
        for r in winners:
            ties[r] += 1
        if len(winners) == 1:
            sole[winners[0]] += 1
        if heur["makespan"] < rule_best:
            searched.append((name, rule_best / heur["makespan"]))
        mark = "" if exact.optimal else "*"
        shown = "all" if len(winners) == len(PRIORITIES) else ",".join(winners)
        print(f"{name:24} {len(problem['tasks']):5d} {heur['makespan']:6d} {heft:6d} {best:8d} "
              f"{exact.lower_bound:6d} {'yes' if exact.optimal else 'no':>6} {heur_ratio:7.3f}{mark:1} "
              f"{heft_ratio:7.3f}{mark:1} {heur_seconds[-1] * 1e3:7.1f} {exact.seconds:8.2f}  {shown}")

    n = len(heur_ratios)
    print(f"\nsummary over {n} problems (* = not proved in {args.time_limit:g} s: ratio to the best found)")
    print(f"  heuristic / optimum: median {statistics.median(heur_ratios):.3f}, max {max(heur_ratios):.3f}"
          f"   (targets: median <= 1.010, max <= 1.050)")
    print(f"  heuristic worse than plain HEFT: {len(worse_than_heft)} {' '.join(worse_than_heft)}  (target: 0)")
    print(f"  proved optimal within {args.time_limit:g} s: {proved}/{n} = {proved / n:.0%}   (target: >= 90%)")
    print(f"  heuristic CPU time per problem: median {statistics.median(heur_seconds) * 1e3:.0f} ms, "
          f"max {max(heur_seconds) * 1e3:.0f} ms")
    print("\nbest of the priority rules alone (ties count for each rule tied):")
    for r in PRIORITIES:
        print(f"  {r:12} best on {ties[r]:3d}/{n}, the only best on {sole[r]:3d}")
    gains = [g for _, g in searched]
    print(f"  the search (improve.py) beat every rule on {len(searched)}/{n} problems"
          + (f", by {statistics.median(gains):.3f}x median, {max(gains):.3f}x max" if gains else ""))


if __name__ == "__main__":
    main()
