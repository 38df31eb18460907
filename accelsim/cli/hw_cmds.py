"""CLI commands on hardware: hw validate/show, cost, roofline."""
from __future__ import annotations

import argparse
import math
from dataclasses import asdict
from pathlib import Path

from rich.console import Console
from rich.table import Table

from accelsim.cli.common import (add_hw_set_arg, add_json_arg, add_model_args, build_model, format_si, path_arg, write_json,
                                 write_problem)
from accelsim.cost.area import chip_area_mm2, link_count, memory_item, operand_buffers_item, unit_item
from accelsim.cost.energy import link_pj_per_byte, memory_pj_per_byte, unit_pj_per_op
from accelsim.cost.model import NodeCost, best_cost, capable_units, graph_costs, node_cost
from accelsim.cost.roofline import achieved_ops_per_s, chip_peak_ops_per_s, roofs, unit_peak_ops_per_s
from accelsim.errors import AccelsimError, MappingError
from accelsim.graph.ir import Graph
from accelsim.hw import load_hw
from accelsim.hw.overrides import parse_assignments
from accelsim.hw.spec import HwSpec
from accelsim.ops import conv2d, matmul


def _binary(x: float) -> str:
    for factor, prefix in ((2**40, "Ti"), (2**30, "Gi"), (2**20, "Mi"), (2**10, "Ki")):
        if x >= factor:
            return f"{x / factor:.4g} {prefix}B"
    return f"{x:.0f} B"


def _mm2(x: float | None, source: str = "") -> str:
    """An area for a table cell: '-' when unknown, '0' off the die or without a datapath."""
    if x is None:
        return "-"
    return "0" if x == 0 else f"{x:.4g} mm^2" + (" (given)" if source == "explicit" else "")


def _pj(x: float | None, per: str) -> str:
    return "-" if x is None else f"{x:.4g} pJ/{per}"


def _console() -> Console:
    return Console(width=160, highlight=False, soft_wrap=True)


def cmd_hw_validate(args: argparse.Namespace) -> int:
    failed = []
    for path in args.files:
        try:
            hw = load_hw(path)
            print(f"{path}: ok ({hw.name}: {hw.n_chips} chip(s), {sum(len(c.units) for c in hw.chips)} unit kinds)")
        except AccelsimError as e:
            failed.append(str(e))
    if failed:
        raise AccelsimError("\n".join(failed))
    return 0


def cmd_hw_show(args: argparse.Namespace) -> int:
    hw = load_hw(args.file)
    console = _console()
    console.print(f"{hw.name}: {hw.description}".rstrip(": "))
    console.print(f"clock {format_si(hw.clock_hz, 'Hz')}, {hw.n_chips} chip(s), bytes per element "
                  + ", ".join(f"{k}={v}" for k, v in hw.bytes_per_element.items()))
    for chip in hw.chips:
        node = f", {chip.technology_nm} nm" if chip.technology_nm is not None else ""
        units = Table(title=f"units of chip {chip.name!r} (x{chip.count}{node})")
        for col in ("unit", "count", "compute model", "runs", "peak ops/s", "latency", "reads -> writes",
                    "precision", "energy", "area each"):
            units.add_column(col)
        for u in chip.units:
            model = {"array": lambda a: f"{a.rows}x{a.cols} systolic, {a.dataflow}"
                              + (f", folds overlap ({a.fold_overlap})" if a.fold_overlap != "none" else ""),
                     "vector": lambda v: f"{v.lanes} lanes x {v.ops_per_lane_per_cycle:g} ops",
                     "per_element": lambda p: f"{p.cycles_per_element:g} cycles/element",
                     "stream": lambda s: f"{s.bytes_per_cycle:g} B/cycle"}[u.compute_model](getattr(u, u.compute_model))
            runs = ", ".join(list(u.categories) + u.ops) + (f" when {u.when}" if u.when else "")
            peak = unit_peak_ops_per_s(hw, u)
            area = unit_item(hw, chip, u)
            buffers = operand_buffers_item(chip, u)
            area_text = _mm2(area.each_mm2, area.source) + (f" + buffers {_mm2(buffers.each_mm2, buffers.source)}"
                                                             if buffers is not None else "")
            units.add_row(u.name, str(u.count), model, runs, format_si(peak, "op/s") if peak else "-",
                          f"{u.latency_cycles} cyc", f"{', '.join(u.reads)} -> {', '.join(u.writes)}",
                          "-" if u.stream is not None else (hw.precision(u) or "-"),
                          _pj(unit_pj_per_op(hw, chip, u), "op"), area_text)
        console.print(units)
        mems = Table(title=f"memories of chip {chip.name!r}")
        for col in ("memory", "kind", "capacity", "bandwidth", "latency", "ridge point", "energy", "area"):
            mems.add_column(col)
        for m, roof in zip(chip.memories, roofs(hw, chip)):
            area = memory_item(chip, m)
            mems.add_row(m.name, m.kind, _binary(m.capacity_bytes), format_si(roof.bandwidth_bytes_per_s, "B/s"),
                         f"{m.latency_cycles} cyc", f"{roof.ridge_ops_per_byte:.4g} op/B",
                         _pj(memory_pj_per_byte(chip, m), "byte"),
                         "off the die" if area.source == "off-die" else _mm2(area.each_mm2, area.source))
        console.print(mems)
        total = chip_area_mm2(hw, chip)
        console.print(f"chip peak {format_si(chip_peak_ops_per_s(hw, chip), 'op/s')}, on-chip storage "
                      f"{_binary(sum(m.capacity_bytes for m in chip.memories if m.kind in ('sram', 'cache')))}, "
                      f"modelled area {_mm2(total)} per chip (datapaths and SRAM only: cost/area.py)")
    if hw.interconnect:
        ic = hw.interconnect
        console.print(f"interconnect: {ic.topology}, {link_count(hw)} link(s), "
                      f"{format_si(ic.bytes_per_cycle(hw.clock_hz) * hw.clock_hz, 'B/s')} per link, "
                      f"{ic.link_latency_cycles} cycles latency, {_pj(link_pj_per_byte(hw), 'byte')}, area per link "
                      f"{_mm2(ic.area_mm2 or 0.0, 'explicit' if ic.area_mm2 is not None else '')}")
    return 0


