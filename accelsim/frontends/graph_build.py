"""A graph file's JSON object -> Graph, rebuilt node by node through Graph's builder API and the op registry.

Everything is checked before it is used: the object's keys and types, sizes (node count, tensor bytes against
accelsim.limits) before anything is allocated, each node's op (a registry entry), inputs (earlier nodes only:
no cycles), attributes (graph_attrs.ATTR_KINDS), and the shape and dtype the registry infers against those
the file states. Every problem is one FrontendError naming the file, the node and what was expected.
"""
from __future__ import annotations

import math
from dataclasses import replace
from numbers import Integral
from pathlib import Path
from typing import Any

from accelsim.errors import AccelsimError, FrontendError
from accelsim.frontends.graph_attrs import ATTR_KINDS, INIT_ARGS, AttrProblem, check_attr, decode, plain_array
from accelsim.graph.ir import DTYPES, FLOAT_DTYPES, MAX_RANKS, NUMPY_BYTES, PHASES, Graph
from accelsim.graph.provenance import AppliedPass, OptimizerSettings
from accelsim.graph.verify import verify
from accelsim.limits import DEFAULT_LIMITS
from accelsim.ops.registry import OPS
from accelsim.passes.table import PASSES
from accelsim.remat.rewrite import REMAT_PASS

MAX_NODES = 200_000
"""GPT-2 small's training step has ~30,000 nodes; a file with more than this is refused before it is built."""
MAX_DIMS = 16
MAX_DIM = 2**40

TOP_KEYS = {"format": str, "version": int, "name": str, "dtype": str, "seed": int, "nodes": list,
            "outputs": list, "loss": (int, type(None)), "optimizer": (dict, type(None)), "passes": list}
NODE_KEYS = {"id": int, "op": str, "name": str, "inputs": list, "attrs": list, "shape": list, "dtype": str,
             "phase": str, "rank": int}


def _is_int(v: Any) -> bool:
    return isinstance(v, Integral) and not isinstance(v, bool)


def _type_ok(value: Any, kind: Any) -> bool:
    kinds = kind if isinstance(kind, tuple) else (kind,)
    if int in kinds and _is_int(value):
        return True
    return any(k is not int and isinstance(value, k) for k in kinds)


def _kind_name(kind: Any) -> str:
    names = {int: "an integer", str: "a string", list: "a list", dict: "an object", type(None): "null"}
    return " or ".join(names[k] for k in (kind if isinstance(kind, tuple) else (kind,)))


def _check_keys(path: Path, where: str, obj: Any, spec: dict[str, Any], optional: tuple[str, ...] = ()) -> None:
    if not isinstance(obj, dict):
        raise FrontendError(f"{path}: {where} must be a JSON object, got {type(obj).__name__}")
    missing = [k for k in spec if k not in obj and k not in optional]
    extra = [k for k in obj if k not in spec and k not in optional]
    if missing or extra:
        parts = ([f"missing key(s) {', '.join(missing)}"] if missing else []) + \
                ([f"unknown key(s) {', '.join(extra)}"] if extra else [])
        raise FrontendError(f"{path}: {where}: {'; '.join(parts)} (expected keys: {', '.join(spec)})")
    for k, kind in spec.items():
        if k in obj and not _type_ok(obj[k], kind):
            raise FrontendError(f"{path}: {where}: {k} must be {_kind_name(kind)}, got {obj[k]!r:.60}")


def _check_header(path: Path, data: Any) -> None:
    _check_keys(path, "the graph file", data, TOP_KEYS)
    if data["format"] != "accelsim.graph" or data["version"] != 1:
        raise FrontendError(f"{path}: format {data['format']!r} version {data['version']!r} is not a graph file this "
                            "accelsim reads (expected format 'accelsim.graph', version 1)")
    if data["dtype"] not in FLOAT_DTYPES:
        raise FrontendError(f"{path}: dtype must be one of {', '.join(FLOAT_DTYPES)}, got {data['dtype']!r}")
    if not 0 <= data["seed"] < 2**63:
        raise FrontendError(f"{path}: seed must be an integer in 0..2^63-1, got {data['seed']}")
    if len(data["nodes"]) > MAX_NODES:
        raise FrontendError(f"{path}: {len(data['nodes']):,} nodes, above the {MAX_NODES:,} a graph file may have")


def _node_label(k: int, entry: Any) -> str:
    name = entry.get("name") if isinstance(entry, dict) else None
    op = entry.get("op") if isinstance(entry, dict) else None
    return f"node {k}" + (f" ({name!r:.40}" + (f", {op!r:.30})" if op is not None else ")") if name else "")


