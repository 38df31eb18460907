"""Fuzz the hardware YAML loader and the schedule reader with hypothesis (mutations of the shipped files) ->
per target: examples run, accepted, refused, and every distinct traceback.

The property: loading a mutated file (and, for a hardware description that loads, costing a small graph on
it; for a schedule that loads, simulating it on its hardware) ends normally or in an AccelsimError. Any other
exception is a finding, shown with its traceback and the mutation that caused it.

    python experiments/fuzz.py --examples 2000 [--target yaml|schedule|all] [--seed 0] [--show 5]

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


def fuzz_yaml(examples: int, seed_value: int | None = 0, guard_s: float | None = None, deep: bool = True) -> Tally:
    """Mutations of the shipped hardware descriptions through A.load_hw; with `deep`, an accepted one also
    costs, compiles and simulates a tiny mlp step."""
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
                A.simulate(A.compile(graph, hw), hw)
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
    """Delete, duplicate or swap tasks or tensors, or reverse one of the lists."""
    key = data.draw(st.sampled_from(["tasks", "tensors"]), label="list")
    items = tree[key]
    op = data.draw(st.sampled_from(["delete", "duplicate", "swap", "reverse", "clear"]), label="list op")
    if op == "reverse" or len(items) < 2:
        items.reverse()
        return f"reverse {key}"
    if op == "clear":
        items.clear()
        return f"no {key}"
    i = data.draw(st.integers(0, len(items) - 1), label="i")
    if op == "delete":
        del items[i]
        return f"delete {key}[{i}]"
    if op == "duplicate":
        items.insert(i, copy.deepcopy(items[i]))
        return f"duplicate {key}[{i}]"
    j = (i + data.draw(st.integers(1, len(items) - 1), label="j")) % len(items)  # never a no-op swap
    items[i], items[j] = items[j], items[i]
    return f"swap {key}[{i}] and {key}[{j}]"


TARGETS = {"yaml": fuzz_yaml, "schedule": fuzz_schedule}


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
    p.add_argument("--target", choices=["yaml", "schedule", "all"], default="all")
    p.add_argument("--seed", type=int, default=0, help="hypothesis seed (default 0: reproducible)")
    p.add_argument("--show", type=int, default=5, help="distinct tracebacks to print per target")
    p.add_argument("--hang-seconds", type=float, default=30.0, help="per-example time guard")
    args = p.parse_args(argv)
    failed = False
    for name in (["yaml", "schedule"] if args.target == "all" else [args.target]):
        tally = TARGETS[name](args.examples, args.seed, args.hang_seconds)
        print(report(tally, args.show), flush=True)
        failed |= tally.tracebacks > 0
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
