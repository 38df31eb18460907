"""Energy follows the bytes (issue 28): a step's energy comes from what its timeline moved (sim/energy.py), so it
responds to the design as physics says: more SRAM that holds what spilled lowers the HBM energy, a dearer HBM
pJ/byte raises it, static energy grows with the makespan, and a sweep's energy front is not a line."""
from __future__ import annotations

import math

import pandas as pd
import pytest

import accelsim as A
from accelsim.cost.energy import chip_static_power, link_pj_per_byte, memory_pj_per_byte
from accelsim.dse.pareto import pareto_front
from accelsim.dse.plots import energy_bars, sweep_plots, sweep_view
from accelsim.errors import AccelsimError
from accelsim.hw import tech
from accelsim.hw.topology import topology_of
from accelsim.report import run_summary
from accelsim.schedule.kinds import TASK_KINDS, Holds
from accelsim.sim import simulate
from accelsim.sim.energy import ENERGY_KINDS, timeline_energy
from accelsim.viz.energy import SEGMENTS, energy_segments, plot_energy_breakdown


GOALS = {"throughput_samples_per_s": "max", "energy_per_sample_j": "min"}


def chip(sram: str = "64 KiB", hbm_bytes_per_cycle: int = 64, hbm_pj_per_byte: float | None = None,
         rows: int = 16, precision: str = "int8", technology_nm: int | None = 16):
    """One 16 nm chip: a rows x rows int8 array that reads SRAM and HBM, an fp16 vector unit, SRAM and HBM."""
    hbm = {"name": "hbm", "kind": "hbm", "capacity_bytes": "1 GiB", "bandwidth_bytes_per_cycle": hbm_bytes_per_cycle}
    if hbm_pj_per_byte is not None:
        hbm["energy_pj_per_byte"] = hbm_pj_per_byte
    return A.load_hw({
        "name": "placement", "clock_hz": "1 GHz", "bytes_per_element": {"float32": 1},
        "chips": [{"name": "c", "technology_nm": technology_nm, "units": [
            {"name": "mxu", "categories": ["tensor"], "precision": precision,
             "array": {"rows": rows, "cols": rows, "dataflow": "ws"}, "reads": ["sram", "hbm"], "writes": ["sram"]},
            {"name": "vpu", "categories": ["elementwise", "reduction", "data_movement"], "precision": "fp16",
             "vector": {"lanes": 16, "ops_per_lane_per_cycle": 1}, "reads": ["sram"], "writes": ["sram"]}],
            "memories": [{"name": "sram", "kind": "sram", "capacity_bytes": sram, "bandwidth_bytes_per_cycle": 256},
                         hbm]}]})


@pytest.fixture(scope="module")
def graph():
    """A training step whose weights, gradients and activations (~330 KiB) overflow a 64 KiB SRAM."""
    return A.training_graph(A.models.build("mlp", batch=32, sizes=(256, 256, 256, 10)))


@pytest.fixture(scope="module")
def small_sram(graph):
    hw = chip()
    return A.compile(graph, hw), hw


def hbm_bytes(schedule, hw) -> int:
    """Bytes read from and written to HBM by the compiled timeline."""
    return sum(i.quantity for i in timeline_energy(schedule, hw).items if i.memory_kind == "hbm")


# ---- the directions physics says ------------------------------------------------------------------------------

def test_more_sram_that_holds_what_spilled_lowers_the_hbm_energy(graph, small_sram):
    schedule, hw = small_sram
    big_hw = chip(sram="4 MiB")
    big = A.compile(graph, big_hw)
    assert schedule.peak_memory_bytes["chip0:hbm"] > 100_000 > big.peak_memory_bytes["chip0:hbm"]  # it spilled
    small_e, big_e = timeline_energy(schedule, hw), timeline_energy(big, big_hw)
    assert big_e.off_chip_pj < small_e.off_chip_pj / 10
    assert hbm_bytes(big, big_hw) < hbm_bytes(schedule, hw) / 10
    assert run_summary(big, big_hw).off_chip_energy_j < run_summary(schedule, hw).off_chip_energy_j


