"""Opt-in wiring of the mapper into the scheduler: a unit with `mapping: search` gets its nodes' costs from
the mapper; every other unit, and so every shipped description, is costed exactly as before."""
from __future__ import annotations

import pytest

import accelsim as A
from accelsim.cost.model import node_cost
from accelsim.errors import HwConfigError
from accelsim.mapping.cache import MappingCache
from accelsim.mapping.node import unit_node_cost

SEARCH = {"chips.0.units.mxu.mapping": "search", "chips.0.units.mxu.dataflows": ["ws", "os", "is"]}


def _tensor_nodes(graph):
    return [n for n in graph.nodes if n.op in ("conv2d", "matmul")]


def test_a_fixed_unit_is_costed_by_node_cost_unchanged():
    hw = A.load_hw("tpu_v1_like")
    graph = A.models.build("resnet_block", batch=1)
    unit = hw.chips[0].units[0]
    assert unit.mapping == "fixed" and "mapping" not in unit.model_dump()
    for node in _tensor_nodes(graph):
        assert unit_node_cost(hw, graph, node, unit) == node_cost(hw, graph, node, unit)


def test_a_search_unit_with_only_its_own_dataflow_finds_todays_cost_or_better():
    hw = A.load_hw("tpu_v1_like", overrides={"chips.0.units.mxu.mapping": "search"})
    fixed = A.load_hw("tpu_v1_like")
    graph = A.models.build("resnet50", batch=1)
    cache = MappingCache()
    for node in _tensor_nodes(graph):
        searched = unit_node_cost(hw, graph, node, hw.chips[0].units[0], cache=cache)
        today = node_cost(fixed, graph, node, fixed.chips[0].units[0])
        assert searched.cycles <= today.cycles
        assert (searched.flops, searched.unit, searched.latency_cycles) == (today.flops, today.unit,
                                                                            today.latency_cycles)
    assert cache.misses < cache.hits


def test_the_scheduler_takes_a_search_units_node_cycles_from_the_mapper():
    hw = A.load_hw("tpu_v1_like", overrides=SEARCH)
    graph = A.models.build("resnet_block", batch=1)
    schedule = A.compile(graph, hw)
    unit = hw.chips[0].units[0]
    nodes = {n.id: n for n in _tensor_nodes(graph)}
    tasks = [t for t in schedule.tasks if t.kind == "node" and t.node in nodes and t.resource == unit.name]
    assert len(tasks) == len(nodes)
    for task in tasks:
        assert task.end - task.start == unit_node_cost(hw, graph, nodes[task.node], unit).cycles
    fixed = A.compile(graph, A.load_hw("tpu_v1_like"))
    assert A.simulate(schedule).makespan_cycles <= A.simulate(fixed).makespan_cycles


@pytest.mark.parametrize("overrides,key,expected", [
    ({"chips.0.units.activation.mapping": "search"}, "units[1].mapping", "give the unit an `array`"),
    ({"chips.0.units.mxu.mapping": "best"}, "units[0].mapping", "'fixed' or 'search'"),
])
def test_a_bad_mapping_key_is_refused_naming_it(overrides, key, expected):
    with pytest.raises(HwConfigError) as e:
        A.load_hw("tpu_v1_like", overrides=overrides)
    assert key in str(e.value) and expected in str(e.value)
