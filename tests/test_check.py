"""Compiled schedules executed on real numbers (through their memory placements) match the reference."""
import functools
import json
import math
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import accelsim as A
from accelsim import ops as F
from accelsim.cli import main
from accelsim.execute import check
from accelsim.models.sizes import SMALL, TINY
from accelsim.passes import inference_graph
from accelsim.compiler.timing import list_sched
from accelsim.schedule.plan import graph_hash

HWCONFIGS = sorted(p.stem for p in (Path(__file__).resolve().parent.parent / "hwconfigs").glob("*.yaml"))
BACKEND = "numba"
CASES = [(hw, m) for hw in HWCONFIGS for m in SMALL if hw != "bespoke_superres" or m == "superres"]
check_module = sys.modules["accelsim.execute.check"]  # the package re-exports the function by that name


@functools.cache
def _small_training_graph(model: str) -> A.Graph:
    """One training graph per model for every hardware's case: compiling reads a graph and never changes it."""
    return A.training_graph(A.models.build(model, **SMALL[model]), optimizer="momentum", lr=0.05)


_REFERENCES: dict[tuple, dict] = {}


@pytest.fixture
def shared_references(monkeypatch):
    """check's numpy and float64 references are a function of the graph, the step's micro-batches and replicas
    and the dtype (execute/check.py: `reference`), not of the hardware: the hardware cases of one model
    compute them once. Keyed by the graph's hash (what a schedule names its graph by), so a graph that
    changed would get its own."""
    real = check_module.reference

    def once(schedule, graph, dtype=None):
        key = (graph_hash(graph), schedule.options.microbatches, schedule.options.data_parallel, dtype)
        if key not in _REFERENCES:
            _REFERENCES[key] = real(schedule, graph, dtype)
        return _REFERENCES[key]

    monkeypatch.setattr(check_module, "reference", once)


@pytest.mark.parametrize("hw_name, model", CASES)
def test_training_step_with_microbatches_and_replicas_matches_the_reference(hw_name, model, shared_references):
    hw = A.load_hw(hw_name)
    graph = _small_training_graph(model)
    sched = A.compile(graph, hw, microbatches=2, data_parallel=2)
    report = check(sched, BACKEND, graph=graph, hw=hw)
    assert report.passed, [e for e in report.entries if not e.passed] or report.corruptions
    assert "loss" in {e.name for e in report.entries}
    if any(n.trainable for n in graph.params):
        assert any(e.name.startswith("step mean of") for e in report.entries)


@pytest.mark.parametrize("hw_name", ["groq_like_x4", "bespoke_superres"])
def test_pipelined_inference_matches_the_reference(hw_name):
    hw = A.load_hw(hw_name)
    graph = inference_graph(A.models.build("superres", size=12))
    stages = 2 if hw.n_chips > 1 else 1
    report = check(A.compile(graph, hw, microbatches=3, pipeline_stages=stages), BACKEND, graph=graph, hw=hw)
    assert report.passed and [e.name for e in report.entries] == ["y"]


def test_a_live_interval_cut_short_corrupts_a_tensor_and_check_names_it(monkeypatch):
    """A planner bug: free every ReLU output as soon as it is produced, so the next tensor reuses its
    bytes while the ReLU's readers (the next conv, and relu_grad in the backward pass) still need it."""
    hw = A.load_hw("groq_like")
    graph = A.training_graph(A.models.build("superres", size=12))
    original = list_sched.MemoryPlanner.free

    def early_free(self, key, end):
        if key[0] == "out" and self.owner.get(key[1]) == "relu":
            block = self.home[key]
            end = block.start + 1
        original(self, key, end)

    monkeypatch.setattr(list_sched.MemoryPlanner, "free", early_free)
    monkeypatch.setattr(list_sched.MemoryPlanner, "owner", {}, raising=False)
    from accelsim.compiler.planning.expand import expand
    from accelsim.schedule.options import StepOptions
    for t in expand(graph, hw, StepOptions()).tasks:
        list_sched.MemoryPlanner.owner[t.id] = t.op
    sched = A.compile(graph, hw, validate=False)
    with pytest.raises(A.ScheduleError):
        A.validate_schedule(sched, graph)
    report = check(sched, BACKEND, graph=graph, hw=hw)
    assert not report.passed
    assert any("relu" in c and "overwritten before" in c for c in report.corruptions)


