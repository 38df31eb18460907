"""Command line: the only package that prints or exits. User errors become one paragraph and exit 1."""
from __future__ import annotations

import argparse
import sys
from typing import Sequence

from accelsim import __version__
from accelsim.cli import graph_cmds, hw_cmds, import_cmd, optimize_cmd, sched_cmds, sweep_cmd
from accelsim.cli.common import check_dir_target, check_file_target
from accelsim.errors import AccelsimError


def make_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="accelsim", description="Simulate ML programs on dataflow accelerators.")
    parser.add_argument("--version", action="version", version=f"accelsim {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)
    graph_cmds.register(sub)
    hw_cmds.register(sub)
    sched_cmds.register(sub)
    optimize_cmd.register(sub)
    sweep_cmd.register(sub)
    import_cmd.register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = make_parser().parse_args(argv)
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
