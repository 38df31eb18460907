"""Fuzz accelsim's file readers with hypothesis (mutations of real files) -> per target: examples run,
accepted, refused, and every distinct traceback. Targets:
  yaml      the shipped hardware descriptions, through A.load_hw (an accepted one costs, compiles and
            replays a tiny step);
  schedule  the shipped schedules, through A.load_schedule, then A.simulate;
  graph     graph files of small zoo steps (accelsim.frontends.save_graph), through load_graph, then compile
            and simulate;
  onnx      small ONNX models (an MLP and a convolutional net built with onnx.helper): their protobuf fields
            (op types, attributes, wiring, initializer dims, data and types, input dims, the opset) or their
            bytes, through A.frontends load_onnx, then compile (needs the `onnx` extra);
  sweep     the shipped sweep specs, through load_spec and the first points' configurations and hardware,
            and a tiny MLP spec whose first point is evaluated whole (evaluate_point must not report an
            internal error).

The property: loading a mutated file (and what an accepted one must survive) ends normally or in an
AccelsimError. Any other exception is a finding, shown with its traceback and the mutation that caused it.

    python experiments/fuzz.py --examples 2000 [--target yaml|schedule|graph|onnx|sweep|all] [--seed 0]

Exits 1 if any example ended in a traceback (or ran past --hang-seconds).
"""
from __future__ import annotations

import argparse
import copy
import json
import math
import signal
import sys
import tempfile
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import yaml
from hypothesis import HealthCheck, Phase, given, seed, settings
from hypothesis import strategies as st

import accelsim as A

REPO = Path(__file__).resolve().parent.parent
HWCONFIGS = sorted((REPO / "hwconfigs").glob("*.yaml"))
SCHEDULES = sorted((REPO / "schedules").glob("*.json"))
HOSTILE_VALUES: list[Any] = [math.inf, -math.inf, math.nan, -1, 0, 1e-320, 1e300, "", [], {}, None, True,
                             "x" * 10_000, 10**30]
RESERVED_NAMES = ["link:0->1", "link", "allreduce", "transfer", "chip0:mem", "mem", "mxm", "", " ", "x" * 10_000,
                  "a/b", "\x00", "é"]
TEXT_CHARS = list(":-[]{}&*!|>#'\"%@`\t\n ,?0123456789.eE+-aZ") + ["\x00", "\u2028", "\ufeff", "\\"]


class Hang(BaseException):
    """An example ran past the per-example time guard (a BaseException, so code under test cannot swallow it)."""


@dataclass
class Finding:
    signature: str
    count: int
    text: str  # the formatted traceback (its last lines)
    example: str  # the mutation that first caused it


@dataclass
class Tally:
    target: str
    examples: int = 0
    accepted: int = 0
    refused: int = 0
    findings: dict[str, Finding] = field(default_factory=dict)
    seconds: float = 0.0
    notes: list[str] = field(default_factory=list)

    @property
    def tracebacks(self) -> int:
        return sum(f.count for f in self.findings.values())

    def record(self, exc: BaseException, example: str) -> None:
        frames = [f for f in traceback.extract_tb(exc.__traceback__) if "accelsim" in f.filename] or \
            traceback.extract_tb(exc.__traceback__)[-1:]
        where = f"{Path(frames[-1].filename).name}:{frames[-1].lineno}" if frames else "?"
        sig = f"{type(exc).__name__} at {where}"
        if sig in self.findings:
            self.findings[sig].count += 1
            return
        text = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
        tail = "\n".join(text.rstrip().splitlines()[-14:])
        self.findings[sig] = Finding(sig, 1, tail, example)

    def line(self) -> str:
        return (f"{self.target}: {self.examples} examples, {self.accepted} accepted, {self.refused} refused, "
                f"{self.tracebacks} tracebacks ({len(self.findings)} distinct) in {self.seconds:.1f} s")


