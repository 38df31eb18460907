"""Splitting one tensor op across several instances of a unit (schedule/split.py): each part is an exact
slice of the node's output, the scheduler splits only where the parts finish sooner, compile keeps the
split plan only when the step is shorter, and the simulator and `check` run the parts."""
import copy
import json
from pathlib import Path

import numpy as np
import pytest
import yaml

import accelsim as A
from accelsim import ops as F
from accelsim.cost.model import node_cost
from accelsim.errors import ScheduleError
from accelsim.graph.ir import Graph
from accelsim.ops.registry import OPS
from accelsim.schedule.split import Part, assemble, bounds, part_geometry, part_graph, slice_inputs, splits_of
from accelsim.api import validate_schedule

TOY_FILE = Path(__file__).parent / "data" / "toy_hw.yaml"  # a 4x4 WS array, 2 cycles of latency


def _toy(count: int = 4, port: int = 64, **unit_keys) -> dict:
    """The toy with `count` array instances and a `port` B/cycle memory."""
    d = copy.deepcopy(yaml.safe_load(TOY_FILE.read_text()))
    mxu = next(u for u in d["chips"][0]["units"] if "array" in u)
    mxu.update(count=count, **unit_keys)
    d["chips"][0]["memories"][0]["bandwidth_bytes_per_cycle"] = port
    return d


def _node_of(op: str, arrays, attrs) -> tuple[Graph, object]:
    g = Graph(op, dtype="float64")
    leaves = [g.input(f"x{i}", a.shape, dtype="float64") for i, a in enumerate(arrays)]
    return g, F.apply(op, *leaves, **attrs).node


SPLIT_OPS = sorted(name for name, op in OPS.items() if op.examples is not None and op.category == "tensor")


@pytest.mark.parametrize("op", SPLIT_OPS)
def test_every_part_of_every_split_is_an_exact_slice_of_the_whole_output(op):
    """The oracle is the op's own numpy reference on the whole inputs: the parts' references on their
    input slices, concatenated, must equal it (no partial sums are involved: each output element is the
    same dot product, up to the summation order BLAS picks for the smaller operands, so 1e-13 in
    float64), for 2, 3 and as many parts as the axis has indices, on every example the op ships
    (transposes, batches, groups)."""
    rng = np.random.default_rng(0)
    tried = 0
    for arrays, attrs in OPS[op].examples(rng):
        g, node = _node_of(op, arrays, attrs)
        whole = OPS[op].ref(*arrays, **attrs)
        for index, split in enumerate(splits_of(g, node)):
            size = node.shape[split.out_axis]
            for parts in sorted({2, 3, size} & set(range(2, size + 1))):
                pieces = []
                for i in range(parts):
                    part = Part(index, i, parts)
                    ins, out, part_attrs = part_geometry(g, node, part)
                    sliced = slice_inputs(g, node, part, arrays)
                    assert tuple(a.shape for a in sliced) == ins
                    piece = OPS[op].ref(*sliced, **part_attrs)
                    assert piece.shape == out
                    pieces.append(piece)
                np.testing.assert_allclose(assemble(g, node, index, pieces), whole, rtol=1e-13, atol=1e-13)
                tried += 1
    assert tried >= 2, f"{op} has no split exercised by its examples"


def test_matmul_offers_rows_and_columns_and_batch_when_batched():
    g = A.Graph("m")
    two = F.matmul(g.input("a", (6, 4)), g.input("b", (4, 5)))
    three = F.matmul(g.input("c", (2, 6, 4)), g.input("d", (4, 5)), transpose_b=False)
    assert [s.name for s in splits_of(g, two.node)] == ["rows", "cols"]
    assert [s.name for s in splits_of(g, three.node)] == ["batch", "rows", "cols"]
    assert splits_of(g, three.node)[0].in_axes == (0, None)  # d has no batch axis: read whole


