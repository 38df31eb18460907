"""CLI commands on hardware: hw validate/show/schema/template, cost, roofline."""
from __future__ import annotations

import argparse
import math
from dataclasses import asdict
from pathlib import Path

from rich.markup import escape
from rich.table import Table

from accelsim import fmt
from accelsim.cli.common import (DEFAULT_HW, STEP_RULE, add_hw_args, add_json_arg, add_model_args, check_file_target,
                                 load_hw_arg, model_label, out_console, path_arg, positive_int, step_graph, step_name,
                                 write_json, write_problem)
from accelsim.cli.progress import phase
from accelsim.cost.area import chip_area_mm2, link_count, memory_item, operand_buffers_item, unit_item
from accelsim.cost.energy import link_pj_per_byte, memory_pj_per_byte, unit_pj_per_op
from accelsim.cost.model import NodeCost, best_cost, capable_units, graph_costs, node_cost
from accelsim.cost.roofline import achieved_ops_per_s, chip_peak_ops_per_s, roofs, unit_peak_ops_per_s
from accelsim.errors import AccelsimError, MappingError
from accelsim.graph.ir import Graph
from accelsim.hw import load_hw
from accelsim.hw.schema import schema_text
from accelsim.hw.peaks import STEP_PRECISIONS
from accelsim.hw.spec import Chip, HwSpec
from accelsim.hw.template import SCHEMA_FILE, hw_template
from accelsim.layer_names import layer_names
from accelsim.ops import conv2d, matmul


def _mm2(x: float | None, source: str = "") -> str:
    """An area for a table cell: '-' when unknown, '0' off the die or without a datapath."""
    if x is None:
        return "-"
    return "0" if x == 0 else f"{fmt.number(x)} mm^2" + (" (given)" if source == "explicit" else "")


def _pj(x: float | None, per: str) -> str:
    return "-" if x is None else f"{fmt.number(x)} pJ/{per}"


def _peak_lines(hw: HwSpec, chip: Chip) -> list[str]:
    """A unit's `peaks:` as `hw show` prints them: per unit with a datapath, a line per step precision (the
    declared dense peak of all its instances, its own precision run at its compute model's rate, or refused);
    one line for a unit that declares none."""
    lines = []
    for u in chip.units:
        if not u.model.has_datapath:
            continue
        own = hw.precision(u)
        if u.peaks is None:
            runs = (f"it runs a step only at its own precision, {own}" if own in STEP_PRECISIONS
                    else "a step at any --precision is refused")
            lines.append(f"peaks of unit {u.name!r}: none declared, so {runs} (add `peaks:` for others)")
            continue
        lines.append(f"peaks of unit {u.name!r} by step precision (--precision; dense, all {fmt.count(u.count)} "
                     f"together):")
        for p in STEP_PRECISIONS:
            declared = u.peaks.at(p)
            if declared is not None:
                text = f"{fmt.number(declared)} TFLOP/s"
            elif p == own:
                text = "its own precision: the compute model's rate"
            else:
                text = "not declared: a step at it is refused"
            lines.append(f"  {p:<5} {text}")
    return lines


def cmd_hw_validate(args: argparse.Namespace) -> int:
    failed = []
    for path in args.files:
        try:
            hw = load_hw(path)
            print(f"{path}: ok ({hw.name}: {fmt.plural(hw.n_chips, 'chip')}, "
                  f"{fmt.plural(sum(len(c.units) for c in hw.chips), 'unit kind')})")
        except AccelsimError as e:
            failed.append(str(e))
    if failed:
        raise AccelsimError("\n".join(failed))
    return 0


