"""Helpers shared by the CLI commands: model options, JSON output, number formatting."""
from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any, Sequence

import yaml

from accelsim import models
from accelsim.errors import AccelsimError
from accelsim.graph.ir import Graph
from accelsim.training import OPTIMIZERS, training_graph


def parse_set(items: Sequence[str]) -> dict[str, Any]:
    out = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise AccelsimError(f"--set expects KEY=VALUE, got {item!r}")
        out[key.strip()] = yaml.safe_load(value)
    return out


def model_options(args: argparse.Namespace) -> dict[str, Any]:
    opts = parse_set(args.set)
    if args.batch is not None:
        opts["batch"] = args.batch
    return opts


def build_model(args: argparse.Namespace, **forced: Any) -> Graph:
    """The model of --model with its options; its training graph when --training is given."""
    graph = models.build(args.model, **{**model_options(args), **forced})
    if getattr(args, "training", False):
        graph = training_graph(graph, optimizer=args.optimizer, lr=args.lr)
    return graph


def format_si(x: float, unit: str) -> str:
    """`x` with an SI prefix (P down to n) and 4 significant digits, so rates and times read alike."""
    for factor, prefix in ((1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k"), (1, ""),
                           (1e-3, "m"), (1e-6, "u"), (1e-9, "n")):
        if abs(x) >= factor:
            return f"{x / factor:.4g} {prefix}{unit}"
    return f"{x:.3g} {unit}"


def write_json(path: str | None, payload: dict[str, Any]) -> None:
    if path:
        try:
            Path(path).parent.mkdir(parents=True, exist_ok=True)
            Path(path).write_text(json.dumps(payload, indent=2, sort_keys=False) + "\n")
        except OSError as e:
            raise AccelsimError(f"cannot write JSON to {path!r}: {e.strerror}") from None


def add_model_args(p: argparse.ArgumentParser, training: bool = False) -> None:
    p.add_argument("--model", default=models.DEFAULT_MODEL, help=f"one of: {', '.join(models.names())}")
    p.add_argument("--batch", type=int, help="batch size (the model's `batch` option)")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                   help="any model option, e.g. --set layers=2 --set seq=128")
    p.add_argument("--json", metavar="FILE", help="also write the result as JSON")
    if training:
        p.add_argument("--training", action="store_true", help="forward + backward + optimizer update")
        p.add_argument("--optimizer", choices=OPTIMIZERS, default="sgd")
        p.add_argument("--lr", type=float, default=0.01)