MAX_DIM = 2**31 - 1
"""Largest layer dimension --gemm/--conv take: beyond it FLOP counts stop being exact in float64."""


def _parse_ints(text: str, n_min: int, n_max: int, what: str) -> list[int]:
    try:
        vals = [int(v) for v in text.split(",")]
    except ValueError:
        vals = []
    if not n_min <= len(vals) <= n_max or any(v <= 0 for v in vals[:7]) or any(abs(v) > MAX_DIM for v in vals):
        count = str(n_min) if n_min == n_max else f"{n_min} to {n_max}"
        raise AccelsimError(f"--{what} expects {count} comma-separated integers (the first {min(n_min, 7)} "
                            f"positive, each at most {MAX_DIM}), got {text!r}")
    return vals


def _single_layer(args: argparse.Namespace, hw: HwSpec) -> Graph:
    g = Graph("layer", dtype="float32")
    if args.gemm is not None:
        m, k, n = _parse_ints(args.gemm, 3, 3, "gemm")
        matmul(g.input("a", (m, k)), g.input("b", (k, n)))
    else:
        vals = _parse_ints(args.conv, 7, 9, "conv")
        n, c, h, w, o, kh, kw = vals[:7]
        stride, pad = (vals[7] if len(vals) > 7 else 1), (vals[8] if len(vals) > 8 else 0)
        conv2d(g.input("x", (n, c, h, w)), g.input("w", (o, c, kh, kw)), stride=stride, padding=pad)
    return g


def _cost_json(c: NodeCost) -> dict:
    return {**asdict(c), "arithmetic_intensity": c.arithmetic_intensity, "level_bytes": c.level_bytes}


