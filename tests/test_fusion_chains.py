"""Layer fusion chosen per chain (compiler/fusion_choice.py, the `fusion_chains` step option): each chain fused
with its own tile count or left unfused, the choice recorded and replayed, bad choices refused."""
import pytest

import accelsim as A
from accelsim import ops as F
from accelsim.compiler.fusion import chain_choices, step_graph
from accelsim.compiler.fusion_choice import fusion_passes
from accelsim.errors import ScheduleError
from accelsim.fusion_groups import fusion_groups
from accelsim.passes.fuse_chains import plan_fusion

SMALL = {"chips.0.memories.unified_buffer.capacity_bytes": 6144}


def _two_chains() -> A.Graph:
    """conv, relu, conv (an output, which ends the chain), then conv, relu, max pool: two chains."""
    g = A.Graph("two", dtype="float32")
    x = g.input("x", (1, 2, 16, 8))
    with g.layer("a1"):
        y = F.relu(F.conv2d(x, g.param("w1", (4, 2, 3, 3)), padding=1))
    with g.layer("a2"):
        y = F.conv2d(y, g.param("w2", (4, 4, 3, 3)), padding=1)
    g.output("mid", y)
    with g.layer("b1"):
        z = F.relu(F.conv2d(y, g.param("w3", (4, 4, 3, 3)), padding=1))
    with g.layer("b2"):
        z = F.max_pool2d(z, 2, stride=2)
    g.output("out", z)
    return g


def _anchors(g: A.Graph) -> list[int]:
    return [c.anchor for c in plan_fusion(g, 2).chains]


def test_each_chain_is_fused_with_its_own_tile_count_and_the_choice_replays():
    g = _two_chains()
    a, b = _anchors(g)
    s = A.compile(g, "tpu_v1_like", fusion="auto", fusion_chains=((a, 4), (b, 2)), effort="fast")
    assert s.options.fusion == "auto" and s.options.fusion_chains == ((a, 4), (b, 2))
    fused, lines = step_graph(g, s)
    assert [len(group.tiles) for group in fusion_groups(fused)] == [4, 2] and len(lines) == 2
    report = A.check(s, graph=fused, backend="numpy")
    assert all(e.mismatch is None and e.max_rel_err <= e.tolerance for e in report.entries)
    assert A.simulate(s, graph=fused).makespan_cycles == s.makespan_cycles
    again = type(s).model_validate_json(s.model_dump_json())  # a schedule file keeps the choice
    assert again.options.fusion_chains == ((a, 4), (b, 2)) and step_graph(g, again)[0].dump() == fused.dump()


def test_one_chain_fused_leaves_the_other_as_it_was():
    g = _two_chains()
    a, b = _anchors(g)
    s = A.compile(g, "tpu_v1_like", fusion="auto", fusion_chains=((b, 2),), effort="fast")
    fused, _ = step_graph(g, s)
    (group,) = fusion_groups(fused)
    assert group.label == "b1 .. b2"
    assert sum(n.op == "conv2d" for n in fused.nodes) == 2 + 2  # a1, a2 whole; b1 twice


def test_mixed_counts_are_one_pass_per_run_last_chain_first():
    g = _two_chains()
    a, b = _anchors(g)
    passes = fusion_passes(g, ((a, 4), (b, 2)))
    assert [(p.name, p.only) for p in passes] == [("fuse_layers_t2", (b,)), ("fuse_layers_t4", (a,))]
    assert [(p.name, p.only) for p in fusion_passes(g, ((a, 2), (b, 2)))] == [("fuse_layers_t2", None)]


def test_auto_prices_every_chain_and_fuses_where_the_estimate_wins():
    g = _two_chains()
    hw = A.load_hw("tpu_v1_like", SMALL)
    unfused = A.compile(g, hw, effort="fast")
    choices = chain_choices(g, hw, unfused.options, unfused)
    assert [c.anchor for c in choices] == _anchors(g)
    # 16 tiles: more than b2's 8 output rows
    assert [{t for t, _ in c.fused_cycles} for c in choices] == [{2, 4, 8, 16}, {2, 4, 8}]
    for c in choices:
        best = min(c.fused_cycles, key=lambda e: (e[1], e[0]))
        assert c.tiles == (best[0] if best[1] < c.unfused_cycles else None)
        assert c.label in c.describe()
    s = A.compile(g, hw, fusion="auto", effort="fast")
    if s.options.fusion == "off":  # the combined choice compiled no shorter: the unfused step, byte for byte
        assert s.model_dump_json() == unfused.model_dump_json()
    else:
        assert s.makespan_cycles < unfused.makespan_cycles


@pytest.mark.parametrize("chains, match", [
    (((3, 2),), r"fusion_chains: node 3 of 'two' is not the first layer of a chain fusible into 2 tiles"),
    (((0, 3),), r"fusion_chains: expected \(node id >= 0, tile count in 2, 4, 8, 16\) pairs"),
    (((5, 2), (2, 2)), r"ascending distinct ids"),
    ((), r"fusion_chains: expected"),
    ("2,4", r"fusion_chains: expected"),
])
def test_a_bad_chain_choice_is_refused_naming_it(chains, match):
    with pytest.raises(ScheduleError, match=match):
        A.compile(_two_chains(), "tpu_v1_like", fusion="auto", fusion_chains=chains, effort="fast")


