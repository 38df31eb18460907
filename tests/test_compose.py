"""Composing a step from stage-level work (compiler/hierarchy/compose.py): bubbles against the papers' closed
forms, transfers and gradient buckets that lengthen the step exactly by their cost when exposed and not at all
when hidden, links that queue, stash bytes, determinism and refusals of bad work."""
from __future__ import annotations

import dataclasses

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from accelsim.compiler.hierarchy.compose import SPAN_KINDS, compose
from accelsim.compiler.hierarchy.links import Hold, LinkBook, collective_hold
from accelsim.compiler.hierarchy.schedules import PIPELINE_SCHEDULES, Item, PipelineSchedule
from accelsim.compiler.hierarchy.work import ChunkWork, StageWork, StepWork
from accelsim.errors import ScheduleError
from accelsim.hw.load import load_hw
from accelsim.hw.topology import Link, topology_of
from accelsim.schedule.collectives import collective_cost


@pytest.fixture(scope="module")
def hw8():
    return load_hw("a100_x8")


def step(p: int, M: int, *, v: int = 1, f: int | list[int] = 10, b: int | list[int] = 20, w: int = 0,
         act: int = 0, stash: int = 7, d: int = 1, t: int = 1, grad: int | list[int] = 0,
         update: int = 0, params: int = 0) -> StepWork:
    """p stages of v chunks; per-chunk cycles f, b (the whole backward, w of it weight gradients); stage s on
    chips s*t .. s*t + t - 1."""
    fs = f if isinstance(f, list) else [f] * (p * v)
    bs = b if isinstance(b, list) else [b] * (p * v)
    grads = grad if isinstance(grad, list) else [grad] * p
    stages = tuple(StageWork(s, tuple(range(s * t, s * t + t)), update, grads[s], params, 0) for s in range(p))
    chunks = tuple(ChunkWork(c, fs[c], bs[c], w, 0, act, stash) for c in range(p * v))
    return StepWork(stages, chunks, M, d, t, v)


def spans_of(comp, kind: str, **match):
    return [s for s in comp.spans if s.kind == kind and all(getattr(s, k) == x for k, x in match.items())]


# --- bubbles against the closed forms, equal chunks, free transfers -------------------------------------------

@pytest.mark.parametrize("name", ["gpipe", "1f1b"])
@pytest.mark.parametrize("p,M", [(1, 3), (2, 1), (4, 4), (4, 8), (8, 3), (8, 32)])
def test_gpipe_and_1f1b_bubble_is_p_minus_1_over_M_plus_p_minus_1(name, p, M, hw8):
    # F = 10, B = 2F: the step is (M + p - 1)(F + B) and the bubble (p - 1)/(M + p - 1) of it
    comp = compose(step(p, M), name, hw8)
    assert comp.makespan_cycles == (M + p - 1) * 30
    assert comp.bubble_fraction == pytest.approx((p - 1) / (M + p - 1))
    assert comp.exposed_cycles == {"transfer": 0, "allreduce": 0, "reduce_scatter": 0, "all_gather": 0}


@pytest.mark.parametrize("p,v,M", [(2, 2, 2), (4, 2, 4), (4, 2, 8), (4, 3, 8), (8, 2, 16), (3, 4, 6)])
def test_interleaved_bubble_is_p_minus_1_over_vM_plus_p_minus_1(p, v, M, hw8):
    # Narayanan et al. SC21 sec. 2.2.2: a stage's F and B split into v chunks of F/v, B/v shrink the bubble
    # to (p - 1)(F + B)/v: the step is M(F + B) + (p - 1)(F + B)/v, the bubble (p - 1)/(vM + p - 1)
    f, b = 10, 20  # per chunk
    comp = compose(step(p, M, v=v, f=f, b=b), "interleaved", hw8)
    assert comp.makespan_cycles == M * v * (f + b) + (p - 1) * (f + b)
    assert comp.bubble_fraction == pytest.approx((p - 1) / (v * M + p - 1))


