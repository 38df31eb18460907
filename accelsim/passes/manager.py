"""The pass manager: run named rewrite passes in order, verifying each (Graph, pass names -> Graph).

After every pass the result must satisfy the IR's invariants (`verify`), keep the original's output
names and shapes, and, with verify=True, compute the same outputs in float64 (passes/equivalence.py:
relative 1e-9 on a float64 graph). A rewrite that changes a result is refused with an error naming
the pass, the output, its node and the error. A pass is skipped, with the reason in the log, where
it does not apply to the graph's kind (fold_batchnorm on a training graph) or, given `hw`, where its
result has a kind of node no unit of the machine runs that the graph before it did not have.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

from accelsim.errors import AccelsimError, GraphError
from accelsim.graph.ir import NUMPY_BYTES, Graph
from accelsim.graph.verify import verify as verify_ir
from accelsim.hw import load_hw
from accelsim.hw.spec import HwSpec
from accelsim.limits import Limits, graph_flops
from accelsim.ops.registry import get_op
from accelsim.passes import equivalence
from accelsim.passes.kind import graph_kind
from accelsim.passes.rebuild import Rewrite
from accelsim.passes.runnable import new_unrunnable
from accelsim.passes.table import PASSES, PassDef

@dataclass(frozen=True)
class PassRecord:
    """What one pass did. `status`: applied (rewrote something), unchanged (nothing matched) or
    skipped (`reason` says why). `max_error_ratio`: the numeric check's largest error over its
    tolerance (None: not checked, see OptimizeLog.check). Bytes: numpy bytes every compute node
    reads and writes once, in the graph's dtype (the hardware may store fewer)."""

    name: str
    status: str
    reason: str
    rewrites: tuple[str, ...]
    nodes_before: int
    nodes_after: int
    flops_before: int
    flops_after: int
    bytes_before: int
    bytes_after: int
    max_error_ratio: float | None

    def summary(self) -> str:
        if self.status == "skipped":
            return f"{self.name}: skipped: {self.reason}"
        if self.status == "unchanged":
            return f"{self.name}: unchanged (nothing matched), {self.nodes_before} nodes"
        line = (f"{self.name}: {len(self.rewrites)} rewrite(s), nodes {self.nodes_before} -> {self.nodes_after}, "
                f"FLOPs {self.flops_before:,} -> {self.flops_after:,}, bytes {self.bytes_before:,} -> "
                f"{self.bytes_after:,}")
        return line + (f", error {self.max_error_ratio:.2g} of tolerance" if self.max_error_ratio is not None else "")


@dataclass(frozen=True)
class OptimizeLog:
    """Every pass in order, and how the numeric check ran (or why it did not)."""

    records: tuple[PassRecord, ...]
    check: str

    def summary(self) -> str:
        return "\n".join([f"numeric check: {self.check}"] + [r.summary() for r in self.records])


def moved_bytes(graph: Graph) -> int:
    """Numpy bytes the compute nodes of `graph` read and write (each input read once, output written once)."""
    total = 0
    for n in graph.nodes:
        if n.is_leaf:
            continue
        op, ins = get_op(n.op), tuple(graph.nodes[i].shape for i in n.inputs)
        total += (op.read_elems(n.shape, *ins, **n.attrs) + op.written_elems(n.shape, *ins, **n.attrs)) \
            * NUMPY_BYTES[n.dtype]
    return int(total)


def resolve_passes(passes: Any) -> list[PassDef]:
    """`passes` as PassDefs: a comma-separated string of names, or a sequence of names and PassDefs."""
    if isinstance(passes, str):
        passes = [p.strip() for p in passes.split(",") if p.strip()]
    elif not isinstance(passes, Sequence):
        raise GraphError(f"optimize: passes must be a list of pass names or a comma-separated string, got "
                         f"{type(passes).__name__} {passes!r:.80}")
    known = ", ".join(PASSES)
    out = []
    for k, p in enumerate(passes):
        if isinstance(p, PassDef):
            out.append(p)
        elif isinstance(p, str) and p in PASSES:
            out.append(PASSES[p])
        elif isinstance(p, str):
            raise GraphError(f"optimize: unknown pass {p!r} (position {k}); known passes: {known}")
        else:
            raise GraphError(f"optimize: pass {k} is {p!r:.80} of type {type(p).__name__}, expected a pass name "
                             f"(one of {known}) or a PassDef")
    return out


def _load_hw(hw: Any) -> HwSpec | None:
    if hw is None:
        return None
    if not isinstance(hw, (str, Path, dict, HwSpec)):
        raise GraphError(f"optimize: hw must be a hardware description (an HwSpec from A.load_hw, a bundled "
                         f"name or a path), got {type(hw).__name__}")
    return load_hw(hw)


def _structure_problem(original: Graph, before: Graph, after: Graph, len_before: int) -> str | None:
    """Why `after` cannot stand for `original` whatever its numbers; None if it can."""
    if len(before.nodes) != len_before:
        return "it changed its input graph (passes must be pure)"
    if list(after.outputs) != list(original.outputs):
        return f"its outputs are {list(after.outputs)}, the original's {list(original.outputs)}"
    for name, i in original.outputs.items():
        j = after.outputs[name]
        if not 0 <= j < len(after.nodes) or after.nodes[j].shape != original.nodes[i].shape:
            return f"output {name!r} changed shape or node (%{j})"
    if (after.loss is None) != (original.loss is None):
        return "it added or removed the loss"
    extra = {n.name for n in after.inputs} - {n.name for n in original.inputs}
    if extra:
        return f"it added inputs {sorted(extra)}"
    return None


