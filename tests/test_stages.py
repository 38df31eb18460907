"""The stage partition: layers as units, balanced by whole training cost, under memory, rank-consistent,
settable by the user (compiler/planning/stages.py, layers.py, balance.py)."""
from __future__ import annotations

import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import accelsim as A
from accelsim.cli import main
from accelsim.compiler.planning.balance import StageLimits, Units, balanced_split, slowest_cycles
from accelsim.compiler.planning.expand import Planner
from accelsim.compiler.planning.layers import find_layers, scope
from accelsim.compiler.planning.partition_report import partition_report
from accelsim.compiler.planning.stages import partition
from accelsim.errors import ScheduleError
from accelsim.report import run_summary
from accelsim.schedule.options import StepOptions

HW = A.load_hw("groq_like_x4")
BIG = 10 ** 15


def gpt2_step(layers: int, vocab: int = 64, tensor_parallel: int = 1):
    fwd = A.models.build("gpt2", layers=layers, d_model=64, heads=2, seq=32, vocab=vocab, batch=1,
                         tensor_parallel=tensor_parallel)
    return A.training_graph(fwd, optimizer="adam", lr=0.01)


def planned(graph, **options):
    return Planner(graph, HW, StepOptions.of(None, **options)).partition


def blocks(part, stage):
    return [name for name in part.stage_layers(stage) if name.startswith("h")]


def best_contiguous_split(part, stages):
    """The slowest stage of the best split of the partition's layers, by enumerating every split."""
    cycles = [lay.step_cycles(part.microbatches) for lay in part.layers]
    n = len(cycles)
    return min(max(sum(cycles[a:b]) for a, b in zip((0, *cuts), (*cuts, n)))
               for cuts in itertools.combinations(range(1, n), stages - 1))


# ---- layers -------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("name, layer", [("h0.attn.q.w", "h0"), ("ln_f.gamma", "ln_f"), ("wte", "wte"),
                                         ("layer1.0.conv1.w", "layer1.0"), ("encoder.layer.3.fc.w", "encoder.layer.3"),
                                         ("0.weight", "0"), ("h1.fc.w[1/2]", "h1")])
def test_a_parameters_layer_is_its_name_up_to_the_module_index_else_its_first_word(name, layer):
    assert scope(name) == layer


def test_gpt2_layers_are_its_embeddings_blocks_and_final_norm_with_the_tied_head():
    layers = find_layers(gpt2_step(3))
    assert layers.names == ("wte", "wpe", "h0", "h1", "h2", "ln_f")
    g = gpt2_step(3)
    loss = g.loss
    assert layers.names[layers.layer_of[loss]] == "ln_f"  # the LM head reads wte again but stays with ln_f


def test_every_gradient_and_update_runs_on_the_stage_of_its_parameters_forward_layer():
    g = gpt2_step(4)
    part = planned(g, pipeline_stages=2, microbatches=2)
    consumers = g.consumers()
    for grad in g.gradient_nodes():
        updates = [c for c in consumers[grad] if g.nodes[c].phase == "update"]
        params = {i for u in updates for i in g.nodes[u].inputs if g.nodes[i].op == "param"
                  and g.nodes[i].phase == "forward"}
        for p in params:
            assert part.stage_of[grad] == part.stage_of[p], g.nodes[p].name
            assert all(part.stage_of[u] == part.stage_of[p] for u in updates)
    backward = [part.stage_of[v.id] for v in g.nodes if v.phase == "backward" and not v.is_leaf]
    assert backward.count(0) < 0.6 * len(backward)  # no longer most of the backward pass on stage 0


# ---- balance ------------------------------------------------------------------------------------------------

