"""Collectives (schedule/collectives.py): the link model's costs against the closed forms, the choice of
algorithm, and data-parallel training on the multi-chip A100 machines, compiled, replayed and checked.

Closed forms, with n members, S bytes, bandwidth B (bytes per cycle) and latency a per transfer:
ring all-reduce 2(n-1)/n S/B + 2(n-1) a; reduce-scatter and all-gather (n-1)/n S/B + (n-1) a; tree
all-reduce 2 floor(log2 n) latencies; NCCL's bus bandwidth busbw = algbw * 2(n-1)/n = B for a ring.
"""
import math

import pytest

import accelsim as A
from accelsim.hw.topology import Network, Topology, topology_of
from accelsim.models.sizes import SMALL
from accelsim.schedule.collectives import COLLECTIVE_KINDS, collective_cost
from accelsim.schedule.plan import COLLECTIVE, COLLECTIVE_TREE
from accelsim.sim import simulate

B, LATENCY = 16.0, 10


def flat(n: int, topology: str = "switch", bandwidth: float = B, latency: int = LATENCY) -> Topology:
    return Topology(n, n, Network(topology, bandwidth, latency))


def two_level(nodes: int, per_node: int, nics: str = "per_chip") -> Topology:
    return Topology(nodes * per_node, per_node, Network("switch", 200.0, 1000), Network("switch", 20.0, 3000), nics)


# ---- closed forms -----------------------------------------------------------------------------------------

@pytest.mark.parametrize("topology", ["switch", "fully_connected", "ring"])
@pytest.mark.parametrize("n", [2, 3, 4, 8])
@pytest.mark.parametrize("nbytes", [1, 1000, 12345, 10**7])
def test_ring_all_reduce_is_the_closed_form(n, nbytes, topology):
    cost = collective_cost(flat(n, topology), "allreduce", list(range(n)), nbytes, "ring")
    assert cost.cycles == math.ceil(2 * (n - 1) / n * nbytes / B) + 2 * (n - 1) * LATENCY
    assert cost.latency_cycles == 2 * (n - 1) * LATENCY
    assert cost.sent_bytes == (math.ceil(2 * (n - 1) * nbytes / n),) * n
    assert cost.resource == COLLECTIVE and not cost.hierarchical


@pytest.mark.parametrize("kind", ["reduce_scatter", "all_gather"])
@pytest.mark.parametrize("n", [2, 5, 8])
def test_reduce_scatter_and_all_gather_are_half_a_ring_all_reduce(kind, n):
    nbytes = 10**6
    cost = collective_cost(flat(n), kind, list(range(n)), nbytes)
    assert cost.cycles == math.ceil((n - 1) / n * nbytes / B) + (n - 1) * LATENCY
    assert cost.algorithm == "ring"
    assert collective_cost(flat(n), kind, list(range(n)), nbytes, "tree") == cost  # no tree: a ring whatever is asked


@pytest.mark.parametrize("n", [2, 3, 4, 7, 8, 16, 64])
def test_tree_all_reduce_pays_two_latencies_per_level_of_a_binary_tree(n):
    levels = math.floor(math.log2(n))
    cost = collective_cost(flat(n, bandwidth=1e6), "allreduce", list(range(n)), 8, "tree")
    assert cost.latency_cycles == 2 * levels * LATENCY
    assert cost.cycles == 2 * levels * LATENCY + 1  # the bytes round up to one cycle
    ring = collective_cost(flat(n, bandwidth=1e6), "allreduce", list(range(n)), 8, "ring")
    assert cost.cycles <= ring.cycles


def test_a_tree_parent_on_a_switch_takes_both_children_through_its_one_port():
    """7 members: a complete tree of 2 levels; reduce up, then broadcast down, each level with 2 flows into
    (or out of) each parent's one switch port."""
    cost = collective_cost(flat(7, latency=0), "allreduce", list(range(7)), 1600, "tree")
    assert cost.cycles == 2 * 2 * (2 * 1600) / B
    fully = collective_cost(flat(7, "fully_connected", latency=0), "allreduce", list(range(7)), 1600, "tree")
    assert fully.cycles == 2 * 2 * 1600 / B  # a wire per child: the children do not share
    assert fully.sent_bytes == (3200, 4800, 4800, 1600, 1600, 1600, 1600)  # root: down; inner: up and down


