"""Readable labels for a schedule's tasks and tensors (op, %id, the node's name, micro-batch and replica): every
problem the validator, the agreement checks and the compiler's plan check report names what it is about so."""
from __future__ import annotations

from accelsim.graph.ir import Graph
from accelsim.schedule.plan import PER_STEP, Schedule, Task, Tensor, memory_label


class Names:
    """Readable labels for tasks and tensors: op, %id and (when the graph is known) the node's name."""

    def __init__(self, schedule: Schedule, graph: Graph | None) -> None:
        self.graph = graph
        self.tasks = schedule.tasks

    def node(self, node_id: int, op: str | None = None) -> str:
        g = self.graph
        if g is not None and 0 <= node_id < len(g.nodes):
            n = g.nodes[node_id]
            return f"{op or n.op} %{node_id} {n.name!r}"
        return f"{op} %{node_id}" if op else f"%{node_id}"

    def task(self, t: Task) -> str:
        return f"task {t.id} ({t.kind} {self.node(t.node, t.op)}, {mb_replica(t.microbatch, t.replica)})"

    def tensor(self, x: Tensor) -> str:
        return (f"tensor of {self.node(x.node)} ({mb_replica(x.microbatch, x.replica)}, "
                f"{'leaf' if x.task < 0 else f'task {x.task}'}) in {memory_label(x.chip, x.memory)} "
                f"at [{x.offset}, {x.offset + x.size_bytes}) live [{x.start}, {x.end})")


def mb_replica(microbatch: int, replica: int) -> str:
    mb = "per step" if microbatch == PER_STEP else f"mb {microbatch}"
    return f"{mb}, replica {replica}"