@pytest.mark.parametrize("f,bi,w", [(10, 10, 10), (10, 20, 10), (20, 30, 10), (10, 10, 0)])
@pytest.mark.parametrize("p,M", [(2, 2), (4, 8), (6, 13)])
def test_zb_h1_bubble_is_p_minus_1_times_f_plus_b_minus_w(f, bi, w, p, M, hw8):
    # Qi et al. ICLR 2024 sec. 3.1: ZB-H1's bubble is (p - 1)(F + B - W) with B the input gradient only;
    # with F = B = W that is a third of 1F1B's (p - 1)(F + B + W)
    comp = compose(step(p, M, f=f, b=bi + w, w=w), "zb-h1", hw8)
    bubble = (p - 1) * (f + bi - w)
    assert comp.makespan_cycles == M * (f + bi + w) + bubble
    assert comp.bubble_fraction == pytest.approx(bubble / (M * (f + bi + w) + bubble))


def test_zb_h1_bubble_is_a_third_of_1f1b_with_equal_passes(hw8):
    # the paper's 1F1B runs each backward as one block, its input gradient sent at the end: w=0 (a chunk whose
    # weight-gradient part is known sends its input gradient before that part, as the next test shows)
    p, M = 8, 64
    zb = compose(step(p, M, f=10, b=20, w=10), "zb-h1", hw8)
    base = compose(step(p, M, f=10, b=20, w=0), "1f1b", hw8)
    idle = [c.makespan_cycles - M * 30 for c in (zb, base)]
    assert idle[0] * 3 == idle[1]


@pytest.mark.parametrize("name", ["gpipe", "1f1b"])
def test_a_whole_backward_sends_its_input_gradient_before_its_weight_gradients(name, hw8):
    """p=2, M=1, F=10, B=20 of which W=8: stage 1 runs F 10-20 and B 20-40, its input gradient computed at
    cycle 32 (before its W part); stage 0 runs B 32-52. Without a W part the gradient leaves at 40."""
    split = compose(step(2, 1, w=8), name, hw8)
    assert [(s.stage, s.start, s.end) for s in spans_of(split, "backward")] == [(1, 20, 40), (0, 32, 52)]
    assert split.makespan_cycles == 52
    assert compose(step(2, 1, w=0), name, hw8).makespan_cycles == 60


# --- validity of the composed timeline ---------------------------------------------------------------------------

@pytest.mark.parametrize("name,v", [("gpipe", 1), ("1f1b", 1), ("interleaved", 2), ("zb-h1", 1)])
def test_every_item_runs_once_after_its_inputs_and_never_two_at_once_on_a_chip(name, v, hw8):
    p, M = 4, 8
    comp = compose(step(p, M, v=v, f=[10, 30, 20, 5, 15, 10, 25, 5][: p * v], b=40, w=10 if name == "zb-h1" else 0,
                        act=10**6), name, hw8)
    assert_valid_timeline(comp, p, v, M, split=name == "zb-h1", transfers=True)


@settings(max_examples=40)
@given(name=st.sampled_from(["gpipe", "1f1b", "interleaved", "zb-h1"]), p=st.integers(1, 4),
       groups=st.integers(1, 3), data=st.data())
def test_any_work_composes_to_a_valid_timeline_no_shorter_than_its_busiest_chip(name, p, groups, data, hw8):
    v = data.draw(st.integers(2, 3)) if name == "interleaved" else 1
    M = p * groups if name == "interleaved" else data.draw(st.integers(1, 7))
    cycles = st.integers(1, 60)
    f = data.draw(st.lists(cycles, min_size=p * v, max_size=p * v))
    b = data.draw(st.lists(st.integers(2, 60), min_size=p * v, max_size=p * v))
    act = data.draw(st.sampled_from([0, 10**4, 10**6]))
    work = step(p, M, v=v, f=f, b=b, w=1, act=act, d=2, grad=data.draw(st.integers(0, 2**24)),
                update=data.draw(st.integers(0, 50)))
    comp = compose(work, name, hw8, bucket_bytes=2**22)
    assert_valid_timeline(comp, p, v, M, split=name == "zb-h1", transfers=act > 0, w=1)
    assert comp.makespan_cycles >= max(comp.busy_cycles)
    assert sum(comp.exposed_cycles.values()) <= comp.makespan_cycles