# -- mutations -----------------------------------------------------------------------------------------------
def paths(obj: Any, prefix: tuple = ()) -> list[tuple]:
    """Every key path into nested dicts and lists (not the root)."""
    out = [prefix] if prefix else []
    if isinstance(obj, dict):
        for k, v in obj.items():
            out += paths(v, prefix + (k,))
    elif isinstance(obj, list):
        for i, v in enumerate(obj):
            out += paths(v, prefix + (i,))
    return out


def _get(obj: Any, path: tuple) -> Any:
    for key in path:
        obj = obj[key]
    return obj


def _is_quantity(value: Any) -> bool:
    if isinstance(value, bool):
        return False
    return isinstance(value, (int, float)) or (isinstance(value, str) and any(c.isdigit() for c in value)
                                               and len(value) < 32)


def _parent(obj: Any, path: tuple) -> tuple[Any, Any]:
    for key in path[:-1]:
        obj = obj[key]
    return obj, path[-1]


def _short(value: Any) -> str:
    r = repr(value)
    return r if len(r) <= 40 else r[:37] + "..."


def hostile_value(data: st.DataObject) -> Any:
    return data.draw(st.one_of(st.sampled_from(HOSTILE_VALUES), st.sampled_from(HOSTILE_VALUES),
                               st.integers(-2**70, 2**70),
                               st.floats(allow_nan=True, allow_infinity=True), st.text(max_size=12),
                               st.sampled_from([10**6, 7, 2, 1, -2])), label="value")


def mutate_tree(data: st.DataObject, tree: Any, units: Callable[[Any], list[dict]], what: str) -> str:
    """One structural or value mutation of a parsed file, in place; returns its description."""
    kind = data.draw(st.sampled_from(["delete", "replace", "replace", "replace", "duplicate", "rename"]),
                     label="mutation")
    if kind in ("duplicate", "rename"):
        items = units(tree)
        if items:
            i = data.draw(st.integers(0, len(items) - 1), label="item")
            if kind == "duplicate":
                owner = next(lst for lst in _lists_holding(tree, items[i]))
                owner.append(copy.deepcopy(items[i]))
                return f"duplicate {what} {i}"
            if "name" in items[i]:
                name = data.draw(st.sampled_from(RESERVED_NAMES), label="name")
                items[i]["name"] = name
                return f"rename {what} {i} to {_short(name)}"
        kind = "replace"
    all_paths = paths(tree)
    numeric = [q for q in all_paths if _is_quantity(_get(tree, q))]
    # numbers and quantities ("900 MHz") are where unphysical values hide: pick one of them most of the time
    pool = numeric if numeric and data.draw(st.integers(0, 3), label="numeric?") else all_paths
    path = data.draw(st.sampled_from(pool), label="path")
    parent, key = _parent(tree, path)
    if kind == "delete":
        del parent[key]
        return f"delete {'.'.join(map(str, path))}"
    value = hostile_value(data)
    parent[key] = value
    return f"set {'.'.join(map(str, path))} = {_short(value)}"


def _lists_holding(tree: Any, item: Any):
    """The lists (anywhere in tree) that hold `item` by identity."""
    if isinstance(tree, list):
        if any(x is item for x in tree):
            yield tree
        for x in tree:
            yield from _lists_holding(x, item)
    elif isinstance(tree, dict):
        for v in tree.values():
            yield from _lists_holding(v, item)


def mutate_text(data: st.DataObject, text: str) -> tuple[str, str]:
    """Flip, insert or delete characters somewhere in the text."""
    n = data.draw(st.integers(1, 4), label="edits")
    done = []
    for _ in range(n):
        kind = data.draw(st.sampled_from(["flip", "insert", "delete"]), label="text edit")
        pos = data.draw(st.integers(0, max(len(text) - 1, 0)), label="position")
        if kind == "delete":
            length = data.draw(st.integers(1, 64), label="length")
            text = text[:pos] + text[pos + length:]
            done.append(f"delete {length} chars at {pos}")
        else:
            chars = data.draw(st.lists(st.one_of(st.sampled_from(TEXT_CHARS), st.characters()), min_size=1,
                                       max_size=4), label="chars")
            s = "".join(chars)
            text = text[:pos] + s + text[pos + (1 if kind == "flip" else 0):]
            done.append(f"{kind} {s!r} at {pos}")
    return text, "; ".join(done)


