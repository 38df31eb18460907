"""A unit's compute model as one class per kind (hw/compute.py, cycles in cost/compute.py): every class
answers every question, and cost, area, energy, `hw show` and the roofline work for a unit of each kind."""
import inspect
import json
from typing import get_args

import pytest

import accelsim as A
from accelsim.cli import main
from accelsim.cost.area import unit_item
from accelsim.cost.compute import CYCLES
from accelsim.cost.energy import unit_pj_per_op
from accelsim.cost.model import can_run, node_cost
from accelsim.graph.ir import Graph
from accelsim.hw import tech
from accelsim.hw.compute import COMPUTE_MODELS, ComputeModel, ComputeModelBase
from accelsim.hw.spec import Unit
from accelsim.ops import matmul, relu, transpose
from accelsim.viz.roofline import plot_roofline

ABSTRACT = sorted(ComputeModelBase.__abstractmethods__)
SRAM = {"name": "sram", "kind": "sram", "capacity_bytes": "1 MiB", "bandwidth_bytes_per_cycle": 4096}


def every_kind() -> dict:
    """One 28 nm chip with one unit of each compute model; float32 stored in 1 byte (int8 datapaths)."""
    ports = {"reads": ["sram"], "writes": ["sram"]}
    return {"name": "every_kind", "clock_hz": "1 GHz", "bytes_per_element": {"float32": 1},
            "chips": [{"name": "c", "technology_nm": 28, "memories": [SRAM], "units": [
                {"name": "mxu", "ops": ["matmul"], "array": {"rows": 4, "cols": 4, "dataflow": "ws"}, **ports},
                {"name": "vpu", "ops": ["relu"], "vector": {"lanes": 8, "ops_per_lane_per_cycle": 2}, **ports},
                {"name": "pe", "ops": ["relu"], "per_element": {"cycles_per_element": 0.5}, **ports},
                {"name": "dma", "ops": ["transpose"], "stream": {"bytes_per_cycle": 16}, **ports}]}]}


def unit_of(hw, key: str) -> Unit:
    return next(u for u in hw.chips[0].units if u.compute_model == key)


def test_the_machine_has_a_unit_of_every_compute_model():
    hw = A.hw.parse_hw(every_kind())
    assert sorted(type(u.model).__name__ for u in hw.chips[0].units) == sorted(c.__name__ for c in COMPUTE_MODELS)


def test_the_registry_is_the_union_and_keys_are_distinct():
    assert COMPUTE_MODELS == get_args(ComputeModel)
    assert len({c.key for c in COMPUTE_MODELS}) == len(COMPUTE_MODELS)


@pytest.mark.parametrize("cls", COMPUTE_MODELS, ids=lambda c: c.__name__)
def test_every_model_class_implements_every_method_and_has_its_cycles(cls):
    assert ABSTRACT == ["describe", "macs", "peak_ops_per_cycle"]
    assert not inspect.isabstract(cls)
    assert all(getattr(cls, name) is not getattr(ComputeModelBase, name) for name in ABSTRACT)
    assert isinstance(cls.has_datapath, bool) and isinstance(cls.gemm_only, bool)
    assert cls in CYCLES  # its timing (cost/compute.py)
    field = Unit.model_fields[cls.key]  # the YAML key a unit names it by
    assert cls in get_args(field.annotation) and field.default is None


@pytest.mark.parametrize("key, peak, macs, has_datapath, text", [
    ("array", 32.0, 16, True, "4x4 systolic, ws"),  # 2 ops per MAC, one MAC per PE
    ("vector", 16.0, 8.0, True, "8 lanes x 2 ops"),  # a MAC is 2 ops
    ("per_element", 0.0, 2.0, True, "0.5 cycles/element"),  # one MAC per element per cycle
    ("stream", 0.0, 0.0, False, "16 B/cycle"),
])
def test_each_model_states_its_peak_macs_datapath_and_description(key, peak, macs, has_datapath, text):
    model = unit_of(A.hw.parse_hw(every_kind()), key).model
    assert (model.peak_ops_per_cycle(), model.macs(), model.has_datapath, model.describe()) == \
        (peak, macs, has_datapath, text)


