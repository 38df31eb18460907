"""A user's mappings (StepOptions.mapping, by the step's node names) carried to the graphs layer templates measure
(layer_templates.py): (step Graph, its layers' roles, LayerMapping entries) -> the entries for a template graph.

Layer templates measure one layer for all the layers of its role (every middle block of gpt2 is the same), so an
entry is kept by its node's place in its layer: (the layer's role, the node's position among the layer's nodes),
and a template graph's layer of that role gets it on its node at that position. A template stands for all copies
of its layer, so copies must agree: a file that gives two copies of a repeated layer different mappings (or one
a mapping and another none) is refused, naming both nodes and their layers, rather than one copy's mapping being
measured for all of them silently. The entries themselves are checked against the step's graph first, with the
task level's messages (mapping/by_node.py: an unknown layer or unit is refused there).
"""
from __future__ import annotations

from accelsim.compiler.planning.layers import NO_LAYER, find_layers
from accelsim.errors import ScheduleError
from accelsim.graph.ir import Graph
from accelsim.hw.spec import Chip
from accelsim.mapping.by_node import GivenMappings
from accelsim.mapping.entry import LayerMapping
from accelsim.mapping.errors import MappingSpecError

Place = tuple[str, int]
"""(a layer's role, a node's position among that layer's nodes in id order)."""
Given = dict[tuple[str, int | None], LayerMapping]
"""A node's entries by (unit, chip)."""


def layer_nodes(graph: Graph) -> tuple[tuple[str, ...], list[list[int]]]:
    """The graph's layer names and each layer's compute nodes in id order."""
    layers = find_layers(graph)
    nodes: list[list[int]] = [[] for _ in layers.names]
    for node, layer in enumerate(layers.layer_of):
        if layer != NO_LAYER:
            nodes[layer].append(node)
    return layers.names, nodes


def _choices(given: Given) -> dict[tuple[str, int | None], dict]:
    """What a node's entries choose, without the node's name (copies of a node have names of their own)."""
    return {k: e.model_dump(exclude={"layer"}) for k, e in given.items()}


def _shown(given: Given) -> str:
    if not given:
        return "none (searched)"
    return "; ".join(f"{unit}{'' if chip is None else f' on chip {chip}'}: "
                     f"{e.model_dump(exclude={'layer', 'unit', 'chip'}, exclude_none=True)}"
                     for (unit, chip), e in _ordered(given))


def _ordered(given: Given) -> list[tuple[tuple[str, int | None], LayerMapping]]:
    """By unit, then chip (an entry for every chip first): deterministic output."""
    return sorted(given.items(), key=lambda kv: (kv[0][0], -1 if kv[0][1] is None else kv[0][1]))


def mappings_by_place(step: Graph, roles: tuple[str, ...], entries: tuple[LayerMapping, ...],
                      chips: list[Chip]) -> dict[Place, Given]:
    """The entries by the place of their node in `step` (the real step, whose layers have `roles`), refused
    where copies of a layer (layers of one role) are given different mappings (the module docstring)."""
    GivenMappings(step, chips, entries)  # the task level's checks and messages, on the step's own names
    names, nodes = layer_nodes(step)
    if len(names) != len(roles):
        raise ScheduleError(f"internal: {len(roles)} layer roles for the {len(names)} layers of {step.name!r}")
    ids = {n.name: n.id for n in step.nodes}
    layer_of = find_layers(step).layer_of
    given: dict[int, Given] = {}
    for e in entries:
        given.setdefault(ids[e.layer], {})[(e.unit, e.chip)] = e
    copies: dict[str, list[int]] = {}
    for layer, role in enumerate(roles):
        copies.setdefault(role, []).append(layer)
    by_place: dict[Place, Given] = {}
    for node in sorted(given):
        layer = layer_of[node]
        if layer == NO_LAYER:
            raise MappingSpecError(f"mapping entry for layer {step.nodes[node].name!r}: node %{node} belongs to no "
                                   f"layer of {step.name!r}, and layer templates place a mapping by its node's layer; "
                                   f"compile at task level (--granularity task)")
        role, pos = roles[layer], nodes[layer].index(node)
        for other in copies[role]:
            twin = nodes[other][pos] if pos < len(nodes[other]) else None
            if twin is None or step.nodes[twin].op != step.nodes[node].op:
                raise MappingSpecError(
                    f"mapping entry for layer {step.nodes[node].name!r} (in {names[layer]}): layer templates "
                    f"measure {names[layer]} and {names[other]} as one repeated layer, but {names[other]} has no "
                    f"{step.nodes[node].op} node at its place; compile at task level (--granularity task)")
            if _choices(given.get(twin, {})) != _choices(given[node]):
                raise MappingSpecError(
                    f"mapping: {step.nodes[node].name!r} (layer {names[layer]}) and {step.nodes[twin].name!r} "
                    f"(layer {names[other]}) are copies of one node of a repeated layer, which layer templates "
                    f"measure once for all its copies, but the file gives them different mappings: "
                    f"{_shown(given[node])} against {_shown(given.get(twin, {}))}; give every copy the same "
                    f"mapping, or compile at task level (--granularity task)")
        by_place[(role, pos)] = given[node]
    return by_place


def template_entries(graph: Graph, roles: tuple[str, ...], by_place: dict[Place, Given]) \
        -> tuple[LayerMapping, ...] | None:
    """The entries for `graph` (a template graph of the same model, its layers having `roles`): each place's
    entries on the node at that place, renamed to it; None where there are none."""
    names, nodes = layer_nodes(graph)
    if len(names) != len(roles):
        raise ScheduleError(f"internal: {len(roles)} layer roles for the {len(names)} layers of {graph.name!r}")
    out = []
    for layer, role in enumerate(roles):
        for (r, pos), given in by_place.items():
            if r == role and given:
                if pos >= len(nodes[layer]):
                    raise ScheduleError(f"internal: layer {names[layer]} of {graph.name!r} has {len(nodes[layer])} "
                                        f"nodes, but the step's layers of its role have more")
                node = graph.nodes[nodes[layer][pos]]
                out += [e.model_copy(update={"layer": node.name}) for _, e in _ordered(given)]
    return tuple(out) or None