@pytest.mark.parametrize("n", [2, 4, 8, 64])
def test_ring_bus_bandwidth_is_the_link_bandwidth(n):
    """NCCL's busbw = algbw * 2(n-1)/n: a bandwidth-bound ring all-reduce moves data at the link's rate."""
    nbytes = 10**9
    cost = collective_cost(flat(n, latency=0), "allreduce", list(range(n)), nbytes, "ring")
    algbw = nbytes / cost.cycles
    assert algbw * 2 * (n - 1) / n == pytest.approx(B, rel=1e-6)


def test_hierarchical_ring_all_reduce_is_the_two_level_closed_form():
    """Reduce-scatter in each node (k chips), all-reduce across the m nodes on each of the k rails, all-gather."""
    m, k, nbytes = 4, 8, 10**8
    topo = two_level(m, k)
    cost = collective_cost(topo, "allreduce", list(range(m * k)), nbytes, "ring")
    intra, inter = topo.intra, topo.inter
    expected = (2 * (k - 1) / k * nbytes / intra.bytes_per_cycle + 2 * (m - 1) / (k * m) * nbytes / inter.bytes_per_cycle
                + 2 * (k - 1) * intra.latency_cycles + 2 * (m - 1) * inter.latency_cycles)
    assert cost.hierarchical and abs(cost.cycles - expected) <= 1
    rs = collective_cost(topo, "reduce_scatter", list(range(m * k)), nbytes)
    ag = collective_cost(topo, "all_gather", list(range(m * k)), nbytes)
    assert abs(rs.cycles + ag.cycles - cost.cycles) <= 2  # an all-reduce is a reduce-scatter then an all-gather


def test_per_node_nics_make_the_rails_share_one_port():
    m, k, nbytes = 2, 4, 10**7
    chips = list(range(m * k))
    per_chip = collective_cost(two_level(m, k, "per_chip"), "allreduce", chips, nbytes, "ring")
    per_node = collective_cost(two_level(m, k, "per_node"), "allreduce", chips, nbytes, "ring")
    inter_bytes = 2 * (m - 1) / (k * m) * nbytes / 20.0
    assert per_node.cycles - per_chip.cycles == pytest.approx((k - 1) * inter_bytes, abs=2)


def test_members_one_per_node_use_the_network_between_nodes_alone():
    topo = two_level(4, 8)
    cost = collective_cost(topo, "allreduce", [0, 8, 16, 24], 4000, "ring")
    assert not cost.hierarchical and {link.net for link in cost.links} == {"scale_out"}
    assert cost.cycles == math.ceil(2 * 3 / 4 * 4000 / 20.0) + 2 * 3 * 3000


def test_a_single_member_or_members_on_one_chip_exchange_nothing():
    for chips in ([3], [2, 2, 2]):
        cost = collective_cost(flat(4), "allreduce", chips, 10**6)
        assert (cost.cycles, cost.links, set(cost.sent_bytes)) == (0, (), {0})


def test_ring_links_are_the_routes_between_neighbours():
    ring4 = flat(4, "ring")
    cost = collective_cost(ring4, "allreduce", [0, 1, 2, 3], 1000, "ring")
    assert [(x.src, x.dst) for x in cost.links] == [(0, 1), (1, 2), (2, 3), (3, 0)]
    switch = collective_cost(flat(4), "allreduce", [0, 1, 2, 3], 1000, "ring")
    assert len(switch.links) == 8  # every member's egress and ingress port


