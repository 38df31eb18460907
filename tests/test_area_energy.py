"""Area and energy (issue 13): the published-figures table and its scaling rule (hw/tech.py), the area and
energy they give each unit, memory and link (cost/area.py, cost/energy.py), the step's energy, power and
area in run summaries, and hostile values of the new keys."""
import copy
import json
import math
from pathlib import Path

import pytest
import yaml

import accelsim as A
from accelsim.cli import main
from accelsim.cost.area import chip_area_mm2, link_count, machine_area_mm2
from accelsim.cost.energy import link_pj_per_byte, memory_pj_per_byte, unit_pj_per_op
from accelsim.cost.model import node_cost
from accelsim.graph.ir import Graph
from accelsim.hw import tech
from accelsim.ops import matmul
from accelsim.report import run_summary
from accelsim.sim.energy import timeline_energy
from accelsim.api import load_schedule

REPO = Path(__file__).resolve().parent.parent
SHIPPED = sorted(p.stem for p in (REPO / "hwconfigs").glob("*.yaml"))
SCALE_28 = 28 / 45  # energy at 28 nm, 0.9 V relative to 45 nm, 0.9 V
AREA_28 = (28 / 45) ** 2


def tiny(**changes) -> dict:
    """One 28 nm chip: a 4x4 int8 array, an 8-lane x 2-op fp16 vector unit, a stream unit, 64 KiB of SRAM, DRAM."""
    hw = {"name": "tiny", "clock_hz": "1 GHz", "bytes_per_element": {"float32": 1},
          "chips": [{"name": "c", "technology_nm": 28, "units": [
              {"name": "mxu", "ops": ["matmul"], "array": {"rows": 4, "cols": 4, "dataflow": "ws"},
               "reads": ["sram"], "writes": ["sram"]},
              {"name": "vpu", "categories": ["elementwise", "reduction"], "precision": "fp16",
               "vector": {"lanes": 8, "ops_per_lane_per_cycle": 2}, "reads": ["sram"], "writes": ["sram"]},
              {"name": "dma", "categories": ["data_movement"], "stream": {"bytes_per_cycle": 16},
               "reads": ["sram", "dram"], "writes": ["sram", "dram"]}],
              "memories": [{"name": "sram", "kind": "sram", "capacity_bytes": "64 KiB", "bandwidth_bytes_per_cycle": 64},
                           {"name": "dram", "kind": "dram", "capacity_bytes": "1 GiB", "bandwidth_bytes_per_cycle": 8}]}]}
    for key, value in changes.items():
        hw = A.hw.overrides.apply_overrides(hw, {key: value})
    return hw


# ---- the table ------------------------------------------------------------------------------------------

@pytest.mark.parametrize("precision, op, energy_pj, area_um2", [
    ("int8", "add", 0.03, 36), ("int16", "add", 0.05, 67), ("int32", "add", 0.1, 137), ("fp16", "add", 0.4, 1360),
    ("fp32", "add", 0.9, 4184), ("int8", "mult", 0.2, 282), ("int32", "mult", 3.1, 3495),
    ("fp16", "mult", 1.1, 1640), ("fp32", "mult", 3.7, 7700)])
def test_arithmetic_rows_are_horowitz_isscc_2014(precision, op, energy_pj, area_um2):
    row = tech.ARITHMETIC_45NM[(precision, op)]
    assert (row.energy_pj, row.area_um2) == (energy_pj, area_um2)
    assert "Horowitz" in row.source and "ISSCC 2014" in row.source


def test_the_16_bit_multiply_is_marked_as_interpolated_not_published():
    row = tech.ARITHMETIC_45NM[("int16", "mult")]
    assert "interpolated" in row.source and "not published" in row.source
    assert row.energy_pj == pytest.approx(math.sqrt(0.2 * 3.1), abs=1e-3)