def cmd_hw_show(args: argparse.Namespace) -> int:
    hw = load_hw(args.file or DEFAULT_HW)
    console = out_console()
    console.print(f"{hw.name}: {hw.description}".rstrip(": "))
    console.print(f"clock {fmt.si(hw.clock_hz, 'Hz')}, {fmt.plural(hw.n_chips, 'chip')}, bytes per element "
                  + ", ".join(f"{k}={v}" for k, v in hw.bytes_per_element.items()))
    for chip in hw.chips:
        node = f", {chip.technology_nm} nm" if chip.technology_nm is not None else ""
        units = Table(title=f"units of chip {chip.name!r} (x{chip.count}{node})")
        for col in ("unit", "count", "compute model", "runs", "peak ops/s", "latency", "reads -> writes",
                    "precision", "energy", "area each"):
            units.add_column(col)
        for u in chip.units:
            runs = ", ".join(list(u.categories) + u.ops) + (f" when {u.when}" if u.when else "")
            peak = unit_peak_ops_per_s(hw, u)
            area = unit_item(hw, chip, u)
            buffers = operand_buffers_item(chip, u)
            area_text = _mm2(area.each_mm2, area.source) + (f" + buffers {_mm2(buffers.each_mm2, buffers.source)}"
                                                             if buffers is not None else "")
            units.add_row(u.name, fmt.count(u.count), u.model.describe(fmt.number), runs,
                          fmt.si(peak, "op/s") if peak else "-", f"{fmt.count(u.latency_cycles)} cyc",
                          f"{', '.join(u.reads)} -> {', '.join(u.writes)}",
                          (hw.precision(u) or "-") if u.model.has_datapath else "-",
                          _pj(unit_pj_per_op(hw, chip, u), "op"), area_text)
        console.print(units)
        for line in _peak_lines(hw, chip):
            console.print(line)
        mems = Table(title=f"memories of chip {chip.name!r}")
        for col in ("memory", "kind", "capacity", "bandwidth", "latency", "ridge point", "energy", "area"):
            mems.add_column(col)
        for m, roof in zip(chip.memories, roofs(hw, chip)):
            area = memory_item(chip, m)
            mems.add_row(m.name, m.kind, fmt.nbytes(m.capacity_bytes), fmt.rate(roof.bandwidth_bytes_per_s, "B/s"),
                         f"{fmt.count(m.latency_cycles)} cyc", f"{fmt.number(roof.ridge_ops_per_byte)} op/B",
                         _pj(memory_pj_per_byte(chip, m), "byte"),
                         "off the die" if area.source == "off-die" else _mm2(area.each_mm2, area.source))
        console.print(mems)
        total = chip_area_mm2(hw, chip)
        console.print(f"chip peak {fmt.si(chip_peak_ops_per_s(hw, chip), 'op/s')}, on-chip storage "
                      f"{fmt.nbytes(sum(m.capacity_bytes for m in chip.memories if m.kind in ('sram', 'cache')))}, "
                      f"modelled area {_mm2(total)} per chip (datapaths and SRAM only)")
    if hw.interconnect:
        ic = hw.interconnect
        console.print(f"interconnect: {ic.topology}, {fmt.plural(link_count(hw), 'link')}, "
                      f"{fmt.rate(ic.bytes_per_cycle(hw.clock_hz) * hw.clock_hz, 'B/s')} per link, "
                      f"{fmt.cycles(ic.link_latency_cycles)} latency, {_pj(link_pj_per_byte(hw), 'byte')}, "
                      f"area per link "
                      f"{_mm2(ic.area_mm2 or 0.0, 'explicit' if ic.area_mm2 is not None else '')}")
    return 0


def _write_text(path: str, text: str, what: str) -> None:
    try:
        Path(path).write_text(text, encoding="utf-8")
    except OSError as e:
        raise AccelsimError(f"cannot write {what} to {path!r}: {write_problem(path, e)}") from None


def cmd_hw_schema(args: argparse.Namespace) -> int:
    if args.output is None:
        print(schema_text(), end="")
        return 0
    check_file_target(args.output, "-o")
    _write_text(args.output, schema_text(), "the schema")
    print(f"wrote {args.output}: the JSON Schema of a hardware file (a first line "
          f"`# yaml-language-server: $schema={args.output}` in a YAML file lets an editor check it)")
    return 0


def cmd_hw_template(args: argparse.Namespace) -> int:
    text = hw_template(args.chips)
    if args.output is None:
        print(text, end="")
        return 0
    check_file_target(args.output, "-o")
    if Path(args.output).exists():
        raise AccelsimError(f"-o {args.output}: the file exists; the template does not overwrite a description "
                            f"(remove it first, or choose another name)")
    _write_text(args.output, text, "the template")
    print(f"wrote {args.output}: edit it, then check it with `accelsim hw validate {args.output}`")
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