@pytest.mark.parametrize("hw_name, n", [("a100_x8", 8), ("a100_x64", 64)])
def test_auto_picks_the_tree_for_small_messages_and_the_ring_for_large(hw_name, n):
    topo = topology_of(A.load_hw(hw_name))
    chips = list(range(n))
    for nbytes, winner in ((1024, "tree"), (10**8, "ring")):
        ring, tree = (collective_cost(topo, "allreduce", chips, nbytes, a) for a in ("ring", "tree"))
        auto = collective_cost(topo, "allreduce", chips, nbytes, "auto")
        assert auto.algorithm == winner and auto.cycles == min(ring.cycles, tree.cycles) < max(ring.cycles, tree.cycles)
        assert auto.hierarchical == (n > 8)
    assert collective_cost(topo, "allreduce", chips, 1024, "auto").resource == COLLECTIVE_TREE


def test_bad_requests_are_refused():
    for kind, chips, algorithm in (("broadcast", [0, 1], "ring"), ("allreduce", [0, 1], "butterfly"),
                                   ("allreduce", [], "ring"), ("allreduce", [0, 9], "ring")):
        with pytest.raises(A.ScheduleError):
            collective_cost(flat(4), kind, chips, 100, algorithm)
    assert set(COLLECTIVE_KINDS) == {"allreduce", "reduce_scatter", "all_gather"}


# ---- data-parallel training on the multi-chip A100 machines ---------------------------------------------------

@pytest.mark.parametrize("hw_name, model, d", [("a100_x8", "mlp", 8), ("a100_x8", "transformer_block", 8),
                                                ("a100_x64", "mlp", 16), ("a100_x64", "mlp", 64)])
def test_data_parallel_training_on_a100_machines_replays_validates_and_checks(hw_name, model, d):
    hw = A.load_hw(hw_name)
    graph = A.training_graph(A.models.build(model, **SMALL[model]))
    sched = A.compile(graph, hw, data_parallel=d)
    A.validate_schedule(sched, graph, hw)
    members = [t for t in sched.tasks if t.kind == "allreduce"]
    assert members and {t.chip for t in members} == set(range(d))
    topo = topology_of(hw)
    for t in members:
        nbytes = t.out_bytes
        cost = collective_cost(topo, "allreduce", list(range(d)), nbytes, "auto")
        assert (t.resource, t.end - t.start) == (cost.resource, max(1, cost.cycles))
    result = simulate(sched, hw)
    assert [(s.start, s.end) for s in result.spans] == [(t.start, t.end) for t in sched.tasks]
    report = A.check(sched, graph=graph, hw=hw)
    assert report.passed, [e for e in report.entries if not e.passed]


def test_replicas_sharing_one_chip_still_add_on_chip():
    hw = A.load_hw("groq_like")
    graph = A.training_graph(A.models.build("mlp", **SMALL["mlp"]))
    sched = A.compile(graph, hw, data_parallel=2)
    members = [t for t in sched.tasks if t.kind == "allreduce"]
    assert members and {t.chip for t in members} == {0} and {t.resource for t in members} == {COLLECTIVE}
    assert A.check(sched, graph=graph, hw=hw).passed


@pytest.mark.parametrize("kind", sorted(COLLECTIVE_KINDS))
def test_the_planner_makes_a_collective_of_any_kind_one_group_priced_by_the_link_model(kind):
    from accelsim.compiler.planning.expand import Planner
    from accelsim.schedule.options import StepOptions

    hw = A.load_hw("a100_x8")
    graph = A.training_graph(A.models.build("mlp", **SMALL["mlp"]))
    planner = Planner(graph, hw, StepOptions(data_parallel=8))
    planner.plan(None)
    g = sorted(planner.grad_nodes)[0]
    sources = [planner.only(g, 0, r, 0) for r in range(8)]
    nbytes = planner.nbytes(graph.nodes[g])
    members = [planner.tasks[m] for m in planner.collective(kind, g, sources, nbytes, "backward")]
    cost = collective_cost(topology_of(hw), kind, list(range(8)), nbytes, "auto")
    assert [t.chip for t in members] == list(range(8)) and len({t.group for t in members}) == 1
    assert {t.options for t in members} == {((cost.resource, 1, max(1, cost.cycles)),)}
    assert [t.port_bytes for t in members] == list(cost.sent_bytes)
    assert all(t.kind == kind and t.deps == sources for t in members)
