"""The interconnect as physical links (HwSpec -> Topology): which links a transfer between two chips
crosses, with its bandwidth and latency. The scheduler books these links, the validator checks that no
two tasks overlap on one and the simulator replays them, so all three route through this module.

A link is one direction of one physical channel and carries one transfer or collective at a time.
ring: chip i's links to i + 1 and i - 1 (mod the chips of its node); a transfer takes the shorter way
round, forward on a tie, and crosses one link latency per hop. fully_connected: one link per ordered
pair. switch: each chip's egress and ingress port to a non-blocking switch; a transfer a -> b holds
a's egress and b's ingress and crosses one latency. Two-level machines (scale_out): chips of one node
use the interconnect; chips of two nodes use the scale-out switch only, through their own NICs
(per_chip, as a DGX A100's GPUDirect RDMA) or their nodes' NICs (per_node), one scale-out latency.
Bytes are cut through: a transfer lasts bytes / the slowest link's bandwidth plus its latency.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache
from typing import Literal

from accelsim.hw.spec import HwSpec

SWITCH = -1
"""The endpoint that stands for a switch: Link(net, chip, SWITCH) is the chip's egress port."""
Net = Literal["interconnect", "scale_out"]


@dataclass(frozen=True, order=True, slots=True)
class Link:
    """One direction of one physical channel of network `net`, from endpoint `src` to `dst`: chips, or
    SWITCH; on a scale-out network of per-node NICs the endpoints are nodes."""

    net: Net
    src: int
    dst: int

    def label(self, per_node: bool = False) -> str:
        """How reports name it ("link:0->1", "link:0->switch", "nic:node1->switch"); never parsed back."""
        prefix = "link" if self.net == "interconnect" else "nic"
        node = "node" if self.net == "scale_out" and per_node else ""

        def end(x: int) -> str:
            return "switch" if x == SWITCH else f"{node}{x}"

        return f"{prefix}:{end(self.src)}->{end(self.dst)}"


@dataclass(frozen=True, slots=True)
class Network:
    """One level's links: their shape, bandwidth per link and direction, and latency per hop."""

    topology: str
    bytes_per_cycle: float
    latency_cycles: int


@dataclass(frozen=True, slots=True)
class Route:
    """The links a transfer holds, in order, its bandwidth (the slowest link's) and its latency."""

    links: tuple[Link, ...]
    bytes_per_cycle: float
    latency_cycles: int

    def cycles(self, nbytes: float) -> int:
        """Cycles to move `nbytes` along the route (at least 1)."""
        return max(1, math.ceil(nbytes / self.bytes_per_cycle) + self.latency_cycles)


@dataclass(frozen=True, slots=True)
class Topology:
    """The machine's links: `chips_per_node` consecutive chips form a node (all of them on a single-level
    machine), joined by `intra`; nodes are joined by `inter` (None: one node) through `nics`."""

    n_chips: int
    chips_per_node: int
    intra: Network
    inter: Network | None = None
    nics: Literal["per_chip", "per_node"] = "per_chip"

    def node(self, chip: int) -> int:
        return chip // self.chips_per_node

    def bandwidth(self, link: Link) -> float:
        """Bytes per cycle of `link`."""
        net = self.intra if link.net == "interconnect" else self.inter
        assert net is not None, f"{link} on a machine without scale_out"
        return net.bytes_per_cycle

    def route(self, a: int, b: int) -> Route:
        """The route of a transfer from chip `a` to chip `b` (no links when a == b)."""
        return _route(self, a, b)

    def label(self, link: Link) -> str:
        return link.label(per_node=self.nics == "per_node")


def topology_of(hw: HwSpec) -> Topology | None:
    """The links of `hw`; None without an interconnect (a single chip)."""
    ic = hw.interconnect
    if ic is None:
        return None
    intra = Network(ic.topology, ic.bytes_per_cycle(hw.clock_hz), ic.link_latency_cycles)
    so = ic.scale_out
    if so is None:
        return Topology(hw.n_chips, hw.n_chips, intra)
    inter = Network(so.topology, so.bytes_per_cycle(hw.clock_hz), so.link_latency_cycles)
    return Topology(hw.n_chips, so.chips_per_node, intra, inter, so.nics)


@lru_cache(maxsize=65536)
def _route(topo: Topology, a: int, b: int) -> Route:
    if a == b:
        return Route((), math.inf, 0)
    if topo.node(a) != topo.node(b):
        inter = topo.inter
        assert inter is not None, "chips of two nodes on a single-node machine"
        src, dst = (topo.node(a), topo.node(b)) if topo.nics == "per_node" else (a, b)
        links = (Link("scale_out", src, SWITCH), Link("scale_out", SWITCH, dst))
        return Route(links, inter.bytes_per_cycle, inter.latency_cycles)
    net = topo.intra
    if net.topology == "fully_connected":
        return Route((Link("interconnect", a, b),), net.bytes_per_cycle, net.latency_cycles)
    if net.topology == "switch":
        links = (Link("interconnect", a, SWITCH), Link("interconnect", SWITCH, b))
        return Route(links, net.bytes_per_cycle, net.latency_cycles)
    k, base = topo.chips_per_node, topo.node(a) * topo.chips_per_node
    forward = (b - a) % k
    step, hops = (1, forward) if forward <= k - forward else (-1, k - forward)
    chips = [base + (a - base + step * h) % k for h in range(hops + 1)]
    links = tuple(Link("interconnect", x, y) for x, y in zip(chips, chips[1:]))
    return Route(links, net.bytes_per_cycle, net.latency_cycles * hops)
