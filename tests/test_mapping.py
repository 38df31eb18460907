"""Mappings of a layer on an array unit: hand-checked costs, the mapper's guarantees (never worse than
today's fixed point, deterministic, repeated layers mapped once) and clear errors for bad mappings."""
from __future__ import annotations

import functools
import itertools

import pytest

import accelsim as A
from accelsim import ops as F
from accelsim.cost.model import node_cost
from accelsim.cost.systolic import fold_cycles
from accelsim.errors import AccelsimError, HwConfigError
from accelsim.mapping.cache import MappingCache, map_graph
from accelsim.mapping.cost import mapping_cost
from accelsim.mapping.dims import layer_dims
from accelsim.mapping.errors import MappingSpecError
from accelsim.mapping.fixed import im2col_mapping
from accelsim.mapping.mapper import MapperOptions, objective_value, search_mapping
from accelsim.mapping.record import Mapping

BUFFERS = {"input_bytes": "256 KiB", "weight_bytes": "64 KiB", "output_bytes": "64 KiB",
           "bandwidth_bytes_per_cycle": 64}


def _small_hw(dataflow: str, rows: int = 8, cols: int = 8, buffers: dict | None = None, **unit) -> A.HwSpec:
    mxu = {"name": "mxu", "ops": ["matmul", "conv2d"], "array": {"rows": rows, "cols": cols, "dataflow": dataflow},
           "reads": ["sram"], "writes": ["sram"], **unit}
    if buffers is not None:
        mxu["operand_buffers"] = {"bandwidth_bytes_per_cycle": 4, **buffers}
    return A.load_hw({"name": "small", "clock_hz": "1 GHz", "bytes_per_element": {"float32": 1, "float64": 1},
                      "chips": [{"name": "chip", "technology_nm": 45, "units": [mxu], "memories": [
                          {"name": "sram", "kind": "sram", "capacity_bytes": "64 MiB",
                           "bandwidth_bytes_per_cycle": 1000}]}]})


def _conv_graph():
    g = A.Graph("conv")
    x = g.input("x", (1, 6, 14, 14))
    w = g.param("w", (10, 6, 3, 3))
    a = g.input("a", (30, 50))
    b = g.param("b", (50, 20))
    return g, F.conv2d(x, w, stride=1, padding=1).node, F.matmul(a, b).node


@functools.cache
def _resnet50():
    return A.models.build("resnet50", batch=1)


def _first_conv(graph):
    return next(n for n in graph.nodes if n.op == "conv2d")


@pytest.mark.parametrize("dataflow,sizes,double", list(itertools.product(
    ["os", "ws", "is"], [(64, 64, 64), (1024, 256, 4096), (1 << 20,) * 3], [True, False])))
def test_im2col_mapping_reproduces_the_tile_traffic_model_through_operand_buffers(dataflow, sizes, double):
    """Reuse analysis of the fixed point gives node_cost's bytes, buffer bytes, stalls and energy."""
    buffers = dict(zip(("input_bytes", "weight_bytes", "output_bytes"), sizes), double_buffered=double)
    hw = _small_hw(dataflow, buffers=buffers)
    chip, unit = hw.chips[0], hw.chips[0].units[0]
    graph, conv, mm = _conv_graph()
    for node in (conv, mm):
        layer = layer_dims(graph, node)
        got = mapping_cost(hw, chip, unit, layer, im2col_mapping(layer, dataflow))
        want = node_cost(hw, graph, node, unit, chip)
        assert (got.cycles, got.traffic[-1].read_bytes, got.traffic[-1].written_bytes, got.traffic[0].read_bytes) \
            == (want.cycles, want.bytes_read, want.bytes_written, want.buffer_bytes)
        assert got.energy_pj == pytest.approx(want.energy_pj)


