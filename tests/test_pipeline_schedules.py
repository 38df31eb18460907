"""Pipeline schedules (compiler/hierarchy/schedules.py): every chip's item order is valid, complete and
stashes what the papers say; bad counts are refused with a clear message."""
from __future__ import annotations

import typing

import pytest

from accelsim.compiler.hierarchy.schedules import (
    PIPELINE_SCHEDULES, Item, pipeline_schedule, stash_counts,
)
from accelsim.errors import ScheduleError
from accelsim.schedule.options import StepOptions

# (schedule, p, v, M) covering warm-up longer than M, M == p, and the steady state
CASES = [
    ("gpipe", 1, 1, 1), ("gpipe", 4, 1, 3), ("gpipe", 4, 1, 8),
    ("1f1b", 1, 1, 3), ("1f1b", 4, 1, 2), ("1f1b", 4, 1, 4), ("1f1b", 5, 1, 12),
    ("interleaved", 2, 2, 2), ("interleaved", 4, 2, 4), ("interleaved", 4, 2, 8), ("interleaved", 3, 3, 9),
    ("interleaved", 1, 2, 3),
    ("zb-h1", 1, 1, 2), ("zb-h1", 4, 1, 2), ("zb-h1", 4, 1, 4), ("zb-h1", 6, 1, 13),
]


def _ids(case: tuple) -> str:
    return "{}-p{}-v{}-M{}".format(*case)


def test_the_table_holds_every_schedule_step_options_can_name():
    field = StepOptions.model_fields["pipeline_schedule"].annotation
    names = {a for arg in typing.get_args(field) for a in typing.get_args(arg)}
    assert names == set(PIPELINE_SCHEDULES)
    assert all(pipeline_schedule(n).name == n for n in PIPELINE_SCHEDULES)


@pytest.mark.parametrize("case", CASES, ids=_ids)
def test_every_item_runs_exactly_once_on_the_chip_that_holds_its_chunk(case):
    name, p, v, M = case
    sched = PIPELINE_SCHEDULES[name]
    order = sched.order(p, v, M)
    kinds = ("forward", "backward", "weight_grad") if sched.splits_weight_grad else ("forward", "backward")
    assert len(order) == p
    for s, items in enumerate(order):
        assert all(it.chunk % p == s for it in items)
        want = {(k, m, c) for k in kinds for m in range(M) for c in range(s, p * v, p)}
        got = [(it.kind, it.microbatch, it.chunk) for it in items]
        assert len(got) == len(set(got)) and set(got) == want


@pytest.mark.parametrize("case", CASES, ids=_ids)
def test_on_each_chip_forward_precedes_backward_precedes_weight_grad_and_chunks_keep_model_order(case):
    name, p, v, M = case
    for items in PIPELINE_SCHEDULES[name].order(p, v, M):
        at = {(it.kind, it.microbatch, it.chunk): i for i, it in enumerate(items)}
        for (kind, m, c), i in at.items():
            if kind == "backward":
                assert at[("forward", m, c)] < i
                if ("backward", m, c + p) in at:  # the chip's later chunk is backpropagated first
                    assert at[("backward", m, c + p)] < i
            if kind == "weight_grad":
                assert at[("backward", m, c)] < i
            if kind == "forward" and ("forward", m, c - p) in at:
                assert at[("forward", m, c - p)] < i


@pytest.mark.parametrize("case", CASES, ids=_ids)
def test_the_same_arguments_give_the_same_order(case):
    name, p, v, M = case
    assert PIPELINE_SCHEDULES[name].order(p, v, M) == PIPELINE_SCHEDULES[name].order(p, v, M)


@pytest.mark.parametrize("p,M", [(1, 1), (4, 2), (4, 4), (4, 9), (8, 32)])
def test_gpipe_stashes_every_microbatch_and_1f1b_at_most_p_minus_s(p, M):
    assert stash_counts(PIPELINE_SCHEDULES["gpipe"].order(p, 1, M)) == (M,) * p
    counts = stash_counts(PIPELINE_SCHEDULES["1f1b"].order(p, 1, M))
    assert counts == tuple(min(p - s, M) for s in range(p))
    assert PIPELINE_SCHEDULES["1f1b"].in_flight(p, 1, M) == min(p, M)
    assert PIPELINE_SCHEDULES["gpipe"].in_flight(p, 1, M) == M


@pytest.mark.parametrize("p,M", [(2, 2), (4, 8), (6, 13)])
def test_zb_h1_keeps_1f1b_peak_stash_counting_until_the_weight_grad(p, M):
    assert PIPELINE_SCHEDULES["zb-h1"].in_flight(p, 1, M) == PIPELINE_SCHEDULES["1f1b"].in_flight(p, 1, M)


def test_zb_h1_steady_state_is_f_then_b_then_the_deferred_w():
    # p=4, M=8, chip 1: triple F(x), B(x - 2), W(x - 3) (Qi et al. section 3.1)
    items = PIPELINE_SCHEDULES["zb-h1"].order(4, 1, 8)[1]
    at = {(it.kind, it.microbatch): i for i, it in enumerate(items)}
    assert at[("forward", 5)] + 1 == at[("backward", 3)] and at[("backward", 3)] + 1 == at[("weight_grad", 2)]


def test_interleaved_stashes_fewer_stage_activations_than_1f1b():
    # in flight counts chunk activations, each 1/v of a stage's: (p - 1)*2 + (v - 1)*p + 1 on chip 0
    p, v, M = 4, 2, 8
    assert PIPELINE_SCHEDULES["interleaved"].in_flight(p, v, M) == (p - 1) * 2 + (v - 1) * p + 1


def test_interleaved_warm_up_runs_microbatches_in_groups_of_p_through_the_chips_chunks():
    items = PIPELINE_SCHEDULES["interleaved"].order(2, 2, 4)[0]
    warmup = [(it.microbatch, it.chunk) for it in items[:4]]
    assert warmup == [(0, 0), (1, 0), (0, 2), (1, 2)]
    assert all(isinstance(it, Item) for it in items)


@pytest.mark.parametrize("name,p,v,M,words", [
    ("interleaved", 4, 2, 6, ["multiple", "M=6", "p=4"]),
    ("interleaved", 4, 1, 8, ["virtual_stages >= 2", "got 1"]),
    ("1f1b", 4, 2, 8, ["virtual_stages must be 1", "got 2"]),
    ("gpipe", 0, 1, 8, ["pipeline stages p", "got 0"]),
    ("zb-h1", 4, 1, -1, ["micro-batches M", "got -1"]),
    ("1f1b", 4, 1, 2.0, ["micro-batches M", "got 2.0"]),
    ("gpipe", True, 1, 2, ["pipeline stages p", "got True"]),
    ("1f1b", 10_000, 1, 10_000, ["above the limit"]),
])
def test_bad_counts_are_refused_naming_the_schedule_value_and_expectation(name, p, v, M, words):
    with pytest.raises(ScheduleError) as err:
        PIPELINE_SCHEDULES[name].order(p, v, M)
    message = str(err.value)
    assert repr(name) in message and "\n" not in message
    assert all(w in message for w in words), message


def test_an_unknown_schedule_name_lists_the_known_ones():
    with pytest.raises(ScheduleError, match="unknown pipeline schedule 'pipedream'.*gpipe, 1f1b, interleaved, zb-h1"):
        pipeline_schedule("pipedream")
