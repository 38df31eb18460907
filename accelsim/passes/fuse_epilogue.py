"""Epilogue fusion (Graph -> Graph): a matmul or conv2d, then a bias add, then an activation, becomes one
`matmul_epilogue` / `conv2d_epilogue` node (ops/epilogue.py), so the GEMM's result is never stored and
read back.

A place is a GEMM (matmul or conv2d) followed by an optional bias add and then an optional activation
(an op of ops/epilogue.py's ACTIVATIONS), with at least one of the two. A bias add reads the GEMM and a leaf, or a
reshape or broadcast of a leaf, holding one value per output column (matmul) or channel (conv2d): the
models' `x @ W + b` with b (n,), the conv layer's `+ reshape(b, (1, C, 1, 1))`, fold_batchnorm's
constant (1, C, 1, 1). Each intermediate must have the next member as its only reader and be neither
an output nor the loss: a value read elsewhere (in a training graph relu's and gelu's pre-activation,
which their backward rules read) stays materialised, so fusion stops before its reader. Fusing keeps
the arithmetic, so values and gradients are exact: the fused op's reference and gradient rule are the
base op's, add's and the activation's.
"""
from __future__ import annotations

from dataclasses import dataclass

from accelsim.errors import GraphError
from accelsim.graph.ir import Graph, Node
from accelsim.ops.epilogue import ACTIVATION_OF_OP, FUSED_OF_BASE
from accelsim.ops.registry import Shape, numel
from accelsim.passes.rebuild import Rebuild, Rewrite


@dataclass(frozen=True)
class Place:
    """One fusible chain in the source graph: the GEMM (the anchor), its bias add and the bias leaf (or
    None), and the activation node (or None); `last` is the node the fused op stands for."""

    gemm: Node
    add: Node | None
    bias_leaf: Node | None
    act: Node | None

    @property
    def last(self) -> Node:
        return self.act or self.add or self.gemm


def _sole_reader(graph: Graph, readers: list[list[int]], node: Node) -> Node | None:
    """The one node that reads `node`, in the same phase, when `node` is neither an output nor the loss."""
    if len(readers[node.id]) != 1 or node.id in graph.outputs.values() or node.id == graph.loss:
        return None
    reader = graph.nodes[readers[node.id][0]]
    return reader if reader.phase == node.phase else None


def _per_channel(shape: Shape, out: Shape, axis: int) -> bool:
    """`shape` broadcasts to `out` holding one value per index of `axis` (size 1 on every other axis)."""
    if len(shape) > len(out):
        return False
    padded = (1,) * (len(out) - len(shape)) + tuple(shape)
    return all(d == (out[k] if k == axis else 1) for k, d in enumerate(padded))


def _bias_leaf(graph: Graph, operand: int, out: Node, axis: int) -> Node | None:
    """The leaf holding a per-channel bias that `operand` broadcasts along `axis` of `out`, in channel
    order: the leaf itself, or the leaf under one reshape, under any broadcasts. None if it is not one."""
    n = graph.nodes[operand]
    while n.op == "broadcast_to":  # broadcasting a per-channel value keeps it per channel
        n = graph.nodes[n.inputs[0]]
    if not _per_channel(n.shape, out.shape, axis):
        return None
    if n.op == "reshape":  # one axis of size > 1, so the reshape keeps the leaf's element order
        n = graph.nodes[n.inputs[0]]
    if not n.is_leaf or n.dtype != out.dtype or numel(n.shape) != out.shape[axis]:
        return None
    return n