# -- targets -------------------------------------------------------------------------------------------------
def _hw_units(tree: Any) -> list[dict]:
    out = []
    if isinstance(tree, dict):
        for chip in tree.get("chips", []) if isinstance(tree.get("chips"), list) else []:
            if isinstance(chip, dict):
                for key in ("units", "memories"):
                    if isinstance(chip.get(key), list):
                        out += [u for u in chip[key] if isinstance(u, dict)]
    return out


def _sched_units(tree: Any) -> list[dict]:
    out = []
    if isinstance(tree, dict):
        for key in ("tasks", "tensors"):
            if isinstance(tree.get(key), list):
                out += [x for x in tree[key] if isinstance(x, dict)]
    return out


class _Guard:
    """Per-example time guard with SIGALRM (main thread only; off when seconds is None)."""

    def __init__(self, seconds: float | None) -> None:
        self.seconds = seconds

    def __enter__(self) -> None:
        if self.seconds:
            def on_alarm(signum, frame):
                raise Hang(f"example ran past {self.seconds} s")
            self._old = signal.signal(signal.SIGALRM, on_alarm)
            signal.setitimer(signal.ITIMER_REAL, self.seconds)

    def __exit__(self, *exc: Any) -> None:
        if self.seconds:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, self._old)


def _tiny_graph():
    return A.training_graph(A.models.build("mlp", batch=2, sizes=(16, 8, 4)))


def _run(tally: Tally, examples: int, body: Callable[[st.DataObject, Path], tuple[str, Callable[[], None]]],
         seed_value: int | None, guard_s: float | None) -> Tally:
    """Drive `body` with hypothesis: it draws a mutation and returns (description, check); the check's
    outcome is tallied here, so hypothesis never sees a failure (no shrinking, every example counts)."""
    start = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix=f"fuzz_{tally.target}_") as tmp:
        tmp_path = Path(tmp)

        @settings(max_examples=examples, deadline=None, database=None, phases=[Phase.generate],
                  suppress_health_check=list(HealthCheck))
        @given(st.data())
        def prop(data: st.DataObject) -> None:
            description, check = body(data, tmp_path)
            tally.examples += 1
            try:
                with _Guard(guard_s):
                    check()
                tally.accepted += 1
            except A.AccelsimError:
                tally.refused += 1
            except Hang as e:
                tally.record(e, description)
            except Exception as e:  # noqa: BLE001 - every other exception is a finding
                tally.record(e, description)

        if seed_value is not None:
            prop = seed(seed_value)(prop)
        prop()
    tally.seconds = time.perf_counter() - start
    return tally


def fuzz_yaml(examples: int, seed_value: int | None = 0, guard_s: float | None = None, deep: bool = True,
              effort: str = "default") -> Tally:
    """Mutations of the shipped hardware descriptions through A.load_hw; with `deep`, an accepted one also
    costs, compiles (at `effort`) and simulates a tiny mlp step."""
    bases = {p.name: (p.read_text(), yaml.safe_load(p.read_text())) for p in HWCONFIGS}
    graph = _tiny_graph()

    def body(data: st.DataObject, tmp: Path) -> tuple[str, Callable[[], None]]:
        name = data.draw(st.sampled_from(sorted(bases)), label="config")
        text, tree = bases[name]
        if data.draw(st.booleans(), label="text mutation"):
            out, what = mutate_text(data, text)
        else:
            tree = copy.deepcopy(tree)
            what = mutate_tree(data, tree, _hw_units, "unit or memory")
            out = yaml.safe_dump(tree, sort_keys=False, allow_unicode=True)
        path = tmp / "fuzzed.yaml"
        path.write_text(out, encoding="utf-8", errors="surrogatepass")

        def check() -> None:
            hw = A.load_hw(path)
            if deep:  # what an accepted description must survive: cost, compile and replay a tiny step
                A.cost.graph_costs(hw, graph)
                A.simulate(A.compile(graph, hw, effort=effort), hw)
        return f"{name}: {what}", check

    return _run(Tally("yaml"), examples, body, seed_value, guard_s)


