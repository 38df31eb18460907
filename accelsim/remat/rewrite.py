"""Rematerialization's rewrite: the training graph in which chosen forward values are computed again in
the backward pass (Graph, forward ids to recompute -> Graph).

Each backward reader of a recomputed value reads a copy made by new backward nodes with the forward
nodes' ops and attributes, computed from the nearest *kept* values (checkpoints, leaves, outputs), so
the forward value's last reader is in the forward pass and the scheduler frees it there. A copy is
emitted just before its first backward reader, in forward order, and shared by later readers.

Full recomputation (`full:K`, remat/budget.full_plan) also recomputes values no backward node needs (GPT's
attention output projection and second MLP GEMM): torch.utils.checkpoint and Megatron-LM re-run the
segment's whole forward and throw such values away, so they cost time there. Each is emitted as soon as its
recomputed inputs are, with no reader: a real node the scheduler runs, the simulator times and `check`
computes (nothing prunes a rewritten graph's dead nodes: passes/rebuild.py keeps what was dead before it).

Ordering barrier: the IR has data edges only, and a list scheduler starts a task as soon as its inputs
are ready, filling idle gaps; recomputation whose inputs are checkpoints would run during the forward
pass and keep its values alive as long as the originals did. So each recomputation *root* (a node
recomputed from kept values only) reads one of its kept float inputs through `x * (t ** 0)`, where the
token `t` is one element of a backward value its first backward reader waits for anyway (else the latest
value computed before it), always one that depends on the forward pass. `t ** 0` is exactly 1 for every float, inf and NaN included, and `x * 1` is
`x` bit for bit, so the numbers are unchanged; the price is one elementwise pass over that input.
"""
from __future__ import annotations

import heapq
from dataclasses import dataclass, field
from math import prod
from typing import Any, Mapping

from accelsim.errors import GraphError
from accelsim.graph.ir import NUMPY_BYTES, Graph, Node
from accelsim.graph.provenance import AppliedPass
from accelsim.graph.verify import verify
from accelsim.ops.registry import get_op

REMAT_PASS = "rematerialize"
"""The name under which a rematerialized graph records the rewrite in `Graph.passes` (with the ids of the
forward nodes it recomputes as `only`), so a schedule's source replays it in order with the other passes."""

NONDETERMINISTIC_OPS: frozenset[str] = frozenset()
"""Ops whose value may differ between two runs on the same inputs: never recomputed. The registry has no
random op (no dropout, no sampling; every OpDef.ref is a pure numpy function), so the set is empty; an op
that draws random numbers must be added here when it is registered."""


def recomputable(graph: Graph, node: Node, collectives: bool = False) -> bool:
    """Whether `node` may be recomputed: a computed forward node (never a leaf: inputs and parameters
    are what recomputation starts from), deterministic, and not an output or the loss (those stay as
    they are, alive to the step's end). A collective (communication, not arithmetic) only where
    `collectives`: full recomputation re-runs a segment's tensor-parallel all-reduces, as Megatron-LM's
    checkpointed layer does; selective policies keep their results instead."""
    if node.phase != "forward" or node.is_leaf or node.op in NONDETERMINISTIC_OPS:
        return False
    if get_op(node.op).collective is not None and not collectives:
        return False
    return node.id not in graph.outputs.values() and node.id != graph.loss


def saved_values(graph: Graph) -> list[int]:
    """Forward values a backward node reads that could be recomputed instead of kept: the candidates
    every policy chooses among, ascending."""
    read = {i for n in graph.nodes if n.phase == "backward" for i in n.inputs}
    return sorted(i for i in read if recomputable(graph, graph.nodes[i]))


def _barrier_input(graph: Graph, node: Node, recompute: frozenset[int] | set[int]) -> int | None:
    """The kept input of recomputation root `node` that carries its ordering barrier: the smallest
    non-empty computed input in the graph's dtype (the barrier multiplies it by a scalar of that dtype)."""
    best = None
    for i in node.inputs:
        x = graph.nodes[i]
        if x.is_leaf or i in recompute or x.dtype != graph.dtype or prod(x.shape) == 0:
            continue
        if best is None or prod(x.shape) < prod(graph.nodes[best].shape):
            best = i
    return best


