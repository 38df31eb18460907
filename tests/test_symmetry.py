"""Replica symmetry (compiler/timing/symmetry.py): data-parallel replicas timed as one and stamped. The stamped
step must be a valid schedule of the whole plan (compile validates it), every replica must run at replica
0's times, and it must be no worse than timing the whole plan; where replicas are not exact copies the
reduction must refuse, and a stamped step whose links collide must fall back to the whole plan."""
from __future__ import annotations

import pytest

import accelsim as A
from accelsim.compiler.timing import search
from accelsim.compiler.timing import symmetry
from accelsim.compiler.planning.expand import expand
from accelsim.compiler.timing.improve import improve, makespan_of
from accelsim.schedule.options import StepOptions


def _gpt2(t: int = 1) -> A.Graph:
    return A.training_graph(A.models.build("gpt2", layers=1, seq=32, d_model=32, heads=4, vocab=64, tensor_parallel=t),
                            optimizer="adam")


@pytest.fixture(scope="module")
def superres() -> A.Graph:
    return A.training_graph(A.models.build("superres", batch=2))


def _by_replica(sched: A.Schedule) -> dict[int, list[tuple]]:
    """Each replica's tasks as (kind, node, microbatch, chip offset within the replica, start, end), in order."""
    span = sched.options.pipeline_stages * sched.options.tensor_parallel
    rows: dict[int, list[tuple]] = {}
    for t in sched.tasks:
        r = t.chip // span
        rows.setdefault(r, []).append((t.kind, t.node, t.microbatch, t.chip - r * span, t.out_chip - r * span,
                                       t.resource, t.instance, t.start, t.end))
    return {r: sorted(v) for r, v in rows.items()}


@pytest.mark.parametrize("hw, d, p, m", [("groq_like_x4", 2, 1, 2), ("groq_like_x4", 2, 2, 2), ("a100_x8", 4, 2, 2)])
def test_every_replica_runs_at_replica_zeros_times(superres, hw, d, p, m):
    sched = A.compile(superres, hw, data_parallel=d, pipeline_stages=p, microbatches=m)  # validated
    rows = _by_replica(sched)
    assert sorted(rows) == list(range(d))
    for r in range(1, d):
        assert rows[r] == rows[0]
    A.simulate(sched, graph=superres)  # the replay agrees with the stamped timeline


def test_tensor_parallel_replicas_are_stamped_and_no_worse_than_the_whole_plan(monkeypatch):
    g = _gpt2(t=2)
    hw = A.load_hw("a100_x8")
    options = StepOptions(microbatches=2, data_parallel=2, tensor_parallel=2)
    plan = expand(g, hw, options)
    rep = symmetry.reduce(plan)
    assert rep is not None and rep.count == 4  # (replica, rank) copies: the ranks are copies of rank 0 too
    assert len(rep.reduced.tasks) * 4 == len(plan.tasks)
    stamped = search.time_plan(plan, hw)
    whole = improve(plan, hw)
    assert makespan_of(stamped[0]) <= makespan_of(whole[0])
    for row in rep.twins:  # every copy of a task at one time
        assert len({(stamped[0][i].start, stamped[0][i].end) for i in row}) == 1
    sched = A.compile(g, hw, data_parallel=2, microbatches=2)
    rows = _by_replica(sched)
    assert rows[1] == rows[0]


def test_all_reduce_members_keep_their_own_bytes():
    """A tree all-reduce's members send different bytes in the same time: stamped, each keeps its own."""
    g = _gpt2()
    sched = A.compile(g, "a100_x8", data_parallel=8, microbatches=1)
    members = [t for t in sched.tasks if t.kind == "allreduce"]
    assert members
    by_group: dict[int, set[tuple[int, int]]] = {}
    for t in members:
        by_group.setdefault(t.group, set()).add((t.start, t.end))
    assert all(len(times) == 1 for times in by_group.values())  # members start and end together
    sent = {t.bytes_moved for t in members}
    assert len(sent) > 1  # a tree: the root's and the leaves' bytes differ