def test_grouped_convolutions_split_by_images_only():
    g = A.Graph("c")
    y = F.conv2d(g.input("x", (2, 4, 6, 6)), g.param("w", (4, 2, 3, 3)), groups=2)
    assert [s.name for s in splits_of(g, y.node)] == ["batch"]


def test_bounds_cut_near_equal_runs_covering_every_index_once():
    for size in range(1, 30):
        for parts in range(1, size + 1):
            runs = [bounds(size, parts, i) for i in range(parts)]
            assert runs[0][0] == 0 and runs[-1][1] == size
            assert all(a[1] == b[0] for a, b in zip(runs, runs[1:]))
            assert max(h - l for l, h in runs) - min(h - l for l, h in runs) <= 1


def test_a_matmul_is_cut_along_the_split_whose_slowest_part_is_fastest_on_four_instances():
    """(64 x 16) @ (16 x 16) on 4x4 WS arrays: K = 16 -> 4 row folds, N = 16 -> 4 column folds, T = M = 64;
    one fold is 4 + 4 + 4 + 64 - 2 = 74 cycles, the whole node 16 x 74 = 1184 on one instance. Cut by rows
    (M = 16 per part): 16 folds of T = 16, 16 x 26 = 416 per part; cut by columns (N = 4 per part): 4 folds
    of T = 64, 4 x 74 = 296 per part. Columns win: four parts on the four instances at once, given a
    memory port wide enough for all four parts' operand streams."""
    g = A.Graph("mm")
    y = F.matmul(g.input("a", (64, 16)), g.param("w", (16, 16)))
    z = F.relu(y)  # the matmul is not a result of the step, so it may be split
    g.output("z", z)
    hw = A.load_hw(_toy(port=4096))
    mxu = next(u for u in hw.chips[0].units if u.name == "mxu")
    assert node_cost(hw, g, y.node, mxu).compute_cycles == 1184
    for index, cycles in ((0, 416), (1, 296)):
        pg, pn = part_graph(g, y.node, Part(index, 0, 4))
        assert node_cost(hw, pg, pn, mxu).compute_cycles == cycles
    sched = A.compile(g, hw, split=True)
    parts = [t for t in sched.tasks if t.node == y.node.id]
    assert [(t.split, t.part, t.parts) for t in parts] == [(1, i, 4) for i in range(4)]
    assert sorted(t.instance for t in parts) == [0, 1, 2, 3]
    assert len({(t.start, t.end) for t in parts}) == 1  # all four at once
    assert sum(t.out_bytes for t in parts) == 64 * 16 * 4
    assert sched.options.split
    whole = A.compile(g, hw, split=False)
    assert not whole.options.split and not any(t.is_part for t in whole.tasks)
    assert sched.makespan_cycles < whole.makespan_cycles - 800
    assert A.compile(g, hw).makespan_cycles == sched.makespan_cycles  # auto keeps the shorter: split
    assert A.check(sched, graph=g, hw=hw).passed


def test_parts_share_the_memory_port_so_a_narrow_port_runs_fewer_at_once():
    """Each column part streams a (64 x 16) and a (16 x 4) operand in and writes (64 x 4), 5,376 bytes in
    298 cycles, 18 B/cycle: a 64 B/cycle port carries three at once, so the fourth part waits."""
    g = A.Graph("mm")
    y = F.matmul(g.input("a", (64, 16)), g.param("w", (16, 16)))
    g.output("z", F.relu(y))
    parts = [t for t in A.compile(g, _toy(port=64), split=True).tasks if t.node == y.node.id]
    assert {t.bytes_moved for t in parts} == {64 * 16 * 4 + 16 * 4 * 4 + 64 * 4 * 4}
    starts = sorted(t.start for t in parts)
    assert starts[0] == starts[2] < starts[3]


def test_one_instance_or_a_gang_never_splits():
    g = A.Graph("mm")
    g.output("z", F.relu(F.matmul(g.input("a", (64, 16)), g.param("w", (16, 16)))))
    for hw in (_toy(count=1), _toy(count=4, gang=True)):
        assert not any(t.is_part for t in A.compile(g, hw, split=True).tasks)