def assert_valid_timeline(comp, p: int, v: int, M: int, split: bool, transfers: bool, w: int = 0) -> None:
    """Every item once, on its chunk's chip, after its inputs (strictly after them where a transfer sits in
    between; a whole backward's input gradient is computed w cycles before it ends, before its weight
    gradients); a chip runs one thing at a time; spans sorted and of known kinds."""
    work_kinds = ("forward", "backward", "weight_grad")
    items = {(s.kind, s.microbatch, s.chunk): s for s in comp.spans if s.kind in work_kinds}
    assert len(items) == len([s for s in comp.spans if s.kind in work_kinds]) == (3 if split else 2) * p * v * M
    last = p * v - 1

    def after(a, b):  # b starts after a's output, later by a transfer where the two are on two chips
        ready = a.end - (w if a.kind == "backward" and not split else 0)
        return ready < b.start if transfers and a.stage != b.stage else ready <= b.start

    for (kind, m, c), span in items.items():
        assert span.stage == c % p
        if kind == "forward" and c > 0:
            assert after(items[("forward", m, c - 1)], span)
        if kind == "backward":
            assert after(items[("forward", m, c)], span)
            if c < last:
                assert after(items[("backward", m, c + 1)], span)
        if kind == "weight_grad":
            assert after(items[("backward", m, c)], span)
    for s in range(p):
        on_chip = sorted((x.start, x.end) for x in comp.spans if x.stage == s and x.kind in work_kinds + ("update",))
        assert all(a[1] <= b[0] for a, b in zip(on_chip, on_chip[1:]))
    assert {s.kind for s in comp.spans} <= set(SPAN_KINDS)
    assert list(comp.spans) == sorted(comp.spans, key=lambda s: (s.start, s.stage, s.kind, s.chunk, s.microbatch,
                                                                  s.end))


def test_the_same_work_composes_to_the_same_step(hw8):
    work = step(4, 8, v=2, act=3 * 10**6, d=2, grad=60 * 2**20, update=50)
    assert compose(work, "interleaved", hw8) == compose(work, "interleaved", hw8)


# --- transfers ---------------------------------------------------------------------------------------------------

def test_exposed_transfers_lengthen_the_step_by_exactly_their_cost(hw8):
    # p = 2, M = 1: F0, send, F1, B1, send back, B0: both transfers are on the critical path
    nbytes = 10**6
    cost = topology_of(hw8).route(0, 1).cycles(nbytes)
    assert cost == topology_of(hw8).route(1, 0).cycles(nbytes)
    free = compose(step(2, 1), "1f1b", hw8)
    paid = compose(step(2, 1, act=nbytes), "1f1b", hw8)
    assert paid.makespan_cycles == free.makespan_cycles + 2 * cost
    assert paid.exposed_cycles == {"transfer": 2 * cost, "allreduce": 0, "reduce_scatter": 0, "all_gather": 0}
    assert [(s.start, s.end) for s in spans_of(paid, "transfer")] == [(10, 10 + cost), (40 + cost, 40 + 2 * cost)]


def test_a_backward_transfer_carries_the_gradient_bytes_its_chunk_measured(hw8):
    # gpt2's logit gradients are far larger than its activations: the send back costs what its own bytes cost
    act, grad = 10**6, 64 * 10**6
    route = topology_of(hw8).route(1, 0)
    work = step(2, 1, act=act)
    work = dataclasses.replace(work, chunks=(work.chunks[0], dataclasses.replace(work.chunks[1], backward_bytes=grad)))
    comp = compose(work, "1f1b", hw8)
    forward, backward = sorted(spans_of(comp, "transfer"), key=lambda s: s.start)
    assert forward.end - forward.start == topology_of(hw8).route(0, 1).cycles(act)
    assert backward.end - backward.start == route.cycles(grad) > route.cycles(act)
    unmeasured = compose(step(2, 1, act=act), "1f1b", hw8)  # backward_bytes -1: the boundary's activation
    back = max(spans_of(unmeasured, "transfer"), key=lambda s: s.start)
    assert back.end - back.start == route.cycles(act)


def test_transfers_hidden_behind_a_slower_stage_cost_nothing(hw8):
    # stage 1 takes 100,000 cycles a forward: the second micro-batch's activation arrives while it works on the
    # first, and the first gradient while stage 0 waits in its bubble anyway; only the first and last
    # transfers lengthen the step
    nbytes = 10**6
    cost = topology_of(hw8).route(0, 1).cycles(nbytes)
    assert 2 * cost < 100_000
    work = dict(f=[10, 100_000], b=[20, 200_000])
    free = compose(step(2, 2, **work), "gpipe", hw8)
    paid = compose(step(2, 2, act=nbytes, **work), "gpipe", hw8)
    assert len(spans_of(paid, "transfer")) == 4
    assert paid.makespan_cycles == free.makespan_cycles + 2 * cost
    assert paid.exposed_cycles["transfer"] == 2 * cost