def test_memory_rows_are_the_published_figures():
    assert [(r.capacity_bytes, r.energy_pj_per_64b) for r in tech.SRAM_ACCESS_45NM] == \
        [(8 * 2**10, 10.0), (32 * 2**10, 20.0), (2**20, 100.0)]
    assert tech.DRAM_ACCESS["hbm"].energy_pj_per_bit == 3.9 and tech.DRAM_ACCESS["gddr5"].energy_pj_per_bit == 14.0
    assert tech.DRAM_ACCESS["dram"].energy_pj_per_bit == pytest.approx((1300 + 2600) / 2 / 64)
    cells = {(c.node_nm, c.process): c.area_um2 for c in tech.BITCELLS}
    assert cells[(45, "Intel 45 nm")] == 0.346 and cells[(28, "TSMC 28 nm")] == 0.127
    assert cells[(22, "Intel 22 nm")] == 0.092 and cells[(14, "Intel 14 nm")] == 0.0588
    assert cells[(14, "Samsung / GlobalFoundries 14 nm")] == 0.064 and cells[(16, "TSMC 16 nm")] == 0.07
    assert cells[(7, "TSMC 7 nm")] == 0.027 and cells[(5, "TSMC 5 nm")] == 0.021


def test_every_figure_says_where_it_comes_from():
    rows = [*tech.ARITHMETIC_45NM.values(), *tech.SRAM_ACCESS_45NM, *tech.DRAM_ACCESS.values(), *tech.BITCELLS,
            tech.SRAM_ARRAY_EFFICIENCY, tech.SERIAL_LINK_PJ_PER_BIT]
    for row in rows:
        assert any(w in row.source for w in ("verified", "recalled", "assumption", "interpolated")), row
    assert tech.SRAM_ARRAY_EFFICIENCY.source.startswith("assumption")
    assert tech.SERIAL_LINK_PJ_PER_BIT.source.startswith("assumption")
    assert all(n.vdd_source for n in tech.NODES.values())


# ---- the scaling rule ---------------------------------------------------------------------------------

def test_an_int8_mac_at_28_nm():
    """E = (0.2 + 0.03) pJ x 28/45 x (0.9/0.9)^2; A = (282 + 36) um^2 x (28/45)^2."""
    assert tech.mac_energy_pj("int8", 28) == pytest.approx(0.23 * 28 / 45)
    assert tech.mac_area_um2("int8", 28) == pytest.approx(318 * (28 / 45) ** 2)


def test_energy_scales_with_the_node_and_the_square_of_its_supply():
    assert tech.mac_energy_pj("fp32", 7) == pytest.approx(4.6 * 7 / 45 * (0.75 / 0.9) ** 2)
    assert tech.energy_scale(45) == 1.0 and tech.area_scale(45) == 1.0


def test_sram_access_energy_is_log_log_in_capacity_clamped_and_banked():
    assert tech.sram_pj_per_64b(16 * 2**10, 45) == pytest.approx(10 * math.sqrt(2))  # halfway 8 KB -> 32 KB
    assert tech.sram_pj_per_64b(2**10, 45) == 10.0  # below the smallest array: its figure
    assert tech.sram_pj_per_64b(24 * 2**20, 45) == 100.0  # banks of 1 MiB
    assert tech.sram_pj_per_byte(2**20, 28) == pytest.approx(100 / 8 * SCALE_28)


def test_sram_area_is_bits_times_the_cell_over_the_array_efficiency():
    assert tech.sram_area_mm2(2**20, 28) == pytest.approx(2**23 * 0.127 / 0.7 * 1e-6)


def test_an_unknown_node_is_refused_naming_the_known_ones():
    with pytest.raises(ValueError, match="5, 7, 14, 16, 22, 28, 45"):
        tech.node(13)


# ---- area and energy of a description --------------------------------------------------------------------

def test_area_of_a_tiny_chip_by_hand():
    hw = A.load_hw(tiny())
    array = 16 * 318 * AREA_28  # 4x4 int8 MACs
    vector = 8 * 2 / 2 * (1640 + 1360) * AREA_28  # 8 lanes x 2 ops = 8 fp16 MACs
    sram = 64 * 2**10 * 8 * 0.127 / 0.7  # bits x cell / efficiency; the DRAM and the stream unit add nothing
    assert chip_area_mm2(hw, hw.chips[0]) == pytest.approx((array + vector + sram) * 1e-6)


