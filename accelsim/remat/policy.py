"""Rematerialization policies: what a user asks for (`none`, `sqrt`, `every:K`, `full:K`, `budget:BYTES`), one typed
record per kind holding how its argument is parsed and how it chooses the values to recompute
(str -> RematPolicy; Graph, RematPolicy -> forward ids)."""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable

from accelsim.errors import GraphError
from accelsim.graph.ir import Graph
from accelsim.hw.quantity import parse_bytes
from accelsim.remat import budget
from accelsim.remat.layers import layer_count

MAX_EVERY = 10_000
"""The most layers between checkpoints every:K takes (gpt2's 128-block limit is 257 layers)."""
MAX_POLICY_CHARS = 64


@dataclass(frozen=True, slots=True)
class RematPolicy:
    """A rematerialization policy: `kind` (a key of POLICY_KINDS) and its argument: `every` (layers per
    checkpoint) for every and full, `budget_bytes` for budget. Checked when made."""

    kind: str = "none"
    every: int | None = None
    budget_bytes: int | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.kind, str) or self.kind not in POLICY_KINDS:
            raise GraphError(f"rematerialize: unknown policy kind {self.kind!r}; known: {', '.join(POLICY_KINDS)}")
        wants = POLICY_KINDS[self.kind].argument
        for name in ("every", "budget_bytes"):
            value = getattr(self, name)
            if name != wants and value is not None:
                raise GraphError(f"rematerialize: policy {self.kind!r} takes no {name} (got {value!r})")
        if wants == "every":
            _check_int(POLICY_KINDS[self.kind].syntax, self.every, MAX_EVERY,
                       "a whole number of layers between checkpoints")
        if wants == "budget_bytes":
            _check_int("budget:BYTES", self.budget_bytes, None, "a whole number of bytes")

    @property
    def label(self) -> str:
        """How the CLI writes it: "none", "sqrt", "every:3", "full:1", "budget:67108864"."""
        arg = self.every if self.every is not None else self.budget_bytes
        return self.kind if arg is None else f"{self.kind}:{arg}"


def _check_int(syntax: str, value: object, high: int | None, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1 or (high is not None and value > high):
        top = f" to {high}" if high is not None else " or more"
        raise GraphError(f"rematerialize {syntax}: expected {what}, from 1{top}; got {value!r}")
    return value


@dataclass(frozen=True)
class PolicyKind:
    """One kind of policy: its name, the RematPolicy field its argument fills (None: it takes none), how
    that argument is read from text, and how the policy chooses the forward values to recompute."""

    name: str
    syntax: str
    argument: str | None
    read: Callable[[str], int] | None
    choose: Callable[[Graph, RematPolicy], frozenset[int]]
    doc: str


def _layers_reader(kind: str) -> Callable[[str], int]:
    """The reader of `kind:K`'s K: a whole number of layers between checkpoints, 1 to MAX_EVERY."""
    def read(text: str) -> int:
        if not (text.isascii() and text.isdigit()) or not 1 <= int(text) <= MAX_EVERY:
            raise GraphError(f"rematerialize {kind}:{text}: expected a whole number of layers between checkpoints, "
                             f"from 1 to {MAX_EVERY}, e.g. {kind}:2")
        return int(text)
    return read


def _read_budget(text: str) -> int:
    try:
        value = parse_bytes(text)
    except ValueError as e:
        raise GraphError(f"rematerialize budget:{text}: {e}, e.g. budget:64MiB or budget:2GB") from None
    if isinstance(value, float) or value < 1:
        raise GraphError(f"rematerialize budget:{text}: expected a whole number of bytes of at least 1, "
                         f"e.g. budget:64MiB or budget:2GB; got {value!r}")
    return value


def _choose_every(graph: Graph, policy: RematPolicy) -> frozenset[int]:
    return budget.every_plan(graph, policy.every)


def _choose_full(graph: Graph, policy: RematPolicy) -> frozenset[int]:
    return budget.full_plan(graph, policy.every)


def _choose_sqrt(graph: Graph, policy: RematPolicy) -> frozenset[int]:
    return budget.every_plan(graph, math.ceil(math.sqrt(layer_count(graph))))


def _choose_budget(graph: Graph, policy: RematPolicy) -> frozenset[int]:
    return budget.choose(graph, policy.budget_bytes, policy.label)


POLICY_KINDS: dict[str, PolicyKind] = {k.name: k for k in (
    PolicyKind("none", "none", None, None, lambda graph, policy: frozenset(),
               "keep every activation (the identity)"),
    PolicyKind("sqrt", "sqrt", None, None, _choose_sqrt,
               "checkpoint every ceil(sqrt(n)) of the n layers (Chen et al. 2016)"),
    PolicyKind("every", "every:K", "every", _layers_reader("every"), _choose_every,
               "keep every K-th layer boundary, recompute the rest from the nearest one (selective: only the "
               "values the backward pass reads)"),
    PolicyKind("full", "full:K", "every", _layers_reader("full"), _choose_full,
               "keep every K-th layer boundary and re-run each checkpointed segment's whole forward before its "
               "backward, as torch.utils.checkpoint and Megatron-LM's --recompute-granularity full do; the last "
               "segment (with the loss) is not checkpointed"),
    PolicyKind("budget", "budget:BYTES", "budget_bytes", _read_budget, _choose_budget,
               "recompute, by bytes saved per FLOP, until the estimated peak of computed tensors fits BYTES "
               "(64MiB, 2GB, 1e9)"),
)}
SYNTAX = ", ".join(k.syntax for k in POLICY_KINDS.values())


def parse_policy(spec: object) -> RematPolicy:
    """A RematPolicy from its text ("sqrt", "every:2", "budget:64MiB") or itself; GraphError naming the
    text and what was expected."""
    if isinstance(spec, RematPolicy):
        return spec
    if not isinstance(spec, str):
        raise GraphError(f"rematerialize: policy must be a string ({SYNTAX}) or a RematPolicy, got "
                         f"{type(spec).__name__} {spec!r:.60}")
    text = spec.strip()
    if not text or len(text) > MAX_POLICY_CHARS:
        raise GraphError(f"rematerialize: policy {spec!r:.80} is {'empty' if not text else 'too long'}; "
                         f"expected one of {SYNTAX}")
    name, sep, arg = text.partition(":")
    kind = POLICY_KINDS.get(name.strip().lower())
    if kind is None:
        raise GraphError(f"rematerialize: unknown policy {name.strip()!r} in {spec!r}; expected one of {SYNTAX}")
    if kind.argument is None:
        if sep:
            raise GraphError(f"rematerialize: policy {kind.name!r} takes no argument, got {spec!r}")
        return RematPolicy(kind.name)
    if not arg.strip():
        raise GraphError(f"rematerialize: policy {kind.name!r} needs an argument: {kind.syntax}, got {spec!r}")
    return RematPolicy(kind.name, **{kind.argument: kind.read(arg.strip())})


def choose(graph: Graph, policy: RematPolicy) -> frozenset[int]:
    """The forward node ids `policy` recomputes on `graph`."""
    return POLICY_KINDS[policy.kind].choose(graph, policy)