def recompute_set(graph: Graph, keep: set[int] | frozenset[int]) -> frozenset[int]:
    """The forward ids recomputed when only `keep` (and what is never recomputed) stays alive for the
    backward pass: every saved value not kept, and the computed forward values it needs back to kept
    ones. A root that cannot carry a barrier (it reads only leaves or integer values) is kept instead."""
    keep = set(keep)
    while True:
        todo = [i for i in saved_values(graph) if i not in keep]
        out: set[int] = set()
        while todo:
            i = todo.pop()
            if i in out:
                continue
            out.add(i)
            todo += [j for j in graph.nodes[i].inputs
                     if j not in keep and recomputable(graph, graph.nodes[j])]
        stuck = {i for i in out if not any(j in out for j in graph.nodes[i].inputs)
                 and _barrier_input(graph, graph.nodes[i], out) is None}
        if not stuck:
            return frozenset(out)
        keep |= stuck


def whole_segments(graph: Graph, ids: set[int] | frozenset[int]) -> frozenset[int]:
    """`ids` (computed forward values of checkpointed segments, read by the backward pass or not) less what
    cannot be recomputed from a checkpoint: a root that cannot carry a barrier (it reads only leaves or
    integer values: kept, as in recompute_set), and a root that neither the backward pass nor another
    recomputed value reads (no trigger orders it into its segment's backward; the zoo has none). A
    collective is recomputed only from recomputed inputs: as a root its barrier would have to sit on one
    rank's input (gpt2's embedding all-reduce, which Megatron-LM does not recompute either, stays kept)."""
    out = set(ids)
    while True:
        stuck = {i for i in out if not any(j in out for j in graph.nodes[i].inputs)
                 and (get_op(graph.nodes[i].op).collective is not None
                      or _barrier_input(graph, graph.nodes[i], out) is None)}
        if not stuck:
            break
        out -= stuck
    read = {j for n in graph.nodes if n.phase == "backward" or n.id in out for j in n.inputs}
    return frozenset(i for i in out if i in read or any(j in out for j in graph.nodes[i].inputs))


@dataclass(frozen=True, slots=True)
class Step:
    """One node of the rewritten graph before it is built, at its position (= its id there): a copy of
    source node `source` ("copy"), a recomputation of forward node `source` ("recompute"), or part of
    an ordering barrier ("barrier", source -1). `inputs` are positions."""

    kind: str
    source: int
    op: str
    inputs: tuple[int, ...]
    attrs: Mapping[str, Any]
    shape: tuple[int, ...]
    dtype: str
    rank: int
    name: str
    leaf: bool = False

    @property
    def nbytes(self) -> int:
        return 0 if self.leaf else prod(self.shape) * NUMPY_BYTES[self.dtype]


@dataclass
class Emission:
    """The rewritten graph as steps, in order; `position[i]`: where source node i's own copy is."""

    steps: list[Step] = field(default_factory=list)
    position: dict[int, int] = field(default_factory=dict)

    def outputs(self, graph: Graph) -> set[int]:
        """Positions of the step's results (outputs and loss), alive to the end."""
        ids = set(graph.outputs.values()) | ({graph.loss} if graph.loss is not None else set())
        return {self.position[i] for i in ids}


