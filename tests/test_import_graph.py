"""The import graph of `accelsim` reads like the pipeline: no file imports itself through others, no package
does, and the readers of a schedule depend on its contract (accelsim.schedule) only, never on how it was made
(accelsim.compiler). Every import counts: at module level, inside functions and under TYPE_CHECKING."""
from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "accelsim"
READERS = ("accelsim.sim", "accelsim.execute", "accelsim.viz", "accelsim.metrics", "accelsim.report")
COMPILER = "accelsim.compiler"


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _files() -> dict[str, Path]:
    return {_module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def _is_package(name: str, files: dict[str, Path]) -> bool:
    return files[name].name == "__init__.py"


def _imports(path: Path, name: str, files: dict[str, Path]) -> set[str]:
    """The accelsim modules `path` imports anywhere in its text: `from X import Y` names module X.Y when Y is a
    module, else X; relative imports are resolved against the file's package."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                base = ".".join(anchor + ([base] if base else []))
            for a in node.names:
                found.add(f"{base}.{a.name}" if f"{base}.{a.name}" in files else base)
    out = set()
    for target in found:
        while target and target not in files:  # `import accelsim.x.y` where y is a name: the module x
            target = target.rpartition(".")[0]
        if target.startswith("accelsim") and target != name:
            out.add(target)
    return out


def _graph() -> dict[str, set[str]]:
    files = _files()
    return {name: _imports(path, name, files) for name, path in files.items()}


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One cycle of `graph` (a list of nodes, first repeated last), or None: an iterative depth-first search."""
    colour: dict[str, int] = {}
    for start in sorted(graph):
        if start in colour:
            continue
        stack = [(start, iter(sorted(graph[start])))]
        path = [start]
        colour[start] = 1
        while stack:
            node, edges = stack[-1]
            nxt = next(edges, None)
            if nxt is None:
                colour[node] = 2
                stack.pop()
                path.pop()
            elif colour.get(nxt) == 1:
                return path[path.index(nxt):] + [nxt]
            elif nxt not in colour and nxt in graph:
                colour[nxt] = 1
                stack.append((nxt, iter(sorted(graph[nxt]))))
                path.append(nxt)
    return None


def _child_of(package: str, module: str) -> str | None:
    """The direct child of `package` (a sub-package or module) that holds `module`; None outside it or for the
    package's own __init__."""
    if not module.startswith(package + "."):
        return None
    return package + "." + module[len(package) + 1:].split(".")[0]


def test_the_walk_sees_imports_inside_functions_and_type_checking_blocks(tmp_path):
    """The walker is not fooled by where an import stands (a cycle hidden in a function is still a cycle)."""
    files = _files()
    text = ("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from accelsim.graph.ir import Graph\n"
            "def f():\n    from accelsim.schedule import plan\n    import accelsim.hw.spec\n")
    path = tmp_path / "probe.py"
    path.write_text(text)
    assert _imports(path, "accelsim.probe", files) == {"accelsim.graph.ir", "accelsim.schedule.plan",
                                                       "accelsim.hw.spec"}
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": set()}) is None


def test_no_file_imports_itself_through_others():
    cycle = _cycle(_graph())
    assert cycle is None, "file cycle: " + " -> ".join(cycle)


def test_no_package_imports_itself_through_others():
    """At every level of the tree, the children of a package (sub-packages and modules) form no cycle."""
    graph = _graph()
    files = _files()
    packages = [name for name in files if _is_package(name, files)]
    for package in packages:
        children: dict[str, set[str]] = defaultdict(set)
        for module, targets in graph.items():
            source = _child_of(package, module)
            if source is None:
                continue
            children[source]
            for target in targets:
                child = _child_of(package, target)
                if child is not None and child != source:
                    children[source].add(child)
        cycle = _cycle(dict(children))
        assert cycle is None, f"package cycle inside {package}: " + " -> ".join(cycle)


@pytest.mark.parametrize("reader", READERS)
def test_readers_of_a_schedule_never_reach_the_compiler(reader):
    """Not directly and not through anything they import: a reader needs the contract only."""
    graph = _graph()
    seen, todo, via = set(), [m for m in graph if m == reader or m.startswith(reader + ".")], {}
    while todo:
        module = todo.pop()
        if module in seen:
            continue
        seen.add(module)
        for target in graph.get(module, ()):
            via.setdefault(target, module)
            todo.append(target)
    reached = sorted(m for m in seen if m == COMPILER or m.startswith(COMPILER + "."))
    if reached:
        chain, m = [reached[0]], reached[0]
        while m in via and via[m] not in chain:
            m = via[m]
            chain.append(m)
        pytest.fail(f"{reader} reaches {reached[0]}: " + " <- ".join(chain))


def test_the_contract_does_not_import_the_compiler():
    graph = _graph()
    offenders = sorted((m, t) for m, targets in graph.items() if m.startswith("accelsim.schedule")
                       for t in targets if t.startswith(COMPILER))
    assert not offenders