def test_gpt2_eight_layers_on_two_stages_puts_four_blocks_on_each_chip_within_1_2x_busy():
    g = gpt2_step(8)
    part = planned(g, pipeline_stages=2, microbatches=2)
    assert blocks(part, 0) == ["h0", "h1", "h2", "h3"] and blocks(part, 1) == ["h4", "h5", "h6", "h7"]
    summary = run_summary(A.compile(g, HW, microbatches=2, pipeline_stages=2), HW)
    busy = [c.rates.mac_utilization for c in summary.chips if c.chip in (0, 1)]
    assert len(busy) == 2 and max(busy) <= 1.2 * min(busy)


@pytest.mark.parametrize("stages", [2, 3, 4])
def test_with_the_full_vocabulary_the_slowest_stage_is_the_best_of_all_contiguous_splits(stages):
    part = planned(gpt2_step(8, vocab=50257), pipeline_stages=stages, microbatches=2)
    assert part.slowest_cycles() == best_contiguous_split(part, stages)
    assert part.stages[-1].stop == len(part.layers) and all(s.first < s.stop for s in part.stages)


@pytest.mark.parametrize("stages, counts", [(2, [3, 4]), (3, [2, 2, 3])])
def test_seven_layers_split_as_evenly_as_blocks_allow(stages, counts):
    part = planned(gpt2_step(7), pipeline_stages=stages, microbatches=2)
    assert sorted(len(blocks(part, s)) for s in range(stages)) == counts
    assert part.slowest_cycles() == best_contiguous_split(part, stages)


def test_a_graph_with_fewer_layers_than_stages_is_split_node_by_node_in_order():
    g = A.training_graph(A.models.build("mlp", batch=4))
    part = planned(g, pipeline_stages=4)
    assert part.unit == "node"
    forward = [part.stage_of[v.id] for v in g.nodes if v.phase == "forward" and not v.is_leaf]
    assert forward == sorted(forward) and set(forward) == {0, 1, 2, 3}


def test_one_stage_puts_every_node_on_stage_0():
    part = planned(gpt2_step(2))
    assert set(part.stage_of) == {0} and part.by == "one stage"


# ---- the split search ---------------------------------------------------------------------------------------

def _units(cycles, fixed=None, stash=None):
    n = len(cycles)
    return Units(tuple(cycles), tuple(fixed or [0] * n), tuple(stash or [0] * n))


def test_the_split_minimises_the_slowest_stage():
    assert balanced_split(_units([4, 1, 1, 1, 1]), [StageLimits(BIG, 1)] * 2) == (0, 1, 5)
    assert balanced_split(_units([1, 2, 3, 4, 5]), [StageLimits(BIG, 1)] * 3) == (0, 3, 4, 5)


def test_memory_moves_units_off_a_full_stage():
    # balanced would be two units per stage; stage 0's chip holds one unit's parameters only
    units = _units([1, 1, 1, 1], fixed=[5, 5, 5, 5])
    assert balanced_split(units, [StageLimits(5, 1), StageLimits(15, 1)]) == (0, 1, 4)


def test_stashed_activations_count_once_per_micro_batch_in_flight():
    units = _units([1, 1, 1, 1], stash=[3, 3, 3, 3])
    # stage 0 holds two micro-batches (12 bytes for two units), stage 1 one: 2 + 2 fits 12 and 6
    assert balanced_split(units, [StageLimits(12, 2), StageLimits(6, 1)]) == (0, 2, 4)
    assert balanced_split(units, [StageLimits(6, 2), StageLimits(9, 1)]) == (0, 1, 4)


def test_no_split_within_memory_is_none():
    assert balanced_split(_units([1, 1], fixed=[8, 8]), [StageLimits(7, 1)] * 2) is None