def schedule_bases(tally: Tally | None = None) -> dict[str, tuple[str, dict, Any]]:
    """name -> (text, parsed, hw) of each shipped schedule; one the loader refuses as stale is replaced by a
    fresh compile of the same step (noted on the tally)."""
    bases = {}
    for p in SCHEDULES:
        text = p.read_text()
        hw = A.load_hw(json.loads(text)["hw_name"])
        try:
            A.load_schedule(p, hw=hw)
        except A.AccelsimError as e:
            sched = A.compile(A.training_graph(A.models.build("superres"), optimizer="sgd", lr=0.01), hw)
            with tempfile.TemporaryDirectory() as tmp:
                fresh = Path(tmp) / p.name
                A.save_schedule(sched, fresh)
                text = fresh.read_text()
            if tally is not None:
                tally.notes.append(f"{p.name} does not load ({str(e).splitlines()[0][:120]}); fuzzing a fresh compile")
        bases[p.name] = (text, json.loads(text), hw)
    return bases


def fuzz_schedule(examples: int, seed_value: int | None = 0, guard_s: float | None = None) -> Tally:
    """Mutations of the shipped schedules through A.load_schedule, then A.simulate on their hardware."""
    tally = Tally("schedule")
    bases = schedule_bases(tally)

    def body(data: st.DataObject, tmp: Path) -> tuple[str, Callable[[], None]]:
        name = data.draw(st.sampled_from(sorted(bases)), label="schedule")
        text, tree, hw = bases[name]
        kind = data.draw(st.sampled_from(["field", "field", "field", "tasks", "text"]), label="kind")
        if kind == "text":
            out, what = mutate_text(data, text)
        elif kind == "tasks":
            tree = copy.deepcopy(tree)
            what = _mutate_lists(data, tree)
            out = json.dumps(tree)
        else:
            tree = copy.deepcopy(tree)
            what = mutate_tree(data, tree, _sched_units, "task or tensor")
            out = json.dumps(tree)
        path = tmp / "fuzzed.json"
        path.write_text(out, encoding="utf-8", errors="surrogatepass")

        def check() -> None:
            A.simulate(A.load_schedule(path), hw)
        return f"{name}: {what}", check

    return _run(tally, examples, body, seed_value, guard_s)


def _mutate_lists(data: st.DataObject, tree: dict) -> str:
    """Delete, duplicate or swap tasks or tensors, clear one of the lists or reverse it."""
    key = data.draw(st.sampled_from(["tasks", "tensors"]), label="list")
    op = data.draw(st.sampled_from(["delete", "duplicate", "swap", "reverse", "clear"]), label="list op")
    return _mutate_items(data, tree[key], key, op)


def _mutate_items(data: st.DataObject, items: list, label: str, op: str) -> str:
    """Apply one list operation to `items` (a schedule's tasks or tensors, a graph file's nodes): reverse (also
    whenever fewer than two items leave nothing else to do), clear, or delete, duplicate or swap drawn items."""
    if op == "reverse" or len(items) < 2:
        items.reverse()
        return f"reverse {label}"
    if op == "clear":
        items.clear()
        return f"no {label}"
    i = data.draw(st.integers(0, len(items) - 1), label="i")
    if op == "delete":
        del items[i]
        return f"delete {label}[{i}]"
    if op == "duplicate":
        items.insert(i, copy.deepcopy(items[i]))
        return f"duplicate {label}[{i}]"
    j = (i + data.draw(st.integers(1, len(items) - 1), label="j")) % len(items)  # never a no-op swap
    items[i], items[j] = items[j], items[i]
    return f"swap {label}[{i}] and {label}[{j}]"


