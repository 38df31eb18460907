"""Start-up cost of the CLI and the package: the median CPU seconds (user + system, read from
resource.getrusage of the finished child) of a fresh interpreter running each case, N times each, with the
ratio to a bare `python -c pass` measured in the same run and the issue's target where it sets one.
CPU time, not wall time: a busy machine stretches the wall clock far more than the work.
Run: python experiments/bench_startup.py [--repeat 15]
"""
from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CASES: list[tuple[str, list[str], float | None]] = [  # (label, arguments of python, target CPU seconds)
    ("python -c pass", ["-c", "pass"], None),
    ('python -c "import accelsim"', ["-c", "import accelsim"], 0.5),
    ("python -m accelsim --version", ["-m", "accelsim", "--version"], 0.3),
    ("python -m accelsim --help", ["-m", "accelsim", "--help"], 0.3),
]


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def cpu_seconds(args: list[str], env: dict[str, str]) -> float:
    """CPU seconds of one child `python *args`; it must succeed (a failing case would time its error)."""
    before = _children_cpu()
    proc = subprocess.run([sys.executable, *args], cwd=ROOT, env=env, capture_output=True, text=True)
    spent = _children_cpu() - before
    if proc.returncode != 0:
        raise SystemExit(f"python {' '.join(args)} exited {proc.returncode}: {proc.stderr[-2000:]}")
    return spent


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=15, help="runs per case (default 15)")
    args = parser.parse_args(argv)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, (str(ROOT), os.environ.get("PYTHONPATH"))))}
    # interleave the cases so that a change of machine load during the run hits every case alike
    samples: dict[str, list[float]] = {label: [] for label, _, _ in CASES}
    for _ in range(args.repeat):
        for label, case_args, _ in CASES:
            samples[label].append(cpu_seconds(case_args, env))
    base = statistics.median(samples[CASES[0][0]])
    print(f"{sys.executable} ({sys.version.split()[0]}), {args.repeat} runs each, median CPU seconds")
    print(f"{'case':<32} {'CPU s':>7} {'x pass':>7} {'target':>7}")
    for label, _, target in CASES:
        median = statistics.median(samples[label])
        verdict = "" if target is None else f"{'<' if median < target else '>='} {target:g}"
        print(f"{label:<32} {median:7.3f} {median / base:7.1f} {verdict:>7}")


if __name__ == "__main__":
    main()