@settings(max_examples=150, deadline=None)
@given(data=st.data(), n=st.integers(1, 7), p=st.integers(1, 4))
def test_the_split_is_the_best_contiguous_split_within_memory(data, n, p):
    cycles = data.draw(st.lists(st.integers(0, 20), min_size=n, max_size=n))
    fixed = data.draw(st.lists(st.integers(0, 6), min_size=n, max_size=n))
    stash = data.draw(st.lists(st.integers(0, 6), min_size=n, max_size=n))
    limits = [StageLimits(data.draw(st.integers(0, 30)), data.draw(st.integers(1, 3))) for _ in range(p)]
    units = _units(cycles, fixed, stash)
    nonempty = n >= p

    def fits(starts):
        return all(sum(fixed[a:b]) + lim.in_flight * sum(stash[a:b]) <= lim.capacity_bytes
                   for lim, a, b in zip(limits, starts, starts[1:]))
    pool = range(1, n) if nonempty else range(0, n + 1)
    pick = itertools.combinations if nonempty else itertools.combinations_with_replacement
    splits = [(0, *cuts, n) for cuts in pick(pool, p - 1)]
    feasible = [s for s in splits if fits(s)]
    got = balanced_split(units, limits, nonempty)
    if not feasible:
        assert got is None
    else:
        assert got is not None and fits(got) and (not nonempty or all(a < b for a, b in zip(got, got[1:])))
        assert slowest_cycles(units, got) == min(slowest_cycles(units, s) for s in feasible)


# ---- memory -------------------------------------------------------------------------------------------------

def _with_memory(chip, capacity_bytes):
    return chip.model_copy(update={"memories": [m.model_copy(update={"capacity_bytes": capacity_bytes})
                                                for m in chip.memories]})


def test_a_partition_keeps_every_stage_within_its_chips_memory():
    g = gpt2_step(8, vocab=50257)
    free = planned(g, pipeline_stages=2, microbatches=2)
    planner = Planner(g, HW, StepOptions(pipeline_stages=2, microbatches=2))
    serial = {n.id: min(c for _, _, c in planner.costs.node(n.id, 0).options) for n in planner.compute}
    chip = planner.chips[0]
    # stage 0 (the embeddings' 50257-row table and its Adam state) gets less room than it takes unconstrained
    tight = free.stages[0].memory_bytes - 1
    part = partition(g, serial, StepOptions(pipeline_stages=2, microbatches=2), HW,
                     [_with_memory(chip, tight), chip])
    assert part.stages[0].memory_bytes <= tight and part.stages[0].stop < free.stages[0].stop
    with pytest.raises(ScheduleError, match=r"no split of graph 'gpt2.train'.* over 2 pipeline stages fits"):
        partition(g, serial, StepOptions(pipeline_stages=2, microbatches=2), HW, [_with_memory(chip, 10 ** 6)] * 2)


@pytest.mark.parametrize("schedule, held", [(None, [1, 1, 1]), ("gpipe", [4, 4, 4]), ("1f1b", [3, 2, 1])])
def test_each_stage_holds_the_stashes_of_the_micro_batches_its_pipeline_schedule_keeps_in_flight(schedule, held):
    part = planned(gpt2_step(4), pipeline_stages=3, microbatches=4, pipeline_schedule=schedule)
    assert [s.in_flight for s in part.stages] == held
    for s in part.stages:
        layers = part.layers[s.first:s.stop]
        assert s.memory_bytes == sum(lay.fixed_bytes for lay in layers) + s.in_flight * sum(
            lay.stash_bytes for lay in layers)


def test_a_graph_without_parameters_is_split_node_by_node():
    g = A.training_graph(A.models.build("seed_autodiff"))
    part = planned(g, pipeline_stages=2)
    assert part.unit == "node" and part.by == "balanced"
    assert part.slowest_cycles() == best_contiguous_split(part, 2)


# ---- tensor parallelism -------------------------------------------------------------------------------------

def test_a_rank_k_node_runs_on_the_stage_of_its_rank_0_twin():
    from accelsim.compiler.planning.rank_twins import rank_twins
    g = gpt2_step(4, tensor_parallel=2)
    part = planned(g, pipeline_stages=2, tensor_parallel=2)
    twins = rank_twins(g)
    assert twins
    assert all(part.stage_of[k] == part.stage_of[t] for k, t in twins[1].items())
    assert blocks(part, 0) == ["h0", "h1"] and blocks(part, 1) == ["h2", "h3"]


