"""A user's mappings (by layer name and unit) matched to a graph's nodes: (Graph, chips, LayerMapping entries) ->
GivenMappings.
Every entry must name a layer of the graph, a unit that searches its mappings (`mapping: search`) and can run
that layer; a mistake is refused naming the entry, with the names it may have meant."""
from __future__ import annotations

import difflib

from accelsim.cost.model import can_run
from accelsim.graph.ir import Graph
from accelsim.hw.spec import Chip
from accelsim.mapping.errors import MappingSpecError
from accelsim.mapping.entry import LayerMapping


def _did_you_mean(name: str, known: list[str]) -> str:
    close = difflib.get_close_matches(name, known, n=3)
    return f" (did you mean {' or '.join(map(repr, close))}?)" if close else ""


def _named(name: str) -> str:
    """A name from a mapping file, quoted and cut: a long one would flood the one-paragraph message."""
    text = repr(name)
    return text if len(text) <= 60 else text[:57] + "..."


class GivenMappings:
    """The entries of a mapping file by (node id, unit name); `for_node` picks the one that applies on a chip."""

    def __init__(self, graph: Graph, chips: list[Chip], entries: tuple[LayerMapping, ...] | None) -> None:
        self.by_node: dict[tuple[int, str], list[LayerMapping]] = {}
        if not entries:
            return
        nodes = {n.name: n for n in graph.nodes}  # names are unique in a graph (Graph refuses a second use)
        seen: set[tuple[str, str, int | None]] = set()
        for i, entry in enumerate(entries):
            where = f"mapping entry {i} (layer {_named(entry.layer)}, unit {_named(entry.unit)})"
            node = nodes.get(entry.layer)
            if node is None:
                layers = [n.name for n in graph.nodes if not n.is_leaf]
                raise MappingSpecError(f"{where}: graph {graph.name!r} has no layer {_named(entry.layer)}"
                                       f"{_did_you_mean(entry.layer, layers)}; a mapping file names layers as "
                                       f"`accelsim compile --mapping-out` writes them")
            key = (entry.layer, entry.unit, entry.chip)
            if key in seen:
                raise MappingSpecError(f"{where}: given twice; give each layer and unit one mapping")
            seen.add(key)
            on = [c for j, c in enumerate(chips) if entry.chip is None or j == entry.chip]
            if entry.chip is not None and not on:
                raise MappingSpecError(f"{where}: chip {entry.chip}, but the hardware has {len(chips)} chip(s)")
            units = [u for c in on for u in c.units if u.name == entry.unit]
            if not units:
                known = sorted({u.name for c in on for u in c.units})
                raise MappingSpecError(f"{where}: no unit {_named(entry.unit)}{_did_you_mean(entry.unit, known)} "
                                       f"(units: {', '.join(known)})")
            unit = units[0]
            if unit.mapping != "search" or unit.array is None:
                raise MappingSpecError(f"{where}: unit {entry.unit!r} runs every layer by its fixed im2col mapping "
                                       f"(mapping: fixed); give it `mapping: search` (and `dataflows:`) to map "
                                       f"layers on it")
            if not can_run(unit, graph, node):
                raise MappingSpecError(f"{where}: unit {entry.unit!r} does not run {node.op} node %{node.id}")
            self.by_node.setdefault((node.id, entry.unit), []).append(entry)

    def for_node(self, node: int, unit: str, chip: int, kind: list[int]) -> LayerMapping | None:
        """The entry for `node` on `unit` of chip `chip` (an entry for its chip before one for every chip);
        `kind[c]`: the first chip of chip c's kind, whose costs chip c shares."""
        entries = self.by_node.get((node, unit), ())
        own = [e for e in entries if e.chip is not None and kind[e.chip] == chip]
        every = [e for e in entries if e.chip is None]
        return (own or every or [None])[0]
