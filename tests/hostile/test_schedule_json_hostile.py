"""Tampered schedule files: each is refused by `accelsim simulate FILE` (exit 1, naming the file and what is
wrong) and by the Python API (`A.load_schedule(FILE)`, or `A.simulate` of what it returned, raises
AccelsimError); never a traceback, never a simulated result from corrupted data. The same tampering applied
to a Schedule object (no file, no loader) is refused by `A.simulate` and `A.check`.

Each case starts from the shipped schedules/superres_train_groq_like.json, changes one thing and writes the
result to tmp_path. If the shipped file is stale (an older format the loader refuses), the cases start from
a fresh compile of the same step instead, and test_shipped_schedule_is_the_base says so.
"""
from __future__ import annotations

import copy
import json
import random
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterator

import pytest

import accelsim as A

pytestmark = pytest.mark.timeout(300)  # a hang guard, not a speed limit: see tests/conftest.py
# Python steps (tests/work_meter.py) a refusal of a huge or deeply nested file may take: 90k from the command
# line, a few hundred from the API (the JSON parser is C); a Python loop over its 50 MiB takes 50M+.
REFUSE_STEPS = 1_000_000

REPO = Path(__file__).resolve().parents[2]
SHIPPED = REPO / "schedules" / "superres_train_groq_like.json"
HW = "groq_like"
FILE = "tampered.json"


@pytest.fixture(scope="session")
def base_schedule(tmp_path_factory) -> dict[str, Any]:
    """The shipped schedule as parsed JSON, or (if the loader refuses it as stale) a fresh compile of the
    same step: superres, defaults, sgd at lr 0.01, on groq_like."""
    try:
        A.load_schedule(SHIPPED, hw=A.load_hw(HW))
        return json.loads(SHIPPED.read_text())
    except A.AccelsimError:
        fwd = A.models.build("superres")
        sched = A.compile(A.training_graph(fwd, optimizer="sgd", lr=0.01), A.load_hw(HW))
        path = tmp_path_factory.mktemp("base") / "fresh.json"
        A.save_schedule(sched, path)
        return json.loads(path.read_text())


# -- finding the parts a tamper edits (works on either schedule format) ------------------------------------
def task_with_deps(d: dict) -> dict:
    return next(t for t in d["tasks"] if len(t["deps"]) >= 2)


def task_on(d: dict, resource: str) -> dict:
    return next(t for t in d["tasks"] if t["resource"] == resource)


def input_tensor(d: dict) -> dict:
    """A leaf input (task -1, a real micro-batch) live from cycle 0."""
    return next(x for x in d["tensors"] if x["task"] == -1 and x["microbatch"] >= 0)


def produced_tensor(d: dict) -> dict:
    """A tensor produced by a task, live while the input above is live, in the same memory."""
    x_in = input_tensor(d)
    return next(x for x in d["tensors"] if x["task"] >= 0 and x["memory"] == x_in["memory"]
                and x["start"] < x_in["end"] and x_in["start"] < x["end"] and x["size_bytes"] > 64)


def set_peak(d: dict, value: int) -> None:
    if "memories" in d:
        d["memories"][0]["peak_bytes"] = value
    else:
        key = next(iter(d["peak_memory_bytes"]))
        d["peak_memory_bytes"][key] = value


def set_capacity(d: dict, value: int) -> None:
    if "memories" in d:
        d["memories"][0]["capacity_bytes"] = value
    else:
        key = next(iter(d["memory_capacity_bytes"]))
        d["memory_capacity_bytes"][key] = value


def unknown_memory(d: dict) -> None:
    x = produced_tensor(d)
    x["memory"] = "nowhere" if "chip" in x else x["memory"].split(":")[0] + ":nowhere"


# -- the cases ---------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Tamper:
    edit: Callable[[dict], Any]  # edits the parsed schedule in place, or returns a replacement (text or data)
    words: tuple  # what the refusal must mention (each a word or a tuple of alternatives)
    api_strict: bool = True  # False: the API alone cannot know (it has no graph); only the CLI must refuse
    max_steps: int | None = None  # a budget of Python steps for the refusal
    file_only: bool = False  # a fact about the file (its format version), not about an in-memory Schedule


