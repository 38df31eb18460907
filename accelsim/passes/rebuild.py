"""The one way a rewrite pass builds its result: a copy of the source graph, node by node in id order,
where the pass may map a node onto another (already built) node or emit new ones (Graph -> Rewrite).

Keeping this in one place gives every pass the same guarantees: ids stay a topological order, phases
only read the same or earlier phases, an output never becomes a leaf, the nodes a rewrite left unused
are dropped (nodes the source already left unused are kept, so a pass that changes nothing returns an
equal graph), and the result passes `verify`.
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Iterable, Mapping

import numpy as np

from accelsim.graph.ir import PHASES, Graph, Node
from accelsim.graph.verify import verify
from accelsim.layer_names import layer_names


@dataclass(frozen=True)
class Rewrite:
    """What a pass returns to the pass manager: the new graph and one line per rewrite it made
    (each naming the source node, as `%12 mul 'mul12': x*1 -> x`); no lines: nothing applied."""

    graph: Graph
    rewrites: tuple[str, ...]
    # for a sited pass (PassDef.sited): the source-graph id of the anchor node of each place it rewrote,
    # in id order, so a search may rerun it on a subset of them (`run(graph, only=frozenset(ids))`)
    sites: tuple[int, ...] = ()


def _live(graph: Graph, roots: Iterable[int] = ()) -> set[int]:
    """Ids of the nodes some output, the loss or one of `roots` needs."""
    live = set(graph.outputs.values()) | ({graph.loss} if graph.loss is not None else set()) | set(roots)
    for node in reversed(graph.nodes):
        if node.id in live:
            live.update(node.inputs)
    return live


class Rebuild:
    """A rewritten copy of `source` under construction. A pass walks `source.nodes` in order and,
    for each node not yet `built`, either `copy`s it or maps it (`alias`) onto a node of `out`
    it emitted; `finish` then returns the Rewrite."""

    def __init__(self, source: Graph) -> None:
        self.source = source
        self.out = Graph(name=source.name, dtype=source.dtype, seed=source.seed, source=source.source,
                         optimizer=source.optimizer)
        self.new_id: dict[int, int] = {}  # source id -> id in out
        self.rewrites: list[str] = []
        self._layers: tuple[str, ...] | None = None  # layer_names(source), once a rewrite is logged
        self.sites: list[int] = []  # anchors of the places rewritten (Rewrite.sites)
        self._outputs = set(source.outputs.values()) | ({source.loss} if source.loss is not None else set())
        self._reader_phases: list[set[str]] = [set() for _ in source.nodes]
        for n in source.nodes:
            for i in n.inputs:
                self._reader_phases[i].add(n.phase)

    # ---- reading ----------------------------------------------------------------------

    def built(self, old_id: int) -> bool:
        return old_id in self.new_id

    def node(self, new_id: int) -> Node:
        """A node of the graph being built."""
        return self.out.nodes[new_id]

    def mapped(self, old: Node) -> tuple[int, ...]:
        """`old`'s inputs as ids of the graph being built."""
        return tuple(self.new_id[i] for i in old.inputs)

    def const_value(self, new_id: int) -> np.ndarray | None:
        """The array of a constant of the graph being built; None for any other node."""
        n = self.out.nodes[new_id]
        return self.out.leaf_value(new_id) if n.op == "const" else None

    def leaf_value(self, new_id: int) -> np.ndarray | None:
        """The value of a parameter or constant (the graph's own, as evaluation sees it); None for
        inputs and computed nodes, whose values a pass must never fold."""
        n = self.out.nodes[new_id]
        return self.out.leaf_value(new_id) if n.op in ("param", "const") else None

    # ---- building ---------------------------------------------------------------------

    def copy(self, old: Node) -> int:
        """`old` unchanged but for its inputs' new ids; a leaf keeps its name and value."""
        self.new_id[old.id] = self.out.append_from(self.source, old, self.mapped(old))
        return self.new_id[old.id]

    def hoist(self, old_id: int) -> int:
        """The new id of source node `old_id`, copying it now if it is a leaf not yet built: a leaf
        reads nothing, so it may move earlier (a merge needs every weight before the merged node)."""
        if old_id not in self.new_id:
            old = self.source.nodes[old_id]
            assert old.is_leaf, f"only leaves move earlier, not %{old_id} {old.op}"
            self.copy(old)
        return self.new_id[old_id]

    def emit(self, op: str, inputs: tuple[int, ...], attrs: Mapping[str, Any], phase: str,
             name: str | None = None) -> int | None:
        """A new node `op(inputs)` (ids of `out`) in `phase`; None, building nothing, when an update
        node would read a forward node that is not a leaf (the scheduler runs update nodes once per
        step, forward nodes once per micro-batch)."""
        if not self._phase_ok(phase, inputs):
            return None
        with self.out.phase(phase):
            return self.out.add_node(op, inputs, attrs, name=name).id

    def const(self, value: np.ndarray, phase: str, dtype: str | None = None) -> int:
        """A new constant in `phase`, stored in `dtype` (default: the graph's)."""
        with self.out.phase(phase):
            return self.out.const(value, dtype=dtype or self.out.dtype).id

    def alias(self, old: Node, new_id: int, why: str) -> bool:
        """Let node `new_id` of `out` stand for source node `old` from now on, recording `why`.
        Refused (False, nothing recorded) when the shape or dtype differs, when an output or the loss
        would become a leaf, or when the phase rules would break: a node of a later phase may not stand
        for one of an earlier phase, and update nodes read only leaves, backward and update nodes."""
        rep = self.out.nodes[new_id]
        if old.id in self._outputs and rep.is_leaf:
            return False
        if rep.dtype != old.dtype or tuple(rep.shape) != tuple(old.shape):
            return False
        if not rep.is_leaf:
            if PHASES.index(rep.phase) > PHASES.index(old.phase):
                return False
            readers = self._reader_phases[old.id] | {old.phase}
            if rep.phase == "forward" and readers - {"forward", "backward"}:
                return False
        self.new_id[old.id] = new_id
        if not rep.is_leaf and not rep.layer and old.layer:  # an emitted node reports as the layer it stands for
            rep = self.out.nodes[new_id] = replace(rep, layer=old.layer)
        if not rep.is_leaf and rep.fused is None and old.fused is not None:  # and in the fused tile it stands for
            self.out.nodes[new_id] = replace(rep, fused=old.fused)
        if self._layers is None:
            self._layers = layer_names(self.source)
        # the layer a user knows the node by (its own name is the builder's, e.g. 'add10')
        self.rewrites.append(f"%{old.id} {old.op} {old.name!r} in {self._layers[old.id]}: {why}")
        return True

    def site(self, anchor_old_id: int) -> None:
        """Record that a rewrite was made at the place anchored by source node `anchor_old_id`."""
        if anchor_old_id not in self.sites:
            self.sites.append(anchor_old_id)

    def replace(self, old: Node, new_id: int | None, why: str) -> bool:
        """`alias` for a node a rule just emitted (None: the rule could not emit it)."""
        return new_id is not None and self.alias(old, new_id, why)

    def _phase_ok(self, phase: str, inputs: tuple[int, ...]) -> bool:
        for i in inputs:
            n = self.out.nodes[i]
            if n.is_leaf:
                continue
            if PHASES.index(n.phase) > PHASES.index(phase):
                return False
            if phase == "update" and n.phase == "forward":
                return False
        return True

    # ---- finishing --------------------------------------------------------------------

    def finish(self) -> Rewrite:
        """The Rewrite: the source itself (a copy) when no rewrite was made, else the built graph with
        outputs remapped and the nodes the rewrites left unused removed, verified."""
        if not self.rewrites:
            return Rewrite(self.source.copy(), ())
        missing = [n.id for n in self.source.nodes if n.id not in self.new_id]
        assert not missing, f"the pass left source nodes {missing[:5]} unbuilt"
        built = self.out
        built.outputs = {k: self.new_id[v] for k, v in self.source.outputs.items()}
        built.loss = self.new_id[self.source.loss] if self.source.loss is not None else None
        was_dead = {self.new_id[i] for i in range(len(self.source.nodes))} - {
            self.new_id[i] for i in _live(self.source)}
        keep = _live(built, was_dead)
        out = Graph(name=built.name, dtype=built.dtype, seed=built.seed, source=built.source,
                    optimizer=built.optimizer)
        renumber: dict[int, int] = {}
        for node in built.nodes:
            if node.id in keep:
                renumber[node.id] = out.append_from(built, node, tuple(renumber[i] for i in node.inputs))
        out.outputs = {k: renumber[v] for k, v in built.outputs.items()}
        out.loss = renumber[built.loss] if built.loss is not None else None
        return Rewrite(verify(out), tuple(self.rewrites), tuple(sorted(self.sites)))
