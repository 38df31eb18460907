"""When data-parallel gradients are all-reduced at task granularity (Graph, StepOptions, planned tasks ->
ordering edges added in place), by StepOptions.gradient_reduction.

"overlap" (the default) adds nothing: a gradient's all-reduce starts once its last accumulation is done, beside the
rest of the backward pass, as PyTorch DDP's buckets do. "after-backward" is Megatron-LM's local DDP of 2021 (the
code of Narayanan et al., SC21: megatron/training.py's train_step calls allreduce_gradients() once
forward_backward_func has returned): every all-reduce of a stage waits, by ordering edges (TaskSpec.after), for that
stage's last backward work of its replica (node, accumulation and tensor-parallel all-reduce tasks of the backward
phase for one micro-batch), so the reduction runs after the pass; and the update tasks that read a reduced gradient
wait for every all-reduce of their stage, so the update runs after the whole reduction (optimizer.step() after
allreduce_gradients()). Per-step backward work is not waited for: a tied weight's gradient summed from another
stage's part (step_sums.py) waits for that stage's send, which Megatron-LM sums after the data-parallel all-reduce,
not before every one of them. The stage granularity does the same in hierarchy/compose.py (AFTER_BACKWARD).
"""
from __future__ import annotations

from accelsim.compiler.planning.tasks import TaskSpec
from accelsim.errors import ScheduleError
from accelsim.graph.ir import Graph
from accelsim.schedule.options import StepOptions
from accelsim.schedule.plan import PER_STEP

BACKWARD_WORK_KINDS = frozenset({"node", "accumulate", "tp_allreduce"})
"""Task kinds that are a stage's backward work (a pipeline send, a prefetch or the all-reduce itself is not)."""


def check_gradient_reduction(graph: Graph, options: StepOptions) -> None:
    """ScheduleError when `options` reduce gradients after the backward pass of a graph that has none (an
    inference graph: there is nothing to reduce). ZeRO is refused by StepOptions itself."""
    if options.gradient_reduction != "overlap" and not any(n.phase == "backward" for n in graph.nodes):
        raise ScheduleError(f"gradient_reduction={options.gradient_reduction!r} reduces the replicas' gradients "
                            f"after the backward pass, but {graph.name!r} is an inference graph (no backward pass, "
                            f"no gradients); leave gradient_reduction at 'overlap'")


def order_after_backward(tasks: list[TaskSpec]) -> int:
    """Make every data-parallel all-reduce member (kind allreduce) wait for the last backward work of its
    replica on its gradient's stage: ordering edges to that work's sinks (tasks no other such task reads).
    Work that reads an all-reduced gradient, and per-step work, are not waited for. Then every update task that
    reads an all-reduce waits for all the all-reduces of its replica's stage. The tasks are renumbered first
    (reduction_last) so that the work waited for has lower ids. Returns the number of edges added; deterministic
    (ids ascend)."""
    if not any(t.kind == "allreduce" for t in tasks):
        return 0
    after_reduce = reduction_last(tasks)
    members = [t for t in tasks if t.kind == "allreduce"]
    work: dict[tuple[int, int], list[int]] = {}
    for t in tasks:
        if t.phase == "backward" and t.kind in BACKWARD_WORK_KINDS and t.microbatch != PER_STEP \
                and not after_reduce[t.id]:
            work.setdefault((t.replica, t.stage), []).append(t.id)
    key_of = {tid: key for key, ids in work.items() for tid in ids}
    read = {d for tid, key in key_of.items() for d in tasks[tid].preds if key_of.get(d) == key}
    sinks = {key: [tid for tid in ids if tid not in read] for key, ids in work.items()}
    added = 0
    reduces: dict[tuple[int, int], list[int]] = {}
    for t in members:
        reduces.setdefault((t.replica, t.stage), []).append(t.id)
        have = set(t.preds)
        new = [s for s in sinks.get((t.replica, t.stage), []) if s not in have]
        if new:
            t.after = sorted(t.after + new)
            added += len(new)
    # then the update: its tasks that read an all-reduced gradient wait for every all-reduce of their stage, as
    # Megatron-LM's optimizer.step() follows the whole reduction and the embedding group's all-reduce of a tied
    # weight's gradient (the rest of the update follows them): the all-reduce of a gradient summed with another
    # stage's part (step_sums.py) waits for that stage's send, so the whole update does, as in compose.py
    is_member = {t.id for t in members}
    for t in tasks:
        if t.phase == "update" and any(d in is_member for d in t.deps):
            have = set(t.preds)
            new = [m for m in reduces.get((t.replica, t.stage), []) if m not in have]
            if new:
                t.after = sorted(t.after + new)
                added += len(new)
    return added


def reduction_last(tasks: list[TaskSpec]) -> list[bool]:
    """Renumber `tasks` in place so that the tasks reading an all-reduce's output, directly or not (the
    all-reduces themselves, the update, ...), follow every other task, each part keeping its order: still a
    topological order, with every backward task before every all-reduce (the planner reduces gradient by
    gradient, so a later gradient's accumulations have higher ids than an earlier one's all-reduce). A
    collective's group, the id of its first member, moves with it. Returns, per new id, whether the task reads an
    all-reduce's output."""
    late = [False] * len(tasks)
    for t in tasks:  # ids are a topological order
        late[t.id] = t.kind == "allreduce" or any(late[d] for d in t.preds)
    order = [t for t in tasks if not late[t.id]] + [t for t in tasks if late[t.id]]
    new_id = {t.id: i for i, t in enumerate(order)}
    for i, t in enumerate(order):
        t.id = i
        t.deps = [new_id[d] for d in t.deps]
        t.after = sorted(new_id[a] for a in t.after)
        t.lag = {new_id[d]: cycles for d, cycles in t.lag.items()}
        if t.group >= 0:
            t.group = new_id[t.group]
    tasks[:] = order
    return [late[t] for t in sorted(new_id, key=new_id.__getitem__)]


def order_gradient_reduction(graph: Graph, options: StepOptions, tasks: list[TaskSpec]) -> int:
    """The ordering edges `options.gradient_reduction` asks of the planned `tasks` (none for "overlap");
    refused where meaningless (check_gradient_reduction). Returns the number of edges added."""
    check_gradient_reduction(graph, options)
    if options.gradient_reduction == "overlap":
        return 0
    return order_after_backward(tasks)
