"""schedule_dag: the list scheduler on abstract DAGs (problem dict -> schedule dict), its priority rules
and the search (improve.py) it shares with compile."""
import importlib.util
import json
from collections import defaultdict
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import accelsim as A
from accelsim.errors import MemoryFitError, ScheduleError
from accelsim.schedule import improve, schedule_dag
from accelsim.schedule.priorities import PRIORITIES


def problem(units, tasks, deps=(), microbatches=None):
    return {"units": units, "tasks": [{"id": i, "kind": k, "duration": d}
                                      | ({"microbatch": microbatches[j]} if microbatches and microbatches[j] >= 0
                                         else {})
                                      for j, (i, k, d) in enumerate(tasks)],
            "deps": [list(d) for d in deps]}


def test_two_tasks_share_one_unit_or_run_side_by_side_on_two():
    tasks = [("a", "u", 5), ("b", "u", 5)]
    assert schedule_dag(problem({"u": 1}, tasks))["makespan"] == 10
    two = schedule_dag(problem({"u": 2}, tasks))
    assert two["makespan"] == 5
    assert {t["instance"] for t in two["tasks"].values()} == {0, 1}


def test_a_dependency_delay_separates_end_and_start():
    out = schedule_dag(problem({"u": 1, "v": 1}, [("a", "u", 4), ("b", "v", 3)], [("a", "b", 6)]))
    assert out["tasks"]["b"]["start"] == 4 + 6 and out["makespan"] == 13


def test_the_rank_rule_is_plain_heft_and_none_keeps_the_best_rule():
    p = problem({"mxu": 1, "vpu": 2}, [("a", "mxu", 5), ("b", "mxu", 5), ("c", "vpu", 3), ("d", "vpu", 3)],
                [("a", "c", 2), ("b", "d")])
    best = schedule_dag(p)["makespan"]
    assert best == 13  # a, b back to back on mxu; c waits 2 after a; d after b
    assert best <= min(schedule_dag(p, rule)["makespan"] for rule in PRIORITIES)


def test_rank_without_own_cost_runs_the_short_task_that_feeds_more_work_first():
    """The issue's case: `long` (10 cycles, feeds nothing) outranks `short` (2 cycles, feeds an 8-cycle
    update on another unit) by upward rank, so the update waits; without its own cost `short` goes first."""
    p = problem({"u": 1, "v": 1}, [("long", "u", 10), ("short", "u", 2), ("upd", "v", 8)], [("short", "upd")])
    assert schedule_dag(p, "rank")["makespan"] == 10 + 2 + 8
    assert schedule_dag(p, "tail")["makespan"] == schedule_dag(p)["makespan"] == 12


def test_staggered_micro_batches_do_not_queue_on_the_shared_unit_together():
    """Two micro-batches of a (mxu 10, vpu 10) chain and a per-micro-batch mxu gradient of 10: under the
    rank both forwards run first and the vpu waits; staggered, micro-batch 1 follows micro-batch 0."""
    tasks = [(f"{n}{m}", k, 10) for m in range(2) for n, k in (("f", "mxu"), ("g", "vpu"), ("w", "mxu"))]
    deps = [(f"f{m}", f"g{m}") for m in range(2)] + [(f"g{m}", f"w{m}") for m in range(2)]
    labels = [m for m in range(2) for _ in range(3)]
    p = problem({"mxu": 1, "vpu": 1}, tasks, deps, labels)
    assert schedule_dag(p, "stagger")["makespan"] <= schedule_dag(p, "rank")["makespan"]
    assert schedule_dag(p)["makespan"] == 40  # the mxu's work: f0 f1 w0 w1 back to back


def test_an_unknown_rule_is_refused_naming_the_rules():
    p = problem({"u": 1}, [("a", "u", 1)])
    with pytest.raises(ScheduleError, match="stagger"):
        schedule_dag(p, "fastest")