def test_two_transfers_on_one_link_queue(hw8):
    # stage 0 sends micro-batch 1's activation 10 cycles after micro-batch 0's, over the same link: it waits
    # until the first is through, and stage 1's second forward waits for it
    nbytes = 10**6
    cost = topology_of(hw8).route(0, 1).cycles(nbytes)
    comp = compose(step(2, 2, f=[10, 1], b=[20, 2], act=nbytes), "gpipe", hw8)
    first, second = spans_of(comp, "transfer", stage=0)
    assert (first.start, first.end) == (10, 10 + cost)
    assert (second.start, second.end) == (10 + cost, 10 + 2 * cost)
    assert spans_of(comp, "forward", stage=1, microbatch=1)[0].start == 10 + 2 * cost


def test_transfers_of_several_ranks_sharing_a_nic_add_up_on_it():
    # per-node NICs: the t = 2 ranks of stage 0 (node 0) send to stage 1 (node 1) through one NIC each way
    hw = load_hw("a100_x64", {"interconnect.scale_out.nics": "per_node", "interconnect.scale_out.chips_per_node": 2})
    topo = topology_of(hw)
    nbytes = 10**7
    one = topo.route(0, 2).cycles(nbytes)
    both = topo.route(0, 2).cycles(2 * nbytes)
    comp = compose(step(2, 1, t=2, act=nbytes), "1f1b", hw)
    assert [s.end - s.start for s in spans_of(comp, "transfer")] == [both, both]
    assert both > one


# --- data-parallel gradient buckets ------------------------------------------------------------------------------

def test_one_exposed_bucket_lengthens_the_step_by_its_all_reduce(hw8):
    # p = 1, d = 2: the bucket is complete when the last backward ends; then its all-reduce, then the update
    grad = 10 * 2**20
    ar = collective_cost(topology_of(hw8), "allreduce", (0, 1), grad).cycles
    comp = compose(step(1, 2, d=2, grad=grad, update=5), "1f1b", hw8)
    assert comp.makespan_cycles == 2 * 30 + ar + 5
    assert comp.exposed_cycles == {"transfer": 0, "allreduce": ar, "reduce_scatter": 0, "all_gather": 0}
    (bucket,) = spans_of(comp, "allreduce")
    assert (bucket.start, bucket.end, bucket.stage, bucket.microbatch) == (60, 60 + ar, 0, -1)


