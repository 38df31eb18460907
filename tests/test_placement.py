"""Placement in the hardware file (hw/placement.py): where parameters and optimizer state live, and streaming
them through a DMA engine as prefetch tasks the scheduler places, the simulator replays and the energy follows."""
from __future__ import annotations

import copy

import pytest
import yaml

import accelsim as A
from accelsim import ops as F
from accelsim.graph.ir import Graph
from accelsim.hw.load import bundled_path
from accelsim.passes import inference_graph
from accelsim.schedule.io import save_schedule
from accelsim.schedule.levels import aligned
from accelsim.sim.static import replay

STREAM_KEY = "chips.0.placement.parameters.stream"


def tpu_dict() -> dict:
    """tpu_v1_like as the YAML says (its placement streams parameters through the Weight FIFO)."""
    return yaml.safe_load(bundled_path("tpu_v1_like").read_text())


def resident(hw_dict: dict) -> A.HwSpec:
    """The same machine with weights resident where they fit (no placement and no Weight FIFO: the machine
    before placements existed)."""
    d = copy.deepcopy(hw_dict)
    del d["chips"][0]["placement"]
    d["chips"][0]["memories"] = [m for m in d["chips"][0]["memories"] if m["name"] != "weight_fifo"]
    return A.load_hw(d)


def warm_then_weights(relus: int = 16) -> Graph:
    """A long weight-free phase (ReLUs on the activation unit), then one matmul with four tiles of weights."""
    g = Graph("warm_then_weights")
    h = g.input("x", (256, 256), init="uniform", low=0.0, high=1.0)
    for _ in range(relus):
        h = F.relu(h)
    g.output("y", F.matmul(h, g.param("w", (256, 1024))))
    return g


def weight_heavy() -> Graph:
    return inference_graph(A.models.build("mlp", batch=8, sizes=(512, 512, 512)))


@pytest.fixture(scope="module")
def streamed_and_resident():
    g = weight_heavy()
    out = {}
    for name, hw in (("streamed", A.load_hw("tpu_v1_like")), ("resident", resident(tpu_dict()))):
        s = A.compile(g, hw)
        out[name] = (hw, s, A.simulate(s, hw, graph=g))
    return g, out


# --- the hardware file --------------------------------------------------------------------------------------

def test_without_a_placement_a_chip_dumps_as_before():
    for name in ("groq_like", "a100_like"):
        assert all("placement" not in c for c in A.load_hw(name).model_dump()["chips"])


def test_the_shipped_tpu_streams_its_weights_through_a_four_tile_fifo():
    p = A.load_hw("tpu_v1_like").chips[0].placement.parameters
    assert (p.memory, p.stream.buffer, p.stream.prefetch_depth, p.stream.tile_bytes) == (
        "weight_dram", "weight_fifo", 4, 64 * 1024)
    assert p.stream.bandwidth_bytes_per_s == 34e9


@pytest.mark.parametrize("key, value, expected", [
    ("chips.0.placement.parameters.memory", "ddr", "parameters.memory: no memory 'ddr'"),
    (f"{STREAM_KEY}.buffer", "fifo", "parameters.stream.buffer: no memory 'fifo'"),
    (f"{STREAM_KEY}.buffer", "weight_dram", "also the memory the class streams from"),
    (f"{STREAM_KEY}.tile_bytes", "128 KiB", "larger than buffer 'weight_fifo' (262144 bytes)"),
    (f"{STREAM_KEY}.prefetch_depth", 0, "prefetch_depth: expected a whole number from 1 to 1024 tiles (got 0)"),
    (f"{STREAM_KEY}.prefetch_depth", 10**6, "prefetch_depth: expected a whole number from 1 to 1024"),
    (f"{STREAM_KEY}.bandwidth_bytes_per_s", 0, "bandwidth_bytes_per_s"),
    (f"{STREAM_KEY}.bandwidth_bytes_per_s", -34e9, "bandwidth_bytes_per_s"),
    (f"{STREAM_KEY}.bandwidth_bytes_per_s", "inf", "bandwidth_bytes_per_s"),
    (f"{STREAM_KEY}.bandwidth_bytes_per_s", float("nan"), "bandwidth_bytes_per_s"),
])
def test_a_bad_placement_is_refused_in_one_paragraph_naming_its_key(key, value, expected):
    with pytest.raises(A.AccelsimError) as e:
        A.load_hw("tpu_v1_like", overrides={key: value})
    message = str(e.value)
    assert expected in message and "chips[0].placement" in message
    assert "Traceback" not in message


