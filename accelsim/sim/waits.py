"""Why a dynamic run deadlocked: the cycle in its wait-for graph (blocked task -> the tasks it waits on), told as
one paragraph. sim/dynamic.py builds the graph from its state when no event is left; this module only reads it."""
from __future__ import annotations

from collections.abc import Callable, Iterable

Edge = tuple[int, str]
"""(the task waited on, how the waiting task waits on it, e.g. "waits for its input from task 4")."""


def find_cycle(waits: dict[int, list[Edge]], starts: Iterable[int]) -> list[tuple[int, str]]:
    """The first cycle reached depth first from `starts` (edges in their given order), as [(task, how it waits
    on the next task of the cycle)], the last waiting on the first; [] if the waits form no cycle."""
    state: dict[int, int] = {}  # 1: on the current path, 2: explored
    for start in starts:
        if state.get(start):
            continue
        path: list[tuple[int, str]] = []
        stack: list[tuple[int, int]] = [(start, 0)]  # (task, index of its next edge)
        state[start] = 1
        while stack:
            task, i = stack[-1]
            edges = waits.get(task, [])
            if i == len(edges):
                stack.pop()
                state[task] = 2
                if path:
                    path.pop()
                continue
            stack[-1] = (task, i + 1)
            nxt, how = edges[i]
            if state.get(nxt) == 1:
                cycle = path + [(task, how)]
                first = next(k for k, (t, _) in enumerate(cycle) if t == nxt)
                return cycle[first:]
            if not state.get(nxt):
                state[nxt] = 1
                path.append((task, how))
                stack.append((nxt, 0))
    return []


def explain_cycle(cycle: list[tuple[int, str]], name: Callable[[int], str], streams: Callable[[int], str]) -> str:
    """One paragraph: each task of the cycle and how it waits on the next, and which hazard closed it.
    `name` names a task; `streams` its micro-batch and replica ("mb 0, replica 0")."""
    if not cycle:
        return ""
    steps = "; ".join(f"{name(task)} {how}" for task, how in cycle)
    spans = sorted({streams(task) for task, _ in cycle})
    if len(spans) > 1:
        hazard = (f"The cycle spans {len(spans)} micro-batches ({'; '.join(spans)}): the work queue starts each "
                  "micro-batch's tasks as soon as their inputs are ready, without the compiled in-flight window "
                  "(it follows data dependences only), so their tensors fill the memory each needs to go on. "
                  "This is a hazard of dynamic issue that the static replay, which keeps the window, does not "
                  "have; give the memory more room or simulate in static mode.")
    else:
        hazard = ("Within one micro-batch the runtime grants space in the compiled order, so the cycle comes from "
                  "where it placed tensors (the unit's own memory when it has room, else the next level), which "
                  "differs from the compiled placement; simulate in static mode to follow the compiled one.")
    return f"Cycle of waits: {steps}; and so back to the first. {hazard}"