def test_buckets_start_as_the_backward_pass_completes_them(hw8):
    # two buckets: the first is complete halfway through the last backward and is reduced under its second
    # half; only the second bucket's all-reduce is exposed
    grad, b = 20 * 2**20, 10**6
    ar = collective_cost(topology_of(hw8), "allreduce", (0, 1), grad // 2).cycles
    assert ar < b // 2
    comp = compose(step(1, 1, b=b, d=2, grad=grad), "1f1b", hw8, bucket_bytes=grad // 2)
    first, second = spans_of(comp, "allreduce")
    assert first.start == 10 + b // 2 and second.start == 10 + b
    assert comp.makespan_cycles == 10 + b + ar
    assert comp.exposed_cycles["allreduce"] == ar


def test_a_bucket_reduced_while_another_stage_still_computes_costs_nothing(hw8):
    # 1F1B, p = 2: stage 1 finishes its backwards B = 200,000 cycles before stage 0; its all-reduce fits in them
    grad = 10 * 2**20
    ar = collective_cost(topology_of(hw8), "allreduce", (1, 3), grad).cycles
    assert ar < 200_000
    base = compose(step(2, 4, b=200_000), "1f1b", hw8)
    comp = compose(step(2, 4, b=200_000, d=2, grad=[0, grad]), "1f1b", hw8)
    assert comp.makespan_cycles == base.makespan_cycles
    assert comp.exposed_cycles["allreduce"] == 0
    (bucket,) = spans_of(comp, "allreduce")
    assert bucket.stage == 1 and bucket.end - bucket.start == ar and bucket.end < comp.makespan_cycles


def test_a_transfer_passes_a_bucket_on_its_link(hw8):
    # p = 2, M = 1, 1F1B: stage 1's bucket, complete as its backward ends, is reduced through chip 1's egress
    # port; the backward's input gradient leaves through it at once (NCCL interleaves the collective's chunks
    # with it), not after the bucket, and stage 0's backward starts when it arrives
    grad, nbytes = 40 * 2**20, 10**6
    topo = topology_of(hw8)
    ar = collective_cost(topo, "allreduce", (1, 3), grad).cycles
    cost = topo.route(1, 0).cycles(nbytes)
    assert cost < ar
    comp = compose(step(2, 1, act=nbytes, d=2, grad=[0, grad]), "1f1b", hw8, bucket_bytes=grad)
    (bucket,) = spans_of(comp, "allreduce")
    back = spans_of(comp, "transfer", stage=1)[0]
    end = spans_of(comp, "backward", stage=1)[0].end
    assert bucket.start == end and bucket.end - bucket.start == ar
    assert (back.start, back.end) == (end, end + cost)
    assert spans_of(comp, "backward", stage=0)[0].start == end + cost


def test_transfers_queue_behind_transfers_and_collectives_behind_both():
    # one link: a collective [0, 100); a transfer ready at 10 passes it, [10, 30), and pushes the collectives
    # queued after it back by its 20 cycles; a second transfer queues behind the first; a collective ready at
    # 50 starts when the first collective's 100 cycles and both transfers' 20 have passed
    book = LinkBook()
    link = Link("scale_out", 0, -1)
    collective, transfer = book.booking(Hold((link,), 100)), book.booking(Hold((link,), 20))
    assert book.book_collective(collective, 0) == (0, 100)
    assert book.book(transfer, 10) == (10, 30)
    assert book.book(transfer, 15) == (30, 50)
    assert book.book_collective(collective, 50) == (140, 240)
    assert book.book(transfer, 60) == (60, 80)


def test_a_hold_is_booked_only_where_it_crosses_links():
    book = LinkBook()
    link = Link("scale_out", 0, -1)
    assert book.crossing(None) is None and book.crossing(Hold((), 0)) is None
    assert book.crossing(Hold((link,), 20)) == book.booking(Hold((link,), 20))


def test_an_allreduce_of_any_group_costs_what_collective_cost_says():
    # the canonical twin of a group is costed in its place: cycles and links equal the direct costing
    for overrides in ({}, {"interconnect.topology": "ring"}, {"interconnect.scale_out.nics": "per_node"}):
        hw = load_hw("a100_x64", overrides)
        topo = topology_of(hw)
        for chips in ((3, 11, 19, 27), (5, 6), (9, 2, 12, 63, 40, 41), (7, 8, 16, 17)):
            direct = collective_cost(topo, "allreduce", chips, 3 * 2**20)
            hold = collective_hold(topo, "allreduce", [chips], 3 * 2**20)
            assert hold.cycles == direct.cycles and hold.links == tuple(sorted(direct.links)), (overrides, chips)


# --- stash -------------------------------------------------------------------------------------------------------

def test_peak_stash_bytes_follow_each_schedules_in_flight_count(hw8):
    p, M = 4, 8
    assert compose(step(p, M, stash=7), "gpipe", hw8).peak_stash_bytes == (7 * M,) * p
    assert compose(step(p, M, stash=7), "1f1b", hw8).peak_stash_bytes == tuple(7 * (p - s) for s in range(p))


# --- bad input ---------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("change,words", [
    (lambda w: dataclasses.replace(w, chunks=(dataclasses.replace(w.chunks[0], forward_cycles=0),) + w.chunks[1:]),
     ["chunks[0].forward_cycles", "got 0", "positive integer"]),
    (lambda w: dataclasses.replace(w, chunks=w.chunks[:1] + (dataclasses.replace(w.chunks[1], backward_cycles=-5),)),
     ["chunks[1].backward_cycles", "got -5"]),
    (lambda w: dataclasses.replace(w, chunks=w.chunks[:1] + (dataclasses.replace(w.chunks[1], weight_grad_cycles=50),)),
     ["chunks[1].weight_grad_cycles", "more than the backward_cycles"]),
    (lambda w: dataclasses.replace(w, stages=(dataclasses.replace(w.stages[0], update_cycles=-1),) + w.stages[1:]),
     ["stages[0].update_cycles", "got -1"]),
    (lambda w: dataclasses.replace(w, chunks=w.chunks[:1]), ["holds 1 chunks", "expected p * v"]),
    (lambda w: dataclasses.replace(w, data_parallel=8), ["needs d * p * t", "16 chips", "has 8"]),
    (lambda w: dataclasses.replace(w, stages=(dataclasses.replace(w.stages[0], chips=(1,)),) + w.stages[1:]),
     ["stages[1].chips holds chip 1, already a chip of stages[0]"]),
    (lambda w: dataclasses.replace(w, chunks=(dataclasses.replace(w.chunks[0], update_send_after=-2),) + w.chunks[1:]),
     ["chunks[0].update_send_after", "got -2", "at least -1"]),
    (lambda w: dataclasses.replace(w, chunks=(dataclasses.replace(w.chunks[0], update_send_after_split=float("nan")),)
                                   + w.chunks[1:]),
     ["chunks[0].update_send_after_split", "got nan"]),
    (lambda w: dataclasses.replace(w, chunks=(dataclasses.replace(w.chunks[0], update_send_after=True),) + w.chunks[1:]),
     ["chunks[0].update_send_after", "got True"]),
    (lambda w: dataclasses.replace(w, stages=(dataclasses.replace(w.stages[0], sent_sum_cycles=-1),) + w.stages[1:]),
     ["stages[0].sent_sum_cycles", "got -1", "non-negative"]),
    (lambda w: dataclasses.replace(w, stages=(dataclasses.replace(w.stages[0], sent_sum_cycles=2**80 + 0.5),)
                                   + w.stages[1:]),
     ["stages[0].sent_sum_cycles", "non-negative integer"]),
])
def test_bad_work_is_refused_naming_the_field_and_value(change, words, hw8):
    with pytest.raises(ScheduleError) as err:
        compose(change(step(2, 2)), "1f1b", hw8)
    message = str(err.value)
    assert "\n" not in message and all(w in message for w in words), message


