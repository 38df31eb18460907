"""Interconnect topologies (hw/topology.py) and link contention: the hardware description's shapes and
their refusals, the routes, and two tasks sharing a physical link serializing on it in the scheduler, the
replay and the validator.

The toy machine: 1 GHz, one 8-lane vector unit and a 64 B/cycle SRAM per chip, links of 16 B/cycle and
10 cycles' latency. exp of a (64,) float32 tensor takes 8 cycles, moving it (256 B) 16 + 10 = 26 cycles
over one hop of a switch or a wire, 36 over two ring hops.
"""
import copy
from pathlib import Path

import pytest

import accelsim as A
from accelsim import ops as F
from accelsim.hw.overrides import apply_overrides
from accelsim.hw.topology import SWITCH, Link, topology_of
from accelsim.sim import simulate

HWCONFIGS = Path(__file__).resolve().parent.parent / "hwconfigs"


def toy(chips: int, topology: str, scale_out: dict | None = None) -> dict:
    spec = {"name": f"toy_{topology}", "clock_hz": "1 GHz", "chips": [{"count": chips, "units": [
        {"name": "vpu", "categories": ["elementwise", "reduction", "data_movement", "tensor"], "vector": {"lanes": 8},
         "reads": ["sram"], "writes": ["sram"]}],
        "memories": [{"name": "sram", "kind": "sram", "capacity_bytes": "1 MiB", "bandwidth_bytes_per_cycle": 64}]}],
        "interconnect": {"topology": topology, "bandwidth_bytes_per_cycle": 16, "link_latency_cycles": 10}}
    if scale_out is not None:
        spec["interconnect"]["scale_out"] = scale_out
    return spec


TWO_LEVEL = toy(16, "switch", {"chips_per_node": 4, "topology": "switch", "bandwidth_bytes_per_cycle": 2,
                               "link_latency_cycles": 100})


# ---- the description ------------------------------------------------------------------------------------------

def test_the_shipped_multi_chip_a100s_are_dgx_like():
    x8, x64, one = A.load_hw("a100_x8"), A.load_hw("a100_x64"), A.load_hw("a100_like")
    assert (x8.n_chips, x64.n_chips) == (8, 64)
    for hw in (x8, x64):
        assert hw.chips[0].model_dump(exclude={"count"}) == one.chips[0].model_dump(exclude={"count"})
        ic = hw.interconnect
        # links at the rates NCCL reaches (the configs' [NT]): 0.8 of NVLink's 300 GB/s, 0.92 of HDR's 25 GB/s
        assert ic.topology == "switch" and ic.bytes_per_cycle(hw.clock_hz) * hw.clock_hz == pytest.approx(0.8 * 300e9)
        assert ic.link_latency_cycles / hw.clock_hz <= 1e-6 and ic.collective_algorithm == "auto"
    assert x8.interconnect.scale_out is None
    so = x64.interconnect.scale_out
    assert (so.chips_per_node, so.nics) == (8, "per_chip")
    assert so.bytes_per_cycle(x64.clock_hz) * x64.clock_hz == pytest.approx(0.92 * 25e9)  # of 200 Gb/s HDR
    assert 1e-6 <= so.link_latency_cycles / x64.clock_hz <= 2e-6


def test_descriptions_without_the_new_keys_dump_as_before():
    """The hardware hash of a schedule is the dump's: files that predate the keys keep their hashes."""
    dump = A.load_hw("groq_like_x4").interconnect.model_dump()
    assert "scale_out" not in dump and "collective_algorithm" not in dump
    assert A.load_hw("groq_like_x4").interconnect.collective_algorithm == "ring"
    assert "scale_out" in A.load_hw("a100_x64").interconnect.model_dump()


def _edited(spec: dict, **changes) -> dict:
    spec = copy.deepcopy(spec)
    for key, value in changes.items():
        spec = apply_overrides(spec, {key.replace("__", "."): value})
    return spec