def test_a_kernel_off_by_a_few_ulps_too_many_fails_the_float32_check(monkeypatch):
    """The float32 tolerance follows numpy's own rounding: a matmul kernel 3e-4 relative off (loose
    next to float32's 6e-8 epsilon, but tight next to a fixed 1e-3 tolerance) must fail, and an
    exact copy of the reference must pass."""
    from accelsim.kernels.registry import KERNELS, load_backend

    load_backend("numba")
    hw = A.load_hw("groq_like")
    graph = A.training_graph(A.models.build("mlp", **SMALL["mlp"]), optimizer="momentum", lr=0.05)
    sched = A.compile(graph, hw, microbatches=2, data_parallel=2)
    exact = A.ops.get_op("matmul").ref
    monkeypatch.setitem(KERNELS["numba"], "matmul", lambda a, b, **kw: exact(a, b, **kw))
    assert check(sched, BACKEND, graph=graph, hw=hw).passed
    monkeypatch.setitem(KERNELS["numba"], "matmul", lambda a, b, **kw: (exact(a, b, **kw) * (1 + 3e-4)).astype(a.dtype))
    report = check(sched, BACKEND, graph=graph, hw=hw)
    assert not report.passed and "logits" in {e.name for e in report.entries if not e.passed}


MLP = {"batch": 4, "sizes": (16, 8, 4)}
LOGITS_SHAPE = (4, 4)


def _poison_the_logits(monkeypatch):
    """The numba add kernel writes NaN at logits[1, 3] (the only add with the logits' shape)."""
    from accelsim.kernels.registry import KERNELS, load_backend

    add = load_backend("numba")["add"]

    def poisoned(a, b, **attrs):
        out = add(a, b, **attrs)
        if out.shape == LOGITS_SHAPE:
            out = out.copy()
            out[1, 3] = np.nan
        return out

    monkeypatch.setitem(KERNELS["numba"], "add", poisoned)


def test_a_kernel_that_writes_one_nan_fails_the_check_naming_the_tensor_and_index(monkeypatch):
    _poison_the_logits(monkeypatch)
    hw = A.load_hw("groq_like")
    graph = A.training_graph(A.models.build("mlp", **MLP), optimizer="momentum", lr=0.05)
    report = check(A.compile(graph, hw, microbatches=2), BACKEND, graph=graph, hw=hw)
    assert not report.passed
    logits = next(e for e in report.entries if e.name == "logits")
    assert not logits.passed and logits.max_rel_err == math.inf and logits.max_abs_err == math.inf
    assert logits.mismatch.index == (1, 3) and math.isnan(logits.mismatch.got)
    assert math.isfinite(logits.mismatch.expected)
    assert logits.failure.startswith("logits (micro-batch 0, replica 0): index (1, 3) is nan, expected ")
    assert logits.failure in report.failures
    assert not next(e for e in report.entries if e.name == "loss").passed  # the NaN flows on
    payload = json.loads(json.dumps(report.to_json(), allow_nan=False))  # plain JSON: no NaN literals
    assert payload["passed"] is False and logits.failure in payload["failures"]
    entry = next(e for e in payload["entries"] if e["name"] == "logits")
    assert entry["mismatch"]["index"] == [1, 3] and entry["mismatch"]["got"] == "nan"


def test_check_cli_fails_on_a_kernel_that_writes_one_nan(monkeypatch, tmp_path, capsys):
    _poison_the_logits(monkeypatch)
    code = main(["check", "--hw", "groq_like", "--model", "mlp", "--batch", "4", "--set", "sizes=16,8,4",
                 "--backend", "numba", "--json", str(tmp_path / "c.json")])
    out = capsys.readouterr().out
    assert code == 1 and "FAILED" in out and "logits" in out and "check passed" not in out
    report = json.loads((tmp_path / "c.json").read_text())
    assert report["passed"] is False
    assert any(f.startswith("logits (micro-batch 0, replica 0): index (1, 3) is nan") for f in report["failures"])


def _nan_weight_graph():
    """y = x @ w with every w NaN: the reference itself is non-finite, so nothing can be vouched for."""
    g = A.Graph("nan_leaf", dtype="float32")
    x = g.input("x", (4, 3), init="uniform")
    w = g.param("w", (3, 2), init="full", value=float("nan"))
    y = F.matmul(x, w)
    g.output("y", y)
    g.set_loss(F.mse_loss(y, g.input("target", (4, 2))))
    return g


