"""A fused step with staged weights on Stream's chip, compiled, replayed (static) and run by the work queue
(dynamic): the three agree task by task wherever the work queue has no choice to make, so the scheduler and both
simulators model the staged copies alike (their durations, DRAM port, memory); on the chip's one SIMD core the
work queue's first-come order is its own (sim/dynamic.py), and only the order differs."""
import accelsim as A
from accelsim.compiler.fusion import step_graph
from accelsim.fusion_groups import fusion_groups

from test_fused_placement import HW_FILE, _conv_chain  # Stream's chip and its conv -> relu -> conv -> relu chain

TILES = 4
SIMD_CORES = {"chips.0.units.2.count": 16}  # a SIMD core for every data-movement task ready at once


def _runs(overrides: dict) -> tuple[A.Schedule, A.Result, A.Result, frozenset[int]]:
    """The schedule, its static and dynamic results, and the nodes of the staged weight copies."""
    hw = A.load_hw(HW_FILE, overrides)
    g = _conv_chain()
    s = A.compile(g, hw, fusion=TILES, effort="fast")
    fused = step_graph(g, s)[0]
    (group,) = fusion_groups(fused)
    assert len(group.staged) == 2  # both weights staged
    static, dynamic = (A.simulate(s, hw, graph=fused, mode=mode) for mode in ("static", "dynamic"))  # validated
    return s, static, dynamic, frozenset(group.staged)


def _timeline(result: A.Result) -> list[tuple[int, int]]:
    by_task = {span.task: span for span in result.spans}
    return [(by_task[t].start, by_task[t].end) for t in sorted(by_task)]


def test_with_a_free_simd_core_for_every_ready_task_compiled_static_and_dynamic_agree_task_by_task():
    s, static, dynamic, staged = _runs(SIMD_CORES)
    compiled = [(t.start, t.end) for t in s.tasks]
    assert _timeline(static) == compiled and _timeline(dynamic) == compiled
    assert s.makespan_cycles == static.makespan_cycles == dynamic.makespan_cycles
    assert dynamic.summary()["port_bytes"] == static.summary()["port_bytes"]
    # each staged copy takes the whole DRAM port (a weight's bytes at 8 B per cycle), so the second waits for the
    # first though SIMD cores are free: both simulators meter that port as the scheduler booked it
    first, second = sorted((t for t in s.tasks if t.node in staged), key=lambda t: t.start)
    assert second.start >= first.end


def test_on_one_simd_core_the_work_queue_runs_every_task_for_its_compiled_time_in_its_own_order():
    """The 2,382 against 2,118 cycles of issue 31: the same tasks for the same cycles on the same units; the work
    queue takes the second weight's copy (288 cycles of DRAM reads on the one SIMD core) before a tile's padded
    input, which the compiled schedule's priorities put first."""
    s, static, dynamic, _ = _runs({})
    assert _timeline(static) == [(t.start, t.end) for t in s.tasks] and static.makespan_cycles == s.makespan_cycles
    assert [e - b for b, e in _timeline(dynamic)] == [t.end - t.start for t in s.tasks]
    assert [sp.resource for sp in sorted(dynamic.spans, key=lambda sp: sp.task)] == \
        [sp.resource for sp in sorted(static.spans, key=lambda sp: sp.task)]
    assert dynamic.summary()["port_bytes"] == static.summary()["port_bytes"]
    order = {mode: [sp.task for sp in sorted(r.spans, key=lambda sp: (sp.start, sp.task)) if sp.resource == "simd"]
             for mode, r in (("static", static), ("dynamic", dynamic))}
    assert order["static"] != order["dynamic"] and sorted(order["static"]) == sorted(order["dynamic"])
