"""Graph IR: a static-shape SSA dataflow DAG whose nodes are kept in topological order.

Builders append nodes through `Var` handles (`y = F.log(x1) + x1 * x2 - F.sin(x2)`);
every node's shape and dtype are inferred from the op registry when it is built.
"""
from __future__ import annotations

import zlib
from numbers import Integral
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from typing import Any, Iterator, Mapping, Sequence

import numpy as np

from accelsim import ops as F
from accelsim.errors import GraphError, ShapeError
from accelsim.graph import type_memo
from accelsim.graph.provenance import AppliedPass, ModelSource, OptimizerSettings
from accelsim.ops.registry import Shape, get_op

PHASES = ("forward", "backward", "update")
MAX_RANKS = 1024
"""The most tensor-parallel ranks a graph may have (Megatron-LM runs 8 per node; 1024 is far beyond)."""
LEAF_OPS = ("input", "param", "const")
FLOAT_DTYPES = ("float32", "float64")
DTYPES = FLOAT_DTYPES + ("int64",)
INITS = ("normal", "uniform", "randint", "zeros", "ones", "full")
"""How a leaf's default value is drawn (see _draw)."""
_FLOAT32_MAX = float(np.finfo(np.float32).max)
"""Below this a Python float stores in either float dtype without overflow."""
NUMPY_BYTES = {"float32": 4, "float64": 8, "int64": 8}
"""Bytes per element of each graph dtype as numpy stores it (the hardware may store fewer)."""
_DTYPE_ABBREV = {"float32": "f32", "float64": "f64", "int64": "i64"}


def _short_repr(value: Any, limit: int = 80) -> str:
    """repr(value) in one line of at most `limit` characters, for messages (an array's repr has newlines)."""
    try:
        text = " ".join(repr(value).split())
    except Exception:  # noqa: BLE001 - a hostile __repr__ must not replace the message it belongs to
        text = f"<{type(value).__name__}>"
    return text if len(text) <= limit else text[:limit - 3] + "..."


CONCAT = 0
"""FusedTile.tile of a fusion group's concat of its tiles."""
STAGED = -1
"""FusedTile.tile of a weight a fusion group stages once for all its tiles."""


@dataclass(frozen=True, slots=True)
class FusedTile:
    """Where layer fusion (passes/fuse_layers.py) put a node: in fusion group `group` (numbered from 1 in the
    order the passes made them), tile `tile` of `tiles` (1-based), or CONCAT: the group's concat of its tiles,
    or STAGED: a weight's copy every tile reads; `label` names the group ("first .. last" layer). A typed record,
    so that a layer merely named like a tile is never taken for one (fusion_groups.py reads these, never the
    layer names)."""

    group: int
    tile: int
    tiles: int
    label: str


@dataclass(frozen=True, slots=True)
class Node:
    """One use of an op: produces one tensor of `shape` and `dtype`. Immutable."""

    id: int
    op: str
    inputs: tuple[int, ...]
    attrs: Mapping[str, Any]
    shape: Shape
    dtype: str
    name: str
    phase: str
    rank: int = -1  # the tensor-parallel rank that computes it; -1: every rank (replicated)
    layer: str = ""  # the model layer it belongs to ("layer3.1.conv2", "h4.attn.q"); "": none (layer_names.py)
    fused: FusedTile | None = None  # its place in a layer-fused chain; None: none (not part of the computation)

    @property
    def is_leaf(self) -> bool:
        return self.op in LEAF_OPS

    @property
    def trainable(self) -> bool:
        return self.op == "param" and bool(self.attrs.get("trainable", True))


