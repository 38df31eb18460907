"""Graph statistics: node counts by phase, category and op; FLOPs; parameter and activation bytes."""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Any

import numpy as np

from accelsim.graph.ir import NUMPY_BYTES, Graph
from accelsim.ops.registry import get_op, numel



@dataclass(frozen=True)
class GraphStats:
    """What `accelsim graph` reports; bytes use the graph's numpy dtypes (the hardware may differ)."""

    name: str
    nodes: int
    edges: int
    by_phase: dict[str, int]
    by_category: dict[str, int]
    by_op: dict[str, int]
    flops: int
    flops_by_phase: dict[str, int]
    param_count: int
    param_bytes: int
    activation_bytes: int

    def to_json(self) -> dict[str, Any]:
        return dict(self.__dict__)


def graph_stats(graph: Graph) -> GraphStats:
    """Activation bytes: every forward node's output that is not a leaf (what a step keeps alive)."""
    flops_by_phase: Counter[str] = Counter()
    for n in graph.nodes:
        op = get_op(n.op)
        flops_by_phase[n.phase] += op.flops(n.shape, *(graph.nodes[i].shape for i in n.inputs), **n.attrs)
    params = [n for n in graph.params if n.trainable]
    return GraphStats(
        name=graph.name,
        nodes=len(graph.nodes),
        edges=sum(len(n.inputs) for n in graph.nodes),
        by_phase=dict(Counter(n.phase for n in graph.nodes)),
        by_category=dict(sorted(Counter(get_op(n.op).category for n in graph.nodes).items())),
        by_op=dict(sorted(Counter(n.op for n in graph.nodes).items(), key=lambda kv: (-kv[1], kv[0]))),
        flops=int(sum(flops_by_phase.values())),
        flops_by_phase={k: int(v) for k, v in flops_by_phase.items()},
        param_count=int(sum(numel(n.shape) for n in params)),
        param_bytes=int(sum(numel(n.shape) * NUMPY_BYTES[n.dtype] for n in params)),
        activation_bytes=int(sum(numel(n.shape) * NUMPY_BYTES[n.dtype] for n in graph.nodes
                                 if n.phase == "forward" and not n.is_leaf)),
    )


def summarize_tensor(value: np.ndarray, max_elems: int = 16) -> Any:
    """A tensor as JSON: in full up to `max_elems` elements, else its shape and L2 norm."""
    value = np.asarray(value)
    if value.size <= max_elems:
        return value.tolist()
    return {"shape": list(value.shape), "l2_norm": float(np.linalg.norm(value.astype(np.float64)))}


def samples_per_microbatch(graph: Graph) -> int:
    """Samples in one micro-batch: the model's `batch` option, else the first input's leading axis."""
    batch = graph.source.options_dict().get("batch") if graph.source is not None else None
    if batch is None:
        first = next((n for n in graph.nodes if n.op == "input" and n.shape), None)
        batch = first.shape[0] if first is not None else 1
    return int(batch)
