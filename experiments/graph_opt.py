"""Graph passes on two contrasting machines (issue 14): makespan, bytes moved and peak memory before and
after each rule-based pass, the whole rule pipeline and the `auto` search, for superres, ResNet-50, a
transformer block and GPT-2, inference and training, on groq_like (SRAM only, four 320x320 int8 MXM
planes, a 320-lane VXM) and a100_like (HBM, one Tensor Core unit, a CUDA-core vector unit).

Every optimized graph is verified by the pass manager (float64 equivalence where the graph is small
enough, see accelsim/passes/equivalence.py); every schedule is compiled and validated. ResNet-50's
inference graph is served with frozen batch norm (passes.freeze_batchnorm), which is what lets
fold_batchnorm apply. GPT-2 runs 4 layers at sequence 256 so that its training step fits groq_like's
220 MiB (the full model's does not, see plots/sweeps/groq_x4_parallel).

Writes plots/graph_opt/{table.md,results.json,speedup.png} and, for the rewrite whose effect has
opposite signs on the two machines by the widest margin, the timelines before and after on each.
Run: python experiments/graph_opt.py [--quick] [--budget N] [--out plots/graph_opt]
"""
from __future__ import annotations

import argparse
import json
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

import accelsim as A  # noqa: E402
from accelsim.graph.ir import Graph  # noqa: E402
from accelsim.passes import PASSES, inference_graph, optimize_with_log  # noqa: E402
from accelsim.passes.freeze import freeze_batchnorm  # noqa: E402
from accelsim.passes.kind import graph_kind  # noqa: E402
from accelsim.schedule.plan import Schedule  # noqa: E402
from accelsim.sim import simulate  # noqa: E402
from accelsim.viz import plot_timeline  # noqa: E402

MACHINES = ("groq_like", "a100_like")
MODELS = (  # (label, zoo name, options)
    ("superres", "superres", {}),
    ("resnet50", "resnet50", {"batch": 1}),
    ("transformer_block", "transformer_block", {}),
    ("gpt2 (4 layers, seq 256)", "gpt2", {"layers": 4, "seq": 256}),
)
QUICK_MODELS = ("superres", "transformer_block")
RULES = "rules"  # the rule pipeline: every pass in table order
AUTO = "auto"


@dataclass(frozen=True)
class Row:
    """One (model, step, machine, variant) measurement; `variant` is "none", a pass name, RULES or AUTO."""

    model: str
    step: str
    hw: str
    variant: str
    status: str  # applied, unchanged, skipped (the reason in `note`)
    note: str
    nodes: int
    makespan_cycles: int
    makespan_us: float
    bytes_moved: int
    peak_memory_bytes: int
    seconds: float


def bytes_moved(schedule: Schedule) -> int:
    """Bytes the step streams through memory ports and over links (the schedule's own accounting)."""
    return sum(t.bytes_moved for t in schedule.tasks)


def peak_memory(schedule: Schedule) -> int:
    """The largest peak of any one memory instance (each chip's working memory)."""
    return max(schedule.peak_memory_bytes.values(), default=0)


def step_graphs(zoo: str, options: dict) -> list[tuple[str, Graph]]:
    fwd = A.models.build(zoo, **options)
    serving = inference_graph(freeze_batchnorm(fwd)) if zoo == "resnet50" else inference_graph(fwd)
    return [("inference", serving), ("training", A.training_graph(fwd))]


def variants(graph: Graph) -> list[tuple[str, object]]:
    """(label, passes) for every pass that may apply to the graph's kind, the rule pipeline and auto."""
    kind = graph_kind(graph)
    singles = [name for name, p in PASSES.items() if kind in p.applies_to]
    return [("none", [])] + [(name, [name]) for name in singles] + [(RULES, singles), (AUTO, AUTO)]


def measure(label: str, step: str, hw: A.HwSpec, variant: str, graph: Graph, passes,
            budget: int) -> tuple[Row, Schedule]:
    start = time.perf_counter()
    status, note, optimized = "applied", "", graph
    if passes:
        extra = {"budget": budget} if passes == AUTO else {}
        optimized, log = optimize_with_log(graph, passes, hw=hw, **extra)
        applied = [r for r in log.records if r.status == "applied"]
        if not applied:
            skipped = [r for r in log.records if r.status == "skipped"]
            status = "skipped" if skipped else "unchanged"
            note = skipped[0].reason if skipped else ""
    sched = A.compile(optimized, hw)
    seconds = time.perf_counter() - start
    row = Row(label, step, hw.name, variant, status if passes else "baseline", note, len(optimized.nodes),
              sched.makespan_cycles, sched.makespan_cycles / hw.clock_hz * 1e6, bytes_moved(sched),
              peak_memory(sched), seconds)
    return row, sched