def _node_units(tree: Any) -> list[dict]:
    nodes = tree.get("nodes") if isinstance(tree, dict) else None
    return [n for n in nodes if isinstance(n, dict)] if isinstance(nodes, list) else []


def graph_bases() -> dict[str, str]:
    """name -> graph file text of small steps: an MLP's training step (with its optimizer and update) and a
    transformer block's forward graph (attention, softmax, layer norm)."""
    from accelsim.frontends.graph_file import save_graph

    graphs = {"mlp_training": _tiny_graph(),
              "transformer_block": A.models.build("transformer_block", batch=1, seq=4, d_model=8, heads=2)}
    out = {}
    with tempfile.TemporaryDirectory() as tmp:
        for name, g in graphs.items():
            path = Path(tmp) / f"{name}.json"
            save_graph(g, path)
            out[name] = path.read_text()
    return out


def fuzz_graph(examples: int, seed_value: int | None = 0, guard_s: float | None = None,
               effort: str = "default") -> Tally:
    """Mutations of graph files through load_graph; an accepted graph is compiled (at `effort`) and replayed."""
    from accelsim.frontends.graph_file import load_graph

    tally = Tally("graph")
    bases = {name: (text, json.loads(text)) for name, text in graph_bases().items()}
    hw = A.load_hw("groq_like")

    def body(data: st.DataObject, tmp: Path) -> tuple[str, Callable[[], None]]:
        name = data.draw(st.sampled_from(sorted(bases)), label="graph")
        text, tree = bases[name]
        kind = data.draw(st.sampled_from(["field", "field", "field", "nodes", "text"]), label="kind")
        if kind == "text":
            out, what = mutate_text(data, text)
        else:
            tree = copy.deepcopy(tree)
            what = _mutate_nodes(data, tree) if kind == "nodes" else mutate_tree(data, tree, _node_units, "node")
            out = json.dumps(tree)
        path = tmp / "fuzzed_graph.json"
        path.write_text(out, encoding="utf-8", errors="surrogatepass")

        def check() -> None:
            graph = load_graph(path)
            A.simulate(A.compile(graph, hw, effort=effort), hw)
        return f"{name}: {what}", check

    return _run(tally, examples, body, seed_value, guard_s)


def _mutate_nodes(data: st.DataObject, tree: dict) -> str:
    """Rewire one node's input to a drawn source (in range, out of range, huge, or not an integer), or apply a
    list operation to the nodes."""
    nodes = tree["nodes"]
    op = data.draw(st.sampled_from(["delete", "duplicate", "swap", "rewire", "rewire", "reverse"]), label="node op")
    if op != "rewire" or len(nodes) < 2:
        return _mutate_items(data, nodes, "nodes", op)
    i = data.draw(st.integers(0, len(nodes) - 1), label="i")
    if not nodes[i].get("inputs"):
        return _mutate_items(data, nodes, "nodes", "swap")
    k = data.draw(st.integers(0, len(nodes[i]["inputs"]) - 1), label="input")
    src = data.draw(st.one_of(st.integers(-3, len(nodes) + 3), st.sampled_from([10**12, -(2**63), 1.5, "0"])),
                    label="source")
    nodes[i]["inputs"][k] = src
    return f"node {i} input {k} = {_short(src)}"


# -- ONNX ---------------------------------------------------------------------------------------------------
ONNX_OPS = ["MatMul", "Add", "Relu", "Gemm", "Conv", "GlobalAveragePool", "Flatten", "Reshape", "Transpose",
            "Softmax", "Concat", "MaxPool", "AveragePool", "BatchNormalization", "Mul", "Sub", "Div", "Sigmoid",
            "Tanh", "Erf", "Gather", "Slice", "Unsqueeze", "Squeeze", "NoSuchOp", ""]


