"""Is a schedule exactly a timing of its plan? (Schedule, Graph, HwSpec -> None or ScheduleError)

The contract's validation (accelsim.schedule.validate) checks a schedule against itself, its graph and its
hardware. A schedule from disk may also have been edited into one that is consistent but is not what the
compiler plans: this module expands the plan again for the schedule's graph, hardware and options and
compares every task (kind, node, dependences, leaf reads, sizes, candidates), the bounds, the sample count
and the leaf sizes. It is the compiler's check because only the compiler knows the plan.
"""
from __future__ import annotations

from accelsim.compiler.planning.expand import expand
from accelsim.compiler.planning.tasks import Plan
from accelsim.compiler.timing.bounds import lower_bounds
from accelsim.errors import AccelsimError
from accelsim.graph.ir import Graph
from accelsim.graph.stats import samples_per_microbatch
from accelsim.hw.precision import at_precision
from accelsim.hw.spec import HwSpec
from accelsim.limits import DEFAULT_LIMITS, check_step_size
from accelsim.schedule.identity import identity_of
from accelsim.schedule.levels import aligned
from accelsim.schedule.names import Names
from accelsim.schedule.plan import Schedule
from accelsim.schedule.validate import validate_schedule


def verify_schedule(schedule: Schedule, graph: Graph, hw: HwSpec, plan: Plan | None = None) -> None:
    """validate_schedule against `graph` and `hw`, and that the schedule is exactly a timing of the plan the
    compiler expands for them. `plan`: the compiler's own expansion that the schedule was just built from,
    so comparing them would only re-check that conversion (the schedule's own checks still run)."""
    validate_schedule(schedule, graph, hw, plan_check=check_plan if plan is None else _built_from_plan)


def _built_from_plan(schedule: Schedule, graph: Graph, hw: HwSpec, names: Names) -> list[str]:
    return []


def check_plan(schedule: Schedule, graph: Graph, hw: HwSpec, names: Names) -> list[str]:
    """The schedule is a timing of exactly the plan the compiler expands for its graph, hardware and
    options, with its bounds, sample count and leaf sizes."""
    # the recorded mappings replayed as given ones: a mapper's choice is costed as it was chosen
    o = schedule.options.model_copy(update={"mapping": tuple(m.as_given() for m in schedule.mappings or ()) or None})
    try:
        hw = at_precision(hw, o.precision)  # as compile resolved it (hw/precision.py)
        check_step_size(graph, o.microbatches, o.data_parallel, o.pipeline_stages, DEFAULT_LIMITS)
        plan = expand(graph, hw, o, o.max_in_flight)
    except AccelsimError as e:
        return [f"its options {o.model_dump()} cannot be expanded for graph {graph.name!r} on {hw.name}: {e}"]
    problems = []
    if len(plan.tasks) != len(schedule.tasks):
        return [f"the schedule has {len(schedule.tasks)} tasks, but graph {graph.name!r} on {hw.name} with "
                f"options {o.model_dump()} expands to {len(plan.tasks)}"]
    for spec, t in zip(plan.tasks, schedule.tasks):
        want = {**identity_of(spec), "out_chip": spec.out_chip, "deps": tuple(spec.deps), "after": tuple(spec.after),
                "reads": tuple(spec.reads), "out_bytes": spec.out_bytes, "bytes_moved": spec.port_bytes, "keep": spec.keep, "group": spec.group,
                "energy_pj": float(spec.energy_pj), "flops": spec.flops, **spec.part_fields()}
        wrong = [f"{k} {getattr(t, k)!r} (expected {v!r})" for k, v in want.items() if getattr(t, k) != v]
        got_options = tuple((c.resource, c.instances, c.cycles) for c in schedule.candidates[t.candidates])
        if got_options != tuple(spec.options):
            wrong.append(f"candidates {list(got_options)} (expected {list(spec.options)})")
        if wrong:
            problems.append(f"{names.task(t)} is not the task the compiler plans: " + "; ".join(wrong[:4]))
            if len(problems) > 20:
                return problems
    bounds = lower_bounds(plan, hw)
    if bounds != schedule.bounds:
        problems.append(f"bounds are {schedule.bounds.model_dump()} but the plan's are {bounds.model_dump()}")
    samples = samples_per_microbatch(graph) * o.microbatches * o.data_parallel
    if schedule.samples_per_step != samples:
        problems.append(f"samples_per_step is {schedule.samples_per_step} but {o.microbatches} micro-batch(es) x "
                        f"{o.data_parallel} replica(s) of graph {graph.name!r} process {samples}")
    for x in schedule.tensors:
        if x.task < 0:
            node = graph.nodes[x.node]
            want = aligned(plan.leaf_size(x.node, x.replica))
            if x.size_bytes != want:
                problems.append(f"{names.tensor(x)} has {x.size_bytes} bytes, but leaf {node.name!r} needs {want}")
            shard = (x.replica, len(plan.shards[x.node])) if x.node in plan.shards else (0, 1)
            if (x.part, x.parts) != shard:
                problems.append(f"{names.tensor(x)} holds part {x.part} of {x.parts} of leaf {node.name!r}, but the plan "
                                f"places part {shard[0]} of {shard[1]} (ZeRO: replica r holds rows part r)")
    return problems
