"""Which chains of consecutive layers layer fusion may tile (Graph -> chains and the reasons others are not).

A chain is a run of row-local layers on NCHW tensors, each reading the previous one's value, whose
intermediate values have no other reader and are neither an output nor the loss: convolutions (plain or
with a fused epilogue), max and average pooling (windows along H: layer_tiles.RowWindow) and elementwise
ops whose other operands either do not vary along H (a bias, a batch norm's per-channel statistics) or
are full NCHW tensors of the same rows (a residual), which each tile reads in its rows. A chain is worth
tiling when it holds at least two windowed layers: fusing them keeps the intermediate between them on
chip. Training-mode `batch_norm` normalizes with statistics over every row, so a chain stops before it.
"""
from __future__ import annotations

from dataclasses import dataclass

from accelsim.graph.ir import Graph, Node
from accelsim.ops.registry import get_op
from accelsim.passes.layer_tiles import RowWindow, chain_bands, tile_rows

WINDOWED_OPS = ("conv2d", "conv2d_epilogue", "max_pool2d", "avg_pool2d")
"""Layers with a window along H; their first input is the one tiled."""
MIN_WINDOWED = 2
"""A chain needs this many windowed layers: with one, no intermediate between two layers stays on chip."""
ROW_STATISTICS_OPS = ("batch_norm", "layer_norm", "softmax", "mean", "sum", "max")
"""Ops whose value at one row depends on every row: a chain stops before them, and says so."""


@dataclass(frozen=True)
class Member:
    """One layer of a chain: its node, which input is the chain's value, and its window along H."""

    node: Node
    operand: int
    window: RowWindow
    windowed: bool


@dataclass(frozen=True)
class Chain:
    """Consecutive layers fused as one group; the first member's id is the chain's anchor."""

    members: tuple[Member, ...]

    @property
    def anchor(self) -> int:
        return self.members[0].node.id

    @property
    def last(self) -> Node:
        return self.members[-1].node

    def describe(self) -> str:
        first, last = self.members[0].node, self.last
        convs = sum(m.windowed for m in self.members)
        return (f"%{first.id} {first.op} {first.name!r} .. %{last.id} {last.op} {last.name!r} "
                f"({len(self.members)} layers, {convs} windowed)")


def _window(node: Node) -> RowWindow:
    a = node.attrs
    kernel = a["kernel"][0] if "kernel" in a else None
    return RowWindow(kernel=kernel if kernel is not None else 0, stride=a["stride"][0], padding=a["padding"][0],
                     dilation=a.get("dilation", (1, 1))[0])


def _member(graph: Graph, node: Node, value: int | None) -> Member | None:
    """`node` as a chain member reading the chain's `value` (None: the first member, reading its first
    input), or None when it is not row-local on that value."""
    if node.is_leaf or node.phase != "forward" or len(node.shape) != 4:
        return None
    if node.op in WINDOWED_OPS:
        if value is not None and node.inputs[0] != value or value is not None and value in node.inputs[1:]:
            return None
        window = _window(node)
        if node.op.startswith("conv2d"):
            window = RowWindow(graph.nodes[node.inputs[1]].shape[2], window.stride, window.padding, window.dilation)
        return Member(node, 0, window, True)
    if get_op(node.op).category != "elementwise":
        return None
    positions = [k for k, i in enumerate(node.inputs) if i == value] if value is not None else [0]
    if len(positions) != 1:
        return None
    operand = positions[0]
    x = graph.nodes[node.inputs[operand]]
    if x.shape != node.shape or x.dtype != node.dtype:
        return None
    for k, i in enumerate(node.inputs):
        if k == operand:
            continue
        s = graph.nodes[i].shape
        padded = (1,) * (4 - len(s)) + tuple(s) if len(s) <= 4 else None
        if padded is None or (padded[2] != 1 and (len(s) != 4 or s != node.shape)):
            return None  # varies along H without being a tensor of the chain's own rows
    return Member(node, operand, RowWindow(), False)


def _sole_reader(graph: Graph, readers: list[list[int]], node: Node) -> Node | None:
    """The one node reading `node` once, when `node` is neither an output nor the loss."""
    if len(readers[node.id]) != 1 or node.id in graph.outputs.values() or node.id == graph.loss:
        return None
    return graph.nodes[readers[node.id][0]]


@dataclass(frozen=True)
class FusionPlan:
    """The chains fusible into `tiles` tiles, and one line per chain (or stop) that is not, saying why."""

    chains: tuple[Chain, ...]
    refused: tuple[str, ...]


def _geometry_problem(graph: Graph, chain: Chain, tiles: int) -> str:
    """Why `chain` cannot be cut into `tiles` bands of output rows ("" if it can)."""
    rows = chain.last.shape[2]
    if tiles > rows:
        return f"its output has {rows} rows along H, fewer than the {tiles} tiles asked for"
    windows = [m.window for m in chain.members]
    in_rows = [graph.nodes[m.node.inputs[m.operand]].shape[2] for m in chain.members]
    for start, stop in tile_rows(rows, tiles):
        for m, band in zip(chain.members, chain_bands(windows, in_rows, start, stop)):
            if band.start >= band.stop:
                return (f"output rows {start}..{stop - 1} of %{m.node.id} {m.node.op} {m.node.name!r} read only "
                        "padding: a tile would have no input rows")
    return ""


def plan_fusion(graph: Graph, tiles: int) -> FusionPlan:
    """Every maximal chain of `graph` (module docstring), in anchor order, split into those that fuse into
    `tiles` tiles and the reasons for the rest."""
    readers = graph.consumers()
    taken: set[int] = set()
    chains: list[Chain] = []
    refused: list[str] = []
    for node in graph.nodes:
        if node.id in taken:
            continue
        first = _member(graph, node, None)
        if first is None or not first.windowed:
            continue  # a chain starts at a windowed layer: elementwise work before it is not worth a tile
        members = [first]
        stop = ""
        while True:
            nxt = _sole_reader(graph, readers, members[-1].node)
            if nxt is None:
                break
            member = _member(graph, nxt, members[-1].node.id)
            if member is None:
                if nxt.op in ROW_STATISTICS_OPS:
                    stop = (f"; it stops before %{nxt.id} {nxt.op} {nxt.name!r}, whose every row depends on all "
                            f"rows (freeze a training-mode batch norm first: accelsim.passes.freeze_batchnorm)")
                break
            members.append(member)
        chain = Chain(tuple(members))
        taken.update(m.node.id for m in members)
        windowed = sum(m.windowed for m in members)
        if windowed < MIN_WINDOWED:
            refused.append(f"chain {chain.describe()}: {windowed} windowed layer(s), fusion needs "
                           f"{MIN_WINDOWED}{stop}")
            continue
        problem = _geometry_problem(graph, chain, tiles)
        if problem:
            refused.append(f"chain {chain.describe()}: {problem}")
            continue
        chains.append(chain)
    return FusionPlan(tuple(chains), tuple(refused))