def onnx_bases() -> dict[str, bytes]:
    """name -> serialized model: an MLP (MatMul, Add, Relu) and a small convolutional net (Conv, Relu,
    GlobalAveragePool, Flatten, Gemm), float32, opset 17, with their initializers."""
    import numpy as np
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(0)

    def init(name: str, *shape: int):
        return numpy_helper.from_array(rng.standard_normal(shape).astype(np.float32), name)

    mlp = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w1"], ["h"]), helper.make_node("Add", ["h", "b1"], ["hb"]),
         helper.make_node("Relu", ["hb"], ["r"]), helper.make_node("MatMul", ["r", "w2"], ["y0"]),
         helper.make_node("Add", ["y0", "b2"], ["y"])],
        "mlp", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 4])],
        [init("w1", 8, 16), init("b1", 16), init("w2", 16, 4), init("b2", 4)])
    cnn = helper.make_graph(
        [helper.make_node("Conv", ["x", "w", "b"], ["c"], kernel_shape=[3, 3], pads=[1, 1, 1, 1], strides=[1, 1]),
         helper.make_node("Relu", ["c"], ["r"]), helper.make_node("GlobalAveragePool", ["r"], ["p"]),
         helper.make_node("Flatten", ["p"], ["f"], axis=1),
         helper.make_node("Gemm", ["f", "fw", "fb"], ["y"], transB=1)],
        "cnn", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 8, 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 5])],
        [init("w", 4, 3, 3, 3), init("b", 4), init("fw", 5, 4), init("fb", 5)])
    out = {}
    for g in (mlp, cnn):
        model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
        model.ir_version = 8
        out[g.name] = model.SerializeToString()
    return out


def _mutate_onnx(data: st.DataObject, model: Any) -> str:
    """One change to a parsed ModelProto, in place; returns its description."""
    from onnx import helper

    g = model.graph
    kind = data.draw(st.sampled_from(["op", "attr", "wire", "dims", "data", "dtype", "input", "opset", "drop"]),
                     label="onnx mutation")
    if kind == "op":
        node = g.node[data.draw(st.integers(0, len(g.node) - 1), label="node")]
        node.op_type = data.draw(st.sampled_from(ONNX_OPS), label="op type")
        return f"node {node.name or node.output[0]} op = {node.op_type!r}"
    if kind == "attr":
        node = g.node[data.draw(st.integers(0, len(g.node) - 1), label="node")]
        name = data.draw(st.sampled_from(["kernel_shape", "pads", "strides", "axis", "transB", "alpha", "group",
                                          "dilations", "perm"]), label="attribute")
        value = data.draw(st.one_of(st.integers(-2**40, 2**40), st.sampled_from([0, -1, 2**31, 2**63 - 1]),
                                    st.floats(allow_nan=True, allow_infinity=True),
                                    st.lists(st.integers(-2**33, 2**33), min_size=1, max_size=6)), label="value")
        del node.attribute[:]  # one attribute, whatever the node had
        node.attribute.append(helper.make_attribute(name, value))
        return f"node {node.output[0]} attribute {name} = {_short(value)}"
    if kind == "wire":
        node = g.node[data.draw(st.integers(0, len(g.node) - 1), label="node")]
        names = [n for x in g.node for n in x.output] + [i.name for i in g.initializer] + ["", "missing"]
        if node.input:
            k = data.draw(st.integers(0, len(node.input) - 1), label="input")
            node.input[k] = data.draw(st.sampled_from(names), label="source")
            return f"node {node.output[0]} input {k} = {node.input[k]!r}"
        node.output[0] = data.draw(st.sampled_from(names), label="output")
        return f"node output = {node.output[0]!r}"
    if kind in ("dims", "data", "dtype"):
        t = g.initializer[data.draw(st.integers(0, len(g.initializer) - 1), label="initializer")]
        if kind == "dims":
            dims = data.draw(st.lists(st.one_of(st.integers(-3, 64), st.sampled_from([2**31, 2**40, 2**62])),
                                      max_size=6), label="dims")
            del t.dims[:]
            t.dims.extend(dims)
            return f"initializer {t.name} dims = {dims}"
        if kind == "data":
            cut = data.draw(st.integers(0, max(len(t.raw_data) - 1, 0)), label="cut")
            t.raw_data = t.raw_data[:cut]
            return f"initializer {t.name} data cut to {cut} bytes"
        t.data_type = data.draw(st.integers(0, 30), label="data type")
        return f"initializer {t.name} data type = {t.data_type}"
    if kind == "input":
        dims = g.input[0].type.tensor_type.shape.dim
        d = dims[data.draw(st.integers(0, len(dims) - 1), label="dim")]
        if data.draw(st.booleans(), label="symbolic?"):
            d.dim_param = data.draw(st.sampled_from(["N", "", "batch size"]), label="name")
            return f"input dim = {d.dim_param!r}"
        d.dim_value = data.draw(st.one_of(st.integers(-2, 64), st.sampled_from([2**31, 2**40, 2**62])), label="size")
        return f"input dim = {d.dim_value}"
    if kind == "opset":
        model.opset_import[0].version = data.draw(st.sampled_from([1, 6, 9, 11, 13, 21, 99, 2**40]), label="opset")
        return f"opset = {model.opset_import[0].version}"
    i = data.draw(st.integers(0, len(g.node) - 1), label="node")
    del g.node[i]
    return f"drop node {i}"


