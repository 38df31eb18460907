"""Why makespan/bound exceeds 1.10: every zoo model x shipped hwconfig (default options, training and
inference) above the threshold, with the exact mode's verdict and the measured slow-memory share.

Columns: the list schedule's makespan/bound; CP-SAT's proved gap after `compile(exact=SECONDS)` (its
bound is valid for the real step: it relaxes memory and ports), so "opt" means the schedule is optimal
and the ratio is the bound's weakness; "slow mem" is the share of busy cycles spent streaming tensors
from or to a slower memory (durations beyond the task's compute, levels.read_cycles/write_cycles);
"free ports" is the ratio the same search reaches when memory ports had unlimited bandwidth (a what-if:
the list scheduler's port capacities are raised a millionfold in this process only), so a drop there
names port contention as the cause; "bound" is the binding bound (critical path or the busiest resource).
Run: python experiments/bound_exceptions.py [--exact 5] [--threshold 1.10]
"""
from __future__ import annotations

import argparse
from contextlib import contextmanager
from pathlib import Path

import accelsim as A
from accelsim.passes import inference_graph
from accelsim.compiler.timing import list_sched
from accelsim.compiler.exact import MAX_EXACT_TASKS
from accelsim.compiler.planning.expand import expand
from accelsim.compiler.timing.improve import improve, makespan_of

HWCONFIGS = sorted(p.stem for p in (Path(__file__).resolve().parent.parent / "hwconfigs").glob("*.yaml"))


def slow_share(s: A.Schedule) -> float:
    """Cycles tasks spend beyond their candidate's cycles (slow-memory streaming), over all busy cycles."""
    extra = busy = 0
    for t in s.tasks:
        cycles = next(c.cycles for c in s.candidates[t.candidates] if c.resource == t.resource)
        extra += t.end - t.start - cycles
        busy += t.end - t.start
    return extra / busy if busy else 0.0


@contextmanager
def free_ports():
    """Memory ports with a millionfold bandwidth in the list scheduler, for the what-if column."""
    real = list_sched.port_capacities
    list_sched.port_capacities = lambda hw, chips: {k: v * 10**6 for k, v in real(hw, chips).items()}
    try:
        yield
    finally:
        list_sched.port_capacities = real


def free_port_ratio(graph: A.Graph, s: A.Schedule) -> float:
    hw = A.load_hw(s.hw_name)
    plan = expand(graph, hw, s.options, s.options.max_in_flight)
    with free_ports():
        return makespan_of(improve(plan, hw)[0]) / s.bounds.bound_cycles


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--exact", type=float, default=5.0, help="CP-SAT budget per case (seconds)")
    parser.add_argument("--threshold", type=float, default=1.10)
    args = parser.parse_args()
    print(f"{'model':18s} {'mode':5s} {'hw':16s} {'ratio':>6s} {'tasks':>6s} {'exact':>22s} {'slow mem':>8s} "
          f"{'free ports':>10s}  bound")
    for name in A.models.names():
        fwd = A.models.build(name)
        for mode, graph in (("train", A.training_graph(fwd)), ("infer", inference_graph(fwd))):
            for hw in HWCONFIGS:
                try:
                    s = A.compile(graph, hw)
                except A.AccelsimError:
                    continue  # no unit or no fit: bound_table.py lists those
                if s.bound_ratio <= args.threshold:
                    continue
                verdict = "too large"
                if len(s.tasks) <= MAX_EXACT_TASKS:
                    e = A.compile(graph, hw, exact=args.exact)
                    gap = e.exact.gap
                    verdict = (f"opt {e.makespan_cycles / s.makespan_cycles:.3f}x list" if e.exact.status == "optimal"
                               else f"gap {gap:.1%}, {e.makespan_cycles / s.makespan_cycles:.3f}x list")
                binding = "critical path" if s.bounds.critical_path_cycles >= s.bounds.resource_cycles \
                    else s.bounds.resource
                print(f"{name:18s} {mode:5s} {hw:16s} {s.bound_ratio:6.3f} {len(s.tasks):6d} {verdict:>22s} "
                      f"{slow_share(s):8.1%} {free_port_ratio(graph, s):10.3f}  {binding}", flush=True)


if __name__ == "__main__":
    main()