def test_first_conv_with_only_c_on_the_rows_folds_fy_and_fx_over_time():
    """ResNet-50's first conv (C=3, 7x7, 64 filters, 112x112 out) on a 32x32 ws array, rows <- C: one row
    fold, 64/32 = 2 column folds, FY x FX = 49 fold loops, each streaming 112 x 112 = 12,544 pixels."""
    hw = _small_hw("ws", rows=32, cols=32)
    layer = layer_dims(_resnet50(), _first_conv(_resnet50()))
    only_c = Mapping("ws", ("C",), ("K",), (("N", 1), ("OY", 112), ("OX", 112)), ("FY", "FX", "cols"))
    cost = mapping_cost(hw, hw.chips[0], hw.chips[0].units[0], layer, only_c)
    assert (cost.folds, cost.temporal) == (98, 12544)
    assert cost.compute_cycles == 98 * fold_cycles(32, 32, 12544, "ws") == 98 * (32 + 32 + 32 + 12544 - 2)
    im2col = mapping_cost(hw, hw.chips[0], hw.chips[0].units[0], layer, im2col_mapping(layer, "ws"))
    assert im2col.folds == 5 * 2  # ceil(147 / 32) row folds x 2 column folds
    assert im2col.array_utilization > 8 * cost.array_utilization  # 147/160 of the rows in use against 3/32


def _cases():
    plain = A.load_hw("tpu_v1_like", overrides={"chips.0.units.mxu.dataflows": ["ws", "os", "is"]})
    buffered = A.load_hw("tpu_v1_like", overrides={"chips.0.units.mxu.dataflows": ["ws", "os", "is"],
                                                   "chips.0.units.mxu.operand_buffers": BUFFERS})
    return {"plain": plain, "buffered": buffered}


@pytest.mark.parametrize("objective", ["latency", "energy", "edp"])
@pytest.mark.parametrize("case", ["plain", "buffered"])
def test_the_mapper_never_returns_a_mapping_worse_than_the_fixed_point(objective, case):
    hw = _cases()[case]
    chip, unit = hw.chips[0], hw.chips[0].units[0]
    graph = _resnet50()
    options = MapperOptions(objective=objective, budget=200)
    better = 0
    for node in [n for n in graph.nodes if n.op == "conv2d"][:12]:
        layer = layer_dims(graph, node)
        best = search_mapping(hw, chip, unit, layer, options)
        fixed = mapping_cost(hw, chip, unit, layer, im2col_mapping(layer, "ws"))
        assert objective_value(best, objective) <= objective_value(fixed, objective)
        better += objective_value(best, objective) < objective_value(fixed, objective)
    if case == "buffered":  # small buffers leave room the search must find
        assert better > 0


def test_the_same_seed_gives_the_same_mapping_and_the_budget_bounds_the_search():
    hw = _cases()["buffered"]
    chip, unit = hw.chips[0], hw.chips[0].units[0]
    layer = layer_dims(_resnet50(), _first_conv(_resnet50()))
    runs = [search_mapping(hw, chip, unit, layer, MapperOptions(budget=150, seed=7)) for _ in range(2)]
    assert runs[0] == runs[1]
    assert search_mapping(hw, chip, unit, layer, MapperOptions(budget=1)).mapping == im2col_mapping(layer, "ws")


def test_repeated_layers_are_mapped_once():
    hw = A.load_hw("tpu_v1_like")
    graph = _resnet50()
    cache = MappingCache()
    result = map_graph(hw, graph, hw.chips[0].units[0], MapperOptions(), cache)
    shapes = {layer_dims(graph, graph.nodes[i]) for i in result}
    assert len(result) == 54 and cache.misses == len(shapes) < 54 and cache.hits == 54 - len(shapes)
    again = map_graph(hw, graph, hw.chips[0].units[0], MapperOptions(), cache)
    assert again == result and cache.misses == len(shapes) and cache.hits == 108 - len(shapes)


def test_a_units_dataflows_are_left_out_of_its_dump_when_absent():
    """So hardware hashes recorded in schedules compiled before the key existed still match."""
    plain, listed = A.load_hw("groq_like"), _cases()["plain"]
    assert "dataflows" not in plain.chips[0].units[0].model_dump()
    assert listed.chips[0].units[0].model_dump()["dataflows"] == ("ws", "os", "is")


@pytest.mark.parametrize("value,expected", [
    (["ws", "systolic"], "unknown dataflow 'systolic'"),
    ([], "an empty list allows no dataflow"),
    (["ws", "os", "ws"], "ws listed more than once"),
    (["os"], "leaves out the array's own dataflow 'ws'"),
    ("ws", "expected a list of dataflows"),
])
def test_a_bad_dataflows_list_is_refused_naming_the_key(value, expected):
    with pytest.raises(HwConfigError) as e:
        A.load_hw("tpu_v1_like", overrides={"chips.0.units.mxu.dataflows": value})
    assert "units[0].dataflows" in str(e.value) and expected in str(e.value) and "Traceback" not in str(e.value)


