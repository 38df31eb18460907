"""Task kinds as a table (schedule/kinds.py): every kind a schedule may name has one record, and the readers
take what they decide about a kind from its record, so a new kind is a record (plus the code that emits it)."""
from __future__ import annotations

from dataclasses import replace
from typing import get_args

from matplotlib.collections import PolyCollection

from accelsim.schedule.kinds import TASK_KINDS, TaskKind
from accelsim.sim.trace import Result, Span
from accelsim.viz.timeline import plot_timeline


def test_every_kind_a_schedule_may_name_has_one_record_under_its_name():
    assert set(TASK_KINDS) == set(get_args(TaskKind))
    assert all(k.name == name for name, k in TASK_KINDS.items())


def _span(task: int, kind: str, resource: str, start: int) -> Span:
    return Span(task=task, kind=kind, node=task, op=kind, phase="forward", microbatch=0, replica=0, stage=0, chip=0,
                resource=resource, instance=0, ready=start, start=start, end=start + 50, planned_start=start)


def test_a_new_communication_kind_is_drawn_hatched_and_named_by_its_record(monkeypatch):
    broadcast = replace(TASK_KINDS["all_gather"], name="broadcast", label="broadcast (one to all)")
    monkeypatch.setitem(TASK_KINDS, "broadcast", broadcast)
    spans = (_span(0, "node", "mxm", 0), _span(1, "broadcast", "allreduce", 60))
    result = Result(mode="static", graph_name="toy", hw_name="toy_hw", clock_hz=1e9, samples_per_step=1, spans=spans,
                    makespan_cycles=110, compiled_makespan_cycles=110, memories=(), channels=(),
                    unit_instances={"mxm": 1}, events=6)
    ax = next(a for a in plot_timeline(result).axes if a.collections)
    assert "broadcast (one to all)" in [t.get_text() for t in ax.get_legend().get_texts()]
    hatches = {c.get_gid().split()[-1]: c.get_hatch() for c in ax.collections
               if isinstance(c, PolyCollection) and (c.get_gid() or "").startswith("spans")}
    assert set(hatches) == {"unit", "broadcast"} and hatches["broadcast"] and hatches["broadcast"] != hatches["unit"]
