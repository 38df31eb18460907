"""`check(schedule, backend)`: run the scheduled step on real numbers and compare it with the numpy
reference evaluation of the plain graph (Schedule -> CheckReport)."""
from __future__ import annotations

from dataclasses import asdict, dataclass, field

import numpy as np

from accelsim.errors import AccelsimError
from accelsim.evaluate import evaluate
from accelsim.execute.run import execute, sample_index
from accelsim.gradcheck import NEGLIGIBLE, max_rel_err
from accelsim.graph.ir import Graph
from accelsim.hw.spec import HwSpec
from accelsim.schedule.plan import Schedule

TOLERANCE = {"float64": 1e-9, "float32": 1e-4}
"""Max relative error (max |a - b| over the tensor's largest value) a backend may always show per tensor."""
SLACK = 4.0
"""A float32 tensor may also be off by SLACK x the error numpy's own float32 evaluation shows: both are
measured against a float64 evaluation of the same leaves, so deep or ill-conditioned graphs (where
rounding grows layer by layer) get a bound that follows their conditioning instead of a fixed one."""


@dataclass(frozen=True)
class Entry:
    name: str
    max_abs_err: float
    max_rel_err: float
    tolerance: float
    reference_rel_err: float = 0.0
    """The numpy reference's own error in the graph's dtype, against the float64 evaluation."""

    @property
    def passed(self) -> bool:
        return self.max_rel_err <= self.tolerance


@dataclass(frozen=True)
class CheckReport:
    backend: str
    graph: str
    hw: str
    tolerance: float
    entries: tuple[Entry, ...]
    corruptions: tuple[str, ...] = field(default=())

    @property
    def passed(self) -> bool:
        return not self.corruptions and all(e.passed for e in self.entries)

    def to_json(self) -> dict:
        return {"backend": self.backend, "graph": self.graph, "hw": self.hw, "tolerance": self.tolerance,
                "passed": self.passed, "corruptions": list(self.corruptions),
                "entries": [{**asdict(e), "passed": e.passed} for e in self.entries]}


def _entry(name: str, triples: list[tuple[np.ndarray, np.ndarray, np.ndarray]], tol: float,
           floor: float = 0.0) -> Entry:
    """Each triple is (backend value, numpy value in the graph's dtype, float64 oracle)."""
    abs_err = max(float(np.max(np.abs(np.asarray(a, np.float64) - o), initial=0.0)) for a, _, o in triples)
    rel_err = max(max_rel_err(a, o, floor) for a, _, o in triples)
    ref_err = max(max_rel_err(r, o, floor) for _, r, o in triples)
    return Entry(name, abs_err, rel_err, max(tol, SLACK * ref_err), ref_err)


def _scale(values) -> float:
    return max((float(np.max(np.abs(v), initial=0.0)) for v in values), default=0.0)


def reference(schedule: Schedule, graph: Graph, dtype: str | None = None) -> dict:
    """The numpy evaluation of the plain graph on every (micro-batch, replica)'s data; for training,
    the update applied to the mean gradient over all of them (what one big-batch step computes).
    `dtype` evaluates in another floating-point dtype (see `evaluate`)."""
    m, d = schedule.options.microbatches, schedule.options.data_parallel
    inputs = [n for n in graph.nodes if n.op == "input"]
    update_outputs = [k for k, v in graph.outputs.items() if graph.nodes[v].phase == "update"]
    per_sample = [k for k in graph.outputs if k not in update_outputs]
    grad_nodes = sorted({i for n in graph.nodes if n.phase == "update" for i in n.inputs
                         if graph.nodes[i].phase == "backward"})
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


def check(schedule: Schedule, backend: str = "numba", graph: Graph | None = None,
          hw: HwSpec | None = None) -> CheckReport:
    """Execute `schedule` with `backend` kernels through its memory placements and compare every
    output, the averaged gradients and the updated parameters with the numpy reference."""
    if graph is None:
        from accelsim.schedule.source import graph_for
        graph = graph_for(schedule)
    if hw is None:
        from accelsim.hw import load_hw
        hw = load_hw(schedule.hw_name)
    if schedule.hw_name != hw.name:
        raise AccelsimError(f"schedule was compiled for {schedule.hw_name}, not {hw.name}")
    tol = TOLERANCE[graph.dtype]
    got = execute(schedule, graph, hw, backend)
    ref = reference(schedule, graph)
    oracle = ref if graph.dtype == "float64" else reference(schedule, graph, "float64")
    entries = []
    # a tensor whose true value is ~0 (a key bias, which softmax ignores) is compared at a floor of
    # NEGLIGIBLE x the largest tensor of its kind, so rounding noise is not a relative error of 1
    sample_scale = _scale(v for s in oracle["samples"].values() for v in s.values())
    for name in sorted({k for k, _, _ in got.outputs}):
        triples = [(v, ref["samples"][(mb, r)][k], oracle["samples"][(mb, r)][k])
                   for (k, mb, r), v in sorted(got.outputs.items()) if k == name]
        entries.append(_entry(name, triples, tol, NEGLIGIBLE * sample_scale))
    scale = _scale(oracle["grads"].values())
    names = {v: k for k, v in graph.outputs.items()}
    for g, expected in oracle["grads"].items():
        triples = [(v, ref["grads"][g], expected) for (node, _), v in got.grads.items() if node == g]
        if triples:
            label = names.get(g, f"%{g} {graph.nodes[g].name!r}")
            entries.append(_entry(f"step mean of {label}", triples, tol, NEGLIGIBLE * scale))
    final_scale = _scale(oracle["final"].values())
    for name, expected in oracle["final"].items():
        triples = [(v, ref["final"][name], expected) for (k, _), v in got.final.items() if k == name]
        entries.append(_entry(name, triples, tol, NEGLIGIBLE * final_scale))
    return CheckReport(backend, graph.name, hw.name, tol, tuple(entries), tuple(got.corruptions))
