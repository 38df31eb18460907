"""`check(schedule, backend)`: run the scheduled step on real numbers and compare it with the numpy
reference evaluation of the plain graph (Schedule -> CheckReport). numpy's floating-point warnings while
it runs (overflow, invalid value) are lines of the report, not noise on stderr."""
from __future__ import annotations

import math
import warnings
from collections import Counter
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from typing import Iterator

import numpy as np

from accelsim.compare import NEGLIGIBLE, Mismatch, first_mismatch, max_abs_err, max_rel_err, scale
from accelsim.errors import AccelsimError
from accelsim.evaluate import evaluate
from accelsim.execute.rounding import ROUNDED_PRECISIONS, UNIT_ROUNDOFF
from accelsim.execute.run import Executed, execute, sample_index
from accelsim.graph.ir import Graph
from accelsim.hw.spec import HwSpec
from accelsim.schedule.plan import PER_STEP, Schedule

TOLERANCE = {"float64": 1e-9, "float32": 1e-4}
"""Max relative error (max |a - b| over the tensor's largest value) a backend may always show per tensor."""
SLACK = 4.0
"""A float32 tensor may also be off by SLACK x the error numpy's own float32 evaluation shows: both are
measured against a float64 evaluation of the same leaves, so deep or ill-conditioned graphs (where
rounding grows layer by layer) get a bound that follows their conditioning instead of a fixed one.
Where numpy's own evaluation is non-finite there is no slack (the fixed tolerance applies)."""
ROUNDINGS = 16
"""The tolerance rule of a step at a precision coarser than float32 (StepOptions.precision: bf16, fp16,
fp8). Both the backend and the reference run the schedule with every forward and backward value rounded to
the format as it is stored (execute/rounding.py; update work in fp32), and both are compared with the
float64 evaluation of the plain graph. A tensor may be off by max(ROUNDINGS x u, SLACK x the error the
reference kernels show under the same rounding), u the format's unit roundoff (bf16: 16 x 2^-8 = 0.0625;
fp16: 0.0078): one rounding costs u and a value passes through a few stored tensors per layer, while the
second term follows the graph's conditioning as SLACK does for float32 (Adam's first step divides by the
gradient's own magnitude, so a gradient near 0 can flip its step's sign). A wrong kernel is off by O(1)."""


def tolerance(dtype: str, precision: str | None) -> float:
    """The fixed part of a tensor's tolerance: TOLERANCE[dtype], or ROUNDINGS x the unit roundoff of a step
    precision coarser than float32 (fp32 and tf32 storage: the graph dtype's tolerance)."""
    fixed = TOLERANCE[dtype]
    return max(fixed, ROUNDINGS * UNIT_ROUNDOFF[precision]) if precision in ROUNDED_PRECISIONS else fixed


@dataclass(frozen=True)
class Entry:
    """One tensor's comparison. Every value must be finite and match the float64 reference; a NaN or
    infinity on either side (the reference included) fails, with `mismatch` naming the first bad
    element and `where` the micro-batch / replica it is in."""
    name: str
    max_abs_err: float
    max_rel_err: float
    tolerance: float
    reference_rel_err: float = 0.0
    """The numpy reference's own error in the graph's dtype, against the float64 evaluation."""
    mismatch: Mismatch | None = None
    where: str = ""

    @property
    def passed(self) -> bool:
        return self.mismatch is None and self.max_rel_err <= self.tolerance

    @property
    def failure(self) -> str | None:
        """'tensor (where): first bad element', None when the tensor passed."""
        if self.passed:
            return None
        if self.mismatch is None:  # no value at all, or over the tolerance (max_rel_err) with no element named
            return f"{self.name}: {self.where or f'relative error {self.max_rel_err:.3g}'}"
        return f"{self.name} ({self.where}): {self.mismatch}"


@dataclass(frozen=True)
class CheckReport:
    backend: str
    graph: str
    hw: str
    tolerance: float
    entries: tuple[Entry, ...]
    corruptions: tuple[str, ...] = field(default=())
    warnings: tuple[str, ...] = field(default=())
    """numpy's floating-point warnings while the step ran (per stage, counted) and constants that were
    already non-finite: why a tensor went non-finite. They do not decide `passed`; the entries do."""

    @property
    def passed(self) -> bool:
        return not self.corruptions and all(e.passed for e in self.entries)

    @property
    def failures(self) -> tuple[str, ...]:
        """One line per failing tensor, naming it and its first bad index."""
        return tuple(e.failure for e in self.entries if not e.passed)

    def to_json(self) -> dict:
        """Plain JSON (NaN and infinities written as the strings "nan", "inf", "-inf")."""
        return _json_safe({"backend": self.backend, "graph": self.graph, "hw": self.hw, "tolerance": self.tolerance,
                           "passed": self.passed, "failures": list(self.failures),
                           "corruptions": list(self.corruptions), "warnings": list(self.warnings),
                           "entries": [{**asdict(e), "passed": e.passed, "failure": e.failure}
                                       for e in self.entries]})


