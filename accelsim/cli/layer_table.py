"""`accelsim run`'s per-layer tables (LayerReport -> two rich Tables): the layers that took the most unit time
and the most dynamic energy, ten rows each; a fused step's tables name each layer's fusion group too. Names are
printed as text, never as rich markup: a fused tile's layer ends in "[tile 2/4]", which markup would drop."""
from __future__ import annotations

from rich.markup import escape
from rich.table import Table

from accelsim import fmt
from accelsim.per_layer import LayerReport, LayerRow

TOP_ROWS = 10


def _share(part: float, whole: float) -> str:
    return fmt.percent(part / whole) if whole else "-"


def _optional_percent(x: float | None) -> str:
    return "-" if x is None else fmt.percent(x)


def time_table(report: LayerReport, rows: int = TOP_ROWS) -> Table:
    """The `rows` layers with the most busy unit-cycles: their share, ideal and memory-stall cycles, the wait
    before they started, utilization and the mapping (fold) efficiency behind it."""
    total = sum(r.work.busy_cycles for r in report.layers)
    table = Table(title=f"top {rows} layers by time ({report.timeline} timeline; cycles summed over tasks: "
                        "busy = ideal + latency + memory stall + communication)")
    mapped = any(r.mapping is not None for r in report.layers)  # a unit searched mappings: show them
    fused = _fused(report)
    for col in ("layer", "op", "busy cycles", "share", "ideal", "memory stall", "wait", "utilization",
                "mapping eff.") + ("mapping",) * mapped + (FUSION_COLUMN,) * fused:
        table.add_column(col, justify="left" if col in ("layer", "op", "mapping", FUSION_COLUMN) else "right")
    for r in report.top_by_time(rows):
        w = r.work
        table.add_row(escape(r.layer), _ops(r), fmt.count(w.busy_cycles), _share(w.busy_cycles, total),
                      fmt.count(w.ideal_cycles), fmt.count(w.memory_stall_cycles), fmt.count(w.wait_cycles),
                      _optional_percent(w.utilization), _optional_percent(w.mapping_efficiency),
                      *((_main_mapping(r),) if mapped else ()), *((_group(r),) if fused else ()))
    return table


FUSION_COLUMN = "fusion group"
"""The column naming the fused chain ("first .. last" layer) a layer's tiles or concat belong to; only a step
with some fusion group has it, so an unfused step's tables are as before."""


def _fused(report: LayerReport) -> bool:
    return any(r.fusion_group for r in report.layers)


def _group(r: LayerRow) -> str:
    return escape(r.fusion_group) or "-"


def _main_mapping(r: LayerRow) -> str:
    """The mapping of the layer's node that took the most unit time (its forward node's, usually), compact."""
    mapped = [d for d in r.nodes if d.mappings]
    if not mapped:
        return "-"
    main = max(mapped, key=lambda d: d.work.busy_cycles)
    return main.mappings[0].compact() + (f" (+{len(mapped) - 1} node(s))" if len(mapped) > 1 else "")


def energy_table(report: LayerReport, rows: int = TOP_ROWS) -> Table | None:
    """The `rows` layers with the most dynamic energy and its largest component; None without energy figures."""
    if report.static_energy_pj is None:
        return None
    total = sum(r.total_energy_pj for r in report.layers)
    table = Table(title=f"top {rows} layers by dynamic energy (static {fmt.si(report.static_energy_pj * 1e-12, 'J')} "
                        "is the step's, not a layer's)")
    fused = _fused(report)
    for col in ("layer", "op", "energy", "share", "largest component", "bytes read", "bytes written") + \
            (FUSION_COLUMN,) * fused:
        table.add_column(col, justify="left" if col in ("layer", "op", "largest component", FUSION_COLUMN)
                         else "right")
    for r in report.top_by_energy(rows):
        largest = max(r.energy_pj, key=lambda kv: kv[1], default=("-", 0.0))
        table.add_row(escape(r.layer), _ops(r), fmt.si(r.total_energy_pj * 1e-12, "J"), _share(r.total_energy_pj, total),
                      f"{largest[0]} {_share(largest[1], r.total_energy_pj)}",
                      fmt.nbytes(sum(b for _, b in r.bytes_read)), fmt.nbytes(sum(b for _, b in r.bytes_written)),
                      *((_group(r),) if fused else ()))
    return table


def _ops(r: LayerRow) -> str:
    """The op of its forward nodes that takes the most unit time (ties: model order; any phase's without a
    forward node: an SGD update may outlast its layer's convolution), and how many other ops its nodes have.
    Unit time leaves out the links: a stage's last relu whose output crosses to the next chip is not the op
    its layer spends its time in."""
    busy: dict[str, int] = {}
    for d in [d for d in r.nodes if d.phase == "forward"] or r.nodes:
        busy[d.op] = busy.get(d.op, 0) + d.work.busy_cycles - d.work.communication_cycles
    main = max(busy, key=lambda op: busy[op], default="-")
    others = len(set(r.ops) - {main})
    return main + (f" +{others}" if others else "")
