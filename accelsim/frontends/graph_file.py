"""Graph <-> JSON graph file (save_graph, load_graph). Loading rebuilds the graph through the builder and the op
registry (frontends/graph_build.py), so every invariant a built graph has is checked again on a file.

Format (version 1), one JSON object:
  {"format": "accelsim.graph", "version": 1, "name", "dtype", "seed",
   "nodes": [{"id", "op", "name", "inputs", "attrs", "shape", "dtype", "phase", "rank"} (+ "value" for a
             const: nested lists), ...] in topological order (id = position),
   "outputs": [[name, node id], ...], "loss": node id or null,
   "optimizer": training_graph's settings or null, "passes": [{"name", "only"}]}
A node's attrs are [[key, value], ...]: a leaf's hold its initializer (init, std, trainable, ...), not its shape
and dtype (those are fields). Attributes and outputs are pairs in their order, since a graph's listing (and so
its graph_hash) shows them in order: a file round-trips to the same hash.
"""
from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from accelsim.errors import FrontendError
from accelsim.frontends.graph_attrs import AttrProblem, encode
from accelsim.frontends.graph_build import build_graph
from accelsim.frontends.model_source import file_source
from accelsim.graph.ir import Graph
from accelsim.safe_file import FileRules, JsonRules, decode_utf8, parse_json, read_regular

FORMAT = "accelsim.graph"
VERSION = 1
MAX_GRAPH_FILE_BYTES = 8 * 2**20
"""A forward ResNet-50 is ~0.1 MB and its training step ~1 MB of JSON; a file past 8 MiB is not a graph file
accelsim wrote (constants are written in full, so very large folded constants do not fit)."""
GRAPH_JSON = JsonRules(FrontendError, "a graph file", lambda name: f"{name} is not a number a graph file may hold",
                       too_deep="JSON nested too deeply for a graph file", unique_keys=True)


def _path(path: object, what: str) -> Path:
    if not isinstance(path, (str, Path)) or not str(path):
        raise FrontendError(f"{what} needs a file path (str or pathlib.Path), got {path!r}")
    return Path(path)


def graph_to_json(graph: Graph) -> dict[str, Any]:
    """The graph file's JSON object for `graph`."""
    nodes = []
    for n in graph.nodes:
        attrs = {k: v for k, v in n.attrs.items() if not (n.is_leaf and k in ("shape", "dtype"))}
        try:
            entry = {"id": n.id, "op": n.op, "name": n.name, "inputs": list(n.inputs),
                     "attrs": [[k, encode(v)] for k, v in attrs.items()], "shape": list(n.shape),
                     "dtype": n.dtype, "phase": n.phase, "rank": n.rank}
            if n.op == "const":
                entry["value"] = encode(graph.leaf_value(n.id).tolist())
        except AttrProblem as e:
            raise FrontendError(f"graph {graph.name!r}: node %{n.id} ({n.name!r}, {n.op}) cannot be written: {e}") \
                from None
        nodes.append(entry)
    return {"format": FORMAT, "version": VERSION, "name": graph.name, "dtype": graph.dtype, "seed": graph.seed,
            "nodes": nodes, "outputs": [[k, v] for k, v in graph.outputs.items()], "loss": graph.loss,
            "optimizer": graph.optimizer.kwargs() if graph.optimizer is not None else None,
            "passes": [{"name": p.name, "only": list(p.only) if p.only is not None else None} for p in graph.passes]}


def save_graph(graph: Graph, path: str | Path) -> None:
    """Write `graph` as a graph file; the same graph always gives a byte-identical file."""
    if not isinstance(graph, Graph):
        raise FrontendError(f"save_graph needs an accelsim Graph, got {type(graph).__name__}")
    path = _path(path, "save_graph")
    text = json.dumps(graph_to_json(graph), sort_keys=True, separators=(",", ":")) + "\n"
    if len(text.encode()) > MAX_GRAPH_FILE_BYTES:
        raise FrontendError(f"{path}: graph {graph.name!r} needs {len(text.encode()):,} bytes of JSON, above the "
                            f"{MAX_GRAPH_FILE_BYTES:,} bytes a graph file may have")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    except OSError as e:
        raise FrontendError(f"{path}: cannot write the graph file: {e.strerror or e}") from None


def read_bytes(path: str | Path, what: str, limit: int) -> tuple[Path, bytes]:
    """The bytes of a `what` file at `path` (a regular file of at most `limit` bytes), or a FrontendError."""
    path = _path(path, what)
    rules = FileRules(f"a {what} file", limit, FrontendError,
                      lambda n: f"{n:,} bytes is larger than the {limit:,} bytes a {what} file may have")
    return path, read_regular(path, rules)


def parse_graph_json(path: Path, data: bytes) -> Any:
    """The JSON value of a graph file's bytes (UTF-8, no NaN or Infinity, no duplicate keys)."""
    return parse_json(decode_utf8(data, str(path), GRAPH_JSON), str(path), GRAPH_JSON)


def load_graph(path: str | Path) -> Graph:
    """The Graph of a graph file, rebuilt through the builder (every node's op, attributes, shape and dtype
    checked); its `source` records the file (path and sha256), so a schedule compiled from it rebuilds it."""
    path, data = read_bytes(path, "graph", MAX_GRAPH_FILE_BYTES)
    graph = build_graph(path, parse_graph_json(path, data))
    graph.source = file_source(path, hashlib.sha256(data).hexdigest())
    return graph