def cmd_cost(args: argparse.Namespace) -> int:
    hw = load_hw(args.hw, overrides=parse_assignments(args.hw_set))
    if args.unit is not None and args.gemm is None and args.conv is None:
        raise AccelsimError(f"--unit {args.unit} applies to one layer: give --gemm M,K,N or --conv N,C,H,W,O,KH,KW")
    if args.gemm is not None or args.conv is not None:
        g = _single_layer(args, hw)
        node = g.nodes[-1]
        if args.unit:
            units = [u for u in capable_units(hw, g, node) if u.name == args.unit]
            if not units:
                raise MappingError(f"unit {args.unit!r} of {hw.name} cannot run {node.op} (or does not exist); "
                                   f"capable: {', '.join(u.name for u in capable_units(hw, g, node))}")
            cost = node_cost(hw, g, node, units[0])
        else:
            cost = best_cost(hw, g, node)
        for key, value in _cost_json(cost).items():
            print(f"{key:22s} {value}")
        write_json(args.json, _cost_json(cost))
        return 0
    graph = build_model(args)
    costs = graph_costs(hw, graph)
    table = Table(title=f"{graph.name} on {hw.name}")
    stalls = any(c.stall_cycles for c in costs)  # only units with operand buffers stall
    columns = ("node", "op", "unit", "cycles") + (("stalls",) if stalls else ()) + ("bound", "util", "FLOP/B")
    for col in columns:
        table.add_column(col, justify="right" if col in ("cycles", "stalls", "util", "FLOP/B") else "left")
    for c in costs:
        table.add_row(f"%{c.node}", c.op, c.unit, str(c.cycles), *((str(c.stall_cycles),) if stalls else ()),
                      c.bound, f"{c.utilization:.2f}", f"{c.arithmetic_intensity:.3g}")
    console = _console()
    if not args.summary:
        console.print(table)
    total = sum(c.cycles for c in costs)
    by_unit: dict[str, int] = {}
    for c in costs:
        by_unit[c.unit] = by_unit.get(c.unit, 0) + c.cycles
    console.print(f"{len(costs)} nodes, {sum(c.flops for c in costs):.4g} FLOPs, "
                  f"{sum(c.bytes_read + c.bytes_written for c in costs):.4g} bytes moved")
    console.print(f"serial cycles {total} ({total / hw.clock_hz * 1e3:.4g} ms at {format_si(hw.clock_hz, 'Hz')}); "
                  f"memory-bound nodes: {sum(c.bound == 'memory' for c in costs)}")
    console.print("cycles by unit: " + ", ".join(f"{u} {v}" for u, v in sorted(by_unit.items())))
    write_json(args.json, {"hw": hw.name, "model": args.model, "total_cycles": total,
                           "nodes": [_cost_json(c) for c in costs]})
    return 0


def cmd_roofline(args: argparse.Namespace) -> int:
    from accelsim.viz.roofline import check_figure_path, plot_roofline

    into_dir = args.output is None or Path(args.output).is_dir()
    if not into_dir:
        check_figure_path(args.output)  # before any work
    hw = load_hw(args.hw, overrides=parse_assignments(args.hw_set))
    graph = build_model(args)
    costs = graph_costs(hw, graph)
    name = f"roofline_{graph.name}_{hw.name}.png"
    out = (Path(args.output or "plots") / name) if into_dir else Path(args.output)
    try:
        plot_roofline(hw, costs, path=out)
    except OSError as e:
        raise AccelsimError(f"cannot write the roofline to {str(out)!r}: {write_problem(out, e)}") from None
    print(f"wrote {out} ({len(costs)} nodes)")
    write_json(args.json, {"hw": hw.name, "graph": graph.name, "figure": str(out), "nodes": [
        {"node": c.node, "op": c.op, "unit": c.unit, "arithmetic_intensity": c.arithmetic_intensity,
         "attained_ops_per_s": achieved_ops_per_s(hw, c)} for c in costs
        if c.flops > 0 and math.isfinite(c.arithmetic_intensity)]})  # the plotted points
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    hw = sub.add_parser("hw", help="validate or show hardware descriptions")
    hw_sub = hw.add_subparsers(dest="hw_command", required=True)
    p = hw_sub.add_parser("validate", help="check YAML files against the schema")
    p.add_argument("files", nargs="+", type=path_arg)
    p.set_defaults(fn=cmd_hw_validate)
    p = hw_sub.add_parser("show", help="units, memories, peaks and ridge points")
    p.add_argument("file", type=path_arg, help="hardware YAML or bundled name")
    p.set_defaults(fn=cmd_hw_show)

    p = sub.add_parser("cost", help="per-node cost of a model, or of one GEMM / conv layer")
    p.add_argument("--hw", required=True, type=path_arg, help="hardware YAML or bundled name")
    add_hw_set_arg(p)
    add_model_args(p, training=True)
    add_json_arg(p)
    layer = p.add_mutually_exclusive_group()
    layer.add_argument("--gemm", metavar="M,K,N", help="cost one (M,K) @ (K,N) matmul instead of a model")
    layer.add_argument("--conv", metavar="N,C,H,W,O,KH,KW[,S,P]", help="cost one conv2d layer instead of a model")
    p.add_argument("--unit", help="with --gemm/--conv: use this unit instead of the cheapest")
    p.add_argument("--summary", action="store_true", help="totals only, no per-node table")
    p.set_defaults(fn=cmd_cost)

    p = sub.add_parser("roofline", help="roofline plot of a model's nodes on a hardware description")
    p.add_argument("--hw", required=True, type=path_arg, help="hardware YAML or bundled name")
    add_hw_set_arg(p)
    add_model_args(p, training=True)
    add_json_arg(p, "the plotted points")
    p.add_argument("-o", "--output", type=path_arg, metavar="PATH",
                   help="figure file ending in .png, .pdf or .svg, or an existing directory to write "
                        "roofline_<graph>_<hw>.png in (default: the directory plots/)")
    p.set_defaults(fn=cmd_roofline)
