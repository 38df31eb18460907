"""The numeric half of verifying a rewrite: the original and the rewritten graph evaluated in float64 on
the same leaves, every output compared (Graph, Graph -> the worst error of each output).

Leaves: parameters and constants keep the graph's own values (inference passes may freeze parameters
into constants); inputs are fed a fresh batch, `Graph.input_value(id, sample=1)`, drawn like the
defaults but not equal to them, so a rewrite that folded an input's value into a constant is caught.

Error of one output: max |new - ref| / scale, where scale is the output's largest |ref| but at least
SCALE_FLOOR times the largest |ref| of all outputs (an output that is zero up to rounding, such as
the gradient of attention's key bias, has no scale of its own). Outputs that disagree on where they
are finite, or on their non-finite values, have error inf.

Tolerance: TOLERANCE[dtype] (1e-9 for a float64 graph: one extra rounding per op stays orders of
magnitude below it, a wrong constant far above). A float32 graph stores folded values in float32, so a
rewrite may move a result by as much as float32 arithmetic does: its tolerance per output is also at
least NOISE_FACTOR times the original's own float32-vs-float64 error on that output, up to NOISE_CAP
(an output that float32 overflows is still checked at 1%).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from accelsim.compare import scale as finite_max
from accelsim.evaluate import evaluate
from accelsim.graph.ir import NUMPY_BYTES, Graph
from accelsim.limits import Limits, estimate_eval_bytes, graph_flops

TOLERANCE = {"float64": 1e-9, "float32": 1e-6}
NOISE_FACTOR = 4.0
NOISE_CAP = 1e-2
SCALE_FLOOR = 1e-6
CHECK_LIMITS = Limits(max_tensor_bytes=2**30, max_flops=2 * 10**10)
"""Default ceiling on one evaluation of the check: 1 GiB of float64 tensors, 2e10 FLOPs (numpy's float64
reference runs at 10-100 GFLOP/s here, so about a second per evaluation; resnet50 at 224x224 fits)."""


@dataclass(frozen=True)
class Mismatch:
    """The worst element of one output that differs beyond its tolerance."""

    output: str
    node: int
    node_name: str
    error: float
    tolerance: float
    index: tuple[int, ...]
    got: float
    expected: float

    def describe(self) -> str:
        at = f"[{', '.join(map(str, self.index))}]" if self.index else ""
        return (f"output {self.output!r} (node %{self.node} {self.node_name!r}) differs by {self.error:.3g} relative "
                f"(tolerance {self.tolerance:.3g}): element {at or 'value'} is {self.got:.10g}, the original "
                f"graph gives {self.expected:.10g}")


@dataclass(frozen=True)
class Reference:
    """The original graph's outputs on the check batch, and each output's scale and tolerance."""

    feeds: dict[str, np.ndarray]
    values: dict[str, np.ndarray]
    scale: dict[str, float]
    tolerance: dict[str, float]


def _exp(x: float) -> str:
    """A tolerance as people write it: 1e-6, not Python's 1e-06."""
    text = f"{x:.3g}"
    if "e" not in text:
        return text
    mantissa, exponent = text.split("e")
    return f"{mantissa}e{int(exponent)}"


def describe(dtype: str) -> str:
    """How the check compares a graph of `dtype`, for the log."""
    bound = f"relative error <= {_exp(TOLERANCE[dtype])}"
    if dtype != "float64":
        bound += (f" or {NOISE_FACTOR:g}x the graph's own {dtype} error (at most {_exp(NOISE_CAP)}), whichever is "
                  "larger")
    return f"float64 on a fresh input batch (input_value sample 1), every output: {bound}"