@pytest.mark.parametrize("name,p,v,M,words", [
    ("interleaved", 2, 2, 3, ["multiple", "M=3"]),
    ("interleaved", 2, 1, 2, ["virtual_stages >= 2"]),
    ("1f1b", 2, 2, 2, ["virtual_stages must be 1"]),
    ("pipedream", 2, 1, 2, ["unknown pipeline schedule 'pipedream'"]),
])
def test_a_schedule_that_cannot_order_the_work_is_refused(name, p, v, M, words, hw8):
    with pytest.raises(ScheduleError) as err:
        compose(step(p, M, v=v), name, hw8)
    assert all(w in str(err.value) for w in words), str(err.value)


def test_a_zero_bucket_size_and_a_wrong_record_are_refused(hw8):
    with pytest.raises(ScheduleError, match="bucket_bytes must be a positive integer of bytes, got 0"):
        compose(step(2, 2), "1f1b", hw8, bucket_bytes=0)
    with pytest.raises(ScheduleError, match="compose needs a StepWork, got dict"):
        compose({}, "1f1b", hw8)


def test_an_order_that_contradicts_itself_across_stages_is_reported_as_a_deadlock(hw8, monkeypatch):
    class BackwardFirst(PipelineSchedule):
        """Stage 0 wants micro-batch 0's gradient before it has sent its activation."""

        name = "backward-first"

        def _chip_order(self, s, p, v, M):
            f, b = Item("forward", 0, s), Item("backward", 0, s)
            return [b, f] if s == 0 else [f, b]

    monkeypatch.setitem(PIPELINE_SCHEDULES, "backward-first", BackwardFirst())
    with pytest.raises(ScheduleError, match=r"'backward-first' deadlocks: stage 0 waits to start "
                                            r"Item\(kind='backward', microbatch=0, chunk=0\); stage 1 waits to start "
                                            r"Item\(kind='forward', microbatch=0, chunk=1\)"):
        compose(step(2, 1), "backward-first", hw8)


# --- ZeRO --------------------------------------------------------------------------------------------------------

def test_zero_1_reduce_scatters_gradients_once_and_all_gathers_updated_parameters_after_the_update(hw8):
    grad, params = 10 * 2**20, 5 * 2**20
    topo = topology_of(hw8)
    rs = collective_cost(topo, "reduce_scatter", (0, 1), grad).cycles
    ag = collective_cost(topo, "all_gather", (0, 1), params).cycles
    comp = compose(step(1, 2, d=2, grad=grad, update=5, params=params), "1f1b", hw8, zero=1)
    assert comp.makespan_cycles == 60 + rs + 5 + ag
    assert comp.exposed_cycles == {"transfer": 0, "allreduce": 0, "reduce_scatter": rs, "all_gather": ag}
    (scatter,) = spans_of(comp, "reduce_scatter")
    (gather,) = spans_of(comp, "all_gather")
    assert (scatter.start, gather.start, gather.end) == (60, 60 + rs + 5, comp.makespan_cycles)
    assert not spans_of(comp, "allreduce")