HOSTILE = {
    "chips_per_node_zero": (_edited(TWO_LEVEL, interconnect__scale_out__chips_per_node=0),
                            ["interconnect.scale_out.chips_per_node", "from 1 to 1024"]),
    "chips_per_node_not_a_divisor": (_edited(TWO_LEVEL, interconnect__scale_out__chips_per_node=3),
                                     ["interconnect.scale_out.chips_per_node", "16 chips", "one of 2, 4, 8"]),
    "prime_chip_count": (_edited(TWO_LEVEL, chips__0__count=7),
                         ["interconnect.scale_out.chips_per_node", "7 chips cannot form"]),
    "scale_out_on_one_node": (_edited(TWO_LEVEL, interconnect__scale_out__chips_per_node=16),
                              ["interconnect.scale_out", "single-node machine"]),
    "nodes_of_one_chip": (_edited(TWO_LEVEL, interconnect__scale_out__chips_per_node=1),
                          ["interconnect.scale_out.chips_per_node", "its own node"]),
    "chips_per_node_absurd": (_edited(TWO_LEVEL, interconnect__scale_out__chips_per_node=10**12),
                              ["interconnect.scale_out.chips_per_node"]),
    "switch_of_one_chip": (toy(1, "switch"), ["interconnect.topology", "nothing to switch"]),
    "unknown_topology": (toy(4, "hypercube"), ["interconnect.topology", "'switch'", "hypercube"]),
    "unknown_scale_out_topology": (_edited(TWO_LEVEL, interconnect__scale_out__topology="torus"),
                                   ["interconnect.scale_out.topology", "torus"]),
    "unknown_nics": (_edited(TWO_LEVEL, interconnect__scale_out__nics="per_rack"), ["interconnect.scale_out.nics"]),
    "unknown_algorithm": (_edited(TWO_LEVEL, interconnect__collective_algorithm="butterfly"),
                          ["interconnect.collective_algorithm", "'tree'"]),
    "scale_out_unknown_key": (_edited(TWO_LEVEL, interconnect__scale_out__hops=3), ["interconnect.scale_out.hops"]),
    "scale_out_without_bandwidth": (_edited(TWO_LEVEL, interconnect__scale_out__bandwidth_bytes_per_cycle=None),
                                    ["interconnect.scale_out", "bandwidth"]),
    "scale_out_bandwidth_per_s_absurd": (
        _edited(TWO_LEVEL, interconnect__scale_out__bandwidth_bytes_per_cycle=None,
                interconnect__scale_out__bandwidth_bytes_per_s="1e3 B/s"),
        ["interconnect.scale_out.bandwidth_bytes_per_s", "bytes per cycle"]),
}
for label, key in (("interconnect", "interconnect__bandwidth_bytes_per_cycle"),
                   ("scale_out", "interconnect__scale_out__bandwidth_bytes_per_cycle"),
                   ("interconnect_latency", "interconnect__link_latency_cycles"),
                   ("scale_out_latency", "interconnect__scale_out__link_latency_cycles")):
    for name, value in (("nan", float("nan")), ("inf", float("inf")), ("negative", -4), ("huge", 1e30)):
        HOSTILE[f"{label}_{name}"] = (_edited(TWO_LEVEL, **{key: value}), [key.replace("__", ".")])


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_a_hostile_topology_is_refused_naming_the_key(name):
    spec, fragments = HOSTILE[name]
    with pytest.raises(A.HwConfigError) as e:
        A.load_hw(spec)
    text = str(e.value)
    assert "Traceback" not in text and "problem(s)" in text
    for fragment in fragments:
        assert fragment in text, f"{fragment!r} not in:\n{text}"


def test_a_two_level_machine_loads_from_yaml(tmp_path):
    import yaml

    path = tmp_path / "two_level.yaml"
    path.write_text(yaml.safe_dump(TWO_LEVEL))
    hw = A.load_hw(path)
    assert (hw.interconnect.scale_out.chips_per_node, hw.interconnect.scale_out.nics) == (4, "per_chip")


# ---- routes -------------------------------------------------------------------------------------------------

def test_routes_follow_the_topology():
    ring = topology_of(A.load_hw(toy(6, "ring")))
    assert [(x.src, x.dst) for x in ring.route(0, 2).links] == [(0, 1), (1, 2)]
    assert [(x.src, x.dst) for x in ring.route(0, 4).links] == [(0, 5), (5, 4)]  # the shorter way round
    assert [(x.src, x.dst) for x in ring.route(0, 3).links] == [(0, 1), (1, 2), (2, 3)]  # forward on a tie
    assert ring.route(0, 4).latency_cycles == 20 and ring.route(0, 4).cycles(160) == 30
    switch = topology_of(A.load_hw(toy(4, "switch")))
    assert switch.route(1, 3).links == (Link("interconnect", 1, SWITCH), Link("interconnect", SWITCH, 3))
    assert switch.route(1, 3).latency_cycles == 10
    two = topology_of(A.load_hw(TWO_LEVEL))
    assert two.route(1, 2).links[0].net == "interconnect"
    assert two.route(1, 6).links == (Link("scale_out", 1, SWITCH), Link("scale_out", SWITCH, 6))
    assert (two.route(1, 6).bytes_per_cycle, two.route(1, 6).latency_cycles) == (2, 100)
    per_node = topology_of(A.load_hw(_edited(TWO_LEVEL, interconnect__scale_out__nics="per_node")))
    assert per_node.route(1, 6).links == (Link("scale_out", 0, SWITCH), Link("scale_out", SWITCH, 1))
    assert per_node.label(per_node.route(1, 6).links[0]) == "nic:node0->switch"


