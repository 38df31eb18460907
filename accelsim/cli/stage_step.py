"""`accelsim run --granularity stage`: a step composed from stage templates, summarized (StageStep -> lines
and the --json payload). Stage granularity has no task schedule, so nothing is simulated or plotted."""
from __future__ import annotations

from rich.console import Console

from accelsim import fmt
from accelsim.cli.summary import step_words
from accelsim.compiler.hierarchy.step import StageStep


def print_stage_step(console: Console, step: StageStep, seconds: float) -> None:
    """The step's header, its makespan, throughput, pipeline bubble and exposed communication, and one line
    per stage (its busy cycles and peak stash)."""
    o = step.options
    parts = step_words(o, step.samples_per_step)
    console.print(f"{'training step' if step.training else 'inference'} of {step.graph_name} on {step.hw_name}: "
                  f"{', '.join(parts)}; stage granularity, pipeline schedule {o.pipeline_schedule}, composed in "
                  f"{fmt.wall(seconds)}")
    if step.template_layers is not None:
        console.print(f"  measured from layer templates: {fmt.count(step.measured_graph_nodes)} nodes list-scheduled, a few "
                      f"of its {step.template_layers} repeated layers standing for all of them")
    makespan = step.makespan_cycles
    console.print(f"  makespan {fmt.cycles(makespan)} ({fmt.seconds(step.makespan_seconds)}), throughput "
                  f"{fmt.rate(step.throughput)}, pipeline bubble {fmt.percent(step.bubble_fraction)}")
    exposed = ", ".join(f"{kind} {fmt.cycles(c)} ({fmt.percent(c / makespan if makespan else 0)} of the step)"
                        for kind, c in step.exposed_cycles.items())
    console.print(f"  exposed communication (on the critical path: what it adds to the step): {exposed}")
    gathered = step.composition.peak_gathered_bytes
    for i, (s, busy, stash) in enumerate(zip(step.work.stages, step.composition.busy_cycles,
                                              step.composition.peak_stash_bytes)):
        params = f"parameters {fmt.nbytes(s.parameter_bytes)}"
        if o.zero == 3 and o.data_parallel > 1:  # each replica holds a 1/d shard and gathers the rest as it runs
            params += (f" (a 1/{o.data_parallel} shard held per replica, up to {fmt.nbytes(gathered[i])} gathered at "
                       f"once)")
        console.print(f"  stage {s.stage} (chip{'s' if len(s.chips) > 1 else ''} "
                      f"{', '.join(map(str, s.chips))}): busy {fmt.cycles(busy)} "
                      f"({fmt.percent(busy / makespan if makespan else 0)}), update {fmt.cycles(s.update_cycles)}, "
                      f"peak stash {fmt.nbytes(stash)}, {params}")