def test_ranks_are_copies_of_rank_zero_only_when_built_the_same_way():
    from accelsim.compiler.planning.rank_twins import rank_twins
    g = _gpt2(t=2)
    twins = rank_twins(g)
    ranked = [n for n in g.nodes if n.rank >= 0]
    assert len(twins) == 2 and sum(map(len, twins)) == len(ranked)
    for k, m in enumerate(twins):
        for node, zero in m.items():
            a, b = g.nodes[node], g.nodes[zero]
            assert a.rank == k and b.rank == 0 and (a.op, a.shape, a.phase) == (b.op, b.shape, b.phase)
    assert rank_twins(_gpt2()) == ()  # no ranks
    lopsided = A.Graph("lopsided")
    x = lopsided.input("x", (2, 4))
    with lopsided.rank(0):
        a = A.ops.relu(x)
    with lopsided.rank(1):
        b = A.ops.tanh(x)  # rank 1 computes something else
    lopsided.set_loss(A.ops.sum(a + b))
    assert rank_twins(lopsided) == ()


def test_zero_replicas_are_not_reduced():
    g = _gpt2()
    hw = A.load_hw("a100_x8")
    plan = expand(g, hw, StepOptions(microbatches=1, data_parallel=2, zero=1))
    assert symmetry.reduce(plan) is None


def test_replicas_sharing_chips_are_not_reduced(superres):
    hw = A.load_hw("groq_like")  # one chip: replicas share its units
    plan = expand(superres, hw, StepOptions(microbatches=1, data_parallel=2))
    assert symmetry.reduce(plan) is None


def test_one_replica_is_not_reduced(superres):
    plan = expand(superres, A.load_hw("groq_like_x4"), StepOptions(microbatches=2, data_parallel=1))
    assert symmetry.reduce(plan) is None


def test_other_chip_kinds_per_replica_are_not_reduced(superres):
    hw = A.load_hw("groq_like_x4")
    chip = hw.chips[0]
    other = chip.model_copy(update={"name": chip.name + "_b", "count": 1})
    two_kinds = hw.model_copy(update={"chips": [chip.model_copy(update={"count": 1}), other]})  # replica r on kind r
    plan = expand(superres, two_kinds, StepOptions(microbatches=1, data_parallel=2))
    assert symmetry.reduce(plan) is None


def test_colliding_links_fall_back_to_the_whole_plan(superres, monkeypatch):
    hw = A.load_hw("groq_like_x4")
    plan = expand(superres, hw, StepOptions(microbatches=2, data_parallel=2))
    assert symmetry.reduce(plan) is not None
    monkeypatch.setattr(search, "stamp", lambda *a: None)  # as if the stamped links collided
    fallback = search.time_plan(plan, hw)
    assert [(x.start, x.end) for x in fallback[0]] == [(x.start, x.end) for x in improve(plan, hw)[0]]


def test_links_free_finds_an_overlap():
    """The stamped step's link check: two transfers holding one link at once are refused."""
    hw = A.load_hw("groq_like_x4")
    g = A.training_graph(A.models.build("superres", batch=2))
    plan = expand(g, hw, StepOptions(microbatches=2, pipeline_stages=2))  # one forward transfer per micro-batch
    transfers = [t for t in plan.tasks if t.kind == "transfer"]
    assert len(transfers) >= 2
    same_route = [t for t in transfers if (t.chip, t.out_chip) == (transfers[0].chip, transfers[0].out_chip)]
    assert len(same_route) >= 2
    timed = [symmetry.Timed("r", 0, 10 * i, 10 * i + 5) for i in range(len(plan.tasks))]
    assert symmetry._links_free(plan, hw, timed)
    a, b = same_route[:2]
    timed[b.id] = symmetry.Timed("link", 0, timed[a.id].start + 1, timed[a.id].end + 1)
    assert not symmetry._links_free(plan, hw, timed)


def test_compile_and_simulate_pause_the_collector_and_restore_it():
    """accelsim.gc_pause: the collector is off inside compile and back as it was after, also after an error
    and when the caller had it off."""
    import gc

    from accelsim.gc_pause import paused_gc

    seen = []
    with paused_gc():
        seen.append(gc.isenabled())
        with paused_gc():
            seen.append(gc.isenabled())
        seen.append(gc.isenabled())
    assert seen == [False, False, False] and gc.isenabled()
    with pytest.raises(A.AccelsimError):
        A.compile(_gpt2(), "a100_x8", microbatches=0)
    assert gc.isenabled()
    gc.disable()
    try:
        A.compile(_gpt2(), "a100_x8")
        assert not gc.isenabled()  # a caller's choice is left alone
    finally:
        gc.enable()