def table(rows: list[Row]) -> str:
    """Markdown: per (model, step, machine), each variant's makespan, bytes and peak vs the baseline."""
    base = {(r.model, r.step, r.hw): r for r in rows if r.variant == "none"}
    lines = ["| model | step | hw | variant | nodes | makespan (cycles) | vs none | bytes moved | vs none | "
             "peak memory | vs none |", "|---|---|---|---|---:|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        b = base[(r.model, r.step, r.hw)]
        if r.variant != "none" and r.status != "applied":
            continue
        lines.append(f"| {r.model} | {r.step} | {r.hw} | {r.variant} | {r.nodes} | {r.makespan_cycles:,} | "
                     f"{r.makespan_cycles / b.makespan_cycles:.3f} | {r.bytes_moved / 2**20:.2f} MiB | "
                     f"{r.bytes_moved / max(b.bytes_moved, 1):.3f} | {r.peak_memory_bytes / 2**20:.2f} MiB | "
                     f"{r.peak_memory_bytes / max(b.peak_memory_bytes, 1):.3f} |")
    return "\n".join(lines)


def contrast(rows: list[Row]) -> tuple[str, str, str, float, float] | None:
    """The single pass whose makespan ratio helps on one machine and hurts on the other by the widest
    margin: (model, step, pass, ratio on MACHINES[0], ratio on MACHINES[1]); None if there is none."""
    ratio = {}
    base = {(r.model, r.step, r.hw): r.makespan_cycles for r in rows if r.variant == "none"}
    for r in rows:
        if r.variant in PASSES and r.status == "applied":
            ratio[(r.model, r.step, r.variant, r.hw)] = r.makespan_cycles / base[(r.model, r.step, r.hw)]
    best, margin = None, 0.0
    for (model, step, name, hw), first in ratio.items():
        if hw != MACHINES[0] or (model, step, name, MACHINES[1]) not in ratio:
            continue
        second = ratio[(model, step, name, MACHINES[1])]
        if (first - 1) * (second - 1) < 0 and min(abs(first - 1), abs(second - 1)) > margin:
            best, margin = (model, step, name, first, second), min(abs(first - 1), abs(second - 1))
    return best


def plot_speedups(rows: list[Row], path: Path) -> None:
    """Baseline makespan / variant makespan per case, one panel per machine (above 1: faster)."""
    fig, axes = plt.subplots(1, len(MACHINES), figsize=(7 * len(MACHINES), 5), sharey=True)
    base = {(r.model, r.step, r.hw): r.makespan_cycles for r in rows if r.variant == "none"}
    for ax, hw in zip(axes, MACHINES):
        cases = sorted({(r.model, r.step) for r in rows if r.hw == hw}, key=lambda c: (c[0], c[1]))
        names = [v for v in dict.fromkeys(r.variant for r in rows if r.variant != "none")]
        width = 0.8 / max(len(names), 1)
        for k, name in enumerate(names):
            ys = []
            for model, step in cases:
                r = next((r for r in rows if (r.model, r.step, r.hw, r.variant) == (model, step, hw, name)), None)
                ys.append(base[(model, step, hw)] / r.makespan_cycles if r is not None else 1.0)
            ax.bar([i + k * width for i in range(len(cases))], ys, width, label=name)
        ax.axhline(1.0, color="black", linewidth=0.8)
        ax.set_xticks([i + 0.4 - width / 2 for i in range(len(cases))])
        ax.set_xticklabels([f"{m}\n{s}" for m, s in cases], fontsize=7)
        ax.set_title(hw)
        ax.set_ylabel("speed-up (makespan none / makespan with pass)")
    axes[-1].legend(fontsize=7, loc="upper right")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110, metadata={"Software": None})
    plt.close(fig)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help=f"only {', '.join(QUICK_MODELS)}")
    parser.add_argument("--budget", type=int, default=16, help="auto's budget in compiles (default 16)")
    parser.add_argument("--out", default="plots/graph_opt")
    args = parser.parse_args()
    out = Path(args.out)
    machines = {name: A.load_hw(name) for name in MACHINES}
    rows: list[Row] = []
    schedules: dict[tuple[str, str, str, str], Schedule] = {}
    for label, zoo, options in MODELS:
        if args.quick and zoo not in QUICK_MODELS:
            continue
        for step, graph in step_graphs(zoo, options):
            for hw in machines.values():
                for variant, passes in variants(graph):
                    row, sched = measure(label, step, hw, variant, graph, passes, args.budget)
                    rows.append(row)
                    schedules[(label, step, hw.name, variant)] = sched
                    print(f"{label:26s} {step:9s} {hw.name:10s} {variant:22s} {row.status:9s} "
                          f"{row.makespan_cycles:12,d} {row.bytes_moved / 2**20:10.2f} MiB "
                          f"{row.peak_memory_bytes / 2**20:9.2f} MiB {row.seconds:6.1f} s", flush=True)
    for (label, step, hw_name) in {(r.model, r.step, r.hw) for r in rows}:
        mine = {r.variant: r.makespan_cycles for r in rows if (r.model, r.step, r.hw) == (label, step, hw_name)}
        assert mine[AUTO] <= min(mine.values()), f"auto lost on {label} {step} {hw_name}: {mine}"
    out.mkdir(parents=True, exist_ok=True)
    (out / "results.json").write_text(json.dumps([asdict(r) for r in rows], indent=1) + "\n")
    (out / "table.md").write_text(table(rows) + "\n")
    plot_speedups(rows, out / "speedup.png")
    found = contrast(rows)
    if found is None:
        print("no single pass helps on one machine and hurts on the other")
        return
    model, step, name, first, second = found
    print(f"\n{name} on {model} {step}: makespan x{first:.3f} on {MACHINES[0]}, x{second:.3f} on {MACHINES[1]}")
    for hw in machines.values():
        for variant in ("none", name):
            sched = schedules[(model, step, hw.name, variant)]
            result = simulate(sched, hw)
            slug = f"contrast_{hw.name}_{'before' if variant == 'none' else 'after'}.png"
            plot_timeline(result, out / slug, title=f"{model} {step} on {hw.name}: "
                          f"{'no passes' if variant == 'none' else name} ({sched.makespan_cycles:,} cycles)")
    print(f"wrote {out}/table.md, results.json, speedup.png and the contrast timelines")


if __name__ == "__main__":
    main()