def fuzz_onnx(examples: int, seed_value: int | None = 0, guard_s: float | None = None,
              effort: str = "default") -> Tally:
    """Mutations of small ONNX models (protobuf fields or raw bytes) through load_onnx; an accepted model's
    graph is compiled (at `effort`) and replayed."""
    import onnx

    from accelsim.frontends.onnx_import import load_onnx

    tally = Tally("onnx")
    bases = onnx_bases()
    hw = A.load_hw("groq_like")

    def body(data: st.DataObject, tmp: Path) -> tuple[str, Callable[[], None]]:
        name = data.draw(st.sampled_from(sorted(bases)), label="model")
        raw = bases[name]
        if data.draw(st.integers(0, 3), label="bytes?") == 0:
            pos = data.draw(st.integers(0, len(raw) - 1), label="position")
            how = data.draw(st.sampled_from(["truncate", "flip", "insert"]), label="byte edit")
            junk = data.draw(st.binary(min_size=1, max_size=8), label="bytes")
            out = {"truncate": raw[:pos], "flip": raw[:pos] + junk + raw[pos + len(junk):],
                   "insert": raw[:pos] + junk + raw[pos:]}[how]
            what = f"{how} {junk.hex()} at byte {pos}"
        else:
            model = onnx.load_from_string(raw)
            what = _mutate_onnx(data, model)
            out = model.SerializeToString()
        path = tmp / "fuzzed.onnx"
        path.write_bytes(out)

        def check() -> None:
            graph = load_onnx(path)
            A.simulate(A.compile(graph, hw, effort=effort), hw, graph=graph)
        return f"{name}: {what}", check

    return _run(tally, examples, body, seed_value, guard_s)


# -- sweep specs --------------------------------------------------------------------------------------------
SWEEPS = sorted((REPO / "experiments" / "sweeps").glob("*.yaml"))
TINY_SWEEP = {"name": "tiny", "hw": "groq_like", "model": "mlp", "model_options": {"batch": 2, "sizes": [16, 8, 4]},
              "options": {"training": True, "simulate": True},
              "parameters": {"options.microbatches": [1, 2], "clock_hz": ["900 MHz", "1.2 GHz"]},
              "search": {"method": "grid"}, "metrics": ["throughput_samples_per_s", "energy_per_sample_j"]}
"""A spec whose points take milliseconds: its first point is evaluated whole."""
POINTS_CHECKED = 2