@pytest.mark.parametrize("bad, words", [
    (None, "dict"),
    ({"units": {}, "tasks": []}, "units"),
    ({"units": {"u": 0}, "tasks": [{"id": "a", "kind": "u", "duration": 1}]}, "units['u']"),
    ({"units": {"u": True}, "tasks": [{"id": "a", "kind": "u", "duration": 1}]}, "units['u']"),
    ({"units": {"u": 1}, "tasks": []}, "tasks"),
    ({"units": {"u": 1}, "tasks": [{"id": "a", "kind": "w", "duration": 1}]}, "kind 'w'"),
    ({"units": {"u": 1}, "tasks": [{"id": "a", "kind": "u", "duration": 0}]}, "duration"),
    ({"units": {"u": 1}, "tasks": [{"id": "a", "kind": "u", "duration": 2.5}]}, "duration"),
    ({"units": {"u": 1}, "tasks": [{"id": "a", "kind": "u", "duration": float("nan")}]}, "duration"),
    ({"units": {"u": 1}, "tasks": [{"id": "a", "kind": "u", "duration": 10**30}]}, "duration"),
    ({"units": {"u": 1}, "tasks": [{"id": "a", "kind": "u", "duration": 1}] * 2}, "used twice"),
    ({"units": {"u": 1}, "tasks": [{"id": "a", "kind": "u"}]}, "tasks[0]"),
    ({"units": {"u": 1}, "tasks": [{"id": 3, "kind": "u", "duration": 1}]}, "tasks[0].id"),
    ({"units": {"u": 1}, "tasks": [{"id": "a", "kind": "u", "duration": 1}], "deps": [["a", "a"]]}, "itself"),
    ({"units": {"u": 1}, "tasks": [{"id": "a", "kind": "u", "duration": 1}], "deps": [["a", "zz"]]}, "'zz'"),
    ({"units": {"u": 1}, "tasks": [{"id": "a", "kind": "u", "duration": 1}], "deps": [["a"]]}, "deps[0]"),
    ({"units": {"u": 1}, "tasks": [{"id": "a", "kind": "u", "duration": 1}, {"id": "b", "kind": "u", "duration": 1}],
      "deps": [["a", "b", -1]]}, "delay"),
    ({"units": {"u": 1}, "tasks": [{"id": "a", "kind": "u", "duration": 1}, {"id": "b", "kind": "u", "duration": 1}],
      "deps": [["a", "b"], ["b", "a"]]}, "cycle"),
    ({"units": {"u": 1}, "tasks": [{"id": "a", "kind": "u", "duration": 1}], "extra": 1}, "unknown key"),
    ({"units": {"u": 1}, "tasks": [{"id": "a", "kind": "u", "duration": 1, "microbatch": -1}]}, "microbatch"),
    ({"units": {"u": 1}, "tasks": [{"id": "a", "kind": "u", "duration": 1, "microbatch": 1.5}]}, "microbatch"),
    ({"units": {"u": 1}, "tasks": [{"id": "a", "kind": "u", "duration": 1, "stage": 0}]}, "tasks[0]"),
    ({"units": {f"k{i}": 1 for i in range(300)}, "tasks": [{"id": "a", "kind": "k0", "duration": 1}]}, "unit kinds"),
    ({"units": {f"k{i}": 4096 for i in range(5)}, "tasks": [{"id": "a", "kind": "k0", "duration": 1}]}, "instances"),
    ({"units": {"u": 1}, "tasks": [{"id": "a", "kind": "u", "duration": 1}]}, None),
])
def test_a_malformed_problem_is_refused_naming_the_key(bad, words):
    if words is None:
        assert schedule_dag(bad)["makespan"] == 1
        return
    with pytest.raises(ScheduleError) as e:
        schedule_dag(bad)
    assert words in str(e.value)


@st.composite
def dags(draw):
    kinds = draw(st.lists(st.sampled_from(["mxu", "vpu", "dma"]), min_size=1, max_size=3, unique=True))
    units = {k: draw(st.integers(1, 3)) for k in kinds}
    n = draw(st.integers(1, 14))
    tasks = [(f"t{i}", draw(st.sampled_from(kinds)), draw(st.integers(1, 30))) for i in range(n)]
    deps = [(f"t{a}", f"t{b}", draw(st.integers(0, 5)))
            for b in range(n) for a in range(b) if draw(st.integers(0, 3)) == 0]
    return problem(units, tasks, deps)


def lower_bound(p) -> int:
    """Critical path with delays, and each kind's work over its instances (rounded up)."""
    dur = {t["id"]: t["duration"] for t in p["tasks"]}
    finish = {}
    for t in p["tasks"]:  # ids are generated in a topological order
        ready = max((finish[a] + w for a, b, w in p["deps"] if b == t["id"]), default=0)
        finish[t["id"]] = ready + dur[t["id"]]
    work = defaultdict(int)
    for t in p["tasks"]:
        work[t["kind"]] += t["duration"]
    return max(max(finish.values()), *(-(-w // p["units"][k]) for k, w in work.items()))


@settings(max_examples=60, deadline=None)
@given(p=dags())
def test_random_dags_get_valid_deterministic_schedules_no_shorter_than_the_bound(p):
    out = schedule_dag(p)
    dur = {t["id"]: t["duration"] for t in p["tasks"]}
    kind = {t["id"]: t["kind"] for t in p["tasks"]}
    s = out["tasks"]
    for a, b, w in p["deps"]:
        assert s[b]["start"] >= s[a]["start"] + dur[a] + w
    busy = defaultdict(list)
    for i, x in s.items():
        assert x["unit"] == kind[i] and 0 <= x["instance"] < p["units"][kind[i]]
        busy[(x["unit"], x["instance"])].append((x["start"], x["start"] + dur[i]))
    for intervals in busy.values():
        intervals.sort()
        assert all(e <= s2 for (_, e), (s2, _) in zip(intervals, intervals[1:]))
    assert out["makespan"] == max(x["start"] + dur[i] for i, x in s.items()) >= lower_bound(p)
    assert json.dumps(schedule_dag(p), sort_keys=True) == json.dumps(out, sort_keys=True)
