"""Result -> Chrome trace-event JSON, for ui.perfetto.dev and chrome://tracing.

One process per chip, one thread per unit instance or link, one complete ("X") event per span (named by its
layer where the layer names are given, else by its op) and one counter ("C") track per memory, on its chip's
process. Times are microseconds, as the format requires.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Mapping, Sequence

from accelsim.errors import AccelsimError
from accelsim.sim.trace import Result
from accelsim.viz.timeline import check_layers, check_result, row_label, span_label, timeline_rows


def write_perfetto(result: Result, path: str | Path, layers: Sequence[str] | None = None,
                   groups: Mapping[int, str] | None = None) -> dict:
    """Write the trace to `path` (parents created) and return the dict written; ts/dur in µs. `layers`:
    layer_names(graph), by node id: events are named by layer (their op in args); None: by op. `groups`:
    fusion_groups.group_of_nodes(graph): a fused tile's or concat's event names its group in args."""
    check_result(result)
    groups = groups or {}
    check_layers(result, layers)
    rows = timeline_rows(result)
    chips = sorted({r[0] for r in rows} | {m.chip for m in result.memories})
    events: list[dict] = []
    for chip in chips:
        events.append({"ph": "M", "name": "process_name", "pid": chip, "tid": 0, "args": {"name": f"chip{chip}"}})
        events.append({"ph": "M", "name": "process_sort_index", "pid": chip, "tid": 0, "args": {"sort_index": chip}})

    tid_of: dict[tuple[int, str, int], int] = {}
    next_tid: dict[int, int] = {}
    for row in rows:  # tids count from 1 within each chip, in timeline order
        chip, resource, instance = row
        tid_of[row] = next_tid[chip] = next_tid.get(chip, 0) + 1
        name = row_label(result, resource, instance)
        events.append({"ph": "M", "name": "thread_name", "pid": chip, "tid": tid_of[row], "args": {"name": name}})
        events.append({"ph": "M", "name": "thread_sort_index", "pid": chip, "tid": tid_of[row],
                       "args": {"sort_index": tid_of[row]}})

    for s in sorted(result.spans, key=lambda s: (s.chip, tid_of[(s.chip, s.resource, s.instance)], s.start, s.task)):
        events.append({
            "ph": "X", "name": span_label(s, layers), "cat": s.phase, "pid": s.chip,
            "tid": tid_of[(s.chip, s.resource, s.instance)],
            "ts": _us(s.start, result), "dur": _us(s.end - s.start, result),
            "args": {"task": s.task, "kind": s.kind, **({"op": s.op} if layers is not None else {}), "node": s.node,
                     **({"fusion_group": groups[s.node]} if s.node in groups else {}),
                     "microbatch": s.microbatch, "replica": s.replica, "phase": s.phase, "start_cycle": s.start, "end_cycle": s.end,
                     "ready_cycle": s.ready, "planned_start_cycle": s.planned_start,
                     "stall_cycles": sum(c for _, c in s.stalls), "stalls": dict(s.stalls)},
        })

    for m in sorted(result.memories, key=lambda m: (m.chip, m.memory)):
        for cycle, in_use in m.occupancy:
            events.append({"ph": "C", "name": f"{m.label} bytes", "pid": m.chip, "tid": 0,
                           "ts": _us(cycle, result), "args": {"in_use": in_use}})

    trace = {
        "traceEvents": events,
        "displayTimeUnit": "ns",
        "otherData": {"graph": result.graph_name, "hw": result.hw_name, "mode": result.mode,
                      "clock_hz": result.clock_hz, "makespan_cycles": result.makespan_cycles},
    }
    try:
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("w") as f:
            json.dump(trace, f, sort_keys=True)
    except (OSError, TypeError, ValueError) as e:  # ValueError: a NUL byte in the name
        raise AccelsimError(f"cannot write the Perfetto trace to {str(path)!r}: {e}") from None
    return trace


def _us(cycles: int, result: Result) -> float:
    return cycles * 1e6 / result.clock_hz