def test_results_and_gradients_stay_whole():
    graph = A.training_graph(A.models.build("mlp", batch=16, sizes=(64, 64, 16)))
    sched = A.compile(graph, _toy(), split=True)
    split_nodes = {t.node for t in sched.tasks if t.is_part}
    assert split_nodes
    assert not split_nodes & set(graph.gradient_nodes())
    assert not split_nodes & set(graph.outputs.values())
    assert A.check(sched, graph=graph, hw=A.load_hw(_toy())).passed


def test_auto_keeps_the_shorter_of_the_split_and_unsplit_steps():
    """superres training on groq_like: the four MXM planes share the backward convolutions, and the
    step is shorter; with 64 micro-batches in flight every plane is already busy: auto keeps the shape
    that is shorter in each case, whichever it is."""
    hw = A.load_hw("groq_like")
    graph = A.training_graph(A.models.build("superres"))
    on, off, auto = (A.compile(graph, hw, split=s) for s in (True, False, None))
    assert on.makespan_cycles < off.makespan_cycles
    assert auto.makespan_cycles == on.makespan_cycles and auto.options.split
    assert A.simulate(on, hw, graph=graph).makespan_cycles == on.makespan_cycles
    assert A.check(on, graph=graph, hw=hw).passed


def test_the_dynamic_runtime_runs_the_parts():
    hw = A.load_hw("groq_like")
    graph = A.training_graph(A.models.build("superres"))
    sched = A.compile(graph, hw, split=True)
    result = A.simulate(sched, hw, graph=graph, mode="dynamic")
    assert result.makespan_cycles > 0
    assert {s.node for s in result.spans if s.kind == "node"} >= {t.node for t in sched.tasks if t.is_part}


def test_a_split_schedule_is_deterministic_and_round_trips_through_json(tmp_path):
    hw = A.load_hw("groq_like")
    graph = A.training_graph(A.models.build("superres"))
    a, b = (A.compile(graph, hw, split=True) for _ in range(2))
    assert a.model_dump_json() == b.model_dump_json()
    path = tmp_path / "s.json"
    path.write_text(a.model_dump_json())
    loaded = A.Schedule.model_validate_json(path.read_text())
    validate_schedule(loaded, graph, hw)  # compared with a fresh expansion of its recorded options
    assert A.check(loaded, graph=graph, hw=hw).passed


def _split_schedule():
    hw = A.load_hw("groq_like")
    graph = A.training_graph(A.models.build("superres"))
    return hw, graph, A.compile(graph, hw, split=True)


def _tamper(sched, task_id: int, **fields):
    tasks = list(sched.tasks)
    tasks[task_id] = tasks[task_id].model_copy(update=fields)
    return sched.model_copy(update={"tasks": tuple(tasks)})


def test_a_reader_missing_one_part_is_refused_naming_the_parts():
    hw, graph, sched = _split_schedule()
    part = next(t for t in sched.tasks if t.is_part)
    reader = next(t for t in sched.tasks if part.id in t.deps)
    bad = _tamper(sched, reader.id, deps=tuple(d for d in reader.deps if d != part.id))
    with pytest.raises(ScheduleError, match="in parts"):
        validate_schedule(bad, graph, hw)


def test_a_part_along_a_split_its_op_lacks_is_refused():
    hw, graph, sched = _split_schedule()
    part = next(t for t in sched.tasks if t.is_part)
    bad = _tamper(sched, part.id, split=9)
    with pytest.raises(ScheduleError, match="way\\(s\\) to split"):
        validate_schedule(bad, graph, hw)


@pytest.mark.parametrize("fields", [{"part": 4, "parts": 4, "split": 0}, {"part": 0, "parts": 1, "split": 0},
                                    {"part": 1, "parts": 2, "split": -1}, {"part": -1}, {"parts": 0}])