# ---- set by the user ----------------------------------------------------------------------------------------

def test_stage_layers_and_boundaries_set_the_split():
    g = gpt2_step(4)  # layers: wte, wpe, h0, h1, h2, h3, ln_f
    by_count = planned(g, pipeline_stages=3, stage_layers=(3, 2, 2))
    assert [by_count.stage_layers(s) for s in range(3)] == [("wte", "wpe", "h0"), ("h1", "h2"), ("h3", "ln_f")]
    by_name = planned(g, pipeline_stages=3, stage_boundaries=("h1", "h3"))
    assert by_name.stage_of == by_count.stage_of and by_name.by == "stage_boundaries"


@pytest.mark.parametrize("options, match", [
    ({"stage_layers": (3, 4)}, r"stage_layers=\[3, 4\] gives 2 count\(s\), but pipeline_stages=3"),
    ({"stage_layers": (3, 0, 4)}, r"stage 1 gets 0 layers; expected at least 1"),
    ({"stage_layers": (3, 2, 3)}, r"sums to 8, but graph 'gpt2.train' has 7 layers: wte, wpe, h0"),
    ({"stage_boundaries": ("h1",)}, r"names 1 layer\(s\), but pipeline_stages=3: expected 2"),
    ({"stage_boundaries": ("h1", "h3x")}, r"no layer named 'h3x' \(did you mean 'h3'\?\)"),
    ({"stage_boundaries": ("h3", "h1")}, r"'h1' is not after 'h3'"),
    ({"stage_boundaries": ("wte", "h1")}, r"'wte' is the first layer"),
    ({"stage_layers": (3, 2, 2), "stage_boundaries": ("h1", "h3")}, r"both set the stages"),
])
def test_a_bad_stage_setting_is_refused_naming_the_value_and_what_was_expected(options, match):
    with pytest.raises(ScheduleError, match=match):
        planned(gpt2_step(4), pipeline_stages=3, **options)


def test_a_user_split_that_overflows_a_chip_is_refused():
    g = gpt2_step(2, vocab=50257)
    planner = Planner(g, HW, StepOptions(pipeline_stages=2))
    serial = {n.id: min(c for _, _, c in planner.costs.node(n.id, 0).options) for n in planner.compute}
    small = _with_memory(planner.chips[0], 10 ** 6)
    with pytest.raises(ScheduleError, match=r"stage_layers: stage 0 of graph 'gpt2.train' \(wte, wpe, h0\) needs"):
        partition(g, serial, StepOptions(pipeline_stages=2, stage_layers=(3, 2)), HW, [small, small])


# ---- printed --------------------------------------------------------------------------------------------------

def test_the_report_names_each_stages_layers_and_cycles():
    part = partition_report(gpt2_step(8), HW, StepOptions(pipeline_stages=2, microbatches=2))
    lines = part.text().splitlines()
    assert lines[0].startswith("stage partition: 11 layers balanced by cycles per step")
    assert lines[1].startswith("  stage 0: wte .. h3 (6 layers), ") and f"{part.stages[0].cycles:,} cycles" in lines[1]
    assert lines[2].startswith("  stage 1: h4 .. ln_f (5 layers), ")


def test_run_prints_the_partition_with_pipeline_stages(capsys):
    assert main(["run", "--hw", "groq_like_x4", "--model", "gpt2", "--set", "layers=2", "--set", "d_model=32",
                 "--set", "heads=2", "--set", "seq=8", "--set", "vocab=32", "--pipeline-stages", "2",
                 "--stage-boundaries", "h1", "--no-sim"]) == 0
    out = capsys.readouterr().out
    assert "stage partition: 5 layers by stage_boundaries" in out
    assert "stage 0: wte, wpe, h0 (3 layers)" in out and "stage 1: h1, ln_f (2 layers)" in out