EVALUATED_TASKS = 2_000
"""TINY_SWEEP's first point is evaluated only if its step has at most this many tasks (a mutation to 6,912
micro-batches is a valid, large step: minutes of compiling, not a finding)."""


def _small_step(spec: Any, params: dict[str, Any]) -> bool:
    from accelsim.dse.evaluate import _config
    from accelsim.limits import estimate_tasks

    o = _config(spec, params).options
    step = A.training_graph(A.models.build(spec.model, **spec.model_options))
    return estimate_tasks(step, o.microbatches, o.data_parallel, o.pipeline_stages) <= EVALUATED_TASKS


def fuzz_sweep(examples: int, seed_value: int | None = 0, guard_s: float | None = None) -> Tally:
    """Mutations of the shipped sweep specs and of TINY_SWEEP through load_spec; an accepted spec's first
    points get their configuration and hardware resolved (TINY_SWEEP's first point is evaluated, and
    evaluate_point, which never raises, must not report an internal error)."""
    from accelsim.dse.evaluate import _config, _hw, evaluate_point, spec_payload
    from accelsim.dse.load import load_spec
    from accelsim.dse.search import make_search

    tally = Tally("sweep")
    bases = {p.name: p.read_text() for p in SWEEPS}
    bases["tiny.yaml"] = yaml.safe_dump(TINY_SWEEP, sort_keys=False)
    trees = {name: yaml.safe_load(text) for name, text in bases.items()}

    def body(data: st.DataObject, tmp: Path) -> tuple[str, Callable[[], None]]:
        name = data.draw(st.sampled_from(sorted(bases)), label="spec")
        if data.draw(st.integers(0, 2), label="text?") == 0:
            out, what = mutate_text(data, bases[name])
        else:
            tree = copy.deepcopy(trees[name])
            what = mutate_tree(data, tree, lambda t: [], "spec")
            out = yaml.safe_dump(tree, sort_keys=False, allow_unicode=True)
        path = tmp / "fuzzed_sweep.yaml"
        path.write_text(out, encoding="utf-8", errors="surrogatepass")

        def check() -> None:
            spec = load_spec(path)
            points = [p.params for p in make_search(spec).ask()[:POINTS_CHECKED]]
            if name == "tiny.yaml" and points and _small_step(spec, points[0]):
                record = evaluate_point(spec_payload(spec), points[0])
                if record["error"].startswith("internal error"):
                    raise AssertionError(record["error"])
            for params in points:
                _hw(spec, _config(spec, params))
        return f"{name}: {what}", check

    return _run(tally, examples, body, seed_value, guard_s)


TARGETS = {"yaml": fuzz_yaml, "schedule": fuzz_schedule, "graph": fuzz_graph, "onnx": fuzz_onnx, "sweep": fuzz_sweep}


def report(tally: Tally, show: int) -> str:
    lines = [tally.line(), *(f"  note: {n}" for n in tally.notes)]
    for k, f in enumerate(sorted(tally.findings.values(), key=lambda f: -f.count)[:show], 1):
        lines.append(f"  traceback {k}: {f.signature} ({f.count} example(s)); first from: {f.example}")
        lines += ["    " + line for line in f.text.splitlines()]
    if len(tally.findings) > show:
        lines.append(f"  ... and {len(tally.findings) - show} more distinct tracebacks")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--examples", type=int, default=2000, help="examples per target (default 2000)")
    p.add_argument("--target", choices=[*TARGETS, "all"], default="all")
    p.add_argument("--seed", type=int, default=0, help="hypothesis seed (default 0: reproducible)")
    p.add_argument("--show", type=int, default=5, help="distinct tracebacks to print per target")
    p.add_argument("--hang-seconds", type=float, default=30.0, help="per-example time guard")
    args = p.parse_args(argv)
    failed = False
    for name in (list(TARGETS) if args.target == "all" else [args.target]):
        tally = TARGETS[name](args.examples, args.seed, args.hang_seconds)
        print(report(tally, args.show), flush=True)
        failed |= tally.tracebacks > 0
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