def _record(p: PassDef, status: str, reason: str, rewrites: tuple[str, ...], before: Graph, after: Graph,
            ratio: float | None) -> PassRecord:
    return PassRecord(p.name, status, reason, rewrites, len(before.nodes), len(after.nodes), graph_flops(before),
                      graph_flops(after), moved_bytes(before), moved_bytes(after), ratio)


def _apply(p: PassDef, original: Graph, current: Graph, machine: HwSpec | None, ref: equivalence.Reference | None,
           limits: Limits) -> tuple[PassRecord, Graph]:
    """Run one pass on `current` and verify it: its record, and the graph that goes on (the pass's result
    if it applied, else `current`). Raises GraphError naming the pass when the result is refused."""
    kind = graph_kind(original)
    if kind not in p.applies_to:
        reason = f"applies to {' and '.join(p.applies_to)} graphs; {original.name!r} is a {kind} graph"
        return _record(p, "skipped", reason, (), current, current, None), current
    len_before = len(current.nodes)
    try:
        result = p.run(current)
    except AccelsimError as e:
        raise GraphError(f"optimize: pass {p.name!r} failed on graph {current.name!r}: {e}") from None
    if not isinstance(result, Rewrite) or not isinstance(result.graph, Graph):
        raise GraphError(f"optimize: pass {p.name!r} returned a {type(result).__name__}, not a Rewrite "
                         "(accelsim.passes.Rewrite: the new graph and one line per rewrite)")
    after = result.graph
    problem = _structure_problem(original, current, after, len_before)
    if problem is None:
        try:
            verify_ir(after)
        except GraphError as e:
            problem = f"its result fails the IR's checks: {e}"
    if problem is not None:
        raise GraphError(f"optimize: pass {p.name!r} on graph {current.name!r} is refused: {problem}")
    rewrites = tuple(result.rewrites)
    if not rewrites:
        return _record(p, "unchanged", "", (), current, current, None), current
    blocked = _runnable_problem(machine, current, after) if machine is not None else ""
    if blocked:
        return _record(p, "skipped", blocked, rewrites, current, current, None), current
    ratio = None
    if ref is not None:
        ratio, mismatch = equivalence.compare(ref, after, limits)
        if mismatch is not None:
            shown = "; ".join(rewrites[:3]) + (f"; and {len(rewrites) - 3} more" if len(rewrites) > 3 else "")
            raise GraphError(f"optimize: pass {p.name!r} changes a result of graph {original.name!r} and is "
                             f"refused: {mismatch.describe()}. The pass rewrote: {shown}")
    return _record(p, "applied", "", rewrites, current, after, ratio), after


def _runnable_problem(hw: HwSpec, before: Graph, after: Graph) -> str:
    """Why `after` cannot run on `hw` where `before` could ("" if it can)."""
    blocked = new_unrunnable(hw, before, after)
    if not blocked:
        return ""
    n = blocked[0]
    more = f" (and {len(blocked) - 1} other kind(s))" if len(blocked) > 1 else ""
    return (f"no unit of {hw.name} runs {n.op} node %{n.id} {n.name!r} of its result "
            f"(category {get_op(n.op).category}, attrs {dict(n.attrs)}){more}")


def optimize_with_log(graph: Graph, passes: Any, hw: Any = None, verify: bool = True,
                      limits: Limits | None = None) -> tuple[Graph, OptimizeLog]:
    """`optimize`, also returning the log: one PassRecord per pass, and how the numeric check ran."""
    if not isinstance(graph, Graph):
        raise GraphError(f"optimize needs a Graph (from A.models.build, A.training_graph or A.Graph), got "
                         f"{type(graph).__name__}")
    if not isinstance(verify, bool):
        raise GraphError(f"optimize: verify must be True or False, got {verify!r}")
    if limits is not None and not isinstance(limits, Limits):
        raise GraphError(f"optimize: limits must be an accelsim.limits.Limits, got {type(limits).__name__}")
    limits = limits or equivalence.CHECK_LIMITS
    todo, machine = resolve_passes(passes), _load_hw(hw)
    verify_ir(graph)
    ref, check = None, "off (verify=False)"
    if verify:
        skip = equivalence.too_large(graph, limits)
        check = f"skipped: {skip}" if skip else equivalence.describe(graph.dtype)
        ref = None if skip else equivalence.reference(graph, limits)
    current, records = graph, []
    for p in todo:
        record, current = _apply(p, graph, current, machine, ref, limits)
        records.append(record)
    if current is graph:
        return graph.copy(), OptimizeLog(tuple(records), check)
    current.source = None  # the model's builder alone no longer rebuilds it (schedules cannot record passes yet)
    return current, OptimizeLog(tuple(records), check)


def optimize(graph: Graph, passes: Any, hw: Any = None, verify: bool = True, limits: Limits | None = None) -> Graph:
    """`graph` rewritten by `passes` in order (names from passes.PASSES: a list, or one comma-separated
    string; PassDefs are accepted too), each verified as the module docstring says.

    hw: a hardware description (HwSpec, bundled name or path) whose units must run every kind of node a
    pass introduces, else the pass is skipped. limits: the numeric check's ceiling (default
    equivalence.CHECK_LIMITS); a larger graph is not checked numerically, and the log says so. The
    result drops the graph's model `source` when a pass applied: the builder alone no longer rebuilds
    it, so a schedule of it is checked with `A.check(sched, graph=...)`. `optimize_with_log` also
    returns what each pass did."""
    return optimize_with_log(graph, passes, hw=hw, verify=verify, limits=limits)[0]
