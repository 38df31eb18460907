"""A task's identity: which piece of the step it is (kind, graph node, op, phase, micro-batch, replica, stage,
chip). Declared once here; the schedule's Task and the trace's Span inherit it, the planner's TaskSpec
declares the same fields (a mutable dataclass cannot inherit a frozen one; tests/test_task_identity.py
checks they agree), and every copy between them goes through identity_of, field by field by name."""
from __future__ import annotations

from dataclasses import dataclass, fields
from operator import attrgetter
from typing import Annotated, Any, Literal

from pydantic import Field

from accelsim.schedule.kinds import TaskKind

PER_STEP = -1
"""micro-batch index of tasks that run once per step (optimizer update, all-reduce) and of leaves
that live for the whole step (parameters, optimizer state, constants)."""
Phase = Literal["forward", "backward", "update"]
Index = Annotated[int, Field(ge=0)]
"""A node id, replica, stage or chip: a count from 0 (the constraint is the schedule's JSON check)."""
MicroBatch = Annotated[int, Field(ge=PER_STEP)]


@dataclass(frozen=True, kw_only=True)
class TaskIdentity:
    """Which piece of the step a task is. The constraints (Annotated) are checked where a schedule is read:
    Task is a pydantic model that inherits these fields; the dataclasses ignore them."""

    kind: TaskKind  # a key of schedule.kinds.TASK_KINDS
    node: Index  # the graph node it computes, accumulates, reduces or moves
    op: str
    phase: Phase
    microbatch: MicroBatch  # PER_STEP for per-step work
    replica: Index
    stage: Index
    chip: Index  # where it runs (a transfer: the source chip)


IDENTITY_FIELDS: tuple[str, ...] = tuple(f.name for f in fields(TaskIdentity))
_identity = attrgetter(*IDENTITY_FIELDS)


def identity_of(record: Any) -> dict[str, Any]:
    """A record's identity fields by name (a TaskSpec's, a Task's, a Span's), to build another record from
    (`Task(**identity_of(spec), ...)`) or to compare."""
    return dict(zip(IDENTITY_FIELDS, _identity(record)))
