"""Elementwise fusion (Graph -> Graph): trees of elementwise nodes become one fused_elementwise node,
so the intermediates never travel to memory and back. The fusible ops are those of the opcode table
(ops/fused.py INSTRUCTIONS), which every kernel backend runs through its scalar table.

A group grows from its root (the node whose value leaves the group) towards its inputs. A producer
joins a group only when every node that reads it is a member (its value is then computed and read
inside alone), it is no graph output nor the loss, and it has the root's phase, dtype and shape: a
value read elsewhere (a forward activation a backward node reads) stays materialised, and a producer
of a smaller, broadcast shape stays outside (inside, the fused kernel would recompute it once per
output element). Absorbed fused nodes are flattened into the new program. A group holds at most
MAX_SLOTS slots, the kernel's scratch. Groups are maximal, so a second run finds nothing more
(unless a group was cut at MAX_SLOTS).

The fused node computes its root's value with the same registry refs in the same order, and its
gradient rule replays the primitives' own rules, so outputs and gradients are those of the unfused
graph. Its FLOPs are the chain's; its bytes are the group's external inputs read once and the root's
value written once.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from accelsim.errors import GraphError
from accelsim.graph.ir import Graph, Node
from accelsim.ops.fused import INSTRUCTIONS, MAX_SLOTS, render_program
from accelsim.passes.rebuild import Rebuild, Rewrite

FUSED = "fused_elementwise"


def _fusible(node: Node) -> bool:
    return node.op in INSTRUCTIONS or node.op == FUSED


def _instructions(node: Node) -> int:
    return len(node.attrs["program"]) if node.op == FUSED else 1


@dataclass
class Group:
    """The nodes fused into one: `root` and its members (root included), and a bound on the slots
    its program needs (instructions + input edges, before deduplicating inputs)."""

    root: int
    members: set[int] = field(default_factory=set)
    instructions: int = 0
    edges: int = 0


def groups(graph: Graph) -> dict[int, Group]:
    """Every group of two or more fusible nodes, by root id (see the module docstring)."""
    readers = graph.consumers()
    pinned = set(graph.outputs.values()) | ({graph.loss} if graph.loss is not None else set())
    group_of: dict[int, Group] = {}
    roots: dict[int, Group] = {}
    for node in reversed(graph.nodes):  # a node's readers come after it, so they are placed already
        if not _fusible(node):
            continue
        reads = readers[node.id]
        group = group_of.get(reads[0]) if reads else None
        if (group is not None and node.id not in pinned and all(r in group.members for r in reads)
                and _kind(node) == _kind(graph.nodes[group.root])):
            instructions = group.instructions + _instructions(node)
            edges = group.edges - len(readers[node.id]) + len(node.inputs)  # its readers' edges become internal
            if instructions + edges <= MAX_SLOTS:
                group.members.add(node.id)
                group.instructions, group.edges = instructions, edges
                group_of[node.id] = group
                continue
        group_of[node.id] = roots[node.id] = Group(node.id, {node.id}, _instructions(node), len(node.inputs))
    return {root: g for root, g in roots.items() if len(g.members) > 1}


def _kind(node: Node) -> tuple:
    return node.phase, node.dtype, tuple(node.shape)


@dataclass
class _Builder:
    """The program of one group, built by walking it from the root: inputs are ids of the graph
    being built, deduplicated; instruction operands refer to ("in", k) or ("t", instruction index)."""

    rb: Rebuild
    group: Group
    inputs: list[int] = field(default_factory=list)  # new ids
    labels: list[str] = field(default_factory=list)  # "%<source id>" of each input, for the rewrite line
    steps: list[tuple] = field(default_factory=list)
    value: dict[int, tuple[str, int]] = field(default_factory=dict)  # source id -> its ref

    def ref(self, old_id: int) -> tuple[str, int]:
        if old_id in self.value:
            return self.value[old_id]
        node = self.rb.source.nodes[old_id]
        if old_id not in self.group.members:
            new_id = self.rb.new_id[old_id]
            if new_id not in self.inputs:
                self.inputs.append(new_id)
                self.labels.append(f"%{old_id}")
            ref = ("in", self.inputs.index(new_id))
        else:
            args = [self.ref(i) for i in node.inputs]
            ref = self._inline(node, args) if node.op == FUSED else self._step(
                node.op, args, tuple(node.attrs[p] for p in INSTRUCTIONS[node.op].params))
        self.value[old_id] = ref
        return ref

    def _step(self, op: str, args: list[tuple[str, int]], params: tuple) -> tuple[str, int]:
        self.steps.append((op, args, params))
        return ("t", len(self.steps) - 1)

    def _inline(self, node: Node, args: list[tuple[str, int]]) -> tuple[str, int]:
        """A fused node's program, its input slots read as `args`."""
        program = node.attrs["program"]
        refs = list(args)
        for ins in program:
            arity = INSTRUCTIONS[ins[0]].arity
            refs.append(self._step(ins[0], [refs[s] for s in ins[1:1 + arity]], tuple(ins[1 + arity:])))
        return refs[-1]

    def program(self) -> tuple[tuple, ...]:
        k = len(self.inputs)
        slot = lambda ref: ref[1] if ref[0] == "in" else k + ref[1]  # noqa: E731
        return tuple((op, *(slot(a) for a in args), *(float(p) for p in params)) for op, args, params in self.steps)


def _fuse(rb: Rebuild, group: Group) -> bool:
    """Emit the group's fused node and let it stand for the root; False (nothing recorded) if refused."""
    root = rb.source.nodes[group.root]
    b = _Builder(rb, group)
    b.ref(root.id)
    program = b.program()
    fused = rb.emit(FUSED, tuple(b.inputs), {"program": program}, root.phase, name=f"{root.name}.fused")
    members = ", ".join(f"%{i}" for i in sorted(group.members))
    why = (f"{len(group.members)} elementwise nodes ({members}) -> one fused_elementwise: "
           f"{render_program(program, tuple(b.labels))}")
    return rb.replace(root, fused, why)


def run(graph: Graph, only: frozenset[int] | None = None) -> Rewrite:
    """Fuse every group of two or more elementwise nodes (only those whose root id is in `only`, when
    given); one rewrite line per fused group, naming its root. Sites: the roots."""
    if only is not None and (not isinstance(only, (set, frozenset))
                             or any(not isinstance(i, int) or isinstance(i, bool) for i in only)):
        raise GraphError(f"fuse_elementwise: only must be a frozenset of node ids, got {only!r:.80}")
    found = groups(graph)
    rb = Rebuild(graph)
    for old in graph.nodes:
        # members are copied as they come and left unread once their root is fused (finish drops them)
        if old.id in found and (only is None or old.id in only) and _fuse(rb, found[old.id]):
            rb.site(old.id)
        else:
            rb.copy(old)
    return rb.finish()


def fuse_elementwise(graph: Graph) -> Graph:
    """`graph` with its chains and trees of elementwise nodes fused (see the module docstring)."""
    return run(graph).graph