def _layer_value(key: str, value: object) -> str:
    """One field of a layer's NodeCost as `cost --gemm/--conv` prints it."""
    if key == "node":
        return f"%{value}"
    if key == "flops":
        return f"{fmt.count(value)} FLOP"
    if key == "cycles":
        return fmt.cycles(value)
    if key == "energy_pj":
        return "-" if value is None else fmt.si(value * 1e-12, "J")
    if key == "arithmetic_intensity":
        return f"{fmt.number(value)} FLOP/B"
    if key.startswith("bytes_") or key == "level_bytes":
        return (", ".join(f"{k} {fmt.nbytes(v)}" for k, v in value.items()) if isinstance(value, dict)
                else fmt.nbytes(value))
    return fmt.metric(key, value)


def cmd_cost(args: argparse.Namespace) -> int:
    hw = load_hw_arg(args)
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
            label = key.removesuffix("_pj")  # printed with its own unit ("10.52 uJ"), not in pJ
            print(f"{label:22s} {_layer_value(key, value)}")
        write_json(args.json, _cost_json(cost))
        return 0
    graph = step_graph(args, evaluates=False)  # costs and counts: no tensor is computed
    with phase(f"costing {fmt.count(len(graph.nodes))} nodes on {hw.name}"):
        costs = graph_costs(hw, graph)
    table = Table(title=f"{graph.name} on {hw.name}")
    stalls = any(c.stall_cycles for c in costs)  # only units with operand buffers stall
    layers = layer_names(graph)  # the name a user knows the node by, as the per-layer report uses
    columns = ("node", "layer", "op", "unit", "cycles") + (("stalls",) if stalls else ()) + ("bound", "util", "FLOP/B")
    for col in columns:
        table.add_column(col, justify="right" if col in ("cycles", "stalls", "util", "FLOP/B") else "left")
    for c in costs:
        table.add_row(f"%{c.node}", escape(layers[c.node]), c.op, c.unit, fmt.count(c.cycles),
                      *((fmt.count(c.stall_cycles),) if stalls else ()),
                      c.bound, fmt.percent(c.utilization), fmt.number(c.arithmetic_intensity))
    console = out_console()
    if not args.summary:
        console.print(table)
    total = sum(c.cycles for c in costs)
    by_unit: dict[str, int] = {}
    for c in costs:
        by_unit[c.unit] = by_unit.get(c.unit, 0) + c.cycles
    console.print(f"{graph.name} on {hw.name}: {fmt.plural(len(costs), 'node')}, "
                  f"{fmt.si(sum(c.flops for c in costs), 'FLOP')}, "
                  f"{fmt.nbytes(sum(c.bytes_read + c.bytes_written for c in costs))} moved")
    console.print(f"serial cycles {fmt.count(total)} ({fmt.seconds(total / hw.clock_hz)} at "
                  f"{fmt.si(hw.clock_hz, 'Hz')}, "
                  f"each node on its best unit, one after another); memory-bound nodes: "
                  f"{fmt.count(sum(c.bound == 'memory' for c in costs))}")
    console.print("cycles by unit: " + ", ".join(f"{u} {fmt.count(v)}" for u, v in sorted(by_unit.items())))
    write_json(args.json, {"hw": hw.name, "model": args.model, "total_cycles": total,
                           "nodes": [{**_cost_json(c), "layer": layers[c.node]} for c in costs]})
    return 0