def test_the_machine_counts_every_chip_and_the_links_given_area():
    hw = A.load_hw(tiny(**{"chips.0.count": 3}, interconnect={"topology": "ring", "bandwidth_bytes_per_cycle": 8,
                                                                 "area_mm2": 2.0}))
    assert link_count(hw) == 3
    assert machine_area_mm2(hw) == pytest.approx(3 * chip_area_mm2(hw, hw.chips[0]) + 3 * 2.0)
    full = A.load_hw(tiny(**{"chips.0.count": 4}, interconnect={"topology": "fully_connected",
                                                                  "bandwidth_bytes_per_cycle": 8}))
    assert link_count(full) == 6 and link_pj_per_byte(full) == pytest.approx(8 * tech.SERIAL_LINK_PJ_PER_BIT.value)


def test_energy_of_one_node_by_hand():
    """A 2x3 @ 3x4 matmul in int8 on the array: 48 flops at (0.2 + 0.03)/2 pJ x 28/45 each, its 6 + 12 bytes
    in and 8 bytes out at a 64 KiB SRAM's 64-bit access (log-log between 32 KB's 20 and 1 MB's 100 pJ) / 8."""
    hw = A.load_hw(tiny())
    g = Graph("one")
    matmul(g.input("a", (2, 3)), g.input("b", (3, 4)))
    cost = node_cost(hw, g, g.nodes[-1], hw.chips[0].units[0])
    per_op = 0.23 / 2 * SCALE_28
    per_byte = 20 * 5 ** (math.log(2) / math.log(32)) / 8 * SCALE_28
    assert (cost.flops, cost.bytes_read, cost.bytes_written) == (48, 18, 8)
    assert cost.energy_pj == pytest.approx(48 * per_op + 26 * per_byte)


def test_explicit_figures_win_over_the_table():
    hw = A.load_hw(tiny(**{"chips.0.units.mxu.energy_pj_per_op": 2.0, "chips.0.units.mxu.area_mm2": 5.0,
                           "chips.0.memories.sram.energy_pj_per_byte": 0.5, "chips.0.memories.sram.area_mm2": 1.0,
                           "chips.0.memories.dram.energy_pj_per_byte": 7.0}))
    chip = hw.chips[0]
    mxu, vpu = chip.units[0], chip.units[1]
    assert unit_pj_per_op(hw, chip, mxu) == 2.0 and memory_pj_per_byte(chip, chip.memories[1]) == 7.0
    g = Graph("one")
    matmul(g.input("a", (2, 3)), g.input("b", (3, 4)))
    assert node_cost(hw, g, g.nodes[-1], mxu).energy_pj == pytest.approx(48 * 2.0 + 26 * 0.5)
    vector = 8 * (1640 + 1360) * AREA_28 * 1e-6
    assert chip_area_mm2(hw, chip) == pytest.approx(5.0 + vector + 1.0)
    assert unit_pj_per_op(hw, chip, vpu) == pytest.approx(1.5 / 2 * SCALE_28)  # derived where not given


def test_without_a_node_or_figures_there_is_no_energy_and_no_area():
    hw = A.load_hw(tiny(**{"chips.0.technology_nm": None}))
    chip = hw.chips[0]
    assert unit_pj_per_op(hw, chip, chip.units[0]) is None and chip_area_mm2(hw, chip) is None
    g = Graph("one")
    matmul(g.input("a", (2, 3)), g.input("b", (3, 4)))
    s = run_summary(A.compile(g, hw), hw)
    assert s["ops_per_step"] == 48
    assert all(s[k] is None for k in ("energy_j", "energy_per_sample_j", "power_w", "tops_per_w", "area_mm2",
                                      "chip_area_mm2", "throughput_per_mm2"))


