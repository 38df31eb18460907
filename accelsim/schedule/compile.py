"""`compile(graph, hw, ...)`: the static scheduler's entry point (Graph, HwSpec -> Schedule)."""
from __future__ import annotations

from accelsim.graph.ir import Graph
from accelsim.hw.spec import HwSpec
from accelsim.schedule.bounds import lower_bounds
from accelsim.schedule.expand import expand
from accelsim.schedule.list_sched import PRIORITIES, list_schedule
from accelsim.schedule.plan import Options, Schedule, Task, Tensor, graph_hash, hw_hash
from accelsim.schedule.ports import unit_ports


def _peak(blocks) -> int:
    events = sorted([(b.start, b.size_bytes) for b in blocks] + [(int(b.end), -b.size_bytes) for b in blocks])
    peak = live = 0
    for _, delta in events:  # frees sort before allocations at the same cycle (half-open intervals)
        live += delta
        peak = max(peak, live)
    return peak


def _source(graph: Graph) -> dict:
    """What rebuilds the graph: the model and its options, and the training settings if any."""
    meta = graph.meta
    if "model" not in meta:
        return {}
    out = {"model": meta["model"], "options": dict(meta.get("options", {})), "training": meta.get("training", False)}
    if meta.get("training"):
        out.update({k: meta[k] for k in ("optimizer", "lr", "momentum", "beta1", "beta2", "eps", "step")})
    return out


def _batch(graph: Graph) -> int:
    """Samples in one micro-batch: the model's `batch` option, else the first input's leading axis."""
    batch = graph.meta.get("options", {}).get("batch")
    if batch is None:
        first = next((n for n in graph.nodes if n.op == "input" and n.shape), None)
        batch = first.shape[0] if first is not None else 1
    return int(batch)


def _auto_window(graph: Graph, hw: HwSpec, options: Options) -> int:
    """How many micro-batches' working sets fit in each chip's first-choice memory at once."""
    probe_opts = options.model_copy(update={"microbatches": 1, "data_parallel": 1})
    plan = expand(graph, hw, probe_opts)
    _, mem = list_schedule(plan, hw)
    fits = []
    for row in mem.order:
        _, arena = row[0]
        peak = _peak(arena.blocks)
        if peak:
            fits.append(arena.capacity_bytes // peak)
    return max(1, min(fits, default=options.microbatches))


def compile(graph: Graph, hw: HwSpec, microbatches: int = 1, data_parallel: int = 1,  # noqa: A001
            pipeline_stages: int = 1, max_in_flight: int | None = None, validate: bool = True) -> Schedule:
    """List-schedule one step of `graph` (training or inference) on `hw`.

    `max_in_flight` micro-batches of a replica may be active at once; by default as many as fit
    the fastest memory, judged from a one-micro-batch schedule (parallelism needs memory)."""
    options = Options(microbatches=microbatches, data_parallel=data_parallel, pipeline_stages=pipeline_stages)
    window = max_in_flight or (_auto_window(graph, hw, options) if microbatches > 1 else None)
    plan = expand(graph, hw, options, window)
    # both priorities, the shorter schedule (the first on a tie): which wins depends on the design
    runs = [list_schedule(plan, hw, priority) for priority in PRIORITIES]
    timed, mem = min(runs, key=lambda run: max((x.end for x in run[0]), default=0))
    reads = unit_ports(plan.chips)
    tasks = tuple(Task(id=t.id, kind=t.kind, node=t.node, op=t.op, phase=t.phase, microbatch=t.microbatch,
                       replica=t.replica, stage=t.stage, chip=t.chip, resource=x.resource, instance=x.instance,
                       start=x.start, end=x.end, deps=tuple(t.deps), bytes_moved=t.port_bytes,
                       port=reads.get((t.chip, x.resource), x.resource)) for t, x in zip(plan.tasks, timed))
    tensors = []
    for arena in mem.arenas.values():
        for b in arena.blocks:
            if b.key[0] == "out":
                t = plan.tasks[b.key[1]]
                node, mb, replica, task = t.node, t.microbatch, t.replica, t.id
            else:
                (node, mb, replica), _chip = b.key[1], b.key[2]
                task = -1
            tensors.append(Tensor(node=node, microbatch=mb, replica=replica, task=task, memory=arena.name,
                                  offset=b.offset, size_bytes=b.size_bytes, start=b.start, end=int(b.end)))
    tensors.sort(key=lambda x: (x.memory, x.start, x.offset))
    batch = _batch(graph)
    schedule = Schedule(
        graph_name=graph.name, graph_hash=graph_hash(graph), hw_name=hw.name, hw_hash=hw_hash(hw),
        clock_hz=hw.clock_hz, options=options, training=any(n.phase == "update" for n in graph.nodes),
        samples_per_step=batch * microbatches * data_parallel, tasks=tasks, tensors=tuple(tensors),
        memory_capacity_bytes={a.name: a.capacity_bytes for a in mem.arenas.values()},
        peak_memory_bytes={a.name: _peak(a.blocks) for a in mem.arenas.values()},
        makespan_cycles=max((t.end for t in tasks), default=0), bounds=lower_bounds(plan, hw),
        source=_source(graph))
    if validate:
        from accelsim.schedule.validate import validate_schedule
        validate_schedule(schedule, graph, hw)
    return schedule
