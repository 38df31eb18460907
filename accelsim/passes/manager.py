"""The pass manager: run named rewrite passes in order, verifying each (Graph, pass names -> Graph);
`A.optimize(graph, "auto", hw=...)` instead searches sequences of passes by compiled makespan: that search
compiles schedules, so it lives above the compiler (accelsim/pass_search/) and calls this module's pieces.

After every pass the result must satisfy the IR's invariants (`verify`), keep the original's output
names and shapes, and, with verify=True, compute the same outputs in float64 (passes/equivalence.py:
relative 1e-9 on a float64 graph). A rewrite that changes a result is refused with an error naming
the pass, the output, its node and the error. A pass is skipped, with the reason in the log, where
it does not apply to the graph's kind (fold_batchnorm on a training graph) or, given `hw`, where its
result has a kind of node no unit of the machine runs that the graph before it did not have.

The result records what rewrote it (`Graph.passes`, one AppliedPass per pass that applied) beside the
model `source` it keeps, so a schedule of it names everything that rebuilds its graph.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, Sequence

from accelsim.errors import AccelsimError, GraphError
from accelsim.graph.ir import NUMPY_BYTES, Graph
from accelsim.graph.provenance import AppliedPass
from accelsim.graph.verify import verify as verify_ir
from accelsim.hw import load_hw
from accelsim.hw.spec import HwSpec
from accelsim.limits import Limits, graph_flops
from accelsim.ops.registry import get_op
from accelsim.passes import equivalence
from accelsim.passes.kind import graph_kind
from accelsim.passes.rebuild import Rewrite
from accelsim.passes.runnable import new_unrunnable
from accelsim.passes.table import AUTO, PASSES, PassDef

Step = tuple[PassDef, tuple[int, ...] | None]
"""A pass to run and where: None everywhere it matches, else the anchor ids of the places (a sited pass)."""


@dataclass(frozen=True)
class PassRecord:
    """What one pass did. `status`: applied (rewrote something), unchanged (nothing matched) or
    skipped (`reason` says why). `max_error_ratio`: the numeric check's largest error over its
    tolerance (None: not checked, see OptimizeLog.check). Bytes: numpy bytes every compute node
    reads and writes once, in the graph's dtype (the hardware may store fewer). `only`: the anchors it
    was restricted to (None: everywhere); `sites`: for a sited pass, the anchors of the places it
    rewrote (ids in the graph it was given)."""

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
    only: tuple[int, ...] | None = None
    sites: tuple[int, ...] = ()

    @property
    def label(self) -> str:
        """The pass and where it was restricted: "merge_qkv" or "merge_qkv@%12,%40"."""
        return AppliedPass(self.name, self.only).label

    def summary(self) -> str:
        if self.status == "skipped":
            return f"{self.label}: skipped: {self.reason}"
        if self.status == "unchanged":
            return f"{self.label}: unchanged (nothing matched), {self.nodes_before} nodes"
        line = (f"{self.label}: {len(self.rewrites)} rewrite(s), nodes {self.nodes_before} -> {self.nodes_after}, "
                f"FLOPs {self.flops_before:,} -> {self.flops_after:,}, bytes {self.bytes_before:,} -> "
                f"{self.bytes_after:,}")
        return line + (f", error {self.max_error_ratio:.2g} of tolerance" if self.max_error_ratio is not None else "")


class SearchSummary(Protocol):
    """What the log keeps of a search over passes (pass_search.auto.SearchLog): its own summary."""

    def summary(self) -> str: ...


@dataclass(frozen=True)
class OptimizeLog:
    """Every pass in order, and how the numeric check ran (or why it did not); for "auto", the passes
    the search chose and what it tried (`search`)."""

    records: tuple[PassRecord, ...]
    check: str
    search: SearchSummary | None = None

    @property
    def applied(self) -> tuple[AppliedPass, ...]:
        """The passes that rewrote the graph, in order: what replays it (Graph.passes, schedule Source)."""
        return tuple(AppliedPass(r.name, r.only) for r in self.records if r.status == "applied")

    def summary(self) -> str:
        lines = [f"numeric check: {self.check}"]
        if self.search is not None:
            lines += self.search.summary().splitlines()
        return "\n".join(lines + [r.summary() for r in self.records])


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


def resolve_passes(passes: Any) -> list[Step]:
    """`passes` as steps: a comma-separated string of names, or a sequence of names, PassDefs and
    AppliedPasses (a pass restricted to some of its sites, as Graph.passes records it). The empty string
    and the empty list mean no passes; a string of only commas and spaces names none and is refused, so
    a typo (",,,") is not silently no optimization."""
    known = ", ".join(PASSES)
    if isinstance(passes, str):
        names = [p.strip() for p in passes.split(",") if p.strip()]
        if passes.strip() and not names:
            raise GraphError(f"optimize: passes {passes[:80]!r} names no pass (only commas and spaces); give "
                             f"comma-separated pass names (known passes: {known}), {AUTO!r} to search them, or "
                             f"'' for none")
        passes = names
    elif not isinstance(passes, Sequence):
        raise GraphError(f"optimize: passes must be a list of pass names, {AUTO!r} or a comma-separated string, "
                         f"got {type(passes).__name__} {passes!r:.80}")
    out: list[Step] = []
    for k, p in enumerate(passes):
        name = p.name if isinstance(p, AppliedPass) else p
        if isinstance(p, PassDef):
            out.append((p, None))
        elif isinstance(name, str) and name in PASSES:
            only = p.only if isinstance(p, AppliedPass) else None
            if only is not None and not PASSES[name].sited:
                raise GraphError(f"optimize: pass {name!r} (position {k}) rewrites everywhere it matches; only "
                                 f"a sited pass takes anchor ids (only={list(only)})")
            out.append((PASSES[name], only))
        elif name == AUTO:
            raise GraphError(f"optimize: {AUTO!r} (position {k}) is the search over passes, not a pass: give "
                             f"passes={AUTO!r} alone")
        elif isinstance(name, str):
            raise GraphError(f"optimize: unknown pass {name!r} (position {k}); known passes: {known}")
        else:
            raise GraphError(f"optimize: pass {k} is {p!r:.80} of type {type(p).__name__}, expected a pass name "
                             f"(one of {known}), a PassDef or an AppliedPass")
    return out


def load_machine(hw: Any) -> HwSpec | None:
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


def _record(step: Step, status: str, reason: str, rewrites: tuple[str, ...], before: Graph, after: Graph,
            ratio: float | None, sites: tuple[int, ...] = ()) -> PassRecord:
    p, only = step
    return PassRecord(p.name, status, reason, rewrites, len(before.nodes), len(after.nodes), graph_flops(before),
                      graph_flops(after), moved_bytes(before), moved_bytes(after), ratio, only, sites)


def apply_pass(step: Step, original: Graph, current: Graph, machine: HwSpec | None,
               ref: equivalence.Reference | None, limits: Limits) -> tuple[PassRecord, Graph]:
    """Run one pass on `current` (`original`: the graph optimize was given) and verify it: its record,
    and the graph that goes on (the pass's result if it applied, else `current`). Raises GraphError
    naming the pass when the result is refused, or when a sited pass restricted to some anchors did not
    rewrite exactly there."""
    p, only = step
    kind = graph_kind(original)
    if kind not in p.applies_to:
        reason = f"applies to {' and '.join(p.applies_to)} graphs; {original.name!r} is a {kind} graph"
        return _record(step, "skipped", reason, (), current, current, None), current
    len_before = len(current.nodes)
    try:
        result = p.run(current) if only is None else p.run(current, only=frozenset(only))
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
    rewrites, sites = tuple(result.rewrites), tuple(result.sites)
    if only is not None and sites != only:
        raise GraphError(f"optimize: pass {p.name!r} restricted to anchors {_ids(only)} of graph {current.name!r} "
                         f"rewrote at {_ids(sites) or 'none of them'}: an anchor must be one of the sites the pass "
                         f"reports where it rewrites (run it everywhere to see them: PassRecord.sites)")
    if not rewrites:
        return _record(step, "unchanged", "", (), current, current, None), current
    blocked = _runnable_problem(machine, current, after) if machine is not None else ""
    if blocked:
        return _record(step, "skipped", blocked, rewrites, current, current, None, sites), current
    ratio = None
    if ref is not None:
        ratio, mismatch = equivalence.compare(ref, after, limits)
        if mismatch is not None:
            shown = "; ".join(rewrites[:3]) + (f"; and {len(rewrites) - 3} more" if len(rewrites) > 3 else "")
            raise GraphError(f"optimize: pass {p.name!r} changes a result of graph {original.name!r} and is "
                             f"refused: {mismatch.describe()}. The pass rewrote: {shown}")
    return _record(step, "applied", "", rewrites, current, after, ratio, sites), after


def _ids(ids: Sequence[int]) -> str:
    return ", ".join(f"%{i}" for i in ids)


def _runnable_problem(hw: HwSpec, before: Graph, after: Graph) -> str:
    """Why `after` cannot run on `hw` where `before` could ("" if it can)."""
    blocked = new_unrunnable(hw, before, after)
    if not blocked:
        return ""
    n = blocked[0]
    more = f" (and {len(blocked) - 1} other kind(s))" if len(blocked) > 1 else ""
    return (f"no unit of {hw.name} runs {n.op} node %{n.id} {n.name!r} of its result "
            f"(category {get_op(n.op).category}, attrs {dict(n.attrs)}){more}")


def check_arguments(graph: Graph, passes: Any, verify: bool, limits: Limits | None) -> Limits:
    """Refuse what no optimization accepts (the checks `optimize` and the search over passes share);
    returns the numeric check's limits."""
    if not isinstance(graph, Graph):
        raise GraphError(f"optimize needs a Graph (from A.models.build, A.training_graph or A.Graph), got "
                         f"{type(graph).__name__}")
    if not isinstance(verify, bool):
        raise GraphError(f"optimize: verify must be True or False, got {verify!r}")
    if limits is not None and not isinstance(limits, Limits):
        raise GraphError(f"optimize: limits must be an accelsim.limits.Limits, got {type(limits).__name__}")
    if graph.tensor_parallel > 1 and not (isinstance(passes, str) and not passes.strip()):
        # a rewrite builds its new nodes outside any rank, which would replicate a rank's work on every rank
        raise GraphError(f"optimize: graph {graph.name!r} is split over {graph.tensor_parallel} tensor-parallel "
                         f"ranks and the graph passes do not place their new nodes on ranks yet; optimize the "
                         f"model without tensor parallelism, or compile it unoptimized")
    return limits or equivalence.CHECK_LIMITS


def numeric_reference(graph: Graph, verify: bool, limits: Limits) -> tuple[equivalence.Reference | None, str]:
    """The float64 reference every rewrite is checked against (None: not checked) and how the check runs."""
    verify_ir(graph)
    if not verify:
        return None, "off (verify=False)"
    skip = equivalence.too_large(graph, limits)
    check = f"skipped: {skip}" if skip else equivalence.describe(graph.dtype)
    return (None if skip else equivalence.reference(graph, limits)), check


def optimize_with_log(graph: Graph, passes: Any, hw: Any = None, verify: bool = True,
                      limits: Limits | None = None) -> tuple[Graph, OptimizeLog]:
    """`optimize`, also returning the log: one PassRecord per pass, and how the numeric check ran."""
    limits = check_arguments(graph, passes, verify, limits)
    if isinstance(passes, str) and passes.strip() == AUTO:
        raise GraphError(f"optimize: passes={AUTO!r} searches sequences of passes by compiled makespan; call "
                         "A.optimize (accelsim.pass_search.optimize), which compiles schedules, with hw=")
    todo, machine = resolve_passes(passes), load_machine(hw)
    ref, check = numeric_reference(graph, verify, limits)
    current, records = graph, []
    for step in todo:
        record, current = apply_pass(step, graph, current, machine, ref, limits)
        records.append(record)
    log = OptimizeLog(tuple(records), check)
    return with_provenance(graph, current, log.applied), log


def with_provenance(original: Graph, result: Graph, applied: tuple[AppliedPass, ...]) -> Graph:
    """`result` (a copy of `original` when nothing applied) keeping `original`'s model source and
    recording the passes that rewrote it after those `original` already had."""
    out = result.copy() if result is original or not applied else result
    out.source, out.optimizer, out.passes = original.source, original.optimizer, original.passes + applied
    return out


def optimize(graph: Graph, passes: Any, hw: Any = None, verify: bool = True, limits: Limits | None = None) -> Graph:
    """`graph` rewritten by `passes` in order (names from passes.PASSES: a list, or one comma-separated
    string; PassDefs are accepted too), each verified as the module docstring says.

    hw: a hardware description (HwSpec, bundled name or path) whose units must run every kind of node a
    pass introduces, else the pass is skipped. limits: the numeric check's ceiling (default
    equivalence.CHECK_LIMITS); a larger graph is not checked numerically, and the log says so. The
    result keeps the graph's model `source` and records the passes that applied (`Graph.passes`), so a
    schedule of it rebuilds its graph. `optimize_with_log` also returns what each pass did. The search over
    passes (passes="auto") is A.optimize's (accelsim.pass_search)."""
    return optimize_with_log(graph, passes, hw=hw, verify=verify, limits=limits)[0]