def test_a_dearer_hbm_pj_per_byte_raises_the_energy_by_the_hbm_bytes_times_the_difference(graph):
    cheap_hw, dear_hw = chip(hbm_pj_per_byte=10.0), chip(hbm_pj_per_byte=1000.0)
    cheap, dear = A.compile(graph, cheap_hw), A.compile(graph, dear_hw)
    assert dear.makespan_cycles == cheap.makespan_cycles  # an energy figure changes no timing
    moved = hbm_bytes(cheap, cheap_hw)
    assert moved > 100_000 and hbm_bytes(dear, dear_hw) == moved
    e_cheap, e_dear = timeline_energy(cheap, cheap_hw), timeline_energy(dear, dear_hw)
    assert e_dear.off_chip_pj == pytest.approx(100 * e_cheap.off_chip_pj)
    assert e_dear.total_pj - e_cheap.total_pj == pytest.approx(moved * 990.0)


def test_static_energy_grows_with_the_makespan_at_the_same_static_power(graph, small_sram):
    schedule, hw = small_sram
    slow_hw = chip(hbm_bytes_per_cycle=8)  # what spilled streams slower: a longer step, the same silicon
    slow = A.compile(graph, slow_hw)
    assert slow.makespan_cycles > schedule.makespan_cycles
    fast_e, slow_e = timeline_energy(schedule, hw), timeline_energy(slow, slow_hw)
    assert slow_e.static_pj > fast_e.static_pj
    assert slow_e.static_pj / slow_e.makespan_s == pytest.approx(fast_e.static_pj / fast_e.makespan_s)
    longer = timeline_energy(schedule, hw, makespan_cycles=3 * schedule.makespan_cycles)
    assert longer.static_pj == pytest.approx(3 * fast_e.static_pj)
    assert longer.dynamic_pj == pytest.approx(fast_e.dynamic_pj)  # idle time costs leakage only


def test_static_power_is_each_components_area_at_the_leakage_figures():
    hw = chip(sram="1 MiB")
    powers = {(p.component, p.name): p.power_w for p in chip_static_power(hw, hw.chips[0])}
    mxu_mm2 = 16 * 16 * tech.mac_area_um2("int8", 16) * 1e-6
    assert powers[("unit", "mxu")] == pytest.approx(mxu_mm2 * tech.LOGIC_LEAKAGE_W_PER_MM2.value)
    assert powers[("memory", "sram")] == pytest.approx(tech.sram_area_mm2(2**20, 16) * tech.SRAM_LEAKAGE_W_PER_MM2.value)
    assert powers[("memory", "hbm")] == pytest.approx(tech.DRAM_BACKGROUND_W_PER_GIB.value)  # 1 GiB
    # a sourced figure cites its data sheet; an assumed one says so and what was searched for a source
    assert "IDD2N" in tech.DRAM_BACKGROUND_W_PER_GIB.source and "assumption" not in tech.DRAM_BACKGROUND_W_PER_GIB.source
    for f in (tech.LOGIC_LEAKAGE_W_PER_MM2, tech.SRAM_LEAKAGE_W_PER_MM2):
        assert f.source.startswith("assumption:") and "Searched" in f.source


# ---- every byte at each memory it moves through, every op at its unit's precision ----------------------------

def test_each_memorys_bytes_are_charged_at_its_own_pj_per_byte(small_sram):
    schedule, hw = small_sram
    c = hw.chips[0]
    items = [i for i in timeline_energy(schedule, hw).items if i.kind in ("memory_read", "memory_write")]
    assert {(i.kind, i.name) for i in items} >= {("memory_read", "chip0:hbm"), ("memory_write", "chip0:hbm"),
                                                 ("memory_read", "chip0:sram"), ("memory_write", "chip0:sram")}
    for i in items:
        assert i.energy_pj == pytest.approx(i.quantity * memory_pj_per_byte(c, c.memory(i.name.split(":")[1])))


@pytest.mark.parametrize("mode", ["static", "dynamic"])
def test_the_simulated_timeline_is_charged_the_bytes_each_memory_port_moved(small_sram, mode):
    schedule, hw = small_sram
    result = simulate(schedule, hw, mode)
    moved = {c.label: c.bytes_moved for c in result.channels if c.memory}
    charged: dict[str, float] = {}
    for i in result.energy.items:
        if i.kind in ("memory_read", "memory_write"):
            charged[i.name] = charged.get(i.name, 0) + i.quantity
    assert charged == moved
    assert result.energy_pj == pytest.approx(result.energy.total_pj) == result.summary()["energy_pj"]
    assert result.energy.makespan_s == pytest.approx(result.makespan_s)
    if mode == "static":  # the replay reproduces the compiled timeline, so it costs what the summary says
        assert result.energy_pj == pytest.approx(run_summary(schedule, hw).energy_pj)