def test_a_stream_unit_or_an_unmapped_byte_count_has_no_precision():
    with pytest.raises(A.HwConfigError, match=r"chips\[0\]\.units\[2\]\.precision: .*stream unit"):
        A.load_hw(tiny(**{"chips.0.units.dma.precision": "int8"}))
    with pytest.raises(A.HwConfigError, match=r"chips\[0\]\.units\[0\]\.precision: .*needs a precision"):
        A.load_hw(tiny(**{"bytes_per_element": {"float32": 8}}))
    assert A.load_hw(tiny(**{"bytes_per_element": {"float32": 8}, "chips.0.units.mxu.precision": "int32"}))


# ---- schedules and run summaries ------------------------------------------------------------------------

def test_run_summary_energy_power_and_area_agree():
    hw = A.load_hw("tpu_v1_like")
    sched = A.compile(A.models.build("mlp", batch=8), hw)
    s = run_summary(sched, hw)
    # the energy of what the compiled timeline moves, static included (issue 28), not the cost model's sum
    assert s["energy_j"] == pytest.approx(timeline_energy(sched, hw).total_pj * 1e-12) and s["energy_j"] > 0
    assert s["energy_j"] > sched.energy_pj * 1e-12 and s["static_energy_j"] > 0
    assert s["power_w"] * s["makespan_s"] == pytest.approx(s["energy_j"])
    assert s["energy_per_sample_j"] * s["samples_per_step"] == pytest.approx(s["energy_j"])
    assert s["ops_per_step"] == sum(t.flops for t in sched.tasks) > 0
    assert s["tops_per_w"] == pytest.approx(s["ops_per_step"] / s["energy_j"] / 1e12)
    assert s["chip_area_mm2"] == {"tpu": pytest.approx(s["area_mm2"])}
    assert s["throughput_per_mm2"] == pytest.approx(s["throughput_samples_per_s"] / s["area_mm2"])


@pytest.mark.parametrize("name", SHIPPED)
def test_every_shipped_config_has_area_and_energy(name):
    hw = A.load_hw(name)
    sched = load_schedule(REPO / "schedules" / f"superres_train_{name}.json", hw=hw)
    s = run_summary(sched, hw)
    assert s["energy_j"] > 0 and s["power_w"] > 0 and s["tops_per_w"] > 0
    assert s["area_mm2"] > 0 and all(a > 0 for a in s["chip_area_mm2"].values())
    assert all(c.technology_nm is not None for c in hw.chips)


def test_transfers_and_all_reduces_pay_the_link_per_byte():
    hw = A.load_hw("groq_like_x4")
    link = link_pj_per_byte(hw)
    sched = A.compile(A.training_graph(A.models.build("mlp", batch=4)), hw, data_parallel=2, pipeline_stages=2)
    comm = [t for t in sched.tasks if t.kind in ("transfer", "allreduce")]
    assert comm and all(t.energy_pj == pytest.approx(t.bytes_moved * link) for t in comm)
    assert all(t.flops == 0 for t in comm)
    assert sched.energy_pj == pytest.approx(sum(t.energy_pj for t in sched.tasks))


def test_accumulations_carry_the_add_they_do():
    hw = A.load_hw("groq_like")
    sched = A.compile(A.training_graph(A.models.build("mlp", batch=4)), hw, microbatches=2)
    acc = [t for t in sched.tasks if t.kind == "accumulate"]
    assert acc and all(t.flops > 0 and t.energy_pj > 0 for t in acc)


def test_an_edited_flop_count_is_refused(tmp_path):
    graph = A.models.build("mlp", batch=4)
    hw = A.load_hw("tpu_v1_like")
    path = tmp_path / "s.json"
    A.save_schedule(A.compile(graph, hw), path)
    data = json.loads(path.read_text())
    data["tasks"][0]["flops"] += 1
    path.write_text(json.dumps(data))
    with pytest.raises(A.AccelsimError, match="flops"):
        load_schedule(path, graph, hw)


