"""Result -> Chrome trace-event JSON, for ui.perfetto.dev and chrome://tracing.

One process per chip, one thread per unit instance or link, one complete ("X") event per span and one
counter ("C") track per memory. Times are microseconds, as the format requires.
"""
from __future__ import annotations

import json
import re
from pathlib import Path

from accelsim.sim.trace import Result
from accelsim.viz.timeline import resource_label, timeline_rows

_CHIP_OF_MEMORY = re.compile(r"^chip(\d+):")


def write_perfetto(result: Result, path: str | Path) -> dict:
    """Write the trace to `path` (parents created) and return the dict written; ts/dur in µs."""
    rows = timeline_rows(result)
    memory_chips = {m: _chip_of_memory(m) for m in result.occupancy}
    chips = sorted({r[0] for r in rows} | {c for c in memory_chips.values() if c is not None})
    # Memories not named after a chip get their own process after the chips.
    other_pid = max(chips, default=-1) + 1
    for m, c in memory_chips.items():
        if c is None:
            memory_chips[m] = other_pid

    events: list[dict] = []
    for chip in chips:
        events.append({"ph": "M", "name": "process_name", "pid": chip, "tid": 0, "args": {"name": f"chip{chip}"}})
        events.append({"ph": "M", "name": "process_sort_index", "pid": chip, "tid": 0, "args": {"sort_index": chip}})
    if other_pid in memory_chips.values():
        events.append({"ph": "M", "name": "process_name", "pid": other_pid, "tid": 0, "args": {"name": "memories"}})

    tid_of: dict[tuple[int, str, int], int] = {}
    next_tid: dict[int, int] = {}
    for row in rows:  # tids count from 1 within each chip, in timeline order
        chip, resource, instance = row
        tid_of[row] = next_tid[chip] = next_tid.get(chip, 0) + 1
        name = resource_label(result, resource, instance)
        events.append({"ph": "M", "name": "thread_name", "pid": chip, "tid": tid_of[row], "args": {"name": name}})
        events.append({"ph": "M", "name": "thread_sort_index", "pid": chip, "tid": tid_of[row],
                       "args": {"sort_index": tid_of[row]}})

    for s in sorted(result.spans, key=lambda s: (s.chip, tid_of[(s.chip, s.resource, s.instance)], s.start, s.task)):
        events.append({
            "ph": "X", "name": s.op, "cat": s.phase, "pid": s.chip, "tid": tid_of[(s.chip, s.resource, s.instance)],
            "ts": _us(s.start, result), "dur": _us(s.end - s.start, result),
            "args": {"task": s.task, "kind": s.kind, "node": s.node, "microbatch": s.microbatch,
                     "replica": s.replica, "phase": s.phase, "start_cycle": s.start, "end_cycle": s.end,
                     "ready_cycle": s.ready, "planned_start_cycle": s.planned_start,
                     "stall_cycles": sum(c for _, c in s.stalls), "stalls": dict(s.stalls)},
        })

    for memory, steps in sorted(result.occupancy.items()):
        for cycle, in_use in steps:
            events.append({"ph": "C", "name": f"{memory} bytes", "pid": memory_chips[memory], "tid": 0,
                           "ts": _us(cycle, result), "args": {"in_use": in_use}})

    trace = {
        "traceEvents": events,
        "displayTimeUnit": "ns",
        "otherData": {"graph": result.graph_name, "hw": result.hw_name, "mode": result.mode,
                      "clock_hz": result.clock_hz, "makespan_cycles": result.makespan_cycles},
    }
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w") as f:
        json.dump(trace, f, sort_keys=True)
    return trace


def _us(cycles: int, result: Result) -> float:
    return cycles * 1e6 / result.clock_hz


def _chip_of_memory(memory: str) -> int | None:
    match = _CHIP_OF_MEMORY.match(memory)
    return int(match.group(1)) if match else None
