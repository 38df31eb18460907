"""What a chunk's backward pass sends to earlier chunks, read from the one-micro-batch task plan templates.py
measures (plan, weight-gradient nodes -> one BackwardSends per chunk).

A backward pass sends two kinds of values back. Its input gradient is what the previous chunk's backward pass
starts from: the composition hands it on as soon as it is computed, not at the pass's end (handoffs.py says
when). A weight gradient of a parameter another stage holds (gpt2's tied embedding: the LM head on the last
stage computes the vocabulary matrix's gradient, the embedding's stage adds it to its own and updates it) is
read only by that stage's weight gradients and update: it waits for nothing but the pass's end, and nothing
but that stage's update waits for it (gpt2-2 on two A100s: 77 MB of the 79 MB sent back per micro-batch).
"""
from __future__ import annotations

from dataclasses import dataclass

from accelsim.compiler.planning.tasks import Plan, TaskSpec

TRANSFER = "transfer"


@dataclass(frozen=True, slots=True)
class BackwardSends:
    """One chunk's weight gradients for earlier chunks, per micro-batch (when its input gradient lets the
    previous chunk's backward pass start is handoffs.py's)."""

    update_sends: tuple[tuple[int, int], ...]
    """(destination chunk, bytes) of the weight gradients it sends to the chunks holding their parameters,
    by destination, per tensor-parallel rank (its busiest: each rank sends its own shard's to its twin)."""

    @property
    def update_bytes(self) -> int:
        return sum(n for _, n in self.update_sends)


def update_send_tasks(plan: Plan, chunk_of_chip: dict[int, int], handed: frozenset[int]) -> list[TaskSpec]:
    """The backward transfers to an earlier chunk that carry a weight gradient to the stage updating it: every
    such transfer but the input gradients (`handed`: input_grad_transfers)."""
    return [task for task in plan.tasks if task.kind == TRANSFER and task.phase == "backward"
            and task.id not in handed and chunk_of_chip[task.out_chip] < chunk_of_chip[task.chip]]


def backward_sends(sends: list[TaskSpec], chunk_of_chip: dict[int, int], n_chunks: int) -> list[BackwardSends]:
    """Per chunk (0 .. n_chunks - 1), its BackwardSends from its weight-gradient transfers in the measured plan
    (`sends`: update_send_tasks)."""
    per_chip: dict[tuple[int, int], int] = {}  # (source chip, destination chunk) -> bytes
    for task in sends:
        key = (task.chip, chunk_of_chip[task.out_chip])
        per_chip[key] = per_chip.get(key, 0) + task.out_bytes
    updates: list[dict[int, int]] = [{} for _ in range(n_chunks)]
    for (chip, dst), nbytes in per_chip.items():
        src = chunk_of_chip[chip]
        updates[src][dst] = max(updates[src].get(dst, 0), nbytes)
    return [BackwardSends(tuple(sorted(updates[c].items()))) for c in range(n_chunks)]


def input_grad_transfers(plan: Plan, chunk_of_chip: dict[int, int], weight_grad: frozenset[int]) -> frozenset[int]:
    """The ids of the backward transfers to an earlier chunk that carry an input gradient: some task reading it
    there is neither an update nor computes a weight-gradient node (the others carry weight gradients to the
    stage that updates them)."""
    tasks = plan.tasks
    readers: dict[int, list[int]] = {}
    for task in tasks:
        for d in task.deps:
            readers.setdefault(d, []).append(task.id)
    back = [task for task in tasks if task.kind == TRANSFER and task.phase == "backward"
            and chunk_of_chip[task.out_chip] < chunk_of_chip[task.chip]]
    return frozenset(task.id for task in back if not all(
        tasks[r].phase == "update" or tasks[r].node in weight_grad for r in readers.get(task.id, ())))