def find_places(graph: Graph) -> list[Place]:
    """Every fusible place of `graph`, in the id order of their GEMMs."""
    readers = graph.consumers()
    places = []
    for gemm in graph.nodes:
        spec = FUSED_OF_BASE.get(gemm.op)
        if spec is None:
            continue
        add = bias = act = None
        nxt = _sole_reader(graph, readers, gemm)
        if nxt is not None and nxt.op == "add" and nxt.shape == gemm.shape and gemm.id in nxt.inputs:
            operand = nxt.inputs[1] if nxt.inputs[0] == gemm.id else nxt.inputs[0]
            bias = _bias_leaf(graph, operand, gemm, spec.channel_axis(gemm.shape))
            if bias is not None:
                add = nxt
                nxt = _sole_reader(graph, readers, nxt)
        if nxt is not None and nxt.op in ACTIVATION_OF_OP:
            act = nxt
        if add is not None or act is not None:
            places.append(Place(gemm, add, bias, act))
    return places


def _bias_input(rb: Rebuild, place: Place) -> int | None:
    """The bias vector (C,) in the graph being built: the leaf itself, a constant reshaped at build time,
    or a reshape node of the leaf. None without a bias, or when a reshape cannot be emitted."""
    leaf = place.bias_leaf
    if leaf is None:
        return None
    channels = numel(leaf.shape)
    if leaf.shape == (channels,):
        return rb.hoist(leaf.id)
    if leaf.op == "const":
        return rb.const(rb.source.leaf_value(leaf.id).reshape(channels), place.last.phase, leaf.dtype)
    return rb.emit("reshape", (rb.hoist(leaf.id),), {"shape": (channels,)}, place.last.phase,
                   name=f"{leaf.name}.vector")


def _describe(place: Place, fused_op: str) -> str:
    g = place.gemm
    parts = [f"%{g.id} {g.op} {g.name!r}"] + (["bias"] if place.add else []) + ([place.act.op] if place.act else [])
    return " + ".join(parts) + f" -> {fused_op}"


def _fuse(rb: Rebuild, place: Place) -> bool:
    """Emit the fused node and let it stand for `place.last`; False (nothing recorded) if refused."""
    spec = FUSED_OF_BASE[place.gemm.op]
    a, b = (rb.new_id[i] for i in place.gemm.inputs)
    bias = _bias_input(rb, place)
    if place.bias_leaf is not None and bias is None:
        return False
    attrs = {**place.gemm.attrs, "activation": ACTIVATION_OF_OP[place.act.op].name if place.act else "none"}
    inputs = (a, b) if bias is None else (a, b, bias)
    fused = rb.emit(spec.op, inputs, attrs, place.last.phase, name=place.gemm.name)
    if not rb.replace(place.last, fused, _describe(place, spec.op)):
        return False
    rb.site(place.gemm.id)
    return True


def _check_only(only: object) -> frozenset[int] | None:
    if only is None:
        return None
    if not isinstance(only, (set, frozenset)) or not all(isinstance(i, int) and not isinstance(i, bool)
                                                          for i in only):
        raise GraphError(f"fuse_epilogue: only must be None or a set of node ids (the GEMM of each place to "
                         f"fuse, as Rewrite.sites lists them), got {only!r:.80}")
    return frozenset(only)


def run(graph: Graph, only: frozenset[int] | None = None) -> Rewrite:
    """Fuse every place (only those whose GEMM's id is in `only`, when given); one line per fused place.

    The members before `last` are copied as the walk meets them; once `last` is fused nothing reads
    them, and Rebuild.finish drops them. Where the fused node is refused (the phase rules), `last` is
    copied too, so that place stays as it was."""
    chosen = _check_only(only)
    by_last = {p.last.id: p for p in find_places(graph) if chosen is None or p.gemm.id in chosen}
    rb = Rebuild(graph)
    for old in graph.nodes:
        if rb.built(old.id):
            continue  # a bias leaf hoisted before its fused node
        place = by_last.get(old.id)
        if place is None or not _fuse(rb, place):
            rb.copy(old)
    return rb.finish()


def fuse_epilogue(graph: Graph) -> Graph:
    """`graph` with every GEMM + bias + activation chain fused into one node (see the module docstring)."""
    return run(graph).graph
