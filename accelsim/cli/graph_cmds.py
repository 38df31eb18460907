"""CLI commands on graphs: models, graph, grad."""
from __future__ import annotations

import argparse
import math
import time
from typing import Any

import numpy as np

from accelsim import models
from accelsim.cli.common import (add_json_arg, add_limit_args, add_model_args, build_model, forward_model,
                                 limits_from, positive_int, write_json)
from accelsim.graph.ir import Graph
from accelsim.graph.stats import graph_stats, summarize_tensor
from accelsim.limits import check_eval_size, check_fd_work


def cmd_models(args: argparse.Namespace) -> int:
    for name in models.names():
        opts = ", ".join(f"{k}={v!r}" for k, v in models.options(name).items())
        doc = (models.MODELS[name].__doc__ or "").strip().splitlines()[0]
        print(f"{name:18s} {doc}\n{'':18s} options: {opts}")
    return 0


def cmd_graph(args: argparse.Namespace) -> int:
    start = time.perf_counter()
    graph = build_model(args)
    build_s = time.perf_counter() - start
    stats = graph_stats(graph)
    print(f"graph {stats.name}: {stats.nodes} nodes, {stats.edges} edges (built in {build_s:.2f} s)")
    print("  by phase:    " + ", ".join(f"{k} {v}" for k, v in stats.by_phase.items()))
    print("  by category: " + ", ".join(f"{k} {v}" for k, v in stats.by_category.items()))
    print("  by op:       " + ", ".join(f"{k} {v}" for k, v in stats.by_op.items()))
    print(f"  FLOPs: {stats.flops:.4g} (" + ", ".join(f"{k} {v:.4g}" for k, v in stats.flops_by_phase.items()) + ")")
    print(f"  parameters: {stats.param_count:,} ({stats.param_bytes / 2**20:.2f} MiB as {graph.dtype})")
    print(f"  forward activations: {stats.activation_bytes / 2**20:.2f} MiB")
    if args.dump:
        print(graph.dump())
    write_json(args.json, {**stats.to_json(), "build_seconds": build_s})
    return 0


def _fmt(value: Any) -> str:
    s = summarize_tensor(value)
    if isinstance(s, dict):
        return f"shape {tuple(s['shape'])}, L2 norm {s['l2_norm']:.6g}"
    return np.array2string(np.asarray(value), precision=6, separator=", ", max_line_width=100)


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

    float64 = {"dtype": "float64"} if "dtype" in models.options(args.model) else {}
    graph = forward_model(args, **float64)  # finite differences need float64
    limits = limits_from(args)
    check_eval_size(_with_gradients(graph), limits=limits, what="differentiating")
    check_fd_work(graph, args.fd_coords, limits)
    report = grad_report(graph, fd_coords=args.fd_coords, use_torch=not args.no_torch)
    print(f"model {args.model}: outputs")
    for k, v in report["outputs"].items():
        print(f"  {k} = {_fmt(v)}")
    print("gradients of the loss")
    for k, v in report["grads"].items():
        print(f"  d loss / d {k} = {_fmt(v)}")
    print(f"fd_max_rel_err    = {report['fd_max_rel_err']:.3e}  (central differences, float64, "
          f"<= {args.fd_coords} coordinates per tensor)")
    t = report["torch_max_rel_err"]
    why = "skipped (--no-torch)" if args.no_torch else "n/a (PyTorch not installed)"
    print(f"torch_max_rel_err = {t:.3e}" if t is not None else f"torch_max_rel_err = {why}")
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
    sub.add_parser("models", help="list the model zoo and each model's options").set_defaults(fn=cmd_models)

    p = sub.add_parser("graph", help="build a model's graph and print its statistics")
    add_model_args(p, training=True)
    add_json_arg(p, "the statistics")
    p.add_argument("--dump", action="store_true", help="print every node")
    p.set_defaults(fn=cmd_graph)

    p = sub.add_parser("grad", help="gradients of the loss, checked by finite differences and PyTorch")
    add_model_args(p)
    add_json_arg(p)
    add_limit_args(p, tasks=False, flops=True)
    p.add_argument("--fd-coords", type=positive_int, default=8, help="coordinates per tensor for finite differences")
    p.add_argument("--no-torch", action="store_true", help="skip the PyTorch comparison")
    p.set_defaults(fn=cmd_grad)
