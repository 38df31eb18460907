"""schedule_dag: the list scheduler on abstract DAGs (problem dict -> schedule dict)."""
import json
from collections import defaultdict

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from accelsim.errors import ScheduleError
from accelsim.schedule import schedule_dag


def problem(units, tasks, deps=()):
    return {"units": units, "tasks": [{"id": i, "kind": k, "duration": d} for i, k, d in tasks],
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
    assert best <= min(schedule_dag(p, rule)["makespan"] for rule in ("rank", "microbatch"))


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
