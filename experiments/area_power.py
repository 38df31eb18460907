"""Modelled silicon area and dynamic power of the shipped tpu_v1_like and groq_like configs next to the
published die areas and TPU v1's published power, as ratios. Nothing is fitted: every figure comes from the
published table and scaling rule of accelsim/hw/tech.py through cost/area.py and cost/energy.py.

The modelled area counts datapaths (multipliers and adders) and SRAM arrays only, and the modelled power
only the dynamic energy of arithmetic and memory accesses (cost/area.py and cost/energy.py say what is
left out), so both are floors of the real chip's figures; the ratios say how much of the chip that floor is.
Run: python experiments/area_power.py
"""
from __future__ import annotations

import time

import accelsim as A
from accelsim.cost.area import AreaItem, chip_area_mm2, chip_items
from accelsim.cost.energy import unit_pj_per_op
from accelsim.graph.ir import Graph
from accelsim.hw import tech
from accelsim.passes import inference_graph
from accelsim.report import run_summary
from published_figures import TPU_APPS  # the ISCA 2017 applications and their analogues' sizes

# Published die areas. TPU v1: Jouppi et al., "In-Datacenter Performance Analysis of a Tensor Processing
# Unit", ISCA 2017, Table 2: die size < 331 mm^2 in 28 nm (recalled, not rechecked against the paper).
# Groq TSP: Abts et al., ISCA 2020, abstract: a 25 x 29 mm die in 14 nm (as quoted in hwconfigs/groq_like.yaml).
DIE_MM2 = {"tpu_v1_like": 331.0, "groq_like": 725.0}
# TPU v1 power, Jouppi et al. ISCA 2017 Table 2: 75 W TDP and 40 W busy (verified via news coverage of the
# paper: "draws 40 watts of power (75 watts TDP)"); 28 W idle (recalled, not rechecked). Busy minus idle is
# the part of the busy power that work adds, the nearest published counterpart of a dynamic-only model.
TPU_TDP_W, TPU_BUSY_W, TPU_IDLE_W = 75.0, 40.0, 28.0
NOT_COUNTED = ("wiring and global interconnect, control and instruction logic, clock trees, I/O PHYs "
               "(PCIe, DDR3, chip-to-chip SerDes), PE pipeline registers and accumulators beyond each MAC's adder "
               "(TPU v1's 4 MiB of accumulators: buffers without a capacity), test logic, floor-plan white "
               "space; leakage (static power), clocks and control in the power")


def _line(item: AreaItem, total: float) -> str:
    each = "-" if item.each_mm2 is None else f"{item.each_mm2:.4g}"
    area = item.total_mm2 or 0.0
    return (f"  {item.component:16s} {item.name:16s} {item.count:5d} {each:>10s} {area:10.2f} "
            f"{area / total if total else 0:7.1%}  ({item.source})")


def area(hw_name: str) -> tuple[str, float, float]:
    """Modelled area of one chip by component, and its ratio to the published die."""
    hw = A.load_hw(hw_name)
    chip = hw.chips[0]
    total = chip_area_mm2(hw, chip)
    n = tech.node(chip.technology_nm)
    print(f"\n## {hw_name}: modelled area at {n.nm} nm (SRAM cell {n.bitcell.area_um2} um^2, {n.bitcell.process}; "
          f"array efficiency {tech.SRAM_ARRAY_EFFICIENCY.value})")
    print(f"  {'component':16s} {'name':16s} {'count':>5s} {'mm^2 each':>10s} {'mm^2':>10s} {'share':>7s}")
    for item in chip_items(hw, chip):
        print(_line(item, total))
    die = DIE_MM2[hw_name]
    print(f"  total {total:.1f} mm^2 vs the published die {die:.0f} mm^2: ratio {total / die:.3f}")
    return hw_name, total, die


def _tpu_graph(layers: int | None, weights: float, batch: int) -> Graph:
    """The analogue of one ISCA 2017 application (as experiments/published_figures.py builds it)."""
    if layers is None:
        return inference_graph(A.models.build("resnet50", batch=batch))
    width = round((weights / layers) ** 0.5)
    return inference_graph(A.models.build("mlp", batch=batch, sizes=(width,) * (layers + 1)))


def tpu_power(apps: tuple[str, ...]) -> list[tuple[str, float, float]]:
    """Dynamic power of the TPU v1 analogues, split into arithmetic and memory traffic, vs the published power."""
    hw = A.load_hw("tpu_v1_like")
    chip = hw.chips[0]
    units = {u.name: u for u in chip.units}
    print(f"\n## tpu_v1_like: modelled dynamic power vs Jouppi et al. (ISCA 2017): {TPU_BUSY_W:.0f} W busy, "
          f"{TPU_IDLE_W:.0f} W idle, {TPU_TDP_W:.0f} W TDP")
    print(f"  {'app':6s} {'power W':>8s} {'arith W':>8s} {'memory W':>8s} {'TOPS':>6s} {'TOPS/W':>7s} "
          f"{'/ busy':>7s} {'/ (busy-idle)':>13s}")
    rows = []
    for name in apps:
        _, layers, weights, batch = TPU_APPS[name]
        sched = A.compile(_tpu_graph(layers, weights, batch), hw)
        s = run_summary(sched, hw)
        arith_j = sum(t.flops * unit_pj_per_op(hw, chip, units[t.resource]) for t in sched.tasks
                      if t.resource in units) * 1e-12
        seconds = s.makespan_s
        power = s.dynamic_energy_j / seconds  # dynamic only (s.power_w adds static), as busy - idle is
        tops = s.ops_per_step / seconds / 1e12
        print(f"  {name:6s} {power:8.2f} {arith_j / seconds:8.2f} {power - arith_j / seconds:8.2f} {tops:6.1f} "
              f"{s.ops_per_step / s.dynamic_energy_j / 1e12:7.2f} {power / TPU_BUSY_W:7.3f} {power / (TPU_BUSY_W - TPU_IDLE_W):13.3f}",
              flush=True)
        rows.append((name, power, s.ops_per_step / s.dynamic_energy_j / 1e12))
    return rows


def main() -> None:
    t0 = time.perf_counter()
    areas = [area(name) for name in ("tpu_v1_like", "groq_like")]
    power = tpu_power(("MLP0", "MLP1", "CNN0"))
    print(f"\nNot counted (a modelled figure is a floor): {NOT_COUNTED}.")
    print("\nsummary (no figure fitted)")
    for name, modelled, die in areas:
        print(f"  {name:12s} area {modelled:7.1f} mm^2 / published {die:4.0f} mm^2 = {modelled / die:.3f}")
    for name, watts, tops_per_w in power:
        print(f"  tpu_v1_like {name:5s} dynamic power {watts:6.2f} W / busy {TPU_BUSY_W:.0f} W = "
              f"{watts / TPU_BUSY_W:.3f}; / (busy - idle) {TPU_BUSY_W - TPU_IDLE_W:.0f} W = "
              f"{watts / (TPU_BUSY_W - TPU_IDLE_W):.3f}; {tops_per_w:.2f} TOPS/W")
    print(f"\nwall time {time.perf_counter() - t0:.1f} s")


if __name__ == "__main__":
    main()