def test_operations_are_charged_at_their_units_precision(graph):
    int8_hw = chip(sram="4 MiB")
    fp16_hw = chip(sram="4 MiB", precision="fp16")
    e8 = timeline_energy(A.compile(graph, int8_hw), int8_hw)
    e16 = timeline_energy(A.compile(graph, fp16_hw), fp16_hw)
    a8 = next(i for i in e8.items if (i.kind, i.name) == ("arithmetic", "mxu"))
    a16 = next(i for i in e16.items if (i.kind, i.name) == ("arithmetic", "mxu"))
    assert a8.quantity == a16.quantity > 0
    assert a8.energy_pj == pytest.approx(a8.quantity * tech.mac_energy_pj("int8", 16) / 2)
    assert a16.energy_pj / a8.energy_pj == pytest.approx(tech.mac_energy_pj("fp16", 16) / tech.mac_energy_pj("int8", 16))


def test_a_transfer_is_charged_on_every_link_it_crosses():
    hw = A.load_hw("groq_like_x4")
    graph = A.training_graph(A.models.build("mlp", batch=4, sizes=(32, 16, 4)))
    schedule = A.compile(graph, hw, microbatches=2, pipeline_stages=4)
    topo = topology_of(hw)
    expected = 0.0
    for t in schedule.tasks:
        kind = TASK_KINDS[t.kind]
        if kind.holds is Holds.LINK:
            expected += t.bytes_moved * len(topo.route(t.chip, t.out_chip).links)
        elif kind.holds is Holds.COLLECTIVE:
            expected += t.bytes_moved
    assert expected > 0
    energy = timeline_energy(schedule, hw)
    assert energy.kind_pj("link") == pytest.approx(expected * link_pj_per_byte(hw))
    # each transfer reads its bytes on the chip it leaves and writes them on the chip it reaches, though no memory
    # port meters them: with no port traffic at all (port_bytes={}), that is all the memory traffic left
    ends = timeline_energy(schedule, hw, port_bytes={})
    moved: dict[tuple[str, str], int] = {}
    for t in schedule.tasks:
        if TASK_KINDS[t.kind].holds is Holds.LINK:
            moved[("memory_read", f"chip{t.chip}")] = moved.get(("memory_read", f"chip{t.chip}"), 0) + t.bytes_moved
            moved[("memory_write", f"chip{t.out_chip}")] = moved.get(("memory_write", f"chip{t.out_chip}"), 0) \
                + t.out_bytes
    charged: dict[tuple[str, str], int] = {}
    for i in ends.items:
        if i.kind in ("memory_read", "memory_write"):
            key = (i.kind, i.name.split(":")[0])
            charged[key] = charged.get(key, 0) + i.quantity
    assert charged == moved


def test_the_breakdown_sums_to_the_summary_and_the_json_lists_every_kind(small_sram):
    schedule, hw = small_sram
    s = run_summary(schedule, hw)
    b = s.energy_breakdown
    assert s.energy_pj == pytest.approx(b.total_pj) and s.energy_j == pytest.approx(b.total_pj * 1e-12)
    assert sum(b.kind_pj(k) for k in ENERGY_KINDS) == pytest.approx(b.total_pj)
    assert s.static_energy_j + s.dynamic_energy_j == pytest.approx(s.energy_j)
    data = s.to_dict()
    assert list(data["energy_by_component_pj"]) == list(ENERGY_KINDS)
    assert data["energy_by_component_pj"]["static"]["c:hbm"] > 0 and data["static_energy_j"] == s.static_energy_j
    with pytest.raises(ValueError, match="no energy kind 'dram'"):
        b.kind_pj("dram")


def test_without_energy_figures_there_is_no_breakdown(graph):
    hw = chip(technology_nm=None)
    schedule = A.compile(graph, hw)
    assert schedule.energy_pj is None and timeline_energy(schedule, hw) is None
    s = run_summary(schedule, hw)
    assert s.energy_breakdown is None and s.static_energy_j is None and s.to_dict()["energy_by_component_pj"] is None


# ---- a sweep: distinct energies, a front that is not a line --------------------------------------------------