@dataclass(frozen=True, slots=True, eq=False)
class Var:
    """A handle on one node of a graph; arithmetic on Vars appends nodes."""

    graph: Graph
    id: int

    @property
    def node(self) -> Node:
        return self.graph.nodes[self.id]

    @property
    def shape(self) -> Shape:
        return self.graph.nodes[self.id].shape

    @property
    def dtype(self) -> str:
        return self.graph.nodes[self.id].dtype

    @property
    def ndim(self) -> int:
        return len(self.shape)

    def __repr__(self) -> str:
        n = self.node
        return f"Var(%{n.id} {n.op} {n.name!r} {_type_str(n)})"

    def __add__(self, other: Any) -> Var:
        return F.add(self, other)

    def __radd__(self, other: Any) -> Var:
        return F.add(other, self)

    def __sub__(self, other: Any) -> Var:
        return F.sub(self, other)

    def __rsub__(self, other: Any) -> Var:
        return F.sub(other, self)

    def __mul__(self, other: Any) -> Var:
        return F.mul(self, other)

    def __rmul__(self, other: Any) -> Var:
        return F.mul(other, self)

    def __truediv__(self, other: Any) -> Var:
        return F.div(self, other)

    def __rtruediv__(self, other: Any) -> Var:
        return F.div(other, self)

    def __neg__(self) -> Var:
        return F.neg(self)

    def __pow__(self, exponent: float) -> Var:
        return F.pow(self, exponent)

    def __matmul__(self, other: Var) -> Var:
        return F.matmul(self, other)

    def reshape(self, *shape: int | tuple[int, ...]) -> Var:
        return F.reshape(self, shape[0] if len(shape) == 1 and isinstance(shape[0], tuple) else shape)

    def transpose(self, *axes: int) -> Var:
        return F.transpose(self, axes or None)

    def sum(self, axes: int | tuple[int, ...] | None = None, keepdims: bool = False) -> Var:
        return F.sum(self, axes, keepdims)

    def mean(self, axes: int | tuple[int, ...] | None = None, keepdims: bool = False) -> Var:
        return F.mean(self, axes, keepdims)


def infer_type(op: str, in_nodes: Sequence[Node], attrs: Mapping[str, Any], graph_dtype: str,
               label: str) -> tuple[Shape, str]:
    """The shape and dtype the op registry gives `op` on `in_nodes` (a leaf: its attrs, else the
    graph's dtype). Raises ShapeError or GraphError starting with `label`; add_node and verify share it.
    Each distinct node type is inferred once (graph/type_memo.py)."""
    opdef = get_op(op)
    key = type_memo.type_key(op, [(n.shape, n.dtype) for n in in_nodes], attrs, graph_dtype)
    known = type_memo.recall(key, opdef)
    if known is not None:
        return known
    shape, dtype = _infer_type(opdef, in_nodes, attrs, graph_dtype, label)
    type_memo.remember(key, opdef, shape, dtype)
    return shape, dtype


def _infer_type(opdef: Any, in_nodes: Sequence[Node], attrs: Mapping[str, Any], graph_dtype: str,
                label: str) -> tuple[Shape, str]:
    for k, n in enumerate(in_nodes):
        wants_int = k in opdef.integer_inputs
        any_dtype = opdef.category == "data_movement"  # moving bytes works for indices too
        if wants_int != (n.dtype == "int64") and not (any_dtype and not wants_int):
            want = "an int64 index tensor" if wants_int else "a float tensor"
            raise ShapeError(f"{label}: input {k} (%{n.id} {n.name!r}) must be {want}, got {n.dtype}")
    float_dtypes = {n.dtype for k, n in enumerate(in_nodes) if k not in opdef.integer_inputs}
    if len(float_dtypes) > 1:
        raise ShapeError(f"{label}: inputs mix dtypes {sorted(float_dtypes)}")
    in_shapes = tuple(n.shape for n in in_nodes)
    try:
        shape = tuple(int(d) for d in opdef.infer(*in_shapes, **attrs))
    except ShapeError as e:
        shapes = ", ".join(str(s) for s in in_shapes)
        raise ShapeError(f"{label}: {e} (input shapes: {shapes})") from None
    except (TypeError, KeyError, IndexError, ValueError) as e:
        raise GraphError(f"{label}: bad attributes {dict(attrs)!r} for {len(in_nodes)} input(s): {e}") from None
    dtype = in_nodes[opdef.dtype_from].dtype if in_nodes else attrs.get("dtype", graph_dtype)
    return shape, dtype


_NODE_FIELDS = tuple(f for f in Node.__dataclass_fields__ if f not in ("id", "inputs"))
"""The fields a copied node keeps (Graph.append_from sets its id and inputs)."""


def _type_str(node: Node) -> str:
    return f"{_DTYPE_ABBREV[node.dtype]}[{','.join(map(str, node.shape))}]"


