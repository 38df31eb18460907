"""The schedule's recorded mappings checked against its graph and hardware (Schedule, Graph, HwSpec -> problems):
each names a node of the graph by its id and name, a unit of its chip that searches mappings, the node's loop
bounds, and a mapping that fits them and the unit's array (accelsim.mapping.record.check_mapping: known
dimensions of the right role, stream tiles that divide their dimension, fold loops that cover what does not
fit on the array). Whether each is the mapping the compiler's costs were taken from is the plan check's
(compiler/verify.py replays them)."""
from __future__ import annotations

from accelsim.graph.ir import Graph
from accelsim.hw.spec import HwSpec
from accelsim.mapping.cost import unit_dataflows
from accelsim.mapping.dims import layer_dims
from accelsim.mapping.errors import MappingSpecError
from accelsim.mapping.gemm_view import check_traffic_order
from accelsim.mapping.record import Mapping, check_mapping
from accelsim.schedule.levels import chip_list
from accelsim.schedule.mappings import NodeMapping
from accelsim.schedule.names import Names
from accelsim.schedule.plan import Schedule

MAX_SHOWN = 5


def _problem(m: NodeMapping, graph: Graph, hw: HwSpec, names: Names) -> str | None:
    who = f"the mapping of {names.node(m.node)} on unit {m.unit!r} of chip{m.chip}"
    if m.node >= len(graph.nodes):
        return f"{who}: graph {graph.name!r} has {len(graph.nodes)} nodes"
    node = graph.nodes[m.node]
    if node.name != m.layer:
        return f"{who}: names layer {m.layer!r}, but node %{m.node} is {node.name!r}"
    chips = chip_list(hw)
    if m.chip >= len(chips):
        return f"{who}: {hw.name} has {len(chips)} chip(s)"
    unit = next((u for u in chips[m.chip].units if u.name == m.unit), None)
    if unit is None or unit.array is None or unit.mapping != "search":
        return f"{who}: chip{m.chip} of {hw.name} has no array unit {m.unit!r} that searches mappings"
    try:
        layer = layer_dims(graph, node)
    except MappingSpecError as e:
        return f"{who}: {e}"
    bounds = tuple((d.name, d.size) for d in layer.dims)
    if m.dims != bounds:
        return (f"{who}: loop bounds {dict(m.dims)}, but the node's are {dict(bounds)} (its dimensions' extents "
                f"are fixed by its shape)")
    mapping = Mapping(m.dataflow, m.rows, m.cols, m.stream, m.order)
    try:
        geometry = check_mapping(layer, mapping, unit.array.rows, unit.array.cols, unit_dataflows(unit), unit.name)
        if unit.operand_buffers is not None:
            check_traffic_order(layer, mapping, geometry, unit.name)
    except MappingSpecError as e:
        return f"{who}: {e}"
    return None


def check_mappings(schedule: Schedule, graph: Graph, hw: HwSpec, names: Names) -> list[str]:
    """Problems of the schedule's recorded mappings (module docstring), the first MAX_SHOWN of them."""
    if not schedule.mappings:
        return []
    keys = [(m.node, m.chip, m.unit) for m in schedule.mappings]
    if keys != sorted(set(keys)):
        return ["mappings must be listed once each by (node, chip, unit), ascending"]
    problems = [p for m in schedule.mappings if (p := _problem(m, graph, hw, names)) is not None]
    return problems[:MAX_SHOWN]