def _check_node(path: Path, k: int, entry: Any) -> tuple[int, ...]:
    """The node's declared shape, after checking its keys, types, op, inputs, phase, rank and sizes."""
    where = _node_label(k, entry)
    _check_keys(path, where, entry, NODE_KEYS, optional=("value",))
    if entry["id"] != k:
        raise FrontendError(f"{path}: {where}: id {entry['id']} must equal its position {k} (ids are a topological "
                            "order)")
    if entry["op"] not in OPS:
        raise FrontendError(f"{path}: {where}: unknown op {entry['op']!r} (known: {', '.join(sorted(OPS))})")
    if ("value" in entry) != (entry["op"] == "const"):
        raise FrontendError(f"{path}: {where}: a const node, and only a const node, has a 'value'")
    bad = [i for i in entry["inputs"] if not (_is_int(i) and 0 <= i < k)]
    if bad:
        raise FrontendError(f"{path}: {where}: inputs {bad[:5]} are not earlier nodes (expected ids 0..{k - 1}; a "
                            "node may read only nodes before it, so a graph file has no cycles)")
    if entry["dtype"] not in DTYPES or entry["phase"] not in PHASES or not -1 <= entry["rank"] < MAX_RANKS:
        raise FrontendError(f"{path}: {where}: dtype {entry['dtype']!r:.20}, phase {entry['phase']!r:.20}, rank "
                            f"{entry['rank']}: expected a dtype in {DTYPES}, a phase in {PHASES} and a rank in "
                            f"-1..{MAX_RANKS - 1}")
    shape = entry["shape"]
    if len(shape) > MAX_DIMS or not all(_is_int(d) and 0 <= d <= MAX_DIM for d in shape):
        raise FrontendError(f"{path}: {where}: shape {shape!r:.80} must be at most {MAX_DIMS} integers in "
                            f"0..{MAX_DIM}")
    return tuple(int(d) for d in shape)


def _check_sizes(path: Path, shapes: list[tuple[int, ...]], dtypes: list[str]) -> None:
    """The tensors the file declares, against accelsim.limits' ceiling, before any is built or drawn."""
    total = sum(math.prod(s) * NUMPY_BYTES[d] for s, d in zip(shapes, dtypes))
    if total > DEFAULT_LIMITS.max_tensor_bytes:
        raise FrontendError(f"{path}: the graph's tensors would take {total:,} bytes, above the limit of "
                            f"{DEFAULT_LIMITS.max_tensor_bytes:,} bytes (accelsim.limits.Limits.max_tensor_bytes)")


def _pairs(path: Path, where: str, raw: list[Any]) -> list[tuple[str, Any]]:
    """[[key, value], ...] with distinct string keys."""
    if not all(isinstance(p, list) and len(p) == 2 and isinstance(p[0], str) for p in raw):
        raise FrontendError(f"{path}: {where}: expected a list of [name, value] pairs, got {raw!r:.80}")
    keys = [p[0] for p in raw]
    dup = next((k for k in keys if keys.count(k) > 1), None)
    if dup is not None:
        raise FrontendError(f"{path}: {where}: {dup!r:.40} appears twice")
    return [(k, v) for k, v in raw]


def _attrs(path: Path, where: str, raw: list[Any], leaf: bool) -> dict[str, Any]:
    out = {}
    for key, value in _pairs(path, f"{where}: attrs", raw):
        try:
            out[key] = decode(value)
            check_attr(key, out[key], INIT_ARGS if leaf else ATTR_KINDS)
        except AttrProblem as e:
            raise FrontendError(f"{path}: {where}: attribute {key!r}: {e}") from None
    return out


def _const(g: Graph, value: Any, entry: dict[str, Any]) -> Any:
    """A constant built by Graph.const, under the file's name, phase and rank: a graph's constants keep the
    names they were built with when a pass renumbers them (`const23` at id 22), and the listing shows names."""
    scratch = Graph(name=g.name, dtype=g.dtype, seed=g.seed)
    node = scratch.const(value, dtype=entry["dtype"]).node
    node = replace(node, name=entry["name"], phase=entry["phase"], rank=entry["rank"])
    return g.var(g.append_from(scratch, node, ()))


