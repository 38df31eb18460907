"""Wall-clock time of refusing hostile inputs (YAML and JSON bombs, size bombs) and of drawing a 5,000-span
timeline, each as a ratio to loading a valid hardware description in the same run.

The tests bound these by work counted (tests/work_meter.py), never by time, so that a busy machine cannot fail
them; this is where their speed is watched. A small bomb's refusal should cost about one valid load (a few ms), the
50 MiB file about its reading, and the timeline a couple of seconds at most.
Run: python experiments/bench_refusals.py [--repeat 5]
"""
from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path
from typing import Callable

import yaml

import accelsim as A
from accelsim.hw import yaml_loader
from accelsim.limits import check_step_size
from accelsim.sim.trace import Result, Span
from accelsim.viz.timeline import plot_timeline

REPO = Path(__file__).resolve().parent.parent
GROQ = REPO / "hwconfigs" / "groq_like.yaml"


def _alias_bomb(levels: int = 12) -> str:
    """10**levels copies of one number in a few hundred bytes."""
    lines = ["l0: &l0 [" + ", ".join(["1"] * 10) + "]"]
    lines += [f"l{i}: &l{i} [" + ", ".join([f"*l{i - 1}"] * 10) + "]" for i in range(1, levels)]
    return "units: {" + ", ".join(lines) + "}\n"


def _refused(fn: Callable[[], object], errors: type[BaseException] | tuple[type[BaseException], ...]) -> None:
    try:
        fn()
    except errors:
        return
    raise SystemExit(f"{fn} was not refused: the benchmark's inputs are stale")


def _spans(n: int) -> Result:
    """n back-to-back spans over 8 unit instances."""
    spans = tuple(Span(task=k, kind="node", node=k, op="matmul", phase="forward", microbatch=k % 4, replica=0,
                       chip=0, resource="mxm", instance=k % 8, ready=10 * (k // 8), start=10 * (k // 8),
                       end=10 * (k // 8) + 9, planned_start=10 * (k // 8), stalls=()) for k in range(n))
    end = max(s.end for s in spans)
    return Result(mode="static", graph_name="bench", hw_name="bench", clock_hz=1e9, samples_per_step=1, spans=spans,
                  makespan_cycles=end, compiled_makespan_cycles=end, memories=(), channels=(),
                  unit_instances={"mxm": 8}, events=3 * n)


def cases(tmp: Path) -> dict[str, Callable[[], None]]:
    deep_json = tmp / "deep.json"
    deep_json.write_text('{"tasks": ' + "[" * 300_000 + "]" * 300_000 + "}")
    garbage = tmp / "garbage.json"
    garbage.write_text("x" * (50 * 2**20))
    graph = A.training_graph(A.models.build("mlp", batch=2, sizes=(16, 8, 4)))
    loaders = {"py": yaml_loader.PyBoundedSafeLoader}
    if yaml_loader.CParser is not None:
        loaders["libyaml"] = yaml_loader.CBoundedSafeLoader
    out: dict[str, Callable[[], None]] = {}
    for label, loader in loaders.items():
        out[f"yaml alias bomb 10^12 ({label})"] = lambda loader=loader: _refused(
            lambda: yaml_loader.load_yaml(_alias_bomb(), loader), yaml.YAMLError)
        out[f"yaml [ x 300k ({label})"] = lambda loader=loader: _refused(
            lambda: yaml_loader.load_yaml("[" * 300_000, loader), yaml.YAMLError)
    out["schedule JSON [ x 300k"] = lambda: _refused(lambda: A.load_schedule(deep_json), A.AccelsimError)
    out["schedule JSON 50 MiB garbage"] = lambda: _refused(lambda: A.load_schedule(garbage), A.AccelsimError)
    out["microbatches=10^6"] = lambda: _refused(lambda: check_step_size(graph, 10**6, 1, 1), A.AccelsimError)
    out["mlp batch=10^9"] = lambda: _refused(lambda: A.models.build("mlp", batch=10**9), A.AccelsimError)
    result = _spans(5000)
    out["timeline of 5,000 spans (PNG)"] = lambda: plot_timeline(result, path=tmp / "big.png") and None
    return out


def median_s(fn: Callable[[], None], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        base = median_s(lambda: A.load_hw(GROQ) and None, args.repeat)
        print(f"baseline: load_hw(groq_like.yaml) {base * 1e3:.1f} ms (median of {args.repeat})")
        header = f"{'case':36s} {'ms':>9s} {'x baseline':>11s}"
        print(header)
        print("-" * len(header))
        for name, fn in cases(Path(tmp)).items():
            sec = median_s(fn, args.repeat)
            print(f"{name:36s} {sec * 1e3:9.1f} {sec / base:11.1f}", flush=True)


if __name__ == "__main__":
    main()