class _Emitter:
    """Walks the source graph in order, copying each node and emitting recomputations before the first
    backward node that reads them."""

    def __init__(self, graph: Graph, recompute: frozenset[int]) -> None:
        self.graph, self.recompute = graph, recompute
        self.out = Emission()
        self.again: dict[int, int] = {}  # source id -> position of its recomputation
        self.ones: dict[int, int] = {}  # token source id -> position of the scalar 1 made from it
        self.barriers: dict[tuple[int, int, int], int] = {}  # (kept id, token id, rank) -> position of x * 1
        self.latest: dict[int, int] = {}  # rank -> latest copied value that can be a token (fallback)
        self.results = set(graph.outputs.values()) | {graph.loss}
        self.unread = self._unread_readers()  # recomputed id -> recomputed values no backward node needs that read it
        # a token must depend on the forward pass: a backward node that reads only leaves (a transposed weight,
        # the gradient seed) is ready at the start of the step and would order nothing
        self.late = [False] * len(graph.nodes)
        for n in graph.nodes:
            self.late[n.id] = not n.is_leaf and (n.phase == "forward" or any(self.late[i] for i in n.inputs))

    def _unread_readers(self) -> dict[int, list[int]]:
        """Full recomputation (remat/budget.full_plan) recomputes values no backward node needs (an attention
        output projection, an MLP's second GEMM): torch.utils.checkpoint and Megatron-LM re-run the segment's
        whole forward and discard them. Each such value is emitted, nobody reading it, as soon as its
        recomputed inputs are; this maps each recomputed value to those of them reading it."""
        g, recompute = self.graph, self.recompute
        needed: set[int] = set()
        todo = [i for n in g.nodes if n.phase == "backward" for i in n.inputs if i in recompute]
        while todo:
            i = todo.pop()
            if i not in needed:
                needed.add(i)
                todo += [j for j in g.nodes[i].inputs if j in recompute]
        readers: dict[int, list[int]] = {}
        for u in sorted(recompute - needed):
            for j in sorted({j for j in g.nodes[u].inputs if j in recompute}):
                readers.setdefault(j, []).append(u)
        return readers

    def add(self, step: Step) -> int:
        self.out.steps.append(step)
        return len(self.out.steps) - 1

    def run(self) -> Emission:
        g = self.graph
        for n in g.nodes:
            if n.phase == "backward" and not self.recompute.isdisjoint(n.inputs):
                for i in n.inputs:
                    if i in self.recompute:
                        self.emit_recompute(i, n)
                ins = tuple(self.again[i] if i in self.recompute else self.out.position[i] for i in n.inputs)
            else:
                ins = tuple(self.out.position[i] for i in n.inputs)
            self.out.position[n.id] = self.add(Step("copy", n.id, n.op, ins, n.attrs, n.shape, n.dtype, n.rank,
                                                    n.name, n.is_leaf))
            # a forward token must be a result (alive to the end anyway): reading another forward value in
            # the backward pass would keep it alive, the very thing recomputation avoids
            if self.token_ok(n) and (n.phase != "forward" or n.id in self.results):
                self.latest[n.rank] = n.id
        return self.out

    def token_ok(self, n: Node) -> bool:
        return self.late[n.id] and n.dtype == self.graph.dtype and prod(n.shape) > 0

    def emit_recompute(self, root: int, trigger: Node) -> None:
        """Recompute `root` and what it needs (post-order, so inputs come first), iteratively: a deep
        chain must not hit Python's recursion limit."""
        g = self.graph
        stack = [(root, False)]
        woken: list[int] = []
        while stack:
            i, expanded = stack.pop()
            if i in self.again:
                continue
            node = g.nodes[i]
            if not expanded:
                stack.append((i, True))
                stack += [(j, False) for j in reversed(node.inputs) if j in self.recompute and j not in self.again]
                continue
            ins = [self.again[j] if j in self.recompute else self.out.position[j] for j in node.inputs]
            if not any(j in self.recompute for j in node.inputs):
                ins = self.delay(node, ins, trigger)
            self.again[i] = self.add(Step("recompute", i, node.op, tuple(ins), node.attrs, node.shape, node.dtype,
                                          node.rank, f"{node.name}.recompute"))
            self.wake(i, woken)
        while woken:  # unread values whose recomputed inputs are all there now, in forward order
            i = heapq.heappop(woken)
            if i not in self.again:
                node = g.nodes[i]
                ins = [self.again[j] if j in self.recompute else self.out.position[j] for j in node.inputs]
                self.again[i] = self.add(Step("recompute", i, node.op, tuple(ins), node.attrs, node.shape,
                                              node.dtype, node.rank, f"{node.name}.recompute"))
                self.wake(i, woken)

    def wake(self, done: int, woken: list[int]) -> None:
        """Queue the unread recomputed values reading `done` whose recomputed inputs are all emitted."""
        for u in self.unread.get(done, ()):
            if u not in self.again and all(j in self.again for j in self.graph.nodes[u].inputs if j in self.recompute):
                heapq.heappush(woken, u)

    def delay(self, node: Node, ins: list[int], trigger: Node) -> list[int]:
        """`ins` with the barrier input of root `node` read through x * (token ** 0)."""
        kept = _barrier_input(self.graph, node, self.recompute)
        if kept is None:
            raise GraphError(f"rematerialize: %{node.id} {node.op} {node.name!r} reads no computed value to order "
                             "its recomputation after the forward pass (only leaves or integers); keep it instead")
        token = self.token(trigger, node)
        key = (kept, token, node.rank)
        if key not in self.barriers:
            x = self.graph.nodes[kept]
            self.barriers[key] = self.add(Step("barrier", -1, "mul", (self.out.position[kept], self.one(token)), {},
                                               x.shape, x.dtype, node.rank, f"{x.name}.after_{self.graph.nodes[token].name}"))
        return [self.barriers[key] if j == kept else p for j, p in zip(node.inputs, ins)]

    def token(self, trigger: Node, node: Node) -> int:
        """The value the recomputation of `node` waits for: the latest backward input of its first
        backward reader, else the latest value computed before that reader; on `node`'s tensor-parallel
        rank or replicated (every rank has it)."""
        g = self.graph
        ranks = (node.rank, -1) if node.rank >= 0 else (-1,)
        inputs = [i for i in trigger.inputs if g.nodes[i].phase == "backward" and g.nodes[i].rank in ranks
                  and self.token_ok(g.nodes[i])]
        candidates = inputs or [self.latest[r] for r in ranks if r in self.latest]
        if not candidates:
            raise GraphError(f"rematerialize: no value of tensor-parallel rank {node.rank} is computed before "
                             f"%{trigger.id} {trigger.name!r} to order the recomputation of %{node.id} after")
        return max(candidates)

    def one(self, token: int) -> int:
        """Position of `token ** 0` (a scalar exactly 1) made from one element of the token."""
        if token not in self.ones:
            t = self.graph.nodes[token]
            at = self.out.position[token]
            if t.shape:
                at = self.add(Step("barrier", -1, "slice", (at,), {"starts": (0,) * len(t.shape),
                                   "stops": (1,) * len(t.shape)}, (1,) * len(t.shape), t.dtype, t.rank,
                                   f"{t.name}.first"))
                at = self.add(Step("barrier", -1, "reshape", (at,), {"shape": ()}, (), t.dtype, t.rank,
                                   f"{t.name}.first"))
            self.ones[token] = self.add(Step("barrier", -1, "pow", (at,), {"exponent": 0.0}, (), t.dtype, t.rank,
                                             f"{t.name}.pow0"))
        return self.ones[token]


def emit(graph: Graph, recompute: frozenset[int]) -> Emission:
    """The rewritten graph as steps (see the module docstring); cheap: no shape inference."""
    return _Emitter(graph, frozenset(recompute)).run()


def build(graph: Graph, recompute: frozenset[int]) -> Graph:
    """The rewritten graph, verified, recording the rewrite in its `passes` (unchanged when `recompute`
    is empty: a copy)."""
    if not recompute:
        return graph.copy()
    emission = emit(graph, recompute)
    done = sorted(s.source for s in emission.steps if s.kind == "recompute")
    out = Graph(name=graph.name, dtype=graph.dtype, seed=graph.seed, source=graph.source, optimizer=graph.optimizer,
                passes=graph.passes + (AppliedPass(REMAT_PASS, tuple(done)),))
    for step in emission.steps:
        if step.kind == "copy":
            out.append_from(graph, graph.nodes[step.source], step.inputs)
            continue
        with out.phase("backward"), out.rank(step.rank):
            out.add_node(step.op, step.inputs, step.attrs, name=step.name)
    out.outputs = {k: emission.position[v] for k, v in graph.outputs.items()}
    out.loss = emission.position[graph.loss] if graph.loss is not None else None
    return verify(out)

