"""The stage partition a compile makes of a step, for printing (Graph, HwSpec, step options -> Partition)."""
from __future__ import annotations

from accelsim.compiler.planning.expand import Planner
from accelsim.compiler.planning.stages import Partition
from accelsim.graph.ir import Graph
from accelsim.hw.spec import HwSpec
from accelsim.schedule.options import StepOptions


def partition_report(graph: Graph, hw: HwSpec, options: StepOptions) -> Partition:
    """The partition that compiling `graph` on `hw` with `options` (as the schedule records them) makes:
    which layers each stage runs, its cycles per step and its memory; `.text()` prints it."""
    return Planner(graph, hw, options).partition