# ---- contention ---------------------------------------------------------------------------------------------

def fan_in(stages: int) -> A.Graph:
    """exp(x) on stage 0 and exp(y) on stage 1 end together; their sum is on stage 2 (then a relu on stage 3)."""
    g = A.Graph("fan_in")
    total = F.exp(g.input("x", (64,))) + F.exp(g.input("y", (64,)))
    if stages == 4:
        F.relu(total)
    return g


def _transfers(topology: str, chips: int):
    hw, graph = A.load_hw(toy(chips, topology)), fan_in(chips)
    sched = A.compile(graph, hw, pipeline_stages=chips)
    result = simulate(sched, hw)
    assert [(s.start, s.end) for s in result.spans] == [(t.start, t.end) for t in sched.tasks]
    A.validate_schedule(sched, graph, hw)
    simulate(sched, hw, "dynamic")  # takes its links in one order: no deadlock
    into_2 = [t for t in sched.tasks if t.kind == "transfer" and t.out_chip == 2]
    assert sorted(t.chip for t in into_2) == [0, 1]
    return sched, into_2, hw, graph


def test_two_transfers_into_one_chip_serialize_on_its_switch_port_but_not_over_two_wires():
    _, (a, b), _, _ = _transfers("switch", 3)
    assert (a.start, a.end, b.start, b.end) == (8, 34, 34, 60)  # the second waits for chip2's ingress port
    _, (a, b), _, _ = _transfers("fully_connected", 3)
    assert (a.start, a.end, b.start, b.end) == (8, 34, 8, 34)


def test_a_two_hop_ring_transfer_blocks_a_transfer_over_one_of_its_hops():
    _, transfers, _, _ = _transfers("ring", 4)
    far, near = sorted(transfers, key=lambda t: t.chip)  # 0 -> 1 -> 2, and 1 -> 2
    assert far.end - far.start == 16 + 2 * 10 and near.end - near.start == 16 + 10
    assert near.start >= far.end or far.start >= near.end
    _, (a, b), _, _ = _transfers("fully_connected", 4)
    assert a.start == b.start


def test_the_validator_refuses_two_tasks_overlapping_on_a_link():
    sched, (a, b), hw, graph = _transfers("switch", 3)
    moved = b.model_copy(update={"start": a.start, "end": a.end})
    tensors = tuple(x.model_copy(update={"start": a.start}) if x.task == b.id else x for x in sched.tensors)
    tampered = sched.model_copy(update={"tasks": tuple(moved if t.id == b.id else t for t in sched.tasks),
                                        "tensors": tensors})
    A.validate_schedule(tampered)  # on its own the schedule is consistent: the link is a fact of the hardware
    with pytest.raises(A.ScheduleError, match=r"on link:switch->2, overlapping task \d+ \(transfer"):
        A.validate_schedule(tampered, graph, hw)


def test_a_collective_and_a_transfer_sharing_a_port_serialize():
    """Data parallel x pipeline on 4 switched chips: replica r's stages on chips 2r and 2r + 1; the
    all-reduces hold every member's ports, so a transfer into a member's chip never overlaps one."""
    hw = A.load_hw(toy(4, "switch"))
    graph = A.training_graph(A.models.build("mlp", batch=2, sizes=(16, 8, 4)))
    sched = A.compile(graph, hw, microbatches=2, data_parallel=2, pipeline_stages=2)
    A.validate_schedule(sched, graph, hw)
    result = simulate(sched, hw)
    assert [(s.start, s.end) for s in result.spans] == [(t.start, t.end) for t in sched.tasks]
    collectives = [t for t in sched.tasks if t.kind == "allreduce"]
    transfers = [t for t in sched.tasks if t.kind == "transfer"]
    assert collectives and transfers
    for c in collectives:
        for t in transfers:
            if c.chip in (t.chip, t.out_chip):
                assert t.end <= c.start or c.end <= t.start


def test_a_shipped_multi_chip_config_runs_end_to_end(tmp_path):
    from accelsim.cli import main

    code = main(["run", "--hw", str(HWCONFIGS / "a100_x8.yaml"), "--data-parallel", "8", "--model", "mlp",
                 "--out", str(tmp_path)])
    assert code in (0, None)