def too_large(graph: Graph, limits: Limits) -> str | None:
    """Why `graph` is too large to evaluate for the check (the estimate and the limit); None if it fits."""
    nbytes = estimate_eval_bytes(graph) * 8 // NUMPY_BYTES[graph.dtype]  # evaluated in float64
    if nbytes > limits.max_tensor_bytes:
        return (f"evaluating {graph.name} in float64 would allocate about {nbytes:,} bytes, above the check's "
                f"limit of {limits.max_tensor_bytes:,} (limits.max_tensor_bytes)")
    flops = graph_flops(graph)
    if flops > limits.max_flops:
        return (f"evaluating {graph.name} takes about {flops:.3g} FLOPs, above the check's limit of "
                f"{limits.max_flops:.3g} (limits.max_flops)")
    return None


def _run(graph: Graph, feeds: dict[str, np.ndarray], dtype: str, limits: Limits) -> dict[str, np.ndarray]:
    names = {n.name for n in graph.inputs}
    return evaluate(graph, feeds={k: v for k, v in feeds.items() if k in names}, dtype=dtype,
                    limits=Limits(max_tensor_bytes=2 * limits.max_tensor_bytes))


def _worst(got: np.ndarray, ref: np.ndarray, scale: float) -> tuple[float, tuple[int, ...]]:
    """(error, index of the worst element) of `got` against `ref` (same shape), relative to `scale`."""
    if ref.dtype.kind != "f":
        bad = np.argwhere(got != ref)
        return (math.inf, tuple(int(i) for i in bad[0])) if bad.size else (0.0, ())
    finite = np.isfinite(ref)
    same_nonfinite = (got == ref) | (np.isnan(got) & np.isnan(ref))
    bad = np.argwhere((finite != np.isfinite(got)) | (~finite & ~same_nonfinite))
    if bad.size:
        return math.inf, tuple(int(i) for i in bad[0])
    if ref.size == 0:
        return 0.0, ()
    with np.errstate(invalid="ignore"):  # inf - inf where both are inf: masked out
        diff = np.where(finite, np.abs(got - ref), 0.0)
    at = tuple(int(i) for i in np.unravel_index(int(np.argmax(diff)), diff.shape))
    largest = float(diff[at])
    if largest == 0.0:
        return 0.0, at
    return (largest / scale if scale > 0 else math.inf), at


def reference(graph: Graph, limits: Limits) -> Reference:
    """Evaluate the original `graph` once for every later comparison (the caller checked its size)."""
    feeds = {n.name: graph.input_value(n.id, sample=1) for n in graph.inputs}
    values = _run(graph, feeds, "float64", limits)
    top = max((finite_max(v) for v in values.values()), default=0.0)
    scale = {k: max(finite_max(v), SCALE_FLOOR * top) for k, v in values.items()}
    tolerance = {k: TOLERANCE[graph.dtype] for k in values}
    if graph.dtype != "float64":  # the graph's own rounding: what a folded float32 constant may add
        own = _run(graph, feeds, graph.dtype, limits)
        for k, v in values.items():
            noise, _ = _worst(own[k].astype(v.dtype), v, scale[k])
            tolerance[k] = max(tolerance[k], min(NOISE_FACTOR * noise, NOISE_CAP))
    return Reference(feeds, values, scale, tolerance)


def compare(ref: Reference, graph: Graph, limits: Limits) -> tuple[float, Mismatch | None]:
    """The largest error-to-tolerance ratio over `graph`'s outputs against `ref`, and the output where it
    is reached when it exceeds 1. Output names and shapes must match the reference (the caller checks)."""
    got = _run(graph, ref.feeds, "float64", limits)
    worst_ratio, worst_name, worst_index = 0.0, None, ()
    for name, expected in ref.values.items():
        error, index = _worst(got[name], expected, ref.scale[name])
        if error / ref.tolerance[name] > worst_ratio:
            worst_ratio, worst_name, worst_index = error / ref.tolerance[name], name, index
    if worst_name is None or worst_ratio <= 1.0:
        return worst_ratio, None
    node_id = graph.outputs[worst_name]
    return worst_ratio, Mismatch(worst_name, node_id, graph.nodes[node_id].name,
                                 worst_ratio * ref.tolerance[worst_name], ref.tolerance[worst_name], worst_index,
                                 float(got[worst_name][worst_index]), float(ref.values[worst_name][worst_index]))
