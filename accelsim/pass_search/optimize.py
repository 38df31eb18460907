"""`A.optimize`: rewrite a graph by named passes (accelsim.passes), or with passes="auto" search sequences of
passes, and where each applies, for the shortest compiled makespan (auto.py). The search compiles schedules,
so this entry point stands above the compiler, which stands above the passes."""
from __future__ import annotations

from typing import Any, Callable

from accelsim.errors import GraphError
from accelsim.graph.ir import Graph
from accelsim.limits import Limits
from accelsim.pass_search.auto import DEFAULT_BUDGET, SearchOptions, auto_search
from accelsim.passes import manager
from accelsim.passes.manager import OptimizeLog, check_arguments, load_machine, numeric_reference, with_provenance
from accelsim.passes.table import AUTO


def optimize_with_log(graph: Graph, passes: Any, hw: Any = None, verify: bool = True,
                      limits: Limits | None = None, search: SearchOptions | None = None,
                      progress: Callable[[int, int], None] | None = None, budget: int | None = None,
                      time_limit_s: float | None = None) -> tuple[Graph, OptimizeLog]:
    """`optimize`, also returning the log: one PassRecord per pass, and how the numeric check ran.
    `progress(compiles, budget)` is called after each compile of the "auto" search."""
    check_arguments(graph, passes, verify, limits)
    auto = isinstance(passes, str) and passes.strip() == AUTO
    shorthand = budget is not None or time_limit_s is not None
    if not auto and (search is not None or progress is not None or shorthand):
        raise GraphError(f"optimize: search=, budget=, time_limit_s= and progress= configure passes={AUTO!r}; got "
                         f"passes={passes!r:.80}")
    if not auto:
        return manager.optimize_with_log(graph, passes, hw=hw, verify=verify, limits=limits)
    if progress is not None and not callable(progress):
        raise GraphError(f"optimize: progress must be a function (compiles, budget) -> None, got {progress!r:.80}")
    if search is not None and shorthand:
        raise GraphError("optimize: give the search's budget and time limit in search= or as budget= and "
                         "time_limit_s=, not both")
    if search is None:
        search = SearchOptions(budget=DEFAULT_BUDGET if budget is None else budget, time_limit_s=time_limit_s)
    machine = load_machine(hw)
    if machine is None:
        raise GraphError(f"optimize: passes={AUTO!r} scores each candidate graph by its compiled makespan, so it "
                         "needs the hardware: give hw= (an HwSpec from A.load_hw, a bundled name or a path)")
    limits = check_arguments(graph, passes, verify, limits)
    ref, check = numeric_reference(graph, verify, limits)
    current, records, found = auto_search(graph, machine, ref, limits, search, progress)
    log = OptimizeLog(tuple(records), check, found)
    return with_provenance(graph, current, log.applied), log


def optimize(graph: Graph, passes: Any, hw: Any = None, verify: bool = True, limits: Limits | None = None,
             search: SearchOptions | None = None, budget: int | None = None,
             time_limit_s: float | None = None) -> Graph:
    """`graph` rewritten by `passes` in order (names from accelsim.passes.PASSES: a list, or one comma-separated
    string; PassDefs are accepted too), each verified as accelsim.passes.manager's docstring says.

    hw: a hardware description (HwSpec, bundled name or path) whose units must run every kind of node a
    pass introduces, else the pass is skipped. limits: the numeric check's ceiling (default
    equivalence.CHECK_LIMITS); a larger graph is not checked numerically, and the log says so. The
    result keeps the graph's model `source` and records the passes that applied (`Graph.passes`), so a
    schedule of it rebuilds its graph. `optimize_with_log` also returns what each pass did.

    passes="auto" (hw required) searches sequences of passes, and where each applies, for the shortest
    compiled makespan on `hw`: `search` (pass_search.auto.SearchOptions) holds its budget in compiles, an
    optional wall-clock time limit and the step options it compiles with (micro-batches, replicas, ...);
    `budget=` and `time_limit_s=` are shorthand for a search of one step as compile's defaults build it."""
    return optimize_with_log(graph, passes, hw=hw, verify=verify, limits=limits, search=search, budget=budget,
                             time_limit_s=time_limit_s)[0]