def test_chains_given_without_fusion_auto_are_refused():
    with pytest.raises(ScheduleError, match="the chains fused apply with fusion 'auto', not 'off'"):
        A.compile(_two_chains(), "tpu_v1_like", fusion_chains=((2, 2),))


def test_the_cli_text_of_the_chains_is_the_pairs():
    from accelsim.schedule.options import StepOptions

    assert StepOptions(fusion="auto", fusion_chains="2:4, 11:2").fusion_chains == ((2, 4), (11, 2))
    with pytest.raises(ScheduleError, match="fusion_chains: expected"):
        StepOptions.of(fusion="auto", fusion_chains="2:x")


def test_the_chains_are_ranked_by_estimated_saving_and_unfused_ones_left_out():
    from accelsim.compiler.fusion_choice import ChainChoice, ranked_pairs

    def choice(anchor, unfused, fused, tiles):
        return ChainChoice(anchor, anchor + 5, f"l{anchor}", unfused, fused, tiles)

    choices = (choice(2, 100, ((2, 90), (4, 95)), 2), choice(9, 100, ((2, 40),), 2),
               choice(20, 50, ((4, 60),), None), choice(30, 80, ((8, 10), (16, 70)), 8))
    assert ranked_pairs(choices) == ((30, 8), (9, 2), (2, 2))


def test_auto_leaves_a_graph_fused_already_as_it_is():
    g = A.optimize(_two_chains(), ["fuse_layers_t2"])
    s = A.compile(g, "tpu_v1_like", fusion="auto", effort="fast")
    assert s.options.fusion == "off"
    assert s.model_dump_json() == A.compile(g, "tpu_v1_like", effort="fast").model_dump_json()


def test_auto_also_compiles_the_best_chains_other_promising_counts(monkeypatch):
    """The estimate can misjudge where a tile's values fit (ResNet-50's stem on tpu_v1_like with a 1 MiB buffer:
    estimated best at 2 tiles, which spill, while 4 tiles are 33% shorter, experiments/fusion.py): `auto` also
    compiles the best-ranked chain alone at each other count estimated cheaper than unfused (cheapest estimate
    first), and keeps the shortest of every candidate."""
    import accelsim.compiler.fusion as fusion
    from accelsim.compiler.fusion_choice import ChainChoice
    g = _two_chains()
    hw = A.load_hw("tpu_v1_like", SMALL)
    a, b = _anchors(g)
    # chain a estimated best at 2 tiles, 8 tiles next, 4 tiles no cheaper than unfused; chain b at 4 tiles
    choices = (ChainChoice(a, a, "a1 .. a2", 100, ((2, 10), (4, 100), (8, 20)), 2),
               ChainChoice(b, b, "b1 .. b2", 100, ((2, 90), (4, 50), (8, 95)), 4))
    monkeypatch.setattr(fusion, "chain_choices", lambda *args: choices)
    tried, spans = [], {}
    real = fusion._fused_chains

    def recording(graph, hw_, chosen, options, compile_step):
        tried.append(chosen)
        spans[chosen] = real(graph, hw_, chosen, options, compile_step).makespan_cycles
        return real(graph, hw_, chosen, options, compile_step)

    monkeypatch.setattr(fusion, "_fused_chains", recording)
    s = A.compile(g, hw, fusion="auto", effort="fast")
    assert tried == [((a, 2), (b, 4)), ((a, 2),), ((a, 8),)]
    assert s.makespan_cycles == min([A.compile(g, hw, effort="fast").makespan_cycles, *spans.values()])


def test_auto_adds_each_chain_the_best_candidate_leaves_unfused_where_the_step_gets_shorter(monkeypatch):
    """Chains are priced alone, but fused together they compete for the on-chip memory (ResNet-18 on Stream's chip:
    layer3's chains shorten the step alone and lengthen it beside layer1-2's). Beyond the halvings of the ranked
    chains, `auto` adds each chain the shortest step so far leaves unfused, in rank order, and keeps it where the
    step gets shorter; a set compiled once is not compiled again."""
    import accelsim.compiler.fusion as fusion
    from accelsim.compiler.fusion_choice import ChainChoice
    g = _two_chains()
    hw = A.load_hw("tpu_v1_like", SMALL)
    unfused = A.compile(g, hw, effort="fast")
    x, y, z = (ChainChoice(a, a, f"l{a}", 100, ((2, cycles),), 2) for a, cycles in ((2, 10), (9, 20), (20, 30)))
    monkeypatch.setattr(fusion, "chain_choices", lambda *args: (x, y, z))
    # all three fused: longer than unfused; the best alone and the best two: shorter, the two shortest
    spans = {((2, 2), (9, 2), (20, 2)): unfused.makespan_cycles + 20, ((2, 2),): unfused.makespan_cycles - 10,
             ((2, 2), (9, 2)): unfused.makespan_cycles - 30}
    tried = []

    def fake(graph, hw_, chosen, options, compile_step):
        tried.append(chosen)
        return unfused.model_copy(update={"makespan_cycles": spans[chosen]})

    monkeypatch.setattr(fusion, "_fused_chains", fake)
    s = A.compile(g, hw, fusion="auto", effort="fast")
    assert tried == [((2, 2), (9, 2), (20, 2)), ((2, 2),), ((2, 2), (9, 2))]
    assert s.makespan_cycles == unfused.makespan_cycles - 30