def _set(path: str, value: Any) -> Callable[[dict], None]:
    """An edit setting one value by a dotted path with integer list indices: "tasks.3.start"."""
    def edit(d: dict) -> None:
        *parents, last = path.split(".")
        obj: Any = d
        for p in parents:
            obj = obj[int(p)] if isinstance(obj, list) else obj[p]
        if isinstance(obj, list):
            obj[int(last)] = value
        else:
            obj[last] = value
    return edit


def _each_task(**fields: Any) -> Callable[[dict], None]:
    def edit(d: dict) -> None:
        for t in d["tasks"]:
            t.update(fields)
    return edit


def _drop_one_dep(d: dict) -> None:
    task_with_deps(d)["deps"] = task_with_deps(d)["deps"][1:]


def _dep_on_itself(d: dict) -> None:
    t = task_with_deps(d)
    t["deps"] = [*t["deps"], t["id"]]


def _cycle(d: dict) -> None:
    t = task_with_deps(d)
    dep = d["tasks"][t["deps"][0]]
    dep["deps"] = [*dep["deps"], t["id"]]


def _negative_offset(d: dict) -> None:
    produced_tensor(d)["offset"] = -4096


def _offset_minus_infinity(d: dict) -> str:
    produced_tensor(d)["offset"] = -float("inf")
    return json.dumps(d)


def _one_byte(d: dict) -> None:
    produced_tensor(d)["size_bytes"] = 1


def _over_live_input(d: dict) -> None:
    produced_tensor(d)["offset"] = input_tensor(d)["offset"]


def _makespan(d: dict) -> None:
    d["makespan_cycles"] = d["makespan_cycles"] * 7118


def _reverse(d: dict) -> None:
    d["tasks"] = d["tasks"][::-1]


def _reverse_renumbered(d: dict) -> None:
    """Reversed and renumbered consistently: every dependence now points forward in time."""
    n = len(d["tasks"])
    d["tasks"] = d["tasks"][::-1]
    for pos, t in enumerate(d["tasks"]):
        t["id"] = pos
        t["deps"] = [n - 1 - k for k in t["deps"]]
    for x in d["tensors"]:
        if x["task"] >= 0:
            x["task"] = n - 1 - x["task"]


def _swap_two(d: dict) -> None:
    d["tasks"][1], d["tasks"][2] = d["tasks"][2], d["tasks"][1]


def _duplicate_id(d: dict) -> None:
    d["tasks"][3]["id"] = d["tasks"][2]["id"]


def _duplicate_task(d: dict) -> None:
    d["tasks"].append(copy.deepcopy(d["tasks"][-1]))


def _duplicate_tensor(d: dict) -> None:
    d["tensors"].append(copy.deepcopy(produced_tensor(d)))


def _start_after_end(d: dict) -> None:
    t = d["tasks"][4]
    t["start"], t["end"] = t["end"] + 10, t["start"]


def _end_huge(d: dict) -> None:
    d["tasks"][-1]["end"] = 10**20
    d["makespan_cycles"] = 10**20


def _tensor_end_before_start(d: dict) -> None:
    x = produced_tensor(d)
    x["start"], x["end"] = x["end"], x["start"]


def _needs(key: str, edit: Callable[[dict], Any]) -> Callable[[dict], Any]:
    """An edit of a field only some schedule formats have (a task field, or a top-level one)."""
    def guarded(d: dict) -> Any:
        if key not in d["tasks"][0] and key not in d:
            pytest.skip(f"this schedule format has no {key!r}")
        return edit(d)
    return guarded


def _bytes_x1000(d: dict) -> None:
    task_on(d, "mxm")["bytes_moved"] *= 1000


def _halve_duration(d: dict) -> None:
    t = task_on(d, "mxm")
    t["end"] = t["start"] + (t["end"] - t["start"]) // 2


def _producer_out_bytes(d: dict) -> None:
    d["tasks"][produced_tensor(d)["task"]]["out_bytes"] = 1


def _candidate_cycles(d: dict) -> None:
    t = task_on(d, "mxm")
    d["candidates"][t["candidates"]][0]["cycles"] = 1