def _bad(**changes) -> Mapping:
    fields = dict(dataflow="ws", rows=("C", "FY", "FX"), cols=("K",), stream=(("N", 1), ("OY", 112), ("OX", 112)),
                  order=("cols", "rows"))
    fields.update(changes)
    return Mapping(**fields)


@pytest.mark.parametrize("mapping,key,expected", [
    (_bad(stream=(("OY", 5), ("OX", 112))), "stream.OY", "does not divide OY=112"),
    (_bad(stream=(("OY", 224), ("OX", 112))), "stream.OY", "does not divide OY=112"),
    (_bad(rows=("C", "FY", "Q")), "rows", "no dimension 'Q'"),
    (_bad(rows=("C", "FY", "FX", "K"), cols=()), "rows", "cannot go there under dataflow 'ws'"),
    (_bad(stream=(("C", 3), ("OY", 112), ("OX", 112))), "stream", "already on rows"),
    (_bad(rows=("C", "FY")), "order", "leaves out the fold loops FX (7 iterations)"),
    (_bad(order=("cols", "rows", "cols")), "order", "'cols' listed twice"),
    (_bad(dataflow="os"), "dataflow", "not one unit 'mxu' allows"),
])
def test_a_mapping_that_does_not_fit_its_layer_is_refused_naming_the_key(mapping, key, expected):
    hw = A.load_hw("tpu_v1_like")
    layer = layer_dims(_resnet50(), _first_conv(_resnet50()))
    with pytest.raises(MappingSpecError) as e:
        mapping_cost(hw, hw.chips[0], hw.chips[0].units[0], layer, mapping)
    message = str(e.value)
    assert f"on unit 'mxu': {key}: " in message and expected in message and "\n" not in message
    assert isinstance(e.value, AccelsimError)


@pytest.mark.parametrize("kwargs,expected", [
    (dict(objective="speed"), "objective 'speed'"), (dict(budget=0), "budget 0"),
    (dict(budget=True), "budget True"), (dict(seed="x"), "seed 'x'")])
def test_bad_mapper_options_are_refused(kwargs, expected):
    with pytest.raises(MappingSpecError, match=expected):
        MapperOptions(**kwargs)


def test_an_energy_objective_without_energy_figures_is_refused_naming_the_unit():
    hw = A.load_hw("groq_like", overrides={"chips.0.technology_nm": None})
    unit = next(u for u in hw.chips[0].units if u.array is not None)
    if unit.energy_pj_per_op is not None:
        pytest.skip("groq_like states its energy per op")
    layer = layer_dims(_resnet50(), _first_conv(_resnet50()))
    with pytest.raises(MappingSpecError, match=f"unit '{unit.name}' has none"):
        search_mapping(hw, hw.chips[0], unit, layer, MapperOptions(objective="energy"))


def test_only_ops_with_a_gemm_view_on_array_units_are_mapped():
    hw = A.load_hw("tpu_v1_like")
    graph = _resnet50()
    relu = next(n for n in graph.nodes if n.op == "relu")
    with pytest.raises(MappingSpecError, match=f"relu node %{relu.id} .* has no GEMM view"):
        layer_dims(graph, relu)
    vector = next(u for u in hw.chips[0].units if u.array is None)
    layer = layer_dims(graph, _first_conv(graph))
    with pytest.raises(MappingSpecError, match=f"unit '{vector.name}' has no systolic array"):
        search_mapping(hw, hw.chips[0], vector, layer, MapperOptions())


def test_a_gang_unit_with_all_dataflows_maps_gpt2_no_slower_than_today():
    """a100_like's 432 tensor cores split each layer's folds; the mapper may pick ws or is per matmul."""
    hw = A.load_hw("a100_like", overrides={"chips.0.units.tensor_core.dataflows": ["os", "ws", "is"]})
    unit = next(u for u in hw.chips[0].units if u.array is not None)
    graph = A.models.build("gpt2", batch=1)
    result = map_graph(hw, graph, unit)
    assert len(result) == 97
    for node_id, cost in result.items():
        assert cost.cycles <= node_cost(hw, graph, graph.nodes[node_id], unit).cycles