def test_hw_set_picks_another_node(tmp_path, capsys):
    seven = A.load_hw("tpu_v1_like", overrides={"chips.0.technology_nm": 7})
    base = A.load_hw("tpu_v1_like")
    assert chip_area_mm2(seven, seven.chips[0]) < chip_area_mm2(base, base.chips[0])
    out = tmp_path / "run.json"
    assert main(["run", "--hw", "tpu_v1_like", "--hw-set", "chips.0.technology_nm=7", "--model", "mlp", "--set",
                 "batch=2", "--no-sim", "--json", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "energy" in printed and "mm^2" in printed and "W (dynamic and static)" in printed
    summary = json.loads(out.read_text())
    assert summary["area_mm2"] == pytest.approx(machine_area_mm2(seven))
    assert summary["hw_overrides"] == {"chips.0.technology_nm": 7}


def test_hw_show_prints_area_and_energy(capsys):
    assert main(["hw", "show", "tpu_v1_like"]) == 0
    out = capsys.readouterr().out
    assert "pJ/op" in out and "pJ/byte" in out and "modelled area" in out and "off the die" in out


# ---- hostile values ------------------------------------------------------------------------------------

AREA_KEYS = {
    "chips.0.units.mxu.area_mm2": "chips[0].units[0].area_mm2",
    "chips.0.memories.sram.area_mm2": "chips[0].memories[0].area_mm2",
}
BAD_AREAS = {"negative": -1.0, "nan": math.nan, "inf": math.inf, "huge": 1e300, "above_range": 2e5,
             "denormal": 1e-320, "bool": True, "word": "big", "list": [1]}
BAD = [(key, AREA_KEYS[key], value) for key in AREA_KEYS for value in BAD_AREAS.values()] + [
    ("chips.0.technology_nm", "chips[0].technology_nm", v) for v in (13, 28.5, -7, math.nan, math.inf, True, "seven")
] + [
    ("chips.0.units.mxu.precision", "chips[0].units[0].precision", v) for v in ("int4", "bf16", True, 8, "INT8")
]


def _with_link_and_buffers(hw: dict) -> dict:
    hw = copy.deepcopy(hw)
    hw["chips"][0]["count"] = 2
    hw["interconnect"] = {"topology": "ring", "bandwidth_bytes_per_cycle": 8}
    hw["chips"][0]["units"][0]["operand_buffers"] = {"input_bytes": 1024, "weight_bytes": 1024, "output_bytes": 1024,
                                                     "bandwidth_bytes_per_cycle": 16}
    return hw


BAD += [(key, loc, v) for key, loc in (("interconnect.area_mm2", "interconnect.area_mm2"),
                                       ("chips.0.units.mxu.operand_buffers.area_mm2",
                                        "chips[0].units[0].operand_buffers.area_mm2"))
        for v in (-1.0, math.nan, math.inf, True, "x")]


@pytest.mark.parametrize("key, loc, value", BAD, ids=[f"{k}={v!r}" for k, _, v in BAD])
def test_a_hostile_value_is_refused_at_its_key_from_python_and_from_yaml(key, loc, value, tmp_path):
    data = A.hw.overrides.apply_overrides(_with_link_and_buffers(tiny()), {key: value})
    with pytest.raises(A.HwConfigError) as err:
        A.load_hw(data)
    text = str(err.value)
    assert f"{loc}: " in text and "1 problem(s)" in text and "Traceback" not in text, text
    if isinstance(value, float) and not math.isfinite(value):
        return  # YAML writes these as .nan / .inf: the same value, checked above
    path = tmp_path / "hw.yaml"
    path.write_text(yaml.safe_dump(data))
    with pytest.raises(A.HwConfigError) as err:
        A.load_hw(path)
    assert str(path) in str(err.value) and f"{loc}: " in str(err.value), str(err.value)


def test_zero_area_is_allowed_and_means_nothing_on_the_die():
    hw = A.load_hw(tiny(**{"chips.0.units.mxu.area_mm2": 0, "chips.0.units.vpu.area_mm2": 0,
                           "chips.0.memories.sram.area_mm2": 0}))
    assert chip_area_mm2(hw, hw.chips[0]) == 0.0
