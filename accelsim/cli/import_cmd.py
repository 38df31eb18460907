"""CLI command `accelsim import MODEL -o model.json`: a model file (.pt2, .onnx or .json) -> an accelsim graph file."""
from __future__ import annotations

import argparse
from pathlib import Path

from accelsim import fmt
from accelsim.cli.common import add_read_limit_args, check_file_target, path_arg, read_limits_from
from accelsim.errors import AccelsimError


def cmd_import(args: argparse.Namespace) -> int:
    """Read MODEL with load_model, write the graph file, print what was imported."""
    from accelsim.frontends import load_model, save_graph
    from accelsim.frontends.losses import LOSSES

    if args.loss not in LOSSES:
        raise AccelsimError(f"--loss {args.loss!r}: expected one of {', '.join(LOSSES)}")
    if Path(args.output).suffix.lower() != ".json":
        raise AccelsimError(f"-o {args.output}: a graph file is JSON; name it with a .json suffix")
    check_file_target(args.output, "-o")
    graph = load_model(args.model, loss=args.loss, limits=read_limits_from(args))
    save_graph(graph, args.output)
    params = sum(1 for n in graph.params)
    loss = graph.nodes[graph.loss].op if graph.loss is not None else "none"
    print(f"imported {args.model} as graph {graph.name!r}: {fmt.count(len(graph.nodes))} nodes, "
          f"{fmt.count(len(graph.inputs))} inputs, {fmt.count(params)} parameters, loss {loss}; wrote {args.output}")
    print(f"run it: accelsim run --model {args.output}")
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    from accelsim.frontends.losses import LOSSES  # no torch: the loss heads are plain graph builders

    text = "import a model file (.pt2 torch.export program, .onnx, .json) as a graph file"
    p = sub.add_parser("import", help=text, description=(
        f"{text[0].upper()}{text[1:]}, which every --model takes and which trains, compiles, simulates and checks as "
        "a zoo model does (a .pt2 needs accelsim[torch], an .onnx accelsim[onnx])."))
    p.add_argument("model", type=path_arg, metavar="MODEL", help="a .pt2 (torch.export.save), .onnx or .json file")
    p.add_argument("-o", "--output", type=path_arg, required=True, metavar="GRAPH.json",
                   help="the accelsim graph file to write")
    p.add_argument("--loss", default="mse", choices=list(LOSSES),
                   help="the loss head a .pt2 program ends in (default mse against an input 'target')")
    add_read_limit_args(p)
    p.set_defaults(fn=cmd_import)