def test_zero_2_reduce_scatters_each_micro_batchs_gradients_as_its_backward_pass_ends(hw8):
    # micro-batch 0's backward ends at 30: its reduce-scatter runs there, micro-batch 1's (ending at 60) waits for
    # the link; the update follows the second, then the all-gather
    grad, params = 10 * 2**20, 5 * 2**20
    topo = topology_of(hw8)
    rs = collective_cost(topo, "reduce_scatter", (0, 1), grad).cycles
    ag = collective_cost(topo, "all_gather", (0, 1), params).cycles
    comp = compose(step(1, 2, d=2, grad=grad, update=5, params=params), "1f1b", hw8, zero=2)
    assert [(x.start, x.end) for x in spans_of(comp, "reduce_scatter")] == [(30, 30 + rs), (30 + rs, 30 + 2 * rs)]
    (gather,) = spans_of(comp, "all_gather")
    assert (gather.start, gather.end) == (30 + 2 * rs + 5, comp.makespan_cycles)
    assert comp.makespan_cycles == 30 + 2 * rs + 5 + ag


@pytest.mark.parametrize("zero", [1, 2])
def test_under_zero_1_and_2_each_updated_bucket_is_all_gathered_as_its_share_of_the_update_ends(zero, hw8):
    # three 5 MiB buckets of parameters; an update of 3,000 cycles: gathers at 1,000, 2,000 and 3,000 cycles into it
    params, bucket = 15 * 2**20, 5 * 2**20
    ag = collective_cost(topology_of(hw8), "all_gather", (0, 1), bucket).cycles
    comp = compose(step(1, 1, d=2, update=3000, params=params), "1f1b", hw8, bucket_bytes=bucket, zero=zero)
    (update,) = spans_of(comp, "update")
    starts = [x.start for x in spans_of(comp, "all_gather")]
    assert starts == [update.start + 1000, max(update.start + 2000, starts[0] + ag),
                      max(update.start + 3000, starts[0] + 2 * ag)]
    assert comp.makespan_cycles == max(update.end, starts[2]) + ag == max(x.end for x in spans_of(comp, "all_gather"))


def test_under_zero_1_no_stage_reduces_before_every_stage_has_its_gradients(hw8):
    # two stages: stage 1's last backward item ends long before stage 0's; its reduce-scatter waits for stage 0's
    grad = 10 * 2**20
    comp = compose(step(2, 2, d=2, grad=grad, update=5), "1f1b", hw8, zero=1)
    last_items = {s: max(x.end for x in comp.spans if x.stage == s and x.kind == "backward") for s in (0, 1)}
    assert last_items[1] < last_items[0]
    scatters = {x.stage: x.start for x in spans_of(comp, "reduce_scatter")}
    assert scatters == {0: last_items[0], 1: last_items[0]}
    updates = {x.stage: x.start for x in spans_of(comp, "update")}
    assert updates[1] >= max(x.end for x in spans_of(comp, "reduce_scatter"))


def test_a_zero_stage_above_3_is_refused(hw8):
    with pytest.raises(ScheduleError, match="zero must be the ZeRO stage 0, 1, 2 or 3, got 4"):
        compose(step(1, 2, d=2), "1f1b", hw8, zero=4)


def test_a_step_too_large_to_compose_is_refused_with_its_size(hw8):
    with pytest.raises(ScheduleError, match=r"p \* v \* M = 2 \* 1 \* 1000000 gives up to 6,000,000 work items, "
                                            r"above the limit of 5,000,000"):
        compose(step(2, 1_000_000), "1f1b", hw8)


def test_interleaved_on_one_chip_runs_its_chunks_in_turn_without_transfers(hw8):
    comp = compose(step(1, 3, v=2, act=10**6), "interleaved", hw8)
    assert comp.makespan_cycles == 3 * 2 * 30 and comp.bubble_fraction == 0
    assert not spans_of(comp, "transfer")