@dataclass
class Graph:
    """An append-only SSA DAG. Node ids are list positions, so ids are a topological order.

    Leaf values (inputs, parameters, constants) come from initializer attrs drawn from a
    per-name seeded RNG, so they are materialized only when a graph is evaluated.
    """

    name: str = "graph"
    dtype: str = "float32"
    seed: int = 0
    nodes: list[Node] = field(default_factory=list)
    outputs: dict[str, int] = field(default_factory=dict)
    loss: int | None = None
    source: ModelSource | None = None  # the zoo model and options that built the forward graph
    optimizer: OptimizerSettings | None = None  # set by training_graph: a training graph
    passes: tuple[AppliedPass, ...] = ()  # set by optimize: the rewrites since the step graph was built
    _arrays: dict[int, np.ndarray] = field(default_factory=dict, repr=False)
    _names: dict[str, int] = field(default_factory=dict, repr=False)
    _phase: str = field(default="forward", repr=False)
    _rank: int = field(default=-1, repr=False)
    _layer: str = field(default="", repr=False)

    def __post_init__(self) -> None:
        if self.dtype not in FLOAT_DTYPES:
            raise GraphError(f"graph {self.name!r}: dtype must be one of {FLOAT_DTYPES}, got {self.dtype!r}")
        if self.source is not None and not isinstance(self.source, ModelSource):
            raise GraphError(f"graph {self.name!r}: source must be a ModelSource or None, got {self.source!r}")
        if self.optimizer is not None and not isinstance(self.optimizer, OptimizerSettings):
            raise GraphError(f"graph {self.name!r}: optimizer must be an OptimizerSettings or None, "
                             f"got {self.optimizer!r}")
        if not isinstance(self.passes, tuple) or not all(isinstance(p, AppliedPass) for p in self.passes):
            raise GraphError(f"graph {self.name!r}: passes must be a tuple of AppliedPass, got {self.passes!r}")

    # ---- building -------------------------------------------------------------------

    @contextmanager
    def phase(self, phase: str) -> Iterator[None]:
        """Nodes built inside the block carry `phase` (forward, backward or update)."""
        if phase not in PHASES:
            raise GraphError(f"phase must be one of {PHASES}, got {phase!r}")
        previous, self._phase = self._phase, phase
        try:
            yield
        finally:
            self._phase = previous

    @contextmanager
    def rank(self, rank: int) -> Iterator[None]:
        """Nodes built inside the block belong to tensor-parallel rank `rank` (-1: replicated, computed
        by every rank). Megatron-style builders (models/parallel_layers.py) open one block per rank;
        autodiff builds each gradient rule's nodes in the rank of the node it differentiates."""
        if isinstance(rank, bool) or not isinstance(rank, Integral) or not -1 <= int(rank) < MAX_RANKS:
            raise GraphError(f"graph {self.name!r}: a tensor-parallel rank must be an integer in -1..{MAX_RANKS - 1}, "
                             f"got {rank!r}")
        previous, self._rank = self._rank, int(rank)
        try:
            yield
        finally:
            self._rank = previous

    @contextmanager
    def layer(self, name: str) -> Iterator[None]:
        """Nodes built inside the block belong to model layer `name` (a module path such as "layer3.1.conv2"),
        which reports, traces and plots show instead of node ids; an inner block's name replaces the outer's."""
        if not isinstance(name, str):
            raise GraphError(f"graph {self.name!r}: a layer name must be a string, got {_short_repr(name)}")
        previous, self._layer = self._layer, name
        try:
            yield
        finally:
            self._layer = previous

    @property
    def tensor_parallel(self) -> int:
        """How many tensor-parallel ranks the graph was built for: 1 + its highest rank (1: none)."""
        return max((n.rank for n in self.nodes), default=-1) + 1 or 1

    def var(self, node_id: int) -> Var:
        if not 0 <= node_id < len(self.nodes):
            raise GraphError(f"graph {self.name!r} has no node %{node_id}")
        return Var(self, node_id)

    def add_node(self, op: str, inputs: tuple[int, ...], attrs: Mapping[str, Any],
                 name: str | None = None) -> Var:
        """Append `op(inputs)`, inferring its shape and dtype; errors name op, node and shapes."""
        node_id = len(self.nodes)
        label = f"{op} node %{node_id}" + (f" ({name!r})" if name else "")
        bad = [i for i in inputs if not (isinstance(i, int) and 0 <= i < node_id)]
        if bad:
            raise GraphError(f"{label}: inputs {bad} are not nodes of graph {self.name!r} (ids 0..{node_id - 1})")
        shape, dtype = infer_type(op, [self.nodes[i] for i in inputs], attrs, self.dtype, label)
        self.nodes.append(Node(node_id, op, tuple(inputs), dict(attrs), shape, dtype,
                               name or f"{op}{node_id}", self._phase, self._rank, self._layer))
        return Var(self, node_id)

    def _leaf(self, op: str, name: str, shape: Shape, dtype: str, attrs: dict[str, Any]) -> Var:
        if name in self._names:
            raise GraphError(f"graph {self.name!r}: name {name!r} is already used by %{self._names[name]}")
        if dtype not in DTYPES:
            raise GraphError(f"{op} {name!r}: dtype must be one of {DTYPES}, got {dtype!r}")
        if not isinstance(shape, (tuple, list)) or not all(
                isinstance(d, Integral) and not isinstance(d, bool) for d in shape):
            raise ShapeError(f"{op} {name!r}: shape must be a tuple of integers, got {shape!r}")
        if any(int(d) < 0 for d in shape):
            raise ShapeError(f"{op} {name!r}: negative dimension in shape {tuple(shape)}")
        v = self.add_node(op, (), {**attrs, "shape": tuple(int(d) for d in shape), "dtype": dtype}, name=name)
        self._names[name] = v.id
        return v

    def _check_init(self, name: str, init: object) -> None:
        if init not in INITS:
            raise GraphError(f"leaf {name!r}: unknown init {init!r} (expected one of {', '.join(INITS)})")

    def input(self, name: str, shape: Shape, dtype: str | None = None, init: str = "normal",
              **init_args: float) -> Var:
        """A graph input (data fed per step); `init` draws its default value."""
        self._check_init(name, init)
        return self._leaf("input", name, shape, dtype or self.dtype, {"init": init, **init_args})

    def param(self, name: str, shape: Shape, init: str = "normal", trainable: bool = True,
              shard: tuple[int, int, int] | None = None, **init_args: float) -> Var:
        """A parameter; trainable ones get gradients and optimizer updates.

        shard=(axis, index, count): the parameter is slice `index` of `count` equal slices along `axis` of
        a tensor of `shape` named `name` (tensor parallelism's weight shards). Its leaf is named
        `name[index/count]` and its value is that slice of the value the whole tensor would draw, so a
        sharded model starts from exactly the weights of the unsharded one."""
        self._check_init(name, init)
        attrs: dict[str, Any] = {"init": init, "trainable": trainable, **init_args}
        if shard is None:
            return self._leaf("param", name, shape, self.dtype, attrs)
        axis, index, count = _check_shard(name, shape, shard)
        part = tuple(int(d) for d in shape)
        part = part[:axis] + (part[axis] // count,) + part[axis + 1:]
        attrs.update(shard=(axis, index, count), of=name, full_shape=tuple(int(d) for d in shape))
        return self._leaf("param", f"{name}[{index}/{count}]", part, self.dtype, attrs)

    def const(self, value: Any, dtype: str | None = None) -> Var:
        """A constant tensor (Python scalars in arithmetic become these). A number beyond the dtype's range
        becomes +-inf, as storing it in that dtype does (quietly: `check` names such a constant)."""
        want = self._const_dtype(value, dtype)
        if value is None:
            raise GraphError(f"graph {self.name!r}: a constant needs a value (numbers of {want}), got None")
        if type(value) is float and want in FLOAT_DTYPES and abs(value) < _FLOAT32_MAX:
            arr = np.asarray(value, dtype=want)  # arithmetic's scalars: nothing to overflow, no errstate to pay
        else:
            try:
                with np.errstate(over="ignore"):
                    arr = np.asarray(value, dtype=want)
            except (TypeError, ValueError, OverflowError) as e:
                raise GraphError(f"graph {self.name!r}: a constant must be numbers of {want}, got "
                                 f"{_short_repr(value)} ({type(e).__name__}: {str(e)[:120]})") from None
        node_id = len(self.nodes)
        v = self.add_node("const", (), {"shape": arr.shape, "dtype": want, "init": "array"},
                          name=f"const{node_id}")
        self._arrays[v.id] = arr
        return v

    def _const_dtype(self, value: Any, dtype: Any) -> str:
        """The dtype a constant is stored in: the graph's, or `dtype` naming one of DTYPES."""
        if dtype is None:
            return self.dtype
        try:
            name = np.dtype(dtype).name
        except (TypeError, ValueError):
            name = None
        if name not in DTYPES:
            raise GraphError(f"graph {self.name!r}: a constant's dtype must be one of {', '.join(DTYPES)}, got "
                             f"{_short_repr(dtype)} of type {type(dtype).__name__} (const(value, dtype): the value "
                             f"{_short_repr(value)} comes first, its dtype second)")
        return name

    def append_from(self, source: Graph, node: Node, inputs: tuple[int, ...]) -> int:
        """Append a copy of `source`'s `node` reading `inputs` (ids in this graph); returns its id.
        A leaf keeps its name lookup and any constant or cached value, so a pass that rebuilds a
        graph (DCE) needs no access to the private maps."""
        new_id = len(self.nodes)
        # what dataclasses.replace does, without its per-call field introspection (a tenth of DCE's time
        # on a 265K-node step)
        self.nodes.append(Node(**{f: getattr(node, f) for f in _NODE_FIELDS}, id=new_id, inputs=tuple(inputs)))
        if node.is_leaf:
            if node.op != "const":
                self._names[node.name] = new_id
            if node.id in source._arrays:
                self._arrays[new_id] = source._arrays[node.id]
        return new_id

    def output(self, name: str, v: Var) -> None:
        self.outputs[name] = v.id

    def set_loss(self, v: Var) -> None:
        if v.shape != ():
            raise ShapeError(f"loss must be a scalar, got %{v.id} {v.node.name!r} of shape {v.shape}")
        self.loss = v.id
        self.outputs["loss"] = v.id

    # ---- reading --------------------------------------------------------------------

    def __len__(self) -> int:
        return len(self.nodes)

    def by_name(self, name: str) -> Node:
        if name not in self._names:
            raise GraphError(f"graph {self.name!r} has no input or parameter named {name!r}")
        return self.nodes[self._names[name]]

    @property
    def inputs(self) -> list[Node]:
        return [n for n in self.nodes if n.op == "input"]

    @property
    def params(self) -> list[Node]:
        return [n for n in self.nodes if n.op == "param"]

    def consumers(self) -> list[list[int]]:
        """consumers()[i]: ids of the nodes that read node i, ascending."""
        out: list[list[int]] = [[] for _ in self.nodes]
        for n in self.nodes:
            for i in n.inputs:
                out[i].append(n.id)
        return out

    def gradient_nodes(self) -> list[int]:
        """Sorted ids of the backward nodes that update nodes read: the per-parameter gradients,
        which a step sums across micro-batches and replicas before the update runs."""
        return sorted({i for n in self.nodes if n.phase == "update" for i in n.inputs
                       if self.nodes[i].phase == "backward"})

    def leaf_value(self, node_id: int) -> np.ndarray:
        """The default value of an input, parameter or constant, drawn deterministically."""
        if node_id in self._arrays:
            return self._arrays[node_id]
        n = self.nodes[node_id]
        if not n.is_leaf:
            raise GraphError(f"%{node_id} {n.name!r} is a {n.op} node, not a leaf")
        arr = _draw(n, self.seed)
        self._arrays[node_id] = arr
        return arr

    def input_value(self, node_id: int, sample: int) -> np.ndarray:
        """The value of input `node_id` for the `sample`-th micro-batch of a step (sample 0 is
        leaf_value): every micro-batch and replica gets its own data."""
        n = self.nodes[node_id]
        if n.op != "input" or sample == 0:
            return self.leaf_value(node_id)
        return _draw(n, self.seed, sample)

    def copy(self, name: str | None = None) -> Graph:
        """A new graph sharing the (immutable) nodes, to be extended by a later stage."""
        return Graph(name=name or self.name, dtype=self.dtype, seed=self.seed, nodes=list(self.nodes),
                     outputs=dict(self.outputs), loss=self.loss, source=self.source, optimizer=self.optimizer,
                     passes=self.passes, _arrays=dict(self._arrays), _names=dict(self._names))

    def dump(self) -> str:
        """A readable listing, one node per line, in topological order."""
        lines = [f"graph {self.name} ({self.dtype}): {len(self.nodes)} nodes, "
                 f"{len(self.inputs)} inputs, {len(self.params)} params"]
        for n in self.nodes:
            if n.is_leaf:
                extra = {k: v for k, v in n.attrs.items() if k not in ("shape", "dtype")}
                if n.op == "const" and n.id in self._arrays and self._arrays[n.id].size == 1:
                    extra = {"value": float(self._arrays[n.id].reshape(()))}  # of any rank: (1, 1, 1, 1) too
                rhs = f"{n.op} {n.name!r}"
            else:
                extra = dict(n.attrs)
                rhs = f"{n.op}({', '.join(f'%{i}' for i in n.inputs)})"
            attr_str = " {" + ", ".join(f"{k}={v}" for k, v in extra.items()) + "}" if extra else ""
            where = f" @tp{n.rank}" if n.rank >= 0 else ""
            lines.append(f"  %{n.id} = {rhs}{attr_str} : {_type_str(n)}  [{n.phase}]{where}")
        outs = ", ".join(f"{k}=%{v}" for k, v in self.outputs.items())
        lines.append(f"outputs: {outs}")
        return "\n".join(lines)


def _check_shard(name: str, shape: Shape, shard: object) -> tuple[int, int, int]:
    """(axis, index, count) of a parameter shard, checked against the whole tensor's shape."""
    ok = (isinstance(shard, tuple) and len(shard) == 3
          and all(isinstance(v, Integral) and not isinstance(v, bool) for v in shard))
    if ok:
        axis, index, count = (int(v) for v in shard)
        ndim = len(shape) if isinstance(shape, (tuple, list)) else -1
        ok = 0 <= axis < ndim and 1 <= count <= MAX_RANKS and 0 <= index < count
        if ok and (not isinstance(shape[axis], Integral) or int(shape[axis]) % count):
            raise ShapeError(f"param {name!r}: axis {axis} of shape {tuple(shape)} does not split into {count} "
                             f"equal shards")
    if not ok:
        raise GraphError(f"param {name!r}: shard must be (axis, index, count) with 0 <= axis < {len(shape)} "
                         f"dimensions, 1 <= count <= {MAX_RANKS} and 0 <= index < count, got {shard!r}")
    return axis, index, count


def _draw(node: Node, graph_seed: int, sample: int = 0) -> np.ndarray:
    """Deterministic leaf value: the RNG is keyed by graph seed and node name, not build order. A
    parameter shard draws the whole tensor it is a slice of and keeps its slice."""
    a = node.attrs
    if "shard" in a:
        axis, index, count = a["shard"]
        whole = replace(node, name=a["of"], attrs={k: v for k, v in a.items() if k not in ("shard", "of")}
                        | {"shape": a["full_shape"]})
        size = a["full_shape"][axis] // count
        return np.ascontiguousarray(_draw(whole, graph_seed, sample)[
            (slice(None),) * axis + (slice(index * size, (index + 1) * size),)])
    shape, dtype = a["shape"], a["dtype"]
    key = [graph_seed, zlib.crc32(node.name.encode())] + ([sample] if sample else [])
    rng = np.random.default_rng(key)
    init = a.get("init", "normal")
    if init == "normal":
        arr = rng.normal(a.get("mean", 0.0), a.get("std", 1.0), size=shape)
    elif init == "uniform":
        arr = rng.uniform(a.get("low", 0.0), a.get("high", 1.0), size=shape)
    elif init == "randint":
        arr = rng.integers(int(a.get("low", 0)), int(a["high"]), size=shape)
    elif init == "zeros":
        arr = np.zeros(shape)
    elif init == "ones":
        arr = np.ones(shape)
    elif init == "full":
        arr = np.full(shape, a["value"])
    else:
        raise GraphError(f"{node.op} {node.name!r}: unknown init {init!r} "
                         "(expected normal, uniform, randint, zeros, ones or full)")
    return np.asarray(arr, dtype=dtype)