def _other_hw_name(d: dict) -> None:
    d["hw_name"] = "tpu_v1_like"


def _nan_text(path: str) -> Callable[[dict], str]:
    def edit(d: dict) -> str:
        _set(path, float("nan"))(d)
        return json.dumps(d)
    return edit


def _inf_text(path: str, sign: float = 1.0) -> Callable[[dict], str]:
    def edit(d: dict) -> str:
        _set(path, sign * float("inf"))(d)
        return json.dumps(d)
    return edit


def _truncated(d: dict) -> str:
    text = json.dumps(d)
    return text[: len(text) // 2]


def _garbage_bytes(d: dict) -> bytes:
    return random.Random(0).randbytes(50 * 2**20)


def _garbage_ascii(d: dict) -> str:
    rng = random.Random(1)
    chunk = "".join(rng.choice("abcdefghij{}[]:,\"0123456789 \n") for _ in range(2**16))
    return chunk * (50 * 2**20 // len(chunk))


def _deep_nesting(d: dict) -> str:
    return '{"tasks": ' + "[" * 300_000 + "]" * 300_000 + "}"


TASK_ID = ("task",)

TAMPERS: dict[str, Tamper] = {
    # what was compiled for what
    "graph_hash_edited": Tamper(_set("graph_hash", "0" * 64), ("graph",), api_strict=False),
    "hw_hash_edited": Tamper(_set("hw_hash", "0" * 64), (("hardware", "hw"), "hash")),
    "hw_name_other": Tamper(_other_hw_name, ("tpu_v1_like",)),
    "clock_edited": Tamper(_set("clock_hz", 1.0), ("clock",)),
    "clock_zero": Tamper(_set("clock_hz", 0.0), ("clock",)),
    "clock_negative": Tamper(_set("clock_hz", -9e8), ("clock",)),
    "clock_nan": Tamper(_nan_text("clock_hz"), (("clock", "nan"),)),
    "clock_infinity": Tamper(_inf_text("clock_hz"), (("clock", "infinity"),)),
    "version_99": Tamper(_set("version", 99), ("version",), file_only=True),
    "version_string": Tamper(_set("version", "1"), ("version",)),
    # dependences
    "all_deps_removed": Tamper(_each_task(deps=[]), (TASK_ID, ("depend", "needs", "input"))),
    "one_dep_removed": Tamper(_drop_one_dep, (TASK_ID, ("depend", "needs", "input"))),
    "dep_on_itself": Tamper(_dep_on_itself, (TASK_ID, ("itself", "depend", "cycle"))),
    "deps_form_cycle": Tamper(_cycle, (TASK_ID, ("cycle", "depend", "before"))),
    "dep_on_missing_task": Tamper(_set("tasks.5.deps", [999]), ("999",)),
    "dep_negative": Tamper(_set("tasks.5.deps", [-1]), ("-1",)),
    # tasks
    "no_tasks": Tamper(_set("tasks", []), ("task",)),
    "tasks_reversed": Tamper(_reverse, ("task",)),
    "tasks_reversed_renumbered": Tamper(_reverse_renumbered, ("task",)),
    "two_tasks_swapped": Tamper(_swap_two, ("task",)),
    "duplicate_task_id": Tamper(_duplicate_id, ("task",)),
    "duplicate_task": Tamper(_duplicate_task, ("task",)),
    "negative_start": Tamper(_set("tasks.3.start", -5), ("start",)),
    "start_after_end": Tamper(_start_after_end, ("start", "end")),
    "end_10e20": Tamper(_end_huge, (TASK_ID,)),
    "unknown_resource": Tamper(lambda d: task_on(d, "mxm").update(resource="warp_drive"), ("warp_drive",)),
    "instance_7_of_4": Tamper(lambda d: task_on(d, "mxm").update(instance=7), ("instance",)),
    "node_id_10e6": Tamper(_set("tasks.2.node", 10**6), ("1000000",)),
    "op_changed": Tamper(lambda d: task_on(d, "mxm").update(op="relu"), (TASK_ID, ("relu", "op"))),
    "unknown_kind": Tamper(_set("tasks.2.kind", "teleport"), ("kind",)),
    "unknown_phase": Tamper(_set("tasks.2.phase", "sideways"), ("phase",)),
    "chip_5_of_1": Tamper(_set("tasks.2.chip", 5), ("chip",)),
    "replica_3_of_1": Tamper(_set("tasks.2.replica", 3), ("replica",)),
    "microbatch_9_of_1": Tamper(_set("tasks.2.microbatch", 9), (("microbatch", "micro-batch"),)),
    "bytes_moved_negative": Tamper(_set("tasks.2.bytes_moved", -1), ("bytes_moved",)),
    "bytes_moved_x1000": Tamper(_bytes_x1000, (("port", "bytes_moved", "bandwidth"),)),
    "duration_halved": Tamper(_halve_duration, (TASK_ID, ("cycles", "takes", "needs", "lasts"))),
    "port_unknown": Tamper(lambda d: task_on(d, "mxm").update(port="nowhere"), ("nowhere",)),
    "phase_changed": Tamper(lambda d: d["tasks"][0].update(phase="backward"), (TASK_ID, "phase")),
    "stage_3_of_1": Tamper(_set("tasks.0.stage", 3), (TASK_ID, "stage")),
    "out_bytes_one": Tamper(_needs("out_bytes", _producer_out_bytes), (("bytes", "size"),)),
    "candidate_cycles_one": Tamper(_needs("candidates", _candidate_cycles), (TASK_ID,)),
    "keep_flag_set": Tamper(_needs("keep", lambda d: d["tasks"][0].update(keep=True)), (TASK_ID,)),
    "reads_missing_leaf": Tamper(_needs("reads", lambda d: d["tasks"][0].update(reads=[[999, 0]])), ("999",)),
    "start_is_string": Tamper(_set("tasks.2.start", "zero"), ("start",)),
    "start_fractional": Tamper(_set("tasks.2.start", 5054.5), ("start",)),
    "start_nan": Tamper(_nan_text("tasks.2.start"), (("start", "nan"),)),
    "end_infinity": Tamper(_inf_text("tasks.2.end"), (("end", "infinity"),)),
    "deps_is_int": Tamper(_set("tasks.2.deps", 3), ("deps",)),
    "task_is_list": Tamper(_set("tasks.2", [1, 2, 3]), ("tasks",)),
    "tasks_is_string": Tamper(_set("tasks", "all of them"), ("tasks",)),
    "task_unknown_key": Tamper(lambda d: d["tasks"][2].update(colour="red"), ("colour",)),
    # tensors
    "no_tensors": Tamper(_set("tensors", []), ("tensor",)),
    "negative_offset": Tamper(_negative_offset, ("offset",)),
    "offset_minus_infinity": Tamper(_offset_minus_infinity, (("offset", "infinity"),)),
    "one_byte_tensor": Tamper(_one_byte, (("size", "bytes"),)),
    "tensor_over_live_input": Tamper(_over_live_input, ("overlap",)),
    "duplicate_tensor": Tamper(_duplicate_tensor, (("overlap", "tensor", "twice", "duplicate"),)),
    "tensor_end_before_start": Tamper(_tensor_end_before_start, ("tensor",)),
    "tensor_unknown_memory": Tamper(unknown_memory, ("nowhere",)),
    "tensor_of_missing_task": Tamper(lambda d: produced_tensor(d).update(task=10**6), ("1000000",)),
    "tensors_is_int": Tamper(_set("tensors", 5), ("tensors",)),
    # totals
    "makespan_edited": Tamper(_makespan, ("makespan",)),
    "makespan_negative": Tamper(_set("makespan_cycles", -1), ("makespan",)),
    "makespan_infinity": Tamper(_inf_text("makespan_cycles"), (("makespan", "infinity"),)),
    "samples_per_step_10e6": Tamper(_set("samples_per_step", 10**6), ("samples_per_step",)),
    "samples_per_step_zero": Tamper(_set("samples_per_step", 0), ("samples_per_step",)),
    "peak_memory_edited": Tamper(lambda d: set_peak(d, 1), ("peak",)),
    # energy on hardware without energy figures: a number the reports would carry
    "task_energy_edited": Tamper(lambda d: d["tasks"][0].update(energy_pj=3.9e9), ("energy",)),
    "total_energy_edited": Tamper(lambda d: d.update(energy_pj=5.0), ("energy",)),
    # FLOPs: what TOPS/W is computed from
    "task_flops_edited": Tamper(lambda d: d["tasks"][0].update(flops=d["tasks"][0].get("flops", 0) + 1), ("flops",)),
    "task_flops_negative": Tamper(lambda d: d["tasks"][0].update(flops=-1), ("flops",)),
    "capacity_inflated": Tamper(lambda d: set_capacity(d, 2**50), ("capacity",)),
    "bound_above_makespan": Tamper(lambda d: d["bounds"].update(bound_cycles=d["makespan_cycles"] + 1), ("bound",)),
    "bounds_nan": Tamper(_nan_text("bounds.bound_cycles"), (("bound", "nan"),)),
    "microbatches_zero": Tamper(lambda d: d["options"].update(microbatches=0), ("microbatches",)),
    "data_parallel_10e6": Tamper(lambda d: d["options"].update(data_parallel=10**6),
                                 (("data_parallel", "samples_per_step", "replica"),)),
    "options_is_list": Tamper(_set("options", []), ("options",)),
    "training_is_string": Tamper(_set("training", "yes"), ("training",)),
    "training_flag_flipped": Tamper(_set("training", False), ("training",)),
    "bound_resource_renamed": Tamper(lambda d: d["bounds"].update(resource="warp_drive"), ("bound",)),
    "critical_path_edited": Tamper(lambda d: d["bounds"].update(critical_path_cycles=1), (("bound", "critical"),)),
    "missing_tasks_key": Tamper(lambda d: d.pop("tasks"), ("tasks",)),
    "unknown_top_level_key": Tamper(lambda d: d.update(colour="red"), ("colour",)),
    # not a schedule at all
    "truncated_json": Tamper(_truncated, ("json",)),
    "json_list": Tamper(lambda d: [d], (("object", "mapping", "list"),)),
    "json_null": Tamper(lambda d: "null", (("object", "mapping", "none", "null"),)),
    "json_number": Tamper(lambda d: "42", (("object", "mapping", "int"),)),
    "empty_file": Tamper(lambda d: "", ("json",)),
    "deep_nesting_300k": Tamper(_deep_nesting, (("json", "deep", "nest"),), max_steps=REFUSE_STEPS),
    "garbage_50mb_binary": Tamper(_garbage_bytes, (("utf-8", "json", "large", "limit"),), max_steps=REFUSE_STEPS),
    "garbage_50mb_ascii": Tamper(_garbage_ascii, (("json", "large", "limit"),), max_steps=REFUSE_STEPS),
}


def write_tampered(base: dict, hostile, name: str) -> Path:
    data = copy.deepcopy(base)
    out = TAMPERS[name].edit(data)
    if out is None:
        out = data
    return hostile.write(FILE, out if isinstance(out, (str, bytes)) else json.dumps(out))


@pytest.mark.parametrize("name", sorted(TAMPERS))
def test_cli_simulate_refuses_tampered_schedule(name, base_schedule, hostile):
    case = TAMPERS[name]
    path = write_tampered(base_schedule, hostile, name)
    hostile.cli_refuses(["simulate", str(path), "--out", str(hostile.tmp / "plots")], FILE, *case.words,
                        codes=(1,), max_steps=case.max_steps)


@pytest.mark.parametrize("name", sorted(TAMPERS))
def test_api_load_or_simulate_refuses_tampered_schedule(name, base_schedule, hostile):
    case = TAMPERS[name]
    path = write_tampered(base_schedule, hostile, name)
    hw = A.load_hw(HW)
    try:
        schedule = A.load_schedule(path)
    except A.AccelsimError as e:  # refused on reading: the message names the file too
        hostile.names(str(e), FILE, *case.words)
        return
    if case.api_strict:
        hostile.refuses(lambda: A.simulate(schedule, hw), *case.words)
    else:
        hostile.ok_or_refuses(lambda: A.simulate(schedule, hw), *case.words)


def tampered_object(name: str) -> A.Schedule | None:
    """The tampered shipped schedule as a Schedule object built by its schema alone (no loader, no
    validator), as a script gets one from `model_copy(update=...)`; None where there is no such object
    (a fact about the file, a text-level tamper, or one the schema itself refuses)."""
    if TAMPERS[name].file_only:
        return None
    data = json.loads(SHIPPED.read_text())
    try:
        out = TAMPERS[name].edit(data)
    except pytest.skip.Exception:
        return None
    if out is not None and not isinstance(out, (dict, list)):
        return None
    try:
        return A.Schedule.model_validate_json(json.dumps(data if out is None else out))
    except ValueError:  # pydantic's ValidationError: the object cannot exist
        return None


OBJECT_TAMPERS = sorted(name for name in TAMPERS if tampered_object(name) is not None)
"""The tampers that still make a Schedule object (the others are tested through files above)."""


def test_most_tampers_also_make_schedule_objects():
    assert len(OBJECT_TAMPERS) >= 40


@pytest.fixture(scope="module")
def shipped_graph() -> Iterator[A.Graph]:
    """The training step the shipped schedule was compiled from, built once for the tests that share it (and
    checked unchanged after them)."""
    graph = A.training_graph(A.models.build("superres"), optimizer="sgd", lr=0.01)
    listing = graph.dump()
    yield graph
    assert graph.dump() == listing, "a test changed the shared graph"


@pytest.mark.parametrize("name", OBJECT_TAMPERS)
def test_api_simulate_and_check_validate_a_tampered_schedule_object(name, hostile, shipped_graph):
    """Issue 10: every schedule passed to simulate/check is validated first, not only one read from a file."""
    case = TAMPERS[name]
    schedule = tampered_object(name)
    hw = A.load_hw(HW)
    graph = shipped_graph
    if case.api_strict:
        hostile.refuses(lambda: A.simulate(schedule, hw), *case.words)
    else:
        hostile.ok_or_refuses(lambda: A.simulate(schedule, hw), *case.words)
    hostile.refuses(lambda: A.check(schedule, backend="numpy", graph=graph, hw=hw), *case.words)


def test_api_refuses_schedule_with_edited_graph_hash_given_the_graph(base_schedule, hostile, shipped_graph):
    path = write_tampered(base_schedule, hostile, "graph_hash_edited")
    hostile.refuses(lambda: A.load_schedule(path, graph=shipped_graph), "graph", "hash")


def test_api_big_garbage_is_refused_after_little_work(base_schedule, hostile):
    path = write_tampered(base_schedule, hostile, "garbage_50mb_ascii")
    hostile.refuses(lambda: A.load_schedule(path), FILE, max_steps=REFUSE_STEPS)


def test_schedule_loaded_for_other_hw_is_refused_by_simulate(base_schedule, hostile):
    """Issue 10: `A.simulate(schedule, other_hw)` refuses the mismatch as the CLI does."""
    path = hostile.write_json("ok.json", base_schedule)
    schedule = A.load_schedule(path)
    hostile.refuses(lambda: A.simulate(schedule, A.load_hw("tpu_v1_like")), "tpu_v1_like")
    hostile.refuses(lambda: A.simulate(schedule, A.load_hw("groq_like_x4")), "groq_like_x4")


def test_untampered_base_simulates_on_both_surfaces(base_schedule, hostile):
    path = hostile.write_json("ok.json", base_schedule)
    res = A.simulate(A.load_schedule(path), A.load_hw(HW))
    assert res.makespan_cycles == base_schedule["makespan_cycles"]
    run = hostile.cli_ok(["simulate", str(path), "--out", str(hostile.tmp / "plots")])
    assert "1.000x" in run.out


def test_dynamic_simulate_of_schedule_with_unknown_source_model_is_refused(base_schedule, hostile):
    data = copy.deepcopy(base_schedule)
    data["source"]["model"] = "nope_model"
    path = hostile.write_json(FILE, data)
    hostile.cli_refuses(["simulate", str(path), "--dynamic", "--out", str(hostile.tmp / "plots")], FILE,
                        codes=(1,))


def test_shipped_schedule_is_the_base():
    """The shipped file loads against its hardware (a stale format makes the cases above start from a fresh
    compile; this test reports it)."""
    A.load_schedule(SHIPPED, hw=A.load_hw(HW))