def _layer(op: str) -> tuple[Graph, object]:
    g = Graph("layer", dtype="float32")
    x = g.input("x", (8, 8))
    if op == "matmul":
        matmul(x, g.input("w", (8, 8)))
    else:
        {"relu": relu, "transpose": transpose}[op](x)
    return g, g.nodes[-1]


@pytest.mark.parametrize("key, op, compute_cycles", [
    ("array", "matmul", 72),  # ws 4x4, 8x8 @ 8x8: 2 x 2 folds of (4 install + 4 + 4 + 8 streamed - 2) cycles
    ("vector", "relu", 4),  # 64 ops on 16 ops per cycle
    ("per_element", "relu", 32),  # 64 elements at 0.5 cycles each
    ("stream", "transpose", 4),  # 64 bytes (1 per element) at 16 bytes per cycle
])
def test_cost_area_and_energy_of_a_node_on_each_kind_of_unit(key, op, compute_cycles):
    hw = A.hw.parse_hw(every_kind())
    chip, unit = hw.chips[0], unit_of(hw, key)
    g, node = _layer(op)
    assert can_run(unit, g, node)
    cost = node_cost(hw, g, node, unit)
    assert cost.compute_cycles == compute_cycles
    mac_um2, mac_pj = tech.mac_area_um2("int8", 28), tech.mac_energy_pj("int8", 28)
    area = unit_item(hw, chip, unit)
    if unit.model.has_datapath:
        assert (area.source, area.each_mm2) == ("derived", pytest.approx(unit.model.macs() * mac_um2 * 1e-6))
        assert unit_pj_per_op(hw, chip, unit) == pytest.approx(mac_pj / 2)
    else:
        assert (area.source, area.each_mm2, unit_pj_per_op(hw, chip, unit)) == ("none", 0.0, 0.0)
    assert cost.energy_pj is not None and cost.energy_pj >= cost.flops * unit_pj_per_op(hw, chip, unit)


def test_an_array_refuses_ops_without_a_gemm_view():
    hw = A.hw.parse_hw(every_kind())
    g, node = _layer("relu")
    assert not can_run(unit_of(hw, "array").model_copy(update={"ops": ["relu"]}), g, node)


def test_hw_show_describes_a_unit_of_every_kind(tmp_path, capsys):
    path = tmp_path / "every_kind.yaml"
    path.write_text(json.dumps(every_kind()))  # JSON is YAML
    assert main(["hw", "show", str(path)]) == 0
    out = capsys.readouterr().out.splitlines()
    rows = {line.split("│")[1].strip(): line for line in out if line.count("│") > 5}  # table rows by first cell
    hw = A.hw.parse_hw(every_kind())
    for u in hw.chips[0].units:
        assert u.model.describe() in rows[u.name]
        assert ("int8" in rows[u.name]) == u.model.has_datapath  # a stream unit has no precision


def test_roofline_draws_a_ceiling_for_each_model_with_a_peak_and_names_the_others():
    hw = A.hw.parse_hw(every_kind())
    costs = [node_cost(hw, *_layer(op), unit_of(hw, key)) for key, op in
             (("array", "matmul"), ("vector", "relu"), ("per_element", "relu"), ("stream", "transpose"))]
    ax = plot_roofline(hw, costs).axes[0]
    labels = " ".join(t.get_text() for t in ax.get_legend().get_texts())
    assert "mxu (array)" in labels and "vpu (vector)" in labels
    assert "no compute roof (no arithmetic peak): pe, dma" in ax.get_title()


def test_precision_on_a_unit_without_a_datapath_is_refused_naming_it():
    bad = every_kind()
    bad["chips"][0]["units"][3]["precision"] = "int8"
    with pytest.raises(A.errors.HwConfigError, match="dma.*no arithmetic datapath, so no precision"):
        A.hw.parse_hw(bad)