def test_a_small_sweeps_energy_front_is_not_a_line(graph):
    """A bigger array is faster until it idles: its leakage over the step outgrows the time it saves, so energy
    per sample rises ever faster along the front; a small SRAM that spills loses on both."""
    rows = []
    for sram in ("256 KiB", "4 MiB"):
        for array in (64, 128, 256):
            hw = chip(sram=sram, hbm_bytes_per_cycle=16, rows=array)
            s = run_summary(A.compile(graph, hw), hw)
            rows.append({"throughput_samples_per_s": s.throughput_samples_per_s,
                         "energy_per_sample_j": s.energy_per_sample_j})
    df = pd.DataFrame(rows)
    assert df["energy_per_sample_j"].nunique() == len(df)  # every design its own energy
    front = pareto_front(df, "throughput_samples_per_s", "energy_per_sample_j",
                         {"throughput_samples_per_s": "max", "energy_per_sample_j": "min"})
    pts = sorted(zip(front["throughput_samples_per_s"], front["energy_per_sample_j"]))
    assert len(pts) >= 3
    (x0, y0), (x1, y1) = pts[0], pts[-1]
    # some front point lies off the chord between the ends, by more than 1% of the energy range
    off = [abs((y - y0) - (y1 - y0) * (x - x0) / (x1 - x0)) for x, y in pts[1:-1]]
    assert max(off) > 0.01 * (max(y for _, y in pts) - min(y for _, y in pts))


# ---- the stacked bar ----------------------------------------------------------------------------------------

def test_the_stacked_bar_stacks_each_designs_segments_to_its_total(graph, small_sram):
    schedule, hw = small_sram
    big_hw = chip(sram="4 MiB")
    designs = {"64 KiB": timeline_energy(schedule, hw), "4 MiB": timeline_energy(A.compile(graph, big_hw), big_hw)}
    bars = {label: energy_segments(b) for label, b in designs.items()}
    for label, b in designs.items():
        assert sum(bars[label].values()) == pytest.approx(b.total_pj * 1e-12) and set(bars[label]) == set(SEGMENTS)
    fig = plot_energy_breakdown(bars)
    ax = fig.axes[0]
    tops: dict[float, float] = {}
    for patch in ax.patches:
        x = round(patch.get_x() + patch.get_width() / 2)
        tops[x] = max(tops.get(x, 0.0), patch.get_y() + patch.get_height())
    assert [tops[0], tops[1]] == pytest.approx([designs["64 KiB"].total_pj * 1e-12, designs["4 MiB"].total_pj * 1e-12])
    assert [t.get_text() for t in ax.get_legend().get_texts()][-1] == "static"


@pytest.mark.parametrize("bars, message", [
    ({"a": {"dram": 1.0}}, "design 'a' has segment 'dram'; the segments are arithmetic"),
    ({"a": {"static": math.nan}}, "design 'a', segment 'static' is nan; expected a finite energy >= 0"),
    ({"a": {"links": -1.0}}, "segment 'links' is -1.0"),
])
def test_the_stacked_bar_refuses_unknown_segments_and_bad_values(bars, message):
    with pytest.raises(AccelsimError, match=message):
        plot_energy_breakdown(bars)


def test_a_sweep_with_the_energy_metrics_gets_a_stacked_bar_per_point(tmp_path):
    rows = []
    for point, rows_ in enumerate((64, 128, 256)):
        static, arith, memory, off_chip, link, inside = 1.0 * point, 2.0, 3.0 + point, 1.0 + point, 0.5, 0.25
        dynamic = arith + memory + link + inside
        rows.append({"point": point, "point_id": f"p{point}", "config_hash": None, "rows": rows_,
                     "throughput_samples_per_s": 100.0 * (point + 1), "energy_per_sample_j": dynamic + static,
                     "energy_j": dynamic + static, "static_energy_j": static, "dynamic_energy_j": dynamic,
                     "arithmetic_energy_j": arith, "memory_energy_j": memory, "off_chip_energy_j": off_chip,
                     "link_energy_j": link, "feasible": True, "error": "", "wall_s": 0.1})
    df = pd.DataFrame(rows)
    bars = energy_bars(sweep_view(df, ["rows"], "t"))
    assert [sum(b.values()) for b in bars.values()] == pytest.approx(list(df["energy_j"]))
    assert [b["unit buffers"] for b in bars.values()] == pytest.approx([0.25] * 3)
    paths = sweep_plots(df, tmp_path, parameters=["rows"], metrics=["energy_j"], objectives=GOALS,
                        compile_point=None, label="t")
    assert tmp_path / "energy_breakdown.png" in paths
    without = sweep_plots(df.drop(columns=["link_energy_j"]), tmp_path / "b", parameters=["rows"],
                          metrics=["energy_j"], objectives=GOALS, compile_point=None, label="t")
    assert not any(p.name == "energy_breakdown.png" for p in without)
    assert "no energy breakdown: it needs the metrics" in (tmp_path / "b" / "plots.log").read_text()