def cmd_roofline(args: argparse.Namespace) -> int:
    from accelsim.viz.roofline import check_figure_path, plot_roofline

    into_dir = args.output is None or Path(args.output).is_dir()
    if not into_dir:
        check_figure_path(args.output)  # before any work
    hw = load_hw_arg(args)
    graph = step_graph(args, evaluates=False)  # costs and counts: no tensor is computed
    with phase(f"costing {fmt.count(len(graph.nodes))} nodes on {hw.name}"):
        costs = graph_costs(hw, graph)
    name = f"roofline_{model_label(args)}_{step_name(args)}_{hw.name}.png"
    out = (Path(args.output or "plots") / name) if into_dir else Path(args.output)
    try:
        with phase("plotting the roofline"):
            plot_roofline(hw, costs, path=out, node_names={n.id: n.name for n in graph.nodes})
    except OSError as e:
        raise AccelsimError(f"cannot write the roofline to {str(out)!r}: {write_problem(out, e)}") from None
    print(f"wrote {out} ({fmt.plural(len(costs), 'node')})")
    write_json(args.json, {"hw": hw.name, "graph": graph.name, "figure": str(out), "nodes": [
        {"node": c.node, "name": graph.nodes[c.node].name, "op": c.op, "unit": c.unit,
         "arithmetic_intensity": c.arithmetic_intensity,
         "attained_ops_per_s": achieved_ops_per_s(hw, c)} for c in costs
        if c.flops > 0 and math.isfinite(c.arithmetic_intensity)]})  # the plotted points
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    text = "check, show and write hardware descriptions"
    hw = sub.add_parser("hw", help=text, description=f"{text[0].upper()}{text[1:]}.")
    hw_sub = hw.add_subparsers(dest="hw_command", required=True, metavar="{validate,show,schema,template}",
                               help="validate: check files against the schema; show: a machine's units and memories; "
                                    "schema: the JSON Schema of a hardware file; template: a commented file to start "
                                    "from")
    text = "check YAML files against the schema"
    p = hw_sub.add_parser("validate", help=text, description=f"{text[0].upper()}{text[1:]}: every problem is named "
                                                               "by file and key path; exits 1 if any file has one.")
    p.add_argument("files", nargs="+", type=path_arg, metavar="FILE", help="hardware YAML files to check")
    p.set_defaults(fn=cmd_hw_validate)
    text = "units, memories, peaks and ridge points"
    p = hw_sub.add_parser("show", help=text, description=f"A machine's {text}, energy and modelled area.")
    p.add_argument("file", nargs="?", type=path_arg, metavar="HW",
                   help=f"hardware YAML file or bundled name (default {DEFAULT_HW})")
    p.set_defaults(fn=cmd_hw_show)
    text = "the JSON Schema of a hardware file, for editors"
    p = hw_sub.add_parser("schema", help=text, description=(
        "Print (or write) the JSON Schema a hardware YAML file satisfies, every key described, quantities "
        "accepted as numbers or strings with units ('24 MiB', '34 GB/s'). A YAML language server (e.g. the "
        f"editor extension) checks and completes a file whose first line is "
        f"`# yaml-language-server: $schema={SCHEMA_FILE}`."))
    p.add_argument("-o", "--output", type=path_arg, metavar="FILE", help="write the schema here (default: print it)")
    p.set_defaults(fn=cmd_hw_schema)
    text = "a commented hardware file to start from"
    p = hw_sub.add_parser("template", help=text, description=(
        "Print (or write) a hardware description to edit into your own: a systolic array, a vector unit, SRAM "
        "and HBM, every number commented with what it is and a typical value. It loads as is, and `accelsim run "
        "--hw FILE --model mlp` trains a small model on it."))
    p.add_argument("-o", "--output", type=path_arg, metavar="FILE",
                   help="write the template here (default: print it); an existing file is not overwritten")
    p.add_argument("--chips", type=positive_int, default=1, metavar="N",
                   help="chips in the machine (default 1); more than one adds a ring interconnect")
    p.set_defaults(fn=cmd_hw_template)

    text = "per-node cost of a model, or of one GEMM / conv layer"
    p = sub.add_parser("cost", help=text, description=f"Cost of each node of a model on its best unit, or of one "
                                                      f"GEMM or conv layer. {STEP_RULE}")
    add_hw_args(p)
    add_model_args(p)
    add_json_arg(p)
    layer = p.add_mutually_exclusive_group()
    layer.add_argument("--gemm", metavar="M,K,N", help="cost one (M,K) @ (K,N) matmul instead of a model")
    layer.add_argument("--conv", metavar="N,C,H,W,O,KH,KW[,S,P]", help="cost one conv2d layer instead of a model")
    p.add_argument("--unit", help="with --gemm/--conv: use this unit instead of the cheapest")
    p.add_argument("--summary", action="store_true", help="totals only, no per-node table")
    p.set_defaults(fn=cmd_cost)

    text = "roofline plot of a model's nodes on a hardware description"
    p = sub.add_parser("roofline", help=text, description=f"{text[0].upper()}{text[1:]}. {STEP_RULE}")
    add_hw_args(p)
    add_model_args(p)
    add_json_arg(p, "the plotted points")
    p.add_argument("-o", "--output", type=path_arg, metavar="PATH",
                   help="figure file ending in .png, .pdf or .svg, or an existing directory to write "
                        "roofline_<model>_<train|infer>_<hw>.png in (default: the directory plots/)")
    p.set_defaults(fn=cmd_roofline)
