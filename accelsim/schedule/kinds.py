"""Task kinds as a typed table: what each kind holds while it runs, which values it needs, what it
computes and how it is reported. Every stage (expand, validate, simulate, execute, report) looks a
task's kind up here instead of switching on its name, so adding a kind is adding a record."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Literal, Sequence

import numpy as np

from accelsim.graph.ir import Graph, Node

Kernel = Callable[..., np.ndarray]
KernelFor = Callable[[str], Kernel]
Holds = Literal["unit", "link", "collective"]
Cut = Literal["same", "scatter", "gather"]


@dataclass(frozen=True)
class TaskKindDef:
    """Everything accelsim knows about one task kind.

    holds: what a running task occupies: an instance of a unit kind on its chip ("unit"), the link
      from its chip to its out_chip ("link"), or every replica's share of a collective at once, all
      members starting and ending together ("collective").
    reads_graph_inputs: True if it reads its graph node's inputs (leaves from memory, the rest from
      its dependences, in the node's input order); False if it reads its dependences' outputs in
      dependence order.
    needs: the graph nodes whose values its dependences must deliver (a validation rule).
    compute: its arithmetic on real arrays, given a kernel lookup, its graph node and its inputs.
    communication: reported as communication time (all-reduce, transfers), not as unit busy time.
    partial: may hold one part of its node's value (schedule/split.py): a node task computing a part,
      a transfer moving one, an accumulation of ZeRO gradient shards; all-reduces hold whole gradients.
    cut: how the part it holds relates to what its dependences hold (kinds that read dependences):
      "same" (each dependence holds its part), "scatter" (dependences whole, it holds its part of
      their reduction: a reduce-scatter member), "gather" (its dependences are every part of one cut,
      or, with none, its group's members read one leaf shard each; it holds the whole: an all-gather).
    """

    name: str
    holds: Holds
    reads_graph_inputs: bool
    needs: Callable[[Graph, Node], tuple[int, ...]]
    compute: Callable[[KernelFor, Node, Sequence[np.ndarray]], np.ndarray]
    communication: bool
    partial: bool
    cut: Cut = "same"


def _graph_inputs(graph: Graph, node: Node) -> tuple[int, ...]:
    return tuple(i for i in node.inputs if not graph.nodes[i].is_leaf)


def _itself(graph: Graph, node: Node) -> tuple[int, ...]:
    return (node.id,)


def _itself_unless_leaf(graph: Graph, node: Node) -> tuple[int, ...]:
    """An all-gather of a parameter shard (ZeRO-3) reads leaves; one of an updated value, its parts."""
    return () if node.is_leaf else (node.id,)


def _apply_op(kernel: KernelFor, node: Node, args: Sequence[np.ndarray]) -> np.ndarray:
    return np.asarray(kernel(node.op)(*args, **node.attrs), dtype=node.dtype)


def _add_all(kernel: KernelFor, node: Node, parts: Sequence[np.ndarray]) -> np.ndarray:
    """A sum in dependence order (micro-batch accumulation, or the replicas of an all-reduce)."""
    total = parts[0]
    for p in parts[1:]:
        total = np.asarray(kernel("add")(total, p), dtype=node.dtype)
    return np.asarray(total, dtype=node.dtype)


def _copy(kernel: KernelFor, node: Node, parts: Sequence[np.ndarray]) -> np.ndarray:
    return np.array(parts[0], dtype=node.dtype)


TASK_KINDS: dict[str, TaskKindDef] = {k.name: k for k in (
    TaskKindDef("node", "unit", True, _graph_inputs, _apply_op, False, True),
    TaskKindDef("accumulate", "unit", False, _itself, _add_all, False, True),
    TaskKindDef("allreduce", "collective", False, _itself, _add_all, True, False),
    TaskKindDef("transfer", "link", False, _itself, _copy, True, True),
    # a tensor-parallel all-reduce (ops/parallel.py): one member per rank, reading every rank's partial
    # value (its node's inputs, in rank order) and holding their sum on its chip
    TaskKindDef("tp_allreduce", "collective", False, _graph_inputs, _apply_op, True, False),
    # ZeRO (compiler/planning/zero.py): one member per replica; member r holds rows part r of the sum of every
    # replica's gradient, or the whole value from every replica's part (all-gather)
    TaskKindDef("reduce_scatter", "collective", False, _itself, _add_all, True, True, cut="scatter"),
    TaskKindDef("all_gather", "collective", False, _itself_unless_leaf, _copy, True, False, cut="gather"),
)}


def busy_kinds() -> tuple[str, ...]:
    """Kinds whose time counts as a unit's busy time."""
    return tuple(k.name for k in TASK_KINDS.values() if k.holds == "unit")