def _json_safe(value):
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if isinstance(value, dict):
        return {k: _json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_json_safe(v) for v in value]
    return value


@contextmanager
def _recording(stage: str, notes: list[str]) -> Iterator[None]:
    """RuntimeWarnings raised in the block (numpy's floating-point ones) appended to `notes` as
    "stage: message (N times)"; any other warning is passed on as it was raised."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        yield
    counts = Counter(str(w.message) for w in caught if issubclass(w.category, RuntimeWarning))
    notes += [f"{stage}: {message}" + (f" ({n} times)" if n > 1 else "") for message, n in counts.items()]
    for w in caught:
        if not issubclass(w.category, RuntimeWarning):
            warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)


def _nonfinite_constants(graph: Graph) -> list[str]:
    """One line naming the constants that hold inf or NaN before anything runs (a number beyond the
    dtype's range, e.g. a huge --lr, is stored as inf); none when all are finite."""
    bad = [n for n in graph.nodes if n.op == "const" and n.dtype != "int64"
           and not np.isfinite(graph.leaf_value(n.id)).all()]
    if not bad:
        return []
    names = ", ".join(f"%{n.id} {n.name!r}" for n in bad[:5]) + (f" and {len(bad) - 5} more" if len(bad) > 5 else "")
    return [f"{len(bad)} constant(s) hold inf or NaN before anything ran: {names} (a number beyond its dtype's "
            f"range, e.g. a huge --lr, is stored as inf)"]


Triple = tuple[str, np.ndarray | None, np.ndarray, np.ndarray]
"""(where, backend value, numpy value in the graph's dtype, float64 oracle)."""


def _entry(name: str, triples: list[Triple], tol: float, floor: float = 0.0) -> Entry:
    """Compare every (micro-batch, replica)'s value of one tensor; the first bad element is reported.
    A backend value of None (the executed step never produced it) fails."""
    missing = [where for where, a, _, _ in triples if a is None]
    if missing:
        return Entry(name, math.inf, math.inf, tol, where=f"{missing[0]}: the executed step produced no value")
    abs_err = max(max_abs_err(a, o) for _, a, _, o in triples)
    rel_err = max(max_rel_err(a, o, floor) for _, a, _, o in triples)
    ref_err = max(max_rel_err(r, o, floor) for _, _, r, o in triples)
    tolerance = max(tol, SLACK * ref_err) if math.isfinite(ref_err) else tol
    for where, a, _, o in triples:
        mismatch = first_mismatch(a, o, tolerance, floor)
        if mismatch is not None:
            return Entry(name, abs_err, rel_err, tolerance, ref_err, mismatch, where)
    return Entry(name, abs_err, rel_err, tolerance, ref_err)


def reference(schedule: Schedule, graph: Graph, dtype: str | None = None) -> dict:
    """The numpy evaluation of the plain graph on every (micro-batch, replica)'s data; for training,
    the update applied to the mean gradient over all of them (what one big-batch step computes).
    `dtype` evaluates in another floating-point dtype (see `evaluate`)."""
    m, d = schedule.options.microbatches, schedule.options.data_parallel
    inputs = [n for n in graph.nodes if n.op == "input"]
    update_outputs = [k for k, v in graph.outputs.items() if graph.nodes[v].phase == "update"]
    per_sample = [k for k in graph.outputs if k not in update_outputs]
    grad_nodes = graph.gradient_nodes()
    samples, grads = {}, {g: [] for g in grad_nodes}
    for r in range(d):
        for mb in range(m):
            feeds = {n.name: graph.input_value(n.id, sample_index(schedule, mb, r)) for n in inputs}
            values = evaluate(graph, feeds, per_sample, keep=grad_nodes, dtype=dtype)
            samples[(mb, r)] = {k: values[k] for k in per_sample}
            for g in grad_nodes:
                grads[g].append(values[f"%{g}"])
    mean = {g: np.mean(v, axis=0) for g, v in grads.items()}
    final = evaluate(graph, None, update_outputs, overrides=mean, dtype=dtype) if update_outputs else {}
    return {"samples": samples, "grads": mean, "final": final}


def reference_format(schedule: Schedule, graph: Graph) -> str:
    """What the numpy reference computes in: the step's low precision, else the graph's dtype."""
    precision = schedule.options.precision
    return precision if precision in ROUNDED_PRECISIONS else graph.dtype


def rounded_reference(schedule: Schedule, graph: Graph, hw: HwSpec) -> dict:
    """The reference of a step at a low precision: the schedule run with the numpy reference kernels
    (OpDef.ref) and the same rounding as the backend, in `reference`'s layout (replica 0's gradients and
    final values: the replicas' agree)."""
    ran = execute(schedule, graph, hw, "numpy")
    samples: dict = {}
    for (name, mb, r), value in ran.outputs.items():
        samples.setdefault((mb, r), {})[name] = value
    return {"samples": samples, "grads": {g: v for (g, r), v in ran.grads.items() if r == 0},
            "final": {name: v for (name, r), v in ran.final.items() if r == 0}}


def step_only_outputs(schedule: Schedule, graph: Graph) -> set[str]:
    """Names of the gradient outputs the schedule computes once per step only (a tied weight's gradient
    summed from its stages' per-step sums, compiler/planning/step_sums.py): it has no per-micro-batch value
    to compare, and its step mean is compared with every other gradient's."""
    grads = set(graph.gradient_nodes())
    per_step = {t.node for t in schedule.tasks if t.kind == "node" and t.microbatch == PER_STEP and t.node in grads}
    return {name for name, node in graph.outputs.items() if node in per_step}


def _entries(schedule: Schedule, graph: Graph, got: Executed, ref: dict, oracle: dict, tol: float) -> list[Entry]:
    """One entry per output tensor, averaged gradient and updated parameter."""
    entries = []
    # a tensor whose true value is ~0 (a key bias, which softmax ignores) is compared at a floor of
    # NEGLIGIBLE x the largest (finite) tensor of its kind, so rounding noise is not a relative error of 1
    sample_floor = NEGLIGIBLE * scale(*(v for s in oracle["samples"].values() for v in s.values()))
    for name in sorted({k for s in oracle["samples"].values() for k in s} - step_only_outputs(schedule, graph)):
        triples = [(f"micro-batch {mb}, replica {r}", got.outputs.get((name, mb, r)), ref["samples"][(mb, r)][name],
                    values[name]) for (mb, r), values in sorted(oracle["samples"].items())]
        entries.append(_entry(name, triples, tol, sample_floor))
    grad_floor = NEGLIGIBLE * scale(*oracle["grads"].values())
    names = {v: k for k, v in graph.outputs.items()}
    replicas = range(schedule.options.data_parallel)
    for g, expected in oracle["grads"].items():
        triples = [(f"replica {r}", got.grads.get((g, r)), ref["grads"][g], expected) for r in replicas]
        label = names.get(g, f"%{g} {graph.nodes[g].name!r}")
        entries.append(_entry(f"step mean of {label}", triples, tol, grad_floor))
    final_floor = NEGLIGIBLE * scale(*oracle["final"].values())
    for name, expected in oracle["final"].items():
        triples = [(f"replica {r}", got.final.get((name, r)), ref["final"][name], expected) for r in replicas]
        entries.append(_entry(name, triples, tol, final_floor))
    return entries


def check(schedule: Schedule, backend: str, graph: Graph, hw: HwSpec) -> CheckReport:
    """Execute `schedule` with `backend` kernels through its memory placements and compare every
    output, the averaged gradients and the updated parameters with the numpy reference. Trusts its
    input: the public A.check (accelsim/api.py) validates the schedule against `graph` and `hw` first."""
    if schedule.hw_name != hw.name:
        raise AccelsimError(f"schedule was compiled for {schedule.hw_name}, not {hw.name}")
    tol = tolerance(graph.dtype, schedule.options.precision)
    notes = _nonfinite_constants(graph)
    with _recording(f"{backend} kernels", notes):
        got = execute(schedule, graph, hw, backend)
    low = schedule.options.precision in ROUNDED_PRECISIONS
    with _recording(f"numpy reference ({reference_format(schedule, graph)})", notes):
        ref = rounded_reference(schedule, graph, hw) if low else reference(schedule, graph)
    with _recording("float64 reference", notes):
        oracle = ref if graph.dtype == "float64" and not low else reference(schedule, graph, "float64")
    with _recording("comparison", notes):
        entries = _entries(schedule, graph, got, ref, oracle, tol)
    return CheckReport(backend, graph.name, hw.name, tol, tuple(entries), tuple(got.corruptions), tuple(notes))