def test_a_nan_leaf_fails_the_check_because_the_reference_is_non_finite():
    hw = A.load_hw("groq_like")
    graph = _nan_weight_graph()
    for g in (graph, A.training_graph(graph, optimizer="sgd", lr=0.05)):
        report = check(A.compile(g, hw, microbatches=2, data_parallel=2), BACKEND, graph=g, hw=hw)
        assert not report.passed, g.name
        y = next(e for e in report.entries if e.name == "y")
        assert y.mismatch.reason == "reference non-finite" and y.mismatch.index == (0, 0)
        assert "y (micro-batch 0, replica 0): the reference itself is non-finite" in y.failure
        assert all(not e.passed for e in report.entries), [e.failure for e in report.entries]


def test_a_missing_value_fails_the_check_instead_of_being_skipped(monkeypatch):
    """An executed step that never produced a tensor must not pass by having nothing to compare."""
    real = check_module.execute

    def forgets_the_logits(*args):
        result = real(*args)
        result.outputs = {k: v for k, v in result.outputs.items() if k[0] != "logits"}
        return result

    monkeypatch.setattr(check_module, "execute", forgets_the_logits)
    hw = A.load_hw("groq_like")
    graph = A.training_graph(A.models.build("mlp", **MLP))
    report = check(A.compile(graph, hw), BACKEND, graph=graph, hw=hw)
    assert not report.passed
    assert report.failures == ("logits: micro-batch 0, replica 0: the executed step produced no value",)


def test_check_cli_passes_and_asking_for_cuda_without_a_gpu_or_simulator_is_a_clear_error(tmp_path):
    env = {**os.environ, "NUMBA_ENABLE_CUDASIM": "0"}
    ok = subprocess.run([sys.executable, "-m", "accelsim.cli", "check", "--hw", "groq_like", "--model", "mlp",
                         "--batch", "2", "--backend", "numpy", "--json", str(tmp_path / "c.json")],
                        capture_output=True, text=True, env=env)
    assert ok.returncode == 0 and "check passed" in ok.stdout
    cuda = subprocess.run([sys.executable, "-m", "accelsim.cli", "check", "--hw", "groq_like", "--model", "mlp",
                           "--batch", "2", "--backend", "cuda"], capture_output=True, text=True, env=env)
    gpu = subprocess.run([sys.executable, "-c", "from numba import cuda; print(cuda.is_available())"],
                         capture_output=True, text=True, env=env).stdout.strip() == "True"
    if gpu:  # on a machine with a GPU the same command runs the kernels there and passes
        assert cuda.returncode == 0 and "check passed" in cuda.stdout, cuda.stderr
    else:
        assert cuda.returncode == 1
        assert "no CUDA GPU is available" in cuda.stderr and "Traceback" not in cuda.stderr


CUDA_STEP_COPIES = {"mlp": (2, 2), "regression": (2, 2)}
"""(micro-batches, replicas) of the step each model runs under the CUDA simulator; one of each elsewhere. The
simulator's cost is per element of every task, and micro-batches and replicas repeat the same kernels on the same
shapes: what they add is the accumulate and all-reduce tasks (the add kernel on gradients), which these two
models run on cuda (asserted below). The numba test above runs every model with two of each."""


@pytest.mark.parametrize("model", sorted(m for m in TINY if m != "resnet50"))
def test_cuda_kernels_run_the_scheduled_step_under_the_simulator(model):
    """tests/conftest.py switches numba's CUDA simulator on. resnet50 is left to
    experiments/check_matrix.py (its 1,800 nodes take ~10 min in the simulator; seconds on a GPU)."""
    hw = A.load_hw("groq_like_x4")
    graph = A.training_graph(A.models.build(model, **TINY[model]), optimizer="momentum", lr=0.05)
    microbatches, replicas = CUDA_STEP_COPIES.get(model, (1, 1))
    sched = A.compile(graph, hw, microbatches=microbatches, data_parallel=replicas)
    if model in CUDA_STEP_COPIES:
        assert {"accumulate", "allreduce"} <= {t.kind for t in sched.tasks}
    report = check(sched, "cuda", graph=graph, hw=hw)
    assert report.passed, [e for e in report.entries if not e.passed]
    assert report.backend == "cuda"