def test_a_buffer_off_chip_and_a_second_bandwidth_are_refused():
    d = tpu_dict()
    d["chips"][0]["memories"].append({"name": "ddr2", "kind": "dram", "capacity_bytes": "1 GiB",
                                      "bandwidth_bytes_per_s": "10 GB/s"})
    d["chips"][0]["placement"]["parameters"]["stream"]["buffer"] = "ddr2"
    with pytest.raises(A.AccelsimError, match="memory 'ddr2' is dram, expected an on-chip memory"):
        A.load_hw(d)
    d = tpu_dict()
    d["chips"][0]["placement"]["parameters"]["stream"]["bandwidth_bytes_per_cycle"] = 48
    with pytest.raises(A.AccelsimError, match="give exactly one of bandwidth_bytes_per_cycle and bandwidth_bytes_per_s"):
        A.load_hw(d)


# --- streaming: time, energy, simulation --------------------------------------------------------------------

def test_streaming_makes_a_weight_heavy_step_slower(streamed_and_resident):
    _, runs = streamed_and_resident
    assert runs["streamed"][2].makespan_cycles > runs["resident"][2].makespan_cycles
    assert any(t.kind == "prefetch" for t in runs["streamed"][1].tasks)
    assert not any(t.kind == "prefetch" for t in runs["resident"][1].tasks)


def test_every_weight_read_is_charged_at_the_dram_it_streams_from(streamed_and_resident):
    """Each task reading a weight moves it from DDR3 once (its prefetches the staged tiles, it the rest): the
    DRAM reads in the timeline energy are the weights' placed bytes times their readers."""
    g, runs = streamed_and_resident
    _, s, res = runs["streamed"]
    size = {x.node: x.size_bytes for x in s.tensors if x.task < 0 and g.nodes[x.node].op == "param"}
    readers = [(node, t) for t in s.tasks if t.kind == "node" for node, _ in t.reads if node in size]
    dram = {i.kind: i for i in res.energy.items if i.name == "chip0:weight_dram"}
    assert dram["memory_read"].quantity == sum(size[node] for node, _ in readers)
    _, _, plain = runs["resident"]
    assert not any(i.name == "chip0:weight_dram" and i.kind == "memory_read" for i in plain.energy.items)
    assert res.energy.off_chip_pj > plain.energy.off_chip_pj


def test_a_prefetch_writes_its_tile_into_the_weight_fifo(streamed_and_resident):
    _, runs = streamed_and_resident
    _, s, res = runs["streamed"]
    moved = sum(t.bytes_moved for t in s.tasks if t.kind == "prefetch")
    fifo = {i.kind: i.quantity for i in res.energy.items if i.name == "chip0:weight_fifo"}
    assert fifo["memory_write"] == moved and fifo["memory_read"] == moved


def test_static_replay_of_a_streamed_schedule_is_the_compiled_timeline(streamed_and_resident):
    _, runs = streamed_and_resident
    _, s, res = runs["streamed"]
    assert res.makespan_cycles == s.makespan_cycles
    assert [(sp.start, sp.end) for sp in res.spans] == [(t.start, t.end) for t in s.tasks]


def test_deeper_prefetch_hides_more_of_a_weight_stream_behind_earlier_work():
    g = warm_then_weights()
    makespans = [A.compile(g, A.load_hw("tpu_v1_like", overrides={f"{STREAM_KEY}.prefetch_depth": d})).makespan_cycles
                 for d in (1, 2, 3, 4)]
    assert all(a >= b for a, b in zip(makespans, makespans[1:])), makespans
    assert makespans[-1] < makespans[0]


