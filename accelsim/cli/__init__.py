"""Command line: the only package that prints or exits. User errors become one paragraph and exit 1.

A call imports only the module of the subcommand it runs: `accelsim --version`, `accelsim --help` and a typo
list every subcommand from COMMANDS without importing any of them (tests/test_startup.py checks that the listing
matches the modules' own help)."""
from __future__ import annotations

import argparse
import sys
from importlib import import_module
from typing import Sequence

from accelsim import __version__
from accelsim.errors import AccelsimError

COMMANDS: dict[str, tuple[str, str]] = {  # subcommand -> (module of accelsim.cli that registers it, its help)
    "models": ("graph_cmds", "list the model zoo and each model's options"),
    "graph": ("graph_cmds", "build a model's graph and print its statistics"),
    "grad": ("graph_cmds", "gradients of the loss, checked by finite differences and PyTorch"),
    "hw": ("hw_cmds", "check, show and write hardware descriptions"),
    "cost": ("hw_cmds", "per-node cost of a model, or of one GEMM / conv layer"),
    "roofline": ("hw_cmds", "roofline plot of a model's nodes on a hardware description"),
    "run": ("sched_cmds", "compile a training step (or inference), simulate it, plot it"),
    "check": ("sched_cmds", "execute a compiled step with real kernels and compare it with a float64 reference"),
    "simulate": ("sched_cmds", "replay a saved schedule (static) or its graph's work queue (--dynamic)"),
    "compile": ("sched_cmds", "compile a static schedule and write it as JSON"),
    "optimize": ("optimize_cmd", "rewrite a step with graph passes (or search them: auto) and show each rewrite's "
                                 "effect on makespan, bytes moved and peak memory"),
    "sweep": ("sweep_cmd", "evaluate a design-space sweep (grid, random or Optuna) and write results.parquet and "
                           "Pareto plots"),
    "import": ("import_cmd", "import a model file (.pt2 torch.export program, .onnx, .json) as a graph file"),
}
"""In `accelsim --help` order; each module's `register(sub)` adds its subcommands in this order."""


def make_parser(command: str | None = None, *, lazy: bool = False) -> argparse.ArgumentParser:
    """The whole parser; with `lazy`, only `command`'s module is imported and registered, and every other
    subcommand is a placeholder that carries its name and help for the listing."""
    parser = argparse.ArgumentParser(prog="accelsim", description="Simulate ML programs on dataflow accelerators.")
    parser.add_argument("--version", action="version", version=f"accelsim {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)
    wanted = COMMANDS[command][0] if command in COMMANDS else None
    for module in dict.fromkeys(m for m, _ in COMMANDS.values()):
        if not lazy or module == wanted:
            import_module(f"accelsim.cli.{module}").register(sub)
        else:
            for name, (owner, text) in COMMANDS.items():
                if owner == module:
                    sub.add_parser(name, help=text)
    return parser


def _command(argv: Sequence[str]) -> str | None:
    """The subcommand `argv` names: its first word that is not an option (the top level takes no values)."""
    return next((a for a in argv if not a.startswith("-")), None)


def main(argv: Sequence[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    args = make_parser(_command(argv), lazy=True).parse_args(argv)
    from accelsim.cli.common import check_dir_target, check_file_target  # after parsing: --help needs neither
    try:
        # refuse output paths of the wrong kind before any work, not after minutes of it
        check_file_target(getattr(args, "json", None), "--json")
        check_dir_target(getattr(args, "out", None), "--out")
        return args.fn(args)
    except AccelsimError as e:
        command = " ".join(filter(None, (args.command, getattr(args, "hw_command", None))))
        print(f"accelsim {command}: error: {e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("accelsim: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
