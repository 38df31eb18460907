"""The op registry: one `OpDef` per op holds everything accelsim knows about it.

Nothing else in accelsim may special-case an op by name: the cost model, scheduler,
simulator and kernels all read these records.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from math import prod
from typing import Any, Callable

import numpy as np

from accelsim.errors import GraphError

Shape = tuple[int, ...]
Example = tuple[tuple[np.ndarray, ...], dict[str, Any]]

CATEGORIES = ("leaf", "elementwise", "tensor", "reduction", "data_movement")
"""The seeds' classification, plus `leaf` for graph inputs, parameters and constants."""


def numel(shape: Shape) -> int:
    return prod(shape)


def _read_all_inputs(out: Shape, *ins: Shape, **attrs: Any) -> int:
    return sum(numel(s) for s in ins)


def _write_output(out: Shape, *ins: Shape, **attrs: Any) -> int:
    return numel(out)


def _no_flops(out: Shape, *ins: Shape, **attrs: Any) -> int:
    return 0


@dataclass(frozen=True)
class Split:
    """One way to cut an op's output into independent parts along one axis, each computed from slices of
    the inputs alone (no partial sums to combine): a matmul's output rows from a's rows, a convolution's
    output channels from the filters. `in_axes[j]`: the axis of input j sliced with the output (None:
    read whole). `shape_attr`: an attribute holding the output's shape (a gradient op's input_shape),
    which each part sets to its own shape."""

    name: str
    out_axis: int
    in_axes: tuple[int | None, ...]
    shape_attr: str | None = None


def _no_splits(out: Shape, *ins: Shape, **attrs: Any) -> tuple[Split, ...]:
    return ()


@dataclass(frozen=True)
class Passes:
    """How an op reads its inputs when no element of an output can be produced before a reduction over a span
    of them: it makes one pass over the span per phase (batch norm's training forward: per-channel mean and
    variance over N, H, W, then normalize), and every pass after the first reads the span from memory again
    unless on-chip storage holds it between phases (cost/kernel_overheads.py charges those re-reads).

    phases: passes over the span (2: reduce, then produce).
    reread_elems: the input elements each pass after the first reads again (of `read_elems`).
    span_elems: the elements that must stay on chip from one phase to the next for a later pass to find
        them there: the whole input for batch norm, one row for layer norm.
    """

    phases: int
    reread_elems: int
    span_elems: int

    def __post_init__(self) -> None:
        if self.phases < 1 or self.reread_elems < 0 or self.span_elems < 0:
            raise ValueError(f"Passes needs phases >= 1 and non-negative element counts, got {self}")


@dataclass(frozen=True)
class OpDef:
    """Everything accelsim knows about one op.

    infer(*in_shapes, **attrs) -> out shape; raises ShapeError with the reason.
    ref(*arrays, **attrs) -> np.ndarray: the numpy reference, ground truth for kernels.
    flops / read_elems / written_elems(out_shape, *in_shapes, **attrs) -> int: the cost
        model's inputs; elements, not bytes, since bytes per element is the hardware's.
    grad(g, out, *inputs, **attrs) -> one Var or None per input; emits nodes, computes
        nothing. None means the op is not differentiable.
    examples(rng) -> [(arrays, attrs)]: valid random cases, used by the gradient and
        kernel tests; inputs already respect the op's domain (log of positives, ...).
    """

    name: str
    category: str
    infer: Callable[..., Shape]
    ref: Callable[..., np.ndarray]
    flops: Callable[..., int] = _no_flops
    grad: Callable[..., tuple[Any, ...]] | None = None
    examples: Callable[[np.random.Generator], list[Example]] | None = None
    read_elems: Callable[..., int] = _read_all_inputs
    written_elems: Callable[..., int] = _write_output
    dtype_from: int = 0  # which input's dtype the output takes
    backward_only: bool = False  # emitted by gradient rules, not by model builders
    doc: str = ""
    integer_inputs: tuple[int, ...] = field(default=())  # inputs that hold indices
    # (out, *in_shapes, **attrs) -> (batch, m, k, n): the GEMM a tensor op is on a matrix unit.
    gemm: Callable[..., tuple[int, int, int, int]] | None = None
    # (out, *in_shapes, **attrs) -> extra facts a hardware unit may constrain on (e.g. kernel size).
    features: Callable[..., dict[str, Any]] | None = None
    # (out, *in_shapes, **attrs) -> the ways a node's output may be cut into parts that run on different
    # unit instances at once (schedule/split.py); () for an op that is never split.
    splits: Callable[..., tuple[Split, ...]] = _no_splits
    # the collective the planner runs the node as, over the chips of its inputs' tensor-parallel ranks
    # (ops/parallel.py), instead of a task on a unit; None for an op a unit computes
    collective: str | None = None
    # attributes that say which shard of a tensor-parallel layer a rank's node works on (a vocabulary
    # shard's first row): they change no shape and no cost, so rank k's node is still a copy of rank 0's
    # (compiler/planning/rank_twins.py) when only they differ
    rank_attrs: tuple[str, ...] = ()
    # (out, *in_shapes, **attrs) -> Passes: the phases of an op that must reduce over a span of its inputs before
    # it can produce any output of that span; None for a one-pass op (read_elems read once)
    passes: Callable[..., Passes] | None = None
    # (out, *in_shapes, **attrs) -> per input, the elements the op reads of it where it is placed, for an op that
    # reads less than its whole inputs (a slice: its window); None: every input read whole. The schedule records
    # it per task (Task.partial_reads) so an input in another memory is charged only the bytes read of it there.
    input_reads: Callable[..., tuple[int, ...]] | None = None

    def __post_init__(self) -> None:
        if self.category not in CATEGORIES:
            raise ValueError(f"op {self.name}: category {self.category!r} not in {CATEGORIES}")


OPS: dict[str, OpDef] = {}


def register(opdef: OpDef) -> OpDef:
    """Add an op to the registry; a name may be registered once."""
    if opdef.name in OPS:
        raise ValueError(f"op {opdef.name!r} registered twice")
    OPS[opdef.name] = opdef
    return opdef


def get_op(name: str) -> OpDef:
    try:
        return OPS[name]
    except KeyError:
        raise GraphError(f"unknown op {name!r}; known ops: {', '.join(sorted(OPS))}") from None


def apply(op: str, *inputs: Any, name: str | None = None, **attrs: Any):
    """Add a node `op(*inputs, **attrs)` to the graph of the first Var among the inputs.

    Python and numpy scalars become constant nodes of the graph's dtype.
    """
    graph = next((x.graph for x in inputs if hasattr(x, "graph")), None)
    if graph is None:
        raise GraphError(f"{op}: needs at least one graph tensor among its inputs, got {inputs!r}")
    ids = []
    for x in inputs:
        if hasattr(x, "graph"):
            if x.graph is not graph:
                raise GraphError(f"{op}: inputs come from different graphs")
            ids.append(x.id)
        else:
            ids.append(graph.const(x).id)
    return graph.add_node(op, tuple(ids), attrs, name=name)