def test_a_late_prefetch_stalls_its_reader_in_the_simulation():
    g = warm_then_weights(relus=0)
    hw = A.load_hw("tpu_v1_like")
    s = A.compile(g, hw)
    reader = next(t for t in s.tasks if t.kind == "node" and t.op == "matmul")
    last = max((s.tasks[a] for a in reader.after), key=lambda t: t.end)
    late = 5000
    tasks = list(s.tasks)
    tasks[last.id] = last.model_copy(update={"end": last.end + late})  # its DMA stream takes longer than planned
    res = replay(s.model_copy(update={"tasks": tuple(tasks)}), hw)
    span = res.spans[reader.id]
    assert span.start == reader.start + late
    assert dict(span.stalls)["data"] == late
    assert res.makespan_cycles == s.makespan_cycles + late


def test_the_dynamic_runtime_waits_for_prefetches_too():
    g = warm_then_weights(relus=0)
    hw = A.load_hw("tpu_v1_like")
    s = A.compile(g, hw)
    res = A.simulate(s, hw, mode="dynamic", graph=g)
    reader = next(t for t in s.tasks if t.kind == "node" and t.op == "matmul")
    assert res.spans[reader.id].start >= max(res.spans[a].end for a in reader.after)


# --- numbers do not change with placement ------------------------------------------------------------------

@pytest.mark.parametrize("classes", [("parameters",), ("parameters", "optimizer_state")])
def test_check_passes_on_a_streamed_training_step(classes, tmp_path):
    d = tpu_dict()
    stream = d["chips"][0]["placement"]["parameters"]
    d["chips"][0]["memories"].append({"name": "state_fifo", "kind": "sram", "capacity_bytes": "256 KiB",
                                      "bandwidth_bytes_per_cycle": 256})
    if "optimizer_state" in classes:
        d["chips"][0]["placement"]["optimizer_state"] = {**stream, "stream": {**stream["stream"], "buffer": "state_fifo"}}
    hw = A.load_hw(d)
    g = A.training_graph(A.models.build("mlp", batch=8, sizes=(64, 128, 32)), optimizer="adam", lr=0.01)
    s = A.compile(g, hw, microbatches=2)
    staged = {g.nodes[t.node].name for t in s.tasks if t.kind == "prefetch"}
    assert "fc1.w" in staged and ("fc1.w.adam_m" in staged) == ("optimizer_state" in classes)
    assert A.check(s, backend="numpy", graph=g, hw=hw).passed
    path = tmp_path / "s.json"
    save_schedule(s, path)  # and the schedule reloads (validated again) against the same hardware
    assert A.load_schedule(path, g, hw).tasks == s.tasks


def test_placed_parameters_live_in_their_memory():
    g = weight_heavy()
    s = A.compile(g, A.load_hw("tpu_v1_like"))
    params = [x for x in s.tensors if x.task < 0 and g.nodes[x.node].op == "param"]
    assert params and {x.memory for x in params} == {"weight_dram"}
    staged = [x for x in s.tensors if x.task >= 0 and s.tasks[x.task].kind == "prefetch"]
    assert staged and {x.memory for x in staged} == {"weight_fifo"}
    assert all(x.size_bytes == aligned(64 * 1024) for x in staged)


def two_streamed_tpus() -> A.HwSpec:
    d = tpu_dict()
    d["chips"][0]["count"] = 2
    d["interconnect"] = {"topology": "ring", "bandwidth_bytes_per_s": "10 GB/s"}
    return A.load_hw(d)


@pytest.mark.parametrize("step", [dict(microbatches=4), dict(data_parallel=2), dict(pipeline_stages=2, microbatches=4),
                                  dict(pipeline_stages=2, microbatches=4, pipeline_schedule="1f1b"),
                                  dict(data_parallel=2, zero=1), dict(data_parallel=2, zero=3)],
                         ids=["microbatches", "data_parallel", "gpipe", "1f1b", "zero1", "zero3"])
def test_streamed_steps_of_every_parallel_shape_replay_and_check(step):
    """ZeRO-3 reads its parameters all-gathered from their shards (which live in DDR3), so nothing is prefetched."""
    hw = two_streamed_tpus()
    g = A.training_graph(A.models.build("mlp", batch=8, sizes=(64, 128, 32)), optimizer="sgd", lr=0.01)
    s = A.compile(g, hw, **step)
    assert any(t.kind == "prefetch" for t in s.tasks) == (step.get("zero") != 3)
    assert A.simulate(s, hw, graph=g).makespan_cycles == s.makespan_cycles
    assert A.check(s, backend="numpy", graph=g, hw=hw).passed