def _add_leaf(g: Graph, entry: dict[str, Any], attrs: dict[str, Any], shape: tuple[int, ...]) -> Any:
    op, name, dtype = entry["op"], entry["name"], entry["dtype"]
    if op == "const":
        return _const(g, plain_array(entry["value"], shape, dtype), entry)
    init = attrs.pop("init", "normal")
    if op == "input":
        return g.input(name, shape, dtype=dtype, init=init, **attrs)
    trainable = attrs.pop("trainable", True)
    if not isinstance(trainable, bool):
        raise AttrProblem(f"attribute 'trainable' must be true or false, got {trainable!r:.40}")
    if "shard" in attrs:
        shard, of, full = attrs.pop("shard"), attrs.pop("of", None), attrs.pop("full_shape", None)
        if not isinstance(of, str) or not isinstance(full, tuple):
            raise AttrProblem("a parameter shard needs attributes 'of' (a name) and 'full_shape' (a list)")
        return g.param(of, full, init=init, trainable=trainable, shard=shard, **attrs)
    return g.param(name, shape, init=init, trainable=trainable, **attrs)


def _add_node(path: Path, g: Graph, entry: dict[str, Any], shape: tuple[int, ...]) -> None:
    where = _node_label(entry["id"], entry)
    leaf = entry["op"] in ("input", "param", "const")
    attrs = _attrs(path, where, entry["attrs"], leaf)
    try:
        with g.phase(entry["phase"]), g.rank(entry["rank"]):
            if leaf:
                if entry["inputs"]:
                    raise AttrProblem("a leaf node has no inputs")
                v = _add_leaf(g, entry, attrs, shape)
            else:
                v = g.add_node(entry["op"], tuple(entry["inputs"]), attrs, name=entry["name"])
    except (AccelsimError, AttrProblem) as e:
        raise FrontendError(f"{path}: {where}: {e}") from None
    except (TypeError, ValueError, KeyError, OverflowError) as e:  # an initializer argument of the wrong kind
        raise FrontendError(f"{path}: {where}: attributes {entry['attrs']!r:.120} are not valid: {e}") from None
    node = v.node
    if node.shape != shape or node.dtype != entry["dtype"] or node.name != entry["name"]:
        raise FrontendError(f"{path}: {where}: the file says {entry['name']!r} {entry['dtype']}{list(shape)}, but "
                            f"building it gives {node.name!r} {node.dtype}{list(node.shape)}")


def _provenance(path: Path, g: Graph, data: dict[str, Any]) -> None:
    n = len(g.nodes)
    outputs = dict(_pairs(path, "outputs", data["outputs"]))
    for key, node_id in outputs.items():
        if not _is_int(node_id) or not 0 <= node_id < n:
            raise FrontendError(f"{path}: output {key!r:.40} names node {node_id!r:.20}, not a node id 0..{n - 1}")
        g.outputs[key] = int(node_id)
    try:
        if data["loss"] is not None:
            if not 0 <= data["loss"] < n or outputs.get("loss") != data["loss"]:
                raise FrontendError(f"{path}: loss {data['loss']} must be a node id 0..{n - 1} and the output "
                                    "'loss'")
            g.set_loss(g.var(data["loss"]))
        if data["optimizer"] is not None:
            g.optimizer = OptimizerSettings(**data["optimizer"])
        g.passes = tuple(AppliedPass(**p) if isinstance(p, dict) else AppliedPass(p) for p in data["passes"])
        _check_pass_names(path, g.passes)
    except FrontendError:
        raise
    except (AccelsimError, TypeError) as e:
        raise FrontendError(f"{path}: loss, optimizer or passes: {e}") from None


def _check_pass_names(path: Path, passes: tuple[AppliedPass, ...]) -> None:
    """Every recorded pass is one this accelsim knows, as a schedule's recorded passes must be (schedule/source.py):
    a graph is only what its source and passes rebuild."""
    for k, p in enumerate(passes):
        if p.name not in PASSES and p.name != REMAT_PASS:
            raise FrontendError(f"{path}: the graph file records pass {p.name!r} (step {k + 1} of {len(passes)}), "
                                f"which this accelsim does not know (known: {', '.join(PASSES)}, {REMAT_PASS}); "
                                "write the graph again with `accelsim import` or save_graph")


def build_graph(path: Path, data: Any) -> Graph:
    """The Graph a graph file's parsed JSON describes, checked as the module docstring says."""
    _check_header(path, data)
    shapes = [_check_node(path, k, entry) for k, entry in enumerate(data["nodes"])]
    _check_sizes(path, shapes, [e["dtype"] for e in data["nodes"]])
    try:
        g = Graph(name=data["name"], dtype=data["dtype"], seed=data["seed"])
    except AccelsimError as e:
        raise FrontendError(f"{path}: {e}") from None
    for entry, shape in zip(data["nodes"], shapes):
        _add_node(path, g, entry, shape)
    _provenance(path, g, data)
    try:
        return verify(g)
    except AccelsimError as e:
        raise FrontendError(f"{path}: the rebuilt graph fails verification: {e}") from None
