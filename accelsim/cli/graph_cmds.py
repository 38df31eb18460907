"""CLI commands on graphs: models, graph, grad."""
from __future__ import annotations

import argparse
import math
import re
import time
from typing import Any

import numpy as np

from accelsim import models
from accelsim import fmt
from accelsim.cli.common import (STEP_RULE, add_json_arg, add_limit_args, add_model_args, forward_model, is_model_file,
                                 limits_from, positive_int, step_graph, write_json)
from accelsim.cli.progress import phase
from accelsim.graph.ir import Graph
from accelsim.graph.stats import graph_stats, summarize_tensor
from accelsim.limits import check_eval_size, check_fd_work


def model_summary(doc: str | None) -> str:
    """A builder docstring's first sentence on one line: its first line alone may stop mid-sentence."""
    paragraph = " ".join((doc or "").strip().split("\n\n")[0].split())
    match = re.search(r"\.(\s|$)", paragraph)
    return paragraph[: match.start() + 1] if match else paragraph


def cmd_models(args: argparse.Namespace) -> int:
    for name in models.names():
        opts = ", ".join(f"{k}={v!r}" for k, v in models.options(name).items())
        print(f"{name:18s} {model_summary(models.MODELS[name].__doc__)}\n{'':18s} options: {opts}")
    return 0


def _counts(by: dict[str, int]) -> str:
    return ", ".join(f"{k} {fmt.count(v)}" for k, v in by.items())


def cmd_graph(args: argparse.Namespace) -> int:
    start = time.perf_counter()
    graph = step_graph(args, evaluates=False)  # costs and counts: no tensor is computed
    build_s = time.perf_counter() - start
    with phase("counting nodes, FLOPs and bytes"):
        stats = graph_stats(graph)
    print(f"graph {stats.name}: {fmt.count(stats.nodes)} nodes, {fmt.count(stats.edges)} edges "
          f"(built in {fmt.wall(build_s)})")
    print(f"  by phase:    {_counts(stats.by_phase)}")
    print(f"  by category: {_counts(stats.by_category)}")
    print(f"  by op:       {_counts(stats.by_op)}")
    print(f"  FLOPs: {fmt.si(stats.flops, 'FLOP')} ("
          + ", ".join(f"{k} {fmt.si(v, 'FLOP')}" for k, v in stats.flops_by_phase.items()) + ")")
    print(f"  parameters: {fmt.count(stats.param_count)} ({fmt.nbytes(stats.param_bytes)} as {graph.dtype})")
    print(f"  forward activations: {fmt.nbytes(stats.activation_bytes)}")
    if args.dump:
        print(graph.dump())
    write_json(args.json, {**stats.to_json(), "build_seconds": build_s})
    return 0


def _fmt(value: Any, prefix: str) -> str:
    """A small tensor's values (4 significant digits, continuation lines aligned after `prefix`), or a
    large one's shape and L2 norm."""
    s = summarize_tensor(value)
    if isinstance(s, dict):
        return f"shape {tuple(s['shape'])}, L2 norm {fmt.number(s['l2_norm'])}"
    return np.array2string(np.asarray(value), separator=", ", max_line_width=100, prefix=prefix,
                           formatter={"float_kind": fmt.number})


def _with_gradients(graph: Graph) -> Graph:
    """The graph grad_report evaluates: `graph` and its loss's gradient nodes (built symbolically, no arrays)."""
    from accelsim.autodiff import gradients

    if graph.loss is None:
        return graph  # grad_report refuses it with its own message
    g = graph.copy()
    gradients(g, g.loss, [n.id for n in g.nodes if n.op in ("input", "param") and n.dtype != "int64"])
    return g


def cmd_grad(args: argparse.Namespace) -> int:
    from accelsim.gradcheck import grad_report

    # finite differences need float64: a zoo model builds in it; a model file's graph is taken as exported
    float64 = {"dtype": "float64"} if not is_model_file(args.model) and "dtype" in models.options(args.model) else {}
    with phase(f"building the model ({args.model})"):
        graph = forward_model(args, **float64)
    limits = limits_from(args)
    check_eval_size(_with_gradients(graph), limits=limits, what="differentiating")
    check_fd_work(graph, args.fd_coords, limits)
    torch = "" if args.no_torch else " and PyTorch"
    with phase(f"autodiff: gradients of the loss, checked by finite differences{torch}"):
        report = grad_report(graph, fd_coords=args.fd_coords, use_torch=not args.no_torch)
    print(f"model {args.model}: outputs")
    for k, v in report["outputs"].items():
        print(f"  {k} = {_fmt(v, f'  {k} = ')}")
    print("gradients of the loss")
    for k, v in report["grads"].items():
        print(f"  d loss / d {k} = {_fmt(v, f'  d loss / d {k} = ')}")
    print(f"fd_max_rel_err    = {fmt.error(report['fd_max_rel_err'])}  (central differences, float64, "
          f"<= {fmt.count(args.fd_coords)} coordinates per tensor)")
    t = report["torch_max_rel_err"]
    why = "skipped (--no-torch)" if args.no_torch else "n/a (PyTorch not installed)"
    print(f"torch_max_rel_err = {fmt.error(t)}" if t is not None else f"torch_max_rel_err = {why}")
    for line in report["nonfinite"]:
        print(f"non-finite: {line}")
    write_json(args.json, {
        "model": args.model,
        "outputs": {k: summarize_tensor(v) for k, v in report["outputs"].items()},
        "grads": {k: summarize_tensor(v) for k, v in report["grads"].items()},
        "fd_max_rel_err": report["fd_max_rel_err"],
        "torch_max_rel_err": t,
        "nonfinite": list(report["nonfinite"]),
    })
    finite = math.isfinite(report["fd_max_rel_err"]) and (t is None or math.isfinite(t))
    return 0 if finite and not report["nonfinite"] else 1


def register(sub: argparse._SubParsersAction) -> None:
    text = "list the model zoo and each model's options"
    sub.add_parser("models", help=text, description=f"{text[0].upper()}{text[1:]}.").set_defaults(fn=cmd_models)

    text = "build a model's graph and print its statistics"
    p = sub.add_parser("graph", help=text, description=f"{text[0].upper()}{text[1:]}. {STEP_RULE}")
    add_model_args(p)
    add_json_arg(p, "the statistics")
    p.add_argument("--dump", action="store_true", help="print every node")
    p.set_defaults(fn=cmd_graph)

    text = "gradients of the loss, checked by finite differences and PyTorch"
    p = sub.add_parser("grad", help=text,
                       description=f"{text[0].upper()}{text[1:]}: the model's forward graph and its loss, "
                                   "differentiated in float64 (no optimizer update, so --training/--inference do "
                                   "not apply). Exits 1 on a non-finite value or error.")
    add_model_args(p, step=False)
    add_json_arg(p)
    add_limit_args(p, tasks=False, flops=True)
    p.add_argument("--fd-coords", type=positive_int, default=8, metavar="N",
                   help="coordinates per tensor checked by finite differences (default 8)")
    p.add_argument("--no-torch", action="store_true", help="skip the PyTorch comparison")
    p.set_defaults(fn=cmd_grad)