def test_an_impossible_part_is_refused_when_a_schedule_is_read(fields):
    hw, graph, sched = _split_schedule()
    data = json.loads(sched.model_dump_json())
    data["tasks"][0].update(fields)
    with pytest.raises(Exception, match="part"):
        A.Schedule.model_validate(data)


@pytest.mark.parametrize("value", ["yes", 1, 0.5, [True]])
def test_compile_refuses_a_split_that_is_not_true_false_or_none(value):
    graph = A.models.build("mlp", batch=2, sizes=(8, 4))
    with pytest.raises(A.AccelsimError, match="split must be True, False or None"):
        A.compile(graph, _toy(), split=value)


def test_cli_split_flag(capsys):
    from accelsim.cli import main
    assert main(["run", "--hw", "groq_like", "--split", "on"]) == 0
    assert "split over unit instances" in capsys.readouterr().out
    assert main(["run", "--hw", "groq_like", "--split", "off"]) == 0
    assert "split over unit instances" not in capsys.readouterr().out
    with pytest.raises(SystemExit) as exit_:
        main(["run", "--hw", "groq_like", "--split", "sometimes"])
    assert exit_.value.code == 2


def test_a_split_step_over_the_task_limit_is_refused_when_asked_for_and_skipped_by_auto():
    """superres training on groq_like is 55 tasks unsplit, 61 split (two backward convolutions in four
    parts each): with a limit of 58 tasks split=True is refused naming the limit, and auto keeps the
    unsplit step."""
    from accelsim.limits import Limits
    hw = A.load_hw("groq_like")
    graph = A.training_graph(A.models.build("superres"))
    assert len(A.compile(graph, hw, split=False).tasks) == 55
    assert len(A.compile(graph, hw, split=True).tasks) == 61
    with pytest.raises(ScheduleError, match="above the limit of 58"):
        A.compile(graph, hw, split=True, limits=Limits(max_tasks=58))
    auto = A.compile(graph, hw, limits=Limits(max_tasks=58))
    assert not auto.options.split and len(auto.tasks) == 55


def test_many_instances_cut_a_node_into_at_most_max_parts():
    """A unit of 4096 instances: a node splits into MAX_PARTS parts at most, never one task per instance."""
    from accelsim.schedule.split import MAX_PARTS
    g = A.Graph("mm")
    y = F.matmul(g.input("a", (256, 16)), g.param("w", (16, 256)))
    g.output("z", F.relu(y))
    sched = A.compile(g, _toy(count=4096, port=1 << 20), split=True)
    parts = [t for t in sched.tasks if t.node == y.node.id]
    assert len(parts) == MAX_PARTS == 64


def test_parts_cross_chips_one_transfer_each_and_check_passes():
    """Two pipeline stages on groq_like_x4: a split matmul's parts each travel to the next stage's chip
    on their own transfer, and the reader there puts them back together."""
    graph = A.training_graph(A.models.build("mlp", batch=2, sizes=(16, 8, 4)), optimizer="adam")
    hw = A.load_hw("groq_like_x4")
    sched = A.compile(graph, hw, microbatches=2, pipeline_stages=2, split=True)
    moved = [t for t in sched.tasks if t.kind == "transfer" and t.is_part]
    assert moved
    for t in moved:
        (src,) = t.deps
        assert (sched.tasks[src].split, sched.tasks[src].part, sched.tasks[src].parts) == (t.split, t.part, t.parts)
    assert A.check(sched, graph=graph, hw=hw).passed
    wrong = next(t for t in moved if t.part == 0)
    other = next(s for s in sched.tasks if s.node == wrong.node and s.kind == "node" and s.part == 1
                 and s.microbatch == wrong.microbatch)
    with pytest.raises(ScheduleError, match="holds part 0 of"):
        validate_schedule(_tamper(sched, wrong.id, deps=(other.id,)), graph, hw)
