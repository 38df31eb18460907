"""What a rewrite does to a step on hardware (Graph, HwSpec, compile options -> Score): the compiled
makespan the `auto` search minimizes, the bytes the graph moves and the peak memory its schedule
places, and per applied pass the before and after of each (StepEffect).

Scoring compiles the graph as `accelsim run` would (the same micro-batches, replicas, stages, window
and splitting; never the exact CP-SAT mode, whose seconds per candidate the search cannot afford),
without re-validating the schedule: a score is a number to compare, not a schedule to keep.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from accelsim.errors import GraphError
from accelsim.graph.ir import Graph
from accelsim.graph.provenance import AppliedPass
from accelsim.hw.spec import HwSpec
from accelsim.limits import Limits
from accelsim.passes.equivalence import CHECK_LIMITS
from accelsim.passes.manager import apply_pass, moved_bytes, resolve_passes
from accelsim.compiler.compile import compile as compile_step
from accelsim.compiler.hierarchy.step import task_schedule
from accelsim.schedule.options import StepOptions


@dataclass(frozen=True)
class Score:
    """One graph compiled for the hardware: its makespan in cycles, the numpy bytes its compute nodes
    read and write (manager.moved_bytes), and the peak bytes its schedule places per memory instance
    (labelled as Schedule.peak_memory_bytes); `peak_bytes` is the largest of those."""

    makespan_cycles: int
    moved_bytes: int
    peak_memory_bytes: tuple[tuple[str, int], ...]

    @property
    def peak_bytes(self) -> int:
        """The largest peak of any one memory instance: the memory closest to running out (each chip's
        working memory; a sum would add a DRAM's peak to its SRAM's, reached at other times)."""
        return max((b for _, b in self.peak_memory_bytes), default=0)

    def to_json(self) -> dict:
        return {"makespan_cycles": self.makespan_cycles, "moved_bytes": self.moved_bytes,
                "peak_bytes": self.peak_bytes, "peak_memory_bytes": dict(self.peak_memory_bytes)}


@dataclass(frozen=True)
class StepEffect:
    """One applied pass of a sequence and the step before and after it (None: that graph did not compile)."""

    step: AppliedPass
    rewrites: int
    before: Score | None
    after: Score | None

    def summary(self) -> str:
        return f"{self.step.label} ({self.rewrites} rewrite(s)): " + compare_scores(self.before, self.after)

    def to_json(self) -> dict:
        return {"pass": self.step.name, "only": list(self.step.only) if self.step.only is not None else None,
                "rewrites": self.rewrites, "before": self.before.to_json() if self.before else None,
                "after": self.after.to_json() if self.after else None}


def change(before: int, after: int, unit: str) -> str:
    """"a -> b unit (+x.xx%)" with thousands separators."""
    pct = f" ({100 * (after - before) / before:+.2f}%)" if before else ""
    return f"{before:,} -> {after:,} {unit}{pct}"


def compare_scores(before: Score | None, after: Score | None) -> str:
    """Makespan, bytes moved and peak memory of two scores, one clause each."""
    if before is None or after is None:
        return "the graph " + ("before" if before is None else "after") + " it did not compile"
    return (f"makespan {change(before.makespan_cycles, after.makespan_cycles, 'cycles')}, bytes moved "
            f"{change(before.moved_bytes, after.moved_bytes, 'B')}, peak memory "
            f"{change(before.peak_bytes, after.peak_bytes, 'B')}")


def score(graph: Graph, hw: HwSpec, options: StepOptions, limits: Limits | None = None) -> Score:
    """Compile `graph` for `hw` with `options` (under `limits`: the ceiling on one step's tasks, default
    accelsim.limits.DEFAULT_LIMITS) and measure it; compile's errors propagate."""
    sched = task_schedule(compile_step(graph, hw, options, validate=False, limits=limits), "the pass search")
    return Score(sched.makespan_cycles, moved_bytes(graph), tuple(sorted(sched.peak_memory_bytes.items())))


def step_effects(graph: Graph, steps: Sequence[AppliedPass], hw: HwSpec, options: StepOptions,
                 limits: Limits | None = None) -> tuple[Score, tuple[StepEffect, ...]]:
    """The score of `graph` and the effect of each of `steps` replayed on it in order (the applied passes
    of an optimize log: already verified, so not checked again); one compile per step."""
    current, before = graph, score(graph, hw, options, limits)
    first, effects = before, []
    for step in resolve_passes(list(steps)):
        record, after_graph = apply_pass(step, graph, current, None, None, CHECK_LIMITS)
        if record.status != "applied":
            raise GraphError(f"optimize: replaying {record.label} on {graph.name!r} gives {record.status} "
                             f"{record.reason}".rstrip())
        after = score(after_graph, hw, options, limits)
        effects.append(StepEffect(AppliedPass(record.name, record.only), len(record.rewrites), before, after))
        current, before = after_graph, after
    return first, tuple(effects)
