"""An ONNX model's local functions inlined into its graph (ModelProto -> ModelProto), after counting the nodes
that inlining makes: each function may call others twice, so a few hundred bytes of nested functions ask for
2**40 nodes. The count is taken from the file alone, and a recursive function is refused by name."""
from __future__ import annotations

from typing import Any, Iterable

from accelsim.frontends.onnx_errors import fail, one_line
from accelsim.limits import ReadLimits

FunctionKey = tuple[str, str, str]  # (domain, name, overload)


def _subgraph_nodes(node: Any) -> Iterable[Any]:
    """The nodes of the subgraphs (If branches, Loop and Scan bodies) held in `node`'s attributes."""
    for a in node.attribute:
        if a.HasField("g"):
            yield from a.g.node
        for g in a.graphs:
            yield from g.node


class _Counter:
    """Nodes after inlining, per function (memoized), capped just above the limit so counts stay small ints."""

    def __init__(self, functions: dict[FunctionKey, Any], cap: int, label: str) -> None:
        self.functions, self.cap, self.label = functions, cap, label
        self.done: dict[FunctionKey, int] = {}
        self.calling: list[FunctionKey] = []

    def nodes(self, nodes: Iterable[Any]) -> int:
        total = 0
        for node in nodes:
            key = (node.domain, node.op_type, getattr(node, "overload", ""))
            total += self.function(key) if key in self.functions else 1
            total += self.nodes(_subgraph_nodes(node))
            if total > self.cap:
                return self.cap
        return total

    def function(self, key: FunctionKey) -> int:
        if key in self.done:
            return self.done[key]
        if key in self.calling:
            chain = " -> ".join(f"{d}::{n}" for d, n, _ in [*self.calling[self.calling.index(key):], key])
            raise fail(self.label, f"its local function {key[0]}::{key[1]} calls itself ({chain}); ONNX functions "
                                   "must not be recursive")
        self.calling.append(key)
        count = self.nodes(self.functions[key].node)
        self.calling.pop()
        self.done[key] = count
        return count


def _node_count(counter: _Counter, limit: int) -> str:
    """That the graph has (or would have once inlined) more than `limit` nodes, and which function makes them."""
    if not counter.functions:
        return f"has more than {limit:,} nodes"
    (domain, name, _), n = max(counter.done.items(), key=lambda kv: kv[1], default=(("", "", ""), 0))
    alone = (f" (local function {domain}::{name} alone expands to "
             f"{f'more than {limit:,}' if n > limit else f'{n:,}'})" if n else "")
    return f"would have more than {limit:,} nodes once its local functions are inlined{alone}"


def inline_functions(model: Any, label: str, limits: ReadLimits) -> Any:
    """`model` with its local functions inlined (itself when it has none); OnnxImportError when inlining would
    make more than limits.max_nodes nodes, or a function is recursive."""
    functions = {(f.domain, f.name, getattr(f, "overload", "")): f for f in model.functions}
    counter = _Counter(functions, limits.max_nodes + 1, label)
    count = counter.nodes(model.graph.node)
    if count > limits.max_nodes:
        raise fail(label, f"{_node_count(counter, limits.max_nodes)}, above the limit on the nodes of one "
                          f"graph; {ReadLimits.how_to_raise('max_nodes')}")
    if not functions:
        return model
    import onnx.inliner

    try:
        return onnx.inliner.inline_local_functions(model)
    except Exception as e:  # onnx raises its C++ errors as several Python types
        raise fail(label, f"its local functions cannot be inlined ({one_line(e, 200)})") from None
